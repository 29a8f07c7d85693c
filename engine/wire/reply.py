"""Reply values as commands produce them, before any wire encoding.

Owns the small vocabulary handlers reply with: `str` (simple string), `bytes` (bulk), `None` (null
bulk), `int`, `list` (array), `RespMap` (a map in RESP3; flat or as pairs in RESP2) and
`NULL_ARRAY` (RESP2 `*-1`); for RESP3-only shapes also `bool`, `float` (double), `HumanDouble` (a
double known by its text), `RespSet`, `Verbatim` and `Push`; `EntryArray` is an array of stream
entries the encoder may trust.
`to_plain` turns them into the embedded API's plain values. The RESP
encoder (`engine/wire/reply_encoder.py`) encodes the same values. Must not touch: engine state
or I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from streamkeep.engine.wire.errors import printable

try:  # a directive to mypyc (which has it): without the package, the same no-op
    from mypy_extensions import mypyc_attr
except ImportError:
    def mypyc_attr(*_flags: str, **_attrs: object) -> Callable[[type], type]:  # type: ignore[misc]
        return lambda cls: cls


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()


class _NoReply:
    """A command that sends nothing back (SHUTDOWN: the connection just closes)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_REPLY"


NO_REPLY: Final = _NoReply()


class RespMap:
    """An ordered map reply. In RESP2 Redis sends it flat (`k1 v1 k2 v2`) or, for XREAD-like
    replies, as an array of 2-element arrays (`as_pairs=True`).

    A map made by `of_columns` holds its keys then its values in one list (`columns`, as a
    packed hash reads them): the encoders write it without pairing; `items` pairs it once,
    for the readers that want pairs (scripts, to_plain)."""

    __slots__ = ("_items", "columns", "as_pairs")

    def __init__(self, items: list[tuple[Any, Any]], as_pairs: bool = False) -> None:
        self._items: list[tuple[Any, Any]] | None = items
        self.columns: list[Any] | None = None
        self.as_pairs = as_pairs

    @classmethod
    def of_columns(cls, columns: list[Any]) -> RespMap:
        """The flat map of `columns`: n keys then their n values."""
        m = cls.__new__(cls)
        m._items = None
        m.columns = columns
        m.as_pairs = False
        return m

    @property
    def items(self) -> list[tuple[Any, Any]]:
        items = self._items
        if items is None:
            columns = self.columns or []
            n = len(columns) >> 1
            items = self._items = list(zip(columns[:n], columns[n:], strict=True))
        return items

    @items.setter
    def items(self, items: list[tuple[Any, Any]]) -> None:
        self._items = items
        self.columns = None

    def __repr__(self) -> str:
        return f"RespMap({self.items!r})"


