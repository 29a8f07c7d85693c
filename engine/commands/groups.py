"""Consumer-group commands: XGROUP, XACK, XACKDEL, XNACK, XPENDING, XCLAIM, XAUTOCLAIM,
SK.XCONSUMER.

Owns these commands' parsing, replies and effects. Claims replay as the 14-argument XCLAIM with
absolute TIME and exact RETRYCOUNT; PEL entries whose stream entry is gone are cleaned up with an
XACK (it names no consumer, so replay touches no consumer's times); `SK.XCONSUMER` pins the
claiming consumer's seen/active times. XNACK replays as one `XNACK key group FAIL IDS 1 id
RETRYCOUNT n FORCE` per released entry (the exact count, whatever the mode was). XREADGROUP lives in engine.cmd_read. Must not touch:
stream storage internals, other commands.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.commands.streams import delete_entries_with_policy, parse_ids_args
from streamkeep.engine.commands.trimming import ACKED, DELREF, drop_references, referenced
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import read_stream, stream_at
from streamkeep.engine.exec.notify import NEW, STREAM
from streamkeep.engine.exec.table import Argv, command, container, help_subcommand, subcommand
from streamkeep.engine.model.consumer_groups import (
    INVALID_ENTRIES_READ,
    Consumer,
    ConsumerGroup,
)
from streamkeep.engine.model.effects import (
    claim_xclaim_pieces,
    sk_xconsumer_effect,
    xack_effect,
    xack_ids_effect,
    xgroup_create_effect,
    xgroup_createconsumer_effect,
    xgroup_delconsumer_effect,
    xgroup_destroy_effect,
    xgroup_setid_effect,
    xnack_effect,
)
from streamkeep.engine.model.ids import (
    MAX_ID,
    format_id,
    parse_id,
    parse_range,
    parse_strict,
    plain_ids,
    try_parse_strict,
)
from streamkeep.engine.model.pel_store import NO_OWNER
from streamkeep.engine.model.stream import Stream, new_stream
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int, parse_int_range
from streamkeep.engine.wire.errors import (
    SYNTAX,
    ReplyError,
    no_such_group,
    nogroup,
    printable,
    subcommand_syntax,
)
from streamkeep.engine.wire.reply import NULL_ARRAY

_plain_ids: Final = plain_ids  # (bound Final: XACK's call without a globals lookup)

# XAUTOCLAIM's ztrymalloc(COUNT * 16) can never succeed above the 47-bit user address space.
_MAX_TRANSIENT_BYTES = 1 << 47

XGROUP = container("xgroup", "A container for consumer groups commands.")


class GroupTarget:
    """What XGROUP's shared preamble resolved: the stream (maybe None) and the group."""

    __slots__ = ("s", "group", "mkstream", "entries_read")

    def __init__(self) -> None:
        self.s: Stream | None = None
        self.group: ConsumerGroup | None = None
        self.mkstream = False
        self.entries_read = INVALID_ENTRIES_READ


def _xgroup_preamble(ctx: Ctx, argv: Argv, needs_group: bool) -> GroupTarget:
    """Redis parses CREATE/SETID options, then checks the key and (for most) the group."""
    t = GroupTarget()
    sub = argv[1].lower()
    i = 5
    while i < len(argv):
        if sub == b"create" and is_word(argv[i], b"mkstream"):
            t.mkstream = True
            i += 1
        elif sub in (b"create", b"setid") and is_word(argv[i], b"entriesread") and i + 1 < len(
            argv
        ):
            t.entries_read = parse_int(argv[i + 1])
            if t.entries_read < 0 and t.entries_read != INVALID_ENTRIES_READ:
                raise ReplyError("ERR value for ENTRIESREAD must be positive or -1")
            i += 2
        else:
            raise subcommand_syntax(argv)
    t.s = stream_at(ctx, argv[2])
    if not t.mkstream:
        if t.s is None:
            raise ReplyError(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you "
                "may want to use the MKSTREAM option to create an empty stream automatically."
            )
        t.group = t.s.groups.get(argv[3])
        if t.group is None and needs_group:
            raise no_such_group(argv[2], argv[3])
    return t


