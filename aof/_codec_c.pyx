# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""AOF record framing, compiled: the same functions and results as `_codec_py.py` (the
reference, which documents the record format and every rule followed here), with the CRC-32C,
the frame walking and the common msgpack shapes done in C instead of one Python call per step.

- CRC-32C: slicing-by-8 tables in portable C; on x86-64 the SSE 4.2 `crc32` instruction when
  the CPU has it (checked at import), which computes the same function.
- `encode`: a record whose fields are exact ints, lists/tuples and bytes (what the engine logs)
  is packed here straight into its frame, byte for byte what msgpack writes; anything else
  takes the reference's path (msgpack's packer), so every input gets the same bytes or error.
- Scanning and decoding: frames are walked over the data's buffer, every read bounded by the
  data's length (lengths are read unsigned and compared against what is left, never added
  into a pointer first). A payload made only of arrays, ints, nil/bools and bin/str (what
  `encode` writes) is decoded here into what `msgpack.unpackb(raw=True, use_list=False)`
  returns; any other payload (and any doubt: trailing bytes, a count larger than the bytes
  left, deep nesting) goes to `msgpack.unpackb` itself, so both twins see the same objects and
  errors. Arrays are sized only after checking that the bytes left can hold their items, so
  an announced count never allocates more than the payload's size.

Arguments the fast paths do not handle (other data types, negative offsets) are handed to the
reference function, which gives the same answers and errors. The data's buffer is held (an
export: a bytearray cannot be resized) only while a function runs, never across a `yield`.
Must not touch: the segment header (aof.codec), files, the engine.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong, PyLong_CheckExact, PyLong_FromLongLong, PyLong_FromUnsignedLongLong
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy

import msgpack

from streamkeep.aof import _codec_py
from streamkeep.aof._codec_py import BIG_ARG, MAX_PAYLOAD, RESYNC_SCAN_LIMIT, SCAN_BATCH, Damage, FormatError, ScanResult, StreamChunk, VerifyResult, record_time

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object op)


cdef extern from *:
    """
    #include <stdint.h>
    #include <stddef.h>

    /* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) without the pre- and
       post-inversion: crcmod's raw convention, crc32c(d) == sk_crc(0xFFFFFFFF, d) ^ 0xFFFFFFFF. */
    static uint32_t sk_crc_table[8][256];

    static void sk_crc_tables(void) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            sk_crc_table[0][n] = c;
        }
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = sk_crc_table[0][n];
            for (int k = 1; k < 8; k++) {
                c = sk_crc_table[0][c & 0xFF] ^ (c >> 8);
                sk_crc_table[k][n] = c;
            }
        }
    }

    /* Slicing-by-8, byte order independent (words are assembled from bytes). */
    static uint32_t sk_crc_portable(uint32_t crc, const unsigned char *p, size_t n) {
        while (n >= 8) {
            uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                                 | (uint32_t)p[3] << 24);
            uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                          | (uint32_t)p[7] << 24;
            crc = sk_crc_table[7][lo & 0xFF] ^ sk_crc_table[6][(lo >> 8) & 0xFF]
                  ^ sk_crc_table[5][(lo >> 16) & 0xFF] ^ sk_crc_table[4][lo >> 24]
                  ^ sk_crc_table[3][hi & 0xFF] ^ sk_crc_table[2][(hi >> 8) & 0xFF]
                  ^ sk_crc_table[1][(hi >> 16) & 0xFF] ^ sk_crc_table[0][hi >> 24];
            p += 8;
            n -= 8;
        }
        while (n--) crc = sk_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        return crc;
    }

    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <string.h>
    /* SSE 4.2's crc32 instruction computes CRC-32C; used only when the CPU reports it. */
    __attribute__((target("sse4.2")))
    static uint32_t sk_crc_sse42(uint32_t crc, const unsigned char *p, size_t n) {
        uint64_t c = crc;
        while (n >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            c = __builtin_ia32_crc32di(c, w);
            p += 8;
            n -= 8;
        }
        uint32_t c32 = (uint32_t)c;
        while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
        return c32;
    }
    static int sk_crc_hardware_available(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("sse4.2");
    }
    #else
    static uint32_t sk_crc_sse42(uint32_t crc, const unsigned char *p, size_t n) {
        return sk_crc_portable(crc, p, n);
    }
    static int sk_crc_hardware_available(void) { return 0; }
    #endif

    static int sk_crc_use_hardware = 0;

    static uint32_t sk_crc(uint32_t crc, const unsigned char *p, size_t n) {
        return sk_crc_use_hardware ? sk_crc_sse42(crc, p, n) : sk_crc_portable(crc, p, n);
    }
    """
    void sk_crc_tables() nogil
    int sk_crc_hardware_available() nogil
    int sk_crc_use_hardware
    uint32_t sk_crc(uint32_t crc, const unsigned char* p, size_t n) nogil
    uint32_t sk_crc_portable(uint32_t crc, const unsigned char* p, size_t n) nogil


