# cython: boundscheck=False, wraparound=False
"""Counting a command call and its time, compiled: the same functions and results as
`_call_timing_py.py` (the reference). The engine calls `count_call` once per command on its
hot path: this one call replaces the two list updates it made before, so recording the latency
histogram and testing for a slow call cost about nothing.
"""

from cpython.array cimport array, clone

cdef extern from *:
    int __builtin_clzll(unsigned long long)

HIST_LEN = 3072
HIST_MAX = 1000000000
cdef Py_ssize_t _HIST_LEN = 3072
cdef long long _HIST_MAX = 1000000000
cdef array _TEMPLATE = array("q", [])


cdef inline Py_ssize_t _index(long long value):
    cdef int bucket
    if value < 1:
        value = 1
    elif value > _HIST_MAX:
        value = _HIST_MAX
    bucket = 64 - __builtin_clzll(<unsigned long long>(value | 255)) - 8
    return ((bucket + 1) << 7) + (value >> bucket) - 128


def hist_index(long long nanos):
    return _index(nanos)


def new_histogram():
    return clone(_TEMPLATE, _HIST_LEN, True)


def count_call(list counters, long long nanos):
    cdef object histogram
    counters[0] = counters[0] + 1
    counters[1] = counters[1] + nanos
    if counters[6] is True:
        histogram = counters[4]
        if histogram is None:
            histogram = clone(_TEMPLATE, _HIST_LEN, True)
            counters[4] = histogram
        (<array>histogram).data.as_longlongs[_index(nanos)] += 1
    return nanos >= <long long>counters[5]