def _clamp_entries_read(s: Stream, entries_read: int) -> int:
    # Redis 8.4: a counter beyond what was ever added cannot be right.
    return min(entries_read, s.entries_added)


@subcommand(XGROUP, "create", -5, "write denyoom",
            acl="stream", keys="RW INSERT @2 r0,1,0", logs=("XGROUP CREATE",),
            effect="XGROUP CREATE key group id ENTRIESREAD entries-read MKSTREAM",
            summary="Creates a consumer group.",
            syntax="key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read:integer]")
def xgroup_create(ctx: Ctx, argv: Argv) -> str:
    t = _xgroup_preamble(ctx, argv, False)
    if len(argv) > 8:
        raise subcommand_syntax(argv)
    dollar = t.s.last_id if t.s is not None else 0
    sid = dollar if argv[4] == b"$" else parse_strict(argv[4])
    s = t.s
    if s is None:
        s = ctx.db[argv[2]] = new_stream(ctx.engine.residency)
        ctx.notify(NEW, b"new", argv[2])
    if argv[3] in s.groups:
        raise ReplyError("BUSYGROUP Consumer Group name already exists")
    entries_read = _clamp_entries_read(s, t.entries_read)
    s.groups[argv[3]] = ConsumerGroup(argv[3], sid, entries_read)
    ctx.emit(xgroup_create_effect(argv[2], argv[3], sid, entries_read))
    ctx.notify(STREAM, b"xgroup-create", argv[2])
    return "OK"


@subcommand(XGROUP, "setid", -5, "write",
            acl="stream", keys="RW UPDATE @2 r0,1,0", logs=("XGROUP SETID",),
            effect="XGROUP SETID key group id ENTRIESREAD entries-read",
            summary="Sets the last-delivered ID of a consumer "
            "group.",
            syntax="key group <id | $> [ENTRIESREAD entries-read:integer]")
def xgroup_setid(ctx: Ctx, argv: Argv) -> str:
    t = _xgroup_preamble(ctx, argv, True)
    if len(argv) not in (5, 7):
        raise subcommand_syntax(argv)
    s, group = t.s, t.group
    assert s is not None and group is not None
    sid = s.last_id if argv[4] == b"$" else parse_id(argv[4]).value
    entries_read = _clamp_entries_read(s, t.entries_read)
    if (group.last_id, group.entries_read) != (sid, entries_read):
        group.last_id, group.entries_read = sid, entries_read
        ctx.emit(xgroup_setid_effect(argv[2], argv[3], sid, entries_read))
    ctx.notify(STREAM, b"xgroup-setid", argv[2])
    return "OK"


@subcommand(XGROUP, "destroy", 4, "write",
            acl="stream", keys="RW DELETE @2 r0,1,0", logs=("XGROUP DESTROY",),
            effect="XGROUP DESTROY key group",
            summary="Destroys a consumer group.", syntax="key group")
def xgroup_destroy(ctx: Ctx, argv: Argv) -> int:
    t = _xgroup_preamble(ctx, argv, False)
    if t.group is None:
        return 0
    del t.s.groups[argv[3]]  # type: ignore[union-attr]
    ctx.emit(xgroup_destroy_effect(argv[2], argv[3]))
    ctx.signal(argv[2])  # blocked XREADGROUPs re-run and get NOGROUP
    ctx.notify(STREAM, b"xgroup-destroy", argv[2])
    return 1


@subcommand(XGROUP, "createconsumer", 5, "write denyoom", since="6.2.0",
            acl="stream", keys="RW INSERT @2 r0,1,0", logs=("XGROUP CREATECONSUMER",),
            effect="XGROUP CREATECONSUMER key group consumer",
            summary="Creates a consumer in a "
            "consumer group.",
            syntax="key group consumer")
