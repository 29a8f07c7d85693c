"""Stream commands on entries: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XDELEX, XTRIM, XSETID.

Owns these commands' argument handling, replies and effects. Must not touch: group semantics
beyond the reference policies (engine.trimming), blocking (engine.cmd_read), storage internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from streamkeep.engine.commands.idmp import (
    created_state,
    refuse_duplicate,
    xadd_duplicate,
    xadd_iid,
    xadd_record,
)
from streamkeep.engine.commands.trimming import (
    ACKED,
    DELREF,
    drop_references,
    obeys_exactly,
    parse_add_trim,
    parse_policy,
    referenced,
    run_trim,
    trim_effects,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import read_stream, refuse_string, refuse_string_in, stream_at
from streamkeep.engine.exec.notify import NEW, STREAM, keyspace_event
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    plain_xadd_effect,
    xack_effect,
    xadd_effect,
    xdel_effect,
    xidmprecord_effect,
    xsetid_effect,
    xtrim_effect,
)
from streamkeep.engine.model.idmp_maps import auto_iid
from streamkeep.engine.model.ids import MAX_ID, SEQ_MASK, next_auto_id, parse_range, parse_strict
from streamkeep.engine.model.stream import Stream, new_stream
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int, parse_int_range
from streamkeep.engine.wire.errors import NO_SUCH_KEY, SYNTAX, ReplyError, wrong_arity
from streamkeep.engine.wire.reply import NULL_ARRAY

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState

_EDOM: Final = "ERR The ID specified in XADD is equal or smaller than the target stream top item"


def _resolve_xadd_id(s: Stream, parsed, now: int) -> int:  # type: ignore[no-untyped-def]
    last = s.last_id
    if parsed is None:
        return next_auto_id(last, now)
    sid = parsed.value
    if parsed.seq_given:
        if sid <= last:
            raise ReplyError(_EDOM)
        return sid
    ms, last_ms = sid >> 64, last >> 64
    if ms > last_ms:
        return sid
    if ms < last_ms or last & SEQ_MASK == SEQ_MASK:
        raise ReplyError(_EDOM)
    return last + 1


# add_entry's ID parsing caches: the sequence numbers XADD gives most (canonical spellings
# only), and the last `ms` part parsed (consecutive IDs share it, as format_id's cache assumes):
# one tuple, swapped atomically. b"-" never matches: partition leaves no dash in the `ms` part.
_SMALL_SEQ_VALUE: Final = {b"%d" % i: i for i in range(1024)}
_ms_cache: tuple[bytes, int, int, bool] = (b"-", 0, 0, False)  # digits, ms, ms << 64, canonical


def add_entry(engine: EngineState, db: dict[bytes, Stream], argv: Argv, now: int) -> bytes | None:
    """`XADD key id field value ...` without options, with `*` or an ID written `ms-seq` in
    plain decimal digits (every XADD effect), exactly as the XADD handler runs it: arity and ID
    checks in Redis's order (a refused replayed record raises the error a client would get),
    the stream created, `*` resolved at `now`, the entry appended. Returns its ID bytes; the
    effect and the wake-ups are the caller's. None, having checked and changed nothing, for
    any other form (options, `ms`, `ms-*`, odd spellings), which _xadd_general handles.

    The XADD handler and the replay loop (Replay.apply_many's fast path for records made of
    one XADD effect) both call this: one implementation of XADD's validated append."""
    global _ms_cache
    idarg = argv[2]
    if idarg == b"*":
        sid = 0
        idb = b""
    else:
        digits, _dash, seq_digits = idarg.partition(b"-")
        cached, ms, high, canonical = _ms_cache
        if digits != cached:
            if not digits.isdigit() or len(digits) > 19:  # (no dash: seq_digits is b"")
                return None
            ms = int(digits)
            high = ms << 64
            canonical = digits[0] != 48 or len(digits) == 1  # no leading zero
            _ms_cache = (digits, ms, high, canonical)
        try:
            seq = _SMALL_SEQ_VALUE[seq_digits]
        except KeyError:
            if not seq_digits.isdigit() or len(seq_digits) > 19:
                return None
            seq = int(seq_digits)
            canonical = canonical and seq_digits[0] != 48  # (b"0" itself is in the cache)
        sid = high | seq
        idb = idarg if canonical else b""  # canonical: no need to format it again
        if not sid and len(argv) & 1:
            raise ReplyError("ERR The ID specified in XADD must be greater than 0-0")
    if not len(argv) & 1:
        raise wrong_arity("xadd")
    key = argv[1]
    try:
        s = db[key]
    except KeyError:
        refuse_string_in(engine, db, key)
        s = db[key] = new_stream(engine.residency)
        if engine.notify_flags & NEW:
            keyspace_event(engine, NEW, b"new", key, engine.dbs.index(db))
    last = s.last_id
    if sid <= last:  # (always for `*`: sid is 0 until resolved)
        if last == MAX_ID:
            raise ReplyError(_EXHAUSTED)
        if sid:
            raise ReplyError(_EDOM)
        sid = next_auto_id(last, now)
    return s.append(sid, argv[3:], engine.node_max_entries, engine.node_max_bytes, idb)


