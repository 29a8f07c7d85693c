"""Differential tests of strings with expiry against the real redis-server: GET, SET (every
option), SETNX, SETEX, PSETEX, GETDEL, GETEX, MGET, MSET, INCR, DECR, INCRBY, DECRBY,
INCRBYFLOAT, APPEND, STRLEN, EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT (NX/XX/GT/LT), TTL, PTTL,
EXPIRETIME, PEXPIRETIME, PERSIST, on string and stream keys, and the keyspace commands over both
types; replies and error lines compared byte for byte.

Time: the engine reads the wall clock as redis-server does. Absolute times are fixed (far past,
far future), so their replies are exact; a relative TTL is compared in seconds, or in ms within
a tolerance (`Near`); keys are made to expire with times of a few ms and a short sleep, after
which both sides expire them lazily (Redis's active cycle may have deleted them first, which no
reply compared here can tell). The engine's own clock is injected in the unit tests
(tests/engine/commands/test_expiry.py), where expiry is exact to the millisecond.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, Near, WallClock, reset_redis_config

FAR_FUTURE_S = 4_000_000_000  # 2096
NUMBERS = ["0", "1", "-1", "01", "+1", " 1", "1 ", "1.5", "abc", "", "9223372036854775807",
           "-9223372036854775808", "9223372036854775808", "0x10", "1e3", "-0"]
FLOATS = ["0.1", "-0.1", "1e3", "5.0e3", "0x10", "1.0e1", "inf", "-inf", "nan", "1e5000",
          "1e4500", " 1", "1 ", "abc", "", "1e30", "3.14159265358979323846", "-0", "1_0"]


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    reset_redis_config(redis_raw)
    yield Both(backend(Engine(clock=WallClock())), redis_raw)


def near(reply):
    return Near(reply) if isinstance(reply, int) and reply > 0 else reply


def test_get_set_options(both):
    both.script(
        ("GET", "k"), ("SET", "k", "v"), ("GET", "k"), ("SET", "k", "w", "NX"),
        ("SET", "k", "w", "XX"), ("SET", "n", "w", "XX"), ("SET", "k", "x", "GET"),
        ("SET", "n", "x", "GET"), ("SET", "k", "y", "NX", "GET"), ("SET", "m", "y", "XX", "GET"),
        ("SET", "k", "v", "nx", "xx"), ("SET", "k", "v", "xx", "nx"), ("SET", "k", "v", "GET", "GET"),
        ("SET", "k", "v", "KEEPTTL", "EX", "1"), ("SET", "k", "v", "EX", "1", "KEEPTTL"),
        ("SET", "k", "v", "EX", "1", "PX", "1"), ("SET", "k", "v", "EXAT"), ("SET", "k", "v", "FOO"),
        ("SET", "k", "v", "EX", "0"), ("SET", "k", "v", "PX", "-5"), ("SET", "k", "v", "EX", "x"),
        ("SET", "k", "v", "EX", "9223372036854775"), ("SET", "k", "v", "PX", "9223372036854775807"),
        ("SET", "k", "v", "EXAT", str(FAR_FUTURE_S)), ("EXPIRETIME", "k"), ("TTL", "k"),
        ("SET", "k", "v", "KEEPTTL"), ("EXPIRETIME", "k"),
        ("SET", "k", "v", "PXAT", str(FAR_FUTURE_S * 1000 + 7)), ("PEXPIRETIME", "k"),
        ("SET", "k", "v"), ("PEXPIRETIME", "k"), ("SET", "k", "v", "EX", "100"), ("TTL", "k"),
        ("SET", "k", "v", "EX", "10", "EX", "20"), ("TTL", "k"),
        ("SET", "k", "w", "PXAT", "1"), ("EXISTS", "k"), ("SET", "k", "w", "EXAT", "1", "GET"),
        ("SET", "k"), ("GET",), ("GET", "a", "b"),
    )


def test_setnx_setex_psetex(both):
    both.script(
        ("SETNX", "k", "v"), ("SETNX", "k", "w"), ("GET", "k"),
        ("SETEX", "k", "100", "v"), ("TTL", "k"), ("SETEX", "k", "0", "v"),
        ("SETEX", "k", "-1", "v"), ("SETEX", "k", "x", "v"), ("PSETEX", "k", "0", "v"),
        ("PSETEX", "k", "100000", "v"), ("TTL", "k"), ("SETEX", "k", "1"), ("SETNX", "k"),
    )


def test_getdel_getex(both):
    both.script(
        ("GETDEL", "k"), ("SET", "k", "v"), ("GETDEL", "k"), ("GETDEL", "k"), ("SET", "k", "v"),
        ("GETEX", "k"), ("GETEX", "k", "EX", "100"), ("TTL", "k"), ("GETEX", "k", "PERSIST"),
        ("TTL", "k"), ("GETEX", "k", "EXAT", str(FAR_FUTURE_S)), ("EXPIRETIME", "k"),
        ("GETEX", "k", "PXAT", str(FAR_FUTURE_S * 1000 + 3)), ("PEXPIRETIME", "k"),
        ("GETEX", "k", "EX", "-1"), ("GETEX", "nokey", "EX", "-1"), ("GETEX", "k", "EX", "x"),
        ("GETEX", "k", "KEEPTTL"), ("GETEX", "k", "NX"), ("GETEX", "k", "GET"),
        ("GETEX", "k", "PERSIST", "EX", "1"), ("GETEX", "k", "EX", "1", "PERSIST"),
        ("GETEX", "k", "EX"), ("GETEX", "k", "PXAT", "1"), ("EXISTS", "k"),
    )


def test_mget_mset(both):
    both.script(
        ("MSET", "a", "1", "b", "2"), ("MGET", "a", "b", "c"), ("MSET", "a"),
        ("MSET", "a", "1", "b"), ("XADD", "s", "1-1", "f", "v"), ("MGET", "a", "s"),
        ("EXPIRE", "a", "100"), ("MSET", "a", "3"), ("TTL", "a"), ("MSET", "s", "x"),
        ("TYPE", "s"), ("MGET", "s"),
    )


@pytest.mark.parametrize("value", NUMBERS)
def test_incr_family_on_every_kind_of_value(both, value):
    for argv in (("INCR", "k"), ("DECR", "k"), ("INCRBY", "k", "5"), ("DECRBY", "k", "5"),
                 ("INCRBY", "k", "-9223372036854775808"), ("DECRBY", "k", "-9223372036854775808"),
                 ("INCRBYFLOAT", "k", "1")):
        both("SET", "k", value)
        both(*argv)
        both("GET", "k")


@pytest.mark.parametrize("increment", NUMBERS)
def test_incrby_arguments(both, increment):
    both("INCRBY", "k", increment)
    both("DECRBY", "k", increment)
    both("GET", "k")


@pytest.mark.parametrize("increment", FLOATS)
def test_incrbyfloat(both, increment):
    both("INCRBYFLOAT", "k", increment)
    both("INCRBYFLOAT", "k", "0.1")
    both("INCRBYFLOAT", "k", increment)
    both("GET", "k")


def test_incr_keeps_the_ttl(both):
    both.script(("SET", "k", "1", "EX", "100"), ("INCR", "k"), ("TTL", "k"),
                ("INCRBYFLOAT", "k", "1.5"), ("TTL", "k"), ("APPEND", "k", "0"), ("TTL", "k"),
                ("GET", "k"))


def test_append_strlen(both):
    both.script(("APPEND", "k", "ab"), ("APPEND", "k", "cd"), ("STRLEN", "k"), ("GET", "k"),
                ("STRLEN", "none"), ("APPEND", "k", ""), ("STRLEN", "k"))


@pytest.mark.parametrize("argv", [
    ("GET", "s"), ("STRLEN", "s"), ("INCR", "s"), ("DECR", "s"), ("INCRBY", "s", "1"),
    ("INCRBY", "s", "x"), ("DECRBY", "s", "1"), ("INCRBYFLOAT", "s", "1"),
    ("INCRBYFLOAT", "s", "x"), ("APPEND", "s", "x"), ("GETDEL", "s"), ("GETEX", "s"),
    ("GETEX", "s", "EX", "-1"), ("GETEX", "s", "FOO"), ("SET", "s", "v", "GET"),
    ("SET", "s", "v", "NX", "GET"), ("MGET", "s"), ("SETNX", "s", "v"),
])
def test_strings_against_a_stream(both, argv):
    both("XADD", "s", "1-1", "f", "v")
    both(*argv)
    both("TYPE", "s")


@pytest.mark.parametrize("argv", [
    ("XADD", "k", "1-1", "f", "v"), ("XADD", "k", "*", "f", "v"),
    ("XADD", "k", "MAXLEN", "1", "*", "f", "v"), ("XADD", "k", "NOMKSTREAM", "*", "f", "v"),
    ("XADD", "k", "0-0", "f", "v"),
])
def test_xadd_against_a_string(both, argv):
    both("SET", "k", "v")
    both(*argv)
    both("GET", "k")


@pytest.mark.parametrize("key_kind", ["string", "stream"])
def test_expire_family(both, key_kind):
    make = ("SET", "k", "v") if key_kind == "string" else ("XADD", "k", "1-1", "f", "v")
    both(*make)
    both.script(
        ("TTL", "k"), ("PTTL", "k"), ("EXPIRETIME", "k"), ("PEXPIRETIME", "k"),
        ("EXPIRE", "k", "100", "XX"), ("EXPIRE", "k", "100", "GT"), ("EXPIRE", "k", "100", "LT"),
        ("EXPIRE", "k", "100", "NX"), ("EXPIRE", "k", "50", "gt"), ("EXPIRE", "k", "200", "GT"),
        ("EXPIRE", "k", "300", "LT"), ("TTL", "k"), ("EXPIRE", "k", "1", "NX", "XX"),
        ("EXPIRE", "k", "1", "GT", "LT"), ("EXPIRE", "k", "1", "NX", "GT"),
        ("EXPIRE", "k", "1", "foo"), ("EXPIRE", "k", "x", "foo"), ("EXPIRE", "k", "x"),
        ("EXPIRE", "k", "9223372036854775807"), ("PEXPIRE", "k", "9223372036854775807"),
        ("EXPIREAT", "k", "9223372036854775807"), ("PEXPIREAT", "k", "9223372036854775807"),
        ("EXPIRE", "k", "-9223372036854775808"), ("EXPIRE", "k"),
        ("EXPIREAT", "k", str(FAR_FUTURE_S)), ("EXPIRETIME", "k"), ("PEXPIRETIME", "k"),
        ("PEXPIREAT", "k", str(FAR_FUTURE_S * 1000 + 999)), ("EXPIRETIME", "k"),
        ("PEXPIRETIME", "k"), ("PERSIST", "k"), ("PERSIST", "k"), ("TTL", "k"),
        ("PEXPIRE", "k", "100000"), ("TTL", "k"), ("EXPIRE", "missing", "10"),
        ("TTL", "missing"), ("PTTL", "missing"), ("EXPIRETIME", "missing"),
        ("PEXPIRETIME", "missing"), ("PERSIST", "missing"), ("TYPE", "k"),
        ("EXPIREAT", "k", "1"), ("EXISTS", "k"), ("TYPE", "k"),
    )
    both("PTTL", "k", normalise=near)


def test_keys_expire(both):
    both.script(("SET", "a", "1", "PX", "20"), ("XADD", "s", "1-1", "f", "v"),
                ("PEXPIRE", "s", "20"), ("SET", "b", "2"), ("PSETEX", "c", "20", "x"))
    time.sleep(0.1)
    both.script(("GET", "a"), ("XLEN", "s"), ("EXISTS", "s", "c", "b"), ("TYPE", "c"),
                ("KEYS", "*"), ("TTL", "a"), ("SETNX", "a", "new"), ("GET", "a"), ("DBSIZE",))


def test_keyspace_commands_over_both_types(both):
    both.script(
        ("SET", "a", "1", "EX", "100"), ("XADD", "s", "1-1", "f", "v"), ("SET", "b", "2"),
        ("TYPE", "a"), ("TYPE", "s"), ("TYPE", "none"), ("EXISTS", "a", "s", "b", "none"),
        ("DBSIZE",), ("RENAME", "a", "a2"), ("TTL", "a2"), ("TTL", "a"),
        ("RENAME", "s", "a2"), ("TYPE", "a2"), ("TTL", "a2"), ("RENAMENX", "b", "a2"),
        ("RENAMENX", "b", "c"), ("GET", "c"), ("DEL", "a2", "c", "none"), ("DBSIZE",),
        ("SET", "x", "1"), ("FLUSHDB",), ("DBSIZE",), ("GET", "x"),
    )
    both.script(("SET", "a", "1"), ("XADD", "s", "1-1", "f", "v"))
    assert both("KEYS", "*", normalise=sorted) == [b"a", b"s"]
    for kind in ("string", "stream", "STRING", "hash"):
        both("SCAN", "0", "TYPE", kind, "COUNT", "100")


@pytest.mark.parametrize("argv", [
    ("XLEN", "k"), ("XRANGE", "k", "-", "+"), ("XREVRANGE", "k", "+", "-"), ("XDEL", "k", "1-1"),
    ("XTRIM", "k", "MAXLEN", "0"), ("XSETID", "k", "5-5"), ("XREAD", "STREAMS", "k", "0"),
    ("XREAD", "STREAMS", "k", "$"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "k", ">"),
    ("XGROUP", "CREATE", "k", "g", "$"), ("XGROUP", "CREATE", "k", "g", "$", "MKSTREAM"),
    ("XGROUP", "SETID", "k", "g", "$"), ("XGROUP", "DESTROY", "k", "g"),
    ("XGROUP", "CREATECONSUMER", "k", "g", "c"), ("XGROUP", "DELCONSUMER", "k", "g", "c"),
    ("XINFO", "STREAM", "k"), ("XINFO", "GROUPS", "k"), ("XINFO", "CONSUMERS", "k", "g"),
    ("XACK", "k", "g", "1-1"), ("XPENDING", "k", "g"), ("XPENDING", "k", "g", "-", "+", "10"),
    ("XCLAIM", "k", "g", "c", "0", "1-1"), ("XAUTOCLAIM", "k", "g", "c", "0", "0"),
])
def test_stream_commands_against_a_string(both, argv):
    both("SET", "k", "v")
    both(*argv)
    both("GET", "k")


@pytest.mark.parametrize("value", [b"hello", b"12", b"-200", b"70000", b"4294967296", b"",
                                   b"x" * 100, bytes(range(256)) * 3])
def test_dump_restore_of_strings_both_ways(redis_raw, value):
    """Redis's payloads (an LZF-compressed one included) restore here; ours restore on Redis
    (written at the RDB version redis-server 7.0 reads)."""
    engine = Engine(dump_rdb_version=10)
    redis_raw.execute("SET", "k", value)
    theirs = redis_raw.execute("DUMP", "k")
    assert engine.execute("RESTORE", "k", "0", theirs) == "OK"
    assert engine.execute("GET", "k") == value
    ours = engine.execute("DUMP", "k")
    assert redis_raw.execute("RESTORE", "k2", "100000", ours) == "OK"
    assert redis_raw.execute("GET", "k2") == value
    if len(value) <= 20:  # (longer values Redis may LZF-compress)
        assert ours == theirs
