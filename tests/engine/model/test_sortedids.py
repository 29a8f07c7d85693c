"""engine.model.sortedids: the sorted ID set the PEL keeps, against a plain sorted list, across
the sizes where its sublists split (more than twice the load) and empty out again."""

from __future__ import annotations

import random
from bisect import bisect_right

import pytest

from streamkeep.engine.model.sortedids import SortedIDs

BIG = 5_000  # several splits of the 1,024-value sublist limit


def filled(values: list[int]) -> SortedIDs:
    ids = SortedIDs()
    for value in values:
        ids.add(value)
    return ids


def assert_same(ids: SortedIDs, reference: list[int]) -> None:
    assert list(ids) == reference
    assert len(ids) == len(reference)
    assert ids.first() == (reference[0] if reference else None)
    assert ids.last() == (reference[-1] if reference else None)


def test_empty() -> None:
    ids = SortedIDs()
    assert_same(ids, [])
    assert list(ids.irange(0, 1 << 128)) == []
    assert ids.next_after(0) is None
    ids.discard(5)  # absent: nothing happens
    assert len(ids) == 0


def test_adds_in_any_order_iterate_sorted() -> None:
    ids = filled([5, 1, 9, 3, 7])
    assert_same(ids, [1, 3, 5, 7, 9])


@pytest.mark.parametrize("seed", range(4))
def test_against_a_sorted_list_through_splits_and_removals(seed: int) -> None:
    rng = random.Random(seed)
    values = rng.sample(range(1 << 70, (1 << 70) + 10 * BIG), BIG)  # 128-bit-ID-sized ints
    if seed % 2:  # in order: the append fast path
        values.sort()
    ids = filled(values)
    reference = sorted(values)
    assert_same(ids, reference)
    for value in rng.sample(values, BIG // 2):
        ids.discard(value)
        reference.remove(value)
    assert_same(ids, reference)
    for value in rng.sample(range(1 << 70, (1 << 70) + 10 * BIG), 500):
        if value not in reference:
            ids.add(value)
            reference.insert(bisect_right(reference, value), value)
    assert_same(ids, reference)


@pytest.mark.parametrize("seed", range(3))
def test_irange_and_next_after_against_a_sorted_list(seed: int) -> None:
    rng = random.Random(seed)
    reference = sorted(rng.sample(range(100_000), 3_000))
    ids = filled(rng.sample(reference, len(reference)))
    for _ in range(300):
        lo, hi = sorted(rng.randrange(-10, 100_010) for _ in range(2))
        assert list(ids.irange(lo, hi)) == [v for v in reference if lo <= v <= hi]
        probe = rng.randrange(-10, 100_010)
        i = bisect_right(reference, probe)
        assert ids.next_after(probe) == (reference[i] if i < len(reference) else None)


def test_irange_bounds_are_inclusive_and_an_inverted_range_is_empty() -> None:
    ids = filled([10, 20, 30])
    assert list(ids.irange(10, 30)) == [10, 20, 30]
    assert list(ids.irange(11, 29)) == [20]
    assert list(ids.irange(31, 40)) == []
    assert list(ids.irange(30, 10)) == []


def test_next_after() -> None:
    ids = filled([10, 20, 30])
    assert ids.next_after(0) == 10
    assert ids.next_after(10) == 20
    assert ids.next_after(25) == 30
    assert ids.next_after(30) is None


def test_discarding_absent_values_changes_nothing() -> None:
    ids = filled([10, 20, 30])
    for value in (5, 15, 25, 35):
        ids.discard(value)
    assert_same(ids, [10, 20, 30])


def test_discarding_the_largest_moves_last_down() -> None:
    ids = filled(list(range(3 * 1024)))  # several sublists: each one's maximum is kept
    ids.discard(3 * 1024 - 1)
    assert ids.last() == 3 * 1024 - 2
    ids.discard(1023)  # a sublist's maximum in the middle
    assert ids.next_after(1022) == 1024
    assert list(ids.irange(1020, 1026)) == [1020, 1021, 1022, 1024, 1025, 1026]


def test_emptied_then_used_again() -> None:
    values = list(range(2_500))
    ids = filled(values)
    for value in reversed(values):
        ids.discard(value)
    assert_same(ids, [])
    ids.add(42)
    ids.add(7)
    assert_same(ids, [7, 42])
