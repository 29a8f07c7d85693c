"""engine.exec.call_timing: counting a call and its latency histogram, both twins on the same
inputs (the HdrHistogram slot of a value: 1 ns to 1 s with two significant digits, values
clamped into that range; the counters a call updates)."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.exec.latency import highest_equivalent, value_at_index
from tests.support.kernels import kernel_fixture, pure_and_compiled

timing = kernel_fixture("streamkeep.engine.exec", "call_timing")

EDGES = [-5, 0, 1, 2, 127, 128, 255, 256, 257, 511, 512, 1000, 1023, 1024, 1031, 1032, 2047,
         2048, 65535, 65536, 10**6, 10**9 - 1, 10**9, 10**9 + 1, 10**12, (1 << 62)]


@pytest.mark.parametrize("nanos", EDGES)
def test_a_value_falls_in_the_slot_that_holds_it(timing, nanos: int) -> None:  # type: ignore[no-untyped-def]
    index = timing.hist_index(nanos)
    assert 0 <= index < timing.HIST_LEN
    value = min(max(nanos, 1), timing.HIST_MAX)
    assert value_at_index(index) <= value <= highest_equivalent(value_at_index(index))
    # Two significant digits: a slot is at most 1/128 of its values wide.
    assert highest_equivalent(value) - value_at_index(index) < max(value / 128, 1)


def test_slots_grow_with_the_value(timing) -> None:  # type: ignore[no-untyped-def]
    indexes = [timing.hist_index(v) for v in range(1, 70_000)]
    assert indexes == sorted(indexes)
    assert timing.hist_index(timing.HIST_MAX) == timing.hist_index(10**15)


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=-(1 << 40), max_value=1 << 62))
def test_twins_agree_on_the_slot(nanos: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.exec", "call_timing")
    assert pure.hist_index(nanos) == compiled.hist_index(nanos)


def test_count_call_counts_calls_and_time(timing) -> None:  # type: ignore[no-untyped-def]
    counters = [0, 0, 7, 3, None, 2000, False]  # slow from 2 µs, latency not tracked
    assert timing.count_call(counters, 1500) is False
    assert timing.count_call(counters, 2000) is True
    assert counters == [2, 3500, 7, 3, None, 2000, False]  # no histogram


def test_a_tracked_call_fills_the_histogram(timing) -> None:  # type: ignore[no-untyped-def]
    counters = [0, 0, 7, 3, None, 1 << 62, True]
    for nanos in (1500, 1500, 2500, 10**10):
        assert timing.count_call(counters, nanos) is False
    assert counters[:4] == [4, 1500 + 1500 + 2500 + 10**10, 7, 3]
    histogram = counters[4]
    assert isinstance(histogram, array) and histogram.typecode == "q"
    assert len(histogram) == timing.HIST_LEN
    assert sum(histogram) == 4
    assert histogram[timing.hist_index(1500)] == 2
    assert histogram[timing.hist_index(timing.HIST_MAX)] == 1  # a 10 s call counts as 1 s
    kept = histogram
    timing.count_call(counters, 1)
    assert counters[4] is kept  # made once, then updated in place
    counters[6] = False  # tracking off: the histogram stays as it was
    timing.count_call(counters, 1)
    assert sum(kept) == 5 and counters[0] == 6


def test_new_histogram_is_zeroed(timing) -> None:  # type: ignore[no-untyped-def]
    histogram = timing.new_histogram()
    assert len(histogram) == timing.HIST_LEN and not any(histogram)
