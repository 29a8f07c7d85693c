"""Keys' TTLs: EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME, PEXPIRETIME,
PERSIST, and the active expiry cycle.

Expiry is deterministic for replay, replicas and snapshots because only effects change state:

- The command time is read once per command (`ctx.now`); a key is expired when
  `now > expires[key]` (Redis's keyIsExpired), and a write whose absolute time is `<= now`
  deletes at once (checkAlreadyExpired: engine.exec.keys's `already_expired`).
- Lazy expiry and a replica's reads of expired keys: engine.exec.keys (`expire_named_keys`,
  `hide_expired`), which the engine core calls before a command runs. A read-only replica never
  deletes (its primary's DELs arrive as effects), as in Redis; the primary's own session (a
  redis-server primary's commands) sees everything, as Redis's master client does.
- Active expiry: `active_expire` looks at a sample of the keys with a TTL, deletes the expired
  ones and logs their `DEL`s, round after round while many were expired, like Redis's
  activeExpireCycle (the sample rotates through `expires` instead of being random); the
  engine's expiry cycle (engine.runtime.expiry_cycle: `ExpiryCycle.run`) runs it over every
  database, and the server's loop (or, for an engine opened with `Engine.open` and not
  served, engine.services.expiry_timer) calls that ten times a second.
- A redis-server primary's commands (replication.redis_commands) never delete on their own
  either: a past TTL is kept until the primary's DEL, as on a Redis replica.
- Snapshots store every TTL (snapshot.layout's `keys` table), so a state loaded from one
  expires exactly as the one written.
- Relative times become absolute in effects: `EXPIRE k 10` logs `PEXPIREAT k <now + 10000>`,
  `SET k v EX 10` logs `SET k v PXAT <ms>` (Redis propagates the same way), a time already
  past logs `DEL k`. Replay (`ReplayCtx`) applies those effects and never expires anything on
  its own, so a record replayed at any later time gives the same state.
- KEYS and SCAN skip expired keys without deleting them (a read with no effect); DBSIZE counts
  them until they are deleted, as Redis's dictSize does.

Keyspace notifications: an expiry deleting a key (lazy or active) notifies `expired`, a TTL set
`expire` (`del` when the time was already past), a TTL removed `persist`.

Sub-keys expire too (a hash's fields, Redis 7.4+): `active_expire_subkeys` is the cycle's pass
over the keys of engine.exec.keys' sub-key expiry index whose earliest sub-key TTL is past, each
handed to the expirer its type's commands module registered (`SUBKEY_EXPIRERS`).

Owns these commands' parsing, replies and effects, `active_expire`, `active_expire_subkeys`,
`set_expiry` and `remove_expiry`. Must not touch: any one type's values, the command table beyond its
declarations, I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import Any

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import (
    already_expired,
    delete_key,
    key_type,
    lookup,
    read_hit,
    read_miss,
    subexpiry_index,
)
from streamkeep.engine.exec.notify import EXPIRED, GENERIC
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import del_effect, persist_effect, pexpireat_effect
from streamkeep.engine.wire.args import LLONG_MAX, parse_int
from streamkeep.engine.wire.errors import ReplyError

ACTIVE_EXPIRE_SAMPLE = 20  # keys looked at per round (Redis's default effort)
ACTIVE_EXPIRE_ROUNDS = 16  # at most, per database and cycle
ACTIVE_SUBKEYS_PER_CYCLE = 1000  # sub-keys (a hash's fields) deleted per database and cycle

# What deletes a value's due sub-keys, by its type's slot, as the type's commands module
# registers it (a hash's fields: engine.commands.hash_expiry): (ctx, key, value, budget) ->
# how many went. It logs and notifies its deletions, and tracks the value again in the
# database's sub-key expiry index (engine.exec.keys) while it has sub-keys with TTLs.
SubkeyExpirer = Callable[[Ctx, bytes, Any, int], int]
SUBKEY_EXPIRERS: dict[int, SubkeyExpirer] = {}


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


def active_expire_subkeys(ctx: Ctx, budget: int = ACTIVE_SUBKEYS_PER_CYCLE) -> int:
    """The active cycle's sub-key pass over the selected database: the keys of its sub-key
    expiry index whose earliest sub-key TTL is past, each handed to its type's expirer, at most
    `budget` sub-keys deleted. Returns how many went."""
    found = subexpiry_index(ctx.engine, ctx.session.db)
    if not len(found):
        return 0
    removed = 0
    for key in found.due(ctx.now, budget):
        hit = lookup(ctx, key)
        expire = None if hit is None else SUBKEY_EXPIRERS.get(hit[0].slot)
        if hit is not None and expire is not None:
            removed += expire(ctx, key, hit[1], budget - removed)
    return removed


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
         acl="keyspace", keys="RW UPDATE", logs=("DEL", "PEXPIREAT"),
         summary="Sets the expiration time of a key in seconds.",
         syntax=_EXPIRE_SYNTAX.format("seconds"))
def expire(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "expire", ctx.now, 1000)


@command("pexpire", -3, "write fast", group="generic", since="2.6.0",
         acl="keyspace", keys="RW UPDATE", logs=("DEL", "PEXPIREAT"),
         summary="Sets the expiration time of a key in milliseconds.",
         syntax=_EXPIRE_SYNTAX.format("milliseconds"))
def pexpire(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "pexpire", ctx.now, 1)


@command("expireat", -3, "write fast", group="generic", since="1.2.0",
         acl="keyspace", keys="RW UPDATE", logs=("DEL", "PEXPIREAT"),
         summary="Sets the expiration time of a key to a Unix timestamp.",
         syntax=_EXPIRE_SYNTAX.format("unix-time-seconds"))
def expireat(ctx: Ctx, argv: Argv) -> int:
    return _expire_generic(ctx, argv, "expireat", 0, 1000)


@command("pexpireat", -3, "write fast", group="generic", since="2.6.0",
         acl="keyspace", keys="RW UPDATE", logs=("DEL", "PEXPIREAT"),
         effect="PEXPIREAT key unix-time-milliseconds",
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
         acl="keyspace", keys="RO ACCESS",
         summary="Returns the expiration time in seconds of a key.", syntax="key")
def ttl(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=True, in_ms=False)


@command("pttl", 2, "readonly fast", group="generic", since="2.6.0",
         acl="keyspace", keys="RO ACCESS",
         summary="Returns the expiration time in milliseconds of a key.", syntax="key")
def pttl(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=True, in_ms=True)


@command("expiretime", 2, "readonly fast", group="generic", since="7.0.0",
         acl="keyspace", keys="RO ACCESS",
         summary="Returns the expiration time of a key as a Unix timestamp.", syntax="key")
def expiretime(ctx: Ctx, argv: Argv) -> int:
    return _ttl_reply(ctx, argv[1], relative=False, in_ms=False)


@command("pexpiretime", 2, "readonly fast", group="generic", since="7.0.0",
         acl="keyspace", keys="RO ACCESS",
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
         acl="keyspace", keys="RW UPDATE", logs=("PERSIST",),
         effect="PERSIST key",
         summary="Removes the expiration time of a key.", syntax="key")
def persist(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    if key_type(ctx, key) is None:
        return 0
    return 1 if remove_expiry(ctx, key) else 0

