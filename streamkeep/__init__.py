"""streamkeep: Redis Streams semantics in a durable, persistence-first Python storage engine.

The documented entry point: `from streamkeep import Engine, ReplyError`. The project's packages
live in this namespace (`streamkeep.engine`, `streamkeep.aof`, `streamkeep.snapshot`,
`streamkeep.replication`, `streamkeep.tools`; see pyproject.toml's package-dir); this module
re-exports lazily, so `import streamkeep.aof.codec` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkeep.engine.model.effects import Record
    from streamkeep.engine.runtime.core import Engine, Session
    from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

_EXPORTS = {
    "Engine": "streamkeep.engine.runtime.core",
    "Session": "streamkeep.engine.runtime.core",
    "Record": "streamkeep.engine.model.effects",
    "ReplyError": "streamkeep.engine.wire.errors",
    "StreamkeepError": "streamkeep.engine.wire.errors",
}

__all__ = ["Engine", "ReplyError", "Record", "Session", "StreamkeepError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