@command("xadd", -5, "write denyoom fast",
         acl="stream", keys="RW UPDATE",
         key_notes="UPDATE instead of INSERT because of the optional trimming feature",
         logs=("SK.XIDMPDUP", "SK.XTRIMIDS", "XACK", "XADD", "XCFGSET", "XIDMPRECORD", "XTRIM"),
         effect="XADD key [<MAXLEN = length | MINID = id>] id field value [field value ...]",
         summary="Appends a new message to a stream. "
         "Creates the key if it doesn't exist.",
         syntax="key [NOMKSTREAM] [condition: KEEPREF | DELREF | ACKED] [idmp: IDMPAUTO "
                "producer-id | IDMP producer-id idempotent-id] [trim: <strategy: MAXLEN "
                "| MINID> [operator: = | ~] threshold [LIMIT count:integer]] <id-selector: * | id> "
                "<data: field value>...")
def xadd(ctx: Ctx, argv: Argv) -> bytes | None:
    # The hot paths, `XADD key * field value ...` (clients) and `XADD key ms-seq field value
    # ...` (clients and every replayed XADD effect), are add_entry's. Anything with options or
    # another ID form takes _xadd_general.
    engine = ctx.engine
    if argv[2] in _IDMP_WIDTH:  # `XADD key IDMP pid iid * ...` and IDMPAUTO: no parse
        idb = _xadd_idmp_simple(ctx, argv)
        return _xadd_general(ctx, argv) if idb is _NOT_SIMPLE else idb
    idb = add_entry(engine, ctx.db, argv, ctx.now)
    if idb is None:
        return _xadd_general(ctx, argv)
    if not ctx.replaying:
        ctx.effects.append(plain_xadd_effect(argv, idb))
    if engine.waiters.by_key:
        ctx.signal(argv[1])
    if engine.notify_flags:
        ctx.notify(STREAM, b"xadd", argv[1])
    return idb


_EXHAUSTED: Final = "ERR The stream has exhausted the last possible ID, unable to add more items"

# Idempotent producers' common shapes, `XADD key IDMP pid iid * field value ...` and `XADD key
# IDMPAUTO pid * field value ...` (what redis-py sends): the option's word and its width.
_IDMP_WIDTH: Final = {b"IDMP": 3, b"idmp": 3, b"IDMPAUTO": 2, b"idmpauto": 2}
_NOT_SIMPLE: Final = b""  # (never an XADD reply)


def _xadd_idmp_simple(ctx: Ctx, argv: Argv) -> bytes | None:
    """XADD with IDMP/IDMPAUTO as its only option and `*`, without the general parse: the
    duplicate check, the append at the next automatic ID, the recording (the steps of
    engine.commands.idmp, inlined: this is a producer's every send). _NOT_SIMPLE, having
    changed nothing, for any other shape or a refused one (_xadd_general replies)."""
    star = 2 + _IDMP_WIDTH[argv[2]]
    argc = len(argv)
    if argc <= star + 2 or argv[star] != b"*" or (argc - star) & 1 == 0:
        return _NOT_SIMPLE
    pid = argv[3]
    fields = argv[star + 1:]
    iid = argv[4] if star == 5 else auto_iid(fields)
    if not pid or not iid:
        return _NOT_SIMPLE
    key, db, now = argv[1], ctx.db, ctx.now
    s = db.get(key)
    if s is None:
        refuse_string(ctx, key)
        s = db[key] = new_stream(ctx.engine.residency)
        ctx.notify(NEW, b"new", key)
        state = None
    else:
        state = s.idmp
    last = s.last_id
    if last == MAX_ID:  # a duplicate is still refused with its ID: checked first
        if state is not None and (original := state.lookup(pid, iid, now)) is not None:
            return refuse_duplicate(ctx, key, state, original)
        raise ReplyError(_EXHAUSTED)
    sid = next_auto_id(last, now)
    if state is not None:  # the duplicate check and, when there is none, the recording
        original = state.lookup_or_record(pid, iid, sid, now)
        if original is not None:
            return refuse_duplicate(ctx, key, state, original)
    engine = ctx.engine
    idb = s.append(sid, fields, engine.node_max_entries, engine.node_max_bytes)
    effects = ctx.effects
    effects.append(xadd_effect(key, idb, fields))
    if state is None:
        created_state(ctx, key, s).record(pid, iid, sid, now)
    effects.append(xidmprecord_effect(key, pid, iid, idb))
    if engine.waiters.by_key:
        ctx.signal(key)
    if engine.notify_flags:
        ctx.notify(STREAM, b"xadd", key)
    return idb


