"""The keyspace's keys: every command's lookups, lazy expiry's hook and WRONGTYPE (Redis's db.c).

Each database keeps one dict per value type (engine.model.value_types registers them):
`keyspaces[slot][i]` maps a key to a value of that type, as the keyspace keeps it (a type may
keep some values bare: `ValueType.open` gives the object its commands change, `ValueType.stored`
what goes back). Streams are slot 0, also named `dbs[i]`, and strings slot 1, also
`strings[i]`. `expires[i]` maps a key of any type to its absolute expiry time in engine-clock ms
(Redis's per-db `expires` dict). A key is in one type's dict at most; a key in `expires[i]` is in
one of them. Handlers reach the selected database's dicts as `ctx.db` (streams),
`ctx.strings`, `ctx.space(slot)` and `ctx.expires`.

Types. A command on a key of another type is refused with WRONGTYPE where Redis's lookup would
refuse it (`value_at` for a write's lookup, `read_value` for a read's, which also counts
keyspace hits and misses and notifies `keymiss`); SET, MSET, RENAME and COPY overwrite a key of
any type (`drop_other_types`). A lookup looks at the other types' dicts only when its key is
missing from its own type's, so the XADD path pays nothing for the other types.

Lazy expiry: before a client's command runs, the engine core calls `expire_named_keys` when the
database has any TTL: every argument naming an expired key deletes that key and logs `DEL key`
ahead of the command's own effects. A read-only replica never deletes: `hide_expired` takes the
expired keys an argument names out of the database for the command's run and `unhide` puts them
back (engine.commands.expiry says more of expiry: the active cycle, EXPIRE and TTL).

Owns the lookups (`lookup`, `key_type`, `value_at`, `read_value`, `stream_at`, `read_stream`),
the WRONGTYPE checks, keyspace hits and misses, `delete_key` and `removed_from` (an aggregate's
key deleted once emptied), the key listings (`all_keys`, `live_keys`, `key_count`), lazy expiry
(`already_expired`, `expire_named_keys`, `hide_expired`, `unhide`), and sub-key expiry's
per-database index (`SubexpiryIndex`: the keys whose values have sub-keys with TTLs, a hash's
fields; `placed` tells it of a value a command that knows no type put under a key). Must not
touch: any one type's values (a type is reached through its `ValueType`), replies, I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence, Sized
from itertools import chain
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.notify import EXPIRED, GENERIC, KEY_MISS
from streamkeep.engine.exec.table import lookup as command_of
from streamkeep.engine.model.effects import del_effect
from streamkeep.engine.model.value_types import STREAM, TYPES, ValueType
from streamkeep.engine.wire.errors import WRONGTYPE, ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.model.stream import Stream


def lookup(ctx: Ctx, key: bytes) -> tuple[ValueType, object] | None:
    """The key's type and value (expired or not: callers expired the keys they name), or None."""
    db = ctx.session.db
    for vt, space in zip(TYPES, ctx.engine.keyspaces, strict=True):
        value = space[db].get(key)
        if value is not None:
            return vt, value
    return None


def key_type(ctx: Ctx, key: bytes) -> str | None:
    """TYPE's word for a live key ("stream", "string", ...) or None."""
    found = lookup(ctx, key)
    return None if found is None else found[0].name


def held_elsewhere(engine: EngineState, db: int, key: bytes, slot: int) -> bool:
    """The key holds a value of a type other than the one at `slot` (a lookup in that type's
    dict missed: is it WRONGTYPE or missing?)."""
    return any(other != slot and key in space[db]
               for other, space in enumerate(engine.keyspaces))


def drop_other_types(engine: EngineState, db: int, key: bytes, slot: int) -> None:
    """A value of the type at `slot` replaces whatever the key held (setKey): a value of any
    other type under that name goes whole."""
    for other, space in enumerate(engine.keyspaces):
        if other != slot:
            space[db].pop(key, None)


def refuse_other_types(ctx: Ctx, key: bytes, slot: int) -> None:
    """A command's lookup in its type's dict missed: WRONGTYPE if the key holds another type."""
    if held_elsewhere(ctx.engine, ctx.session.db, key, slot):
        raise ReplyError(WRONGTYPE)


