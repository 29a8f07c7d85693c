"""Finding a stream ID in a PEL chunk, pure Python: the reference of `_pel_search_c.pyx`.

A chunk keeps its IDs as two parallel `array('Q')` columns, the milliseconds and the sequence
numbers, sorted as (ms, seq) pairs (the order of the 128-bit IDs); the PEL's chunks have
three columns more (delivery time, count, owner). Must not touch: anything but the searches and
walks over those columns (the chunks are `engine.model.pel_store`'s).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Generator, Iterator

_LOW = (1 << 64) - 1
_WORD = 1 << 32


def find(ms: array, seq: array, m: int, s: int) -> int:
    """The index of the ID (m, s) in the chunk, or -1 - the index where it would be inserted."""
    if ms.typecode != "Q" or seq.typecode != "Q" or len(ms) != len(seq):
        raise TypeError("a packed chunk wants two array('Q') ID columns of one length")
    i = bisect_left(ms, m)
    j = bisect_right(ms, m, i)
    k = bisect_left(seq, s, i, j)
    if k < j and seq[k] == s:
        return k
    return -1 - k


def owned_rows(maxes: list[int], chunks: list[tuple[array, ...]], my_maxes: list[int],
               my_chunks: list[tuple[array, ...]], start: int,
               end: int) -> Iterator[tuple[int, int, int, int]]:
    """(id, delivery time, count, owner) from the PEL's chunks (`maxes`, `chunks`: ms, seq,
    time, count, owner columns) of each ID of a consumer's chunks (`my_maxes`, `my_chunks`: ms,
    seq) in [start, end], ascending; every one of those IDs is in the PEL."""
    c = bisect_left(my_maxes, start)
    if c == len(my_chunks):
        return
    k0 = find(my_chunks[c][0], my_chunks[c][1], start >> 64, start & _LOW)
    if k0 < 0:
        k0 = -1 - k0
    top = -1
    ms = seq = times = counts = owners = array("Q")
    while c < len(my_chunks):
        my_ms, my_seq = my_chunks[c][0], my_chunks[c][1]
        for k in range(k0, len(my_ms)):
            m, s = my_ms[k], my_seq[k]
            sid = m << 64 | s
            if sid > end:
                return
            if sid > top:
                t = bisect_left(maxes, sid)
                ms, seq, times, counts, owners = chunks[t]
                top = maxes[t]
            j = find(ms, seq, m, s)
            if j < 0:
                raise KeyError(sid)
            yield sid, times[j], counts[j], owners[j]
        c += 1
        k0 = 0


def range_rows(maxes: list[int], chunks: list[tuple[array, ...]], start: int,
               end: int) -> Iterator[tuple[int, int, int, int]]:
    """(id, delivery time, count, owner) of the PEL's IDs in [start, end], ascending."""
    c = bisect_left(maxes, start)
    if c == len(chunks):
        return
    j = find(chunks[c][0], chunks[c][1], start >> 64, start & _LOW)
    if j < 0:
        j = -1 - j
    while c < len(chunks):
        ms, seq, times, counts, owners = chunks[c]
        for k in range(j, len(ms)):
            sid = ms[k] << 64 | seq[k]
            if sid > end:
                return
            yield sid, times[k], counts[k], owners[k]
        c += 1
        j = 0


def bucket_live(bucket: array, maxes: list[int], chunks: list[tuple[array, ...]],
                t: int) -> Generator[tuple[int, int], None, None]:
    """(ordinal, id) of the IDs of a delivery-time bucket (`pel_store.bucket_new`'s layout)
    that are pending in the PEL (`maxes`, `chunks`) with delivery time `t`, in bucket order."""
    if bucket.typecode == "I":
        base, first = bucket[0] << 32 | bucket[1], 2
    else:
        base, first = 0, 0
    for k in range(first, len(bucket), 2):
        m, s = base + bucket[k], bucket[k + 1]
        sid = m << 64 | s
        c = bisect_left(maxes, sid)
        if c == len(chunks):
            continue
        j = find(chunks[c][0], chunks[c][1], m, s)
        if j >= 0 and chunks[c][2][j] == t:
            yield (k - first) >> 1, sid


# --- building delivery-time buckets (`pel_store.bucket_new`'s layout) ----------------------------


def narrow_bucket(ms: list[int], seq: list[int], base: int) -> array | None:
    """The narrow bucket of the IDs given as ms and seq lists, relative to `base`: `base` as
    two words, then (ms - base, seq) pairs; None when an ID does not fit (ms below `base`, or
    ms - base or seq not below 2**32)."""
    if len(seq) != len(ms):
        raise ValueError("narrow_bucket wants ms and seq lists of one length")
    if ms and not (min(ms) >= base and max(ms) - base < _WORD and max(seq) < _WORD):
        return None
    pairs = [0] * (2 + 2 * len(ms))
    pairs[0], pairs[1] = base >> 32, base & (_WORD - 1)
    pairs[2::2] = [m - base for m in ms]
    pairs[3::2] = seq
    return array("I", pairs)


def wide_bucket(ms: list[int], seq: list[int]) -> array:
    """The wide bucket of the IDs: (ms, seq) pairs."""
    if len(seq) != len(ms):
        raise ValueError("wide_bucket wants ms and seq lists of one length")
    pairs = [0] * (2 * len(ms))
    pairs[::2] = ms
    pairs[1::2] = seq
    return array("Q", pairs)
