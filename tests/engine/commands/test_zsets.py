"""Sorted set commands on the embedded engine (engine.commands.zsets, zset_ranges, zset_algebra):
Redis 8.x's score text (d2string's shortest round-trip digits), effects (normalised, small,
replayed to the same state digest), keyspace events, WRONGTYPE, blocking pops, encodings."""

from __future__ import annotations

import contextlib
import random
import threading
import time

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import to_plain
from tests.support.effects_util import Recorded, argv_bytes


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


# --- replies and the 8.x score text --------------------------------------------------------------


def test_scores_print_as_redis_8(rec: Recorded) -> None:
    assert rec("ZADD", "z", "0.1", "a", "-0", "b", "1e300", "c", "inf", "d") == 4
    assert rec("ZSCORE", "z", "a") == b"0.1"
    assert rec("ZSCORE", "z", "b") == b"-0"
    assert rec("ZSCORE", "z", "c") == b"1e+300"
    assert rec("ZSCORE", "z", "d") == b"inf"
    assert rec("ZINCRBY", "z", "0.2", "a") == b"0.30000000000000004"
    assert rec("ZMSCORE", "z", "a", "nope") == [b"0.30000000000000004", None]
    assert rec("ZRANGE", "z", "0", "1", "WITHSCORES") == [b"b", b"-0", b"a",
                                                          b"0.30000000000000004"]


def test_zadd_options_and_errors(rec: Recorded) -> None:
    assert rec("ZADD", "z", "1", "a", "2", "b") == 2
    assert rec("ZADD", "z", "NX", "5", "a", "3", "c") == 1
    assert rec("ZADD", "z", "XX", "CH", "5", "a", "4", "d") == 1
    assert rec("ZADD", "z", "GT", "CH", "1", "a", "9", "b") == 1
    assert rec("ZADD", "z", "LT", "INCR", "1", "a") is None
    assert rec("ZADD", "z", "INCR", "-1", "a") == b"4"
    assert rec("ZADD", "nokey", "XX", "1", "a") == 0
    assert rec("EXISTS", "nokey") == 0
    assert rec.err("ZADD", "z", "NX", "XX", "1", "a") == \
        "ERR XX and NX options at the same time are not compatible"
    assert rec.err("ZADD", "z", "GT", "LT", "1", "a") == \
        "ERR GT, LT, and/or NX options at the same time are not compatible"
    assert rec.err("ZADD", "z", "INCR", "1", "a", "2", "b") == \
        "ERR INCR option supports a single increment-element pair"
    assert rec.err("ZADD", "z", "1", "a", "2") == "ERR syntax error"
    assert rec.err("ZADD", "z", "nan", "a") == "ERR value is not a valid float"
    rec("ZADD", "inf", "inf", "a")
    assert rec.err("ZINCRBY", "inf", "-inf", "a") == "ERR resulting score is not a number (NaN)"



def test_resp3_shapes() -> None:
    e = Engine()
    s = Session()
    e.execute("ZADD", "z", "1", "a", "2", "b")

    class Client:
        protocol = 3

        def reply_budget(self) -> int:
            return 0

        def elements_budget(self) -> int:
            return 0

    s.client = Client()  # type: ignore[assignment]
    reply, _ = e.submit(s, argv_bytes(("ZRANGE", "z", "0", "-1", "WITHSCORES")))
    assert to_plain(reply) == [[b"a", b"1"], [b"b", b"2"]]
    reply, _ = e.submit(s, argv_bytes(("ZPOPMIN", "z", "1")))
    assert to_plain(reply) == [[b"a", b"1"]]


# --- effects and replay --------------------------------------------------------------------------


def test_effects_are_normalised(rec: Recorded) -> None:
    assert rec.effects("ZADD", "z", "GT", "CH", "1", "a", "2", "b")[1] == [
        [b"ZADD", b"z", b"1", b"a", b"2", b"b"]]
    assert rec.effects("ZADD", "z", "NX", "5", "a")[1] == []  # nothing changed
    assert rec.effects("ZINCRBY", "z", "0.5", "a")[1] == [[b"ZADD", b"z", b"1.5", b"a"]]
    assert rec.effects("ZREM", "z", "x", "a")[1] == [[b"ZREM", b"z", b"a"]]
    rec("ZADD", "z", "3", "c", "4", "d")
    assert rec.effects("ZPOPMAX", "z", "2")[1] == [[b"ZREMRANGEBYRANK", b"z", b"1", b"2"]]
    assert rec.effects("ZPOPMIN", "z")[1] == [[b"ZREMRANGEBYRANK", b"z", b"0", b"0"]]
    assert rec("EXISTS", "z") == 0
    rec.assert_replays()


