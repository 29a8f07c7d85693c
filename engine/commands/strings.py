"""String commands: GET, SET (NX, XX, GET, EX, PX, EXAT, PXAT, KEEPTTL), SETNX, SETEX, PSETEX,
GETDEL, GETEX, MGET, MSET, INCR, DECR, INCRBY, DECRBY, INCRBYFLOAT, APPEND, STRLEN.

Owns these commands' parsing (Redis's t_string.c, option for option and error for error),
replies and effects. Values live in the selected database's `ctx.strings`, TTLs in
`ctx.expires` (engine.commands.expiry explains the keyspace and how keys expire). Every write
logs the value it left, never the arithmetic that made it: `SET key value` (the TTL dropped),
`SET key value KEEPTTL` (INCR, APPEND, a SET KEEPTTL) or `SET key value PXAT ms` (a SET with a
relative or absolute time), so replay never re-parses a number or reads a clock. Must not
touch: stream internals (a SET over a stream key drops it whole), I/O.
"""

from __future__ import annotations

from streamkeep.engine.commands.expiry import (
    already_expired,
    delete_key,
    expire_time_error,
    key_type,
    remove_expiry,
    set_expiry,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import del_effect, set_effect
from streamkeep.engine.model.strings import add_long_double, format_long_double, parse_long_double
from streamkeep.engine.wire.args import LLONG_MAX, LLONG_MIN, parse_int
from streamkeep.engine.wire.errors import SYNTAX, WRONGTYPE, ReplyError, wrong_arity

NOT_FLOAT = "ERR value is not a valid float"
TOO_BIG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"


# --- reading and writing a string ------------------------------------------------------------------


def get_string(ctx: Ctx, key: bytes) -> bytes | None:
    """lookupKeyRead + checkType(OBJ_STRING): the value, None if missing, WRONGTYPE if a
    stream."""
    value = ctx.strings.get(key)
    if value is None and key in ctx.db:
        raise ReplyError(WRONGTYPE)
    return value


def store(ctx: Ctx, key: bytes, value: bytes, keep_ttl: bool = False) -> None:
    """setKey: the value replaces a key of either type; its TTL goes unless `keep_ttl` (no
    effect logged: the caller logs what the command amounted to)."""
    ctx.db.pop(key, None)  # a stream under that name goes whole
    ctx.strings[key] = value
    if not keep_ttl:
        ctx.expires.pop(key, None)
    ctx.signal(key)


# --- GET / SET --------------------------------------------------------------------------------------


@command("get", 2, "readonly fast", group="string", since="1.0.0",
         summary="Returns the string value of a key.", syntax="key")
def get(ctx: Ctx, argv: Argv) -> bytes | None:
    return get_string(ctx, argv[1])


_SET, _GETEX = 0, 1
_NX, _XX, _GET, _KEEPTTL, _PERSIST = 1, 2, 4, 8, 16
_EX, _PX, _EXAT, _PXAT = 32, 64, 128, 256
_ANY_TIME = _EX | _PX | _EXAT | _PXAT
_TIME_UNITS = {b"ex": (_EX, 1000), b"px": (_PX, 1), b"exat": (_EXAT, 1000), b"pxat": (_PXAT, 1)}


class SetArgs:
    """parseExtendedStringArgumentsOrReply's result: the flags, the time argument and its
    unit in ms."""

    __slots__ = ("flags", "time_arg", "unit_ms")

    def __init__(self) -> None:
        self.flags = 0
        self.time_arg: bytes | None = None
        self.unit_ms = 1


def _parse_set_options(argv: Argv, start: int, kind: int) -> SetArgs:
    """parseExtendedStringArgumentsOrReply for SET (kind _SET) and GETEX (kind _GETEX)."""
    args = SetArgs()
    j = start
    while j < len(argv):
        opt = argv[j].lower()
        flags = args.flags
        has_next = j + 1 < len(argv)
        unit = _TIME_UNITS.get(opt)
        if opt == b"nx" and kind == _SET and not flags & _XX:
            args.flags |= _NX
        elif opt == b"xx" and kind == _SET and not flags & _NX:
            args.flags |= _XX
        elif opt == b"get" and kind == _SET:
            args.flags |= _GET
        elif opt == b"keepttl" and kind == _SET and not flags & (_PERSIST | _ANY_TIME):
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


def _expire_at(ctx: Ctx, args: SetArgs, name: str) -> int | None:
    """getExpireMillisecondsOrReply: the absolute expiry time, None without one."""
    if args.time_arg is None:
        return None
    when = parse_int(args.time_arg)
    if when <= 0 or (args.unit_ms == 1000 and when > LLONG_MAX // 1000):
        raise expire_time_error(name)
    when *= args.unit_ms
    if args.flags & (_EX | _PX):
        when += ctx.now
        if when > LLONG_MAX:  # C's signed overflow, which Redis detects as a result <= 0
            raise expire_time_error(name)
    return when


def _set_generic(ctx: Ctx, key: bytes, value: bytes, flags: int, when: int | None) -> bool:
    """setGenericCommand after parsing: False when NX/XX refused it."""
    found = key_type(ctx, key) is not None
    if (flags & _NX and found) or (flags & _XX and not found):
        return False
    if when is not None and already_expired(ctx, when):
        if found:
            delete_key(ctx, key)
            ctx.emit(del_effect([key]))
        return True
    keep_ttl = bool(flags & _KEEPTTL)
    store(ctx, key, value, keep_ttl)
    if when is not None:
        ctx.expires[key] = when
    ctx.emit(set_effect(key, value, keep_ttl and key in ctx.expires, when))
    return True


@command("set", -3, "write denyoom", group="string", since="1.0.0",
         summary="Sets the string value of a key, ignoring its type. The key is created if it "
                 "doesn't exist.",
         syntax="key value [condition: NX | XX] [GET] [expiration: EX seconds:integer | "
                "PX milliseconds:integer | EXAT unix-time-seconds:unix-time | "
                "PXAT unix-time-milliseconds:unix-time | KEEPTTL]")
def set_(ctx: Ctx, argv: Argv) -> str | bytes | None:
    if len(argv) == 3:  # a plain SET (most of them): no option to parse, nothing to refuse
        key, value = argv[1], argv[2]
        engine, db = ctx.engine, ctx.session.db
        ctx.db.pop(key, None)  # store()'s steps, inline: a stream under that name goes whole
        engine.strings[db][key] = value
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
    old = get_string(ctx, key) if args.flags & _GET else None
    done = _set_generic(ctx, key, argv[2], args.flags, when)
    if args.flags & _GET:
        return old
    return "OK" if done else None


@command("setnx", 3, "write denyoom fast", group="string", since="1.0.0",
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
         summary="Sets the string value and expiration time of a key. Creates the key if it "
                 "doesn't exist.", syntax="key seconds:integer value")
def setex(ctx: Ctx, argv: Argv) -> str:
    return _set_with_time(ctx, argv, "setex", _EX, 1000)


@command("psetex", 4, "write denyoom", group="string", since="2.6.0",
         summary="Sets both string value and expiration time in milliseconds of a key. The key "
                 "is created if it doesn't exist.", syntax="key milliseconds:integer value")
def psetex(ctx: Ctx, argv: Argv) -> str:
    return _set_with_time(ctx, argv, "psetex", _PX, 1)


# --- GETDEL / GETEX / MGET / MSET -------------------------------------------------------------------


@command("getdel", 2, "write fast", group="string", since="6.2.0",
         summary="Returns the string value of a key after deleting the key.", syntax="key")
def getdel(ctx: Ctx, argv: Argv) -> bytes | None:
    key = argv[1]
    value = get_string(ctx, key)
    if value is not None:
        delete_key(ctx, key)
        ctx.emit(del_effect([key]))
    return value


@command("getex", -2, "write fast", group="string", since="6.2.0",
         summary="Returns the string value of a key after setting its expiration time.",
         syntax="key [expiration: EX seconds:integer | PX milliseconds:integer | "
                "EXAT unix-time-seconds:unix-time | PXAT unix-time-milliseconds:unix-time | "
                "PERSIST]")
def getex(ctx: Ctx, argv: Argv) -> bytes | None:
    args = _parse_set_options(argv, 2, _GETEX)
    key = argv[1]
    value = get_string(ctx, key)
    if value is None:  # (Redis looks the key up before it reads the time)
        return None
    when = _expire_at(ctx, args, "getex")
    if when is not None:
        set_expiry(ctx, key, when)
    elif args.flags & _PERSIST:
        remove_expiry(ctx, key)
    return value


@command("mget", -2, "readonly fast", keys=(1, -1, 1), group="string", since="1.0.0",
         summary="Atomically returns the string values of one or more keys.", syntax="key...")
def mget(ctx: Ctx, argv: Argv) -> list[bytes | None]:
    strings = ctx.strings
    return [strings.get(key) for key in argv[1:]]


@command("mset", -3, "write denyoom", keys=(1, -1, 2), group="string", since="1.0.1",
         summary="Atomically creates or modifies the string values of one or more keys.",
         syntax="<data: key value>...")
def mset(ctx: Ctx, argv: Argv) -> str:
    if len(argv) % 2 == 0:
        raise wrong_arity("mset")
    for i in range(1, len(argv), 2):
        store(ctx, argv[i], argv[i + 1])
        ctx.emit(set_effect(argv[i], argv[i + 1]))
    return "OK"


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
    return result


@command("incr", 2, "write denyoom fast", group="string", since="1.0.0",
         summary="Increments the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.", syntax="key")
def incr(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], 1)


@command("decr", 2, "write denyoom fast", group="string", since="1.0.0",
         summary="Decrements the integer value of a key by one. Uses 0 as initial value if the "
                 "key doesn't exist.", syntax="key")
def decr(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], -1)


