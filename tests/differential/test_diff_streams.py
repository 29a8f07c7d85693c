"""Differential tests of the entry commands against the real redis-server: XADD, XLEN, XRANGE,
XREVRANGE, XDEL, XTRIM, XSETID, XREAD (non-blocking), plus node layout (XINFO STREAM's radix-tree
counts) under stream-node-max-entries / stream-node-max-bytes.

Every argv runs on the engine and on Redis; replies and error lines must match byte for byte.
Only behaviour common to Redis 7.0 (the local oracle) and 8.x is compared here; XREAD `+`, the
8.x unbalanced-streams text and XSETID's max_deleted check live in tests/differential/test_redis8.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock, flat_map, id_shape, reset_redis_config

WEIRD_NUMBERS = [
    "+5", " 5", "5 ", "\t5", "007", "-0", "-1", "0", "00", "1.5", "0x10", "1e3", "",
    "18446744073709551615", "18446744073709551616", "9223372036854775807",
    "9223372036854775808", "-9223372036854775808", "-18446744073709551615",
    "99999999999999999999999", "00000000000000000000001", "abc", "5abc", "+", "-", " ", "+-5",
]


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    """Runs every test twice: on an embedded engine and through the network server."""
    reset_redis_config(redis_raw)
    try:
        yield Both(backend(Engine(clock=WallClock())), redis_raw)
    finally:  # the server is shared by the whole session
        reset_redis_config(redis_raw)


def fill(both: Both, key: str, n: int, start_ms: int = 1, fields: tuple = ("f", "v")) -> None:
    for i in range(n):
        both.ok("XADD", key, f"{start_ms + i}-1", *fields)


# --- XADD ------------------------------------------------------------------------------------------


def test_xadd_explicit_id_forms(both):
    both.script(
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "1-2", "f", "v", "g", "w"),
        ("XADD", "s", "1-*", "f", "v"),
        ("XADD", "s", "2-*", "f", "v"),
        ("XADD", "s", "2-*", "f", "v"),
        ("XADD", "s", "5", "f", "v"),
        ("XADD", "s", "5", "f", "v"),
        ("XADD", "s", "6", "f", "v"),
        ("XADD", "s", "5-9", "f", "v"),
        ("XADD", "s", "6-0", "f", "v"),
        ("XADD", "s", "6-1", "f", "v"),
        ("XADD", "s", "7-18446744073709551615", "f", "v"),
        ("XADD", "s", "8-*", "f", "v"),
        ("XADD", "s", "18446744073709551615-18446744073709551614", "f", "v"),
        ("XADD", "s", "18446744073709551615-*", "f", "v"),
        ("XADD", "s", "18446744073709551615-*", "f", "v"),
        ("XADD", "s", "*", "f", "v"),
        ("XADD", "s", "18446744073709551615", "f", "v"),
        ("XLEN", "s"),
        ("XRANGE", "s", "-", "+"),
    )
    # Empty stream, seq-star at 0 and plain 0-1.
    both.script(
        ("XADD", "z", "0-*", "f", "v"),
        ("XADD", "z", "0-*", "f", "v"),
        ("XADD", "y", "0-1", "f", "v"),
        ("XADD", "x", "0", "f", "v"),
        ("XADD", "x", "0-0", "f", "v"),
        ("EXISTS", "x"),
        ("XRANGE", "z", "-", "+"),
    )


def test_xadd_after_exhausted_sequence(both):
    # (`3-*` here is errno-dependent in 7.0; 8.x's EDOM line is in test_redis8.)
    both.ok("XADD", "s", "3-18446744073709551615", "f", "v")
    both.script(
        ("XADD", "s", "4-*", "f", "v"),
        ("XADD", "s", "3", "f", "v"),
        ("XADD", "s", "4", "f", "v"),
    )
    both("XADD", "s", "*", "f", "v", normalise=id_shape)  # two clocks: compare the shape


def test_xadd_auto_id_shapes(both):
    both("XADD", "s", "*", "f", "v", normalise=id_shape)
    both("XADD", "s", "*", "f", "v", "g", "w", normalise=id_shape)
    both("XADD", "s", "MAXLEN", "1", "*", "f", "v", normalise=id_shape)
    both("XLEN", "s")
    both("XRANGE", "s", "-", "+", normalise=id_shape)
    # An explicit ID far in the future: `*` then increments its sequence.
    both.ok("XADD", "t", "99999999999999-5", "f", "v")
    both.script(("XADD", "t", "*", "f", "v"), ("XADD", "t", "*", "f", "v"))
    both.ok("XADD", "u", "99999999999999-18446744073709551615", "f", "v")
    both("XADD", "u", "*", "f", "v")


def test_xadd_errors(both):
    both.ok("XADD", "s", "5-5", "f", "v")
    errors = [
        ("XADD",), ("XADD", "s"), ("XADD", "s", "*"), ("XADD", "s", "*", "f"),
        ("XADD", "s", "*", "f", "v", "g"), ("XADD", "s", "10-1", "f"),
        ("XADD", "s", "MAXLEN", "5", "*", "f"), ("XADD", "s", "NOMKSTREAM", "*"),
        ("XADD", "s", "0-0", "f", "v"), ("XADD", "s", "0", "f", "v"),
        ("XADD", "new", "0-0", "f", "v"),
        ("XADD", "s", "5-5", "f", "v"), ("XADD", "s", "5-4", "f", "v"),
        ("XADD", "s", "4", "f", "v"), ("XADD", "s", "4-*", "f", "v"),
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "-", "f", "v"), ("XADD", "s", "+", "f", "v"),
        ("XADD", "s", "*-1", "f", "v"), ("XADD", "s", "*-*", "f", "v"),
        ("XADD", "s", "6-**", "f", "v"), ("XADD", "s", "6-", "f", "v"),
        ("XADD", "s", "-6", "f", "v"), ("XADD", "s", "6-1-1", "f", "v"),
        ("XADD", "s", "x" * 200, "f", "v"), ("XADD", "s", "1" * 127, "f", "v"),
        ("XADD", "s", "MAXLEN", "-1", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "-1", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "abc", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "1.5", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "+5", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v"),
        ("XADD", "s", "MINID", "1", "MAXLEN", "1", "*", "f", "v"),
        ("XADD", "s", "MINID", "1", "MINID", "1", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "1", "MAXLEN", "1", "*", "f", "v"),
        ("XADD", "s", "MINID", "-", "*", "f", "v"),
        ("XADD", "s", "MINID", "+", "*", "f", "v"),
        ("XADD", "s", "MINID", "~", "bad", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "10", "LIMIT", "5", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "=", "10", "LIMIT", "5", "*", "f", "v"),
        ("XADD", "s", "LIMIT", "5", "*", "f", "v"),
        ("XADD", "s", "LIMIT", "0", "*", "f", "v"),
        ("XADD", "s", "LIMIT", "-1", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "-1", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "x", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "*", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "NOMKSTREAM", "0-0", "f", "v"),
        ("XADD", "s", "BOGUS", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "~", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "=", "*", "f", "v"),
        ("XADD", "s", "MAXLEN", "9223372036854775808", "*", "f", "v"),
        ("XADD", "s", "bad", "f"), ("XADD", "s", "0-0", "f"), ("XADD", "s", "MAXLEN", "5"),
        ("XADD", "s", "MAXLEN", "~", "5", "LIMIT"), ("XADD", "s", "MAXLEN", "~", "5", "LIMIT", "1"),
        ("XADD", "s", "NOMKSTREAM"), ("XADD", "s", "MINID", "5", "6-0"),
    ]
    for argv in errors:
        both.err(*argv)
    both("XLEN", "s")
    both("XRANGE", "s", "-", "+")
    both("EXISTS", "new")


@pytest.mark.parametrize("number", WEIRD_NUMBERS)
def test_xadd_weird_numbers_in_ids(both, number):
    both("XADD", "s", f"{number}-1", "f", "v")
    both("XADD", "s", f"1-{number}", "f", "v")
    both("XADD", "s", number, "f", "v")
    both("XADD", "s", f"{number}-*", "f", "v")
    both("XADD", "s", "MAXLEN", number, "*", "f", "v", normalise=id_shape)
    both("XADD", "s", "MINID", number, "*", "f", "v", normalise=id_shape)
    both("XADD", "s", "MAXLEN", "~", "5", "LIMIT", number, "*", "f", "v", normalise=id_shape)
    both("XRANGE", "s", "-", "+", normalise=id_shape)


def test_xadd_options_after_the_id_are_fields(both):
    both.script(
        ("XADD", "s", "1-1", "MAXLEN", "0", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "2-1", "NOMKSTREAM", "x"),
        ("XADD", "s", "MAXLEN", "5", "3-1", "LIMIT", "1"),
        ("XRANGE", "s", "-", "+"),
    )
    both("XADD", "s", "*", "MAXLEN", "0", "f", "v", normalise=id_shape)
    both("XLEN", "s")


def test_xadd_nomkstream(both):
    both.script(
        ("XADD", "s", "NOMKSTREAM", "1-1", "f", "v"),
        ("EXISTS", "s"),
        ("XADD", "s", "nomkstream", "MAXLEN", "0", "1-1", "f", "v"),
        ("EXISTS", "s"),
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "2-1", "f", "v"),
        ("XADD", "s", "MAXLEN", "1", "NOMKSTREAM", "3-1", "f", "v"),
        ("XADD", "s", "NOMKSTREAM", "NOMKSTREAM", "4-1", "f", "v"),
        ("XRANGE", "s", "-", "+"),
        # NOMKSTREAM on a missing key is checked after the ID/arity checks.
        ("XADD", "m", "NOMKSTREAM", "0-0", "f", "v"),
        ("XADD", "m", "NOMKSTREAM", "1-1", "f"),
        ("XADD", "m", "NOMKSTREAM", "bad", "f", "v"),
    )


def test_xadd_field_values_binary_and_duplicates(both):
    both.script(
        ("XADD", "s", "1-1", "f", "v", "f", "w"),
        ("XADD", "s", "1-2", b"\x00\xff", b"\r\n", "", ""),
        ("XADD", "s", "1-3", "123", "-5", "9223372036854775808", "007"),
        ("XRANGE", "s", "-", "+"),
        ("XREVRANGE", "s", "+", "-"),
    )


def test_xadd_maxlen_and_minid_trimming(both):
    for i in range(1, 31):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    both.script(
        ("XADD", "s", "MAXLEN", "25", "31-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MAXLEN", "=", "20", "32-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MAXLEN", "~", "5", "33-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MINID", "20", "34-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MINID", "=", "25-1", "35-1", "f", "v"),
        ("XADD", "s", "MINID", "~", "30", "36-1", "f", "v"),
        ("XADD", "s", "maxlen", "0", "37-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MINID", "99", "38-1", "f", "v"),
        ("XLEN", "s"),
        ("EXISTS", "s"),
        ("XRANGE", "s", "-", "+"),
        ("XINFO", "STREAM", "s"),
    )


def test_xadd_approx_trim_with_limit(both):
    for i in range(1, 451):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    both.script(
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "100", "451-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "99", "452-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MAXLEN", "~", "10", "LIMIT", "250", "453-1", "f", "v"),
        ("XLEN", "s"),
        ("XADD", "s", "MINID", "~", "440", "LIMIT", "0", "454-1", "f", "v"),
        ("XLEN", "s"),
        ("XRANGE", "s", "-", "+", "COUNT", "3"),
        ("XINFO", "STREAM", "s"),
    )


# --- XLEN ------------------------------------------------------------------------------------------


def test_xlen(both):
    both.script(
        ("XLEN", "s"), ("XLEN",), ("XLEN", "s", "t"), ("xlen", "s"),
        ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "2-1", "f", "v"),
        ("XLEN", "s"), ("XDEL", "s", "1-1"), ("XLEN", "s"), ("XDEL", "s", "2-1"),
        ("XLEN", "s"), ("EXISTS", "s"),
    )


# --- XRANGE / XREVRANGE ----------------------------------------------------------------------------


RANGE_BOUNDS = [
    "-", "+", "0", "0-0", "1", "1-1", "2", "2-3", "3-18446744073709551615", "5",
    "(1-1", "(2", "(0-0", "(-", "(+", "(18446744073709551615-18446744073709551615",
    "18446744073709551615-18446744073709551615", "(", "((1", "( 1", "(2-*", "2-*",
    "bad", "1-bad", " 1", "+1", "007", "-0", "18446744073709551615", "18446744073709551616",
]


def _range_data(both: Both) -> None:
    for sid in ("1-1", "1-2", "2-1", "2-2", "2-3", "3-1", "4-5", "5-0"):
        both.ok("XADD", "s", sid, "f", sid)
    both.ok("XDEL", "s", "2-2")


def test_xrange_bounds_matrix(both):
    _range_data(both)
    for start in RANGE_BOUNDS:
        for end in RANGE_BOUNDS:
            both("XRANGE", "s", start, end)
            both("XREVRANGE", "s", end, start)


def test_xrange_count_and_options(both):
    _range_data(both)
    for count in ("0", "1", "2", "-1", "-100", "100", "9223372036854775807",
                  "9223372036854775808", "x", "1.0", "+1", " 1", "007"):
        both("XRANGE", "s", "-", "+", "COUNT", count)
        both("XREVRANGE", "s", "+", "-", "COUNT", count)
        both("XRANGE", "missing", "-", "+", "COUNT", count)
        both("XRANGE", "s", "(5", "+", "COUNT", count)
    both.script(
        ("XRANGE", "s", "-", "+", "COUNT"),
        ("XRANGE", "s", "-", "+", "COUNT", "1", "COUNT", "3"),
        ("XRANGE", "s", "-", "+", "count", "2"),
        ("XRANGE", "s", "-", "+", "LIMIT", "2"),
        ("XRANGE", "s", "-", "+", "COUNT", "2", "extra"),
        ("XRANGE", "s", "-"),
        ("XRANGE", "s"),
        ("XREVRANGE", "s", "+"),
        ("XRANGE", "missing", "-", "+"),
        ("XRANGE", "missing", "(-", "+"),
        ("XRANGE", "missing", "-", "+", "BOGUS"),
        ("XREVRANGE", "missing", "+", "-", "COUNT", "0"),
        ("XRANGE", "s", "+", "-"),
        ("XREVRANGE", "s", "-", "+"),
        ("XRANGE", "s", "3", "2"),
    )


def test_xrange_across_many_nodes(both):
    for i in range(1, 351):
        both.ok("XADD", "s", f"{i}-1", "f", str(i))
    for i in range(1, 351, 7):
        both.ok("XDEL", "s", f"{i}-1")
    for start, end, count in [("-", "+", "0"), ("99", "205", "50"), ("(100-1", "(201-1", "5"),
                              ("150", "+", "1000"), ("0", "1", "1")]:
        both("XRANGE", "s", start, end, "COUNT", count)
        both("XREVRANGE", "s", end, start, "COUNT", count)
    both("XRANGE", "s", "-", "+")
    both("XREVRANGE", "s", "+", "-")


# --- XDEL ------------------------------------------------------------------------------------------


def test_xdel(both):
    _range_data(both)
    both.script(
        ("XDEL", "s", "1-1"), ("XDEL", "s", "1-1"), ("XDEL", "s", "1-2", "1-2", "9-9"),
        ("XDEL", "s", "3"), ("XDEL", "s", "3-1", "bad"), ("XDEL", "s", "-"), ("XDEL", "s", "+"),
        ("XDEL", "s", "4-5", "+"), ("XLEN", "s"),
        ("XDEL", "missing", "1-1"), ("XDEL", "missing", "bad"), ("XDEL", "s"), ("XDEL",),
        ("XDEL", "s", "(2-1"), ("XDEL", "s", "2-*"), ("XDEL", "s", " 2-1"),
        ("XRANGE", "s", "-", "+"),
        ("XINFO", "STREAM", "s"),
        ("XDEL", "s", "2-1", "2-3", "5-0"),
        ("XLEN", "s"), ("EXISTS", "s"), ("XINFO", "STREAM", "s"),
        ("XADD", "s", "5-0", "f", "v"), ("XADD", "s", "5-1", "f", "v"),
        ("XINFO", "STREAM", "s"),
    )


def test_xdel_frees_nodes_and_first_id(both):
    for i in range(1, 251):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    both("XINFO", "STREAM", "s")
    both("XDEL", "s", *[f"{i}-1" for i in range(1, 101)])
    both("XINFO", "STREAM", "s")
    both("XDEL", "s", *[f"{i}-1" for i in range(150, 201)])
    both("XINFO", "STREAM", "s")
    both("XTRIM", "s", "MAXLEN", "~", "10")
    both("XINFO", "STREAM", "s")
    both("XDEL", "s", "101-1")
    both("XINFO", "STREAM", "s")


# --- XTRIM -----------------------------------------------------------------------------------------


def test_xtrim_errors(both):
    both.ok("XADD", "s", "1-1", "f", "v")
    errors = [
        ("XTRIM",), ("XTRIM", "s"), ("XTRIM", "s", "MAXLEN"),
        ("XTRIM", "s", "BOGUS", "1"), ("XTRIM", "s", "LIMIT", "1"),
        ("XTRIM", "s", "LIMIT", "0", "MAXLEN", "1"), ("XTRIM", "s", "MAXLEN", "1", "LIMIT", "1"),
        ("XTRIM", "s", "MAXLEN", "-1"), ("XTRIM", "s", "MAXLEN", "~", "-1"),
        ("XTRIM", "s", "MAXLEN", "x"), ("XTRIM", "s", "MAXLEN", "~"),
        ("XTRIM", "s", "MAXLEN", "1", "MINID", "1"), ("XTRIM", "s", "MINID", "x"),
        ("XTRIM", "s", "MINID", "-"), ("XTRIM", "s", "MINID", "~", "+"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "-5"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "x"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT"),
        ("XTRIM", "s", "MAXLEN", "~", "1", "extra"),
        ("XTRIM", "s", "MAXLEN", "1", "NOMKSTREAM"),
        ("XTRIM", "s", "NOMKSTREAM", "MAXLEN", "1"),
        ("XTRIM", "missing", "MAXLEN", "x"), ("XTRIM", "missing", "LIMIT", "1"),
        ("XTRIM", "missing", "MINID", "~", "5", "LIMIT", "1", "LIMIT", "-1"),
    ]
    for argv in errors:
        both.err(*argv)
    both.script(
        ("XTRIM", "missing", "MAXLEN", "0"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "1", "LIMIT", "0"),
        ("XTRIM", "s", "MAXLEN", "1", "MAXLEN"),
        ("XTRIM", "s", "MAXLEN", "=", "5"), ("XTRIM", "s", "maxlen", "~", "5"),
        ("XTRIM", "s", "minid", "=", "0"), ("XTRIM", "s", "MINID", "1"),
        ("XLEN", "s"),
    )


@pytest.mark.parametrize("approx", ["=", "~"])
def test_xtrim_maxlen_over_many_nodes(both, approx):
    for i in range(1, 1001):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    both("XINFO", "STREAM", "s")
    for maxlen in (995, 950, 901, 900, 899, 750, 420, 400, 399, 101, 100, 50, 1, 0):
        both("XTRIM", "s", "MAXLEN", approx, str(maxlen))
        both("XLEN", "s")
        both("XINFO", "STREAM", "s")
        both("XRANGE", "s", "-", "+", "COUNT", "2")


@pytest.mark.parametrize("approx", ["=", "~"])
def test_xtrim_minid_over_many_nodes_with_tombstones(both, approx):
    for i in range(1, 801):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    for i in range(1, 801, 3):
        both.ok("XDEL", "s", f"{i}-1")
    both("XINFO", "STREAM", "s")
    for minid in ("50", "100-1", "101-1", "102", "199-1", "300", "301-2", "500", "750", "800-1",
                  "801", "0"):
        both("XTRIM", "s", "MINID", approx, minid)
        both("XLEN", "s")
        both("XINFO", "STREAM", "s")
        both("XRANGE", "s", "-", "+", "COUNT", "2")


def test_xtrim_limit(both):
    for i in range(1, 1201):
        both.ok("XADD", "s", f"{i}-1", "f", "v")
    both.script(
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "150"),
        ("XLEN", "s"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "99"),
        ("XLEN", "s"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "100"),
        ("XLEN", "s"),
        ("XTRIM", "s", "MINID", "~", "1000", "LIMIT", "300"),
        ("XLEN", "s"),
        ("XTRIM", "s", "MAXLEN", "~", "0"),  # default limit: 100 nodes' worth
        ("XLEN", "s"),
        ("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "0"),  # explicit 0: unlimited
        ("XLEN", "s"),
        ("XINFO", "STREAM", "s"),
    )


def test_xtrim_default_limit_follows_node_max_entries(both):
    """The default `~` LIMIT is 100 x stream-node-max-entries, 10000 when that is <= 0,
    capped at 1,000,000."""
    for entries, n in ((3, 700), (0, 100), (200, 500), (150, 16000)):
        both.config("stream-node-max-entries", entries)
        both.ok("DEL", "s")
        both.bulk([("XADD", "s", f"{i}-1", "f", "v") for i in range(1, n + 1)])
        both("XTRIM", "s", "MAXLEN", "~", "0")
        both("XLEN", "s")
        both("XINFO", "STREAM", "s")


def _xinfo_layout(both: Both, key: str) -> dict:
    info = flat_map(both("XINFO", "STREAM", key))
    return {k: info[k] for k in (b"length", b"radix-tree-keys", b"radix-tree-nodes")}


def test_node_split_by_bytes(both):
    """Large values split nodes by stream-node-max-bytes (4096): the engine's listpack-size
    estimate must split exactly where Redis does."""
    rnd = random.Random(7)
    ms, seq = 1, 0
    for step in range(400):
        size = rnd.choice([1, 10, 50, 63, 64, 100, 127, 128, 300, 700, 1000, 4000, 5000])
        value = "x" * size
        shape = rnd.randrange(6)
        if shape == 0:
            fields = ("f", value)
        elif shape == 1:
            fields = ("f", value, "g", str(rnd.randrange(-10**6, 10**6)))
        elif shape == 2:
            fields = ("other", value)
        elif shape == 3:
            fields = ("f", str(rnd.choice([0, 1, 127, 128, 4095, 4096, -4097, 2**31, 2**63 - 1])))
        elif shape == 4:
            fields = ("f" * rnd.choice([1, 62, 63, 64, 130]), value)
        else:
            fields = ("n", "12", "m", "-1", "f", value)
        jump = rnd.choice([0, 1, 1, 100, 5000, 2**33])
        ms += jump
        seq = (seq if not jump else 0) + rnd.choice([1, 5, 300, 70000, 2**40])
        both.ok("XADD", "s", f"{ms}-{seq}", *fields)
        if step % 25 == 0:
            _xinfo_layout(both, "s")
    _xinfo_layout(both, "s")
    both("XINFO", "STREAM", "s")
    for maxlen in (350, 300, 200, 100, 10):
        both("XTRIM", "s", "MAXLEN", "~", str(maxlen))
        _xinfo_layout(both, "s")


@pytest.mark.parametrize("max_bytes", [0, 1, 100, 512, 1000, 4096, 8192])
def test_node_split_by_bytes_configs(both, max_bytes):
    both.config("stream-node-max-bytes", max_bytes)
    rnd = random.Random(max_bytes)
    for i in range(1, 301):
        n = rnd.choice([0, 5, 20, 90, 200])
        both.ok("XADD", "s", f"{i}-{i}", "field", "v" * n, "k", str(i * 1000))
    _xinfo_layout(both, "s")
    both("XTRIM", "s", "MAXLEN", "~", "150")
    _xinfo_layout(both, "s")
    both("XTRIM", "s", "MINID", "~", "280")
    _xinfo_layout(both, "s")


@pytest.mark.parametrize("max_entries", [1, 2, 7, 100])
def test_node_split_by_entries(both, max_entries):
    both.config("stream-node-max-entries", max_entries)
    for i in range(1, 260):
        both.ok("XADD", "s", f"{i}-0", "f", "v")
    _xinfo_layout(both, "s")
    both("XDEL", "s", "3-0", "4-0", "100-0")
    both("XTRIM", "s", "MAXLEN", "~", "200")
    _xinfo_layout(both, "s")
    both("XTRIM", "s", "MINID", "~", "150")
    _xinfo_layout(both, "s")
    both("XTRIM", "s", "MAXLEN", "=", "33")
    both("XINFO", "STREAM", "s")


def test_radix_tree_nodes_with_spread_ids(both):
    both.config("stream-node-max-entries", 1)
    ids = ["1-1", "1-2", "255-0", "256-0", "65536-7", "2-18446744073709551615",
           "4294967296-0", "4294967297-1", "1099511627776-3", "18446744073709551615-0",
           "18446744073709551615-1", "18446744073709551615-256"]
    for sid in sorted(ids, key=lambda x: tuple(map(int, x.split("-")))):
        both.ok("XADD", "s", sid, "f", "v")
        _xinfo_layout(both, "s")
    both("XDEL", "s", "255-0", "65536-7")
    _xinfo_layout(both, "s")


# --- XSETID ----------------------------------------------------------------------------------------


def test_xsetid(both):
    both.script(("XADD", "s", "5-5", "f", "v"), ("XADD", "s", "6-6", "f", "v"))
    cases = [
        ("XSETID",), ("XSETID", "s"), ("XSETID", "missing", "1-1"),
        ("XSETID", "missing", "bad"), ("XSETID", "s", "bad"), ("XSETID", "s", "-"),
        ("XSETID", "s", "+"), ("XSETID", "s", "6-5"), ("XSETID", "s", "5"),
        ("XSETID", "s", "6-6"), ("XSETID", "s", "7-0"), ("XINFO", "STREAM", "s"),
        ("XADD", "s", "7-0", "f", "v"), ("XADD", "s", "7-*", "f", "v"),
        ("XSETID", "s", "9-9", "ENTRIESADDED"), ("XSETID", "s", "9-9", "ENTRIESADDED", "x"),
        ("XSETID", "s", "9-9", "ENTRIESADDED", "-1"), ("XSETID", "s", "9-9", "ENTRIESADDED", "2"),
        ("XSETID", "s", "9-9", "ENTRIESADDED", "3"), ("XSETID", "s", "9-9", "ENTRIESADDED", "10"),
        ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "9-9", "MAXDELETEDID"), ("XSETID", "s", "9-9", "MAXDELETEDID", "bad"),
        ("XSETID", "s", "9-9", "MAXDELETEDID", "9-10"), ("XSETID", "s", "9-9", "MAXDELETEDID", "+"),
        ("XSETID", "s", "9-9", "MAXDELETEDID", "9-8"), ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "9-9", "MAXDELETEDID", "9-9", "ENTRIESADDED", "12"),
        ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "9-9", "BOGUS", "1"), ("XSETID", "s", "9-9", "ENTRIESADDED", "1", "x"),
        ("XSETID", "s", "1-1", "ENTRIESADDED", "-5"), ("XSETID", "s", "1-1", "MAXDELETEDID", "2-2"),
        ("XSETID", "missing", "1-1", "MAXDELETEDID", "2-2"),
        ("XSETID", "missing", "3-3", "ENTRIESADDED", "-1"),
        ("XSETID", "s", "18446744073709551615-18446744073709551615"),
        ("XADD", "s", "*", "f", "v"),
        ("XINFO", "STREAM", "s"),
    ]
    for argv in cases:
        both(*argv)


def test_xsetid_on_empty_stream(both):
    both.script(
        ("XADD", "s", "5-5", "f", "v"), ("XDEL", "s", "5-5"),
        # (An ID below max_deleted_entry_id is 8.x's error: test_redis8.)
        ("XSETID", "s", "5-5"), ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "7-0", "ENTRIESADDED", "0"), ("XINFO", "STREAM", "s"),
        ("XSETID", "s", "8-0", "ENTRIESADDED", "0", "MAXDELETEDID", "8-0"),
        ("XINFO", "STREAM", "s"),
        ("XADD", "s", "8-1", "f", "v"), ("XINFO", "STREAM", "s"),
    )


# --- XREAD (non-blocking) --------------------------------------------------------------------------


def test_xread(both):
    _range_data(both)
    both.ok("XADD", "t", "1-5", "a", "b")
    both.ok("XADD", "t", "9-9", "a", "b")
    both.script(
        ("XREAD", "STREAMS", "s", "0"),
        ("XREAD", "STREAMS", "s", "0-0"),
        ("XREAD", "STREAMS", "s", "2-1"),
        ("XREAD", "STREAMS", "s", "2"),
        ("XREAD", "STREAMS", "s", "5-0"),
        ("XREAD", "STREAMS", "s", "$"),
        ("XREAD", "STREAMS", "missing", "0"),
        ("XREAD", "STREAMS", "missing", "$"),
        ("XREAD", "COUNT", "2", "STREAMS", "s", "t", "0", "0"),
        ("XREAD", "COUNT", "0", "STREAMS", "s", "t", "0", "1-5"),
        ("XREAD", "COUNT", "-3", "STREAMS", "s", "0"),
        ("XREAD", "count", "1", "count", "3", "STREAMS", "s", "0"),
        ("XREAD", "STREAMS", "s", "missing", "t", "1-2", "0", "$"),
        ("XREAD", "STREAMS", "t", "s", "1-4", "4-5"),
        ("XREAD", "STREAMS", "s", "s", "1", "2"),
        ("XREAD", "BLOCK", "0", "COUNT", "1", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "10", "STREAMS", "s", "4"),
        ("XREAD", "STREAMS", "s", "18446744073709551615-18446744073709551615"),
        ("XREAD", "STREAMS", "s", "18446744073709551615"),
        ("XREAD", "STREAMS", "STREAMS", "s", "0", "0"),
    )


def test_xread_errors(both):
    _range_data(both)
    errors = [
        ("XREAD",), ("XREAD", "STREAMS"), ("XREAD", "STREAMS", "s"),
        ("XREAD", "COUNT", "1", "s", "0"), ("XREAD", "COUNT", "x", "STREAMS", "s", "0"),
        ("XREAD", "COUNT", "STREAMS", "s", "0"), ("XREAD", "BOGUS", "STREAMS", "s", "0"),
        ("XREAD", "STREAMS", "s", "bad"), ("XREAD", "STREAMS", "s", "-"),
        ("XREAD", "STREAMS", "s", "(1"), ("XREAD", "STREAMS", "s", ">"),
        ("XREAD", "STREAMS", "s", "t", "0", "bad"), ("XREAD", "STREAMS", "missing", ">"),
        ("XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"), ("XREAD", "NOACK", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "-1", "STREAMS", "s", "0"), ("XREAD", "BLOCK", "x", "STREAMS", "s", "0"),
        ("XREAD", "BLOCK", "1.5", "STREAMS", "s", "0"),
        ("XREAD", "COUNT", "1", "BLOCK"), ("XREAD", "COUNT", "1"),
        ("XREAD", "GROUP", "g", "STREAMS", "s", "0"),
    ]
    for argv in errors:
        both.err(*argv)


def test_xread_dollar_and_deleted_tail(both):
    _range_data(both)
    both.script(
        ("XDEL", "s", "5-0"),
        ("XREAD", "STREAMS", "s", "4-5"),
        ("XREAD", "STREAMS", "s", "$"),
        ("XREAD", "STREAMS", "s", "3-1"),
        ("XDEL", "s", "1-2", "2-1", "2-3", "3-1", "4-5"),
        ("XREAD", "STREAMS", "s", "0"),
        ("XLEN", "s"),
    )


# --- arity and unknown commands --------------------------------------------------------------------


def test_arity_errors_of_every_stream_command(both):
    for argv in [
        ("XADD", "s", "1-1"), ("XRANGE", "s", "-"), ("XREVRANGE", "s", "+"), ("XLEN",),
        ("XDEL", "s"), ("XTRIM", "s", "MAXLEN"), ("XSETID", "s"), ("XREAD", "STREAMS"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"), ("XACK", "s", "g"),
        ("XPENDING", "s"), ("XCLAIM", "s", "g", "c", "0"), ("XAUTOCLAIM", "s", "g", "c", "0"),
        ("XGROUP",), ("XGROUP", "CREATE", "s", "g"), ("XGROUP", "DESTROY", "s"),
        ("XGROUP", "DESTROY", "s", "g", "x"), ("XGROUP", "CREATECONSUMER", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", "c", "d"), ("XGROUP", "SETID", "s", "g"),
        ("XGROUP", "HELP", "x"), ("XGROUP", "NOPE"), ("XGROUP", "NOPE", "a", "b", "c"),
        ("xgroup", "create", "s"), ("XFOO", "s"),
    ]:
        both.err(*argv)


def test_tail_node_freed_by_xdel_then_append(both):
    """XDEL that empties the tail node frees it; the next XADD goes to the previous node if it
    still has room (by bytes), else to a new node."""
    both.config("stream-node-max-bytes", 300)
    both.ok("XADD", "s", "1-0", "f", "x" * 200)
    both.ok("XADD", "s", "2-0", "f", "x" * 200)  # too big for node 1: node 2
    _xinfo_layout(both, "s")
    both.ok("XDEL", "s", "2-0")
    _xinfo_layout(both, "s")
    both.ok("XADD", "s", "3-0", "f", "y")  # fits in node 1 again
    _xinfo_layout(both, "s")
    both.ok("XADD", "s", "4-0", "f", "y" * 90)
    _xinfo_layout(both, "s")
    both.config("stream-node-max-entries", 3)
    both.ok("XADD", "t", "1-0", "f", "v")
    both.ok("XADD", "t", "2-0", "f", "v")
    both.ok("XDEL", "t", "2-0")
    both.ok("XADD", "t", "3-0", "f", "v")  # tombstones count towards the 3
    both.ok("XADD", "t", "4-0", "f", "v")
    _xinfo_layout(both, "t")
    both.ok("XDEL", "t", "4-0")
    both.ok("XADD", "t", "5-0", "f", "v")
    _xinfo_layout(both, "t")
    both("XRANGE", "t", "-", "+")
    both("XINFO", "STREAM", "t")
