"""Sorted set commands: ZADD (NX, XX, GT, LT, CH, INCR), ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD,
ZCOUNT, ZLEXCOUNT, ZRANK and ZREVRANK (WITHSCORE), ZPOPMIN, ZPOPMAX, ZMPOP, the blocking
BZPOPMIN, BZPOPMAX and BZMPOP, ZRANDMEMBER and ZSCAN (the range commands are
engine.commands.zset_ranges', the set algebra engine.commands.zset_algebra's).

Owns these commands' parsing (Redis's t_zset.c, option for option and error line for error
line), replies, effects and keyspace events, and the helpers the other sorted set modules share
(the score reply, the pairs reply, the listpack limits, removing members with their effect).
Values are `ZSet`s (engine.model.zset) in the selected database's ZSET keyspace; scores are
parsed and printed by engine.model.scores (a score's reply is Redis 8's d2string text).

Effects: ZADD logs `ZADD key score member ...` of the members it added or changed, with their
resulting scores (no NX/XX/GT/LT/INCR: replay sets what the command left); ZINCRBY logs the
same ZADD; ZREM logs the members it removed; a pop (ZPOPMIN, ZPOPMAX, ZMPOP, the blocking ones
when served) logs `ZREMRANGEBYRANK key first last` of the ranks it removed (the same change,
one small effect whatever the count). Nothing changed: nothing logged. An emptied set is
deleted (`del` after the command's own event); a created key notifies `new` first.

Reads: ZRANDMEMBER writes nothing (no effect: its picks are the reply only); a count that
covers the set replies the whole set highest first, as Redis's set iterator walks it. ZSCAN
returns a listpack-encoded set whole with cursor 0 (scores as the listpack holds them, d2string's
text), a skiplist one by pages over a stable per-member position (every member present for the
whole iteration is returned; scores as %.17g, as 8.x's dict-walking ZSCAN prints them).

Must not touch: other types' values (a key of another type is WRONGTYPE), the sorted set's
internals (through ZSet's API only).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Sequence
from typing import Final

from streamkeep.engine.commands.keyspace import parse_element_scan, stringmatchlen
from streamkeep.engine.exec.blocking import parse_timeout_s
from streamkeep.engine.exec.context import Ctx, block_on
from streamkeep.engine.exec.key_specs import numkeys
from streamkeep.engine.exec.keys import read_value, removed_from, value_at
from streamkeep.engine.exec.notify import NEW
from streamkeep.engine.exec.notify import ZSET as ZSET_EVENTS
from streamkeep.engine.exec.reply_budget import BULK_LEAST, SCORE_LEAST, first_len, random_picks
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import zadd_effect, zrem_effect, zremrangebyrank_effect
from streamkeep.engine.model.ids import parse_u64
from streamkeep.engine.model.scores import (
    INTEGRAL_SCORE_MAX,
    format_score,
    format_score_g17,
    parse_lex_range,
    parse_score,
    parse_score_range,
)
from streamkeep.engine.model.value_types import ZSET
from streamkeep.engine.model.zset import (
    ADD_ADDED,
    ADD_NAN,
    ADD_NOP,
    ADD_UPDATED,
    LISTPACK,
    ZSet,
    ZSetLimits,
)
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int, parse_positive
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, wrong_arity
from streamkeep.engine.wire.reply import NULL_ARRAY, HumanDouble
from streamkeep.engine.wire.reply_encoder import human_integer

NOT_FLOAT = "ERR value is not a valid float"
NAN_SCORE = "ERR resulting score is not a number (NaN)"
BAD_SCORE_RANGE = "ERR min or max is not a float"
BAD_LEX_RANGE = "ERR min or max not valid string range item"
LONG_MAX = LLONG_MAX
_RNG = random.Random()  # ZRANDMEMBER's picks (read-only: nothing random is ever logged)

# Kernels the per-command paths call, bound once: an imported name is looked up in this
# module's globals at each call, a Final one is read from a static (mypyc).
_HUMAN_INTEGER: Final = human_integer

# Its keyspace and limits slot: a static read (`ZSET.slot` is an attribute lookup at each call).
_SLOT: Final = ZSET.slot


# --- shared helpers ------------------------------------------------------------------------------


def limits_of(ctx: Ctx) -> ZSetLimits:
    """The engine's one ZSetLimits (zset-max-listpack-entries / -value; CONFIG SET changes it in
    place: engine.model.limits)."""
    limits: ZSetLimits = ctx.engine.limits[_SLOT]
    return limits


def score_reply(score: float) -> HumanDouble:
    """A score as Redis 8's addReplyDouble sends it (d2string's text). A whole number (the
    usual score: a timestamp, a count) is made by one kernel call; a zero keeps its sign."""
    if score != 0.0 and -INTEGRAL_SCORE_MAX <= score <= INTEGRAL_SCORE_MAX:
        whole = int(score)
        if whole == score:
            return _HUMAN_INTEGER(whole)
    return HumanDouble(format_score(score))


def resp3(ctx: Ctx) -> bool:
    """The reply is read as RESP3 (nested pairs rather than a flat array): a RESP3
    connection's, or a script's that called redis.setresp(3) (a script reads RESP2 unless it
    asks, whatever its caller speaks)."""
    if ctx.in_multi:
        scripting = getattr(ctx.engine, "scripting", None)
        run = getattr(scripting, "running", None)
        if run is not None:
            return getattr(run, "resp", 2) == 3
    client = ctx.session.client
    return client is not None and getattr(client, "protocol", 2) == 3


def pairs_reply(ctx: Ctx, items: Iterable[tuple[bytes, float]], withscores: bool) -> list:
    """Members, or with scores: flat in RESP2, [member, score] pairs in RESP3."""
    if not withscores:
        return [member for member, _score in items]
    pairs = list(items)
    return columns_reply(ctx, [m for m, _s in pairs], [s for _m, s in pairs], True)


def columns_reply(ctx: Ctx, members: list[bytes], scores: list[float], withscores: bool) -> list:
    """`pairs_reply` of elements given as columns (a range read's): the members list itself
    when no score is asked."""
    if not withscores:
        return members
    if resp3(ctx):
        return [[member, score_reply(score)] for member, score in zip(members, scores,
                                                                          strict=True)]
    out: list = []
    for member, score in zip(members, scores, strict=True):
        out.append(member)
        out.append(score_reply(score))
    return out


def zset_for_read(ctx: Ctx, key: bytes) -> ZSet | None:
    """lookupKeyRead + checkType(OBJ_ZSET)."""
    value: ZSet | None = read_value(ctx, key, ZSET)
    return value


def zset_for_write(ctx: Ctx, key: bytes) -> ZSet | None:
    """lookupKeyWrite + checkType(OBJ_ZSET)."""
    value: ZSet | None = value_at(ctx, key, ZSET)
    return value


def parse_long(arg: bytes) -> int:
    """getLongFromObjectOrReply (a 64-bit long)."""
    return parse_int(arg)


# --- ZADD / ZINCRBY ------------------------------------------------------------------------------


_ZADD_FLAGS = {b"nx": "nx", b"xx": "xx", b"ch": "ch", b"incr": "incr", b"gt": "gt", b"lt": "lt"}


def _zadd(ctx: Ctx, argv: Argv, incr: bool) -> object:
    """zaddGenericCommand."""
    key = argv[1]
    nx = xx = gt = lt = ch = False
    at = 2
    argc = len(argv)
    while at < argc:
        flag = _ZADD_FLAGS.get(argv[at].lower()) if argv[at][:1].isalpha() else None
        if flag is None:
            break
        if flag == "nx":
            nx = True
        elif flag == "xx":
            xx = True
        elif flag == "gt":
            gt = True
        elif flag == "lt":
            lt = True
        elif flag == "ch":
            ch = True
        else:
            incr = True
        at += 1
    elements = argc - at
    if elements % 2 or not elements:
        raise ReplyError(SYNTAX)
    elements //= 2
    if nx and xx:
        raise ReplyError("ERR XX and NX options at the same time are not compatible")
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise ReplyError("ERR GT, LT, and/or NX options at the same time are not compatible")
    if incr and elements > 1:
        raise ReplyError("ERR INCR option supports a single increment-element pair")
    scores = []
    for j in range(elements):
        score = parse_score(argv[at + 2 * j])
        if score is None:
            raise ReplyError(NOT_FLOAT)
        scores.append(score)
    z = zset_for_write(ctx, key)
    limits = limits_of(ctx)
    changed: list[tuple[bytes, bytes]] = []  # (member, its score's text in the effect)
    added = updated = processed = 0
    score_now: float | None = None
    if z is None:
        if xx:
            return None if incr else 0
        z = ZSet.create(elements, len(argv[at + 1]), limits)
        ctx.space(_SLOT)[key] = z
        ctx.notify(NEW, b"new", key)
    else:
        z.maybe_convert(elements, limits)
    try:
        for j in range(elements):
            member = argv[at + 1 + 2 * j]
            outcome, score_now = z.add(member, scores[j], nx=nx, xx=xx, gt=gt, lt=lt,
                                       incr=incr, limits=limits)
            if outcome == ADD_NAN:
                raise ReplyError(NAN_SCORE)
            if outcome == ADD_ADDED:
                added += 1
            elif outcome == ADD_UPDATED:
                updated += 1
            if outcome != ADD_NOP:
                processed += 1
            if outcome in (ADD_ADDED, ADD_UPDATED) and score_now is not None:
                # Without INCR the score is the one sent: its text as sent (no formatting).
                changed.append((member, format_score(score_now) if incr
                                else argv[at + 2 * j]))
    finally:
        if changed:
            ctx.emit(zadd_effect(key, changed))
            ctx.signal(key)
            ctx.notify(ZSET_EVENTS, b"zincr" if incr else b"zadd", key)
    if incr:
        return score_reply(score_now) if processed and score_now is not None else None
    return added + updated if ch else added


@command("zadd", -4, "write denyoom fast", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RW UPDATE", logs=("ZADD",),
         effect="ZADD key score member [score member ...]",
         summary="Adds one or more members to a sorted set, or updates their scores. Creates "
                 "the key if it doesn't exist.",
         syntax="key [condition: NX | XX] [comparison: GT | LT] [CH] [INCR] "
                "<data: score:double member>...")
def zadd(ctx: Ctx, argv: Argv) -> object:
    return _zadd(ctx, argv, incr=False)


@command("zincrby", 4, "write denyoom fast", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RW ACCESS UPDATE", logs=("ZADD",),
         summary="Increments the score of a member in a sorted set.",
         syntax="key increment:integer member")
def zincrby(ctx: Ctx, argv: Argv) -> object:
    return _zadd(ctx, argv, incr=True)


# --- ZREM ----------------------------------------------------------------------------------------


@command("zrem", -3, "write fast", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RW DELETE", logs=("ZREM",),
         effect="ZREM key member [member ...]",
         summary="Removes one or more members from a sorted set. Deletes the sorted set if all "
                 "members were removed.",
         syntax="key member...")
def zrem(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    z = zset_for_write(ctx, key)
    if z is None:
        return 0
    removed: list[bytes] = []
    for member in argv[2:]:
        if z.remove(member):
            removed.append(member)
        if not len(z):
            break
    if removed:
        ctx.emit(zrem_effect(key, removed))
        removed_from(ctx, key, z, ZSET_EVENTS, b"zrem")
    return len(removed)


# --- reads ---------------------------------------------------------------------------------------


@command("zscore", 3, "readonly fast", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the score of a member in a sorted set.", syntax="key member")
def zscore(ctx: Ctx, argv: Argv) -> object:
    z = zset_for_read(ctx, argv[1])
    if z is None:
        return None
    score = z.score(argv[2])
    return None if score is None else score_reply(score)


@command("zmscore", -3, "readonly fast", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the score of one or more members in a sorted set.",
         syntax="key member...")
def zmscore(ctx: Ctx, argv: Argv) -> list:
    z = zset_for_read(ctx, argv[1])
    out: list = []
    for member in argv[2:]:
        score = None if z is None else z.score(member)
        out.append(None if score is None else score_reply(score))
    return out


@command("zcard", 2, "readonly fast", group="sorted-set", since="1.2.0",
         acl="sortedset", keys="RO",
         summary="Returns the number of members in a sorted set.", syntax="key")
def zcard(ctx: Ctx, argv: Argv) -> int:
    z = zset_for_read(ctx, argv[1])
    return 0 if z is None else len(z)


@command("zcount", 4, "readonly fast", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the count of members in a sorted set that have scores within a range.",
         syntax="key min:double max:double")
def zcount(ctx: Ctx, argv: Argv) -> int:
    rng = parse_score_range(argv[2], argv[3])
    if rng is None:
        raise ReplyError(BAD_SCORE_RANGE)
    z = zset_for_read(ctx, argv[1])
    return 0 if z is None else z.count_in_score_range(rng)


@command("zlexcount", 4, "readonly fast", group="sorted-set", since="2.8.9",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the number of members in a sorted set within a lexicographical range.",
         syntax="key min:string max:string")
def zlexcount(ctx: Ctx, argv: Argv) -> int:
    rng = parse_lex_range(argv[2], argv[3])
    if rng is None:
        raise ReplyError(BAD_LEX_RANGE)
    z = zset_for_read(ctx, argv[1])
    return 0 if z is None else z.count_in_lex_range(rng)


def _zrank(ctx: Ctx, argv: Argv, reverse: bool) -> object:
    """zrankGenericCommand (WITHSCORE: Redis 7.2)."""
    if len(argv) > 4:
        raise wrong_arity("zrevrank" if reverse else "zrank")
    withscore = False
    if len(argv) > 3:
        if not is_word(argv[3], b"withscore"):
            raise ReplyError(SYNTAX)
        withscore = True
    z = zset_for_read(ctx, argv[1])
    if z is None:
        return NULL_ARRAY if withscore else None
    found = z.rank_with_score(argv[2], reverse)
    if found is None:
        return NULL_ARRAY if withscore else None
    rank, score = found
    return [rank, score_reply(score)] if withscore else rank


@command("zrank", -3, "readonly fast", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the index of a member in a sorted set ordered by ascending scores.",
         syntax="key member [WITHSCORE]")
def zrank(ctx: Ctx, argv: Argv) -> object:
    return _zrank(ctx, argv, reverse=False)


@command("zrevrank", -3, "readonly fast", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns the index of a member in a sorted set ordered by descending scores.",
         syntax="key member [WITHSCORE]")
def zrevrank(ctx: Ctx, argv: Argv) -> object:
    return _zrank(ctx, argv, reverse=True)


# --- pops ----------------------------------------------------------------------------------------


def pop_from(ctx: Ctx, key: bytes, z: ZSet, count: int, maximum: bool
             ) -> tuple[list[bytes], list[float]]:
    """Pop up to `count` elements of a non-empty set, as columns (members, scores): the effect
    (the ranks removed), the events (zpopmin/zpopmax, then del if emptied), the signal."""
    size = len(z)
    members, scores = z.pop_columns(count, max=maximum)
    n = len(members)
    first = size - n if maximum else 0
    ctx.emit(zremrangebyrank_effect(key, first, first + n - 1))
    removed_from(ctx, key, z, ZSET_EVENTS, b"zpopmax" if maximum else b"zpopmin")
    return members, scores


def _zpop(ctx: Ctx, argv: Argv, maximum: bool) -> list:
    """zpopMinMaxCommand."""
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    count = -1
    if len(argv) == 3:
        count = parse_positive(argv[2])
    z = zset_for_write(ctx, argv[1])
    if z is None or count == 0:
        return []
    members, scores = pop_from(ctx, argv[1], z, 1 if count == -1 else count, maximum)
    if count == -1:  # one element, flat in either protocol
        return [members[0], score_reply(scores[0])]
    return columns_reply(ctx, members, scores, True)


@command("zpopmin", -2, "write fast", group="sorted-set", since="5.0.0",
         acl="sortedset", keys="RW ACCESS DELETE", logs=("ZREMRANGEBYRANK",),
         summary="Returns the lowest-scoring members from a sorted set after removing them. "
                 "Deletes the sorted set if the last member was popped.",
         syntax="key [count:integer]")
def zpopmin(ctx: Ctx, argv: Argv) -> list:
    return _zpop(ctx, argv, maximum=False)


@command("zpopmax", -2, "write fast", group="sorted-set", since="5.0.0",
         acl="sortedset", keys="RW ACCESS DELETE", logs=("ZREMRANGEBYRANK",),
         summary="Returns the highest-scoring members from a sorted set after removing them. "
                 "Deletes the sorted set if the last member was popped.",
         syntax="key [count:integer]")
def zpopmax(ctx: Ctx, argv: Argv) -> list:
    return _zpop(ctx, argv, maximum=True)


def _mpop_args(argv: Argv, numkeys_at: int) -> tuple[list[bytes], bool, int]:
    """zmpopGenericCommand's parsing: (keys, max, count)."""
    numkeys = parse_int(argv[numkeys_at], "numkeys should be greater than 0")
    if numkeys <= 0:
        raise ReplyError("ERR numkeys should be greater than 0")
    first = numkeys_at + 1
    where_at = first + numkeys
    if where_at >= len(argv):
        raise ReplyError(SYNTAX)
    keys = list(argv[first:where_at])
    if is_word(argv[where_at], b"min"):
        maximum = False
    elif is_word(argv[where_at], b"max"):
        maximum = True
    else:
        raise ReplyError(SYNTAX)
    count = -1
    at = where_at + 1
    while at < len(argv):
        if count == -1 and is_word(argv[at], b"count") and at + 1 < len(argv):
            count = parse_int(argv[at + 1], "count should be greater than 0")
            if count <= 0:
                raise ReplyError("ERR count should be greater than 0")
            at += 2
        else:
            raise ReplyError(SYNTAX)
    return keys, maximum, (1 if count == -1 else count)


def _mpop_serve(ctx: Ctx, keys: Sequence[bytes], maximum: bool, count: int) -> object:
    """genericZpopCommand for ZMPOP: the first non-empty key's pops as [key, [[m, s], ...]], or
    None when every key is missing."""
    for key in keys:
        z = zset_for_write(ctx, key)
        if z is None:
            continue
        members, scores = pop_from(ctx, key, z, count, maximum)
        return [key, [[member, score_reply(score)]
                      for member, score in zip(members, scores, strict=True)]]
    return None


@command("zmpop", -4, "write", group="sorted-set", since="7.0.0",
         acl="sortedset", keys="RW ACCESS DELETE @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         logs=("ZREMRANGEBYRANK",),
         summary="Returns the highest- or lowest-scoring members from one or more sorted sets "
                 "after removing them. Deletes the sorted set if the last member was popped.",
         syntax="numkeys:integer key... <where: MIN | MAX> [COUNT count:integer]")
def zmpop(ctx: Ctx, argv: Argv) -> object:
    keys, maximum, count = _mpop_args(argv, 1)
    served = _mpop_serve(ctx, keys, maximum, count)
    return NULL_ARRAY if served is None else served


# --- blocking pops -------------------------------------------------------------------------------


def _block(ctx: Ctx, argv: Argv, keys: Sequence[bytes], timeout: int) -> object:
    """Nothing to serve: nil in MULTI and scripts, else wait for a sorted set on the keys."""
    return block_on(ctx, argv, keys, timeout, _SLOT, NULL_ARRAY)


def _bzpop(ctx: Ctx, argv: Argv, maximum: bool) -> object:
    """blockingGenericZpopCommand for BZPOPMIN / BZPOPMAX: [key, member, score]."""
    timeout = parse_timeout_s(argv[-1], ctx.now)
    keys = argv[1:-1]
    for key in keys:
        z = zset_for_write(ctx, key)
        if z is None or not len(z):
            continue
        members, scores = pop_from(ctx, key, z, 1, maximum)
        return [key, members[0], score_reply(scores[0])]
    return _block(ctx, argv, keys, timeout)


@command("bzpopmin", -3, "write noscript blocking fast", group="sorted-set", since="5.0.0",
         acl="sortedset", keys="RW ACCESS DELETE @1 r-2,1,0", logs=("ZREMRANGEBYRANK",),
         summary="Removes and returns the member with the lowest score from one or more sorted "
                 "sets. Blocks until a member is available otherwise. Deletes the sorted set if "
                 "the last element was popped.",
         syntax="key... timeout:double")
def bzpopmin(ctx: Ctx, argv: Argv) -> object:
    return _bzpop(ctx, argv, maximum=False)


@command("bzpopmax", -3, "write noscript blocking fast", group="sorted-set", since="5.0.0",
         acl="sortedset", keys="RW ACCESS DELETE @1 r-2,1,0", logs=("ZREMRANGEBYRANK",),
         summary="Removes and returns the member with the highest score from one or more sorted "
                 "sets. Blocks until a member available otherwise.  Deletes the sorted set if "
                 "the last element was popped.",
         syntax="key... timeout:double")
def bzpopmax(ctx: Ctx, argv: Argv) -> object:
    return _bzpop(ctx, argv, maximum=True)


@command("bzmpop", -5, "write blocking", group="sorted-set", since="7.0.0",
         acl="sortedset", keys="RW ACCESS DELETE @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         logs=("ZREMRANGEBYRANK",),
         summary="Removes and returns a member by score from one or more sorted sets. Blocks "
                 "until a member is available otherwise. Deletes the sorted set if the last "
                 "element was popped.",
         syntax="timeout:double numkeys:integer key... <where: MIN | MAX> "
                "[COUNT count:integer]")
def bzmpop(ctx: Ctx, argv: Argv) -> object:
    keys, maximum, count = _mpop_args(argv, 2)  # before the timeout, as Redis parses them
    timeout = parse_timeout_s(argv[1], ctx.now)
    served = _mpop_serve(ctx, keys, maximum, count)
    if served is not None:
        return served
    return _block(ctx, argv, keys, timeout)


# --- ZRANDMEMBER ---------------------------------------------------------------------------------


@command("zrandmember", -2, "readonly", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Returns one or more random members from a sorted set.",
         syntax="key [options: count:integer [WITHSCORES]]")
def zrandmember(ctx: Ctx, argv: Argv) -> object:
    if len(argv) >= 3:
        count = parse_int(argv[2])
        if count < -LONG_MAX:
            raise ReplyError("ERR value is out of range, value must between "
                             f"{-LONG_MAX} and {LONG_MAX}")
        withscores = False
        if len(argv) == 4 and is_word(argv[3], b"withscores"):
            withscores = True
        elif len(argv) > 3:
            raise ReplyError(SYNTAX)
        if withscores and not -(LONG_MAX // 2) <= count <= LONG_MAX // 2:
            # Redis's bound: the reply's length (count * 2) must fit a long
            raise ReplyError("ERR value is out of range")
        z = zset_for_read(ctx, argv[1])
        if z is None or count == 0:
            return []
        if 0 < len(z) <= count:
            # the whole set, as Redis's set-operation iterator walks it: highest first
            picks = z.range_by_index(0, len(z), reverse=True)
        else:
            pick, items = z.random_members, z.items
            chosen = random_picks(ctx, count, lambda k: pick(_RNG, abs(k), k < 0),
                                  pool=lambda: list(items()), size=len(z), rng=_RNG,
                                  weigh=first_len,
                                  framing=BULK_LEAST + (SCORE_LEAST if withscores else 0))
            if not isinstance(chosen, list):  # (cut: as it is)
                return chosen
            picks = chosen
            if count < 0 and withscores:
                return _repeated_pairs_reply(ctx, picks)
        return pairs_reply(ctx, picks, withscores)
    z = zset_for_read(ctx, argv[1])
    if z is None:
        return None
    return z.random_member(_RNG)[0]


def _repeated_pairs_reply(ctx: Ctx, picks: list[tuple[bytes, float]]) -> list:
    """pairs_reply WITHSCORES for picks with repeats: a member's score text (and RESP3 pair)
    is made once and shared by its repeats, so a hostile count costs list slots, not a new
    score object per pick."""
    shared: dict[bytes, list] = {}
    nested = resp3(ctx)
    out: list = []
    for member, score in picks:
        pair = shared.get(member)
        if pair is None:
            pair = shared[member] = [member, score_reply(score)]
        if nested:
            out.append(pair)
        else:
            out += pair
    return out


# --- ZSCAN ---------------------------------------------------------------------------------------


@command("zscan", -3, "readonly", group="sorted-set", since="2.8.0",
         acl="sortedset", keys="RO ACCESS",
         summary="Iterates over members and scores of a sorted set.",
         syntax="key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]")
def zscan(ctx: Ctx, argv: Argv) -> list:
    cursor = parse_u64(argv[2])
    if cursor is None:
        raise ReplyError("ERR invalid cursor")
    z = zset_for_read(ctx, argv[1])
    if z is None:  # before the options: a missing key answers an empty scan whatever they are
        return [b"0", []]
    count, pattern, _ = parse_element_scan(argv, novalues_allowed=False)
    if z.encoding == LISTPACK:
        # a listpack is returned whole, its scores as the listpack holds them (d2string)
        page = [(m, format_score(s)) for m, s in z.items()]
        cursor = 0
    else:
        # COUNT is a hint (Redis's pages vary too): a page is at least 1/64 of the set, so a
        # whole iteration takes at most ~64 of these O(n) passes whatever COUNT says
        cursor, members = _scan_page(z, cursor, max(count, len(z) // 64))
        page = []
        for member in members:
            score = z.score(member)
            if score is not None:
                page.append((member, format_score_g17(score)))
    out: list[bytes] = []
    for member, text in page:
        if pattern is None or stringmatchlen(pattern, member):
            out.append(member)
            out.append(text)
    return [b"%d" % cursor, out]


_MASK64 = (1 << 64) - 1


def _scan_page(z: ZSet, cursor: int, count: int) -> tuple[int, list[bytes]]:
    """Up to `count` members from SCAN position `cursor` on, and the cursor after them (0 at the
    end). A member's position is its hash (bytes cache theirs: one pass over the set costs no
    hashing), which no insertion or removal moves: a member present for the whole iteration is
    returned, as Redis's reverse-binary cursor guarantees. Like Redis's dict seed, the hash is
    the process's own, so a cursor is good for this process's lifetime. Positions that collide
    are never split across pages."""
    ahead = [(pos, member) for member, _score in z.items()
             if (pos := hash(member) & _MASK64) >= cursor]
    if len(ahead) <= count:
        return 0, [member for _pos, member in ahead]
    # the page's positions only (a full sort only when positions collide at its edge)
    smallest = heapq.nsmallest(count + 1, ahead)
    if smallest[count][0] != smallest[count - 1][0]:
        return smallest[count - 1][0] + 1, [member for _pos, member in smallest[:count]]
    ahead.sort()
    end = count
    while end < len(ahead) and ahead[end][0] == ahead[end - 1][0]:
        end += 1
    if end == len(ahead):
        return 0, [member for _pos, member in ahead]
    return ahead[end - 1][0] + 1, [member for _pos, member in ahead[:end]]


__all__ = ["columns_reply", "limits_of", "pairs_reply", "parse_long", "parse_timeout_s", "pop_from",
           "resp3", "score_reply", "zset_for_read", "zset_for_write"]
