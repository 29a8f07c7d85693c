# cython: boundscheck=False, wraparound=False, cdivision=True
"""Packed stream nodes, compiled: the same functions and results as `_packed_node_py.py` (the
reference, which documents the layout: Redis's stream listpack, byte for byte).

A node is a `bytearray`; reads walk its elements in place and build Python objects only for
the entries they return. Every function but `validate` trusts its node to be one these
functions wrote or one `validate` accepted: it reads lengths and counts as they are. `validate`
is the one parser of bytes from outside (RDB files, RESTORE payloads, snapshots): every read
checked against the buffer's end, linear in the node's size whatever the bytes, raising the
pure module's `Invalid` with the pure module's message.
"""

from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_CheckExact,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove

# The listpack helpers the kernels share, cimported by folder path (engine/model/lp_helpers.pxd).
from engine.model.lp_helpers cimport Buf, Elem, backlen_size, c_int_size
from engine.model.lp_helpers cimport put_int, put_string, reserve
from engine.model.u128 cimport u128_halves
from streamkeep.engine.model._packed_node_py import Invalid  # one exception class for both twins

cdef enum:
    DELETED = 1
    SAMEFIELDS = 2
    UNKNOWN_COUNT = 65535
    SEEK_BACK_ENTRIES = 16  # how far a forward read looks back from a node's end (select)

cdef object _SIXTY_FOUR = 64
cdef object _U64_OBJ = (1 << 64) - 1


# --- elements, read -------------------------------------------------------------------------------

cdef inline Py_ssize_t next_elem(const unsigned char* p, Py_ssize_t i, Elem* e) noexcept nogil:
    """Read the element at offset i into *e; the next element's offset."""
    cdef unsigned int b = p[i]
    cdef unsigned int v
    cdef Py_ssize_t size
    cdef uint64_t raw
    cdef int width, k
    if b < 0x80:
        e.is_int = True
        e.ival = b
        return i + 2
    if b < 0xC0:
        e.is_int = False
        e.n = b & 0x3F
        e.s = p + i + 1
        return i + 2 + e.n
    if b < 0xE0:
        v = ((b & 0x1F) << 8) | p[i + 1]
        e.is_int = True
        e.ival = <long long>v - 8192 if v >= 4096 else v
        return i + 3
    if b < 0xF0:
        e.is_int = False
        e.n = ((b & 0x0F) << 8) | p[i + 1]
        e.s = p + i + 2
        size = 2 + e.n
    elif b == 0xF0:
        e.is_int = False
        e.n = (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8 | <Py_ssize_t>p[i + 3] << 16
               | <Py_ssize_t>p[i + 4] << 24)
        e.s = p + i + 5
        size = 5 + e.n
    else:
        width = 2 if b == 0xF1 else 3 if b == 0xF2 else 4 if b == 0xF3 else 8
        size = 1 + width
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
    return i + size + backlen_size(size)


cdef inline Py_ssize_t skip_elem(const unsigned char* p, Py_ssize_t i) noexcept nogil:
    """The next element's offset, the element not read (the range walk's skip)."""
    cdef unsigned int b = p[i]
    cdef Py_ssize_t size
    if b < 0x80:
        return i + 2
    if b < 0xC0:
        return i + 2 + (b & 0x3F)
    if b < 0xE0:
        return i + 3
    if b < 0xF0:
        size = 2 + (((b & 0x0F) << 8) | p[i + 1])
    elif b == 0xF0:
        size = 5 + (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8
                    | <Py_ssize_t>p[i + 3] << 16 | <Py_ssize_t>p[i + 4] << 24)
    else:
        size = 3 if b == 0xF1 else 4 if b == 0xF2 else 5 if b == 0xF3 else 9
    return i + size + backlen_size(size)


cdef inline int put_decimal(char* buf, uint64_t m) noexcept nogil:
    """m in decimal at buf (room for 20); its length."""
    cdef char tmp[20]
    cdef int n = 0, k
    if m < 10:  # the common lengths, counts and small values: no loop
        buf[0] = 48 + <char>m
        return 1
    if m < 100:
        buf[0] = 48 + <char>(m // 10)
        buf[1] = 48 + <char>(m % 10)
        return 2
    while True:
        tmp[n] = 48 + m % 10
        n += 1
        m //= 10
        if m == 0:
            break
    for k in range(n):
        buf[k] = tmp[n - 1 - k]
    return n


cdef inline int put_int_text(char* buf, long long v) noexcept nogil:
    """An integer element's text (what it was appended as) into buf (24 bytes); its length."""
    if v < 0:
        buf[0] = 45
        return 1 + put_decimal(buf + 1, <uint64_t>0 - <uint64_t>v)
    return put_decimal(buf, <uint64_t>v)


cdef object elem_text(Elem* e):
    """The element as the bytes it was appended as (an integer as its decimal text)."""
    cdef char buf[24]
    if not e.is_int:
        return PyBytes_FromStringAndSize(<const char*>e.s, e.n)
    return PyBytes_FromStringAndSize(buf, put_int_text(buf, e.ival))


cdef extern from "Python.h":
    # CPython's own int.from_bytes: one allocation for a 128-bit int where `ms << 64 | seq`
    # takes four (ids() and range_reply's IDs were 150 ns an ID that way: measured).
    object _PyLong_FromByteArray(const unsigned char* data, size_t n, int little_endian,
                                 int is_signed)
    # ... and int.to_bytes: an ID's two halves read without the two ints `sid >> 64` and
    # `sid & (2**64 - 1)` build and free.
    ctypedef struct PyLongObject
    int _PyLong_AsByteArray(PyLongObject* v, unsigned char* data, size_t n, int little_endian,
                            int is_signed) except -1
    bint PyLong_Check(object o)


cdef inline object id_int(uint64_t ms, uint64_t seq):
    """The 128-bit ID `ms << 64 | seq` as a Python int."""
    cdef unsigned char raw[16]
    cdef int k
    if ms == 0:
        return <object>seq
    for k in range(8):
        raw[k] = (seq >> (8 * k)) & 0xFF
        raw[8 + k] = (ms >> (8 * k)) & 0xFF
    return _PyLong_FromByteArray(raw, 16, 1, 0)


cdef inline int split_id(object sid, uint64_t* ms, uint64_t* seq) except -1:
    """*ms, *seq = sid >> 64, sid & (2**64 - 1), for a 128-bit ID; OverflowError (as the
    shifts' conversions raise it) for a negative one or one of more bits, TypeError for a
    non-int."""
    cdef unsigned char raw[16]
    cdef int k
    if not PyLong_Check(sid):
        raise TypeError(f"an ID is an int, not {type(sid).__name__}")
    if u128_halves(sid, <unsigned long long*>ms, <unsigned long long*>seq):
        return 0
    _PyLong_AsByteArray(<PyLongObject*>sid, raw, 16, 1, 0)  # (raises the OverflowError)
    ms[0] = 0
    seq[0] = 0
    for k in range(7, -1, -1):
        seq[0] = (seq[0] << 8) | raw[k]
        ms[0] = (ms[0] << 8) | raw[8 + k]
    return 0


cdef inline object id_text(uint64_t ms, uint64_t seq):
    cdef char buf[48]
    cdef int n = put_decimal(buf, ms)
    buf[n] = 45
    n += 1
    n += put_decimal(buf + n, seq)
    return PyBytes_FromStringAndSize(buf, n)


# --- elements, written ----------------------------------------------------------------------------

cdef int put_str(Buf* b, object s) except -1:
    if not PyBytes_CheckExact(s):
        raise TypeError("a field or value is not bytes")
    return put_string(b, <const unsigned char*>PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s))