def xgroup_createconsumer(ctx: Ctx, argv: Argv) -> int:
    group = _xgroup_preamble(ctx, argv, True).group
    assert group is not None
    if argv[4] in group.consumers:
        return 0
    group.create_consumer(argv[4], ctx.now)
    ctx.emit(xgroup_createconsumer_effect(argv[2], argv[3], argv[4]))
    ctx.notify(STREAM, b"xgroup-createconsumer", argv[2])
    return 1


@subcommand(XGROUP, "delconsumer", 5, "write",
            acl="stream", keys="RW DELETE @2 r0,1,0", logs=("XGROUP DELCONSUMER",),
            effect="XGROUP DELCONSUMER key group consumer",
            summary="Deletes a consumer from a consumer "
            "group.",
            syntax="key group consumer")
def xgroup_delconsumer(ctx: Ctx, argv: Argv) -> int:
    group = _xgroup_preamble(ctx, argv, True).group
    assert group is not None
    consumer = group.consumers.get(argv[4])
    if consumer is None:
        return 0
    pending = group.delete_consumer(consumer)
    ctx.emit(xgroup_delconsumer_effect(argv[2], argv[3], argv[4]))
    ctx.notify(STREAM, b"xgroup-delconsumer", argv[2])
    return pending


XGROUP_HELP = [
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
]


help_subcommand(XGROUP, XGROUP_HELP, acl="stream")


# --- shared lookups ------------------------------------------------------------------------------


def _group_or_none(ctx: Ctx, key: bytes, gname: bytes) -> tuple[Stream | None, ConsumerGroup | None]:
    """XACK's, XPENDING's, XCLAIM's ... lookup: a read's (a missing key notifies `keymiss`)."""
    s = read_stream(ctx, key)
    return s, (s.groups.get(gname) if s is not None else None)


def _consumer(ctx: Ctx, key: bytes, group: ConsumerGroup, name: bytes
              ) -> tuple[Consumer, tuple | None]:
    """Look up or create a consumer (notified as `xgroup-createconsumer`, as Redis's XCLAIM
    and XAUTOCLAIM do); also returns its (seen, active) before, None if new."""
    consumer = group.consumers.get(name)
    if consumer is None:
        consumer = group.create_consumer(name, ctx.now)
        ctx.notify(STREAM, b"xgroup-createconsumer", key)
        return consumer, None
    return consumer, (consumer.seen_time, consumer.active_time)


def _pin_consumer(ctx: Ctx, key: bytes, gname: bytes, consumer: Consumer, before: tuple | None,
                  touched: bool) -> None:
    after = (consumer.seen_time, consumer.active_time)
    if touched or after != before:
        ctx.emit(sk_xconsumer_effect(key, gname, consumer.name, *after))


# --- XACK / XACKDEL ------------------------------------------------------------------------------


@command("xack", -4, "write fast",
         acl="stream", keys="RW UPDATE", logs=("XACK",),
         effect="XACK key group id [id ...]",
         summary="Returns the number of messages that were "
         "successfully acknowledged by the consumer group member of a stream.",
         syntax="key group id...")
def xack(ctx: Ctx, argv: Argv) -> int:
    _s, group = _group_or_none(ctx, argv[1], argv[2])
    if group is None:
        return 0
    parsed = _plain_ids(argv, 3)
    if parsed is not None and parsed[2]:
        return _xack_tidy(ctx, argv, group, parsed[0], parsed[1])
    sids = [parse_strict(x) for x in argv[3:]]
    acked = group.ack_many(sids)
    if acked and not ctx.replaying:
        ctx.emit(xack_effect(argv[1], argv[2], acked))
    return len(acked)


def _xack_tidy(ctx: Ctx, argv: Argv, group: ConsumerGroup, ms: list[int],
               seq: list[int]) -> int:
    """XACK of IDs written as replies write them, strictly ascending (a read's IDs): the tables
    walked once (`ack_sorted`), and the arguments themselves are the effect's IDs."""
    owners = group.ack_sorted(ms, seq)
    missing = owners.count(None)
    if missing == len(owners):
        return 0
    if not ctx.replaying:
        ids = argv[3:] if not missing else [
            idb for idb, owner in zip(argv[3:], owners, strict=True) if owner is not None]
        ctx.emit(xack_ids_effect(argv[1], argv[2], ids))
    return len(owners) - missing


