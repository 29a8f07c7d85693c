"""maxmemory's refusals against the real redis-server: with `maxmemory 1` and `noeviction` on
both sides (each far above one byte, so every `denyoom` command is refused and every other one
runs), the same commands go to a redis-server and to a `streamkeep serve` child process over
real sockets, and the replies are compared as the exact bytes each server sent, error lines
included.

The data is loaded with no limit, then `maxmemory 1` is set: the refused writes (SET, APPEND,
INCR, LPUSH, HSET, SADD, SUNIONSTORE, ZADD, ZRANGESTORE, XADD, XGROUP CREATE, ...) must leave it
as it was, while the reads and the commands that only shrink it (DEL, EXPIRE, pops, HDEL, SREM,
ZREM, XACK, XDEL, XTRIM, XREADGROUP, XCLAIM) run as they do under no limit; an arity error still
comes before the OOM, a WRONGTYPE only after it. Inside MULTI every queued command is refused
with OOM and EXEC then fails with EXECABORT; a transaction queued before the limit was crossed
runs at EXEC unless it holds a denyoom command (then `EXECABORT ... because of: OOM ...`). A
fixed script and a hypothesis-generated mix are both checked, the keys' whole state compared
after each.

Only behaviour common to Redis 7.0 (the local oracle) and 8.x is compared: replies that hold a
time, an auto-generated ID or a hashtable's order are left out (TTL, XINFO, `*` IDs, SMEMBERS).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.resp_client import encode_command, read_raw_reply
from tests.support.serve_process import ServeProcess

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
EXECABORT_OOM = (b"-EXECABORT Transaction discarded because of: OOM command not allowed when "
                 b"used memory > 'maxmemory'.\r\n")
EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"
QUEUED = b"+QUEUED\r\n"
OK = b"+OK\r\n"

Argv = tuple[str, ...]

# The data every case starts from, loaded with no limit.
SETUP: list[Argv] = [
    ("SET", "s1", "hello"), ("SET", "n1", "10"), ("SET", "s2", "x" * 100),
    ("RPUSH", "l1", "a", "b", "c", "d", "e"), ("HSET", "h1", "f1", "v1", "f2", "v2", "f3", "v3"),
    ("SADD", "t1", "a", "b", "c"), ("SADD", "t2", "c", "d", "1", "2"),
    ("ZADD", "z1", "1", "a", "2", "b", "3", "c", "4", "d"),
    *(("XADD", "x1", f"{i}-1", "f", f"v{i}") for i in range(1, 9)),
    ("XGROUP", "CREATE", "x1", "g1", "0"),
    ("XREADGROUP", "GROUP", "g1", "c1", "COUNT", "3", "STREAMS", "x1", ">"),
    ("XADD", "x2", "5-5", "f", "v"),
    ("SELECT", "1"), ("SET", "other", "db1"), ("SELECT", "0"),
]
KEYS = ["s1", "n1", "s2", "l1", "h1", "t1", "t2", "z1", "x1", "x2", "d1", "nokey"]

# What the keys hold, read on both sides after each case: every one's type, then each type's
# contents (a read of the wrong type answers WRONGTYPE, the same on both).
STATE: list[Argv] = [
    ("DBSIZE",), *(("TYPE", key) for key in KEYS), ("EXISTS", *KEYS),
    *(("GET", key) for key in ("s1", "n1", "s2", "d1")),
    *(("LRANGE", key, "0", "-1") for key in ("l1", "d1")),
    *(("HLEN", key) for key in ("h1", "d1")),
    *(("HGET", "h1", field) for field in ("f1", "f2", "f3", "f9")),
    *(("SCARD", key) for key in ("t1", "t2", "d1")),
    *(("SMISMEMBER", key, *"abcdez12") for key in ("t1", "t2", "d1")),
    *(("ZRANGE", key, "0", "-1", "WITHSCORES") for key in ("z1", "d1")),
    *(("XRANGE", key, "-", "+") for key in ("x1", "x2", "d1")),
    ("XPENDING", "x1", "g1"), ("XPENDING", "x1", "g2"), ("XLEN", "x1"),
    ("SELECT", "1"), ("GET", "other"), ("DBSIZE",), ("SELECT", "0"),
]


class Raw:
    """One RESP2 connection whose replies are the exact bytes the server sent."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")

    def __call__(self, *argv: str) -> bytes:
        self.sock.sendall(encode_command(*argv))
        return read_raw_reply(self.file)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def compare(theirs: Raw, ours: Raw, argv: Argv) -> bytes:
    """argv on both; the same bytes back from both, returned."""
    oracle, mine = theirs(*argv), ours(*argv)
    assert mine == oracle, f"\nargv:       {argv!r}\nstreamkeep: {mine!r}\nredis:      {oracle!r}"
    return oracle


