# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Reply encoding, compiled: `write_reply` and `encode_reply` with the same bytes, big bulks kept
by reference and output-limit stops as `_reply_encoder_py.py` (the reference, which documents
the rules), without a Python object per element.

It appends to the caller's bytearray through its pointer, into the allocation the bytearray
already has (grown when full), and gives the bytearray its exact length back before any Python
code can see it (a `ReplyBuffer`'s `bulk()`
and `check()`, an error): the check points and the bytes written are the reference's. The rare
shapes run the reference's own Python.

Must not touch: anything but the values and the buffer given to it (no I/O, no engine state).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact
from libc.string cimport memcpy

from streamkeep.engine.wire import _reply_encoder_py
from streamkeep.engine.wire._reply_encoder_py import format_double
from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY, EntryArray, HumanDouble, PackedEntries, PlainEntries, Push, RespMap, RespSet, Verbatim

cdef extern from "Python.h":
    # A type's allocator (a bytes subtype's instance is made by it, as bytes_subtype_new does).
    ctypedef struct AllocatingType "PyTypeObject":
        PyObject* (*tp_alloc)(AllocatingType*, Py_ssize_t)
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        char* ob_bytes
        char* ob_start
        Py_ssize_t ob_exports
    Py_ssize_t Py_SIZE(object o)
    void Py_SET_SIZE(object o, Py_ssize_t size)
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef extern from *:
    """
    /* A bytes object's cached hash marked unknown, as bytes_subtype_new leaves it (the field
       is deprecated for extensions since 3.11, but still what bytes' hash reads first). */
    static inline void sk_bytes_hash_unknown(PyObject *o) {
        _Py_COMP_DIAG_PUSH
        _Py_COMP_DIAG_IGNORE_DEPR_DECLS
        ((PyBytesObject *)o)->ob_shash = -1;
        _Py_COMP_DIAG_POP
    }
    """
    void sk_bytes_hash_unknown(PyObject* o) noexcept


# The reference's sizes (see _reply_encoder_py for what each is).
cdef Py_ssize_t SMALL = 1024
cdef Py_ssize_t ENTRIES_MIN = 8
cdef Py_ssize_t ENTRIES_CHUNK = 2048


# --------------------------------------------------------------------------------------------
# Encoding replies
# --------------------------------------------------------------------------------------------

cdef struct Out:
    # The caller's bytearray (borrowed: write_reply's argument keeps it alive); `size` is what
    # was written, `cap` how far it may be written: its allocation (room()), grown ahead.
    PyObject* buf
    char* data
    Py_ssize_t size
    Py_ssize_t cap
    bint plain  # type(out) is bytearray: no ReplyBuffer checks and no bulks by reference
    bint synced  # the bytearray is the caller's again (sync() until resume())
    int protocol


cdef inline Py_ssize_t room(PyObject* buf) noexcept:
    """How long the bytearray may be made without a reallocation (its trailing NUL kept), or
    its length when a buffer export pins it (then only PyByteArray_Resize may change it)."""
    cdef PyByteArrayObject* b = <PyByteArrayObject*>buf
    if b.ob_exports or b.ob_bytes == NULL:
        return Py_SIZE(<object>buf)
    return b.ob_alloc - (b.ob_start - b.ob_bytes) - 1


cdef inline void set_size(Out* o) noexcept:
    """The bytearray's length set to the bytes written, within its allocation (o.cap is never
    more than room()): what PyByteArray_Resize does there, without its reallocation when the
    length falls under half the allocation (a connection's output is refilled at once)."""
    Py_SET_SIZE(<object>o.buf, o.size)
    PyByteArray_AS_STRING(<object>o.buf)[o.size] = 0