cdef inline bint same_bytes(object a, object b):
    if a is b:
        return True
    if PyBytes_CheckExact(a) and PyBytes_CheckExact(b):
        return PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b) and memcmp(
            PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), PyBytes_GET_SIZE(a)) == 0
    return a == b


cdef bint same_names(tuple fields, tuple names):
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(names)
    if PyTuple_GET_SIZE(fields) != 2 * n:
        return False
    for i in range(n):
        if not same_bytes(<object>PyTuple_GET_ITEM(fields, 2 * i),
                          <object>PyTuple_GET_ITEM(names, i)):
            return False
    return True


cdef Py_ssize_t put_entry(Buf* b, uint64_t ms0, uint64_t seq0, tuple names, object sid,
                          tuple fields, int flags) except -1:
    """The entry's elements (`flags` 0, or DELETED for a tombstone); how many."""
    cdef uint64_t ms, seq
    split_id(sid, &ms, &seq)
    cdef Py_ssize_t i, n = PyTuple_GET_SIZE(fields) >> 1
    if same_names(fields, names):
        put_int(b, flags | SAMEFIELDS)
        put_int(b, <long long>(ms - ms0))
        put_int(b, <long long>(seq - seq0))
        for i in range(n):
            put_str(b, <object>PyTuple_GET_ITEM(fields, 2 * i + 1))
        put_int(b, n + 3)
        return n + 4
    put_int(b, flags)
    put_int(b, <long long>(ms - ms0))
    put_int(b, <long long>(seq - seq0))
    put_int(b, n)
    for i in range(2 * n):
        put_str(b, <object>PyTuple_GET_ITEM(fields, i))
    put_int(b, 2 * n + 4)
    return 2 * n + 5


