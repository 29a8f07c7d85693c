"""Growth checks without a wall-clock bound: time the same work at two sizes, interleaved,
and compare the best of each. Load on the machine slows both alike, so the ratio says whether
the work grows linearly (about the size ratio) or worse (its square), whatever the day."""

from __future__ import annotations

import time
from collections.abc import Callable


def seconds(work: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    work()
    return clock() - start


def growth(small: Callable[[], object], big: Callable[[], object], rounds: int = 2,
           clock: Callable[[], float] = time.perf_counter) -> float:
    """The best time of `big` over the best time of `small`, run alternately `rounds` times.
    `clock`: what is timed (the wall clock; a server's CPU time when the work is a server's:
    a loaded machine stretches its wall time unevenly, not the CPU it uses)."""
    smalls, bigs = [], []
    for _ in range(rounds):
        smalls.append(seconds(small, clock))
        bigs.append(seconds(big, clock))
    return min(bigs) / max(min(smalls), 1e-9)
