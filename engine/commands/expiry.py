"""Keys of every type and their TTLs: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL,
EXPIRETIME, PEXPIRETIME, PERSIST; and the keyspace helpers every command module shares.

The design. Each database keeps one dict per value type (engine.model.value_types registers
them): `keyspaces[slot][i]` maps a key to a value of that type. Streams are slot 0, also named
`dbs[i]`, and strings slot 1, also `strings[i]`, so the snapshot, residency, digest and every
stream command read streams where they always did. `expires[i]` maps a key of any type to its
absolute expiry time in engine-clock ms (Redis's per-db `expires` dict). A key is in one type's
dict at most; a key in `expires[i]` is in one of them. Handlers reach the selected database's as
`ctx.db` (streams), `ctx.strings`, `ctx.space(slot)` and `ctx.expires`.

Types. A command on a key of another type is refused with WRONGTYPE where Redis's lookup would
refuse it (`value_at`, `read_value`); SET, MSET, RENAME and COPY overwrite a key of any type. A
command looks at the other types' dicts only when its key is missing from its own, so the XADD
path pays nothing for the other types.

Expiry is deterministic for replay, replicas and snapshots because only effects change state:

- The command time is read once per command (`ctx.now`); a key is expired when
  `now > expires[key]` (Redis's keyIsExpired), and a write whose absolute time is `<= now`
  deletes at once (checkAlreadyExpired).
- Lazy expiry: before a client's command runs, `EngineCore.submit` (and EXEC, per queued
  command) calls `expire_named_keys` when the database has any TTL: every argument naming an
  expired key deletes that key and logs `DEL key` ahead of the command's own effects (committed
  even when the command then fails). An argument that is not a key but names an expired one
  deletes it too: harmless, since an expired key is already invisible to everyone. A read-only
  replica never deletes (its primary's DELs arrive as effects), as in Redis.
- A replica's reads: as on a Redis replica since 3.2, a client's command there sees a key whose
  TTL has passed as missing, while the key stays until the primary's DEL arrives (the replica
  must not write). `hide_expired` takes every expired key an argument names out of the
  database for the command's run (no effect, no signal) and `unhide` puts it back right after,
  so every command reads as if it were absent (GET nil, EXISTS 0, TTL -2, TYPE none, XLEN 0);
  KEYS and SCAN skip expired keys anyway. The primary's own session (a redis-server primary's
  commands) sees everything, as Redis's master client does.
- Active expiry: `active_expire` looks at a sample of the keys with a TTL, deletes the expired
  ones and logs their `DEL`s, round after round while many were expired, like Redis's
  activeExpireCycle (the sample rotates through `expires` instead of being random);
  `ExpiryCycle.run` runs it over every database, and the server's loop (or,
  for an engine opened with `Engine.open` and not served, engine.services.expiry_timer) calls
  that ten times a second.
- A redis-server primary's commands (replication.redis_commands) never delete on their own
  either: a past TTL is kept until the primary's DEL, as on a Redis replica.
- Snapshots store string values and every TTL (snapshot.layout's `keys` table), so a state
  loaded from one expires exactly as the one written.
- Relative times become absolute in effects: `EXPIRE k 10` logs `PEXPIREAT k <now + 10000>`,
  `SET k v EX 10` logs `SET k v PXAT <ms>` (Redis propagates the same way), a time already
  past logs `DEL k`. Replay (`ReplayCtx`) applies those effects and never expires anything on
  its own, so a record replayed at any later time gives the same state.
- KEYS and SCAN skip expired keys without deleting them (a read with no effect); DBSIZE counts
  them until they are deleted, as Redis's dictSize does.

Keyspace notifications: an expiry deleting a key (lazy or active) notifies `expired`, a TTL set
`expire` (`del` when the time was already past), a TTL removed `persist`; a read command's
lookup that finds no key `keymiss` (`read_stream`, `read_miss`: Redis's lookupKeyRead, which
writes' lookups never notify).

Owns these commands' parsing, replies and effects, and the helpers (`lookup`, `key_type`,
`value_at`, `read_value`, `stream_at`, `delete_key`, `live_keys`, `expire_named_keys`, `hide_expired`, `unhide`, `active_expire`).
Must not touch: stream internals, the command table beyond its declarations, I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence, Sized
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.notify import EXPIRED, GENERIC, KEY_MISS
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import del_effect, persist_effect, pexpireat_effect
from streamkeep.engine.model.value_types import STREAM, TYPES, ValueType
from streamkeep.engine.wire.args import LLONG_MAX, parse_int
from streamkeep.engine.wire.errors import WRONGTYPE, ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.model.stream import Stream

ACTIVE_EXPIRE_SAMPLE = 20  # keys looked at per round (Redis's default effort)
ACTIVE_EXPIRE_ROUNDS = 16  # at most, per database and cycle


# --- the shared keyspace helpers -------------------------------------------------------------------


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


def active_expire(ctx: Ctx, sample: int = ACTIVE_EXPIRE_SAMPLE,
                  rounds: int = ACTIVE_EXPIRE_ROUNDS) -> int:
    """The active cycle over the selected database: `sample` keys with a TTL looked at per
    round, the expired ones deleted and logged (one DEL for the whole pass); another round
    while more than a quarter of a sample had expired (Redis's activeExpireCycle keeps going
    the same way), up to `rounds`. Keys looked at and still live move to the back of
    `expires`, so round after round every TTL gets looked at (dict order is not state: the
    digest and the snapshot sort keys). Returns how many keys were deleted."""
    expires, now = ctx.expires, ctx.now
    due: list[bytes] = []
    looked = 0
    capped = True  # unless a round finds few enough expired keys
    for _round in range(rounds):
        found = 0
        batch = list(islice(expires.items(), sample))
        looked += len(batch)
        for key, when in batch:
            if now > when:
                delete_key(ctx, key)
                due.append(key)
                found += 1
                ctx.notify(EXPIRED, b"expired", key)
            else:
                del expires[key]
                expires[key] = when
        if found * 4 <= sample:
            capped = False
            break
    if due:
        ctx.emit(del_effect(due))
    ctx.engine.stats.expire_sample(looked, len(due), capped)
    return len(due)


def set_expiry(ctx: Ctx, key: bytes, when: int) -> None:
    """Give an existing key the absolute expiry `when` and log it (deleting it if past);
    notified as `expire`, or `del` when it deleted the key."""
    if already_expired(ctx, when):
        delete_key(ctx, key)
        ctx.emit(del_effect([key]))
        ctx.notify(GENERIC, b"del", key)
    else:
        ctx.expires[key] = when
        ctx.emit(pexpireat_effect(key, when))
        ctx.notify(GENERIC, b"expire", key)


# --- EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT ------------------------------------------------------

_NX, _XX, _GT, _LT = 1, 2, 4, 8
_EXPIRE_FLAGS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT}


def expire_time_error(name: str) -> ReplyError:
    """addReplyErrorExpireTime, naming the command as Redis's fullname does."""
    return ReplyError(f"ERR invalid expire time in '{name}' command")


