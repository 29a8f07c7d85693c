"""String commands: GET, SET (NX, XX, IFEQ, IFNE, IFDEQ, IFDNE, GET, EX, PX, EXAT, PXAT,
KEEPTTL), SETNX, SETEX, PSETEX, GETSET, GETDEL, GETEX, MGET, MSET, MSETNX, MSETEX, INCR, DECR,
INCRBY, DECRBY, INCRBYFLOAT, APPEND, STRLEN, DIGEST, DELEX (GETRANGE, SETRANGE and LCS are
engine.commands.string_ranges').

Owns these commands' parsing (Redis's t_string.c, option for option and error for error),
replies, effects and keyspace notifications. Values live in the selected database's
`ctx.strings`, TTLs in `ctx.expires` (engine.exec.keys explains the keyspace,
engine.commands.expiry how keys expire). Every write logs the value it left, never the arithmetic that made it: `SET key value`
(the TTL dropped), `SET key value KEEPTTL` (INCR, a SET KEEPTTL) or `SET key value PXAT
ms` (a SET with a relative or absolute time), so replay never re-parses a number or reads a
clock; APPEND logs itself (the tail, not the value it grew); a conditional write (NX, XX, IF*, MSETNX, MSETEX, DELEX) logs what it did, never its
condition.

Redis 8.4's compare-and-set: IFEQ/IFNE compare the value, IFDEQ/IFDNE its digest, the XXH3
64-bit hash of the value as 16 lowercase hex digits (DIGEST's reply; engine.model.strings), a
digest argument compared case-insensitively and refused unless 16 characters long. Must not
touch: stream internals (a SET over a stream key drops it whole), I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamkeep.engine.commands.expiry import expire_time_error, remove_expiry, set_expiry
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.key_specs import Keys
from streamkeep.engine.exec.keys import (
    already_expired,
    delete_key,
    drop_other_types,
    held_elsewhere,
    key_type,
    read_hit,
    read_miss,
    read_value,
    refuse_other_types,
)
from streamkeep.engine.exec.notify import (
    EXPIRED,
    GENERIC,
    NEW,
    OVERWRITTEN,
    STRING,
    TYPE_CHANGED,
)
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import append_effect, del_effect, set_effect
from streamkeep.engine.model.strings import (
    DIGEST_LENGTH,
    add_long_double,
    format_long_double,
    parse_long_double,
    value_digest,
)
from streamkeep.engine.model.value_types import STRING as STRING_TYPE
from streamkeep.engine.wire.args import LLONG_MAX, LLONG_MIN, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, wrong_arity

NOT_FLOAT = "ERR value is not a valid float"
TOO_BIG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
BAD_DIGEST = "ERR must be exactly 16 hexadecimal characters"
INT_MAX = (1 << 31) - 1  # MSETEX's numkeys at most


# --- reading and writing a string ------------------------------------------------------------------


def get_string(ctx: Ctx, key: bytes) -> bytes | None:
    """lookupKeyRead + checkType(OBJ_STRING): the value, None if missing, WRONGTYPE if
    another type."""
    value = ctx.strings.get(key)
    if value is None:
        refuse_other_types(ctx, key, STRING_TYPE.slot)
    return value


def read_string(ctx: Ctx, key: bytes) -> bytes | None:
    """get_string for a read command (lookupKeyRead): a keyspace hit or miss (another type
    is a hit, then WRONGTYPE); a missing key notifies `keymiss`."""
    value: bytes | None = read_value(ctx, key, STRING_TYPE)
    return value


def store(ctx: Ctx, key: bytes, value: bytes, keep_ttl: bool = False) -> None:
    """setKey: the value replaces a key of any type; its TTL goes unless `keep_ttl` (no
    effect logged, nothing notified: the caller logs what the command amounted to and, while
    notifications are on, calls `stored_events`)."""
    strings = ctx.strings
    if key not in strings:  # (a string overwritten: no other type can hold the key)
        drop_other_types(ctx.engine, ctx.session.db, key, STRING_TYPE.slot)
    strings[key] = value
    if not keep_ttl:
        ctx.expires.pop(key, None)
    ctx.signal(key)


def stored_events(ctx: Ctx, key: bytes, prior: str | None, event: bytes,
                  overwrite: bool = True, expire: bool = False,
                  expire_first: bool = False) -> None:
    """The keyspace events of a string write, after it (the caller tests notify_flags once):
    dbAdd's `new` when the key did not exist (`prior`, its type before), else, for a value
    replaced whole (`overwrite`: the SET family; INCR, APPEND, SETRANGE change it in place),
    `overwritten` and, over a stream, `type_changed`; then `event` and, for a time given,
    `expire` (before `event` for MSETEX, as Redis orders them)."""
    if prior is None:
        ctx.notify(NEW, b"new", key)
    elif overwrite:
        ctx.notify(OVERWRITTEN, b"overwritten", key)
        if prior != "string":
            ctx.notify(TYPE_CHANGED, b"type_changed", key)
    if expire and expire_first:
        ctx.notify(GENERIC, b"expire", key)
    ctx.notify(STRING, event, key)
    if expire and not expire_first:
        ctx.notify(GENERIC, b"expire", key)


# --- GET / SET --------------------------------------------------------------------------------------


@command("get", 2, "readonly fast", group="string", since="1.0.0",
         acl="string", keys="RO ACCESS",
         summary="Returns the string value of a key.", syntax="key")
def get(ctx: Ctx, argv: Argv) -> bytes | None:
    return read_string(ctx, argv[1])


_SET, _GETEX, _MSETEX = 0, 1, 2
_NX, _XX, _GET, _KEEPTTL, _PERSIST = 1, 2, 4, 8, 16
_EX, _PX, _EXAT, _PXAT = 32, 64, 128, 256
_IFEQ, _IFNE, _IFDEQ, _IFDNE = 512, 1024, 2048, 4096
_ANY_TIME = _EX | _PX | _EXAT | _PXAT
_ANY_IF = _IFEQ | _IFNE | _IFDEQ | _IFDNE
_CONDITIONS = _NX | _XX | _ANY_IF
_TIME_UNITS = {b"ex": (_EX, 1000), b"px": (_PX, 1), b"exat": (_EXAT, 1000), b"pxat": (_PXAT, 1)}
_IF_OPTIONS = {b"ifeq": _IFEQ, b"ifne": _IFNE, b"ifdeq": _IFDEQ, b"ifdne": _IFDNE}
# The time options' syntax, as SET, GETEX and MSETEX document them.
_TIMES = ("EX seconds:integer | PX milliseconds:integer | EXAT unix-time-seconds:unix-time | "
          "PXAT unix-time-milliseconds:unix-time")


class SetArgs:
    """parseExtendedStringArgumentsOrReply's result: the flags, the time argument and its
    unit in ms, and an IF* condition's value or digest."""

    __slots__ = ("flags", "time_arg", "unit_ms", "match")

    def __init__(self) -> None:
        self.flags = 0
        self.time_arg: bytes | None = None
        self.unit_ms = 1
        self.match = b""


