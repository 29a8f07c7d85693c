"""Hash field expiry (Redis 7.4+ and 8.0): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HTTL,
HPTTL, HEXPIRETIME, HPEXPIRETIME, HPERSIST, HGETDEL, HGETEX and HSETEX; and the active expiry
of one hash's due fields, which the active cycle's sub-key pass runs (engine.commands.expiry's
`active_expire_subkeys`).

Owns these commands' parsing (Redis 8's t_hash.c: option order, the FIELDS block, error line
for error line), replies, effects and keyspace events. Times are absolute Unix ms in the hash
(engine.model.hashes), at most 2^46 - 1 (Redis's HFE_MAX_ABS_TIME_MSEC).

Effects are deterministic as for key expiry (engine.commands.expiry): a relative time is
logged absolute, `HPEXPIREAT key ms FIELDS n field ...` of the fields whose TTL was set; a
time already past deletes the fields and logs `HDEL` (never while applying effects or for a
redis-server primary's commands: a replica keeps the TTL and waits for the primary's HDEL);
HPERSIST logs the fields it persisted; HGETDEL logs `HDEL`; HGETEX logs `HPEXPIREAT`,
`HPERSIST` or `HDEL` as Redis propagates it; HSETEX logs `HSETEX key PXAT ms | KEEPTTL FIELDS
...` (or `HSET` without a TTL option), `HDEL` when its time was past. Expired fields, lazily
(engine.commands.hashes) or actively (here), are logged as `HDEL` and notified `hexpired`,
then `del` when the hash went.

Must not touch: the hash's internals (through Hash's API), other types' values, the keys'
own TTLs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamkeep.engine.commands.expiry import SUBKEY_EXPIRERS, expire_time_error
from streamkeep.engine.commands.hashes import (
    create_hash,
    expire_due_fields,
    hash_for_read,
    hash_for_write,
    live_get,
    may_expire_fields,
    set_pairs,
    track,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import already_expired, delete_key
from streamkeep.engine.exec.notify import GENERIC
from streamkeep.engine.exec.notify import HASH as HASH_EVENTS
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    hdel_effect,
    hpersist_effect,
    hpexpireat_effect,
    hset_effect,
    hsetex_effect,
)
from streamkeep.engine.model.hashes import Hash
from streamkeep.engine.model.value_types import HASH
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import ReplyError, wrong_arity

if TYPE_CHECKING:
    pass

MAX_FIELD_TIME_MS = ((1 << 48) - 1) >> 2  # HFE_MAX_ABS_TIME_MSEC
FIELDS_MISSING = "ERR Mandatory argument FIELDS is missing or not at the right position"
NUMFIELDS_MISMATCH = "ERR The `numfields` parameter must match the number of arguments"
NUMFIELDS_POSITIVE = "Number of fields must be a positive integer"
NUMFIELDS_HEXPIRE = "Parameter `numFields` should be greater than 0"
NEGATIVE_TIME = "ERR invalid expire time, must be >= 0"

# Per-field replies (Redis's HSETEX_* / HFE_GET_* / HFE_PERSIST_*).
NO_FIELD, NOT_MET, SET_OK, DELETED = -2, 0, 1, 2
NO_TTL = -1

_NX, _XX, _GT, _LT = 1, 2, 4, 8
_CONDITIONS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT}


# --- parsing ---------------------------------------------------------------------------------------


def parse_fields(argv: Argv, at: int, count_line: str) -> list[bytes]:
    """The `FIELDS numfields field ...` block whose count is argv[at] and runs to the end."""
    if at - 1 >= len(argv) or not is_word(argv[at - 1], b"fields"):
        raise ReplyError(FIELDS_MISSING)
    if at >= len(argv):
        raise ReplyError(f"ERR {count_line}")
    count = parse_int(argv[at], count_line)
    if count < 1:
        raise ReplyError(f"ERR {count_line}")
    if count != len(argv) - at - 1:
        raise ReplyError(NUMFIELDS_MISMATCH)
    return list(argv[at + 1:])


def parse_field_time(ctx: Ctx, arg: bytes, name: str, base: int, unit_ms: int) -> int:
    """parseExpireTime: an absolute time in ms from a relative or absolute, s or ms, argument."""
    value = parse_int(arg)
    if value < 0:
        raise ReplyError(NEGATIVE_TIME)
    if unit_ms == 1000:
        if value > MAX_FIELD_TIME_MS // 1000:
            raise expire_time_error(name)
        value *= 1000
    if value > MAX_FIELD_TIME_MS - base:
        raise expire_time_error(name)
    return value + base


def _ttl_condition_fails(flags: int, when: int, current: int | None) -> bool:
    """hashTypeSetEx's NX/XX/GT/LT (no TTL counts as an infinite one)."""
    if current is None:
        return bool(flags & (_XX | _GT))
    return bool((flags & _GT and current >= when) or (flags & _LT and current <= when)
                or flags & _NX)


