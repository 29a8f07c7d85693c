"""The facade's list methods (Redis's "list" group): redis-py 8.1's ListCommands.

Owns `ListCommands`: pushes, pops (blocking too), ranges, LPOS, LMOVE and LMPOP, with
redis-py's argv. Replies go through the callbacks table. Must not touch: anything but argv.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.runtime.clients.base import ClientBase, list_or_args, sends


class ListCommands(ClientBase):
    """redis-py 8.1's list methods."""

    __slots__ = ()

    @sends("lpush")
    def lpush(self, name: Any, *values: Any) -> int:
        return self.execute_command("LPUSH", name, *values)

    @sends("rpush")
    def rpush(self, name: Any, *values: Any) -> int:
        return self.execute_command("RPUSH", name, *values)

    @sends("lpushx")
    def lpushx(self, name: Any, *values: Any) -> int:
        return self.execute_command("LPUSHX", name, *values)

    @sends("rpushx")
    def rpushx(self, name: Any, *values: Any) -> int:
        return self.execute_command("RPUSHX", name, *values)

    @sends("lpop")
    def lpop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("LPOP", name, *([] if count is None else [count]))

    @sends("rpop")
    def rpop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("RPOP", name, *([] if count is None else [count]))

    @sends("llen")
    def llen(self, name: Any) -> int:
        return self.execute_command("LLEN", name)

    @sends("lrange")
    def lrange(self, name: Any, start: int, end: int) -> list:
        return self.execute_command("LRANGE", name, start, end)

    @sends("lindex")
    def lindex(self, name: Any, index: int) -> Any:
        return self.execute_command("LINDEX", name, index)

    @sends("lset")
    def lset(self, name: Any, index: int, value: Any) -> bool:
        return self.execute_command("LSET", name, index, value)

    @sends("linsert")
    def linsert(self, name: Any, where: str, refvalue: Any, value: Any) -> int:
        return self.execute_command("LINSERT", name, where, refvalue, value)

    @sends("lrem")
    def lrem(self, name: Any, count: int, value: Any) -> int:
        return self.execute_command("LREM", name, count, value)

    @sends("ltrim")
    def ltrim(self, name: Any, start: int, end: int) -> bool:
        return self.execute_command("LTRIM", name, start, end)

    @sends("lpos")
    def lpos(self, name: Any, value: Any, rank: int | None = None, count: int | None = None,
             maxlen: int | None = None) -> Any:
        pieces: list[Any] = [name, value]
        if rank is not None:
            pieces += ("RANK", rank)
        if count is not None:
            pieces += ("COUNT", count)
        if maxlen is not None:
            pieces += ("MAXLEN", maxlen)
        return self.execute_command("LPOS", *pieces)

    @sends("lmove")
    def lmove(self, first_list: Any, second_list: Any, src: str = "LEFT",
              dest: str = "RIGHT") -> Any:
        return self.execute_command("LMOVE", first_list, second_list, src, dest)

    @sends("blmove")
    def blmove(self, first_list: Any, second_list: Any, timeout: Any, src: str = "LEFT",
               dest: str = "RIGHT") -> Any:
        return self.execute_command("BLMOVE", first_list, second_list, src, dest, timeout)

    @sends("rpoplpush")
    def rpoplpush(self, src: Any, dst: Any) -> Any:
        return self.execute_command("RPOPLPUSH", src, dst)

    @sends("brpoplpush")
    def brpoplpush(self, src: Any, dst: Any, timeout: Any = 0) -> Any:
        return self.execute_command("BRPOPLPUSH", src, dst, 0 if timeout is None else timeout)

    @sends("blpop")
    def blpop(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BLPOP", *list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    @sends("brpop")
    def brpop(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BRPOP", *list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    @sends("lmpop")
    def lmpop(self, num_keys: int, *args: Any, direction: str, count: int | None = 1) -> Any:
        cmd_args: list[Any] = [num_keys, *args, direction]
        if count != 1:
            cmd_args += ("COUNT", count)
        return self.execute_command("LMPOP", *cmd_args)

    @sends("blmpop")
    def blmpop(self, timeout: float, numkeys: int, *args: Any, direction: str,
               count: int | None = 1) -> Any:
        return self.execute_command("BLMPOP", timeout, numkeys, *args, direction, "COUNT", count)