class RespSet:
    """A set reply: RESP3 `~`, a plain array in RESP2. Items keep their order."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return type(other) is RespSet and self.items == other.items

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RespSet({self.items!r})"


class Verbatim:
    """A verbatim string reply: RESP3 `=` with a 3-letter format (`txt`, `mkd`), a bulk string in
    RESP2."""

    __slots__ = ("text", "fmt")

    def __init__(self, text: str, fmt: str = "txt") -> None:
        self.text = text
        self.fmt = fmt

    def __eq__(self, other: object) -> bool:
        return type(other) is Verbatim and self.text == other.text and self.fmt == other.fmt

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Verbatim({self.text!r}, {self.fmt!r})"


class HumanDouble(bytes):
    """A double known by its text, `ld2string(LD_STR_HUMAN)`'s digits of a long double (INCREX
    BYFLOAT's numbers) or d2string's of a score: RESP3 `,text`, RESP2 a bulk string of the
    same text, as Redis's addReplyHumanLongDouble and addReplyDouble send it. A `float` would
    print `%.17g` of a double, where Redis prints the shortest digits (`0.1`, not
    `0.10000000000000001`).

    Its bytes are its text: a `bytes` subclass is made by CPython's own constructor, with no
    Python code run (every score of a sorted set's replies is one). It equals only another
    HumanDouble of the same text (a reply compared with a bulk string is not the same reply)."""

    __slots__ = ()

    @property
    def text(self) -> bytes:
        return bytes(self)

    def __eq__(self, other: object) -> bool:
        return type(other) is HumanDouble and bytes.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"HumanDouble({bytes(self)!r})"


class EntryArray:
    """An array of stream entries as the stream model's range reads build them, kept as two
    columns: `ids` (each entry's ID as bytes) and `fields` (each entry's flat
    `(field, value, ...)` tuple of bytes), with no deleted entry. It reads as the list
    `[[id, fields], ...]` (len, index, iterate, compare); the RESP encoder takes the columns
    as they are, so a range read builds no per-entry pair and the encoder checks no element's
    type (together about half of an XRANGE reply's cost). Anything else stays a plain `list`."""

    __slots__ = ("ids", "fields")

    def __init__(self, ids: list[bytes] | None = None,
                 fields: list[tuple[bytes, ...]] | None = None) -> None:
        self.ids: list[bytes] = [] if ids is None else ids
        self.fields: list[tuple[bytes, ...]] = [] if fields is None else fields

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return EntryArray(self.ids[i], self.fields[i])
        return [self.ids[i], self.fields[i]]

    def __iter__(self) -> Iterator[list]:
        return map(list, zip(self.ids, self.fields, strict=True))

    def __eq__(self, other: object) -> bool:
        if type(other) is EntryArray:
            return self.ids == other.ids and self.fields == other.fields
        return isinstance(other, list) and list(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EntryArray({list(self)!r})"


@mypyc_attr(native_class=False)
class PlainEntries(list):  # type: ignore[type-arg]
    """An array of stream entries already in the plain form an embedded caller gets,
    `[[id, [field, value, ...]], ...]` (the stream model builds it from its packed nodes):
    `to_plain` passes it through, the encoder writes it as the list it is. (A list subclass:
    a compiled module keeps it an ordinary Python class, `native_class=False`, as a native
    class cannot derive from list.)"""

    __slots__ = ()


class PackedEntries:
    """An array of stream entries already written as RESP: the elements of the reply (each
    `*2 id *n field value ...`, the same in RESP2 and RESP3), `count` of them. The stream
    model writes them straight from its packed nodes for a connection's reply; the encoder
    copies them. Anything that reads the entries as values (an embedded caller, a script)
    gets them decoded once, as an EntryArray (`entries()`). `cut`: the model (or a command,
    engine.exec.reply_budget) stopped writing past the connection's output budget (the reply
    cannot be sent whole: encoding it closes the connection, as the output limit does for any
    reply, without the reply being built first)."""

    __slots__ = ("resp", "count", "cut", "_decoded")

    def __init__(self, resp: bytearray | bytes, count: int, cut: bool = False) -> None:
        self.resp = resp
        self.count = count
        self.cut = cut
        self._decoded: EntryArray | None = None

    def entries(self) -> EntryArray:
        if self.cut:
            # (A script reading it gets this as its error line, after "ERR ".)
            raise ValueError("reply over the client's output limit (client-output-buffer-limit)")
        if self._decoded is None:
            self._decoded = _decode_entries(self.resp, self.count)
        return self._decoded

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: Any) -> Any:
        return self.entries()[i]

    def __iter__(self) -> Iterator[list]:
        return iter(self.entries())

    def __eq__(self, other: object) -> bool:
        if type(other) is PackedEntries:
            return bytes(self.resp) == bytes(other.resp) and self.count == other.count
        return self.entries() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedEntries({list(self.entries())!r})"


def _decode_entries(resp: bytearray | bytes, count: int) -> EntryArray:
    """The entries of a PackedEntries as columns: a RESP reader for exactly this shape
    (trusted: the model wrote it), bulk strings only."""
    ids: list[bytes] = []
    fields: list[tuple[bytes, ...]] = []
    data = bytes(resp)
    pos = 0

    def header(pos: int) -> tuple[int, int]:
        eol = data.index(b"\r\n", pos)
        return int(data[pos + 1:eol]), eol + 2

    def bulk(pos: int) -> tuple[bytes, int]:
        n, pos = header(pos)
        return data[pos:pos + n], pos + n + 2

    for _ in range(count):
        _two, pos = header(pos)
        idb, pos = bulk(pos)
        n, pos = header(pos)
        flat = []
        for _ in range(n):
            x, pos = bulk(pos)
            flat.append(x)
        ids.append(idb)
        fields.append(tuple(flat))
    return EntryArray(ids, fields)


class Push:
    """An out-of-band push message: RESP3 `>`, a plain array in RESP2."""

    __slots__ = ("items",)

    def __init__(self, items: list) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return type(other) is Push and self.items == other.items

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Push({self.items!r})"


def to_plain(value: Any) -> Any:
    """RESP2-shaped plain Python values: maps flattened, null arrays as None.

    The lists a handler returns are fresh and converted in place; tuples (entries' fields, which
    are the stream's own immutable storage) become new lists."""
    t = type(value)
    if t is list:
        _plain_list(value)
        return value
    if t is EntryArray:
        return [[idb, list(fields)] for idb, fields in zip(value.ids, value.fields, strict=True)]
    if t is PackedEntries:
        return to_plain(value.entries())
    if t is PlainEntries:
        return value
    if value is NULL_ARRAY:
        return None
    if t is Verbatim:
        return value.text.encode("utf-8", "surrogateescape")
    if t is HumanDouble:
        return value.text
    if t is RespMap or t is RespSet or t is Push:
        items = _items_of(value)
        _plain_list(items)
        return items
    return value


def _items_of(value: RespMap | RespSet | Push) -> list:
    """An aggregate's items as the RESP2 array it is sent as (not converted yet)."""
    if type(value) is not RespMap:
        return list(value.items)
    if value.as_pairs:
        return [[k, v] for k, v in value.items]
    return [x for pair in value.items for x in pair]


def _plain_list(items: list) -> None:
    """to_plain of a list, in place, with a stack of its own rather than recursion: a script's
    reply may nest thousands of levels deep (a table that holds itself: 7,995)."""
    stack = [items]
    while stack:
        items = stack.pop()
        for i, x in enumerate(items):
            t = type(x)
            if t is bytes or t is int:
                continue
            if t is tuple:
                items[i] = list(x)
            elif t is list:
                stack.append(x)
            elif t is EntryArray or t is PackedEntries:
                items[i] = to_plain(x)
            elif x is NULL_ARRAY:
                items[i] = None
            elif t is Verbatim:
                items[i] = x.text.encode("utf-8", "surrogateescape")
            elif t is HumanDouble:
                items[i] = x.text
            elif t is RespMap or t is RespSet or t is Push:
                items[i] = inner = _items_of(x)
                stack.append(inner)


def help_reply(argv0: bytes, lines: list[str]) -> list[str]:
    """addReplyHelp: a heading naming the command as typed (uppercased), the lines, HELP."""
    heading = f"{printable(argv0).upper()} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    return [heading, *lines, "HELP", "    Print this help."]