def _xadd_general(ctx: Ctx, argv: Argv) -> bytes | None:
    """XADD with options, or an ID in another form (`ms`, `ms-*`, odd spellings)."""
    engine = ctx.engine
    if argv[2] == b"*":  # fast path: no options
        a = None
        field_pos = 3
    else:
        a = parse_add_trim(argv, True, obeys_exactly(ctx), engine.node_max_entries)
        field_pos = a.field_pos
    nfields = len(argv) - field_pos
    if nfields < 2 or nfields & 1:
        raise wrong_arity("xadd")
    parsed = a.id if a is not None else None
    if parsed is not None and parsed.seq_given and parsed.value == 0:
        raise ReplyError("ERR The ID specified in XADD must be greater than 0-0")
    key = argv[1]
    s = ctx.db.get(key)
    if s is None:
        refuse_string(ctx, key)
        if a is not None and a.nomkstream:
            return None
        s = new_stream(ctx.engine.residency)
        ctx.db[key] = s
        ctx.notify(NEW, b"new", key)
    idmp: tuple[bytes, bytes] | None = None  # Redis 8.6's idempotent producers: (pid, iid)
    if a is not None and a.idmp_pid is not None:
        idmp = a.idmp_pid, xadd_iid(a.idmp_iid, argv[field_pos:])
        original = xadd_duplicate(ctx, key, s, *idmp)
        if original is not None:
            return original
    if s.last_id == MAX_ID:
        raise ReplyError(_EXHAUSTED)
    sid = (next_auto_id(s.last_id, ctx.now) if parsed is None
           else _resolve_xadd_id(s, parsed, ctx.now))
    fields = argv[field_pos:]
    idb = s.append(sid, fields, engine.node_max_entries, engine.node_max_bytes)
    clause: list[bytes] = []
    extra: list[list[bytes]] = []
    if a is not None and a.strategy is not None:
        removed, dropped = run_trim(s, a)
        if removed or dropped:
            clause, extra = trim_effects(key, s, a, removed, dropped)
    if idmp is None:
        ctx.effects.append(xadd_effect(key, idb, fields, clause))
    else:
        # The recording is logged between the entry and the trim, which may remove the entry
        # (XIDMPRECORD refuses an ID that is not in the stream).
        ctx.effects.append(xadd_effect(key, idb, fields))
        xadd_record(ctx, key, s, *idmp, sid, idb)
        if clause:
            ctx.effects.append(xtrim_effect(key, clause))
    if extra:
        ctx.effects.extend(extra)
    if ctx.engine.waiters:
        ctx.signal(key)
    ctx.notify(STREAM, b"xadd", key)
    if clause or extra:
        ctx.notify(STREAM, b"xtrim", key)
    return idb


