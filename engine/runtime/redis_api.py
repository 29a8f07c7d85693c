"""redis-py's client, in process: redis-py 8.1's calls over an engine, for streams, strings,
sorted sets, hashes, sets, lists, functions, the keyspace (expiry, DUMP/RESTORE, OBJECT) and the
server calls (INFO, CONFIG, CLIENT, SAVE, ...).

Owns `RedisAPI` (`Engine.redis()` builds one: a thin object over the engine's `execute`),
`DataError` and the client side of the redis-py contract: the argv each method sends (built
exactly as redis-py 8.1 builds it, with the same client-side `DataError` checks and messages),
argument encoding errors as redis-py raises them, and the reply conversion of redis-py's RESP2
client with `legacy_responses=True` (the default): status replies as bytes, bytes decoded to str
when `decode_responses` is on, then the same response callbacks (xrange -> [(id, {field:
value})], xpending -> dict, XINFO -> dicts with str keys, bool for OK, zrange withscores ->
[(member, float)], hgetall -> dict, smembers -> set, INFO -> parse_info's dict, ...). The
stream methods shape their replies themselves (their hot paths); the other types' methods build
redis-py's argv and go through `execute_command`, so the callbacks table is their one place of
reply shaping.
`execute_command(*args, **options)` runs any command the way `redis.Redis.execute_command`
does, applying the callbacks redis-py registers for that name. `decode_responses` belongs to
the facade, as to a redis-py client: two facades over one engine may differ.

Needs of the engine: `execute(*argv)` (plain RESP2-shaped reply, `ReplyError` on error). Must
not touch: command semantics, engine state or the command table (every call goes through
`execute`), and must not import redis-py (a dev-only dependency).
"""

from __future__ import annotations

import builtins
import datetime
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import PlainEntries

__all__ = ["DataError", "Executor", "RedisAPI", "Script", "check_encodable",
           "execute_command_callbacks"]

_REF_POLICIES = {"KEEPREF", "DELREF", "ACKED"}
_NEVER_DECODE = "NEVER_DECODE"
_EMPTY_RESPONSE = "EMPTY_RESPONSE"


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


# --- fused decode + parse for the entry-carrying hot paths --------------------------------------


def _entries(response: list | None, decode: bool, claim: bool = False) -> list | None:
    """parse_stream_list over an engine reply, decoding on the way when asked."""
    if response is None:
        return None
    data: list = []
    append = data.append
    for r in response:
        if r is None:
            append((None, None))
            continue
        fields = r[1]
        if fields is None:
            values: dict = {}
        else:
            it = map(bytes.decode, fields) if decode else iter(fields)
            values = dict(zip(it, it, strict=False))
        sid = r[0].decode() if decode else r[0]
        if claim:
            append((sid, values, *r[2:]))
        else:
            append((sid, values))
    return data


def _streams(response: list | None, decode: bool, claim: bool = False) -> list:
    """parse_xread over an engine reply."""
    if response is None:
        return []
    if decode:
        return [[r[0].decode(), _entries(r[1], True, claim)] for r in response]
    return [[r[0], _entries(r[1], False, claim)] for r in response]


def _ids(response: list, decode: bool) -> list:
    return [i.decode() for i in response] if decode else response


# --- the argv pieces several methods build alike (redis-py's checks, its messages) ------------


_NO_CLIENT_IDS: list[Any] = []  # client_list's default (redis-py's `client_id=[]`); never changed


def _at_most_one(*flags: Any) -> bool:
    """redis-py's at_most_one_value_set."""
    return sum(map(bool, flags)) <= 1


def _expire_options(nx: bool, xx: bool, gt: bool, lt: bool) -> list[str]:
    """EXPIRE's and its siblings' NX, XX, GT, LT as given (redis-py checks no combination)."""
    return [word for flag, word in ((nx, "NX"), (xx, "XX"), (gt, "GT"), (lt, "LT")) if flag]


def _check_positive(command: str, option: str, value: Any) -> None:
    if not isinstance(value, int) or value < 1:
        raise DataError(f"{command} {option} must be a positive integer")


def _check_non_negative(command: str, option: str, value: Any) -> None:
    if not isinstance(value, int) or value < 0:
        raise DataError(f"{command} {option} must be a non-negative integer")


def _given_and_not_negative(value: Any, message: str) -> bool:
    """redis-py's `try: if int(value) < 0: raise DataError ... except TypeError: pass`: False
    for a value int() refuses by type (None: not given), DataError(message) for a negative one."""
    try:
        number = int(value)
    except TypeError:
        return False
    if number < 0:
        raise DataError(message)
    return True


def _check_ref_policy(command: str, ref_policy: str) -> None:
    if ref_policy not in _REF_POLICIES:
        raise DataError(f"{command} ref_policy must be one of: KEEPREF, DELREF, ACKED")


def _id_list(command: str, ids: tuple[Any, ...]) -> list[Any]:
    """`IDS numids id...` of XACKDEL, XDELEX and XNACK."""
    if not ids:
        raise DataError(f"{command} requires at least one message ID")
    return ["IDS", len(ids), *ids]


def _add_read_counts(pieces: list[Any], command: str, count: int | None,
                     max_count: int | None, max_size: int | None) -> None:
    """XREAD's and XREADGROUP's COUNT, MAXCOUNT and MAXSIZE."""
    if count is not None:
        _check_positive(command, "count", count)
        pieces += (b"COUNT", str(count))
    if max_count is not None:
        _check_positive(command, "max_count", max_count)
        if count is not None and max_count < count:
            raise DataError(f"{command} max_count must be greater than or equal to count")
        pieces += (b"MAXCOUNT", str(max_count))
    if max_size is not None:
        _check_positive(command, "max_size", max_size)
        pieces += (b"MAXSIZE", str(max_size))


def _add_block(pieces: list[Any], command: str, block: int | None) -> None:
    if block is not None:
        _check_non_negative(command, "block", block)
        pieces += (b"BLOCK", str(block))


def _add_streams(pieces: list[Any], command: str, streams: dict) -> None:
    if not isinstance(streams, dict) or len(streams) == 0:
        raise DataError(f"{command} streams must be a non empty dict")
    pieces.append(b"STREAMS")
    pieces.extend(streams.keys())
    pieces.extend(streams.values())


def _add_entries_read(pieces: list[Any], entries_read: int | None) -> None:
    if entries_read is not None:
        pieces.extend(["ENTRIESREAD", entries_read])


