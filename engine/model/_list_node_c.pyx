# cython: boundscheck=False, wraparound=False, cdivision=True
"""List nodes, compiled: the same functions and results as `_list_node_py.py` (the reference,
which documents the node: Redis's listpack, byte for byte).

Every function works in place on the bytearray's own buffer: a push resizes it once and
writes the entry straight in (a head push or pop moves the rest with one memmove), a pop
decodes its element straight into a bytes object, and the 6-byte header is rewritten in
place. The fast paths take a `bytearray` node and `bytes` elements exactly; anything else (a
subclass, a memoryview, a str...) is handed to the pure twin, so that it behaves as the
reference does. A node's content is trusted (these functions built it), but every walk is
bounded by the buffer's length, and an index outside the node is the pure twin's IndexError:
nothing here reads or writes outside the node whatever it is given.
"""

from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_CheckExact,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_CheckExact,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
)
from cpython.list cimport PyList_Append, PyList_CheckExact, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.sequence cimport PySequence_Fast_GET_ITEM, PySequence_Fast_GET_SIZE
from cpython.tuple cimport PyTuple_CheckExact
from libc.stdint cimport uint64_t
from libc.stdlib cimport free
from libc.string cimport memcmp, memcpy, memmove

# The listpack helpers the kernels share, cimported by folder path (engine/model/lp_helpers.pxd).
from engine.model.lp_helpers cimport Buf, Elem, backlen_size, c_as_int, c_int_size
from engine.model.lp_helpers cimport put_backlen, put_int, reserve
from streamkeep.engine.model import _list_node_py as _pure  # everything off the fast paths

cdef enum:
    HEADER = 6
    END = 0xFF
    UNKNOWN = 65535
    MAX_TOTAL = 0xFFFFFFFF  # the header's u32

cdef str OUT_OF_RANGE = "list node index out of range"  # (the pure twin's message)
cdef str EMPTY = "pop from an empty list node"
cdef str MALFORMED = "malformed list node"


cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_exports
    ctypedef struct PyObject
    # an index as Py_ssize_t, clipped when it does not fit (exc NULL): out of range either way
    Py_ssize_t PyNumber_AsSsize_t(object o, PyObject* exc) except? -1


# --- entries, read ---------------------------------------------------------------------------

cdef inline Py_ssize_t entry_end(const unsigned char* p, Py_ssize_t i,
                                 Py_ssize_t end) noexcept nogil:
    """The offset after the entry at i (HEADER <= i < end, `end` the end marker's offset), or
    -1 when the entry would not end by `end` (a malformed node: never read past it)."""
    cdef unsigned int b = p[i]
    cdef Py_ssize_t size, after
    if b < 0x80:
        size = 1
    elif b < 0xC0:
        size = 1 + (b & 0x3F)
    elif b < 0xE0:
        size = 2
    elif b < 0xF0:
        if i + 1 >= end:
            return -1
        size = 2 + (((b & 0x0F) << 8) | p[i + 1])
    elif b == 0xF0:
        if i + 4 >= end:
            return -1
        size = 5 + (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8
                    | <Py_ssize_t>p[i + 3] << 16 | <Py_ssize_t>p[i + 4] << 24)
    elif b == 0xF1:
        size = 3
    elif b == 0xF2:
        size = 4
    elif b == 0xF3:
        size = 5
    elif b == 0xF4:
        size = 9
    else:
        return -1
    after = i + size + backlen_size(size)
    return after if after <= end else -1


cdef inline void read_entry(const unsigned char* p, Py_ssize_t i, Elem* e) noexcept nogil:
    """The entry at i (entry_end accepted it) into *e."""
    cdef unsigned int b = p[i]
    cdef unsigned int v
    cdef uint64_t raw
    cdef int width, k
    if b < 0x80:
        e.is_int = True
        e.ival = b
    elif b < 0xC0:
        e.is_int = False
        e.n = b & 0x3F
        e.s = p + i + 1
    elif b < 0xE0:
        v = ((b & 0x1F) << 8) | p[i + 1]
        e.is_int = True
        e.ival = <long long>v - 8192 if v >= 4096 else v
    elif b < 0xF0:
        e.is_int = False
        e.n = ((b & 0x0F) << 8) | p[i + 1]
        e.s = p + i + 2
    elif b == 0xF0:
        e.is_int = False
        e.n = (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8 | <Py_ssize_t>p[i + 3] << 16
               | <Py_ssize_t>p[i + 4] << 24)
        e.s = p + i + 5
    else:
        width = 2 if b == 0xF1 else 3 if b == 0xF2 else 4 if b == 0xF3 else 8
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


