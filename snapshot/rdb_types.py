"""The formats-level registry of the value types: every type's formats module, imported in
one place, so that `snapshot.rdb`'s codec registry holds every value codec wherever it is used
(a module that reads or writes RDB files or DUMP payloads of every type imports this one, or
`snapshot.rdb` holds strings and streams only), and each type's other formats are found here.

Owns `FORMATS` (one snapshot.value_formats.TypeFormats per type of engine.model.value_types, in
its order: the plural word a message uses, the snapshot chunk codec of a type whose big values
are stored as chunks, the export table; a type's own module defines its entry, streams' and
strings' are here) and `formats_of`; `stored_text`; `dump_value_payload` and
`load_value_payload`: a value's DUMP payload by its codec, and the value in a payload of a
registered type; `value_type_of` and `restorable_types`: which RDB types load into one of the
engine's value types (what RESTORE, an import and a full sync keep). Generic code (snapshot.
values, tools.value_tables, tools.rdbexport) loops over `FORMATS` and names no type: a new type
is its own modules plus one line here. Must not touch: the keyspace, files, sockets (DUMP and
RESTORE call these functions).
"""

from __future__ import annotations

import struct
from typing import Any

from streamkeep.engine.model.value_types import BY_CLASS, TYPES, ValueType
from streamkeep.snapshot import rdb_hash, rdb_list, rdb_set, rdb_zset
from streamkeep.snapshot.rdb import (
    RdbError,
    Reader,
    payload_from,
    stored_types,
    value_codec,
    writer_for,
)
from streamkeep.snapshot.value_formats import Column, TypeFormats, ValueTable


def _string_rows(value: bytes) -> tuple[tuple[bytes]]:
    return ((value,),)


# A stream is stored in tables of its own (snapshot.layout) and exported as them.
STREAM_FORMATS = TypeFormats("stream", "streams")
STRING_FORMATS = TypeFormats("string", "strings", table=ValueTable(
    "string", "strings", (Column("value", "binary"),), _string_rows, key_expiry=True))

FORMATS: tuple[TypeFormats, ...] = (STREAM_FORMATS, STRING_FORMATS, rdb_zset.FORMATS,
                                    rdb_hash.FORMATS, rdb_set.FORMATS, rdb_list.FORMATS)
_BY_TYPE = {f.type_name: f for f in FORMATS}


def formats_of(type_name: str) -> TypeFormats | None:
    """The formats entry of the type TYPE calls `type_name` (None: not one of FORMATS)."""
    return _BY_TYPE.get(type_name)


def value_type_of(rdb_type: int) -> ValueType | None:
    """The engine's value type a value of `rdb_type` loads as: its codec registered and its
    class a registered value type (a codec whose class the keyspace does not hold yet gives
    None, and its keys are skipped like any other type streamkeep does not store)."""
    codec = value_codec(rdb_type)
    if codec is None or codec.kind is None:
        return None
    return BY_CLASS.get(codec.kind)


def stored_text() -> str:
    """What streamkeep stores, for a message: "streams, strings and sorted sets"."""
    names = [f.plural if (f := _BY_TYPE.get(t.name)) is not None else t.name for t in TYPES]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def restorable_types() -> frozenset[int]:
    """The RDB types whose values RESTORE stores (`value_type_of` is not None)."""
    return frozenset(n for n in stored_types() if value_type_of(n) is not None)


def dump_value_payload(value: object, version: int) -> bytes:
    """DUMP's reply for `value` (of a class a codec writes): type, value, RDB version (u16
    LE), CRC-64 (LE). TypeError for a class no codec writes."""
    rdb_type, body = writer_for(value).write(value, version)
    return payload_from(rdb_type, body, version)


def load_value_payload(payload: bytes, limits: Any = None) -> Any:
    """The value in a DUMP payload whose footer was checked, read by its type's codec (with
    `limits`, the engine's encoding limits for that type, when given). RdbError for a type no
    codec reads or a value that is not one of that type."""
    r = Reader(payload[:-10])
    codec = value_codec(r.byte())
    if codec is None:
        raise RdbError(f"no codec reads RDB type {payload[0]}")
    try:
        # (a codec's reader takes the type's limits as an optional third argument)
        args = (r, payload[0]) if limits is None else (r, payload[0], limits)
        value = codec.read(*args)
    except (ValueError, KeyError, IndexError, OverflowError, struct.error) as err:
        raise RdbError(f"bad {codec.name} value ({err.__class__.__name__})") from None
    return value  # (bytes after the value are ignored, as Redis's RESTORE ignores them)


__all__ = ["FORMATS", "STREAM_FORMATS", "STRING_FORMATS", "dump_value_payload", "formats_of",
           "load_value_payload", "rdb_hash", "rdb_list", "rdb_set", "rdb_zset",
           "restorable_types", "stored_text", "value_type_of"]