cdef inline void set_u32(unsigned char* p, Py_ssize_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF
    p[2] = (v >> 16) & 0xFF
    p[3] = (v >> 24) & 0xFF


cdef inline Py_ssize_t get_u16(const unsigned char* p) noexcept nogil:
    return p[0] | (<Py_ssize_t>p[1] << 8)


cdef inline void set_u16(unsigned char* p, Py_ssize_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF


cdef int put_master(Buf* b, Py_ssize_t live, Py_ssize_t deleted, tuple names) except -1:
    """The header's room and the master entry (the caller ends the node and sets the header)."""
    cdef Py_ssize_t k
    b.p = NULL
    b.n = 6
    b.cap = 0
    reserve(b, 6)
    put_int(b, live)
    put_int(b, deleted)
    put_int(b, PyTuple_GET_SIZE(names))
    for k in range(PyTuple_GET_SIZE(names)):
        put_str(b, <object>PyTuple_GET_ITEM(names, k))
    put_int(b, 0)
    return 0


cdef object finish(Buf* b, Py_ssize_t count):
    """The end byte and the header, then the node as a bytearray."""
    reserve(b, 1)
    b.p[b.n] = 0xFF
    b.n += 1
    set_u32(b.p, b.n)
    set_u16(b.p + 4, UNKNOWN_COUNT if count > UNKNOWN_COUNT else count)
    return PyByteArray_FromStringAndSize(<char*>b.p, b.n)


def new_node(names):
    """An empty node whose master entry has these field names (see the pure module)."""
    cdef Buf b
    cdef tuple names_ = names if PyTuple_CheckExact(names) else tuple(names)
    b.p = NULL
    try:
        put_master(&b, 0, 0, names_)
        return finish(&b, 4 + PyTuple_GET_SIZE(names_))
    finally:
        free(b.p)


def build(ids, fields, names=None):
    """A node of these entries, None for a deleted entry whose values are gone (see the pure
    module). Trusts its input: ascending IDs, flat tuples of bytes."""
    cdef Buf b
    cdef Py_ssize_t i, count, deleted = 0
    cdef tuple names_, blank = None
    cdef uint64_t ms0, seq0
    if not ids or len(ids) != len(fields):
        raise ValueError("a node holds at least one entry, one field tuple per ID")
    if names is None:
        first = fields[0]
        if first is None:
            raise ValueError("a node whose first entry is deleted needs its master's names")
        names_ = tuple(first)[0::2]
    else:
        names_ = names if PyTuple_CheckExact(names) else tuple(names)
    for f in fields:
        if f is None:
            deleted += 1
    if deleted:
        blank = tuple([x for name in names_ for x in (name, b"")])
    split_id(ids[0], &ms0, &seq0)
    b.p = NULL
    try:
        put_master(&b, len(ids) - deleted, deleted, names_)
        count = 4 + PyTuple_GET_SIZE(names_)
        for i in range(len(ids)):
            f = fields[i]
            if f is None:
                count += put_entry(&b, ms0, seq0, names_, ids[i], blank, DELETED)
                continue
            if not PyTuple_CheckExact(f):
                f = tuple(f)
            count += put_entry(&b, ms0, seq0, names_, ids[i], <tuple>f, 0)
        return finish(&b, count)
    finally:
        free(b.p)


# --- the master entry -----------------------------------------------------------------------------

cdef inline unsigned char* lp_ptr(object lp) except NULL:
    if not PyByteArray_CheckExact(lp):
        raise TypeError("a packed node is a bytearray")
    return <unsigned char*>PyByteArray_AS_STRING(lp)


cdef int set_counters(object lp, long long live, long long deleted) except -1:
    """Rewrite the master's live and deleted counts, moving the rest when their size changes."""
    cdef unsigned char* p = lp_ptr(lp)
    cdef Elem e
    cdef Py_ssize_t j = next_elem(p, next_elem(p, 6, &e), &e)  # past both counters
    cdef Py_ssize_t old = j - 6
    cdef Py_ssize_t new = c_int_size(live) + c_int_size(deleted)
    cdef Py_ssize_t total = PyByteArray_GET_SIZE(lp)
    cdef Buf b
    if new > old:
        PyByteArray_Resize(lp, total + new - old)
        p = <unsigned char*>PyByteArray_AS_STRING(lp)
        memmove(p + j + new - old, p + j, total - j)
    elif new < old:
        memmove(p + j + new - old, p + j, total - j)
        PyByteArray_Resize(lp, total + new - old)
        p = <unsigned char*>PyByteArray_AS_STRING(lp)
    b.p = p
    b.n = 6
    b.cap = 1 << 62  # the room is there: reserve() never reallocates this buffer
    put_int(&b, live)
    put_int(&b, deleted)
    set_u32(p, PyByteArray_GET_SIZE(lp))
    return 0


def counts(lp):
    cdef unsigned char* p = lp_ptr(lp)
    cdef Elem a, d
    next_elem(p, next_elem(p, 6, &a), &d)
    return a.ival, d.ival


cdef tuple master_names(const unsigned char* p, Py_ssize_t* first):
    """The master's field names; *first set to the first entry's offset."""
    cdef Elem e
    cdef Py_ssize_t i = next_elem(p, next_elem(p, 6, &e), &e)
    cdef Py_ssize_t k, n
    i = next_elem(p, i, &e)
    n = e.ival
    out = PyTuple_New(n)
    for k in range(n):
        i = next_elem(p, i, &e)
        name = elem_text(&e)
        Py_INCREF(name)
        PyTuple_SET_ITEM(out, k, name)
    first[0] = next_elem(p, i, &e)  # the master entry's closing 0
    return <tuple>out


def names(lp):
    cdef Py_ssize_t first
    return master_names(lp_ptr(lp), &first)


def append(lp, master, names, sid, fields):
    cdef Buf b
    cdef Py_ssize_t added, total, count
    cdef unsigned char* p = lp_ptr(lp)
    cdef Elem a, d
    cdef uint64_t mms, mseq
    if not PyTuple_CheckExact(fields):
        fields = tuple(fields)
    if not PyTuple_CheckExact(names):
        names = tuple(names)
    cdef Py_ssize_t k, bound = 64
    for k in range(PyTuple_GET_SIZE(fields)):
        bound += PyBytes_GET_SIZE(<object>PyTuple_GET_ITEM(fields, k)) + 11 \
            if PyBytes_CheckExact(<object>PyTuple_GET_ITEM(fields, k)) else 0
    # Written in place, into room reserved for the entry's largest encoding (every element
    # at most its bytes plus 11), then the buffer cut to what it took: a big value is copied
    # once, not into a scratch buffer first. (bytearray's resize over-allocates: appends to
    # the open node are amortized O(1), and the cut keeps the allocation.)
    split_id(master, &mms, &mseq)
    total = PyByteArray_GET_SIZE(lp)
    PyByteArray_Resize(lp, total + bound)
    b.p = <unsigned char*>PyByteArray_AS_STRING(lp) + total - 1
    b.n = 0
    b.cap = bound  # never reached: reserve() must not reallocate inside the bytearray
    try:
        added = put_entry(&b, mms, mseq, <tuple>names, sid, <tuple>fields, 0)
    except BaseException:
        PyByteArray_Resize(lp, total)
        (<unsigned char*>PyByteArray_AS_STRING(lp))[total - 1] = 0xFF  # (written over)
        raise
    PyByteArray_Resize(lp, total + b.n)
    p = <unsigned char*>PyByteArray_AS_STRING(lp)
    p[total - 1 + b.n] = 0xFF
    count = get_u16(p + 4)
    if count != UNKNOWN_COUNT:
        count += added
        set_u16(p + 4, UNKNOWN_COUNT if count > UNKNOWN_COUNT else count)
    next_elem(p, next_elem(p, 6, &a), &d)
    if c_int_size(a.ival + 1) == c_int_size(a.ival):
        b.p = p
        b.n = 6
        b.cap = 1 << 62
        put_int(&b, a.ival + 1)  # the same size: in place
        set_u32(p, PyByteArray_GET_SIZE(lp))
    else:
        set_counters(lp, a.ival + 1, d.ival)


# --- reading --------------------------------------------------------------------------------------

cdef struct Walk:
    Py_ssize_t at        # the entry's flags element
    Py_ssize_t values    # its first value (SAMEFIELDS) or its field count
    Py_ssize_t next      # the next entry
    int flags
    uint64_t ms
    uint64_t seq


cdef inline Py_ssize_t walk_entry(const unsigned char* p, Py_ssize_t i, Py_ssize_t nnames,
                                  uint64_t ms0, uint64_t seq0, Walk* w) noexcept nogil:
    """Read an entry's flags and ID and find the next entry without decoding its values."""
    cdef Elem e
    cdef Py_ssize_t k, n
    w.at = i
    i = next_elem(p, i, &e)
    w.flags = <int>e.ival
    i = next_elem(p, i, &e)
    w.ms = ms0 + <uint64_t>e.ival
    i = next_elem(p, i, &e)
    w.seq = seq0 + <uint64_t>e.ival
    w.values = i
    if w.flags & SAMEFIELDS:
        n = nnames
    else:
        i = next_elem(p, i, &e)
        n = 2 * e.ival
    for k in range(n):
        i = skip_elem(p, i)
    w.next = skip_elem(p, i)  # the entry's element count
    return w.next


cdef tuple entry_fields(const unsigned char* p, Walk* w, tuple names):
    cdef Elem e
    cdef Py_ssize_t i = w.values, k, n
    if w.flags & SAMEFIELDS:
        n = PyTuple_GET_SIZE(names)
        out = PyTuple_New(2 * n)
        for k in range(n):
            name = <object>PyTuple_GET_ITEM(names, k)
            Py_INCREF(name)
            PyTuple_SET_ITEM(out, 2 * k, name)
            i = next_elem(p, i, &e)
            value = elem_text(&e)
            Py_INCREF(value)
            PyTuple_SET_ITEM(out, 2 * k + 1, value)
        return <tuple>out
    i = next_elem(p, i, &e)
    n = 2 * e.ival
    out = PyTuple_New(n)
    for k in range(n):
        i = next_elem(p, i, &e)
        value = elem_text(&e)
        Py_INCREF(value)
        PyTuple_SET_ITEM(out, k, value)
    return <tuple>out


cdef inline bint id_le(uint64_t ams, uint64_t aseq, uint64_t bms, uint64_t bseq) noexcept nogil:
    return ams < bms or (ams == bms and aseq <= bseq)


def entries(lp, master):
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, end = PyByteArray_GET_SIZE(lp) - 1
    cdef uint64_t ms0, seq0
    split_id(master, &ms0, &seq0)
    cdef Walk w
    names_ = master_names(p, &i)
    out = []
    while i < end:
        i = walk_entry(p, i, PyTuple_GET_SIZE(names_), ms0, seq0, &w)
        out.append((id_int(w.ms, w.seq),
                    entry_fields(p, &w, names_), bool(w.flags & DELETED)))
    return out


cdef inline Py_ssize_t entry_before(const unsigned char* p, Py_ssize_t end, long long* dms,
                                    long long* dseq) noexcept nogil:
    """The entry that ends at `end`, read backwards as Redis's reverse iterator reads it (its
    element count, then that many elements back to its flags): the offset of its flags, and
    its ID's deltas from the master ID in *dms and *dseq."""
    cdef Py_ssize_t start = prev_elem(p, end), j, k, n  # its element count
    cdef Elem e
    next_elem(p, start, &e)
    n = e.ival
    for k in range(n):
        start = prev_elem(p, start)
    j = next_elem(p, start, &e)  # past its flags
    j = next_elem(p, j, &e)
    dms[0] = e.ival
    next_elem(p, j, &e)
    dseq[0] = e.ival
    return start


cdef Py_ssize_t seek_back(const unsigned char* p, Py_ssize_t first, Py_ssize_t stop,
                          uint64_t ms0, uint64_t seq0, uint64_t sms, uint64_t sseq,
                          Py_ssize_t limit) noexcept nogil:
    """Where a forward walk for the entries from `start` on may begin: found walking back
    from the end (each entry's element count, then that many elements back to its flags, as
    Redis's reverse iterator does), at most `limit` entries, the offset of the entry after
    the last one below `start`; `first` when `start` lies further back (walk from the start)."""
    cdef Py_ssize_t i = stop, before
    cdef long long dms, dseq
    for _ in range(limit):
        if i <= first:
            return first
        before = entry_before(p, i, &dms, &dseq)
        if not id_le(sms, sseq, ms0 + <uint64_t>dms, seq0 + <uint64_t>dseq):
            return i  # below start: the walk begins after it
        i = before
    return first


cdef Py_ssize_t select(const unsigned char* p, Py_ssize_t i, Py_ssize_t stop,
                       Py_ssize_t nnames, uint64_t ms0, uint64_t seq0, object start, object end,
                       Py_ssize_t count, bint rev, Walk** picked) except -1:
    """The live entries from start to end, ascending, into *picked (the caller frees it): all
    of them backwards (the reply takes the last `count`), at most `count` (0: all) forwards.
    Only the IDs and flags are read: the values are skipped by their lengths. A forward read
    from an ID past the node's first looks back from the end first, a few entries at most: a
    consumer group's `>` reads the newest entries, which a walk from the start reaches last."""
    cdef uint64_t sms, sseq
    split_id(start, &sms, &sseq)
    cdef uint64_t ems, eseq
    split_id(end, &ems, &eseq)
    cdef Py_ssize_t n = 0, cap = 0
    cdef Walk w
    cdef Walk* grown
    if not rev and not id_le(sms, sseq, ms0, seq0):
        i = seek_back(p, i, stop, ms0, seq0, sms, sseq, SEEK_BACK_ENTRIES)
    while i < stop:
        i = walk_entry(p, i, nnames, ms0, seq0, &w)
        if not id_le(w.ms, w.seq, ems, eseq):
            break
        if not id_le(sms, sseq, w.ms, w.seq) or w.flags & DELETED:
            continue
        if n == cap:
            cap = cap * 2 if cap else 64
            grown = <Walk*>realloc(picked[0], cap * sizeof(Walk))
            if grown == NULL:
                raise MemoryError()
            picked[0] = grown
        picked[0][n] = w
        n += 1
        if n == count and not rev:
            break
    return n


def read_range(lp, master, start, end, Py_ssize_t count=0, bint rev=False, sids=None):
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, n, k, last
    cdef Walk* picked = NULL
    cdef uint64_t mms, mseq
    ids = []
    fields = []
    if start > end:
        return ids, fields
    split_id(master, &mms, &mseq)
    names_ = master_names(p, &i)
    try:
        n = select(p, i, PyByteArray_GET_SIZE(lp) - 1, PyTuple_GET_SIZE(names_),
                   mms, mseq, start, end, count, rev, &picked)
        if not rev:
            for k in range(n):
                PyList_Append(ids, id_text(picked[k].ms, picked[k].seq))
                PyList_Append(fields, entry_fields(p, &picked[k], names_))
            if sids is not None:
                sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n)]
            return ids, fields
        last = n - count if 0 < count < n else 0
        for k in range(n - 1, last - 1, -1):
            PyList_Append(ids, id_text(picked[k].ms, picked[k].seq))
            PyList_Append(fields, entry_fields(p, &picked[k], names_))
        if sids is not None:
            sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n - 1, last - 1, -1)]
    finally:
        free(picked)
    return ids, fields


