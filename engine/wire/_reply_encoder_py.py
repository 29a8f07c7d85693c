"""Reply encoding in pure Python: the reference that `_reply_encoder_c.pyx` compiles.

Owns encoding reply values (`engine.wire.reply`'s vocabulary) for RESP2 or RESP3 (`write_reply`,
`encode_reply` and their helpers; long XRANGE-shaped arrays through a fast path of the same
bytes), `format_double`, and the connection output buffer that keeps big bulks by reference and
stops a reply at its size limit while encoding it (`ReplyBuffer`, `OutputLimitReached`). The
compiled twin imports the buffer, the error and its rare paths from here, so a buffer is the
same class whichever twin runs. `engine.wire.reply_encoder` is the facade: it picks the twin.

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, Final

from streamkeep.engine.wire.args import LLONG_MAX, LLONG_MIN
from streamkeep.engine.wire.errors import ProtocolError, ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import (
    NULL_ARRAY,
    EntryArray,
    HumanDouble,
    PackedEntries,
    PlainEntries,
    Push,
    RespMap,
    RespSet,
    Verbatim,
)

_CRLF: Final = b"\r\n"
_SMALL: Final = 1024
_BULK_HDR: Final = tuple(b"$%d\r\n" % n for n in range(_SMALL))
_BULK_LINE: Final = tuple(b"$%d" % n for n in range(_SMALL))  # bulk headers, CRLF split off
_ARRAY_HDR: Final = tuple(b"*%d\r\n" % n for n in range(_SMALL))
_INT_REPLY: Final = tuple(b":%d\r\n" % n for n in range(_SMALL))
_NULL: Final = (b"", b"", b"$-1\r\n", b"_\r\n")  # indexed by protocol
_NULL_ARRAY: Final = (b"", b"", b"*-1\r\n", b"_\r\n")
_TRUE: Final = (b"", b"", b":1\r\n", b"#t\r\n")
_FALSE: Final = (b"", b"", b":0\r\n", b"#f\r\n")

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
    `bool` boolean, `float` and `HumanDouble` double, `list`/`tuple` array, `RespMap`, `RespSet`,
    `Verbatim`, `Push`, `NULL_ARRAY` and `ReplyError` instances (error line). A reply nested deeper than
    Python's recursion allows (a script's table holding itself makes 7,995 levels) is encoded
    again without recursion."""
    mark = len(out)
    big = len(out.big) if type(out) is not bytearray else 0  # type: ignore[attr-defined]
    try:
        _write_value(out, value, protocol)
    except RecursionError:
        _rewind(out, mark, big)
        _write_deep(out, value, protocol)


def _rewind(out: bytearray, mark: int, big: int) -> None:
    """Drop what was appended to `out` since it was `mark` bytes long with `big` big bulks."""
    del out[mark:]
    if type(out) is not bytearray:
        dropped = out.big[big:]  # type: ignore[attr-defined]
        del out.big[big:]  # type: ignore[attr-defined]
        out.big_size -= sum(len(value) for _, value in dropped)  # type: ignore[attr-defined]


def _write_deep(out: bytearray, value: Any, protocol: int) -> None:
    """write_reply with an explicit stack for the aggregates (arrays, maps, sets, pushes)."""
    stack = [value]
    checked = type(out) is not bytearray
    while stack:
        v = stack.pop()
        t = type(v)
        if t is list or t is tuple:
            out += b"*%d\r\n" % len(v)
            stack.extend(reversed(v))
        elif t is RespMap:
            if protocol == 3 or not v.as_pairs:
                out += (b"%%%d\r\n" if protocol == 3 else b"*%d\r\n") % (
                    len(v.items) * (1 if protocol == 3 else 2))
                stack.extend(reversed([x for pair in v.items for x in pair]))
            else:
                out += b"*%d\r\n" % len(v.items)
                stack.extend(reversed([list(pair) for pair in v.items]))
        elif t is RespSet or t is Push:
            kind = (b"~" if t is RespSet else b">") if protocol == 3 else b"*"
            out += b"%b%d\r\n" % (kind, len(v.items))
            stack.extend(reversed(v.items))
        else:
            _write_value(out, v, protocol)
            continue
        if checked:
            out.check()  # type: ignore[attr-defined]


def _write_value(out: bytearray, value: Any, protocol: int) -> None:
    """write_reply's body (what the encoder's own recursion calls)."""
    t = type(value)
    if t is bytes:
        _write_bulk(out, value)
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


