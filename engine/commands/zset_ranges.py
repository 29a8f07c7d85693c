"""Sorted set range commands: ZRANGE (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES), ZRANGESTORE,
ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX, ZREVRANGEBYLEX, ZREMRANGEBYRANK,
ZREMRANGEBYSCORE and ZREMRANGEBYLEX.

Owns Redis's zrangeGenericCommand grammar (shared by all the range reads and ZRANGESTORE,
option for option and error line for error line) and zremrangeGenericCommand's, their replies,
effects and keyspace events. The ranges are engine.model.zset's; parsing a bound is
engine.model.scores'.

Effects: these commands are deterministic over the state they read, so a write logs itself:
ZREMRANGEBY* as given (name upper-cased) when it removed something, ZRANGESTORE as given when
it stored or deleted its destination. A ZRANGESTORE result is built at its own size (a huge
range over a small set allocates what the set holds), in the encoding Redis gives it.

Must not touch: other types' values, the sorted set's internals.
"""

from __future__ import annotations

from streamkeep.engine.commands.keyspace import replacing_events
from streamkeep.engine.commands.zsets import (
    BAD_LEX_RANGE,
    BAD_SCORE_RANGE,
    columns_reply,
    limits_of,
    parse_long,
    zset_for_read,
    zset_for_write,
)
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import delete_key, drop_other_types, removed_from
from streamkeep.engine.exec.notify import GENERIC
from streamkeep.engine.exec.notify import ZSET as ZSET_EVENTS
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import as_sent_effect
from streamkeep.engine.model.scores import LexRange, ScoreRange, parse_lex_range, parse_score_range
from streamkeep.engine.model.value_types import ZSET
from streamkeep.engine.model.zset import ZSet
from streamkeep.engine.wire.args import is_word
from streamkeep.engine.wire.errors import SYNTAX, ReplyError

RANK, SCORE, LEX = "rank", "score", "lex"

class _RangeArgs:
    """What zrangeGenericCommand parsed."""

    __slots__ = ("kind", "reverse", "withscores", "offset", "limit", "start", "stop", "rng")

    def __init__(self) -> None:
        self.kind: str | None = None
        self.reverse: bool | None = None
        self.withscores = False
        self.offset = 0
        self.limit = -1
        self.start = self.stop = 0
        self.rng: ScoreRange | LexRange | None = None