@command("xackdel", -6, "write fast", since="8.2.0",
         acl="stream", keys="RW UPDATE DELETE", logs=("XACK", "XDEL"),
         summary="Acknowledges and deletes one or multiple messages "
         "for a stream consumer group.",
         syntax="key group [condition: KEEPREF | DELREF | ACKED] <IDS numids:integer id...>")
def xackdel(ctx: Ctx, argv: Argv) -> list[int]:
    args = parse_ids_args(argv, 3)
    s, group = _group_or_none(ctx, argv[1], argv[2])
    if s is None or group is None:
        return [-1] * len(args.ids)
    sids = [parse_strict(x) for x in args.ids]
    key, policy = argv[1], args.policy
    # This command's effects start here (a transaction's earlier commands' come before).
    mark = len(ctx.effects)
    codes: list[int] = []
    acked: list[int] = []
    to_delete: list[int] = []
    for sid in sids:
        if not group.ack(sid):
            codes.append(-1)
            continue
        acked.append(sid)
        if policy == ACKED and referenced(s, sid):
            codes.append(2)
            continue
        if policy == DELREF:
            for gname, gone in drop_references(s, [sid]).items():
                ctx.emit(xack_effect(key, gname, gone))
        to_delete.append(sid)
        codes.append(1)
    if acked:
        ctx.effects.insert(mark, xack_effect(key, argv[2], acked))
    if to_delete:
        delete_entries_with_policy(ctx, key, s, to_delete, b"KEEPREF")
    return codes


# --- XNACK --------------------------------------------------------------------------------------

_XNACK_MODES = (b"silent", b"fail", b"fatal")


class NackArgs:
    """XNACK's parsed arguments: mode, IDs, RETRYCOUNT (-1 when not given), FORCE."""

    __slots__ = ("mode", "sids", "retrycount", "force")

    def __init__(self, mode: bytes, sids: list[int], retrycount: int, force: bool) -> None:
        self.mode = mode
        self.sids = sids
        self.retrycount = retrycount
        self.force = force


def parse_xnack_args(argv: Argv) -> NackArgs:
    """`key group <SILENT | FAIL | FATAL> IDS numids id... [RETRYCOUNT count] [FORCE]`; the
    IDS block parses as XACKDEL's (same errors), the IDs are checked before the key."""
    mode = argv[3].lower()
    if mode not in _XNACK_MODES or not is_word(argv[4], b"ids"):
        raise ReplyError(SYNTAX)
    numids = parse_int_range(argv[5], 1, LLONG_MAX, "Number of IDs must be a positive integer")
    if numids > len(argv) - 6:
        raise ReplyError("ERR The `numids` parameter must match the number of arguments")
    sids = [parse_strict(x) for x in argv[6:6 + numids]]
    retrycount, force = -1, False
    i = 6 + numids
    while i < len(argv):
        if is_word(argv[i], b"retrycount") and i + 1 < len(argv):
            retrycount = parse_int_range(argv[i + 1], 0, LLONG_MAX,
                                         "Invalid RETRYCOUNT option argument for XNACK")
            i += 2
        elif is_word(argv[i], b"force"):
            force = True
            i += 1
        else:
            raise ReplyError(SYNTAX)
    return NackArgs(mode, sids, retrycount, force)


def nacked_count(mode: bytes, before: int | None, retrycount: int) -> int:
    """Redis 8.8's delivery counter after XNACK: RETRYCOUNT when given, else SILENT undoes the
    delivery (never below 0), FAIL keeps it, FATAL sets LLONG_MAX; an entry FORCE adds to the
    PEL (`before` None) starts at 0 unless FATAL."""
    if retrycount >= 0:
        return retrycount
    if mode == b"fatal":
        return LLONG_MAX
    if before is None:
        return 0
    return max(before - 1, 0) if mode == b"silent" else before


