"""redis-py's client, in process: redis-py 8.1's calls over an engine, for streams, strings,
sorted sets, hashes, sets, lists, scripts and functions, Pub/Sub's publishing, the keyspace
(expiry, DUMP/RESTORE, OBJECT) and the server and connection calls (INFO, CONFIG, CLIENT, SAVE,
...).

Owns `RedisAPI` (`Engine.redis()` builds one: a thin object over the engine's `execute`): the
command groups' mixins of engine.runtime.clients composed, as redis-py's `Redis` composes its
`StreamCommands`, `HashCommands`, ... Each mixin builds its methods' argv exactly as redis-py
8.1 does, with the same client-side `DataError` checks and messages; the reply shaping is
redis-py's RESP2 client's with `legacy_responses=True` (clients.base: the callbacks table), the
stream methods shaping theirs themselves (their hot paths). engine.runtime.async_redis derives
redis.asyncio's client from RedisAPI's methods and signatures.

Also re-exports what callers import from here: `DataError`, `Executor`, `Script`,
`check_encodable`, `execute_command_callbacks`.

Must not touch: command semantics, engine state or the command table (every call goes through
the engine's `execute`), and must not import redis-py (a dev-only dependency).
"""

from __future__ import annotations

from streamkeep.engine.runtime.clients.base import (
    DataError,
    Executor,
    check_encodable,
    execute_command_callbacks,
)
from streamkeep.engine.runtime.clients.connection import ConnectionCommands
from streamkeep.engine.runtime.clients.hashes import HashCommands
from streamkeep.engine.runtime.clients.keyspace import KeyspaceCommands
from streamkeep.engine.runtime.clients.lists import ListCommands
from streamkeep.engine.runtime.clients.pubsub import PubSubCommands
from streamkeep.engine.runtime.clients.scripting import Script, ScriptingCommands
from streamkeep.engine.runtime.clients.server import ServerCommands
from streamkeep.engine.runtime.clients.sets import SetCommands
from streamkeep.engine.runtime.clients.sorted_sets import SortedSetCommands
from streamkeep.engine.runtime.clients.streams import StreamCommands
from streamkeep.engine.runtime.clients.strings import StringCommands

__all__ = ["DataError", "Executor", "RedisAPI", "Script", "check_encodable",
           "execute_command_callbacks"]


class RedisAPI(StreamCommands, StringCommands, HashCommands, SetCommands, SortedSetCommands,
               ListCommands, KeyspaceCommands, ServerCommands, ConnectionCommands,
               PubSubCommands, ScriptingCommands):
    """redis-py 8.1's methods for streams, strings, sorted sets, hashes, sets, lists and
    functions, and the keyspace and server calls an application makes, over `engine.execute`,
    with redis-py's `decode_responses` (False: bytes; True: str). Not here: the commands the
    engine lacks (RANDOMKEY, MOVE, LOLWUT, DEBUG OBJECT) and SELECT (one database)."""

    __slots__ = ()