class Pair:
    """redis-server and streamkeep in lockstep: the `main` connections run the commands under
    test, the `admin` ones change the limit (another client's CONFIG SET, as an operator's
    while a transaction is being queued)."""

    def __init__(self, redis_port: int, ours_port: int) -> None:
        self.conns = [Raw(port) for port in (redis_port, ours_port, redis_port, ours_port)]
        self.theirs, self.ours, self.admin_theirs, self.admin_ours = self.conns

    def __call__(self, *argv: str) -> bytes:
        return compare(self.theirs, self.ours, argv)

    def admin(self, *argv: str) -> bytes:
        return compare(self.admin_theirs, self.admin_ours, argv)

    def limit(self, maxmemory: int) -> None:
        assert self.admin("CONFIG", "SET", "maxmemory", str(maxmemory)) == OK

    def reset(self) -> None:
        """Both sides back to SETUP's data (loaded with no limit), then `maxmemory 1`."""
        self.limit(0)
        assert self("RESET") == b"+RESET\r\n"  # (out of any MULTI, back on db 0)
        assert self.admin("FLUSHALL") == OK
        for argv in SETUP:
            assert not self(*argv).startswith(b"-"), argv
        self.limit(1)

    def same_state(self) -> None:
        for argv in STATE:
            self(*argv)

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


@pytest.fixture
def pair(redis_server: Any, tmp_path: Path) -> Iterator[Pair]:
    """A fresh `streamkeep serve` child (killed, its files removed, at the end) beside the
    session's redis-server (shared: its limit and data put back at the end), both holding
    SETUP's data with `maxmemory 1` under noeviction."""
    ours = ServeProcess(tmp_path / "sk")
    both = None
    try:
        both = Pair(redis_server.port, ours.port)
        assert both.admin("CONFIG", "SET", "maxmemory-policy", "noeviction") == OK
        both.reset()
        yield both
    finally:
        if both is not None:
            both.close()
        with contextlib.closing(Raw(redis_server.port)) as raw:
            raw("CONFIG", "SET", "maxmemory", "0")
            raw("FLUSHALL")
        ours.kill()
        ours.remove_files()


# --- a fixed script ------------------------------------------------------------------------

