"""XREAD and XREADGROUP: serving entries, group delivery, history reads, CLAIM, blocking.

Owns these two commands' parsing (they share Redis's xreadCommand grammar), what they reply,
what they do to the group (last ID, entries read, PEL, consumer times) and their effects: per
claimed entry the 14-argument XCLAIM, for history reads the same XCLAIM without LASTID (Redis
lets delivery counts drift there; we do not), for the new entries a read delivered one XCLAIM of
them all (Redis propagates one a message: the same state in a hundredth of the effects), then
`XGROUP SETID ... ENTRIESREAD` if the group moved, then `SK.XCONSUMER` pinning the consumer's
seen/active times. When nothing can be served and BLOCK was given it returns a `Block`. Redis
8.10's MAXCOUNT/MAXSIZE cap the whole reply (`Caps`): streams are served in argument order until
the cap is reached, the entry that crosses MAXSIZE included, so a read serves at least one entry;
only served entries are delivered.
Must not touch: other commands' semantics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from streamkeep.engine.exec.context import Block, Ctx
from streamkeep.engine.exec.key_specs import NO_FLAGS, Keys
from streamkeep.engine.exec.keys import read_hit, read_stream, stream_at
from streamkeep.engine.exec.notify import STREAM
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.consumer_groups import (
    INVALID_ENTRIES_READ,
    Consumer,
    ConsumerGroup,
    advance_entries_read,
    has_tombstones_between,
    pending_idle,
)
from streamkeep.engine.model.effects import (
    new_deliveries_xclaim_effect,
    sk_xconsumer_effect,
    xclaim_effect,
    xgroup_setid_effect,
)
from streamkeep.engine.model.ids import MAX_ID, decr_id, format_id, parse_strict
from streamkeep.engine.model.pel_store import NO_OWNER
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.args import (
    LLONG_MAX,
    option_word,
    parse_int,
    parse_int_range,
    parse_timeout_ms,
)
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, nogroup
from streamkeep.engine.wire.reply import (
    NULL_ARRAY,
    EntryArray,
    PackedEntries,
    PlainEntries,
    RespMap,
)

_PLAIN_ENTRIES: Final = PlainEntries  # (bound Final: compared without a globals lookup)
_GT_NEW: Final = -1  # the ">" ID
_PLUS: Final = -2  # XREAD's "+" (Redis 7.4: the last entry)


class ReadArgs:
    __slots__ = ("timeout", "count", "streams_at", "nstreams", "group", "consumer", "noack",
                 "claim", "maxcount", "maxsize")

    def __init__(self) -> None:
        self.timeout = -1
        self.count = 0
        self.streams_at = 0
        self.nstreams = 0
        self.group: bytes | None = None
        self.consumer = b""
        self.noack = False
        self.claim = -1  # XREADGROUP CLAIM min-idle-time, -1 when not given
        self.maxcount = 0  # Redis 8.10 MAXCOUNT / MAXSIZE, 0 when not given
        self.maxsize = 0


def entry_reply_size(idb: bytes, fields: tuple) -> int:
    """What one entry adds to the reply (MAXSIZE's measure): its RESP encoding, `*2`, the ID
    bulk string and the array of field and value bulk strings."""
    size = 4 + 5 + len(str(len(idb))) + len(idb) + 3 + len(str(len(fields)))
    for x in fields:
        size += 5 + len(str(len(x))) + len(x)
    return size


class Caps:
    """What is left of a read's MAXCOUNT and MAXSIZE (Redis 8.10) across its streams; -1 for a
    cap not given. A stream is served only while both are left; the entry that crosses MAXSIZE
    is still served (so a capped read serves at least one entry)."""

    __slots__ = ("count_left", "size_left")

    def __init__(self, a: ReadArgs) -> None:
        self.count_left = a.maxcount or -1
        self.size_left = a.maxsize or -1

    def exhausted(self) -> bool:
        return self.count_left == 0 or self.size_left == 0

    def stream_count(self, count: int) -> int:
        """The per-stream entry limit (0: none): COUNT, lowered to what MAXCOUNT leaves."""
        left = self.count_left
        if left < 0:
            return count
        return left if not count or left < count else count

    def served(self, n: int) -> None:
        if self.count_left > 0:
            self.count_left -= n

    def take(self, idb: bytes, fields: tuple) -> None:
        """Charge one served entry to MAXSIZE (a cap of 0 left means stop)."""
        self.size_left = max(self.size_left - entry_reply_size(idb, fields), 0)


def _only_group(option: str) -> ReplyError:
    return ReplyError(
        f"ERR The {option} option is only supported by XREADGROUP. You called XREAD instead."
    )


def parse_read_args(argv: Argv, now: int, group_cmd: bool) -> ReadArgs:
    a = ReadArgs()
    argc = len(argv)
    i = 1
    while i < argc:
        more = argc - i - 1
        opt = option_word(argv[i])
        if opt == b"block" and more:
            a.timeout = parse_timeout_ms(argv[i + 1], now)
            i += 2
        elif opt == b"count" and more:
            a.count = max(parse_int(argv[i + 1]), 0)
            i += 2
        elif opt == b"maxcount" and more:
            a.maxcount = parse_int_range(argv[i + 1], 1, LLONG_MAX,
                                         "MAXCOUNT must be a positive integer")
            i += 2
        elif opt == b"maxsize" and more:
            a.maxsize = parse_int_range(argv[i + 1], 1, LLONG_MAX,
                                        "MAXSIZE must be a positive integer")
            i += 2
        elif opt == b"streams" and more:
            a.streams_at = i + 1
            n = argc - a.streams_at
            if n % 2:
                raise ReplyError(
                    "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or "
                    "'>' must be specified." if group_cmd else
                    "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or "
                    "'$' must be specified."
                )
            a.nstreams = n // 2
            break
        elif opt == b"group" and more >= 2:
            if not group_cmd:
                raise _only_group("GROUP")
            a.group, a.consumer = argv[i + 1], argv[i + 2]
            i += 3
        elif opt == b"noack":
            if not group_cmd:
                raise _only_group("NOACK")
            a.noack = True
            i += 1
        elif opt == b"claim" and more:
            if not group_cmd:
                raise _only_group("CLAIM")
            a.claim = parse_int(argv[i + 1], "min-idle-time is not an integer or out of range")
            if a.claim < 0:
                raise ReplyError("ERR min-idle-time must be a positive integer")
            i += 2
        else:
            raise ReplyError(SYNTAX)
    if not a.streams_at:
        raise ReplyError(SYNTAX)
    if a.maxcount and a.count and a.maxcount < a.count:
        raise ReplyError("ERR MAXCOUNT must be greater than or equal to COUNT")
    if group_cmd and a.group is None:
        raise ReplyError("ERR Missing GROUP option for XREADGROUP")
    return a


def _meaningless(symbol: str) -> ReplyError:
    return ReplyError(
        f"ERR The {symbol} ID is meaningless in the context of XREADGROUP: you want to read the "
        "history of this consumer by specifying a proper ID, or use the > ID to get new "
        f"messages. The {symbol} ID would just return an empty result set."
    )


def _resolve_ids(ctx: Ctx, argv: Argv, a: ReadArgs) -> list[int]:
    """The 'greater than' ID per stream, validating keys and groups in argument order."""
    ids: list[int] = []
    group_cmd = a.group is not None
    for k in range(a.nstreams):
        key = argv[a.streams_at + k]
        arg = argv[a.streams_at + a.nstreams + k]
        s = read_stream(ctx, key)
        if group_cmd and (s is None or a.group not in s.groups):
            raise nogroup(key, a.group, " in XREADGROUP with GROUP option")  # type: ignore[arg-type]
        if arg == b"$":
            if group_cmd:
                raise _meaningless("$")
            ids.append(s.last_id if s is not None else 0)
        elif arg == b">":
            if not group_cmd:
                raise ReplyError(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP "
                    "<group> <consumer> option."
                )
            ids.append(_GT_NEW)
        elif arg == b"+":
            if group_cmd:
                raise _meaningless("+")
            ids.append(_PLUS)
        else:
            sid = parse_strict(arg)
            # The maximal ID is how Redis stores '>': XREADGROUP reads it as '>' too.
            ids.append(_GT_NEW if group_cmd and sid == MAX_ID else sid)
    return ids


def xread_keys(argv: Sequence[bytes]) -> Keys:
    """XREAD's and XREADGROUP's key finder (Redis's xreadGetKeys): the options skipped to the
    STREAMS that is the option, then the first half of what follows it."""
    i, streams = 1, -1
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"block", b"count"):
            i += 1
        elif arg == b"group":
            i += 2
        elif arg == b"streams":
            streams = i
            break
        elif arg != b"noack":
            break
        i += 1
    num = len(argv) - streams - 1 if streams != -1 else 0
    if streams == -1 or num == 0 or num % 2:
        return []
    return [(streams + 1 + i, NO_FLAGS) for i in range(num // 2)]


@command("xread", -4, "readonly blocking",
         acl="stream", keys="RO ACCESS STREAMS@1 r-1,1,2", key_finder=xread_keys,
         summary="Returns messages from "
         "multiple streams with IDs greater than the ones requested. Blocks until a message is "
         "available otherwise.",
         syntax="[COUNT count:integer] [MAXCOUNT maxcount:integer] [MAXSIZE maxsize:integer] "
                "[BLOCK milliseconds:integer] <STREAMS key... id...>")
def xread(ctx: Ctx, argv: Argv) -> object:
    return _xread(ctx, argv, parse_read_args(argv, ctx.now, False))


def _xread(ctx: Ctx, argv: Argv, a: ReadArgs) -> object:
    ids = _resolve_ids(ctx, argv, a)
    served = []
    caps = Caps(a) if a.maxsize else None
    left = a.maxcount  # MAXCOUNT alone is plain arithmetic: it costs what COUNT costs
    for k, gt in enumerate(ids):
        key = argv[a.streams_at + k]
        s = read_stream(ctx, key)  # (Redis looks each key up again to serve it)
        if s is None or not s.length:
            continue
        last = s.last_entry_id()
        if gt == _PLUS:
            gt = decr_id(last) or 0
        if last > gt:
            entries: EntryArray | PackedEntries | PlainEntries
            if caps is not None:
                entries = _capped_range(s, gt + 1, caps.stream_count(a.count), caps)
                caps.served(len(entries))
            else:
                n = left if left and (not a.count or left < a.count) else a.count
                if ctx.replies_in_resp:
                    entries = s.range_resp(gt + 1, MAX_ID, n, budget=ctx.reply_budget)
                else:
                    entries = s.range_plain(gt + 1, MAX_ID, n)
                if left:
                    left -= len(entries)
            served.append((key, entries))
            if a.maxcount and not left or caps is not None and caps.exhausted():
                break
    if served:
        return RespMap(served, as_pairs=True)
    return _block_or_nil(ctx, argv, a, ids)


def _capped_range(s: Stream, start: int, count: int, caps: Caps) -> EntryArray:
    """XREAD's range under MAXCOUNT (in `count`) and MAXSIZE: without MAXSIZE the plain range
    read; with it entry by entry, stopping after the entry that uses up the size."""
    if caps.size_left < 0:
        return s.range(start, MAX_ID, count)
    out = EntryArray()
    for _sid, idb, fields in s.iter_forward(start, MAX_ID):
        out.ids.append(idb)
        out.fields.append(fields)
        caps.take(idb, fields)
        if caps.size_left == 0 or len(out.ids) == count:
            break
    return out


def _block_or_nil(ctx: Ctx, argv: Argv, a: ReadArgs, ids: list[int]) -> object:
    if a.timeout == -1 or ctx.in_multi:
        return NULL_ARRAY
    wake_at = _claim_wake_at(ctx, argv, a) if a.claim >= 0 else None
    keys = argv[a.streams_at:a.streams_at + a.nstreams]
    rerun = list(argv)
    for k, gt in enumerate(ids):
        if argv[a.streams_at + a.nstreams + k] == b"$":
            # Re-running with '$' would wait for entries after the *new* last ID forever.
            rerun[a.streams_at + a.nstreams + k] = format_id(gt)
    ready: ReadyCheck | ClaimReadyCheck = (
        ClaimReadyCheck(ctx, keys, a.group, a.claim) if a.claim >= 0 and a.group is not None
        else ReadyCheck(ctx, keys, ids, a.group))
    # A re-run runs the handler's body with these arguments as parsed now (keys, groups and
    # IDs are still checked again): parsing them is a third of a blocked consumer's re-run.
    body = _xread if a.group is None else _xreadgroup
    rerun_argv = tuple(rerun)
    return Block(keys, a.timeout, rerun_argv, wake_at, ready,
                 lambda c, _argv: body(c, rerun_argv, a))


class ReadyCheck:
    """What a signalled key must show before the blocked command is worth re-running, as Redis
    checks it: for XREAD an ID above the one asked for, for XREADGROUP `>` an ID above the
    group's last delivered one, or the key or group gone (which the re-run turns into NOGROUP).
    Without it every XADD would re-run every blocked consumer of a busy group, and each re-run
    that serves nothing would still move the consumer's seen time. `key` is what the check
    depends on, for _serve_ready's memo of checks found false in one pass."""

    __slots__ = ("dbs", "index", "pairs", "group", "key")

    def __init__(self, ctx: Ctx, keys: Argv, ids: list[int], group: bytes | None) -> None:
        self.dbs, self.index = ctx.engine.dbs, ctx.session.db
        self.pairs = list(zip(keys, ids, strict=True))
        self.group = group
        self.key: tuple = ((self.index, tuple(self.pairs)) if group is None
                           else (self.index, tuple(keys), group))

    def __call__(self) -> bool:
        db = self.dbs[self.index]
        group = self.group
        for key, gt in self.pairs:
            s = db.get(key)
            if group is None:
                if s is not None and s.last_id > gt:
                    return True
                continue
            if s is None:
                return True
            g = s.groups.get(group)
            if g is None or s.last_id > g.last_id:
                return True
        return False


class ClaimReadyCheck:
    """ReadyCheck for XREADGROUP ... CLAIM min-idle: worth re-running when the stream has
    entries past the group's last delivered one, when a pending entry has been idle for
    min-idle (XNACK releases one at once; an entry idling into it is the Block's timer's), or
    when the key or group is gone. Without it every XADD re-ran every blocked claimer of the
    group: a thousand workers blocked on one queue made each put a thousand re-runs."""

    __slots__ = ("dbs", "index", "keys", "group", "claim", "now", "key")

    def __init__(self, ctx: Ctx, keys: Argv, group: bytes, claim: int) -> None:
        self.dbs, self.index = ctx.engine.dbs, ctx.session.db
        self.keys = keys
        self.group = group
        self.claim = claim
        self.now = ctx.engine.now
        self.key: tuple = (self.index, tuple(keys), group, claim)

    def __call__(self) -> bool:
        db = self.dbs[self.index]
        group = self.group
        for key in self.keys:
            s = db.get(key)
            if s is None:
                return True
            g = s.groups.get(group)
            if g is None or s.last_id > g.last_id:
                return True
            if _oldest_claimable(s, g, self.now(), self.claim):
                return True
        return False


def _oldest_pending(s: Stream, group: ConsumerGroup) -> int | None:
    """The delivery time of the group's longest-idle pending entry still in the stream."""
    order = group.pel_by_time.iter_oldest(group.pel)
    try:
        for t, sid in order:
            if sid in s:
                return t  # type: ignore[no-any-return]
        return None
    finally:
        order.close()


def _claim_wake_at(ctx: Ctx, argv: Argv, a: ReadArgs) -> int:
    """When the oldest pending entry of any stream becomes claimable (Redis 8.4)."""
    oldest: int | None = None
    for k in range(a.nstreams):
        s = stream_at(ctx, argv[a.streams_at + k])
        group = s.groups.get(a.group) if s is not None else None  # type: ignore[arg-type]
        if s is None or group is None:
            continue
        t = _oldest_pending(s, group)
        if t is not None:
            oldest = t if oldest is None else min(oldest, t)
    return (ctx.now if oldest is None else oldest) + a.claim


# --- XREADGROUP ----------------------------------------------------------------------------------


class Delivery:
    """One stream's share of an XREADGROUP: the reply entries and the effects."""

    __slots__ = ("ctx", "key", "s", "group", "consumer", "entries", "touched", "caps")

    def __init__(self, ctx: Ctx, key: bytes, s: Stream, group: ConsumerGroup,
                 consumer: Consumer, caps: Caps | None = None) -> None:
        self.ctx = ctx
        # Only a MAXSIZE needs per-entry accounting (MAXCOUNT arrives as the count limit).
        self.caps = caps if caps is not None and caps.size_left >= 0 else None
        self.key = key
        self.s = s
        self.group = group
        self.consumer = consumer
        # the entries as the reply holds them: lists, or a connection's RESP (PackedEntries)
        self.entries: Any = []
        self.touched = False  # an effect will touch the consumer on replay

    def history(self, start: int, count: int) -> None:
        """Re-deliver the consumer's own pending entries from `start` on."""
        ctx, s, group, consumer, caps = self.ctx, self.s, self.group, self.consumer, self.caps
        now = ctx.now
        for sid in consumer.pel.irange(start, MAX_ID):
            if count and len(self.entries) >= count or caps is not None and not caps.size_left:
                break
            fields = s.get(sid)
            idb = format_id(sid)
            if caps is not None:
                caps.take(idb, fields or ())
            if fields is None:
                self.entries.append([idb, NULL_ARRAY])
                continue
            nack = group.pel[sid]
            group.set_delivery(sid, nack, now, nack.delivery_count + 1)
            self.entries.append([idb, fields])
            ctx.effects.append(xclaim_effect(
                self.key, group.name, consumer.name, sid, now, nack.delivery_count, None))
            self.touched = True

    def claim_idle(self, min_idle: int, count: int) -> None:
        """Redis 8.4 CLAIM: take over idle pending entries, oldest delivery first."""
        ctx, s, group, consumer = self.ctx, self.s, self.group, self.consumer
        now = ctx.now
        picked: list[int] = []
        order = group.pel_by_time.iter_oldest(group.pel)
        for t, sid in order:
            if count and len(picked) >= count:
                break
            if now - t < min_idle and group.pel[sid].consumer is not None:
                break  # XNACK-released entries (time 0, so first) are claimable at once
            picked.append(sid)
        order.close()
        caps = self.caps
        for sid in picked:
            if caps is not None and not caps.size_left:
                break
            fields = s.get(sid)
            if fields is None:
                continue  # uses a COUNT slot, as in Redis, but is neither replied nor touched
            nack = group.pel[sid]
            idle, before = pending_idle(nack, now), nack.delivery_count
            group.add_pending(sid, consumer, now, before + 1)
            consumer.active_time = now
            idb = format_id(sid)
            if caps is not None:
                caps.take(idb, fields)
            self.entries.append([idb, fields, idle, before])
            ctx.effects.append(xclaim_effect(
                self.key, group.name, consumer.name, sid, now, before + 1, group.last_id))
            self.touched = True

    def new_entries(self, count: int, noack: bool, claim_shape: bool) -> None:
        """Deliver entries after the group's last ID (the '>' ID). The hot path of consumers:
        the per-entry work is inlined and the effect built from the already formatted ID."""
        ctx, s, group, consumer = self.ctx, self.s, self.group, self.consumer
        now, key, effects, entries = ctx.now, self.key, ctx.effects, self.entries
        # Once the counter can simply be incremented, it can for the rest of this read.
        simple = (group.entries_read != INVALID_ENTRIES_READ and group.last_id >= s.first_id
                  and not has_tombstones_between(s, group.last_id))
        moved = False
        caps = self.caps
        if caps is None and not entries:
            self._new_entries_at_once(count, noack, simple, claim_shape)
            return
        delivered: list[int] = []  # made pending in one batch once the loop is done
        idbs: list[bytes] = []
        for sid, idb, fields in s.iter_forward(group.last_id + 1, MAX_ID):
            if count and len(entries) >= count:
                break
            if caps is not None:
                if not caps.size_left:
                    break
                caps.take(idb, fields)
            if simple:
                group.entries_read += 1
                group.last_id = sid
            else:
                advance_entries_read(s, group, sid)
            moved = True
            entries.append([idb, fields, 0, 0] if claim_shape else [idb, fields])
            if not noack:
                delivered.append(sid)
                idbs.append(idb)
        if delivered:
            effects.append(new_deliveries_xclaim_effect(key, group.name, consumer.name, now,
                                                        idbs))
        group.add_new_pending(delivered, consumer, now)
        if moved and not noack:
            consumer.active_time = now
            self.touched = True
        if moved:
            effects.append(xgroup_setid_effect(key, group.name, group.last_id,
                                               group.entries_read))

    def _new_entries_at_once(self, count: int, noack: bool, simple: bool,
                             claim_shape: bool = False) -> None:
        """new_entries without MAXSIZE: the entries read node by node as the reply wants them
        (RESP straight from the nodes for a connection; with CLAIM's shape, entries as values
        with their idle time and delivery count, 0 and 0 for a new entry, added), then the
        group's bookkeeping over their IDs."""
        ctx, s, group, consumer = self.ctx, self.s, self.group, self.consumer
        now, effects = ctx.now, ctx.effects
        sids: list[int] = []
        # (two calls, not a bound method picked: the compiled build calls each directly)
        got: PackedEntries | PlainEntries = (
            s.range_resp(group.last_id + 1, MAX_ID, count, sids=sids)
            if ctx.replies_in_resp and not claim_shape
            else s.range_plain(group.last_id + 1, MAX_ID, count, sids=sids))
        if claim_shape:
            for entry in got:
                entry.extend(_NEW_ENTRY_CLAIM_TAIL)
        self.entries = got
        if not sids:
            return
        if simple:
            group.entries_read += len(sids)
            group.last_id = sids[-1]
        else:
            for sid in sids:
                advance_entries_read(s, group, sid)
        last_idb = None
        if not noack:
            idbs = ([entry[0] for entry in got] if type(got) is _PLAIN_ENTRIES
                    else [format_id(sid) for sid in sids])
            last_idb = idbs[-1]
            effects.append(new_deliveries_xclaim_effect(self.key, group.name, consumer.name, now,
                                                        idbs))
            group.add_new_pending(sids, consumer, now)
            consumer.active_time = now
            self.touched = True
        effects.append(xgroup_setid_effect(self.key, group.name, group.last_id,
                                           group.entries_read, last_idb))

_NEW_ENTRY_CLAIM_TAIL: Final = (0, 0)  # CLAIM's idle time and delivery count before, for a new entry


def _oldest_claimable(s: Stream, group: ConsumerGroup, now: int, min_idle: int) -> bool:
    times = group.pel_by_time.times  # (a heap: its first is the oldest delivery time)
    if not times or (times[0] and now - times[0] < min_idle):
        # Nothing pending, or even the oldest delivery time is too recent: every pending
        # entry was delivered since. (An entry XNACK released, claimable at once, is at time
        # 0, which keeps the walk below.)
        return False
    order = group.pel_by_time.iter_oldest(group.pel)
    try:
        for t, sid in order:
            if sid in s:
                if now - t >= min_idle:
                    return True
                row = group.pel.entry(sid)  # (delivery time, count, owner): pending, as walked
                return row is not None and row[2] == NO_OWNER
        return False
    finally:
        order.close()


@command("xreadgroup", -7, "write blocking",
         acl="stream", keys="RO ACCESS STREAMS@4 r-1,1,2", key_finder=xread_keys,
         logs=("SK.XCONSUMER", "XCLAIM", "XGROUP SETID"),
         summary="Returns new or "
         "historical messages from a stream for a consumer in a group. Blocks until a message "
         "is available otherwise.",
         syntax="<group-block: GROUP group consumer> [COUNT count:integer] "
                "[MAXCOUNT maxcount:integer] [MAXSIZE maxsize:integer] "
                "[BLOCK milliseconds:integer] [CLAIM min-idle-time:integer] [NOACK] "
                "<STREAMS key... id...>")
def xreadgroup(ctx: Ctx, argv: Argv) -> object:
    return _xreadgroup(ctx, argv, parse_read_args(argv, ctx.now, True))


def _xreadgroup(ctx: Ctx, argv: Argv, a: ReadArgs) -> object:
    ids = _resolve_ids(ctx, argv, a)
    gname, cname = a.group, a.consumer
    claim = a.claim
    served = []
    caps = Caps(a) if a.maxsize else None
    left = a.maxcount  # MAXCOUNT alone is plain arithmetic: it costs what COUNT costs
    count = a.count
    for k, gt in enumerate(ids):
        # Once a cap is used up, later streams are neither served nor touched.
        if caps is not None:
            if caps.exhausted():
                break
            count = caps.stream_count(a.count)
        elif left:
            count = left if not a.count or left < a.count else a.count
        elif a.maxcount:
            break
        key = argv[a.streams_at + k]
        s: Stream = ctx.db[key]
        read_hit(ctx)  # Redis looks each key up again to serve it
        group = s.groups[gname]  # type: ignore[index]
        consumer = group.consumers.get(cname)
        before = None if consumer is None else (consumer.seen_time, consumer.active_time)
        if consumer is None:
            consumer = group.create_consumer(cname, ctx.now)
            ctx.notify(STREAM, b"xgroup-createconsumer", key)
        consumer.seen_time = ctx.now
        d = Delivery(ctx, key, s, group, consumer, caps)
        if gt != _GT_NEW:
            claim = -1  # Redis drops CLAIM for this and every later stream on a history read
            d.history(gt + 1, count)
            served.append((key, d.entries))
        else:
            has_new = bool(s.length) and s.last_entry_id() > group.last_id
            claimable = claim >= 0 and _oldest_claimable(s, group, ctx.now, claim)
            if claimable:
                d.claim_idle(claim, count)
            if has_new and not (count and len(d.entries) >= count):
                d.new_entries(count, a.noack, claim >= 0)
            if has_new or claimable:
                served.append((key, d.entries))
        if caps is not None:
            caps.served(len(d.entries))
        elif left:
            left -= len(d.entries)
        after = (consumer.seen_time, consumer.active_time)
        if d.touched or after != before:
            ctx.effects.append(sk_xconsumer_effect(key, group.name, consumer.name, after[0],
                                                   after[1]))
    if served:
        return RespMap(served, as_pairs=True)
    return _block_or_nil(ctx, argv, a, ids)