def _expire_flags(argv: Argv) -> int:
    """parseExtendedExpireArgumentsOrReply."""
    flags = 0
    for opt in argv[3:]:
        flag = _EXPIRE_FLAGS.get(opt.lower())
        if flag is None:
            raise ReplyError(f"ERR Unsupported option {opt.decode('utf-8', 'replace')}")
        flags |= flag
    if flags & _NX and flags & (_XX | _GT | _LT):
        raise ReplyError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if flags & _GT and flags & _LT:
        raise ReplyError("ERR GT and LT options at the same time are not compatible")
    return flags


def _refused_by_flags(flags: int, when: int, current: int | None) -> bool:
    if flags & _NX and current is not None:
        return True
    if flags & _XX and current is None:
        return True
    if flags & _GT and (current is None or when <= current):
        return True
    return bool(flags & _LT and current is not None and when >= current)


def _expire_generic(ctx: Ctx, argv: Argv, name: str, base: int, unit_ms: int) -> int:
    """expireGenericCommand: flags, then the time, then the key."""
    flags = _expire_flags(argv)
    when = parse_int(argv[2])
    if unit_ms == 1000:
        if when > LLONG_MAX // 1000 or when < -(LLONG_MAX // 1000):
            raise expire_time_error(name)
        when *= 1000
    if when > LLONG_MAX - base:
        raise expire_time_error(name)
    when += base
    key = argv[1]
    if key_type(ctx, key) is None:
        return 0
    if flags and _refused_by_flags(flags, when, ctx.expires.get(key)):
        return 0
    set_expiry(ctx, key, when)
    return 1