def _parse_set_options(argv: Argv, start: int, kind: int) -> SetArgs:
    """parseExtendedStringArgumentsOrReply for SET (kind _SET), GETEX (kind _GETEX) and
    MSETEX's options (kind _MSETEX): the conditions exclude one another (a repeated one takes
    its last value), as the times do."""
    args = SetArgs()
    j = start
    while j < len(argv):
        opt = argv[j].lower()
        flags = args.flags
        has_next = j + 1 < len(argv)
        unit = _TIME_UNITS.get(opt)
        condition = _IF_OPTIONS.get(opt)
        if opt == b"nx" and kind != _GETEX and not flags & (_CONDITIONS & ~_NX):
            args.flags |= _NX
        elif opt == b"xx" and kind != _GETEX and not flags & (_CONDITIONS & ~_XX):
            args.flags |= _XX
        elif (condition is not None and kind == _SET and has_next
              and not flags & (_CONDITIONS & ~condition)):
            args.flags |= condition
            args.match = argv[j + 1]
            j += 1
        elif opt == b"get" and kind == _SET:
            args.flags |= _GET
        elif opt == b"keepttl" and kind != _GETEX and not flags & (_PERSIST | _ANY_TIME):
            args.flags |= _KEEPTTL
        elif opt == b"persist" and kind == _GETEX and not flags & (_ANY_TIME | _KEEPTTL):
            args.flags |= _PERSIST
        elif (unit is not None and has_next
              and not flags & (_KEEPTTL | _PERSIST | (_ANY_TIME & ~unit[0]))):
            args.flags |= unit[0]
            args.time_arg, args.unit_ms = argv[j + 1], unit[1]
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    return args


