"""engine.commands.strings: replies, exact error lines, the effects each write logs (a value,
never the arithmetic or a relative time), and replay of those effects giving the same state.
The replies are checked against redis-server in tests/differential/test_diff_strings.py."""

from __future__ import annotations

import struct

import pytest

from streamkeep.snapshot.rdb import crc64
from tests.support.effects_util import Recorded

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NOW = 1_000_000


@pytest.fixture
def r() -> Recorded:
    return Recorded(now=NOW)


def test_set_get_and_the_effect_logged(r):
    assert r.effects("SET", "k", "v") == ("OK", [[b"SET", b"k", b"v"]])
    assert r("GET", "k") == b"v"
    assert r("GET", "missing") is None
    assert r("TYPE", "k") == "string"
    r.assert_replays()


def test_set_relative_time_is_logged_absolute(r):
    assert r.effects("SET", "k", "v", "EX", "10") == (
        "OK", [[b"SET", b"k", b"v", b"PXAT", b"%d" % (NOW + 10_000)]])
    assert r.effects("SET", "k", "v", "PX", "5")[1] == [[b"SET", b"k", b"v", b"PXAT", b"%d" % (NOW + 5)]]
    assert r("PTTL", "k") == 5
    assert r.effects("SET", "k", "w", "KEEPTTL")[1] == [[b"SET", b"k", b"w", b"KEEPTTL"]]
    assert r("PTTL", "k") == 5
    assert r.effects("SET", "k", "x")[1] == [[b"SET", b"k", b"x"]]
    assert r("PTTL", "k") == -1
    r.assert_replays()


def test_set_options(r):
    assert r("SET", "k", "v", "NX") == "OK"
    assert r("SET", "k", "w", "NX") is None
    assert r("SET", "k", "w", "XX", "GET") == b"v"
    assert r("SET", "n", "w", "XX") is None
    assert r("SET", "n", "w", "GET") is None
    assert r("GET", "n") == b"w"
    assert r("SET", "k", "v", "EX", "10", "EX", "20") == "OK"  # the last time wins, as Redis
    assert r("TTL", "k") == 20
    for bad in (("NX", "XX"), ("KEEPTTL", "EX", "1"), ("EX", "1", "PX", "1"), ("EX",), ("FOO",)):
        assert r.err("SET", "k", "v", *bad) == "ERR syntax error"
    assert r.err("SET", "k", "v", "EX", "0") == "ERR invalid expire time in 'set' command"
    assert r.err("SET", "k", "v", "EX", "abc") == "ERR value is not an integer or out of range"
    assert r.err("SETEX", "k", "-1", "v") == "ERR invalid expire time in 'setex' command"
    assert r.err("PSETEX", "k", "0", "v") == "ERR invalid expire time in 'psetex' command"
    r.assert_replays()


def test_set_at_a_past_time_deletes(r):
    r("SET", "k", "v")
    assert r.effects("SET", "k", "w", "PXAT", "1") == ("OK", [[b"DEL", b"k"]])
    assert r("EXISTS", "k") == 0
    assert r.effects("SET", "k", "w", "PXAT", "1") == ("OK", [])
    r.assert_replays()


def test_setnx_setex_psetex(r):
    assert r("SETNX", "k", "v") == 1
    assert r("SETNX", "k", "w") == 0
    assert r.effects("SETEX", "k", "3", "v")[1] == [[b"SET", b"k", b"v", b"PXAT", b"%d" % (NOW + 3000)]]
    assert r("PSETEX", "k", "30", "v") == "OK"
    assert r("PTTL", "k") == 30
    r.assert_replays()