# --- setting TTLs ----------------------------------------------------------------------------------


class _Changes:
    """What a field-expiry write did to one hash: fields given a TTL, fields deleted."""

    __slots__ = ("updated", "deleted")

    def __init__(self) -> None:
        self.updated: list[bytes] = []
        self.deleted: list[bytes] = []


def _set_ttl(ctx: Ctx, h: Hash, field: bytes, when: int, flags: int, changes: _Changes) -> int:
    """hashTypeSetEx for one field: its reply (-2, 0, 1 or 2)."""
    if h.get(field) is None:
        return NO_FIELD
    if flags and _ttl_condition_fails(flags, when, h.field_expiry(field)):
        return NOT_MET
    if already_expired(ctx, when):
        h.delete(field)
        changes.deleted.append(field)
        return DELETED
    h.set_field_expiry(field, when)
    changes.updated.append(field)
    return SET_OK


def _ttls_done(ctx: Ctx, key: bytes, h: Hash, changes: _Changes, when: int,
               event_when_set: bytes = b"hexpire") -> None:
    """hashTypeSetExDone: effects (HDEL of deleted fields, HPEXPIREAT of the others), events,
    the emptied hash deleted, the registry kept."""
    if changes.deleted:
        ctx.emit(hdel_effect(key, changes.deleted))
    if changes.updated:
        ctx.emit(hpexpireat_effect(key, when, changes.updated))
    if not changes.deleted and not changes.updated:
        track(ctx, key, h)
        return
    if changes.deleted and not len(h):
        delete_key(ctx, key)
        track(ctx, key, None)
        ctx.notify(HASH_EVENTS, b"hdel", key)
        ctx.notify(GENERIC, b"del", key)
        return
    ctx.signal(key)
    track(ctx, key, h)
    ctx.notify(HASH_EVENTS, b"hdel" if changes.deleted else event_when_set, key)


# --- HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT -------------------------------------------------


def _hexpire(ctx: Ctx, argv: Argv, name: str, relative: bool, unit_ms: int) -> list[int]:
    key = argv[1]
    h = hash_for_write(ctx, key)
    when = parse_field_time(ctx, argv[2], name, ctx.now if relative else 0, unit_ms)
    flags = _CONDITIONS.get(argv[3].lower(), 0)
    at = 5 if flags else 4
    fields = parse_fields(argv, at, NUMFIELDS_HEXPIRE)
    if h is None:
        return [NO_FIELD] * len(fields)
    h.prepare_field_expiry()
    changes = _Changes()
    replies = [_set_ttl(ctx, h, field, when, flags, changes) for field in fields]
    _ttls_done(ctx, key, h, changes, when)
    return replies


_HEXPIRE_SYNTAX = ("key {}:integer [condition: NX | XX | GT | LT] "
                   "<fields: FIELDS numfields:integer field...>")


@command("hexpire", -6, "write denyoom fast", group="hash", since="7.4.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HPEXPIREAT"),
         summary="Set expiry for hash field using relative time to expire (seconds)",
         syntax=_HEXPIRE_SYNTAX.format("seconds"))
def hexpire(ctx: Ctx, argv: Argv) -> list[int]:
    return _hexpire(ctx, argv, "hexpire", True, 1000)


@command("hpexpire", -6, "write denyoom fast", group="hash", since="7.4.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HPEXPIREAT"),
         summary="Set expiry for hash field using relative time to expire (milliseconds)",
         syntax=_HEXPIRE_SYNTAX.format("milliseconds"))
def hpexpire(ctx: Ctx, argv: Argv) -> list[int]:
    return _hexpire(ctx, argv, "hpexpire", True, 1)


