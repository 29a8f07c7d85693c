"""A value type's encoding limits: the settings its values read at their writes, declared once
by the type and applied from the config by one mechanism for every type.

Owns `Setting` (one of a type's settings, with what CONFIG needs of it: its kind, default,
bounds, summary and the older name Redis still accepts) and `Limits`, the base of every type's
limits class (engine.model.zset's, hashes', sets', lists'). A type names its limits class in its
`ValueType` (engine.model.value_types); the engine keeps one object of it per type
(`EngineState.limits[slot]`), which every value of the type reads at its writes, as Redis reads
its globals, and which `apply` updates in place at the engine's start and on every CONFIG SET
of one of its settings (engine.exec.settings registers the settings from the types). So a new
limit reaches existing values on their next write, as in Redis.

Must not touch: the config's parsing and validation (engine.exec.settings), engine state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

LONG_MAX: Final = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting of a type's limits: Redis's name, the limits' attribute it sets, its kind
    as CONFIG parses it ("int" or "memory"), default, bounds, the reference's summary and the
    older name CONFIG still accepts for it ("hash-max-ziplist-entries")."""

    name: str
    attr: str
    kind: str
    default: int
    summary: str
    lo: int = 0
    hi: int = LONG_MAX
    alias: str = ""


class Limits:
    """The base of a type's limits: its `SETTINGS`, each an attribute of the object, set from
    the config by `apply`."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = ()

    def apply(self, config: Mapping[str, Any]) -> None:
        """Take every setting's value from `config` (Redis's names, canonical values)."""
        for setting in self.SETTINGS:
            setattr(self, setting.attr, int(config[setting.name]))

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Limits:
        """A limits object with `config`'s values."""
        limits = cls()
        limits.apply(config)
        return limits


__all__ = ["LONG_MAX", "Limits", "Setting"]
