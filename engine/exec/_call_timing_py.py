"""Counting a command call and its time, pure Python: the reference of `_call_timing_c.pyx`
(both are tested on the same inputs).

A command's counters are the list engine.exec.stats keeps per command: calls, nanoseconds,
rejected, failed, its latency histogram (None until its first tracked call), the time at or
above which a call is slow (the slow log's or the latency monitor's), and whether its latency
is tracked (latency-tracking). The histogram is an HdrHistogram as Redis keeps one per command:
values in nanoseconds from 1 to 10^9, two significant digits, so 24 half-buckets of 128
sub-buckets, each the count of the calls whose time falls in it (engine.exec.latency reads it:
INFO latencystats, LATENCY HISTOGRAM). Must not touch: anything but the counters it is given.
"""

from __future__ import annotations

from array import array

HIST_LEN = 3072  # (23 buckets + 1) * 128 sub-buckets: HdrHistogram's counts for 1 ns..1 s
HIST_MAX = 1_000_000_000  # Redis's LATENCY_HISTOGRAM_MAX_VALUE: longer calls count as 1 s
_ZEROS = bytes(8 * HIST_LEN)


def hist_index(nanos: int) -> int:
    """The histogram slot of a call that took `nanos` (clamped to 1 ns .. 1 s): its bucket is
    the power of two above 255 that holds it, its sub-bucket the top 8 bits within."""
    value = 1 if nanos < 1 else HIST_MAX if nanos > HIST_MAX else nanos
    bucket = (value | 255).bit_length() - 8
    return ((bucket + 1) << 7) + (value >> bucket) - 128


def new_histogram() -> array:
    return array("q", _ZEROS)


def count_call(counters: list, nanos: int) -> bool:
    """One call that took `nanos`: its count, its time and (tracked) its histogram slot.
    True when it is slow: the caller hands it to the slow log and the latency monitor."""
    counters[0] += 1
    counters[1] += nanos
    if counters[6] is True:
        histogram = counters[4]
        if histogram is None:
            histogram = counters[4] = new_histogram()
        histogram[hist_index(nanos)] += 1
    return nanos >= counters[5]