def _xadd_argv(
    name: Any,
    fields: dict,
    id: Any,
    maxlen: int | None,
    approximate: bool,
    nomkstream: bool,
    minid: Any,
    limit: int | None,
    ref_policy: str | None,
    idmpauto: str | None,
    idmp: tuple[str, bytes] | None,
) -> list[Any]:
    """XADD with options, checked as redis-py checks them, in its order."""
    pieces: list[Any] = [b"XADD", name]
    if maxlen is not None and minid is not None:
        raise DataError("Only one of ```maxlen``` or ```minid``` may be specified")
    if idmpauto is not None and idmp is not None:
        raise DataError("Only one of ```idmpauto``` or ```idmp``` may be specified")
    if (idmpauto is not None or idmp is not None) and id != "*":
        raise DataError("IDMPAUTO and IDMP can only be used with id='*'")
    if ref_policy is not None:
        _check_ref_policy("XADD", ref_policy)
    if nomkstream:
        pieces.append(b"NOMKSTREAM")
    if ref_policy is not None:
        pieces.append(ref_policy)
    if idmpauto is not None:
        pieces.extend([b"IDMPAUTO", idmpauto])
    if idmp is not None:
        if not isinstance(idmp, tuple) or len(idmp) != 2:
            raise DataError("XADD idmp must be a tuple of (producer_id, idempotent_id)")
        pieces.extend([b"IDMP", idmp[0], idmp[1]])
    if maxlen is not None:
        if not isinstance(maxlen, int) or maxlen < 0:
            raise DataError("XADD maxlen must be non-negative integer")
        pieces.append(b"MAXLEN")
        if approximate:
            pieces.append(b"~")
        pieces.append(str(maxlen))
    if minid is not None:
        pieces.append(b"MINID")
        if approximate:
            pieces.append(b"~")
        pieces.append(minid)
    if limit is not None:
        pieces.extend([b"LIMIT", limit])
    pieces.append(id)
    if not isinstance(fields, dict) or len(fields) == 0:
        raise DataError("XADD fields must be a non-empty dict")
    for pair in fields.items():
        pieces.extend(pair)
    return pieces


def _list_or_args(keys: Any, args: Iterable[Any] | None) -> list[Any]:
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


def _scan_options(match: Any, count: int | None) -> list[Any]:
    """MATCH and COUNT of the *SCAN commands."""
    pieces: list[Any] = []
    if match is not None:
        pieces += (b"MATCH", match)
    if count is not None:
        pieces += (b"COUNT", count)
    return pieces


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


def _expire_flags(ex: Any, px: Any, exat: Any, pxat: Any) -> list[Any]:
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


class Executor(Protocol):
    """What the facade needs of an engine: one command in, its plain reply out."""

    def execute(self, *args: Any) -> Any: ...