def refuse_string(ctx: Ctx, key: bytes) -> None:
    """A stream command's lookup that missed: WRONGTYPE if the key holds another type."""
    refuse_other_types(ctx, key, STREAM.slot)


def value_at(ctx: Ctx, key: bytes, vt: ValueType) -> Any:
    """A write's lookup (lookupKeyWrite + checkType): the value of type `vt`, None if the key is
    missing, WRONGTYPE if it holds another type."""
    value = ctx.engine.keyspaces[vt.slot][ctx.session.db].get(key)
    if value is None:
        refuse_other_types(ctx, key, vt.slot)
    return value


def read_value(ctx: Ctx, key: bytes, vt: ValueType) -> Any:
    """value_at for a read (Redis's lookupKeyRead): counted in INFO's keyspace_hits or
    keyspace_misses as Redis counts (a key of another type is a hit, then WRONGTYPE); a
    missing key notifies `keymiss`."""
    value = ctx.engine.keyspaces[vt.slot][ctx.session.db].get(key)
    if value is None:
        if held_elsewhere(ctx.engine, ctx.session.db, key, vt.slot):
            read_hit(ctx)
            raise ReplyError(WRONGTYPE)
        read_miss(ctx, key)
        return None
    read_hit(ctx)
    return value


def stream_at(ctx: Ctx, key: bytes) -> Stream | None:
    """A stream command's lookup (lookupKey + checkType): the stream, None if the key is
    missing, WRONGTYPE if it holds another type."""
    s = ctx.db.get(key)
    if s is None:
        refuse_other_types(ctx, key, STREAM.slot)
    return s


def read_stream(ctx: Ctx, key: bytes) -> Stream | None:
    """stream_at for a read (read_value's counting and `keymiss`)."""
    s = ctx.db.get(key)
    if s is None:
        if held_elsewhere(ctx.engine, ctx.session.db, key, STREAM.slot):
            read_hit(ctx)
            raise ReplyError(WRONGTYPE)
        read_miss(ctx, key)
        return None
    read_hit(ctx)
    return s


def read_hit(ctx: Ctx) -> None:
    """A read found its key (lookupKeyRead's hit): INFO's keyspace_hits (not while
    replaying)."""
    if not ctx.replaying:
        ctx.engine.stats.keyspace_hits += 1


def read_miss(ctx: Ctx, key: bytes) -> None:
    """A read found no `key` (lookupKeyRead's miss): INFO's keyspace_misses (not while
    replaying), and the `keymiss` event."""
    if not ctx.replaying:
        ctx.engine.stats.keyspace_misses += 1
    ctx.notify(KEY_MISS, b"keymiss", key)


def refuse_string_in(engine: EngineState, db: dict[bytes, Stream], key: bytes) -> None:
    """refuse_string for callers holding a database rather than a context (XADD's append,
    which replay shares); only reached when the stream is missing."""
    for index, streams in enumerate(engine.dbs):
        if streams is db and held_elsewhere(engine, index, key, STREAM.slot):
            raise ReplyError(WRONGTYPE)


def delete_key(ctx: Ctx, key: bytes) -> bool:
    """Remove a key of any type and its TTL (no effect logged: the caller logs); True if it
    existed. Signals it, so blocked readers re-run."""
    db = ctx.session.db
    for space in ctx.engine.keyspaces:
        if space[db].pop(key, None) is not None:
            ctx.expires.pop(key, None)
            ctx.signal(key)
            return True
    return False


def removed_from(ctx: Ctx, key: bytes, value: Sized, cls: int, event: bytes) -> None:
    """An aggregate (sorted set, hash, set) lost members: the key signalled, the type's event
    notified and, once it is empty, the key deleted (as Redis deletes an empty aggregate) and
    `del` notified after the event."""
    emptied = not len(value)
    if emptied:
        delete_key(ctx, key)  # (signals the key)
    else:
        ctx.signal(key)
    ctx.notify(cls, event, key)
    if emptied:
        ctx.notify(GENERIC, b"del", key)


