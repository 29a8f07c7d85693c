"""The state digest: one hash over the whole logical state, for replay and replica checks.

Owns the canonical serialisation of state that must survive replay exactly: every stream's live
entries (fields in order), its metadata (length, last ID, first ID, max deleted ID, entries added),
groups (last ID, entries read), PEL entries (owner, delivery time, delivery count) and consumers
(seen and active times), idempotent producers' settings, maps (in recording order, recording
times included) and counters; string values; the other types' values; every key's TTL. Node boundaries are layout, not state, and are left out. Must not touch:
anything; it only reads.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import msgpack

if TYPE_CHECKING:
    from streamkeep.engine.model.consumer_groups import Nack
    from streamkeep.engine.model.stream import Stream


def _owner(nack: Nack) -> bytes | None:
    """The pending entry's consumer name; None (msgpack nil) for one XNACK released."""
    return None if nack.consumer is None else nack.consumer.name


def stream_state(s: Stream) -> list:
    entries = [[sid, fields] for sid, _idb, fields in s.iter_forward(0, (1 << 128) - 1)]
    groups = []
    for name in sorted(s.groups):
        g = s.groups[name]
        pel = [
            [sid, _owner(g.pel[sid]), g.pel[sid].delivery_time, g.pel[sid].delivery_count]
            for sid in g.pel_index
        ]
        consumers = [
            [c.name, c.seen_time, c.active_time, list(c.pel)]
            for c in sorted(g.consumers.values(), key=lambda c: c.name)
        ]
        groups.append([name, g.last_id, g.entries_read, pel, consumers])
    meta = [s.length, s.last_id, s.first_id, s.max_deleted_id, s.entries_added]
    if s.idmp is None:  # (a stream that never used IDMP hashes as before IDMP existed)
        return [meta, entries, groups]
    idmp = s.idmp
    producers = [[pid, [list(r) for r in recorded]] for pid, recorded in idmp.entries()]
    return [meta, entries, groups,
            [idmp.duration, idmp.maxsize, idmp.added, idmp.duplicates, producers]]


def _pack(state: list) -> bytes:
    # 128-bit IDs do not fit msgpack ints: serialise them as 16-byte big-endian strings.
    def default(obj: object) -> object:
        raise TypeError(obj)

    return msgpack.packb(_ids_to_bytes(state), default=default, use_bin_type=True)


def _ids_to_bytes(obj: object) -> object:
    if isinstance(obj, list):
        return [_ids_to_bytes(x) for x in obj]
    if isinstance(obj, int) and not -(1 << 63) <= obj < (1 << 64):
        return obj.to_bytes(16, "big")
    return obj


def state_digest(dbs: list[dict[bytes, Stream]], strings: list[dict[bytes, bytes]] | None = None,
                 expires: list[dict[bytes, int]] | None = None,
                 keyspaces: list[list[dict[bytes, Any]]] | None = None) -> str:
    """The hash of every database: its streams, then its strings, then the other types'
    values (`keyspaces`, the engine's, from slot 2 on: each value as its type's `to_bytes`
    writes it, engine.model.value_types); a key's TTL after its value (a state without
    strings, other types or TTLs hashes as before they existed)."""
    from streamkeep.engine.model.value_types import TYPES

    h = hashlib.sha256()
    others = list(zip(TYPES[2:], (keyspaces or [])[2:], strict=False))
    for index, db in enumerate(dbs):
        values = strings[index] if strings is not None else {}
        ttls = expires[index] if expires is not None else {}
        if not db and not values and not any(space[index] for _vt, space in others):
            continue
        h.update(b"db%d" % index)
        for key in sorted(db):
            h.update(b"key%d:" % len(key) + key)
            h.update(_pack(stream_state(db[key])))
            if key in ttls:
                h.update(b"ttl%d" % ttls[key])
        for key in sorted(values):
            h.update(b"string%d:" % len(key) + key)
            h.update(_pack([values[key], ttls.get(key)]))
        for vt, space in others:
            typed = space[index]
            for key in sorted(typed):
                h.update(b"%s%d:" % (vt.name.encode(), len(key)) + key)
                state = vt.digest or vt.to_bytes
                h.update(_pack([state(typed[key]) if state else b"", ttls.get(key)]))
    return h.hexdigest()
