# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The RESP codec's hot half, compiled: `RequestParser`, `write_reply` and `encode_reply` with
the same results, errors and buffer states as `_resp_py.py` (the reference, which documents
the rules), without a Python object per byte or per line.

Parsing reads the parser's own bytearray through its pointer, taken afresh at each call (only
`feed()` resizes the buffer, never while a call runs); every index is checked against the
buffer's length before it is read, so no `boundscheck` is needed. The rare paths (big bulks,
quoted inline commands, error lines) run the same Python as the reference. Encoding appends to
the caller's bytearray through its pointer after growing it, and gives the bytearray its exact
length back before any Python code can see it (a `ReplyBuffer`'s `bulk()` and `check()`, an
error): the check points and the bytes written are the reference's.

Must not touch: anything but the bytes given to it (no I/O, no engine state).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_CheckExact
from libc.string cimport memchr, memcpy

import io

from streamkeep.engine.wire import _resp_py
from streamkeep.engine.wire._resp_py import ERR_BULK_BIG, ERR_BULK_LEN, ERR_INLINE_BIG, ERR_MBULK_BIG, ERR_MBULK_LEN, ERR_QUERY_BUFFER, ERR_UNAUTH_BULK, ERR_UNAUTH_MBULK
from streamkeep.engine.wire._resp_py import OutputLimitReached, ProtocolError, QueryBufferLimit, format_double, split_inline_args
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY, EntryArray, Push, RespMap, RespSet, Verbatim

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

# The reference's limits (see _resp_py for what each is).
cdef Py_ssize_t PROTO_INLINE_MAX_SIZE = 64 * 1024
cdef long long PROTO_MAX_MULTIBULK = 2**31 - 1
cdef long long UNAUTH_MAX_MULTIBULK = 10
cdef long long UNAUTH_MAX_BULK = 16384
cdef long long UNAUTH_QUERY_BUFFER_LIMIT = 1024 * 1024
cdef Py_ssize_t COMPACT_AT = 64 * 1024
cdef long long PROTO_MBULK_BIG_ARG = 32 * 1024
cdef Py_ssize_t SMALL = 1024
cdef Py_ssize_t BIG_BULK = 64 * 1024
cdef Py_ssize_t ENTRIES_MIN = 8
cdef Py_ssize_t ENTRIES_CHUNK = 2048

# A module attribute, as in the reference, so a test can turn the batch off (0) on either twin;
# it is read once per batch, not per request.
_BATCH_WINDOW = 16 * 1024


# --------------------------------------------------------------------------------------------
# Scanning helpers: every one is bounded by the `end` it is given, never past the buffer.
# --------------------------------------------------------------------------------------------

cdef inline Py_ssize_t find_byte(const char* s, char c, Py_ssize_t start, Py_ssize_t end) noexcept:
    """Index of the first `c` in s[start:end], or -1."""
    cdef const char* p
    if start >= end:
        return -1
    p = <const char*>memchr(s + start, c, <size_t>(end - start))
    return -1 if p == NULL else p - s


cdef inline Py_ssize_t find_crlf(const char* s, Py_ssize_t start, Py_ssize_t end) noexcept:
    """Index of the first CRLF wholly inside s[start:end], or -1 (bytes.split's tokens)."""
    cdef const char* p
    while start < end - 1:
        p = <const char*>memchr(s + start, 13, <size_t>(end - 1 - start))
        if p == NULL:
            return -1
        start = p - s
        if s[start + 1] == 10:
            return start
        start += 1
    return -1


cdef inline bint is_digit(char c) noexcept:
    return 48 <= c <= 57


cdef bint digits_value(const char* s, Py_ssize_t n, unsigned long long* out) noexcept:
    """bytes.isdigit() over s[0:n] (non-empty, ASCII digits) and its value, saturated at
    2**64 - 1 (any caller compares it with a limit below that)."""
    cdef unsigned long long value = 0
    cdef Py_ssize_t i
    cdef unsigned int d
    if n <= 0:
        return False
    for i in range(n):
        if not is_digit(s[i]):
            return False
        d = <unsigned int>(s[i] - 48)
        if value > (18446744073709551615ULL - d) // 10:
            value = 18446744073709551615ULL
        else:
            value = value * 10 + d
    out[0] = value
    return True