def test_random_writes_replay_to_the_same_state() -> None:
    rng = random.Random(7)
    rec = Recorded()
    members = [b"m%d" % i for i in range(40)]
    for _ in range(600):
        key = rng.choice([b"a", b"b", b"c"])
        score = rng.choice([b"1", b"2.5", b"-0", b"0.1", b"inf", b"-inf", b"%d" % rng.randint(-9, 9)])
        argv = rng.choice([
            [b"ZADD", key, *rng.choice([[], [b"NX"], [b"XX"], [b"GT"], [b"LT", b"CH"]]), score,
             rng.choice(members), b"3", rng.choice(members)],
            [b"ZINCRBY", key, score, rng.choice(members)],
            [b"ZREM", key, rng.choice(members), rng.choice(members)],
            [b"ZPOPMIN", key, b"%d" % rng.randint(1, 3)],
            [b"ZPOPMAX", key],
            [b"ZREMRANGEBYSCORE", key, b"(1", b"3"],
            [b"ZREMRANGEBYRANK", key, b"0", b"%d" % rng.randint(-3, 3)],
            [b"ZREMRANGEBYLEX", key, b"[m1", b"(m2"],
            [b"ZRANGESTORE", rng.choice([b"a", b"d"]), key, b"0", b"%d" % rng.randint(-1, 30)],
            [b"ZUNIONSTORE", b"d", b"2", b"a", b"b", b"WEIGHTS", b"2", b"-1"],
            [b"ZINTERSTORE", b"e", b"2", b"a", b"b", b"AGGREGATE", b"MAX"],
            [b"ZDIFFSTORE", b"c", b"2", b"a", b"b"],
            [b"ZMPOP", b"2", b"a", b"b", b"MAX", b"COUNT", b"2"],
        ])
        with contextlib.suppress(ReplyError):
            rec(*argv)
    rec.assert_replays()



def test_listpack_limits_follow_config() -> None:
    rec = Recorded()
    rec("CONFIG", "SET", "zset-max-listpack-entries", "2")
    rec("ZADD", "z", "1", "a", "2", "b")
    assert rec("OBJECT", "ENCODING", "z") == b"listpack"
    rec("ZADD", "z", "3", "c")
    assert rec("OBJECT", "ENCODING", "z") == b"skiplist"
    rec("CONFIG", "SET", "zset-max-ziplist-value", "3")
    rec("ZADD", "y", "1", "abcd")
    assert rec("OBJECT", "ENCODING", "y") == b"skiplist"


def test_wrongtype(rec: Recorded) -> None:
    rec("SET", "str", "v")
    rec("XADD", "s", "1-1", "f", "v")
    wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for key in ("str", "s"):
        for argv in (("ZADD", key, "1", "a"), ("ZSCORE", key, "a"), ("ZRANGE", key, "0", "1"),
                     ("ZPOPMIN", key), ("ZREM", key, "a"), ("ZCARD", key),
                     ("ZUNION", "1", key), ("ZRANGESTORE", "d", key, "0", "1"),
                     ("BZPOPMIN", key, "0"), ("ZRANDMEMBER", key), ("ZSCAN", key, "0")):
            assert rec.err(*argv) == wrong, argv



def test_zmpop_and_random(rec: Recorded) -> None:
    rec("ZADD", "b", "1", "x", "2", "y")
    assert rec("ZMPOP", "2", "a", "b", "MAX", "COUNT", "5") == [b"b", [[b"y", b"2"], [b"x", b"1"]]]
    assert rec("ZMPOP", "1", "a", "MIN") is None
    assert rec.err("ZMPOP", "0", "a", "MIN") == "ERR numkeys should be greater than 0"
    assert rec.err("ZMPOP", "1", "a", "MIN", "COUNT", "0") == "ERR count should be greater than 0"
    rec("ZADD", "r", "1", "x", "2", "y")
    assert rec.effects("ZRANDMEMBER", "r", "-5", "WITHSCORES")[1] == []
    assert sorted(rec("ZRANDMEMBER", "r", "5")) == [b"x", b"y"]
    assert len(rec("ZRANDMEMBER", "r", "-7")) == 7
    assert rec("ZSCAN", "r", "0") == [b"0", [b"x", b"1", b"y", b"2"]]


# --- keyspace events -----------------------------------------------------------------------------


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
    e.execute("ZADD", "z", "1", "a", "2", "b", "5", "c")
    e.execute("ZINCRBY", "z", "1", "a")
    e.execute("ZREM", "z", "nope")
    e.execute("ZREMRANGEBYSCORE", "z", "0", "2")
    e.execute("ZPOPMIN", "z", "5")
    assert _events(sub) == [b"new", b"zadd", b"zincr", b"zremrangebyscore", b"zpopmin", b"del"]
    e.execute("ZADD", "z", "1", "a")
    e.execute("SET", "d", "v")
    e.execute("ZUNIONSTORE", "d", "1", "z")
    e.execute("ZRANGESTORE", "d", "nokey", "0", "-1")
    assert _events(sub) == [b"new", b"zadd", b"new", b"set", b"overwritten", b"type_changed",
                            b"zunionstore", b"del"]
    sub.close()


