"""Differential tests of the hash commands against the real redis-server (7.0.15): HSET,
HSETNX, HGET, HMGET, HMSET, HDEL, HLEN, HSTRLEN, HEXISTS, HKEYS, HVALS, HGETALL, HINCRBY,
HINCRBYFLOAT, HRANDFIELD and HSCAN, their error lines, on listpack and hashtable hashes,
missing keys and keys of other types; replies compared byte for byte (a big hash's HGETALL,
HKEYS, HVALS as sets: its order is its table's on either side).

What 7.0 lacks (field expiry, HSCAN NOVALUES, 8.x's HINCRBYFLOAT propagation) is tested in
tests/engine/commands/test_hashes.py and test_hash_expiry.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, reset_redis_config


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    redis_raw.execute("CONFIG", "SET", "hash-max-listpack-entries", "512")
    redis_raw.execute("CONFIG", "SET", "hash-max-listpack-value", "64")
    yield Both(backend(Engine(clock=WallClock())), redis_raw)
    redis_raw.execute("CONFIG", "SET", "hash-max-listpack-entries", "512")
    redis_raw.execute("CONFIG", "SET", "hash-max-listpack-value", "64")


def run(both: Both, *commands: tuple[Any, ...]) -> None:
    for argv in commands:
        both(*argv)


def as_set(reply: Any) -> Any:
    return sorted(reply) if isinstance(reply, list) else reply


def as_pairs(reply: Any) -> Any:
    if not isinstance(reply, list):
        return reply
    return sorted(zip(reply[::2], reply[1::2], strict=True))


def test_writes_and_reads(both):
    run(both, ("SET", "str", "v"), ("XADD", "s", "1-1", "f", "v"))
    run(both,
        ("HSET", "h", "a", "1", "b", "2"), ("HSET", "h", "a", "3", "c", "4"),
        ("HSET", "h", "a"), ("HSET", "h", "a", "1", "b"), ("HSET", "h"),
        ("HMSET", "h", "d", "5", "e", "6"), ("HMSET", "h", "d"), ("HMSET", "h", "d", "5", "x"),
        ("HSETNX", "h", "a", "9"), ("HSETNX", "h", "f", "7"), ("HSETNX", "h", "f"),
        ("HGET", "h", "a"), ("HGET", "h", "nope"), ("HGET", "nokey", "a"), ("HGET", "h"),
        ("HMGET", "h", "a", "nope", "b"), ("HMGET", "nokey", "a", "b"), ("HMGET", "h"),
        ("HLEN", "h"), ("HLEN", "nokey"), ("HSTRLEN", "h", "a"), ("HSTRLEN", "h", "nope"),
        ("HSTRLEN", "nokey", "a"), ("HEXISTS", "h", "a"), ("HEXISTS", "h", "nope"),
        ("HEXISTS", "nokey", "a"), ("HKEYS", "h"), ("HVALS", "h"), ("HGETALL", "h"),
        ("HKEYS", "nokey"), ("HVALS", "nokey"), ("HGETALL", "nokey"),
        ("HDEL", "h", "a", "nope", "b"), ("HDEL", "h", "nope"), ("HDEL", "nokey", "a"),
        ("HDEL", "h"), ("HGETALL", "h"),
        ("HDEL", "h", "c", "d", "e", "f"), ("EXISTS", "h"),
        ("HSET", "h", "", ""), ("HGET", "h", ""), ("HGETALL", "h"),
        ("HSET", "h", "n", "123", "neg", "-5", "bin", "\x00\xff"), ("HGETALL", "h"),
        ("HSTRLEN", "h", "bin"))
    for argv in (("HSET", "{}", "a", "1"), ("HSETNX", "{}", "a", "1"), ("HGET", "{}", "a"),
                 ("HMGET", "{}", "a"), ("HMSET", "{}", "a", "1"), ("HDEL", "{}", "a"),
                 ("HLEN", "{}"), ("HSTRLEN", "{}", "a"), ("HEXISTS", "{}", "a"),
                 ("HKEYS", "{}"), ("HVALS", "{}"), ("HGETALL", "{}"),
                 ("HINCRBY", "{}", "a", "1"), ("HINCRBYFLOAT", "{}", "a", "1"),
                 ("HRANDFIELD", "{}"), ("HRANDFIELD", "{}", "2"), ("HSCAN", "{}", "0")):
        for key in ("str", "s"):
            both(*(key if a == "{}" else a for a in argv))


INCREMENTS = ["1", "-1", "0", "+1", "01", "1.0", "x", "", " 1", "9223372036854775807",
              "-9223372036854775808", "9223372036854775808"]
FLOATS = ["1", "-1.5", "0.1", "1e3", "inf", "-inf", "nan", "x", "", " 1", "1e5000",
          "0x10", "3.0e3", "1.5e-300", "5.0e3"]


def test_incr_every_case(both):
    run(both, ("HSET", "h", "s", "abc", "big", "9223372036854775807", "small",
               "-9223372036854775808", "f", "1.5", "sp", " 1", "z", "0"))
    for inc in INCREMENTS:
        run(both, ("HINCRBY", "h", "n", inc), ("HINCRBY", "h", "big", inc),
            ("HINCRBY", "h", "small", inc), ("HINCRBY", "h", "s", inc),
            ("HINCRBY", "h", "f", inc), ("HINCRBY", "h", "sp", inc))
    for inc in FLOATS:
        run(both, ("HINCRBYFLOAT", "h", "x", inc), ("HINCRBYFLOAT", "h", "s", inc),
            ("HINCRBYFLOAT", "h", "z", inc), ("HINCRBYFLOAT", "h", "big", inc),
            ("HINCRBYFLOAT", "h", "sp", inc))
    run(both, ("HINCRBY", "h", "n"), ("HINCRBYFLOAT", "h", "n"), ("HGETALL", "h"),
        ("HINCRBY", "new", "a", "5"), ("HINCRBYFLOAT", "new2", "a", "2.5"),
        ("HINCRBY", "new3", "a", "x"), ("EXISTS", "new3"), ("HGETALL", "new"),
        ("HGETALL", "new2"))


def test_randfield_errors_and_deterministic_cases(both):
    run(both, ("HSET", "h", "a", "1", "b", "2", "c", "3"))
    run(both,
        ("HRANDFIELD", "nokey"), ("HRANDFIELD", "nokey", "3"),
        ("HRANDFIELD", "nokey", "3", "WITHVALUES"), ("HRANDFIELD", "h", "0"),
        ("HRANDFIELD", "h", "0", "WITHVALUES"), ("HRANDFIELD", "h", "3"),
        ("HRANDFIELD", "h", "5", "WITHVALUES"), ("HRANDFIELD", "h", "x"),
        ("HRANDFIELD", "h", "1", "nope"), ("HRANDFIELD", "h", "1", "WITHVALUES", "x"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"),
        ("HRANDFIELD", "h", "9223372036854775807", "WITHVALUES"),
        ("HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"),
        ("HRANDFIELD", "h", "1.5"), ("HRANDFIELD", "h", "", "WITHVALUES"))
    for count in ("1", "2", "-4"):
        ours = both.engine.execute("HRANDFIELD", "h", count, "WITHVALUES")
        theirs = both.redis.execute("HRANDFIELD", "h", count, "WITHVALUES")
        assert len(ours) == len(theirs)
        assert set(ours) <= {b"a", b"1", b"b", b"2", b"c", b"3"}


def test_scan(both):
    # (A negative cursor: 7.0's strtoul wraps it, 8.x's string2ull refuses it; the unit test
    # asserts 8.x's "ERR invalid cursor".)
    run(both, ("HSET", "h", "a1", "1", "b1", "2", "a2", "3"),
        ("HSCAN", "h", "0"), ("HSCAN", "h", "0", "MATCH", "a*"),
        ("HSCAN", "h", "0", "COUNT", "1"), ("HSCAN", "h", "0", "COUNT", "0"),
        ("HSCAN", "h", "0", "COUNT", "x"), ("HSCAN", "h", "x"),
        ("HSCAN", "h", "0", "MATCH"), ("HSCAN", "h", "0", "NOPE", "x"),
        ("HSCAN", "nokey", "0"), ("HSCAN", "nokey", "x"),
        ("HSCAN", "h", "0", "MATCH", "*", "COUNT", "100"))


def test_big_hash_compared_as_a_set(both):
    pairs = [x for i in range(600) for x in (f"field:{i}", f"value:{i}")]
    run(both, ("HSET", "big", *pairs), ("HLEN", "big"), ("HGET", "big", "field:599"),
        ("OBJECT", "ENCODING", "big"), ("HSET", "long", "k", "x" * 65),
        ("OBJECT", "ENCODING", "long"), ("HSET", "edge", "k", "x" * 64),
        ("OBJECT", "ENCODING", "edge"))
    both("HGETALL", "big", normalise=as_pairs)
    both("HKEYS", "big", normalise=as_set)
    both("HVALS", "big", normalise=as_set)
    run(both, ("HDEL", "big", "field:1", "field:2", "nope"), ("HLEN", "big"),
        ("HINCRBY", "big", "field:3", "1"), ("HSTRLEN", "big", "field:10"))
    both("HGETALL", "big", normalise=as_pairs)
