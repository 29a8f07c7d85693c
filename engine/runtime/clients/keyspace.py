"""The facade's keyspace methods (Redis's "generic" group): redis-py 8.1's key calls.

Owns `KeyspaceCommands`: DEL, EXISTS, TYPE, KEYS, SCAN, expiry (EXPIRE ... PERSIST),
DUMP/RESTORE, OBJECT, RENAME, COPY, WAIT and WAITAOF; `del r[key]` and `key in r`. Must not
touch: anything but argv.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

from streamkeep.engine.runtime.clients.base import NEVER_DECODE, ClientBase, DataError, sends


def _expire_options(nx: bool, xx: bool, gt: bool, lt: bool) -> list[str]:
    """EXPIRE's and its siblings' NX, XX, GT, LT as given (redis-py checks no combination)."""
    return [word for flag, word in ((nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT")) if flag]


class KeyspaceCommands(ClientBase):
    """redis-py 8.1's keyspace methods."""

    __slots__ = ()

    # --- keys -------------------------------------------------------------------------------------

    @sends("del")
    def delete(self, *names: Any) -> int:
        return self.execute_command("DEL", *names)

    @sends("unlink")
    def unlink(self, *names: Any) -> int:
        return self.execute_command("UNLINK", *names)

    @sends("exists")
    def exists(self, *names: Any) -> int:
        return self.execute_command("EXISTS", *names, keys=names)

    @sends("touch")
    def touch(self, *args: Any) -> int:
        return self.execute_command("TOUCH", *args)

    @sends("type")
    def type(self, name: Any) -> bytes | str:
        return self.execute_command("TYPE", name, keys=[name])

    @sends("keys")
    def keys(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("KEYS", pattern, **kwargs)

    @sends("scan")
    def scan(
        self,
        cursor: int = 0,
        match: Any = None,
        count: int | None = None,
        _type: str | None = None,
        **kwargs: Any,
    ) -> tuple[int, list]:
        pieces: list[Any] = [cursor]
        if match is not None:
            pieces.extend([b"MATCH", match])
        if count is not None:
            pieces.extend([b"COUNT", count])
        if _type is not None:
            pieces.extend([b"TYPE", _type])
        return self.execute_command("SCAN", *pieces, **kwargs)

    @sends("scan")
    def scan_iter(
        self,
        match: Any = None,
        count: int | None = None,
        _type: str | None = None,
        **kwargs: Any,
    ) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.scan(cursor=cursor, match=match, count=count, _type=_type, **kwargs)
            yield from data

    @sends("del")
    def __delitem__(self, name: Any) -> None:
        self.delete(name)

    @sends("exists")
    def __contains__(self, name: Any) -> bool:
        """`name in r`: redis-py's alias of exists (whether the key exists)."""
        return bool(self.exists(name))

    # --- expiry -----------------------------------------------------------------------------------

    @sends("expire")
    def expire(self, name: Any, time: Any, nx: bool = False, xx: bool = False,
               gt: bool = False, lt: bool = False) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds())
        return self.execute_command("EXPIRE", name, time, *_expire_options(nx, xx, gt, lt))

    @sends("pexpire")
    def pexpire(self, name: Any, time: Any, nx: bool = False, xx: bool = False,
                gt: bool = False, lt: bool = False) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds() * 1000)
        return self.execute_command("PEXPIRE", name, time, *_expire_options(nx, xx, gt, lt))

    @sends("expireat")
    def expireat(self, name: Any, when: Any, nx: bool = False, xx: bool = False,
                 gt: bool = False, lt: bool = False) -> bool:
        if isinstance(when, datetime.datetime):
            when = int(when.timestamp())
        return self.execute_command("EXPIREAT", name, when, *_expire_options(nx, xx, gt, lt))

    @sends("pexpireat")
    def pexpireat(self, name: Any, when: Any, nx: bool = False, xx: bool = False,
                  gt: bool = False, lt: bool = False) -> bool:
        if isinstance(when, datetime.datetime):
            when = int(when.timestamp() * 1000)
        return self.execute_command("PEXPIREAT", name, when, *_expire_options(nx, xx, gt, lt))

    @sends("ttl")
    def ttl(self, name: Any) -> int:
        return self.execute_command("TTL", name)

    @sends("pttl")
    def pttl(self, name: Any) -> int:
        return self.execute_command("PTTL", name)

    @sends("expiretime")
    def expiretime(self, key: Any) -> int:
        return self.execute_command("EXPIRETIME", key)

    @sends("pexpiretime")
    def pexpiretime(self, key: Any) -> int:
        return self.execute_command("PEXPIRETIME", key)

    @sends("persist")
    def persist(self, name: Any) -> bool:
        return self.execute_command("PERSIST", name)

    # --- values: serialized, inspected, renamed, copied -------------------------------------------

    @sends("dump")
    def dump(self, name: Any) -> bytes | None:
        return self.execute_command("DUMP", name, **{NEVER_DECODE: []})

    @sends("restore")
    def restore(self, name: Any, ttl: float, value: Any, replace: bool = False,
                absttl: bool = False, idletime: int | None = None,
                frequency: int | None = None) -> Any:
        params: list[Any] = [name, ttl, value]
        if replace:
            params.append("REPLACE")
        if absttl:
            params.append("ABSTTL")
        if idletime is not None:
            params.append("IDLETIME")
            try:
                params.append(int(idletime))
            except ValueError:
                raise DataError("idletimemust be an integer") from None
        if frequency is not None:
            params.append("FREQ")
            try:
                params.append(int(frequency))
            except ValueError:
                raise DataError("frequency must be an integer") from None
        return self.execute_command("RESTORE", *params)

    @sends("object|encoding", "object|freq", "object|idletime", "object|refcount")
    def object(self, infotype: str, key: Any, **kwargs: Any) -> Any:
        """OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key (redis-py keeps the reply as is)."""
        return self.execute_command("OBJECT", infotype, key, infotype=infotype, **kwargs)

    @sends("rename")
    def rename(self, src: Any, dst: Any) -> bool:
        return self.execute_command("RENAME", src, dst)

    @sends("renamenx")
    def renamenx(self, src: Any, dst: Any) -> bool:
        return self.execute_command("RENAMENX", src, dst)

    @sends("copy")
    def copy(self, source: Any, destination: Any, destination_db: Any = None,
             replace: bool = False) -> bool:
        params: list[Any] = [source, destination]
        if destination_db is not None:
            params.extend(["DB", destination_db])
        if replace:
            params.append("REPLACE")
        return self.execute_command("COPY", *params)

    # --- durability -------------------------------------------------------------------------------

    @sends("wait")
    def wait(self, num_replicas: int, timeout: int, **kwargs: Any) -> int:
        return self.execute_command("WAIT", num_replicas, timeout, **kwargs)

    @sends("waitaof")
    def waitaof(self, num_local: int, num_replicas: int, timeout: int,
                **kwargs: Any) -> list[int]:
        return self.execute_command("WAITAOF", num_local, num_replicas, timeout, **kwargs)
