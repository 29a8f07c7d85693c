# cython: boundscheck=False, wraparound=False, cdivision=True
"""Searches over a sorted set's score arrays, compiled: the same results and errors as
`_score_search_py.py` (the reference), reading the doubles in place (no float boxed a probe).
"""

from cpython cimport array


def bisect_scores(object scores, double x, bint right, Py_ssize_t lo=0, Py_ssize_t hi=-1):
    """See the reference's `bisect_scores`."""
    cdef array.array a
    cdef const double *d
    cdef Py_ssize_t mid
    if not isinstance(scores, array.array):  # (a C-level type check: array.array is cimported)
        raise TypeError("scores must be an array('d')")
    a = <array.array>scores
    if a.ob_descr.typecode != b'd':
        raise TypeError("scores must be an array('d')")
    if lo < 0:
        raise ValueError("lo must be non-negative")
    cdef Py_ssize_t n = array.Py_SIZE(a)
    if hi == -1 or hi > n:
        hi = n
    d = a.data.as_doubles
    if right:
        while lo < hi:
            mid = (lo + hi) >> 1
            if x < d[mid]:
                hi = mid
            else:
                lo = mid + 1
    else:
        while lo < hi:
            mid = (lo + hi) >> 1
            if d[mid] < x:
                lo = mid + 1
            else:
                hi = mid
    return lo
