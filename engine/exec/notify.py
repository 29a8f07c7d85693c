"""Keyspace notifications: the `notify-keyspace-events` classes and the messages Redis publishes
for the changes commands make (`__keyspace@<db>__:<key>` with the event, `__keyevent@<db>__:
<event>` with the key).

Owns the class letters (Redis's notify.c: parsing, refusing an unknown letter, the canonical
text CONFIG GET prints), the class of each kind of event and `keyspace_event`, which publishes
one event through the engine's Pub/Sub registry. Commands call `keyspace_event` right where
Redis calls notifyKeyspaceEvent, after the change; with notifications off (the default,
`engine.notify_flags == 0`) a hot command pays one attribute test before the call (`if
engine.notify_flags:`), the others the call's own first test. The messages are Pub/Sub
messages: delivered at once, never logged, persisted or sent to replicas as messages (a replica
publishes its own as it applies its primary's effects, as a Redis replica does for the commands
it is sent). Must not touch: the keyspace, the command table, sockets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState

# The classes, Redis's bits (server.h's NOTIFY_*); Final: the compiled build inlines them.
KEYSPACE: Final = 1 << 0  # K: __keyspace@<db>__ messages
KEYEVENT: Final = 1 << 1  # E: __keyevent@<db>__ messages
GENERIC: Final = 1 << 2  # g: DEL, EXPIRE, RENAME, ...
STRING: Final = 1 << 3  # $
LIST: Final = 1 << 4  # l (no such type here: accepted, never emitted)
SET: Final = 1 << 5  # s (likewise)
HASH: Final = 1 << 6  # h (likewise)
ZSET: Final = 1 << 7  # z (likewise)
EXPIRED: Final = 1 << 8  # x: a key deleted because its TTL passed
EVICTED: Final = 1 << 9  # e: a key evicted for maxmemory (streamkeep never evicts keys)
STREAM: Final = 1 << 10  # t
KEY_MISS: Final = 1 << 11  # m: a read command's lookup found no key (not in A)
MODULE: Final = 1 << 13  # d (no modules: accepted, never emitted)
NEW: Final = 1 << 14  # n: a key added (not in A)
OVERWRITTEN: Final = 1 << 15  # o: a key's value replaced whole (Redis 8.2; not in A)
TYPE_CHANGED: Final = 1 << 16  # c: a key's value replaced by one of another type (Redis 8.2; not in A)
ALL: Final = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE

_LETTERS = {"A": ALL, "g": GENERIC, "$": STRING, "l": LIST, "s": SET, "h": HASH, "z": ZSET,
            "x": EXPIRED, "e": EVICTED, "K": KEYSPACE, "E": KEYEVENT, "t": STREAM,
            "m": KEY_MISS, "d": MODULE, "n": NEW, "o": OVERWRITTEN, "c": TYPE_CHANGED}
# keyspaceEventsFlagsToString's order: the type classes (or A), then K, E and m.
_TYPE_ORDER = (("g", GENERIC), ("$", STRING), ("l", LIST), ("s", SET), ("h", HASH),
               ("z", ZSET), ("x", EXPIRED), ("e", EVICTED), ("t", STREAM), ("d", MODULE),
               ("n", NEW), ("o", OVERWRITTEN), ("c", TYPE_CHANGED))
BAD_CLASS = "Invalid event class character. Use 'Ag$lshzxeKEtmdnoc'."


def parse_classes(text: str) -> int | None:
    """keyspaceEventsStringToFlags: the classes a setting names; None for an unknown letter."""
    flags = 0
    for letter in text:
        bit = _LETTERS.get(letter)
        if bit is None:
            return None
        flags |= bit
    return flags


def classes_text(flags: int) -> str:
    """keyspaceEventsFlagsToString: what CONFIG GET prints. As in Redis, A stands for its
    classes and hides the letters outside it that sit in the same group (n, o, c)."""
    if flags & ALL == ALL:
        text = "A"
    else:
        text = "".join(letter for letter, bit in _TYPE_ORDER if flags & bit)
    if flags & KEYSPACE:
        text += "K"
    if flags & KEYEVENT:
        text += "E"
    if flags & KEY_MISS:
        text += "m"
    return text


def keyspace_event(engine: EngineState, cls: int, event: bytes, key: bytes, db: int) -> None:
    """notifyKeyspaceEvent: publish `event` on `key` of database `db` if its class is on: the
    keyspace message first, then the keyevent one, as Redis sends them."""
    flags = engine.notify_flags
    if not flags & cls:
        return
    publish = engine.pubsub.publish
    if flags & KEYSPACE:
        publish(b"__keyspace@%d__:%b" % (db, key), event)
    if flags & KEYEVENT:
        publish(b"__keyevent@%d__:%b" % (db, event), key)


__all__ = ["ALL", "BAD_CLASS", "EVICTED", "EXPIRED", "GENERIC", "KEYEVENT", "KEYSPACE",
           "KEY_MISS", "NEW", "OVERWRITTEN", "STREAM", "STRING", "TYPE_CHANGED",
           "classes_text", "keyspace_event", "parse_classes"]
