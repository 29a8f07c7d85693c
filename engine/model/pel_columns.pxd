# The packed PEL's column helpers the compiled PEL kernels share (_pel_search_c, _pel_claim_c
# cimport them by folder path, `from engine.model.pel_columns cimport ...`: Cython finds a .pxd
# from the checkout's root). Only `cdef inline` functions: a .pxd that needs no run-time module.
# Their pure-Python counterparts are the twins' own.

from cpython cimport array


cdef inline Py_ssize_t c_find(unsigned long long *pm, unsigned long long *ps, Py_ssize_t n,
                              unsigned long long m, unsigned long long s) noexcept:
    """Binary search of (m, s) in the ID columns: its index, or -1 - its insertion point."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:  # the first index whose (ms, seq) is not below (m, s)
        mid = (lo + hi) >> 1
        if pm[mid] < m or (pm[mid] == m and ps[mid] < s):
            lo = mid + 1
        else:
            hi = mid
    if lo < n and pm[lo] == m and ps[lo] == s:
        return lo
    return -1 - lo


cdef inline void check_ids(array.array ms, array.array seq) except *:
    if ms.ob_descr.typecode != b'Q' or seq.ob_descr.typecode != b'Q' or len(ms) != len(seq):
        raise TypeError("a packed chunk wants two array('Q') ID columns of one length")


cdef inline void check_row(array.array ms, array.array seq, array.array times,
                           array.array counts, array.array owners) except *:
    check_ids(ms, seq)
    if (times.ob_descr.typecode != b'q' or counts.ob_descr.typecode != b'Q'
            or owners.ob_descr.typecode != b'i' or len(times) != len(ms)
            or len(counts) != len(ms) or len(owners) != len(ms)):
        raise TypeError("a PEL chunk wants q, Q and i columns as long as its IDs")
