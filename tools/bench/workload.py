"""What every section's workloads share: the value a benchmark returns and its loops' vocabulary.

Owns :class:`Measurement` (one run's rate, its own op count, figures and notes), :class:`Skip`
(a benchmark that cannot run on this machine), the warm-up rule, the key/group/consumer names,
the consume batch, the XADD fill loop and the nearest-rank percentile the latency tables use.
Must not touch: the registry, the report, child processes or any one section's workload.

Timing rule for every section: a workload runs a warm-up on a separate key first, then times
only its loop with ``time.perf_counter``; a row's rate is ops per second and ``us/op`` its
inverse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError

BATCH = 100  # XREADGROUP COUNT in the consume loops

KEY = "bench"
GROUP = "g"
CONSUMER = "c"


def warmup_size(n: int) -> int:
    """Warm-up operations before a timed loop of n: a tenth, between 200 and 20,000."""
    return max(200, min(n // 10, 20_000))


class Skip(StreamkeepError):
    """A benchmark cannot run on this machine (e.g. no redis-server); reported, not fatal."""


@dataclass
class Measurement:
    """One run of a benchmark: its rate, the ops it timed when that is not the run's N (e.g. a
    duration-bound loop), figures the FIGURES table reads (e.g. records per fsync), and notes:
    lines printed under the tables (e.g. a latency table, a size series)."""

    rate: float
    count: int | None = None
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def fill(execute: Callable[..., Any], key: str, n: int) -> None:
    """n x ``XADD key * f v`` through an engine's ``execute`` (untimed: warm-ups, set-up)."""
    for _ in range(n):
        execute("XADD", key, "*", "f", "v")


def percentile_us(ordered: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of sorted nanosecond times, in microseconds."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000