# Refused with OOM on both, whatever they would have answered (a WRONGTYPE, an ID too small,
# BUSYGROUP, a member already there: the OOM comes first).
DENIED: list[Argv] = [
    ("SET", "s1", "v"), ("SET", "nokey", "v"), ("SET", "s1", "v", "NX"), ("SET", "s1", "v", "GET"),
    ("SET", "l1", "v", "XX"), ("SETNX", "nokey", "v"), ("SETEX", "s1", "100", "v"),
    ("PSETEX", "s1", "100000", "v"), ("MSET", "s1", "v", "nokey", "w"), ("MSETNX", "nokey", "v"),
    ("GETSET", "s1", "v"), ("SETRANGE", "s1", "0", "x"), ("APPEND", "s1", "x"),
    ("APPEND", "nokey", "x"), ("APPEND", "l1", "x"), ("INCR", "n1"), ("INCR", "s1"),
    ("INCRBY", "n1", "5"), ("DECR", "n1"), ("DECRBY", "n1", "5"), ("INCRBYFLOAT", "n1", "1.5"),
    ("LPUSH", "l1", "z"), ("RPUSH", "nokey", "z"), ("LPUSH", "s1", "z"), ("LPUSHX", "l1", "z"),
    ("RPUSHX", "nokey", "z"), ("LINSERT", "l1", "BEFORE", "a", "z"), ("LSET", "l1", "0", "z"),
    ("LMOVE", "l1", "d1", "LEFT", "RIGHT"), ("RPOPLPUSH", "l1", "l1"),
    ("HSET", "h1", "f1", "x"), ("HSET", "h1", "f9", "x"), ("HSETNX", "h1", "f9", "x"),
    ("HMSET", "h1", "f1", "x"), ("HINCRBY", "h1", "f9", "1"), ("HINCRBYFLOAT", "h1", "f9", "1"),
    ("SADD", "t1", "z"), ("SADD", "t1", "a"), ("SADD", "s1", "a"),
    ("SUNIONSTORE", "d1", "t1", "t2"), ("SUNIONSTORE", "d1", "nokey"),
    ("SINTERSTORE", "d1", "t1", "t2"), ("SDIFFSTORE", "d1", "t1", "t2"),
    ("ZADD", "z1", "5", "e"), ("ZADD", "z1", "XX", "9", "a"), ("ZINCRBY", "z1", "1", "a"),
    ("ZRANGESTORE", "d1", "z1", "0", "-1"), ("ZRANGESTORE", "d1", "nokey", "0", "-1"),
    ("ZUNIONSTORE", "d1", "1", "z1"), ("ZINTERSTORE", "d1", "1", "z1"),
    ("ZDIFFSTORE", "d1", "1", "z1"), ("COPY", "s1", "d1"), ("RESTORE", "d1", "0", "garbage"),
    ("XADD", "x1", "9-1", "f", "v"), ("XADD", "x1", "NOMKSTREAM", "9-1", "f", "v"),
    ("XADD", "nokey", "NOMKSTREAM", "9-1", "f", "v"), ("XADD", "x1", "1-1", "f", "v"),
    ("XADD", "x1", "MAXLEN", "1", "9-1", "f", "v"), ("XADD", "s1", "9-1", "f", "v"),
    ("XGROUP", "CREATE", "x1", "g2", "0"), ("XGROUP", "CREATE", "x1", "g1", "0"),
    ("XGROUP", "CREATE", "nokey", "g", "0", "MKSTREAM"), ("XGROUP", "CREATE", "nokey", "g", "0"),
    ("XGROUP", "CREATECONSUMER", "x1", "g1", "c9"), ("XSETID", "x1", "99-1"),
]

# Run as under no limit (none of these is denyoom).
ALLOWED: list[Argv] = [
    ("GET", "s1"), ("STRLEN", "s2"), ("MGET", "s1", "n1", "nokey"), ("GETRANGE", "s1", "0", "2"),
    ("EXISTS", "s1", "nokey", "l1"), ("TYPE", "x1"), ("DBSIZE",), ("PING",), ("ECHO", "e"),
    ("GET", "l1"), ("CONFIG", "GET", "maxmemory"), ("CONFIG", "GET", "maxmemory-policy"),
    ("DEL", "s2", "nokey"), ("UNLINK", "nokey"), ("EXPIRE", "n1", "100000"),
    ("PERSIST", "n1"), ("EXPIRE", "s1", "0"), ("EXISTS", "s1"), ("GETDEL", "n1"),
    ("LPOP", "l1"), ("RPOP", "l1", "2"), ("LRANGE", "l1", "0", "-1"), ("LLEN", "l1"),
    ("LREM", "l1", "0", "b"), ("LTRIM", "l1", "0", "5"), ("LPOP", "nokey"),
    ("HGET", "h1", "f1"), ("HDEL", "h1", "f2", "f9"), ("HLEN", "h1"), ("HEXISTS", "h1", "f2"),
    ("SREM", "t1", "a", "z"), ("SCARD", "t1"), ("SISMEMBER", "t2", "d"), ("SMOVE", "t2", "t1", "d"),
    ("SPOP", "nokey"), ("SINTERCARD", "2", "t1", "t2"),
    ("ZREM", "z1", "a", "z"), ("ZPOPMIN", "z1"), ("ZRANGE", "z1", "0", "-1", "WITHSCORES"),
    ("ZSCORE", "z1", "c"), ("ZCARD", "z1"),
    ("XLEN", "x1"), ("XRANGE", "x1", "-", "+", "COUNT", "2"),
    ("XREADGROUP", "GROUP", "g1", "c2", "COUNT", "2", "STREAMS", "x1", ">"),
    ("XREADGROUP", "GROUP", "g1", "c1", "STREAMS", "x1", "0"),
    ("XREADGROUP", "GROUP", "g1", "c3", "NOACK", "COUNT", "1", "STREAMS", "x1", ">"),
    ("XACK", "x1", "g1", "1-1", "2-1", "99-1"), ("XPENDING", "x1", "g1"),
    ("XCLAIM", "x1", "g1", "c4", "0", "3-1", "JUSTID"),
    ("XAUTOCLAIM", "x1", "g1", "c5", "0", "0", "COUNT", "1", "JUSTID"),
    ("XDEL", "x1", "2-1", "7-1"), ("XTRIM", "x1", "MAXLEN", "5"), ("XTRIM", "x1", "MINID", "5"),
    ("XRANGE", "x1", "-", "+"), ("XGROUP", "SETID", "x1", "g1", "0"),
    ("XGROUP", "DELCONSUMER", "x1", "g1", "c2"), ("XGROUP", "DESTROY", "x1", "g1"),
    ("XREAD", "COUNT", "1", "STREAMS", "x2", "0"), ("RENAME", "x2", "x3"), ("TYPE", "x3"),
    ("SELECT", "1"), ("GET", "other"), ("DEL", "other"), ("SELECT", "0"), ("FLUSHDB",),
    ("DBSIZE",),
]

