"""streamkeep's engine: Redis Streams semantics in process, with deterministic effects.

Layers, bottom to top (each may import only those below it; tests/arch enforces it):
wire (errors, replies, RESP, argument parsing) → model (IDs, streams, groups, effects) → exec
(command table, context, blocking, transactions, config registry, persistence interfaces) →
commands (the handlers) → runtime (core: the in-memory EngineCore; datadir and engine: the
public Engine with its data directory and replication; server: the network front).

This package re-exports lazily: importing a codec (`streamkeep.engine.wire.request_parser`,
`streamkeep.aof.codec`) never loads the command table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkeep.engine.model.effects import Record
    from streamkeep.engine.runtime.async_redis import AsyncRedis
    from streamkeep.engine.runtime.core import Session
    from streamkeep.engine.services.async_network import aredis_from_url
    from streamkeep.engine.services.async_queue import AsyncMessage, AsyncStreamQueue
    from streamkeep.engine.services.engine import Engine
    from streamkeep.engine.services.queue import Message, QueueError, StreamQueue
    from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

_EXPORTS = {
    "Engine": "streamkeep.engine.services.engine",
    "Session": "streamkeep.engine.runtime.core",
    "StreamQueue": "streamkeep.engine.services.queue",
    "AsyncStreamQueue": "streamkeep.engine.services.async_queue",
    "AsyncMessage": "streamkeep.engine.services.async_queue",
    "AsyncRedis": "streamkeep.engine.runtime.async_redis",
    "aredis_from_url": "streamkeep.engine.services.async_network",
    "Message": "streamkeep.engine.services.queue",
    "QueueError": "streamkeep.engine.services.queue",
    "Record": "streamkeep.engine.model.effects",
    "ReplyError": "streamkeep.engine.wire.errors",
    "StreamkeepError": "streamkeep.engine.wire.errors",
}

__all__ = ["AsyncMessage", "AsyncRedis", "AsyncStreamQueue", "Engine", "Message", "QueueError",
           "ReplyError", "Record", "Session", "StreamQueue", "StreamkeepError", "aredis_from_url"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
