"""Differential tests against the real redis-server of the string commands Redis 7.0 has that
streamkeep added with Redis 8.4's: GETRANGE, SUBSTR, SETRANGE, GETSET, MSETNX, LCS (LEN, IDX,
MINMATCHLEN, WITHMATCHLEN), replies and error lines byte for byte, on strings and streams,
with hostile indexes and offsets; and INCRBYFLOAT's results that print as zero. Redis 8.4's own
commands (SET IF*, DIGEST, DELEX, MSETEX) have no redis-server 7.0 to compare with: their
replies are written from redis.io in tests/engine/commands/test_strings.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, reset_redis_config

LLONG_MAX = str(2**63 - 1)
LLONG_MIN = str(-(2**63))
INDEXES = ["0", "1", "-1", "3", "-3", "5", "-5", "100", "-100", LLONG_MAX, LLONG_MIN, "x", "",
           "1.5", str(2**63), "-0"]


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    yield Both(backend(Engine(clock=WallClock())), redis_raw)


@pytest.mark.parametrize("start", INDEXES)
def test_getrange_and_substr_every_index_pair(both, start):
    both("SET", "k", "Hello")
    both("SET", "e", "")
    for end in INDEXES:
        for command in ("GETRANGE", "SUBSTR"):
            both(command, "k", start, end)
            both(command, "e", start, end)
            both(command, "missing", start, end)


def test_getrange_types_and_arity(both):
    both.script(("XADD", "s", "1-1", "f", "v"), ("GETRANGE", "s", "0", "1"),
                ("GETRANGE", "s", "x", "1"), ("GETRANGE", "k", "0"), ("SUBSTR", "k"),
                ("SET", "n", "12345"), ("GETRANGE", "n", "1", "-2"))


def test_setrange(both):
    both.script(
        ("SETRANGE", "k", "0", "Hello World"), ("SETRANGE", "k", "6", "Redis"), ("GET", "k"),
        ("SETRANGE", "k", "15", "!"), ("GET", "k"), ("STRLEN", "k"),
        ("SETRANGE", "k", "0", ""), ("SETRANGE", "missing", "10", ""), ("EXISTS", "missing"),
        ("SETRANGE", "new", "3", "ab"), ("GET", "new"),
        ("SET", "t", "v", "EX", "100"), ("SETRANGE", "t", "1", "w"), ("TTL", "t"),
        ("SET", "num", "123"), ("SETRANGE", "num", "1", "x"), ("GET", "num"),
        ("XADD", "s", "1-1", "f", "v"), ("SETRANGE", "s", "0", "x"), ("SETRANGE", "s", "0", ""),
        ("SETRANGE", "k", "x", "v"), ("SETRANGE", "k", "-1", "v"), ("SETRANGE", "k", "1.5", "v"),
        ("SETRANGE", "k", "0"),
    )


def test_setrange_hostile_offsets(both):
    # Past proto-max-bulk-len (512 MiB), and the overflowing sums: refused, nothing allocated.
    both.script(
        ("SET", "k", "v"),
        ("SETRANGE", "k", str(512 * 1024 * 1024), "x"),
        ("SETRANGE", "k", str(512 * 1024 * 1024 - 1), "xy"),
        ("SETRANGE", "k", LLONG_MAX, "x"), ("SETRANGE", "missing", LLONG_MAX, "x"),
        ("SETRANGE", "missing", LLONG_MAX, ""), ("SETRANGE", "k", LLONG_MIN, "x"),
        ("EXISTS", "missing"), ("GET", "k"),
    )


def test_getset_and_msetnx(both):
    both.script(
        ("GETSET", "k", "v"), ("GETSET", "k", "w"), ("EXPIRE", "k", "100"),
        ("GETSET", "k", "x"), ("TTL", "k"), ("XADD", "s", "1-1", "f", "v"), ("GETSET", "s", "v"),
        ("GETSET", "k"), ("MSETNX", "a", "1", "b", "2"), ("MGET", "a", "b"),
        ("MSETNX", "b", "3", "c", "4"), ("MGET", "b", "c"), ("MSETNX", "s", "1"),
        ("MSETNX", "a", "1", "b"), ("MSETNX", "a"), ("MSETNX", "d", "1", "d", "2"), ("GET", "d"),
    )


def test_lcs_options_and_errors(both):
    both.script(
        ("MSET", "key1", "ohmytext", "key2", "mynewtext"), ("LCS", "key1", "key2"),
        ("LCS", "key1", "key2", "LEN"), ("LCS", "key1", "key2", "IDX"),
        ("LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"),
        ("LCS", "key1", "key2", "IDX", "WITHMATCHLEN"), ("LCS", "key1", "key2", "idx", "len"),
        ("LCS", "key1", "key2", "LEN", "IDX"), ("LCS", "key1", "key2", "MINMATCHLEN", "-1"),
        ("LCS", "key1", "key2", "MINMATCHLEN"), ("LCS", "key1", "key2", "MINMATCHLEN", "x"),
        ("LCS", "key1", "key2", "BAD"), ("LCS", "key1", "missing"), ("LCS", "x", "y", "IDX"),
        ("LCS", "key1", "key2", "LEN", "LEN"), ("LCS", "key1", "key1", "IDX", "WITHMATCHLEN"),
        ("XADD", "s", "1-1", "f", "v"), ("LCS", "key1", "s"), ("LCS", "s", "key1", "BAD"),
        ("LCS", "key1"),
    )


def test_lcs_random_strings(both):
    rng = random.Random(46)
    for _ in range(60):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice("abcd") for _ in range(rng.randint(0, 30)))
        both("MSET", "a", a, "b", b)
        both("LCS", "a", "b")
        both("LCS", "a", "b", "IDX", "WITHMATCHLEN")
        both("LCS", "a", "b", "IDX", "MINMATCHLEN", str(rng.randint(0, 3)))


@pytest.mark.parametrize("value", ["-0.000000000000000001", "-0", "0", "-0.0", "1e-20",
                                   "-1e-20", "-0.000000000000000009"])
def test_incrbyfloat_results_that_print_as_zero(both, value):
    both("SET", "k", value)
    both("INCRBYFLOAT", "k", "0")
    both("INCRBYFLOAT", "k", "-0.000000000000000004")
    both("GET", "k")


@pytest.mark.filterwarnings("ignore:Call to:UserWarning")  # redis-py: "experimental" 8.4 calls
@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_string_methods_against_the_server(served, protocol):
    """redis-py 8's own methods for the string family, RESP2 and RESP3, against `streamkeep
    serve` (Redis 8.4's and 8.8's ones included: the replies must parse as redis-py expects
    them)."""
    import redis
    from redis.commands.core import DataPersistOptions

    r = redis.Redis(host=served.host, port=served.port, protocol=protocol)
    try:
        assert r.set("k", "Hello world") is True
        assert r.digest("k") == b"b6acb9d84a38ff74"
        assert r.set("k", "v2", ifdeq="B6ACB9D84A38FF74") is True
        assert r.set("k", "v3", ifeq="nope") is None
        assert r.set("k", "v3", ifne="nope", get=True) == b"v2"
        assert r.delex("k", ifeq="nope") == 0 and r.delex("k", ifeq="v3") == 1
        assert r.msetex({"a": "1", "b": "2"}, data_persist_option=DataPersistOptions.NX,
                        ex=100) == 1
        assert r.ttl("a") == 100 and r.msetex({"a": "x"}, DataPersistOptions.NX) == 0
        assert r.getset("a", "ohmytext") == b"1" and r.msetnx({"b": "x", "c": "y"}) is False
        assert r.set("b", "mynewtext") is True
        assert r.lcs("a", "b") == b"mytext" and r.lcs("a", "b", len=True) == 6
        indexes = r.lcs("a", "b", idx=True, withmatchlen=True)  # a map in RESP3, flat in RESP2
        length = indexes[b"len"] if protocol == 3 else indexes[3]
        assert length == 6
        assert r.setrange("a", 2, "MY") == 8 and r.getrange("a", 2, 3) == b"MY"
        assert r.substr("a", -4) == b"text"
        # Redis 8.8's INCREX: integers, or BYFLOAT's numbers (bulk strings in RESP2, doubles
        # in RESP3, parsed by redis-py as float)
        assert r.set("n", 10) is True and r.expire("n", 60) is True
        assert r.increx("n", byint=5, ubound=12) == [10, 0] and r.ttl("n") == 60
        assert r.increx("n", byint=5, ubound=12, saturate=True, persist=True) == [12, 2]
        assert r.ttl("n") == -1
        assert r.increx("n", ex=30, enx=True) == [13, 1] and r.ttl("n") == 30
        first, applied = r.increx("f", byfloat=0.1, lbound=0, ubound=2)
        if protocol == 3:
            assert (first, applied) == (0.1, 0.1)
        else:
            assert (first, applied) == (b"0.1", b"0.1")
        assert r.get("f") == b"0.1"
    finally:
        r.close()
