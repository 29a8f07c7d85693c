"""XINFO: the stream introspection container (STREAM [FULL [COUNT n]], GROUPS, CONSUMERS, HELP).

Owns these subcommands' argument handling and their replies, byte-exact with Redis 8.x: map
replies as `RespMap` (flat in RESP2), groups and consumers in name order (Redis keeps them in a
radix tree), consumers with `active-time` / `inactive` (absent in 7.0), a stream's idempotent-producer fields
(8.6) after `recorded-first-entry-id`. XINFO is read-only: it
emits no effects and changes nothing. Must not touch: stream or group state (read only), the
lag arithmetic (engine.groups owns it), other commands' modules.
"""

from __future__ import annotations

from collections.abc import Iterable

from streamkeep.engine.commands.idmp import settings as idmp_settings
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import read_stream
from streamkeep.engine.exec.table import Argv, container, help_subcommand, subcommand
from streamkeep.engine.model.consumer_groups import (
    INVALID_ENTRIES_READ,
    Consumer,
    ConsumerGroup,
    group_lag,
)
from streamkeep.engine.model.ids import MAX_ID, format_id
from streamkeep.engine.model.stream import Stream, rax_node_count
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import NO_SUCH_KEY, ReplyError, no_such_group, subcommand_syntax
from streamkeep.engine.wire.reply import RespMap

DEFAULT_FULL_COUNT = 10

HELP_LINES = [
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
]

XINFO = container("xinfo", "A container for stream introspection commands.")


# --- helpers -----------------------------------------------------------------------------------


def _stream_or_error(ctx: Ctx, key: bytes) -> Stream:
    s = read_stream(ctx, key)
    if s is None:
        raise ReplyError(NO_SUCH_KEY)
    return s


def _entries_read(group: ConsumerGroup) -> int | None:
    return None if group.entries_read == INVALID_ENTRIES_READ else group.entries_read


def _sorted_groups(s: Stream) -> list[ConsumerGroup]:
    return [s.groups[name] for name in sorted(s.groups)]


def _sorted_consumers(group: ConsumerGroup) -> list[Consumer]:
    return [group.consumers[name] for name in sorted(group.consumers)]


def _limited(ids: Iterable[int], count: int) -> list[int]:
    """The first `count` IDs of an ordered ID collection (count 0: all)."""
    out: list[int] = []
    for sid in ids:
        if count and len(out) >= count:
            break
        out.append(sid)
    return out


# --- XINFO STREAM ------------------------------------------------------------------------------


def _parse_full_count(argv: Argv) -> int | None:
    """None for the plain form; else the FULL COUNT (default 10, negative means 10, 0 all)."""
    opts = argv[3:]
    if not opts:
        return None
    if len(opts) not in (1, 3) or not is_word(opts[0], b"full"):
        raise subcommand_syntax(argv)
    if len(opts) == 1:
        return DEFAULT_FULL_COUNT
    if not is_word(opts[1], b"count"):
        raise subcommand_syntax(argv)
    count = parse_int(opts[2])
    return DEFAULT_FULL_COUNT if count < 0 else count


def _idmp_fields(ctx: Ctx, s: Stream) -> list[tuple[bytes, object]]:
    """Redis 8.6's idempotent-producer fields (every stream has them: a stream that never used
    IDMP shows the configured defaults and zeros); tracked counts leave expired iids out."""
    duration, maxsize = idmp_settings(ctx, s)
    pids = iids = added = duplicates = 0
    if s.idmp is not None:
        pids, iids = s.idmp.live_counts(ctx.now)
        added, duplicates = s.idmp.added, s.idmp.duplicates
    return [(b"idmp-duration", duration), (b"idmp-maxsize", maxsize), (b"pids-tracked", pids),
            (b"iids-tracked", iids), (b"iids-added", added), (b"iids-duplicates", duplicates)]


def _stream_header(ctx: Ctx, s: Stream) -> list[tuple[bytes, object]]:
    return [
        (b"length", s.length),
        (b"radix-tree-keys", len(s.nodes)),
        (b"radix-tree-nodes", rax_node_count(s.masters)),
        (b"last-generated-id", format_id(s.last_id)),
        (b"max-deleted-entry-id", format_id(s.max_deleted_id)),
        (b"entries-added", s.entries_added),
        (b"recorded-first-entry-id", format_id(s.first_id)),
        *_idmp_fields(ctx, s),
    ]


def _edge_entry(s: Stream, last: bool) -> list | None:
    found = s.range(0, MAX_ID, 1, rev=last)
    return found[0] if found else None


