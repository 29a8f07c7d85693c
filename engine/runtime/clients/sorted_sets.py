"""The facade's sorted set methods (Redis's "sorted-set" group): redis-py 8.1's
SortedSetCommands.

Owns `SortedSetCommands`: ZADD, the ranges (ZRANGE and its BYSCORE, BYLEX, REV and STORE
forms, the older ZRANGEBYSCORE family), ranks, pops (blocking too), ZUNION, ZINTER, ZDIFF and
ZSCAN, with redis-py's argv and checks. Replies go through the callbacks table (scores as
floats, or through `score_cast_func`). Must not touch: anything but argv.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from streamkeep.engine.runtime.clients.base import (
    ClientBase,
    DataError,
    list_or_args,
    scan_options,
    sends,
)


class SortedSetCommands(ClientBase):
    """redis-py 8.1's sorted set methods."""

    __slots__ = ()

    @sends("zadd")
    def zadd(self, name: Any, mapping: Mapping[Any, Any], nx: bool = False, xx: bool = False,
             ch: bool = False, incr: bool = False, gt: bool = False,
             lt: bool = False) -> int | float | None:
        if not mapping:
            raise DataError("ZADD requires at least one element/score pair")
        if nx and xx:
            raise DataError("ZADD allows either 'nx' or 'xx', not both")
        if gt and lt:
            raise DataError("ZADD allows either 'gt' or 'lt', not both")
        if incr and len(mapping) != 1:
            raise DataError(
                "ZADD option 'incr' only works when passing a single element/score pair")
        if nx and (gt or lt):
            raise DataError("Only one of 'nx', 'lt', or 'gr' may be defined.")
        pieces: list[Any] = [word for flag, word in ((nx, b"NX"), (xx, b"XX"), (ch, b"CH"),
                                                     (incr, b"INCR"), (gt, b"GT"), (lt, b"LT"))
                             if flag]
        for member, score in mapping.items():
            pieces += (score, member)
        return self.execute_command("ZADD", name, *pieces, **({"as_score": True} if incr else {}))

    @sends("zcard")
    def zcard(self, name: Any) -> int:
        return self.execute_command("ZCARD", name)

    @sends("zcount")
    def zcount(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZCOUNT", name, min, max)

    @sends("zlexcount")
    def zlexcount(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZLEXCOUNT", name, min, max)

    @sends("zscore")
    def zscore(self, name: Any, value: Any) -> float | None:
        return self.execute_command("ZSCORE", name, value)

    @sends("zmscore")
    def zmscore(self, key: Any, members: list) -> list[float | None]:
        if not members:
            raise DataError("ZMSCORE members must be a non-empty list")
        return self.execute_command("ZMSCORE", key, *members)

    @sends("zincrby")
    def zincrby(self, name: Any, amount: float, value: Any) -> float | None:
        return self.execute_command("ZINCRBY", name, amount, value)

    @sends("zrem")
    def zrem(self, name: Any, *values: Any) -> int:
        return self.execute_command("ZREM", name, *values)

    @sends("zremrangebylex")
    def zremrangebylex(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZREMRANGEBYLEX", name, min, max)

    @sends("zremrangebyrank")
    def zremrangebyrank(self, name: Any, min: int, max: int) -> int:
        return self.execute_command("ZREMRANGEBYRANK", name, min, max)

    @sends("zremrangebyscore")
    def zremrangebyscore(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZREMRANGEBYSCORE", name, min, max)

    def _zrange(self, command: str, dest: Any, name: Any, start: Any, end: Any,
                desc: bool = False, byscore: bool = False, bylex: bool = False,
                withscores: bool = False, score_cast_func: Any = float,
                offset: int | None = None, num: int | None = None) -> Any:
        """ZRANGE and ZRANGESTORE with redis-py's checks, in its order."""
        if byscore and bylex:
            raise DataError("``byscore`` and ``bylex`` can not be specified together.")
        if (offset is not None) != (num is not None):
            raise DataError("``offset`` and ``num`` must both be specified.")
        if bylex and withscores:
            raise DataError("``withscores`` not supported in combination with ``bylex``.")
        pieces: list[Any] = [command, *([dest] if dest else []), name, start, end]
        pieces += [word for flag, word in ((byscore, "BYSCORE"), (bylex, "BYLEX"),
                                           (desc, "REV")) if flag]
        if offset is not None and num is not None:
            pieces += ("LIMIT", offset, num)
        if withscores:
            pieces.append("WITHSCORES")
        return self.execute_command(*pieces, withscores=withscores,
                                    score_cast_func=score_cast_func)

    @sends("zrange", "zrevrange")
    def zrange(self, name: Any, start: Any, end: Any, desc: bool = False,
               withscores: bool = False, score_cast_func: Any = float, byscore: bool = False,
               bylex: bool = False, offset: int | None = None, num: int | None = None) -> Any:
        if not byscore and not bylex and offset is None and num is None and desc:
            return self.zrevrange(name, start, end, withscores, score_cast_func)
        return self._zrange("ZRANGE", None, name, start, end, desc, byscore, bylex, withscores,
                            score_cast_func, offset, num)

    @sends("zrangestore")
    def zrangestore(self, dest: Any, name: Any, start: Any, end: Any, byscore: bool = False,
                    bylex: bool = False, desc: bool = False, offset: int | None = None,
                    num: int | None = None) -> int:
        return self._zrange("ZRANGESTORE", dest, name, start, end, desc, byscore, bylex, False,
                            None, offset, num)

    @sends("zrevrange")
    def zrevrange(self, name: Any, start: int, end: int, withscores: bool = False,
                  score_cast_func: Any = float) -> Any:
        pieces: list[Any] = ["ZREVRANGE", name, start, end]
        if withscores:
            pieces.append(b"WITHSCORES")
        return self.execute_command(*pieces, withscores=withscores,
                                    score_cast_func=score_cast_func)

    def _by_score_or_lex(self, command: str, name: Any, first: Any, second: Any,
                         start: int | None, num: int | None, withscores: bool = False,
                         score_cast_func: Any = float) -> Any:
        """ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX."""
        if (start is not None) != (num is not None):
            raise DataError("``start`` and ``num`` must both be specified")
        pieces: list[Any] = [command, name, first, second]
        if start is not None and num is not None:
            pieces += (b"LIMIT" if command == "ZRANGEBYLEX" else "LIMIT", start, num)
        if withscores:
            pieces.append("WITHSCORES")
        return self.execute_command(*pieces, withscores=withscores,
                                    score_cast_func=score_cast_func)

    @sends("zrangebyscore")
    def zrangebyscore(self, name: Any, min: Any, max: Any, start: int | None = None,
                      num: int | None = None, withscores: bool = False,
                      score_cast_func: Any = float) -> Any:
        return self._by_score_or_lex("ZRANGEBYSCORE", name, min, max, start, num, withscores,
                                     score_cast_func)

    @sends("zrevrangebyscore")
    def zrevrangebyscore(self, name: Any, max: Any, min: Any, start: int | None = None,
                         num: int | None = None, withscores: bool = False,
                         score_cast_func: Any = float) -> Any:
        return self._by_score_or_lex("ZREVRANGEBYSCORE", name, max, min, start, num,
                                     withscores, score_cast_func)

    @sends("zrangebylex")
    def zrangebylex(self, name: Any, min: Any, max: Any, start: int | None = None,
                    num: int | None = None) -> list:
        return self._by_score_or_lex("ZRANGEBYLEX", name, min, max, start, num)

    @sends("zrevrangebylex")
    def zrevrangebylex(self, name: Any, max: Any, min: Any, start: int | None = None,
                       num: int | None = None) -> list:
        return self._by_score_or_lex("ZREVRANGEBYLEX", name, max, min, start, num)

    @sends("zrank")
    def zrank(self, name: Any, value: Any, withscore: bool = False,
              score_cast_func: Any = float) -> Any:
        pieces = ["ZRANK", name, value, *(["WITHSCORE"] if withscore else [])]
        return self.execute_command(*pieces, withscore=withscore,
                                    score_cast_func=score_cast_func)

    @sends("zrevrank")
    def zrevrank(self, name: Any, value: Any, withscore: bool = False,
                 score_cast_func: Any = float) -> Any:
        pieces = ["ZREVRANK", name, value, *(["WITHSCORE"] if withscore else [])]
        return self.execute_command(*pieces, withscore=withscore,
                                    score_cast_func=score_cast_func)

    @sends("zpopmin")
    def zpopmin(self, name: Any, count: int | None = None) -> list:
        return self.execute_command("ZPOPMIN", name, *([] if count is None else [count]),
                                    withscores=True)

    @sends("zpopmax")
    def zpopmax(self, name: Any, count: int | None = None) -> list:
        return self.execute_command("ZPOPMAX", name, *([] if count is None else [count]),
                                    withscores=True)

    @sends("bzpopmin")
    def bzpopmin(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BZPOPMIN", *list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    @sends("bzpopmax")
    def bzpopmax(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BZPOPMAX", *list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    @sends("zmpop")
    def zmpop(self, num_keys: int, keys: list, min: bool | None = False,
              max: bool | None = False, count: int | None = 1) -> list | None:
        args: list[Any] = [num_keys, *keys]
        if bool(min) == bool(max):
            raise DataError
        args.append("MIN" if min else "MAX")
        if count != 1:
            args += ("COUNT", count)
        return self.execute_command("ZMPOP", *args)

    @sends("bzmpop")
    def bzmpop(self, timeout: float, numkeys: int, keys: list, min: bool | None = False,
               max: bool | None = False, count: int | None = 1) -> list | None:
        if bool(min) == bool(max):
            raise DataError("Either min or max, but not both must be set")
        return self.execute_command("BZMPOP", timeout, numkeys, *keys,
                                    "MIN" if min else "MAX", "COUNT", count)

    @sends("zrandmember")
    def zrandmember(self, key: Any, count: int | None = None,
                    withscores: bool = False) -> Any:
        params: list[Any] = [] if count is None else [count]
        if withscores:
            params.append("WITHSCORES")
        return self.execute_command("ZRANDMEMBER", key, *params, withscores=withscores)

    def _zaggregate(self, command: str, dest: Any, keys: Any, aggregate: str | None = None,
                    **options: Any) -> Any:
        """ZUNION, ZINTER and their STOREs: `keys` a sequence, or a dict of key -> weight."""
        pieces: list[Any] = [command, *([] if dest is None else [dest]), len(keys)]
        weights = None
        if isinstance(keys, dict):
            keys, weights = keys.keys(), keys.values()
        pieces.extend(keys)
        if weights:
            pieces.append(b"WEIGHTS")
            pieces.extend(weights)
        if aggregate:
            if aggregate.upper() not in ("SUM", "MIN", "MAX", "COUNT"):
                raise DataError("aggregate can be sum, min, max or count.")
            pieces += (b"AGGREGATE", aggregate)
        if options.get("withscores", False):
            pieces.append(b"WITHSCORES")
        return self.execute_command(*pieces, **options)

    @sends("zunion")
    def zunion(self, keys: Any, aggregate: str | None = None, withscores: bool = False,
               score_cast_func: Any = float) -> Any:
        return self._zaggregate("ZUNION", None, keys, aggregate, withscores=withscores,
                                score_cast_func=score_cast_func)

    @sends("zunionstore")
    def zunionstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> int:
        return self._zaggregate("ZUNIONSTORE", dest, keys, aggregate)

    @sends("zinter")
    def zinter(self, keys: Any, aggregate: str | None = None, withscores: bool = False) -> Any:
        return self._zaggregate("ZINTER", None, keys, aggregate, withscores=withscores)

    @sends("zinterstore")
    def zinterstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> int:
        return self._zaggregate("ZINTERSTORE", dest, keys, aggregate)

    @sends("zintercard")
    def zintercard(self, numkeys: int, keys: list, limit: int = 0) -> int:
        return self.execute_command("ZINTERCARD", numkeys, *keys, "LIMIT", limit)

    @sends("zdiff")
    def zdiff(self, keys: Any, withscores: bool = False) -> Any:
        pieces: list[Any] = [len(keys), *keys, *(["WITHSCORES"] if withscores else [])]
        return self.execute_command("ZDIFF", *pieces, withscores=withscores)

    @sends("zdiffstore")
    def zdiffstore(self, dest: Any, keys: Any) -> int:
        return self.execute_command("ZDIFFSTORE", dest, len(keys), *keys)

    @sends("zscan")
    def zscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None,
              score_cast_func: Any = float) -> tuple[int, list]:
        return self.execute_command("ZSCAN", name, cursor, *scan_options(match, count),
                                    score_cast_func=score_cast_func)

    @sends("zscan")
    def zscan_iter(self, name: Any, match: Any = None, count: int | None = None,
                   score_cast_func: Any = float) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.zscan(name, cursor=cursor, match=match, count=count,
                                      score_cast_func=score_cast_func)
            yield from data
