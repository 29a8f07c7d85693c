"""Hash commands: HSET, HSETNX, HMSET, HGET, HMGET, HDEL, HLEN, HSTRLEN, HEXISTS, HKEYS, HVALS,
HGETALL, HINCRBY, HINCRBYFLOAT, HRANDFIELD and HSCAN (the field-expiry commands are
engine.commands.hash_expiry's).

Owns these commands' parsing (Redis's t_hash.c, error line for error line), replies, effects
and keyspace events, and the helpers the field-expiry module shares: the hash lookups (which
expire a hash's due fields first, Redis's lazy field expiry), the engine's shared listpack
limits, and how a hash's field TTLs are kept in the database's sub-key expiry index, which the
active cycle walks (`track`).

Values are `Hash`es (engine.model.hashes) in the selected database's HASH keyspace, or for a
small plain hash its pack alone (engine.model.packed_hash): the commands read every one
through `hash_for_read`/`hash_for_write`, whose `Hash` stores its changes back. Effects:
HSET, HMSET and HSETNX log `HSET key field value ...` of what they set; HDEL logs the fields it
removed; HINCRBY logs itself; HINCRBYFLOAT logs `HSET key field <the resulting text>` (Redis
propagates it so, so a replica never redoes float arithmetic), or, for a field with a TTL,
`HSETEX key KEEPTTL FIELDS 1 field text` (HSET would drop the TTL). Nothing changed: nothing
logged. An emptied hash is deleted (`del` after the command's own event); a created key
notifies `new` first.

Field expiry, the lazy part. A hash whose fields have TTLs has its due fields (time < now,
Redis's hashTypeIsExpired) deleted when a command looks it up, each deletion logged as `HDEL`
and notified `hexpired` (`del` after it when the hash went). A replica (a read-only engine,
effects being applied, a redis-server primary's commands) never deletes on its own: its reads
skip the due fields and the primary's HDELs arrive as effects. Plain hashes pay one type test.

The hashes with field TTLs are in the database's sub-key expiry index (engine.exec.keys'
SubexpiryIndex: each key by its earliest field expiry, built from the keyspace the first time it
is needed, then kept by these commands through `track`; a hash placed by RENAME, COPY or RESTORE
joins it there). An entry may be stale (the key deleted, renamed, overwritten): whoever reads it
checks the key and drops what no longer holds.

Must not touch: other types' values (a key of another type is WRONGTYPE), the hash's
internals (through Hash's API only).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from streamkeep.engine.commands.keyspace import parse_element_scan, stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import (
    read_value,
    removed_from,
    subexpiry_index,
    track_subexpiry,
    value_at,
)
from streamkeep.engine.exec.notify import HASH as HASH_EVENTS
from streamkeep.engine.exec.notify import NEW
from streamkeep.engine.exec.reply_budget import BULK_LEAST, pair_len, random_picks
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    hdel_effect,
    hincrby_effect,
    hset_effect,
    hsetex_effect,
)
from streamkeep.engine.model.hashes import (
    Hash,
    HashLimits,
    bare_columns,
    bare_field,
    bound_hash,
    stored,
)
from streamkeep.engine.model.ids import parse_u64
from streamkeep.engine.model.packed_hash import PackedHash
from streamkeep.engine.model.strings import is_finite, parse_long_double
from streamkeep.engine.model.value_types import HASH
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, wrong_arity
from streamkeep.engine.wire.reply import RespMap

if TYPE_CHECKING:
    pass

NOT_FLOAT = "ERR value is not a valid float"
NAN_OR_INF = "ERR value is NaN or Infinity"
_RNG = random.Random()  # HRANDFIELD's picks (read-only: nothing random is ever logged)
_NO_FIELDS: frozenset[bytes] = frozenset()

# Its keyspace and limits slot: a static read (`HASH.slot` is an attribute lookup at each call).
_SLOT: Final = HASH.slot


# --- the shared limits and the sub-key expiry index --------------------------------------------


def limits_of(ctx: Ctx) -> HashLimits:
    """The engine's one HashLimits: every hash it holds reads it at each write, and CONFIG SET
    changes it in place (engine.exec.settings), so a new limit reaches existing hashes on
    their next write, as in Redis."""
    limits: HashLimits = ctx.engine.limits[_SLOT]
    return limits


def track(ctx: Ctx, key: bytes, h: Hash | None) -> None:
    """The hash's earliest field expiry after a change, in the database's sub-key expiry index
    (engine.exec.keys), or the key dropped from it."""
    has_ttl = h is not None and len(h) > 0 and h.has_field_expiry()
    track_subexpiry(ctx, key, h.min_field_expiry() if has_ttl and h is not None else None)


def tracked(ctx: Ctx, key: bytes) -> bool:
    """Whether the key is in the database's sub-key expiry index."""
    return key in subexpiry_index(ctx.engine, ctx.session.db)


