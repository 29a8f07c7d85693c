"""streamkeep: Redis Streams semantics in a durable, persistence-first Python storage engine.

The documented entry point: `from streamkeep import Engine, ReplyError`. The project's packages
live in this namespace (`streamkeep.engine`, `streamkeep.aof`, `streamkeep.snapshot`,
`streamkeep.replication`, `streamkeep.tools`; see streamkeep/folders.py). The names below
are streamkeep.engine's lazy re-exports, so `import streamkeep.aof.codec` stays cheap. Before
any of them loads, streamkeep.engine.wire.compiled chooses between the compiled command path and its .py
sources (STREAMKEEP_NO_EXTENSIONS).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.compiled import install as _install_compiled

_install_compiled()

if TYPE_CHECKING:
    from streamkeep.engine.model.effects import Record
    from streamkeep.engine.runtime.async_redis import AsyncRedis
    from streamkeep.engine.runtime.core import Session
    from streamkeep.engine.services.async_network import aredis_from_url
    from streamkeep.engine.services.async_queue import AsyncMessage, AsyncStreamQueue
    from streamkeep.engine.services.engine import Engine
    from streamkeep.engine.services.queue import Message, QueueError, StreamQueue
    from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

__all__ = ["AsyncMessage", "AsyncRedis", "AsyncStreamQueue", "Engine", "Message", "QueueError",
           "ReplyError", "Record", "Session", "StreamQueue", "StreamkeepError", "aredis_from_url"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from streamkeep import engine

    value = getattr(engine, name)
    globals()[name] = value
    return value