def expire_time_ms(ctx: Ctx, time_arg: bytes, unit_ms: int, relative: bool, name: str) -> int:
    """getExpireMillisecondsOrReply: an EX/PX (`relative`) or EXAT/PXAT argument, in seconds
    (`unit_ms` 1000) or ms, as an absolute time in ms; not positive or out of range: `invalid
    expire time in '<name>' command`."""
    when = parse_int(time_arg)
    if when <= 0 or (unit_ms == 1000 and when > LLONG_MAX // 1000):
        raise expire_time_error(name)
    when *= unit_ms
    if relative:
        when += ctx.now
        if when > LLONG_MAX:  # C's signed overflow, which Redis detects as a result <= 0
            raise expire_time_error(name)
    return when


def _expire_at(ctx: Ctx, args: SetArgs, name: str) -> int | None:
    """The absolute expiry time SET-like options give, None without one."""
    if args.time_arg is None:
        return None
    return expire_time_ms(ctx, args.time_arg, args.unit_ms, bool(args.flags & (_EX | _PX)), name)


def _condition_holds(ctx: Ctx, key: bytes, flags: int, match: bytes) -> bool:
    """An IF* condition against the key's current value (the key exists): WRONGTYPE unless it
    is a string; a digest argument must be 16 characters (compared case-insensitively)."""
    current = get_string(ctx, key)
    assert current is not None  # (the caller found the key; a stream raised WRONGTYPE)
    if flags & (_IFEQ | _IFNE):
        return (current == match) == bool(flags & _IFEQ)
    if len(match) != DIGEST_LENGTH:
        raise ReplyError(BAD_DIGEST)
    return (value_digest(current) == match.lower()) == bool(flags & _IFDEQ)


def _set_generic(ctx: Ctx, key: bytes, value: bytes, flags: int, when: int | None,
                 match: bytes = b"") -> bool:
    """setGenericCommand after parsing: False when NX/XX or an IF* condition refused it."""
    prior = key_type(ctx, key)
    found = prior is not None
    if (flags & _NX and found) or (flags & _XX and not found):
        return False
    if flags & _ANY_IF:
        if found:
            if not _condition_holds(ctx, key, flags, match):
                return False
        elif flags & (_IFEQ | _IFDEQ):  # only an existing value can be equal
            return False
    if when is not None and already_expired(ctx, when):
        # Redis stores it and lets it expire at once (`set`, `expire`, then `expired`); the key
        # is deleted here and now, and its DEL logged.
        if found:
            delete_key(ctx, key)
            ctx.emit(del_effect([key]))
        if ctx.engine.notify_flags:
            stored_events(ctx, key, prior, b"set", expire=True)
            ctx.notify(EXPIRED, b"expired", key)
        return True
    keep_ttl = bool(flags & _KEEPTTL)
    store(ctx, key, value, keep_ttl)
    if when is not None:
        ctx.expires[key] = when
    ctx.emit(set_effect(key, value, keep_ttl and key in ctx.expires, when))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, prior, b"set", expire=when is not None)
    return True


