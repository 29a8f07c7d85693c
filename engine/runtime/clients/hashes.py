"""The facade's hash methods (Redis's "hash" group): redis-py 8.1's HashCommands.

Owns `HashCommands`: HSET and its siblings (HSETEX, HGETEX, HGETDEL of Redis 8), reads, HSCAN
and the field expiry calls (HEXPIRE ... HPTTL), with redis-py's argv and checks. Replies go
through the callbacks table. Must not touch: anything but argv.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from streamkeep.engine.runtime.clients.base import (
    ClientBase,
    DataError,
    expire_flags,
    list_or_args,
    scan_options,
    sends,
)


def _field_pairs(key: Any, value: Any, mapping: Mapping[Any, Any] | None,
                 items: Sequence[Any] | None) -> list[Any]:
    """HSET's and HSETEX's field value pairs, in redis-py's order: items, key, mapping."""
    pieces: list[Any] = list(items) if items else []
    if key is not None:
        pieces += (key, value)
    if mapping:
        for pair in mapping.items():
            pieces.extend(pair)
    return pieces


class HashCommands(ClientBase):
    """redis-py 8.1's hash methods."""

    __slots__ = ()

    @sends("hset")
    def hset(self, name: Any, key: Any = None, value: Any = None,
             mapping: Mapping[Any, Any] | None = None, items: Sequence[Any] | None = None) -> int:
        if key is None and not mapping and not items:
            raise DataError("'hset' with no key value pairs")
        return self.execute_command("HSET", name, *_field_pairs(key, value, mapping, items))

    @sends("hsetnx")
    def hsetnx(self, name: Any, key: Any, value: Any) -> int:
        return self.execute_command("HSETNX", name, key, value)

    @sends("hmset")
    def hmset(self, name: Any, mapping: Mapping[Any, Any]) -> bool:
        if not mapping:
            raise DataError("'hmset' with 'mapping' of length 0")
        return self.execute_command("HMSET", name, *_field_pairs(None, None, mapping, None))

    @sends("hsetex")
    def hsetex(self, name: Any, key: Any = None, value: Any = None,
               mapping: Mapping[Any, Any] | None = None, items: Sequence[Any] | None = None,
               ex: Any = None, px: Any = None, exat: Any = None, pxat: Any = None,
               data_persist_option: Any = None, keepttl: bool = False) -> int:
        if key is None and not mapping and not items:
            raise DataError("'hsetex' with no key value pairs")
        if items and len(items) % 2 != 0:
            raise DataError("'hsetex' with odd number of items. 'items' must contain a list "
                            "of key/value pairs.")
        if sum(map(bool, (ex is not None, px is not None, exat is not None, pxat is not None,
                          keepttl))) > 1:
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``keepttl`` are mutually "
                            "exclusive.")
        options = expire_flags(ex, px, exat, pxat)
        if data_persist_option:
            options.append(getattr(data_persist_option, "value", data_persist_option))
        if keepttl:
            options.append("KEEPTTL")
        pieces = _field_pairs(key, value, mapping, items)
        return self.execute_command("HSETEX", name, *options, "FIELDS", int(len(pieces) / 2),
                                    *pieces)

    @sends("hget")
    def hget(self, name: Any, key: Any) -> Any:
        return self.execute_command("HGET", name, key)

    @sends("hmget")
    def hmget(self, name: Any, keys: Any, *args: Any) -> list:
        return self.execute_command("HMGET", name, *list_or_args(keys, args))

    @sends("hgetall")
    def hgetall(self, name: Any) -> dict:
        return self.execute_command("HGETALL", name)

    @sends("hgetdel")
    def hgetdel(self, name: Any, *keys: Any) -> list:
        if len(keys) == 0:
            raise DataError("'hgetdel' should have at least one key provided")
        return self.execute_command("HGETDEL", name, "FIELDS", len(keys), *keys)

    @sends("hgetex")
    def hgetex(self, name: Any, *keys: Any, ex: Any = None, px: Any = None, exat: Any = None,
               pxat: Any = None, persist: bool = False) -> list:
        if not keys:
            raise DataError("'hgetex' should have at least one key provided")
        if sum(map(bool, (ex is not None, px is not None, exat is not None, pxat is not None,
                          persist))) > 1:
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``persist`` are mutually "
                            "exclusive.")
        options = expire_flags(ex, px, exat, pxat)
        if persist:
            options.append("PERSIST")
        return self.execute_command("HGETEX", name, *options, "FIELDS", len(keys), *keys)

    @sends("hdel")
    def hdel(self, name: Any, *keys: Any) -> int:
        return self.execute_command("HDEL", name, *keys)

    @sends("hexists")
    def hexists(self, name: Any, key: Any) -> bool:
        return self.execute_command("HEXISTS", name, key)

    @sends("hincrby")
    def hincrby(self, name: Any, key: Any, amount: int = 1) -> int:
        return self.execute_command("HINCRBY", name, key, amount)

    @sends("hincrbyfloat")
    def hincrbyfloat(self, name: Any, key: Any, amount: float = 1.0) -> float:
        return self.execute_command("HINCRBYFLOAT", name, key, amount)

    @sends("hkeys")
    def hkeys(self, name: Any) -> list:
        return self.execute_command("HKEYS", name)

    @sends("hvals")
    def hvals(self, name: Any) -> list:
        return self.execute_command("HVALS", name)

    @sends("hlen")
    def hlen(self, name: Any) -> int:
        return self.execute_command("HLEN", name)

    @sends("hstrlen")
    def hstrlen(self, name: Any, key: Any) -> int:
        return self.execute_command("HSTRLEN", name, key)

    @sends("hrandfield")
    def hrandfield(self, key: Any, count: int | None = None, withvalues: bool = False) -> Any:
        params: list[Any] = [] if count is None else [count]
        if withvalues:
            params.append("WITHVALUES")
        return self.execute_command("HRANDFIELD", key, *params, withvalues=withvalues)

    @sends("hscan")
    def hscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None,
              no_values: bool | None = None) -> tuple[int, Any]:
        pieces = [name, cursor, *scan_options(match, count)]
        if no_values is not None:
            pieces.append(b"NOVALUES")
        return self.execute_command("HSCAN", *pieces, no_values=no_values)

    @sends("hscan")
    def hscan_iter(self, name: Any, match: Any = None, count: int | None = None,
                   no_values: bool | None = None) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.hscan(name, cursor=cursor, match=match, count=count,
                                      no_values=no_values)
            yield from (data if no_values else data.items())

    def _hexpire(self, command: str, name: Any, when: Any, fields: tuple[Any, ...],
                 conditions: tuple[bool, bool, bool, bool]) -> list[int]:
        """HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT (`when` already a number)."""
        if sum(conditions) > 1:
            raise ValueError("Only one of 'nx', 'xx', 'gt', 'lt' can be specified.")
        options = [word for flag, word in zip(conditions, ("NX", "XX", "GT", "LT"),
                                              strict=True) if flag]
        return self.execute_command(command, name, when, *options, "FIELDS", len(fields),
                                    *fields)

    @sends("hexpire")
    def hexpire(self, name: Any, seconds: Any, *fields: Any, nx: bool = False, xx: bool = False,
                gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(seconds, datetime.timedelta):
            seconds = int(seconds.total_seconds())
        return self._hexpire("HEXPIRE", name, seconds, fields, (nx, xx, gt, lt))

    @sends("hpexpire")
    def hpexpire(self, name: Any, milliseconds: Any, *fields: Any, nx: bool = False,
                 xx: bool = False, gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(milliseconds, datetime.timedelta):
            milliseconds = int(milliseconds.total_seconds() * 1000)
        return self._hexpire("HPEXPIRE", name, milliseconds, fields, (nx, xx, gt, lt))

    @sends("hexpireat")
    def hexpireat(self, name: Any, unix_time_seconds: Any, *fields: Any, nx: bool = False,
                  xx: bool = False, gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(unix_time_seconds, datetime.datetime):
            unix_time_seconds = int(unix_time_seconds.timestamp())
        return self._hexpire("HEXPIREAT", name, unix_time_seconds, fields, (nx, xx, gt, lt))

    @sends("hpexpireat")
    def hpexpireat(self, name: Any, unix_time_milliseconds: Any, *fields: Any,
                   nx: bool = False, xx: bool = False, gt: bool = False,
                   lt: bool = False) -> list[int]:
        if isinstance(unix_time_milliseconds, datetime.datetime):
            unix_time_milliseconds = int(unix_time_milliseconds.timestamp() * 1000)
        return self._hexpire("HPEXPIREAT", name, unix_time_milliseconds, fields,
                             (nx, xx, gt, lt))

    @sends("hpersist")
    def hpersist(self, name: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPERSIST", name, "FIELDS", len(fields), *fields)

    @sends("hexpiretime")
    def hexpiretime(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HEXPIRETIME", key, "FIELDS", len(fields), *fields)

    @sends("hpexpiretime")
    def hpexpiretime(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPEXPIRETIME", key, "FIELDS", len(fields), *fields)

    @sends("httl")
    def httl(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HTTL", key, "FIELDS", len(fields), *fields)

    @sends("hpttl")
    def hpttl(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPTTL", key, "FIELDS", len(fields), *fields)
