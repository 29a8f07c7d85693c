"""Sorted-set scores: string2d's parsing, d2string's text (fpconv's Grisu2 for 8.x), score and
lex range parsing. Redis 7.0 (the oracle here) parses with the same strtod rules as 8.x, but
replied `%.17g`; the 8.x reply texts below are fpconv_dtoa's, as its source computes them."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.scores import (
    LEX_MAX,
    LEX_MIN,
    LEX_VALUE,
    LexRange,
    ScoreRange,
    format_score,
    format_score_g17,
    fpconv_dtoa,
    parse_lex_range,
    parse_score,
    parse_score_range,
)
from tests.support.resp_client import RespClient, RespError

VALID = [
    (b"1", 1.0), (b"-1", -1.0), (b"+1", 1.0), (b"0", 0.0), (b"1.5", 1.5), (b"1.", 1.0),
    (b".5", 0.5), (b"+.5", 0.5), (b"-.5", -0.5), (b"1e3", 1000.0), (b"1E3", 1000.0),
    (b"1e+3", 1000.0), (b"1e-3", 0.001), (b"0x10", 16.0), (b"0X1P4", 16.0),
    (b"0x.8", 0.5), (b"-0x1.8p1", -3.0), (b"inf", math.inf), (b"+inf", math.inf),
    (b"-inf", -math.inf), (b"INF", math.inf), (b"Infinity", math.inf),
    (b"-INFINITY", -math.inf), (b"4e-320", 4e-320), (b"0e-400", 0.0),
    (b"1.7976931348623157e308", 1.7976931348623157e308),
    (b"00012", 12.0), (b"9007199254740993", 9007199254740992.0),
]
INVALID = [
    b"", b" 1", b"\t1", b"1 ", b"1\x00", b"abc", b"1e", b"1e+", b"1.5.3", b".", b"+", b"-",
    b"nan", b"NaN", b"-nan", b"nan(123)", b"1e400", b"-1e400", b"1e-400", b"0x1p-2000",
    b"0x1p2000", b"1.8e308", b"infinit", b"infinityy", b"-+inf", b"+-1", b"1_000", b"0x",
    b"e5", b"--1",
]


@pytest.mark.parametrize(("text", "value"), VALID)
def test_parse_score_accepts_strtod_numbers(text: bytes, value: float) -> None:
    parsed = parse_score(text)
    assert parsed == value
    assert parsed is not None and math.copysign(1, parsed) == math.copysign(1, value)


def test_parse_score_keeps_negative_zero() -> None:
    parsed = parse_score(b"-0")
    assert parsed == 0.0 and math.copysign(1, parsed) < 0


@pytest.mark.parametrize("text", INVALID)
def test_parse_score_refuses(text: bytes) -> None:
    assert parse_score(text) is None


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False))
def test_parse_score_reads_every_double_back(x: float) -> None:
    assert parse_score(repr(x).encode()) == x
    assert parse_score(format_score(x)) == x


FORMATTED = [
    (1.0, b"1"), (0.1, b"0.1"), (-2.5, b"-2.5"), (math.inf, b"inf"), (-math.inf, b"-inf"),
    (0.0, b"0"), (-0.0, b"-0"), (1e20, b"1e+20"), (1e21, b"1e+21"), (1.5e-7, b"1.5e-7"),
    (1e-7, b"1e-7"), (0.0001, b"0.0001"), (3e-5, b"0.00003"), (123.456, b"123.456"),
    (1e300, b"1e+300"), (-1.25e-300, b"-1.25e-300"), (5e-324, b"5e-324"),
    (1.7976931348623157e308, b"1.7976931348623157e+308"),
    # integral values up to 2**62 print as integers (double2ll), beyond through fpconv
    (2.0 ** 62, b"4611686018427387904"), (2.0 ** 62 + 2048, b"4611686018427390000"),
    (2.0 ** 63, b"9223372036854776000"), (-(2.0 ** 53), b"-9007199254740992"),
    (1234567.0, b"1234567"),
    # Grisu2 is not always the shortest form: fpconv's own digits (checked against its C)
    (1.718753778706239e-07, b"1.7187537787062391e-7"),
    (0.00787858987614378, b"0.007878589876143779"),
    (7.542083030415347, b"7.5420830304153466"),
    (365.995827655846, b"365.99582765584603"),
    (0.38776216083251, b"0.38776216083251003"),
    (4.740535365471266e16, b"47405353654712656"),
]


@pytest.mark.parametrize(("x", "text"), FORMATTED)
def test_format_score_writes_d2string(x: float, text: bytes) -> None:
    assert format_score(x) == text


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_score_round_trips(x: float) -> None:
    text = format_score(x)
    assert float(text) == x
    assert math.copysign(1, float(text)) == math.copysign(1, x)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_format_score_any_bit_pattern(bits: int) -> None:
    x = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    if x != x:
        assert format_score(x) == b"nan"
        return
    text = format_score(x)
    assert float(text) == x
    # fpconv never writes more than 17 significant digits
    digits = text.lstrip(b"-").split(b"e")[0].replace(b".", b"").strip(b"0")
    assert len(digits) <= 19 if b"e" not in text else len(digits) <= 17


def test_format_score_g17() -> None:
    assert format_score_g17(0.1) == b"0.10000000000000001"
    assert format_score_g17(1.0) == b"1"
    assert format_score_g17(-math.inf) == b"-inf"


def test_score_range_parsing() -> None:
    rng = parse_score_range(b"(1", b"5")
    assert rng == ScoreRange(1.0, 5.0, True, False)
    assert not rng.contains(1.0) and rng.contains(1.5) and rng.contains(5.0)
    assert parse_score_range(b"-inf", b"+inf") == ScoreRange(-math.inf, math.inf)
    assert parse_score_range(b"", b"(") == ScoreRange(0.0, 0.0, False, True)
    assert parse_score_range(b" 1", b"1\x00junk") == ScoreRange(1.0, 1.0)
    assert parse_score_range(b"1e400", b"-1e400") == ScoreRange(math.inf, -math.inf)
    assert parse_score_range(b"0x10", b"inf") == ScoreRange(16.0, math.inf)
    for bad in (b"nan", b"1 ", b"abc", b"((1", b"1e", b"(nan"):
        assert parse_score_range(bad, b"1") is None
        assert parse_score_range(b"1", bad) is None


def test_score_range_emptiness() -> None:
    assert ScoreRange(2, 1).is_empty()
    assert ScoreRange(1, 1, True, False).is_empty()
    assert ScoreRange(1, 1, False, True).is_empty()
    assert not ScoreRange(1, 1).is_empty()
    assert not ScoreRange(-0.0, 0.0).is_empty()


def test_lex_range_parsing_and_contains() -> None:
    rng = parse_lex_range(b"[b", b"(d")
    assert rng == LexRange(LEX_VALUE, b"b", False, LEX_VALUE, b"d", True)
    assert [m for m in (b"a", b"b", b"c", b"cz", b"d") if rng.contains(m)] == [b"b", b"c", b"cz"]
    whole = parse_lex_range(b"-", b"+")
    assert whole is not None and whole.contains(b"") and whole.contains(b"\xff" * 9)
    assert parse_lex_range(b"[", b"+") == LexRange(LEX_VALUE, b"", False, LEX_MAX, b"", True)
    for bad in (b"a", b"", b"+a", b"-a", b"1"):
        assert parse_lex_range(bad, b"+") is None
        assert parse_lex_range(b"-", bad) is None


def test_lex_range_emptiness() -> None:
    def rng(lo: bytes, hi: bytes) -> LexRange:
        parsed = parse_lex_range(lo, hi)
        assert parsed is not None
        return parsed
    assert rng(b"+", b"-").is_empty()
    assert rng(b"-", b"-").is_empty() and rng(b"+", b"+").is_empty()
    assert rng(b"[b", b"[a").is_empty()
    assert rng(b"(a", b"[a").is_empty() and not rng(b"[a", b"[a").is_empty()
    assert not rng(b"-", b"[a").is_empty() and rng(b"[a", b"-").is_empty()
    assert LexRange(LEX_MIN, b"", True, LEX_VALUE, b"", False).contains(b"")


# ---- against redis-server 7.0: the same strtod rules (its replies are %.17g) ----

ORACLE_TEXTS = [t for t, _ in VALID] + INVALID[:-1]  # b"--1" has nothing more to say


def test_parse_score_matches_redis(redis_raw: RespClient) -> None:
    for text in ORACLE_TEXTS:
        redis_raw.execute("DEL", "z")
        parsed = parse_score(text)
        try:
            redis_raw.execute("ZADD", "z", text, "m")
        except RespError as err:
            assert "not a valid float" in str(err), text
            assert parsed is None, text
            continue
        assert parsed is not None, text
        assert redis_raw.execute("ZSCORE", "z", "m") == format_score_g17(parsed), text


RANGE_BOUNDS = [b"", b"(", b"1", b"(1", b" 2", b"1e400", b"-1e400", b"nan", b"0x2", b"2 ",
                b"(inf", b"-inf", b"+inf", b"3.0", b"(3", b"abc", b"1\x00x"]


def test_parse_score_range_matches_redis(redis_raw: RespClient) -> None:
    redis_raw.execute("DEL", "z")
    redis_raw.execute("ZADD", "z", "0", "z0", "1", "a", "2", "b", "3", "c", "inf", "i")
    members = {b"z0": 0.0, b"a": 1.0, b"b": 2.0, b"c": 3.0, b"i": math.inf}
    for low in RANGE_BOUNDS:
        for high in RANGE_BOUNDS:
            rng = parse_score_range(low, high)
            try:
                got = redis_raw.execute("ZCOUNT", "z", low, high)
            except RespError as err:
                assert "min or max is not a float" in str(err)
                assert rng is None, (low, high)
                continue
            assert rng is not None, (low, high)
            expected = 0 if rng.is_empty() else sum(map(rng.contains, members.values()))
            assert got == expected, (low, high)


def test_parse_lex_range_matches_redis(redis_raw: RespClient) -> None:
    redis_raw.execute("DEL", "z")
    members = [b"", b"a", b"ab", b"b", b"c\x00", b"\xff"]
    for m in members:
        redis_raw.execute("ZADD", "z", "0", m)
    bounds = [b"-", b"+", b"[", b"(", b"[a", b"(a", b"[b", b"(ab", b"[\xff", b"x", b"+x"]
    for low in bounds:
        for high in bounds:
            rng = parse_lex_range(low, high)
            try:
                got = redis_raw.execute("ZLEXCOUNT", "z", low, high)
            except RespError as err:
                assert "not valid string range item" in str(err)
                assert rng is None, (low, high)
                continue
            assert rng is not None, (low, high)
            expected = 0 if rng.is_empty() else sum(map(rng.contains, members))
            assert got == expected, (low, high)


def test_fpconv_dtoa_without_the_integer_shortcut() -> None:
    assert fpconv_dtoa(1.0) == b"1"
    assert fpconv_dtoa(2.0 ** 62) == b"4611686018427388000"  # d2string writes every digit
    assert fpconv_dtoa(-0.0) == b"-0" and fpconv_dtoa(0.0) == b"0"
    assert fpconv_dtoa(-math.inf) == b"-inf" and fpconv_dtoa(math.nan) == b"nan"


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.from_regex(rb"\A-?[0-9]{1,17}(\.[0-9]{1,17})?\Z"),
    st.sampled_from([b"-inf", b"+inf", b"inf", b"0", b"-0", b"Inf", b"+0", b"00", b"1.", b".5"])))
def test_range_bound_shortcuts_read_as_strtod(text: bytes) -> None:
    """The bounds read without the strtod grammar (infinities, plain decimals) come out as
    the grammar reads them (string2d's whole-text strtod, here), the sign of a zero included."""
    rng = parse_score_range(text, text)
    assert rng is not None
    value = parse_score(text)
    assert value is not None
    assert struct.pack("<d", rng.min) == struct.pack("<d", value)
    assert rng == ScoreRange(value, value)
