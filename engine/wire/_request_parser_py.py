"""The server's request parser in pure Python: the reference that `_request_parser_c.pyx`
compiles.

Owns the incremental parser of client requests (`RequestParser`: multibulk and inline, Redis's
exact protocol-error lines and limits, modelled on processInlineBuffer/processMultibulkBuffer in
Redis's src/networking.c) and what both twins share: the limits, the error lines and
`QueryBufferLimit`. The compiled twin imports these shared names from here, so an error is the
same class whichever twin runs; `ProtocolError` itself is engine.wire.errors', and a quoted
inline command is split by engine.wire.inline. Also the buffer compaction rule
(`drop_parsed`), which the client's reply parser follows too. `engine.wire.request_parser` is
the facade: it picks the twin.

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks).
"""

from __future__ import annotations

import io
from collections import deque
from typing import Final

from streamkeep.engine.wire.args import LLONG_MAX, LLONG_MIN
from streamkeep.engine.wire.errors import ProtocolError
from streamkeep.engine.wire.inline import split_inline_args

# Limits, as Redis 7.x/8.x define them.
PROTO_INLINE_MAX_SIZE: Final = 64 * 1024  # an inline request or header line without terminator
PROTO_MAX_MULTIBULK: Final = 2**31 - 1  # INT_MAX since Redis 7.0 (1024*1024 before)
UNAUTH_MAX_MULTIBULK: Final = 10  # CVE-2021-32675: before AUTH at most 10 arguments ...
UNAUTH_MAX_BULK: Final = 16384  # ... of at most 16 KiB each
UNAUTH_QUERY_BUFFER_LIMIT: Final = 1024 * 1024  # and a query buffer of at most 1 MiB
_LONG_STR_SIZE: Final = 21  # string2ll refuses strings this long or longer
COMPACT_AT: Final = 64 * 1024  # parsed bytes kept before the buffer is compacted
# The batch fast path splits at most this many buffered bytes at a time: about a thousand
# small requests, parsed in a millisecond or two, so a long pipeline gives way to other
# clients between batches (the server's time slices cannot cut one batch short).
_BATCH_WINDOW = 16 * 1024
# A bulk this long or longer is read apart from the shared buffer, straight into its own bytes
# object (Redis's PROTO_MBULK_BIG_ARG): one copy, and the buffer never grows to hold it.
PROTO_MBULK_BIG_ARG: Final = 32 * 1024

# Redis's protocol error lines (addReplyError prefixes "ERR ").
ERR_MBULK_LEN: Final = "ERR Protocol error: invalid multibulk length"
ERR_MBULK_BIG: Final = "ERR Protocol error: too big mbulk count string"
ERR_BULK_LEN: Final = "ERR Protocol error: invalid bulk length"
ERR_BULK_BIG: Final = "ERR Protocol error: too big bulk count string"
ERR_INLINE_BIG: Final = "ERR Protocol error: too big inline request"
ERR_UNAUTH_MBULK: Final = "ERR Protocol error: unauthenticated multibulk length"
ERR_UNAUTH_BULK: Final = "ERR Protocol error: unauthenticated bulk length"
ERR_QUERY_BUFFER: Final = "ERR Closing client that reached max query buffer length"


class QueryBufferLimit(ProtocolError):
    """The unparsed query buffer grew past its limit (`client-query-buffer-limit`; 1 MiB before
    authentication). Redis replies nothing: it logs "Closing client that reached max query buffer
    length" and closes the connection; the server does the same."""


# The batch fast path's header lines (`$<len>`, the CRLF split off) for bulks under _SMALL bytes.
_SMALL: Final = 1024
_BULK_LINE: Final = tuple(b"$%d" % n for n in range(_SMALL))


def drop_parsed(buf: bytearray, pos: int) -> bool:
    """A parser's buffer before new bytes are appended to it: drop the `pos` bytes already
    parsed when they are all of it, or once they pass COMPACT_AT (O(1) in CPython: the bytearray
    advances its start). True when they were dropped: the parse position is 0 again."""
    if pos == len(buf):
        buf.clear()
        return True
    if pos >= COMPACT_AT:
        del buf[:pos]
        return True
    return False


def _string2ll(s: bytes | bytearray) -> int | None:
    """Redis's string2ll: optional '-', no '+', no spaces, no leading zeros, fits a long long."""
    n = len(s)
    if n == 0 or n >= _LONG_STR_SIZE:
        return None
    if n == 1 and s[0] == 0x30:
        return 0
    digits = s[1:] if s[0] == 0x2D else s
    if not digits or not digits.isdigit() or digits[0] == 0x30:
        return None
    value = int(digits)
    if s[0] == 0x2D:
        value = -value
        return value if value >= LLONG_MIN else None
    return value if value <= LLONG_MAX else None


