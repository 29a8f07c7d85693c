"""The packed columns the small hashes and sets keep: one bytes object holding a column of
lengths, then the strings one after another. Owns the search of a string among them.
Must not touch: anything else (pure functions over bytes).
"""

from __future__ import annotations

from array import array


def column_index(blob: bytes, lens: bytes | array[int], start: int, end: int,
                 needle: bytes) -> int:
    """The index of `needle` among the strings stored one after another in blob[start:end]
    (`lens` their lengths), -1 when absent.

    A C-level search of the strings' bytes gives a candidate offset; its index is guessed
    from their mean length and corrected by summing lengths (C level) and stepping a string
    or two, so no Python loop walks every string. A candidate inside another string is
    skipped for the next one."""
    nlen = len(needle)
    if nlen == 0:
        return lens.index(0) if 0 in lens else -1
    c = blob.find(needle, start, end)
    n = len(lens)
    span = end - start
    while c >= 0:
        i = (c - start) * n // span
        p = start + sum(lens[:i])
        while p < c:
            p += lens[i]
            i += 1
        while p > c:
            i -= 1
            p -= lens[i]
        if p == c:
            while i < n and lens[i] == 0:  # empty strings share the offset of the next one
                i += 1
            if i < n and lens[i] == nlen:
                return i
        c = blob.find(needle, c + 1, end)
    return -1


__all__ = ["column_index"]
