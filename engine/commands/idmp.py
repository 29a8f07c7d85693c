"""Idempotent producers' commands (Redis 8.6/8.8): XCFGSET, XIDMPRECORD, and XADD's IDMP pieces.

Owns these commands' argument handling, errors, replies and effects, and the pieces of
`XADD ... IDMP pid iid | IDMPAUTO pid` about idempotency that XADD's handler
(engine.commands.streams) runs: the iid (`xadd_iid`), the stream's IDMP state made with the
configured settings (`idmp_state`), a duplicate refused (the original entry's ID is the reply,
nothing is added: `refuse_duplicate`, `xadd_duplicate`). An XADD with IDMP is logged as the
plain XADD, then `XIDMPRECORD key pid iid id` (the recording, at the record's command time),
preceded by an `XCFGSET` with both settings when the command created the stream's IDMP state
(so replay under another configuration rebuilds the same settings); a refused duplicate is
logged as `SK.XIDMPDUP key n` (the lifetime counter). Must not touch: XADD's own parsing,
trimming and logging (engine.commands.streams and .trimming), the maps' structure
(engine.model.idmp_maps)."""

from __future__ import annotations

from collections.abc import Sequence

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import stream_at
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    sk_xidmpdup_effect,
    xcfgset_effect,
    xidmprecord_effect,
)
from streamkeep.engine.model.idmp_maps import DURATION_RANGE, MAXSIZE_RANGE, Idmp, auto_iid
from streamkeep.engine.model.ids import format_id, parse_strict
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import NO_SUCH_KEY, SYNTAX, ReplyError


def idmp_state(ctx: Ctx, s: Stream) -> tuple[Idmp, bool]:
    """The stream's IDMP state, created with the configured defaults if it has none yet;
    and whether it was created now (the caller then logs its settings)."""
    if s.idmp is not None:
        return s.idmp, False
    config = ctx.engine.config
    s.idmp = Idmp(int(config["stream-idmp-duration"]), int(config["stream-idmp-maxsize"]))
    return s.idmp, True


def settings(ctx: Ctx, s: Stream) -> tuple[int, int]:
    """(duration, maxsize) as XINFO reports them: the stream's, else the configured defaults."""
    if s.idmp is not None:
        return s.idmp.duration, s.idmp.maxsize
    config = ctx.engine.config
    return int(config["stream-idmp-duration"]), int(config["stream-idmp-maxsize"])


def xadd_iid(iid: bytes | None, fields: Sequence[bytes]) -> bytes:
    """The iid an XADD names: IDMP's own, or IDMPAUTO's content hash."""
    return iid if iid is not None else auto_iid(fields)


def refuse_duplicate(ctx: Ctx, key: bytes, state: Idmp, original: int) -> bytes:
    """XADD IDMP found a live duplicate: count it, log the count, reply the original ID."""
    state.duplicates += 1
    ctx.effects.append(sk_xidmpdup_effect(key, state.duplicates))
    return format_id(original)


def xadd_duplicate(ctx: Ctx, key: bytes, s: Stream, pid: bytes, iid: bytes) -> bytes | None:
    """XADD IDMP's check before adding: the original entry's ID (reply) if `pid`/`iid` is a
    live duplicate, counted and logged; None if the entry is to be added."""
    state = s.idmp
    if state is not None:
        found = state.lookup(pid, iid, ctx.now)
        if found is not None:
            return refuse_duplicate(ctx, key, state, found)
    return None


# --- XCFGSET -------------------------------------------------------------------------------------

# name, range, unit: the range error reads "ERR IDMP-DURATION must be between 1 and 86400 seconds"
# / "... 1 and 10000 entries" (the replies Redis 8.6 gives, as client suites tested against it
# assert them).
_CFG_OPTIONS = {b"idmp-duration": ("IDMP-DURATION", DURATION_RANGE, "seconds"),
                b"idmp-maxsize": ("IDMP-MAXSIZE", MAXSIZE_RANGE, "entries")}