sk_crc_tables()
sk_crc_use_hardware = sk_crc_hardware_available()

cdef object _unpackb = msgpack.unpackb
cdef object _packb = _codec_py.packb
cdef tuple _UNPACK_ERRORS = (ValueError, TypeError, msgpack.UnpackException)
cdef Py_ssize_t _MAX_PAYLOAD = MAX_PAYLOAD
cdef Py_ssize_t _BIG_ARG = BIG_ARG
cdef Py_ssize_t _RESYNC_SCAN_LIMIT = RESYNC_SCAN_LIMIT
cdef Py_ssize_t _FRAME = 8  # FRAME_SIZE
cdef Py_ssize_t _MIN_PAYLOAD = 13  # the reference's _MIN_PAYLOAD


# --- CRC-32C ---------------------------------------------------------------------------------

def crc32c(data, crc=0):
    cdef Py_buffer view
    cdef uint32_t value
    if type(crc) is not int or not 0 <= crc <= 0xFFFFFFFF:
        return _codec_py.crc32c(data, crc)
    value = <uint32_t>crc ^ 0xFFFFFFFFu
    if PyBytes_CheckExact(data):
        return sk_crc(value, <const unsigned char*>PyBytes_AS_STRING(data),
                      <size_t>PyBytes_GET_SIZE(data)) ^ 0xFFFFFFFFu
    try:
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    except Exception:  # not a contiguous buffer: the reference raises what crcmod raises
        return _codec_py.crc32c(data, crc)
    try:
        value = sk_crc(value, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return value ^ 0xFFFFFFFFu


def _crc32c_portable(data: bytes) -> int:
    """crc32c(data) by the slicing-by-8 tables whatever the CPU (for the tests)."""
    return sk_crc_portable(0xFFFFFFFFu, <const unsigned char*>PyBytes_AS_STRING(data),
                           <size_t>PyBytes_GET_SIZE(data)) ^ 0xFFFFFFFFu


def _crc32c_hardware() -> bool:
    """Does crc32c run on the CPU's crc32 instruction?"""
    return bool(sk_crc_use_hardware)


# --- little helpers over a byte pointer ----------------------------------------------------------

cdef inline uint32_t _le32(const unsigned char* p) noexcept nogil:
    return <uint32_t>p[0] | <uint32_t>p[1] << 8 | <uint32_t>p[2] << 16 | <uint32_t>p[3] << 24


cdef inline uint64_t _be(const unsigned char* p, int width) noexcept nogil:
    cdef uint64_t value = 0
    cdef int i
    for i in range(width):
        value = value << 8 | p[i]
    return value


cdef inline void _put_be(unsigned char* p, uint64_t value, int width) noexcept nogil:
    cdef int i
    for i in range(width - 1, -1, -1):
        p[i] = <unsigned char>(value & 0xFF)
        value >>= 8


cdef inline void _put_le32(unsigned char* p, uint32_t value) noexcept nogil:
    p[0] = value & 0xFF
    p[1] = (value >> 8) & 0xFF
    p[2] = (value >> 16) & 0xFF
    p[3] = value >> 24


cdef inline bint _is_data(object data):
    """The types the scanning fast paths read (their buffer is one contiguous byte array)."""
    return type(data) is bytes or type(data) is bytearray


# --- encoding ------------------------------------------------------------------------------------
# The packer below writes what msgpack's Packer(use_bin_type=True) writes for exact ints, bytes
# and lists/tuples: the smallest integer encoding (fixint, uint 8-64 for positives, int 8-64 for
# negatives), bin 8/16/32, fixarray/array 16/array 32. Sizing returns -1 for anything else.

cdef inline Py_ssize_t _int_size(object o, int64_t* signed_value, uint64_t* unsigned_value,
                                 bint* is_unsigned) except -2:
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow == 0:
        if v >= 0:
            unsigned_value[0] = <uint64_t>v
            is_unsigned[0] = True
            if v < 128:
                return 1
            if v < 0x100:
                return 2
            if v < 0x10000:
                return 3
            if v < 0x100000000:
                return 5
            return 9
        signed_value[0] = v
        is_unsigned[0] = False
        if v >= -32:
            return 1
        if v >= -128:
            return 2
        if v >= -32768:
            return 3
        if v >= -2147483648:
            return 5
        return 9
    if overflow < 0:
        return -1  # below int64: msgpack's OverflowError, from the reference
    try:
        unsigned_value[0] = PyLong_AsUnsignedLongLong(o)
    except OverflowError:
        return -1
    is_unsigned[0] = True
    return 9


cdef inline Py_ssize_t _leaf_size(object o) except -2:
    cdef int64_t s
    cdef uint64_t u
    cdef bint unsigned_
    cdef Py_ssize_t n
    if PyBytes_CheckExact(o):
        n = PyBytes_GET_SIZE(o)
        if n < 0x100:
            return 2 + n
        if n < 0x10000:
            return 3 + n
        if n <= 0xFFFFFFFF:
            return 5 + n
        return -1
    if PyLong_CheckExact(o):
        return _int_size(o, &s, &u, &unsigned_)
    return -1


cdef inline Py_ssize_t _array_size(Py_ssize_t n) noexcept:
    if n < 16:
        return 1
    if n < 0x10000:
        return 3
    if n <= 0xFFFFFFFF:
        return 5
    return -1


cdef inline Py_ssize_t _seq_len(object o) noexcept:
    """len() of an exact list or tuple, -1 for anything else."""
    if PyList_CheckExact(o):
        return PyList_GET_SIZE(o)
    if PyTuple_CheckExact(o):
        return PyTuple_GET_SIZE(o)
    return -1


cdef inline object _seq_item(object seq, Py_ssize_t i):
    if PyList_CheckExact(seq):
        return <object>PyList_GET_ITEM(seq, i)
    return <object>PyTuple_GET_ITEM(seq, i)


cdef inline unsigned char* _write_array(unsigned char* w, Py_ssize_t n) noexcept:
    if n < 16:
        w[0] = 0x90 | <unsigned char>n
        return w + 1
    if n < 0x10000:
        w[0] = 0xDC
        _put_be(w + 1, n, 2)
        return w + 3
    w[0] = 0xDD
    _put_be(w + 1, n, 4)
    return w + 5


cdef inline unsigned char* _write_int(unsigned char* w, object o) except NULL:
    cdef int64_t s = 0
    cdef uint64_t u = 0
    cdef bint unsigned_ = False
    cdef Py_ssize_t size = _int_size(o, &s, &u, &unsigned_)
    if size == 1:  # a positive or negative fixint
        w[0] = <unsigned char>(u if unsigned_ else <uint64_t>s & 0xFF)
        return w + 1
    # uint 8/16/32/64 are 0xCC-0xCF, int 8/16/32/64 0xD0-0xD3; size is 2, 3, 5 or 9
    w[0] = (0xCC if unsigned_ else 0xD0) + (0 if size == 2 else 1 if size == 3 else 2 if size == 5
                                            else 3)
    _put_be(w + 1, u if unsigned_ else <uint64_t>s, <int>(size - 1))
    return w + size


cdef inline unsigned char* _write_leaf(unsigned char* w, object o) except NULL:
    cdef Py_ssize_t n
    if PyBytes_CheckExact(o):
        n = PyBytes_GET_SIZE(o)
        if n < 0x100:
            w[0] = 0xC4
            w[1] = <unsigned char>n
            w += 2
        elif n < 0x10000:
            w[0] = 0xC5
            _put_be(w + 1, n, 2)
            w += 3
        else:
            w[0] = 0xC6
            _put_be(w + 1, n, 4)
            w += 5
        memcpy(w, PyBytes_AS_STRING(o), <size_t>n)
        return w + n
    return _write_int(w, o)


cdef Py_ssize_t _BIG = -3  # _payload_size's answer for a record with a big argument


cdef Py_ssize_t _payload_size(object lsn, object time_ms, object db, object effects,
                              bint small_only=False) except -2:
    """Bytes msgpack packs [lsn, time_ms, db, effects] into, or -1: not a shape packed here.
    With `small_only` the arguments must be bytes, and one of BIG_ARG bytes or more gives
    _BIG."""
    cdef Py_ssize_t total = 1, part, n_effects, n_args, i, j
    cdef object effect, arg
    cdef bint big = False
    if not (PyLong_CheckExact(lsn) and PyLong_CheckExact(time_ms) and PyLong_CheckExact(db)):
        return -1
    part = _leaf_size(lsn)  # (one by one: a loop over a tuple would box the three sizes)
    if part < 0:
        return -1
    total += part
    part = _leaf_size(time_ms)
    if part < 0:
        return -1
    total += part
    part = _leaf_size(db)
    if part < 0:
        return -1
    total += part
    n_effects = _seq_len(effects)
    if n_effects < 0 or _array_size(n_effects) < 0:
        return -1
    total += _array_size(n_effects)
    for i in range(n_effects):
        effect = _seq_item(effects, i)
        n_args = _seq_len(effect)
        if n_args < 0 or _array_size(n_args) < 0:
            return -1
        total += _array_size(n_args)
        for j in range(n_args):
            arg = _seq_item(effect, j)
            if small_only:
                if not PyBytes_CheckExact(arg):
                    return -1
                part = PyBytes_GET_SIZE(arg)
                if part >= _BIG_ARG:
                    big = True  # (the whole effect first, as has_big_arg reads it)
                # bin 8/16/32's header, then the bytes (as _leaf_size sizes them)
                total += part + (2 if part < 0x100 else 3 if part < 0x10000 else 5)
                continue
            part = _leaf_size(arg)
            if part < 0:
                return -1
            total += part
        if big:
            return _BIG
    return total


def encode(lsn, time_ms, db, effects):
    cdef Py_ssize_t size = _payload_size(lsn, time_ms, db, effects)
    if size < 0 or size > 0xFFFFFFFF:
        return _codec_py.encode(lsn, time_ms, db, effects)
    return _pack(size, lsn, time_ms, db, effects)


def encode_small(lsn, time_ms, db, effects):
    """The reference's: one sizing pass says whether an argument is big, then the packing."""
    cdef Py_ssize_t size = _payload_size(lsn, time_ms, db, effects, True)
    if size == _BIG:
        return None
    if size < 0 or size > 0xFFFFFFFF:
        return _codec_py.encode_small(lsn, time_ms, db, effects)
    return _pack(size, lsn, time_ms, db, effects)


cdef bytes _pack(Py_ssize_t size, object lsn, object time_ms, object db, object effects):
    """The framed record, its payload `size` bytes (as _payload_size found the objects)."""
    cdef Py_ssize_t n_effects, n_args, i, j
    cdef unsigned char* start
    cdef unsigned char* w
    cdef object effect
    frame = PyBytes_FromStringAndSize(NULL, _FRAME + size)
    start = <unsigned char*>PyBytes_AS_STRING(frame)
    w = start + _FRAME
    w[0] = 0x94
    w = _write_int(w + 1, lsn)
    w = _write_int(w, time_ms)
    w = _write_int(w, db)
    # The sizing pass checked every object's type; nothing ran Python code since.
    n_effects = _seq_len(effects)
    w = _write_array(w, n_effects)
    for i in range(n_effects):
        effect = _seq_item(effects, i)
        n_args = _seq_len(effect)
        w = _write_array(w, n_args)
        for j in range(n_args):
            w = _write_leaf(w, _seq_item(effect, j))
    assert w == start + _FRAME + size
    _put_le32(start, <uint32_t>size)
    _put_le32(start + 4, sk_crc(0xFFFFFFFFu, start + _FRAME, <size_t>size) ^ 0xFFFFFFFFu)
    return frame


def has_big_arg(effects):
    cdef Py_ssize_t n_effects = _seq_len(effects), n_args, i, j
    cdef object effect, arg
    cdef bint big
    if n_effects < 0:
        return _codec_py.has_big_arg(effects)
    for i in range(n_effects):
        effect = _seq_item(effects, i)
        n_args = _seq_len(effect)
        if n_args < 0:
            return _codec_py.has_big_arg(effects)
        big = False
        for j in range(n_args):  # the whole effect first: len() of each, as max() takes it
            arg = _seq_item(effect, j)
            if not PyBytes_CheckExact(arg):
                return _codec_py.has_big_arg(effects)
            if PyBytes_GET_SIZE(arg) >= _BIG_ARG:
                big = True
        if big:
            return True
    return False


def encode_parts(lsn, time_ms, db, effects):
    """The reference's algorithm (small items packed by msgpack), the CRC over the parts in C."""
    cdef uint32_t crc = 0xFFFFFFFFu
    cdef Py_ssize_t total = 0
    parts = []
    small = bytearray(_codec_py._array_header(4))
    small += _packb(lsn)
    small += _packb(time_ms)
    small += _packb(db)
    small += _codec_py._array_header(len(effects))
    for effect in effects:
        small += _codec_py._array_header(len(effect))
        for arg in effect:
            if type(arg) is bytes and len(arg) >= BIG_ARG:
                small += b"\xc6" + len(arg).to_bytes(4, "big")
                parts.append(bytes(small))
                small.clear()
                parts.append(arg)
            else:
                small += _packb(arg)
    if small:
        parts.append(bytes(small))
    for part in parts:
        crc = sk_crc(crc, <const unsigned char*>PyBytes_AS_STRING(part),
                     <size_t>PyBytes_GET_SIZE(part))
        total += PyBytes_GET_SIZE(part)
    return [_codec_py.FRAME.pack(total, crc ^ 0xFFFFFFFFu), *parts]


# --- decoding ------------------------------------------------------------------------------------

cdef object _NO = object()  # "not decoded here": msgpack.unpackb decides
cdef int _MAX_DEPTH = 3  # arrays nested in the record's array (effects, effect): deeper is msgpack's


cdef object _unpack(const unsigned char* p, Py_ssize_t* at, Py_ssize_t end, int depth):
    """The object at p[at[0]:end] as unpackb(raw=True, use_list=False) makes it, at[0] moved
    past it, or _NO."""
    cdef Py_ssize_t i = at[0], n, k, width
    cdef unsigned char tag
    cdef object item, tup
    if i >= end:
        return _NO
    tag = p[i]
    i += 1
    if tag < 0x80:
        at[0] = i
        return PyLong_FromLongLong(tag)
    if tag >= 0xE0:
        at[0] = i
        return PyLong_FromLongLong(<signed char>tag)
    if 0xA0 <= tag <= 0xBF or 0xC4 <= tag <= 0xC6 or 0xD9 <= tag <= 0xDB:  # str/bin -> bytes
        if tag <= 0xBF:
            n = tag & 0x1F
        else:
            width = 1 << (tag - 0xC4 if tag <= 0xC6 else tag - 0xD9)
            if end - i < width:
                return _NO
            n = <Py_ssize_t>_be(p + i, <int>width)
            i += width
        if n > end - i:
            return _NO
        at[0] = i + n
        return PyBytes_FromStringAndSize(<const char*>(p + i), n)
    if 0x90 <= tag <= 0x9F or tag == 0xDC or tag == 0xDD:
        if tag <= 0x9F:
            n = tag & 0x0F
        else:
            width = 2 if tag == 0xDC else 4
            if end - i < width:
                return _NO
            n = <Py_ssize_t>_be(p + i, <int>width)
            i += width
        # Every item takes a byte at least: a count the bytes left cannot hold is msgpack's to
        # refuse, and no tuple larger than the payload is ever allocated.
        if depth >= _MAX_DEPTH or n > end - i:
            return _NO
        tup = PyTuple_New(n)
        for k in range(n):
            at[0] = i
            item = _unpack(p, at, end, depth + 1)
            if item is _NO:
                return _NO
            i = at[0]
            Py_INCREF(item)
            PyTuple_SET_ITEM(tup, k, item)
        at[0] = i
        # Its items are bytes, ints, None, bools or tuples already untracked: the tuple can be
        # in no reference cycle, so the collector need not look at it (CPython untracks such
        # tuples itself, one collection later; a replay keeps millions of them alive).
        PyObject_GC_UnTrack(tup)
        return tup
    if 0xCC <= tag <= 0xD3:  # uint 8-64, int 8-64
        width = 1 << ((tag - 0xCC) & 3)
        if end - i < width:
            return _NO
        at[0] = i + width
        if tag <= 0xCF:
            return PyLong_FromUnsignedLongLong(_be(p + i, <int>width))
        if width == 1:
            return PyLong_FromLongLong(<signed char>p[i])
        if width == 2:
            return PyLong_FromLongLong(<short>_be(p + i, 2))
        if width == 4:
            return PyLong_FromLongLong(<int>_be(p + i, 4))
        return PyLong_FromLongLong(<long long>_be(p + i, 8))
    if tag == 0xC0:
        at[0] = i
        return None
    if tag == 0xC2 or tag == 0xC3:
        at[0] = i
        return tag == 0xC3
    return _NO


cdef object _decode(const unsigned char* p, Py_ssize_t n):
    """unpackb(p[:n], raw=True, use_list=False) (what it returns or raises)."""
    cdef Py_ssize_t at = 0
    cdef object value = _unpack(p, &at, n, 0)
    if value is _NO or at != n:
        value = _unpackb(PyBytes_FromStringAndSize(<const char*>p, n), raw=True, use_list=False)
    return value


# --- scanning a segment ---------------------------------------------------------------------------

cdef class _Cursor:
    """The scan's position between batches (the data's buffer is not held across a yield)."""
    cdef Py_ssize_t pos
    cdef object expected
    cdef str reason  # why a CRC-valid record was refused


cdef enum:
    BATCH_FULL = 0
    AT_END = 1
    REFUSED = 2  # a CRC-valid record that is not the next one: reason set
    BAD_FRAME = 3  # no CRC-valid frame at pos: the reference's _frame_at says why


cdef int _scan_run(object data, Py_ssize_t size, _Cursor cur, list batch, Py_ssize_t room
                   ) except -1:
    """Append the good records from cur.pos to `batch` (at most `room`); say what stopped."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t pos, body, length
    cdef uint32_t crc
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        if view.len < size:  # (a bytearray shortened between batches: never read past it)
            size = view.len
        while cur.pos < size:
            pos = cur.pos
            body = pos + _FRAME
            if body > size:
                return BAD_FRAME
            length = _le32(p + pos)
            crc = _le32(p + pos + 4)
            if length == 0 or length > _MAX_PAYLOAD or length > size - body:
                return BAD_FRAME
            if sk_crc(0xFFFFFFFFu, p + body, <size_t>length) ^ 0xFFFFFFFFu != crc:
                return BAD_FRAME
            try:
                record = _decode(p + body, length)
                lsn, time_ms, db, _effects = record
            except _UNPACK_ERRORS:
                cur.reason = "undecodable record payload"
                return REFUSED
            expected = cur.expected
            if lsn == expected and type(time_ms) is int and type(db) is int and 0 <= db < 16:
                batch.append(record)
                cur.expected = expected + 1
                cur.pos = body + length
                room -= 1
                if room == 0:
                    return BATCH_FULL
                continue
            cur.reason = f"record LSN {lsn} where {expected} was expected"
            return REFUSED
        return AT_END
    finally:
        PyBuffer_Release(&view)


def scan(data, start, first_lsn):
    result = ScanResult(end=start)
    for batch in scan_batches(data, start, first_lsn, result, 4096):
        result.records += batch
    return result


def scan_batches(data, start, first_lsn, result, batch_size=SCAN_BATCH):
    cdef _Cursor cur
    cdef int status
    cdef Py_ssize_t size
    if not (_is_data(data) and type(start) is int and start >= 0 and type(first_lsn) is int
            and type(batch_size) is int and batch_size >= 1):
        yield from _codec_py.scan_batches(data, start, first_lsn, result, batch_size)
        return
    size = len(data)
    cur = _Cursor()
    cur.pos = start
    cur.expected = first_lsn
    while True:
        batch = []
        status = _scan_run(data, size, cur, batch, min(batch_size, 1 << 40))
        if status != BATCH_FULL:
            break
        result.end, result.count = cur.pos, cur.expected - first_lsn
        yield batch
    damage = None
    if status == REFUSED:
        # The CRC matched, so these bytes were written whole: not a torn tail.
        damage = Damage(cur.pos, cur.reason, True)
    elif status == BAD_FRAME:
        _length, frame_reason = _codec_py._frame_at(data, cur.pos)
        damage = Damage(cur.pos, frame_reason or "bad record",
                        next_valid_record(data, cur.pos, cur.expected) is not None)
    result.end, result.count, result.damage = cur.pos, cur.expected - first_lsn, damage
    if batch:
        yield batch


# --- where valid records resume after damage ---------------------------------------------------

cdef inline bint _read_uint(const unsigned char* p, Py_ssize_t size, Py_ssize_t pos,
                            uint64_t* value, Py_ssize_t* after) noexcept:
    """The reference's _read_uint: a non-negative msgpack integer at pos (bounded by size)."""
    cdef unsigned char tag
    cdef int width
    if pos >= size:
        return False
    tag = p[pos]
    if tag < 0x80:
        value[0] = tag
        after[0] = pos + 1
        return True
    if tag < 0xCC or tag > 0xCF:
        return False
    width = 1 << (tag - 0xCC)
    if pos + 1 + width > size:
        return False
    value[0] = _be(p + pos + 1, width)
    after[0] = pos + 1 + width
    return True


cdef inline bint _plausible(const unsigned char* p, Py_ssize_t size, Py_ssize_t pos,
                            uint64_t min_lsn, bint none_small_enough) noexcept:
    """The reference's _plausible_record (min_lsn above 2**64 - 1: none_small_enough)."""
    cdef Py_ssize_t body = pos + _FRAME, after, db_pos
    cdef Py_ssize_t length = _le32(p + pos)
    cdef uint64_t lsn, time_ms
    cdef unsigned char tag
    if not 5 <= length <= size - body or p[body] != 0x94:
        return False
    if not _read_uint(p, size, body + 1, &lsn, &after) or none_small_enough or lsn < min_lsn:
        return False
    if not _read_uint(p, size, after, &time_ms, &after) or after >= size:
        return False
    db_pos = after
    if p[db_pos] >= 16 or db_pos + 1 >= size:
        return False
    tag = p[db_pos + 1]
    return 0x90 <= tag <= 0x9F or tag == 0xDC or tag == 0xDD


def next_valid_record(data, start, min_lsn):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef const unsigned char* found
    cdef Py_ssize_t size, stop, hit, pos, length
    cdef uint64_t floor = 0
    cdef bint none_small_enough = False
    if not (_is_data(data) and type(start) is int and start >= 0 and type(min_lsn) is int):
        return _codec_py.next_valid_record(data, start, min_lsn)
    if min_lsn > 0xFFFFFFFFFFFFFFFF:
        none_small_enough = True
    elif min_lsn > 0:
        floor = min_lsn
    size = len(data)
    if start > size:
        return None
    stop = min(size - _FRAME - 1, start + _RESYNC_SCAN_LIMIT)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        hit = start + 1 + _FRAME
        while hit < size and hit - _FRAME <= stop:
            found = <const unsigned char*>memchr(p + hit, 0x94, <size_t>(size - hit))
            if found == NULL:
                return None
            hit = found - p
            if hit - _FRAME > stop:
                return None
            pos = hit - _FRAME
            hit += 1
            if not _plausible(p, size, pos, floor, none_small_enough):
                continue
            length = _le32(p + pos)
            if length > _MAX_PAYLOAD or length > size - pos - _FRAME:  # _frame_at's checks
                continue
            if sk_crc(0xFFFFFFFFu, p + pos + _FRAME, <size_t>length) ^ 0xFFFFFFFFu \
                    != _le32(p + pos + 4):
                continue
            try:
                record = _codec_py.decode_payload(
                    PyBytes_FromStringAndSize(<const char*>(p + pos + _FRAME), length))
            except _UNPACK_ERRORS:
                continue
            return pos, record.lsn
        return None
    finally:
        PyBuffer_Release(&view)


def frames_in_tail(data, start):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t pos, size, count = 0, length, i
    cdef bint trailing = False
    if not (_is_data(data) and type(start) is int and start >= 0):
        return _codec_py.frames_in_tail(data, start)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        pos = start
        while pos <= size - _FRAME:
            length = _le32(p + pos)
            if not 0 < length <= _MAX_PAYLOAD:
                break
            count += 1
            pos += _FRAME + length
        if 0 < size - pos < _FRAME:
            for i in range(pos, size):
                if p[i]:
                    trailing = True
                    break
    finally:
        PyBuffer_Release(&view)
    return count + trailing


# --- verification ----------------------------------------------------------------------------------

def verify_scan(data, start, first_lsn, stop=None):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t size, pos, body, length, last = -1, c_stop
    cdef uint64_t expected, lsn
    cdef unsigned char tag
    if not (_is_data(data) and type(start) is int and start >= 0 and type(first_lsn) is int
            and 0 <= first_lsn < 1 << 63 and (stop is None or type(stop) is int)):
        return _codec_py.verify_scan(data, start, first_lsn, stop)
    size = len(data)
    c_stop = size if stop is None else max(-1, min(stop, size))
    expected = first_lsn
    pos = start
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        # A frame is vouched for here when its header fits (and, with stop, it starts before
        # stop), its length holds the shortest payload and fits in the data, its payload opens
        # with fixarray 4 and a uint (any width) equal to the expected LSN, and its CRC
        # matches: the reference's _fast_run and _any_run together.
        while pos < c_stop and pos <= size - _FRAME:
            length = _le32(p + pos)
            body = pos + _FRAME
            if length < _MIN_PAYLOAD or length > size - body or p[body] != 0x94:
                break
            tag = p[body + 1]
            if tag < 0x80:
                lsn = tag
            elif 0xCC <= tag <= 0xCF:
                lsn = _be(p + body + 2, 1 << (tag - 0xCC))  # within the 13 bytes
            else:
                break
            if lsn != expected or sk_crc(0xFFFFFFFFu, p + body, <size_t>length) \
                    ^ 0xFFFFFFFFu != _le32(p + pos + 4):
                break
            last = pos
            expected += 1
            pos = body + length
    finally:
        PyBuffer_Release(&view)
    result = VerifyResult(end=pos, count=expected - <uint64_t>first_lsn)
    last_pos = last
    if stop is not None:  # a part: the caller joins the parts (or rescans on damage)
        if pos < stop:
            result.damage = Damage(pos, "refused by the fast path", True)
        if result.count:
            result.first_time_ms = record_time(data, start)
            result.last_time_ms = record_time(data, last_pos)
        return result
    next_lsn = first_lsn + result.count
    if pos < size:  # the slow path decides what stopped the fast one
        tail = ScanResult(end=pos)
        for batch in scan_batches(data, pos, next_lsn, tail, 4096):
            next_lsn += len(batch)
            result.last_time_ms = batch[len(batch) - 1][1]
        result.end, result.damage = tail.end, tail.damage
        result.count = next_lsn - first_lsn
    if result.count:
        result.first_time_ms = record_time(data, start)
        if result.last_time_ms is None:
            result.last_time_ms = record_time(data, last_pos)
    return result


# --- the record stream outside a file (replication) ----------------------------------------------

def decode_stream(data, start, first_lsn, limit=1 << 62):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t size, pos, body, end, length, c_limit, taken = 0
    cdef uint32_t crc
    if not (_is_data(data) and type(start) is int and start >= 0 and type(first_lsn) is int
            and type(limit) is int):
        return _codec_py.decode_stream(data, start, first_lsn, limit)
    c_limit = max(0, min(limit, 1 << 62))
    pos = start
    expected = first_lsn
    records = []
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        while pos <= size - _FRAME and taken < c_limit:
            length = _le32(p + pos)
            crc = _le32(p + pos + 4)
            if length == 0:
                return StreamChunk(records, pos, True)
            body = pos + _FRAME
            if length <= _MAX_PAYLOAD and length > size - body:
                break
            end = body + length
            if length <= _MAX_PAYLOAD and \
                    sk_crc(0xFFFFFFFFu, p + body, <size_t>length) ^ 0xFFFFFFFFu == crc:
                try:
                    record = _decode(p + body, length)
                    lsn, time_ms, db, _effects = record
                except _UNPACK_ERRORS:
                    lsn = None
                if lsn == expected and type(time_ms) is int and type(db) is int \
                        and 0 <= db < 16:
                    records.append(record)
                    taken += 1
                    expected += 1
                    pos = end
                    continue
            if records:  # the good records first; the next call starts at the bad one
                break
            raise FormatError(f"record LSN {expected}: "
                              f"{_codec_py._stream_problem(data, body, length, crc, expected)}")
    finally:
        PyBuffer_Release(&view)
    return StreamChunk(records, pos)


def frame_offsets(data, start, count):
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t size, pos, length, i, n
    cdef uint32_t crc = 0
    if not (_is_data(data) and type(start) is int and start >= 0 and type(count) is int):
        return _codec_py.frame_offsets(data, start, count)
    n = max(0, min(count, 1 << 62))  # each frame takes 8 bytes at least: the walk ends first
    pos = start
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        p = <const unsigned char*>view.buf
        size = view.len
        for i in range(n):
            if pos > size - _FRAME:
                raise ValueError(f"the data ends at {size}, inside the frames walked")
            length = _le32(p + pos)
            crc = _le32(p + pos + 4)
            pos += _FRAME + length
            if length == 0 or pos > size:
                raise ValueError(f"no whole frame at offset {pos - _FRAME - length}")
    finally:
        PyBuffer_Release(&view)
    return pos, (crc if n else None)
