"""The set commands (engine.commands.sets): replies, errors, encodings, effects (and their replay
to the same state, encodings included), keyspace events, WRONGTYPE, RESP3 set replies, SPOP
replayed exactly on a replica, bounded counts."""

from __future__ import annotations

import random

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import RespSet
from tests.support.effects_util import Recorded, argv_bytes


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


def enc(e: Engine, key: str) -> bytes:
    return e.execute("OBJECT", "ENCODING", key)


# --- the frameworks' commands first --------------------------------------------------------------


def test_worker_registry_commands(rec: Recorded) -> None:
    assert rec("SADD", "workers", "w1", "w2", "w1") == 2
    assert rec("SCARD", "workers") == 2
    assert rec("SISMEMBER", "workers", "w1") == 1
    assert rec("SISMEMBER", "workers", "w9") == 0
    assert rec("SISMEMBER", "nokey", "w1") == 0
    assert rec("SMEMBERS", "workers") == [b"w1", b"w2"]  # a listpack: insertion order
    assert rec("SMISMEMBER", "workers", "w2", "w9") == [1, 0]
    assert rec("SMISMEMBER", "nokey", "a", "b") == [0, 0]
    assert rec("SREM", "workers", "w1", "w9") == 1
    assert rec("SREM", "nokey", "w1") == 0
    assert rec("SREM", "workers", "w2") == 1
    assert rec("EXISTS", "workers") == 0  # emptied: deleted
    assert rec("SMEMBERS", "workers") == []
    assert rec("SCARD", "workers") == 0
    rec.assert_replays()


def test_encodings_follow_redis(rec: Recorded) -> None:
    e = rec.engine
    rec("SADD", "i", "3", "1", "2")
    assert enc(e, "i") == b"intset"
    assert rec("SMEMBERS", "i") == [b"1", b"2", b"3"]
    rec("SADD", "i", "x")
    assert enc(e, "i") == b"listpack"
    rec("SADD", "h", *[f"m{i}" for i in range(129)])
    assert enc(e, "h") == b"hashtable"
    rec("SADD", "l", "a" * 65)
    assert enc(e, "l") == b"hashtable"
    rec("SADD", "n", *[str(i) for i in range(513)])
    assert enc(e, "n") == b"hashtable"
    rec("CONFIG", "SET", "set-max-intset-entries", "2")
    rec("SADD", "small", "1", "2")
    assert enc(e, "small") == b"intset"
    rec("SADD", "small", "3")
    assert enc(e, "small") == b"hashtable"  # past the intset limit: a hashtable, as Redis
    rec("CONFIG", "SET", "set-max-intset-entries", "512")
    assert rec("CONFIG", "GET", "set-max-listpack-*") == [
        b"set-max-listpack-entries", b"128", b"set-max-listpack-value", b"64"]
    rec.assert_replays()


def test_wrongtype(rec: Recorded) -> None:
    rec("SET", "str", "v")
    rec("XADD", "st", "1-1", "f", "v")
    rec("SADD", "s", "a")
    wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for key in ("str", "st"):
        for argv in (("SADD", key, "a"), ("SREM", key, "a"), ("SMEMBERS", key),
                     ("SISMEMBER", key, "a"), ("SMISMEMBER", key, "a"), ("SCARD", key),
                     ("SPOP", key), ("SPOP", key, "2"), ("SRANDMEMBER", key),
                     ("SRANDMEMBER", key, "2"), ("SINTER", "s", key), ("SUNION", key),
                     ("SDIFF", "s", key), ("SINTERCARD", "2", "s", key), ("SSCAN", key, "0"),
                     ("SINTERSTORE", "d", "s", key), ("SMOVE", key, "s", "a"),
                     ("SMOVE", "s", key, "a")):
            assert rec.err(*argv) == wrong, argv
    assert rec("SMOVE", "nokey", "str", "a") == 0  # a missing source: no type check
    assert rec("SINTER", "nokey", "s") == []