_SET_GET: Final = frozenset({"RW", "access", "update"})
_SET_PLAIN: Final = frozenset({"OW", "update"})


def set_keys(argv: Sequence[bytes]) -> Keys:
    """SET's key finder (Redis's setGetKeys): SET reads its key only with GET."""
    reads = any(arg.lower() == b"get" for arg in argv[3:])
    return [(1, _SET_GET if reads else _SET_PLAIN)]


@command("set", -3, "write denyoom", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE VARIABLE_FLAGS", key_finder=set_keys,
         key_notes="RW and ACCESS due to the optional `GET` argument", logs=("DEL", "SET"),
         effect="SET key value [KEEPTTL | PXAT unix-time-milliseconds]",
         summary="Sets the string value of a key, ignoring its type. The key is created if it "
                 "doesn't exist.",
         syntax="key value [condition: NX | XX | IFEQ ifeq-value | IFNE ifne-value | "
                f"IFDEQ ifdeq-digest | IFDNE ifdne-digest] [GET] [expiration: {_TIMES} | KEEPTTL]")
def set_(ctx: Ctx, argv: Argv) -> str | bytes | None:
    if len(argv) == 3:  # a plain SET (most of them): no option to parse, nothing to refuse
        key, value = argv[1], argv[2]
        engine, db = ctx.engine, ctx.session.db
        if engine.notify_flags:
            _set_generic(ctx, key, value, 0, None)
            return "OK"
        # store()'s steps, inline: a value of another type under that name goes whole
        strings = engine.strings[db]
        if key not in strings:  # (a string overwritten: no other type can hold the key)
            drop_other_types(engine, db, key, STRING_TYPE.slot)
        strings[key] = value
        expires = engine.expires[db]
        if expires:
            expires.pop(key, None)
        if engine.waiters:
            engine.waiters.signal(db, key)
        ctx.effects.append([b"SET", key, value])
        return "OK"
    args = _parse_set_options(argv, 3, _SET)
    when = _expire_at(ctx, args, "set")
    key = argv[1]
    old = read_string(ctx, key) if args.flags & _GET else None
    done = _set_generic(ctx, key, argv[2], args.flags, when, args.match)
    if args.flags & _GET:
        return old
    return "OK" if done else None


@command("setnx", 3, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="OW INSERT", logs=("SET",),
         summary="Set the string value of a key only when the key doesn't exist.",
         syntax="key value")
def setnx(ctx: Ctx, argv: Argv) -> int:
    return 1 if _set_generic(ctx, argv[1], argv[2], _NX, None) else 0


def _set_with_time(ctx: Ctx, argv: Argv, name: str, flag: int, unit_ms: int) -> str:
    args = SetArgs()
    args.flags, args.time_arg, args.unit_ms = flag, argv[2], unit_ms
    _set_generic(ctx, argv[1], argv[3], 0, _expire_at(ctx, args, name))
    return "OK"


@command("setex", 4, "write denyoom", group="string", since="2.0.0",
         acl="string", keys="OW UPDATE", logs=("SET",),
         summary="Sets the string value and expiration time of a key. Creates the key if it "
                 "doesn't exist.",
         syntax="key seconds:integer value")
def setex(ctx: Ctx, argv: Argv) -> str:
    return _set_with_time(ctx, argv, "setex", _EX, 1000)


@command("psetex", 4, "write denyoom", group="string", since="2.6.0",
         acl="string", keys="OW UPDATE", logs=("SET",),
         summary="Sets both string value and expiration time in milliseconds of a key. The key "
                 "is created if it doesn't exist.",
         syntax="key milliseconds:integer value")