@command("hexpireat", -6, "write denyoom fast", group="hash", since="7.4.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HPEXPIREAT"),
         summary="Set expiry for hash field using an absolute Unix timestamp (seconds)",
         syntax=_HEXPIRE_SYNTAX.format("unix-time-seconds"))
def hexpireat(ctx: Ctx, argv: Argv) -> list[int]:
    return _hexpire(ctx, argv, "hexpireat", False, 1000)


@command("hpexpireat", -6, "write denyoom fast", group="hash", since="7.4.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HPEXPIREAT"),
         effect="HPEXPIREAT key unix-time-milliseconds FIELDS numfields field [field ...]",
         summary="Set expiry for hash field using an absolute Unix timestamp (milliseconds)",
         syntax=_HEXPIRE_SYNTAX.format("unix-time-milliseconds"))
def hpexpireat(ctx: Ctx, argv: Argv) -> list[int]:
    return _hexpire(ctx, argv, "hpexpireat", False, 1)


# --- HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME -----------------------------------------------------


def _httl(ctx: Ctx, argv: Argv, relative: bool, in_ms: bool) -> list[int]:
    h = hash_for_read(ctx, argv[1])
    fields = parse_fields(argv, 3, NUMFIELDS_POSITIVE)
    if h is None:
        return [NO_FIELD] * len(fields)
    base = ctx.now if relative else 0
    out = []
    for field in fields:
        if live_get(ctx, h, field) is None:
            out.append(NO_FIELD)
            continue
        when = h.field_expiry(field)
        if when is None:
            out.append(NO_TTL)
        elif in_ms:
            out.append(when - base)
        else:
            out.append((when + 999 - base) // 1000)
    return out


_FIELDS_SYNTAX = "key <fields: FIELDS numfields:integer field...>"


@command("httl", -5, "readonly fast", group="hash", since="7.4.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the TTL in seconds of a hash field.", syntax=_FIELDS_SYNTAX)
def httl(ctx: Ctx, argv: Argv) -> list[int]:
    return _httl(ctx, argv, relative=True, in_ms=False)


@command("hpttl", -5, "readonly fast", group="hash", since="7.4.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the TTL in milliseconds of a hash field.", syntax=_FIELDS_SYNTAX)
def hpttl(ctx: Ctx, argv: Argv) -> list[int]:
    return _httl(ctx, argv, relative=True, in_ms=True)


@command("hexpiretime", -5, "readonly fast", group="hash", since="7.4.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the expiration time of a hash field as a Unix timestamp, in "
                 "seconds.",
         syntax=_FIELDS_SYNTAX)
def hexpiretime(ctx: Ctx, argv: Argv) -> list[int]:
    return _httl(ctx, argv, relative=False, in_ms=False)


@command("hpexpiretime", -5, "readonly fast", group="hash", since="7.4.0",
         acl="hash", keys="RO ACCESS", logs=("HDEL",),
         summary="Returns the expiration time of a hash field as a Unix timestamp, in "
                 "msec.",
         syntax=_FIELDS_SYNTAX)
def hpexpiretime(ctx: Ctx, argv: Argv) -> list[int]:
    return _httl(ctx, argv, relative=False, in_ms=True)


# --- HPERSIST ------------------------------------------------------------------------------------


@command("hpersist", -5, "write fast", group="hash", since="7.4.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HPERSIST"),
         effect="HPERSIST key FIELDS numfields field [field ...]",
         summary="Removes the expiration time for each specified field", syntax=_FIELDS_SYNTAX)
def hpersist(ctx: Ctx, argv: Argv) -> list[int]:
    key = argv[1]
    h = hash_for_write(ctx, key)
    fields = parse_fields(argv, 3, NUMFIELDS_POSITIVE)
    if h is None:
        return [NO_FIELD] * len(fields)
    out = []
    persisted: list[bytes] = []
    for field in fields:
        if live_get(ctx, h, field) is None:
            out.append(NO_FIELD)
        elif h.persist_field(field):
            persisted.append(field)
            out.append(SET_OK)
        else:
            out.append(NO_TTL)
    if persisted:
        ctx.emit(hpersist_effect(key, persisted))
        ctx.notify(HASH_EVENTS, b"hpersist", key)
        ctx.signal(key)
        track(ctx, key, h)
    return out


# --- HGETDEL -------------------------------------------------------------------------------------