def _parse_cfgset(argv: Argv) -> dict[str, int]:
    given: dict[str, int] = {}
    i = 2
    while i < len(argv):
        option = _CFG_OPTIONS.get(argv[i].lower())
        if option is None or i + 1 >= len(argv):
            raise ReplyError(SYNTAX)
        name, (lo, hi), unit = option
        if name in given:
            raise ReplyError(f"ERR {name} specified multiple times")
        value = parse_int(argv[i + 1])
        if not lo <= value <= hi:
            raise ReplyError(f"ERR {name} must be between {lo} and {hi} {unit}")
        given[name] = value
        i += 2
    if not given:
        raise ReplyError("ERR At least one parameter must be specified: IDMP-DURATION or "
                         "IDMP-MAXSIZE")
    return given


@command("xcfgset", -2, "write fast", since="8.6.0",
         acl="stream", keys="RW UPDATE", logs=("XCFGSET",),
         effect="XCFGSET key IDMP-DURATION duration IDMP-MAXSIZE maxsize",
         summary="Sets the IDMP configuration parameters for a stream.",
         syntax="key [IDMP-DURATION duration:integer] [IDMP-MAXSIZE maxsize:integer]")
def xcfgset(ctx: Ctx, argv: Argv) -> str:
    given = _parse_cfgset(argv)
    key = argv[1]
    s = stream_at(ctx, key)
    if s is None:
        raise ReplyError(NO_SUCH_KEY)
    state, created = idmp_state(ctx, s)
    before = (state.duration, state.maxsize)
    state.configure(given.get("IDMP-DURATION", state.duration),
                    given.get("IDMP-MAXSIZE", state.maxsize))
    if created or (state.duration, state.maxsize) != before:
        ctx.emit(xcfgset_effect(key, state.duration, state.maxsize))
    return "OK"


# --- XIDMPRECORD ---------------------------------------------------------------------------------


@command("xidmprecord", 5, "write fast", since="8.8.0",
         acl="stream", keys="RW UPDATE", logs=("XCFGSET", "XIDMPRECORD"),
         effect="XIDMPRECORD key pid iid id",
         summary="An internal command for replicating IDMP metadata.",
         syntax="key pid iid stream-id")
def xidmprecord(ctx: Ctx, argv: Argv) -> str:
    key, pid, iid = argv[1], argv[2], argv[3]
    s = stream_at(ctx, key)
    if s is None:
        raise ReplyError(NO_SUCH_KEY)
    if not pid:
        raise ReplyError("ERR XIDMPRECORD requires a non-empty producer ID")
    if not iid:
        raise ReplyError("ERR XIDMPRECORD requires a non-empty idempotent ID")
    sid = parse_strict(argv[4])
    if sid not in s:
        raise ReplyError("ERR No such message in stream")
    state, created = idmp_state(ctx, s)
    found = state.lookup(pid, iid, ctx.now)
    if found is not None:
        if found != sid:
            raise ReplyError("ERR The producer ID and idempotent ID already map to another "
                             "stream ID")
        return "OK"  # already recorded: idempotent
    if created:
        ctx.emit(xcfgset_effect(key, state.duration, state.maxsize))
    state.record(pid, iid, sid, ctx.now)
    ctx.emit(xidmprecord_effect(key, pid, iid, format_id(sid)))
    return "OK"


@command("sk.xidmpdup", 3, "write", since="streamkeep", internal=True,
         acl="stream", keys="RW UPDATE",
         effect="SK.XIDMPDUP key duplicates",
         summary="Effect: set a stream's count of refused IDMP duplicates.")
def sk_xidmpdup(ctx: Ctx, argv: Argv) -> int:
    s = ctx.db[argv[1]]
    state, _created = idmp_state(ctx, s)
    state.duplicates = parse_int(argv[2])
    return 0