# Refused before the limit is looked at: the same error as under no limit.
MALFORMED: list[Argv] = [("SET", "s1"), ("XADD", "x1"), ("GET",), ("NOSUCHCOMMAND", "x"),
                         ("XGROUP", "CREATE", "x1"), ("XGROUP", "NOSUCH")]


def test_denyoom_commands_are_refused_and_change_nothing(pair: Pair) -> None:
    for argv in DENIED:
        assert pair(*argv) == OOM, argv
    pair.same_state()


def test_reads_and_shrinking_commands_still_run(pair: Pair) -> None:
    for argv in ALLOWED:
        reply = pair(*argv)
        assert not reply.startswith(b"-OOM"), argv
        pair.same_state()


def test_malformed_commands_get_their_own_error_first(pair: Pair) -> None:
    for argv in MALFORMED:
        reply = pair(*argv)
        assert reply.startswith(b"-ERR") and reply != OOM, argv
    pair.same_state()


def test_a_transaction_queued_over_the_limit_aborts(pair: Pair) -> None:
    for queued in ([("GET", "s1")], [("SET", "s1", "v")], [("DEL", "s1"), ("XACK", "x1", "g1", "1-1")],
                   [("LPOP", "l1"), ("LPUSH", "l1", "z"), ("LLEN", "l1")], []):
        assert pair("MULTI") == OK
        for argv in queued:
            assert pair(*argv) == OOM, argv
        assert pair("EXEC") == (EXECABORT if queued else b"*0\r\n")
        pair.same_state()
    assert pair("MULTI") == OK
    assert pair("SET", "s1", "v") == OOM
    assert pair("DISCARD") == OK
    assert pair("GET", "s1") == b"$5\r\nhello\r\n"


def test_a_transaction_queued_under_the_limit_runs_unless_it_may_grow(pair: Pair) -> None:
    """Queued with no limit, the limit crossed (another client's CONFIG SET) before EXEC: EXEC
    refuses a transaction holding a denyoom command, and runs one that holds none."""
    growing = [("GET", "s1"), ("DEL", "s2"), ("XADD", "x1", "9-1", "f", "v"), ("LPOP", "l1")]
    shrinking = [("GET", "s1"), ("DEL", "s2"), ("LPOP", "l1"), ("HDEL", "h1", "f1"),
                 ("XACK", "x1", "g1", "1-1"), ("XDEL", "x1", "1-1"), ("LPOP", "s1")]
    pair.limit(0)
    assert pair("MULTI") == OK
    for argv in growing:
        assert pair(*argv) == QUEUED
    pair.limit(1)
    assert pair("EXEC") == EXECABORT_OOM
    pair.same_state()  # nothing of it ran: s2 is still there
    pair.limit(0)
    assert pair("MULTI") == OK
    for argv in shrinking:
        assert pair(*argv) == QUEUED
    pair.limit(1)
    reply = pair("EXEC")  # (LPOP on a string: its WRONGTYPE, not an OOM)
    assert reply.startswith(b"*7\r\n") and b"OOM" not in reply
    pair.same_state()


