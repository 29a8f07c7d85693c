"""Each value type's contents as a table of rows: what the offline tools show and export of a key.

Owns `ValueTable` and `VALUE_TABLES`, one entry per type (engine.model.value_types): the name of
its export table, the columns of one element (a string's value, a sorted set's member and score,
a hash's field, value and field expiry, a set's member, a list's index and element) and how a
decoded value yields its rows. The Spark export (tools.export.datasource) makes a table of each,
typed from the columns' kinds; `snapshot dump` (tools.inspect.snapshot) renders a value from the
same rows, as text or JSON. An entry is on while its type is registered (`available`), so a
type's entry may come before its type: adding a type is its registry line and one entry here. A
registered type without an entry is still listed (the `keys` table, `snapshot info`), its
contents not shown.

`elements` is how a reader gets a key's element rows: a value in its keys row decoded by its
type, a big value stored in chunks (snapshot.values) read from the snapshot a chunk at a time,
whose elements come in these columns already, so a 1M-member value is never held whole.

Must not touch: the types' models (read through the methods the entries name), the snapshot
format (values come decoded, by the type's own `from_bytes`, or as the read API's chunk
elements), pyspark (the export maps kinds to Spark types itself; this module stays importable
without it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from streamkeep.engine.model import lists, value_types

# binary: bytes; double: a float (a score: Redis's reply text when shown); expiry: an absolute
# Unix time in ms, or None for none; index: an element's position (0: a list's head; not shown
# by `snapshot dump`, whose elements come in order).
Kind = Literal["binary", "double", "expiry", "index"]


@dataclass(frozen=True)
class Column:
    """One column of an element row."""

    name: str
    kind: Kind


@dataclass(frozen=True)
class ValueTable:
    """One type's element table (see the module docstring)."""

    type_name: str  # the registry's name (value_types.BY_NAME), TYPE's word
    table: str  # the export table's name
    columns: tuple[Column, ...]  # one element's columns (after db, key and key_str)
    rows: Callable[[Any], Iterable[tuple]]  # a decoded value's element rows, in its order
    key_expiry: bool = False  # a row also carries the key's expiry (expire_ms)

    def available(self) -> bool:
        """Whether the type is registered (its keys can be in a snapshot)."""
        return self.type_name in value_types.BY_NAME

    def decode(self, stored: bytes) -> Any:
        """A keys-table value (the bytes the type's `to_bytes` wrote) as the type's object."""
        vt = value_types.BY_NAME[self.type_name]
        assert vt.from_bytes is not None, f"{self.type_name} has no keys-table form"
        return vt.open(vt.from_bytes(stored))  # (a small hash is kept bare: its Hash)


def _hash_rows(value: Any) -> Iterator[tuple]:
    expiry = value.field_expiry
    return ((field, data, expiry(field)) for field, data in value.items())


VALUE_TABLES: tuple[ValueTable, ...] = (
    ValueTable("string", "strings", (Column("value", "binary"),), lambda v: ((v,),),
               key_expiry=True),
    ValueTable("zset", "zset_members", (Column("member", "binary"), Column("score", "double")),
               lambda z: z.items()),
    ValueTable("hash", "hash_fields", (Column("field", "binary"), Column("value", "binary"),
                                       Column("field_expire_ms", "expiry")), _hash_rows),
    ValueTable("set", "set_members", (Column("member", "binary"),),
               lambda s: ((m,) for m in s)),
    ValueTable("list", "list_elements", (Column("index", "index"), Column("element", "binary")),
               lambda v: enumerate(lists.elements(v))),
)
BY_TYPE = {t.type_name: t for t in VALUE_TABLES}
BY_TABLE = {t.table: t for t in VALUE_TABLES}

# The tables every snapshot has, streams apart: one row per key of any type.
KEYS_TABLE = "keys"
STREAM_TABLES = ("entries", "streams", "groups", "pending", "consumers")


def elements(snap: Any, row: Any) -> Iterable[tuple]:
    """The element rows of keys row `row` (snapshot.reader.KeyInfo) of snapshot `snap`, in its
    type's columns: a chunked value's read chunk by chunk, as they are used; a value in its
    row decoded whole (it is small)."""
    if row.chunked is not None:
        return snap.value_elements(row)  # type: ignore[no-any-return]
    table = BY_TYPE[row.type]
    return table.rows(table.decode(row.value))


def available() -> list[ValueTable]:
    """The entries whose type is registered, in VALUE_TABLES' order."""
    return [t for t in VALUE_TABLES if t.available()]


def export_tables() -> tuple[str, ...]:
    """Every table an export can write now: the stream tables, `keys`, and one per registered
    type with an entry."""
    return (*STREAM_TABLES, KEYS_TABLE, *(t.table for t in available()))


def type_counts(stream_keys: int, type_names: Iterable[str | None]) -> dict[str, int]:
    """Keys per type, every registered type named (0 for none), in the registry's slot order:
    `stream_keys` streams and the keys table's type names (None: a stream's TTL row, counted
    among the streams already)."""
    counts = {t.name: 0 for t in value_types.TYPES}
    counts[value_types.STREAM.name] = stream_keys
    for name in type_names:
        if name is not None:
            counts[name] = counts.get(name, 0) + 1
    return counts


__all__ = ["BY_TABLE", "BY_TYPE", "KEYS_TABLE", "STREAM_TABLES", "VALUE_TABLES", "Column",
           "ValueTable", "available", "elements", "export_tables", "type_counts"]