def psetex(ctx: Ctx, argv: Argv) -> str:
    return _set_with_time(ctx, argv, "psetex", _PX, 1)


# --- GETSET / GETDEL / GETEX / MGET / MSET / MSETNX / MSETEX --------------------------------------


@command("getset", 3, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Returns the previous string value of a key after setting it to a new value.",
         syntax="key value")
def getset(ctx: Ctx, argv: Argv) -> bytes | None:
    key, value = argv[1], argv[2]
    old = read_string(ctx, key)
    store(ctx, key, value)  # (the TTL goes, as SET's)
    ctx.emit(set_effect(key, value))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, None if old is None else "string", b"set")
    return old


@command("getdel", 2, "write fast", group="string", since="6.2.0",
         acl="string", keys="RW ACCESS DELETE", logs=("DEL",),
         summary="Returns the string value of a key after deleting the key.", syntax="key")
def getdel(ctx: Ctx, argv: Argv) -> bytes | None:
    key = argv[1]
    value = read_string(ctx, key)
    if value is not None:
        delete_key(ctx, key)
        ctx.emit(del_effect([key]))
        ctx.notify(GENERIC, b"del", key)
    return value


@command("getex", -2, "write fast", group="string", since="6.2.0",
         acl="string", keys="RW ACCESS UPDATE",
         key_notes="RW and UPDATE because it changes the TTL",
         logs=("DEL", "PERSIST", "PEXPIREAT"),
         summary="Returns the string value of a key after setting its expiration time.",
         syntax=f"key [expiration: {_TIMES} | PERSIST]")
def getex(ctx: Ctx, argv: Argv) -> bytes | None:
    args = _parse_set_options(argv, 2, _GETEX)
    key = argv[1]
    value = read_string(ctx, key)
    if value is None:  # (Redis looks the key up before it reads the time)
        return None
    when = _expire_at(ctx, args, "getex")
    if when is not None:
        set_expiry(ctx, key, when)
    elif args.flags & _PERSIST:
        remove_expiry(ctx, key)
    return value


@command("mget", -2, "readonly fast", group="string", since="1.0.0",
         acl="string", keys="RO ACCESS @1 r-1,1,0",
         summary="Atomically returns the string values of one or more keys.", syntax="key...")
def mget(ctx: Ctx, argv: Argv) -> list[bytes | None]:
    strings = ctx.strings
    values = [strings.get(key) for key in argv[1:]]
    for key in argv[1:]:  # each a lookup: another type's key is a hit (and a nil)
        if key in strings or held_elsewhere(ctx.engine, ctx.session.db, key, STRING_TYPE.slot):
            read_hit(ctx)
        else:
            read_miss(ctx, key)
    return values


def _store_all(ctx: Ctx, pairs: Argv, when: int | None = None, keep_ttl: bool = False) -> None:
    """MSET's loop (MSETNX's and MSETEX's once their condition held): each key set in turn,
    with MSETEX's time (`expire` notified before `set`, as Redis's MSETEX does)."""
    notify = ctx.engine.notify_flags
    past = when is not None and already_expired(ctx, when)
    for i in range(0, len(pairs), 2):
        key, value = pairs[i], pairs[i + 1]
        prior = key_type(ctx, key) if notify else None
        if past:
            if delete_key(ctx, key):
                ctx.emit(del_effect([key]))
            if notify:
                stored_events(ctx, key, prior, b"set", expire=True, expire_first=True)
                ctx.notify(EXPIRED, b"expired", key)
            continue
        store(ctx, key, value, keep_ttl or when is not None)
        if when is not None:
            ctx.expires[key] = when
        ctx.emit(set_effect(key, value, keep_ttl and key in ctx.expires, when))
        if notify:
            stored_events(ctx, key, prior, b"set", expire=when is not None, expire_first=True)


