"""Hash field expiry on the embedded engine (engine.commands.hash_expiry, the lazy part in
engine.commands.hashes): HEXPIRE and its variants, HTTL and its variants, HPERSIST, HGETDEL,
HGETEX, HSETEX with an injected clock. redis-server 7.0 has none of them: the replies, error
lines, effects and events asserted here are Redis 8.x's (t_hash.c). Expiry lazy and active,
a replica that never expires fields itself, INFO's subexpiry, TTLs kept through a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.command_strategies import Clock
from tests.support.effects_util import Recorded

NOW = 1_000_000


@pytest.fixture
def rec() -> Recorded:
    r = Recorded(now=NOW)
    r("HSET", "h", "a", "1", "b", "2", "c", "3")
    return r


def events(sub: object) -> list[bytes]:
    found = []
    while (message := sub.get_message(0)) is not None:  # type: ignore[attr-defined]
        if message["type"] == "pmessage":
            found.append(message["channel"].rsplit(b":", 1)[1])
    return found


# --- HEXPIRE and friends -------------------------------------------------------------------------


def test_hexpire_replies_and_conditions(rec: Recorded) -> None:
    assert rec("HEXPIRE", "h", "100", "FIELDS", "2", "a", "nope") == [1, -2]
    assert rec("HPTTL", "h", "FIELDS", "3", "a", "b", "nope") == [100_000, -1, -2]
    assert rec("HEXPIRE", "h", "50", "NX", "FIELDS", "2", "a", "b") == [0, 1]
    assert rec("HEXPIRE", "h", "200", "XX", "FIELDS", "2", "a", "c") == [1, 0]
    assert rec("HEXPIRE", "h", "150", "GT", "FIELDS", "2", "a", "c") == [0, 0]
    assert rec("HEXPIRE", "h", "150", "LT", "FIELDS", "2", "a", "c") == [1, 1]
    assert rec("HPEXPIRE", "h", "1500", "FIELDS", "1", "c") == [1]
    assert rec("HEXPIREAT", "h", str(NOW // 1000 + 300), "FIELDS", "1", "a") == [1]
    assert rec("HPEXPIREAT", "h", str(NOW + 400), "FIELDS", "1", "b") == [1]
    assert rec("HTTL", "h", "FIELDS", "3", "a", "b", "c") == [300, 1, 2]
    assert rec("HEXPIRETIME", "h", "FIELDS", "2", "a", "c") == [NOW // 1000 + 300, 1002]
    assert rec("HPEXPIRETIME", "h", "FIELDS", "1", "c") == [NOW + 1500]
    assert rec("HEXPIRE", "nokey", "10", "FIELDS", "2", "a", "b") == [-2, -2]
    assert rec("HTTL", "nokey", "FIELDS", "1", "a") == [-2]
    assert rec("OBJECT", "ENCODING", "h") == b"listpackex"


def test_hexpire_in_the_past_deletes(rec: Recorded) -> None:
    reply, effects = rec.effects("HPEXPIREAT", "h", "5", "FIELDS", "2", "a", "nope")
    assert (reply, effects) == ([2, -2], [[b"HDEL", b"h", b"a"]])
    reply, effects = rec.effects("HEXPIRE", "h", "0", "FIELDS", "2", "b", "c")
    assert (reply, effects) == ([2, 2], [[b"HDEL", b"h", b"b", b"c"]])
    assert rec("EXISTS", "h") == 0


def test_hexpire_effects_are_absolute(rec: Recorded) -> None:
    reply, effects = rec.effects("HEXPIRE", "h", "10", "NX", "FIELDS", "3", "a", "x", "b")
    assert reply == [1, -2, 1]
    assert effects == [[b"HPEXPIREAT", b"h", b"%d" % (NOW + 10_000), b"FIELDS", b"2", b"a",
                        b"b"]]
    assert rec.effects("HEXPIRE", "h", "10", "NX", "FIELDS", "1", "a") == ([0], [])
    rec.assert_replays()


def test_hexpire_errors(rec: Recorded) -> None:
    assert rec.err("HEXPIRE", "h", "10", "FIELDX", "1", "a") == \
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    assert rec.err("HEXPIRE", "h", "10", "NX", "XX", "1", "a") == \
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    assert rec.err("HEXPIRE", "h", "10", "FIELDS", "0", "a") == \
        "ERR Parameter `numFields` should be greater than 0"
    assert rec.err("HEXPIRE", "h", "10", "FIELDS", "x", "a") == \
        "ERR Parameter `numFields` should be greater than 0"
    assert rec.err("HEXPIRE", "h", "10", "FIELDS", "2", "a") == \
        "ERR The `numfields` parameter must match the number of arguments"
    assert rec.err("HEXPIRE", "h", "-1", "FIELDS", "1", "a") == \
        "ERR invalid expire time, must be >= 0"
    assert rec.err("HEXPIRE", "h", "x", "FIELDS", "1", "a") == \
        "ERR value is not an integer or out of range"
    assert rec.err("HEXPIRE", "h", str(1 << 46), "FIELDS", "1", "a") == \
        "ERR invalid expire time in 'hexpire' command"
    assert rec.err("HPEXPIREAT", "h", str(1 << 46), "FIELDS", "1", "a") == \
        "ERR invalid expire time in 'hpexpireat' command"
    assert rec.err("HTTL", "h", "FIELDS", "0", "a") == \
        "ERR Number of fields must be a positive integer"
    assert rec.err("HTTL", "h", "NOPE", "1", "a") == \
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    assert rec.err("HPERSIST", "h", "FIELDS", "2", "a") == \
        "ERR The `numfields` parameter must match the number of arguments"
    assert rec.err("HEXPIRE", "h", "10", "FIELDS", "1") == \
        "ERR wrong number of arguments for 'hexpire' command"
    rec("SET", "s", "v")
    for argv in (("HEXPIRE", "s", "10", "FIELDS", "1", "a"), ("HTTL", "s", "FIELDS", "1", "a"),
                 ("HPERSIST", "s", "FIELDS", "1", "a"), ("HGETDEL", "s", "FIELDS", "1", "a"),
                 ("HGETEX", "s", "FIELDS", "1", "a"),
                 ("HSETEX", "s", "FIELDS", "1", "a", "1")):
        assert rec.err(*argv).startswith("WRONGTYPE"), argv


def test_hpersist(rec: Recorded) -> None:
    rec("HEXPIRE", "h", "10", "FIELDS", "1", "a")
    reply, effects = rec.effects("HPERSIST", "h", "FIELDS", "3", "a", "b", "nope")
    assert (reply, effects) == ([1, -1, -2], [[b"HPERSIST", b"h", b"FIELDS", b"1", b"a"]])
    assert rec("HPERSIST", "nokey", "FIELDS", "1", "a") == [-2]
    assert rec("HTTL", "h", "FIELDS", "1", "a") == [-1]
    rec.assert_replays()


def test_hset_drops_a_field_ttl_and_hincrby_keeps_it(rec: Recorded) -> None:
    rec("HEXPIRE", "h", "10", "FIELDS", "2", "a", "b")
    rec("HSET", "h", "a", "5")
    assert rec("HTTL", "h", "FIELDS", "2", "a", "b") == [-1, 10]
    rec("HSET", "h", "b", "5")
    rec("HEXPIRE", "h", "10", "FIELDS", "1", "b")
    assert rec("HINCRBY", "h", "b", "1") == 6
    reply, effects = rec.effects("HINCRBYFLOAT", "h", "b", "0.5")
    assert reply == b"6.5"
    assert effects == [[b"HSETEX", b"h", b"KEEPTTL", b"FIELDS", b"1", b"b", b"6.5"]]
    assert rec("HTTL", "h", "FIELDS", "1", "b") == [10]
    rec.assert_replays()


# --- HGETDEL / HGETEX / HSETEX -------------------------------------------------------------------


def test_hgetdel(rec: Recorded) -> None:
    reply, effects = rec.effects("HGETDEL", "h", "FIELDS", "3", "a", "nope", "a")
    assert (reply, effects) == ([b"1", None, None], [[b"HDEL", b"h", b"a"]])
    assert rec("HGETDEL", "nokey", "FIELDS", "1", "a") == [None]
    assert rec("HGETDEL", "h", "FIELDS", "2", "b", "c") == [b"2", b"3"]
    assert rec("EXISTS", "h") == 0
    assert rec.err("HGETDEL", "h", "FIELDS", "0", "a") == \
        "ERR Number of fields must be a positive integer"
    assert rec.err("HGETDEL", "h", "NOPE", "1", "a") == \
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    rec.assert_replays()


def test_hgetex(rec: Recorded) -> None:
    reply, effects = rec.effects("HGETEX", "h", "EX", "10", "FIELDS", "2", "a", "nope")
    assert reply == [b"1", None]
    assert effects == [[b"HPEXPIREAT", b"h", b"%d" % (NOW + 10_000), b"FIELDS", b"1", b"a"]]
    assert rec("HGETEX", "h", "PXAT", str(NOW + 5), "FIELDS", "1", "b") == [b"2"]
    assert rec("HPEXPIRETIME", "h", "FIELDS", "2", "a", "b") == [NOW + 10_000, NOW + 5]
    reply, effects = rec.effects("HGETEX", "h", "PERSIST", "FIELDS", "2", "a", "c")
    assert reply == [b"1", b"3"]
    assert effects == [[b"HPERSIST", b"h", b"FIELDS", b"2", b"a", b"c"]]
    assert rec.effects("HGETEX", "h", "FIELDS", "1", "a") == ([b"1"], [])
    reply, effects = rec.effects("HGETEX", "h", "EXAT", "1", "FIELDS", "1", "c")
    assert (reply, effects) == ([b"3"], [[b"HDEL", b"h", b"c"]])
    assert rec("HGETEX", "nokey", "PX", "5", "FIELDS", "2", "a", "b") == [None, None]
    assert rec.err("HGETEX", "h", "EX", "-1", "FIELDS", "1", "a") == \
        "ERR invalid expire time, must be >= 0"
    assert rec.err("HGETEX", "h", "EX", "10", "FIELDS", "2", "a") == \
        "ERR The `numfields` parameter must match the number of arguments"
    assert rec.err("HGETEX", "h", "KEEPTTL", "FIELDS", "1", "a") == \
        "ERR Mandatory argument FIELDS is missing or not at the right position"
    rec.assert_replays()


def test_hsetex(rec: Recorded) -> None:
    reply, effects = rec.effects("HSETEX", "h", "EX", "10", "FIELDS", "2", "a", "9", "d", "4")
    assert reply == 1
    assert effects == [[b"HSETEX", b"h", b"PXAT", b"%d" % (NOW + 10_000), b"FIELDS", b"2",
                        b"a", b"9", b"d", b"4"]]
    assert rec("HTTL", "h", "FIELDS", "2", "a", "d") == [10, 10]
    assert rec("HSETEX", "h", "FNX", "FIELDS", "2", "a", "1", "e", "5") == 0
    assert rec("HSETEX", "h", "FXX", "FIELDS", "2", "a", "1", "e", "5") == 0
    assert rec("HSETEX", "h", "FXX", "KEEPTTL", "FIELDS", "1", "a", "7") == 1
    assert rec("HTTL", "h", "FIELDS", "1", "a") == [10]
    assert rec.effects("HSETEX", "h", "FNX", "FIELDS", "1", "e", "5") == (
        1, [[b"HSET", b"h", b"e", b"5"]])
    assert rec("HSETEX", "h", "FIELDS", "1", "a", "8") == 1
    assert rec("HTTL", "h", "FIELDS", "1", "a") == [-1]
    assert rec("HSETEX", "nokey", "FXX", "FIELDS", "1", "a", "1") == 0
    assert rec("EXISTS", "nokey") == 0
    reply, effects = rec.effects("HSETEX", "new", "PXAT", "1", "FIELDS", "1", "a", "1")
    assert (reply, effects) == (1, [[b"HDEL", b"new", b"a"]])
    assert rec("EXISTS", "new") == 0
    rec.assert_replays()


def test_hsetex_errors(rec: Recorded) -> None:
    arity = "ERR wrong number of arguments for 'hsetex' command"
    assert rec.err("HSETEX", "h", "FIELDS", "2", "a", "1") == arity
    assert rec.err("HSETEX", "h", "FIELDS", "1", "a", "1", "b") == arity
    assert rec.err("HSETEX", "h", "FIELDS", "0", "a", "1") == "ERR invalid number of fields"
    assert rec.err("HSETEX", "h", "EX", "1", "PX", "1", "FIELDS", "1", "a", "1") == \
        "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified"
    assert rec.err("HSETEX", "h", "FNX", "FXX", "FIELDS", "1", "a", "1") == \
        "ERR Only one of FXX or FNX arguments can be specified"
    assert rec.err("HSETEX", "h", "NOPE", "FIELDS", "1", "a", "1") == \
        "ERR unknown argument: NOPE"
    assert rec.err("HSETEX", "h", "EX", "-5", "FIELDS", "1", "a", "1") == \
        "ERR invalid expire time, must be >= 0"
    assert rec.err("HSETEX", "h", "EX", str(1 << 46), "FIELDS", "1", "a", "1") == \
        "ERR invalid expire time in 'hsetex' command"


# --- events --------------------------------------------------------------------------------------


def test_events() -> None:
    rec = Recorded(now=NOW)
    rec("CONFIG", "SET", "notify-keyspace-events", "KEAn")
    sub = rec.engine.psubscribe("__keyevent@*")
    rec("HSET", "h", "a", "1", "b", "2", "c", "3")
    rec("HEXPIRE", "h", "10", "FIELDS", "1", "a")
    rec("HPERSIST", "h", "FIELDS", "1", "a")
    rec("HEXPIRE", "h", "0", "FIELDS", "1", "a")
    rec("HPEXPIRE", "h", "5", "FIELDS", "2", "b", "c")
    assert events(sub) == [b"new", b"hset", b"hexpire", b"hpersist", b"hdel", b"hexpire"]
    rec.clock.now += 6
    assert rec("HGET", "h", "b") is None
    assert events(sub) == [b"hexpired", b"del"]
    sub.close()


# --- lazy and active expiry ----------------------------------------------------------------------


def test_lazy_expiry_deletes_and_logs_hdel(rec: Recorded) -> None:
    rec("HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b")
    rec.clock.now += 100
    assert rec("HGET", "h", "a") == b"1"  # (expired when its time is < now)
    rec.clock.now += 1
    reply, effects = rec.effects("HGETALL", "h")
    assert reply == [b"c", b"3"]
    assert [e[:2] + sorted(e[2:]) for e in effects] == [[b"HDEL", b"h", b"a", b"b"]]
    assert b"subexpiry=0" in rec("INFO", "keyspace")
    rec.assert_replays()


def test_active_expiry(rec: Recorded) -> None:
    rec("HSET", "other", "x", "1")
    rec("HPEXPIRE", "h", "100", "FIELDS", "2", "a", "b")
    rec("HPEXPIRE", "other", "50", "FIELDS", "1", "x")
    assert b"subexpiry=2" in rec("INFO", "keyspace")
    rec.clock.now += 60
    assert rec.engine.expiry_cycle.run() == 1  # (the fields it deleted)
    assert rec("EXISTS", "other") == 0
    assert rec.records[-1].effects == [[b"HDEL", b"other", b"x"]]
    rec.clock.now += 60
    rec.engine.expiry_cycle.run()
    assert rec("HGETALL", "h") == [b"c", b"3"]
    assert [e[:2] + sorted(e[2:]) for e in rec.records[-1].effects] == [
        [b"HDEL", b"h", b"a", b"b"]]
    assert b"subexpiry=0" in rec("INFO", "keyspace")
    rec.assert_replays()


def test_a_replica_never_expires_fields_itself() -> None:
    clock = Clock()
    clock.now = NOW
    primary = Engine(clock=clock)
    replica = Engine(clock=clock)
    primary.add_sink(replica.replay.apply)
    primary.execute("HSET", "h", "a", "1", "b", "2")
    primary.execute("HPEXPIRE", "h", "10", "FIELDS", "1", "a")
    assert primary.digest() == replica.digest()
    clock.now += 20
    replica.read_only = "READONLY You can't write against a read only replica."
    assert replica.execute("HGET", "h", "a") is None  # hidden, not deleted
    assert replica.execute("HLEN", "h") == 1
    assert replica.execute("HGETALL", "h") == [b"b", b"2"]
    assert replica.execute("HTTL", "h", "FIELDS", "1", "a") == [-2]
    before = replica.digest()
    assert replica.expiry_cycle.run() == 0
    assert replica.digest() == before
    primary.expiry_cycle.run()  # the primary's HDEL reaches the replica
    assert replica.digest() != before
    assert primary.digest() == replica.digest()


def test_a_snapshot_keeps_field_ttls(tmp_path: Path) -> None:
    from streamkeep.snapshot.services.load import load_snapshot
    from streamkeep.snapshot.writer import write_snapshot

    clock = Clock()
    clock.now = NOW
    engine = Engine(clock=clock)
    engine.execute("HSET", "h", "a", "1", "b", "2")
    engine.execute("HPEXPIRE", "h", "100", "FIELDS", "1", "a")
    engine.execute("HSET", "big", *[x for i in range(600) for x in (f"f{i}", "v")])
    engine.execute("HPEXPIRE", "big", "50", "FIELDS", "2", "f1", "f2")
    path = tmp_path / "hashes.mdb"
    write_snapshot(engine.dbs, str(path), 1, 1700000000000, "cd" * 20,
                   values=engine.keyspaces, expires=engine.expires)
    loaded = Engine(clock=clock)
    load_snapshot(loaded, str(path), lazy=False)
    assert loaded.digest() == engine.digest()
    assert loaded.execute("HPTTL", "h", "FIELDS", "2", "a", "b") == [100, -1]
    assert b"subexpiry=2" in loaded.execute("INFO", "keyspace")
    clock.now += 60
    loaded.expiry_cycle.run()
    assert loaded.execute("HLEN", "big") == 598
    clock.now += 60
    assert loaded.execute("HGETALL", "h") == [b"b", b"2"]


def test_a_renamed_hash_is_tracked_from_its_next_access(rec: Recorded) -> None:
    rec("HPEXPIRE", "h", "50", "FIELDS", "1", "a")
    rec("RENAME", "h", "h2")
    assert rec("HGET", "h2", "b") == b"2"
    rec.clock.now += 60
    assert rec.engine.expiry_cycle.run() == 1
    assert rec("HKEYS", "h2") == [b"b", b"c"]
    rec.assert_replays()
