"""Stream commands on entries: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XDELEX, XTRIM, XSETID.

Owns these commands' argument handling, replies and effects. Must not touch: group semantics
beyond the reference policies (engine.trimming), blocking (engine.cmd_read), storage internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamkeep.engine.commands.idmp import (
    idmp_state,
    refuse_duplicate,
    xadd_duplicate,
    xadd_iid,
)
from streamkeep.engine.commands.trimming import (
    ACKED,
    DELREF,
    TrimArgs,
    drop_references,
    obeys_exactly,
    parse_add_trim,
    parse_policy,
    referenced,
    run_trim,
    trim_effects,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import read_stream, refuse_string, stream_at
from streamkeep.engine.exec.notify import NEW, STREAM
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    xack_effect,
    xadd_effect,
    xcfgset_effect,
    xdel_effect,
    xidmprecord_effect,
    xsetid_effect,
    xtrim_effect,
)
from streamkeep.engine.model.idmp_maps import Idmp
from streamkeep.engine.model.ids import MAX_ID, SEQ_MASK, next_auto_id, parse_range, parse_strict
from streamkeep.engine.model.stream import Stream, new_stream
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int, parse_int_range
from streamkeep.engine.wire.errors import NO_SUCH_KEY, SYNTAX, ReplyError, wrong_arity
from streamkeep.engine.wire.reply import NULL_ARRAY

_EDOM: Final = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
_ZERO: Final = "ERR The ID specified in XADD must be greater than 0-0"
_EXHAUSTED: Final = "ERR The stream has exhausted the last possible ID, unable to add more items"
_AUTO: Final = -1  # XADD's ID `*` (or no ID argument read yet): the stream's next automatic ID

# _decimal_id's caches: the sequence numbers XADD gives most (canonical spellings only), and the
# last `ms` part parsed (consecutive IDs share it, as format_id's cache assumes): one tuple,
# swapped atomically. b"-" never matches: partition leaves no dash in the `ms` part.
_SMALL_SEQ_VALUE: Final = {b"%d" % i: i for i in range(1024)}
_ms_cache: tuple[bytes, int, int, bool] = (b"-", 0, 0, False)  # digits, ms, ms << 64, canonical
_NOT_DECIMAL: Final = (_AUTO, b"")


def _decimal_id(idarg: bytes) -> tuple[int, bytes]:
    """XADD's ID argument when it is `ms-seq` in plain decimal digits, as every XADD effect
    writes it: (the ID, the argument itself if it is format_id's canonical spelling, else b"").
    (_AUTO, b"") for anything else (`*`, `ms`, `ms-*`, other spellings, an option), which
    parse_add_trim reads."""
    global _ms_cache
    if not idarg or not 48 <= idarg[0] <= 57:  # (an option's word, `*`: not a digit)
        return _NOT_DECIMAL
    digits, _dash, seq_digits = idarg.partition(b"-")
    cached, ms, high, canonical = _ms_cache
    if digits != cached:
        if not digits.isdigit() or len(digits) > 19:  # (no dash: seq_digits is b"")
            return _NOT_DECIMAL
        ms = int(digits)
        high = ms << 64
        canonical = digits[0] != 48 or len(digits) == 1  # no leading zero
        _ms_cache = (digits, ms, high, canonical)
    try:
        seq = _SMALL_SEQ_VALUE[seq_digits]
    except KeyError:
        if not seq_digits.isdigit() or len(seq_digits) > 19:
            return _NOT_DECIMAL
        seq = int(seq_digits)
        canonical = canonical and seq_digits[0] != 48  # (b"0" itself is in the cache)
    return high | seq, (idarg if canonical else b"")


def _next_given_id(last: int, sid: int, exact: bool) -> int:
    """The ID XADD adds at for an ID argument that is not simply past the stream's last ID
    `last` (not MAX_ID): `ms` / `ms-*` (not `exact`) the next in that millisecond; refused
    when it is not past `last`."""
    if exact:  # (sid <= last)
        raise ReplyError(_EDOM)
    ms, last_ms = sid >> 64, last >> 64
    if ms > last_ms:
        return sid
    if ms < last_ms or last & SEQ_MASK == SEQ_MASK:
        raise ReplyError(_EDOM)
    return last + 1


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
    """Every XADD, a client's and a replayed effect's, in Redis's order: the arguments read,
    arity and ID checked, the stream found or made, an IDMP duplicate refused, the ID resolved,
    the entry appended, the trim run, the effects logged, blocked readers woken."""
    engine = ctx.engine
    # The arguments. Two forms without options skip parse_add_trim: `*` (a client's every
    # XADD) and `ms-seq` in plain digits (every replayed XADD effect).
    idarg = argv[2]
    a: TrimArgs | None = None
    exact = True  # the sequence is given (`ms-seq`; `*` too: the stream gives it)
    if idarg == b"*":
        sid, idb = _AUTO, b""
    else:
        sid, idb = _decimal_id(idarg)
        if sid == _AUTO:
            a = parse_add_trim(argv, True, obeys_exactly(ctx), engine.node_max_entries)
            if a.id is not None:
                sid, exact = a.id.value, a.id.seq_given
    fields = argv[3:] if a is None else argv[a.field_pos:]
    if len(fields) < 2 or len(fields) & 1:
        raise wrong_arity("xadd")
    if not sid and exact:
        raise ReplyError(_ZERO)
    key = argv[1]
    s = ctx.db.get(key)
    if s is None:
        refuse_string(ctx, key)
        if a is not None and a.nomkstream:
            return None
        s = ctx.db[key] = new_stream(engine.residency)
        ctx.notify(NEW, b"new", key)
    # Redis 8.6's idempotent producers: the producer's ID and the entry's.
    pid: bytes | None = None
    iid = b""
    if a is not None and a.idmp_pid is not None:
        pid, iid = a.idmp_pid, xadd_iid(a.idmp_iid, fields)
    last = s.last_id
    if sid == _AUTO or sid <= last or not exact:
        if last == MAX_ID:
            if pid is not None:  # a duplicate is refused with its ID even then
                original = xadd_duplicate(ctx, key, s, pid, iid)
                if original is not None:
                    return original
            raise ReplyError(_EXHAUSTED)
        sid = next_auto_id(last, ctx.now) if sid == _AUTO else _next_given_id(last, sid, exact)
    state: Idmp | None = None
    created = False  # the stream's IDMP state made by this XADD: its settings are logged
    if pid is not None:  # the duplicate check and, when there is none, the recording: one probe
        state, created = idmp_state(ctx, s)
        original_sid = state.lookup_or_record(pid, iid, sid, ctx.now)
        if original_sid is not None:
            return refuse_duplicate(ctx, key, state, original_sid)
    idb = s.append(sid, fields, engine.node_max_entries, engine.node_max_bytes, idb)
    clause: list[bytes] | None = None  # the trim's, when it removed entries
    extra: list[list[bytes]] | None = None
    trimmed = False
    if a is not None and a.strategy is not None:
        removed, dropped = run_trim(s, a)
        if removed or dropped:
            trimmed = True
            clause, extra = trim_effects(key, s, a, removed, dropped)
    if not ctx.replaying:  # (what a replayed effect would log is not needed)
        effects = ctx.effects
        if state is None:
            effects.append(xadd_effect(key, idb, fields, clause))
        else:
            # The recording is logged between the entry and the trim, which may remove the
            # entry (XIDMPRECORD refuses an ID that is not in the stream).
            effects.append(xadd_effect(key, idb, fields))
            if created:
                effects.append(xcfgset_effect(key, state.duration, state.maxsize))
            assert pid is not None  # (a state is only looked up for a producer)
            effects.append(xidmprecord_effect(key, pid, iid, idb))
            if clause:
                effects.append(xtrim_effect(key, clause))
        if extra:
            effects.extend(extra)
    if engine.waiters.by_key:
        ctx.signal(key)
    if engine.notify_flags:
        ctx.notify(STREAM, b"xadd", key)
        if trimmed:
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
