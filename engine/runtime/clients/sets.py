"""The facade's set methods (Redis's "set" group): redis-py 8.1's SetCommands.

Owns `SetCommands`: SADD, membership, SPOP, SRANDMEMBER, SDIFF, SINTER, SUNION (and their
STOREs), SINTERCARD and SSCAN, with redis-py's argv. Replies go through the callbacks table
(SMEMBERS and the algebra as Python sets). Must not touch: anything but argv.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamkeep.engine.runtime.clients.base import ClientBase, list_or_args, scan_options, sends


class SetCommands(ClientBase):
    """redis-py 8.1's set methods."""

    __slots__ = ()

    @sends("sadd")
    def sadd(self, name: Any, *values: Any) -> int:
        return self.execute_command("SADD", name, *values)

    @sends("srem")
    def srem(self, name: Any, *values: Any) -> int:
        return self.execute_command("SREM", name, *values)

    @sends("scard")
    def scard(self, name: Any) -> int:
        return self.execute_command("SCARD", name)

    @sends("smembers")
    def smembers(self, name: Any) -> set:
        return self.execute_command("SMEMBERS", name)

    @sends("sismember")
    def sismember(self, name: Any, value: Any) -> int:
        return self.execute_command("SISMEMBER", name, value)

    @sends("smismember")
    def smismember(self, name: Any, values: Any, *args: Any) -> list[int]:
        return self.execute_command("SMISMEMBER", name, *list_or_args(values, args))

    @sends("smove")
    def smove(self, src: Any, dst: Any, value: Any) -> bool:
        return self.execute_command("SMOVE", src, dst, value)

    @sends("spop")
    def spop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("SPOP", name, *([] if count is None else [count]))

    @sends("srandmember")
    def srandmember(self, name: Any, number: int | None = None) -> Any:
        return self.execute_command("SRANDMEMBER", name, *([] if number is None else [number]))

    @sends("sdiff")
    def sdiff(self, keys: Any, *args: Any) -> set:
        return self.execute_command("SDIFF", *list_or_args(keys, args))

    @sends("sdiffstore")
    def sdiffstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SDIFFSTORE", dest, *list_or_args(keys, args))

    @sends("sinter")
    def sinter(self, keys: Any, *args: Any) -> set:
        return self.execute_command("SINTER", *list_or_args(keys, args))

    @sends("sinterstore")
    def sinterstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SINTERSTORE", dest, *list_or_args(keys, args))

    @sends("sintercard")
    def sintercard(self, numkeys: int, keys: list, limit: int = 0) -> int:
        return self.execute_command("SINTERCARD", numkeys, *keys, "LIMIT", limit)

    @sends("sunion")
    def sunion(self, keys: Any, *args: Any) -> set:
        return self.execute_command("SUNION", *list_or_args(keys, args))

    @sends("sunionstore")
    def sunionstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SUNIONSTORE", dest, *list_or_args(keys, args))

    @sends("sscan")
    def sscan(self, name: Any, cursor: int = 0, match: Any = None,
              count: int | None = None) -> tuple[int, list]:
        return self.execute_command("SSCAN", name, cursor, *scan_options(match, count))

    @sends("sscan")
    def sscan_iter(self, name: Any, match: Any = None, count: int | None = None) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.sscan(name, cursor=cursor, match=match, count=count)
            yield from data
