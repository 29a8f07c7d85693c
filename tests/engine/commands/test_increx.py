"""engine.commands.increx: INCREX's replies, bounds and saturation, its exact error lines, the SET
or DEL each call logs (never the arithmetic or a relative time) and replay of those effects.

redis-server 7.0 has no INCREX, so the expectations are the command's documented behaviour
(redis.io's INCREX page and Redis 8.8's own tests of it), not a differential run.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.wire.reply import HumanDouble
from streamkeep.engine.wire.reply_encoder import encode_reply
from tests.support.effects_util import Recorded

NOW = 1_000_000
LLONG_MAX = 2**63 - 1
LLONG_MIN = -(2**63)


@pytest.fixture
def r() -> Recorded:
    return Recorded(now=NOW)


# --- integer mode ---------------------------------------------------------------------------------


def test_default_increment_creates_the_key_and_logs_the_value(r):
    assert r.effects("INCREX", "k") == ([1, 1], [[b"SET", b"k", b"1"]])
    assert r("INCREX", "k") == [2, 1]
    assert r.effects("INCREX", "k", "BYINT", "-10") == ([-8, -10], [[b"SET", b"k", b"-8"]])
    assert r("INCREX", "k", "BYINT", "0") == [-8, 0]
    assert r("GET", "k") == b"-8"
    r.assert_replays()


def test_out_of_bounds_is_skipped_with_nothing_changed_or_logged(r):
    r("SET", "k", "10", "EX", "100")
    assert r.effects("INCREX", "k", "BYINT", "10", "UBOUND", "15", "EX", "5") == ([10, 0], [])
    assert r.effects("INCREX", "k", "BYINT", "-10", "LBOUND", "5", "PERSIST") == ([10, 0], [])
    assert r("GET", "k") == b"10" and r("TTL", "k") == 100
    # a missing key whose result is out of bounds is not created
    assert r.effects("INCREX", "new", "BYINT", "15", "UBOUND", "10") == ([0, 0], [])
    assert r.effects("INCREX", "new", "BYINT", "5", "LBOUND", "10") == ([0, 0], [])
    assert r("EXISTS", "new") == 0
    r.assert_replays()


def test_bounds_are_inclusive_and_saturate_clamps(r):
    r("SET", "k", "5")
    assert r("INCREX", "k", "BYINT", "5", "UBOUND", "10") == [10, 5]
    assert r("INCREX", "k", "BYINT", "-10", "LBOUND", "0") == [0, -10]
    r("SET", "k", "50")
    assert r.effects("INCREX", "k", "BYINT", "100", "UBOUND", "80", "SATURATE") == (
        [80, 30], [[b"SET", b"k", b"80"]])
    assert r("INCREX", "k", "BYINT", "-100", "LBOUND", "0", "SATURATE") == [0, -80]
    # options in any order
    assert r("INCREX", "k", "LBOUND", "0", "BYINT", "100", "UBOUND", "10", "SATURATE") == [10, 10]
    r.assert_replays()


def test_a_value_already_out_of_bounds(r):
    r("SET", "k", "50")
    assert r("INCREX", "k", "BYINT", "5", "UBOUND", "30") == [50, 0]
    assert r("INCREX", "k", "BYINT", "0", "UBOUND", "30") == [50, 0]
    assert r("INCREX", "k", "BYINT", "5", "UBOUND", "30", "SATURATE") == [30, -20]
    r("SET", "k", "50")
    assert r("INCREX", "k", "BYINT", "-25", "UBOUND", "30") == [25, -25]  # back inside: applied
    r("SET", "k", "-50")
    assert r("INCREX", "k", "BYINT", "-5", "LBOUND", "-30", "SATURATE") == [-30, 20]


def test_int64_limits_are_the_default_bounds(r):
    r("SET", "k", str(LLONG_MAX - 7))
    assert r("INCREX", "k", "BYINT", str(LLONG_MAX - 7)) == [LLONG_MAX - 7, 0]
    assert r("INCREX", "k", "BYINT", str(LLONG_MAX - 7), "SATURATE") == [LLONG_MAX, 7]
    r("SET", "k", str(LLONG_MIN + 8))
    assert r("INCREX", "k", "BYINT", str(LLONG_MIN + 8), "SATURATE") == [LLONG_MIN, -8]
    assert r("GET", "k") == str(LLONG_MIN).encode()
    # a clamp whose distance from the value an int64 cannot hold
    r("SET", "k", str(LLONG_MAX - 7))
    assert r.err("INCREX", "k", "BYINT", "1", "SATURATE", "UBOUND", str(LLONG_MIN)) == (
        "ERR applied increment would overflow")
    assert r("GET", "k") == str(LLONG_MAX - 7).encode()
    r.assert_replays()


def test_integer_mode_errors(r):
    r("SET", "f", "1.5")
    assert r.err("INCREX", "f") == "ERR value is not an integer or out of range"
    assert r.err("INCREX", "k", "BYINT", "1.5") == "ERR Increment is not an integer or out of range"
    assert r.err("INCREX", "k", "BYINT", "abc") == "ERR Increment is not an integer or out of range"
    assert r.err("INCREX", "k", "LBOUND", "x") == "ERR LBOUND is not an integer or out of range"
    assert r.err("INCREX", "k", "UBOUND", "1e3") == "ERR UBOUND is not an integer or out of range"
    assert r.err("INCREX", "k", "LBOUND", "10", "UBOUND", "5") == (
        "ERR LBOUND can't be greater than UBOUND")
    r("XADD", "s", "1-1", "f", "v")
    for argv in ((), ("BYINT", "1"), ("BYFLOAT", "1.5")):
        assert r.err("INCREX", "s", *argv) == (
            "WRONGTYPE Operation against a key holding the wrong kind of value")
    assert r("EXISTS", "k") == 0


# --- BYFLOAT ------------------------------------------------------------------------------------


def test_byfloat_replies_the_long_doubles_digits(r):
    r("SET", "k", "1.5")
    reply, logged = r.effects("INCREX", "k", "BYFLOAT", "0.25")
    assert reply == [b"1.75", b"0.25"] and logged == [[b"SET", b"k", b"1.75"]]
    assert r("INCREX", "k", "BYFLOAT", "1") == [b"2.75", b"1"]
    assert r("INCREX", "fresh", "BYFLOAT", "0.1") == [b"0.1", b"0.1"]  # not 0.10000000000000001
    assert r("INCREX", "fresh", "BYFLOAT", "0.2") == [b"0.3", b"0.2"]
    assert r("GET", "fresh") == b"0.3"
    r.assert_replays()


def test_byfloat_reply_is_a_double_in_resp3(r):
    reply, _lsn = r.engine.submit(r.engine.session, (b"INCREX", b"k", b"BYFLOAT", b"0.1"), [])
    assert reply == [HumanDouble(b"0.1"), HumanDouble(b"0.1")]
    assert encode_reply(reply, 3) == b"*2\r\n,0.1\r\n,0.1\r\n"
    assert encode_reply(reply, 2) == b"*2\r\n$3\r\n0.1\r\n$3\r\n0.1\r\n"


def test_byfloat_bounds_and_saturation(r):
    r("SET", "k", "10")
    assert r.effects("INCREX", "k", "BYFLOAT", "10.0", "UBOUND", "15.5") == ([b"10", b"0"], [])
    assert r("INCREX", "k", "BYFLOAT", "10.0", "UBOUND", "15.5", "SATURATE") == [b"15.5", b"5.5"]
    assert r("INCREX", "k", "BYFLOAT", "-100", "LBOUND", "-5.5", "SATURATE") == [b"-5.5", b"-21"]
    r("SET", "k", "5.0")
    assert r("INCREX", "k", "BYFLOAT", "5.0", "UBOUND", "10.0") == [b"10", b"5"]
    r("SET", "k", "1.8")
    assert r("INCREX", "k", "BYFLOAT", "0.7", "UBOUND", "2", "SATURATE") == [b"2", b"0.2"]
    assert r.effects("INCREX", "new", "BYFLOAT", "-0.5", "UBOUND", "-1.5") == ([b"0", b"0"], [])
    assert r("EXISTS", "new") == 0
    # infinite bounds are allowed; a sum past the long double's range is out of bounds
    assert r("INCREX", "k", "BYFLOAT", "1", "LBOUND", "-inf", "UBOUND", "+inf") == [b"3", b"1"]
    r("SET", "big", "1e4932")
    assert r("INCREX", "big", "BYFLOAT", "1e4932")[1] == b"0"
    assert r("GET", "big") == b"1e4932"
    r.assert_replays()


def test_byfloat_errors(r):
    assert r.err("INCREX", "k", "BYFLOAT", "abc") == "ERR Increment is not a valid float"
    assert r.err("INCREX", "k", "BYFLOAT", "+inf") == "ERR BYFLOAT increment cannot be Infinity"
    assert r.err("INCREX", "k", "BYFLOAT", "-inf") == "ERR BYFLOAT increment cannot be Infinity"
    assert r.err("INCREX", "k", "BYFLOAT", "1", "LBOUND", "x") == "ERR LBOUND is not a valid float"
    assert r.err("INCREX", "k", "BYFLOAT", "0.5", "LBOUND", "10.5", "UBOUND", "1.5") == (
        "ERR LBOUND can't be greater than UBOUND")
    r("SET", "k", "inf")
    assert r.err("INCREX", "k", "BYFLOAT", "1") == "ERR value cannot be Infinity"
    r("SET", "k", "hello")
    assert r.err("INCREX", "k", "BYFLOAT", "1.5") == "ERR value is not a valid float"
    assert r.err("INCREX", "k", "BYINT", "1") == "ERR value is not an integer or out of range"
    assert r("GET", "k") == b"hello"


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("options", [
    ("FOO",), ("BYINT", "1", "FOO"), ("BYINT",), ("LBOUND",), ("EX",), ("SAT", "LBOUND", "0"),
    ("BYINT", "1", "BYFLOAT", "1.5"), ("BYFLOAT", "1.5", "BYINT", "1"),
    ("BYINT", "1", "BYINT", "2"), ("LBOUND", "0", "LBOUND", "1"), ("UBOUND", "9", "UBOUND", "8"),
    ("SATURATE", "SATURATE"), ("ENX", "ENX", "EX", "10"), ("PERSIST", "PERSIST"),
    ("EX", "10", "EX", "20"), ("EX", "10", "PX", "5000"), ("PX", "5000", "PXAT", "9999999999000"),
    ("EX", "10", "PERSIST"), ("PERSIST", "EX", "10"), ("PERSIST", "ENX"), ("ENX", "PERSIST"),
])
def test_syntax_errors(r, options):
    # (each option at most once, unlike SET's options, where the last repeat wins)
    assert r.err("INCREX", "k", *options) == "ERR syntax error"
    assert r("EXISTS", "k") == 0


def test_argument_errors(r):
    assert r.err("INCREX") == "ERR wrong number of arguments for 'increx' command"
    assert r.err("INCREX", "k", "ENX") == "ERR ENX flag requires an expiration"
    assert r.err("INCREX", "k", "BYINT", "1", "ENX") == "ERR ENX flag requires an expiration"
    for options in (("EX", "0"), ("PX", "0"), ("EX", "-1"), ("EX", str(LLONG_MAX)),
                    ("PX", str(LLONG_MAX))):
        assert r.err("INCREX", "k", *options) == "ERR invalid expire time in 'increx' command"
    assert r.err("INCREX", "k", "EX", "ten") == "ERR value is not an integer or out of range"
    assert r("EXISTS", "k") == 0


# --- expiration -----------------------------------------------------------------------------------


def test_a_time_is_logged_absolute(r):
    for options, at in ((("EX", "100"), NOW + 100_000), (("PX", "100"), NOW + 100),
                        (("EXAT", "2000"), 2_000_000), (("PXAT", "1500000"), 1_500_000)):
        reply, logged = r.effects("INCREX", "k", *options)
        assert logged == [[b"SET", b"k", b"%d" % reply[0], b"PXAT", b"%d" % at]]
        assert r("PEXPIRETIME", "k") == at
    r.assert_replays()


def test_without_a_time_the_ttl_is_kept_and_persist_removes_it(r):
    r("SET", "k", "5", "PX", "1000")
    assert r.effects("INCREX", "k") == ([6, 1], [[b"SET", b"k", b"6", b"KEEPTTL"]])
    assert r("PTTL", "k") == 1000
    assert r.effects("INCREX", "k", "PERSIST") == ([7, 1], [[b"SET", b"k", b"7"]])
    assert r("PTTL", "k") == -1
    assert r("INCREX", "k", "PERSIST") == [8, 1] and r("PTTL", "k") == -1
    r.assert_replays()


def test_enx_sets_a_time_only_on_a_key_without_one(r):
    r("SET", "k", "10")
    assert r.effects("INCREX", "k", "EX", "100", "ENX")[1] == [
        [b"SET", b"k", b"11", b"PXAT", b"%d" % (NOW + 100_000)]]
    assert r.effects("INCREX", "k", "EX", "5", "ENX") == (
        [12, 1], [[b"SET", b"k", b"12", b"KEEPTTL"]])
    assert r("PTTL", "k") == 100_000
    assert r("INCREX", "new", "BYINT", "5", "PX", "50", "ENX") == [5, 5]
    assert r("PTTL", "new") == 50
    r.assert_replays()


def test_a_past_time_deletes_the_key(r):
    r("SET", "k", "10")
    assert r.effects("INCREX", "k", "EXAT", "1") == ([11, 1], [[b"DEL", b"k"]])
    assert r("EXISTS", "k") == 0
    assert r.effects("INCREX", "k", "PXAT", "1") == ([1, 1], [])  # nothing there to delete
    assert r("EXISTS", "k") == 0
    # ENX on a key with a TTL leaves the TTL, so a past time deletes nothing
    r("SET", "k", "10", "EX", "500")
    assert r.effects("INCREX", "k", "EXAT", "1", "ENX") == (
        [11, 1], [[b"SET", b"k", b"11", b"KEEPTTL"]])
    assert r("GET", "k") == b"11" and r("TTL", "k") == 500
    r.assert_replays()


def test_from_a_script(r):
    script = "return redis.call('increx', KEYS[1], 'byfloat', ARGV[1])"
    assert r("EVAL", script, "1", "k", "0.5") == [b"0.5", b"0.5"]
    assert r("EVAL", "redis.setresp(3); local v = redis.call('increx', KEYS[1], 'byfloat', "
                     "'1.25'); return {v[1].double * 100, v[2].double * 100}", "1", "k") == [
        175, 125]
    assert r("EVAL", "return redis.call('increx', KEYS[1], 'ubound', 0)", "1", "n") == [0, 0]