def _stream_summary(ctx: Ctx, s: Stream) -> RespMap:
    items = _stream_header(ctx, s)
    items.append((b"groups", len(s.groups)))
    items.append((b"first-entry", _edge_entry(s, last=False)))
    items.append((b"last-entry", _edge_entry(s, last=True)))
    # streamkeep's own, once some of the stream is cold: what is left in the snapshot
    nodes, entries, nbytes = s.cold_counts() if ctx.engine.config["backlog-memory"] else (0, 0, 0)
    if nodes:
        items.append((b"resident-entries", s.length - entries))
        items.append((b"resident-bytes", s.resident_bytes()))
        items.append((b"cold-nodes", nodes))
        items.append((b"cold-entries", entries))
        items.append((b"cold-bytes", nbytes))
    return RespMap(items)


def _full_consumer(group: ConsumerGroup, consumer: Consumer, count: int) -> RespMap:
    pending = []
    for sid in _limited(consumer.pel, count):
        nack = group.pel[sid]
        pending.append([format_id(sid), nack.delivery_time, nack.delivery_count])
    return RespMap([
        (b"name", consumer.name),
        (b"seen-time", consumer.seen_time),
        (b"active-time", consumer.active_time),
        (b"pel-count", len(consumer.pel)),
        (b"pending", pending),
    ])


def _full_group(s: Stream, group: ConsumerGroup, count: int) -> RespMap:
    pending = []
    for sid in _limited(group.pel_index, count):
        nack = group.pel[sid]
        pending.append(
            [format_id(sid), b"" if nack.consumer is None else nack.consumer.name,
             nack.delivery_time, nack.delivery_count]
        )
    consumers = [_full_consumer(group, c, count) for c in _sorted_consumers(group)]
    return RespMap([
        (b"name", group.name),
        (b"last-delivered-id", format_id(group.last_id)),
        (b"entries-read", _entries_read(group)),
        (b"lag", group_lag(s, group)),
        (b"pel-count", len(group.pel)),
        (b"pending", pending),
        (b"consumers", consumers),
    ])


def _stream_full(ctx: Ctx, s: Stream, count: int) -> RespMap:
    items = _stream_header(ctx, s)
    items.append((b"entries", s.range(0, MAX_ID, count)))
    items.append((b"groups", [_full_group(s, g, count) for g in _sorted_groups(s)]))
    return RespMap(items)


@subcommand(XINFO, "stream", -3, "readonly",
            acl="stream", keys="RO ACCESS @2 r0,1,0",
            summary="Returns information about a stream.",
            syntax="key [FULL [COUNT count:integer]]")
def xinfo_stream(ctx: Ctx, argv: Argv) -> RespMap:
    s = _stream_or_error(ctx, argv[2])
    count = _parse_full_count(argv)
    return _stream_summary(ctx, s) if count is None else _stream_full(ctx, s, count)


# --- XINFO GROUPS ------------------------------------------------------------------------------


def _group_info(s: Stream, group: ConsumerGroup) -> RespMap:
    return RespMap([
        (b"name", group.name),
        (b"consumers", len(group.consumers)),
        (b"pending", len(group.pel)),
        (b"last-delivered-id", format_id(group.last_id)),
        (b"entries-read", _entries_read(group)),
        (b"lag", group_lag(s, group)),
    ])


@subcommand(XINFO, "groups", 3, "readonly",
            acl="stream", keys="RO ACCESS @2 r0,1,0",
            summary="Returns a list of the consumer groups of a stream.", syntax="key")
def xinfo_groups(ctx: Ctx, argv: Argv) -> list[RespMap]:
    s = _stream_or_error(ctx, argv[2])
    return [_group_info(s, g) for g in _sorted_groups(s)]


# --- XINFO CONSUMERS ---------------------------------------------------------------------------


def _consumer_info(consumer: Consumer, now: int) -> RespMap:
    idle = max(0, now - consumer.seen_time)
    inactive = -1 if consumer.active_time == -1 else now - consumer.active_time
    return RespMap([
        (b"name", consumer.name),
        (b"pending", len(consumer.pel)),
        (b"idle", idle),
        (b"inactive", inactive),
    ])


@subcommand(XINFO, "consumers", 4, "readonly",
            acl="stream", keys="RO ACCESS @2 r0,1,0",
            summary="Returns a list of the consumers in a consumer group.", syntax="key group")
def xinfo_consumers(ctx: Ctx, argv: Argv) -> list[RespMap]:
    key, name = argv[2], argv[3]
    s = _stream_or_error(ctx, key)
    group = s.groups.get(name)
    if group is None:
        raise no_such_group(key, name)
    return [_consumer_info(c, ctx.now) for c in _sorted_consumers(group)]


# --- XINFO HELP --------------------------------------------------------------------------------


help_subcommand(XINFO, HELP_LINES, acl="stream")