cdef bint string2ll(const char* s, Py_ssize_t n, long long* out) noexcept:
    """Redis's string2ll (the reference's `_string2ll`): True and *out set, or False."""
    cdef unsigned long long value
    cdef bint negative
    if n == 0 or n >= 21:
        return False
    if n == 1 and s[0] == 48:
        out[0] = 0
        return True
    negative = s[0] == 45
    if negative:
        s += 1
        n -= 1
    if n == 0 or s[0] == 48 or not digits_value(s, n, &value):
        return False
    if negative:
        if value > 9223372036854775808ULL:
            return False
        out[0] = <long long>(0 - value)
        return True
    if value > 9223372036854775807ULL:
        return False
    out[0] = <long long>value
    return True


cdef inline bint inline_blank(char c) noexcept:
    return c == 32 or c == 9 or c == 10 or c == 13


# --------------------------------------------------------------------------------------------
# Parsing requests
# --------------------------------------------------------------------------------------------

cdef class RequestParser:
    """The reference's `RequestParser`, compiled: the same commands, errors and buffer states
    for any sequence of calls (see _resp_py.RequestParser for the rules)."""

    cdef public long long proto_max_bulk_len
    cdef public long long query_buffer_limit
    cdef public bint authenticated
    cdef bytearray _buf
    cdef Py_ssize_t _pos
    cdef Py_ssize_t _scan
    cdef list _argv
    cdef long long _multibulk
    cdef long long _bulklen
    cdef object _big
    cdef object _error
    cdef list _ready  # commands the batch parsed; the next is at _ready_at
    cdef Py_ssize_t _ready_at
    cdef Py_ssize_t _batch_debt

    def __init__(self, proto_max_bulk_len=512 * 1024 * 1024,
                 query_buffer_limit=1024 * 1024 * 1024):
        self.proto_max_bulk_len = proto_max_bulk_len
        self.query_buffer_limit = query_buffer_limit
        self.authenticated = True
        self._buf = bytearray()
        self._pos = 0
        self._scan = 0
        self._argv = []
        self._multibulk = 0
        self._bulklen = -1
        self._big = None
        self._error = None
        self._ready = []
        self._ready_at = 0
        self._batch_debt = 0

    def feed(self, data):
        """Buffer bytes received from the client."""
        cdef bytearray buf = self._buf
        cdef Py_ssize_t pos = self._pos
        cdef long long limit
        if pos:
            if pos == PyByteArray_GET_SIZE(buf):
                del buf[:]
                self._pos = self._scan = 0
            elif pos >= COMPACT_AT:
                del buf[:pos]  # O(1) in CPython: the bytearray advances its start
                self._pos = 0
                self._scan = max(0, self._scan - pos)
        buf += data
        limit = self.query_buffer_limit
        if not self.authenticated and limit > UNAUTH_QUERY_BUFFER_LIMIT:
            limit = UNAUTH_QUERY_BUFFER_LIMIT
        if PyByteArray_GET_SIZE(buf) - self._pos > limit and self._error is None:
            self._error = QueryBufferLimit(ERR_QUERY_BUFFER)

    def pending_bytes(self):
        """Bytes buffered but not parsed yet."""
        big = self._big
        return PyByteArray_GET_SIZE(self._buf) - self._pos + (big.tell() if big is not None else 0)

    def release(self):
        """Drop every buffer (the connection is gone): nothing waits for the collector."""
        self._buf = bytearray()
        self._pos = self._scan = 0
        self._argv = []
        self._ready = []
        self._ready_at = 0
        self._big = None
        self._multibulk = 0
        self._bulklen = -1
        if self._error is not None:  # its traceback's frames hold this parser and its buffer
            self._error.__traceback__ = None

    cdef inline object _pop_ready(self):
        cdef list ready = self._ready
        cdef object argv = <object>PyList_GET_ITEM(ready, self._ready_at)
        ready[self._ready_at] = None  # the caller owns the command from now on
        self._ready_at += 1
        if self._ready_at == PyList_GET_SIZE(ready):
            self._ready = []
            self._ready_at = 0
        return argv

    def next(self):
        """The next complete command, or None until more bytes are fed."""
        cdef Py_ssize_t pos
        cdef bytearray buf
        cdef Py_ssize_t window
        if self._ready_at < PyList_GET_SIZE(self._ready):
            return self._pop_ready()
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        if not self._multibulk and self._batch_debt <= 0 and pos < PyByteArray_GET_SIZE(buf) \
                and PyByteArray_AS_STRING(buf)[pos] == 42:
            window = _BATCH_WINDOW
            if window:
                self._parse_batch(buf, pos, window)
                if self._ready_at < PyList_GET_SIZE(self._ready):
                    return self._pop_ready()
        try:
            return self._next_slow(buf)
        finally:
            # What the byte-by-byte parser consumed pays off the batch's unused scan.
            self._batch_debt -= self._pos - pos

    cdef object _next_slow(self, bytearray buf):
        cdef Py_ssize_t pos
        cdef object argv
        try:
            while True:
                if self._multibulk:
                    return self._read_bulks(buf)
                pos = self._pos
                if pos >= PyByteArray_GET_SIZE(buf):
                    return None
                if PyByteArray_AS_STRING(buf)[pos] == 42:  # '*': a multibulk request
                    if not self._read_count(buf, pos):
                        return None
                    continue
                argv = self._read_inline(buf, pos)
                if argv is None or argv:
                    return argv
        except ProtocolError as err:
            self._error = err
            raise

    cdef int _parse_batch(self, bytearray buf, Py_ssize_t pos, Py_ssize_t window) except -1:
        """The reference's batch: every leading request of the next `window` bytes that is
        plainly formed, each of its lines ending in CRLF inside the window, `$<len>` exactly
        the length of the bulk up to the next CRLF; the rest is left to the byte-by-byte
        parser, and what was looked at but not taken is the same debt."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t wend = pos + window if window < size - pos else size
        cdef Py_ssize_t p = pos, q, h, b, j
        cdef unsigned long long n, blen
        cdef long long max_count, max_bulk
        cdef list args
        cdef object item
        cdef list ready = self._ready
        if self.authenticated:
            max_count, max_bulk = PROTO_MAX_MULTIBULK, self.proto_max_bulk_len
        else:
            max_count = UNAUTH_MAX_MULTIBULK
            max_bulk = min(self.proto_max_bulk_len, UNAUTH_MAX_BULK)
        while True:
            q = find_crlf(s, p, wend)
            if q < 0 or s[p] != 42 or q - p < 2 or s[p + 1] == 48:
                break
            if not digits_value(s + p + 1, q - p - 1, &n) or n > <unsigned long long>max_count:
                break
            # Each argument takes 6 bytes at least (`$0`, CRLF, an empty bulk, CRLF): a count
            # the window cannot hold is refused before a list of that size is made.
            if n > <unsigned long long>((wend - q) // 6):
                break
            args = PyList_New(<Py_ssize_t>n)
            h = q + 2
            j = 0
            while j < <Py_ssize_t>n:
                q = find_crlf(s, h, wend)  # the header line `$<len>`
                if q < 0 or q - h < 2 or s[h] != 36 or (s[h + 1] == 48 and q - h > 2):
                    break
                if not digits_value(s + h + 1, q - h - 1, &blen) or blen > <unsigned long long>(wend - q):
                    break
                b = q + 2
                if find_crlf(s, b, min(b + <Py_ssize_t>blen + 2, wend)) != b + <Py_ssize_t>blen:
                    break  # the bulk's first CRLF is not right after its announced length
                if <long long>blen > max_bulk:
                    break
                item = PyBytes_FromStringAndSize(s + b, <Py_ssize_t>blen)
                Py_INCREF(item)
                PyList_SET_ITEM(args, j, item)
                h = b + <Py_ssize_t>blen + 2
                j += 1
            if j < <Py_ssize_t>n:
                break  # args's unset items are NULL: its deallocation skips them
            PyList_Append(ready, args)
            p = h
        self._pos = p
        self._batch_debt = (wend - pos) - (p - pos)
        return 0

    cdef bint _find_line(self, bytearray buf, Py_ssize_t pos, char terminator, Py_ssize_t* found):
        """The reference's `_find_line`: the terminator's index in *found, or False when
        strchr() would not find one (none yet, or a NUL before it)."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t scan = self._scan
        cdef Py_ssize_t idx = find_byte(s, terminator, scan if scan > pos else pos, size)
        if idx < 0 or find_byte(s, 0, pos, idx) >= 0:
            self._scan = size
            return False
        found[0] = idx
        return True

    cdef bint _read_count(self, bytearray buf, Py_ssize_t pos) except -1:
        """The `*<count>\\r\\n` header; False when it is not complete yet."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t idx = find_byte(s, 13, pos, min(pos + 22, size))
        cdef unsigned long long count
        cdef long long value
        # Fast path: a plain positive count (at most 20 digits, so look no further).
        if pos + 1 < idx < size - 1 and s[pos + 1] != 48 \
                and digits_value(s + pos + 1, idx - pos - 1, &count):
            if count <= <unsigned long long>UNAUTH_MAX_MULTIBULK or (
                    self.authenticated and count <= <unsigned long long>PROTO_MAX_MULTIBULK):
                self._pos = idx + 2
                self._multibulk = <long long>count
                self._bulklen = -1
                self._argv = []
                return True
        if not self._find_line(buf, pos, 13, &idx):
            if size - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_MBULK_BIG)
            return False
        if idx + 1 >= size:  # Redis wants one more byte after '\r' (and never checks it)
            self._scan = idx
            return False
        if not string2ll(s + pos + 1, idx - pos - 1, &value) or value > PROTO_MAX_MULTIBULK:
            raise ProtocolError(ERR_MBULK_LEN)
        if value > UNAUTH_MAX_MULTIBULK and not self.authenticated:
            raise ProtocolError(ERR_UNAUTH_MBULK)
        self._pos = idx + 2
        if value > 0:
            self._multibulk = value
            self._bulklen = -1
            self._argv = []
        return True

    cdef int _check_bulklen(self, unsigned long long bulklen) except -1:
        if self.proto_max_bulk_len < 0 or bulklen > <unsigned long long>self.proto_max_bulk_len:
            raise ProtocolError(ERR_BULK_LEN)
        if bulklen > <unsigned long long>UNAUTH_MAX_BULK and not self.authenticated:
            raise ProtocolError(ERR_UNAUTH_BULK)
        return 0

    cdef long long _bulk_header_slow(self, bytearray buf, Py_ssize_t pos) except -2:
        """A bulk header the fast path did not accept: -1 while incomplete (or hidden by a NUL),
        an error, or the bulk length when it is valid after all."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t size = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t idx
        cdef long long bulklen
        cdef unsigned char first
        if not self._find_line(buf, pos, 13, &idx):
            if size - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_BULK_BIG)
            return -1
        if idx + 1 >= size:
            self._scan = idx
            return -1
        first = <unsigned char>s[pos]
        if first != 36:  # '$'
            shown = " " if first in (0x0D, 0x0A) else chr(first)  # addReplyErrorFormat: no CR/LF
            raise ProtocolError(
                f"ERR Protocol error: expected '$', got '{shown}'".encode("latin-1").decode(
                    "utf-8", "surrogateescape"
                )
            )
        if not string2ll(s + pos + 1, idx - pos - 1, &bulklen) or bulklen < 0:
            raise ProtocolError(ERR_BULK_LEN)
        self._check_bulklen(<unsigned long long>bulklen)
        return bulklen

    cdef object _read_bulks(self, bytearray buf):
        """The `$<len>\\r\\n<bytes>\\r\\n` arguments; the command once all are read, else None."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t end = PyByteArray_GET_SIZE(buf)
        cdef Py_ssize_t pos = self._pos, idx
        cdef list argv = self._argv
        cdef long long remaining = self._multibulk
        cdef long long bulklen = self._bulklen
        cdef unsigned long long header
        cdef long long limit = self.proto_max_bulk_len
        if limit > UNAUTH_MAX_BULK and not self.authenticated:
            limit = UNAUTH_MAX_BULK
        try:
            while remaining:
                if bulklen < 0:
                    # Fast paths: `$<digit>\r?`, then `$<digits>\r?` within reach; anything else
                    # (errors included) takes the slow path.
                    if pos + 3 < end and s[pos] == 36 and s[pos + 2] == 13 \
                            and is_digit(s[pos + 1]):
                        bulklen = s[pos + 1] - 48
                        pos += 4
                    else:
                        idx = find_byte(s, 13, pos, min(pos + 22, end))
                        if pos + 1 < idx < end - 1 and s[pos] == 36 and s[pos + 1] != 48 \
                                and digits_value(s + pos + 1, idx - pos - 1, &header):
                            pos = idx + 2
                            if header > <unsigned long long>limit:
                                self._check_bulklen(header)  # raises: over the limit
                            bulklen = <long long>header
                        else:
                            bulklen = self._bulk_header_slow(buf, pos)
                            if bulklen < 0:
                                break
                            pos = find_byte(s, 13, pos, end) + 2
                    if bulklen > limit:
                        self._check_bulklen(<unsigned long long>bulklen)
                if bulklen >= PROTO_MBULK_BIG_ARG:
                    pos, value = self._take_big(buf, pos, bulklen)
                    if value is None:
                        break
                    argv.append(value)
                    bulklen = -1
                    remaining -= 1
                    continue
                if end - pos < bulklen + 2:
                    break
                PyList_Append(argv, PyBytes_FromStringAndSize(s + pos, <Py_ssize_t>bulklen))
                pos += bulklen + 2  # Redis skips the two bytes after the bulk unchecked
                bulklen = -1
                remaining -= 1
        finally:
            self._pos = pos
            self._bulklen = bulklen
            self._multibulk = remaining
        if remaining:
            return None
        self._argv = []
        return argv

    cdef tuple _take_big(self, bytearray buf, Py_ssize_t pos, long long bulklen):
        """The reference's `_take_big`: a big bulk read apart from the shared buffer."""
        big = self._big
        cdef Py_ssize_t end = PyByteArray_GET_SIZE(buf)
        cdef long long want, take
        if big is None:
            if end - pos >= bulklen + 2:
                return pos + bulklen + 2, PyBytes_FromStringAndSize(
                    PyByteArray_AS_STRING(buf) + pos, <Py_ssize_t>bulklen)
            big = self._big = io.BytesIO()
        want = bulklen + 2 - big.tell()
        take = min(want, end - pos)
        with memoryview(buf) as view:
            big.write(view[pos: pos + take])
        pos += take
        if take < want:
            if big.tell() > self.query_buffer_limit and self._error is None:
                self._error = QueryBufferLimit(ERR_QUERY_BUFFER)  # Redis counts the bulk too
            return pos, None
        self._big = None
        big.truncate(bulklen)
        return pos, big.getvalue()

    cdef object _read_inline(self, bytearray buf, Py_ssize_t pos):
        """One inline request line (ends in \\n, an optional \\r before it is dropped)."""
        cdef const char* s = PyByteArray_AS_STRING(buf)
        cdef Py_ssize_t idx, end, i, start
        cdef list argv
        cdef char c
        cdef bint plain = True
        if not self._find_line(buf, pos, 10, &idx):
            if PyByteArray_GET_SIZE(buf) - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_INLINE_BIG)
            return None
        end = idx - 1 if idx > pos and s[idx - 1] == 13 else idx
        for i in range(pos, end):
            c = s[i]
            if c == 34 or c == 39 or c == 11 or c == 12:  # quotes, \v, \f: sdssplitargs's rules
                plain = False
                break
        if plain:  # split_inline_args's bytes.split(), done on the buffer
            argv = []
            i = pos
            while True:
                while i < end and inline_blank(s[i]):
                    i += 1
                if i >= end:
                    break
                start = i
                while i < end and not inline_blank(s[i]):
                    i += 1
                PyList_Append(argv, PyBytes_FromStringAndSize(s + start, i - start))
        else:
            argv = split_inline_args(PyBytes_FromStringAndSize(s + pos, end - pos))
        self._pos = idx + 1
        return argv