def adopt_limits(ctx: Ctx, h: Hash) -> Hash:
    """A hash made elsewhere (loaded from a snapshot, restored) reads the engine's limits from
    its next write on."""
    limits = limits_of(ctx)
    if h.limits is not limits:
        h.limits = limits
    return h


# --- lookups with lazy field expiry --------------------------------------------------------------


def may_expire_fields(ctx: Ctx) -> bool:
    """Whether this command may delete due fields itself (never on a replica, nor while
    applying effects, nor for a redis-server primary's commands: the primary's HDELs do)."""
    return (ctx.lazy_expiry and not ctx.replaying and ctx.engine.read_only is None
            and not ctx.session.from_primary)


def expire_due_fields(ctx: Ctx, key: bytes, h: Hash, cutoff: int,
                      limit: int = 1 << 62) -> int:
    """Delete (up to `limit` of) the fields whose time is <= cutoff, logged as one HDEL,
    notified `hexpired` (and `del` when the hash went, which deletes the key). Returns how
    many went."""
    fields = h.delete_expired(cutoff, limit)
    if not fields:
        return 0
    ctx.emit(hdel_effect(key, fields))
    _fields_removed(ctx, key, h, b"hexpired")
    return len(fields)


def _fields_removed(ctx: Ctx, key: bytes, h: Hash, event: bytes) -> None:
    """removed_from, and the sub-key expiry index told (the key dropped once the hash went)."""
    removed_from(ctx, key, h, HASH_EVENTS, event)
    track(ctx, key, h if len(h) else None)


def _lazy(ctx: Ctx, key: bytes, h: Hash | None) -> Hash | None:
    if h is None or not h.has_field_expiry() or not may_expire_fields(ctx):
        return h
    expire_due_fields(ctx, key, h, ctx.now - 1)
    if not len(h):
        return None
    if not tracked(ctx, key):  # a hash placed by RENAME, COPY, RESTORE: tracked from now
        track(ctx, key, h)
    return h


def hash_for_read(ctx: Ctx, key: bytes) -> Hash | None:
    """lookupKeyRead + checkType(OBJ_HASH), the hash's due fields expired first."""
    value: Hash | PackedHash | None = read_value(ctx, key, HASH)
    if value is None:
        return None
    return _live(ctx, key, value)


def hash_for_write(ctx: Ctx, key: bytes) -> Hash | None:
    """lookupKeyWrite + checkType(OBJ_HASH), the hash's due fields expired first."""
    value: Hash | PackedHash | None = value_at(ctx, key, HASH)
    if value is None:
        return None
    return _live(ctx, key, value)


def _live(ctx: Ctx, key: bytes, value: Hash | PackedHash) -> Hash | None:
    """The key's value (read by the caller) as the `Hash` a command uses, its due fields
    expired first: None if none is left."""
    return _lazy(ctx, key, _opened(ctx, key, value))


def _opened(ctx: Ctx, key: bytes, value: Hash | PackedHash) -> Hash:
    """The key's value as the `Hash` the commands use, reading the engine's limits: a small
    hash kept bare is wrapped in one that stores its changes back (engine.model.hashes'
    `bound_hash`)."""
    return adopt_limits(ctx, bound_hash(value, ctx.space(_SLOT), key, limits_of(ctx)))


def hidden_fields(ctx: Ctx, h: Hash) -> frozenset[bytes]:
    """The fields a replica's read must not see (due, not yet deleted by the primary)."""
    if not h.has_field_expiry():
        return _NO_FIELDS
    return frozenset(h.expired_fields(ctx.now - 1))


def live_get(ctx: Ctx, h: Hash, field: bytes) -> bytes | None:
    value = h.get(field)
    if value is not None and h.has_field_expiry():
        when = h.field_expiry(field)
        if when is not None and when < ctx.now:
            return None
    return value


def live_items(ctx: Ctx, h: Hash) -> list[tuple[bytes, bytes]]:
    hidden = hidden_fields(ctx, h)
    items = h.items()
    return [pair for pair in items if pair[0] not in hidden] if hidden else items


