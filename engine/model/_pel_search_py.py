"""Finding a stream ID in a PEL chunk, pure Python: the reference of `_pel_search_c.pyx`.

A chunk keeps its IDs as two parallel `array('Q')` columns, the milliseconds and the sequence
numbers, sorted as (ms, seq) pairs (the order of the 128-bit IDs). Must not touch: anything but
the search (the chunks are `engine.model.pel_store`'s).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right


def find(ms: array, seq: array, m: int, s: int) -> int:
    """The index of the ID (m, s) in the chunk, or -1 - the index where it would be inserted."""
    if ms.typecode != "Q" or seq.typecode != "Q" or len(ms) != len(seq):
        raise TypeError("find wants two array('Q') columns of one length")
    i = bisect_left(ms, m)
    j = bisect_right(ms, m, i)
    k = bisect_left(seq, s, i, j)
    if k < j and seq[k] == s:
        return k
    return -1 - k
