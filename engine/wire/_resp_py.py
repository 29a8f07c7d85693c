"""The RESP codec's hot half, in pure Python: the reference that `_resp_c.pyx` compiles.

Owns: reply encoding (`write_reply`, `encode_reply` and their helpers; the connection output
buffer `ReplyBuffer` with `OutputLimitReached`), the server's incremental request parser
(`RequestParser`, with Redis's exact protocol-error lines and limits) and what both twins
share: the limits, the error classes (`ProtocolError`, `QueryBufferLimit`), `format_double`
and the inline-command splitter (`split_inline_args`). The compiled twin imports these shared
names from here, so an error or a buffer is the same class whichever twin runs.
`engine.wire.resp` is the facade: it picks the twin and keeps the rest of the codec.

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks).
"""

from __future__ import annotations

import io
import math
from collections import deque
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, Final

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import NULL_ARRAY, EntryArray, Push, RespMap, RespSet, Verbatim

__all__ = [
    "BIG_BULK",
    "PROTO_INLINE_MAX_SIZE",
    "OutputLimitReached",
    "ProtocolError",
    "QueryBufferLimit",
    "ReplyBuffer",
    "RequestParser",
    "encode_reply",
    "format_double",
    "split_inline_args",
    "write_reply",
]

# Limits, as Redis 7.x/8.x define them.
PROTO_INLINE_MAX_SIZE: Final = 64 * 1024  # an inline request or header line without terminator
PROTO_MAX_MULTIBULK: Final = 2**31 - 1  # INT_MAX since Redis 7.0 (1024*1024 before)
UNAUTH_MAX_MULTIBULK: Final = 10  # CVE-2021-32675: before AUTH at most 10 arguments ...
UNAUTH_MAX_BULK: Final = 16384  # ... of at most 16 KiB each
UNAUTH_QUERY_BUFFER_LIMIT: Final = 1024 * 1024  # and a query buffer of at most 1 MiB
_LLONG_MAX: Final = 2**63 - 1
_LLONG_MIN: Final = -(2**63)
_LONG_STR_SIZE: Final = 21  # string2ll refuses strings this long or longer
_COMPACT_AT: Final = 64 * 1024  # parsed bytes kept before the buffer is compacted
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
ERR_QUOTES: Final = "ERR Protocol error: unbalanced quotes in request"
ERR_UNAUTH_MBULK: Final = "ERR Protocol error: unauthenticated multibulk length"
ERR_UNAUTH_BULK: Final = "ERR Protocol error: unauthenticated bulk length"
ERR_QUERY_BUFFER: Final = "ERR Closing client that reached max query buffer length"


class ProtocolError(StreamkeepError):
    """Malformed RESP from a peer (a client's request, or a reply a peer sent us). Not a
    `ReplyError`: a caller catching error replies never mistakes a corrupt stream for a
    refusal. `str(err)` is the exact line Redis replies with before it closes the connection
    (`reply()` makes it the error reply); the parser stays failed (every later `next()` raises
    the same error)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def __str__(self) -> str:
        return self.line

    def reply(self) -> ReplyError:
        """The error reply a server sends before closing the connection."""
        return ReplyError(self.line)


class QueryBufferLimit(ProtocolError):
    """The unparsed query buffer grew past its limit (`client-query-buffer-limit`; 1 MiB before
    authentication). Redis replies nothing: it logs "Closing client that reached max query buffer
    length" and closes the connection; the server does the same."""


# --------------------------------------------------------------------------------------------
# Encoding replies
# --------------------------------------------------------------------------------------------

_CRLF: Final = b"\r\n"
_SMALL: Final = 1024
_BULK_HDR: Final = tuple(b"$%d\r\n" % n for n in range(_SMALL))
_BULK_LINE: Final = tuple(b"$%d" % n for n in range(_SMALL))  # request headers, CRLF split off
_ARRAY_HDR: Final = tuple(b"*%d\r\n" % n for n in range(_SMALL))
_INT_REPLY: Final = tuple(b":%d\r\n" % n for n in range(_SMALL))
_NULL: Final = (b"", b"", b"$-1\r\n", b"_\r\n")  # indexed by protocol
_NULL_ARRAY: Final = (b"", b"", b"*-1\r\n", b"_\r\n")
_TRUE: Final = (b"", b"", b":1\r\n", b"#t\r\n")
_FALSE: Final = (b"", b"", b":0\r\n", b"#f\r\n")


