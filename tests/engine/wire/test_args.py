"""engine.wire.args: Redis's strict integer syntax (string2ll), ranges, BLOCK timeouts and
option words, with the exact error lines Redis replies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.args import (
    LLONG_MAX,
    LLONG_MIN,
    is_word,
    parse_int,
    parse_int_range,
    parse_timeout_ms,
)
from streamkeep.engine.wire.errors import NOT_INTEGER, ReplyError, StreamkeepError


def error_line(fn, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ReplyError) as caught:
        fn(*args)
    return str(caught.value)


@pytest.mark.parametrize(("arg", "value"), [
    (b"0", 0), (b"7", 7), (b"-7", -7), (b"1234567890", 1234567890),
    (b"%d" % LLONG_MAX, LLONG_MAX), (b"%d" % LLONG_MIN, LLONG_MIN),
])
def test_parse_int_accepts_the_int64_syntax(arg: bytes, value: int) -> None:
    assert parse_int(arg) == value


@pytest.mark.parametrize("arg", [
    b"", b"-", b" 1", b"1 ", b"+1", b"01", b"-0", b"-01", b"00", b"1.0", b"1e3", b"0x10",
    b"1_000", b"\xd9\xa1",  # an Arabic-Indic digit one: a digit, but not ASCII
    b"%d" % (LLONG_MAX + 1), b"%d" % (LLONG_MIN - 1), b"1" * 21,
])
def test_parse_int_refuses_anything_else_with_the_redis_line(arg: bytes) -> None:
    assert error_line(parse_int, arg) == NOT_INTEGER
    assert NOT_INTEGER == "ERR value is not an integer or out of range"


def string2ll(arg: bytes) -> int | None:
    """Redis's strict syntax, written plainly (the reference the digit loop is held to)."""
    if not 0 < len(arg) <= 20 or not arg.isascii():
        return None
    body = arg[1:] if arg[:1] == b"-" else arg
    if not body.isdigit() or (body[:1] == b"0" and (body != b"0" or arg[:1] == b"-")):
        return None
    value = int(arg)
    return value if LLONG_MIN <= value <= LLONG_MAX else None


@settings(max_examples=2000, deadline=None)
@given(st.one_of(
    st.binary(max_size=22),
    st.integers(min_value=-(1 << 66), max_value=1 << 66).map(lambda v: b"%d" % v),
    st.text(alphabet="-0123456789", max_size=22).map(str.encode),
))
def test_parse_int_agrees_with_the_plain_reading(arg: bytes) -> None:
    expected = string2ll(arg)
    if expected is None:
        assert error_line(parse_int, arg) == NOT_INTEGER
    else:
        assert parse_int(arg) == expected


def test_parse_int_message_replaces_the_default_line() -> None:
    assert error_line(parse_int, b"x", "COUNT must be > 0") == "ERR COUNT must be > 0"


def test_the_error_is_a_streamkeep_error() -> None:
    with pytest.raises(StreamkeepError):
        parse_int(b"nope")


def test_parse_int_range_bounds_are_inclusive() -> None:
    assert parse_int_range(b"1", 1, 5) == 1
    assert parse_int_range(b"5", 1, 5) == 5
    assert error_line(parse_int_range, b"6", 1, 5) == \
        "ERR value is out of range, value must between 1 and 5"
    assert error_line(parse_int_range, b"0", 1, 5) == \
        "ERR value is out of range, value must between 1 and 5"
    assert error_line(parse_int_range, b"one", 1, 5) == NOT_INTEGER


def test_parse_int_range_message_serves_both_failures() -> None:
    msg = "Number of IDs must be a positive integer"
    assert error_line(parse_int_range, b"0", 1, LLONG_MAX, msg) == f"ERR {msg}"
    assert error_line(parse_int_range, b"x", 1, LLONG_MAX, msg) == f"ERR {msg}"


def test_parse_timeout_ms() -> None:
    now = 1_000
    assert parse_timeout_ms(b"0", now) == 0  # forever
    assert parse_timeout_ms(b"250", now) == 250
    assert parse_timeout_ms(b"%d" % (LLONG_MAX - now), now) == LLONG_MAX - now
    assert error_line(parse_timeout_ms, b"%d" % (LLONG_MAX - now + 1), now) == \
        "ERR timeout is out of range"
    assert error_line(parse_timeout_ms, b"-1", now) == "ERR timeout is negative"
    assert error_line(parse_timeout_ms, b"1.5", now) == \
        "ERR timeout is not an integer or out of range"


@pytest.mark.parametrize(("arg", "expected"), [
    (b"maxlen", True), (b"MAXLEN", True), (b"MaxLen", True),
    (b"maxle", False), (b"maxlenx", False), (b"", False), (b"minid", False),
])
def test_is_word_matches_whole_words_in_any_case(arg: bytes, expected: bool) -> None:
    assert is_word(arg, b"maxlen") is expected