def test_getdel_getex(r):
    r("SET", "k", "v")
    assert r.effects("GETEX", "k", "EX", "5") == (b"v", [[b"PEXPIREAT", b"k", b"%d" % (NOW + 5000)]])
    assert r.effects("GETEX", "k", "PERSIST") == (b"v", [[b"PERSIST", b"k"]])
    assert r.effects("GETEX", "k", "PERSIST") == (b"v", [])
    assert r.effects("GETEX", "k") == (b"v", [])
    assert r("GETEX", "missing", "EX", "-1") is None  # the key is looked up first
    assert r.err("GETEX", "k", "EX", "-1") == "ERR invalid expire time in 'getex' command"
    assert r.err("GETEX", "k", "KEEPTTL") == "ERR syntax error"
    assert r.effects("GETEX", "k", "PXAT", "1") == (b"v", [[b"DEL", b"k"]])
    r("SET", "k", "v")
    assert r.effects("GETDEL", "k") == (b"v", [[b"DEL", b"k"]])
    assert r("GETDEL", "k") is None
    r.assert_replays()


def test_mget_mset(r):
    r("XADD", "s", "1-1", "f", "v")
    assert r.effects("MSET", "a", "1", "b", "2")[1] == [[b"SET", b"a", b"1"], [b"SET", b"b", b"2"]]
    assert r("MGET", "a", "s", "b", "none") == [b"1", None, b"2", None]
    assert r.err("MSET", "a", "1", "b") == "ERR wrong number of arguments for 'mset' command"
    assert r("MSET", "s", "x") == "OK"  # overwrites a stream
    assert r("TYPE", "s") == "string"
    r.assert_replays()


def test_incr_family(r):
    assert r.effects("INCR", "n") == (1, [[b"SET", b"n", b"1"]])
    assert r("INCRBY", "n", "10") == 11
    assert r("DECR", "n") == 10
    assert r("DECRBY", "n", "-5") == 15
    r("PEXPIRE", "n", "100")
    assert r.effects("INCR", "n") == (16, [[b"SET", b"n", b"16", b"KEEPTTL"]])
    assert r("PTTL", "n") == 100
    r("SET", "z", "01")
    assert r.err("INCR", "z") == "ERR value is not an integer or out of range"
    assert r.err("INCRBY", "n", "1.5") == "ERR value is not an integer or out of range"
    r("SET", "big", "9223372036854775807")
    assert r.err("INCR", "big") == "ERR increment or decrement would overflow"
    assert r.err("DECRBY", "n", "-9223372036854775808") == "ERR decrement would overflow"
    r.assert_replays()


def test_incrbyfloat(r):
    assert r.effects("INCRBYFLOAT", "f", "0.1") == (b"0.1", [[b"SET", b"f", b"0.1"]])
    assert r("INCRBYFLOAT", "f", "0.2") == b"0.3"
    assert r("INCRBYFLOAT", "f", "5.0e3") == b"5000.29999999999999982"  # redis-server's digits
    assert r.err("INCRBYFLOAT", "f", "abc") == "ERR value is not a valid float"
    assert r.err("INCRBYFLOAT", "f", "inf") == "ERR increment would produce NaN or Infinity"
    r.assert_replays()