# Slots of `entry_list`'s reuse list: the first field positions of an entry.
DEF REUSE_SLOTS = 16


cdef object text_reused(Elem* e, list last, Py_ssize_t k):
    """elem_text, or last[k] when that holds the same bytes, and then last[k] is the result.
    A stream's values repeat from entry to entry (a device's id, a status, a unit): a plain
    reply then holds one bytes object for each, not one per entry (an allocation was a third of
    building an entry's lists: measured). Bytes are immutable, so sharing them is invisible."""
    cdef char buf[24]
    cdef const char* s
    cdef Py_ssize_t n
    if k >= REUSE_SLOTS:
        return elem_text(e)
    if e.is_int:
        n = put_int_text(buf, e.ival)
        s = buf
    else:
        s = <const char*>e.s
        n = e.n
    prev = <object>PyList_GET_ITEM(last, k)
    if prev is not None and PyBytes_GET_SIZE(prev) == n and memcmp(PyBytes_AS_STRING(prev), s,
                                                                    n) == 0:
        return prev
    value = PyBytes_FromStringAndSize(s, n)
    last[k] = value
    return value


cdef list entry_list(const unsigned char* p, Walk* w, tuple names, list reuse):
    """entry_fields as a list: what an embedded caller gets (the reply's plain form). `reuse`:
    the read's REUSE_SLOTS previous texts by position (`text_reused`)."""
    cdef Elem e
    cdef Py_ssize_t i = w.values, k, n
    cdef list out
    if w.flags & SAMEFIELDS:
        n = PyTuple_GET_SIZE(names)
        out = PyList_New(2 * n)
        for k in range(n):
            name = <object>PyTuple_GET_ITEM(names, k)
            Py_INCREF(name)
            PyList_SET_ITEM(out, 2 * k, name)
            i = next_elem(p, i, &e)
            value = text_reused(&e, reuse, k)
            Py_INCREF(value)
            PyList_SET_ITEM(out, 2 * k + 1, value)
        return out
    i = next_elem(p, i, &e)
    n = 2 * e.ival
    out = PyList_New(n)
    for k in range(n):
        i = next_elem(p, i, &e)
        value = text_reused(&e, reuse, k)
        Py_INCREF(value)
        PyList_SET_ITEM(out, k, value)
    return out


