# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The RDB codec's per-byte and per-entry work, compiled: the same functions, results and
errors as `_rdb_py.py` (the reference, which documents the formats), without a Python object
per byte, per listpack element or per RDB length. (Stream nodes are not decoded here: a node's
listpack is read as bytes, then checked and kept as it is, `engine.model.packed_node`.)

How it stays identical to the reference on untrusted bytes:
- Every read is bounds-checked against the buffer's own length before it happens (the
  `boundscheck=False` above covers only C pointer arithmetic whose range each function checks
  first); sizes are Py_ssize_t / 64-bit values compared before any addition can overflow.
- Nothing is allocated at a size the input merely announces: LZF output is allocated once its
  exact size is proven by a pass over the control bytes.
- `listpack_items` and `lzf_decompress` raise the reference's RdbErrors themselves (their
  conditions are simple); the stream walks return the reference cursor's first error (code,
  position) as it does. A count read from the input bounds no loop by itself: every round
  reads at least one byte, or stops. The encoders hand values outside what they handle (ints beyond
  int64, bytes subclasses, strings of 4 GiB) to the reference.
- Inputs that are not exactly `bytes` (or, for `crc64`, `bytearray`) take the reference.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_CheckExact, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_CheckExact, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact, PyLong_FromLongLong
from libc.stdint cimport uint64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

# The listpack helpers the kernels share, cimported by folder path (engine/model/lp_helpers.pxd).
from engine.model.lp_helpers cimport Buf, Elem, backlen_size, put_int, put_string, reserve
from streamkeep.snapshot import _rdb_py
from streamkeep.snapshot._rdb_py import RdbError

cdef object _U64_OBJ = (1 << 64) - 1


# --- CRC-64: slicing by 8 ------------------------------------------------------------------------

cdef uint64_t CRC_TABLE[8][256]


cdef void _crc_tables() noexcept:
    # The reflected Jones polynomial (0xAD93D23594C935A9 bit-reversed), as crcmod builds it.
    cdef uint64_t poly = 0x95AC9329AC4BC9B5ULL
    cdef uint64_t crc
    cdef int i, k
    for i in range(256):
        crc = i
        for k in range(8):
            crc = (crc >> 1) ^ (poly if crc & 1 else 0)
        CRC_TABLE[0][i] = crc
    for i in range(256):
        crc = CRC_TABLE[0][i]
        for k in range(1, 8):
            crc = CRC_TABLE[0][crc & 0xFF] ^ (crc >> 8)
            CRC_TABLE[k][i] = crc


_crc_tables()


