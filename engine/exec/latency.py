"""The latency monitor and the per-command latency distributions, as Redis keeps and reports
them (src/latency.c; redis.io LATENCY LATEST, HISTORY, RESET, GRAPH, DOCTOR, HISTOGRAM, INFO
latencystats).

Owns `LatencyMonitor`: per event ("command", "fast-command", "expire-cycle", "fork", ...), the
latest 160 samples of at least `latency-monitor-threshold` milliseconds (one per second: a
second's worst) and the all-time maximum; LATEST, HISTORY, RESET, the GRAPH's sparkline and a
DOCTOR report in its own words. And the reading of the command histograms that
engine.exec.stats fills (HdrHistogram's layout, values in nanoseconds): the value at a
percentile as INFO latencystats prints it, and the cumulative counts at powers of two from
1 µs on that LATENCY HISTOGRAM replies.

Must not touch: the command table, sessions, I/O; what is measured and when (the engine and
the server report their samples here).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from streamkeep.engine.exec.stats import HIST_LEN

TS_LEN = 160  # Redis's LATENCY_TS_LEN: samples kept per event
GRAPH_COLUMNS = 80
GRAPH_ROWS = 4
_SPARK = "_-`"  # one character per third of a row, bottom to top
_SPARK_FILL = "_o#"
_SUB_HALF = 128  # the histogram's half sub-bucket count (two significant digits)
HISTOGRAM_FIRST_NS = 1024  # LATENCY HISTOGRAM's first bucket, then each twice the last


# --- events --------------------------------------------------------------------------------


class Series:
    """One event's samples (Unix seconds, milliseconds), oldest first, and its maximum."""

    __slots__ = ("samples", "max")

    def __init__(self) -> None:
        self.samples: list[tuple[int, int]] = []
        self.max = 0

    def add(self, when: int, ms: int) -> None:
        self.max = max(self.max, ms)
        samples = self.samples
        if samples and samples[-1][0] == when:  # one sample a second: its worst
            if ms > samples[-1][1]:
                samples[-1] = (when, ms)
            return
        samples.append((when, ms))
        if len(samples) > TS_LEN:
            del samples[0]