cdef inline Py_ssize_t entry_start(const unsigned char* p, Py_ssize_t stop) noexcept nogil:
    """The offset of the entry that ends at `stop` (HEADER < stop), read through its backlen;
    -1 when it does not start inside the node or does not end at `stop`."""
    cdef Py_ssize_t q = stop - 1
    cdef Py_ssize_t size = 0, start
    cdef int shift = 0
    while True:
        size |= <Py_ssize_t>(p[q] & 0x7F) << shift
        if not p[q] & 0x80:
            break
        shift += 7
        q -= 1
        if q < HEADER or shift > 28:
            return -1
    start = stop - backlen_size(size) - size
    if start < HEADER or entry_end(p, start, stop) != stop:
        return -1
    return start


cdef inline int put_decimal(char* buf, uint64_t m) noexcept nogil:
    """m in decimal at buf (room for 20); its length."""
    cdef char tmp[20]
    cdef int n = 0, k
    if m < 10:
        buf[0] = 48 + <char>m
        return 1
    while m:
        tmp[n] = 48 + <char>(m % 10)
        n += 1
        m //= 10
    for k in range(n):
        buf[k] = tmp[n - 1 - k]
    return n


cdef inline object elem_bytes(Elem* e):
    """The element as the bytes it was pushed as (an integer as its decimal text)."""
    cdef char buf[24]
    cdef int n
    if not e.is_int:
        return PyBytes_FromStringAndSize(<const char*>e.s, e.n)
    if e.ival < 0:
        buf[0] = 45
        n = 1 + put_decimal(buf + 1, <uint64_t>0 - <uint64_t>e.ival)
    else:
        n = put_decimal(buf, <uint64_t>e.ival)
    return PyBytes_FromStringAndSize(buf, n)


cdef inline object bytes_at(const unsigned char* p, Py_ssize_t i):
    cdef Elem e
    read_entry(p, i, &e)
    return elem_bytes(&e)


# --- the node as a whole -------------------------------------------------------------------

cdef inline bint fast_node(object lp) noexcept:
    """A bytearray holding at least a header and the end marker: the fast paths' node."""
    return PyByteArray_CheckExact(lp) and PyByteArray_GET_SIZE(lp) > HEADER


cdef Py_ssize_t walk_count(const unsigned char* p, Py_ssize_t end) except -1:
    """The entries before the end marker at `end`, counted by walking."""
    cdef Py_ssize_t i = HEADER, n = 0
    while i < end:
        i = entry_end(p, i, end)
        if i < 0:
            raise ValueError(MALFORMED)
        n += 1
    return n


cdef inline Py_ssize_t count_of(const unsigned char* p, Py_ssize_t size) except -1:
    """The node's count: its header's, or walked when the header says it does not fit."""
    cdef Py_ssize_t count = p[4] | <Py_ssize_t>p[5] << 8
    if count != UNKNOWN:
        return count
    return walk_count(p, size - 1)


cdef inline Py_ssize_t seek(const unsigned char* p, Py_ssize_t size, Py_ssize_t count,
                            Py_ssize_t index) except -1:
    """The offset of the entry at `index` (0 <= index <= count: count is the end marker's),
    walked from the nearer end."""
    cdef Py_ssize_t i, k, end = size - 1
    if index <= count // 2:
        i = HEADER
        for k in range(index):
            if i >= end:
                raise ValueError(MALFORMED)
            i = entry_end(p, i, end)
            if i < 0:
                raise ValueError(MALFORMED)
    else:
        i = end
        for k in range(count - index):
            if i <= HEADER:
                raise ValueError(MALFORMED)
            i = entry_start(p, i)
            if i < 0:
                raise ValueError(MALFORMED)
    return i


cdef inline void set_header(unsigned char* p, Py_ssize_t size, Py_ssize_t count) noexcept nogil:
    p[0] = size & 0xFF
    p[1] = (size >> 8) & 0xFF
    p[2] = (size >> 16) & 0xFF
    p[3] = (size >> 24) & 0xFF
    if count > UNKNOWN:
        count = UNKNOWN
    p[4] = count & 0xFF
    p[5] = (count >> 8) & 0xFF