_ARRAY_LINE: Final = tuple(b"*%d" % n for n in range(_SMALL))
_SEQUENCES: Final = frozenset((list, tuple))
_ENTRIES_MIN: Final = 8  # an array this long may take the entries fast path
_ENTRIES_CHUNK: Final = 2048  # entries encoded per join (bounds the token list)
_first, _second = itemgetter(0), itemgetter(1)
_ENTRY_HEAD: Final = tuple(b"*2\r\n$%d" % n for n in range(_SMALL))  # an entry's first line pair

BIG_BULK: Final = 64 * 1024
"""A bulk this long or longer is kept by reference in a `ReplyBuffer`, not copied into it."""


class OutputLimitReached(StreamkeepError):
    """A reply being encoded into a `ReplyBuffer` grew past the buffer's `limit`: the encoding
    stops there (the caller closes the client, as Redis does past the hard limit)."""


class ReplyBuffer(bytearray):
    """A connection's output: the encoded bytes, except that every bulk of `BIG_BULK` bytes or
    more is kept by reference (`big`: (offset in the bytearray, the bulk's object)) instead of
    being copied in, so a big value leaves by the transport without a copy of it in the buffer;
    `parts()` is the output in order. With `limit` > 0, encoding raises `OutputLimitReached`
    once `size()` passes it, checked as the reply is produced (each bulk of `_SMALL` bytes or
    more, each chunk of a long array), not after it is built whole. A plain bytearray given to
    `write_reply` gets every byte copied in and no check."""

    __slots__ = ("big", "big_size", "limit")

    def __init__(self, limit: int = 0) -> None:
        super().__init__()
        self.big: list[tuple[int, bytes]] = []
        self.big_size = 0  # the bytes in `big`
        self.limit = limit

    def size(self) -> int:
        """The output's length in bytes, the bulks kept by reference included."""
        return len(self) + self.big_size

    def bulk(self, value: bytes) -> None:
        """A bulk string of `_SMALL` bytes or more (the encoder's rarer branch)."""
        n = len(value)
        self += b"$%d\r\n" % n
        if n >= BIG_BULK and type(value) is bytes:  # immutable: safe to send later
            self.big.append((len(self), value))
            self.big_size += n
        else:
            self += value
        self += _CRLF
        self.check()

    def check(self) -> None:
        if self.limit and len(self) + self.big_size > self.limit:
            raise OutputLimitReached(f"reply over the output limit of {self.limit} bytes")

    def extend_buffer(self, other: ReplyBuffer) -> None:
        """Append another buffer's output (its big bulks still by reference)."""
        base = len(self)
        self.big += [(base + offset, value) for offset, value in other.big]
        self.big_size += other.big_size
        self += other

    def parts(self) -> list[bytes | bytearray]:
        """The output in order: slices of the bytearray (copies) and the big bulks' objects."""
        if not self.big:
            return [bytes(self)] if self else []
        out: list[bytes | bytearray] = []
        prev = 0
        for offset, value in self.big:
            if offset > prev:
                out.append(self[prev:offset])
            out.append(value)
            prev = offset
        if prev < len(self):
            out.append(self[prev:])
        return out

    def materialized(self) -> bytearray:
        """All of the output in one bytearray (copies the big bulks: a rare path's)."""
        return bytearray(b"".join(self.parts()))


def encode_reply(value: Any, protocol: int = 2) -> bytes:
    """One reply value as RESP2 (`protocol=2`) or RESP3 (`protocol=3`) bytes."""
    if protocol != 2 and protocol != 3:
        raise ValueError(f"protocol is 2 or 3, not {protocol!r}")
    out = bytearray()
    write_reply(out, value, protocol)
    return bytes(out)


def write_reply(out: bytearray, value: Any, protocol: int) -> None:
    """Append one reply value to `out` (the connection's output buffer).

    `str` simple string, `bytes`/`bytearray`/`memoryview` bulk, `None` null, `int` integer,
    `bool` boolean, `float` double, `list`/`tuple` array, `RespMap`, `RespSet`, `Verbatim`,
    `Push`, `NULL_ARRAY` and `ReplyError` instances (error line)."""
    t = type(value)
    if t is bytes:
        n = len(value)
        if n < _SMALL:
            out += _BULK_HDR[n]
            out += value
            out += _CRLF
        else:
            _big_bulk(out, value)
    elif t is list or t is tuple:
        _write_array(out, value, protocol)
    elif t is int:
        out += _INT_REPLY[value] if 0 <= value < _SMALL else _int_line(value, protocol)
    elif t is str:
        out += b"+"
        out += value.encode("utf-8", "surrogateescape")
        out += _CRLF
    elif value is None:
        out += _NULL[protocol]
    else:
        _write_other(out, value, protocol)


