"""streamkeep's engine: Redis Streams semantics in process, with deterministic effects.

`Engine.open()` gives an engine; `engine.execute(*argv)` runs any command; redis-py-style methods
(`xadd`, `xreadgroup`, ...) run the same commands. Errors raise `ReplyError` carrying the exact
Redis error line.
"""

from engine.core import Engine, Session
from engine.effects import Record
from engine.errors import ReplyError

__all__ = ["Engine", "ReplyError", "Record", "Session"]
