# cython: boundscheck=False, wraparound=False, cdivision=True
"""Stream ID formatting and the common `ms-seq` parse, compiled: the same functions and
results as `_ids_py.py` (the reference), digits written and read in C.

Inputs that are not what the fast path expects (not exactly bytes, an ID beyond 128 bits, a
negative int) take the reference's path, so errors are the reference's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsUnsignedLongLong, PyLong_CheckExact, PyLong_FromUnsignedLongLong
from cpython.ref cimport Py_INCREF
from cpython.sequence cimport PySequence_Fast_GET_ITEM, PySequence_Fast_GET_SIZE

from streamkeep.engine.model import _ids_py

cdef object SIXTY_FOUR = 64
cdef object LOW = (1 << 64) - 1

# IDs read as their two 64-bit halves, in place (engine/model/u128.pxd)
from engine.model.u128 cimport u128_halves, u128_int


cdef inline int write_u64(char* out, unsigned long long v) noexcept nogil:
    """v in decimal at out (at most 20 bytes); returns the length."""
    cdef char tmp[20]
    cdef int n = 0, i
    if v == 0:
        out[0] = 48
        return 1
    while v:
        tmp[n] = <char>(48 + v % 10)
        v //= 10
        n += 1
    for i in range(n):
        out[i] = tmp[n - 1 - i]
    return n


cdef inline object c_format_id(object sid):
    cdef char buf[48]
    cdef int n
    cdef unsigned long long ms, seq
    if not PyLong_CheckExact(sid) or not u128_halves(sid, &ms, &seq):
        return _ids_py.format_id(sid)
    n = write_u64(buf, ms)
    buf[n] = 45  # '-'
    n += 1
    n += write_u64(buf + n, seq)
    return PyBytes_FromStringAndSize(buf, n)


def format_id(sid):
    return c_format_id(sid)


def format_ids(list ids):
    cdef Py_ssize_t i, n = PyList_GET_SIZE(ids)
    cdef list out = PyList_New(n)
    cdef object item
    for i in range(n):
        item = c_format_id(<object>PyList_GET_ITEM(ids, i))
        Py_INCREF(item)  # PyList_SET_ITEM steals the reference
        PyList_SET_ITEM(out, i, item)
    return out


cdef inline bint read_digits(const unsigned char* p, Py_ssize_t n,
                             unsigned long long* out) noexcept nogil:
    """1..19 ASCII digits (leading zeros allowed) as an integer below 10**19."""
    cdef Py_ssize_t i
    cdef unsigned long long v = 0
    if n < 1 or n > 19:
        return False
    for i in range(n):
        if p[i] < 48 or p[i] > 57:
            return False
        v = v * 10 + (p[i] - 48)
    out[0] = v
    return True


def plain_id(arg):
    cdef const unsigned char* p
    cdef Py_ssize_t n, dash = -1, i
    cdef unsigned long long ms, seq
    if not PyBytes_CheckExact(arg):
        return _ids_py.plain_id(arg)
    p = <const unsigned char*>PyBytes_AS_STRING(arg)
    n = PyBytes_GET_SIZE(arg)
    for i in range(n):
        if p[i] == 45:  # the first '-' splits, as bytes.partition
            dash = i
            break
    if dash < 0:
        return None
    if not (read_digits(p, dash, &ms) and read_digits(p + dash + 1, n - dash - 1, &seq)):
        return None
    if ms == 0:
        return PyLong_FromUnsignedLongLong(seq)
    return (PyLong_FromUnsignedLongLong(ms) << SIXTY_FOUR) | PyLong_FromUnsignedLongLong(seq)


cdef inline bint canonical_digits(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    return n == 1 or p[0] != 48


def plain_ids(object args, Py_ssize_t start):
    cdef Py_ssize_t i, n, k, dash, size
    cdef const unsigned char* p
    cdef unsigned long long m, q, pm = 0, pq = 0
    cdef bint tidy = True
    cdef list ms = [], seq = []
    cdef object arg
    if type(args) is not tuple and type(args) is not list:
        args = tuple(args)
    n = PySequence_Fast_GET_SIZE(args)
    for i in range(start, n):
        arg = <object>PySequence_Fast_GET_ITEM(args, i)
        if not PyBytes_CheckExact(arg):
            return None
        p = <const unsigned char*>PyBytes_AS_STRING(arg)
        size = PyBytes_GET_SIZE(arg)
        dash = -1
        for k in range(size):
            if p[k] == 45:
                dash = k
                break
        if dash < 0 or not (read_digits(p, dash, &m)
                            and read_digits(p + dash + 1, size - dash - 1, &q)):
            return None
        if tidy and not (canonical_digits(p, dash)
                         and canonical_digits(p + dash + 1, size - dash - 1)
                         and (i == start or m > pm or (m == pm and q > pq))):
            tidy = False
        pm, pq = m, q
        ms.append(PyLong_FromUnsignedLongLong(m))
        seq.append(PyLong_FromUnsignedLongLong(q))
    return ms, seq, tidy


def next_auto_id(last, now):
    cdef unsigned long long ms, seq, now_hi, now_ms
    if not (PyLong_CheckExact(last) and PyLong_CheckExact(now)
            and u128_halves(last, &ms, &seq) and u128_halves(now, &now_hi, &now_ms)
            and now_hi == 0):
        return _ids_py.next_auto_id(last, now)
    if now_ms > ms:
        return u128_int(now_ms, 0)
    if seq == 0xFFFFFFFFFFFFFFFFULL:
        if ms == 0xFFFFFFFFFFFFFFFFULL:
            return _ids_py.next_auto_id(last, now)  # (beyond 128 bits: the caller refused it)
        return u128_int(ms + 1, 0)
    return u128_int(ms, seq + 1)


def split_ids(list sids):
    cdef Py_ssize_t i, n = PyList_GET_SIZE(sids)
    cdef list ms = PyList_New(n), seq = PyList_New(n)
    cdef object sid, m, q
    for i in range(n):
        sid = <object>PyList_GET_ITEM(sids, i)
        if not PyLong_CheckExact(sid) or sid < 0 or sid >> 128:
            return _ids_py.split_ids(sids)
        m = sid >> SIXTY_FOUR
        q = sid & LOW
        Py_INCREF(m)  # PyList_SET_ITEM steals the reference
        PyList_SET_ITEM(ms, i, m)
        Py_INCREF(q)
        PyList_SET_ITEM(seq, i, q)
    return ms, seq