cdef inline Py_ssize_t as_index(object index) except? -1:
    """An index argument (an int, or what has __index__: TypeError else); one too large for
    Py_ssize_t is clipped, so that it is out of range as the pure twin finds it."""
    return PyNumber_AsSsize_t(index, NULL)


cdef inline int resizable(object lp) except -1:
    """BufferError (bytearray's own) when a view of the node is held: checked before any byte
    moves, so that a resize refused halfway cannot leave the node torn."""
    if (<PyByteArrayObject*>lp).ob_exports > 0:
        raise BufferError("Existing exports of data: object cannot be re-sized")
    return 0


# --- one element, written --------------------------------------------------------------------

cdef inline Py_ssize_t entry_size(const unsigned char* s, Py_ssize_t n, long long* iv,
                                  bint* is_int) except -1:
    """The bytes the entry of s[0:n] takes (as an integer when it is one: *is_int, *iv)."""
    cdef Py_ssize_t body
    if c_as_int(s, n, iv):
        is_int[0] = True
        return c_int_size(iv[0])
    is_int[0] = False
    if n > MAX_TOTAL:
        raise OverflowError("a list node element of 4 GiB or more")
    body = n + (1 if n < 64 else 2 if n < 4096 else 5)
    return body + backlen_size(body)


cdef inline int write_entry(unsigned char* at, const unsigned char* s, Py_ssize_t n,
                            long long iv, bint is_int, Py_ssize_t size) except -1:
    """The entry of s[0:n] (entry_size's answers: iv, is_int, size) written at `at`."""
    cdef Buf b
    cdef Py_ssize_t head
    b.p = at
    b.n = 0
    b.cap = size + 16  # memory owned by the caller, sized by entry_size: never reallocated
    if is_int:
        return put_int(&b, iv)
    if n < 64:
        at[0] = 0x80 | n
        head = 1
    elif n < 4096:
        at[0] = 0xE0 | (n >> 8)
        at[1] = n & 0xFF
        head = 2
    else:
        at[0] = 0xF0
        at[1] = n & 0xFF
        at[2] = (n >> 8) & 0xFF
        at[3] = (n >> 16) & 0xFF
        at[4] = (n >> 24) & 0xFF
        head = 5
    memcpy(at + head, s, n)
    b.n = head + n
    put_backlen(&b, head + n)
    return 0


cdef int put_entry(Buf* b, object element) except -1:
    """The entry of the bytes `element` appended to *b."""
    cdef const unsigned char* s = <const unsigned char*>PyBytes_AS_STRING(element)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(element)
    cdef long long iv = 0
    cdef bint is_int
    cdef Py_ssize_t size = entry_size(s, n, &iv, &is_int)
    reserve(b, size + 16)
    write_entry(b.p + b.n, s, n, iv, is_int, size)
    b.n += size
    return 0


cdef inline bint all_bytes(object seq) noexcept:
    """A list or tuple of bytes exactly: the fast paths' elements."""
    cdef Py_ssize_t k
    if not (PyList_CheckExact(seq) or PyTuple_CheckExact(seq)):
        return False
    for k in range(PySequence_Fast_GET_SIZE(seq)):
        if not PyBytes_CheckExact(<object>PySequence_Fast_GET_ITEM(seq, k)):
            return False
    return True


cdef int put_all(Buf* b, object seq) except -1:
    """The entries of a list or tuple of bytes (all_bytes) appended to *b."""
    cdef Py_ssize_t k
    for k in range(PySequence_Fast_GET_SIZE(seq)):
        put_entry(b, <object>PySequence_Fast_GET_ITEM(seq, k))
    return 0


def encode(element):
    """The element as a listpack entry (encoding, data, backlen)."""
    cdef long long iv = 0
    cdef bint is_int
    cdef Py_ssize_t n, size
    cdef const unsigned char* s
    if not PyBytes_CheckExact(element):
        return _pure.encode(element)
    s = <const unsigned char*>PyBytes_AS_STRING(element)
    n = PyBytes_GET_SIZE(element)
    size = entry_size(s, n, &iv, &is_int)
    out = PyBytes_FromStringAndSize(NULL, size)
    write_entry(<unsigned char*>PyBytes_AS_STRING(out), s, n, iv, is_int, size)
    return out


# --- the node --------------------------------------------------------------------------------

