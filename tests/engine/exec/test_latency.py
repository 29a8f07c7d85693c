"""engine.exec.latency: the latency monitor's events (one sample a second, 160 kept, the
all-time maximum; LATEST, HISTORY, RESET, GRAPH, DOCTOR) and the reading of the command
histograms (INFO latencystats' percentiles, LATENCY HISTOGRAM's cumulative buckets), checked
against a direct reading of HdrHistogram's definitions."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.exec.latency import (
    TS_LEN,
    LatencyMonitor,
    cumulative_usec,
    format_percentile,
    highest_equivalent,
    percentiles_field,
    value_at_index,
    value_at_percentile,
)
from streamkeep.engine.exec.stats import HIST_LEN, HIST_MAX, hist_index


def test_one_sample_a_second_its_worst() -> None:
    monitor = LatencyMonitor()
    monitor.add("command", 12, when=100)
    monitor.add("command", 30, when=100)
    monitor.add("command", 5, when=100)
    monitor.add("command", 7, when=101)
    monitor.add("fast-command", 2, when=101)
    assert monitor.history("command") == [[100, 30], [101, 7]]
    assert monitor.latest() == [[b"command", 101, 7, 30], [b"fast-command", 101, 2, 2]]
    assert monitor.history("nosuch") == []


def test_at_most_160_samples_and_the_maximum_survives_them() -> None:
    monitor = LatencyMonitor()
    monitor.add("expire-cycle", 500, when=1)
    for second in range(2, 2 + TS_LEN):
        monitor.add("expire-cycle", 10, when=second)
    history = monitor.history("expire-cycle")
    assert len(history) == TS_LEN and history[0] == [2, 10]
    assert monitor.latest()[0][3] == 500


def test_reset_names_events_case_insensitively() -> None:
    monitor = LatencyMonitor()
    for event in ("command", "fast-command", "fork"):
        monitor.add(event, 1, when=1)
    assert monitor.reset(["COMMAND", "nosuch"]) == 1
    assert [e[0] for e in monitor.latest()] == [b"fast-command", b"fork"]
    assert monitor.reset() == 2
    assert monitor.latest() == []


def test_graph_and_doctor() -> None:
    monitor = LatencyMonitor()
    assert monitor.graph("command") is None
    assert "off" in monitor.doctor(0)
    assert "No latency spike" in monitor.doctor(5)
    for second, ms in enumerate([10, 20, 40, 30], start=100):
        monitor.add("command", ms, when=second)
    graph = monitor.graph("command", now=104)
    assert graph is not None
    # Four rows of three steps each; each sample labelled with its age, written downwards.
    assert graph.split("\n") == [
        "command - high 40 ms, low 10 ms (all time high 40 ms)", "-" * 80,
        "  # ",
        "  |#",
        " o||",
        "_|||",
        "    ",
        "4321",
        "ssss",
        ""]
    report = monitor.doctor(5, now=104)
    assert "1. command: 4 latency spikes (average 25ms, mean deviation 10ms" in report
    assert "Worst all time event 40ms." in report and "SLOWLOG" in report


def _brute_percentile(values: list[int], percentile: float) -> int:
    """HdrHistogram's definition: the k-th smallest value's slot, k = percentile of the
    count rounded half up (at least 1), reported as the slot's highest value."""
    values = sorted(min(max(v, 1), HIST_MAX) for v in values)
    k = max(int(percentile / 100 * len(values) + 0.5), 1)
    return highest_equivalent(value_at_index(hist_index(values[k - 1])))


def _brute_cumulative(values: list[int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's definition: at 1024 ns and each power of two above, the calls in
    slots up to that value's slot, where that count grew, until it holds them all."""
    clamped = [min(max(v, 1), HIST_MAX) for v in values]
    out: list[tuple[int, int]] = []
    level, previous = 1024, 0
    while previous < len(values):
        last = hist_index(level) if level <= value_at_index(3071) else 3071
        top = highest_equivalent(value_at_index(last))
        count = sum(1 for v in clamped if hist_index(v) <= last)
        if count > previous:
            out.append((top // 1000, count))
        previous, level = count, level * 2
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3 * 10**9), min_size=1, max_size=60),
       st.sampled_from([0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0]))
def test_histogram_readings_follow_the_definitions(values: list[int], p: float) -> None:
    histogram = [0] * HIST_LEN
    for v in values:
        histogram[hist_index(v)] += 1
    if p == 0.0:
        lowest = min(min(max(v, 1), HIST_MAX) for v in values)
        assert value_at_percentile(histogram, p) == value_at_index(hist_index(lowest))
    else:
        assert value_at_percentile(histogram, p) == _brute_percentile(values, p)
    assert cumulative_usec(histogram) == _brute_cumulative(values)


def test_latencystats_field_and_histogram_buckets() -> None:
    histogram = [0] * HIST_LEN
    rng = random.Random(7)
    for _ in range(1000):
        histogram[hist_index(rng.choice((1500, 1500, 1500, 3000, 900_000)))] += 1
    assert value_at_percentile([0] * HIST_LEN, 50) == 0
    field = percentiles_field(histogram, (50.0, 99.0, 99.9))
    assert field.startswith("p50=1.503,p99=") and ",p99.9=" in field
    buckets = cumulative_usec(histogram)
    assert buckets[-1][1] == 1000 and [b[0] for b in buckets] == sorted(b[0] for b in buckets)
    assert cumulative_usec([0] * HIST_LEN) == []
    assert [format_percentile(p) for p in (50.0, 99.9, 0.001, 100.0)] == [
        "50", "99.9", "0.001", "100"]
