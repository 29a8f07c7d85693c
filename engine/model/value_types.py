"""The value types a key can hold, registered in one place.

Owns `ValueType`, what generic code knows of a type (it never names one): the word TYPE and
`SCAN ... TYPE` use, the type's slot among the engine's per-type keyspaces (each database keeps
one dict per type, `EngineState.keyspaces[slot][db]`; a key is in one of them at most), the
class of its values and the lighter classes the keyspace keeps some of them as (a small hash's
bare pack, a small list's bare listpack: `open` gives the value as an object of its class), its
encoding limits (`limits`: the class the engine keeps one object of, built from the config:
engine.model.limits), OBJECT ENCODING's word for a value, MEMORY USAGE's estimate, how the
snapshot's keys table stores a value (None for a type with tables of its own, as a stream's
nodes are), the copy COPY makes, what the state digest hashes, a value's earliest sub-key
expiry (a hash's fields' TTLs: the engine's per-database index of such keys, INFO keyspace's
`subexpiry`), and whether a big value is kept as nodes that may go cold (`nodes`:
engine.model.residency.ValueNodes, a long list's quicklist: what the residency, the snapshot
and INFO need of them).

`TypeModel` is the one shape of a type's model module: each type's module (engine.model.stream,
strings, zset, hashes, sets, lists) provides the same names, which `ValueType.of` reads, and
mypy holds every module to it. `TYPES` is the registry, in slot order: every generic keyspace
operation (TYPE, EXISTS, DEL, RENAME, COPY, SCAN, FLUSHDB, INFO keyspace, expiry, WRONGTYPE,
the limits and their settings, the snapshot's keys table, the state digest) loops over it, so a
new type is its own modules plus one line here (and one in snapshot.rdb_types, the formats'
registry; its client methods are a mixin of engine.runtime.redis_api's).

Must not touch: commands, replies, I/O, the engine's state (a type is described here, its keys
are kept by the engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from streamkeep.engine.model import hashes, lists, sets, stream, strings, zset
from streamkeep.engine.model.bucket_table import BucketTable
from streamkeep.engine.model.limits import Limits
from streamkeep.engine.model.residency import ValueNodes


class TypeModel(Protocol):
    """What a type's model module provides the registry (read-only names of the module)."""

    @property
    def VALUE_CLASS(self) -> type: ...  # noqa: N802 (a module's constant)
    @property
    def STORED_AS(self) -> tuple[type, ...]: ...  # noqa: N802
    @property
    def LIMITS(self) -> type[Limits] | None: ...  # noqa: N802
    def encoding(self, value: Any) -> str: ...
    def memory_usage(self, value: Any) -> int: ...
    # What the snapshot's keys table stores (None: the type's own tables) and the value from it.
    @property
    def to_bytes(self) -> Callable[[Any], bytes] | None: ...
    @property
    def from_bytes(self) -> Callable[[bytes], Any] | None: ...
    @property
    def copy_value(self) -> Callable[[Any], Any] | None: ...  # None: through its DUMP payload
    @property
    def digest(self) -> Callable[[Any], Any] | None: ...  # None: its `to_bytes`
    def opened(self, value: Any) -> Any: ...
    @property
    def min_subexpiry(self) -> Callable[[Any], int | None] | None: ...
    @property
    def NODES(self) -> ValueNodes | None: ...  # noqa: N802 (a module's constant)
    @property
    def table_of(self) -> Callable[[Any], BucketTable | None] | None: ...


@dataclass(frozen=True)
class ValueType:
    """One type of value (see the module docstring). Each field is its model module's name of
    the same meaning (`TypeModel`)."""

    name: str  # TYPE's reply and SCAN's TYPE filter
    slot: int  # its keyspace: EngineState.keyspaces[slot][db]
    value_class: type
    stored_as: tuple[type, ...]  # other classes the keyspace keeps values of this type as
    limits: type[Limits] | None  # its encoding limits (EngineState.limits[slot])
    encoding: Callable[[Any], str]  # OBJECT ENCODING
    memory_usage: Callable[[Any], int]  # MEMORY USAGE's part for the value (key and entry apart)
    # The snapshot's keys table stores a value as these bytes (`from_bytes` gives the value as
    # the keyspace keeps it); None: the type's own tables.
    to_bytes: Callable[[Any], bytes] | None
    from_bytes: Callable[[bytes], Any] | None
    # COPY's copy, sharing nothing with the value, as the keyspace keeps it; None: through the
    # type's DUMP payload.
    copy: Callable[[Any], Any] | None
    # What the state digest hashes of a value (msgpack-able): its content, not its encoding
    # (a loaded snapshot may hold a value in another encoding); None: its `to_bytes`.
    digest: Callable[[Any], Any] | None
    open: Callable[[Any], Any]  # a keyspace's value as an object of `value_class`
    # The earliest expiry time of the value's sub-keys (a hash's fields), None when none has
    # one; None for a type whose sub-keys never expire.
    min_subexpiry: Callable[[Any], int | None] | None
    # A big value kept as nodes that may go cold (a `backlog-memory` budget); None: the type
    # keeps no such nodes.
    nodes: ValueNodes | None
    # A big value's bucket table whose runs may go cold (a `backlog-memory` budget: engine.
    # model.residency.TableHome), None when the value has none; None: the type has none.
    table_of: Callable[[Any], BucketTable | None] | None

    @classmethod
    def of(cls, name: str, slot: int, model: TypeModel) -> ValueType:
        """The type `name` at `slot`, as its model module describes it."""
        return cls(name, slot, model.VALUE_CLASS, model.STORED_AS, model.LIMITS,
                   model.encoding, model.memory_usage, model.to_bytes, model.from_bytes,
                   model.copy_value, model.digest, model.opened, model.min_subexpiry,
                   model.NODES, model.table_of)


STREAM = ValueType.of("stream", 0, stream)
STRING = ValueType.of("string", 1, strings)
ZSET = ValueType.of("zset", 2, zset)
HASH = ValueType.of("hash", 3, hashes)
SET = ValueType.of("set", 4, sets)
LIST = ValueType.of("list", 5, lists)

TYPES: tuple[ValueType, ...] = (STREAM, STRING, ZSET, HASH, SET, LIST)
BY_NAME = {t.name: t for t in TYPES}
BY_CLASS = {t.value_class: t for t in TYPES}
_BY_STORED_CLASS = {cls: t for t in TYPES for cls in (t.value_class, *t.stored_as)}


def type_of(value: object) -> ValueType:
    """The registered type of a value, in its class or one the keyspace keeps it as (KeyError
    for a class no type has)."""
    return _BY_STORED_CLASS[type(value)]


__all__ = ["BY_CLASS", "BY_NAME", "HASH", "LIST", "SET", "STREAM", "STRING", "TYPES", "ZSET",
           "TypeModel", "ValueType", "type_of"]