def read_plain(lp, master, start, end, Py_ssize_t count, bint rev, out, sids=None):
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, n, k, last
    cdef Walk* picked = NULL
    cdef uint64_t mms, mseq
    if start > end:
        return 0
    split_id(master, &mms, &mseq)
    names_ = master_names(p, &i)
    reuse = [None] * REUSE_SLOTS
    try:
        n = select(p, i, PyByteArray_GET_SIZE(lp) - 1, PyTuple_GET_SIZE(names_),
                   mms, mseq, start, end, count, rev, &picked)
        if not rev:
            for k in range(n):
                PyList_Append(out, [id_text(picked[k].ms, picked[k].seq),
                                    entry_list(p, &picked[k], names_, reuse)])
            if sids is not None:
                sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n)]
            return n
        last = n - count if 0 < count < n else 0
        for k in range(n - 1, last - 1, -1):
            PyList_Append(out, [id_text(picked[k].ms, picked[k].seq),
                                entry_list(p, &picked[k], names_, reuse)])
        if sids is not None:
            sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n - 1, last - 1, -1)]
        return n - last
    finally:
        free(picked)


# The reply writers below take and return a cursor and do not check for room:
# put_entry_reply reserves an upper bound of the entry's reply first (one check per entry, and
# the cursor in a register rather than reloaded from the buffer after each byte: measured).

cdef inline unsigned char* w_raw(unsigned char* q, const void* s, Py_ssize_t n) noexcept nogil:
    memcpy(q, s, n)
    return q + n


cdef inline unsigned char* w_header(unsigned char* q, char kind, uint64_t n) noexcept nogil:
    """`*n\\r\\n` or `$n\\r\\n`."""
    q[0] = kind
    q += 1 + put_decimal(<char*>q + 1, n)
    q[0] = 13
    q[1] = 10
    return q + 2


cdef inline unsigned char* w_bulk_elem(unsigned char* q, Elem* e) noexcept nogil:
    """An element as a bulk string of the text it was appended as."""
    cdef char buf[24]
    cdef int n
    if e.is_int:
        n = put_int_text(buf, e.ival)
        q = w_raw(w_header(q, 36, n), buf, n)
    else:
        q = w_raw(w_header(q, 36, e.n), e.s, e.n)
    q[0] = 13
    q[1] = 10
    return q + 2


cdef struct MsText:
    # The last ID's ms part as text: entries share their ms (a busy producer's several per
    # millisecond), and its 13 digits were a third of the reply's cost (measured).
    uint64_t ms
    int n
    char text[24]


cdef int put_entry_reply(Buf* b, const unsigned char* p, Walk* w, tuple names,
                         Py_ssize_t names_bytes, MsText* last) except -1:
    cdef char buf[48]
    cdef int n
    cdef Elem e
    cdef Py_ssize_t i = w.values, k, count
    cdef unsigned char* q
    # Each element (2+ bytes in the node) grows to at most its text (20 digits for an integer)
    # plus a 16-byte header; the names of a SAMEFIELDS entry are not in it.
    reserve(b, 128 + 24 * (w.next - w.at) + names_bytes + 24 * PyTuple_GET_SIZE(names))
    q = b.p + b.n
    if last.n == 0 or last.ms != w.ms:
        last.ms = w.ms
        last.n = put_decimal(last.text, w.ms)
    n = last.n
    memcpy(buf, last.text, n)
    buf[n] = 45
    n += 1
    n += put_decimal(buf + n, w.seq)
    q = w_raw(q, b"*2\r\n", 4)
    q = w_raw(w_header(q, 36, n), buf, n)
    q = w_raw(q, b"\r\n", 2)
    if w.flags & SAMEFIELDS:
        count = PyTuple_GET_SIZE(names)
        q = w_header(q, 42, 2 * count)
        for k in range(count):
            name = <object>PyTuple_GET_ITEM(names, k)
            q = w_header(q, 36, PyBytes_GET_SIZE(name))
            q = w_raw(q, PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name))
            q = w_raw(q, b"\r\n", 2)
            i = next_elem(p, i, &e)
            q = w_bulk_elem(q, &e)
    else:
        i = next_elem(p, i, &e)
        count = 2 * e.ival
        q = w_header(q, 42, count)
        for k in range(count):
            i = next_elem(p, i, &e)
            q = w_bulk_elem(q, &e)
    b.n = q - b.p
    return 0


