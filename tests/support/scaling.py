"""Growth checks without a wall-clock bound: time the same work at two sizes, interleaved,
and compare the best of each. Load on the machine slows both alike, so the ratio says whether
the work grows linearly (about the size ratio) or worse (its square), whatever the day."""

from __future__ import annotations

import time
from collections.abc import Callable


def seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def growth(small: Callable[[], object], big: Callable[[], object], rounds: int = 2) -> float:
    """The best time of `big` over the best time of `small`, run alternately `rounds` times."""
    smalls, bigs = [], []
    for _ in range(rounds):
        smalls.append(seconds(small))
        bigs.append(seconds(big))
    return min(bigs) / max(min(smalls), 1e-9)
