"""Searches over a sorted set's score arrays, pure Python: the reference the compiled kernel
(`_score_search_c.pyx`) is tested against.

A skiplist-encoded sorted set keeps its scores in `array('d')` columns, ascending (no NaN).
`bisect_scores` is `bisect.bisect_left`/`bisect_right` over one: the compiled twin reads the
doubles in place, where the bisect module boxes a float for every probe.
Must not touch: anything but the array it is given.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right


def bisect_scores(scores: array, x: float, right: bool, lo: int = 0, hi: int = -1) -> int:
    """Where `x` goes in `scores[lo:hi]` (all of it from `lo` when `hi` is -1): before its equals,
    or after them when `right`. A negative `lo` is a ValueError, as bisect's; `scores` must be
    an array of doubles (TypeError)."""
    if not isinstance(scores, array) or scores.typecode != "d":
        raise TypeError("scores must be an array('d')")
    if lo < 0:
        raise ValueError("lo must be non-negative")
    if hi == -1 or hi > len(scores):
        hi = len(scores)
    return bisect_right(scores, x, lo, hi) if right else bisect_left(scores, x, lo, hi)


__all__ = ["bisect_scores"]