def range_reply(lp, master, start, end, Py_ssize_t count, bint rev, out, sids=None):
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, n, k, first, at, names_bytes = 0
    cdef Walk* picked = NULL
    cdef uint64_t mms, mseq
    cdef Buf b
    cdef MsText last
    last.n = 0
    if not PyByteArray_CheckExact(out):
        raise TypeError("the reply is written to a bytearray")
    if start > end:
        return 0
    split_id(master, &mms, &mseq)
    names_ = master_names(p, &i)
    for name in names_:
        names_bytes += PyBytes_GET_SIZE(name)
    b.p = NULL
    b.n = 0
    b.cap = 0
    try:
        n = select(p, i, PyByteArray_GET_SIZE(lp) - 1, PyTuple_GET_SIZE(names_),
                   mms, mseq, start, end, count, rev, &picked)
        reserve(&b, 64 * (count if 0 < count < n else n))  # most replies: no regrowth
        if not rev:
            for k in range(n):
                put_entry_reply(&b, p, &picked[k], names_, names_bytes, &last)
            if sids is not None:
                sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n)]
        else:
            first = n - count if 0 < count < n else 0
            for k in range(n - 1, first - 1, -1):
                put_entry_reply(&b, p, &picked[k], names_, names_bytes, &last)
            if sids is not None:
                sids += [id_int(picked[k].ms, picked[k].seq) for k in range(n - 1, first - 1, -1)]
            n -= first
        at = PyByteArray_GET_SIZE(out)
        PyByteArray_Resize(out, at + b.n)
        memcpy(PyByteArray_AS_STRING(out) + at, b.p, b.n)
    finally:
        free(picked)
        free(b.p)
    return n


def mark_deleted(lp, master, sid):
    cdef unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, stop = PyByteArray_GET_SIZE(lp) - 1
    cdef uint64_t ms0, seq0
    split_id(master, &ms0, &seq0)
    cdef uint64_t ms, seq
    split_id(sid, &ms, &seq)
    cdef Walk w
    cdef Elem a, d
    names_ = master_names(p, &i)
    while i < stop:
        i = walk_entry(p, i, PyTuple_GET_SIZE(names_), ms0, seq0, &w)
        if w.ms == ms and w.seq == seq:
            if w.flags & DELETED:
                return False
            p[w.at] = w.flags | DELETED  # a 7-bit integer element: its byte is its value
            next_elem(p, next_elem(p, 6, &a), &d)
            set_counters(lp, a.ival - 1, d.ival + 1)
            return True
        if not id_le(w.ms, w.seq, ms, seq):
            break
    return False


def entry_bytes(lp):
    return PyByteArray_GET_SIZE(lp)


# --- lookups for the stream model -------------------------------------------------------------
# Like every function above, these trust the node: one these functions (or Redis) wrote, or
# one `validate` accepted.

cdef object _MAX_ID = (1 << 128) - 1


cdef Py_ssize_t master_skip(const unsigned char* p, Py_ssize_t* nnames) noexcept nogil:
    """The first entry's offset, *nnames set to the master's field count; no object built."""
    cdef Elem e
    cdef Py_ssize_t i = next_elem(p, next_elem(p, 6, &e), &e)
    cdef Py_ssize_t k
    i = next_elem(p, i, &e)
    nnames[0] = e.ival
    for k in range(nnames[0]):
        i = skip_elem(p, i)
    return skip_elem(p, i)  # the master entry's closing 0


cdef inline bint id_lt(uint64_t ams, uint64_t aseq, uint64_t bms, uint64_t bseq) noexcept nogil:
    return ams < bms or (ams == bms and aseq < bseq)


def find(lp, master, sid):
    """The fields of the live entry `sid`, None when the node has none (see the pure module);
    the walk stops at the first ID not below `sid`, skipping values by their lengths. Trusts
    the node."""
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, nnames, first, stop = PyByteArray_GET_SIZE(lp) - 1
    cdef uint64_t ms0, seq0
    split_id(master, &ms0, &seq0)
    cdef uint64_t ms, seq
    cdef Walk w
    if not 0 <= sid <= _MAX_ID:  # no entry has such an ID
        return None
    split_id(sid, &ms, &seq)
    i = master_skip(p, &nnames)
    while i < stop:
        i = walk_entry(p, i, nnames, ms0, seq0, &w)
        if id_lt(w.ms, w.seq, ms, seq):
            continue
        if w.ms != ms or w.seq != seq or w.flags & DELETED:
            return None
        return entry_fields(p, &w, master_names(p, &first))
    return None


def ids(lp, master):
    """Every entry's ID in order as an int, deleted entries included. Trusts the node."""
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, nnames, stop = PyByteArray_GET_SIZE(lp) - 1
    cdef uint64_t ms0, seq0
    split_id(master, &ms0, &seq0)
    cdef Walk w
    out = []
    i = master_skip(p, &nnames)
    while i < stop:
        i = walk_entry(p, i, nnames, ms0, seq0, &w)
        PyList_Append(out, id_int(w.ms, w.seq))
    return out


cdef inline Py_ssize_t prev_elem(const unsigned char* p, Py_ssize_t i) noexcept nogil:
    """The offset of the element before offset `i`, from the backlen that ends at i - 1
    (7 bits a byte, the last byte the lowest, a high bit on every byte but the first)."""
    cdef Py_ssize_t k = i - 1
    cdef Py_ssize_t size = p[k] & 127
    cdef int shift = 0
    while p[k] & 128:
        k -= 1
        shift += 7
        size |= <Py_ssize_t>(p[k] & 127) << shift
    return k - size