def test_spop_and_srandmember_counts(rec: Recorded) -> None:
    rec("SADD", "s", *[str(i) for i in range(20)])
    assert rec.err("SPOP", "s", "-1") == "ERR value is out of range, must be positive"
    assert rec.err("SPOP", "s", "x") == "ERR value is out of range, must be positive"
    assert rec.err("SPOP", "s", "1", "2") == "ERR syntax error"
    assert rec.err("SRANDMEMBER", "s", "1", "2") == "ERR syntax error"
    assert rec.err("SRANDMEMBER", "s", "x") == "ERR value is not an integer or out of range"
    assert rec.err("SRANDMEMBER", "s", "-9223372036854775808") == (
        "ERR value is out of range, value must between -9223372036854775807 and "
        "9223372036854775807")
    assert rec("SPOP", "s", "0") == []
    assert rec("SPOP", "nokey") is None
    assert rec("SPOP", "nokey", "3") == []
    assert rec("SRANDMEMBER", "nokey") is None
    assert rec("SRANDMEMBER", "nokey", "3") == []
    assert rec("SRANDMEMBER", "s", "0") == []
    assert len(rec("SRANDMEMBER", "s", "-50")) == 50
    picks = rec("SRANDMEMBER", "s", "7")
    assert len(set(picks)) == 7
    assert sorted(rec("SRANDMEMBER", "s", "100"), key=int) == [str(i).encode()
                                                               for i in range(20)]
    popped = rec("SPOP", "s", "5")
    assert len(set(popped)) == 5 and rec("SCARD", "s") == 15
    assert not set(popped) & set(rec("SMEMBERS", "s"))
    rest = rec("SPOP", "s", "100")
    assert len(rest) == 15 and rec("EXISTS", "s") == 0
    rec.assert_replays()


def test_smove(rec: Recorded) -> None:
    e = rec.engine
    rec("SADD", "a", "1", "2")
    assert rec("SMOVE", "a", "a", "1") == 1
    assert rec("SMOVE", "a", "a", "9") == 0
    assert rec("SMOVE", "a", "b", "9") == 0
    assert rec.effects("SMOVE", "a", "b", "1") == (1, [[b"SMOVE", b"a", b"b", b"1"]])
    assert enc(e, "b") == b"intset"
    rec("SADD", "b", "2")
    assert rec("SMOVE", "a", "b", "2") == 1  # already there: removed from a only
    assert rec("EXISTS", "a") == 0
    assert rec("SMEMBERS", "b") == [b"1", b"2"]
    rec.assert_replays()


def test_algebra(rec: Recorded) -> None:
    e = rec.engine
    rec("SADD", "a", "1", "2", "3", "4")
    rec("SADD", "b", "3", "4", "5")
    rec("SADD", "c", "x", "3", "4")
    assert rec("SINTER", "a", "b") == [b"3", b"4"]
    assert rec("SINTER", "a", "nokey") == []
    assert rec("SINTERCARD", "2", "a", "b") == 2
    assert rec("SINTERCARD", "2", "a", "b", "LIMIT", "1") == 1
    assert rec("SINTERCARD", "2", "a", "nokey") == 0
    assert rec.err("SINTERCARD", "0", "a") == "ERR numkeys should be greater than 0"
    assert rec.err("SINTERCARD", "x", "a") == "ERR numkeys should be greater than 0"
    assert rec.err("SINTERCARD", "3", "a", "b") == (
        "ERR Number of keys can't be greater than number of args")
    assert rec.err("SINTERCARD", "1", "a", "LIMIT", "-1") == "ERR LIMIT can't be negative"
    assert rec.err("SINTERCARD", "1", "a", "LIMIT") == "ERR syntax error"
    assert rec("SUNION", "a", "b", "nokey") == [b"1", b"2", b"3", b"4", b"5"]
    assert rec("SDIFF", "a", "b") == [b"1", b"2"]
    assert rec("SDIFF", "a", "a") == []
    assert rec("SDIFF", "nokey", "a") == []
    assert rec("SINTERSTORE", "d", "c", "a") == 2
    assert enc(e, "d") == b"intset"  # every member an integer: back to an intset
    assert rec("SUNIONSTORE", "u", "a", "c") == 5
    assert enc(e, "u") == b"listpack"
    assert rec("SDIFFSTORE", "f", "a", "b") == 2
    assert rec("SMEMBERS", "f") == [b"1", b"2"]
    rec("SET", "str", "v")
    rec("EXPIRE", "u", "100")
    assert rec("SUNIONSTORE", "str", "a") == 4  # replaces a string
    assert rec("TYPE", "str") == "set"
    assert rec("SINTERSTORE", "u", "a", "nokey") == 0
    assert rec("EXISTS", "u") == 0
    assert rec.effects("SDIFFSTORE", "none", "nokey") == (0, [])
    rec.assert_replays()


