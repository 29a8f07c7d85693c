"""Differential tests of the sorted set commands against the real redis-server (7.0.15): every
command, its options and its error lines, on listpack and skiplist sets, missing keys and keys
of other types, plus a random sequence of writes compared reply by reply and state by state.

Redis 7.0 prints a score with %.17g, 8.x with d2string's shortest round-trip text (what
streamkeep sends; its unit tests assert that text): replies that hold scores are compared
through `num`, which reads every number-like bulk string as a double. What 7.0 lacks (ZRANK
WITHSCORE, 8.x's events) is tested in tests/engine/commands/test_zsets.py.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, reset_redis_config
from tests.support.server_util import start_server

_NUMBER = re.compile(rb"^[+-]?(inf|(\d+\.?\d*|\.\d+)(e[+-]?\d+)?)$", re.I)


def num(reply: Any) -> Any:
    """Score texts read as doubles (both sides alike), whatever the nesting."""
    if isinstance(reply, list):
        return [num(x) for x in reply]
    if isinstance(reply, bytes) and _NUMBER.match(reply):
        return float(reply)
    return reply


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    redis_raw.execute("CONFIG", "SET", "zset-max-listpack-entries", "128")
    redis_raw.execute("CONFIG", "SET", "zset-max-listpack-value", "64")
    yield Both(backend(Engine(clock=WallClock())), redis_raw)
    redis_raw.execute("CONFIG", "SET", "zset-max-listpack-entries", "128")


def run(both: Both, *commands: tuple[Any, ...]) -> None:
    for argv in commands:
        both(*argv, normalise=num)


def fill(both: Both, key: str, count: int) -> None:
    """A set of `count` members m000.. with scores 0, 0.5, 1, ... (skiplist past 128)."""
    pairs = [x for i in range(count) for x in (str(i / 2), f"m{i:03d}")]
    both("ZADD", key, *pairs)


SCORES = ["1", "-1", "0", "-0", "0.1", "1e3", "0x10", "inf", "-inf", "+inf", "nan", "", " 1",
          "1 ", "abc", "1e5000", "1.5e-300", "3.14159265358979323846"]


def test_zadd_every_option_and_error(both):
    run(both, ("SET", "str", "v"), ("XADD", "s", "1-1", "f", "v"))
    for score in SCORES:
        run(both, ("ZADD", "z", score, "a"), ("ZSCORE", "z", "a"), ("ZINCRBY", "z", score, "b"))
    run(both,
        ("ZADD", "z", "NX", "5", "a", "6", "n"), ("ZADD", "z", "XX", "5", "a", "6", "x"),
        ("ZADD", "z", "XX", "CH", "7", "a", "8", "x"), ("ZADD", "z", "GT", "CH", "1", "a"),
        ("ZADD", "z", "GT", "CH", "100", "a"), ("ZADD", "z", "LT", "CH", "1", "a"),
        ("ZADD", "z", "XX", "GT", "2", "a"), ("ZADD", "z", "INCR", "1", "a"),
        ("ZADD", "z", "NX", "INCR", "1", "a"), ("ZADD", "z", "XX", "INCR", "1", "zz"),
        ("ZADD", "z", "GT", "INCR", "-1", "a"), ("ZADD", "z", "nx", "xx", "1", "a"),
        ("ZADD", "z", "GT", "LT", "1", "a"), ("ZADD", "z", "GT", "NX", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a", "2", "b"), ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"),
        ("ZADD", "z", "CH"), ("ZADD", "z", "x", "a", "1", "b"), ("ZADD", "nokey", "XX", "1", "a"),
        ("EXISTS", "nokey"), ("ZADD", "str", "1", "a"), ("ZADD", "s", "1", "a"),
        ("ZADD", "str", "x", "a"), ("ZADD", "z", "inf", "i"), ("ZINCRBY", "z", "-inf", "i"),
        ("ZADD", "z", "INCR", "-inf", "i"), ("ZSCORE", "z", "i"), ("ZINCRBY", "z", "1"),
        ("ZINCRBY", "str", "1", "a"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZADD", "z", "1", "a", "1", "a", "2", "a"), ("ZSCORE", "z", "a"),
        ("ZADD", "z", "CH", "2", "a", "3", "a"), ("ZCARD", "z"), ("ZCARD", "nokey"),
        ("ZCARD", "str"), ("ZMSCORE", "z", "a", "nope", "b"), ("ZMSCORE", "nokey", "a"),
        ("ZMSCORE", "str", "a"), ("ZSCORE", "nokey", "a"), ("ZSCORE", "str", "a"),
        ("OBJECT", "ENCODING", "z"))


def test_zrem_and_deletion(both):
    run(both, ("SET", "str", "v"), ("ZADD", "z", "1", "a", "2", "b", "3", "c"),
        ("ZREM", "z", "a", "a", "x"), ("ZREM", "z", "b", "c", "d"), ("EXISTS", "z"),
        ("ZREM", "z", "a"), ("ZREM", "str", "a"), ("ZREM", "z"))


RANGES = [("0", "-1"), ("1", "2"), ("-2", "-1"), ("5", "1"), ("-100", "100"), ("x", "1"),
          ("0", "9223372036854775807"), ("-9223372036854775808", "0")]
SCORE_RANGES = [("-inf", "+inf"), ("(1", "3"), ("1", "(3"), ("(1", "(1"), ("3", "1"), ("x", "1"),
                ("1", "nan"), ("", "5"), ("(", "5"), ("1e5000", "inf"), ("-0", "0")]
LEX_RANGES = [("-", "+"), ("[b", "(d"), ("(b", "[d"), ("+", "-"), ("b", "c"), ("[", "+"),
              ("-", "[c"), ("(a", "(a")]


@pytest.mark.parametrize("size", [5, 200])
def test_range_reads(both, size):
    fill(both, "z", size)
    run(both, ("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e"), ("SET", "str", "v"))
    for start, stop in RANGES:
        for extra in ((), ("WITHSCORES",), ("REV",), ("REV", "WITHSCORES"), ("LIMIT", "0", "1")):
            run(both, ("ZRANGE", "z", start, stop, *extra))
        run(both, ("ZREVRANGE", "z", start, stop), ("ZREVRANGE", "z", start, stop, "WITHSCORES"),
            ("ZREMRANGEBYRANK", "nokey", start, stop))
    for low, high in SCORE_RANGES:
        for limit in ((), ("LIMIT", "1", "2"), ("LIMIT", "0", "-1"), ("LIMIT", "-1", "2"),
                      ("LIMIT", "1000", "1")):
            run(both, ("ZRANGE", "z", low, high, "BYSCORE", *limit),
                ("ZRANGE", "z", high, low, "BYSCORE", "REV", "WITHSCORES", *limit),
                ("ZRANGEBYSCORE", "z", low, high, "WITHSCORES", *limit),
                ("ZREVRANGEBYSCORE", "z", high, low, *limit))
        run(both, ("ZCOUNT", "z", low, high), ("ZCOUNT", "nokey", low, high))
    for low, high in LEX_RANGES:
        for limit in ((), ("LIMIT", "1", "2"), ("LIMIT", "0", "-1")):
            run(both, ("ZRANGE", "lex", low, high, "BYLEX", *limit),
                ("ZRANGE", "lex", high, low, "BYLEX", "REV", *limit),
                ("ZRANGEBYLEX", "lex", low, high, *limit), ("ZREVRANGEBYLEX", "lex", high, low,
                                                            *limit))
        run(both, ("ZLEXCOUNT", "lex", low, high))
    run(both,
        ("ZRANGE", "z", "0", "1", "LIMIT", "0", "1"), ("ZRANGE", "lex", "-", "+", "BYLEX",
                                                         "WITHSCORES"),
        ("ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"), ("ZRANGE", "z", "0", "1", "REV", "REV"),
        ("ZRANGE", "z", "0", "1", "LIMIT", "0"), ("ZRANGE", "z", "0", "1", "LIMIT", "x", "1"),
        ("ZRANGE", "z", "0", "1", "FOO"), ("ZRANGEBYSCORE", "z", "0", "1", "REV"),
        ("ZRANGEBYSCORE", "z", "0", "1", "BYSCORE"), ("ZRANGEBYLEX", "lex", "-", "+", "WITHSCORES"),
        ("ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1"), ("ZRANGE", "str", "0", "1"),
        ("ZRANGE", "nokey", "0", "1"), ("ZRANGE", "z", "0"), ("ZRANK", "z", "m001"),
        ("ZREVRANK", "z", "m001"), ("ZRANK", "z", "nope"), ("ZRANK", "nokey", "a"),
        ("ZRANK", "str", "a"), ("ZCOUNT", "str", "0", "1"), ("ZLEXCOUNT", "str", "-", "+"),
        ("ZLEXCOUNT", "lex", "a", "b"), ("ZCOUNT", "z", "a", "b"))


@pytest.mark.parametrize("size", [10, 200])
def test_remove_ranges(both, size):
    run(both, ("SET", "str", "v"))
    for low, high in SCORE_RANGES:
        fill(both, "z", size)
        run(both, ("ZREMRANGEBYSCORE", "z", low, high), ("ZCARD", "z"))
    for start, stop in RANGES:
        fill(both, "z", size)
        run(both, ("ZREMRANGEBYRANK", "z", start, stop), ("ZRANGE", "z", "0", "3"))
    for low, high in LEX_RANGES:
        run(both, ("ZADD", "lex", "0", "a", "0", "b", "0", "c", "0", "d"),
            ("ZREMRANGEBYLEX", "lex", low, high), ("ZRANGE", "lex", "0", "-1"))
    run(both, ("ZREMRANGEBYSCORE", "str", "0", "1"), ("ZREMRANGEBYRANK", "str", "0", "1"),
        ("ZREMRANGEBYLEX", "str", "-", "+"), ("ZREMRANGEBYSCORE", "nokey", "x", "1"),
        ("ZREMRANGEBYRANK", "z", "0", "-1"), ("EXISTS", "z"), ("ZREMRANGEBYLEX", "lex", "-", "+"),
        ("EXISTS", "lex"))


def test_pops(both):
    fill(both, "z", 10)
    run(both, ("SET", "str", "v"),
        ("ZPOPMIN", "z"), ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "2"), ("ZPOPMAX", "z", "0"),
        ("ZPOPMIN", "z", "-1"), ("ZPOPMIN", "z", "x"), ("ZPOPMIN", "z", "1", "2"),
        ("ZPOPMIN", "nokey"), ("ZPOPMIN", "nokey", "0"), ("ZPOPMIN", "str"),
        ("ZPOPMAX", "z", "100"), ("EXISTS", "z"))
    fill(both, "a", 3)
    run(both,
        ("ZMPOP", "2", "nokey", "a", "MIN"), ("ZMPOP", "2", "nokey", "a", "MAX", "COUNT", "10"),
        ("ZMPOP", "1", "a", "MIN"), ("ZMPOP", "0", "a", "MIN"), ("ZMPOP", "-1", "a", "MIN"),
        ("ZMPOP", "x", "a", "MIN"), ("ZMPOP", "5", "a", "MIN"), ("ZMPOP", "1", "a", "LEFT"),
        ("ZMPOP", "1", "a", "MIN", "COUNT", "0"), ("ZMPOP", "1", "a", "MIN", "COUNT", "x"),
        ("ZMPOP", "1", "a", "MIN", "COUNT", "1", "COUNT", "1"), ("ZMPOP", "1", "a", "MIN", "FOO"),
        ("ZMPOP", "2", "str", "a", "MIN"), ("ZMPOP", "1", "a", "MIN", "COUNT"),
        ("BZPOPMIN", "nokey", "str", "0"), ("BZPOPMIN", "a", "x"), ("BZPOPMIN", "a", "-1"),
        ("BZPOPMIN", "a", "nan"),  # (1e300, inf: "out of range" in 8.x, "negative" in 7.0)
        ("BZMPOP", "x", "1", "a", "MIN"), ("BZMPOP", "0", "0", "a", "MIN"),
        ("BZMPOP", "0", "1", "a", "FOO"), ("BZMPOP", "x", "0", "a", "MIN"),
        ("BZMPOP", "-1", "1", "a", "FOO"))
    fill(both, "b", 3)
    run(both, ("BZPOPMIN", "nokey", "b", "0"), ("BZPOPMAX", "b", "0.01"),
        ("BZMPOP", "0", "2", "nokey", "b", "MAX", "COUNT", "5"), ("EXISTS", "b"),
        ("BZPOPMIN", "b", "0.01"), ("BZMPOP", "0.01", "1", "b", "MIN"))


def test_random_and_scan(both):
    fill(both, "z", 5)
    fill(both, "big", 300)
    run(both, ("SET", "str", "v"))
    for count in ("5", "10"):  # the whole set: in the order Redis walks it (highest first)
        run(both, ("ZRANDMEMBER", "z", count), ("ZRANDMEMBER", "z", count, "WITHSCORES"))
    for count in ("0", "1", "3"):
        ours, theirs = (side.execute("ZRANDMEMBER", "z", count) for side in (both.engine,
                                                                               both.redis))
        assert len(ours) == len(set(ours)) == len(theirs) and set(ours) <= set(
            both.redis.execute("ZRANGE", "z", "0", "-1"))
    for count in ("-1", "-7"):
        assert len(both.engine.execute("ZRANDMEMBER", "z", count)) == int(count[1:])
    run(both, ("ZRANDMEMBER", "nokey"), ("ZRANDMEMBER", "nokey", "5"), ("ZRANDMEMBER", "str"),
        ("ZRANDMEMBER", "z", "x"), ("ZRANDMEMBER", "z", "1", "FOO"),
        ("ZRANDMEMBER", "z", "1", "WITHSCORES", "x"),
        ("ZRANDMEMBER", "z", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"),
        ("ZRANDMEMBER", "z", "9223372036854775807", "WITHSCORES"),
        ("ZSCAN", "z", "0"), ("ZSCAN", "z", "0", "MATCH", "m00[12]"), ("ZSCAN", "z", "x"),
        ("ZSCAN", "z", "0", "COUNT", "0"), ("ZSCAN", "z", "0", "FOO", "1"),
        ("ZSCAN", "z", "0", "TYPE", "zset"), ("ZSCAN", "nokey", "0"), ("ZSCAN", "str", "0"),
        ("ZSCAN", "nokey", "0", "COUNT", "0"), ("ZSCAN", "nokey", "x"),
    )  # (a negative cursor: 7.0's strtoul takes it, 8.x's string2ull refuses it)
    for side in (both.engine, both.redis):
        cursor, seen = b"0", {}
        while True:
            cursor, page = side.execute("ZSCAN", "big", cursor, "COUNT", "50", "MATCH", "m1*")
            seen.update(zip(page[::2], map(float, page[1::2]), strict=False))
            if cursor == b"0":
                break
        assert seen == {f"m{i:03d}".encode(): i / 2 for i in range(100, 200)}


def test_algebra(both):
    run(both, ("ZADD", "a", "1", "x", "inf", "y", "3", "z", "-0", "w"),
        ("ZADD", "b", "2", "x", "-inf", "y", "0.1", "v"), ("SET", "str", "v"),
        ("XADD", "s", "1-1", "f", "v"))
    fill(both, "big", 200)
    for op in ("ZUNION", "ZINTER", "ZDIFF"):
        for extra in ((), ("WITHSCORES",), ("WEIGHTS", "2", "-1"), ("WEIGHTS", "0", "inf"),
                      ("AGGREGATE", "MIN", "WITHSCORES"), ("AGGREGATE", "max", "WITHSCORES"),
                      ("WEIGHTS", "1", "nan"), ("WEIGHTS", "1"), ("AGGREGATE", "AVG"),
                      ("AGGREGATE",), ("LIMIT", "1"), ("WITHSCORES", "WITHSCORES")):
            run(both, (op, "2", "a", "b", *extra), (op, "3", "a", "nokey", "b", *extra))
            run(both, (op + "STORE", "d", "2", "a", "b", *extra),
                ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("OBJECT", "ENCODING", "d"))
        run(both, (op, "0", "a"), (op, "-1", "a"), (op, "x", "a"), (op, "3", "a", "b"),
            (op, "2", "a", "str"), (op, "2", "s", "a"), (op, "1", "nokey"),
            (op, "2", "big", "a", "WITHSCORES"), (op + "STORE", "d", "2", "big", "b"),
            ("OBJECT", "ENCODING", "d"), ("ZCARD", "d"), (op + "STORE", "str", "1", "a"),
            ("TYPE", "str"), (op + "STORE", "d", "1", "nokey"), ("EXISTS", "d"),
            (op + "STORE", "d", "0", "a"), (op + "STORE", "d", "1", "a", "WITHSCORES"))
    run(both, ("ZINTERCARD", "2", "a", "b"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "1"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "0"), ("ZINTERCARD", "2", "a", "b", "LIMIT", "-1"),
        ("ZINTERCARD", "2", "a", "b", "LIMIT", "x"), ("ZINTERCARD", "1", "big", "LIMIT", "7"),
        ("ZINTERCARD", "0", "a"), ("ZINTERCARD", "2", "a", "str"),
        ("ZINTERCARD", "2", "a", "b", "WEIGHTS", "1", "1"), ("ZINTERCARD", "3", "a", "b"))


def test_rangestore(both):
    fill(both, "src", 200)
    run(both, ("SET", "str", "v"))
    for argv in (("0", "-1"), ("0", "9"), ("0", "9223372036854775807"), ("5", "1"),
                 ("(1", "10", "BYSCORE"), ("10", "(1", "BYSCORE", "REV", "LIMIT", "1", "3"),
                 ("-", "+", "BYLEX", "LIMIT", "0", "150"), ("0", "1", "WITHSCORES"),
                 ("0", "1", "LIMIT", "0", "1"), ("x", "1", "BYSCORE")):
        run(both, ("ZRANGESTORE", "dst", "src", *argv), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
            ("OBJECT", "ENCODING", "dst"))
    run(both, ("ZRANGESTORE", "dst", "nokey", "0", "-1"), ("EXISTS", "dst"),
        ("ZRANGESTORE", "dst", "str", "0", "-1"), ("ZRANGESTORE", "str", "src", "0", "1"),
        ("TYPE", "str"), ("ZRANGESTORE", "src", "src", "0", "4"), ("ZCARD", "src"))


def test_listpack_limits(both):
    for name, value in (("zset-max-listpack-entries", 4), ("zset-max-ziplist-value", 3)):
        assert both.redis.execute("CONFIG", "SET", name, str(value)) == "OK"
        both.engine.execute("CONFIG", "SET", name, str(value))
    run(both, ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("OBJECT", "ENCODING", "z"),
        ("ZADD", "z", "5", "e"), ("OBJECT", "ENCODING", "z"), ("ZADD", "y", "1", "abcd"),
        ("OBJECT", "ENCODING", "y"), ("ZUNIONSTORE", "u", "1", "z"), ("OBJECT", "ENCODING", "u"),
        ("ZRANGESTORE", "r", "z", "0", "1"), ("OBJECT", "ENCODING", "r"),
        ("ZADD", "w", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"),
        ("OBJECT", "ENCODING", "w"))
    both.redis.execute("CONFIG", "SET", "zset-max-listpack-value", "64")


def test_random_write_sequences(both):
    """~200 random writes over three keys, replies compared, then every key's content."""
    rng = random.Random(2024)
    members = ["a", "b", "c", "d", "e", "f"]
    keys = ["k1", "k2", "k3"]
    for _ in range(200):
        key = rng.choice(keys)
        score = rng.choice(["1", "2", "-1", "0.5", "inf", "-inf", "3", "-0"])
        argv = rng.choice([
            ("ZADD", key, *rng.choice([(), ("NX",), ("XX",), ("GT", "CH"), ("LT",), ("CH",)]),
             score, rng.choice(members), "2", rng.choice(members)),
            ("ZADD", key, "INCR", score, rng.choice(members)),
            ("ZINCRBY", key, score, rng.choice(members)),
            ("ZREM", key, rng.choice(members), rng.choice(members)),
            ("ZPOPMIN", key, str(rng.randint(0, 3))), ("ZPOPMAX", key),
            ("ZREMRANGEBYSCORE", key, "(0", "2"), ("ZREMRANGEBYRANK", key, "1", "-2"),
            ("ZREMRANGEBYLEX", key, "[b", "[d"),
            ("ZRANGESTORE", rng.choice(keys), key, "1", "-1"),
            ("ZUNIONSTORE", rng.choice(keys), "2", "k1", "k2", "AGGREGATE",
             rng.choice(["SUM", "MIN", "MAX"])),
            ("ZINTERSTORE", rng.choice(keys), "2", "k2", "k3", "WEIGHTS", "2", "-1"),
            ("ZDIFFSTORE", rng.choice(keys), "2", "k3", "k1"),
            ("ZMPOP", "3", *keys, rng.choice(["MIN", "MAX"]), "COUNT", "2"),
        ])
        run(both, argv)
    for key in keys:
        run(both, ("ZRANGE", key, "0", "-1", "WITHSCORES"), ("EXISTS", key))