def _parse_range(argv: Argv, key_at: int, store: bool, kind: str | None,
                 reverse: bool | None) -> _RangeArgs:
    """zrangeGenericCommand's steps 1 and 2: the options after `key min max`, their conflicts,
    then the range itself."""
    a = _RangeArgs()
    a.kind, a.reverse = kind, reverse
    j = key_at + 3
    while j < len(argv):
        opt, left = argv[j], len(argv) - j - 1
        if not store and is_word(opt, b"withscores"):
            a.withscores = True
        elif is_word(opt, b"limit") and left >= 2:
            a.offset = parse_long(argv[j + 1])
            a.limit = parse_long(argv[j + 2])
            j += 2
        elif a.reverse is None and is_word(opt, b"rev"):
            a.reverse = True
        elif a.kind is None and is_word(opt, b"bylex"):
            a.kind = LEX
        elif a.kind is None and is_word(opt, b"byscore"):
            a.kind = SCORE
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if a.reverse is None:
        a.reverse = False
    if a.kind is None:
        a.kind = RANK
    if a.limit != -1 and a.kind == RANK:
        raise ReplyError("ERR syntax error, LIMIT is only supported in combination with either "
                         "BYSCORE or BYLEX")
    if a.withscores and a.kind == LEX:
        raise ReplyError("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    low, high = argv[key_at + 1], argv[key_at + 2]
    if a.reverse and a.kind != RANK:  # the range is given as max, min
        low, high = high, low
    if a.kind == RANK:
        a.start, a.stop = parse_long(low), parse_long(high)
    elif a.kind == SCORE:
        a.rng = parse_score_range(low, high)
        if a.rng is None:
            raise ReplyError(BAD_SCORE_RANGE)
    else:
        a.rng = parse_lex_range(low, high)
        if a.rng is None:
            raise ReplyError(BAD_LEX_RANGE)
    return a


def _select(z: ZSet, a: _RangeArgs, scores: bool = True) -> tuple[list[bytes], list[float]]:
    """The elements the parsed range selects, in reply order: their members and their scores
    (left empty unless `scores`)."""
    reverse = bool(a.reverse)
    if a.kind == RANK:
        return z.rank_columns(a.start, a.stop, reverse, scores)
    if a.kind == SCORE:
        assert isinstance(a.rng, ScoreRange)
        return z.score_columns(a.rng, reverse, a.offset, a.limit, scores)
    assert isinstance(a.rng, LexRange)
    return z.lex_columns(a.rng, reverse, a.offset, a.limit, scores)


def _range_read(ctx: Ctx, argv: Argv, kind: str | None, reverse: bool | None) -> list:
    a = _parse_range(argv, 1, False, kind, reverse)
    z = zset_for_read(ctx, argv[1])
    if z is None:
        return []
    members, scores = _select(z, a, a.withscores)
    return columns_reply(ctx, members, scores, a.withscores)


@command("zrange", -4, "readonly", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a range of indexes.",
         syntax="key start:string stop:string [sortby: BYSCORE | BYLEX] [REV] "
                "[LIMIT offset:integer count:integer] [WITHSCORES]")
def zrange(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, None, None)


@command("zrevrange", -4, "readonly", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a range of indexes in reverse order.",
         syntax="key start:integer stop:integer [WITHSCORES]")
def zrevrange(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, RANK, True)


@command("zrangebyscore", -4, "readonly", group="sorted-set", since="1.0.5",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a range of scores.",
         syntax="key min:double max:double [WITHSCORES] [LIMIT offset:integer count:integer]")
def zrangebyscore(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, SCORE, False)


@command("zrevrangebyscore", -4, "readonly", group="sorted-set", since="2.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a range of scores in reverse order.",
         syntax="key max:double min:double [WITHSCORES] [LIMIT offset:integer count:integer]")
def zrevrangebyscore(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, SCORE, True)


@command("zrangebylex", -4, "readonly", group="sorted-set", since="2.8.9",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a lexicographical range.",
         syntax="key min:string max:string [LIMIT offset:integer count:integer]")
def zrangebylex(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, LEX, False)


@command("zrevrangebylex", -4, "readonly", group="sorted-set", since="2.8.9",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns members in a sorted set within a lexicographical range in reverse "
                 "order.",
         syntax="key max:string min:string [LIMIT offset:integer count:integer]")
def zrevrangebylex(ctx: Ctx, argv: Argv) -> list:
    return _range_read(ctx, argv, LEX, True)


# --- ZRANGESTORE and the STORE destinations ------------------------------------------------------


def store_result(ctx: Ctx, dst: bytes, items: list[tuple[bytes, float]], event: bytes,
                 argv: Argv) -> int:
    """A *STORE command's end: a non-empty result replaces whatever `dst` held (its TTL goes),
    in the encoding its size calls for, notifying new/overwritten/type_changed then `event`;
    an empty one deletes `dst` (`del` if it existed). Logs the command as given when it
    changed something. The reply: the result's size."""
    if items:
        z = ZSet.from_items(items, limits_of(ctx))
        if ctx.engine.notify_flags:
            replacing_events(ctx, ZSET.name, dst)
        drop_other_types(ctx.engine, ctx.session.db, dst, ZSET.slot)
        ctx.space(ZSET.slot)[dst] = z
        ctx.expires.pop(dst, None)
        ctx.emit(as_sent_effect(argv))
        ctx.signal(dst)
        ctx.notify(ZSET_EVENTS, event, dst)
        return len(z)
    if delete_key(ctx, dst):
        ctx.emit(as_sent_effect(argv))
        ctx.notify(GENERIC, b"del", dst)
    return 0


@command("zrangestore", -5, "write denyoom", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="OW UPDATE ; RO ACCESS @2 r0,1,0", logs=("ZRANGESTORE",),
         effect="ZRANGESTORE dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]",
         summary="Stores a range of members from sorted set in a key.",
         syntax="dst:key src:key min:string max:string [sortby: BYSCORE | BYLEX] [REV] "
                "[LIMIT offset:integer count:integer]")
def zrangestore(ctx: Ctx, argv: Argv) -> int:
    a = _parse_range(argv, 2, True, None, None)
    z = zset_for_read(ctx, argv[2])
    members, scores = ([], []) if z is None else _select(z, a)
    items = list(zip(members, scores, strict=True))
    return store_result(ctx, argv[1], items, b"zrangestore", argv)


# --- ZREMRANGEBY* --------------------------------------------------------------------------------


def _zremrange(ctx: Ctx, argv: Argv, kind: str) -> int:
    """zremrangeGenericCommand."""
    key = argv[1]
    if kind == RANK:
        start, stop = parse_long(argv[2]), parse_long(argv[3])
    elif kind == SCORE:
        srng = parse_score_range(argv[2], argv[3])
        if srng is None:
            raise ReplyError(BAD_SCORE_RANGE)
    else:
        lrng = parse_lex_range(argv[2], argv[3])
        if lrng is None:
            raise ReplyError(BAD_LEX_RANGE)
    z = zset_for_write(ctx, key)
    if z is None:
        return 0
    if kind == RANK:
        removed = z.remove_range_by_rank(start, stop)
    elif kind == SCORE:
        assert srng is not None  # (parsed above)
        removed = z.remove_range_by_score(srng)
    else:
        assert lrng is not None
        removed = z.remove_range_by_lex(lrng)
    if removed:
        ctx.emit(as_sent_effect(argv))
        removed_from(ctx, key, z, ZSET_EVENTS, b"zremrangeby" + kind.encode())
    return len(removed)


@command("zremrangebyrank", 4, "write", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="RW DELETE", logs=("ZREMRANGEBYRANK",),
         effect="ZREMRANGEBYRANK key start stop",
         summary="Removes members in a sorted set within a range of indexes. Deletes the sorted "
                 "set if all members were removed.",
         syntax="key start:integer stop:integer")
def zremrangebyrank(ctx: Ctx, argv: Argv) -> int:
    return _zremrange(ctx, argv, RANK)


@command("zremrangebyscore", 4, "write", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RW DELETE", logs=("ZREMRANGEBYSCORE",),
         effect="ZREMRANGEBYSCORE key min max",
         summary="Removes members in a sorted set within a range of scores. Deletes the sorted "
                 "set if all members were removed.",
         syntax="key min:double max:double")
def zremrangebyscore(ctx: Ctx, argv: Argv) -> int:
    return _zremrange(ctx, argv, SCORE)


@command("zremrangebylex", 4, "write", group="sorted-set", since="2.8.9",
         acl="sortedset", keys="RW DELETE", logs=("ZREMRANGEBYLEX",),
         effect="ZREMRANGEBYLEX key min max",
         summary="Removes members in a sorted set within a lexicographical range. Deletes the "
                 "sorted set if all members were removed.",
         syntax="key min:string max:string")
def zremrangebylex(ctx: Ctx, argv: Argv) -> int:
    return _zremrange(ctx, argv, LEX)


__all__ = ["store_result"]
