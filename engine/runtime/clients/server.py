"""The facade's server methods (Redis's "server" group): redis-py 8.1's management calls.

Owns `ServerCommands`: INFO, CONFIG, DBSIZE, FLUSHDB/FLUSHALL, SAVE/BGSAVE/LASTSAVE,
BGREWRITEAOF, MEMORY USAGE, COMMAND COUNT and TIME, replies shaped by the callbacks table
(INFO's dict, CONFIG GET's dict, LASTSAVE's datetime). Must not touch: anything but argv.
"""

from __future__ import annotations

import datetime
from typing import Any

from streamkeep.engine.runtime.clients.base import ClientBase, sends


class ServerCommands(ClientBase):
    """redis-py 8.1's server methods an application calls."""

    __slots__ = ()

    @sends("dbsize")
    def dbsize(self, **kwargs: Any) -> int:
        return self.execute_command("DBSIZE", **kwargs)

    @sends("flushdb")
    def flushdb(self, asynchronous: bool = False, **kwargs: Any) -> bool:
        args = [b"ASYNC"] if asynchronous else []
        return self.execute_command("FLUSHDB", *args, **kwargs)

    @sends("flushall")
    def flushall(self, asynchronous: bool = False, **kwargs: Any) -> bool:
        args = [b"ASYNC"] if asynchronous else []
        return self.execute_command("FLUSHALL", *args, **kwargs)

    @sends("info")
    def info(self, section: str | None = None, *args: str, **kwargs: Any) -> dict[str, Any]:
        if section is None:
            return self.execute_command("INFO", **kwargs)
        return self.execute_command("INFO", section, *args, **kwargs)

    @sends("config|get")
    def config_get(self, pattern: Any = "*", *args: Any, **kwargs: Any) -> dict:
        return self.execute_command("CONFIG GET", pattern, *args, **kwargs)

    @sends("config|set")
    def config_set(self, name: Any, value: Any, *args: Any, **kwargs: Any) -> bool:
        return self.execute_command("CONFIG SET", name, value, *args, **kwargs)

    @sends("config|resetstat")
    def config_resetstat(self, **kwargs: Any) -> bool:
        return self.execute_command("CONFIG RESETSTAT", **kwargs)

    @sends("lastsave")
    def lastsave(self, **kwargs: Any) -> datetime.datetime | None:
        return self.execute_command("LASTSAVE", **kwargs)

    @sends("save")
    def save(self, **kwargs: Any) -> bool:
        return self.execute_command("SAVE", **kwargs)

    @sends("bgsave")
    def bgsave(self, schedule: bool = True, **kwargs: Any) -> Any:
        return self.execute_command("BGSAVE", *(["SCHEDULE"] if schedule else []), **kwargs)

    @sends("bgrewriteaof")
    def bgrewriteaof(self, **kwargs: Any) -> Any:
        return self.execute_command("BGREWRITEAOF", **kwargs)

    @sends("memory|usage")
    def memory_usage(self, key: Any, samples: int | None = None, **kwargs: Any) -> int | None:
        args: list[Any] = []
        if isinstance(samples, int):
            args += (b"SAMPLES", samples)
        return self.execute_command("MEMORY USAGE", key, *args, **kwargs)

    @sends("command|count")
    def command_count(self, **kwargs: Any) -> int:
        return self.execute_command("COMMAND COUNT", **kwargs)

    @sends("time")
    def time(self, **kwargs: Any) -> tuple[int, int]:
        return self.execute_command("TIME", **kwargs)
