"""The hash and set value types registered for a test, as engine.model.value_types will
register them (their models exist before their commands): the registry's own entries when
they are there, stand-ins of the same shape until then, in the registry and in the snapshot
writer's view of it."""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep.engine.model import value_types
from streamkeep.engine.model.hashes import Hash
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.value_types import ValueType


def _stand_in(name: str, slot: int, cls: Any) -> ValueType:
    return ValueType(name, slot, cls, lambda v: v.encoding, lambda v: v.memory_usage(),
                     to_bytes=cls.to_bytes, from_bytes=cls.from_bytes, copy=cls.copy)


def register_hash_and_set(monkeypatch: pytest.MonkeyPatch) -> tuple[ValueType, ValueType]:
    """(hash, set) registered for the test: in BY_NAME, BY_CLASS and TYPES (slot order), and
    in snapshot.writer's TYPES (the keys table it writes)."""
    from streamkeep.snapshot import writer

    found = [value_types.BY_NAME.get("hash") or _stand_in("hash", 3, Hash),
             value_types.BY_NAME.get("set") or _stand_in("set", 4, RSet)]
    types = tuple(sorted({t.name: t for t in (*value_types.TYPES, *found)}.values(),
                         key=lambda t: t.slot))
    assert [t.slot for t in types] == list(range(len(types)))
    for vt in found:
        monkeypatch.setitem(value_types.BY_NAME, vt.name, vt)
        monkeypatch.setitem(value_types.BY_CLASS, vt.value_class, vt)
    monkeypatch.setattr(value_types, "TYPES", types)
    monkeypatch.setattr(writer, "TYPES", types)
    return found[0], found[1]