@command("xnack", -7, "write fast", since="8.8.0",
         acl="stream", keys="RW UPDATE", logs=("XNACK",),
         effect="XNACK key group FAIL IDS 1 id RETRYCOUNT count FORCE",
         summary="Releases pending messages back to the group's PEL "
         "without acknowledging them, making them available for re-delivery.",
         syntax="key group <mode: SILENT | FAIL | FATAL> <IDS numids:integer id...> "
                "[RETRYCOUNT count:integer] [FORCE]")
def xnack(ctx: Ctx, argv: Argv) -> int:
    """Unowned, delivery time 0, counter by mode: immediately claimable by XCLAIM, XAUTOCLAIM
    and XREADGROUP ... CLAIM (never re-delivered by a plain `>`). Returns how many were
    released; IDs not pending are skipped unless FORCE finds them in the stream."""
    a = parse_xnack_args(argv)
    key, gname = argv[1], argv[2]
    s, group = _group_or_none(ctx, key, gname)
    if s is None or group is None:
        raise nogroup(key, gname)
    released = 0
    for sid in a.sids:
        nack = group.pel.get(sid)
        if nack is None and not (a.force and sid in s):
            continue
        count = nacked_count(a.mode, None if nack is None else nack.delivery_count,
                             a.retrycount)
        group.release(sid, count)
        released += 1
        if not ctx.replaying:
            ctx.emit(xnack_effect(key, gname, sid, count))
    if released and not ctx.replaying:
        ctx.signal(key)  # a blocked XREADGROUP ... CLAIM can take them now, not at its timer
    return released


# --- XPENDING ------------------------------------------------------------------------------------


@command("xpending", -3, "readonly",
         acl="stream", keys="RO ACCESS",
         summary="Returns the information and entries from a "
         "stream consumer group's pending entries list.",
         syntax="key group [filters: [IDLE min-idle-time:integer] start end count:integer "
                "[consumer]]")
def xpending(ctx: Ctx, argv: Argv) -> list:
    argc = len(argv)
    if argc != 3 and (argc < 6 or argc > 9):
        raise ReplyError(SYNTAX)
    min_idle = 0
    consumer_name = None
    if argc >= 6:
        at = 3
        if is_word(argv[3], b"idle"):
            min_idle = parse_int(argv[4])
            if argc < 8:
                raise ReplyError(SYNTAX)
            at += 2
        count = max(parse_int(argv[at + 2]), 0)
        start, end = parse_range(argv[at], argv[at + 1])
        if at + 3 < argc:
            consumer_name = argv[at + 3]
    s, group = _group_or_none(ctx, argv[1], argv[2])
    if group is None:
        raise nogroup(argv[1], argv[2])
    if argc == 3:
        return _pending_summary(group)
    if consumer_name is not None:
        consumer = group.consumers.get(consumer_name)
        if consumer is None:
            return []
        rows = group.pel.owned_rows(consumer.pel, start, end)
    else:
        rows = group.pel.irange_rows(start, end)
    out = []
    now, owners = ctx.now, group.owners
    for sid, delivered, times, owner in rows:
        if not count:
            break
        if min_idle and now - delivered < min_idle and owner != NO_OWNER:
            continue  # (an XNACK-released entry counts as idle enough for any IDLE)
        count -= 1
        if owner == NO_OWNER:  # XNACK released it: no consumer, idle -1 (Redis 8.8)
            out.append([format_id(sid), b"", -1, times])
        else:
            out.append([format_id(sid), owners[owner].name,  # type: ignore[union-attr]
                        max(now - delivered, 0), times])
    return out


def _pending_summary(group: ConsumerGroup) -> list:
    if not group.pel:
        return [0, None, None, NULL_ARRAY]
    per_consumer = [
        [name, b"%d" % len(group.consumers[name].pel)]
        for name in sorted(group.consumers)
        if len(group.consumers[name].pel)
    ]
    return [len(group.pel), format_id(group.pel_index.first()),  # type: ignore[arg-type]
            format_id(group.pel_index.last()), per_consumer]  # type: ignore[arg-type]