@command("mset", -3, "write denyoom", group="string", since="1.0.1",
         acl="string", keys="OW UPDATE @1 r-1,2,0", logs=("SET",),
         summary="Atomically creates or modifies the string values of one or more keys.",
         syntax="<data: key value>...")
def mset(ctx: Ctx, argv: Argv) -> str:
    if len(argv) % 2 == 0:
        raise wrong_arity("mset")
    _store_all(ctx, argv[1:])
    return "OK"


@command("msetnx", -3, "write denyoom", group="string", since="1.0.1",
         acl="string", keys="OW INSERT @1 r-1,2,0", logs=("SET",),
         summary="Atomically modifies the string values of one or more keys only when all keys "
                 "don't exist.",
         syntax="<data: key value>...")
def msetnx(ctx: Ctx, argv: Argv) -> int:
    if len(argv) % 2 == 0:
        raise wrong_arity("msetnx")
    if any(key_type(ctx, argv[i]) is not None for i in range(1, len(argv), 2)):
        return 0
    _store_all(ctx, argv[1:])
    return 1


@command("msetex", -4, "write denyoom", group="string", since="8.4.0",
         acl="string", keys="OW UPDATE @1 n0,1,2", logs=("DEL", "SET"),
         summary="Atomically sets multiple string keys with a shared expiration in a single "
                 "operation. Supports flexible argument parsing where condition and expiration "
                 "flags can appear in any order.",
         syntax=f"numkeys:integer <data: key value>... [condition: NX | XX] "
                f"[expiration: {_TIMES} | KEEPTTL]")
def msetex(ctx: Ctx, argv: Argv) -> int:
    numkeys = parse_int(argv[1], "invalid numkeys value")
    if numkeys < 1 or numkeys > INT_MAX:
        raise ReplyError("ERR invalid numkeys value")
    end = 2 + 2 * numkeys
    if end > len(argv):
        raise ReplyError("ERR wrong number of key-value pairs")
    args = _parse_set_options(argv, end, _MSETEX)
    when = _expire_at(ctx, args, "msetex")
    pairs = argv[2:end]
    keys = pairs[::2]
    if args.flags & _NX and any(key_type(ctx, key) is not None for key in keys):
        return 0
    if args.flags & _XX and not all(key_type(ctx, key) is not None for key in keys):
        return 0
    _store_all(ctx, pairs, when, bool(args.flags & _KEEPTTL))
    return 1


# --- INCR / DECR / INCRBY / DECRBY / INCRBYFLOAT ---------------------------------------------------


def _incr_by(ctx: Ctx, key: bytes, increment: int) -> int:
    """incrDecrCommand: the value read as a strict int64 (NOT_INTEGER otherwise), the TTL kept."""
    old = get_string(ctx, key)
    value = 0 if old is None else parse_int(old)
    result = value + increment
    if not LLONG_MIN <= result <= LLONG_MAX:
        raise ReplyError("ERR increment or decrement would overflow")
    text = b"%d" % result
    store(ctx, key, text, keep_ttl=True)
    ctx.emit(set_effect(key, text, keep_ttl=key in ctx.expires))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, None if old is None else "string", b"incrby", overwrite=False)
    return result


@command("incr", 2, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Increments the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.",
         syntax="key")
def incr(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], 1)


@command("decr", 2, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Decrements the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.",
         syntax="key")
def decr(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], -1)


@command("incrby", 3, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Increments the integer value of a key by a number. Uses 0 as initial value if "
                 "the key doesn't exist.",
         syntax="key increment:integer")
def incrby(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], parse_int(argv[2]))


@command("decrby", 3, "write denyoom fast", group="string", since="1.0.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Decrements a number from the integer value of a key. Uses 0 as initial value "
                 "if the key doesn't exist.",
         syntax="key decrement:integer")
def decrby(ctx: Ctx, argv: Argv) -> int:
    decrement = parse_int(argv[2])
    if decrement == LLONG_MIN:
        raise ReplyError("ERR decrement would overflow")
    return _incr_by(ctx, argv[1], -decrement)


