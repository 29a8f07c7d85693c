# cython: boundscheck=False, wraparound=False
"""An embedded caller's command arguments as bytes, compiled: the same function and results
as `_argv_py.py` (the reference). An ASCII str is copied straight from its buffer (str.encode
goes through the codec machinery for every argument); any other str is encoded by CPython's
UTF-8 encoder, as str.encode does; an int that fits a C long long is written by snprintf
(others by Python's formatting).
"""

from libc.stdio cimport snprintf

from cpython.bytes cimport PyBytes_CheckExact, PyBytes_FromStringAndSize
from cpython.ref cimport Py_INCREF
from cpython.sequence cimport PySequence_Fast_GET_ITEM, PySequence_Fast_GET_SIZE
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_CheckExact


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)


cdef bytes _int_bytes(object arg):
    cdef char buf[24]
    cdef long long v
    cdef int overflow = 0
    v = PyLong_AsLongLongAndOverflow(arg, &overflow)
    if overflow:
        return b"%d" % arg
    return PyBytes_FromStringAndSize(buf, snprintf(buf, sizeof(buf), "%lld", v))


def encode_args(object args):
    cdef Py_ssize_t i, n
    cdef object arg, item
    cdef tuple out
    if type(args) is not tuple and type(args) is not list:
        args = tuple(args)
    n = PySequence_Fast_GET_SIZE(args)
    out = PyTuple_New(n)
    for i in range(n):
        arg = <object>PySequence_Fast_GET_ITEM(args, i)
        if PyUnicode_CheckExact(arg):
            if PyUnicode_IS_COMPACT_ASCII(arg):
                item = PyBytes_FromStringAndSize(<char*>PyUnicode_DATA(arg),
                                                 PyUnicode_GET_LENGTH(arg))
            else:
                item = PyUnicode_AsUTF8String(arg)
        elif PyBytes_CheckExact(arg):
            item = arg
        elif type(arg) is int:
            item = _int_bytes(arg)
        else:
            return None
        Py_INCREF(item)  # PyTuple_SET_ITEM steals the reference
        PyTuple_SET_ITEM(out, i, item)
    return out
