# cython: boundscheck=False, wraparound=False, cdivision=True
"""Listpack sizes, compiled: the same functions and results as `_listpack_py.py` (the
reference, which documents the rules), without a Python object per step.

Strings are read through the bytes object's buffer; every loop is bounded by the object's own
length. A value that is not exactly `bytes` takes the reference's path.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.string cimport memcmp

# The listpack helpers the kernels share, cimported by folder path (engine/model/lp_helpers.pxd).
from engine.model.lp_helpers cimport backlen_size, c_as_int, c_int_size
from streamkeep.engine.model import _listpack_py

cdef inline Py_ssize_t c_str_size(object s) except -1:
    cdef long long iv
    cdef Py_ssize_t n, size
    if not PyBytes_CheckExact(s):
        return _listpack_py.str_size(s)
    n = PyBytes_GET_SIZE(s)
    if c_as_int(<const unsigned char*>PyBytes_AS_STRING(s), n, &iv):
        return c_int_size(iv)
    size = n + (1 if n < 64 else 2 if n < 4096 else 5)
    return size + backlen_size(size)


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