# --- a generated mix ---------------------------------------------------------------------------

key = st.sampled_from(KEYS)
member = st.sampled_from(["a", "b", "c", "d", "e", "z", "1", "2", ""])
field = st.sampled_from(["f1", "f2", "f3", "f9"])
count = st.sampled_from(["0", "1", "2", "5", "100"])
stream_id = st.sampled_from(["1-1", "2-1", "3-1", "4-1", "5-5", "8-1", "9-1", "0-0", "99-0"])
score = st.sampled_from(["0", "1", "2.5", "-1", "+inf"])


def _cmd(*parts: Any) -> st.SearchStrategy[Argv]:
    return st.tuples(*(st.just(p) if isinstance(p, str) else p for p in parts))


command = st.one_of(
    # strings
    _cmd("SET", key, member), _cmd("GET", key), _cmd("APPEND", key, member), _cmd("INCR", key),
    _cmd("GETDEL", key), _cmd("STRLEN", key), _cmd("SETNX", key, member),
    # keyspace
    st.lists(key, min_size=1, max_size=3).map(lambda ks: ("DEL", *ks)),
    st.lists(key, min_size=1, max_size=3).map(lambda ks: ("EXISTS", *ks)),
    _cmd("EXPIRE", key, st.sampled_from(["0", "100000", "-1"])), _cmd("TYPE", key),
    _cmd("PERSIST", key), _cmd("RENAME", key, key), _cmd("COPY", key, key),
    # lists
    _cmd("LPUSH", key, member), _cmd("RPUSH", key, member, member), _cmd("LPOP", key),
    _cmd("RPOP", key), _cmd("RPOP", key, count), _cmd("LLEN", key),
    _cmd("LRANGE", key, "0", "-1"), _cmd("LMOVE", key, key, "LEFT", "RIGHT"),
    # hashes
    _cmd("HSET", key, field, member), _cmd("HGET", key, field), _cmd("HDEL", key, field),
    _cmd("HLEN", key), _cmd("HINCRBY", key, field, "1"),
    # sets
    _cmd("SADD", key, member), _cmd("SREM", key, member), _cmd("SCARD", key),
    _cmd("SISMEMBER", key, member), _cmd("SUNIONSTORE", key, key, key),
    _cmd("SINTERSTORE", key, key), _cmd("SMOVE", key, key, member),
    # sorted sets
    _cmd("ZADD", key, score, member), _cmd("ZREM", key, member), _cmd("ZCARD", key),
    _cmd("ZRANGESTORE", key, key, "0", "-1"), _cmd("ZRANGE", key, "0", "-1", "WITHSCORES"),
    _cmd("ZPOPMIN", key), _cmd("ZINCRBY", key, "1", member),
    # streams
    _cmd("XADD", key, stream_id, "f", member), _cmd("XADD", key, "NOMKSTREAM", stream_id, "f", "v"),
    _cmd("XACK", key, "g1", stream_id), _cmd("XDEL", key, stream_id),
    _cmd("XTRIM", key, "MAXLEN", count), _cmd("XTRIM", key, "MINID", stream_id),
    _cmd("XGROUP", "CREATE", key, st.sampled_from(["g1", "g2"]), st.sampled_from(["0", "$"])),
    _cmd("XGROUP", "CREATE", key, "g2", "0", "MKSTREAM"),
    _cmd("XGROUP", "CREATECONSUMER", key, "g1", "c7"), _cmd("XGROUP", "DESTROY", key, "g1"),
    _cmd("XGROUP", "DELCONSUMER", key, "g1", "c1"), _cmd("XGROUP", "SETID", key, "g1", stream_id),
    _cmd("XREADGROUP", "GROUP", "g1", st.sampled_from(["c1", "c2"]), "COUNT", count, "STREAMS",
         key, st.sampled_from([">", "0"])),
    _cmd("XCLAIM", key, "g1", "c3", "0", stream_id, "JUSTID"), _cmd("XLEN", key),
    _cmd("XRANGE", key, "-", "+"), _cmd("XPENDING", key, "g1"), _cmd("XSETID", key, "99-1"),
    # the server's
    st.just(("DBSIZE",)), st.just(("PING",)),
)

