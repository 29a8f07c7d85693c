# cython: boundscheck=False, wraparound=False, cdivision=True
#
# The listpack helpers the byte kernels share (engine/model/_packed_node_c.pyx,
# engine/model/_listpack_c.pyx, snapshot/_rdb_c.pyx): an element as read (Elem), a growable
# output buffer (Buf, reserve), the encoded sizes (backlen_size, c_int_size), Redis's string2ll
# (c_as_int) and the element writers (put_backlen, put_int, put_string). The rules they follow
# are the pure references' (engine/model/_listpack_py.py, _packed_node_py.py).
#
# The kernels cimport it by its folder path, `engine.model.lp_helpers` (Cython finds a .pxd from
# the checkout's root; the installed name `streamkeep.engine.model` comes from setuptools'
# package-dir, which Cython does not know). That holds because nothing here needs a module at
# run time: each kernel compiles its own copy of every function, so each one is `cdef inline`,
# and the rest are structs. Must not hold: a non-inline function, a Python object constant, an
# element reader (each kernel keeps its own: _packed_node_c's trusts its nodes, _rdb_c's and
# validate's check every read against the end), or anything a kernel alone uses.

from libc.stdint cimport uint64_t
from libc.stdlib cimport realloc
from libc.string cimport memcpy


cdef struct Elem:
    # One listpack element as read: an integer (ival), or a string of n bytes at s (inside the
    # buffer read, not copied).
    bint is_int
    long long ival
    const unsigned char* s
    Py_ssize_t n


cdef struct Buf:
    # Bytes written so far (p[0:n]) in an allocation of cap bytes; the owner frees p.
    unsigned char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef inline Py_ssize_t backlen_size(Py_ssize_t size) noexcept nogil:
    """Bytes of the backlen that follows an element of `size` bytes (7 bits a byte)."""
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


cdef inline int c_int_size(long long v) noexcept nogil:
    """Bytes of an integer element, backlen included."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    if -2147483648 <= v <= 2147483647:
        return 6
    return 10


cdef inline bint c_as_int(const unsigned char* p, Py_ssize_t n, long long* out) noexcept nogil:
    """Redis's string2ll over p[0:n] (the pure listpack's as_int): True and *out set when it is
    a strict int64 decimal."""
    cdef Py_ssize_t i = 0
    cdef bint negative = False
    cdef uint64_t value = 0
    if n == 0 or n > 20:
        return False
    if p[0] == 45:  # '-'
        negative = True
        i = 1
        if n == 1:
            return False
    if p[i] == 48:  # a leading '0' only as "0" itself
        if n == 1:
            out[0] = 0
            return True
        return False
    while i < n:
        if p[i] < 48 or p[i] > 57:
            return False
        if value > 1844674407370955161ULL:  # (2**64 - 1) // 10: the next digit overflows
            return False
        value = value * 10
        if value > 0xFFFFFFFFFFFFFFFFULL - (p[i] - 48):
            return False
        value += p[i] - 48
        i += 1
    if negative:
        if value > 9223372036854775808ULL:
            return False
        out[0] = <long long>(0 - value)
    else:
        if value > 9223372036854775807ULL:
            return False
        out[0] = <long long>value
    return True


cdef inline int reserve(Buf* b, Py_ssize_t more) except -1:
    """Room for `more` bytes after b.n (the allocation doubles). A caller writing into memory
    it does not own sets b.cap beyond what it writes, so that this never reallocates."""
    cdef Py_ssize_t cap
    cdef unsigned char* grown
    if b.n + more <= b.cap:
        return 0
    cap = b.cap * 2 if b.cap else 256
    while cap < b.n + more:
        cap *= 2
    grown = <unsigned char*>realloc(b.p, cap)
    if grown == NULL:
        raise MemoryError()
    b.p = grown
    b.cap = cap
    return 0


cdef inline void put_backlen(Buf* b, Py_ssize_t size) noexcept nogil:
    """The backlen of an element of `size` bytes; room for 5 bytes reserved by the caller."""
    cdef Py_ssize_t n = backlen_size(size)
    cdef Py_ssize_t k
    # most significant group first, every byte after the first with bit 7 set
    b.p[b.n] = (size >> (7 * (n - 1))) & 0x7F
    for k in range(1, n):
        b.p[b.n + k] = ((size >> (7 * (n - 1 - k))) & 0x7F) | 0x80
    b.n += n


cdef inline int put_int(Buf* b, long long v) except -1:
    """An integer element in its smallest encoding."""
    cdef uint64_t u = <uint64_t>v
    cdef int width, k
    reserve(b, 10)
    if 0 <= v <= 127:  # (the two short forms: their backlen is their size, written here)
        b.p[b.n] = <unsigned char>v
        b.p[b.n + 1] = 1
        b.n += 2
        return 0
    if -4096 <= v <= 4095:
        b.p[b.n] = 0xC0 | ((u >> 8) & 0x1F)
        b.p[b.n + 1] = u & 0xFF
        b.p[b.n + 2] = 2
        b.n += 3
        return 0
    if -32768 <= v <= 32767:
        b.p[b.n] = 0xF1
        width = 2
    elif -8388608 <= v <= 8388607:
        b.p[b.n] = 0xF2
        width = 3
    elif -2147483648 <= v <= 2147483647:
        b.p[b.n] = 0xF3
        width = 4
    else:
        b.p[b.n] = 0xF4
        width = 8
    for k in range(width):
        b.p[b.n + 1 + k] = (u >> (8 * k)) & 0xFF
    b.n += 1 + width
    put_backlen(b, 1 + width)
    return 0


cdef inline int put_string(Buf* b, const unsigned char* s, Py_ssize_t n) except -1:
    """The element of the bytes s[0:n]: an integer one when they are a strict int64 decimal,
    else a string one. 4 GiB or more does not fit the longest form: a caller that may be
    handed such bytes checks first."""
    cdef long long iv
    cdef Py_ssize_t head
    if c_as_int(s, n, &iv):
        return put_int(b, iv)
    reserve(b, n + 10)
    if n < 64:
        b.p[b.n] = 0x80 | n
        head = 1
    elif n < 4096:
        b.p[b.n] = 0xE0 | (n >> 8)
        b.p[b.n + 1] = n & 0xFF
        head = 2
    else:
        b.p[b.n] = 0xF0
        b.p[b.n + 1] = n & 0xFF
        b.p[b.n + 2] = (n >> 8) & 0xFF
        b.p[b.n + 3] = (n >> 16) & 0xFF
        b.p[b.n + 4] = (n >> 24) & 0xFF
        head = 5
    memcpy(b.p + b.n + head, s, n)
    b.n += head + n
    put_backlen(b, head + n)
    return 0