def node_new(elements):
    """A node holding `elements` in order."""
    cdef Buf b
    cdef Py_ssize_t count
    if not all_bytes(elements):
        return _pure.node_new(elements)
    count = PySequence_Fast_GET_SIZE(elements)
    b.p = NULL
    b.n = 0
    b.cap = 0
    try:
        reserve(&b, HEADER + 2 * count + 1)
        b.n = HEADER
        put_all(&b, elements)
        reserve(&b, 1)
        b.p[b.n] = END
        b.n += 1
        if b.n > MAX_TOTAL:
            raise OverflowError("a list node of 4 GiB or more")
        set_header(b.p, b.n, count)
        return PyByteArray_FromStringAndSize(<const char*>b.p, b.n)
    finally:
        free(b.p)


def node_count(lp):
    """How many elements the node holds."""
    if not fast_node(lp):
        return _pure.node_count(lp)
    return count_of(<const unsigned char*>PyByteArray_AS_STRING(lp), PyByteArray_GET_SIZE(lp))


def node_push(lp, element, bint tail):
    """Add `element` at the tail (True) or the head."""
    cdef unsigned char* p
    cdef const unsigned char* s
    cdef Py_ssize_t size, n, esize, count, grown
    cdef long long iv = 0
    cdef bint is_int
    if not (fast_node(lp) and PyBytes_CheckExact(element)):
        _pure.node_push(lp, element, tail)
        return
    size = PyByteArray_GET_SIZE(lp)
    p = <unsigned char*>PyByteArray_AS_STRING(lp)
    count = count_of(p, size)
    s = <const unsigned char*>PyBytes_AS_STRING(element)
    n = PyBytes_GET_SIZE(element)
    esize = entry_size(s, n, &iv, &is_int)
    grown = size + esize
    if grown > MAX_TOTAL:
        raise OverflowError("a list node of 4 GiB or more")
    resizable(lp)
    PyByteArray_Resize(lp, grown)
    p = <unsigned char*>PyByteArray_AS_STRING(lp)
    if tail:
        write_entry(p + size - 1, s, n, iv, is_int, esize)
        p[grown - 1] = END
    else:
        memmove(p + HEADER + esize, p + HEADER, size - HEADER)
        write_entry(p + HEADER, s, n, iv, is_int, esize)
    set_header(p, grown, count + 1)


def node_pop(lp, bint tail):
    """Remove and return the tail's (True) or the head's element; the node is not empty."""
    cdef unsigned char* p
    cdef Py_ssize_t size, count, start, after
    if not fast_node(lp):
        return _pure.node_pop(lp, tail)
    size = PyByteArray_GET_SIZE(lp)
    p = <unsigned char*>PyByteArray_AS_STRING(lp)
    count = count_of(p, size)
    if count == 0:
        raise IndexError(EMPTY)
    if size - 1 <= HEADER:
        raise ValueError(MALFORMED)
    if tail:
        after = size - 1
        start = entry_start(p, after)
    else:
        start = HEADER
        after = entry_end(p, start, size - 1)
    if start < 0 or after < 0:
        raise ValueError(MALFORMED)
    resizable(lp)
    value = bytes_at(p, start)
    if tail:
        p[start] = END
    else:
        memmove(p + HEADER, p + after, size - after)
    size -= after - start
    PyByteArray_Resize(lp, size)  # (a shrink: it cannot fail once resizable)
    set_header(<unsigned char*>PyByteArray_AS_STRING(lp), size, count - 1)
    return value


def node_get(lp, index):
    """The element at `index` (0 <= index < count), walked from the nearer end."""
    cdef const unsigned char* p
    cdef Py_ssize_t size, count, i
    cdef Py_ssize_t ix
    if not fast_node(lp):
        return _pure.node_get(lp, index)
    ix = as_index(index)
    size = PyByteArray_GET_SIZE(lp)
    p = <const unsigned char*>PyByteArray_AS_STRING(lp)
    count = count_of(p, size)
    if ix < 0 or ix >= count:
        raise IndexError(OUT_OF_RANGE)
    i = seek(p, size, count, ix)
    if i >= size - 1 or entry_end(p, i, size - 1) < 0:
        raise ValueError(MALFORMED)
    return bytes_at(p, i)


