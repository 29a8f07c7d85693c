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
(`already_expired`, `expire_named_keys`, `hide_expired`, `unhide`) and `placed` (a value put
under a key by a command that knows no type: its type's per-database index told). Must not
touch: any one type's values (a type is reached through its `ValueType`), replies, I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence, Sized
from itertools import chain
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.notify import EXPIRED, GENERIC, KEY_MISS
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


# Types whose values carry an index the engine keeps beside the keyspace (a hash's field TTLs):
# slot -> what to do when a generic command (RENAME, COPY, RESTORE) places such a value under a
# key of database `db`. The type's commands module registers it.
Placed = Callable[["EngineState", int, bytes, Any], None]


PLACED: dict[int, Placed] = {}


def placed(engine: EngineState, db: int, key: bytes, vt: ValueType, value: object) -> None:
    """A value of type `vt` was put under `key` by a command that knows no type."""
    hook = PLACED.get(vt.slot)
    if hook is not None:
        hook(engine, db, key, value)


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