# ("cmd", argv) or ("multi", (queued argv, ...), queued under no limit?, EXEC or DISCARD)
Step = tuple[Any, ...]
step = st.one_of(
    command.map(lambda argv: ("cmd", argv)),
    st.tuples(st.just("multi"), st.lists(command, max_size=4).map(tuple), st.booleans(),
              st.sampled_from(["EXEC", "EXEC", "DISCARD"])),
)


def run_step(pair: Pair, item: Step) -> None:
    if item[0] == "cmd":
        pair(*item[1])
        return
    _kind, queued, before_limit, end = item
    if before_limit:
        pair.limit(0)
    assert pair("MULTI") == OK
    for argv in queued:
        reply = pair(*argv)
        assert reply == (QUEUED if before_limit else OOM), argv
    if before_limit:
        pair.limit(1)
    pair(end)


@pytest.mark.parametrize("examples", [
    pytest.param(150, id="bounded"),
    # (1,000 sequences of up to 30 steps: `make soak` only)
    pytest.param(1000, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_a_generated_mix_matches_redis(pair: Pair, examples: int) -> None:
    @settings(max_examples=examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(step, min_size=1, max_size=30))
    def run(steps: list[Step]) -> None:
        pair.reset()
        for item in steps:
            run_step(pair, item)
        pair.same_state()

    run()


# --- MULTI's own commands and scripts over the limit ------------------------------------------


def test_multi_and_watch_inside_multi_are_refused_over_the_limit(pair: Pair) -> None:
    for inner in (("WATCH", "s1"), ("MULTI",)):
        assert pair("MULTI") == OK
        assert pair(*inner) == OOM, inner
        assert pair("EXEC") == EXECABORT


def test_scripts_that_cannot_grow_memory_run_over_the_limit(pair: Pair) -> None:
    """A script that only reads, a function flagged no-writes or allow-oom, a script whose
    first write deleted something (then it may go on writing, as Redis's scripts do)."""
    lib = ("#!lua name=ooms\n"
           "redis.register_function{function_name='ro', flags={'no-writes'},"
           " callback=function(k) return redis.call('get', k[1]) end}\n"
           "redis.register_function{function_name='oomok', flags={'allow-oom'},"
           " callback=function(k) return redis.call('set', k[1], 'w') end}\n")
    pair.limit(0)
    assert pair("FUNCTION", "LOAD", lib) == b"$4\r\nooms\r\n"
    pair.limit(1)
    try:
        for argv in (("EVAL", "return redis.call('get', KEYS[1])", "1", "s1"),
                     ("EVAL_RO", "return redis.call('lrange', KEYS[1], 0, -1)", "1", "l1"),
                     ("EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1",
                      "s1"),
                     ("FCALL", "ro", "1", "s1"), ("FCALL_RO", "ro", "1", "s1"),
                     ("EVAL", "redis.call('del', KEYS[1]); return redis.call('set', KEYS[1], 'v')",
                      "1", "s2"),
                     ("FCALL", "oomok", "1", "s1")):
            reply = pair(*argv)
            assert not reply.startswith(b"-"), argv
        pair.same_state()
    finally:
        pair.admin("FUNCTION", "DELETE", "ooms")


def test_scripts_that_may_grow_memory_are_refused_over_the_limit(pair: Pair) -> None:
    lib = ("#!lua name=oomw\n"
           "redis.register_function('plain', function(k) return redis.call('get', k[1]) end)\n")
    pair.limit(0)
    assert pair("FUNCTION", "LOAD", lib) == b"$4\r\noomw\r\n"
    pair.limit(1)
    try:
        for argv in (("EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "s1"),
                     ("EVAL", "return redis.pcall('set', KEYS[1], 'v')", "1", "s1"),
                     ("EVAL", "#!lua\nreturn 1", "0"),
                     ("FCALL", "plain", "1", "s1")):
            assert pair(*argv).startswith(OOM[:-2]), argv
        pair.same_state()
    finally:
        pair.admin("FUNCTION", "DELETE", "oomw")