def all_keys(ctx: Ctx) -> Iterator[bytes]:
    """Every key of the selected database, expired or not."""
    db = ctx.session.db
    return chain.from_iterable(space[db] for space in ctx.engine.keyspaces)


def key_count(engine: EngineState, db: int) -> int:
    """How many keys database `db` holds, expired or not (DBSIZE, INFO keyspace)."""
    return sum(len(space[db]) for space in engine.keyspaces)


def live_keys(ctx: Ctx) -> list[bytes]:
    """Every key not expired at ctx.now (KEYS, SCAN: they skip expired keys)."""
    expires, now = ctx.expires, ctx.now
    if not expires:
        return list(all_keys(ctx))
    return [key for key in all_keys(ctx) if not now > expires.get(key, now)]


def already_expired(ctx: Ctx, when: int) -> bool:
    """checkAlreadyExpired: an absolute time reached deletes the key rather than set it (never
    while replaying: the effects logged the DEL themselves; nor for a redis-server primary's
    commands: a replica keeps the TTL and waits for the primary's DEL, as Redis's does)."""
    return when <= ctx.now and not ctx.replaying and not ctx.session.from_primary


def expire_named_keys(ctx: Ctx, argv: Sequence[bytes]) -> None:
    """Lazy expiry: delete every expired key an argument names, logging one DEL each."""
    expires, now = ctx.expires, ctx.now
    for arg in argv[1:]:
        when = expires.get(arg)
        if when is not None and now > when and delete_key(ctx, arg):
            ctx.emit(del_effect([arg]))
            ctx.engine.stats.expired_keys += 1
            ctx.notify(EXPIRED, b"expired", arg)


Hidden = tuple[list[dict], dict, list[tuple[bytes, int, object, int]]]


def hide_expired(ctx: Ctx, argv: Sequence[bytes]) -> Hidden | None:
    """A replica's read: every expired key an argument names taken out of the database, with
    what it held; None if there was none. `unhide` must follow, whatever the command does (the
    caller's `finally`)."""
    expires, now = ctx.expires, ctx.now
    taken: list[tuple[bytes, int, object, int]] | None = None
    spaces: list[dict] = []
    for arg in argv[1:]:
        when = expires.get(arg)
        if when is not None and now > when:
            if taken is None:
                taken = []
                # The dicts themselves: a SELECT among the arguments' commands changes ctx's
                # database.
                spaces = [space[ctx.session.db] for space in ctx.engine.keyspaces]
            for slot, space in enumerate(spaces):  # (a key named twice is taken out once)
                value = space.pop(arg, None)
                if value is not None:
                    taken.append((arg, slot, value, expires.pop(arg)))
                    break
            else:
                expires.pop(arg)
    if taken is None:
        return None
    return spaces, expires, taken


def unhide(hidden: Hidden) -> None:
    """Put back what `hide_expired` took out (a read-only command changed nothing meanwhile).
    Dict order is not state: SCAN's cursor follows the keys' hashes, the digest and the
    snapshot sort keys."""
    spaces, expires, taken = hidden
    for key, slot, value, when in taken:
        spaces[slot][key] = value
        expires[key] = when



# --- sub-key expiry: the keys whose values have sub-keys with TTLs (a hash's fields) ---------


class SubexpiryIndex:
    """One database's keys whose values have sub-keys with TTLs (Redis 7.4's `subexpires`: a
    hash's fields): key -> the earliest such expiry (`when`), and a min-heap of (time, key) so
    the active cycle finds the due ones without walking them all (stale heap entries, whose
    time no longer matches `when`, are skipped and dropped). An entry may itself be stale (the
    key deleted, renamed, overwritten): whoever reads it checks the key."""

    __slots__ = ("when", "heap")

    def __init__(self) -> None:
        self.when: dict[bytes, int] = {}
        self.heap: list[tuple[int, bytes]] = []

    def __len__(self) -> int:
        return len(self.when)

    def __contains__(self, key: object) -> bool:
        return key in self.when

    def set(self, key: bytes, when: int) -> None:
        if self.when.get(key) != when:
            self.when[key] = when
            heapq.heappush(self.heap, (when, key))
            if len(self.heap) > 2 * len(self.when) + _HEAP_SLACK:
                self.heap = [(w, k) for k, w in self.when.items()]
                heapq.heapify(self.heap)

    def drop(self, key: bytes) -> None:
        self.when.pop(key, None)

    def due(self, now: int, limit: int) -> list[bytes]:
        """Up to `limit` keys whose earliest sub-key expiry is <= now, taken out of the index
        (the caller tracks again what still has TTLs)."""
        out: list[bytes] = []
        heap, when = self.heap, self.when
        while heap and heap[0][0] <= now and len(out) < limit:
            at, key = heapq.heappop(heap)
            if when.get(key) == at:
                del when[key]
                out.append(key)
        return out