class LatencyMonitor:
    """The events seen since start (or their RESET), in the order they first occurred."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: dict[str, Series] = {}

    def add(self, event: str, ms: int, when: int | None = None) -> None:
        """A sample the caller found at or above latency-monitor-threshold."""
        series = self.events.get(event)
        if series is None:
            series = self.events[event] = Series()
        series.add(int(time.time()) if when is None else when, ms)

    def latest(self) -> list[list[Any]]:
        """LATEST: [event, time of its latest sample, its latency, the all-time maximum]."""
        return [[event.encode(), s.samples[-1][0], s.samples[-1][1], s.max]
                for event, s in self.events.items()]

    def history(self, event: str) -> list[list[int]]:
        series = self.events.get(event)
        return [] if series is None else [[when, ms] for when, ms in series.samples]

    def reset(self, events: Iterable[str] | None = None) -> int:
        """RESET: the named events (case-insensitively; None: all) forgotten; how many were."""
        if events is None:
            gone = len(self.events)
            self.events.clear()
            return gone
        wanted = {e.lower() for e in events}
        names = [name for name in self.events if name.lower() in wanted]
        for name in names:
            del self.events[name]
        return len(names)

    def graph(self, event: str, now: int | None = None) -> str | None:
        """GRAPH: a header (high, low, all-time high), then the samples as a sparkline four
        rows high, each labelled with how long ago it was; None for an event with no sample."""
        series = self.events.get(event)
        if series is None:
            return None
        now = int(time.time()) if now is None else now
        values = [ms for _when, ms in series.samples]
        labels = [_ago(now - when) for when, _ms in series.samples]
        head = (f"{event} - high {max(values)} ms, low {min(values)} ms "
                f"(all time high {series.max} ms)\n" + "-" * GRAPH_COLUMNS + "\n")
        return head + sparkline(values, labels)

    def doctor(self, threshold_ms: int, now: int | None = None) -> str:
        """DOCTOR: for each event its spikes (count, mean, mean absolute deviation, how often,
        worst), and what usually causes that kind of spike, in plain words."""
        if not self.events and threshold_ms == 0:
            return ("The latency monitor is off (latency-monitor-threshold is 0) and has "
                    "recorded nothing. Turn it on with CONFIG SET latency-monitor-threshold "
                    "<milliseconds>, then ask again.\n")
        if not self.events:
            return (f"No latency spike of {threshold_ms} ms or more has been recorded since "
                    "the server started (or since LATENCY RESET).\n")
        now = int(time.time()) if now is None else now
        lines = ["Latency spikes recorded (latency-monitor-threshold "
                 f"{threshold_ms} ms):", ""]
        for number, (event, series) in enumerate(self.events.items(), 1):
            values = [ms for _when, ms in series.samples]
            mean = sum(values) // len(values)
            mad = sum(abs(mean - v) for v in values) // len(values)
            period = max(now - min(when for when, _ms in series.samples), 1)
            lines.append(f"{number}. {event}: {len(values)} latency spikes (average {mean}ms, "
                         f"mean deviation {mad}ms, period {period / len(values):.2f} sec). "
                         f"Worst all time event {series.max}ms.")
            hint = _HINTS.get(event)
            if hint:
                lines.append(f"   {hint}")
        return "\n".join(lines) + "\n"


_HINTS = {
    "command": "Slow commands: SLOWLOG GET names them. Long ranges (XRANGE, XREAD COUNT, "
               "XINFO STREAM FULL) and big deletions take time in proportion to their size.",
    "fast-command": "Commands that should take microseconds took milliseconds: the process "
                    "was probably descheduled (a busy or oversubscribed machine, swapping).",
    "expire-cycle": "The active expiry cycle deleted many keys at once: spread the TTLs.",
    "fork": "Starting a compaction paused the server: the snapshot of the streams' state it "
            "hands to the build child grows with the number of streams and groups.",
}


def _ago(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def sparkline(values: Sequence[int], labels: Sequence[str], columns: int = GRAPH_COLUMNS,
              rows: int = GRAPH_ROWS) -> str:
    """The values as filled columns `rows` high (each row three steps: _ o #; a full cell
    under the top one: |), the labels written downwards under them after a blank line; in
    blocks of `columns` samples."""
    low, high = min(values), max(values)
    span = (high - low) or 1
    steps = len(_SPARK) * rows
    out = []
    for start in range(0, len(values), columns):
        block = range(start, min(start + columns, len(values)))
        if start:
            out.append("")
        heights = [min(max(int((values[i] - low) * steps / span), 0), steps - 1)
                   for i in block]
        for row in range(rows):
            line = []
            for step in heights:
                char = step - (rows - row - 1) * len(_SPARK)
                line.append(_SPARK_FILL[char] if 0 <= char < len(_SPARK)
                            else "|" if char >= len(_SPARK) else " ")
            out.append("".join(line))
        longest = max((len(labels[i]) for i in block), default=0)
        if longest:
            out.append(" " * len(block))
        for depth in range(longest):
            out.append("".join(labels[i][depth] if depth < len(labels[i]) else " "
                               for i in block))
    return "\n".join(out) + "\n"


# --- the command histograms --------------------------------------------------------------------


def value_at_index(index: int) -> int:
    """The lowest value (ns) that the histogram slot `index` counts."""
    bucket = (index >> 7) - 1
    sub = (index & (_SUB_HALF - 1)) + _SUB_HALF
    if bucket < 0:
        sub -= _SUB_HALF
        bucket = 0
    return sub << bucket


def index_of(value: int) -> int:
    """The slot that counts `value` (engine.exec.stats's hist_index without its clamp)."""
    bucket = (value | 255).bit_length() - 8
    return ((bucket + 1) << 7) + (value >> bucket) - 128


def highest_equivalent(value: int) -> int:
    """The highest value counted in the same slot as `value`."""
    bucket = (value | 255).bit_length() - 8
    return ((value >> bucket) << bucket) + (1 << bucket) - 1


def total(histogram: Sequence[int]) -> int:
    return sum(histogram)


def value_at_percentile(histogram: Sequence[int], percentile: float) -> int:
    """hdr_value_at_percentile: the highest value of the slot where the cumulative count
    reaches `percentile` of the total (rounded half up, at least 1; the lowest value for the
    0th percentile); 0 when empty."""
    wanted = max(int(min(percentile, 100.0) / 100 * sum(histogram) + 0.5), 1)
    running = 0
    for index in range(HIST_LEN):
        running += histogram[index]
        if running >= wanted:
            value = value_at_index(index)
            return value if percentile == 0.0 else highest_equivalent(value)
    return 0


def percentiles_field(histogram: Sequence[int], percentiles: Sequence[float]) -> str:
    """INFO latencystats' value: `p50=1.003,p99=...` in microseconds, three decimals."""
    return ",".join(f"p{format_percentile(p)}="
                    f"{value_at_percentile(histogram, p) / 1000:.3f}" for p in percentiles)


def format_percentile(p: float) -> str:
    """A percentile as Redis prints it (%f with its trailing zeros and point trimmed)."""
    text = f"{p:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


_LAST_VALUE = value_at_index(HIST_LEN - 1)


def cumulative_usec(histogram: Sequence[int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's buckets: at 1024 ns, then at each power of two above, the count
    of the calls up to and including the slot of that value, labelled with the slot's highest
    value in whole microseconds; only where the count grew, up to the one that holds them
    all (HdrHistogram's logarithmic iteration, as Redis's fillCommandCDF walks it)."""
    count = sum(histogram)
    out: list[tuple[int, int]] = []
    level = HISTOGRAM_FIRST_NS
    running = previous = 0
    index = -1
    while previous < count:
        last = index_of(level) if level <= _LAST_VALUE else HIST_LEN - 1
        while index < last:
            index += 1
            running += histogram[index]
        if running > previous:
            out.append((highest_equivalent(value_at_index(index)) // 1000, running))
        previous = running
        level *= 2
    return out


__all__ = ["GRAPH_COLUMNS", "TS_LEN", "LatencyMonitor", "Series", "cumulative_usec",
           "format_percentile", "highest_equivalent", "index_of", "percentiles_field", "sparkline", "total",
           "value_at_index", "value_at_percentile"]