@command("incrby", 3, "write denyoom fast", group="string", since="1.0.0",
         summary="Increments the integer value of a key by a number. Uses 0 as initial value if "
                 "the key doesn't exist.", syntax="key increment:integer")
def incrby(ctx: Ctx, argv: Argv) -> int:
    return _incr_by(ctx, argv[1], parse_int(argv[2]))


@command("decrby", 3, "write denyoom fast", group="string", since="1.0.0",
         summary="Decrements a number from the integer value of a key. Uses 0 as initial value "
                 "if the key doesn't exist.", syntax="key decrement:integer")
def decrby(ctx: Ctx, argv: Argv) -> int:
    decrement = parse_int(argv[2])
    if decrement == LLONG_MIN:
        raise ReplyError("ERR decrement would overflow")
    return _incr_by(ctx, argv[1], -decrement)


@command("incrbyfloat", 3, "write denyoom fast", group="string", since="2.6.0",
         summary="Increment the floating point value of a key by a number. Uses 0 as initial "
                 "value if the key doesn't exist.", syntax="key increment:double")
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
    return text


# --- APPEND / STRLEN --------------------------------------------------------------------------------


@command("append", 3, "write denyoom fast", group="string", since="2.0.0",
         summary="Appends a string to the value of a key. Creates the key if it doesn't exist.",
         syntax="key value")
def append(ctx: Ctx, argv: Argv) -> int:
    key, tail = argv[1], argv[2]
    old = get_string(ctx, key)
    if old is not None and len(old) + len(tail) > int(ctx.config["proto-max-bulk-len"]):
        raise ReplyError(TOO_BIG)
    value = tail if old is None else old + tail
    store(ctx, key, value, keep_ttl=True)
    ctx.emit(set_effect(key, value, keep_ttl=key in ctx.expires))
    return len(value)


@command("strlen", 2, "readonly fast", group="string", since="2.2.0",
         summary="Returns the length of a string value.", syntax="key")
def strlen(ctx: Ctx, argv: Argv) -> int:
    value = get_string(ctx, argv[1])
    return 0 if value is None else len(value)

