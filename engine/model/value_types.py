"""The value types a key can hold, registered in one place.

Owns `ValueType`, what the keyspace knows of a type without knowing its commands: the word TYPE
and `SCAN ... TYPE` use, the type's slot among the engine's per-type keyspaces (each database
keeps one dict per type, `EngineState.keyspaces[slot][db]`; a key is in one of them at most), the
Python class of its values (and any lighter class the keyspace keeps some of them as: a small
hash's bare pack, opened with `ValueType.open`), OBJECT ENCODING's word for a value, MEMORY
USAGE's estimate, how the snapshot's keys table stores a value (None for a type with tables of
its own, as a stream's nodes are), the in-memory copy COPY makes, and whether a big value is
kept as nodes that may go cold (`nodes`: engine.model.residency.ValueNodes, a list's). `TYPES` is the registry,
in slot order: every generic keyspace operation (TYPE, EXISTS, DEL, RENAME, COPY, SCAN,
FLUSHDB, INFO keyspace, expiry, WRONGTYPE, the snapshot's keys table, the state digest) loops
over it, so a new type is its own modules plus one line here.

Must not touch: commands, replies, I/O, the engine's state (a type is described here, its keys
are kept by the engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamkeep.engine.model import lists
from streamkeep.engine.model.hashes import Hash, as_hash, copy_value, stored
from streamkeep.engine.model.list_node import node_count
from streamkeep.engine.model.lists import QuickList
from streamkeep.engine.model.packed_hash import PackedHash
from streamkeep.engine.model.residency import ValueNodes, node_bytes
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.model.zset import ZSet

# OBJECT ENCODING of a string: Redis keeps an integer that fits a long as a number, a short
# string in one allocation with its header ("embstr", up to 44 bytes), a longer one apart.
EMBSTR_SIZE_LIMIT = 44
_LONG_DIGITS = 20  # "-9223372036854775808"


@dataclass(frozen=True)
class ValueType:
    """One type of value (see the module docstring)."""

    name: str  # TYPE's reply and SCAN's TYPE filter
    slot: int  # its keyspace: EngineState.keyspaces[slot][db]
    value_class: type
    encoding: Callable[[Any], str]  # OBJECT ENCODING
    memory_usage: Callable[[Any], int]  # MEMORY USAGE's part for the value (key and entry apart)
    # The snapshot's keys table stores a value as these bytes (`from_bytes` gives the value as
    # the keyspace keeps it); None: the type's own tables.
    to_bytes: Callable[[Any], bytes] | None = None
    from_bytes: Callable[[bytes], Any] | None = None
    # COPY's copy, sharing nothing with the value; None: through the type's DUMP payload.
    copy: Callable[[Any], Any] | None = None
    # What the state digest hashes of a value (msgpack-able): its content, not its encoding
    # (a loaded snapshot may hold a value in another encoding); None: its `to_bytes`.
    digest: Callable[[Any], Any] | None = None
    # A keyspace's value as an object of `value_class`, for generic code that calls its
    # methods (a small hash is kept bare, as its pack: engine.model.packed_hash); None: as is.
    view: Callable[[Any], Any] | None = None
    # Other classes the keyspace keeps values of this type as (`type_of` knows them).
    stored_as: tuple[type, ...] = ()
    # A big value kept as nodes that may go cold (a `backlog-memory` budget): what the
    # residency, the snapshot and INFO need of them; None: the type keeps no such nodes.
    nodes: ValueNodes | None = None

    def open(self, value: Any) -> Any:
        """`value` (from this type's keyspace) as an object of `value_class`."""
        return value if self.view is None else self.view(value)


def string_encoding(value: bytes) -> str:
    """OBJECT ENCODING of a string as Redis stores a value SET made: "int" for a canonical
    integer that fits 64 bits, "embstr" up to 44 bytes, "raw" beyond. (Redis also makes a
    short string "raw" once APPEND or SETRANGE changed it in place; streamkeep keeps the bytes,
    not how they were made, so such a value reads as "embstr" here.)"""
    if 0 < len(value) <= _LONG_DIGITS and _is_canonical_long(value):
        return "int"
    return "embstr" if len(value) <= EMBSTR_SIZE_LIMIT else "raw"


def _is_canonical_long(value: bytes) -> bool:
    """string2ll's test: digits with an optional minus, no leading zero, no '+', in range."""
    digits = value[1:] if value[:1] == b"-" else value
    if not digits.isdigit() or (digits[:1] == b"0" and (len(digits) > 1 or value[:1] == b"-")):
        return False
    number = int(value)
    return -(1 << 63) <= number < (1 << 63)


def string_memory(value: bytes) -> int:
    """A string's allocation as Redis sizes it: the object header (16), the sds header and the
    bytes with their terminator, rounded to jemalloc's 8-byte classes; an int costs the header."""
    if string_encoding(value) == "int":
        return 16
    return 16 + ((len(value) + 4 + 7) & ~7)


def stream_memory(stream: Stream) -> int:
    """A stream's nodes (resident and cold: MEMORY USAGE counts the value, wherever it lives),
    with their index, plus its groups' entries at a consumer group's per-entry cost."""
    total = sum(node_bytes(node.count, len(node.lp)) for node in stream.nodes
                if node.lp is not None)
    _cold_nodes, cold_entries, cold_bytes = stream.cold_counts()
    total += node_bytes(cold_entries, cold_bytes) if cold_bytes else 0
    for group in stream.groups.values():
        total += 64 + 48 * len(group.pel) + 64 * len(group.consumers)
    return total + 64


STREAM = ValueType("stream", 0, Stream, lambda _s: "stream", stream_memory)
STRING = ValueType("string", 1, bytes, string_encoding, string_memory,
                   to_bytes=bytes, from_bytes=bytes, copy=bytes)

ZSET = ValueType("zset", 2, ZSet, lambda z: z.encoding, lambda z: z.memory_usage(),
                 to_bytes=ZSet.to_bytes, from_bytes=ZSet.from_bytes, copy=ZSet.copy,
                 digest=lambda z: [pair for item in z.items() for pair in item])

# (Every function of a hash reads it through `as_hash`: a small plain hash is a PackedHash.)
HASH = ValueType("hash", 3, Hash, lambda h: as_hash(h).encoding,
                 lambda h: as_hash(h).memory_usage(),
                 to_bytes=lambda h: as_hash(h).to_bytes(),
                 from_bytes=lambda data: stored(Hash.from_bytes(data)),
                 copy=copy_value,
                 digest=lambda h: [sorted(as_hash(h).items()),
                                   sorted(as_hash(h).fields_with_expiry())],
                 view=as_hash, stored_as=(PackedHash,))
SET = ValueType("set", 4, RSet, lambda s: s.encoding, lambda s: s.memory_usage(),
                to_bytes=RSet.to_bytes, from_bytes=RSet.from_bytes, copy=RSet.copy,
                digest=lambda s: sorted(s))  # (a big set's order is its hash table's)



def _list_view(value: bytearray | QuickList) -> QuickList:
    """A list as a QuickList (a listpack, kept bare in the keyspace as its bytearray, wrapped
    as one node: `len` counts elements)."""
    return value if isinstance(value, QuickList) else QuickList([value], node_count(value))


# (A small list is kept bare, as its listpack: a bytearray, which no other type is kept as.)
LIST = ValueType("list", 5, QuickList, lists.encoding, lists.memory_usage,
                 to_bytes=lists.to_bytes, from_bytes=lists.from_bytes, copy=lists.copy,
                 digest=lambda v: list(lists.elements(v)), view=_list_view,
                 stored_as=(bytearray,), nodes=lists.NODES)

TYPES: tuple[ValueType, ...] = (STREAM, STRING, ZSET, HASH, SET, LIST)
BY_NAME = {t.name: t for t in TYPES}
BY_CLASS = {t.value_class: t for t in TYPES}
_BY_STORED_CLASS = {cls: t for t in TYPES for cls in (t.value_class, *t.stored_as)}


def type_of(value: object) -> ValueType:
    """The registered type of a value, in its class or one the keyspace keeps it as (KeyError
    for a class no type has)."""
    return _BY_STORED_CLASS[type(value)]


__all__ = ["BY_CLASS", "BY_NAME", "HASH", "LIST", "SET", "STREAM", "STRING", "TYPES", "ZSET", "ValueType",
           "string_encoding", "type_of"]