def last_id(lp, master):
    """The last entry's ID, deleted or not (`master` for a node with no entry): read backwards
    from the end byte, as Redis's reverse iterator does: the entry's element count, then that
    many elements back to its flags. O(elements of one entry). Trusts the node."""
    cdef const unsigned char* p = lp_ptr(lp)
    cdef Elem a, d
    cdef long long dms, dseq
    next_elem(p, next_elem(p, 6, &a), &d)
    if a.ival + d.ival == 0:
        return master
    entry_before(p, PyByteArray_GET_SIZE(lp) - 1, &dms, &dseq)
    cdef uint64_t mms, mseq
    split_id(master, &mms, &mseq)
    return id_int(mms + <uint64_t>dms, mseq + <uint64_t>dseq)


def delete_many(lp, master, sids):
    """mark_deleted for each of `sids`, one walk (it stops past the highest); how many were
    live (see the pure module). Trusts the node."""
    cdef unsigned char* p = lp_ptr(lp)
    cdef Py_ssize_t i, nnames, k = 0, n, marked = 0, stop = PyByteArray_GET_SIZE(lp) - 1
    cdef uint64_t ms0, seq0
    split_id(master, &ms0, &seq0)
    cdef uint64_t* want = NULL
    cdef Walk w
    cdef Elem a, d
    wanted = sorted({sid for sid in sids if 0 <= sid <= _MAX_ID})
    n = len(wanted)
    if n == 0:
        return 0
    want = <uint64_t*>malloc(2 * n * sizeof(uint64_t))
    if want == NULL:
        raise MemoryError()
    try:
        for k in range(n):
            split_id(wanted[k], &want[2 * k], &want[2 * k + 1])
        k = 0
        i = master_skip(p, &nnames)
        while i < stop and k < n:
            i = walk_entry(p, i, nnames, ms0, seq0, &w)
            while k < n and id_lt(want[2 * k], want[2 * k + 1], w.ms, w.seq):
                k += 1
            if k < n and want[2 * k] == w.ms and want[2 * k + 1] == w.seq:
                k += 1
                if not w.flags & DELETED:
                    p[w.at] = w.flags | DELETED  # a 7-bit integer element: its byte is its value
                    marked += 1
    finally:
        free(want)
    if marked:
        next_elem(p, next_elem(p, 6, &a), &d)
        set_counters(lp, a.ival - marked, d.ival + marked)
    return marked


# --- untrusted bytes ------------------------------------------------------------------------------
# The one parser here of bytes from outside (RDB files, RESTORE payloads, snapshots). Every read
# is checked against `end` before it happens; offsets and sizes are 64-bit (a 32-bit string
# length plus an offset cannot wrap); every count is bounded by the node's size before a loop
# runs on it, and each pass of a loop consumes at least one element or raises: linear in the
# node's size whatever the bytes. It raises what the pure reference raises, word for word.

cdef object _LIVE = "the live count"
cdef object _DELETED = "the deleted count"
cdef object _NNAMES = "the master's field count"
cdef object _ZERO = "the master's terminator"
cdef object _FLAGS = "an entry's flags"
cdef object _DMS = "an ID's ms delta"
cdef object _DSEQ = "an ID's seq delta"
cdef object _NFIELDS = "an entry's field count"
cdef object _LPCOUNT = "an entry's element count"


cdef inline Py_ssize_t quick_elem(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                                  Elem* e) noexcept nogil:
    """The encodings a stream node is mostly made of (a 7-bit or 13-bit integer, a string of
    up to 63 bytes) have a one-byte backlen, their size: checked and read at once, inline (the
    next element's offset), or -1 for any other element or any check that does not hold, which
    the general path (`checked_elem`) then checks again and reports in its words."""
    cdef unsigned int b, v
    cdef Py_ssize_t size
    if i >= end:
        return -1
    b = p[i]
    if b < 0x80:
        if i + 2 <= end and p[i + 1] == 1:
            e.is_int = True
            e.ival = b
            return i + 2
    elif b < 0xC0:
        size = 1 + (b & 0x3F)
        if i + size + 1 <= end and p[i + size] == size:
            e.is_int = False
            e.n = size - 1
            e.s = p + i + 1
            return i + size + 1
    elif b < 0xE0:
        if i + 3 <= end and p[i + 2] == 2:
            v = ((b & 0x1F) << 8) | p[i + 1]
            e.is_int = True
            e.ival = <long long>v - 8192 if v >= 4096 else v
            return i + 3
    return -1


cdef inline Py_ssize_t elem_at(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                               Elem* e) except -1:
    cdef Py_ssize_t nxt = quick_elem(p, i, end, e)
    return nxt if nxt >= 0 else checked_elem(p, i, end, e)


cdef inline Py_ssize_t int_at(const unsigned char* p, Py_ssize_t i, Py_ssize_t end, Elem* e,
                              object what) except -1:
    cdef Py_ssize_t nxt = quick_elem(p, i, end, e)
    if nxt >= 0 and e.is_int:
        return nxt
    return checked_int(p, i, end, e, what)