def test_resp3_reply_shapes(redis_server):
    """Over RESP3 (redis-py, protocol 3): scores are doubles, WITHSCORES replies nested pairs,
    pops and ZMPOP as Redis nests them."""
    engine = Engine(clock=WallClock())
    handle = start_server(engine)
    ours = redis.Redis(host=handle.host, port=handle.port, protocol=3)
    theirs = redis.Redis(host=redis_server.host, port=redis_server.port, protocol=3)
    theirs.flushall()
    commands = [
        ("ZADD", "z", "0.5", "a", "2", "b", "inf", "c", "-0", "d"), ("ZSCORE", "z", "a"),
        ("ZMSCORE", "z", "a", "x"), ("ZINCRBY", "z", "1", "a"),
        ("ZADD", "z", "INCR", "1", "a"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
        ("ZRANGE", "z", "0", "-1"), ("ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"),
        ("ZREVRANGE", "z", "0", "1", "WITHSCORES"), ("ZRANDMEMBER", "z", "10", "WITHSCORES"),
        ("ZUNION", "1", "z", "WITHSCORES"), ("ZINTER", "1", "z", "WITHSCORES"),
        ("ZDIFF", "1", "z", "WITHSCORES"), ("ZSCAN", "z", "0"), ("ZPOPMIN", "z"),
        ("ZPOPMAX", "z", "1"), ("ZPOPMIN", "nokey", "1"), ("ZMPOP", "1", "z", "MIN"),
        ("ZMPOP", "1", "nokey", "MIN"), ("ZADD", "y", "1", "m"), ("BZPOPMIN", "y", "0"),
        ("BZPOPMAX", "y", "0.01"), ("ZADD", "y", "1", "m"), ("BZMPOP", "0", "1", "y", "MAX"),
        ("BZMPOP", "0.01", "1", "y", "MAX"), ("ZRANK", "nokey", "a"),
    ]
    try:
        for argv in commands:
            assert num(ours.execute_command(*argv)) == num(theirs.execute_command(*argv)), argv
    finally:
        ours.close()
        theirs.close()
        handle.stop()