# --------------------------------------------------------------------------------------------
# Encoding replies
# --------------------------------------------------------------------------------------------

cdef struct Out:
    # The caller's bytearray (borrowed: write_reply's argument keeps it alive) grown ahead of
    # the bytes written; `size` is what was written, `cap` its length while growing.
    PyObject* buf
    char* data
    Py_ssize_t size
    Py_ssize_t cap
    bint plain  # type(out) is bytearray: no ReplyBuffer checks and no bulks by reference
    int protocol


cdef int grow(Out* o, Py_ssize_t need) except -1:
    # An eighth ahead, as bytearray's own growth: amortized linear, and a connection's big
    # output buffer is not given half as much again for one small reply.
    cdef Py_ssize_t want = o.size + need
    cdef Py_ssize_t cap = want + (want >> 3) + 64
    if PyByteArray_Resize(<object>o.buf, cap) < 0:
        return -1
    o.data = PyByteArray_AS_STRING(<object>o.buf)
    o.cap = cap
    return 0


cdef inline int reserve(Out* o, Py_ssize_t need) except -1:
    if o.size + need > o.cap:
        return grow(o, need)
    return 0


cdef int sync(Out* o) except -1:
    """Give the bytearray its exact length (the bytes written) before Python code sees it."""
    if o.cap != o.size:
        if PyByteArray_Resize(<object>o.buf, o.size) < 0:
            return -1
        o.cap = o.size
        o.data = PyByteArray_AS_STRING(<object>o.buf)
    return 0


