"""Keyspace and connection commands (engine.cmd_keyspace), mostly differential against the real
redis-server: the same argv on Engine() and on Redis, replies and error lines compared exactly.

Where the local oracle (7.0) and Redis 8.x differ (SCAN's cursor syntax), 8.x is asserted alone.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from streamkeep.engine.commands.keyspace import scan_position, stringmatchlen
from streamkeep.engine.runtime.core import Session
from tests.support.glob_reference import stringmatchlen as reference
from tests.support.resp_client import RespError


def outcome(target: Any, *argv: Any) -> tuple[str, Any]:
    try:
        return "ok", target.execute(*argv)
    except (ReplyError, RespError) as err:
        return "err", str(err)


def same(engine: Engine, redis: Any, *argv: Any) -> Any:
    """Run argv on both; assert identical replies (or error lines); return the reply."""
    ours, theirs = outcome(engine, *argv), outcome(redis, *argv)
    assert ours == theirs, argv
    return ours[1]


def add(engine: Engine, redis: Any, key: bytes | str, sid: str = "1-1") -> None:
    same(engine, redis, "XADD", key, sid, "f", "v")


@pytest.fixture
def engine() -> Engine:
    return Engine(clock=lambda: 1_700_000_000_123)


# --- DEL / UNLINK / EXISTS / TYPE / DBSIZE ---------------------------------------------------------


def test_del_unlink_exists_type_dbsize(engine, redis_raw):
    for key in ("a", "b", "c", "d"):
        add(engine, redis_raw, key)
    script = [
        ("EXISTS", "a"), ("EXISTS", "a", "a", "x", "b"), ("EXISTS", "x"),
        ("TYPE", "a"), ("TYPE", "x"), ("DBSIZE",),
        ("DEL", "a", "x", "a"), ("DEL", "a"), ("EXISTS", "a"), ("TYPE", "a"),
        ("UNLINK", "b", "c", "zz"), ("DBSIZE",), ("DEL", "d", "d"), ("DBSIZE",),
        ("DEL",), ("UNLINK",), ("EXISTS",), ("TYPE",), ("TYPE", "a", "b"),
        ("DBSIZE", "x"),
    ]
    for argv in script:
        same(engine, redis_raw, *argv)


def test_type_is_simple_string(engine):
    engine.execute("XADD", "s", "1-1", "f", "v")
    assert engine.execute("TYPE", "s") == "stream"
    assert isinstance(engine.execute("TYPE", "s"), str)
    assert engine.execute("TYPE", "nope") == "none"


def test_del_effects_name_only_existing_keys(engine):
    engine.execute("XADD", "a", "1-1", "f", "v")
    engine.execute("XADD", "b", "1-1", "f", "v")
    assert engine.execute_with_effects("DEL", "x", "a", "y", "a", "b") == (
        2, [[b"DEL", b"a", b"b"]]
    )
    assert engine.execute_with_effects("DEL", "a", "x") == (0, [])
    engine.execute("XADD", "c", "1-1", "f", "v")
    assert engine.execute_with_effects("UNLINK", "c", "q") == (1, [[b"DEL", b"c"]])


# --- SELECT --------------------------------------------------------------------------------------


def test_select_errors_and_isolation(engine, redis_raw):
    for arg in ("16", "-1", "abc", " 1", "1 ", "+1", "01", "99999999999", "-2147483649",
                "2147483647", "", "1.0"):
        same(engine, redis_raw, "SELECT", arg)
    same(engine, redis_raw, "SELECT")
    same(engine, redis_raw, "SELECT", "1", "2")
    add(engine, redis_raw, "k")
    same(engine, redis_raw, "SELECT", "3")
    same(engine, redis_raw, "EXISTS", "k")
    add(engine, redis_raw, "other")
    same(engine, redis_raw, "DBSIZE")
    same(engine, redis_raw, "SELECT", "0")
    same(engine, redis_raw, "KEYS", "*")
    same(engine, redis_raw, "SELECT", "15")
    same(engine, redis_raw, "DBSIZE")


def test_select_keeps_session(engine):
    assert engine.execute("SELECT", "2") == "OK"
    assert engine.session.db == 2
    engine.execute("XADD", "k", "1-1", "f", "v")
    assert b"k" in engine.dbs[2] and b"k" not in engine.dbs[0]
    rec = []
    engine.add_sink(rec.append)
    engine.execute("DEL", "k")
    assert rec[-1].db == 2 and rec[-1].effects == [[b"DEL", b"k"]]


# --- RENAME / RENAMENX ---------------------------------------------------------------------------


def test_rename_renamenx(engine, redis_raw):
    add(engine, redis_raw, "a")
    add(engine, redis_raw, "b", "2-2")
    script = [
        ("RENAME", "nokey", "x"), ("RENAMENX", "nokey", "x"),
        ("RENAME", "nokey", "nokey"), ("RENAMENX", "nokey", "nokey"),
        ("RENAME", "a", "a"), ("RENAMENX", "a", "a"),
        ("RENAMENX", "a", "b"), ("XRANGE", "b", "-", "+"),
        ("RENAME", "a", "b"), ("EXISTS", "a"), ("XRANGE", "b", "-", "+"),
        ("RENAMENX", "b", "c"), ("KEYS", "*"), ("RENAME", "c", "d"), ("KEYS", "*"),
        ("RENAME", "d"), ("RENAMENX", "d", "e", "f"),
    ]
    for argv in script:
        same(engine, redis_raw, *argv)


def test_rename_effects(engine):
    engine.execute("XADD", "a", "1-1", "f", "v")
    engine.execute("XADD", "b", "1-1", "f", "v")
    assert engine.execute_with_effects("RENAME", "a", "a") == ("OK", [])
    assert engine.execute_with_effects("RENAMENX", "a", "b") == (0, [])
    assert engine.execute_with_effects("RENAME", "a", "b") == ("OK", [[b"RENAME", b"a", b"b"]])
    assert engine.execute_with_effects("RENAMENX", "b", "c") == (1, [[b"RENAME", b"b", b"c"]])
    with pytest.raises(ReplyError, match="^ERR no such key$"):
        engine.execute_with_effects("RENAME", "zz", "y")


def test_rename_keeps_groups(engine):
    engine.execute("XADD", "a", "1-1", "f", "v")
    engine.execute("XGROUP", "CREATE", "a", "g", "0")
    engine.execute("RENAME", "a", "b")
    assert engine.execute("XINFO", "GROUPS", "b")[0][1] == b"g"


# --- FLUSHDB / FLUSHALL --------------------------------------------------------------------------


def test_flush_replies_and_errors(engine, redis_raw):
    add(engine, redis_raw, "a")
    for argv in (("FLUSHDB", "x"), ("FLUSHDB", "sync", "async"), ("FLUSHALL", "lazy"),
                 ("FLUSHDB", "ASYNC"), ("DBSIZE",)):
        same(engine, redis_raw, *argv)
    add(engine, redis_raw, "a")
    same(engine, redis_raw, "SELECT", "5")
    add(engine, redis_raw, "b")
    for argv in (("FLUSHDB", "sync"), ("DBSIZE",), ("SELECT", "0"), ("DBSIZE",)):
        same(engine, redis_raw, *argv)
    add(engine, redis_raw, "c")
    same(engine, redis_raw, "SELECT", "7")
    add(engine, redis_raw, "d")
    for argv in (("FLUSHALL", "Async"), ("DBSIZE",), ("SELECT", "0"), ("DBSIZE",),
                 ("FLUSHALL",), ("FLUSHDB",)):
        same(engine, redis_raw, *argv)


def test_flush_effects_only_when_something_went(engine):
    assert engine.execute_with_effects("FLUSHDB") == ("OK", [])
    assert engine.execute_with_effects("FLUSHALL", "SYNC") == ("OK", [])
    engine.execute("XADD", "a", "1-1", "f", "v")
    assert engine.execute_with_effects("FLUSHDB") == ("OK", [[b"FLUSHDB"]])
    engine.execute("SELECT", "9")
    engine.execute("XADD", "a", "1-1", "f", "v")
    engine.execute("SELECT", "0")
    assert engine.execute_with_effects("FLUSHDB") == ("OK", [])
    assert engine.execute_with_effects("FLUSHALL") == ("OK", [[b"FLUSHALL"]])
    assert not any(engine.dbs)


def test_effects_replay_to_same_state():
    clock = [1000]
    primary = Engine(clock=lambda: clock[0])
    replica = Engine(clock=lambda: clock[0])
    primary.add_sink(replica.replay.apply)
    script = [
        ("XADD", "a", "1-1", "f", "v"), ("XADD", "b", "1-1", "f", "v"),
        ("XADD", "c", "1-1", "f", "v"), ("XGROUP", "CREATE", "c", "g", "0"),
        ("DEL", "a", "zz"), ("RENAME", "b", "c"), ("RENAMENX", "c", "d"),
        ("SELECT", "4"), ("XADD", "x", "1-1", "f", "v"), ("UNLINK", "x"),
        ("XADD", "y", "1-1", "f", "v"), ("SELECT", "0"), ("FLUSHDB",),
        ("XADD", "z", "1-1", "f", "v"), ("SELECT", "4"), ("RENAME", "y", "w"),
    ]
    for argv in script:
        primary.execute(*argv)
        clock[0] += 1
        assert primary.digest() == replica.digest(), argv
    primary.execute("FLUSHALL")
    assert primary.digest() == replica.digest()
    assert not any(replica.dbs)


# --- blocked readers -----------------------------------------------------------------------------


def _blocked_xreadgroup(engine: Engine) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def run() -> None:
        result["reply"] = outcome(
            engine, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">"
        )

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 5
    while engine.waiting.blocked_clients() == 0:
        assert time.monotonic() < deadline, "reader never blocked"
        time.sleep(0.005)
    return thread, result


NOGROUP_XREADGROUP = (
    "err", "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"
)


@pytest.mark.parametrize(
    "kill",
    [("DEL", "s"), ("UNLINK", "s"), ("RENAME", "s", "t"), ("FLUSHDB",), ("FLUSHALL",),
     ("RENAME", "other", "s")],
)
def test_removal_wakes_blocked_xreadgroup(kill):
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    engine.execute("XADD", "other", "1-1", "f", "v")
    thread, result = _blocked_xreadgroup(engine)
    engine.execute(*kill)
    thread.join(5)
    assert not thread.is_alive()
    assert result["reply"] == NOGROUP_XREADGROUP
    assert engine.waiting.blocked_clients() == 0


def test_flushall_wakes_reader_of_another_db():
    engine = Engine()
    engine.execute("SELECT", "3")
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    thread, result = _blocked_xreadgroup(engine)
    engine.execute_raw(Session(0), (b"FLUSHALL",))  # another client, on database 0
    thread.join(5)
    assert not thread.is_alive()
    assert result["reply"] == NOGROUP_XREADGROUP


# --- PING / ECHO / TIME --------------------------------------------------------------------------


def test_ping_echo(engine, redis_raw):
    for argv in (("PING",), ("PING", "hello"), ("PING", ""), ("PING", "a", "b"),
                 ("ECHO", "x\r\ny"), ("ECHO",), ("ECHO", "a", "b"), ("ping",), ("Ping", "x")):
        same(engine, redis_raw, *argv)
    assert isinstance(engine.execute("PING"), str)
    assert isinstance(engine.execute("PING", "PONG"), bytes)


def test_time_from_command_clock(redis_raw):
    t = [1_700_000_000_123]
    engine = Engine(clock=lambda: t[0])
    assert engine.execute("TIME") == [b"1700000000", b"123000"]
    t[0] = 5
    assert engine.execute("TIME") == [b"0", b"5000"]
    reply = redis_raw.execute("TIME")
    assert [type(x) for x in reply] == [bytes, bytes]
    same(engine, redis_raw, "TIME", "x")


# --- glob matching -------------------------------------------------------------------------------

def _keys(target: Any, pattern: bytes) -> tuple[str, Any]:
    kind, value = outcome(target, "KEYS", pattern)
    return kind, sorted(value) if kind == "ok" else value


GLOB_CASES = [
    (b"*", b"", False),  # KEYS/SCAN never ask: they take every key for exactly '*'
    (b"**", b"", False), (b"", b"", True), (b"", b"a", False),
    (b"a*", b"a", True), (b"*a", b"ba", True), (b"*a*b", b"xaxxb", True),
    (b"a?c", b"abc", True), (b"a?c", b"ac", False), (b"[abc]", b"b", True),
    (b"[^abc]", b"b", False), (b"[^abc]", b"d", True), (b"[a-c]", b"b", True),
    (b"[c-a]", b"b", True), (b"[a-]", b"]", True), (b"[a", b"a", True), (b"[", b"a", False),
    (b"[^", b"a", True), (b"\\*", b"*", True), (b"\\*", b"a", False), (b"a\\", b"a\\", True),
    (b"[\\]]", b"]", True), (b"[]", b"]", False), (b"h[^e]llo", b"hallo", True),
    (b"*?", b"", False), (b"a*", b"A", False), (b"[A-Z]", b"a", False),
    (b"[\x80-\xff]", b"\x90", True), (b"[a-\xff]", b"b", False),
]


@pytest.mark.parametrize(("pattern", "string", "expected"), GLOB_CASES)
def test_stringmatchlen_cases(pattern, string, expected):
    assert stringmatchlen(pattern, string) is expected


def test_glob_nesting_limit_against_redis(engine, redis_raw):
    """Redis answers "no match" once '*' recursion passes 1000 levels."""
    for n in (999, 1000, 1001, 1200):
        add(engine, redis_raw, b"a" * n + b"b")
    for pattern in (b"a*" * 999 + b"b", b"a*" * 1000 + b"b", b"a*" * 1001 + b"b",
                    b"a*" * 1000, b"a*" * 1001, b"*a" * 1000 + b"b", b"*a" * 1001 + b"*",
                    b"*a" * 60 + b"c"):
        assert _keys(engine, pattern) == _keys(redis_raw, pattern), pattern


KEY_NAMES = [
    b"", b"a", b"b", b"ab", b"abc", b"aXc", b"a*c", b"a?c", b"a[c", b"a]c", b"a\\c", b"A",
    b"hello", b"hallo", b"hxllo", b"heello", b"-", b"^", b"]", b"[", b"*", b"?", b"\\",
    b"\x80", b"\xff", b"a\xffc", b"aaa", b"aaab", b"abab", b"x y", b"a\x00c",
]


@pytest.fixture
def glob_keys(engine, redis_raw):
    for name in KEY_NAMES:
        add(engine, redis_raw, name)
    return engine


def test_keys_patterns_against_redis(glob_keys, redis_raw):
    patterns = [p for p, _s, _e in GLOB_CASES] + [
        b"*", b"a*", b"*c", b"a?c", b"a[?]c", b"a\\?c", b"a[\\]]c", b"[^a]*", b"*[a-c]",
        b"h[a-e]llo", b"h[^e]llo", b"h*llo", b"[\x7f-\x81]", b"[-a]", b"[a-]*", b"a[]c",
        b"a[]]c", b"[!a]", b"\\", b"a\\", b"*\\", b"[\\", b"a[b-", b"*a*a*b", b"**a**",
        b"?", b"??", b"???*", b"a\x00c", b"[\x00]", b"x y", b"*\xff*",
    ]
    for pattern in patterns:
        assert _keys(glob_keys, pattern) == _keys(redis_raw, pattern), pattern


def test_keys_fuzz_against_redis(glob_keys, redis_raw):
    rng = random.Random(1234)
    alphabet = b"ab*?[]^-\\cX"
    for _ in range(400):
        pattern = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
        assert _keys(glob_keys, pattern) == _keys(redis_raw, pattern), pattern


# --- SCAN ----------------------------------------------------------------------------------------


def _scan_all(target: Any, *opts: Any) -> tuple[list[bytes], int]:
    cursor, seen, calls = b"0", [], 0
    while True:
        cursor, page = target.execute("SCAN", cursor, *opts)
        assert isinstance(cursor, bytes)
        seen.extend(page)
        calls += 1
        if cursor == b"0":
            return seen, calls


def test_scan_full_iterations_match_redis(engine, redis_raw):
    names = [b"key:%d" % i for i in range(60)] + [b"other:%d" % i for i in range(15)]
    for name in names:
        add(engine, redis_raw, name)
    for opts in [(), ("COUNT", "7"), ("MATCH", "key:1*"), ("MATCH", "*", "COUNT", "1000"),
                 ("TYPE", "stream"), ("TYPE", "STREAM", "MATCH", "other:*"), ("TYPE", "string"),
                 ("TYPE", "none"), ("TYPE", "nosuchtype"), ("MATCH", "a", "MATCH", "key:2?")]:
        ours, calls = _scan_all(engine, *opts)
        theirs, _ = _scan_all(redis_raw, *opts)
        assert sorted(ours) == sorted(set(theirs)), opts
        assert len(ours) == len(set(ours))
        if opts == ("COUNT", "7"):
            assert calls >= len(names) // 7


def test_scan_errors_against_redis(engine, redis_raw):
    add(engine, redis_raw, "k")
    for argv in [
        ("SCAN",), ("SCAN", "x"), ("SCAN", "1.5"), ("SCAN", "0", "COUNT", "0"),
        ("SCAN", "0", "COUNT", "-1"), ("SCAN", "0", "COUNT", "x"), ("SCAN", "0", "COUNT"),
        ("SCAN", "0", "MATCH"), ("SCAN", "0", "TYPE"), ("SCAN", "0", "FOO", "bar"),
        ("SCAN", "0", "count", "5", "bogus"), ("SCAN", "x", "COUNT", "0"),
        ("SCAN", "0", "COUNT", "0", "MATCH"), ("SCAN", "0", "NOVALUES"),
        ("SCAN", "18446744073709551616"), ("SCAN", "0", "COUNT", "9223372036854775808"),
    ]:
        same(engine, redis_raw, *argv)


def test_scan_cursor_syntax_is_8x(engine):
    """8.x parses the cursor with string2ull (7.0 used strtoul, which also took "-1")."""
    engine.execute("XADD", "k", "1-1", "f", "v")
    for bad in ("-1", "-5", "1a", "", " "):
        with pytest.raises(ReplyError, match="^ERR invalid cursor$"):
            engine.execute("SCAN", bad)
    for good in (" 0", "+0", "-0", "007"):
        assert engine.execute("SCAN", good) == [b"0", [b"k"]]


def test_scan_reply_shape_and_end(engine):
    assert engine.execute("SCAN", "0") == [b"0", []]
    engine.execute("XADD", "k", "1-1", "f", "v")
    assert engine.execute("SCAN", "0") == [b"0", [b"k"]]
    assert engine.execute("SCAN", "18446744073709551615") == [b"0", []]


def test_scan_returns_keys_present_throughout_despite_changes(engine):
    stable = [b"s%d" % i for i in range(50)]
    for name in stable:
        engine.execute("XADD", name, "1-1", "f", "v")
    cursor, seen, step = b"0", set(), 0
    while True:
        cursor, page = engine.execute("SCAN", cursor, "COUNT", "3")
        seen.update(page)
        # Churn between calls: delete returned keys' neighbours, add new ones.
        engine.execute("XADD", b"new%d" % step, "1-1", "f", "v")
        engine.execute("DEL", b"new%d" % (step - 1))
        step += 1
        if cursor == b"0":
            break
    assert set(stable) <= seen


def test_scan_position_is_stable():
    assert scan_position(b"abc") == scan_position(b"abc")
    assert 0 <= scan_position(b"") < 1 << 64


def test_keys_and_scan_take_the_empty_key_only_with_star(engine, redis_raw):
    add(engine, redis_raw, "")
    add(engine, redis_raw, "a")
    assert _keys(engine, b"*") == _keys(redis_raw, b"*") == ("ok", [b"", b"a"])
    assert _keys(engine, b"**") == _keys(redis_raw, b"**") == ("ok", [b"a"])
    assert sorted(_scan_all(engine, "MATCH", "*")[0]) == [b"", b"a"]


# --- the glob matcher against the backtracking reading of Redis's stringmatchlen it replaced ---

# Few bytes, most of them special to the matcher, so that random draws hit its odd cases.
PATTERN_BYTES = st.sampled_from(b"*?[]^-\\aAbz\x80\xff")
KEY_BYTES = st.sampled_from(b"aAbz-]^\\*?[\x80\xff")


@settings(max_examples=3000, deadline=None)
@given(
    pattern=st.lists(PATTERN_BYTES, max_size=12).map(bytes),
    key=st.lists(KEY_BYTES, max_size=10).map(bytes),
    nocase=st.booleans(),
)
def test_same_verdict_as_the_reference(pattern: bytes, key: bytes, nocase: bool) -> None:
    assert stringmatchlen(pattern, key, nocase) is reference(pattern, key, nocase)


@pytest.mark.parametrize(
    ("pattern", "key"),
    [
        (b"*" * 2 + b"a*" * 1001 + b"b", b"a" * 1100 + b"b"),  # the nesting limit
        (b"a*" * 999 + b"b", b"a" * 1100 + b"b"),
        (b"*a*a*a*b*", b"a" * 50 + b"b"),
        (b"*", b""),
        (b"", b""),
        (b"\\", b"\\"),
        (b"[a-", b"-"),
        (b"[z-a]*", b"q"),
        (b"[\\]]", b"]"),
        (b"[^", b"x"),
        (b"[\x80-\xff]", b"\x90"),
        (b"[\xff-\x01]", b"\x00"),
        (b"*[aA]a*", b"xaAx"),  # a letter's two cases next to one case: no lowered-copy shortcut
        (b"[aA]A", b"aa"),
        (b"*[aA][bB]-*", b"xAb-"),
    ],
)
def test_odd_cases_match_the_reference(pattern: bytes, key: bytes) -> None:
    for nocase in (False, True):
        assert stringmatchlen(pattern, key, nocase) is reference(pattern, key, nocase)


def test_pathological_patterns_take_time_linear_in_the_key() -> None:
    """Redis itself needs O(pattern x key) here, and so may this (the reference, backtracking,
    took seconds on 10 KB): the time grows as the key's length does, not faster. Timed against
    a key a quarter as long, interleaved, best of five, in this thread's CPU time: a busy
    machine slows both alike, and another process taking the core is not counted."""
    patterns = (b"*" + b"a" * 1000 + b"b", b"*" + b"a" * 1000 + b"b*x", b"*a" * 500 + b"b",
                b"*" + b"[^a]" * 1000 + b"*x", b"*" + b"[aA]" * 999 + b"b*x")

    def timed(key: bytes) -> float:
        began = time.thread_time()
        for pattern in patterns:
            assert stringmatchlen(pattern, key) is False
            assert stringmatchlen(pattern, key, nocase=True) is False
        return time.thread_time() - began

    short, long = b"a" * 10_000, b"a" * 40_000
    timed(short)  # the patterns compiled (and cached) first
    shorts, longs = [], []
    for _ in range(5):
        shorts.append(timed(short))
        longs.append(timed(long))
    assert min(longs) / min(shorts) < 8, (shorts, longs)  # linear: 4; quadratic: 16
