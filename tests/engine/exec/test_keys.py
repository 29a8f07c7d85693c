"""engine.exec.keys: the keyspace's lookups (WRONGTYPE where Redis's lookup refuses, keyspace
hits and misses counted as Redis counts them), lazy expiry (a DEL logged before the command,
even a failing one) and a replica's reads, which hide expired keys without deleting them."""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError
from tests.support.effects_util import Recorded

NOW = 1_000_000
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


@pytest.fixture
def r() -> Recorded:
    return Recorded(now=NOW)


@pytest.mark.parametrize(("setup", "command"), [
    (("SET", "k", "v"), ("XLEN", "k")),
    (("XADD", "k", "1-1", "f", "v"), ("HGET", "k", "f")),
    (("HSET", "k", "f", "v"), ("LPUSH", "k", "x")),
    (("RPUSH", "k", "x"), ("SADD", "k", "m")),
    (("SADD", "k", "m"), ("ZADD", "k", "1", "m")),
    (("ZADD", "k", "1", "m"), ("GET", "k")),
])
def test_a_command_on_a_key_of_another_type_is_wrongtype(setup: tuple, command: tuple) -> None:
    e = Engine()
    e.execute(*setup)
    with pytest.raises(ReplyError, match=WRONGTYPE):
        e.execute(*command)


def test_reads_count_keyspace_hits_and_misses_as_redis_does() -> None:
    e = Engine()
    e.execute("HSET", "h", "f", "v")
    e.execute("SET", "s", "v")

    def stats() -> tuple[int, int]:
        info = e.execute("INFO", "stats").decode()
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        return int(fields["keyspace_hits"]), int(fields["keyspace_misses"])

    before = stats()
    e.execute("HGET", "h", "f")  # a hit
    e.execute("HGET", "nosuch", "f")  # a miss
    with pytest.raises(ReplyError, match=WRONGTYPE):
        e.execute("HGET", "s", "f")  # a key of another type: a hit, then WRONGTYPE
    e.execute("HSET", "h", "g", "w")  # a write's lookup counts nothing
    after = stats()
    assert (after[0] - before[0], after[1] - before[1]) == (2, 1)


def test_lazy_expiry_logs_a_del_before_the_command(r):
    r("SET", "k", "v", "PX", "100")
    r.clock.now += 100
    assert r("GET", "k") == b"v"  # expired only once now > its time
    r.clock.now += 1
    assert r.effects("SET", "k", "w", "NX") == ("OK", [[b"DEL", b"k"], [b"SET", b"k", b"w"]])
    r("SET", "j", "v", "PX", "1")
    r.clock.now += 2
    assert r.effects("GET", "j") == (None, [[b"DEL", b"j"]])
    r.assert_replays()


def test_lazy_expiry_is_logged_when_the_command_fails(r):
    r("SET", "k", "v", "PX", "1")
    r.clock.now += 2
    assert r.err("INCRBY", "k", "x") == "ERR value is not an integer or out of range"
    assert r.records[-1].effects == [[b"DEL", b"k"]]
    r.assert_replays()


def test_del_exists_flush_see_both_types(r):
    r("SET", "a", "1", "EX", "100")
    r("XADD", "s", "1-1", "f", "v")
    assert r("EXISTS", "a", "s", "none") == 2
    assert r.effects("DEL", "a", "s", "none") == (2, [[b"DEL", b"a", b"s"]])
    r("SET", "a", "1", "EX", "100")
    r("FLUSHDB")
    assert (r("DBSIZE"), r("TTL", "a")) == (0, -2)
    r.assert_replays()


