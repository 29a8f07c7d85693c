# cython: boundscheck=False, wraparound=False, cdivision=True
"""Finding a stream ID in a PEL chunk, compiled: the same function and results as
`_pel_search_py.py` (the reference), a binary search over the two `array('Q')` columns' own
buffers instead of three bisects that box every probe.
"""

from cpython cimport array


def find(array.array ms, array.array seq, unsigned long long m, unsigned long long s):
    if ms.ob_descr.typecode != b'Q' or seq.ob_descr.typecode != b'Q' or len(ms) != len(seq):
        raise TypeError("find wants two array('Q') columns of one length")
    cdef unsigned long long *pm = ms.data.as_ulonglongs
    cdef unsigned long long *ps = seq.data.as_ulonglongs
    cdef Py_ssize_t lo = 0, hi = len(ms), mid
    while lo < hi:  # the first index whose (ms, seq) is not below (m, s)
        mid = (lo + hi) >> 1
        if pm[mid] < m or (pm[mid] == m and ps[mid] < s):
            lo = mid + 1
        else:
            hi = mid
    if lo < len(ms) and pm[lo] == m and ps[lo] == s:
        return lo
    return -1 - lo
