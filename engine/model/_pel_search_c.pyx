# cython: boundscheck=False, wraparound=False, cdivision=True
"""Finding stream IDs in PEL chunks, compiled: the same functions and results as
`_pel_search_py.py` (the reference), binary searches and walks over the `array('Q')` columns'
own buffers instead of bisects and loops that box every probe.
"""

from bisect import bisect_left

from cpython cimport array

from engine.model.pel_columns cimport c_find, check_ids, check_row  # the PEL kernels' shared helpers

cdef object _LOW = (1 << 64) - 1
cdef array.array _NARROW = array.array("I")
cdef array.array _WIDE = array.array("Q")


def find(array.array ms, array.array seq, unsigned long long m, unsigned long long s):
    check_ids(ms, seq)
    return c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, len(ms), m, s)


def owned_rows(list maxes, list chunks, list my_maxes, list my_chunks, object start,
               object end):
    cdef Py_ssize_t c, k, k0, j, t
    cdef array.array my_ms, my_seq, ms, seq, times, counts, owners
    cdef unsigned long long m, s, em, es, tm = 0, ts = 0
    cdef bint have = False
    em = end >> 64
    es = end & _LOW
    c = bisect_left(my_maxes, start)
    if c == len(my_chunks):
        return
    my_ms, my_seq = my_chunks[c][0], my_chunks[c][1]
    check_ids(my_ms, my_seq)
    k0 = c_find(my_ms.data.as_ulonglongs, my_seq.data.as_ulonglongs, len(my_ms),
                start >> 64, start & _LOW)
    if k0 < 0:
        k0 = -1 - k0
    while c < len(my_chunks):
        my_ms, my_seq = my_chunks[c][0], my_chunks[c][1]
        check_ids(my_ms, my_seq)
        for k in range(k0, len(my_ms)):
            m = my_ms.data.as_ulonglongs[k]
            s = my_seq.data.as_ulonglongs[k]
            if m > em or (m == em and s > es):
                return
            if not have or m > tm or (m == tm and s > ts):
                t = bisect_left(maxes, (<object>m) << 64 | s)
                ms, seq, times, counts, owners = chunks[t]
                check_row(ms, seq, times, counts, owners)
                tm = ms.data.as_ulonglongs[len(ms) - 1]
                ts = seq.data.as_ulonglongs[len(ms) - 1]
                have = True
            j = c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, len(ms), m, s)
            if j < 0:
                raise KeyError((<object>m) << 64 | s)
            yield ((<object>m) << 64 | s, times.data.as_longlongs[j],
                   counts.data.as_ulonglongs[j], owners.data.as_ints[j])
        c += 1
        k0 = 0


def range_rows(list maxes, list chunks, object start, object end):
    cdef Py_ssize_t c, k, j
    cdef array.array ms, seq, times, counts, owners
    cdef unsigned long long m, s, em, es
    em = end >> 64
    es = end & _LOW
    c = bisect_left(maxes, start)
    if c == len(chunks):
        return
    ms, seq = chunks[c][0], chunks[c][1]
    check_ids(ms, seq)
    j = c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, len(ms), start >> 64,
               start & _LOW)
    if j < 0:
        j = -1 - j
    while c < len(chunks):
        ms, seq, times, counts, owners = chunks[c]
        check_row(ms, seq, times, counts, owners)
        for k in range(j, len(ms)):
            m = ms.data.as_ulonglongs[k]
            s = seq.data.as_ulonglongs[k]
            if m > em or (m == em and s > es):
                return
            yield ((<object>m) << 64 | s, times.data.as_longlongs[k],
                   counts.data.as_ulonglongs[k], owners.data.as_ints[k])
        c += 1
        j = 0


def bucket_live(array.array bucket, list maxes, list chunks, long long t):
    cdef Py_ssize_t k, first, j, c, n = len(bucket)
    cdef unsigned long long base = 0, m, s, tm = 0, ts = 0
    cdef array.array ms, seq, times, counts, owners
    cdef bint have = False, narrow
    if bucket.ob_descr.typecode == b'I':
        narrow, first = True, 2
        base = (<unsigned long long>bucket.data.as_uints[0]) << 32 | bucket.data.as_uints[1]
    elif bucket.ob_descr.typecode == b'Q':
        narrow, first = False, 0
    else:
        raise TypeError("a bucket is an array('I') or array('Q')")
    if (n - first) & 1:
        raise TypeError("a bucket holds (ms, seq) pairs")
    k = first
    while k < n:
        if narrow:
            m = base + bucket.data.as_uints[k]
            s = bucket.data.as_uints[k + 1]
        else:
            m = bucket.data.as_ulonglongs[k]
            s = bucket.data.as_ulonglongs[k + 1]
        if not have or m > tm or (m == tm and s > ts) or m < pm_first(ms) or (
                m == pm_first(ms) and s < ps_first(seq)):
            c = bisect_left(maxes, (<object>m) << 64 | s)
            if c == len(chunks):
                have = False
                k += 2
                continue
            ms, seq, times, counts, owners = chunks[c]
            check_row(ms, seq, times, counts, owners)
            tm = ms.data.as_ulonglongs[len(ms) - 1]
            ts = seq.data.as_ulonglongs[len(ms) - 1]
            have = True
        j = c_find(ms.data.as_ulonglongs, seq.data.as_ulonglongs, len(ms), m, s)
        if j >= 0 and times.data.as_longlongs[j] == t:
            yield (k - first) >> 1, (<object>m) << 64 | s
        k += 2


cdef inline unsigned long long pm_first(array.array ms) noexcept:
    return ms.data.as_ulonglongs[0] if ms is not None and len(ms) else 0


cdef inline unsigned long long ps_first(array.array seq) noexcept:
    return seq.data.as_ulonglongs[0] if seq is not None and len(seq) else 0


def narrow_bucket(list ms, list seq, unsigned long long base):
    cdef Py_ssize_t i, n = len(ms)
    cdef unsigned long long m, q
    cdef array.array out
    if len(seq) != n:
        raise ValueError("narrow_bucket wants ms and seq lists of one length")
    out = array.clone(_NARROW, 2 + 2 * n, False)
    out.data.as_uints[0] = <unsigned int>(base >> 32)
    out.data.as_uints[1] = <unsigned int>(base & 0xFFFFFFFF)
    for i in range(n):
        m = ms[i]
        q = seq[i]
        if m < base or m - base > 0xFFFFFFFF or q > 0xFFFFFFFF:
            return None
        out.data.as_uints[2 + 2 * i] = <unsigned int>(m - base)
        out.data.as_uints[3 + 2 * i] = <unsigned int>q
    return out


def wide_bucket(list ms, list seq):
    cdef Py_ssize_t i, n = len(ms)
    cdef array.array out
    if len(seq) != n:
        raise ValueError("wide_bucket wants ms and seq lists of one length")
    out = array.clone(_WIDE, 2 * n, False)
    for i in range(n):
        out.data.as_ulonglongs[2 * i] = ms[i]
        out.data.as_ulonglongs[2 * i + 1] = seq[i]
    return out
