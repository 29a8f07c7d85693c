"""The redis-py facade's shared part: what every command group's mixin (the other modules of
engine.runtime.clients) builds on, and redis-py's reply shaping.

Owns `ClientBase` (a facade's state: its `decode_responses` and the engine's bound `execute`;
`_run`, which turns an argument redis-py's encoder refuses into its `DataError`; `_run_wired`;
`execute_command`, which runs any command as `redis.Redis.execute_command` does), `DataError`,
`check_encodable`, redis-py's RESP2 response callbacks (redis/_parsers/helpers.py, on
wire-shaped values) and their table by command name (`execute_command_callbacks`: the one
place of reply shaping for every method but the streams'), the argv pieces several groups
build alike (`list_or_args`, `scan_options`, `expire_flags`), and `sends`: a method's
declaration of the commands it sends, by the command table's names (checked against the table
by tests/engine/runtime/test_clients.py; nothing at run time).

The replies as redis-py's RESP2 client gives them with `legacy_responses=True` (the default):
status replies as bytes, bytes decoded to str when `decode_responses` is on, then the callbacks
(bool for OK, hgetall -> dict, smembers -> set, INFO -> parse_info's dict, ...).
`decode_responses` belongs to the facade, as to a redis-py client: two facades over one engine
may differ.

Needs of the engine: `execute(*argv)` (plain RESP2-shaped reply, `ReplyError` on error). Must
not touch: command semantics, engine state or the command table (every call goes through
`execute`), and must not import redis-py (a dev-only dependency).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import PlainEntries

# execute_command's options redis-py's commands pass: the reply as bytes whatever the facade
# decodes (DUMP, FUNCTION DUMP); the value an error reply gives instead (MGET of no key).
NEVER_DECODE = "NEVER_DECODE"
EMPTY_RESPONSE = "EMPTY_RESPONSE"


class DataError(StreamkeepError, ValueError):
    """A call redis-py refuses before sending it (redis.exceptions.DataError's messages)."""


# --- encoding and decoding as redis-py's Encoder and RESP2 parser do ---------------------------


def check_encodable(args: tuple[Any, ...]) -> None:
    """Raise redis-py's DataError for the first argument its Encoder refuses."""
    for value in args:
        if isinstance(value, (bytes, bytearray, memoryview, str)):
            continue
        if isinstance(value, bool):
            raise DataError(
                "Invalid input of type: 'bool'. Convert to a bytes, string, int or float first."
            )
        if not isinstance(value, (int, float)):
            raise DataError(
                f"Invalid input of type: '{type(value).__name__}'. "
                f"Convert to a bytes, string, int or float first."
            )


def _wire(value: Any, decode: bool) -> Any:
    """An engine reply as redis-py's RESP2 parser hands it to callbacks: bulk and status
    replies as bytes, or as str (utf-8, strict) when decoding."""
    t = type(value)
    if t is bytes:
        return value.decode() if decode else value
    if t is str:
        return value if decode else value.encode()
    if t is list or t is PlainEntries:  # (the stream reads' entries: a list as it is)
        return [_wire(v, decode) for v in value]
    return value


def _str_if_bytes(value: Any) -> Any:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


# --- redis-py's RESP2 response callbacks (redis/_parsers/helpers.py), on wire-shaped values ---


def pairs_to_dict(response: Any, decode_keys: bool = False) -> dict:
    if response is None:
        return {}
    if decode_keys:
        return dict(zip(map(_str_if_bytes, response[::2]), response[1::2], strict=False))
    it = iter(response)
    return dict(zip(it, it, strict=False))


def bool_ok(response: Any, **options: Any) -> bool:
    return _str_if_bytes(response) == "OK"


def parse_stream_list(response: Any, **options: Any) -> list | None:
    if response is None:
        return None
    data: list = []
    claim = "claim_min_idle_time" in options
    for r in response:
        if r is None:
            data.append((None, None))
        elif claim:
            data.append((r[0], pairs_to_dict(r[1]), *r[2:]))
        else:
            data.append((r[0], pairs_to_dict(r[1])))
    return data


def parse_list_of_dicts(response: Any) -> list[dict]:
    return [pairs_to_dict(r, decode_keys=True) for r in response]


def parse_xclaim(response: Any, **options: Any) -> list | None:
    if options.get("parse_justid", False):
        return response
    return parse_stream_list(response)


def parse_xautoclaim(response: Any, **options: Any) -> Any:
    if options.get("parse_justid", False):
        return response[1]
    response[1] = parse_stream_list(response[1])
    return response


def parse_xinfo_stream(response: Any, **options: Any) -> dict[str, Any]:
    data = pairs_to_dict(response, decode_keys=True)
    if not options.get("full", False):
        first = data.get("first-entry")
        if first is not None and first[0] is not None:
            data["first-entry"] = (first[0], pairs_to_dict(first[1]))
        last = data["last-entry"]
        if last is not None and last[0] is not None:
            data["last-entry"] = (last[0], pairs_to_dict(last[1]))
    else:
        data["entries"] = {_id: pairs_to_dict(entry) for _id, entry in data["entries"]}
        if len(data["groups"]) > 0 and isinstance(data["groups"][0], list):
            data["groups"] = [pairs_to_dict(g, decode_keys=True) for g in data["groups"]]
            for g in data["groups"]:
                if g["consumers"] and g["consumers"][0] is not None:
                    g["consumers"] = [pairs_to_dict(c, decode_keys=True) for c in g["consumers"]]
        else:
            data["groups"] = [
                {_str_if_bytes(k): v for k, v in group.items()} for group in data["groups"]
            ]
    return data


def parse_xread(response: Any, **options: Any) -> list:
    if response is None:
        return []
    return [[r[0], parse_stream_list(r[1], **options)] for r in response]


def parse_xpending_range(response: Any) -> list[dict[str, Any]]:
    k = ("message_id", "consumer", "time_since_delivered", "times_delivered")
    return [dict(zip(k, r, strict=False)) for r in response]


def parse_xpending(response: Any, **options: Any) -> Any:
    if options.get("parse_detail", False):
        return parse_xpending_range(response)
    consumers = [{"name": n, "pending": int(p)} for n, p in response[3] or []]
    return {"pending": response[0], "min": response[1], "max": response[2], "consumers": consumers}


def parse_scan(response: Any, **options: Any) -> tuple[int, list]:
    cursor, r = response
    return int(cursor), r


def _score_cast(options: dict[str, Any]) -> Callable[[Any], Any]:
    """redis-py's _wrap_score_cast_func: the caller's cast, retried through float() for a
    score text it refuses (1e+18 given to int)."""
    cast = options.get("score_cast_func", float)
    if cast is float:
        return float

    def safe_cast(x: Any) -> Any:
        try:
            return cast(x)
        except (ValueError, TypeError):
            return cast(float(x))

    return safe_cast


def zset_score_pairs(response: Any, **options: Any) -> Any:
    if not response or not options.get("withscores"):
        return response
    cast = _score_cast(options)
    it = iter(response)
    return list(zip(it, map(cast, it), strict=False))


def zpop_score_pairs(response: Any, **options: Any) -> Any:
    if not response:
        return response
    cast = _score_cast(options)
    it = iter(response)
    return list(zip(it, map(cast, it), strict=False))


def zset_score_for_rank(response: Any, **options: Any) -> Any:
    if not response or not options.get("withscore"):
        return response
    return [response[0], _score_cast(options)(response[1])]


def float_or_none(response: Any, **options: Any) -> float | None:
    return None if response is None else float(response)


def parse_zadd(response: Any, **options: Any) -> int | float | None:
    if response is None:
        return None
    if options.get("as_score"):
        return float(response)
    return int(response)


def parse_zmscore(response: Any, **options: Any) -> list[float | None]:
    return [None if score is None else float(score) for score in response]


def parse_hscan(response: Any, **options: Any) -> tuple[int, Any]:
    cursor, r = response
    if options.get("no_values", False):
        return int(cursor), r or []
    return int(cursor), r and pairs_to_dict(r) or {}


def parse_zscan(response: Any, **options: Any) -> tuple[int, list]:
    cast = _score_cast(options)
    cursor, r = response
    it = iter(r)
    return int(cursor), list(zip(it, map(cast, it), strict=False))


def _as_set(response: Any, **options: Any) -> set:
    return response and set(response) or set()


def _bzpop(response: Any, **options: Any) -> tuple | None:
    return response and (response[0], response[1], float(response[2])) or None


def _blocking_pop(response: Any, **options: Any) -> tuple | None:
    return response and tuple(response) or None


def _hgetall(response: Any, **options: Any) -> dict:
    return response and pairs_to_dict(response) or {}


def parse_set_result(response: Any, **options: Any) -> Any:
    """SET: True or False (None: not set), or the old value when GET was given."""
    if options.get("get"):
        return response
    return response and _str_if_bytes(response) == "OK"


def timestamp_to_datetime(response: Any) -> datetime.datetime | None:
    """LASTSAVE: a unix time as a naive local datetime."""
    if not response:
        return None
    try:
        response = int(response)
    except ValueError:
        return None
    return datetime.datetime.fromtimestamp(response)


def parse_info(response: Any) -> dict[str, Any]:
    """INFO's text as a dict: numbers as int or float, `a,b` as lists, `k=v,...` as dicts,
    `module:` lines gathered in "modules", lines without a colon in "__raw__"."""
    info: dict[str, Any] = {}
    response = _str_if_bytes(response)

    def get_value(value: str) -> Any:
        if "," not in value and "=" not in value:
            try:
                if "." in value:
                    return float(value)
                return int(value)
            except ValueError:
                return value
        elif "=" not in value:
            return [get_value(v) for v in value.split(",") if v]
        else:
            sub_dict: dict[str, Any] = {}
            for item in value.split(","):
                if not item:
                    continue
                if "=" in item:
                    k, v = item.rsplit("=", 1)
                    sub_dict[k] = get_value(v)
                else:
                    sub_dict[item] = True
            return sub_dict

    for line in response.splitlines():
        if line and not line.startswith("#"):
            if line.find(":") != -1:
                # The value may hold ':'; only the 'host:' pseudo command's key does.
                key, value = line.split(":", 1)
                if key == "cmdstat_host":
                    key, value = line.rsplit(":", 1)
                if key == "module":
                    info.setdefault("modules", []).append(get_value(value))
                else:
                    info[key] = get_value(value)
            else:
                info.setdefault("__raw__", []).append(line)
    return info


def parse_client_list(response: Any, **options: Any) -> list[dict[str, str]]:
    """CLIENT LIST: a dict of str per client line (a token without '=' continues the last
    value: an address with a space)."""
    clients = []
    for c in _str_if_bytes(response).splitlines():
        client_dict: dict[str, str] = {}
        last_key: Any = None
        for token in c.split(" "):
            if "=" in token:
                key, value = token.split("=", 1)
                client_dict[key] = value
                last_key = key
            else:
                client_dict[last_key] += " " + token
        if client_dict:
            clients.append(client_dict)
    return clients


def parse_config_get(response: Any, **options: Any) -> dict:
    response = [_str_if_bytes(i) if i is not None else None for i in response]
    return response and pairs_to_dict(response) or {}


# The entries of redis-py's _RedisCallbacks + _RedisCallbacksRESP2 for the commands the engine
# knows (keys upper case; redis-py looks the command name up case-insensitively).
execute_command_callbacks: dict[str, Callable[..., Any]] = {
    "FLUSHALL": bool_ok,
    "FLUSHDB": bool_ok,
    "RENAME": bool_ok,
    "SELECT": bool_ok,
    "RENAMENX": bool,
    "PING": lambda r: _str_if_bytes(r) == "PONG",
    "SCAN": parse_scan,
    "PUBSUB NUMSUB": lambda r: list(zip(r[0::2], r[1::2], strict=True)),
    "PUBSUB SHARDNUMSUB": lambda r: list(zip(r[0::2], r[1::2], strict=True)),
    "TIME": lambda x: (int(x[0]), int(x[1])),
    "XREAD": parse_xread,
    "XREADGROUP": parse_xread,
    "XRANGE": parse_stream_list,
    "XREVRANGE": parse_stream_list,
    "XAUTOCLAIM": parse_xautoclaim,
    "XCLAIM": parse_xclaim,
    "XGROUP CREATE": bool_ok,
    "XGROUP DESTROY": bool,
    "XGROUP SETID": bool_ok,
    "XINFO STREAM": parse_xinfo_stream,
    "XINFO CONSUMERS": parse_list_of_dicts,
    "XINFO GROUPS": parse_list_of_dicts,
    "XPENDING": parse_xpending,
    "SCRIPT EXISTS": lambda r: list(map(bool, r)),
    "SCRIPT FLUSH": bool_ok,
    "SCRIPT KILL": bool_ok,
    "SCRIPT LOAD": lambda r: _str_if_bytes(r),
    # sorted sets, hashes, sets, functions, COPY
    "ZADD": parse_zadd,
    "ZSCORE": float_or_none,
    "ZINCRBY": float_or_none,
    "ZMSCORE": parse_zmscore,
    "ZRANGE": zset_score_pairs,
    "ZRANGEBYSCORE": zset_score_pairs,
    "ZREVRANGE": zset_score_pairs,
    "ZREVRANGEBYSCORE": zset_score_pairs,
    "ZINTER": zset_score_pairs,
    "ZUNION": zset_score_pairs,
    "ZPOPMIN": zpop_score_pairs,
    "ZPOPMAX": zpop_score_pairs,
    "BZPOPMIN": _bzpop,
    "BZPOPMAX": _bzpop,
    "ZRANK": zset_score_for_rank,
    "ZREVRANK": zset_score_for_rank,
    "ZSCAN": parse_zscan,
    "HGETALL": _hgetall,
    "HEXISTS": bool,
    "HMSET": bool,
    "HINCRBYFLOAT": float,
    "HSCAN": parse_hscan,
    "SMEMBERS": _as_set,
    "SDIFF": _as_set,
    "SINTER": _as_set,
    "SUNION": _as_set,
    "SMOVE": bool,
    "SSCAN": parse_scan,
    "FUNCTION DELETE": bool_ok,
    "FUNCTION FLUSH": bool_ok,
    "FUNCTION RESTORE": bool_ok,
    "COPY": bool,
    "LSET": bool_ok,
    "LTRIM": bool_ok,
    "BLPOP": _blocking_pop,
    "BRPOP": _blocking_pop,
    # strings
    "SET": parse_set_result,
    "SETNX": bool,
    "SETEX": bool,
    "PSETEX": bool,
    "MSET": bool_ok,
    "MSETNX": bool,
    "INCRBYFLOAT": float,
    # expiry
    "EXPIRE": bool,
    "EXPIREAT": bool,
    "PEXPIRE": bool,
    "PEXPIREAT": bool,
    "PERSIST": bool,
    # server, connection
    "INFO": parse_info,
    "LASTSAVE": timestamp_to_datetime,
    "SAVE": bool_ok,
    "BGSAVE": lambda r: True,
    "BGREWRITEAOF": lambda r: True,
    "CONFIG GET": parse_config_get,
    "CONFIG SET": bool_ok,
    "CONFIG RESETSTAT": bool_ok,
    "CLIENT SETNAME": bool_ok,
    "CLIENT GETNAME": _str_if_bytes,
    "CLIENT LIST": parse_client_list,
}


# --- the argv pieces several groups build alike (redis-py's helpers) -------------------------------


def list_or_args(keys: Any, args: Iterable[Any] | None) -> list[Any]:
    """redis-py's list_or_args: `keys` (one key, or an iterable of them) and then `args`."""
    if isinstance(keys, (bytes, str, bytearray, memoryview)):
        found = [keys]
    else:
        try:
            found = list(keys)
        except TypeError:
            found = [keys]
    if args:
        found.extend(args)
    return found


def scan_options(match: Any, count: int | None) -> list[Any]:
    """MATCH and COUNT of the *SCAN commands."""
    pieces: list[Any] = []
    if match is not None:
        pieces += (b"MATCH", match)
    if count is not None:
        pieces += (b"COUNT", count)
    return pieces


def expire_flags(ex: Any, px: Any, exat: Any, pxat: Any) -> list[Any]:
    """redis-py's extract_expire_flags: EX, PX, EXAT or PXAT and its value (the first given)."""
    if ex is not None:
        if isinstance(ex, datetime.timedelta):
            return ["EX", int(ex.total_seconds())]
        if isinstance(ex, int):
            return ["EX", ex]
        if isinstance(ex, str) and ex.isdigit():
            return ["EX", int(ex)]
        raise DataError("ex must be datetime.timedelta or int")
    if px is not None:
        if isinstance(px, datetime.timedelta):
            return ["PX", int(px.total_seconds() * 1000)]
        if isinstance(px, int):
            return ["PX", px]
        raise DataError("px must be datetime.timedelta or int")
    if exat is not None:
        if isinstance(exat, datetime.datetime):
            exat = int(exat.timestamp())
        return ["EXAT", exat]
    if pxat is not None:
        if isinstance(pxat, datetime.datetime):
            pxat = int(pxat.timestamp() * 1000)
        return ["PXAT", pxat]
    return []


# --- what each method sends -------------------------------------------------------------------

_Method = TypeVar("_Method", bound=Callable[..., Any])
_SENT = "redis_commands"  # (the function attribute `sends` sets)


def sends(*commands: str) -> Callable[[_Method], _Method]:
    """Declare the commands a facade method sends, by their names in the command table ("hset",
    "xgroup|create"). Recorded on the function, which is returned as it is: a call costs
    nothing more."""
    for name in commands:
        if name != name.lower() or " " in name:
            raise ValueError(f"{name!r}: a command as the table names it (lower case, "
                             f"a subcommand after '|')")

    def declare(method: _Method) -> _Method:
        setattr(method, _SENT, commands)
        return method

    return declare


def commands_sent(method: Callable[..., Any]) -> tuple[str, ...]:
    """The commands `sends` declared for `method` (empty: none declared)."""
    return getattr(method, _SENT, ())


class Executor(Protocol):
    """What the facade needs of an engine: one command in, its plain reply out."""

    def execute(self, *args: Any) -> Any: ...


class ClientBase:
    """A facade's state and the one way its methods send a command: `_run` (the plain
    reply), `_run_wired` (the reply as redis-py's parser hands it to its callbacks) and
    `execute_command` (redis-py's, callbacks applied). Each command group's mixin derives
    from it, and `RedisAPI` from them all."""

    __slots__ = ("decode_responses", "execute")

    def __init__(self, engine: Executor, decode_responses: bool = False) -> None:
        self.decode_responses = decode_responses
        # Bound once: a call reaches the engine without looking its method up again.
        self.execute: Callable[..., Any] = engine.execute

    def _run(self, *args: Any) -> Any:
        try:
            return self.execute(*args)
        except TypeError:
            check_encodable(args)
            raise

    def _run_wired(self, *args: Any) -> Any:
        """The reply as redis-py's RESP2 parser hands it to its callbacks."""
        return _wire(self._run(*args), self.decode_responses)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        """Run a command as redis.Redis.execute_command does, with redis-py's RESP2 callbacks."""
        command_name = args[0]
        if isinstance(command_name, str):
            argv = (*command_name.encode().split(), *args[1:])
        elif b" " in command_name:
            argv = (*command_name.split(), *args[1:])
        else:
            argv = args
        decode = self.decode_responses
        if NEVER_DECODE in options:
            options.pop(NEVER_DECODE)
            decode = False
        try:
            reply = self._run(*argv)
        except ReplyError:
            if EMPTY_RESPONSE in options:
                return options[EMPTY_RESPONSE]
            raise
        options.pop(EMPTY_RESPONSE, None)
        options.pop("keys", None)
        response = _wire(reply, decode)
        if isinstance(command_name, str):
            callback = execute_command_callbacks.get(command_name.upper())
            if callback is not None:
                return callback(response, **options)
        return response
