"""Redis 8.x behaviour the local 7.0 oracle cannot check: asserted against the engine alone, as
documented in /work/notes/redis8-streams.md (section numbers below) and the 8.x sources it cites.

Covers XREAD `+` (§5), the 8.x unbalanced-streams lines (§5), XSETID's max_deleted check (§10),
lag / entries-read with tombstones and trimming (§7), ENTRIESREAD clamping (§7), consumers'
seen/active times and creation by commands that serve nothing (§6), blocked XREADGROUP clients
re-run into NOGROUP (§8), XDELEX (§2), XACKDEL (§3), KEEPREF/DELREF/ACKED trimming (§1),
XREADGROUP CLAIM (§4), and small 8.x error-line changes (EDOM for `ms-*`, BLOCK timeout overflow,
"Print this help."). The clock is fake and set by each test.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from streamkeep import Engine, ReplyError


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def e(clock: Clock) -> Engine:
    return Engine(clock=clock)


def err(engine: Engine, *argv: Any) -> str:
    with pytest.raises(ReplyError) as info:
        engine.execute(*argv)
    return str(info.value)


def fill(engine: Engine, key: str, *ids: str) -> None:
    for sid in ids:
        assert engine.execute("XADD", key, sid, "f", sid) == sid.encode()


def entry(sid: str) -> list:
    return [sid.encode(), [b"f", sid.encode()]]


def as_map(flat: list) -> dict:
    return {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}


def groups(engine: Engine, key: str) -> dict[str, dict]:
    return {g[b"name"].decode(): g for g in map(_bmap, engine.execute("XINFO", "GROUPS", key))}


def _bmap(flat: list) -> dict:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def lag(engine: Engine, key: str, group: str) -> tuple[Any, Any]:
    g = groups(engine, key)[group]
    return g[b"entries-read"], g[b"lag"]


def consumers(engine: Engine, key: str, group: str) -> dict[str, dict]:
    out = {}
    for item in engine.execute("XINFO", "CONSUMERS", key, group):
        m = as_map(item)
        out[m.pop("name").decode()] = m
    return out


def info(engine: Engine, key: str) -> dict:
    return as_map(engine.execute("XINFO", "STREAM", key))


def pending_ids(engine: Engine, key: str, group: str) -> list[bytes]:
    return [p[0] for p in engine.execute("XPENDING", key, group, "-", "+", "1000")]


# --- §5: XREAD + and the unbalanced-streams lines --------------------------------------------------


def test_xread_plus_serves_the_last_entry(e):
    fill(e, "s", "1-1", "2-1", "3-1")
    fill(e, "t", "5-5")
    assert e.execute("XREAD", "STREAMS", "s", "+") == [[b"s", [entry("3-1")]]]
    assert e.execute("XREAD", "COUNT", "5", "STREAMS", "s", "+") == [[b"s", [entry("3-1")]]]
    assert e.execute("XREAD", "STREAMS", "s", "t", "+", "+") == [
        [b"s", [entry("3-1")]], [b"t", [entry("5-5")]]]
    e.execute("XDEL", "s", "3-1")  # the last *valid* entry
    assert e.execute("XREAD", "STREAMS", "s", "+") == [[b"s", [entry("2-1")]]]
    assert e.execute("XREAD", "STREAMS", "missing", "s", "+", "+") == [[b"s", [entry("2-1")]]]
    assert e.execute("XREAD", "STREAMS", "missing", "+") is None
    e.execute("XDEL", "s", "1-1", "2-1")
    assert e.execute("XREAD", "STREAMS", "s", "+") is None  # empty stream
    fill(e, "z", "0-1")
    assert e.execute("XREAD", "STREAMS", "z", "+") == [[b"z", [entry("0-1")]]]
    # With BLOCK on a non-empty stream `+` is served at once.
    assert e.execute("XREAD", "BLOCK", "0", "STREAMS", "t", "+") == [[b"t", [entry("5-5")]]]


def test_xreadgroup_plus_and_dollar_are_meaningless(e):
    fill(e, "s", "1-1")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    for symbol in ("+", "$"):
        assert err(e, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", symbol) == (
            f"ERR The {symbol} ID is meaningless in the context of XREADGROUP: you want to read "
            "the history of this consumer by specifying a proper ID, or use the > ID to get new "
            f"messages. The {symbol} ID would just return an empty result set.")


def test_unbalanced_stream_lists(e):
    for cmd in ("XREAD", "xread", "XrEaD"):
        assert err(e, cmd, "STREAMS", "a", "b", "0") == (
            "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' "
            "must be specified.")
    for cmd in ("XREADGROUP", "xreadgroup"):
        assert err(e, cmd, "GROUP", "g", "c", "STREAMS", "a", "b", ">") == (
            "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' "
            "must be specified.")


# --- §10 and small error-line changes -------------------------------------------------------------


def test_xsetid_below_max_deleted_entry_id(e):
    fill(e, "s", "1-1", "2-1", "3-1")
    e.execute("XDEL", "s", "3-1", "2-1")
    assert info(e, "s")["max-deleted-entry-id"] == b"3-1"
    line = "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    assert err(e, "XSETID", "s", "2-5") == line  # checked before the top-item check
    assert err(e, "XSETID", "s", "1-0") == line
    assert e.execute("XSETID", "s", "3-1") == "OK"
    e.execute("XDEL", "s", "1-1")  # empty stream: still checked
    assert err(e, "XSETID", "s", "3-0") == line
    # The provided MAXDELETEDID is checked at parse time, before the key.
    assert err(e, "XSETID", "missing", "1-1", "MAXDELETEDID", "2-2") == (
        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
    assert err(e, "XSETID", "missing", "1-1") == "ERR no such key"


def test_xadd_seq_star_on_exhausted_sequence_is_edom(e):
    e.execute("XADD", "s", "3-18446744073709551615", "f", "v")
    # 8.x sets errno = EDOM here (7.0 left errno as it was).
    assert err(e, "XADD", "s", "3-*", "f", "v") == (
        "ERR The ID specified in XADD is equal or smaller than the target stream top item")
    assert e.execute("XADD", "s", "4-*", "f", "v") == b"4-0"


def test_block_timeout_overflow(e, clock):
    fill(e, "s", "1-1")
    big = (1 << 63) - 1
    assert err(e, "XREAD", "BLOCK", str(big), "STREAMS", "s", "0") == "ERR timeout is out of range"
    assert err(e, "XREAD", "BLOCK", str(big - clock.now + 1), "STREAMS", "s", "0") == (
        "ERR timeout is out of range")
    assert e.execute("XREAD", "BLOCK", str(big - clock.now), "STREAMS", "s", "0") == [
        [b"s", [entry("1-1")]]]
    assert err(e, "XREAD", "BLOCK", "-1", "STREAMS", "s", "0") == "ERR timeout is negative"


def test_xgroup_help_text(e):
    assert e.execute("xgroup", "help") == [
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Print this help.",
    ]


# --- §7: lag and entries-read ---------------------------------------------------------------------


def test_lag_with_a_tombstone_ahead(e):
    fill(e, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    assert lag(e, "s", "g") == (None, 5)
    e.execute("XDEL", "s", "3-0")
    assert lag(e, "s", "g") == (None, None)
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
    assert lag(e, "s", "g") == (None, None)  # 1-0 is below the max deleted ID
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")  # 2-0, 4-0
    assert lag(e, "s", "g") == (None, None)
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")  # 5-0
    assert lag(e, "s", "g") == (5, 0)  # the last ID: entries_added
    fill(e, "s", "6-0")
    assert lag(e, "s", "g") == (5, 1)


def test_lag_of_an_emptied_stream_is_zero(e):
    fill(e, "s", "1-0", "2-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "1")
    e.execute("XDEL", "s", "1-0", "2-0")
    assert lag(e, "s", "g") == (None, 0)
    assert lag(e, "s", "h") == (1, 0)
    fill(e, "t", "1-0", "2-0")
    e.execute("XGROUP", "CREATE", "t", "g", "0", "ENTRIESREAD", "0")
    e.execute("XTRIM", "t", "MAXLEN", "0")
    assert lag(e, "t", "g") == (0, 0)


def test_lag_of_a_group_behind_the_first_entry_is_the_length(e):
    fill(e, "s", *[f"{i}-0" for i in range(1, 11)])
    e.execute("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "0")
    e.execute("XTRIM", "s", "MAXLEN", "5")  # first entry 6-0, no tombstone
    assert lag(e, "s", "g") == (0, 5)  # 7.0: entries_added - entries_read = 10
    # Delivering 6-0: the counter is not trusted (last ID < first ID) but re-estimated.
    assert e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">") == [
        [b"s", [entry("6-0")]]]
    assert lag(e, "s", "g") == (6, 4)  # 7.0 would count on from 0: (1, 9)


def test_lag_estimates_after_trimming(e):
    fill(e, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    e.execute("XTRIM", "s", "MAXLEN", "3")  # first 3-0, entries_added 5
    e.execute("XGROUP", "CREATE", "s", "at-first", "3-0")
    e.execute("XGROUP", "CREATE", "s", "before", "2-0")
    e.execute("XGROUP", "CREATE", "s", "inside", "4-0")
    e.execute("XGROUP", "CREATE", "s", "at-last", "$")
    assert lag(e, "s", "at-first") == (None, 2)
    assert lag(e, "s", "before") == (None, 3)
    assert lag(e, "s", "inside") == (None, None)
    assert lag(e, "s", "at-last") == (None, 0)
    e.execute("XREADGROUP", "GROUP", "before", "c", "COUNT", "1", "STREAMS", "s", ">")
    assert lag(e, "s", "before") == (3, 2)


def test_entriesread_is_clamped_to_entries_added(e):
    fill(e, "s", "1-0", "2-0", "3-0")
    e.execute("XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "100")
    assert lag(e, "s", "g") == (3, 0)
    e.execute("XGROUP", "SETID", "s", "g", "2-0", "ENTRIESREAD", "50")
    assert lag(e, "s", "g") == (3, 0)
    e.execute("XGROUP", "SETID", "s", "g", "2-0", "ENTRIESREAD", "2")
    assert lag(e, "s", "g") == (2, 1)
    e.execute("XGROUP", "SETID", "s", "g", "2-0", "ENTRIESREAD", "-1")
    assert groups(e, "s")["g"][b"entries-read"] is None
    e.execute("XGROUP", "CREATE", "new", "g", "$", "MKSTREAM", "ENTRIESREAD", "7")
    assert lag(e, "new", "g") == (0, 0)


# --- §6: consumers' seen / active times and creation ----------------------------------------------


def test_consumer_seen_and_active_times(e, clock):
    clock.now = 1000
    fill(e, "s", "1-1", "2-1", "3-1")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    assert e.execute("XGROUP", "CREATECONSUMER", "s", "g", "alice") == 1
    clock.now = 1500
    assert consumers(e, "s", "g") == {"alice": {"pending": 0, "idle": 500, "inactive": -1}}
    clock.now = 2000
    e.execute("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">")
    clock.now = 2600
    assert consumers(e, "s", "g")["alice"] == {"pending": 1, "idle": 600, "inactive": 600}
    clock.now = 3000
    e.execute("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")  # history: seen only
    clock.now = 3100
    assert consumers(e, "s", "g")["alice"] == {"pending": 1, "idle": 100, "inactive": 1100}
    clock.now = 4000
    e.execute("XREADGROUP", "GROUP", "g", "alice", "NOACK", "COUNT", "1", "STREAMS", "s", ">")
    assert consumers(e, "s", "g")["alice"] == {"pending": 1, "idle": 0, "inactive": 2000}
    clock.now = 5000
    e.execute("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">")  # 3-1
    clock.now = 6000
    # Nothing new: 8.x still creates the consumer and marks it seen (7.0 did neither).
    assert e.execute("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">") is None
    clock.now = 7000
    assert e.execute("XCLAIM", "s", "g", "dave", "0", "9-9") == []  # nothing claimed
    clock.now = 8000
    assert e.execute("XCLAIM", "s", "g", "alice", "0", "3-1", "JUSTID") == [b"3-1"]
    clock.now = 9000
    assert e.execute("XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "1") == [
        b"3-1", [entry("1-1")], []]
    assert e.execute("XAUTOCLAIM", "s", "g", "frank", "10000000", "0") == [b"0-0", [], []]
    clock.now = 9500
    e.execute("XPENDING", "s", "g", "-", "+", "10", "alice")  # touches nobody
    e.execute("XINFO", "CONSUMERS", "s", "g")
    clock.now = 10000
    assert consumers(e, "s", "g") == {
        "alice": {"pending": 1, "idle": 2000, "inactive": 2000},
        "bob": {"pending": 0, "idle": 5000, "inactive": 5000},
        "carol": {"pending": 0, "idle": 4000, "inactive": -1},
        "dave": {"pending": 0, "idle": 3000, "inactive": -1},
        "erin": {"pending": 1, "idle": 1000, "inactive": 1000},
        "frank": {"pending": 0, "idle": 1000, "inactive": -1},
    }
    for name in ("carol", "dave", "frank"):
        assert e.execute("XGROUP", "CREATECONSUMER", "s", "g", name) == 0


def test_failed_commands_create_no_consumer(e):
    fill(e, "s", "1-1")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    err(e, "XCLAIM", "s", "g", "x", "bad", "1-1")
    err(e, "XCLAIM", "s", "g", "x", "0", "1-1", "BOGUS")
    err(e, "XAUTOCLAIM", "s", "g", "x", "0", "0", "COUNT", "0")
    err(e, "XREADGROUP", "GROUP", "g", "x", "STREAMS", "s", "bad")
    err(e, "XREADGROUP", "GROUP", "g", "x", "STREAMS", "s", "nokey", ">", ">")
    assert consumers(e, "s", "g") == {}


def test_xreadgroup_seen_time_for_every_listed_stream(e, clock):
    fill(e, "a", "1-1")
    fill(e, "b", "1-1")
    for key in ("a", "b"):
        e.execute("XGROUP", "CREATE", key, "g", "$")
    clock.now += 10
    assert e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">", ">") is None
    clock.now += 10
    assert consumers(e, "a", "g")["c"]["idle"] == 10
    assert consumers(e, "b", "g")["c"]["idle"] == 10


# --- §8: blocked clients when the key or the group goes away --------------------------------------


class Call:
    def __init__(self, engine: Engine, *argv: Any) -> None:
        self.result: Any = None
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, args=(engine, argv), daemon=True)
        self.thread.start()

    def _run(self, engine: Engine, argv: tuple) -> None:
        try:
            self.result = engine.execute(*argv)
        except ReplyError as exc:
            self.error = str(exc)

    def join(self) -> Call:
        self.thread.join(5)
        assert not self.thread.is_alive(), "still blocked"
        return self


def wait_blocked(engine: Engine, n: int) -> None:
    deadline = time.monotonic() + 5
    while engine.waiting.blocked_clients() < n:
        assert time.monotonic() < deadline, "never blocked"
        time.sleep(0.002)


NOGROUP_KG = "NOGROUP No such key 'k' or consumer group 'g' in XREADGROUP with GROUP option"


@pytest.mark.parametrize("removal", [("DEL", "k"), ("XGROUP", "DESTROY", "k", "g"),
                                     ("FLUSHALL",), ("FLUSHDB",)])
def test_blocked_xreadgroup_gets_nogroup(removal):
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "k", "g", "$", "MKSTREAM")
    call = Call(engine, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "k", ">")
    wait_blocked(engine, 1)
    engine.execute(*removal)
    assert call.join().error == NOGROUP_KG
    assert engine.waiting.blocked_clients() == 0


def test_blocked_xread_survives_del_and_gets_the_next_entry():
    engine = Engine()
    engine.execute("XADD", "k", "5-0", "f", "v")
    call = Call(engine, "XREAD", "BLOCK", "0", "STREAMS", "k", "$")
    wait_blocked(engine, 1)
    engine.execute("DEL", "k")
    time.sleep(0.02)
    assert call.thread.is_alive()
    engine.execute("XADD", "k", "3-0", "f", "old")  # not after the pinned 5-0
    time.sleep(0.02)
    assert call.thread.is_alive()
    engine.execute("XADD", "k", "6-0", "f", "new")
    assert call.join().result == [[b"k", [[b"6-0", [b"f", b"new"]]]]]


# --- §2: XDELEX ------------------------------------------------------------------------------------


def test_xdelex(e):
    fill(e, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")  # 1-0, 2-0
    e.execute("XGROUP", "CREATE", "s", "h", "$")
    assert e.execute("XDELEX", "s", "IDS", "3", "1-0", "9-0", "1-0") == [1, -1, -1]
    assert pending_ids(e, "s", "g") == [b"1-0", b"2-0"]  # KEEPREF leaves the PEL alone
    # ACKED: 2-0 is pending in g, 3-0 was not delivered to g yet.
    assert e.execute("XDELEX", "s", "ACKED", "IDS", "2", "2-0", "3-0") == [2, 2]
    assert e.execute("XDELEX", "s", "IDS", "1", "2-0", "DELREF") == [1]
    assert pending_ids(e, "s", "g") == [b"1-0"]
    # DELREF on an entry already gone: -1, but the reference goes.
    assert e.execute("XDELEX", "s", "delref", "IDS", "1", "1-0") == [-1]
    assert pending_ids(e, "s", "g") == []
    e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # 3-0, 4-0, 5-0
    e.execute("XACK", "s", "g", "3-0")
    assert e.execute("XDELEX", "s", "ACKED", "IDS", "2", "3-0", "4-0") == [1, 2]
    s = info(e, "s")
    assert (s["length"], s["max-deleted-entry-id"], s["recorded-first-entry-id"],
            s["entries-added"]) == (2, b"3-0", b"4-0", 5)
    # A second IDS block replaces the first.
    assert e.execute("XDELEX", "s", "IDS", "1", "4-0", "IDS", "2", "5-0", "9-9") == [1, -1]
    assert e.execute("XLEN", "s") == 1
    # Missing key: -1 per ID, the IDs are not even parsed.
    assert e.execute("XDELEX", "nokey", "IDS", "2", "bad", "+") == [-1, -1]
    assert e.execute("EXISTS", "nokey") == 0


def test_xdelex_errors(e):
    fill(e, "s", "1-0")
    wrong = "ERR wrong number of arguments for 'xdelex' command"
    assert err(e, "XDELEX", "s", "IDS", "1") == wrong
    assert err(e, "XDELEX", "s") == wrong
    numids = "ERR Number of IDs must be a positive integer"
    for n in ("0", "-1", "x", "1.0", "9223372036854775808"):
        assert err(e, "XDELEX", "s", "IDS", n, "1-0") == numids
    match = "ERR The `numids` parameter must match the number of arguments"
    assert err(e, "XDELEX", "s", "IDS", "3", "1-0", "2-0") == match
    assert err(e, "XDELEX", "nokey", "IDS", "3", "1-0", "2-0") == match
    for argv in [
        ("XDELEX", "s", "IDS", "1", "1-0", "BOGUS"),
        ("XDELEX", "s", "KEEPREF", "DELREF", "IDS", "1", "1-0"),
        ("XDELEX", "s", "ACKED", "IDS", "1", "1-0", "ACKED"),
        ("XDELEX", "s", "FOO", "IDS", "1", "1-0"),
        ("XDELEX", "nokey", "FOO", "IDS", "1", "1-0"),
        ("XDELEX", "s", "KEEPREF", "IDS", "1", "1-0", "IDS"),
    ]:
        assert err(e, *argv) == "ERR syntax error", argv
    for bad in ("bad", "-", "+", "(1"):
        assert err(e, "XDELEX", "s", "IDS", "1", bad) == (
            "ERR Invalid stream ID specified as stream command argument")
    assert e.execute("XLEN", "s") == 1


# --- §3: XACKDEL -----------------------------------------------------------------------------------


def test_xackdel(e):
    fill(e, "s", "1-0", "2-0", "3-0", "4-0", "5-0", "6-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XGROUP", "CREATE", "s", "h", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    e.execute("XREADGROUP", "GROUP", "h", "d", "COUNT", "3", "STREAMS", "s", ">")
    assert e.execute("XACKDEL", "s", "g", "IDS", "2", "1-0", "9-0") == [1, -1]
    assert e.execute("XLEN", "s") == 5
    assert pending_ids(e, "s", "h") == [b"1-0", b"2-0", b"3-0"]  # KEEPREF
    # ACKED: 2-0 is still pending in h; 4-0 was not delivered to h yet.
    assert e.execute("XACKDEL", "s", "g", "ACKED", "IDS", "2", "2-0", "4-0") == [2, 2]
    assert pending_ids(e, "s", "g") == [b"3-0", b"5-0", b"6-0"]
    assert e.execute("XLEN", "s") == 5
    assert e.execute("XACKDEL", "s", "g", "DELREF", "IDS", "1", "3-0") == [1]
    assert pending_ids(e, "s", "h") == [b"1-0", b"2-0"]
    assert e.execute("XACKDEL", "s", "g", "IDS", "1", "3-0") == [-1]  # not in g's PEL
    # Pending in h but already deleted: acked, and "deleted" (1).
    assert e.execute("XACKDEL", "s", "h", "IDS", "1", "1-0") == [1]
    assert e.execute("XACKDEL", "s", "h", "ACKED", "IDS", "1", "2-0") == [1]
    s = info(e, "s")
    assert (s["length"], s["max-deleted-entry-id"], s["recorded-first-entry-id"]) == (
        3, b"3-0", b"4-0")
    # Missing key or group: -1 per ID, IDs unparsed (XACK would reply 0).
    assert e.execute("XACKDEL", "nokey", "g", "IDS", "1", "bad") == [-1]
    assert e.execute("XACKDEL", "s", "nogroup", "IDS", "2", "x", "y") == [-1, -1]


def test_xackdel_errors(e):
    fill(e, "s", "1-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    wrong = "ERR wrong number of arguments for 'xackdel' command"
    assert err(e, "XACKDEL", "s", "g", "IDS", "1") == wrong
    assert err(e, "XACKDEL", "s", "g", "KEEPREF", "IDS") == wrong
    assert err(e, "XACKDEL", "s", "g", "IDS", "0", "1-0") == (
        "ERR Number of IDs must be a positive integer")
    assert err(e, "XACKDEL", "s", "g", "IDS", "2", "1-0") == (
        "ERR The `numids` parameter must match the number of arguments")
    for argv in [("XACKDEL", "s", "g", "a", "b", "c"),
                 ("XACKDEL", "s", "g", "ACKED", "DELREF", "IDS", "1", "1-0"),
                 ("XACKDEL", "nokey", "g", "BOGUS", "IDS", "1", "1-0")]:
        assert err(e, *argv) == "ERR syntax error", argv
    assert err(e, "XACKDEL", "s", "g", "IDS", "1", "bad") == (
        "ERR Invalid stream ID specified as stream command argument")


# --- §1: KEEPREF / DELREF / ACKED trimming --------------------------------------------------------


def test_trim_reference_policies(e):
    fill(e, "s", *[f"{i}-0" for i in range(1, 11)])
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "s", ">")  # 1..4
    e.execute("XGROUP", "CREATE", "s", "h", "$")
    assert e.execute("XTRIM", "s", "MAXLEN", "8", "ACKED") == 0  # all pending or undelivered
    e.execute("XACK", "s", "g", "1-0", "2-0")
    assert e.execute("XTRIM", "s", "ACKED", "MAXLEN", "8") == 2
    assert e.execute("XTRIM", "s", "MAXLEN", "6", "KEEPREF") == 2  # 3-0, 4-0: refs stay
    assert pending_ids(e, "s", "g") == [b"3-0", b"4-0"]
    fill(e, "s", "11-0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")  # 5-0, 6-0
    assert e.execute("XTRIM", "s", "MAXLEN", "5", "DELREF") == 2
    # DELREF drops the references of every entry it walks, tombstones included (PR #15581).
    assert pending_ids(e, "s", "g") == []
    assert e.execute("XRANGE", "s", "-", "+", "COUNT", "1") == [entry("7-0")]
    # XADD ... ACKED: min last-delivered-id over groups is g's 6-0, so 7-0.. are referenced.
    e.execute("XADD", "s", "ACKED", "MAXLEN", "3", "12-0", "f", "12-0")
    assert e.execute("XLEN", "s") == 6
    e.execute("XGROUP", "SETID", "s", "g", "$")  # now h (10-0) is the slowest group
    e.execute("XADD", "s", "MAXLEN", "3", "ACKED", "13-0", "f", "13-0")
    assert [x[0] for x in e.execute("XRANGE", "s", "-", "+")] == [b"11-0", b"12-0", b"13-0"]
    # No groups at all: ACKED trims like KEEPREF.
    fill(e, "t", "1-0", "2-0", "3-0")
    assert e.execute("XTRIM", "t", "MINID", "3", "ACKED") == 2


def test_trim_policy_parsing(e):
    fill(e, "s", "1-0", "2-0")
    assert e.execute("XADD", "s", "DELREF", "NOMKSTREAM", "MAXLEN", "100", "3-0", "f", "v") == (
        b"3-0")
    assert e.execute("XADD", "s", "acked", "4-0", "f", "v") == b"4-0"  # no strategy: ignored
    assert err(e, "XADD", "s", "KEEPREF", "ACKED", "5-0", "f", "v") == (
        "ERR Invalid stream ID specified as stream command argument")
    assert err(e, "XTRIM", "s", "MAXLEN", "1", "KEEPREF", "ACKED") == "ERR syntax error"
    assert err(e, "XTRIM", "s", "ACKED", "LIMIT", "0") == (
        "ERR syntax error, XTRIM must be called with a trimming strategy")
    assert e.execute("XTRIM", "s", "keepref", "maxlen", "100") == 0
    assert e.execute("XADD", "m", "NOMKSTREAM", "DELREF", "1-0", "f", "v") is None


def test_approx_trim_with_policies_walks_eligible_nodes(e):
    e.set_config("stream-node-max-entries", 3)
    fill(e, "s", *[f"{i}-0" for i in range(1, 10)])  # nodes [1,2,3] [4,5,6] [7,8,9]
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "4", "ACKED") == 0
    # Fixed 8.x (PR #14623): eligible nodes are handled entry by entry even with `~`.
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "4", "DELREF") == 3
    assert info(e, "s")["radix-tree-keys"] == 2
    assert pending_ids(e, "s", "g") == [f"{i}-0".encode() for i in range(4, 10)]
    e.execute("XACK", "s", "g", "4-0")
    # ACKED skips referenced entries and goes on while nodes stay eligible.
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "0", "ACKED") == 1
    assert info(e, "s")["radix-tree-keys"] == 2
    assert e.execute("XLEN", "s") == 5
    # LIMIT is checked before each node against its live entries.
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "2", "DELREF") == 2
    assert info(e, "s")["radix-tree-keys"] == 1
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "2", "DELREF") == 0
    assert e.execute("XTRIM", "s", "MINID", "~", "9", "DELREF") == 0  # [7,8,9] not eligible
    assert e.execute("XTRIM", "s", "MINID", "9", "DELREF") == 2
    assert pending_ids(e, "s", "g") == [b"9-0"]


def test_exact_minid_trim_keeps_a_node_ending_in_a_tombstone(e):
    e.set_config("stream-node-max-entries", 3)
    fill(e, "s", *[f"{i}-0" for i in range(1, 7)])  # [1,2,3] [4,5,6]
    e.execute("XDEL", "s", "3-0")
    e.execute("XGROUP", "CREATE", "s", "g", "$")
    # The first node's last entry (a tombstone, 3-0) is >= 3-0: not eligible, so it is
    # emptied entry by entry but stays, as with KEEPREF.
    assert e.execute("XTRIM", "s", "MINID", "3-0", "DELREF") == 2
    assert info(e, "s")["radix-tree-keys"] == 2
    assert e.execute("XLEN", "s") == 3


# --- §4: XREADGROUP ... CLAIM ----------------------------------------------------------------------


def claimed(sid: str, idle: int, count: int) -> list:
    return [*entry(sid), idle, count]


def test_xreadgroup_claim(e, clock):
    clock.now = 1000
    fill(e, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">")
    clock.now = 2000
    # Claimed entries first ([id, fields, idle, delivery count before]), then new ones (0, 0).
    assert e.execute("XREADGROUP", "GROUP", "g", "bob", "CLAIM", "500", "STREAMS", "s", ">") == [
        [b"s", [claimed("1-0", 1000, 1), claimed("2-0", 1000, 1), claimed("3-0", 1000, 1),
                claimed("4-0", 0, 0), claimed("5-0", 0, 0)]]]
    assert [p[1:] for p in e.execute("XPENDING", "s", "g", "-", "+", "10")] == [
        [b"bob", 0, 2], [b"bob", 0, 2], [b"bob", 0, 2], [b"bob", 0, 1], [b"bob", 0, 1]]
    clock.now = 2100
    assert e.execute("XREADGROUP", "GROUP", "g", "carol", "CLAIM", "500", "COUNT", "2",
                     "STREAMS", "s", ">") is None
    clock.now = 3000
    fill(e, "s", "6-0", "7-0")
    # COUNT caps claimed and new entries together; claims alone may use it all.
    assert e.execute("XREADGROUP", "GROUP", "g", "carol", "COUNT", "2", "CLAIM", "500",
                     "STREAMS", "s", ">") == [
        [b"s", [claimed("1-0", 1000, 2), claimed("2-0", 1000, 2)]]]
    assert groups(e, "s")["g"][b"last-delivered-id"] == b"5-0"
    assert e.execute("XREADGROUP", "GROUP", "g", "dave", "CLAIM", "900", "COUNT", "4",
                     "STREAMS", "s", ">") == [
        [b"s", [claimed("3-0", 1000, 2), claimed("4-0", 1000, 1), claimed("5-0", 1000, 1),
                claimed("6-0", 0, 0)]]]
    assert groups(e, "s")["g"][b"last-delivered-id"] == b"6-0"
    e.execute("XDEL", "s", "1-0")
    clock.now = 5000
    # A deleted entry uses up a claim slot but is neither replied nor touched.
    assert e.execute("XREADGROUP", "GROUP", "g", "erin", "CLAIM", "0", "COUNT", "2",
                     "STREAMS", "s", ">") == [
        [b"s", [claimed("2-0", 2000, 3), claimed("7-0", 0, 0)]]]
    assert e.execute("XPENDING", "s", "g", "1-0", "1-0", "1") == [[b"1-0", b"carol", 2000, 3]]
    c = consumers(e, "s", "g")
    assert (c["erin"]["inactive"], c["carol"]["inactive"]) == (0, 2000)


def test_xreadgroup_claim_with_history_and_noack(e, clock):
    clock.now = 1000
    fill(e, "s", "1-0", "2-0")
    fill(e, "t", "1-0", "2-0")
    for key in ("s", "t"):
        e.execute("XGROUP", "CREATE", key, "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "s", "t", ">", ">")
    clock.now = 2000
    # A history read ignores CLAIM, for its stream and every later one (a Redis quirk).
    assert e.execute("XREADGROUP", "GROUP", "g", "a", "CLAIM", "0", "STREAMS", "s", "t",
                     "0", ">") == [[b"s", [entry("1-0")]], [b"t", [entry("2-0")]]]
    fill(e, "t", "3-0")
    clock.now = 2500
    # Both pending entries of t are idle enough (2-0 was just delivered by the `>` above);
    # a CLAIM before the history read still applies.
    assert e.execute("XREADGROUP", "GROUP", "g", "b", "CLAIM", "0", "NOACK", "STREAMS", "t",
                     "s", ">", "0") == [
        [b"t", [claimed("1-0", 1500, 1), claimed("2-0", 500, 1), claimed("3-0", 0, 0)]],
        [b"s", []]]
    # NOACK: the new entry was not added to the PEL; the claimed ones moved to b.
    assert e.execute("XPENDING", "t", "g") == [2, b"1-0", b"2-0", [[b"b", b"2"]]]


def test_xreadgroup_claim_errors(e):
    fill(e, "s", "1-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    assert err(e, "XREAD", "CLAIM", "10", "STREAMS", "s", "0") == (
        "ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.")
    assert err(e, "XREAD", "CLAIM", "x", "STREAMS", "s", "0") == (
        "ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.")
    for bad in ("x", "1.5", "9223372036854775808", "STREAMS"):
        assert err(e, "XREADGROUP", "GROUP", "g", "c", "CLAIM", bad, "STREAMS", "s", ">") == (
            "ERR min-idle-time is not an integer or out of range")
    assert err(e, "XREADGROUP", "GROUP", "g", "c", "CLAIM", "-1", "STREAMS", "s", ">") == (
        "ERR min-idle-time must be a positive integer")
    assert consumers(e, "s", "g") == {}
