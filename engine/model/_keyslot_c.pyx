# cython: boundscheck=False, wraparound=False, cdivision=True
"""Redis Cluster's key-to-slot map, compiled: the same functions and results as
`_keyslot_py.py` (the reference), the hash tag found with memchr and the CRC16 computed over
the key's own buffer from a table built when the module loads.

A key that is not exactly bytes (a bytearray, a memoryview, something that is no key at all)
takes the reference's path, so its bytes and its errors are the reference's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport uint16_t
from libc.string cimport memchr

from streamkeep.engine.model import _keyslot_py

cdef enum:
    POLY = 0x1021
    SLOT_MASK = 0x3FFF  # 16384 slots (keyslot.SLOTS)
    NO_SLOT = -2  # common_slot: no key yet
    CROSS_SLOT = -1  # common_slot: two slots
    # A key this long is hashed without the GIL (at about a byte a nanosecond: tens of
    # microseconds and more, where releasing and taking it back costs well under one).
    NOGIL_BYTES = 1 << 16

cdef uint16_t TABLE[256]


cdef void fill_table() noexcept nogil:
    cdef int byte, bit
    cdef unsigned int crc
    for byte in range(256):
        crc = <unsigned int>byte << 8
        for bit in range(8):
            crc = ((crc << 1) ^ POLY) if crc & 0x8000 else crc << 1
        TABLE[byte] = <uint16_t>crc


fill_table()


cdef inline uint16_t c_crc16(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef uint16_t crc = 0
    cdef Py_ssize_t i
    for i in range(n):
        crc = <uint16_t>(crc << 8) ^ TABLE[(crc >> 8) ^ p[i]]
    return crc


cdef inline int c_slot(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """The slot of the n-byte key at p: its hash tag's, when it has one."""
    cdef const unsigned char* start
    cdef const unsigned char* end
    if n > 0:
        start = <const unsigned char*>memchr(p, b'{', <size_t>n)
        if start != NULL:
            end = <const unsigned char*>memchr(start + 1, b'}', <size_t>(p + n - start - 1))
            if end != NULL and end != start + 1:
                return c_crc16(start + 1, end - start - 1) & SLOT_MASK
    return c_crc16(p, n) & SLOT_MASK


cdef inline int slot_of(object key) except -1:
    """The slot of one key, exactly bytes in place, anything else by the reference."""
    cdef const unsigned char* p
    cdef Py_ssize_t n
    cdef int slot
    if not PyBytes_CheckExact(key):
        return _keyslot_py.key_slot(key)
    p = <const unsigned char*>PyBytes_AS_STRING(key)
    n = PyBytes_GET_SIZE(key)
    if n < NOGIL_BYTES:
        return c_slot(p, n)
    with nogil:
        slot = c_slot(p, n)
    return slot


def crc16(object data):
    cdef const unsigned char* p
    cdef Py_ssize_t n
    cdef uint16_t crc
    if not PyBytes_CheckExact(data):
        return _keyslot_py.crc16(data)
    p = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    if n < NOGIL_BYTES:
        return c_crc16(p, n)
    with nogil:
        crc = c_crc16(p, n)
    return crc


def key_slot(object key):
    return slot_of(key)


def common_slot(object keys):
    cdef int slot = NO_SLOT, this
    cdef object key
    for key in keys:  # (a list's or a tuple's items read in place)
        this = slot_of(key)
        if slot == NO_SLOT:
            slot = this
        elif this != slot:
            return CROSS_SLOT
    return slot