def _big_bulk(out: bytearray, value: bytes) -> None:
    """A bulk of `_SMALL` bytes or more: a `ReplyBuffer` may keep it by reference."""
    if type(out) is bytearray:
        out += b"$%d\r\n" % len(value)
        out += value
        out += _CRLF
    else:
        out.bulk(value)  # type: ignore[attr-defined]


def _write_array(out: bytearray, items: list | tuple, protocol: int) -> None:
    """An array. A long one shaped like stream entries, [[id, [field, value, ...]], ...], goes by
    chunks through the entries fast path (`_write_entries`, which falls back to the generic loop
    for a chunk of any other shape); a `ReplyBuffer`'s limit is checked after each chunk."""
    n = len(items)
    out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
    if n >= _ENTRIES_MIN:
        first = items[0]
        if type(first) in _SEQUENCES and len(first) == 2 and type(first[0]) is bytes \
                and type(first[1]) in _SEQUENCES:
            _write_entry_chunks(out, items, protocol)
            return
        if n > _ENTRIES_CHUNK and type(out) is not bytearray:
            for i in range(0, n, _ENTRIES_CHUNK):
                _write_items(out, items[i: i + _ENTRIES_CHUNK], protocol)
                out.check()  # type: ignore[attr-defined]
            return
    _write_items(out, items, protocol)


def _write_entry_array(out: bytearray, entries: EntryArray, protocol: int) -> None:
    """The model's entries, by chunks of its two columns: their shape is known, so the fast path
    builds no pairs and checks no types."""
    n = len(entries)
    out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
    ids, fields = entries.ids, entries.fields
    for i in range(0, n, _ENTRIES_CHUNK):
        chunk_ids, chunk_fields = ids[i: i + _ENTRIES_CHUNK], fields[i: i + _ENTRIES_CHUNK]
        if not _write_columns(out, chunk_ids, chunk_fields, True):
            _write_items(out, list(map(list, zip(chunk_ids, chunk_fields, strict=True))),
                         protocol)
        if type(out) is not bytearray:
            out.check()  # type: ignore[attr-defined]


def _write_entry_chunks(out: bytearray, items: list | tuple, protocol: int) -> None:
    for i in range(0, len(items), _ENTRIES_CHUNK):
        chunk = items[i: i + _ENTRIES_CHUNK]
        if not _write_entries(out, chunk):
            _write_items(out, chunk, protocol)
        if type(out) is not bytearray:
            out.check()  # type: ignore[attr-defined]


def _write_entries(out: bytearray, entries: list | tuple) -> bool:
    """Stream entries in any list, [[id, [field, value, ...]], ...]: their shape checked in C
    (sets of types and lengths), then `_write_columns`. False, with nothing written, for any
    other shape (the caller then takes the generic loop): the bytes are the same either way."""
    if not set(map(type, entries)) <= _SEQUENCES or set(map(len, entries)) != {2}:
        return False
    ids = list(map(_first, entries))
    fields = list(map(_second, entries))
    if not set(map(type, fields)) <= _SEQUENCES or set(map(type, ids)) != {bytes}:
        return False  # e.g. a deleted entry's nil: [id, nil]
    return _write_columns(out, ids, fields, False)


def _write_columns(out: bytearray, ids: list[bytes], fields: list, trusted: bool) -> bool:
    """Entries given as their IDs and their flat field lists, with the same number of fields
    each and every bulk under `_SMALL` bytes, as one `b"\\r\\n".join` over their lines laid
    out by slice assignment: the per-element work runs in C (map, chain, slicing,
    itemgetter). A field name that every entry of the chunk shares is one constant element
    with its `$<len>` line, so neither is looked up per entry. False, with nothing written,
    for any other shape. `trusted` (an `EntryArray`) skips the check that every field and
    value is bytes; a wrong element still fails in C (len, join) before anything is written."""
    try:
        counts = set(map(len, fields))
        if len(counts) != 1:
            return False
        k = counts.pop()
        flat = list(chain.from_iterable(fields))
        if not k or k >= _SMALL or (not trusted and set(map(type, flat)) != {bytes}):
            return False
        columns = _entry_columns(ids, flat, k)
        period = len(columns)
        lines: list[bytes] = [b""] * (len(ids) * period)
        for i, column in enumerate(columns):
            lines[i::period] = column
        lines.append(b"")  # the join then ends in CRLF
        out += b"\r\n".join(lines)
    except (IndexError, TypeError):  # a bulk of _SMALL bytes or more, or a wrong element
        return False
    return True


