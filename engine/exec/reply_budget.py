"""A reply's budget: the bytes a connection's output limit leaves for the reply a command is
building (`Ctx.elements_budget`: the hard limit, for a reply of many elements; 0: no limit, as
in the embedded engine), for the commands whose reply size the client chooses rather than the
data: a random pick with repeats (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER key -count) and a range
read (LRANGE).

Redis closes a client once its output passes the hard limit, after the reply was written that
far. Here a reply that cannot fit is not built: `random_picks` makes no pick when the count
alone rules it out, and no more once the picks made (or the value's lightest member times the
count) weigh more than the budget; a command that stops there returns `cut_reply`, whose
encoding closes the connection as the output limit does (engine.server.network logs and counts
it the same way); in a script, which reads its commands' replies as values, it is the script's
error. What a pick weighs is a lower bound of its RESP bytes (its member's length and a bulk
string's framing), so a reply that would fit is never refused; the encoder's own check
(engine.wire.reply_encoder) stays the exact one.

Many picks are drawn from the value's members listed once (`pool`), so that they share its
objects (a pick costs a list slot, not a member made again) and the lightest and heaviest
member decide most counts before any pick: none when even the lightest would not fit, all at
once when even the heaviest would.

Owns `random_picks`, `cut_reply` and the weights of a pick. Must not touch: the connection, the
encoding, the values picked from (the caller's `pick` and `pool` read them).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.wire.reply import PackedEntries

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Ctx

# The least RESP bytes of a bulk string beyond its content ("$0\r\n" and "\r\n"): every pick's
# reply is at least one.
BULK_LEAST: Final = 6
# The least RESP bytes of a score beside its member (RESP3's double ",1\r\n"; RESP2's bulk
# "$1\r\n1\r\n" is 7).
SCORE_LEAST: Final = 4
# Up to this many picks are made as the value's own `pick` makes them, unweighed (the encoder
# stops a reply of them that is too big: they cost no more than this many list slots).
FEW_PICKS: Final = 1 << 16
# Picks drawn and weighed at a time (what is allocated past the budget before a refusal).
CHUNK: Final = 1 << 18


def first_len(pick: tuple[bytes, Any]) -> int:
    """A (member, score) or (field, value) pick's member length."""
    return len(pick[0])


def pair_len(pick: tuple[bytes, bytes]) -> int:
    """A (field, value) pick's length, both replied."""
    return len(pick[0]) + len(pick[1])


def random_picks(ctx: Ctx, count: int, pick: Callable[[int], list[Any]], *,
                 pool: Callable[[], Sequence[Any]], size: int, rng: random.Random,
                 weigh: Callable[[Any], int] = len, framing: int = BULK_LEAST,
                 ) -> list[Any] | PackedEntries:
    """`pick(count)` (the value's random picks by Redis's rules), with a negative count
    (|count| picks with repeats: the reply's length is the client's choice, not the value's)
    bounded by the connection's budget: `cut_reply` without a pick when |count| picks of
    `framing` bytes each cannot fit; `pick(count)` for a few picks; else picks of the members
    `pool()` lists (the value's `size` of them, each pick one of them), each weighing
    `weigh(member) + framing` bytes at least: `cut_reply` when |count| of the lightest cannot
    fit or as soon as those drawn weigh more than the budget. A positive count (distinct
    picks: at most the value's size), or no budget, is `pick(count)` as it is."""
    budget = ctx.elements_budget
    wanted = -count
    if count >= 0 or not budget or wanted <= FEW_PICKS and wanted * framing <= budget:
        return pick(count)
    if wanted > budget // framing:
        return cut_reply(wanted)
    if wanted * 8 < size:  # few picks of a big value: as the value makes them, weighed
        return _weighed(budget, wanted, lambda k: pick(-k), lambda p: sum(map(weigh, p)),
                        framing)
    members = pool()
    weights = [weigh(m) + framing for m in members]
    if not weights:
        return []
    if wanted * min(weights) > budget:
        return cut_reply(wanted)
    if wanted * max(weights) <= budget:
        return rng.choices(members, k=wanted)
    positions = range(len(members))
    get, weight = members.__getitem__, weights.__getitem__

    def draw(k: int) -> list[Any]:
        return rng.choices(positions, k=k)

    def weighs(drawn: list[Any]) -> int:
        return sum(map(weight, drawn))

    chosen = _weighed(budget, wanted, draw, weighs, 0)
    return chosen if type(chosen) is PackedEntries else list(map(get, chosen))


def _weighed(budget: int, wanted: int, draw: Callable[[int], list[Any]],
             weighs: Callable[[list[Any]], int], framing: int) -> list[Any] | PackedEntries:
    """`wanted` picks drawn CHUNK at a time, or `cut_reply` as soon as those drawn weigh
    more than `budget` (`weighs(chunk)`, plus `framing` bytes a pick)."""
    out: list[Any] = []
    spent = 0
    while len(out) < wanted:
        drawn = draw(min(CHUNK, wanted - len(out)))
        spent += weighs(drawn) + framing * len(drawn)
        if spent > budget:
            return cut_reply(wanted)
        out += drawn
    return out


def cut_reply(count: int) -> PackedEntries:
    """The reply of a command that stopped at its connection's budget, `count` elements long,
    none of them built: encoding it closes the connection as the output limit does."""
    return PackedEntries(b"", count, cut=True)
