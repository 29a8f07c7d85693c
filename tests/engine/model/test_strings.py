"""engine.model.strings: INCRBYFLOAT's long double arithmetic and its text, against the digits
Redis prints (x87 80-bit long double, `%.17Lf` with trailing zeros cut)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.strings import (
    add_long_double,
    format_long_double,
    is_finite,
    parse_long_double,
    round_extended,
)


def incr(value: bytes, increment: bytes) -> bytes | None:
    a, b = parse_long_double(value), parse_long_double(increment)
    assert a is not None and b is not None
    total = add_long_double(a, b)
    return None if total is None else format_long_double(total)


@pytest.mark.parametrize(("value", "increment", "expected"), [
    (b"0", b"0.1", b"0.1"),  # a double would print 0.10000000000000001
    (b"0.1", b"0.2", b"0.3"),
    (b"10.5", b"0.1", b"10.6"),
    (b"5.0e3", b"2.0e2", b"5200"),
    (b"3", b"-3", b"0"),
    (b"1", b"-1.5", b"-0.5"),
    (b"1e30", b"1", b"1000000000000000000024696061952"),  # as redis-server 7.0 prints it
    (b"0x10", b"1.0e1", b"26"),
])
def test_incr_prints_redis_digits(value, increment, expected):
    assert incr(value, increment) == expected


def test_more_digits_than_pythons_int_to_str_limit():
    # (sys.int_info's 4,300 digits; a long double's reach 4,933) as redis-server 7.0 prints them
    text = incr(b"1e4500", b"0")
    assert text is not None and len(text) == 4500
    assert text.startswith(b"99999999999999999999559257859368080186337701511989352454351277878")


@pytest.mark.parametrize("text", [b"", b" 1", b"1 ", b"abc", b"nan", b"1_0", b"1.5x", b"\xff"])
def test_what_strtold_would_not_take_whole(text):
    assert parse_long_double(text) is None


def test_infinity_parses_but_no_sum_is_made_of_it():
    inf = parse_long_double(b"inf")
    assert inf is not None
    assert add_long_double(inf, Fraction(1)) is None
    assert parse_long_double(b"1e5000") is None  # out of range: not a valid float
    huge = parse_long_double(b"1e4932")  # finite; twice it is not
    assert huge is not None and add_long_double(huge, huge) is None


def test_round_extended_keeps_64_significant_bits():
    assert round_extended(Fraction(2**64 + 1)) == 2**64  # a tie rounds to even
    assert round_extended(Fraction(2**64 + 3)) == 2**64 + 4
    assert round_extended(Fraction(-(2**63 + 1))) == -(2**63 + 1)
    assert round_extended(Fraction(0)) == 0


# --- the integer paths against the exact-fraction definitions --------------------------------
# A plain decimal is read, two long doubles added and a value printed with integers alone; the
# definitions they must agree with are the exact ones: Decimal's value rounded to 64 bits,
# the exact sum rounded, printf's exact rounding to 17 decimals.

_DECIMALS = st.one_of(
    st.integers(-10**30, 10**30).map(lambda n: b"%d" % n),
    st.tuples(st.integers(-10**25, 10**25), st.integers(-4960, 4960)).map(
        lambda t: b"%de%d" % t),
    st.tuples(st.integers(0, 10**12), st.integers(0, 10**20), st.sampled_from([b"", b"-", b"+"])
              ).map(lambda t: t[2] + b"%d.%d" % t[:2]),
    st.sampled_from([b".5", b"5.", b"-0", b"-0.0", b"+.25e-3", b"1E+10", b"1.5e+05", b"0.1",
                     b"1e4932", b"-1e4933", b"1e-4950", b"9" * 4001]),
)


def _by_decimal(text: bytes) -> Fraction | None:
    value = round_extended(Fraction(Decimal(text.decode())))
    return value if abs(value) < Fraction(2) ** 16384 else None


@settings(max_examples=400, deadline=None)
@given(_DECIMALS)
def test_a_plain_decimal_reads_as_decimal_rounded(text: bytes) -> None:
    assert parse_long_double(text) == _by_decimal(text)


@settings(max_examples=400, deadline=None)
@given(_DECIMALS, _DECIMALS)
def test_the_sum_and_its_text_are_the_exact_ones_rounded(a_text: bytes, b_text: bytes) -> None:
    a, b = parse_long_double(a_text), parse_long_double(b_text)
    if a is None or b is None:
        return
    exact = round_extended(a + b)
    total = add_long_double(a, b)
    assert total == (exact if is_finite(exact) else None)
    assert is_finite(a) == (abs(a) < Fraction(2) ** 16384)
    if total is not None:
        scaled = round(abs(total) * 10**17)  # printf's exact rounding, ties to even
        whole, frac = divmod(scaled, 10**17)
        text = f"{Decimal(whole)}.{frac:017d}".rstrip("0").rstrip(".")
        expected = b"0" if text == "0" else (("-" if total < 0 else "") + text).encode()
        assert format_long_double(total) == expected
