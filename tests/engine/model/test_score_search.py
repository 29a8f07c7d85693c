"""engine.model.score_search: the compiled bisection and its pure twin find a score's place in an
array of doubles as Python's bisect does (left and right of equals, -0.0 equal to 0.0, the
infinities, a window [lo, hi)), and refuse what is not an array of doubles or a negative lo."""

from __future__ import annotations

import bisect
from array import array
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

search_impl = kernel_fixture("streamkeep.engine.model", "score_search")

finite_or_inf = st.floats(allow_nan=False)


@given(scores=st.lists(finite_or_inf, max_size=60), x=finite_or_inf, data=st.data())
def test_as_bisect_finds_it(search_impl: ModuleType, scores: list[float], x: float,
                            data: st.DataObject) -> None:
    column = array("d", sorted(scores))
    lo = data.draw(st.integers(0, len(column)))
    hi = data.draw(st.integers(lo, len(column)))
    assert search_impl.bisect_scores(column, x, False) == bisect.bisect_left(column, x)
    assert search_impl.bisect_scores(column, x, True) == bisect.bisect_right(column, x)
    assert search_impl.bisect_scores(column, x, False, lo, hi) == bisect.bisect_left(
        column, x, lo, hi)
    assert search_impl.bisect_scores(column, x, True, lo) == bisect.bisect_right(column, x, lo)


def test_zero_signs_and_infinities_compare_as_doubles(search_impl: ModuleType) -> None:
    column = array("d", [float("-inf"), -1.0, -0.0, 0.0, 0.0, 2.5, float("inf")])
    assert search_impl.bisect_scores(column, 0.0, False) == 2
    assert search_impl.bisect_scores(column, -0.0, True) == 5
    assert search_impl.bisect_scores(column, float("-inf"), False) == 0
    assert search_impl.bisect_scores(column, float("inf"), True) == 7
    assert search_impl.bisect_scores(array("d"), 1.0, True) == 0
    assert search_impl.bisect_scores(column, 1.0, False, 3, 100) == 5  # hi past the end: clamped


def test_what_is_not_a_column_of_doubles_is_refused() -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "score_search")
    cases = [(array("i", [1, 2]), 1.0, False), ([1.0, 2.0], 1.0, False),
             (array("d", [1.0]), 1.0, False, -1)]
    for args in cases:
        expected = outcome(pure.bisect_scores, *args)
        assert expected[0] == "error"
        assert outcome(compiled.bisect_scores, *args) == expected


def test_the_twins_agree_on_a_window_past_the_end() -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "score_search")
    column = array("d", [1.0, 2.0, 3.0])
    for lo in range(5):
        for x in (0.5, 2.0, 9.0):
            for right in (False, True):
                assert (outcome(compiled.bisect_scores, column, x, right, lo)
                        == outcome(pure.bisect_scores, column, x, right, lo))


@pytest.mark.parametrize("right", [False, True])
def test_a_long_column(search_impl: ModuleType, right: bool) -> None:
    column = array("d", (i // 3 for i in range(3000)))
    find = bisect.bisect_right if right else bisect.bisect_left
    for x in (-1.0, 0.0, 17.0, 499.5, 999.0, 1000.0):
        assert search_impl.bisect_scores(column, x, right) == find(column, x)