# --- blocking ------------------------------------------------------------------------------------


def test_bzpopmin_served_by_zadd_from_another_session(rec: Recorded) -> None:
    reader = Session()
    waiter, _ = rec.engine.submit(reader, argv_bytes(("BZPOPMIN", "a", "b", "0")))
    assert isinstance(waiter, Waiter)
    rec("SET", "a", "not a zset")  # another type does not serve it
    assert waiter.result is None
    rec("DEL", "a")
    reply, effects = rec.effects("ZADD", "b", "1", "x", "2", "y")
    assert effects == [[b"ZADD", b"b", b"1", b"x", b"2", b"y"]]
    assert to_plain(waiter.result) == [b"b", b"x", b"1"]
    assert rec.records[-1].effects == [[b"ZREMRANGEBYRANK", b"b", b"0", b"0"]]
    assert rec("ZRANGE", "b", "0", "-1") == [b"y"]
    rec.assert_replays()


def test_bzmpop_first_come_first_served(rec: Recorded) -> None:
    first, second = Session(), Session()
    w1, _ = rec.engine.submit(first, argv_bytes(("BZMPOP", "0", "1", "k", "MAX", "COUNT", "2")))
    w2, _ = rec.engine.submit(second, argv_bytes(("BZPOPMAX", "k", "0")))
    rec("ZADD", "k", "1", "a", "2", "b", "3", "c")
    assert to_plain(w1.result) == [b"k", [[b"c", b"3"], [b"b", b"2"]]]
    assert to_plain(w2.result) == [b"k", b"a", b"1"]
    assert rec("EXISTS", "k") == 0
    rec.assert_replays()


def test_blocking_served_across_threads() -> None:
    e = Engine()
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(e.execute("BZPOPMIN", "q", "5")))
    thread.start()
    time.sleep(0.1)
    e.execute("ZADD", "q", "7", "job")
    thread.join(5)
    assert result == [[b"q", b"job", b"7"]]


def test_blocking_pops_answer_nil_in_multi_and_time_out(rec: Recorded) -> None:
    rec("MULTI")
    rec("BZPOPMIN", "k", "0")
    rec("BZMPOP", "0", "1", "k", "MIN")
    assert rec("EXEC") == [None, None]
    assert Engine().execute("BZPOPMAX", "k", "0.01") is None
    assert rec.err("BZPOPMIN", "k", "-1") == "ERR timeout is negative"
    assert rec.err("BZPOPMIN", "k", "x") == "ERR timeout is not a float or out of range"
    assert rec.err("BZPOPMIN", "k", "1e300") == "ERR timeout is out of range"


def test_zscan_returns_every_member_present_throughout(rec: Recorded) -> None:
    rec("ZADD", "z", *[x for i in range(2000) for x in (str(i), f"m{i:04d}")])
    assert rec("OBJECT", "ENCODING", "z") == b"skiplist"
    cursor, seen, added = b"0", set(), 0
    while True:
        cursor, page = rec("ZSCAN", "z", cursor, "COUNT", "10")
        seen.update(page[::2])
        assert all(score == (b"%d" % int(m[1:]) if m[:1] == b"m" else b"5000")
                   for m, score in zip(page[::2], page[1::2], strict=True))
        rec("ZPOPMIN", "z", "3")  # members leave and arrive while the scan runs
        rec("ZADD", "z", "5000", f"new{added}")
        added += 1
        if cursor == b"0":
            break
    survivors = set(rec("ZRANGE", "z", "0", "-1")) - {f"new{i}".encode() for i in range(added)}
    assert survivors <= seen
    _cursor, page = rec("ZSCAN", "z", "0", "MATCH", "m19*", "COUNT", "5000")
    assert sorted(page[::2]) == [f"m{i}".encode() for i in range(1900, 2000)]


def test_scripts_read_pairs_as_their_protocol_says(rec: Recorded) -> None:
    rec("ZADD", "z", "0.1", "a", "2", "b")
    flat = "return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')"
    assert rec("EVAL", flat, "1", "z") == [b"a", b"0.1", b"b", b"2"]
    assert rec("EVAL", "redis.setresp(3); " + flat, "1", "z") == [[b"a", 0.1], [b"b", 2.0]]
    assert rec.err("EVAL", "return redis.call('BZPOPMIN', KEYS[1], 0)", "1", "z").startswith(
        "ERR This Redis command is not allowed from script")
    assert rec("EVAL", "return redis.call('BZMPOP', 0, 1, 'nokey', 'MIN')", "1", "z") is None
