# cython: boundscheck=False, wraparound=False, cdivision=True
"""Listpack sizes, compiled: the same functions and results as `_listpack_py.py` (the
reference, which documents the rules), without a Python object per step.

Strings are read through the bytes object's buffer; every loop is bounded by the object's own
length. A value that is not exactly `bytes` takes the reference's path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.string cimport memcmp

from streamkeep.engine.model import _listpack_py

cdef unsigned long long U64_LOW = 0xFFFFFFFFFFFFFFFFULL


cdef inline int c_int_size(long long v) noexcept nogil:
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
    """Redis's string2ll over p[0:n]: True and *out set when it is an int64."""
    cdef Py_ssize_t i = 0
    cdef bint negative = False
    cdef unsigned long long value = 0
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
        if value > U64_LOW - (p[i] - 48):
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


cdef inline Py_ssize_t c_str_size(object s) except -1:
    cdef long long iv
    cdef Py_ssize_t n, size
    if not PyBytes_CheckExact(s):
        return _listpack_py.str_size(s)
    n = PyBytes_GET_SIZE(s)
    if c_as_int(<const unsigned char*>PyBytes_AS_STRING(s), n, &iv):
        return c_int_size(iv)
    size = n + (1 if n < 64 else 2 if n < 4096 else 5)
    if size <= 127:
        return size + 1
    if size < 16383:
        return size + 2
    if size < 2097151:
        return size + 3
    if size < 268435455:
        return size + 4
    return size + 5


cdef inline int delta_size(object part, object master_part) except -1:
    # uint64 arithmetic wraps, as Redis's does; the parts are IDs' ms or seq (0..2**64-1).
    cdef unsigned long long a = part
    cdef unsigned long long b = master_part
    return c_int_size(<long long>(a - b))


def int_size(v):
    if -9223372036854775808 <= v <= 9223372036854775807:
        return c_int_size(v)
    return 10


def as_int(s):
    cdef long long iv
    if not PyBytes_CheckExact(s):
        return _listpack_py.as_int(s)
    if c_as_int(<const unsigned char*>PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s), &iv):
        return iv
    return None


def str_size(s):
    return c_str_size(s)


cdef inline bint same_names(tuple fields, tuple names, Py_ssize_t n):
    cdef Py_ssize_t i
    cdef object a, b
    for i in range(n):
        a = <object>PyTuple_GET_ITEM(fields, 2 * i)
        b = <object>PyTuple_GET_ITEM(names, i)
        if a is b:
            continue
        if PyBytes_CheckExact(a) and PyBytes_CheckExact(b):
            if PyBytes_GET_SIZE(a) != PyBytes_GET_SIZE(b) or memcmp(
                    PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(a)) != 0:
                return False
        elif a != b:
            return False
    return True


def entry_size(master_ms, master_seq, master_fields, ms, seq, fields):
    cdef Py_ssize_t size, n, i, count
    if not (PyTuple_CheckExact(fields) and PyTuple_CheckExact(master_fields)):
        return _listpack_py.entry_size(master_ms, master_seq, master_fields, ms, seq, fields)
    count = PyTuple_GET_SIZE(fields)
    if count & 1:  # never a stream entry; the reference says what it costs
        return _listpack_py.entry_size(master_ms, master_seq, master_fields, ms, seq, fields)
    n = count >> 1
    size = 2 + delta_size(ms, master_ms) + delta_size(seq, master_seq)
    if n == PyTuple_GET_SIZE(master_fields) and same_names(
            <tuple>fields, <tuple>master_fields, n):
        for i in range(n):
            size += c_str_size(<object>PyTuple_GET_ITEM(fields, 2 * i + 1))
        return size + c_int_size(n + 3)
    for i in range(count):
        size += c_str_size(<object>PyTuple_GET_ITEM(fields, i))
    return size + c_int_size(n) + c_int_size(2 * n + 4)
