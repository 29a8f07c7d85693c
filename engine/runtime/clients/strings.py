"""The facade's string methods (Redis's "string" group): redis-py 8.1's string calls.

Owns `StringCommands`: GET, SET (with redis-py's option checks, in its order), the counters,
MGET/MSET/MSETEX, ranges, LCS, and Redis 8.4's DELEX and DIGEST; `r[key]` and `r[key] =
value`. Replies go through the callbacks table (engine.runtime.clients.base). Must not touch:
anything but argv.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from streamkeep.engine.runtime.clients.base import (
    EMPTY_RESPONSE,
    ClientBase,
    DataError,
    expire_flags,
    list_or_args,
    sends,
)


def _at_most_one(*flags: Any) -> bool:
    """redis-py's at_most_one_value_set."""
    return sum(map(bool, flags)) <= 1


class StringCommands(ClientBase):
    """redis-py 8.1's string methods (its BasicKeyCommands' string half)."""

    __slots__ = ()

    @sends("get")
    def get(self, name: Any) -> Any:
        return self.execute_command("GET", name, keys=[name])

    @sends("get")
    def __getitem__(self, name: Any) -> Any:
        value = self.get(name)
        if value is not None:
            return value
        raise KeyError(name)

    @sends("set")
    def set(self, name: Any, value: Any, ex: Any = None, px: Any = None, nx: bool = False,
            xx: bool = False, keepttl: bool = False, get: bool = False, exat: Any = None,
            pxat: Any = None, ifeq: Any = None, ifne: Any = None, ifdeq: str | None = None,
            ifdne: str | None = None) -> Any:
        """SET with redis-py's checks, in its order; the old value when `get`, else True, or
        None when a condition left the key alone."""
        if not _at_most_one(ex is not None, px is not None, exat is not None, pxat is not None,
                            keepttl):
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``keepttl`` are mutually "
                            "exclusive.")
        if not _at_most_one(nx, xx, ifeq is not None, ifne is not None, ifdeq is not None,
                            ifdne is not None):
            raise DataError("``nx``, ``xx``, ``ifeq``, ``ifne``, ``ifdeq``, ``ifdne`` are "
                            "mutually exclusive.")
        pieces: list[Any] = [name, value]
        options: dict[str, Any] = {}
        if nx:
            pieces.append("NX")
        elif xx:
            pieces.append("XX")
        elif ifeq is not None:
            pieces += ("IFEQ", ifeq)
        elif ifne is not None:
            pieces += ("IFNE", ifne)
        elif ifdeq is not None:
            pieces += ("IFDEQ", ifdeq)
        elif ifdne is not None:
            pieces += ("IFDNE", ifdne)
        if get:
            pieces.append("GET")
            options["get"] = True
        pieces.extend(expire_flags(ex, px, exat, pxat))
        if keepttl:
            pieces.append("KEEPTTL")
        return self.execute_command("SET", *pieces, **options)

    @sends("set")
    def __setitem__(self, name: Any, value: Any) -> None:
        self.set(name, value)

    @sends("setnx")
    def setnx(self, name: Any, value: Any) -> bool:
        return self.execute_command("SETNX", name, value)

    @sends("setex")
    def setex(self, name: Any, time: Any, value: Any) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds())
        return self.execute_command("SETEX", name, time, value)

    @sends("psetex")
    def psetex(self, name: Any, time_ms: Any, value: Any) -> bool:
        if isinstance(time_ms, datetime.timedelta):
            time_ms = int(time_ms.total_seconds() * 1000)
        return self.execute_command("PSETEX", name, time_ms, value)

    @sends("getset")
    def getset(self, name: Any, value: Any) -> Any:
        return self.execute_command("GETSET", name, value)

    @sends("getdel")
    def getdel(self, name: Any) -> Any:
        return self.execute_command("GETDEL", name)

    @sends("getex")
    def getex(self, name: Any, ex: Any = None, px: Any = None, exat: Any = None,
              pxat: Any = None, persist: bool = False) -> Any:
        if not _at_most_one(ex is not None, px is not None, exat is not None, pxat is not None,
                            persist):
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``persist`` are mutually "
                            "exclusive.")
        options = expire_flags(ex, px, exat, pxat)
        if persist:
            options.append("PERSIST")
        return self.execute_command("GETEX", name, *options)

    @sends("mget")
    def mget(self, keys: Any, *args: Any) -> list:
        found = list_or_args(keys, args)
        options: dict[str, Any] = {}
        if not found:
            options[EMPTY_RESPONSE] = []
        options["keys"] = found
        return self.execute_command("MGET", *found, **options)

    @sends("mset")
    def mset(self, mapping: Mapping[Any, Any]) -> bool:
        items: list[Any] = []
        for pair in mapping.items():
            items.extend(pair)
        return self.execute_command("MSET", *items)

    @sends("msetnx")
    def msetnx(self, mapping: Mapping[Any, Any]) -> bool:
        items: list[Any] = []
        for pair in mapping.items():
            items.extend(pair)
        return self.execute_command("MSETNX", *items)

    @sends("msetex")
    def msetex(self, mapping: Mapping[Any, Any], data_persist_option: Any = None,
               ex: Any = None, px: Any = None, exat: Any = None, pxat: Any = None,
               keepttl: bool = False) -> int:
        """redis-py 8.1's msetex (Redis 8.4): MSETEX numkeys key value ... [NX | XX] [expiry]."""
        if not _at_most_one(ex is not None, px is not None, exat is not None, pxat is not None,
                            keepttl):
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``keepttl`` are mutually "
                            "exclusive.")
        exp_options: list[Any] = []
        if data_persist_option:
            exp_options.append(getattr(data_persist_option, "value", data_persist_option))
        exp_options.extend(expire_flags(ex, px, exat, pxat))
        if keepttl:
            exp_options.append("KEEPTTL")
        pieces: list[Any] = ["MSETEX", len(mapping)]
        for pair in mapping.items():
            pieces.extend(pair)
        return self.execute_command(*pieces, *exp_options)

    @sends("incrby")
    def incrby(self, name: Any, amount: int = 1) -> int:
        return self.execute_command("INCRBY", name, amount)

    @sends("incrby")
    def incr(self, name: Any, amount: int = 1) -> int:
        """redis-py's alias of incrby: INCRBY name 1."""
        return self.incrby(name, amount)

    @sends("incrbyfloat")
    def incrbyfloat(self, name: Any, amount: float = 1.0) -> float:
        return self.execute_command("INCRBYFLOAT", name, amount)

    @sends("decrby")
    def decrby(self, name: Any, amount: int = 1) -> int:
        return self.execute_command("DECRBY", name, amount)

    @sends("decrby")
    def decr(self, name: Any, amount: int = 1) -> int:
        """redis-py's alias of decrby: DECRBY name 1."""
        return self.decrby(name, amount)

    @sends("append")
    def append(self, key: Any, value: Any) -> int:
        return self.execute_command("APPEND", key, value)

    @sends("strlen")
    def strlen(self, name: Any) -> int:
        return self.execute_command("STRLEN", name, keys=[name])

    @sends("getrange")
    def getrange(self, key: Any, start: int, end: int) -> Any:
        return self.execute_command("GETRANGE", key, start, end, keys=[key])

    @sends("setrange")
    def setrange(self, name: Any, offset: int, value: Any) -> int:
        return self.execute_command("SETRANGE", name, offset, value)

    @sends("substr")
    def substr(self, name: Any, start: int, end: int = -1) -> Any:
        return self.execute_command("SUBSTR", name, start, end, keys=[name])

    @sends("lcs")
    def lcs(self, key1: Any, key2: Any, len: bool | None = False, idx: bool | None = False,
            minmatchlen: int | None = 0, withmatchlen: bool | None = False) -> Any:
        pieces: list[Any] = [key1, key2]
        if len:
            pieces.append("LEN")
        if idx:
            pieces.append("IDX")
        if minmatchlen is not None and minmatchlen != 0:
            pieces += ("MINMATCHLEN", minmatchlen)
        if withmatchlen:
            pieces.append("WITHMATCHLEN")
        return self.execute_command("LCS", *pieces, keys=[key1, key2])

    @sends("delex")
    def delex(self, name: Any, ifeq: Any = None, ifne: Any = None, ifdeq: str | None = None,
              ifdne: str | None = None) -> int:
        """redis-py 8.1's delex (Redis 8.4): DEL on a condition on the string's value."""
        if sum(x is not None for x in (ifeq, ifne, ifdeq, ifdne)) > 1:
            raise ValueError("Only one of IFEQ/IFNE/IFDEQ/IFDNE may be specified")
        pieces: list[Any] = ["DELEX", name]
        if ifeq is not None:
            pieces += ("IFEQ", ifeq)
        elif ifne is not None:
            pieces += ("IFNE", ifne)
        elif ifdeq is not None:
            pieces += ("IFDEQ", ifdeq)
        elif ifdne is not None:
            pieces += ("IFDNE", ifdne)
        return self.execute_command(*pieces)

    @sends("digest")
    def digest(self, name: Any) -> Any:
        """redis-py 8.1's digest (Redis 8.4): the XXH3 hex digest of a string's value."""
        return self.execute_command("DIGEST", name)