cdef int grow(Out* o, Py_ssize_t need) except -1:
    # An eighth ahead, as bytearray's own growth: amortized linear, and a connection's big
    # output buffer is not given half as much again for one small reply. The length is set to
    # what was written first: a reallocation keeps only the bytearray's length.
    cdef Py_ssize_t want = o.size + need
    cdef Py_ssize_t cap = want + (want >> 3) + 64
    if o.cap > Py_SIZE(<object>o.buf):
        set_size(o)
    if PyByteArray_Resize(<object>o.buf, cap) < 0:
        return -1
    o.data = PyByteArray_AS_STRING(<object>o.buf)
    o.cap = room(o.buf)
    return 0


cdef inline int reserve(Out* o, Py_ssize_t need) except -1:
    if o.size + need > o.cap:
        return grow(o, need)
    return 0


cdef int sync(Out* o) except -1:
    """Give the bytearray its exact length (the bytes written) before Python code sees it (once:
    after an error raised by Python code that appended to it, its length is that code's)."""
    if o.synced:
        return 0
    o.synced = True
    if o.size != Py_SIZE(<object>o.buf):
        if o.cap <= room(o.buf):
            set_size(o)
        elif PyByteArray_Resize(<object>o.buf, o.size) < 0:
            return -1
        o.data = PyByteArray_AS_STRING(<object>o.buf)
    o.cap = o.size
    return 0


cdef inline void resume(Out* o) noexcept:
    """Take the bytearray back after Python code appended to it: written up to its length,
    writable up to its allocation."""
    o.size = Py_SIZE(<object>o.buf)
    o.data = PyByteArray_AS_STRING(<object>o.buf)
    o.cap = room(o.buf)
    o.synced = False


cdef inline Py_ssize_t fmt_ll(char* dst, long long v) noexcept:
    """`%d` of v into dst (20 bytes at most); its length."""
    cdef char tmp[24]
    cdef Py_ssize_t n = 0, i
    cdef unsigned long long u
    if v < 0:
        u = <unsigned long long>0 - <unsigned long long>v
    else:
        u = <unsigned long long>v
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    i = 0
    if v < 0:
        dst[0] = 45
        i = 1
    while n:
        n -= 1
        dst[i] = tmp[n]
        i += 1
    return i


cdef inline int put(Out* o, const char* p, Py_ssize_t n) except -1:
    reserve(o, n)
    memcpy(o.data + o.size, p, <size_t>n)
    o.size += n
    return 0


