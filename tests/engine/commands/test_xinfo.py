"""XINFO STREAM / GROUPS / CONSUMERS / HELP (engine.cmd_info).

Differential against the local redis-server (7.0) for everything 7.0 and 8.x share. Times differ
between the engine's fake clock and Redis's real one, so delivery times, seen-time and idle are
normalised before comparing; the 8.x-only fields (active-time, inactive, and 8.6's IDMP fields)
are removed from our replies for the comparison and asserted on their own with a controllable
clock (the IDMP ones in tests/differential/test_redis86_idmp.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.core import Session
from streamkeep.engine.wire.reply import RespMap
from tests.support.diffutil import outcome  # (drops 8.6's IDMP fields, which 7.0 lacks)

T = "<time>"


def both(engine: Engine, redis: Any, *argv: Any) -> tuple[tuple[str, Any], tuple[str, Any]]:
    return outcome(engine, *argv), outcome(redis, *argv)


def same(engine: Engine, redis: Any, *argv: Any) -> Any:
    ours, theirs = both(engine, redis, *argv)
    assert ours == theirs, argv
    return ours[1]


def pairs(flat: list) -> list[list]:
    return [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)]


def unpairs(items: list[list]) -> list:
    return [x for item in items for x in item]


# --- normalisation -----------------------------------------------------------------------------


def norm_consumer_full(flat: list, ours: bool) -> list:
    out = []
    for name, value in pairs(flat):
        if name == b"active-time":
            assert ours, "7.0 has no active-time"
            continue
        if name == b"seen-time":
            value = T
        if name == b"pending":
            value = [[sid, T, count] for sid, _time, count in value]
        out.append([name, value])
    return unpairs(out)


def norm_group_full(flat: list, ours: bool) -> list:
    out = []
    for name, value in pairs(flat):
        if name == b"pending":
            value = [[sid, owner, T, count] for sid, owner, _time, count in value]
        if name == b"consumers":
            value = [norm_consumer_full(c, ours) for c in value]
        out.append([name, value])
    return unpairs(out)


def norm_full(reply: Any, ours: bool) -> Any:
    if not isinstance(reply, list):
        return reply
    out = []
    for name, value in pairs(reply):
        if name == b"groups":
            value = [norm_group_full(g, ours) for g in value]
        out.append([name, value])
    return unpairs(out)


def norm_consumers(reply: Any, ours: bool) -> Any:
    if not isinstance(reply, list):
        return reply
    out = []
    for consumer in reply:
        fields = []
        for name, value in pairs(consumer):
            if name == b"inactive":
                assert ours, "7.0 has no inactive"
                continue
            fields.append([name, T if name == b"idle" else value])
        out.append(unpairs(fields))
    return out


def same_full(engine: Engine, redis: Any, *argv: Any) -> Any:
    (kind1, ours), (kind2, theirs) = both(engine, redis, *argv)
    assert kind1 == kind2 and norm_full(ours, True) == norm_full(theirs, False), argv
    return ours


def same_consumers(engine: Engine, redis: Any, *argv: Any) -> Any:
    (kind1, ours), (kind2, theirs) = both(engine, redis, *argv)
    assert kind1 == kind2 and norm_consumers(ours, True) == norm_consumers(theirs, False), argv
    return ours


# --- scenario ----------------------------------------------------------------------------------


@pytest.fixture
def clock() -> list[int]:
    return [1_700_000_000_000]


@pytest.fixture
def engine(clock, backend) -> Engine:
    """Embedded, and served by the network server (tests/conftest.py's `backend`)."""
    return backend(Engine(clock=lambda: clock[0]))


GROUP_NAMES: list[str | bytes] = ["zeta", "alpha", "B", "ab", b"\xff", b"\x00x", "mid"]

SCENARIO = [
    *[("XADD", "s", f"1-{i}", "f", str(i), "g", "x" * i) for i in range(1, 16)],
    *[("XGROUP", "CREATE", "s", name, "0") for name in GROUP_NAMES],
    ("XGROUP", "CREATE", "s", "late", "$"),
    ("XREADGROUP", "GROUP", "zeta", "bob", "COUNT", "3", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "zeta", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "zeta", "Carol", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "alpha", "bob", "COUNT", "12", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "ab", "x", "COUNT", "1", "NOACK", "STREAMS", "s", ">"),
    ("XACK", "s", "zeta", "1-2", "1-7"),
    ("XGROUP", "CREATECONSUMER", "s", "alpha", "idle1"),
    ("XGROUP", "CREATECONSUMER", "s", "alpha", "\x01first"),
    ("XCLAIM", "s", "zeta", "alice", "0", "1-1", "1-9"),
    ("XDEL", "s", "1-14"),
]


def run_scenario(engine: Engine, redis: Any, clock: list[int]) -> None:
    for argv in SCENARIO:
        clock[0] += 7
        same(engine, redis, *argv)


# --- XINFO STREAM ------------------------------------------------------------------------------


def test_stream_summary_matches_redis(engine, redis_raw, clock):
    run_scenario(engine, redis_raw, clock)
    reply = same(engine, redis_raw, "XINFO", "STREAM", "s")
    assert reply[:2] == [b"length", 14]
    assert [k for k, _v in pairs(reply)] == [
        b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id",
        b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id", b"groups",
        b"first-entry", b"last-entry",
    ]


def test_stream_full_matches_redis(engine, redis_raw, clock):
    run_scenario(engine, redis_raw, clock)
    for opts in [("FULL",), ("full",), ("FULL", "COUNT", "0"), ("FULL", "COUNT", "3"),
                 ("FULL", "count", "1"), ("FULL", "COUNT", "-7"), ("FULL", "COUNT", "100")]:
        same_full(engine, redis_raw, "XINFO", "STREAM", "s", *opts)


def test_full_count_limits(engine):
    for i in range(1, 16):
        engine.execute("XADD", "s", f"1-{i}", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")

    def sizes(*opts: str) -> tuple[int, int, int, int]:
        info = dict(pairs(engine.execute("XINFO", "STREAM", "s", "FULL", *opts)))
        group = dict(pairs(info[b"groups"][0]))
        consumer = dict(pairs(group[b"consumers"][0]))
        return (len(info[b"entries"]), len(group[b"pending"]), len(consumer[b"pending"]),
                consumer[b"pel-count"])

    assert sizes() == (10, 10, 10, 15)
    assert sizes("COUNT", "0") == (15, 15, 15, 15)
    assert sizes("COUNT", "2") == (2, 2, 2, 15)
    assert sizes("COUNT", "-1") == (10, 10, 10, 15)


def test_stream_shapes_against_redis(engine, redis_raw, clock):
    # Empty stream made by MKSTREAM, stream emptied by XDEL, multi-node stream, node removal.
    same(engine, redis_raw, "XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    same(engine, redis_raw, "XINFO", "STREAM", "e")
    same_full(engine, redis_raw, "XINFO", "STREAM", "e", "FULL")
    same(engine, redis_raw, "XADD", "d", "5-5", "f", "v")
    same(engine, redis_raw, "XDEL", "d", "5-5")
    same(engine, redis_raw, "XINFO", "STREAM", "d")
    for i in range(1, 251):
        same(engine, redis_raw, "XADD", "big", f"{i}-0", "field", str(i))
    same(engine, redis_raw, "XINFO", "STREAM", "big")
    for i in range(101, 201):
        same(engine, redis_raw, "XDEL", "big", f"{i}-0")
    same(engine, redis_raw, "XINFO", "STREAM", "big")
    same_full(engine, redis_raw, "XINFO", "STREAM", "big", "FULL", "COUNT", "0")
    same(engine, redis_raw, "XTRIM", "big", "MAXLEN", "20")
    same(engine, redis_raw, "XINFO", "STREAM", "big")


def test_entries_read_and_lag_null(engine, redis_raw, clock):
    for i in range(1, 6):
        same(engine, redis_raw, "XADD", "s", f"1-{i}", "f", "v")
    same(engine, redis_raw, "XGROUP", "CREATE", "s", "g", "0")
    same(engine, redis_raw, "XGROUP", "CREATE", "s", "h", "1-2")
    same(engine, redis_raw, "XDEL", "s", "1-3")
    groups = same(engine, redis_raw, "XINFO", "GROUPS", "s")
    assert dict(pairs(groups[1]))[b"entries-read"] is None
    assert dict(pairs(groups[1]))[b"lag"] is None
    same_full(engine, redis_raw, "XINFO", "STREAM", "s", "FULL")


def test_lag_is_8x(engine):
    """8.x's streamReplyWithCGLag: an emptied stream has lag 0, and a group behind the first
    entry (with no tombstone past it) lags by the length. 7.0 says 2 and 5 here."""
    for i in range(1, 6):
        engine.execute("XADD", "s", f"1-{i}", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "0")
    engine.execute("XTRIM", "s", "MAXLEN", "3")
    assert dict(pairs(engine.execute("XINFO", "GROUPS", "s")[0]))[b"lag"] == 3
    engine.execute("XADD", "t", "1-1", "f", "v")
    engine.execute("XADD", "t", "1-2", "f", "v")
    engine.execute("XGROUP", "CREATE", "t", "g", "0", "ENTRIESREAD", "0")
    engine.execute("XTRIM", "t", "MAXLEN", "0")
    assert dict(pairs(engine.execute("XINFO", "GROUPS", "t")[0]))[b"lag"] == 0
    full = dict(pairs(engine.execute("XINFO", "STREAM", "t", "FULL")))
    assert dict(pairs(full[b"groups"][0]))[b"lag"] == 0


# --- XINFO GROUPS / CONSUMERS --------------------------------------------------------------------


def test_groups_match_redis_in_name_order(engine, redis_raw, clock):
    run_scenario(engine, redis_raw, clock)
    reply = same(engine, redis_raw, "XINFO", "GROUPS", "s")
    names = [g[1] for g in reply]
    assert names == sorted(names)
    assert [k for k, _v in pairs(reply[0])] == [
        b"name", b"consumers", b"pending", b"last-delivered-id", b"entries-read", b"lag"
    ]


def test_consumers_match_redis(engine, redis_raw, clock):
    run_scenario(engine, redis_raw, clock)
    for group in GROUP_NAMES + ["late"]:
        reply = same_consumers(engine, redis_raw, "XINFO", "CONSUMERS", "s", group)
        names = [c[1] for c in reply]
        assert names == sorted(names)


def test_consumer_times_8x(engine, clock):
    """8.x: idle = now - seen (clamped at 0), inactive = now - active or -1 before any
    success; FULL has seen-time and active-time as absolute ms."""
    t0 = clock[0]
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    engine.execute("XGROUP", "CREATECONSUMER", "s", "g", "c")
    clock[0] = t0 + 100
    assert engine.execute("XINFO", "CONSUMERS", "s", "g") == [
        [b"name", b"c", b"pending", 0, b"idle", 100, b"inactive", -1]
    ]
    engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # delivers at t0+100
    clock[0] = t0 + 250
    engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # nothing: seen only
    clock[0] = t0 + 400
    assert engine.execute("XINFO", "CONSUMERS", "s", "g") == [
        [b"name", b"c", b"pending", 1, b"idle", 150, b"inactive", 300]
    ]
    full = dict(pairs(engine.execute("XINFO", "STREAM", "s", "FULL")))
    consumer = full[b"groups"][0][-1][0]
    assert consumer == [
        b"name", b"c", b"seen-time", t0 + 250, b"active-time", t0 + 100, b"pel-count", 1,
        b"pending", [[b"1-1", t0 + 100, 1]],
    ]
    clock[0] = t0  # the clock went back: idle is clamped, inactive is not
    assert engine.execute("XINFO", "CONSUMERS", "s", "g") == [
        [b"name", b"c", b"pending", 1, b"idle", 0, b"inactive", -100]
    ]


def test_replies_are_maps():
    engine = Engine(clock=lambda: 5)
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    session = Session()
    assert isinstance(engine.execute_raw(session, (b"XINFO", b"STREAM", b"s",)), RespMap)
    full = engine.execute_raw(session, (b"XINFO", b"STREAM", b"s", b"FULL",))
    group = dict(full.items)[b"groups"][0]
    assert isinstance(group, RespMap)
    assert isinstance(dict(group.items)[b"consumers"][0], RespMap)
    assert all(isinstance(g, RespMap)
               for g in engine.execute_raw(session, (b"XINFO", b"GROUPS", b"s",)))
    assert all(isinstance(c, RespMap)
               for c in engine.execute_raw(session, (b"XINFO", b"CONSUMERS", b"s", b"g",)))


def test_xinfo_emits_nothing(clock):
    engine = Engine(clock=lambda: clock[0])  # effects are the embedded API's
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    for argv in (("XINFO", "STREAM", "s"), ("XINFO", "STREAM", "s", "FULL"),
                 ("XINFO", "GROUPS", "s"), ("XINFO", "CONSUMERS", "s", "g"), ("XINFO", "HELP")):
        assert engine.execute_with_effects(*argv)[1] == []


# --- errors and HELP -----------------------------------------------------------------------------

ERROR_CASES = [
    ("XINFO",), ("XINFO", "FOO"), ("XINFO", "FOO", "s"), ("xinfo", "foo\r\nbar"),
    ("XINFO", "STREAM"), ("XINFO", "STREAM", "nokey"), ("XINFO", "STREAM", "nokey", "FULL", "x"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT"), ("XINFO", "STREAM", "s", "FULL", "COUNT", "x"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT", "1.5"), ("XINFO", "STREAM", "s", "FULLER"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT", "99999999999999999999"),
    ("XINFO", "STREAM", "s", "full", "count", "1", "x"), ("XINFO", "STREAM", "s", "FULL", "LIMIT", "1"),
    ("XINFO", "STREAM", "s", "COUNT", "1", "FULL"), ("xinfo", "stReam", "s", "bad"),
    ("XINFO", "GROUPS"), ("XINFO", "GROUPS", "s", "x"), ("XINFO", "GROUPS", "nokey"),
    ("XINFO", "CONSUMERS", "s"), ("XINFO", "CONSUMERS", "s", "nogroup"),
    ("XINFO", "CONSUMERS", "nokey", "g"), ("XINFO", "CONSUMERS", "s", "g", "x"),
    ("XINFO", "CONSUMERS", "s", "a\r\nb"), ("XINFO", "CONSUMERS", "s", "a\x00b"),
    ("XINFO", "CONSUMERS", "s", "G"), ("XINFO", "HELP", "x"),
]


def test_errors_match_redis(engine, redis_raw):
    same(engine, redis_raw, "XADD", "s", "1-1", "f", "v")
    same(engine, redis_raw, "XGROUP", "CREATE", "s", "g", "0")
    for argv in ERROR_CASES:
        ours, theirs = both(engine, redis_raw, *argv)
        assert ours[0] == theirs[0] == "err", argv
        assert ours == theirs, argv


def test_nogroup_line_with_odd_names(engine):
    engine.execute("XADD", "k\nx", "1-1", "f", "v")
    with pytest.raises(ReplyError) as err:
        engine.execute("XINFO", "CONSUMERS", "k\nx", b"g\x00rest")
    assert str(err.value) == "NOGROUP No such consumer group 'g' for key name 'k x'"


def test_help_is_8x_text(engine, redis_raw):
    ours = engine.execute("XINFO", "HELP")
    theirs = redis_raw.execute("XINFO", "HELP")
    assert all(isinstance(line, str) for line in ours)
    # 7.0 ends with "Prints this help."; 8.x's addReplyHelp says "Print this help."
    assert theirs[-1] == "    Prints this help."
    assert ours == [*theirs[:-1], "    Print this help."]
    assert ours == [
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Print this help.",
    ]
    assert engine.execute("xinfo", "help")[0].startswith("XINFO <subcommand>")