def _entry_columns(ids: list[bytes], flat: list[bytes], k: int) -> list[Sequence[bytes]]:
    """The join's elements for m entries of k fields, column by column: each entry's
    `*2\\r\\n$<id len>`, its ID, then per field or value either its `$<len>` line and its
    bulk, or (a field name the chunk's entries share) one constant element holding both; the
    `*<k>` line is folded into the first element after the ID."""
    m = len(ids)
    columns: list[Sequence[bytes]] = [_lines_of(ids, _ENTRY_HEAD), ids]
    prefix = _ARRAY_HDR[k]
    for j in range(k):
        column = flat[j::k]
        if j % 2 == 0 and len(set(column)) == 1:
            name = column[0]
            columns.append([prefix + _BULK_LINE[len(name)] + _CRLF + name] * m)
        else:
            heads = _lines_of(column, _BULK_LINE)
            columns.append([prefix + h for h in heads] if prefix else heads)
            columns.append(column)
        prefix = b""
    return columns


def _lines_of(bulks: list[bytes], table: tuple[bytes, ...] = _BULK_LINE
              ) -> list[bytes] | tuple[bytes, ...]:
    """Each bulk's line by its length from `table` (IndexError for one of _SMALL bytes or more);
    itemgetter looks them all up in one C call."""
    if len(bulks) < 2:  # itemgetter of one index returns the item, not a tuple
        return [table[len(b)] for b in bulks]
    lines: tuple[bytes, ...] = itemgetter(*map(len, bulks))(table)
    return lines


def _write_items(out: bytearray, items: list | tuple, protocol: int) -> None:
    """An array's elements, its bytes/int elements and one more nesting level written inline:
    no function call per element."""
    for x in items:
        t = type(x)
        if t is bytes:
            n = len(x)
            if n < _SMALL:
                out += _BULK_HDR[n]
                out += x
                out += _CRLF
            else:
                _big_bulk(out, x)
        elif t is list or t is tuple:
            n = len(x)
            out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
            for y in x:
                t = type(y)
                if t is bytes:
                    n = len(y)
                    if n < _SMALL:
                        out += _BULK_HDR[n]
                        out += y
                        out += _CRLF
                    else:
                        _big_bulk(out, y)
                elif t is list or t is tuple:
                    _write_array(out, y, protocol)
                else:
                    write_reply(out, y, protocol)
        elif t is int:
            out += _INT_REPLY[x] if 0 <= x < _SMALL else _int_line(x, protocol)
        else:
            write_reply(out, x, protocol)


def _int_line(value: int, protocol: int) -> bytes:
    if _LLONG_MIN <= value <= _LLONG_MAX:
        return b":%d\r\n" % value
    # Outside a long long: a RESP3 big number; RESP2 has none, modules send a bulk string.
    if protocol == 3:
        return b"(%d\r\n" % value
    digits = b"%d" % value
    return b"$%d\r\n%b\r\n" % (len(digits), digits)


def _write_other(out: bytearray, value: Any, protocol: int) -> None:
    """The less frequent shapes: maps, RESP3 types, errors, null arrays, other byte buffers."""
    t = type(value)
    if t is EntryArray:
        _write_entry_array(out, value, protocol)
    elif t is RespMap:
        _write_map(out, value, protocol)
    elif value is NULL_ARRAY:
        out += _NULL_ARRAY[protocol]
    elif t is bool:
        out += _TRUE[protocol] if value else _FALSE[protocol]
    elif t is float:
        text = format_double(value)
        if protocol == 3:
            out += b",%b\r\n" % text
        else:
            out += b"$%d\r\n%b\r\n" % (len(text), text)
    elif isinstance(value, ReplyError | ProtocolError):  # an error line either way
        line = str(value).replace("\r", " ").replace("\n", " ")
        out += b"-%b\r\n" % line.encode("utf-8", "surrogateescape")
    elif t is RespSet or t is Push:
        _write_aggregate(out, value.items, b"~" if t is RespSet else b">", protocol)
    elif t is Verbatim:
        _write_verbatim(out, value, protocol)
    elif t is bytearray or t is memoryview:
        write_reply(out, bytes(value), protocol)
    elif isinstance(value, bool | int | str | bytes | list | tuple | float):
        write_reply(out, _base_value(value), protocol)  # subclasses (IntEnum, str enums, ...)
    else:
        raise TypeError(f"cannot encode {t.__name__} as a RESP reply: {value!r}")


def _base_value(value: Any) -> Any:
    bases: tuple[type, ...] = (bool, int, float, str, bytes, list, tuple)
    for base in bases:
        if isinstance(value, base):
            return base(value)
    raise AssertionError(value)