def node_range(lp, start, stop):
    """The elements at [start, stop) (0 <= start, stop <= count; none when start >= stop)."""
    cdef const unsigned char* p
    cdef Py_ssize_t size, count, i, nxt, k, end
    cdef Py_ssize_t first, last
    if not fast_node(lp):
        return _pure.node_range(lp, start, stop)
    first = as_index(start)
    last = as_index(stop)
    size = PyByteArray_GET_SIZE(lp)
    p = <const unsigned char*>PyByteArray_AS_STRING(lp)
    count = count_of(p, size)
    if first < 0 or first > count or last < 0 or last > count:
        raise IndexError(OUT_OF_RANGE)
    if first >= last:
        return []
    end = size - 1
    i = seek(p, size, count, first)
    out = PyList_New(last - first)
    for k in range(last - first):
        if i >= end:
            raise ValueError(MALFORMED)
        nxt = entry_end(p, i, end)
        if nxt < 0:
            raise ValueError(MALFORMED)
        value = bytes_at(p, i)
        Py_INCREF(value)  # PyList_SET_ITEM steals the reference
        PyList_SET_ITEM(out, k, value)
        i = nxt
    return out


def node_matches(lp, element):
    """The indexes of the elements equal to `element`, ascending."""
    cdef const unsigned char* p
    cdef const unsigned char* s
    cdef Py_ssize_t size, end, i, nxt, n, k = 0
    cdef long long iv = 0
    cdef bint want_int
    cdef Elem e
    if not (fast_node(lp) and PyBytes_CheckExact(element)):
        return _pure.node_matches(lp, element)
    s = <const unsigned char*>PyBytes_AS_STRING(element)
    n = PyBytes_GET_SIZE(element)
    # an integer entry reads back as its canonical decimal: it equals `element` only when
    # `element` is that decimal (c_as_int gives its value once); a string entry is compared
    # byte by byte
    want_int = c_as_int(s, n, &iv)
    out = []
    size = PyByteArray_GET_SIZE(lp)
    p = <const unsigned char*>PyByteArray_AS_STRING(lp)
    end = size - 1
    i = HEADER
    while i < end:
        nxt = entry_end(p, i, end)
        if nxt < 0:
            raise ValueError(MALFORMED)
        read_entry(p, i, &e)
        if e.is_int:
            if want_int and e.ival == iv:
                PyList_Append(out, k)
        elif e.n == n and memcmp(e.s, s, n) == 0:
            PyList_Append(out, k)
        k += 1
        i = nxt
    return out


def node_splice(lp, start, stop, elements):
    """Replace the elements at [start, stop) by `elements` (0 <= start <= stop <= count)."""
    cdef unsigned char* p
    cdef Py_ssize_t size, count, lo, hi, k, end, resized
    cdef Py_ssize_t first, last
    cdef Buf b
    if not (fast_node(lp) and all_bytes(elements)):
        _pure.node_splice(lp, start, stop, elements)
        return
    first = as_index(start)
    last = as_index(stop)
    size = PyByteArray_GET_SIZE(lp)
    p = <unsigned char*>PyByteArray_AS_STRING(lp)
    count = count_of(p, size)
    if last < 0 or last > count or first < 0 or first > last:
        raise IndexError(OUT_OF_RANGE)
    end = size - 1
    lo = seek(p, size, count, first)
    hi = lo
    for k in range(last - first):
        if hi >= end:
            raise ValueError(MALFORMED)
        hi = entry_end(p, hi, end)
        if hi < 0:
            raise ValueError(MALFORMED)
    b.p = NULL
    b.n = 0
    b.cap = 0
    try:
        put_all(&b, elements)
        resized = size - (hi - lo) + b.n
        if resized > MAX_TOTAL:
            raise OverflowError("a list node of 4 GiB or more")
        if resized != size:
            resizable(lp)
        if b.n > hi - lo:  # grows: room first, then the rest moved right
            PyByteArray_Resize(lp, resized)
            p = <unsigned char*>PyByteArray_AS_STRING(lp)
            memmove(p + lo + b.n, p + hi, size - hi)
        elif b.n < hi - lo:  # shrinks: the rest moved left, then cut
            memmove(p + lo + b.n, p + hi, size - hi)
            PyByteArray_Resize(lp, resized)
            p = <unsigned char*>PyByteArray_AS_STRING(lp)
        if b.n:
            memcpy(p + lo, b.p, b.n)
        set_header(p, resized, count - (last - first) + PySequence_Fast_GET_SIZE(elements))
    finally:
        free(b.p)