def test_sscan(rec: Recorded) -> None:
    rec("SADD", "small", "a", "b", "c")
    assert rec("SSCAN", "small", "0") == [b"0", [b"a", b"b", b"c"]]
    assert rec("SSCAN", "small", "0", "MATCH", "b*") == [b"0", [b"b"]]
    assert rec("SSCAN", "nokey", "0", "BOGUS") == [b"0", []]
    assert rec.err("SSCAN", "small", "x") == "ERR invalid cursor"
    assert rec.err("SSCAN", "small", "-1") == "ERR invalid cursor"  # 8.x's string2ull
    assert rec.err("SSCAN", "small", "0", "COUNT", "0") == "ERR syntax error"
    assert rec.err("SSCAN", "small", "0", "NOVALUES") == (
        "ERR NOVALUES option can only be used in HSCAN")
    members = {f"m{i}".encode() for i in range(1000)}
    rec("SADD", "big", *members)
    seen: set[bytes] = set()
    cursor = b"0"
    rounds = 0
    while True:
        cursor, page = rec("SSCAN", "big", cursor, "COUNT", "50")
        seen.update(page)
        rounds += 1
        if rounds == 5:  # members come and go meanwhile
            rec("SADD", "big", *[f"n{i}" for i in range(3000)])
            rec("SREM", "big", *[f"n{i}" for i in range(0, 3000, 2)])
        if cursor == b"0":
            break
    assert members <= seen
    assert rounds > 5


# --- effects and replay --------------------------------------------------------------------------


def test_effects(rec: Recorded) -> None:
    assert rec.effects("SADD", "s", "a", "b", "a") == (2, [[b"SADD", b"s", b"a", b"b", b"a"]])
    assert rec.effects("SADD", "s", "a") == (0, [])
    assert rec.effects("SREM", "s", "x", "a") == (1, [[b"SREM", b"s", b"a"]])
    assert rec.effects("SREM", "s", "x") == (0, [])
    member = rec("SRANDMEMBER", "s")
    assert rec.effects("SRANDMEMBER", "s", "-3")[1] == []
    reply, effects = rec.effects("SPOP", "s")
    assert reply == member == b"b" and effects == [[b"SREM", b"s", b"b"]]
    rec("SADD", "s", *[str(i) for i in range(3000)])
    reply, effects = rec.effects("SPOP", "s", "2500")
    assert [len(e) - 2 for e in effects] == [1024, 1024, 452]
    assert all(e[:2] == [b"SREM", b"s"] for e in effects)
    assert sorted(m for e in effects for m in e[2:]) == sorted(reply)
    assert rec.effects("SPOP", "s", "600")[1] == [[b"DEL", b"s"]]
    rec.assert_replays()


