"""INCREX (Redis 8.8): a counter's increment, bounded and with its expiration, in one command.

`INCREX key [BYFLOAT increment | BYINT increment] [LBOUND lowerbound] [UBOUND upperbound]
[SATURATE] [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds |
PERSIST] [ENX]`, options in any order, each at most once (a repeat is a syntax error, unlike
SET's). It replies `[new value, increment applied]`: integers in integer mode (the default, or
BYINT: the value must be an int64, as INCRBY's), the long double's digits in BYFLOAT mode (as
INCRBYFLOAT computes and prints them; a bulk string in RESP2, a double in RESP3:
engine.wire.reply.HumanDouble). The bounds default to the type's limits (LLONG_MIN/LLONG_MAX,
-LDBL_MAX/LDBL_MAX; an infinite bound is allowed in BYFLOAT mode). A result outside them is
skipped, `[current value, 0]` with nothing changed (a missing key is not created, its TTL not
touched), unless SATURATE: the result is then the bound it passed (an applied increment that an
int64 cannot hold, or that is infinite, is an error). Without an expiration option the TTL is
kept; PERSIST removes it; EX/PX/EXAT/PXAT set it, and with ENX only on a key that has none; a
time already past deletes the key.

Owns the command's parsing (its error lines are Redis 8.8's), reply, effect and notifications.
The effect is the SET the increment amounted to, as Redis propagates it: `SET key value`,
with KEEPTTL when the key keeps a TTL (no expiration option, or ENX on a key with one; Redis
always writes KEEPTTL, the same thing on a key without a TTL), `SET key value` (PERSIST), `SET
key value PXAT ms` (a time set), `DEL key` (a time already past, the key there); a skipped
increment logs nothing.
Notified: `incrby` (integer mode) or `incrbyfloat`, then `expire` or `persist` when the TTL
changed (`new` first for a key created); a past time only `del`. Must not touch: stream
internals, I/O.
"""

from __future__ import annotations

from fractions import Fraction