@command("incrbyfloat", 3, "write denyoom fast", group="string", since="2.6.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("SET",),
         summary="Increment the floating point value of a key by a number. Uses 0 as initial "
                 "value if the key doesn't exist.",
         syntax="key increment:double")
def incrbyfloat(ctx: Ctx, argv: Argv) -> bytes:
    key = argv[1]
    old = get_string(ctx, key)
    value = parse_long_double(b"0" if old is None else old)
    increment = parse_long_double(argv[2])
    if value is None or increment is None:
        raise ReplyError(NOT_FLOAT)
    total = add_long_double(value, increment)
    if total is None:
        raise ReplyError("ERR increment would produce NaN or Infinity")
    text = format_long_double(total)
    store(ctx, key, text, keep_ttl=True)
    ctx.emit(set_effect(key, text, keep_ttl=key in ctx.expires))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, None if old is None else "string", b"incrbyfloat",
                      overwrite=False)
    return text


# --- APPEND / STRLEN --------------------------------------------------------------------------------


@command("append", 3, "write denyoom fast", group="string", since="2.0.0",
         acl="string", keys="RW INSERT", logs=("APPEND",), effect="APPEND key value",
         summary="Appends a string to the value of a key. Creates the key if it doesn't exist.",
         syntax="key value")
def append(ctx: Ctx, argv: Argv) -> int:
    key, tail = argv[1], argv[2]
    old = get_string(ctx, key)
    if old is not None and len(old) + len(tail) > int(ctx.config["proto-max-bulk-len"]) \
            and not (ctx.replaying or ctx.session.from_primary):  # (Redis's mustObeyClient)
        raise ReplyError(TOO_BIG)
    value = tail if old is None else old + tail
    store(ctx, key, value, keep_ttl=True)
    # Logged as itself, as SETRANGE is: replayed in order it meets the same value, and a key
    # appended to n times costs the log n tails, not n values of growing size.
    ctx.emit(append_effect(key, tail))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, None if old is None else "string", b"append", overwrite=False)
    return len(value)


@command("strlen", 2, "readonly fast", group="string", since="2.2.0",
         acl="string", keys="RO",
         summary="Returns the length of a string value.", syntax="key")
def strlen(ctx: Ctx, argv: Argv) -> int:
    value = read_string(ctx, argv[1])
    return 0 if value is None else len(value)


# --- DIGEST / DELEX ---------------------------------------------------------------------------------


@command("digest", 2, "readonly fast", group="string", since="8.4.0",
         acl="string", keys="RO ACCESS",
         summary="Returns the hash digest of a string value as a hexadecimal string.",
         syntax="key")
def digest(ctx: Ctx, argv: Argv) -> bytes | None:
    value = read_string(ctx, argv[1])
    return None if value is None else value_digest(value)


@command("delex", -2, "write fast", group="string", since="8.4.0",
         acl="string", keys="RW DELETE", logs=("DEL",),
         summary="Conditionally removes the specified key based on value or hash digest "
                 "comparison.",
         syntax="key [condition: IFEQ ifeq-value | IFNE ifne-value | IFDEQ ifdeq-digest | "
                "IFDNE ifdne-digest]")
def delex(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    condition, match = 0, b""
    if len(argv) == 4:
        condition, match = _IF_OPTIONS.get(argv[2].lower(), 0), argv[3]
        if not condition:
            raise ReplyError("ERR Invalid condition. Use IFEQ, IFNE, IFDEQ, or IFDNE")
    elif len(argv) != 2:
        raise ReplyError(SYNTAX)
    if key_type(ctx, key) is None:
        return 0
    if condition and not _condition_holds(ctx, key, condition, match):
        return 0
    delete_key(ctx, key)
    ctx.emit(del_effect([key]))
    ctx.notify(GENERIC, b"del", key)
    return 1