def _range(ctx: Ctx, argv: Argv, rev: bool) -> list | object:
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start, end = parse_range(start_arg, end_arg)
    count = -1
    j = 4
    while j < len(argv):
        if is_word(argv[j], b"count") and j + 1 < len(argv):
            count = parse_int(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise ReplyError(SYNTAX)
    s = read_stream(ctx, argv[1])
    if s is None:
        return []
    if count == 0:
        return NULL_ARRAY
    if ctx.replies_in_resp:
        return s.range_resp(start, end, 0 if count == -1 else count, rev,
                            budget=ctx.reply_budget)
    return s.range_plain(start, end, 0 if count == -1 else count, rev)


@command("xrange", -4, "readonly",
         acl="stream", keys="RO ACCESS",
         summary="Returns the messages from a stream within a range "
         "of IDs.",
         syntax="key start end [COUNT count:integer]")
def xrange(ctx: Ctx, argv: Argv) -> list | object:
    return _range(ctx, argv, False)


@command("xrevrange", -4, "readonly",
         acl="stream", keys="RO ACCESS",
         summary="Returns the messages from a stream within a "
         "range of IDs in reverse order.",
         syntax="key end start [COUNT count:integer]")
def xrevrange(ctx: Ctx, argv: Argv) -> list | object:
    return _range(ctx, argv, True)


@command("xlen", 2, "readonly fast",
         acl="stream", keys="RO",
         summary="Return the number of messages in a stream.", syntax="key")
def xlen(ctx: Ctx, argv: Argv) -> int:
    s = read_stream(ctx, argv[1])
    return s.length if s is not None else 0


def _delete_entries(s: Stream, sids: list[int]) -> list[int]:
    """XDEL semantics for each ID: tombstone it and track the max deleted ID."""
    deleted = []
    for sid in sids:
        if s.delete(sid):
            deleted.append(sid)
            if sid > s.max_deleted_id:
                s.max_deleted_id = sid
    if deleted:
        s.refresh_first_id()
    return deleted


@command("xdel", -3, "write fast",
         acl="stream", keys="RW DELETE", logs=("XDEL",),
         effect="XDEL key id [id ...]",
         summary="Returns the number of messages after removing "
         "them from a stream.",
         syntax="key id...")
def xdel(ctx: Ctx, argv: Argv) -> int:
    s = stream_at(ctx, argv[1])
    if s is None:
        return 0
    sids = [parse_strict(arg) for arg in argv[2:]]
    deleted = _delete_entries(s, sids)
    if deleted:
        ctx.emit(xdel_effect(argv[1], deleted))
        ctx.notify(STREAM, b"xdel", argv[1])
    return len(deleted)


class IdsArgs:
    """`[KEEPREF|DELREF|ACKED] IDS numids id...` as XDELEX and XACKDEL take them."""

    __slots__ = ("policy", "ids")

    def __init__(self, policy: bytes, ids: Sequence[bytes]) -> None:
        self.policy = policy
        self.ids = ids


def parse_ids_args(argv: Argv, start: int) -> IdsArgs:
    """Options in any order; the IDs are validated later (a missing key skips that)."""
    policy: bytes | None = None
    ids: Sequence[bytes] | None = None
    i = start
    while i < len(argv):
        p = parse_policy(argv[i])
        if p is not None and policy is None:
            policy = p
            i += 1
        elif is_word(argv[i], b"ids") and i + 1 < len(argv):
            numids = parse_int_range(argv[i + 1], 1, LLONG_MAX,
                                     "Number of IDs must be a positive integer")
            if numids > len(argv) - (i + 2):
                raise ReplyError(
                    "ERR The `numids` parameter must match the number of arguments"
                )
            ids = argv[i + 2:i + 2 + numids]
            i += 2 + numids
        else:
            raise ReplyError(SYNTAX)
    if ids is None:
        raise ReplyError("ERR IDS option is required")
    return IdsArgs(policy or b"KEEPREF", ids)


def delete_entries_with_policy(
    ctx: Ctx, key: bytes, s: Stream, sids: list[int], policy: bytes
) -> list[int]:
    """XDELEX's per-ID work: -1 not found, 1 deleted, 2 kept (ACKED, still referenced)."""
    codes: list[int] = []
    deleted: list[int] = []
    for sid in sids:
        if policy == DELREF:
            dropped = drop_references(s, [sid])
            for group, gone in dropped.items():
                ctx.emit(xack_effect(key, group, gone))
        if s.get(sid) is None:
            codes.append(-1)
        elif policy == ACKED and referenced(s, sid):
            codes.append(2)
        else:
            deleted.extend(_delete_entries(s, [sid]))
            codes.append(1)
    if deleted:
        ctx.emit(xdel_effect(key, deleted))
        ctx.notify(STREAM, b"xdel", key)
    return codes


@command("xdelex", -5, "write fast", since="8.2.0",
         acl="stream", keys="RW DELETE", logs=("XACK", "XDEL"),
         summary="Deletes one or multiple entries from the stream.",
         syntax="key [condition: KEEPREF | DELREF | ACKED] <IDS numids:integer id...>")
def xdelex(ctx: Ctx, argv: Argv) -> list[int]:
    args = parse_ids_args(argv, 2)
    s = stream_at(ctx, argv[1])
    if s is None:
        return [-1] * len(args.ids)
    sids = [parse_strict(x) for x in args.ids]
    return delete_entries_with_policy(ctx, argv[1], s, sids, args.policy)


@command("xtrim", -4, "write", since="5.0.0",
         acl="stream", keys="RW DELETE", logs=("SK.XTRIMIDS", "XACK", "XTRIM"),
         effect="XTRIM key <MAXLEN = length | MINID = id>",
         summary="Deletes messages from the beginning of a stream.",
         syntax="key <trim: <strategy: MAXLEN | MINID> [operator: = | ~] threshold "
                "[LIMIT count:integer]> [condition: KEEPREF | DELREF | ACKED]")
def xtrim(ctx: Ctx, argv: Argv) -> int:
    a = parse_add_trim(argv, False, obeys_exactly(ctx), ctx.engine.node_max_entries)
    s = stream_at(ctx, argv[1])
    if s is None:
        return 0
    removed, dropped = run_trim(s, a)
    if removed or dropped:
        clause, extra = trim_effects(argv[1], s, a, removed, dropped)
        if clause:
            ctx.emit(xtrim_effect(argv[1], clause))
        ctx.effects.extend(extra)
        if removed:
            ctx.notify(STREAM, b"xtrim", argv[1])
    return len(removed)


@command("sk.xtrimids", -3, "write", since="streamkeep", internal=True,
         acl="stream", keys="RW DELETE",
         effect="SK.XTRIMIDS key id [id ...]",
         summary="Effect: remove these entries as trimming does.")
def sk_xtrimids(ctx: Ctx, argv: Argv) -> int:
    s = ctx.db[argv[1]]
    s.remove_as_trim([parse_strict(x) for x in argv[2:]])
    return 0


@command("xsetid", -3, "write denyoom fast",
         acl="stream", keys="RW UPDATE", logs=("XSETID",),
         effect="XSETID key last-id ENTRIESADDED entries-added MAXDELETEDID max-deleted-id",
         summary="An internal command for replicating "
         "stream values.",
         syntax="key last-id [ENTRIESADDED entries-added:integer] "
                "[MAXDELETEDID max-deleted-id]")
def xsetid(ctx: Ctx, argv: Argv) -> str:
    sid = parse_strict(argv[2])
    entries_added = -1
    max_xdel = 0
    i = 3
    while i < len(argv):
        more = len(argv) - 1 - i
        if is_word(argv[i], b"entriesadded") and more:
            entries_added = parse_int(argv[i + 1])
            if entries_added < 0:
                raise ReplyError("ERR entries_added must be positive")
        elif is_word(argv[i], b"maxdeletedid") and more:
            max_xdel = parse_strict(argv[i + 1])
            if sid < max_xdel:
                raise ReplyError(
                    "ERR The ID specified in XSETID is smaller than the provided "
                    "max_deleted_entry_id"
                )
        else:
            raise ReplyError(SYNTAX)
        i += 2
    s = stream_at(ctx, argv[1])
    if s is None:
        raise ReplyError(NO_SUCH_KEY)
    if sid < s.max_deleted_id:
        raise ReplyError(
            "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
        )
    if s.length > 0:
        if sid < s.last_entry_id():
            raise ReplyError(
                "ERR The ID specified in XSETID is smaller than the target stream top item"
            )
        if entries_added != -1 and s.length > entries_added:
            raise ReplyError(
                "ERR The entries_added specified in XSETID is smaller than the target stream "
                "length"
            )
    before = (s.last_id, s.entries_added, s.max_deleted_id)
    s.last_id = sid
    if entries_added != -1:
        s.entries_added = entries_added
    if max_xdel:
        s.max_deleted_id = max_xdel
    if (s.last_id, s.entries_added, s.max_deleted_id) != before:
        ctx.emit(xsetid_effect(argv[1], s.last_id, s.entries_added, s.max_deleted_id))
    ctx.notify(STREAM, b"xsetid", argv[1])
    return "OK"