from streamkeep.engine.commands.strings import (
    NOT_FLOAT,
    expire_time_ms,
    get_string,
    store,
    stored_events,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import already_expired, delete_key
from streamkeep.engine.exec.notify import GENERIC
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import del_effect, set_effect
from streamkeep.engine.model.strings import (
    LDBL_MAX,
    format_long_double,
    is_finite,
    parse_long_double,
    round_extended,
)
from streamkeep.engine.wire.args import LLONG_MAX, LLONG_MIN, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError
from streamkeep.engine.wire.reply import HumanDouble

# The options seen (each at most once); EX/PX/EXAT/PXAT are one "time".
_BY, _SATURATE, _LBOUND, _UBOUND, _TIME, _PERSIST, _ENX = 1, 2, 4, 8, 16, 32, 64
_UNITS = {b"ex": (1000, True), b"px": (1, True), b"exat": (1000, False), b"pxat": (1, False)}
_BOUNDS_CROSSED = "ERR LBOUND can't be greater than UBOUND"


class _Options:
    """The options as written: argument texts, parsed once the mode is known."""

    __slots__ = ("seen", "by_float", "increment", "lbound", "ubound", "time_arg", "unit_ms",
                 "relative")

    def __init__(self) -> None:
        self.seen = 0
        self.by_float = False
        self.increment: bytes | None = None
        self.lbound: bytes | None = None
        self.ubound: bytes | None = None
        self.time_arg: bytes | None = None
        self.unit_ms = 1
        self.relative = False


def _parse_options(argv: Argv) -> _Options:
    """The option loop: an unknown word, a repeated option, a missing value, two times, a
    time with PERSIST or PERSIST with ENX is a syntax error; ENX needs a time."""
    opts = _Options()
    j = 2
    while j < len(argv):
        opt = argv[j].lower()
        seen = opts.seen
        has_value = j + 1 < len(argv)
        unit = _UNITS.get(opt)
        if opt in (b"byint", b"byfloat") and not seen & _BY and has_value:
            opts.seen |= _BY
            opts.by_float = opt == b"byfloat"
            opts.increment = argv[j + 1]
            j += 1
        elif opt == b"saturate" and not seen & _SATURATE:
            opts.seen |= _SATURATE
        elif opt == b"lbound" and not seen & _LBOUND and has_value:
            opts.seen |= _LBOUND
            opts.lbound = argv[j + 1]
            j += 1
        elif opt == b"ubound" and not seen & _UBOUND and has_value:
            opts.seen |= _UBOUND
            opts.ubound = argv[j + 1]
            j += 1
        elif opt == b"persist" and not seen & (_PERSIST | _TIME | _ENX):
            opts.seen |= _PERSIST
        elif opt == b"enx" and not seen & (_ENX | _PERSIST):
            opts.seen |= _ENX
        elif unit is not None and not seen & (_TIME | _PERSIST) and has_value:
            opts.seen |= _TIME
            opts.unit_ms, opts.relative = unit
            opts.time_arg = argv[j + 1]
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if opts.seen & _ENX and not opts.seen & _TIME:
        raise ReplyError("ERR ENX flag requires an expiration")
    return opts


def _int_bounds(opts: _Options) -> tuple[int, int, int]:
    """Integer mode's increment and bounds."""
    increment = 1 if opts.increment is None else parse_int(
        opts.increment, "Increment is not an integer or out of range")
    lo = LLONG_MIN if opts.lbound is None else parse_int(
        opts.lbound, "LBOUND is not an integer or out of range")
    hi = LLONG_MAX if opts.ubound is None else parse_int(
        opts.ubound, "UBOUND is not an integer or out of range")
    if lo > hi:
        raise ReplyError(_BOUNDS_CROSSED)
    return increment, lo, hi


def _float_arg(text: bytes, name: str) -> Fraction:
    value = parse_long_double(text)
    if value is None:
        raise ReplyError(f"ERR {name} is not a valid float")
    return value


def _float_bounds(opts: _Options) -> tuple[Fraction, Fraction, Fraction]:
    """BYFLOAT mode's increment (never infinite) and bounds (infinite ones allowed)."""
    assert opts.increment is not None  # (BYFLOAT always has its value)
    increment = _float_arg(opts.increment, "Increment")
    if not is_finite(increment):
        raise ReplyError("ERR BYFLOAT increment cannot be Infinity")
    lo = -LDBL_MAX if opts.lbound is None else _float_arg(opts.lbound, "LBOUND")
    hi = LDBL_MAX if opts.ubound is None else _float_arg(opts.ubound, "UBOUND")
    if lo > hi:
        raise ReplyError(_BOUNDS_CROSSED)
    return increment, lo, hi


def _expire_time(ctx: Ctx, opts: _Options) -> int | None:
    if opts.time_arg is None:
        return None
    return expire_time_ms(ctx, opts.time_arg, opts.unit_ms, opts.relative, "increx")


@command("increx", -2, "write denyoom fast", group="string", since="8.8.0",
         acl="string", keys="RW ACCESS UPDATE", logs=("DEL", "SET"),
         summary="Increments the numeric value of a key by a number and sets its expiration "
                 "time. Uses 0 as initial value if the key doesn't exist.",
         syntax="key [increment: BYFLOAT float:double | BYINT integer:integer] [SATURATE] "
                "[LBOUND lowerbound] [UBOUND upperbound] [expiration: EX seconds:integer | "
                "PX milliseconds:integer | EXAT unix-time-seconds:unix-time | "
                "PXAT unix-time-milliseconds:unix-time | PERSIST] [ENX]")
def increx(ctx: Ctx, argv: Argv) -> list:
    opts = _parse_options(argv)
    if opts.by_float:
        return _increx_float(ctx, argv[1], opts)
    return _increx_int(ctx, argv[1], opts)


def _increx_int(ctx: Ctx, key: bytes, opts: _Options) -> list[int]:
    increment, lo, hi = _int_bounds(opts)
    when = _expire_time(ctx, opts)
    old = get_string(ctx, key)
    current = 0 if old is None else parse_int(old)
    result = current + increment
    if lo <= result <= hi:
        new, applied = result, increment
    elif not opts.seen & _SATURATE:
        return [current, 0]  # out of bounds: skipped, nothing changes
    else:
        new = lo if result < lo else hi
        applied = new - current
        if not LLONG_MIN <= applied <= LLONG_MAX:
            raise ReplyError("ERR applied increment would overflow")
    _write(ctx, key, old is not None, b"%d" % new, b"incrby", when, opts)
    return [new, applied]


def _increx_float(ctx: Ctx, key: bytes, opts: _Options) -> list[HumanDouble]:
    """_increx_int in long double arithmetic: a sum past LDBL_MAX is out of bounds."""
    increment, lo, hi = _float_bounds(opts)
    when = _expire_time(ctx, opts)
    old = get_string(ctx, key)
    current = parse_long_double(b"0" if old is None else old)
    if current is None:
        raise ReplyError(NOT_FLOAT)
    if not is_finite(current):
        raise ReplyError("ERR value cannot be Infinity")
    result = round_extended(current + increment)
    finite = is_finite(result)
    if finite and lo <= result <= hi:
        new = result
    elif not opts.seen & _SATURATE:
        return [HumanDouble(format_long_double(current)), HumanDouble(b"0")]  # skipped
    else:
        below = result < lo if finite else result < 0
        new = lo if below else hi
    applied = round_extended(new - current)
    if not is_finite(new) or not is_finite(applied):
        raise ReplyError("ERR applied increment would be Infinity")
    text = format_long_double(new)
    _write(ctx, key, old is not None, text, b"incrbyfloat", when, opts)
    return [HumanDouble(text), HumanDouble(format_long_double(applied))]


def _write(ctx: Ctx, key: bytes, existed: bool, text: bytes, event: bytes, when: int | None,
           opts: _Options) -> None:
    """Store the new value with the TTL the options ask for; log and notify it."""
    notify = ctx.engine.notify_flags
    prior = "string" if existed else None
    had_ttl = key in ctx.expires
    if when is not None and not (opts.seen & _ENX and had_ttl):
        if already_expired(ctx, when):
            if existed:
                delete_key(ctx, key)
                ctx.emit(del_effect([key]))
                ctx.notify(GENERIC, b"del", key)
            return
        store(ctx, key, text, keep_ttl=True)
        ctx.expires[key] = when
        ctx.emit(set_effect(key, text, expires_at=when))
        if notify:
            stored_events(ctx, key, prior, event, overwrite=False, expire=True)
    elif opts.seen & _PERSIST:
        store(ctx, key, text)  # (the TTL goes)
        ctx.emit(set_effect(key, text))
        if notify:
            stored_events(ctx, key, prior, event, overwrite=False)
            if had_ttl:
                ctx.notify(GENERIC, b"persist", key)
    else:
        store(ctx, key, text, keep_ttl=True)
        ctx.emit(set_effect(key, text, keep_ttl=had_ttl))
        if notify:
            stored_events(ctx, key, prior, event, overwrite=False)