# --- XCLAIM / XAUTOCLAIM -------------------------------------------------------------------------


class ClaimOptions:
    __slots__ = ("delivery_time", "retrycount", "force", "justid", "last_id", "sid")

    def __init__(self) -> None:
        self.delivery_time = -1
        self.retrycount = -1
        self.force = False
        self.justid = False
        self.last_id = 0
        self.sid = 0  # the one ID of a propagated claim (_propagated_claim)


def _canonical_uint(arg: bytes) -> bool:
    """Digits without a leading zero that fit in 63 bits: int() reads them as Redis does."""
    return arg.isdigit() and len(arg) < 19 and (arg[0] != 48 or len(arg) == 1)


def _propagated_claim(argv: Argv, now: int) -> ClaimOptions | None:
    """`XCLAIM key group consumer 0 ms-seq TIME t RETRYCOUNT n FORCE JUSTID LASTID ms-seq`, the
    effect every delivery and claim logs (engine.effects.xclaim_effect), read in one step with
    the same result as the general parse; None for anything else, which the general parse
    takes (errors included)."""
    if not (len(argv) == 14 and argv[4] == b"0" and argv[6] == b"TIME"
            and argv[8] == b"RETRYCOUNT" and argv[10] == b"FORCE" and argv[11] == b"JUSTID"
            and argv[12] == b"LASTID"):
        return None
    ms, dash, seq = argv[5].partition(b"-")
    t, n = argv[7], argv[9]
    if not (dash and ms.isdigit() and seq.isdigit() and len(ms) < 20 and len(seq) < 20
            and _canonical_uint(t) and _canonical_uint(n)):
        return None
    o = ClaimOptions()
    o.sid = sid = (int(ms) << 64) | int(seq)
    o.force = o.justid = True
    delivery_time = int(t)
    o.delivery_time = now if delivery_time > now else delivery_time
    o.retrycount = int(n)
    o.last_id = sid if argv[13] == argv[5] else parse_strict(argv[13])
    return o


_PROPAGATED_SHAPE = (b"TIME", b"RETRYCOUNT", b"FORCE", b"JUSTID")


def _parse_claim_options(argv: Argv, j: int, now: int) -> ClaimOptions:
    o = ClaimOptions()
    rest = len(argv) - j
    if (rest in (6, 8) and (argv[j], argv[j + 2], argv[j + 4], argv[j + 5]) == _PROPAGATED_SHAPE
            and (rest == 6 or argv[j + 6] == b"LASTID")):
        # `TIME t RETRYCOUNT n FORCE JUSTID [LASTID id]`, the shape of every claim effect that
        # replay applies: read directly, with the same result as the loop below.
        o.force = o.justid = True
        t, n = argv[j + 1], argv[j + 3]
        o.delivery_time = (int(t) if t.isdigit() and len(t) < 19 and (t[0] != 48 or len(t) == 1)
                           else parse_int(t, "Invalid TIME option argument for XCLAIM"))
        o.retrycount = (int(n) if n.isdigit() and len(n) < 19 and (n[0] != 48 or len(n) == 1)
                        else parse_int(n, "Invalid RETRYCOUNT option argument for XCLAIM"))
        if rest == 8:
            o.last_id = parse_strict(argv[j + 7])
        j = len(argv)
    while j < len(argv):
        more = len(argv) - 1 - j
        opt = argv[j].lower()
        if opt == b"force":
            o.force = True
        elif opt == b"justid":
            o.justid = True
        elif opt == b"idle" and more:
            j += 1
            o.delivery_time = now - parse_int(argv[j], "Invalid IDLE option argument for XCLAIM")
        elif opt == b"time" and more:
            j += 1
            o.delivery_time = parse_int(argv[j], "Invalid TIME option argument for XCLAIM")
        elif opt == b"retrycount" and more:
            j += 1
            o.retrycount = parse_int(argv[j], "Invalid RETRYCOUNT option argument for XCLAIM")
        elif opt == b"lastid" and more:
            j += 1
            o.last_id = parse_strict(argv[j])
        else:
            raise ReplyError(f"ERR Unrecognized XCLAIM option '{printable(argv[j])}'")
        j += 1
    if o.delivery_time != -1:
        # A bogus time (negative, or in the future) means now, as in Redis.
        if o.delivery_time < 0 or o.delivery_time > now:
            o.delivery_time = now
    else:
        o.delivery_time = now
    return o