def create_hash(ctx: Ctx, key: bytes) -> Hash:
    """A new empty hash at a free key, notified `new` (dbAdd): kept bare, and returned as the
    `Hash` that stores its changes there."""
    limits = limits_of(ctx)
    space = ctx.space(_SLOT)
    value = stored(Hash(limits))
    space[key] = value
    ctx.notify(NEW, b"new", key)
    return bound_hash(value, space, key, limits)


def resp3(ctx: Ctx) -> bool:
    client = ctx.session.client
    return client is not None and getattr(client, "protocol", 2) == 3


def pairs_of(argv: Argv, start: int) -> list[tuple[bytes, bytes]]:
    return [(argv[i], argv[i + 1]) for i in range(start, len(argv) - 1, 2)]


def set_pairs(ctx: Ctx, key: bytes, h: Hash | None, pairs: Sequence[tuple[bytes, bytes]]) -> int:
    """hashTypeTryConversion + hashTypeSet for each pair: how many fields are new."""
    if h is None:
        h = create_hash(ctx, key)
    had_ttl = h.has_field_expiry()
    created = h.set_many(pairs)
    if had_ttl:
        track(ctx, key, h)
    ctx.signal(key)
    return created


# --- HSET / HMSET / HSETNX ----------------------------------------------------------------------


def _hset(ctx: Ctx, argv: Argv, name: str) -> int:
    if len(argv) % 2 == 1:
        raise wrong_arity(name)
    key = argv[1]
    h = hash_for_write(ctx, key)
    pairs = pairs_of(argv, 2)
    created = set_pairs(ctx, key, h, pairs)
    ctx.emit(hset_effect(key, pairs))
    ctx.notify(HASH_EVENTS, b"hset", key)
    return created


@command("hset", -4, "write denyoom fast", group="hash", since="2.0.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HSET"),
         effect="HSET key field value [field value ...]",
         summary="Creates or modifies the value of a field in a hash.",
         syntax="key <data: field value>...")
def hset(ctx: Ctx, argv: Argv) -> int:
    return _hset(ctx, argv, "hset")


@command("hmset", -4, "write denyoom fast", group="hash", since="2.0.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HSET"),
         summary="Sets the values of multiple fields.", syntax="key <data: field value>...")
def hmset(ctx: Ctx, argv: Argv) -> str:
    _hset(ctx, argv, "hmset")
    return "OK"


@command("hsetnx", 4, "write denyoom fast", group="hash", since="2.0.0",
         acl="hash", keys="RW INSERT", logs=("HDEL", "HSET"),
         summary="Sets the value of a field in a hash only when the field doesn't exist.",
         syntax="key field value")
def hsetnx(ctx: Ctx, argv: Argv) -> int:
    key, field, value = argv[1], argv[2], argv[3]
    h = hash_for_write(ctx, key)
    if h is not None and h.get(field) is not None:
        return 0
    set_pairs(ctx, key, h, [(field, value)])
    ctx.emit(hset_effect(key, [(field, value)]))
    ctx.notify(HASH_EVENTS, b"hset", key)
    return 1


# --- HGET / HMGET / HEXISTS / HSTRLEN / HLEN ----------------------------------------------------


@command("hget", 3, "readonly fast", group="hash", since="2.0.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the value of a field in a hash.", syntax="key field")
def hget(ctx: Ctx, argv: Argv) -> bytes | None:
    key = argv[1]
    value: Hash | PackedHash | None = read_value(ctx, key, HASH)
    if value is None:
        return None
    if type(value) is PackedHash:  # (a small hash's usual form: read in place)
        return bare_field(value, argv[2])
    h = _live(ctx, key, value)
    return None if h is None else live_get(ctx, h, argv[2])


