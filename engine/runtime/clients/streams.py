"""The facade's stream methods (Redis's "stream" group): redis-py 8.1's StreamCommands.

Owns `StreamCommands`: XADD, XRANGE, XREAD, XREADGROUP, the consumer groups' calls, XINFO,
IDMP's XCFGSET and XNACK, with redis-py's argv and client-side checks (its messages, in its
order). These methods shape their replies themselves, decoding and parsing in one pass over
the engine's reply (the hot paths: no callbacks table lookup, no second walk), to the shapes
redis-py's callbacks give. Must not touch: anything but argv and reply shapes.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.runtime.clients.base import (
    ClientBase,
    DataError,
    bool_ok,
    check_encodable,
    parse_list_of_dicts,
    parse_xinfo_stream,
    parse_xpending,
    parse_xpending_range,
    sends,
)

_REF_POLICIES = {"KEEPREF", "DELREF", "ACKED"}


# --- fused decode + parse for the entry-carrying hot paths ----------------------------------------


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


# --- the argv pieces several methods build alike (redis-py's checks, its messages) ----------------


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


class StreamCommands(ClientBase):
    """redis-py 8.1's stream methods; replies shaped here, as its callbacks shape them."""

    __slots__ = ()

    # --- entries ----------------------------------------------------------------------------------

    @sends("xadd")
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

    @sends("xlen")
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

    @sends("xrange")
    def xrange(
        self, name: Any, min: Any = "-", max: Any = "+", count: int | None = None
    ) -> list | None:
        return self._range(b"XRANGE", name, min, max, count)

    @sends("xrevrange")
    def xrevrange(
        self, name: Any, max: Any = "+", min: Any = "-", count: int | None = None
    ) -> list | None:
        return self._range(b"XREVRANGE", name, max, min, count)

    @sends("xdel")
    def xdel(self, name: Any, *ids: Any) -> int:
        return self._run(b"XDEL", name, *ids)

    @sends("xdelex")
    def xdelex(self, name: Any, *ids: Any, ref_policy: str = "KEEPREF") -> list[int]:
        id_list = _id_list("XDELEX", ids)
        _check_ref_policy("XDELEX", ref_policy)
        return self._run(b"XDELEX", name, ref_policy, *id_list)

    @sends("xtrim")
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

    # --- reading ----------------------------------------------------------------------------------

    @sends("xread")
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

    @sends("xreadgroup")
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

    # --- consumer groups --------------------------------------------------------------------------

    @sends("xgroup|create")
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

    @sends("xgroup|setid")
    def xgroup_setid(
        self, name: Any, groupname: Any, id: Any, entries_read: int | None = None
    ) -> bool:
        pieces: list[Any] = [b"XGROUP", b"SETID", name, groupname, id]
        _add_entries_read(pieces, entries_read)
        return bool_ok(self._run(*pieces))

    @sends("xgroup|destroy")
    def xgroup_destroy(self, name: Any, groupname: Any) -> bool:
        return bool(self._run(b"XGROUP", b"DESTROY", name, groupname))

    @sends("xgroup|createconsumer")
    def xgroup_createconsumer(self, name: Any, groupname: Any, consumername: Any) -> int:
        return self._run(b"XGROUP", b"CREATECONSUMER", name, groupname, consumername)

    @sends("xgroup|delconsumer")
    def xgroup_delconsumer(self, name: Any, groupname: Any, consumername: Any) -> int:
        return self._run(b"XGROUP", b"DELCONSUMER", name, groupname, consumername)

    @sends("xack")
    def xack(self, name: Any, groupname: Any, *ids: Any) -> int:
        return self._run(b"XACK", name, groupname, *ids)

    @sends("xackdel")
    def xackdel(
        self, name: Any, groupname: Any, *ids: Any, ref_policy: str = "KEEPREF"
    ) -> list[int]:
        id_list = _id_list("XACKDEL", ids)
        _check_ref_policy("XACKDEL", ref_policy)
        return self._run(b"XACKDEL", name, groupname, ref_policy, *id_list)

    @sends("xcfgset")
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

    @sends("xnack")
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

    @sends("xpending")
    def xpending(self, name: Any, groupname: Any) -> dict[str, Any]:
        return parse_xpending(self._run_wired(b"XPENDING", name, groupname))

    @sends("xpending")
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

    @sends("xclaim")
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

    @sends("xautoclaim")
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

    # --- introspection ----------------------------------------------------------------------------

    @sends("xinfo|stream")
    def xinfo_stream(self, name: Any, full: bool = False) -> dict[str, Any]:
        if full:
            return parse_xinfo_stream(self._run_wired(b"XINFO", b"STREAM", name, b"FULL"),
                                      full=True)
        return parse_xinfo_stream(self._run_wired(b"XINFO", b"STREAM", name))

    @sends("xinfo|groups")
    def xinfo_groups(self, name: Any) -> list[dict[str, Any]]:
        return parse_list_of_dicts(self._run_wired(b"XINFO", b"GROUPS", name))

    @sends("xinfo|consumers")
    def xinfo_consumers(self, name: Any, groupname: Any) -> list[dict[str, Any]]:
        return parse_list_of_dicts(self._run_wired(b"XINFO", b"CONSUMERS", name, groupname))