_HEAP_SLACK = 32  # stale heap entries tolerated beyond twice the live ones
# The types whose values may have sub-keys with TTLs.
_SUBEXPIRING = tuple(vt for vt in TYPES if vt.min_subexpiry is not None)


def subexpiry_index(engine: EngineState, db: int) -> SubexpiryIndex:
    """Database `db`'s index, built from its keyspaces the first time (a state loaded from a
    snapshot, or installed, starts without it)."""
    indexes: list[SubexpiryIndex | None] = engine.subexpires
    found = indexes[db]
    if found is None:
        found = SubexpiryIndex()
        for vt in _SUBEXPIRING:
            earliest = vt.min_subexpiry
            assert earliest is not None
            for key, value in engine.keyspaces[vt.slot][db].items():
                when = earliest(value)
                if when is not None:
                    found.set(key, when)
        indexes[db] = found
    return found


def track_subexpiry(ctx: Ctx, key: bytes, when: int | None) -> None:
    """The key's value's earliest sub-key expiry after a change (None: it has none now, or the
    key went). Costs one test while the database has no such key."""
    db = ctx.session.db
    if when is None:
        tracked = ctx.engine.subexpires[db]
        if tracked is not None:
            tracked.drop(key)
        return
    subexpiry_index(ctx.engine, db).set(key, when)


def placed(engine: EngineState, db: int, key: bytes, vt: ValueType, value: object) -> None:
    """A value of type `vt` was put under `key` by a command that knows no type (RENAME, COPY,
    MOVE, RESTORE): its sub-key TTLs, if any, join the database's index (one not built yet
    finds them when it is)."""
    earliest = vt.min_subexpiry
    found = engine.subexpires[db]
    if earliest is not None and found is not None:
        when = earliest(value)
        if when is not None:
            found.set(key, when)


def subexpiry_dbs(engine: EngineState) -> list[int]:
    """The databases the active cycle's sub-key pass must look at: those whose index has keys
    (a database whose index is not built yet counts when it holds values of a type whose
    sub-keys may expire). No work for an engine without such values."""
    return [db for db, found in enumerate(engine.subexpires)
            if (len(found) if found is not None
                else any(engine.keyspaces[vt.slot][db] for vt in _SUBEXPIRING))]


def subexpiry_count(engine: EngineState, db: int) -> int:
    """INFO keyspace's `subexpiry`: the database's keys whose values have sub-keys with TTLs."""
    if engine.subexpires[db] is None and not any(
            engine.keyspaces[vt.slot][db] for vt in _SUBEXPIRING):
        return 0
    found = subexpiry_index(engine, db)
    return sum(1 for key in found.when if _subexpiry_of(engine, db, key) is not None)


def _subexpiry_of(engine: EngineState, db: int, key: bytes) -> int | None:
    for vt in _SUBEXPIRING:
        value = engine.keyspaces[vt.slot][db].get(key)
        if value is not None:
            assert vt.min_subexpiry is not None
            return vt.min_subexpiry(value)
    return None


# --- the keys a record changes ----------------------------------------------------------------

