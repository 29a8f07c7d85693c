# cython: boundscheck=False, wraparound=False, cdivision=True
"""The packed columns of the small hashes and sets, compiled: the same results and errors as
`_packed_columns_py.py` (the reference, which describes the pack), without slicing the header.

Every call checks the pack before it reads a string (`_open`: the width byte, the header within
the bytes, the lengths summing to exactly the bytes after it), so the reads below, unchecked,
stay inside the bytes; a column or index is checked against the count before it is used.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from libc.stdint cimport uint64_t
from libc.string cimport memcmp, memcpy


cdef struct Pack:
    const unsigned char *p
    Py_ssize_t w  # 1 or 4
    Py_ssize_t count
    Py_ssize_t data  # offset of the first string


cdef inline Py_ssize_t _len_at(const Pack *k, Py_ssize_t j) noexcept nogil:
    """Length number j, all columns counted one after another (j < ncols * count)."""
    cdef const unsigned char *q
    if k.w == 1:
        return k.p[2 + j]
    q = k.p + 5 + 4 * j
    return <Py_ssize_t>q[0] | (<Py_ssize_t>q[1] << 8) | (<Py_ssize_t>q[2] << 16) | (
        <Py_ssize_t>q[3] << 24)


cdef inline Py_ssize_t _sum(const Pack *k, Py_ssize_t stop) noexcept nogil:
    """The sum of the first `stop` lengths (checked by `_open` to fit the bytes)."""
    cdef Py_ssize_t j = 0, total = 0
    cdef const unsigned char *q = k.p + 2
    cdef uint64_t x
    if k.w == 1:
        # eight one-byte lengths a step: bytes added pairwise into 16-bit lanes, the four
        # lanes added by one multiply (at most 8 * 255: no lane overflows)
        while j + 8 <= stop:
            memcpy(&x, q + j, 8)
            x = (x & 0x00FF00FF00FF00FFULL) + ((x >> 8) & 0x00FF00FF00FF00FFULL)
            total += <Py_ssize_t>((x * 0x0001000100010001ULL) >> 48)
            j += 8
        while j < stop:
            total += q[j]
            j += 1
    else:
        for j in range(stop):
            total += _len_at(k, j)
    return total


cdef int _open(Pack *k, object blob, Py_ssize_t ncols) except -1:
    cdef Py_ssize_t size, j, nlens, room, width, total = 0
    cdef const unsigned char *p
    if not PyBytes_Check(blob):  # bytes or a subclass (a hash kept bare is one)
        raise TypeError("a pack is bytes")
    size = PyBytes_GET_SIZE(blob)
    p = <const unsigned char *>PyBytes_AS_STRING(blob)
    if ncols < 1:
        raise ValueError("a pack has at least one column")
    if size < 2:
        raise ValueError("pack too short for its header")
    k.p = p
    k.w = p[0]
    if k.w == 1:
        k.count = p[1]
    elif k.w == 4:
        if size < 5:
            raise ValueError("pack too short for its header")
        k.count = <Py_ssize_t>p[1] | (<Py_ssize_t>p[2] << 8) | (<Py_ssize_t>p[3] << 16) | (
            <Py_ssize_t>p[4] << 24)
    else:
        raise ValueError("pack width byte is not 1 or 4")
    # 1 + w + ncols * count * w > size, asked by a division: no product can overflow
    width = k.count * k.w  # < 2**34
    if width > 0 and ncols > (size - 1 - k.w) // width:
        raise ValueError("pack lengths run past its end")
    k.data = 1 + k.w + ncols * k.count * k.w
    nlens = ncols * k.count
    room = size - k.data
    if k.w == 1:
        total = _sum(k, nlens)  # at most 255 * nlens: cannot overflow
    else:
        for j in range(nlens):
            total += _len_at(k, j)
            if total > room:  # stop early: keeps the sum far from overflowing
                break
    if total > room:
        raise ValueError("pack strings run past its end")
    if total < room:
        raise ValueError("pack has bytes after its strings")
    return 0


cdef int _check_place(Py_ssize_t ncols, Py_ssize_t n, Py_ssize_t col, Py_ssize_t i,
                      Py_ssize_t last) except -1:
    if col < 0 or col >= ncols:
        raise IndexError("pack column out of range")
    if i < 0 or i >= n + last:
        raise IndexError("pack index out of range")
    return 0


cdef Py_ssize_t _index(const Pack *k, object needle) except -2:
    """The first string of column 0 equal to needle: its length first, then its last byte
    (keys that share a prefix, "member:17", differ at the end), then its bytes."""
    cdef const unsigned char *s
    cdef Py_ssize_t nlen, off = k.data, j, size
    cdef unsigned char last
    if not PyBytes_Check(needle):
        raise TypeError("a needle is bytes")
    s = <const unsigned char *>PyBytes_AS_STRING(needle)
    nlen = PyBytes_GET_SIZE(needle)
    if nlen == 0:
        for j in range(k.count):
            if _len_at(k, j) == 0:
                return j
        return -1
    last = s[nlen - 1]
    if k.w == 1:  # the common width, in its own loop: no test of the width per string
        for j in range(k.count):
            size = k.p[2 + j]
            if size == nlen and _same(k.p + off, s, nlen, last):
                return j
            off += size
    else:
        for j in range(k.count):
            size = _len_at(k, j)
            if size == nlen and _same(k.p + off, s, nlen, last):
                return j
            off += size
    return -1


cdef inline bint _same(const unsigned char *at, const unsigned char *s, Py_ssize_t nlen,
                       unsigned char last) noexcept nogil:
    return at[nlen - 1] == last and memcmp(at, s, nlen) == 0


cdef bytes _item(const Pack *k, Py_ssize_t j):
    cdef Py_ssize_t at = k.data + _sum(k, j)
    return (<const char *>k.p)[at:at + _len_at(k, j)]


def pack_count(blob, Py_ssize_t ncols):
    cdef Pack k
    _open(&k, blob, ncols)
    return k.count


def pack_index(blob, Py_ssize_t ncols, needle):
    cdef Pack k
    _open(&k, blob, ncols)
    return _index(&k, needle)


def pack_offset(blob, Py_ssize_t ncols, Py_ssize_t col, Py_ssize_t i):
    cdef Pack k
    _open(&k, blob, ncols)
    _check_place(ncols, k.count, col, i, 1)
    return k.data + _sum(&k, col * k.count + i)


def pack_item(blob, Py_ssize_t ncols, Py_ssize_t col, Py_ssize_t i):
    cdef Pack k
    _open(&k, blob, ncols)
    _check_place(ncols, k.count, col, i, 0)
    return _item(&k, col * k.count + i)


def pack_get(blob, Py_ssize_t ncols, needle, Py_ssize_t col):
    cdef Pack k
    cdef Py_ssize_t i
    _open(&k, blob, ncols)
    if col < 0 or col >= ncols:
        raise IndexError("pack column out of range")
    i = _index(&k, needle)
    if i < 0:
        return None
    return _item(&k, col * k.count + i)


def pack_strings(blob, Py_ssize_t ncols):
    """Every string of the pack, column after column (HGETALL, SMEMBERS, a conversion)."""
    cdef Pack k
    cdef Py_ssize_t j, n, off, size
    cdef const char *p
    _open(&k, blob, ncols)
    n = ncols * k.count
    out = [None] * n
    off = k.data
    p = <const char *>k.p
    for j in range(n):
        size = _len_at(&k, j)
        out[j] = p[off:off + size]
        off += size
    return out
