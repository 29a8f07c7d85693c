"""String commands over parts of a value: GETRANGE, SUBSTR, SETRANGE, LCS.

Owns these commands' parsing, replies (Redis's t_string.c, error for error), effects and
notifications. SETRANGE logs itself (`SETRANGE key offset value`, deterministic, the TTL kept):
the record stays the size of the command, where a `SET` of the result would log the whole
value, megabytes for a byte written far into it. Its replay is not bounded by proto-max-bulk-len
(as Redis's mustObeyClient: the primary checked it). LCS fills Redis's table of
(len(a)+1) x (len(b)+1) uint32 cells (engine.model.lcs, compiled), so, as Redis does, it refuses
strings whose table would take more than proto-max-bulk-len bytes rather than allocate it. Must
not touch: stream internals, I/O.
"""

from __future__ import annotations

from streamkeep.engine.commands.strings import (
    TOO_BIG,
    get_string,
    read_string,
    store,
    stored_events,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import held_elsewhere, read_hit, read_miss
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import setrange_effect
from streamkeep.engine.model.lcs import lcs, table_bytes
from streamkeep.engine.model.value_types import STRING
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError
from streamkeep.engine.wire.reply import RespMap

UINT32_MAX = (1 << 32) - 1
LCS_TYPES = "ERR The specified keys must contain string values"
LCS_BOTH = "ERR If you want both the length and indexes, please just use IDX."
LCS_TOO_LONG = "ERR String too long for LCS"
LCS_TOO_MUCH_MEMORY = ("ERR Insufficient memory, transient memory for LCS exceeds "
                       "proto-max-bulk-len")
LCS_NO_MEMORY = "ERR Insufficient memory, failed allocating transient memory for LCS"


# --- GETRANGE / SUBSTR ------------------------------------------------------------------------------


def _getrange(ctx: Ctx, argv: Argv) -> bytes:
    """getrangeCommand: both indexes read first, then the key; negative indexes count from
    the end, both clamped into the value."""
    start = parse_int(argv[2])
    end = parse_int(argv[3])
    value = read_string(ctx, argv[1])
    if value is None:
        return b""
    if start < 0 and end < 0 and start > end:
        return b""
    size = len(value)
    if start < 0:
        start = max(size + start, 0)
    if end < 0:
        end = max(size + end, 0)
    end = min(end, size - 1)
    if start > end or size == 0:
        return b""
    return value[start:end + 1]


@command("getrange", 4, "readonly", group="string", since="2.4.0",
         acl="string", keys="RO ACCESS",
         summary="Returns a substring of the string stored at a key.",
         syntax="key start:integer end:integer")
def getrange(ctx: Ctx, argv: Argv) -> bytes:
    return _getrange(ctx, argv)


@command("substr", 4, "readonly", group="string", since="1.0.0",
         acl="string", keys="RO ACCESS",
         summary="Returns a substring from a string value.",
         syntax="key start:integer end:integer")
def substr(ctx: Ctx, argv: Argv) -> bytes:
    return _getrange(ctx, argv)


# --- SETRANGE ---------------------------------------------------------------------------------------


@command("setrange", 4, "write denyoom", group="string", since="2.2.0",
         acl="string", keys="RW UPDATE", logs=("SETRANGE",),
         effect="SETRANGE key offset value",
         summary="Overwrites a part of a string value with another by an offset. Creates the "
                 "key if it doesn't exist.",
         syntax="key offset:integer value")
def setrange(ctx: Ctx, argv: Argv) -> int:
    key, piece = argv[1], argv[3]
    offset = parse_int(argv[2])
    if offset < 0:
        raise ReplyError("ERR offset is out of range")
    old = get_string(ctx, key)
    if not piece:  # nothing written: the length as it is, no change
        return 0 if old is None else len(old)
    obeys = ctx.replaying or ctx.session.from_primary  # (Redis's mustObeyClient)
    if not obeys and offset + len(piece) > int(ctx.config["proto-max-bulk-len"]):
        raise ReplyError(TOO_BIG)
    base = b"" if old is None else old
    if offset > len(base):
        value = base + bytes(offset - len(base)) + piece
    else:
        value = base[:offset] + piece + base[offset + len(piece):]
    store(ctx, key, value, keep_ttl=True)
    ctx.emit(setrange_effect(key, offset, piece))
    if ctx.engine.notify_flags:
        stored_events(ctx, key, None if old is None else "string", b"setrange",
                      overwrite=False)
    return len(value)


# --- LCS --------------------------------------------------------------------------------------------


class LcsArgs:
    __slots__ = ("idx", "length", "withmatchlen", "minmatchlen")

    def __init__(self) -> None:
        self.idx = False
        self.length = False
        self.withmatchlen = False
        self.minmatchlen = 0


def _parse_lcs(argv: Argv) -> LcsArgs:
    args = LcsArgs()
    j = 3
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"idx":
            args.idx = True
        elif opt == b"len":
            args.length = True
        elif opt == b"withmatchlen":
            args.withmatchlen = True
        elif opt == b"minmatchlen" and j + 1 < len(argv):
            args.minmatchlen = max(parse_int(argv[j + 1]), 0)
            j += 1
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if args.idx and args.length:
        raise ReplyError(LCS_BOTH)
    return args


def _lcs_value(ctx: Ctx, key: bytes) -> bytes:
    """A missing key reads as the empty string; another type is refused (LCS's own line)."""
    value = ctx.strings.get(key)
    if value is None:
        if held_elsewhere(ctx.engine, ctx.session.db, key, STRING.slot):
            read_hit(ctx)
            raise ReplyError(LCS_TYPES)
        read_miss(ctx, key)
        return b""
    read_hit(ctx)
    return value


@command("lcs", -3, "readonly", group="string", since="7.0.0",
         acl="string", keys="RO ACCESS @1 r1,1,0",
         summary="Finds the longest common substring.",
         syntax="key1:key key2:key [LEN] [IDX] [MINMATCHLEN min-match-len:integer] "
                "[WITHMATCHLEN]")
def lcs_(ctx: Ctx, argv: Argv) -> object:
    # Both keys' types first, then the options, as lcsCommand checks them.
    a, b = _lcs_value(ctx, argv[1]), _lcs_value(ctx, argv[2])
    args = _parse_lcs(argv)
    if len(a) >= UINT32_MAX - 1 or len(b) >= UINT32_MAX - 1:
        raise ReplyError(LCS_TOO_LONG)
    if table_bytes(len(a), len(b)) > int(ctx.config["proto-max-bulk-len"]):
        raise ReplyError(LCS_TOO_MUCH_MEMORY)
    try:
        length, common, ranges = lcs(a, b, args.idx or not args.length)
    except MemoryError:
        raise ReplyError(LCS_NO_MEMORY) from None
    if args.length:
        return length
    if not args.idx:
        return common
    matches = []
    for a_start, a_end, b_start, b_end in ranges:
        size = a_end - a_start + 1
        if args.minmatchlen and size < args.minmatchlen:
            continue
        match: list = [[a_start, a_end], [b_start, b_end]]
        if args.withmatchlen:
            match.append(size)
        matches.append(match)
    return RespMap([(b"matches", matches), (b"len", length)])