cdef inline int put_bytes(Out* o, object b) except -1:
    return put(o, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


cdef inline int put_line(Out* o, char kind, long long n) except -1:
    """`<kind><n>\\r\\n`: an array, bulk or integer line."""
    cdef char* d
    reserve(o, 24)
    d = o.data + o.size
    d[0] = kind
    n = fmt_ll(d + 1, n) + 1
    d[n] = 13
    d[n + 1] = 10
    o.size += n + 2
    return 0


cdef inline int put_bulk(Out* o, const char* p, Py_ssize_t n) except -1:
    """`$<n>\\r\\n<bytes>\\r\\n`, every byte copied."""
    cdef char* d
    cdef Py_ssize_t h
    reserve(o, n + 26)
    d = o.data + o.size
    d[0] = 36
    h = fmt_ll(d + 1, n) + 1
    d[h] = 13
    d[h + 1] = 10
    memcpy(d + h + 2, p, <size_t>n)
    d[h + 2 + n] = 13
    d[h + 3 + n] = 10
    o.size += h + 4 + n
    return 0


cdef int write_bulk(Out* o, object value) except -1:
    """A bulk (exactly bytes): one of `SMALL` bytes or more goes to a ReplyBuffer's `bulk()`,
    which may keep it by reference and checks the limit (the reference's `_big_bulk`)."""
    cdef Py_ssize_t n = PyBytes_GET_SIZE(value)
    if n < SMALL or o.plain:
        return put_bulk(o, PyBytes_AS_STRING(value), n)
    sync(o)
    (<object>o.buf).bulk(value)
    resume(o)
    return 0


cdef int check(Out* o) except -1:
    """A ReplyBuffer's limit check, where the reference makes it."""
    if not o.plain:
        sync(o)
        (<object>o.buf).check()
        resume(o)
    return 0


cdef int py_write(Out* o, object function, object value) except -1:
    """A rare shape written by the reference's own function."""
    sync(o)
    function(<object>o.buf, value, o.protocol)
    resume(o)
    return 0


cdef int write_int(Out* o, object value) except -1:
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow:  # outside a long long: the reference's big number or bulk
        return put_bytes(o, _reply_encoder_py._int_line(value, o.protocol))
    return put_line(o, 58, v)


cdef int write_value(Out* o, object value) except -1:
    """The reference's `write_reply`."""
    cdef Py_ssize_t n
    if PyBytes_CheckExact(value):
        return write_bulk(o, value)
    if type(value) is list or type(value) is tuple:
        return write_array(o, value)
    if PyLong_CheckExact(value):
        return write_int(o, value)
    if PyUnicode_CheckExact(value):
        if PyUnicode_IS_COMPACT_ASCII(value):
            n = PyUnicode_GET_LENGTH(value)
            reserve(o, n + 3)
            o.data[o.size] = 43
            memcpy(o.data + o.size + 1, PyUnicode_DATA(value), <size_t>n)
            o.data[o.size + 1 + n] = 13
            o.data[o.size + 2 + n] = 10
            o.size += n + 3
            return 0
        put(o, "+", 1)
        put_bytes(o, value.encode("utf-8", "surrogateescape"))
        return put(o, "\r\n", 2)
    if value is None:
        return put(o, "$-1\r\n", 5) if o.protocol == 2 else put(o, "_\r\n", 3)
    return write_other(o, value)


cdef inline object item_at(object items, Py_ssize_t i):
    if type(items) is list:
        return <object>PyList_GET_ITEM(items, i)
    return <object>PyTuple_GET_ITEM(items, i)


cdef inline Py_ssize_t length(object items) noexcept:
    if type(items) is list:
        return PyList_GET_SIZE(items)
    return PyTuple_GET_SIZE(items)


cdef int write_array(Out* o, object items) except -1:
    """The reference's `_write_array`: its header, then its items by chunks with the limit
    checked after each where the reference checks it (a long array of entries, or of anything
    in a ReplyBuffer). The reference's entries fast path writes the generic loop's bytes, so
    the generic loop is all that runs here."""
    cdef Py_ssize_t n = length(items), i
    put_line(o, 42, n)
    if n >= ENTRIES_MIN:
        first = item_at(items, 0)
        if ((type(first) is list or type(first) is tuple) and len(first) == 2
                and PyBytes_CheckExact(item_at(first, 0))
                and (type(item_at(first, 1)) is list or type(item_at(first, 1)) is tuple)) \
                or (n > ENTRIES_CHUNK and not o.plain):
            i = 0
            while i < n:
                write_items(o, items, i, min(i + ENTRIES_CHUNK, n))
                check(o)
                i += ENTRIES_CHUNK
            return 0
    return write_items(o, items, 0, n)


cdef inline int write_inner(Out* o, object y) except -1:
    """An element of an array's array (the reference's `_write_items` inner loop)."""
    if PyBytes_CheckExact(y):
        return write_bulk(o, y)
    if type(y) is list or type(y) is tuple:
        return write_array(o, y)
    return write_value(o, y)


cdef int write_items(Out* o, object items, Py_ssize_t start, Py_ssize_t stop) except -1:
    """The reference's `_write_items` over items[start:stop]: one nesting level inline (no
    chunks and no checks for it, as in the reference)."""
    cdef Py_ssize_t i, j, m
    for i in range(start, stop):
        if i >= length(items):  # a list cannot shrink here, but never read past its end
            break
        x = item_at(items, i)
        if PyBytes_CheckExact(x):
            write_bulk(o, x)
        elif type(x) is list or type(x) is tuple:
            m = length(x)
            put_line(o, 42, m)
            for j in range(m):
                if j >= length(x):
                    break
                write_inner(o, item_at(x, j))
        elif PyLong_CheckExact(x):
            write_int(o, x)
        else:
            write_value(o, x)
    return 0


cdef int write_entry_array(Out* o, object entries) except -1:
    """The reference's `_write_entry_array`: [id, fields] per entry, by chunks."""
    ids, fields = entries.ids, entries.fields
    if type(ids) is not list or type(fields) is not list \
            or PyList_GET_SIZE(ids) != PyList_GET_SIZE(fields):
        return py_write(o, _reply_encoder_py._write_entry_array, entries)
    cdef Py_ssize_t n = PyList_GET_SIZE(ids), i, stop, j
    put_line(o, 42, n)
    i = 0
    while i < n:
        stop = min(i + ENTRIES_CHUNK, n)
        for j in range(i, stop):
            put(o, "*2\r\n", 4)
            write_inner(o, <object>PyList_GET_ITEM(ids, j))
            write_inner(o, <object>PyList_GET_ITEM(fields, j))
        check(o)
        i += ENTRIES_CHUNK
    return 0


cdef int write_packed_entries(Out* o, object value) except -1:
    """Entries the stream model wrote as RESP already: the header, then their bytes."""
    cdef bytearray resp = value.resp if type(value.resp) is bytearray else bytearray(value.resp)
    put_line(o, 42, value.count)  # '*'
    put(o, PyByteArray_AS_STRING(resp), PyByteArray_GET_SIZE(resp))
    if value.cut:
        raise _reply_encoder_py.OutputLimitReached("reply over the output limit (cut while read)")
    check(o)
    return 0


cdef int write_other(Out* o, object value) except -1:
    """The reference's `_write_other`: maps, RESP3 types, errors, null arrays, subclasses."""
    cdef int protocol = o.protocol
    cdef Py_ssize_t i = 0
    t = type(value)
    if t is EntryArray:
        return write_entry_array(o, value)
    if t is PackedEntries:
        return write_packed_entries(o, value)
    if t is PlainEntries:
        # (a list subclass: the array writers read exact lists and tuples by their macros)
        return write_array(o, list(value))
    if t is RespMap:
        return write_map(o, value)
    if value is NULL_ARRAY:
        return put(o, "*-1\r\n", 5) if protocol == 2 else put(o, "_\r\n", 3)
    if t is bool:
        if protocol == 2:
            return put(o, ":1\r\n" if value else ":0\r\n", 4)
        return put(o, "#t\r\n" if value else "#f\r\n", 4)
    if t is float:
        text = format_double(value)
        if protocol == 3:
            return put_bytes(o, b",%b\r\n" % text)
        return put_bytes(o, b"$%d\r\n%b\r\n" % (len(text), text))
    if isinstance(value, (ReplyError, ProtocolError)):  # an error line either way
        line = str(value).replace("\r", " ").replace("\n", " ")
        return put_bytes(o, b"-%b\r\n" % line.encode("utf-8", "surrogateescape"))
    if t is RespSet or t is Push:
        items = value.items
        if protocol == 3:
            put_bytes(o, b"%b%d\r\n" % (b"~" if t is RespSet else b">", len(items)))
            for x in items:
                write_value(o, x)
                i += 1
                if i % ENTRIES_CHUNK == 0:  # (the reference's check, per chunk)
                    check(o)
            return 0
        if type(items) is list or type(items) is tuple:
            return write_array(o, items)
        return py_write(o, _reply_encoder_py.write_reply, value)
    if t is Verbatim:
        return py_write(o, _reply_encoder_py._write_verbatim, value)
    if t is HumanDouble:  # every score reply of the sorted sets: written here, not in Python
        if protocol == 3:  # (a bytes subclass: its bytes are its text)
            put(o, ",", 1)
        else:
            put_line(o, 36, PyBytes_GET_SIZE(value))  # '$'
        put_bytes(o, value)
        return put(o, "\r\n", 2)
    if t is bytearray or t is memoryview:
        return write_value(o, bytes(value))
    if isinstance(value, (bool, int, str, bytes, list, tuple, float)):
        return write_value(o, _reply_encoder_py._base_value(value))  # subclasses (IntEnum, str enums)
    raise TypeError(f"cannot encode {t.__name__} as a RESP reply: {value!r}")


cdef int write_map(Out* o, object m) except -1:
    columns = m.columns
    if columns is not None:
        return write_columns(o, columns)
    items = m.items
    if o.protocol == 3:
        put_line(o, 37, len(items))
        write_pairs(o, items)
    elif m.as_pairs:
        if type(items) is list or type(items) is tuple:
            return write_array(o, items)  # each (k, v) tuple is a 2-element array
        return py_write(o, _reply_encoder_py._write_map, m)
    else:
        put_line(o, 42, 2 * len(items))
        write_pairs(o, items)
    return 0


cdef int write_columns(Out* o, list columns) except -1:
    """A map of n keys then their n values (`RespMap.of_columns`), paired as written."""
    cdef Py_ssize_t n = len(columns) >> 1
    cdef Py_ssize_t i
    if o.protocol == 3:
        put_line(o, 37, n)
    else:
        put_line(o, 42, 2 * n)
    for i in range(n):
        write_value(o, columns[i])
        write_value(o, columns[n + i])
        if (i + 1) % ENTRIES_CHUNK == 0:
            check(o)
    return 0


cdef int write_pairs(Out* o, object items) except -1:
    """The reference's `_write_pairs`: the limit checked after each chunk of pairs."""
    cdef Py_ssize_t i = 0
    for k, v in items:
        write_value(o, k)
        write_value(o, v)
        i += 1
        if i % ENTRIES_CHUNK == 0:
            check(o)
    return 0


def write_reply(out, value, protocol):
    """Append one reply value to `out` (see the reference's `write_reply`)."""
    cdef Out o
    if not isinstance(out, bytearray) or (protocol != 2 and protocol != 3):
        return _reply_encoder_py.write_reply(out, value, protocol)  # nothing the server does
    o.buf = <PyObject*>out
    o.plain = type(out) is bytearray
    o.protocol = protocol
    resume(&o)
    try:
        write_value(&o, value)
    finally:
        sync(&o)


def encode_reply(value, protocol=2):
    """One reply value as RESP2 (`protocol=2`) or RESP3 (`protocol=3`) bytes."""
    if protocol != 2 and protocol != 3:
        raise ValueError(f"protocol is 2 or 3, not {protocol!r}")
    out = bytearray()
    write_reply(out, value, protocol)
    return bytes(out)


def human_integer(long long n):
    """The reference's `human_integer`: a HumanDouble of n's decimal text, made by the type's
    allocator (no temporary bytes, no constructor call: every integral score of a reply is one)."""
    cdef char digits[24]
    cdef Py_ssize_t length = 0
    cdef unsigned long long u = <unsigned long long>(-(n + 1)) + 1 if n < 0 else <unsigned long long>n
    while True:
        digits[23 - length] = <char>(48 + u % 10)
        length += 1
        u //= 10
        if u == 0:
            break
    if n < 0:
        digits[23 - length] = 45  # '-'
        length += 1
    cdef AllocatingType* kind = <AllocatingType*>HumanDouble
    cdef PyObject* made = kind.tp_alloc(kind, length)
    if made == NULL:
        raise MemoryError()
    text = <object>made
    Py_DECREF(text)  # (the allocator's reference: `text` holds its own)
    sk_bytes_hash_unknown(made)
    cdef char* data = PyBytes_AS_STRING(text)
    memcpy(data, &digits[24 - length], <size_t>length)
    data[length] = 0
    return text