def test_spop_replays_exactly_on_a_replica() -> None:
    clock = [1000]
    primary = Engine(clock=lambda: clock[0])
    replica = Engine(clock=lambda: clock[0])
    primary.add_sink(replica.replay.apply)
    rng = random.Random(7)
    keys = ["i", "l", "h", "m"]
    for round_ in range(40):
        primary.execute("SADD", "i", *[str(rng.randrange(600)) for _ in range(rng.randrange(1, 40))])
        primary.execute("SADD", "l", *[f"v{rng.randrange(200)}" for _ in range(rng.randrange(1, 20))])
        primary.execute("SADD", "h", *[f"h{rng.randrange(5000)}" for _ in range(rng.randrange(100, 300))])
        primary.execute("SADD", "m", *[str(rng.randrange(100)) for _ in range(150)], "x")
        if round_ % 7 == 3:
            primary.execute("PEXPIRE", "h", "100000")
        for key in keys:
            size = primary.execute("SCARD", key)
            argv = ("SPOP", key) if rng.random() < 0.2 else (
                "SPOP", key, str(rng.choice([1, 2, size // 2, size - 3, size - 1, size + 1])))
            if argv[-1].startswith("-"):
                continue
            primary.execute(*argv)
            clock[0] += 1
            assert primary.digest() == replica.digest(), argv
            for k in keys:
                assert (primary.execute("EXISTS", k) and enc(primary, k)) == (
                    replica.execute("EXISTS", k) and enc(replica, k)), (argv, k)
                assert primary.execute("PEXPIRETIME", k) == replica.execute("PEXPIRETIME", k)


def test_spop_hashtable_survivors_become_a_listpack() -> None:
    clock = [1000]
    primary = Engine(clock=lambda: clock[0])
    replica = Engine(clock=lambda: clock[0])
    primary.add_sink(replica.replay.apply)
    primary.execute("SADD", "h", *[f"m{i}" for i in range(600)])
    primary.execute("PEXPIRE", "h", "50000")
    logged: list[list[bytes]] = []
    reply, _ = primary.submit(primary.session, argv_bytes(("SPOP", "h", "590")), logged)
    assert len(reply.items) == 590 and enc(primary, "h") == b"listpack"
    assert [x[0] for x in logged] == [b"RESTORE", b"PEXPIREAT"]
    assert enc(replica, "h") == b"listpack"
    assert replica.execute("SMEMBERS", "h") == primary.execute("SMEMBERS", "h")
    assert replica.execute("PEXPIRETIME", "h") == primary.execute("PEXPIRETIME", "h") == 51000
    assert replica.digest() == primary.digest()


def test_replay_of_every_write() -> None:
    clock = [1000]
    primary = Engine(clock=lambda: clock[0])
    replica = Engine(clock=lambda: clock[0])
    primary.add_sink(replica.replay.apply)
    script = [
        ("SADD", "a", "1", "2", "3"), ("SADD", "b", "x", "2", "3"),
        ("SADD", "big", *[f"k{i}" for i in range(200)]), ("SREM", "big", "k1"),
        ("SADD", "a", *["1"] * 600),  # a conversion without a new member
        ("SMOVE", "a", "c", "1"), ("SMOVE", "b", "c", "x"),
        ("SINTERSTORE", "d", "a", "b"), ("SUNIONSTORE", "e", "a", "b", "big"),
        ("SDIFFSTORE", "f", "big", "b"), ("SDIFFSTORE", "f", "a", "a"),
        ("SPOP", "a"), ("SPOP", "big", "3"), ("SPOP", "big", "190"),
        ("SET", "s", "v"), ("SUNIONSTORE", "s", "b"), ("SREM", "c", "1", "x"),
    ]
    for argv in script:
        primary.execute(*argv)
        clock[0] += 1
        assert primary.digest() == replica.digest(), argv
        for key in ("a", "b", "c", "d", "e", "f", "big", "s"):
            ours = primary.execute("EXISTS", key) and enc(primary, key)
            assert ours == (replica.execute("EXISTS", key) and enc(replica, key)), (argv, key)
    assert enc(primary, "a") == b"hashtable"


# --- events and RESP3 ----------------------------------------------------------------------------


def _events(sub: object) -> list[bytes]:
    found = []
    while (message := sub.get_message(0)) is not None:  # type: ignore[attr-defined]
        if message["type"] == "pmessage":
            found.append(message["channel"].rsplit(b":", 1)[1])
    return found


def test_events() -> None:
    e = Engine()
    e.execute("CONFIG", "SET", "notify-keyspace-events", "KEAnoc")
    sub = e.psubscribe("__keyevent@*")
    e.execute("SADD", "s", "a", "b", "c")
    e.execute("SADD", "s", "a")
    e.execute("SREM", "s", "nope")
    e.execute("SREM", "s", "a")
    e.execute("SMOVE", "s", "t", "b")
    assert _events(sub) == [b"new", b"sadd", b"srem", b"srem", b"new", b"sadd"]
    e.execute("SPOP", "s")
    assert _events(sub) == [b"spop", b"del"]
    e.execute("SADD", "s", "1", "2")
    e.execute("SPOP", "s", "5")
    assert _events(sub) == [b"new", b"sadd", b"spop", b"del"]
    e.execute("SMOVE", "t", "u", "b")
    assert _events(sub) == [b"srem", b"del", b"new", b"sadd"]
    e.execute("SET", "d", "v")
    e.execute("SUNIONSTORE", "d", "u")
    e.execute("SINTERSTORE", "d", "u", "nokey")
    e.execute("SDIFFSTORE", "n", "u")
    assert _events(sub) == [b"new", b"set", b"overwritten", b"type_changed", b"sunionstore",
                            b"del", b"new", b"sdiffstore"]
    e.execute("SINTERSTORE", "n", "u")
    assert _events(sub) == [b"overwritten", b"sinterstore"]
    sub.close()


def test_resp3_set_replies() -> None:
    e = Engine()
    s = Session()

    class Client:
        protocol = 3

        def reply_budget(self) -> int:
            return 0

        def elements_budget(self) -> int:
            return 0

    s.client = Client()  # type: ignore[assignment]
    e.execute("SADD", "s", "a", "b")
    for argv in (("SMEMBERS", "s"), ("SMEMBERS", "nokey"), ("SINTER", "s"), ("SUNION", "s"),
                 ("SDIFF", "s"), ("SPOP", "s", "1")):
        reply, _ = e.submit(s, argv_bytes(argv))
        assert isinstance(reply, RespSet), argv
    reply, _ = e.submit(s, argv_bytes(("SRANDMEMBER", "s", "2")))
    assert isinstance(reply, list)


def _budgeted(budget: int) -> Session:
    """A session whose connection's output limit leaves `budget` bytes for a reply."""
    s = Session()

    class Client:
        protocol = 2
        addr = "127.0.0.1:1"  # (SLOWLOG's, for a slow call)

        def reply_budget(self) -> int:
            return budget

        def elements_budget(self) -> int:
            return budget

    s.client = Client()  # type: ignore[assignment]
    return s


def test_a_negative_count_makes_no_pick_past_the_output_limit() -> None:
    """SRANDMEMBER key -count to a connection with 1 MiB of budget: a count whose picks cannot
    fit (even at a bulk string's least bytes each) is cut before a pick is made (its encoding
    closes the connection: nothing of it was allocated, where the picks that budget could hold
    were made first); picks that fit are all made, and their reply fits; one that fits by count
    but not by its members' bytes is cut as they are weighed; the embedded engine (no
    connection, no limit) makes every pick, as Redis does."""
    import tracemalloc

    from streamkeep.engine.wire.reply_encoder import OutputLimitReached, encode_reply

    budget = 1 << 20
    e = Engine()
    e.execute("SADD", "s", "a", "b")
    s = _budgeted(budget)
    tracemalloc.start()
    try:
        reply, _ = e.submit(s, argv_bytes(("SRANDMEMBER", "s", "-9223372036854775807")))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < budget // 16, peak  # (the picks the budget could hold: 2 MiB of list)
    assert len(reply) == 9223372036854775807
    with pytest.raises(OutputLimitReached):
        encode_reply(reply)
    fits = budget // len(b"$1\r\na\r\n")  # every pick of "a" or "b" takes 7 bytes
    reply, _ = e.submit(s, argv_bytes(("SRANDMEMBER", "s", str(-fits))))
    assert type(reply) is list and len(reply) == fits and set(reply) == {b"a", b"b"}
    assert len(encode_reply(reply)) <= budget + 16  # (+ the array's header)
    reply, _ = e.submit(s, argv_bytes(("SRANDMEMBER", "s", str(-(budget // 6)))))
    with pytest.raises(OutputLimitReached):
        encode_reply(reply)
    assert len(e.execute("SRANDMEMBER", "s", str(-(budget // 6)))) == budget // 6


def test_sinter_walks_the_smallest_set(rec: Recorded) -> None:
    rec("SADD", "huge", *[str(i) for i in range(20000)])
    rec("SADD", "tiny", "5", "19999", "x")
    assert rec("SINTER", "huge", "tiny") == [b"5", b"19999"]
    assert rec("SINTERCARD", "2", "huge", "tiny") == 2
    rec("SET", "x", "1")
    with pytest.raises(ReplyError):
        rec("SINTER", "huge", "x")