ALL_DATABASES: Final = -1  # effect_keys: a FLUSHALL
# An effect's key range by its name as logged (b"XADD"): (first, last, step) from the command
# table; these markers for the effects that are not a range: a SELECT, a flush, a command
# with subcommands (its range is its subcommand's).
_SELECT: Final = (-1, 0, 0)
_FLUSHDB: Final = (-2, 0, 0)
_FLUSHALL: Final = (-3, 0, 0)
_BY_SUBCOMMAND: Final = (-4, 0, 0)
_EFFECT_RANGES: Final[dict[bytes, tuple[int, int, int]]] = {}


def _effect_range(effect: Sequence[Any]) -> tuple[int, int, int]:
    name = effect[0]
    if type(name) is not bytes:  # (a decoded record's may be another bytes-like object)
        name = bytes(name)
    found = _EFFECT_RANGES.get(name)
    if found is None:
        lowered = name.lower()
        if lowered == b"select":
            found = _SELECT
        elif lowered == b"flushdb":
            found = _FLUSHDB
        elif lowered == b"flushall":
            found = _FLUSHALL
        else:
            spec = command_of(tuple(effect), allow_internal=True)
            found = (_BY_SUBCOMMAND if len(effect) > 1 and spec.name.find("|") >= 0
                     else (spec.first_key, spec.last_key, spec.key_step))
        _EFFECT_RANGES[name] = found
    if found[0] == -4:  # (_BY_SUBCOMMAND)
        spec = command_of(tuple(effect), allow_internal=True)
        return spec.first_key, spec.last_key, spec.key_step
    return found


def effect_keys(db: int, effects: Iterable[Any]) -> list[tuple[int, bytes | None]]:
    """The keys a record's effects change, as (database, key), their key positions the command
    table's (`db`: the database the record starts in; a SELECT moves on): (db, None) for a
    FLUSHDB of db, (ALL_DATABASES, None) for a FLUSHALL."""
    out: list[tuple[int, bytes | None]] = []
    for effect in effects:
        first, last, step = _effect_range(effect)
        if first <= 0:
            if first == -1:  # SELECT
                db = int(effect[1])
            elif first == -2:  # FLUSHDB
                out.append((db, None))
            elif first == -3:  # FLUSHALL
                out.append((ALL_DATABASES, None))
            continue
        end = len(effect) - 1 if last < 0 else min(last, len(effect) - 1)
        for i in range(first, end + 1, step or 1):
            out.append((db, effect[i]))
    return out


# single_key's answer by effect name: where its one key is (> 0: always there; < 0: there
# when the effect has nothing after it, a DEL of one key), 0 for none or several, _PER_EFFECT
# when it depends on the subcommand. A cluster node asks it of every record it applies.
_PER_EFFECT: Final = -(1 << 30)
_SINGLE_AT: Final[dict[bytes, int]] = {}
_LAST: tuple[object, int] = (None, 0)  # the last name asked and its answer (most are XADDs)


def single_key(effect: Sequence[Any]) -> bytes | None:
    """The one key an effect names (a SET's, an XADD's), or None when it names none or
    several (or is a SELECT or a flush)."""
    # (A list, as commands emit them, read with the list's own operations: this runs for
    # every record a cluster node applies. A replayed record's tuples are copied.)
    args: list[Any] = effect if isinstance(effect, list) else list(effect)
    global _LAST
    name = args[0]
    last_name, at = _LAST
    if name is not last_name:
        found = _SINGLE_AT.get(name) if type(name) is bytes else None
        at = _single_at(args) if found is None else found
        if found is not None and found != _PER_EFFECT:
            _LAST = (name, found)
    if at == _PER_EFFECT:
        at = _position(_effect_range(args))
    if at > 0:
        return args[at] if at < len(args) else None
    if at < 0 and len(args) == 1 - at:
        return args[-at]
    return None


def _single_at(effect: Sequence[Any]) -> int:
    """single_key's position for this effect, kept by name when its name decides it."""
    found = _effect_range(effect)
    at = _position(found)
    name = effect[0]
    if type(name) is bytes:
        by_name = _EFFECT_RANGES.get(name)
        _SINGLE_AT[name] = at if by_name == found else _PER_EFFECT
    return at


def _position(found: tuple[int, int, int]) -> int:
    first, last, _step = found
    if first <= 0:
        return 0
    if last == first:
        return first
    return -first if last < 0 else 0
