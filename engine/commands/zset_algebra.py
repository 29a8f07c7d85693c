"""Sorted set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms (WEIGHTS, AGGREGATE SUM|MIN|MAX,
WITHSCORES) and ZINTERCARD (LIMIT).

Owns Redis's zunionInterDiffGenericCommand: its parsing (numkeys, the keys read and type-checked
before any option, then the options, error line for error line), its arithmetic (a weighted
score that is NaN counts as 0, as does a SUM of +inf and -inf; inputs taken smallest first, in a
stable order, so sums add in Redis's order), its replies and the STORE forms' destination
(engine.commands.zset_ranges.store_result: the result's encoding as Redis chooses it, events,
the command logged as given, since it is deterministic over the state it reads). An input may be
a sorted set or a plain set (every member scored 1), as in Redis; any other type is WRONGTYPE.
Memory: the work is the result's size (a dict of the members met), never the inputs' sum.

Must not touch: the inputs (read only), other types' internals beyond iterating a set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streamkeep.engine.commands.zset_ranges import store_result
from streamkeep.engine.commands.zsets import pairs_reply
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.key_specs import numkeys
from streamkeep.engine.exec.keys import lookup, read_hit, read_miss
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.scores import parse_score
from streamkeep.engine.model.zset import ZSet
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, WRONGTYPE, ReplyError

UNION, INTER, DIFF = "union", "inter", "diff"
SUM, MIN, MAX = "sum", "min", "max"


class _Source:
    """One input: a sorted set, a plain set (scores 1.0) or a missing key (empty)."""

    __slots__ = ("value", "weight")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.weight = 1.0

    def __len__(self) -> int:
        return 0 if self.value is None else len(self.value)

    def items(self) -> Iterator[tuple[bytes, float]]:
        value = self.value
        if value is None:
            return iter(())
        if isinstance(value, ZSet):
            return value.items()
        return ((member, 1.0) for member in value)

    def find(self, member: bytes) -> float | None:
        value = self.value
        if value is None:
            return None
        if isinstance(value, ZSet):
            return value.score(member)
        return 1.0 if member in value else None


def _read_source(ctx: Ctx, key: bytes) -> _Source:
    """lookupKeyRead: a sorted set or a set, else WRONGTYPE."""
    found = lookup(ctx, key)
    if found is None:
        read_miss(ctx, key)
        return _Source(None)
    read_hit(ctx)
    vt, value = found
    if vt.name not in ("zset", "set"):
        raise ReplyError(WRONGTYPE)
    return _Source(value)


def _aggregate(target: float, value: float, how: str) -> float:
    """zunionInterAggregate."""
    if how == SUM:
        total = target + value
        return 0.0 if total != total else total
    if how == MIN:
        return value if value < target else target
    return value if value > target else target


class _Args:
    __slots__ = ("sources", "how", "withscores", "limit")

    def __init__(self, sources: list[_Source]) -> None:
        self.sources = sources
        self.how = SUM
        self.withscores = False
        self.limit = 0


def _parse(ctx: Ctx, argv: Argv, numkeys_at: int, op: str, store: bool,
           cardinality: bool) -> _Args:
    setnum = parse_int(argv[numkeys_at])
    if setnum < 1:
        name = argv[0].lower().decode("ascii", "replace")
        raise ReplyError(f"ERR at least 1 input key is needed for '{name}' command")
    if setnum > len(argv) - (numkeys_at + 1):
        raise ReplyError(SYNTAX)
    first = numkeys_at + 1
    a = _Args([_read_source(ctx, key) for key in argv[first:first + setnum]])
    j = first + setnum
    while j < len(argv):
        remaining = len(argv) - j
        word = argv[j]
        if op != DIFF and not cardinality and remaining >= setnum + 1 \
                and is_word(word, b"weights"):
            j += 1
            for source in a.sources:
                weight = parse_score(argv[j])
                if weight is None:
                    raise ReplyError("ERR weight value is not a float")
                source.weight = weight
                j += 1
        elif op != DIFF and not cardinality and remaining >= 2 and is_word(word, b"aggregate"):
            how = argv[j + 1].lower()
            if how not in (b"sum", b"min", b"max"):
                raise ReplyError(SYNTAX)
            a.how = how.decode()
            j += 2
        elif not store and not cardinality and is_word(word, b"withscores"):
            a.withscores = True
            j += 1
        elif cardinality and remaining >= 2 and is_word(word, b"limit"):
            a.limit = parse_int(argv[j + 1], "LIMIT can't be negative")
            if a.limit < 0:
                raise ReplyError("ERR LIMIT can't be negative")
            j += 2
        else:
            raise ReplyError(SYNTAX)
    return a


def _weighted(score: float, weight: float) -> float:
    value = weight * score
    return 0.0 if value != value else value


def _inter_members(sources: list[_Source], how: str) -> Iterator[tuple[bytes, float]]:
    """The members in every input with their aggregated scores, one at a time (the smallest
    input walked, the others probed)."""
    ordered = sorted(sources, key=len)
    if not len(ordered[0]):
        return
    head, rest = ordered[0], ordered[1:]
    for member, score in head.items():
        total = _weighted(score, head.weight)
        for source in rest:
            other = source.find(member)
            if other is None:
                break
            total = _aggregate(total, other * source.weight, how)
        else:
            yield member, total


def _inter(sources: list[_Source], how: str) -> dict[bytes, float]:
    return dict(_inter_members(sources, how))


def _inter_card(sources: list[_Source], limit: int) -> int:
    """ZINTERCARD: how many members are in every input, counting stops at `limit` (0: none);
    nothing is kept."""
    count = 0
    for _member in _inter_members(sources, SUM):
        count += 1
        if count == limit:
            break
    return count


def _union(sources: list[_Source], how: str) -> dict[bytes, float]:
    out: dict[bytes, float] = {}
    for source in sorted(sources, key=len):
        weight = source.weight
        for member, score in source.items():
            value = _weighted(score, weight)
            current = out.get(member)
            out[member] = value if current is None else _aggregate(current, value, how)
    return out


def _diff(sources: list[_Source]) -> dict[bytes, float]:
    head, rest = sources[0], sources[1:]
    return {member: score for member, score in head.items()
            if all(source.find(member) is None for source in rest)}


def _compute(a: _Args, op: str) -> dict[bytes, float]:
    if op == UNION:
        return _union(a.sources, a.how)
    if op == INTER:
        return _inter(a.sources, a.how)
    return _diff(a.sources)


def _ordered(result: dict[bytes, float]) -> list[tuple[bytes, float]]:
    return sorted(result.items(), key=lambda item: (item[1], item[0]))


def _read_op(ctx: Ctx, argv: Argv, op: str) -> list:
    a = _parse(ctx, argv, 1, op, store=False, cardinality=False)
    return pairs_reply(ctx, _ordered(_compute(a, op)), a.withscores)


def _store_op(ctx: Ctx, argv: Argv, op: str) -> int:
    a = _parse(ctx, argv, 2, op, store=True, cardinality=False)
    items = list(_compute(a, op).items())
    return store_result(ctx, argv[1], items, b"z" + op.encode() + b"store", argv)


@command("zunion", -3, "readonly", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="RO ACCESS @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         summary="Returns the union of multiple sorted sets.",
         syntax="numkeys:integer key... [WEIGHTS weight:integer...] "
                "[AGGREGATE <aggregate: SUM | MIN | MAX>] [WITHSCORES]")
def zunion(ctx: Ctx, argv: Argv) -> list:
    return _read_op(ctx, argv, UNION)


@command("zinter", -3, "readonly", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="RO ACCESS @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         summary="Returns the intersect of multiple sorted sets.",
         syntax="numkeys:integer key... [WEIGHTS weight:integer...] "
                "[AGGREGATE <aggregate: SUM | MIN | MAX>] [WITHSCORES]")
def zinter(ctx: Ctx, argv: Argv) -> list:
    return _read_op(ctx, argv, INTER)


@command("zdiff", -3, "readonly", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="RO ACCESS @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         summary="Returns the difference between multiple sorted sets.",
         syntax="numkeys:integer key... [WITHSCORES]")
def zdiff(ctx: Ctx, argv: Argv) -> list:
    return _read_op(ctx, argv, DIFF)


@command("zunionstore", -4, "write denyoom", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="OW UPDATE ; RO ACCESS @2 n0,1,1", key_finder=numkeys(1, 2, 3),
         logs=("ZUNIONSTORE",),
         effect="ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] "
                "[AGGREGATE <SUM | MIN | MAX>]",
         summary="Stores the union of multiple sorted sets in a key.",
         syntax="destination:key numkeys:integer key... "
                "[WEIGHTS weight:integer...] "
                "[AGGREGATE <aggregate: SUM | MIN | MAX>]")
def zunionstore(ctx: Ctx, argv: Argv) -> int:
    return _store_op(ctx, argv, UNION)


@command("zinterstore", -4, "write denyoom", group="sorted-set", since="2.0.0",
         acl="sortedset", keys="OW UPDATE ; RO ACCESS @2 n0,1,1", key_finder=numkeys(1, 2, 3),
         logs=("ZINTERSTORE",),
         effect="ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight [weight ...]] "
                "[AGGREGATE <SUM | MIN | MAX>]",
         summary="Stores the intersect of multiple sorted sets in a key.",
         syntax="destination:key numkeys:integer key... "
                "[WEIGHTS weight:integer...] "
                "[AGGREGATE <aggregate: SUM | MIN | MAX>]")
def zinterstore(ctx: Ctx, argv: Argv) -> int:
    return _store_op(ctx, argv, INTER)


@command("zdiffstore", -4, "write denyoom", group="sorted-set", since="6.2.0",
         acl="sortedset", keys="OW UPDATE ; RO ACCESS @2 n0,1,1", key_finder=numkeys(1, 2, 3),
         logs=("ZDIFFSTORE",),
         effect="ZDIFFSTORE destination numkeys key [key ...]",
         summary="Stores the difference of multiple sorted sets in a key.",
         syntax="destination:key numkeys:integer key...")
def zdiffstore(ctx: Ctx, argv: Argv) -> int:
    return _store_op(ctx, argv, DIFF)


@command("zintercard", -3, "readonly", group="sorted-set", since="7.0.0",
         acl="sortedset", keys="RO ACCESS @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         summary="Returns the number of members of the intersect of multiple sorted sets.",
         syntax="numkeys:integer key... [LIMIT limit:integer]")
def zintercard(ctx: Ctx, argv: Argv) -> int:
    a = _parse(ctx, argv, 1, INTER, store=False, cardinality=True)
    return _inter_card(a.sources, a.limit)


__all__ = ["DIFF", "INTER", "UNION"]
