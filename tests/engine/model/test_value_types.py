"""The value types' registry (engine.model.value_types): slots in order, one type per name and
class, every type's model module of the one shape (TypeModel, which mypy also holds them to),
each type's codec round trip, and OBJECT ENCODING's word for a string."""

from __future__ import annotations

import pytest

from streamkeep.engine.model.strings import encoding as string_encoding
from streamkeep.engine.model.value_types import (
    BY_CLASS,
    BY_NAME,
    STREAM,
    STRING,
    TYPES,
    ValueType,
    type_of,
)
from streamkeep.engine.runtime.core import EngineCore


def test_the_registry_is_in_slot_order_and_one_to_one() -> None:
    assert [t.slot for t in TYPES] == list(range(len(TYPES)))
    assert len(BY_NAME) == len(BY_CLASS) == len(TYPES)
    assert TYPES[0] is STREAM and TYPES[1] is STRING  # the engine's `dbs` and `strings`
    engine = EngineCore()
    assert len(engine.keyspaces) == len(TYPES)
    assert engine.keyspaces[STREAM.slot] is engine.dbs
    assert engine.keyspaces[STRING.slot] is engine.strings


def test_every_type_is_read_from_its_model_module_the_same_way() -> None:
    from streamkeep.engine.model import hashes, lists, sets, stream, strings, zset

    for vt, model in zip(TYPES, (stream, strings, zset, hashes, sets, lists), strict=True):
        assert vt == ValueType.of(vt.name, vt.slot, model)
        assert type_of(model.opened(_example(vt))) is vt


def _example(vt: ValueType) -> object:
    """A small value of `vt`, as the engine's commands make it."""
    from streamkeep import Engine

    e = Engine()
    e.execute(*{"stream": ("XADD", "k", "1-1", "f", "v"), "string": ("SET", "k", "v"),
                "zset": ("ZADD", "k", "1", "m"), "hash": ("HSET", "k", "f", "v"),
                "set": ("SADD", "k", "m"), "list": ("RPUSH", "k", "e")}[vt.name])
    return e.keyspaces[vt.slot][0][b"k"]


def test_types_stored_in_the_keys_table_round_trip() -> None:
    assert type_of(b"v") is STRING
    for vt in TYPES:
        assert (vt.to_bytes is None) == (vt.from_bytes is None), vt.name
    assert STRING.from_bytes is not None and STRING.to_bytes is not None
    assert STRING.from_bytes(STRING.to_bytes(b"\x00v")) == b"\x00v"


@pytest.mark.parametrize(("value", "word"), [
    (b"0", "int"), (b"-1", "int"), (b"9223372036854775807", "int"),
    (b"-9223372036854775808", "int"), (b"9223372036854775808", "embstr"), (b"007", "embstr"),
    (b"-0", "embstr"), (b"+1", "embstr"), (b"1.5", "embstr"), (b"", "embstr"),
    (b"x" * 44, "embstr"), (b"x" * 45, "raw"), (b"1" * 45, "raw"),
])
def test_string_encoding(value: bytes, word: str) -> None:
    assert string_encoding(value) == word
    assert STRING.encoding(value) == word
