"""engine.model.lcs: the compiled table-and-walk kernel and its pure twin give the same length,
subsequence and match ranges (Redis's LCS results, checked against redis-server in
tests/differential/test_diff_string_ranges.py), and the table's size Redis bounds."""

from __future__ import annotations

import random

import pytest

from streamkeep.engine.model.lcs import table_bytes
from tests.support.kernels import kernel_fixture, pure_and_compiled

lcs_impl = kernel_fixture("streamkeep.engine.model", "lcs")


def test_the_redis_io_example(lcs_impl):
    assert lcs_impl.lcs(b"ohmytext", b"mynewtext", True) == (
        6, b"mytext", [(4, 7, 5, 8), (2, 3, 0, 1)])
    assert lcs_impl.lcs(b"ohmytext", b"mynewtext", False) == (6, b"", [])


@pytest.mark.parametrize(("a", "b"), [(b"", b""), (b"", b"abc"), (b"abc", b""),
                                      (b"abc", b"abc"), (b"abc", b"xyz"), (b"a", b"a"),
                                      (b"\x00\xff\x00", b"\xff\x00")])
def test_edges(lcs_impl, a, b):
    length, common, ranges = lcs_impl.lcs(a, b, True)
    assert length == len(common)
    assert sum(r[1] - r[0] + 1 for r in ranges) == length
    for a0, a1, b0, b1 in ranges:  # each range is a common run of both strings
        assert a[a0:a1 + 1] == b[b0:b1 + 1]


def test_twins_agree_on_random_strings():
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "lcs")
    rng = random.Random(46)
    for _ in range(200):
        a = bytes(rng.choice(b"abc") for _ in range(rng.randint(0, 40)))
        b = bytes(rng.choice(b"abcd") for _ in range(rng.randint(0, 40)))
        walk = rng.random() < 0.8
        assert pure.lcs(a, b, walk) == compiled.lcs(a, b, walk), (a, b, walk)


def test_the_result_is_a_longest_common_subsequence(lcs_impl):
    rng = random.Random(7)
    for _ in range(50):
        a = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 12)))
        b = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 12)))
        length, common, _ = lcs_impl.lcs(a, b, True)
        assert _is_subsequence(common, a) and _is_subsequence(common, b)
        assert length == _reference_length(a, b)


def test_table_bytes_is_redis_uint32_table():
    assert table_bytes(0, 0) == 4
    assert table_bytes(9, 99) == 10 * 100 * 4


def _is_subsequence(s: bytes, of: bytes) -> bool:
    it = iter(of)
    return all(c in it for c in s)


def _reference_length(a: bytes, b: bytes) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        row = [0]
        for j, y in enumerate(b, 1):
            row.append(prev[j - 1] + 1 if x == y else max(prev[j], row[j - 1]))
        prev = row
    return prev[-1]
