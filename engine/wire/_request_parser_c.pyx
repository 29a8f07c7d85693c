# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The server's request parser, compiled: `RequestParser` with the same commands, errors and
buffer states as `_request_parser_py.py` (the reference, which documents the rules), without a
Python object per byte or per line.

It reads the parser's own bytearray through its pointer, taken afresh at each call (only
`feed()` resizes the buffer, never while a call runs); every index is checked against the
buffer's length before it is read, so no `boundscheck` is needed. The rare paths (big bulks,
quoted inline commands, error lines) run the same Python as the reference.

Must not touch: anything but the bytes given to it (no I/O, no engine state).
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF
from libc.string cimport memchr

import io

from streamkeep.engine.wire._request_parser_py import ERR_BULK_BIG, ERR_BULK_LEN, ERR_INLINE_BIG, ERR_MBULK_BIG, ERR_MBULK_LEN, ERR_QUERY_BUFFER, ERR_UNAUTH_BULK, ERR_UNAUTH_MBULK
from streamkeep.engine.wire._request_parser_py import QueryBufferLimit
from streamkeep.engine.wire.errors import ProtocolError
from streamkeep.engine.wire.inline import split_inline_args

# The reference's limits (see _request_parser_py for what each is).
cdef Py_ssize_t PROTO_INLINE_MAX_SIZE = 64 * 1024
cdef long long PROTO_MAX_MULTIBULK = 2**31 - 1
cdef long long UNAUTH_MAX_MULTIBULK = 10
cdef long long UNAUTH_MAX_BULK = 16384
cdef long long UNAUTH_QUERY_BUFFER_LIMIT = 1024 * 1024
cdef Py_ssize_t COMPACT_AT = 64 * 1024
cdef long long PROTO_MBULK_BIG_ARG = 32 * 1024

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
    for any sequence of calls (see _request_parser_py.RequestParser for the rules)."""

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
        # `bulklen + 2` is never computed: proto-max-bulk-len may be LLONG_MAX, and a header
        # that large would overflow it (the sums below are rearranged to stay in range).
        cdef long long rest, take
        if big is None:
            if end - pos - 2 >= bulklen:
                return pos + bulklen + 2, PyBytes_FromStringAndSize(
                    PyByteArray_AS_STRING(buf) + pos, <Py_ssize_t>bulklen)
            big = self._big = io.BytesIO()
        rest = bulklen - big.tell()  # the bulk's bytes still to come, its CRLF apart
        take = end - pos
        if rest <= take - 2:
            take = rest + 2
        with memoryview(buf) as view:
            big.write(view[pos: pos + take])
        pos += take
        if take - 2 < rest:
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