def _write_bulk(out: bytearray, value: bytes) -> None:
    """A bulk string: small ones through the header table (the commonest reply item)."""
    n = len(value)
    if n < _SMALL:
        out += _BULK_HDR[n]
        out += value
        out += _CRLF
    else:
        _big_bulk(out, value)


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
    """An array's elements, and those of arrays nested in it, dispatched by type here rather
    than through write_reply (the reference's one concession to speed: the compiled twin is
    what the server runs)."""
    for x in items:
        t = type(x)
        if t is bytes:
            _write_bulk(out, x)
        elif t is list or t is tuple:
            n = len(x)
            out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
            for y in x:
                t = type(y)
                if t is bytes:
                    _write_bulk(out, y)
                elif t is list or t is tuple:
                    _write_array(out, y, protocol)
                else:
                    _write_value(out, y, protocol)
        elif t is int:
            out += _INT_REPLY[x] if 0 <= x < _SMALL else _int_line(x, protocol)
        else:
            _write_value(out, x, protocol)


def _int_line(value: int, protocol: int) -> bytes:
    if LLONG_MIN <= value <= LLONG_MAX:
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
    elif t is PlainEntries:
        _write_array(out, value, protocol)
    elif t is PackedEntries:
        out += _ARRAY_HDR[value.count] if value.count < _SMALL else b"*%d\r\n" % value.count
        out += value.resp
        if value.cut:
            raise OutputLimitReached("reply over the output limit (cut while read)")
        if type(out) is not bytearray:
            out.check()  # type: ignore[attr-defined]
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
    elif t is HumanDouble:
        _write_human_double(out, value, protocol)
    elif t is bytearray or t is memoryview:
        _write_value(out, bytes(value), protocol)
    elif isinstance(value, bool | int | str | bytes | list | tuple | float):
        _write_value(out, _base_value(value), protocol)  # subclasses (IntEnum, str enums, ...)
    else:
        raise TypeError(f"cannot encode {t.__name__} as a RESP reply: {value!r}")


def _base_value(value: Any) -> Any:
    bases: tuple[type, ...] = (bool, int, float, str, bytes, list, tuple)
    for base in bases:
        if isinstance(value, base):
            return base(value)
    raise AssertionError(value)


def _write_map(out: bytearray, m: RespMap, protocol: int) -> None:
    columns = m.columns
    if columns is not None:  # keys then values: paired as they are written
        n = len(columns) >> 1
        if protocol == 3:
            out += b"%%%d\r\n" % n
        else:
            out += _ARRAY_HDR[2 * n] if 2 * n < _SMALL else b"*%d\r\n" % (2 * n)
        _write_pairs(out, zip(columns[:n], columns[n:], strict=True), protocol)
        return
    items = m.items
    if protocol == 3:
        out += b"%%%d\r\n" % len(items)
        _write_pairs(out, items, protocol)
    elif m.as_pairs:
        _write_array(out, items, protocol)  # each (k, v) tuple is a 2-element array
    else:
        n = 2 * len(items)
        out += _ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n
        _write_pairs(out, items, protocol)


def _write_pairs(out: bytearray, items: Any, protocol: int) -> None:
    """A map's pairs, a `ReplyBuffer`'s limit checked after each chunk of them (a big hash's
    HGETALL is stopped while it is encoded, as an array is)."""
    checked = type(out) is not bytearray
    for i, (k, v) in enumerate(items, 1):
        _write_value(out, k, protocol)
        _write_value(out, v, protocol)
        if checked and not i % _ENTRIES_CHUNK:
            out.check()  # type: ignore[attr-defined]


def _write_aggregate(out: bytearray, items: list, kind: bytes, protocol: int) -> None:
    if protocol == 3:
        out += b"%b%d\r\n" % (kind, len(items))
        checked = type(out) is not bytearray
        for i, x in enumerate(items, 1):
            _write_value(out, x, protocol)
            if checked and not i % _ENTRIES_CHUNK:
                out.check()  # type: ignore[attr-defined]
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


def _write_human_double(out: bytearray, value: HumanDouble, protocol: int) -> None:
    text = value.text
    if protocol == 3:
        out += b",%b\r\n" % text
    else:
        out += b"$%d\r\n%b\r\n" % (len(text), text)


def human_integer(n: int) -> HumanDouble:
    """A HumanDouble of an integer's decimal text (d2string's text of an integral score), n a
    64-bit integer (the kernel's OverflowError past one)."""
    if not LLONG_MIN <= n <= LLONG_MAX:
        raise OverflowError("Python int too large to convert to C long")
    return HumanDouble(b"%d" % n)


def format_double(value: float) -> bytes:
    """A double as Redis 7.0's addReplyDouble prints it: `%.17g`, with `inf`/`-inf`/`nan`."""
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    if math.isnan(value):
        return b"nan"
    return b"%.17g" % value

