"""LCS's longest common subsequence, pure Python: the reference the compiled kernel
(`_lcs_c.pyx`) is tested against.

Redis's LCS fills the whole (len(a)+1) x (len(b)+1) table of prefix LCS lengths (uint32 cells),
then walks it back from the bottom-right corner: a match takes a byte of the result and steps
diagonally, otherwise the walk goes up when the cell above holds more, left otherwise. While
walking it gathers the runs of consecutive matches (the IDX ranges), each reported once the
walk leaves it or reaches the first byte of either string, so from the end of the strings to
their start. The caller checks the table's size first (`table_bytes`): the walk needs it whole.
Must not touch: replies, engine state.
"""

from __future__ import annotations

from array import array

Range = tuple[int, int, int, int]  # a_start, a_end, b_start, b_end (inclusive)


def _table(a: bytes, b: bytes) -> array:
    width = len(b) + 1
    table = array("I", [0]) * ((len(a) + 1) * width)
    for i in range(1, len(a) + 1):
        row, above = i * width, (i - 1) * width
        ai = a[i - 1]
        for j in range(1, width):
            if ai == b[j - 1]:
                table[row + j] = table[above + j - 1] + 1
            else:
                up, left = table[above + j], table[row + j - 1]
                table[row + j] = up if up > left else left
    return table


def lcs(a: bytes, b: bytes, walk: bool) -> tuple[int, bytes, list[Range]]:
    """(length, the subsequence, the match ranges from last to first); without `walk` only the
    length (b"" and no range)."""
    table = _table(a, b)
    width = len(b) + 1
    length = table[len(a) * width + len(b)]
    if not walk:
        return length, b"", []
    out = bytearray(length)
    ranges: list[Range] = []
    k, i, j = length, len(a), len(b)
    none = len(a)  # "no current range" (Redis's sentinel: a's length)
    a_start = none
    a_end = b_start = b_end = 0
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            out[k - 1] = a[i - 1]
            if a_start == none:
                a_start = a_end = i - 1
                b_start = b_end = j - 1
            elif a_start == i and b_start == j:  # the run goes on, backwards
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            k, i, j = k - 1, i - 1, j - 1
        else:
            if table[(i - 1) * width + j] > table[i * width + j - 1]:
                i -= 1
            else:
                j -= 1
            if a_start != none:
                emit = True
        if emit:
            ranges.append((a_start, a_end, b_start, b_end))
            a_start = none
    return length, bytes(out), ranges