@command("hgetdel", -5, "write fast", group="hash", since="8.0.0",
         acl="hash", keys="RW ACCESS DELETE", logs=("HDEL",),
         summary="Returns the value of a field and deletes it from the hash.",
         syntax=_FIELDS_SYNTAX)
def hgetdel(ctx: Ctx, argv: Argv) -> list[bytes | None]:
    key = argv[1]
    h = hash_for_write(ctx, key)
    fields = parse_fields(argv, 3, NUMFIELDS_POSITIVE)
    if h is None:
        return [None] * len(fields)
    out: list[bytes | None] = []
    deleted: list[bytes] = []
    for field in fields:
        value = h.get(field)
        out.append(value)
        if value is not None:
            h.delete(field)
            deleted.append(field)
    if deleted:
        ctx.emit(hdel_effect(key, deleted))
        ctx.notify(HASH_EVENTS, b"hdel", key)
        if not len(h):
            delete_key(ctx, key)
            ctx.notify(GENERIC, b"del", key)
            track(ctx, key, None)
        else:
            ctx.signal(key)
            track(ctx, key, h)
    return out


# --- HGETEX --------------------------------------------------------------------------------------

_TIME_OPTIONS = {b"ex": (True, 1000), b"px": (True, 1), b"exat": (False, 1000),
                 b"pxat": (False, 1)}


@command("hgetex", -5, "write fast", group="hash", since="8.0.0",
         acl="hash", keys="RW ACCESS UPDATE", key_notes="RW and UPDATE because it changes the TTL",
         logs=("HDEL", "HPERSIST", "HPEXPIREAT"),
         summary="Get the value of one or more fields of a given hash key, and optionally set "
                 "their expiration.",
         syntax="key [expiration: EX seconds:integer | PX milliseconds:integer | "
                "EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | "
                "PERSIST] <fields: FIELDS numfields:integer field...>")
def hgetex(ctx: Ctx, argv: Argv) -> list[bytes | None]:
    key = argv[1]
    h = hash_for_write(ctx, key)
    option = argv[2].lower()
    timed = _TIME_OPTIONS.get(option)
    persist = option == b"persist"
    when = 0
    at = 3
    if timed is not None:
        relative, unit_ms = timed
        when = parse_field_time(ctx, argv[3], "hgetex", ctx.now if relative else 0, unit_ms)
        at = 5
    elif persist:
        at = 4
    fields = parse_fields(argv, at, NUMFIELDS_POSITIVE)
    if h is None:
        return [None] * len(fields)
    if timed is not None or persist:
        h.prepare_field_expiry()
    out: list[bytes | None] = []
    changes = _Changes()
    for field in fields:
        value = h.get(field)
        out.append(value)
        if value is None:
            continue
        if persist:
            h.persist_field(field)
            changes.updated.append(field)
        elif timed is not None:
            _set_ttl(ctx, h, field, when, 0, changes)
    if persist:
        if changes.updated:
            ctx.emit(hpersist_effect(key, changes.updated))
            ctx.notify(HASH_EVENTS, b"hpersist", key)
            ctx.signal(key)
            track(ctx, key, h)
    elif timed is not None:
        _ttls_done(ctx, key, h, changes, when)
    return out


# --- HSETEX --------------------------------------------------------------------------------------

_FNX, _FXX, _KEEPTTL = 1, 2, 4


def _hsetex_args(ctx: Ctx, argv: Argv) -> tuple[int, int | None, int]:
    """hsetexParseArgs: (FNX/FXX/KEEPTTL flags, the absolute time or None, where the pairs
    start)."""
    flags = 0
    when: int | None = None
    i = 2
    while i < len(argv):
        word = argv[i].lower()
        if word == b"fields":
            if i >= len(argv) - 3:
                raise wrong_arity("hsetex")
            count = parse_int(argv[i + 1], "invalid number of fields")
            if not 1 <= count <= (1 << 31) - 1:
                raise ReplyError("ERR invalid number of fields")
            remaining = len(argv) - i - 2
            if remaining % 2 or count != remaining // 2:
                raise wrong_arity("hsetex")
            return flags, when, i + 2
        timed = _TIME_OPTIONS.get(word)
        if timed is not None or word == b"keepttl":
            if when is not None or flags & _KEEPTTL:
                raise ReplyError("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments "
                                 "can be specified")
            if timed is None:
                flags |= _KEEPTTL
            else:
                if i >= len(argv) - 1:
                    raise ReplyError("ERR missing expire time")
                relative, unit_ms = timed
                i += 1
                when = parse_field_time(ctx, argv[i], "hsetex", ctx.now if relative else 0,
                                        unit_ms)
        elif word in (b"fnx", b"fxx"):
            if flags & (_FNX | _FXX):
                raise ReplyError("ERR Only one of FXX or FNX arguments can be specified")
            flags |= _FNX if word == b"fnx" else _FXX
        else:
            raise ReplyError(f"ERR unknown argument: {argv[i].decode('utf-8', 'replace')}")
        i += 1
    raise wrong_arity("hsetex")


