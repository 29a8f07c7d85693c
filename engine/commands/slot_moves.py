"""A controller's atomic slot moves, as the nodes serve them: CLUSTER EXPORT on the source,
CLUSTER IMPORT on the target, CLUSTER TRIM on a node left with keys of slots it no longer
serves.

The controller (tools.controller.control) starts a move on both nodes (IMPORT START drops
whatever an earlier attempt left at the target), then relays batches: EXPORT NEXT answers
the source's next records and keys (engine.exec.slot_export decides what the target still
needs) as one msgpack blob that IMPORT APPLY applies at the target, each record logged there
as the target's own. The source serves the slot throughout. When nothing is left, EXPORT
FREEZE stops the slot's commands at the source (TRYAGAIN) and answers the rest; the
controller applies it, waits for the target's AOF and replicas (WAITAOF), commits the switch
in etcd, and hands both nodes the new topology. The source's copies are then trimmed. Must
not touch: what is queued (engine.exec.slot_export), routing (engine.exec.cluster), the
topology's file (engine.services.cluster_node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.commands.cluster import CLUSTER, topology_of
from streamkeep.engine.commands.expiry import pttl
from streamkeep.engine.commands.keyspace import del_, dump
from streamkeep.engine.exec.keys import effect_keys
from streamkeep.engine.exec.slot_export import COPY, SlotExport
from streamkeep.engine.exec.table import Argv, lookup, subcommand
from streamkeep.engine.model.keyslot import SLOTS, key_slot
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.engine.exec.context import Ctx

NO_EXPORT: Final = "ERR no move of a slot of this node has that session"
NO_IMPORT: Final = "ERR this node imports no slot in that session"
MAX_SESSION: Final = 128
TRIM_MAX: Final = 10_000  # keys CLUSTER TRIM deletes at most per call


def _slot(arg: bytes) -> int:
    slot = parse_int(arg, "Invalid slot")
    if not 0 <= slot < SLOTS:
        raise ReplyError("ERR Invalid slot")
    return slot


def _session(arg: bytes) -> bytes:
    if not arg or len(arg) > MAX_SESSION:
        raise ReplyError("ERR Invalid move session")
    return arg


def _managed(ctx: Ctx) -> Topology:
    topology = topology_of(ctx)
    if not topology.managed_by:
        raise ReplyError("ERR only a node a controller manages moves slots atomically")
    return topology


# --- the source --------------------------------------------------------------------------

@subcommand(CLUSTER, "export", -4, "admin stale", keys="", since="8.10.0",
            summary="A controller's atomic slot move, on its source: starts it, answers its "
                    "next records, freezes the slots for the switch, or cancels it.",
            syntax="<START target-id session slot [slot ...] | NEXT session count:integer "
                   "bytes:integer | FREEZE session | CANCEL session>")
def cluster_export(ctx: Ctx, argv: Argv) -> Any:
    topology = _managed(ctx)
    action = argv[2].upper()
    if action == b"START" and len(argv) >= 6:
        return _start_export(ctx, topology, argv[3].decode(), _session(argv[4]),
                             _slots(argv[5:]))
    if action == b"NEXT" and len(argv) == 6:
        count, budget = parse_int(argv[4]), parse_int(argv[5])
        export = _export(topology, argv[3])
        blob, done = _batch(ctx, topology, export, max(count, 0), max(budget, 0))
        return [blob, int(done), export.queued_bytes]
    if action == b"FREEZE" and len(argv) == 4:
        export = _export(topology, argv[3])
        export.frozen = True
        return _batch(ctx, topology, export, -1, -1)[0]
    if action == b"CANCEL" and len(argv) == 4:
        if topology.export is not None and topology.export.session == argv[3]:
            topology.export = None
        return "OK"
    raise ReplyError("ERR syntax error")


def _start_export(ctx: Ctx, topology: Topology, target: str, session: bytes,
                  slots: frozenset[int]) -> str:
    me = topology.myself
    for slot in slots:
        if topology.owners[slot] != me.id or me.migrating.get(slot) != target:
            raise ReplyError(f"ERR slot {slot} is not on the move from this node to {target}")
    topology.export = SlotExport(slots, target, session, _keys_of(ctx, topology, slots))
    topology.restart_frozen -= slots
    return "OK"


def _keys_of(ctx: Ctx, topology: Topology, slots: frozenset[int]) -> list[bytes]:
    keys: list[bytes] = []
    for slot in sorted(slots):
        keys.extend(topology.slot_keys.keys(ctx.engine.keyspaces, slot, 1 << 62))
    return keys


def _slots(args: Sequence[bytes]) -> frozenset[int]:
    return frozenset(_slot(arg) for arg in args)


def _export(topology: Topology, session: bytes) -> SlotExport:
    export = topology.export
    if export is None or export.session != session:
        raise ReplyError(NO_EXPORT)
    if export.failed:
        topology.export = None
        raise ReplyError(export.failed)
    return export


def _batch(ctx: Ctx, topology: Topology, export: SlotExport, count: int,
           budget: int) -> tuple[bytes, bool]:
    """What the target needs next, as a blob for IMPORT APPLY: the queue first, then keys not
    sent yet (at most `count`), until `budget` bytes (-1: all of it, the switch's). Done: the
    queue is empty and every key of the slot was sent."""
    from msgpack import packb

    records: list[list[Any]] = []
    size = 0
    now = ctx.now
    while budget < 0 or size < budget:
        item = export.next_queued()
        if item is None:
            break
        if item[0] == COPY:
            records.append([now, _copy(ctx, export, item[1])])
        else:
            records.append([item[1], item[2]])
        size += _size(records[-1][1])
    done = False
    copies = 0
    while budget < 0 or (size < budget and copies < count):
        key = export.next_key(None)
        if key is None:
            key = export.next_key(_keys_of(ctx, topology, export.slots))
            if key is None:
                done = not export.queue
                break
        records.append([now, _copy(ctx, export, key)])
        size += _size(records[-1][1])
        copies += 1
    return (packb(records, use_bin_type=True) if records else b""), done


def _copy(ctx: Ctx, export: SlotExport, key: bytes) -> list[list[bytes]]:
    """`key` as it is now, as the effects that make it at the target (RESTORE's own: its
    serialized value, then its expiry), or a DEL when it is gone."""
    export.sent(key)
    payload = dump(ctx, (b"DUMP", key))
    if payload is None:
        return [[b"DEL", key]]
    made = [[b"RESTORE", key, b"0", payload, b"REPLACE"]]
    ttl = pttl(ctx, (b"PTTL", key))
    if ttl > 0:
        made.append([b"PEXPIREAT", key, b"%d" % (ctx.now + ttl)])
    return made


def _size(effects: list[list[bytes]]) -> int:
    return sum(len(arg) for effect in effects for arg in effect)


# --- the target --------------------------------------------------------------------------

@subcommand(CLUSTER, "import", -5, "admin write stale", keys="", since="8.10.0",
            summary="A controller's atomic slot move, on its target: starts it (dropping "
                    "what an earlier attempt left), or applies the source's next records.",
            syntax="<START source-id session slot [slot ...] | APPLY session records>")
def cluster_import(ctx: Ctx, argv: Argv) -> int | str:
    topology = _managed(ctx)
    action = argv[2].upper()
    if action == b"START" and len(argv) >= 6:
        me = topology.myself
        source, session, slots = argv[3].decode(), _session(argv[4]), _slots(argv[5:])
        for slot in slots:
            if me.importing.get(slot) != source:
                raise ReplyError(f"ERR slot {slot} is not on the move to this node from "
                                 f"{source}")
        keys = _keys_of(ctx, topology, slots)
        if keys:
            del_(ctx, (b"DEL", *keys))
        for slot in slots:
            topology.imports[slot] = session
        return "OK"
    if action == b"APPLY" and len(argv) == 5:
        session = argv[3]
        slots = frozenset(slot for slot, held in topology.imports.items()
                          if held == session and slot in topology.myself.importing)
        if not slots:
            raise ReplyError(NO_IMPORT)
        records = _records(argv[4], slots) if argv[4] else []
        if records:
            ctx.session.write_lsn = max(ctx.session.write_lsn,
                                        ctx.engine.import_records(records))
        return len(records)
    raise ReplyError("ERR syntax error")


def _records(blob: bytes, slots: frozenset[int]) -> list[tuple[int, list[Any]]]:
    """IMPORT APPLY's records, checked whole before any runs: each a time and effects the
    engine knows, every key they name in `slots` of database 0."""
    from msgpack import unpackb

    bad = ReplyError("ERR Invalid records for the slot's import")
    try:
        decoded = unpackb(blob, use_list=True, raw=True)
    except ValueError:
        raise bad from None
    if type(decoded) is not list:
        raise bad
    out = []
    for record in decoded:
        if (type(record) is not list or len(record) != 2 or type(record[0]) is not int
                or type(record[1]) is not list):
            raise bad
        effects = record[1]
        for effect in effects:
            if (type(effect) is not list or not effect
                    or any(type(arg) is not bytes for arg in effect)):
                raise bad
            lookup(effect, allow_internal=True)
            keys = effect_keys(0, (effect,))
            if not keys:  # (what a move sends names a key of the slot: no SELECT)
                raise bad
            for key_db, key in keys:
                if key_db != 0 or key is None or key_slot(key) not in slots:
                    raise bad
        out.append((record[0], effects))
    return out


# --- after a move --------------------------------------------------------------------------

@subcommand(CLUSTER, "trim", 3, "admin write", keys="", since="8.10.0",
            summary="Deletes keys of slots this primary neither serves nor imports (what a "
                    "slot moved away left); returns how many.",
            syntax="count:integer")
def cluster_trim(ctx: Ctx, argv: Argv) -> int:
    topology = topology_of(ctx)
    count = min(parse_int(argv[2]), TRIM_MAX)
    me = topology.myself
    if count <= 0 or me.primary is not None:
        return 0
    slot_keys, keyspaces = topology.slot_keys, ctx.engine.keyspaces
    slot_keys.fold(keyspaces)
    keys: list[bytes] = []
    for slot in list(slot_keys.by_slot):
        if topology.owners[slot] == me.id or slot in me.importing:
            continue
        keys.extend(slot_keys.keys(keyspaces, slot, count - len(keys)))
        if len(keys) >= count:
            break
    return del_(ctx, (b"DEL", *keys)) if keys else 0


__all__ = ["cluster_export", "cluster_import", "cluster_trim"]