def test_a_replicas_reads_hide_expired_keys_without_deleting_them() -> None:
    from streamkeep import Engine
    from streamkeep.replication.redis_commands import RedisApplier

    now = [NOW]
    with Engine(clock=lambda: now[0]) as e:
        records: list[object] = []
        e.add_sink(records.append)
        e.read_only = "READONLY You can't write against a read only replica."
        primary = RedisApplier(e)
        for argv in (["SET", "k", "v", "PXAT", str(NOW + 10)], ["XADD", "s", "1-1", "f", "v"],
                     ["PEXPIREAT", "s", str(NOW + 10)], ["SELECT", "1"], ["SET", "k", "db1"]):
            primary.apply([a.encode() for a in argv], 0)
        logged = len(records)
        assert e.execute("GET", "k") == b"v" and e.execute("XLEN", "s") == 1
        now[0] += 11
        assert e.execute("GET", "k") is None and e.execute("EXISTS", "k", "k", "s") == 0
        assert (e.execute("TTL", "k"), e.execute("PTTL", "s")) == (-2, -2)
        assert e.execute("TYPE", "s") == "none" and e.execute("XLEN", "s") == 0
        assert e.execute("XREAD", "STREAMS", "s", "0") is None
        assert e.execute("MGET", "k", "s", "k") == [None, None, None]
        # In a transaction, a SELECT among them: each key goes back to its own database.
        e.execute("MULTI")
        for argv in (("GET", "k"), ("SELECT", "1"), ("GET", "k"), ("SELECT", "0")):
            e.execute(*argv)
        assert e.execute("EXEC") == [None, "OK", b"db1", "OK"]
        with pytest.raises(Exception, match="READONLY"):
            e.execute("DEL", "k")
        # Nothing deleted, nothing logged: the primary's DEL is what removes them.
        assert e.strings[0] == {b"k": b"v"} and e.strings[1] == {b"k": b"db1"}
        assert e.expires[0] == {b"k": NOW + 10, b"s": NOW + 10} and e.dbs[0][b"s"].length == 1
        assert len(records) == logged
        primary.apply([b"SELECT", b"0"], 0)
        primary.apply([b"GET", b"k"], 0)  # (not a write: skipped, counted)
        assert e.strings[0] == {b"k": b"v"}  # the primary's session sees it, as it is
        primary.apply([b"DEL", b"k", b"s"], 0)
        assert not e.strings[0] and not e.dbs[0] and not e.expires[0]


def test_a_replicas_blocked_read_keeps_an_expired_stream_hidden_when_rerun() -> None:
    from streamkeep import Engine
    from streamkeep.replication.redis_commands import RedisApplier

    with Engine(clock=lambda: NOW) as e:
        e.read_only = "READONLY You can't write against a read only replica."
        primary = RedisApplier(e)

        def apply(*argv: str) -> None:
            primary.apply([a.encode() for a in argv], 0)

        apply("XADD", "s", "1-1", "f", "v")
        apply("PEXPIREAT", "s", str(NOW - 1))  # past: kept until the primary's DEL
        session = e.primary_session()
        session.from_primary = False  # a client's connection
        woken: list[object] = []
        waiter, _lsn = e.submit(session, (b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"),
                                notify=woken.append)
        assert not woken
        apply("XADD", "s", "2-1", "f", "v")  # re-run: the stream is still expired here
        assert not woken and e.dbs[0][b"s"].length == 2
        apply("DEL", "s")
        apply("XADD", "s", "3-1", "f", "v")  # a new stream, no TTL: the read gets it
        assert woken and [entry[0] for entry in dict(waiter.result.items)[b"s"]] == [b"3-1"]


@pytest.mark.parametrize("effect, key", [
    ([b"XADD", b"s", b"1-1", b"f", b"v"], b"s"),
    ([b"SET", b"k", b"v"], b"k"),
    ([b"DEL", b"a"], b"a"),
    ([b"DEL", b"a", b"b"], None),  # (several keys)
    ([b"RENAME", b"a", b"b"], None),
    ([b"XGROUP", b"CREATE", b"s", b"g", b"$"], b"s"),  # (a subcommand's key)
    ([b"XGROUP", b"HELP"], None),
    ([b"FLUSHDB"], None),
    ([b"SELECT", b"1"], None),
])
def test_single_key_names_an_effects_one_key(effect, key):
    from streamkeep.engine.exec.keys import single_key

    for _ in range(2):  # (the second time from what the first kept)
        assert single_key(effect) == key
        assert single_key(tuple(effect)) == key  # (a replayed record's)
    assert single_key([b"XADD", b"s", b"1-1", b"f", b"v"]) == b"s"  # (after another name)
    assert single_key(effect) == key