def test_append_strlen(r):
    assert r("APPEND", "k", "ab") == 2
    assert r.effects("APPEND", "k", "cd") == (4, [[b"APPEND", b"k", b"cd"]])  # the tail only
    assert r("STRLEN", "k") == 4
    assert r("STRLEN", "none") == 0
    r("CONFIG", "SET", "proto-max-bulk-len", str(1024 * 1024))
    r("SET", "big", "x" * (1024 * 1024))
    assert r.err("APPEND", "big", "y") == (
        "ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    r.assert_replays()


@pytest.mark.parametrize("argv", [
    ("GET", "s"), ("STRLEN", "s"), ("INCR", "s"), ("INCRBY", "s", "1"), ("DECR", "s"),
    ("INCRBYFLOAT", "s", "1"), ("APPEND", "s", "x"), ("GETDEL", "s"), ("GETEX", "s"),
    ("SET", "s", "v", "GET"),
])
def test_string_commands_refuse_a_stream(r, argv):
    r("XADD", "s", "1-1", "f", "v")
    assert r.err(*argv) == WRONGTYPE


def test_stream_commands_refuse_a_string(r):
    r("SET", "k", "v")
    assert r.err("XADD", "k", "1-1", "f", "v") == WRONGTYPE
    assert r.err("XADD", "k", "*", "f", "v") == WRONGTYPE
    assert r.err("XADD", "k", "MAXLEN", "1", "*", "f", "v") == WRONGTYPE


def test_set_overwrites_a_stream(r):
    r("XADD", "s", "1-1", "f", "v")
    r("EXPIRE", "s", "100")
    assert r("SET", "s", "v", "KEEPTTL") == "OK"
    assert (r("TYPE", "s"), r("TTL", "s")) == ("string", 100)
    r.assert_replays()


def test_dump_restore_of_a_string_logs_the_set(r):
    r("SET", "k", "hello")
    payload = r("DUMP", "k")
    assert r.effects("RESTORE", "k2", "5000", payload) == (
        "OK", [[b"SET", b"k2", b"hello", b"PXAT", b"%d" % (NOW + 5000)]])
    assert r.effects("RESTORE", "k3", "0", payload) == ("OK", [[b"SET", b"k3", b"hello"]])
    assert r.err("RESTORE", "k3", "0", payload) == "BUSYKEY Target key name already exists."
    assert r.effects("RESTORE", "k3", "1", payload, "ABSTTL", "REPLACE") == (
        "OK", [[b"DEL", b"k3"]])
    broken = payload[:1] + b"\x3f" + payload[2:-8]  # a length past the end, checksum redone
    broken += struct.pack("<Q", crc64(broken))
    assert r.err("RESTORE", "k4", "0", broken) == "ERR Bad data format"
    r.assert_replays()


# --- Redis 8.4: compare-and-set, DIGEST, DELEX, MSETEX ----------------------------------------------
# Expected replies written from redis.io's command pages and Redis's fixes to them (16 hex
# digits, leading zeros kept, digests compared case-insensitively: redis/redis#14502); Debian's
# redis-server 7.0 has none of these commands to compare with.

HELLO_DIGEST = b"b6acb9d84a38ff74"  # redis.io's DIGEST example: SET key1 "Hello world"
# A value whose digest starts with zeros (redis/redis#14496's example).
ZEROS_VALUE = b"v8lf0c11xh8ymlqztfd3eeq16kfn4sspw7fqmnuuq3k3t75em5wdizgcdw7uc26nnf961u2jkfzkjytls2kwlj7626sd"
BAD_DIGEST = "ERR must be exactly 16 hexadecimal characters"


def test_digest(r):
    r("SET", "key1", "Hello world")
    assert r("DIGEST", "key1") == HELLO_DIGEST
    r("SET", "z", ZEROS_VALUE)
    assert r("DIGEST", "z") == b"00006c38adf31777"
    assert r("DIGEST", "missing") is None
    r("XADD", "s", "1-1", "f", "v")
    assert r.err("DIGEST", "s") == WRONGTYPE
    assert r.err("DIGEST") == "ERR wrong number of arguments for 'digest' command"


def test_set_ifeq_ifne(r):
    r("SET", "k", "v1")
    assert r("SET", "k", "v2", "IFEQ", "nope") is None
    assert r.effects("SET", "k", "v2", "IFEQ", "v1") == ("OK", [[b"SET", b"k", b"v2"]])
    assert r("SET", "k", "v3", "IFNE", "v2") is None
    assert r("SET", "k", "v3", "IFNE", "other", "GET") == b"v2"
    assert r("GET", "k") == b"v3"
    assert r("SET", "k", "v4", "IFEQ", "nope", "GET") == b"v3"  # not set, old value returned
    # A missing key: IFEQ/IFDEQ never create it, IFNE/IFDNE do.
    assert r("SET", "n1", "v", "IFEQ", "x") is None and r("EXISTS", "n1") == 0
    assert r("SET", "n2", "v", "IFNE", "x") == "OK" and r("GET", "n2") == b"v"
    assert r("SET", "n3", "v", "IFEQ", "x", "GET") is None and r("EXISTS", "n3") == 0
    r.assert_replays()


def test_set_ifdeq_ifdne(r):
    r("SET", "key1", "Hello world")
    assert r("SET", "key1", "x", "IFDEQ", "0000000000000000") is None
    assert r("SET", "key1", "x", "IFDEQ", HELLO_DIGEST.upper()) == "OK"  # any case
    assert r("SET", "key1", "y", "IFDNE", r("DIGEST", "key1")) is None
    assert r("SET", "key1", "y", "IFDNE", HELLO_DIGEST) == "OK"
    r("SET", "z", ZEROS_VALUE)
    assert r.err("SET", "z", "w", "IFDEQ", "6c38adf31777") == BAD_DIGEST  # 16 digits or nothing
    assert r("SET", "z", "w", "IFDEQ", "00006C38ADF31777", "EX", "100") == "OK"
    assert r("TTL", "z") == 100
    assert r("SET", "nokey", "v", "IFDEQ", HELLO_DIGEST) is None
    assert r("SET", "nokey", "v", "IFDNE", HELLO_DIGEST) == "OK"
    r.assert_replays()


def test_set_conditions_exclude_one_another(r):
    for bad in (("NX", "IFEQ", "a"), ("IFEQ", "a", "XX"), ("IFEQ", "a", "IFNE", "b"),
                ("IFDEQ", "a", "NX"), ("IFEQ",), ("IFDNE",), ("XX", "IFDNE", "d")):
        assert r.err("SET", "k", "v", *bad) == "ERR syntax error", bad
    assert r("SET", "k", "v", "IFNE", "a", "IFNE", "v") == "OK"  # repeated: the last one counts
    assert r("SET", "k", "w", "IFNE", "v", "IFNE", "x") == "OK"


def test_set_if_on_a_stream_is_wrongtype(r):
    r("XADD", "s", "1-1", "f", "v")
    for condition in (("IFEQ", "v"), ("IFNE", "v"), ("IFDEQ", HELLO_DIGEST),
                      ("IFDNE", HELLO_DIGEST)):
        assert r.err("SET", "s", "x", *condition) == WRONGTYPE
    assert r("TYPE", "s") == "stream"


def test_delex(r):
    r("MSET", "a", "1", "b", "2", "c", "3", "d", "4")
    assert r.effects("DELEX", "a") == (1, [[b"DEL", b"a"]])
    assert r("DELEX", "a") == 0
    assert r("DELEX", "b", "IFEQ", "x") == 0 and r("DELEX", "b", "IFEQ", "2") == 1
    assert r("DELEX", "c", "IFNE", "3") == 0 and r("DELEX", "c", "IFNE", "x") == 1
    digest = r("DIGEST", "d")
    assert r("DELEX", "d", "IFDNE", digest.upper()) == 0
    assert r("DELEX", "d", "IFDEQ", digest.upper()) == 1
    assert r("DELEX", "nokey", "IFEQ", "x") == 0
    r("SET", "e", "5")
    assert r.err("DELEX", "e", "IFDEQ", "123") == BAD_DIGEST
    assert r.err("DELEX", "e", "IFEQ") == "ERR syntax error"
    assert r.err("DELEX", "e", "IFEQ", "5", "IFNE", "4") == "ERR syntax error"
    assert r.err("DELEX", "e", "ifxx", "5") == "ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE"
    r("XADD", "s", "1-1", "f", "v")
    assert r.err("DELEX", "s", "IFEQ", "v") == WRONGTYPE
    assert r("DELEX", "s") == 1  # no condition: any type goes
    r.assert_replays()


def test_msetex(r):
    assert r.effects("MSETEX", "2", "a", "1", "b", "2", "EX", "10") == (1, [
        [b"SET", b"a", b"1", b"PXAT", b"%d" % (NOW + 10_000)],
        [b"SET", b"b", b"2", b"PXAT", b"%d" % (NOW + 10_000)]])
    assert (r("TTL", "a"), r("TTL", "b")) == (10, 10)
    assert r("MSETEX", "2", "a", "x", "c", "3", "NX") == 0 and r("EXISTS", "c") == 0
    assert r("MSETEX", "2", "a", "x", "c", "3", "XX", "PX", "5") == 0
    assert r("MSETEX", "2", "a", "x", "b", "y", "XX", "KEEPTTL") == 1
    assert (r("MGET", "a", "b"), r("TTL", "a")) == ([b"x", b"y"], 10)
    assert r("MSETEX", "1", "a", "z") == 1 and r("TTL", "a") == -1  # no option: TTL dropped
    assert r("MSETEX", "1", "p", "v", "PXAT", str(NOW + 500), "NX") == 1
    assert r("PTTL", "p") == 500
    assert r.effects("MSETEX", "2", "a", "1", "p", "2", "EXAT", "1") == (1, [
        [b"DEL", b"a"], [b"DEL", b"p"]])  # a time already past: the keys go
    r.assert_replays()


def test_msetex_errors(r):
    assert r.err("MSETEX", "0", "a", "1") == "ERR invalid numkeys value"
    assert r.err("MSETEX", "-1", "a", "1") == "ERR invalid numkeys value"
    assert r.err("MSETEX", "x", "a", "1") == "ERR invalid numkeys value"
    assert r.err("MSETEX", "2", "a", "1") == "ERR wrong number of key-value pairs"
    assert r.err("MSETEX", "99999999999", "a", "1") == "ERR invalid numkeys value"
    for bad in (("NX", "XX"), ("GET",), ("IFEQ", "1"), ("EX", "1", "PX", "1"), ("KEEPTTL", "EX", "1"),
                ("EX",), ("PERSIST",), ("b",)):
        assert r.err("MSETEX", "1", "a", "1", *bad) == "ERR syntax error", bad
    assert r.err("MSETEX", "1", "a", "1", "EX", "0") == "ERR invalid expire time in 'msetex' command"
    assert r.err("MSETEX", "1", "a", "1", "PX", "x") == "ERR value is not an integer or out of range"
    assert r.err("MSETEX", "1", "a") == "ERR wrong number of arguments for 'msetex' command"
    assert r("EXISTS", "a") == 0


def test_getset_and_msetnx(r):
    assert r.effects("GETSET", "k", "v") == (None, [[b"SET", b"k", b"v"]])
    r("EXPIRE", "k", "100")
    assert r("GETSET", "k", "w") == b"v" and r("TTL", "k") == -1  # the TTL goes, as SET's
    assert r.effects("MSETNX", "a", "1", "b", "2") == (1, [[b"SET", b"a", b"1"],
                                                           [b"SET", b"b", b"2"]])
    assert r.effects("MSETNX", "b", "x", "c", "3") == (0, [])
    assert r.err("MSETNX", "a", "1", "b") == "ERR wrong number of arguments for 'msetnx' command"
    r("XADD", "s", "1-1", "f", "v")
    assert r.err("GETSET", "s", "v") == WRONGTYPE
    assert r("MSETNX", "s", "v") == 0  # a stream is a key too
    r.assert_replays()


def test_incrbyfloat_never_returns_minus_zero(r):
    r("SET", "k", "-0.000000000000000001")
    assert r("INCRBYFLOAT", "k", "0") == b"0"
    assert r("INCRBYFLOAT", "k", "-0") == b"0"
    assert r("INCRBYFLOAT", "k", "-0.000000000000000004") == b"0"
    assert r("INCRBYFLOAT", "k", "-0.5") == b"-0.5"