@command("hsetex", -6, "write denyoom fast", group="hash", since="8.0.0",
         acl="hash", keys="RW UPDATE", logs=("HDEL", "HSET", "HSETEX"),
         effect="HSETEX key [PXAT unix-time-milliseconds | KEEPTTL] FIELDS numfields field value "
                "[field value ...]",
         summary="Set the value of one or more fields of a given hash key, and optionally set "
                 "their expiration.",
         syntax="key [condition: FNX | FXX] [expiration: EX seconds:integer | "
                "PX milliseconds:integer | EXAT unix-time-seconds:unix-time | "
                "PXAT unix-time-milliseconds:unix-time | KEEPTTL] "
                "<fields: FIELDS numfields:integer <data: field value>...>")
def hsetex(ctx: Ctx, argv: Argv) -> int:
    flags, when, first = _hsetex_args(ctx, argv)
    key = argv[1]
    h = hash_for_write(ctx, key)
    pairs = [(argv[i], argv[i + 1]) for i in range(first, len(argv), 2)]
    if h is None:
        if flags & _FXX:
            return 0
        h = create_hash(ctx, key)
    if flags & (_FNX | _FXX):
        found = sum(1 for field, _v in pairs if h.get(field) is not None)
        if (flags & _FNX and found) or (flags & _FXX and found != len(pairs)):
            if not len(h):
                delete_key(ctx, key)
                ctx.notify(GENERIC, b"del", key)
            return 0
    keep = when is not None or bool(flags & _KEEPTTL)
    if keep:
        had = h.has_field_expiry()
        for field, value in pairs:
            h.set(field, value, keep_ttl=True)
        if had:
            track(ctx, key, h)
        ctx.signal(key)
    else:
        set_pairs(ctx, key, h, pairs)
    ctx.notify(HASH_EVENTS, b"hset", key)
    if when is None:
        ctx.emit(hsetex_effect(key, None, pairs) if keep else hset_effect(key, pairs))
        return 1
    changes = _Changes()
    h.prepare_field_expiry()
    for field, _value in pairs:
        _set_ttl(ctx, h, field, when, 0, changes)
    if changes.deleted:
        ctx.emit(hdel_effect(key, changes.deleted))
        if not len(h):
            delete_key(ctx, key)
            track(ctx, key, None)
            ctx.notify(HASH_EVENTS, b"hdel", key)
            ctx.notify(GENERIC, b"del", key)
            return 1
        ctx.notify(HASH_EVENTS, b"hdel", key)
    else:
        ctx.emit(hsetex_effect(key, when, pairs))
        ctx.notify(HASH_EVENTS, b"hexpire", key)
    track(ctx, key, h)
    return 1


# --- active expiry -------------------------------------------------------------------------------


def _expire_fields(ctx: Ctx, key: bytes, value: object, budget: int) -> int:
    """The active cycle's sub-key pass, for one hash whose earliest field TTL is past
    (engine.commands.expiry's `active_expire_subkeys`): at most `budget` due fields deleted,
    logged as one HDEL; the hash back in the index when fields with TTLs are left. Returns how
    many fields went."""
    if not isinstance(value, Hash) or not value.has_field_expiry() or not may_expire_fields(ctx):
        return 0  # (a stale entry: the key went or changed)
    removed = expire_due_fields(ctx, key, value, ctx.now, budget) if budget > 0 else 0
    if len(value):
        track(ctx, key, value)  # back in the index, due again if fields are left over
    return removed


SUBKEY_EXPIRERS[HASH.slot] = _expire_fields
