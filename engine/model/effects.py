"""Effects: the deterministic commands that reproduce a command's state change.

Owns the `Record` (one command execution's effects, its time and database: the atomic unit the
AOF logs and replicas apply) and the builders for effect argv shared by several commands. The
vocabulary is Redis's own (XADD with explicit IDs, exact trims, the 14-argument XCLAIM, XGROUP
SETID ... ENTRIESREAD) plus one streamkeep command, `SK.XCONSUMER key group consumer seen active`,
that pins a consumer's seen/active times, which Redis lets drift. Must not touch: engine state.
"""

from __future__ import annotations

from typing import NamedTuple

from streamkeep.engine.model.ids import format_id

Effect = list[bytes]


class Record(NamedTuple):
    """Everything one command execution changed: applied all together or not at all.

    The fields are in the AOF payload's order, so a decoded payload tuple `(lsn, time_ms, db,
    effects)` is a record as it is: replay applies those tuples without building objects."""

    lsn: int  # assigned by the log; 0 while in memory only
    time_ms: int
    db: int
    effects: list[Effect] | tuple  # each effect an argv (list or tuple of bytes)


def xclaim_effect(
    key: bytes, group: bytes, consumer: bytes, sid: int, delivery_time: int,
    delivery_count: int, last_id: int | None,
) -> Effect:
    """The XCLAIM Redis propagates for a delivery or a claim (absolute TIME, exact count)."""
    effect = [
        b"XCLAIM", key, group, consumer, b"0", format_id(sid), b"TIME", b"%d" % delivery_time,
        b"RETRYCOUNT", b"%d" % delivery_count, b"FORCE", b"JUSTID",
    ]
    if last_id is not None:
        effect += [b"LASTID", format_id(last_id)]
    return effect


def setid_effect(key: bytes, group: bytes, last_id: int, entries_read: int) -> Effect:
    return [b"XGROUP", b"SETID", key, group, format_id(last_id), b"ENTRIESREAD",
            b"%d" % entries_read]


def consumer_effect(key: bytes, group: bytes, name: bytes, seen: int, active: int) -> Effect:
    return [b"SK.XCONSUMER", key, group, name, b"%d" % seen, b"%d" % active]