cdef Py_ssize_t checked_elem(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                             Elem* e) except -1:
    """next_elem, once the element's header, body and backlen are known to lie before `end`
    and the backlen to be the one its size has."""
    cdef unsigned int b
    cdef Py_ssize_t size, blen, k
    cdef unsigned char back[5]
    if i >= end:
        raise Invalid(f"element at offset {i} runs past the end")
    b = p[i]
    if b < 0x80:  # (most elements: a 7-bit int, its backlen 1)
        if i + 2 > end:
            raise Invalid(f"element at offset {i} runs past the end")
        if p[i + 1] != 1:
            raise Invalid(f"element at offset {i} has a wrong backlen")
        e.is_int = True
        e.ival = b
        return i + 2
    elif b < 0xC0:
        size = 1 + (b & 0x3F)
    elif b < 0xE0:
        size = 2
    elif b < 0xF0:
        if i + 1 >= end:
            raise Invalid(f"element at offset {i} runs past the end")
        size = 2 + (((b & 0x0F) << 8) | p[i + 1])
    elif b == 0xF0:
        if i + 5 > end:
            raise Invalid(f"element at offset {i} runs past the end")
        size = 5 + (<Py_ssize_t>p[i + 1] | <Py_ssize_t>p[i + 2] << 8
                    | <Py_ssize_t>p[i + 3] << 16 | <Py_ssize_t>p[i + 4] << 24)
    elif b <= 0xF4:
        size = 3 if b == 0xF1 else 4 if b == 0xF2 else 5 if b == 0xF3 else 9
    else:
        raise Invalid(f"element at offset {i} has an unknown encoding 0x{b:02x}")
    blen = backlen_size(size)
    if i + size + blen > end:  # i < end < 2**62 and size < 2**33: no wrap
        raise Invalid(f"element at offset {i} runs past the end")
    if blen == 1:  # (most elements: the backlen is the size itself)
        if p[i + size] != size:
            raise Invalid(f"element at offset {i} has a wrong backlen")
        return next_elem(p, i, e)
    back[0] = (size >> (7 * (blen - 1))) & 0x7F
    for k in range(1, blen):
        back[k] = ((size >> (7 * (blen - 1 - k))) & 0x7F) | 0x80
    if memcmp(p + i + size, back, blen) != 0:
        raise Invalid(f"element at offset {i} has a wrong backlen")
    return next_elem(p, i, e)


cdef inline Py_ssize_t checked_int(const unsigned char* p, Py_ssize_t i, Py_ssize_t end,
                                   Elem* e, object what) except -1:
    cdef Py_ssize_t nxt = checked_elem(p, i, end, e)
    if not e.is_int:
        raise Invalid(f"{what} at offset {i} is not an integer")
    return nxt


cdef tuple validate_node(const unsigned char* p, Py_ssize_t end, object master):
    cdef Elem e
    cdef Py_ssize_t i, k, at, total, count, elements, nnames, n, expect
    cdef long long live, deleted, flags, dms, dseq, entries = 0, seen_live = 0
    cdef uint64_t ms0, seq0, ms, seq, pms = 0, pseq = 0, mms = 0, mseq = 0
    cdef int below  # master against every ID: -1 below all, 0 an ID, 1 above all
    if end < 7:
        raise Invalid("shorter than a listpack header and its end byte")
    total = <Py_ssize_t>p[0] | <Py_ssize_t>p[1] << 8 | <Py_ssize_t>p[2] << 16 | <Py_ssize_t>p[3] << 24
    count = get_u16(p + 4)
    if total != end:
        raise Invalid(f"the header says {total} bytes, the node has {end}")
    if p[end - 1] != 0xFF:
        raise Invalid("no end byte")
    end -= 1
    i = int_at(p, 6, end, &e, _LIVE)
    live = e.ival
    i = int_at(p, i, end, &e, _DELETED)
    deleted = e.ival
    i = int_at(p, i, end, &e, _NNAMES)
    if live < 0 or deleted < 0 or e.ival < 0 or e.ival > end:
        raise Invalid("the master entry has a negative or impossible count")
    nnames = <Py_ssize_t>e.ival
    for k in range(nnames):
        i = elem_at(p, i, end, &e)
    i = int_at(p, i, end, &e, _ZERO)
    if e.ival != 0:
        raise Invalid("the master entry does not end with 0")
    elements = 4 + nnames
    # The pure reference's arithmetic on unbounded ints, in uint64: an ID is
    # ((ms0 + dms) mod 2**64, (seq0 + dseq) mod 2**64) whatever the master is.
    ms0 = <uint64_t>((master >> _SIXTY_FOUR) & _U64_OBJ)
    seq0 = <uint64_t>(master & _U64_OBJ)
    below = -1 if master < 0 else 1 if master > _MAX_ID else 0
    if below == 0:
        mms, mseq = ms0, seq0
    while i < end:
        at = i
        i = int_at(p, i, end, &e, _FLAGS)
        flags = e.ival
        if flags < 0 or flags > 3:
            raise Invalid(f"the entry at offset {at} has unknown flags {flags}")
        i = int_at(p, i, end, &e, _DMS)
        dms = e.ival
        i = int_at(p, i, end, &e, _DSEQ)
        dseq = e.ival
        ms = ms0 + <uint64_t>dms
        seq = seq0 + <uint64_t>dseq
        if (below == 1 or (below == 0 and id_lt(ms, seq, mms, mseq))
                or (entries and id_le(ms, seq, pms, pseq))):
            raise Invalid(f"the entry at offset {at} has an ID out of order")
        pms, pseq = ms, seq
        if flags & SAMEFIELDS:
            for k in range(nnames):
                i = elem_at(p, i, end, &e)
            expect = nnames + 3
            elements += 4 + nnames
        else:
            i = int_at(p, i, end, &e, _NFIELDS)
            if e.ival < 0 or e.ival > end:
                raise Invalid(f"the entry at offset {at} has an impossible field count")
            n = <Py_ssize_t>e.ival
            for k in range(2 * n):
                i = elem_at(p, i, end, &e)
            expect = 2 * n + 4
            elements += 5 + 2 * n
        i = int_at(p, i, end, &e, _LPCOUNT)
        if e.ival != expect:
            raise Invalid(f"the entry at offset {at} has a wrong element count")
        entries += 1
        if not flags & DELETED:
            seen_live += 1
    if live != seen_live or deleted != entries - seen_live:
        raise Invalid(f"the master counts {live} live and {deleted} deleted entries, the node "
                      f"has {seen_live} and {entries - seen_live}")
    if count != UNKNOWN_COUNT and count != elements:
        raise Invalid(f"the header counts {count} elements, the node has {elements}")
    return entries, live, id_int(pms, pseq) if entries else master


def validate(lp, master):
    """Check a node from outside before any other function reads it; (entries, live entries,
    last ID), or Invalid: the pure module's checks, results and messages. Takes bytes,
    bytearray or any contiguous byte buffer (memoryview)."""
    cdef Py_buffer view
    PyObject_GetBuffer(lp, &view, PyBUF_SIMPLE)
    try:
        return validate_node(<const unsigned char*>view.buf, view.len, master)
    finally:
        PyBuffer_Release(&view)