class RequestParser:
    """Incremental parser of client requests (multibulk and inline), Redis's rules and errors.

    `feed(data)` buffers bytes; `next()` returns the next complete command as a list of bytes
    arguments, or None when it needs more bytes. Empty inline lines and `*0`/`*-N` requests are
    skipped, as Redis does. Malformed input makes `next()` raise `ProtocolError` (the server
    replies with the error and closes the connection). Like Redis, which checks the query buffer
    right after every read, a `feed()` that leaves more than `query_buffer_limit` unparsed bytes
    fails the parser: `next()` then raises `QueryBufferLimit` (the server closes the connection
    without a reply) even if complete commands are buffered. `feed()` itself never raises. Once
    failed, `next()` raises the same error again.

    Set `authenticated = False` while a password is required and the client has not
    authenticated: multibulk requests are then limited to 10 arguments of 16 KiB each and the
    query buffer to 1 MiB (Redis's CVE-2021-32675 limits).
    """

    __slots__ = (
        "_ready",
        "_batch_debt",
        "proto_max_bulk_len",
        "query_buffer_limit",
        "authenticated",
        "_buf",
        "_pos",
        "_scan",
        "_argv",
        "_multibulk",
        "_bulklen",
        "_big",
        "_error",
    )

    def __init__(
        self,
        proto_max_bulk_len: int = 512 * 1024 * 1024,
        query_buffer_limit: int = 1024 * 1024 * 1024,
    ) -> None:
        self.proto_max_bulk_len = proto_max_bulk_len
        self.query_buffer_limit = query_buffer_limit
        self.authenticated = True
        self._buf = bytearray()
        self._pos = 0  # start of the unparsed bytes
        self._scan = 0  # the line starting at _pos has no terminator before _scan
        self._argv: list[bytes] = []  # arguments of the multibulk request being read
        self._multibulk = 0  # arguments still to read (0: between requests)
        self._bulklen = -1  # length of the bulk being read (-1: its header is next)
        self._big: io.BytesIO | None = None  # a big bulk (and its CRLF) being read, see _take_big
        self._error: ProtocolError | None = None
        self._ready: deque[list[bytes]] = deque()  # commands the batch fast path parsed
        self._batch_debt = 0  # bytes the batch split but did not take (see _parse_batch)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes received from the client."""
        buf = self._buf
        pos = self._pos
        if pos and drop_parsed(buf, pos):
            self._pos = 0
            self._scan = max(0, self._scan - pos)  # (0 when all was parsed: _scan <= len(buf))
        buf += data
        limit = self.query_buffer_limit
        if not self.authenticated and limit > UNAUTH_QUERY_BUFFER_LIMIT:
            limit = UNAUTH_QUERY_BUFFER_LIMIT
        if len(buf) - self._pos > limit and self._error is None:
            self._error = QueryBufferLimit(ERR_QUERY_BUFFER)

    def pending_bytes(self) -> int:
        """Bytes buffered but not parsed yet (Redis's query buffer length, which the limit is
        about)."""
        big = self._big
        return len(self._buf) - self._pos + (big.tell() if big is not None else 0)

    def next(self) -> list[bytes] | None:
        """The next complete command, or None until more bytes are fed."""
        ready = self._ready
        if ready:
            return ready.popleft()
        if self._error is not None:
            raise self._error
        buf = self._buf
        pos = self._pos
        if not self._multibulk and self._batch_debt <= 0 and pos < len(buf) \
                and buf[pos] == 0x2A and _BATCH_WINDOW:
            self._parse_batch(buf, pos)
            if ready:
                return ready.popleft()
        try:
            return self._next_slow(buf)
        finally:
            # What the byte-by-byte parser consumed pays off the batch's unused scan.
            self._batch_debt -= self._pos - pos

    def _next_slow(self, buf: bytearray) -> list[bytes] | None:
        """The byte-by-byte parser: one command, or None until more bytes are fed."""
        try:
            while True:
                if self._multibulk:
                    return self._read_bulks(buf)
                pos = self._pos
                if pos >= len(buf):
                    return None
                if buf[pos] == 0x2A:  # '*': a multibulk request
                    if not self._read_count(buf, pos):
                        return None
                    continue
                argv = self._read_inline(buf, pos)
                if argv is None or argv:
                    return argv
        except ProtocolError as err:
            self._error = err
            raise

    def _parse_batch(self, buf: bytearray, pos: int) -> None:
        """The fast path for pipelines: split the next _BATCH_WINDOW buffered bytes at CRLF
        once (in C) and take
        every leading request that is plainly formed (`*<n>` with 0 < n within the limits, then
        n pairs `$<len>` / exactly len bytes, every line ending in CRLF) as it is. The first
        request that is anything else, incomplete, or containing CRLF in a bulk, stops the batch
        and is left to the byte-by-byte parser, which applies Redis's rules and errors: what the
        batch accepts, that parser would parse the same way.

        Linear whatever the input: the bytes split but not taken are a debt (`_batch_debt`) the
        byte-by-byte parser pays off, by consuming as many, before the batch is tried again. So
        no input makes the batch split the same bytes over and over (a request with CRLF in a
        bulk once did, at every request after it), and a pipeline the batch cannot take costs
        what the byte-by-byte parser costs (about 2x the batch's time per request)."""
        with memoryview(buf) as view:
            window = bytes(view[pos: pos + _BATCH_WINDOW])
        toks = window.split(b"\r\n")
        last = len(toks) - 1  # toks[last] follows the last CRLF: not a complete line
        if self.authenticated:
            max_count, max_bulk = PROTO_MAX_MULTIBULK, self.proto_max_bulk_len
        else:
            max_count, max_bulk = UNAUTH_MAX_MULTIBULK, min(self.proto_max_bulk_len,
                                                             UNAUTH_MAX_BULK)
        ready = self._ready
        heads_of = _BULK_LINE.__getitem__
        small_ok = max_bulk >= _SMALL  # bulks found in _BULK_LINE are within the limit
        i = 0
        while i < last:
            head = toks[i]
            count = head[1:]
            if not (head[:1] == b"*" and count.isdigit() and count[0] != 0x30):
                break
            n = int(count)
            end = i + 1 + 2 * n
            if n > max_count or end > last:
                break
            args = toks[i + 2: end: 2]
            try:  # every header must be exactly `$<len of its bulk>`
                heads = list(map(heads_of, map(len, args)))
                checked = small_ok
            except IndexError:  # a bulk of 1024 bytes or more
                heads = [b"$%d" % len(a) for a in args]
                checked = False
            if toks[i + 1: end: 2] != heads or (not checked and max(map(len, args)) > max_bulk):
                break
            ready.append(args)
            i = end
        taken = sum(map(len, toks[:i])) + 2 * i
        self._pos = pos + taken
        self._batch_debt = len(window) - taken

    def release(self) -> None:
        """Drop every buffer (the connection is gone): nothing waits for the collector."""
        self._buf = bytearray()
        self._pos = self._scan = 0
        self._argv = []
        self._ready.clear()
        self._big = None
        self._multibulk = 0
        self._bulklen = -1
        if self._error is not None:  # its traceback's frames hold this parser and its buffer
            self._error.__traceback__ = None

    def _find_line(self, buf: bytearray, pos: int, terminator: bytes) -> int:
        """Index of the terminator ending the line at `pos`, or -1 when Redis's strchr() would
        not find one: none buffered yet, or a NUL byte before it (strchr stops at NUL, so such a
        line only ends in a "too big" error)."""
        scan = self._scan
        idx = buf.find(terminator, scan if scan > pos else pos)
        if idx < 0 or buf.find(b"\0", pos, idx) >= 0:
            self._scan = len(buf)
            return -1
        return idx

    def _read_count(self, buf: bytearray, pos: int) -> bool:
        """The `*<count>\\r\\n` header; False when it is not complete yet."""
        # Fast path: a plain positive count (at most 20 digits, so look no further).
        idx = buf.find(b"\r", pos, pos + 22)
        header = buf[pos + 1 : idx] if pos + 1 < idx < len(buf) - 1 else b""
        if header.isdigit() and header[0] != 0x30:
            count = int(header)
            if count <= UNAUTH_MAX_MULTIBULK or (
                self.authenticated and count <= PROTO_MAX_MULTIBULK
            ):
                self._pos = idx + 2
                self._multibulk = count
                self._bulklen = -1
                self._argv = []
                return True
        return self._read_count_slow(buf, pos)

    def _read_count_slow(self, buf: bytearray, pos: int) -> bool:
        idx = self._find_line(buf, pos, b"\r")
        if idx < 0:
            if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_MBULK_BIG)
            return False
        if idx + 1 >= len(buf):  # Redis wants one more byte after '\r' (and never checks it)
            self._scan = idx
            return False
        count = _string2ll(buf[pos + 1 : idx])
        if count is None or count > PROTO_MAX_MULTIBULK:
            raise ProtocolError(ERR_MBULK_LEN)
        if count > UNAUTH_MAX_MULTIBULK and not self.authenticated:
            raise ProtocolError(ERR_UNAUTH_MBULK)
        self._pos = idx + 2
        if count > 0:
            self._multibulk = count
            self._bulklen = -1
            self._argv = []
        return True

    def _read_bulks(self, buf: bytearray) -> list[bytes] | None:
        """The `$<len>\\r\\n<bytes>\\r\\n` arguments; the command once all are read, else None."""
        pos = self._pos
        end = len(buf)
        argv = self._argv
        remaining = self._multibulk
        bulklen = self._bulklen
        limit = self.proto_max_bulk_len
        if limit > UNAUTH_MAX_BULK and not self.authenticated:
            limit = UNAUTH_MAX_BULK
        find = buf.find
        try:
            while remaining:
                if bulklen < 0:
                    # Fast paths: `$<digit>\r?`, then `$<digits>\r?` within reach (a long long has
                    # at most 20 digits); anything else (errors included) takes the slow path.
                    if (
                        pos + 3 < end
                        and buf[pos] == 0x24
                        and buf[pos + 2] == 0x0D
                        and 0x30 <= buf[pos + 1] <= 0x39
                    ):
                        bulklen = buf[pos + 1] - 0x30
                        pos += 4
                    else:
                        idx = find(b"\r", pos, pos + 22)
                        header = buf[pos + 1 : idx] if pos + 1 < idx < end - 1 else b""
                        if header.isdigit() and buf[pos] == 0x24 and header[0] != 0x30:
                            bulklen = int(header)
                            pos = idx + 2
                        else:
                            bulklen = self._bulk_header_slow(buf, pos)
                            if bulklen < 0:
                                break
                            pos = find(b"\r", pos) + 2
                    if bulklen > limit:
                        self._check_bulklen(bulklen)
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
                argv.append(bytes(buf[pos : pos + bulklen]))
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

    def _take_big(self, buf: bytearray, pos: int, bulklen: int) -> tuple[int, bytes | None]:
        """A big bulk: (new position, its bytes once all arrived, else None).

        Buffered whole: one copy out of the buffer. Otherwise its bytes (and the CRLF after it,
        skipped unchecked as Redis does) move from the buffer into a BytesIO of their own as they
        arrive, so the shared buffer only ever holds what one read brought, and at the end
        BytesIO.getvalue() hands over its internal bytes object without copying it (CPython
        does so when the buffer is not exported; truncate() first drops the CRLF in place)."""
        big = self._big
        end = len(buf)
        if big is None:
            if end - pos >= bulklen + 2:
                with memoryview(buf) as view:
                    return pos + bulklen + 2, bytes(view[pos : pos + bulklen])
            big = self._big = io.BytesIO()
        want = bulklen + 2 - big.tell()
        take = min(want, end - pos)
        with memoryview(buf) as view:
            big.write(view[pos : pos + take])
        pos += take
        if take < want:
            if big.tell() > self.query_buffer_limit and self._error is None:
                self._error = QueryBufferLimit(ERR_QUERY_BUFFER)  # Redis counts the bulk too
            return pos, None
        self._big = None
        big.truncate(bulklen)
        return pos, big.getvalue()

    def _bulk_header_slow(self, buf: bytearray, pos: int) -> int:
        """A bulk header the fast path did not accept: incomplete (-1), hidden by a NUL (-1 or too
        big), or an error. Returns the bulk length when it is valid after all."""
        idx = self._find_line(buf, pos, b"\r")
        if idx < 0:
            if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_BULK_BIG)
            return -1
        if idx + 1 >= len(buf):
            self._scan = idx
            return -1
        first = buf[pos]
        if first != 0x24:  # '$'
            shown = " " if first in (0x0D, 0x0A) else chr(first)  # addReplyErrorFormat: no CR/LF
            raise ProtocolError(
                f"ERR Protocol error: expected '$', got '{shown}'".encode("latin-1").decode(
                    "utf-8", "surrogateescape"
                )
            )
        bulklen = _string2ll(buf[pos + 1 : idx])
        if bulklen is None or bulklen < 0:
            raise ProtocolError(ERR_BULK_LEN)
        self._check_bulklen(bulklen)
        return bulklen

    def _check_bulklen(self, bulklen: int) -> None:
        if bulklen > self.proto_max_bulk_len:
            raise ProtocolError(ERR_BULK_LEN)
        if bulklen > UNAUTH_MAX_BULK and not self.authenticated:
            raise ProtocolError(ERR_UNAUTH_BULK)

    def _read_inline(self, buf: bytearray, pos: int) -> list[bytes] | None:
        """One inline request line (ends in \\n, an optional \\r before it is dropped)."""
        idx = self._find_line(buf, pos, b"\n")
        if idx < 0:
            if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
                raise ProtocolError(ERR_INLINE_BIG)
            return None
        end = idx - 1 if idx > pos and buf[idx - 1] == 0x0D else idx
        argv = split_inline_args(bytes(buf[pos:end]))
        self._pos = idx + 1
        return argv