class RedisAPI:
    """redis-py 8.1's methods for streams, strings, sorted sets, hashes, sets, lists and
    functions, and the keyspace and server calls an application makes, over `engine.execute`,
    with redis-py's `decode_responses` (False: bytes; True: str). Not here: the commands the
    engine lacks (RANDOMKEY, MOVE, LOLWUT, DEBUG OBJECT) and SELECT (one database)."""

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

    # --- generic -----------------------------------------------------------------------------

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
        if _NEVER_DECODE in options:
            options.pop(_NEVER_DECODE)
            decode = False
        try:
            reply = self._run(*argv)
        except ReplyError:
            if _EMPTY_RESPONSE in options:
                return options[_EMPTY_RESPONSE]
            raise
        options.pop(_EMPTY_RESPONSE, None)
        options.pop("keys", None)
        response = _wire(reply, decode)
        if isinstance(command_name, str):
            callback = execute_command_callbacks.get(command_name.upper())
            if callback is not None:
                return callback(response, **options)
        return response

    # --- scripting ----------------------------------------------------------------------------

    def eval(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVAL", script, numkeys, *keys_and_args)

    def eval_ro(self, script: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVAL_RO", script, numkeys, *keys_and_args)

    def evalsha(self, sha: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def evalsha_ro(self, sha: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("EVALSHA_RO", sha, numkeys, *keys_and_args)

    def script_load(self, script: Any) -> str:
        return self.execute_command("SCRIPT LOAD", script)

    def script_exists(self, *args: Any) -> list[bool]:
        return self.execute_command("SCRIPT EXISTS", *args)

    def script_flush(self, sync_type: str | None = None) -> bool:
        if sync_type not in ("SYNC", "ASYNC", None):
            raise DataError("SCRIPT FLUSH defaults to SYNC in redis > 6.2, or accepts "
                            "SYNC/ASYNC. For older versions, of redis leave as None.")
        return self.execute_command("SCRIPT FLUSH", *([sync_type] if sync_type else []))

    def script_kill(self) -> bool:
        return self.execute_command("SCRIPT KILL")

    def register_script(self, script: str | bytes) -> Script:
        """redis-py's register_script: a callable running the script by its SHA1 (loading it
        first when the engine answers NOSCRIPT)."""
        return Script(self, script)

    # --- keyspace, server, connection ----------------------------------------------------------

    def delete(self, *names: Any) -> int:
        return self.execute_command("DEL", *names)

    def unlink(self, *names: Any) -> int:
        return self.execute_command("UNLINK", *names)

    def exists(self, *names: Any) -> int:
        return self.execute_command("EXISTS", *names, keys=names)

    def touch(self, *args: Any) -> int:
        return self.execute_command("TOUCH", *args)

    def type(self, name: Any) -> bytes | str:
        return self.execute_command("TYPE", name, keys=[name])

    def keys(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("KEYS", pattern, **kwargs)

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

    def dbsize(self, **kwargs: Any) -> int:
        return self.execute_command("DBSIZE", **kwargs)

    def flushdb(self, asynchronous: bool = False, **kwargs: Any) -> bool:
        args = [b"ASYNC"] if asynchronous else []
        return self.execute_command("FLUSHDB", *args, **kwargs)

    def flushall(self, asynchronous: bool = False, **kwargs: Any) -> bool:
        args = [b"ASYNC"] if asynchronous else []
        return self.execute_command("FLUSHALL", *args, **kwargs)

    def ping(self, **kwargs: Any) -> bool:
        return self.execute_command("PING", **kwargs)

    def __delitem__(self, name: Any) -> None:
        self.delete(name)

    def __contains__(self, name: Any) -> bool:
        """`name in r`: redis-py's alias of exists (whether the key exists)."""
        return bool(self.exists(name))

    def expire(self, name: Any, time: Any, nx: bool = False, xx: bool = False,
               gt: bool = False, lt: bool = False) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds())
        return self.execute_command("EXPIRE", name, time, *_expire_options(nx, xx, gt, lt))

    def pexpire(self, name: Any, time: Any, nx: bool = False, xx: bool = False,
                gt: bool = False, lt: bool = False) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds() * 1000)
        return self.execute_command("PEXPIRE", name, time, *_expire_options(nx, xx, gt, lt))

    def expireat(self, name: Any, when: Any, nx: bool = False, xx: bool = False,
                 gt: bool = False, lt: bool = False) -> bool:
        if isinstance(when, datetime.datetime):
            when = int(when.timestamp())
        return self.execute_command("EXPIREAT", name, when, *_expire_options(nx, xx, gt, lt))

    def pexpireat(self, name: Any, when: Any, nx: bool = False, xx: bool = False,
                  gt: bool = False, lt: bool = False) -> bool:
        if isinstance(when, datetime.datetime):
            when = int(when.timestamp() * 1000)
        return self.execute_command("PEXPIREAT", name, when, *_expire_options(nx, xx, gt, lt))

    def ttl(self, name: Any) -> int:
        return self.execute_command("TTL", name)

    def pttl(self, name: Any) -> int:
        return self.execute_command("PTTL", name)

    def expiretime(self, key: Any) -> int:
        return self.execute_command("EXPIRETIME", key)

    def pexpiretime(self, key: Any) -> int:
        return self.execute_command("PEXPIRETIME", key)

    def persist(self, name: Any) -> bool:
        return self.execute_command("PERSIST", name)

    def dump(self, name: Any) -> bytes | None:
        return self.execute_command("DUMP", name, **{_NEVER_DECODE: []})

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

    def object(self, infotype: str, key: Any, **kwargs: Any) -> Any:
        """OBJECT ENCODING | REFCOUNT | IDLETIME | FREQ key (redis-py keeps the reply as is)."""
        return self.execute_command("OBJECT", infotype, key, infotype=infotype, **kwargs)

    def info(self, section: str | None = None, *args: str, **kwargs: Any) -> dict[str, Any]:
        if section is None:
            return self.execute_command("INFO", **kwargs)
        return self.execute_command("INFO", section, *args, **kwargs)

    def config_get(self, pattern: Any = "*", *args: Any, **kwargs: Any) -> dict:
        return self.execute_command("CONFIG GET", pattern, *args, **kwargs)

    def config_set(self, name: Any, value: Any, *args: Any, **kwargs: Any) -> bool:
        return self.execute_command("CONFIG SET", name, value, *args, **kwargs)

    def config_resetstat(self, **kwargs: Any) -> bool:
        return self.execute_command("CONFIG RESETSTAT", **kwargs)

    def lastsave(self, **kwargs: Any) -> datetime.datetime | None:
        return self.execute_command("LASTSAVE", **kwargs)

    def save(self, **kwargs: Any) -> bool:
        return self.execute_command("SAVE", **kwargs)

    def bgsave(self, schedule: bool = True, **kwargs: Any) -> Any:
        return self.execute_command("BGSAVE", *(["SCHEDULE"] if schedule else []), **kwargs)

    def bgrewriteaof(self, **kwargs: Any) -> Any:
        return self.execute_command("BGREWRITEAOF", **kwargs)

    def wait(self, num_replicas: int, timeout: int, **kwargs: Any) -> int:
        return self.execute_command("WAIT", num_replicas, timeout, **kwargs)

    def waitaof(self, num_local: int, num_replicas: int, timeout: int,
                **kwargs: Any) -> list[int]:
        return self.execute_command("WAITAOF", num_local, num_replicas, timeout, **kwargs)

    def memory_usage(self, key: Any, samples: int | None = None, **kwargs: Any) -> int | None:
        args: list[Any] = []
        if isinstance(samples, int):
            args += (b"SAMPLES", samples)
        return self.execute_command("MEMORY USAGE", key, *args, **kwargs)

    def command_count(self, **kwargs: Any) -> int:
        return self.execute_command("COMMAND COUNT", **kwargs)

    def client_id(self, **kwargs: Any) -> int:
        return self.execute_command("CLIENT ID", **kwargs)

    def client_setname(self, name: str, **kwargs: Any) -> bool:
        return self.execute_command("CLIENT SETNAME", name, **kwargs)

    def client_getname(self, **kwargs: Any) -> str | None:
        return self.execute_command("CLIENT GETNAME", **kwargs)

    def client_list(self, _type: str | None = None, client_id: list = _NO_CLIENT_IDS,
                    **kwargs: Any) -> list[dict[str, str]]:
        args: list[Any] = []
        if _type is not None:
            client_types = ("normal", "master", "replica", "pubsub")
            if str(_type).lower() not in client_types:
                raise DataError(f"CLIENT LIST _type must be one of {client_types!r}")
            args += (b"TYPE", _type)
        if not isinstance(client_id, list):
            raise DataError("client_id must be a list")
        if client_id:
            args.append(b"ID")
            args += client_id
        return self.execute_command("CLIENT LIST", *args, **kwargs)

    # --- Pub/Sub (subscribing is Engine.subscribe: a facade has no connection to receive on) ---

    def publish(self, channel: Any, message: Any, **kwargs: Any) -> int:
        return self.execute_command("PUBLISH", channel, message, **kwargs)

    def spublish(self, shard_channel: Any, message: Any) -> int:
        return self.execute_command("SPUBLISH", shard_channel, message)

    def pubsub_channels(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("PUBSUB CHANNELS", pattern, **kwargs)

    def pubsub_shardchannels(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("PUBSUB SHARDCHANNELS", pattern, **kwargs)

    def pubsub_numsub(self, *args: Any, **kwargs: Any) -> list[tuple[Any, int]]:
        return self.execute_command("PUBSUB NUMSUB", *args, **kwargs)

    def pubsub_shardnumsub(self, *args: Any, **kwargs: Any) -> list[tuple[Any, int]]:
        return self.execute_command("PUBSUB SHARDNUMSUB", *args, **kwargs)

    def pubsub_numpat(self, **kwargs: Any) -> int:
        return self.execute_command("PUBSUB NUMPAT", **kwargs)

    def echo(self, value: Any, **kwargs: Any) -> bytes | str:
        return self.execute_command("ECHO", value, **kwargs)

    def time(self, **kwargs: Any) -> tuple[int, int]:
        return self.execute_command("TIME", **kwargs)

    def rename(self, src: Any, dst: Any) -> bool:
        return self.execute_command("RENAME", src, dst)

    def renamenx(self, src: Any, dst: Any) -> bool:
        return self.execute_command("RENAMENX", src, dst)

    def copy(self, source: Any, destination: Any, destination_db: Any = None,
             replace: bool = False) -> bool:
        params: list[Any] = [source, destination]
        if destination_db is not None:
            params.extend(["DB", destination_db])
        if replace:
            params.append("REPLACE")
        return self.execute_command("COPY", *params)

    # --- strings (redis-py's BasicKeyCommands) ---------------------------------------------------

    def get(self, name: Any) -> Any:
        return self.execute_command("GET", name, keys=[name])

    def __getitem__(self, name: Any) -> Any:
        value = self.get(name)
        if value is not None:
            return value
        raise KeyError(name)

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
        pieces.extend(_expire_flags(ex, px, exat, pxat))
        if keepttl:
            pieces.append("KEEPTTL")
        return self.execute_command("SET", *pieces, **options)

    def __setitem__(self, name: Any, value: Any) -> None:
        self.set(name, value)

    def setnx(self, name: Any, value: Any) -> bool:
        return self.execute_command("SETNX", name, value)

    def setex(self, name: Any, time: Any, value: Any) -> bool:
        if isinstance(time, datetime.timedelta):
            time = int(time.total_seconds())
        return self.execute_command("SETEX", name, time, value)

    def psetex(self, name: Any, time_ms: Any, value: Any) -> bool:
        if isinstance(time_ms, datetime.timedelta):
            time_ms = int(time_ms.total_seconds() * 1000)
        return self.execute_command("PSETEX", name, time_ms, value)

    def getset(self, name: Any, value: Any) -> Any:
        return self.execute_command("GETSET", name, value)

    def getdel(self, name: Any) -> Any:
        return self.execute_command("GETDEL", name)

    def getex(self, name: Any, ex: Any = None, px: Any = None, exat: Any = None,
              pxat: Any = None, persist: bool = False) -> Any:
        if not _at_most_one(ex is not None, px is not None, exat is not None, pxat is not None,
                            persist):
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``persist`` are mutually "
                            "exclusive.")
        options = _expire_flags(ex, px, exat, pxat)
        if persist:
            options.append("PERSIST")
        return self.execute_command("GETEX", name, *options)

    def mget(self, keys: Any, *args: Any) -> list:
        found = _list_or_args(keys, args)
        options: dict[str, Any] = {}
        if not found:
            options[_EMPTY_RESPONSE] = []
        options["keys"] = found
        return self.execute_command("MGET", *found, **options)

    def mset(self, mapping: Mapping[Any, Any]) -> bool:
        items: list[Any] = []
        for pair in mapping.items():
            items.extend(pair)
        return self.execute_command("MSET", *items)

    def msetnx(self, mapping: Mapping[Any, Any]) -> bool:
        items: list[Any] = []
        for pair in mapping.items():
            items.extend(pair)
        return self.execute_command("MSETNX", *items)

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
        exp_options.extend(_expire_flags(ex, px, exat, pxat))
        if keepttl:
            exp_options.append("KEEPTTL")
        pieces: list[Any] = ["MSETEX", len(mapping)]
        for pair in mapping.items():
            pieces.extend(pair)
        return self.execute_command(*pieces, *exp_options)

    def incrby(self, name: Any, amount: int = 1) -> int:
        return self.execute_command("INCRBY", name, amount)

    def incr(self, name: Any, amount: int = 1) -> int:
        """redis-py's alias of incrby: INCRBY name 1."""
        return self.incrby(name, amount)

    def incrbyfloat(self, name: Any, amount: float = 1.0) -> float:
        return self.execute_command("INCRBYFLOAT", name, amount)

    def decrby(self, name: Any, amount: int = 1) -> int:
        return self.execute_command("DECRBY", name, amount)

    def decr(self, name: Any, amount: int = 1) -> int:
        """redis-py's alias of decrby: DECRBY name 1."""
        return self.decrby(name, amount)

    def append(self, key: Any, value: Any) -> int:
        return self.execute_command("APPEND", key, value)

    def strlen(self, name: Any) -> int:
        return self.execute_command("STRLEN", name, keys=[name])

    def getrange(self, key: Any, start: int, end: int) -> Any:
        return self.execute_command("GETRANGE", key, start, end, keys=[key])

    def setrange(self, name: Any, offset: int, value: Any) -> int:
        return self.execute_command("SETRANGE", name, offset, value)

    def substr(self, name: Any, start: int, end: int = -1) -> Any:
        return self.execute_command("SUBSTR", name, start, end, keys=[name])

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

    def digest(self, name: Any) -> Any:
        """redis-py 8.1's digest (Redis 8.4): the XXH3 hex digest of a string's value."""
        return self.execute_command("DIGEST", name)

    # --- sorted sets (redis-py's argv and checks; replies through the callbacks above) -------

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

    def zcard(self, name: Any) -> int:
        return self.execute_command("ZCARD", name)

    def zcount(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZCOUNT", name, min, max)

    def zlexcount(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZLEXCOUNT", name, min, max)

    def zscore(self, name: Any, value: Any) -> float | None:
        return self.execute_command("ZSCORE", name, value)

    def zmscore(self, key: Any, members: list) -> list[float | None]:
        if not members:
            raise DataError("ZMSCORE members must be a non-empty list")
        return self.execute_command("ZMSCORE", key, *members)

    def zincrby(self, name: Any, amount: float, value: Any) -> float | None:
        return self.execute_command("ZINCRBY", name, amount, value)

    def zrem(self, name: Any, *values: Any) -> int:
        return self.execute_command("ZREM", name, *values)

    def zremrangebylex(self, name: Any, min: Any, max: Any) -> int:
        return self.execute_command("ZREMRANGEBYLEX", name, min, max)

    def zremrangebyrank(self, name: Any, min: int, max: int) -> int:
        return self.execute_command("ZREMRANGEBYRANK", name, min, max)

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

    def zrange(self, name: Any, start: Any, end: Any, desc: bool = False,
               withscores: bool = False, score_cast_func: Any = float, byscore: bool = False,
               bylex: bool = False, offset: int | None = None, num: int | None = None) -> Any:
        if not byscore and not bylex and offset is None and num is None and desc:
            return self.zrevrange(name, start, end, withscores, score_cast_func)
        return self._zrange("ZRANGE", None, name, start, end, desc, byscore, bylex, withscores,
                            score_cast_func, offset, num)

    def zrangestore(self, dest: Any, name: Any, start: Any, end: Any, byscore: bool = False,
                    bylex: bool = False, desc: bool = False, offset: int | None = None,
                    num: int | None = None) -> int:
        return self._zrange("ZRANGESTORE", dest, name, start, end, desc, byscore, bylex, False,
                            None, offset, num)

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

    def zrangebyscore(self, name: Any, min: Any, max: Any, start: int | None = None,
                      num: int | None = None, withscores: bool = False,
                      score_cast_func: Any = float) -> Any:
        return self._by_score_or_lex("ZRANGEBYSCORE", name, min, max, start, num, withscores,
                                     score_cast_func)

    def zrevrangebyscore(self, name: Any, max: Any, min: Any, start: int | None = None,
                         num: int | None = None, withscores: bool = False,
                         score_cast_func: Any = float) -> Any:
        return self._by_score_or_lex("ZREVRANGEBYSCORE", name, max, min, start, num,
                                     withscores, score_cast_func)

    def zrangebylex(self, name: Any, min: Any, max: Any, start: int | None = None,
                    num: int | None = None) -> list:
        return self._by_score_or_lex("ZRANGEBYLEX", name, min, max, start, num)

    def zrevrangebylex(self, name: Any, max: Any, min: Any, start: int | None = None,
                       num: int | None = None) -> list:
        return self._by_score_or_lex("ZREVRANGEBYLEX", name, max, min, start, num)

    def zrank(self, name: Any, value: Any, withscore: bool = False,
              score_cast_func: Any = float) -> Any:
        pieces = ["ZRANK", name, value, *(["WITHSCORE"] if withscore else [])]
        return self.execute_command(*pieces, withscore=withscore,
                                    score_cast_func=score_cast_func)

    def zrevrank(self, name: Any, value: Any, withscore: bool = False,
                 score_cast_func: Any = float) -> Any:
        pieces = ["ZREVRANK", name, value, *(["WITHSCORE"] if withscore else [])]
        return self.execute_command(*pieces, withscore=withscore,
                                    score_cast_func=score_cast_func)

    def zpopmin(self, name: Any, count: int | None = None) -> list:
        return self.execute_command("ZPOPMIN", name, *([] if count is None else [count]),
                                    withscores=True)

    def zpopmax(self, name: Any, count: int | None = None) -> list:
        return self.execute_command("ZPOPMAX", name, *([] if count is None else [count]),
                                    withscores=True)

    def bzpopmin(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BZPOPMIN", *_list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    def bzpopmax(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BZPOPMAX", *_list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    def zmpop(self, num_keys: int, keys: list, min: bool | None = False,
              max: bool | None = False, count: int | None = 1) -> list | None:
        args: list[Any] = [num_keys, *keys]
        if bool(min) == bool(max):
            raise DataError
        args.append("MIN" if min else "MAX")
        if count != 1:
            args += ("COUNT", count)
        return self.execute_command("ZMPOP", *args)

    def bzmpop(self, timeout: float, numkeys: int, keys: list, min: bool | None = False,
               max: bool | None = False, count: int | None = 1) -> list | None:
        if bool(min) == bool(max):
            raise DataError("Either min or max, but not both must be set")
        return self.execute_command("BZMPOP", timeout, numkeys, *keys,
                                    "MIN" if min else "MAX", "COUNT", count)

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

    def zunion(self, keys: Any, aggregate: str | None = None, withscores: bool = False,
               score_cast_func: Any = float) -> Any:
        return self._zaggregate("ZUNION", None, keys, aggregate, withscores=withscores,
                                score_cast_func=score_cast_func)

    def zunionstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> int:
        return self._zaggregate("ZUNIONSTORE", dest, keys, aggregate)

    def zinter(self, keys: Any, aggregate: str | None = None, withscores: bool = False) -> Any:
        return self._zaggregate("ZINTER", None, keys, aggregate, withscores=withscores)

    def zinterstore(self, dest: Any, keys: Any, aggregate: str | None = None) -> int:
        return self._zaggregate("ZINTERSTORE", dest, keys, aggregate)

    def zintercard(self, numkeys: int, keys: list, limit: int = 0) -> int:
        return self.execute_command("ZINTERCARD", numkeys, *keys, "LIMIT", limit)

    def zdiff(self, keys: Any, withscores: bool = False) -> Any:
        pieces: list[Any] = [len(keys), *keys, *(["WITHSCORES"] if withscores else [])]
        return self.execute_command("ZDIFF", *pieces, withscores=withscores)

    def zdiffstore(self, dest: Any, keys: Any) -> int:
        return self.execute_command("ZDIFFSTORE", dest, len(keys), *keys)

    def zscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None,
              score_cast_func: Any = float) -> tuple[int, list]:
        return self.execute_command("ZSCAN", name, cursor, *_scan_options(match, count),
                                    score_cast_func=score_cast_func)

    def zscan_iter(self, name: Any, match: Any = None, count: int | None = None,
                   score_cast_func: Any = float) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.zscan(name, cursor=cursor, match=match, count=count,
                                      score_cast_func=score_cast_func)
            yield from data

    # --- hashes ---------------------------------------------------------------------------------

    def hset(self, name: Any, key: Any = None, value: Any = None,
             mapping: Mapping[Any, Any] | None = None, items: Sequence[Any] | None = None) -> int:
        if key is None and not mapping and not items:
            raise DataError("'hset' with no key value pairs")
        return self.execute_command("HSET", name, *_field_pairs(key, value, mapping, items))

    def hsetnx(self, name: Any, key: Any, value: Any) -> int:
        return self.execute_command("HSETNX", name, key, value)

    def hmset(self, name: Any, mapping: Mapping[Any, Any]) -> bool:
        if not mapping:
            raise DataError("'hmset' with 'mapping' of length 0")
        return self.execute_command("HMSET", name, *_field_pairs(None, None, mapping, None))

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
        options = _expire_flags(ex, px, exat, pxat)
        if data_persist_option:
            options.append(getattr(data_persist_option, "value", data_persist_option))
        if keepttl:
            options.append("KEEPTTL")
        pieces = _field_pairs(key, value, mapping, items)
        return self.execute_command("HSETEX", name, *options, "FIELDS", int(len(pieces) / 2),
                                    *pieces)

    def hget(self, name: Any, key: Any) -> Any:
        return self.execute_command("HGET", name, key)

    def hmget(self, name: Any, keys: Any, *args: Any) -> list:
        return self.execute_command("HMGET", name, *_list_or_args(keys, args))

    def hgetall(self, name: Any) -> dict:
        return self.execute_command("HGETALL", name)

    def hgetdel(self, name: Any, *keys: Any) -> list:
        if len(keys) == 0:
            raise DataError("'hgetdel' should have at least one key provided")
        return self.execute_command("HGETDEL", name, "FIELDS", len(keys), *keys)

    def hgetex(self, name: Any, *keys: Any, ex: Any = None, px: Any = None, exat: Any = None,
               pxat: Any = None, persist: bool = False) -> list:
        if not keys:
            raise DataError("'hgetex' should have at least one key provided")
        if sum(map(bool, (ex is not None, px is not None, exat is not None, pxat is not None,
                          persist))) > 1:
            raise DataError("``ex``, ``px``, ``exat``, ``pxat``, and ``persist`` are mutually "
                            "exclusive.")
        options = _expire_flags(ex, px, exat, pxat)
        if persist:
            options.append("PERSIST")
        return self.execute_command("HGETEX", name, *options, "FIELDS", len(keys), *keys)

    def hdel(self, name: Any, *keys: Any) -> int:
        return self.execute_command("HDEL", name, *keys)

    def hexists(self, name: Any, key: Any) -> bool:
        return self.execute_command("HEXISTS", name, key)

    def hincrby(self, name: Any, key: Any, amount: int = 1) -> int:
        return self.execute_command("HINCRBY", name, key, amount)

    def hincrbyfloat(self, name: Any, key: Any, amount: float = 1.0) -> float:
        return self.execute_command("HINCRBYFLOAT", name, key, amount)

    def hkeys(self, name: Any) -> list:
        return self.execute_command("HKEYS", name)

    def hvals(self, name: Any) -> list:
        return self.execute_command("HVALS", name)

    def hlen(self, name: Any) -> int:
        return self.execute_command("HLEN", name)

    def hstrlen(self, name: Any, key: Any) -> int:
        return self.execute_command("HSTRLEN", name, key)

    def hrandfield(self, key: Any, count: int | None = None, withvalues: bool = False) -> Any:
        params: list[Any] = [] if count is None else [count]
        if withvalues:
            params.append("WITHVALUES")
        return self.execute_command("HRANDFIELD", key, *params, withvalues=withvalues)

    def hscan(self, name: Any, cursor: int = 0, match: Any = None, count: int | None = None,
              no_values: bool | None = None) -> tuple[int, Any]:
        pieces = [name, cursor, *_scan_options(match, count)]
        if no_values is not None:
            pieces.append(b"NOVALUES")
        return self.execute_command("HSCAN", *pieces, no_values=no_values)

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

    def hexpire(self, name: Any, seconds: Any, *fields: Any, nx: bool = False, xx: bool = False,
                gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(seconds, datetime.timedelta):
            seconds = int(seconds.total_seconds())
        return self._hexpire("HEXPIRE", name, seconds, fields, (nx, xx, gt, lt))

    def hpexpire(self, name: Any, milliseconds: Any, *fields: Any, nx: bool = False,
                 xx: bool = False, gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(milliseconds, datetime.timedelta):
            milliseconds = int(milliseconds.total_seconds() * 1000)
        return self._hexpire("HPEXPIRE", name, milliseconds, fields, (nx, xx, gt, lt))

    def hexpireat(self, name: Any, unix_time_seconds: Any, *fields: Any, nx: bool = False,
                  xx: bool = False, gt: bool = False, lt: bool = False) -> list[int]:
        if isinstance(unix_time_seconds, datetime.datetime):
            unix_time_seconds = int(unix_time_seconds.timestamp())
        return self._hexpire("HEXPIREAT", name, unix_time_seconds, fields, (nx, xx, gt, lt))

    def hpexpireat(self, name: Any, unix_time_milliseconds: Any, *fields: Any,
                   nx: bool = False, xx: bool = False, gt: bool = False,
                   lt: bool = False) -> list[int]:
        if isinstance(unix_time_milliseconds, datetime.datetime):
            unix_time_milliseconds = int(unix_time_milliseconds.timestamp() * 1000)
        return self._hexpire("HPEXPIREAT", name, unix_time_milliseconds, fields,
                             (nx, xx, gt, lt))

    def hpersist(self, name: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPERSIST", name, "FIELDS", len(fields), *fields)

    def hexpiretime(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HEXPIRETIME", key, "FIELDS", len(fields), *fields)

    def hpexpiretime(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPEXPIRETIME", key, "FIELDS", len(fields), *fields)

    def httl(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HTTL", key, "FIELDS", len(fields), *fields)

    def hpttl(self, key: Any, *fields: Any) -> list[int]:
        return self.execute_command("HPTTL", key, "FIELDS", len(fields), *fields)

    # --- sets -----------------------------------------------------------------------------------

    # --- lists (redis-py's ListCommands) --------------------------------------------------------

    def lpush(self, name: Any, *values: Any) -> int:
        return self.execute_command("LPUSH", name, *values)

    def rpush(self, name: Any, *values: Any) -> int:
        return self.execute_command("RPUSH", name, *values)

    def lpushx(self, name: Any, *values: Any) -> int:
        return self.execute_command("LPUSHX", name, *values)

    def rpushx(self, name: Any, *values: Any) -> int:
        return self.execute_command("RPUSHX", name, *values)

    def lpop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("LPOP", name, *([] if count is None else [count]))

    def rpop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("RPOP", name, *([] if count is None else [count]))

    def llen(self, name: Any) -> int:
        return self.execute_command("LLEN", name)

    def lrange(self, name: Any, start: int, end: int) -> list:
        return self.execute_command("LRANGE", name, start, end)

    def lindex(self, name: Any, index: int) -> Any:
        return self.execute_command("LINDEX", name, index)

    def lset(self, name: Any, index: int, value: Any) -> bool:
        return self.execute_command("LSET", name, index, value)

    def linsert(self, name: Any, where: str, refvalue: Any, value: Any) -> int:
        return self.execute_command("LINSERT", name, where, refvalue, value)

    def lrem(self, name: Any, count: int, value: Any) -> int:
        return self.execute_command("LREM", name, count, value)

    def ltrim(self, name: Any, start: int, end: int) -> bool:
        return self.execute_command("LTRIM", name, start, end)

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

    def lmove(self, first_list: Any, second_list: Any, src: str = "LEFT",
              dest: str = "RIGHT") -> Any:
        return self.execute_command("LMOVE", first_list, second_list, src, dest)

    def blmove(self, first_list: Any, second_list: Any, timeout: Any, src: str = "LEFT",
               dest: str = "RIGHT") -> Any:
        return self.execute_command("BLMOVE", first_list, second_list, src, dest, timeout)

    def rpoplpush(self, src: Any, dst: Any) -> Any:
        return self.execute_command("RPOPLPUSH", src, dst)

    def brpoplpush(self, src: Any, dst: Any, timeout: Any = 0) -> Any:
        return self.execute_command("BRPOPLPUSH", src, dst, 0 if timeout is None else timeout)

    def blpop(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BLPOP", *_list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    def brpop(self, keys: Any, timeout: Any = 0) -> tuple | None:
        return self.execute_command("BRPOP", *_list_or_args(keys, None),
                                    0 if timeout is None else timeout)

    def lmpop(self, num_keys: int, *args: Any, direction: str, count: int | None = 1) -> Any:
        cmd_args: list[Any] = [num_keys, *args, direction]
        if count != 1:
            cmd_args += ("COUNT", count)
        return self.execute_command("LMPOP", *cmd_args)

    def blmpop(self, timeout: float, numkeys: int, *args: Any, direction: str,
               count: int | None = 1) -> Any:
        return self.execute_command("BLMPOP", timeout, numkeys, *args, direction, "COUNT", count)

    # (`builtins.set` in the annotations: in the class, `set` is RedisAPI.set)

    def sadd(self, name: Any, *values: Any) -> int:
        return self.execute_command("SADD", name, *values)

    def srem(self, name: Any, *values: Any) -> int:
        return self.execute_command("SREM", name, *values)

    def scard(self, name: Any) -> int:
        return self.execute_command("SCARD", name)

    def smembers(self, name: Any) -> builtins.set:
        return self.execute_command("SMEMBERS", name)

    def sismember(self, name: Any, value: Any) -> int:
        return self.execute_command("SISMEMBER", name, value)

    def smismember(self, name: Any, values: Any, *args: Any) -> list[int]:
        return self.execute_command("SMISMEMBER", name, *_list_or_args(values, args))

    def smove(self, src: Any, dst: Any, value: Any) -> bool:
        return self.execute_command("SMOVE", src, dst, value)

    def spop(self, name: Any, count: int | None = None) -> Any:
        return self.execute_command("SPOP", name, *([] if count is None else [count]))

    def srandmember(self, name: Any, number: int | None = None) -> Any:
        return self.execute_command("SRANDMEMBER", name, *([] if number is None else [number]))

    def sdiff(self, keys: Any, *args: Any) -> builtins.set:
        return self.execute_command("SDIFF", *_list_or_args(keys, args))

    def sdiffstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SDIFFSTORE", dest, *_list_or_args(keys, args))

    def sinter(self, keys: Any, *args: Any) -> builtins.set:
        return self.execute_command("SINTER", *_list_or_args(keys, args))

    def sinterstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SINTERSTORE", dest, *_list_or_args(keys, args))

    def sintercard(self, numkeys: int, keys: list, limit: int = 0) -> int:
        return self.execute_command("SINTERCARD", numkeys, *keys, "LIMIT", limit)

    def sunion(self, keys: Any, *args: Any) -> builtins.set:
        return self.execute_command("SUNION", *_list_or_args(keys, args))

    def sunionstore(self, dest: Any, keys: Any, *args: Any) -> int:
        return self.execute_command("SUNIONSTORE", dest, *_list_or_args(keys, args))

    def sscan(self, name: Any, cursor: int = 0, match: Any = None,
              count: int | None = None) -> tuple[int, list]:
        return self.execute_command("SSCAN", name, cursor, *_scan_options(match, count))

    def sscan_iter(self, name: Any, match: Any = None, count: int | None = None) -> Iterator:
        cursor: Any = "0"
        while cursor != 0:
            cursor, data = self.sscan(name, cursor=cursor, match=match, count=count)
            yield from data

    # --- functions ------------------------------------------------------------------------------

    def function_load(self, code: Any, replace: bool | None = False) -> Any:
        return self.execute_command("FUNCTION LOAD", *(["REPLACE"] if replace else []), code)

    def function_delete(self, library: Any) -> bool:
        return self.execute_command("FUNCTION DELETE", library)

    def function_flush(self, mode: str = "SYNC") -> bool:
        return self.execute_command("FUNCTION FLUSH", mode)

    def function_list(self, library: Any = "*", withcode: bool | None = False) -> list:
        args: list[Any] = ["LIBRARYNAME", library, *(["WITHCODE"] if withcode else [])]
        return self.execute_command("FUNCTION LIST", *args)

    def function_dump(self) -> bytes:
        return self.execute_command("FUNCTION DUMP", **{_NEVER_DECODE: []})

    def function_restore(self, payload: Any, policy: str | None = "APPEND") -> bool:
        return self.execute_command("FUNCTION RESTORE", payload, policy)

    def function_stats(self) -> Any:
        return self.execute_command("FUNCTION STATS")

    def function_kill(self) -> Any:
        return self.execute_command("FUNCTION KILL")

    def fcall(self, function: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("FCALL", function, numkeys, *keys_and_args)

    def fcall_ro(self, function: Any, numkeys: int, *keys_and_args: Any) -> Any:
        return self.execute_command("FCALL_RO", function, numkeys, *keys_and_args)

    # --- streams: entries -----------------------------------------------------------------------

    def xadd(
        self,
        name: Any,
        fields: dict,
        id: Any = "*",
        maxlen: int | None = None,
        approximate: bool = True,
        nomkstream: bool = False,
        minid: Any = None,
        limit: int | None = None,
        ref_policy: str | None = None,
        idmpauto: str | None = None,
        idmp: tuple[str, bytes] | None = None,
    ) -> bytes | str | None:
        if (
            maxlen is None and minid is None and limit is None and not nomkstream
            and ref_policy is None and idmpauto is None and idmp is None
        ):  # the hot path: none of redis-py's option checks can fail
            if not isinstance(fields, dict) or len(fields) == 0:
                raise DataError("XADD fields must be a non-empty dict")
            pieces: list[Any] = [b"XADD", name, id]
            for pair in fields.items():
                pieces += pair
        else:
            pieces = _xadd_argv(name, fields, id, maxlen, approximate, nomkstream, minid,
                                limit, ref_policy, idmpauto, idmp)
        try:  # _run, inlined: the hot path
            reply = self.execute(*pieces)
        except TypeError:
            check_encodable(tuple(pieces))
            raise
        if reply is not None and self.decode_responses:
            return reply.decode()
        return reply

    def xlen(self, name: Any) -> int:
        return self._run(b"XLEN", name)

    def _range(self, command: bytes, name: Any, start: Any, end: Any,
               count: int | None) -> list | None:
        """XRANGE and XREVRANGE (`start` and `end` in the command's own order)."""
        if count is None:
            return _entries(self._run(command, name, start, end), self.decode_responses)
        _check_positive(command.decode(), "count", count)
        reply = self._run(command, name, start, end, b"COUNT", str(count))
        return _entries(reply, self.decode_responses)

    def xrange(
        self, name: Any, min: Any = "-", max: Any = "+", count: int | None = None
    ) -> list | None:
        return self._range(b"XRANGE", name, min, max, count)

    def xrevrange(
        self, name: Any, max: Any = "+", min: Any = "-", count: int | None = None
    ) -> list | None:
        return self._range(b"XREVRANGE", name, max, min, count)

    def xdel(self, name: Any, *ids: Any) -> int:
        return self._run(b"XDEL", name, *ids)

    def xdelex(self, name: Any, *ids: Any, ref_policy: str = "KEEPREF") -> list[int]:
        id_list = _id_list("XDELEX", ids)
        _check_ref_policy("XDELEX", ref_policy)
        return self._run(b"XDELEX", name, ref_policy, *id_list)

    def xtrim(
        self,
        name: Any,
        maxlen: int | None = None,
        approximate: bool = True,
        minid: Any = None,
        limit: int | None = None,
        ref_policy: str | None = None,
    ) -> int:
        pieces: list[Any] = [b"XTRIM", name]
        if maxlen is not None and minid is not None:
            raise DataError("Only one of ``maxlen`` or ``minid`` may be specified")
        if maxlen is None and minid is None:
            raise DataError("One of ``maxlen`` or ``minid`` must be specified")
        if ref_policy is not None:
            _check_ref_policy("XTRIM", ref_policy)
        if maxlen is not None:
            pieces.append(b"MAXLEN")
        if minid is not None:
            pieces.append(b"MINID")
        if approximate:
            pieces.append(b"~")
        if maxlen is not None:
            pieces.append(maxlen)
        if minid is not None:
            pieces.append(minid)
        if limit is not None:
            pieces.append(b"LIMIT")
            pieces.append(limit)
        if ref_policy is not None:
            pieces.append(ref_policy)
        return self._run(*pieces)

    # --- streams: reading ---------------------------------------------------------------------

    def xread(
        self,
        streams: dict,
        count: int | None = None,
        block: int | None = None,
        max_count: int | None = None,
        max_size: int | None = None,
    ) -> list:
        pieces: list[Any] = [b"XREAD"]
        _add_block(pieces, "XREAD", block)
        _add_read_counts(pieces, "XREAD", count, max_count, max_size)
        _add_streams(pieces, "XREAD", streams)
        return _streams(self._run(*pieces), self.decode_responses)

    def xreadgroup(
        self,
        groupname: Any,
        consumername: Any,
        streams: dict,
        count: int | None = None,
        block: int | None = None,
        noack: bool = False,
        claim_min_idle_time: int | None = None,
        max_count: int | None = None,
        max_size: int | None = None,
    ) -> list:
        pieces: list[Any] = [b"XREADGROUP", b"GROUP", groupname, consumername]
        _add_read_counts(pieces, "XREADGROUP", count, max_count, max_size)
        _add_block(pieces, "XREADGROUP", block)
        if noack:
            pieces.append(b"NOACK")
        claim = claim_min_idle_time is not None
        if claim:
            _check_non_negative("XREADGROUP", "claim_min_idle_time", claim_min_idle_time)
            pieces.append(b"CLAIM")
            pieces.append(claim_min_idle_time)
        _add_streams(pieces, "XREADGROUP", streams)
        return _streams(self._run(*pieces), self.decode_responses, claim)

    # --- streams: consumer groups -------------------------------------------------------------

    def xgroup_create(
        self,
        name: Any,
        groupname: Any,
        id: Any = "$",
        mkstream: bool = False,
        entries_read: int | None = None,
    ) -> bool:
        pieces: list[Any] = [b"XGROUP", b"CREATE", name, groupname, id]
        if mkstream:
            pieces.append(b"MKSTREAM")
        _add_entries_read(pieces, entries_read)
        return bool_ok(self._run(*pieces))

    def xgroup_setid(
        self, name: Any, groupname: Any, id: Any, entries_read: int | None = None
    ) -> bool:
        pieces: list[Any] = [b"XGROUP", b"SETID", name, groupname, id]
        _add_entries_read(pieces, entries_read)
        return bool_ok(self._run(*pieces))

    def xgroup_destroy(self, name: Any, groupname: Any) -> bool:
        return bool(self._run(b"XGROUP", b"DESTROY", name, groupname))

    def xgroup_createconsumer(self, name: Any, groupname: Any, consumername: Any) -> int:
        return self._run(b"XGROUP", b"CREATECONSUMER", name, groupname, consumername)

    def xgroup_delconsumer(self, name: Any, groupname: Any, consumername: Any) -> int:
        return self._run(b"XGROUP", b"DELCONSUMER", name, groupname, consumername)

    def xack(self, name: Any, groupname: Any, *ids: Any) -> int:
        return self._run(b"XACK", name, groupname, *ids)

    def xackdel(
        self, name: Any, groupname: Any, *ids: Any, ref_policy: str = "KEEPREF"
    ) -> list[int]:
        id_list = _id_list("XACKDEL", ids)
        _check_ref_policy("XACKDEL", ref_policy)
        return self._run(b"XACKDEL", name, groupname, ref_policy, *id_list)

    def xcfgset(
        self, name: Any, idmp_duration: int | None = None, idmp_maxsize: int | None = None,
    ) -> bytes | str:
        """redis-py 8.1's xcfgset (Redis 8.6): a stream's IDMP settings (clears its maps when a
        value changes). Checks the arguments as redis-py does, ranges included."""
        if idmp_duration is None and idmp_maxsize is None:
            raise DataError("XCFGSET requires at least one of idmp_duration or idmp_maxsize")
        pieces: list[Any] = [b"XCFGSET", name]
        if idmp_duration is not None:
            if not isinstance(idmp_duration, int) or not 1 <= idmp_duration <= 300:
                raise DataError("XCFGSET idmp_duration must be an integer between 1 and 300")
            pieces += [b"IDMP-DURATION", idmp_duration]
        if idmp_maxsize is not None:
            if not isinstance(idmp_maxsize, int) or not 1 <= idmp_maxsize <= 1000000:
                raise DataError(
                    "XCFGSET idmp_maxsize must be an integer between 1 and 1,000,000")
            pieces += [b"IDMP-MAXSIZE", idmp_maxsize]
        return self._run_wired(*pieces)

    def xnack(
        self, name: Any, groupname: Any, mode: str, *ids: Any, retrycount: int | None = None,
        force: bool = False,
    ) -> int:
        """redis-py 8.1's xnack (Redis 8.8): release pending entries for re-delivery."""
        id_list = _id_list("XNACK", ids)
        if mode not in {"SILENT", "FAIL", "FATAL"}:
            raise DataError("XNACK mode must be one of: SILENT, FAIL, FATAL")
        pieces: list[Any] = [b"XNACK", name, groupname, mode, *id_list]
        if retrycount is not None:
            if retrycount < 0:
                raise DataError("XNACK retrycount must be >= 0")
            pieces += [b"RETRYCOUNT", retrycount]
        if force:
            pieces.append(b"FORCE")
        return self._run(*pieces)

    def xpending(self, name: Any, groupname: Any) -> dict[str, Any]:
        return parse_xpending(self._run_wired(b"XPENDING", name, groupname))

    def xpending_range(
        self,
        name: Any,
        groupname: Any,
        min: Any,
        max: Any,
        count: int,
        consumername: Any = None,
        idle: int | None = None,
    ) -> Any:
        if {min, max, count} == {None}:
            if idle is not None or consumername is not None:
                raise DataError(
                    "if XPENDING is provided with idle time"
                    " or consumername, it must be provided"
                    " with min, max and count parameters"
                )
            return self.xpending(name, groupname)
        pieces: list[Any] = [b"XPENDING", name, groupname]
        if min is None or max is None or count is None:
            raise DataError(
                "XPENDING must be provided with min, max "
                "and count parameters, or none of them."
            )
        if _given_and_not_negative(idle, "XPENDING idle must be a integer >= 0"):
            pieces.extend(["IDLE", idle])
        if _given_and_not_negative(count, "XPENDING count must be a integer >= 0"):
            pieces.extend([min, max, count])
        if consumername:
            pieces.append(consumername)
        return parse_xpending_range(self._run_wired(*pieces))

    def xclaim(
        self,
        name: Any,
        groupname: Any,
        consumername: Any,
        min_idle_time: int,
        message_ids: list | tuple,
        idle: int | None = None,
        time: int | None = None,
        retrycount: int | None = None,
        force: bool = False,
        justid: bool = False,
    ) -> list:
        if not isinstance(min_idle_time, int) or min_idle_time < 0:
            raise DataError("XCLAIM min_idle_time must be a non negative integer")
        if not isinstance(message_ids, (list, tuple)) or not message_ids:
            raise DataError(
                "XCLAIM message_ids must be a non empty list or tuple of message IDs to claim"
            )
        pieces: list[Any] = [b"XCLAIM", name, groupname, consumername, str(min_idle_time)]
        pieces.extend(list(message_ids))
        for option, value, word in (("idle", idle, b"IDLE"), ("time", time, b"TIME"),
                                    ("retrycount", retrycount, b"RETRYCOUNT")):
            if value is not None:
                if not isinstance(value, int):
                    raise DataError(f"XCLAIM {option} must be an integer")
                pieces.extend((word, str(value)))
        for option, flag, word in (("force", force, b"FORCE"), ("justid", justid, b"JUSTID")):
            if flag:
                if not isinstance(flag, bool):
                    raise DataError(f"XCLAIM {option} must be a boolean")
                pieces.append(word)
        if justid:
            return _ids(self._run(*pieces), self.decode_responses)
        return _entries(self._run(*pieces), self.decode_responses)  # type: ignore[return-value]

    def xautoclaim(
        self,
        name: Any,
        groupname: Any,
        consumername: Any,
        min_idle_time: int,
        start_id: Any = "0-0",
        count: int | None = None,
        justid: bool = False,
    ) -> list:
        _given_and_not_negative(min_idle_time,
                                "XAUTOCLAIM min_idle_time must be a nonnegative integer")
        pieces: list[Any] = [b"XAUTOCLAIM", name, groupname, consumername, min_idle_time,
                             start_id]
        if _given_and_not_negative(count, "XPENDING count must be a integer >= 0"):
            pieces.extend([b"COUNT", count])
        decode = self.decode_responses
        if justid:
            pieces.append(b"JUSTID")
            # redis-py's parse_xautoclaim keeps only the claimed IDs when JUSTID is given.
            return _ids(self._run(*pieces)[1], decode)
        reply = self._run(*pieces)
        return [
            reply[0].decode() if decode else reply[0],
            _entries(reply[1], decode),
            _ids(reply[2], decode),
        ]

    # --- streams: introspection ---------------------------------------------------------------

    def xinfo_stream(self, name: Any, full: bool = False) -> dict[str, Any]:
        if full:
            return parse_xinfo_stream(self._run_wired(b"XINFO", b"STREAM", name, b"FULL"),
                                      full=True)
        return parse_xinfo_stream(self._run_wired(b"XINFO", b"STREAM", name))

    def xinfo_groups(self, name: Any) -> list[dict[str, Any]]:
        return parse_list_of_dicts(self._run_wired(b"XINFO", b"GROUPS", name))

    def xinfo_consumers(self, name: Any, groupname: Any) -> list[dict[str, Any]]:
        return parse_list_of_dicts(self._run_wired(b"XINFO", b"CONSUMERS", name, groupname))


class Script:
    """redis-py's `Script` (what `register_script` returns) over the facade: `script(keys,
    args)` runs EVALSHA, and on NOSCRIPT loads the script and runs it again."""

    def __init__(self, registered_client: RedisAPI, script: str | bytes) -> None:
        self.registered_client = registered_client
        self.script = script
        body = script.encode() if isinstance(script, str) else bytes(script)
        self.sha = hashlib.sha1(body).hexdigest()

    def __call__(self, keys: Sequence[Any] | None = None, args: Iterable[Any] | None = None,
                 client: RedisAPI | None = None) -> Any:
        keys = list(keys or [])
        args = list(args or [])
        if client is None:
            client = self.registered_client
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except ReplyError as err:
            if not err.line.startswith("NOSCRIPT"):
                raise
        self.sha = client.script_load(self.script)
        return client.evalsha(self.sha, len(keys), *keys, *args)
