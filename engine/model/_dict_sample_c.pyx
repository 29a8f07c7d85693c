# cython: boundscheck=False, wraparound=False
"""A few keys of a dict from a chosen place in it, compiled: Redis's dictGetSomeKeys for the
eviction's samples, in O(count) however large the dict (`_dict_sample_py.py` is the
reference, O(start)).

`start` is a position in the dict's table of entries, which holds its live entries in
insertion order with the deleted ones' holes among them until the dict is next resized: the
keys are the first `count` live ones at or after it, wrapping to the front once (the holes
after `start` are walked over: the eviction compacts its dicts before they hold many). Must
not touch: the dict (read only, under the GIL).
"""

from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject


def sample_keys(dict d, Py_ssize_t start, Py_ssize_t count):
    """Up to `count` keys of `d`, the first live entries at or after table position `start`,
    wrapping once (fewer only when `d` holds fewer)."""
    cdef Py_ssize_t pos = start if start > 0 else 0
    cdef PyObject *key
    cdef PyObject *value
    cdef list found = []
    cdef bint wrapped = start <= 0
    cdef Py_ssize_t size = len(d)
    if count > size:
        count = size
    while len(found) < count:
        if PyDict_Next(d, &pos, &key, &value):
            found.append(<object>key)
        elif wrapped:
            break
        else:
            wrapped = True
            pos = 0
    return found

