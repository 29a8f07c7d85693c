"""redis-py's client, in process: redis-py 8.1's stream and keyspace calls over an engine.

Owns `RedisAPI` (`Engine.redis()` builds one: a thin object over the engine's `execute`),
`DataError` and the client side of the redis-py contract: the argv each method sends (built
exactly as redis-py 8.1 builds it, with the same client-side `DataError` checks and messages),
argument encoding errors as redis-py raises them, and the reply conversion of redis-py's RESP2
client with `legacy_responses=True` (the default): status replies as bytes, bytes decoded to str
when `decode_responses` is on, then the same response callbacks (xrange -> [(id, {field:
value})], xpending -> dict, XINFO -> dicts with str keys, bool for OK, ...).
`execute_command(*args, **options)` runs any command the way `redis.Redis.execute_command`
does, applying the callbacks redis-py registers for that name. `decode_responses` belongs to
the facade, as to a redis-py client: two facades over one engine may differ.

Needs of the engine: `execute(*argv)` (plain RESP2-shaped reply, `ReplyError` on error). Must
not touch: command semantics, engine state or the command table (every call goes through
`execute`), and must not import redis-py (a dev-only dependency).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import PlainEntries

__all__ = ["DataError", "Executor", "RedisAPI", "Script", "execute_command_callbacks"]

_REF_POLICIES = {"KEEPREF", "DELREF", "ACKED"}
_NEVER_DECODE = "NEVER_DECODE"
_EMPTY_RESPONSE = "EMPTY_RESPONSE"


class DataError(StreamkeepError, ValueError):
    """A call redis-py refuses before sending it (redis.exceptions.DataError's messages)."""


# --- encoding and decoding as redis-py's Encoder and RESP2 parser do ---------------------------


def _check_encodable(args: tuple[Any, ...]) -> None:
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


class Executor(Protocol):
    """What the facade needs of an engine: one command in, its plain reply out."""

    def execute(self, *args: Any) -> Any: ...


class RedisAPI:
    """redis-py 8.1's stream methods and the keyspace calls a stream application makes, over
    `engine.execute`, with redis-py's `decode_responses` (False: bytes; True: str)."""

    __slots__ = ("decode_responses", "execute")

    def __init__(self, engine: Executor, decode_responses: bool = False) -> None:
        self.decode_responses = decode_responses
        # Bound once: a call reaches the engine without looking its method up again.
        self.execute: Callable[..., Any] = engine.execute

    def _run(self, *args: Any) -> Any:
        try:
            return self.execute(*args)
        except TypeError:
            _check_encodable(args)
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
            _check_encodable(tuple(pieces))
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