_EXPIRE_SYNTAX = "key {}:integer [condition: NX | XX | GT | LT]"


@command("expire", -3, "write fast", group="generic", since="1.0.0",
         summary="Sets the expiration time of a key in seconds.",
         syntax=_EXPIRE_SYNTAX.format("seconds"))
def expire(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "expire", ctx.now, 1000)


@command("pexpire", -3, "write fast", group="generic", since="2.6.0",
         summary="Sets the expiration time of a key in milliseconds.",
         syntax=_EXPIRE_SYNTAX.format("milliseconds"))
def pexpire(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "pexpire", ctx.now, 1)


@command("expireat", -3, "write fast", group="generic", since="1.2.0",
         summary="Sets the expiration time of a key to a Unix timestamp.",
         syntax=_EXPIRE_SYNTAX.format("unix-time-seconds"))
def expireat(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "expireat", 0, 1000)


@command("pexpireat", -3, "write fast", group="generic", since="2.6.0",
         summary="Sets the expiration time of a key to a Unix milliseconds timestamp.",
         syntax=_EXPIRE_SYNTAX.format("unix-time-milliseconds"))
def pexpireat(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "pexpireat", 0, 1)


# --- TTL / PTTL / EXPIRETIME / PEXPIRETIME / PERSIST ----------------------------------------------


def _ttl_reply(ctx: Ctx, key: bytes, relative: bool, in_ms: bool) -> int:
    """ttlGenericCommand: -2 (no key), -1 (no TTL), else the time left (never negative) or the
    expiry time, in ms or in seconds rounded to the nearest."""
    if key_type(ctx, key) is None:
        read_miss(ctx, key)
        return -2
    read_hit(ctx)
    when = ctx.expires.get(key)
    if when is None:
        return -1
    value = max(when - ctx.now, 0) if relative else when
    return value if in_ms else (value + 500) // 1000


@command("ttl", 2, "readonly fast", group="generic", since="1.0.0",
         summary="Returns the expiration time in seconds of a key.", syntax="key")
def ttl(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=True, in_ms=False)


@command("pttl", 2, "readonly fast", group="generic", since="2.6.0",
         summary="Returns the expiration time in milliseconds of a key.", syntax="key")
def pttl(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=True, in_ms=True)


@command("expiretime", 2, "readonly fast", group="generic", since="7.0.0",
         summary="Returns the expiration time of a key as a Unix timestamp.", syntax="key")
def expiretime(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=False, in_ms=False)


@command("pexpiretime", 2, "readonly fast", group="generic", since="7.0.0",
         summary="Returns the expiration time of a key as a Unix milliseconds timestamp.",
         syntax="key")
def pexpiretime(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=False, in_ms=True)


def remove_expiry(ctx: Ctx, key: bytes) -> bool:
    """removeExpire, logged and notified (`persist`): True if the key had a TTL."""
    if ctx.expires.pop(key, None) is None:
        return False
    ctx.emit(persist_effect(key))
    ctx.notify(GENERIC, b"persist", key)
    return True


@command("persist", 2, "write fast", group="generic", since="2.2.0",
         summary="Removes the expiration time of a key.", syntax="key")
def persist(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    if key_type(ctx, key) is None:
        return 0
    return 1 if remove_expiry(ctx, key) else 0