cdef uint64_t _crc_update(uint64_t crc, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t word
    while n >= 8:
        word = (<uint64_t>p[0] | <uint64_t>p[1] << 8 | <uint64_t>p[2] << 16
                | <uint64_t>p[3] << 24 | <uint64_t>p[4] << 32 | <uint64_t>p[5] << 40
                | <uint64_t>p[6] << 48 | <uint64_t>p[7] << 56)
        crc ^= word
        crc = (CRC_TABLE[7][crc & 0xFF] ^ CRC_TABLE[6][(crc >> 8) & 0xFF]
               ^ CRC_TABLE[5][(crc >> 16) & 0xFF] ^ CRC_TABLE[4][(crc >> 24) & 0xFF]
               ^ CRC_TABLE[3][(crc >> 32) & 0xFF] ^ CRC_TABLE[2][(crc >> 40) & 0xFF]
               ^ CRC_TABLE[1][(crc >> 48) & 0xFF] ^ CRC_TABLE[0][crc >> 56])
        p += 8
        n -= 8
    while n > 0:
        crc = CRC_TABLE[0][(crc ^ p[0]) & 0xFF] ^ (crc >> 8)
        p += 1
        n -= 1
    return crc


def crc64(data, crc=0):
    cdef uint64_t c
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t n
    if not PyLong_CheckExact(crc) or crc < 0 or crc > _U64_OBJ:
        return _rdb_py.crc64(data, crc)
    c = crc
    if PyBytes_CheckExact(data):
        p = <const unsigned char*>PyBytes_AS_STRING(data)
        n = PyBytes_GET_SIZE(data)
        if n >= 65536:  # bytes cannot change: other threads may run meanwhile
            with nogil:
                c = _crc_update(c, p, n)
        else:
            c = _crc_update(c, p, n)
        return c
    if PyByteArray_CheckExact(data):  # (the GIL held: nothing can resize it meanwhile)
        return _crc_update(c, <const unsigned char*>PyByteArray_AS_STRING(data),
                           PyByteArray_GET_SIZE(data))
    if type(data) is memoryview and data.c_contiguous:  # a slice without its copy
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:  # (the GIL held: what it views cannot be resized while it is exported)
            return _crc_update(c, <const unsigned char*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
    return _rdb_py.crc64(data, crc)


# --- LZF -------------------------------------------------------------------------------------------

cdef object _bad_lzf_data():
    return RdbError("bad LZF data")


cdef object _bad_lzf_length():
    return RdbError("bad LZF length")


def lzf_decompress(data, ulen):
    cdef long long want
    cdef int overflow = 0
    if not PyBytes_CheckExact(data) or not PyLong_CheckExact(ulen):
        return _rdb_py.lzf_decompress(data, ulen)
    # Beyond long long the announced size can never be reached, nor below 0: both compare
    # exactly like the reference's Python ints against an output of at most ~88x the input.
    want = PyLong_AsLongLongAndOverflow(ulen, &overflow)
    if overflow > 0:
        want = 0x7FFFFFFFFFFFFFFF
    elif overflow < 0 or want < 0:
        want = -1
    return _lzf(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data), want,
                False)


cdef inline void _lzf_back_copy(unsigned char* out, Py_ssize_t o, Py_ssize_t ref,
                                Py_ssize_t length) noexcept nogil:
    """An LZF back reference: `length` bytes from `ref` copied to `o` (both already checked)."""
    cdef Py_ssize_t k, chunk
    if o - ref >= length:
        memcpy(out + o, out + ref, length)
        return
    k = 0  # overlapping: the last o - ref bytes repeated, a period (or less) per copy
    while k < length:
        chunk = min(o - ref, length - k)
        memcpy(out + o + k, out + ref + k, chunk)
        k += chunk


cdef int _lzf_one_pass(const unsigned char* p, Py_ssize_t n, unsigned char* out,
                       Py_ssize_t want) noexcept nogil:
    """p[0:n] expanded into out[0:want]: 0 when it fills exactly that with nothing wrong, -1 at
    the first thing wrong or the first byte beyond `want` (the caller then takes the two passes
    below, which say what the reference says; nothing is written past `want`)."""
    cdef Py_ssize_t i = 0, o = 0, length, ref
    cdef unsigned int ctrl
    while i < n:
        ctrl = p[i]
        i += 1
        if ctrl < 32:
            if i + ctrl + 1 > n or o + ctrl + 1 > want:
                return -1
            memcpy(out + o, p + i, ctrl + 1)
            o += ctrl + 1
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                return -1
            length += p[i]
            i += 1
        if i >= n:
            return -1
        ref = o - ((ctrl & 31) << 8) - p[i] - 1
        i += 1
        length += 2
        if ref < 0 or o + length > want:
            return -1
        _lzf_back_copy(out, o, ref, length)
        o += length
    return 0 if o == want else -1


cdef object _lzf(const unsigned char* p, Py_ssize_t n, long long want, bint to_bytearray):
    """p[0:n] expanded to exactly `want` bytes, as bytes (or a bytearray), or the reference's
    RdbError."""
    cdef Py_ssize_t i, length, ref, o
    cdef unsigned int ctrl
    cdef long long total = 0
    cdef unsigned char* out
    # One pass when the announced size is one the input can reach (at most 88 bytes out per
    # byte in: a 3-byte reference of 264): allocated at most 88 times the input, what a bad
    # size or bad data stops it, the two passes say why.
    if 0 <= want and n < (<Py_ssize_t>1 << 50) and want <= 88 * <long long>n:
        if to_bytearray:
            result = PyByteArray_FromStringAndSize(NULL, want)
            out = <unsigned char*>PyByteArray_AS_STRING(result)
        else:
            result = PyBytes_FromStringAndSize(NULL, want)
            out = <unsigned char*>PyBytes_AS_STRING(result)
        if _lzf_one_pass(p, n, out, want) == 0:
            return result
        result = None
    # Pass 1: the reference's checks, in its order, on lengths only (no output yet).
    i = 0
    while i < n:
        ctrl = p[i]
        i += 1
        if ctrl < 32:
            if i + ctrl + 1 > n:
                raise _bad_lzf_data()
            total += ctrl + 1
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                raise _bad_lzf_data()
            length += p[i]
            i += 1
        if i >= n:
            raise _bad_lzf_data()
        ref = total - ((ctrl & 31) << 8) - p[i] - 1
        i += 1
        if ref < 0:
            raise _bad_lzf_data()
        total += length + 2
        if total > want:
            raise _bad_lzf_length()
    if total != want:
        raise _bad_lzf_length()
    # Pass 2: the output, whose size is now proven (every reference lies inside it).
    if to_bytearray:
        result = PyByteArray_FromStringAndSize(NULL, total)
        out = <unsigned char*>PyByteArray_AS_STRING(result)
    else:
        result = PyBytes_FromStringAndSize(NULL, total)
        out = <unsigned char*>PyBytes_AS_STRING(result)
    i = 0
    o = 0
    while i < n:
        ctrl = p[i]
        i += 1
        if ctrl < 32:
            memcpy(out + o, p + i, ctrl + 1)
            o += ctrl + 1
            i += ctrl + 1
            continue
        length = ctrl >> 5
        if length == 7:
            length += p[i]
            i += 1
        ref = o - ((ctrl & 31) << 8) - p[i] - 1
        i += 1
        length += 2
        if o + length > total or ref < 0:  # cannot happen after pass 1: never write past it
            raise _bad_lzf_data()
        _lzf_back_copy(out, o, ref, length)
        o += length
    return result


# --- listpack elements --------------------------------------------------------------------------

# next_elem's outcomes besides 0 (an element read)
cdef enum:
    TRUNCATED = -1
    BAD_ENCODING = -2


cdef inline int next_elem(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                          Elem* e) noexcept nogil:
    """The element at *pos (< end, the index of the listpack's 0xFF): 0 with *e set and *pos
    moved past it (possibly past `end`: the caller's loop stops, its check fails), or an error
    code as the reference raises it. Reads nothing at or beyond `end` + 1."""
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t size
    cdef uint64_t raw
    cdef unsigned int b = p[i]
    cdef unsigned int v
    cdef int width, k
    if b < 0x80:
        e.is_int = True
        e.ival = b
        pos[0] = i + 2
        return 0
    if b < 0xC0:
        e.n = b & 0x3F
        if i + 1 + e.n > end:
            return TRUNCATED
        e.is_int = False
        e.s = p + i + 1
        pos[0] = i + 2 + e.n
        return 0
    if b < 0xE0:  # p[i + 1] is at most the 0xFF
        v = ((b & 0x1F) << 8) | p[i + 1]
        e.is_int = True
        e.ival = <long long>v - 8192 if v >= 4096 else v
        size = 2
    elif b < 0xF0:
        e.n = ((b & 0x0F) << 8) | p[i + 1]
        e.is_int = False
        e.s = p + i + 2
        size = 2 + e.n
    elif b == 0xF0:
        if i + 5 > end:
            return TRUNCATED
        e.n = (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8 | <Py_ssize_t>p[i + 3] << 16
               | <Py_ssize_t>p[i + 4] << 24)
        e.is_int = False
        e.s = p + i + 5
        size = 5 + e.n
    elif b <= 0xF4:
        width = 2 if b == 0xF1 else 3 if b == 0xF2 else 4 if b == 0xF3 else 8
        size = 1 + width
        if i + size > end:
            return TRUNCATED
        raw = 0
        for k in range(width - 1, -1, -1):
            raw = raw << 8 | p[i + 1 + k]
        e.is_int = True
        if width == 8:
            e.ival = <long long>raw
        elif raw >= (<uint64_t>1 << (8 * width - 1)):
            e.ival = <long long>raw - (<long long>1 << (8 * width))
        else:
            e.ival = <long long>raw
    else:
        return BAD_ENCODING
    if i + size > end:
        return TRUNCATED
    pos[0] = i + size + backlen_size(size)
    return 0


cdef inline bint lp_header_ok(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    if n < 7 or p[n - 1] != 0xFF:
        return False
    return (<uint64_t>p[0] | <uint64_t>p[1] << 8 | <uint64_t>p[2] << 16
            | <uint64_t>p[3] << 24) == <uint64_t>n


cdef inline object elem_object(Elem* e):
    if e.is_int:
        return PyLong_FromLongLong(e.ival)
    return PyBytes_FromStringAndSize(<const char*>e.s, e.n)


def listpack_items(lp):
    cdef const unsigned char* p
    cdef Py_ssize_t n, i, end
    cdef Elem e
    cdef int rc
    if not PyBytes_CheckExact(lp):
        return _rdb_py.listpack_items(lp)
    p = <const unsigned char*>PyBytes_AS_STRING(lp)
    n = PyBytes_GET_SIZE(lp)
    if not lp_header_ok(p, n):
        raise RdbError("bad listpack header")
    out = []
    i = 6
    end = n - 1
    while i < end:
        rc = next_elem(p, end, &i, &e)
        if rc == TRUNCATED:
            raise RdbError("truncated listpack entry")
        if rc == BAD_ENCODING:
            raise RdbError(f"bad listpack encoding {<int>p[i]:#x}")
        out.append(elem_object(&e))
    if i != end:
        raise RdbError("bad listpack length")
    return out


# --- listpacks, encoded ---------------------------------------------------------------------------

# put_object's outcome when a value is outside what this kernel encodes (the reference does)
cdef enum:
    NOT_HERE = 1


cdef int put_bytes(Buf* b, const unsigned char* s, Py_ssize_t n) except -1:
    """A string element (an integer one when it is a strict int64 decimal); NOT_HERE for one
    of 4 GiB or more (the reference's struct.pack refuses it)."""
    if n > 0xFFFFFFFFLL:  # (never a decimal: that has at most 20 bytes; LL: a C comparison)
        return NOT_HERE
    return put_string(b, s, n)


cdef int put_object(Buf* b, object value) except -1:
    """An element from exact bytes or an int64; NOT_HERE for anything else."""
    cdef long long v
    cdef int overflow = 0
    if PyBytes_CheckExact(value):
        return put_bytes(b, <const unsigned char*>PyBytes_AS_STRING(value),
                         PyBytes_GET_SIZE(value))
    if PyLong_CheckExact(value):
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            return NOT_HERE
        return put_int(b, v)
    return NOT_HERE


cdef object take_listpack(Buf* b, Py_ssize_t count):
    """The listpack whose elements are b.p[6:b.n] (room for its header was left), or None
    when it would reach 4 GiB (the reference's struct.pack refuses it)."""
    cdef Py_ssize_t total
    reserve(b, 1)
    b.p[b.n] = 0xFF
    b.n += 1
    total = b.n
    if total > 0xFFFFFFFF:
        return None
    if count > 65535:
        count = 65535
    b.p[0] = total & 0xFF
    b.p[1] = (total >> 8) & 0xFF
    b.p[2] = (total >> 16) & 0xFF
    b.p[3] = (total >> 24) & 0xFF
    b.p[4] = count & 0xFF
    b.p[5] = (count >> 8) & 0xFF
    return PyBytes_FromStringAndSize(<char*>b.p, total)


def lp_element(value):
    cdef Buf b
    b.p = NULL
    b.n = b.cap = 0
    try:
        if put_object(&b, value) == NOT_HERE:
            return _rdb_py.lp_element(value)
        return PyBytes_FromStringAndSize(<char*>b.p, b.n)
    finally:
        free(b.p)


def listpack(items):
    cdef Buf b
    cdef Py_ssize_t k, n
    if not PyList_CheckExact(items):
        return _rdb_py.listpack(items)
    b.p = NULL
    b.n = b.cap = 0
    try:
        reserve(&b, 6)
        b.n = 6
        n = PyList_GET_SIZE(items)
        for k in range(n):
            if k >= PyList_GET_SIZE(items):  # (nothing here can shrink it; kept cheap)
                break
            if put_object(&b, <object>PyList_GET_ITEM(items, k)) == NOT_HERE:
                return _rdb_py.listpack(items)
        result = take_listpack(&b, n)
        return _rdb_py.listpack(items) if result is None else result
    finally:
        free(b.p)


# --- a stream value's structure ---------------------------------------------------------------

cdef struct Cur:
    const unsigned char* p
    Py_ssize_t n
    Py_ssize_t pos  # always 0 <= pos <= n
    int err  # what stopped it (0: nothing), as the reference's cursor raises it
    unsigned int arg  # the byte or the number the message names

cdef enum:
    E_TRUNCATED = 1
    E_SPECIAL = 2
    E_LENGTH_ENCODING = 3
    E_STRING_ENCODING = 4


cdef inline int cur_fail(Cur* c, int err, unsigned int arg) noexcept nogil:
    c.err = err
    c.arg = arg
    return -1


cdef inline int cur_take(Cur* c, uint64_t k) noexcept nogil:
    """Past k bytes, or truncated with the position where the read started."""
    if k > <uint64_t>(c.n - c.pos):
        return cur_fail(c, E_TRUNCATED, 0)
    c.pos += <Py_ssize_t>k
    return 0


cdef inline int cur_first(Cur* c, uint64_t* value, bint* special) noexcept nogil:
    """A length, or (special) a string's special form's number."""
    cdef unsigned int first
    cdef uint64_t v = 0
    cdef int k, width
    if c.pos >= c.n:
        return cur_fail(c, E_TRUNCATED, 0)
    first = c.p[c.pos]
    c.pos += 1
    special[0] = False
    if first < 0x40:
        value[0] = first
        return 0
    if first < 0x80:
        if c.pos >= c.n:
            return cur_fail(c, E_TRUNCATED, 0)
        value[0] = (first & 0x3F) << 8 | c.p[c.pos]
        c.pos += 1
        return 0
    if first >= 0xC0:
        special[0] = True
        value[0] = first & 0x3F
        return 0
    if first == 0x80:
        width = 4
    elif first == 0x81:
        width = 8
    else:
        return cur_fail(c, E_LENGTH_ENCODING, first)
    if c.n - c.pos < width:
        return cur_fail(c, E_TRUNCATED, 0)
    for k in range(width):
        v = v << 8 | c.p[c.pos + k]
    c.pos += width
    value[0] = v
    return 0


cdef inline int cur_length(Cur* c, uint64_t* value) noexcept nogil:
    cdef bint special
    if cur_first(c, value, &special) < 0:
        return -1
    if special:
        return cur_fail(c, E_SPECIAL, 0)
    return 0


cdef inline int cur_skip_string(Cur* c) noexcept nogil:
    cdef uint64_t value, clen, ulen
    cdef bint special
    if cur_first(c, &value, &special) < 0:
        return -1
    if not special:
        return cur_take(c, value)
    if value <= 2:
        return cur_take(c, <uint64_t>1 << value)
    if value == 3:
        if cur_length(c, &clen) < 0 or cur_length(c, &ulen) < 0:
            return -1
        return cur_take(c, clen)
    return cur_fail(c, E_STRING_ENCODING, <unsigned int>value)


cdef inline int cur_skip_id(Cur* c) noexcept nogil:
    cdef uint64_t v
    if cur_length(c, &v) < 0 or cur_length(c, &v) < 0:
        return -1
    return 0


cdef object cur_message(Cur* c):
    if c.err == E_TRUNCATED:
        return "truncated"
    if c.err == E_SPECIAL:
        return "a string encoding where a length was expected"
    if c.err == E_LENGTH_ENCODING:
        return "unknown length encoding %#x" % c.arg
    return "unknown string encoding %d" % c.arg


cdef int c_stream_end(Cur* c, long long rdb_type) noexcept nogil:
    """The reference's `stream_end`, step for step (every loop reads at least one byte per
    round: a count, however large, ends with the data)."""
    cdef uint64_t nodes, groups, pel, consumers, owned, producers, ids, v
    if cur_length(c, &nodes) < 0:
        return -1
    while nodes:
        nodes -= 1
        if cur_skip_string(c) < 0 or cur_skip_string(c) < 0:
            return -1
    if cur_length(c, &v) < 0 or cur_skip_id(c) < 0:
        return -1
    if rdb_type >= 19:
        if cur_skip_id(c) < 0 or cur_skip_id(c) < 0 or cur_length(c, &v) < 0:
            return -1
    if cur_length(c, &groups) < 0:
        return -1
    while groups:
        groups -= 1
        if cur_skip_string(c) < 0 or cur_skip_id(c) < 0:
            return -1
        if rdb_type >= 19 and cur_length(c, &v) < 0:
            return -1
        if cur_length(c, &pel) < 0:
            return -1
        while pel:
            pel -= 1
            if cur_take(c, 24) < 0 or cur_length(c, &v) < 0:
                return -1
        if cur_length(c, &consumers) < 0:
            return -1
        while consumers:
            consumers -= 1
            if cur_skip_string(c) < 0 or cur_take(c, 16 if rdb_type >= 21 else 8) < 0:
                return -1
            if cur_length(c, &owned) < 0:
                return -1
            if owned > <uint64_t>(c.n - c.pos) // 16:  # (16 * owned could overflow)
                return cur_fail(c, E_TRUNCATED, 0)
            c.pos += <Py_ssize_t>(16 * owned)
    if rdb_type >= 26:
        if cur_length(c, &v) < 0 or cur_length(c, &v) < 0:
            return -1
        if cur_length(c, &producers) < 0:
            return -1
        while producers:
            producers -= 1
            if cur_skip_string(c) < 0 or cur_length(c, &ids) < 0:
                return -1
            while ids:
                ids -= 1
                if cur_skip_string(c) < 0 or cur_length(c, &v) < 0 or cur_length(c, &v) < 0:
                    return -1
        if cur_length(c, &v) < 0 or cur_length(c, &v) < 0:
            return -1
    return 0


cdef inline bint _cursor_at(Cur* c, object data, object pos):
    """The cursor over exact bytes `data` from an int `pos` inside them (False: the reference
    takes the call)."""
    if not PyBytes_CheckExact(data) or not PyLong_CheckExact(pos):
        return False
    if pos < 0 or pos > PyBytes_GET_SIZE(data):
        return False
    c.p = <const unsigned char*>PyBytes_AS_STRING(data)
    c.n = PyBytes_GET_SIZE(data)
    c.pos = pos
    c.err = 0
    c.arg = 0
    return True


def stream_end(data, pos, rdb_type):
    cdef Cur c
    cdef long long kind
    cdef int overflow = 0
    if not PyLong_CheckExact(rdb_type) or not _cursor_at(&c, data, pos):
        return _rdb_py.stream_end(data, pos, rdb_type)
    kind = PyLong_AsLongLongAndOverflow(rdb_type, &overflow)
    if overflow:
        return _rdb_py.stream_end(data, pos, rdb_type)
    if c_stream_end(&c, kind) < 0:
        return c.pos, cur_message(&c)
    return c.pos, None


cdef object cur_string(Cur* c, bint to_bytearray):
    """The reference cursor's `string` (as a bytearray if asked): None with c.err set for a
    reader's error; the reference's RdbError for bad LZF data."""
    cdef uint64_t value, clen, ulen
    cdef bint special
    cdef Py_ssize_t start
    cdef long long v
    if cur_first(c, &value, &special) < 0:
        return None
    if not special:
        start = c.pos
        if cur_take(c, value) < 0:
            return None
        if to_bytearray:
            return PyByteArray_FromStringAndSize(<const char*>c.p + start, c.pos - start)
        return PyBytes_FromStringAndSize(<const char*>c.p + start, c.pos - start)
    if value <= 2:
        start = c.pos
        if cur_take(c, <uint64_t>1 << value) < 0:
            return None
        if value == 0:
            v = <signed char>c.p[start]
        elif value == 1:
            v = <short>(c.p[start] | c.p[start + 1] << 8)
        else:
            v = <int>(<unsigned int>c.p[start] | <unsigned int>c.p[start + 1] << 8
                      | <unsigned int>c.p[start + 2] << 16 | <unsigned int>c.p[start + 3] << 24)
        text = b"%d" % v
        return bytearray(text) if to_bytearray else text
    if value == 3:
        if cur_length(c, &clen) < 0 or cur_length(c, &ulen) < 0:
            return None
        start = c.pos
        if cur_take(c, clen) < 0:
            return None
        # (an announced size beyond long long can never be reached: as the reference's)
        return _lzf(c.p + start, c.pos - start,
                    <long long>ulen if ulen <= 0x7FFFFFFFFFFFFFFFULL else 0x7FFFFFFFFFFFFFFF,
                    to_bytearray)
    cur_fail(c, E_STRING_ENCODING, <unsigned int>value)
    return None


def stream_nodes(data, pos):
    cdef Cur c
    cdef uint64_t count
    if not _cursor_at(&c, data, pos):
        return _rdb_py.stream_nodes(data, pos)
    nodes = []
    if cur_length(&c, &count) < 0:
        return nodes, c.pos, cur_message(&c)
    while count:
        count -= 1
        try:
            key = cur_string(&c, False)
        except RdbError as err:  # bad LZF data
            return nodes, c.pos, str(err)
        if key is None:
            return nodes, c.pos, cur_message(&c)
        try:
            lp = cur_string(&c, True)
        except RdbError as err:
            nodes.append((key, None))
            return nodes, c.pos, str(err)
        if lp is None:
            nodes.append((key, None))
            return nodes, c.pos, cur_message(&c)
        nodes.append((key, lp))
    return nodes, c.pos, None