@command("xclaim", -6, "write fast",
         acl="stream", keys="RW UPDATE", logs=("SK.XCONSUMER", "XACK", "XCLAIM", "XGROUP SETID"),
         effect="XCLAIM key group consumer 0 id [id ...] TIME ms RETRYCOUNT count FORCE JUSTID "
                "[LASTID last-id]",
         summary="Changes, or acquires, ownership of a message in a "
         "consumer group, as if the message was delivered a consumer group member.",
         syntax="key group consumer min-idle-time id... [IDLE ms:integer] "
                "[TIME unix-time-milliseconds:unix-time] [RETRYCOUNT count:integer] [FORCE] "
                "[JUSTID] [LASTID lastid]")
def xclaim(ctx: Ctx, argv: Argv) -> list:
    key, gname = argv[1], argv[2]
    s, group = _group_or_none(ctx, key, gname)
    if s is None or group is None:
        raise nogroup(key, gname)
    now = ctx.now
    o = _propagated_claim(argv, now)
    if o is not None:  # the one-ID claim effect every delivery logs: replay's hot path
        min_idle = 0
        sids = [o.sid]
    else:
        idle_arg = argv[4]
        min_idle = 0 if idle_arg == b"0" else max(
            parse_int(idle_arg, "Invalid min-idle-time argument for XCLAIM"), 0)
        j = 5
        sids = []
        while j < len(argv) and (sid := try_parse_strict(argv[j])) is not None:
            sids.append(sid)
            j += 1
        o = _parse_claim_options(argv, j, now)
    moved = o.last_id > group.last_id
    if moved:
        group.last_id = o.last_id
    consumer, before = _consumer(ctx, key, group, argv[3])
    consumer.seen_time = now
    reply: list = []
    touched = False
    # Distinct IDs are independent claims: those already pending are applied in one bulk
    # step at the end (a repeated ID must see its own earlier claim, so one at a time then).
    batch = len(sids) > 1 and len(set(sids)) == len(sids)
    deferred: list[tuple[int, int]] = []
    pel = group.pel
    replaying = ctx.replaying
    if not replaying:
        head, middle, tail = claim_xclaim_pieces(key, gname, consumer.name, o.delivery_time,
                                                 group.last_id)
    for sid in sids:
        row = pel.entry(sid)  # (delivery time, delivery count, owner) or None
        fields = s.get(sid)
        if fields is None:
            if row is not None:
                group.ack(sid)
                ctx.emit(xack_effect(key, gname, (sid,)))
            continue
        if row is None and not o.force:
            continue
        if (row is not None and min_idle and now - row[0] < min_idle
                and row[2] != NO_OWNER):  # XNACK-released: claimable at once
            continue
        if o.retrycount >= 0:
            count = o.retrycount
        elif row is None:
            count = 1 if o.justid else 2  # a FORCE-created NACK starts at 1, then counts
        else:
            count = row[1] + (0 if o.justid else 1)
        if batch and row is not None:
            deferred.append((sid, count))
        else:
            group.add_pending(sid, consumer, o.delivery_time, count)
        consumer.active_time = now
        touched = True
        if replaying:  # replay needs neither the reply nor effects: skip building them
            continue
        idb = format_id(sid)
        reply.append(idb if o.justid else [idb, fields])
        ctx.effects.append([*head, idb, *middle, b"%d" % count, *tail])  # see the pieces
    if deferred:
        deferred.sort()
        group.claim_many([sid for sid, _ in deferred], [count for _, count in deferred],
                         consumer, o.delivery_time)
    if ctx.replaying:
        return reply
    if moved:
        ctx.emit(xgroup_setid_effect(key, gname, group.last_id, group.entries_read))
    _pin_consumer(ctx, key, gname, consumer, before, touched)
    return reply