def _write_map(out: bytearray, m: RespMap, protocol: int) -> None:
    items = m.items
    if protocol == 3:
        out += b"%%%d\r\n" % len(items)
        for k, v in items:
            write_reply(out, k, protocol)
            write_reply(out, v, protocol)
    elif m.as_pairs:
        _write_array(out, items, protocol)  # each (k, v) tuple is a 2-element array
    else:
        n = 2 * len(items)
        out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
        for k, v in items:
            write_reply(out, k, protocol)
            write_reply(out, v, protocol)


def _write_aggregate(out: bytearray, items: list, kind: bytes, protocol: int) -> None:
    if protocol == 3:
        out += b"%b%d\r\n" % (kind, len(items))
        for x in items:
            write_reply(out, x, protocol)
    else:
        _write_array(out, items, protocol)


def _write_verbatim(out: bytearray, value: Verbatim, protocol: int) -> None:
    text = value.text.encode("utf-8", "surrogateescape")
    if protocol == 3:
        fmt = value.fmt.encode("ascii")
        if len(fmt) != 3:
            raise ValueError(f"a verbatim string's format has 3 characters, not {value.fmt!r}")
        out += b"=%d\r\n%b:%b\r\n" % (len(text) + 4, fmt, text)
    else:
        out += b"$%d\r\n%b\r\n" % (len(text), text)


def format_double(value: float) -> bytes:
    """A double as Redis 7.0's addReplyDouble prints it: `%.17g`, with `inf`/`-inf`/`nan`."""
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    if math.isnan(value):
        return b"nan"
    return b"%.17g" % value


# --------------------------------------------------------------------------------------------
# Parsing requests (server side)
# --------------------------------------------------------------------------------------------


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
        return value if value >= _LLONG_MIN else None
    return value if value <= _LLONG_MAX else None


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
        if pos:
            if pos == len(buf):
                buf.clear()
                self._pos = self._scan = 0
            elif pos >= _COMPACT_AT:
                del buf[:pos]  # O(1) in CPython: the bytearray advances its start
                self._pos = 0
                self._scan = max(0, self._scan - pos)
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


_BLANKS: Final = frozenset(b" \t\n\r\x0b\x0c")  # C isspace()
_TOKEN_ENDS: Final = frozenset(b" \t\n\r")
_ESCAPES: Final = {ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("b"): 0x08, ord("a"): 0x07}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


def split_inline_args(line: bytes) -> list[bytes]:
    """An inline request's arguments, split like Redis's sdssplitargs: blanks separate, "double
    quotes" take \\xHH and \\n \\r \\t \\b \\a escapes, 'single quotes' take \\', and a closing
    quote must be followed by a blank or the end. Raises ProtocolError on unbalanced quotes."""
    if b'"' not in line and b"'" not in line and b"\x0b" not in line and b"\x0c" not in line:
        return line.split()  # same result when no quotes and no \v/\f are involved
    return _split_quoted(line)


def _split_quoted(line: bytes) -> list[bytes]:
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _BLANKS:
            i += 1
        if i >= n:
            return args
        token = bytearray()
        quote = 0  # the open quote character, 0 outside quotes
        while True:
            c = line[i] if i < n else 0
            if quote == 0x22:  # "double quotes"
                if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 and _is_hex(line, i + 2):
                    token.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and i + 1 < n:
                    i += 1
                    token.append(_ESCAPES.get(line[i], line[i]))
                elif c == 0x22:
                    _check_after_quote(line, i + 1)
                    break
                elif i >= n:
                    raise ProtocolError(ERR_QUOTES)
                else:
                    token.append(c)
            elif quote == 0x27:  # 'single quotes'
                if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    token.append(0x27)
                elif c == 0x27:
                    _check_after_quote(line, i + 1)
                    break
                elif i >= n:
                    raise ProtocolError(ERR_QUOTES)
                else:
                    token.append(c)
            elif i >= n or c in _TOKEN_ENDS:
                break
            elif c == 0x22 or c == 0x27:
                quote = c
            else:
                token.append(c)
            i += 1
        args.append(bytes(token))
        i += 1  # past the delimiter or the closing quote


def _is_hex(line: bytes, i: int) -> bool:
    return line[i] in _HEX and line[i + 1] in _HEX


def _check_after_quote(line: bytes, i: int) -> None:
    """A closing quote must be followed by a blank or by the end of the line."""
    if i < len(line) and line[i] not in _BLANKS:
        raise ProtocolError(ERR_QUOTES)
