"""Every value codec streamkeep registers beyond strings and streams, imported in one place so
that `snapshot.rdb`'s registry holds them all wherever it is used (a module that reads or
writes RDB files or DUMP payloads of every type imports this one, or `snapshot.rdb` holds
strings and streams only), and the DUMP envelope for a value of any registered type.

Owns `dump_value_payload` and `load_value_payload`: a value's DUMP payload by its codec, and
the value in a payload of a registered type; `value_type_of` and `restorable_types`: which RDB
types load into one of the engine's value types (what RESTORE, an import and a full sync
keep). Must not touch: the keyspace, files, sockets (DUMP and RESTORE call these functions).
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


def value_type_of(rdb_type: int) -> ValueType | None:
    """The engine's value type a value of `rdb_type` loads as: its codec registered and its
    class a registered value type (a codec whose class the keyspace does not hold yet gives
    None, and its keys are skipped like any other type streamkeep does not store)."""
    codec = value_codec(rdb_type)
    if codec is None or codec.kind is None:
        return None
    return BY_CLASS.get(codec.kind)


_PLURALS = {"stream": "streams", "string": "strings", "zset": "sorted sets", "hash": "hashes",
            "set": "sets", "list": "lists"}


def stored_text() -> str:
    """What streamkeep stores, for a message: "streams, strings and sorted sets"."""
    names = [_PLURALS.get(t.name, t.name) for t in TYPES]
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


__all__ = ["dump_value_payload", "load_value_payload", "rdb_hash", "rdb_list", "rdb_set",
           "rdb_zset", "restorable_types", "stored_text", "value_type_of"]
