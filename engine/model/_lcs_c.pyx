# cython: boundscheck=False, wraparound=False, cdivision=True
"""LCS's longest common subsequence, compiled: the same table, walk and results as
`_lcs_py.py` (the reference), over a malloc'd uint32 table filled without the GIL.
"""

from libc.stdint cimport uint32_t
from libc.stdlib cimport free, malloc


def lcs(bytes a, bytes b, bint walk):
    cdef const unsigned char *pa = a
    cdef const unsigned char *pb = b
    cdef Py_ssize_t alen = len(a), blen = len(b), width = blen + 1
    cdef Py_ssize_t i, j, k, none = alen
    cdef Py_ssize_t a_start, a_end = 0, b_start = 0, b_end = 0
    cdef uint32_t up, left, length
    cdef unsigned char ai
    cdef bint emit
    cdef uint32_t *table = <uint32_t *> malloc((alen + 1) * width * sizeof(uint32_t))
    if table == NULL:
        raise MemoryError("no memory for the LCS table")
    try:
        with nogil:
            for j in range(width):
                table[j] = 0
            for i in range(1, alen + 1):
                table[i * width] = 0
                ai = pa[i - 1]
                for j in range(1, width):
                    if ai == pb[j - 1]:
                        table[i * width + j] = table[(i - 1) * width + j - 1] + 1
                    else:
                        up = table[(i - 1) * width + j]
                        left = table[i * width + j - 1]
                        table[i * width + j] = up if up > left else left
        length = table[alen * width + blen]
        if not walk:
            return length, b"", []
        out = bytearray(length)
        ranges = []
        k, i, j = length, alen, blen
        a_start = none
        while i > 0 and j > 0:
            emit = False
            if pa[i - 1] == pb[j - 1]:
                out[k - 1] = pa[i - 1]
                if a_start == none:
                    a_start = a_end = i - 1
                    b_start = b_end = j - 1
                elif a_start == i and b_start == j:
                    a_start -= 1
                    b_start -= 1
                else:
                    emit = True
                if a_start == 0 or b_start == 0:
                    emit = True
                k -= 1
                i -= 1
                j -= 1
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
    finally:
        free(table)