@command("hmget", -3, "readonly fast", group="hash", since="2.0.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the values of all fields in a hash.", syntax="key field...")
def hmget(ctx: Ctx, argv: Argv) -> list[bytes | None]:
    h = hash_for_read(ctx, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    return [live_get(ctx, h, field) for field in argv[2:]]


@command("hexists", 3, "readonly fast", group="hash", since="2.0.0",
         acl="hash", keys="RO", logs=("HDEL",),
         summary="Determines whether a field exists in a hash.", syntax="key field")
def hexists(ctx: Ctx, argv: Argv) -> int:
    h = hash_for_read(ctx, argv[1])
    return 0 if h is None or live_get(ctx, h, argv[2]) is None else 1


@command("hstrlen", 3, "readonly fast", group="hash", since="3.2.0",
         acl="hash", keys="RO", logs=("HDEL",),
         summary="Returns the length of the value of a field.", syntax="key field")
def hstrlen(ctx: Ctx, argv: Argv) -> int:
    h = hash_for_read(ctx, argv[1])
    value = None if h is None else live_get(ctx, h, argv[2])
    return 0 if value is None else len(value)


@command("hlen", 2, "readonly fast", group="hash", since="2.0.0",
         acl="hash", keys="RO", logs=("HDEL",),
         summary="Returns the number of fields in a hash.", syntax="key")
def hlen(ctx: Ctx, argv: Argv) -> int:
    h = hash_for_read(ctx, argv[1])
    return 0 if h is None else len(h) - len(hidden_fields(ctx, h))


# --- HKEYS / HVALS / HGETALL ----------------------------------------------------------------------


@command("hkeys", 2, "readonly", group="hash", since="2.0.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns all fields in a hash.", syntax="key")
def hkeys(ctx: Ctx, argv: Argv) -> list[bytes]:
    h = hash_for_read(ctx, argv[1])
    return [] if h is None else [f for f, _v in live_items(ctx, h)]


@command("hvals", 2, "readonly", group="hash", since="2.0.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns all values in a hash.", syntax="key")
def hvals(ctx: Ctx, argv: Argv) -> list[bytes]:
    h = hash_for_read(ctx, argv[1])
    return [] if h is None else [v for _f, v in live_items(ctx, h)]


@command("hgetall", 2, "readonly", group="hash", since="2.0.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns all fields and values in a hash.", syntax="key")
def hgetall(ctx: Ctx, argv: Argv) -> RespMap:
    key = argv[1]
    value: Hash | PackedHash | None = read_value(ctx, key, HASH)  # (hash_for_read's lookup)
    if value is None:
        return RespMap([])
    columns = bare_columns(value)
    if columns is not None:  # a bare pack: written as it reads, no pairs made
        return RespMap.of_columns(columns)
    h = _live(ctx, key, value)
    return RespMap([] if h is None else live_items(ctx, h))


# --- HDEL ----------------------------------------------------------------------------------------


@command("hdel", -3, "write fast", group="hash", since="2.0.0",
         acl="hash", keys="RW DELETE", logs=("HDEL",),
         effect="HDEL key field [field ...]",
         summary="Deletes one or more fields and their values from a hash.", syntax="key field...")
def hdel(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    h = hash_for_write(ctx, key)
    if h is None:
        return 0
    removed = [field for field in argv[2:] if h.delete(field)]
    if not removed:
        return 0
    ctx.emit(hdel_effect(key, removed))
    _fields_removed(ctx, key, h, b"hdel")
    return len(removed)


# --- HINCRBY / HINCRBYFLOAT ----------------------------------------------------------------------


@command("hincrby", 4, "write denyoom fast", group="hash", since="2.0.0",
         acl="hash", keys="RW ACCESS UPDATE", logs=("HDEL", "HINCRBY"),
         effect="HINCRBY key field increment",
         summary="Increments the integer value of a field in a hash by a number. Uses 0 as "
                 "initial value if the field doesn't exist.",
         syntax="key field increment:integer")
def hincrby(ctx: Ctx, argv: Argv) -> int:
    key, field = argv[1], argv[2]
    increment = parse_int(argv[3])  # (parsed before the lookup, as Redis does)
    h = hash_for_write(ctx, key)
    if h is None:
        h = Hash(limits_of(ctx))
        total = h.incr_by(field, increment)  # (raises before the key exists)
        ctx.space(_SLOT)[key] = stored(h)
        ctx.notify(NEW, b"new", key)
    else:
        total = h.incr_by(field, increment)
    ctx.signal(key)
    ctx.emit(hincrby_effect(key, field, increment))
    ctx.notify(HASH_EVENTS, b"hincrby", key)
    return total


@command("hincrbyfloat", 4, "write denyoom fast", group="hash", since="2.6.0",
         acl="hash", keys="RW ACCESS UPDATE", logs=("HDEL", "HSET", "HSETEX"),
         summary="Increments the floating point value of a field by a number. Uses 0 as "
                 "initial value if the field doesn't exist.",
         syntax="key field increment:double")
def hincrbyfloat(ctx: Ctx, argv: Argv) -> bytes:
    key, field = argv[1], argv[2]
    increment = parse_long_double(argv[3])
    if increment is None:
        raise ReplyError(NOT_FLOAT)
    if not is_finite(increment):
        raise ReplyError(NAN_OR_INF)
    h = hash_for_write(ctx, key)
    if h is None:
        h = Hash(limits_of(ctx))
        text = h.incr_by_float(field, increment)
        ctx.space(_SLOT)[key] = stored(h)
        ctx.notify(NEW, b"new", key)
    else:
        text = h.incr_by_float(field, increment)
    ctx.signal(key)
    if h.field_expiry(field) is not None:
        ctx.emit(hsetex_effect(key, None, [(field, text)]))
    else:
        ctx.emit(hset_effect(key, [(field, text)]))
    ctx.notify(HASH_EVENTS, b"hincrbyfloat", key)
    return text


# --- HRANDFIELD ----------------------------------------------------------------------------------


@command("hrandfield", -2, "readonly", group="hash", since="6.2.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns one or more random fields from a hash.",
         syntax="key [options: count:integer [WITHVALUES]]")
def hrandfield(ctx: Ctx, argv: Argv) -> object:
    if len(argv) >= 3:
        count = parse_int(argv[2])
        if count < -LLONG_MAX:
            raise ReplyError("ERR value is out of range, value must between "
                             f"{-LLONG_MAX} and {LLONG_MAX}")
        if len(argv) > 4 or (len(argv) == 4 and not is_word(argv[3], b"withvalues")):
            raise ReplyError(SYNTAX)
        with_values = len(argv) == 4
        if with_values and not -(LLONG_MAX // 2) <= count <= LLONG_MAX // 2:
            raise ReplyError("ERR value is out of range")
        return _hrandfield_count(ctx, argv[1], count, with_values)
    h = hash_for_read(ctx, argv[1])
    if h is None:
        return None
    picks = _live_random(ctx, h, 1, False)
    return picks[0] if picks else None


def _live_random(ctx: Ctx, h: Hash, count: int, with_values: bool) -> list[bytes]:
    if not hidden_fields(ctx, h):
        return h.random_fields(count, with_values, _RNG)
    # A replica's hash with due fields: pick among the visible ones.
    visible = Hash(h.limits)
    visible.set_many(live_items(ctx, h))
    return visible.random_fields(count, with_values, _RNG)


def _hrandfield_count(ctx: Ctx, key: bytes, count: int, with_values: bool) -> object:
    h = hash_for_read(ctx, key)
    if h is None:
        return []
    if not with_values:
        return random_picks(ctx, count, lambda k: _live_random(ctx, h, k, False),
                            pool=lambda: [f for f, _v in live_items(ctx, h)], size=len(h),
                            rng=_RNG)
    pairs = random_picks(ctx, count, lambda k: _paired(_live_random(ctx, h, k, True)),
                         pool=lambda: live_items(ctx, h), size=len(h), rng=_RNG,
                         weigh=pair_len, framing=2 * BULK_LEAST)
    if not isinstance(pairs, list):  # (cut: as it is)
        return pairs
    if resp3(ctx):
        return [list(pair) for pair in pairs]
    return [x for pair in pairs for x in pair]


def _paired(flat: list[bytes]) -> list[tuple[bytes, bytes]]:
    return list(zip(flat[::2], flat[1::2], strict=True))


# --- HSCAN ---------------------------------------------------------------------------------------


@command("hscan", -3, "readonly", group="hash", since="2.8.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Iterates over fields and values of a hash.",
         syntax="key cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [NOVALUES]")
def hscan(ctx: Ctx, argv: Argv) -> list:
    cursor = parse_u64(argv[2])
    if cursor is None:
        raise ReplyError("ERR invalid cursor")
    h = hash_for_read(ctx, argv[1])
    count, pattern, no_values = parse_element_scan(argv, novalues_allowed=True)
    if h is None:
        return [b"0", []]
    next_cursor, page = h.scan(cursor, count)
    hidden = hidden_fields(ctx, h)
    out: list[bytes] = []
    for field, value in page:
        if field in hidden or (pattern is not None and not stringmatchlen(pattern, field)):
            continue
        out.append(field)
        if not no_values:
            out.append(value)
    return [b"%d" % next_cursor, out]


__all__ = ["adopt_limits", "create_hash", "expire_due_fields", "hash_for_read", "hash_for_write",
           "hidden_fields", "limits_of", "live_get", "live_items", "may_expire_fields", "resp3",
           "track", "tracked"]