@command("xautoclaim", -6, "write fast", since="6.2.0",
         acl="stream", keys="RW DELETE", logs=("SK.XCONSUMER", "XACK", "XCLAIM"),
         summary="Changes, or acquires, ownership of messages in "
         "a consumer group, as if the messages were delivered to as consumer group member.",
         syntax="key group consumer min-idle-time start [COUNT count:integer] [JUSTID]")
def xautoclaim(ctx: Ctx, argv: Argv) -> list:
    key, gname = argv[1], argv[2]
    min_idle = max(parse_int(argv[4], "Invalid min-idle-time argument for XAUTOCLAIM"), 0)
    start, _ = parse_range(argv[5], b"+")
    count, justid = 100, False
    j = 6
    while j < len(argv):
        more = len(argv) - 1 - j
        if is_word(argv[j], b"count") and more:
            count = parse_int_range(argv[j + 1], 1, LLONG_MAX // 16, "COUNT must be > 0")
            j += 2
        elif is_word(argv[j], b"justid"):
            justid = True
            j += 1
        else:
            raise ReplyError(SYNTAX)
    s, group = _group_or_none(ctx, key, gname)
    if s is None or group is None:
        raise nogroup(key, gname)
    if count * 16 > _MAX_TRANSIENT_BYTES:
        # Redis allocates COUNT stream IDs up front; beyond the address space that fails.
        raise ReplyError(
            "ERR Insufficient memory, failed allocating transient memory, COUNT too high."
        )
    now = ctx.now
    consumer, before = _consumer(ctx, key, group, argv[3])
    consumer.seen_time = now
    # One kernel walk picks the rows (reading the stream for each: a deleted entry counts as
    # picked whatever its idle time); the claims are then applied in bulk.
    sids, counts, got, cursor = group.pel.scan(start, min_idle, now, count, count * 10,
                                               0 if justid else 1, s.get)
    claimed: list = []
    deleted: list[bytes] = []
    live: list[int] = []
    live_counts: list[int] = []
    head, middle, tail = claim_xclaim_pieces(key, gname, consumer.name, now, group.last_id)
    effects = ctx.effects
    for sid, new_count, fields in zip(sids, counts, got, strict=True):
        idb = format_id(sid)
        if fields is None:
            group.ack(sid)
            effects.append(xack_effect(key, gname, (sid,)))
            deleted.append(idb)
            continue
        live.append(sid)
        live_counts.append(new_count)
        claimed.append(idb if justid else [idb, fields])
        effects.append([*head, idb, *middle, b"%d" % new_count, *tail])  # see the pieces
    group.claim_many(live, live_counts, consumer, now)
    if live:
        consumer.active_time = now
    _pin_consumer(ctx, key, gname, consumer, before, bool(live))
    next_cursor = format_id(cursor) if cursor is not None else b"0-0"
    return [next_cursor, claimed, deleted]


@command("sk.xconsumer", 6, "write", since="streamkeep", internal=True,
         acl="stream", keys="RW UPDATE",
         effect="SK.XCONSUMER key group consumer seen-time active-time",
         summary="Effect: set a consumer's seen and active times, "
         "creating it if needed.")
def sk_xconsumer(ctx: Ctx, argv: Argv) -> str:
    group = ctx.db[argv[1]].groups[argv[2]]
    consumer = group.consumers.get(argv[3]) or group.create_consumer(argv[3], ctx.now)
    consumer.seen_time = parse_int(argv[4])
    consumer.active_time = parse_int(argv[5])
    return "OK"


__all__ = ["MAX_ID"]