cdef inline void resume(Out* o) noexcept:
    """Take the bytearray back after Python code appended to it."""
    o.size = o.cap = PyByteArray_GET_SIZE(<object>o.buf)
    o.data = PyByteArray_AS_STRING(<object>o.buf)


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
        return put_bytes(o, _resp_py._int_line(value, o.protocol))
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
        if (type(first) is list or type(first) is tuple) and len(first) == 2 \
                and PyBytes_CheckExact(item_at(first, 0)) \
                and (type(item_at(first, 1)) is list or type(item_at(first, 1)) is tuple):
            i = 0
            while i < n:
                write_items(o, items, i, min(i + ENTRIES_CHUNK, n))
                check(o)
                i += ENTRIES_CHUNK
            return 0
        if n > ENTRIES_CHUNK and not o.plain:
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
        return py_write(o, _resp_py._write_entry_array, entries)
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


cdef int write_other(Out* o, object value) except -1:
    """The reference's `_write_other`: maps, RESP3 types, errors, null arrays, subclasses."""
    cdef int protocol = o.protocol
    t = type(value)
    if t is EntryArray:
        return write_entry_array(o, value)
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
            return 0
        if type(items) is list or type(items) is tuple:
            return write_array(o, items)
        return py_write(o, _resp_py.write_reply, value)
    if t is Verbatim:
        return py_write(o, _resp_py._write_verbatim, value)
    if t is bytearray or t is memoryview:
        return write_value(o, bytes(value))
    if isinstance(value, (bool, int, str, bytes, list, tuple, float)):
        return write_value(o, _resp_py._base_value(value))  # subclasses (IntEnum, str enums)
    raise TypeError(f"cannot encode {t.__name__} as a RESP reply: {value!r}")


cdef int write_map(Out* o, object m) except -1:
    items = m.items
    if o.protocol == 3:
        put_line(o, 37, len(items))
        for k, v in items:
            write_value(o, k)
            write_value(o, v)
    elif m.as_pairs:
        if type(items) is list or type(items) is tuple:
            return write_array(o, items)  # each (k, v) tuple is a 2-element array
        return py_write(o, _resp_py._write_map, m)
    else:
        put_line(o, 42, 2 * len(items))
        for k, v in items:
            write_value(o, k)
            write_value(o, v)
    return 0


def write_reply(out, value, protocol):
    """Append one reply value to `out` (see the reference's `write_reply`)."""
    cdef Out o
    if not isinstance(out, bytearray) or (protocol != 2 and protocol != 3):
        return _resp_py.write_reply(out, value, protocol)  # nothing the server does
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
