"""Each value type's contents as a table of rows: what the offline tools show and export of a key.

Owns `VALUE_TABLES`, the export table (snapshot.value_formats.ValueTable) of every type that has
one, in the registry's order, as each type's formats module defines it (snapshot.rdb_types: a
string's value, a sorted set's member and score, a hash's field, value and field expiry, a
set's member, a list's index and element): the name of its export table, the columns of one
element and how a decoded value yields its rows. The Spark export (tools.export.datasource)
makes a table of each, typed from the columns' kinds; `snapshot dump` (tools.inspect.snapshot)
renders a value from the same rows, as text or JSON. An entry is on while its type is
registered (`available`), so a type's entry may come before its type. A registered type
without an entry is still listed (the `keys` table, `snapshot info`), its contents not shown.
This module names no type.

`elements` is how a reader gets a key's element rows: a value in its keys row decoded by its
type, a big value stored in chunks (snapshot.values) read from the snapshot a chunk at a time,
whose elements come in these columns already, so a 1M-member value is never held whole.

Must not touch: the types' models (read through the methods the entries name), the snapshot
format (values come decoded, by the type's own `from_bytes`, or as the read API's chunk
elements), pyspark (the export maps kinds to Spark types itself; this module stays importable
without it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streamkeep.engine.model import value_types
from streamkeep.snapshot.rdb_types import FORMATS
from streamkeep.snapshot.value_formats import Column, Kind, ValueTable

VALUE_TABLES: tuple[ValueTable, ...] = tuple(f.table for f in FORMATS if f.table is not None)
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
           "Kind", "ValueTable", "available", "elements", "export_tables", "type_counts"]
