"""engine.exec.reply_budget: random picks with repeats bounded by the connection's budget, counted
(the picks made, the members listed, the bytes they weigh), never timed: a count that cannot
fit makes no pick (by its length alone, or by the value's lightest member); one that may not
fit is drawn and weighed, cut as soon as it is over; one that fits is made whole, drawn at once
when even the heaviest member would fit, its picks sharing the value's members; a few picks are
the value's own; no budget (the embedded engine) or a positive count is the pick as asked. The
commands that use it: SRANDMEMBER, HRANDFIELD and ZRANDMEMBER, in RESP2 and RESP3, cut or
whole."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.exec.reply_budget import (
    BULK_LEAST,
    CHUNK,
    FEW_PICKS,
    first_len,
    random_picks,
)
from streamkeep.engine.wire.reply import PackedEntries
from streamkeep.engine.wire.reply_encoder import OutputLimitReached, encode_reply
from tests.support.effects_util import argv_bytes

MB = 1 << 20


class _Ctx:
    def __init__(self, budget: int) -> None:
        self.elements_budget = budget


class _Value:
    """A value's `pick(k)` (|k| picks of its members, in turn) and `pool()` (its members),
    each call and pick counted."""

    def __init__(self, members: list[Any]) -> None:
        self.members = members
        self.calls: list[int] = []
        self.pools = 0
        self.rng = random.Random(7)

    def pick(self, k: int) -> list[Any]:
        self.calls.append(k)
        return [self.members[i % len(self.members)] for i in range(abs(k))]

    def pool(self) -> list[Any]:
        self.pools += 1
        return self.members

    def picks(self, budget: int, count: int, size: int | None = None, **kw: Any) -> Any:
        return random_picks(_Ctx(budget), count, self.pick,  # type: ignore[arg-type]
                            pool=self.pool, size=len(self.members) if size is None else size,
                            rng=self.rng, **kw)


def _cut(reply: Any, count: int) -> bool:
    return type(reply) is PackedEntries and reply.cut and len(reply) == count


def test_a_count_that_cannot_fit_makes_no_pick() -> None:
    value = _Value([b"m"] * 10)
    for count in (10**9, 2**63 - 1, MB // BULK_LEAST + 1):
        assert _cut(value.picks(MB, -count), count)
    # Nor when the lightest member cannot: decided from the members, before a pick.
    value = _Value([b"x" * 10, b"y" * 200])  # 16 bytes a pick at least
    count = FEW_PICKS + 1  # (fewer are the value's own picks, left to the encoder's check)
    assert count * 16 > MB
    assert _cut(value.picks(MB, -count), count)
    assert value.calls == [] and value.pools == 1


def test_picks_that_outweigh_the_budget_stop_within_a_chunk_of_it() -> None:
    value = _Value([b"x" * 4, b"y" * 400])  # 10 or 406 bytes a pick: ~208 on average
    count = MB // 10  # fits if every pick is the light one: unlikely
    assert _cut(value.picks(MB, -count), count)
    assert value.calls == [] and value.pools == 1
    # Few picks of a big value are the value's own, weighed as they come.
    value = _Value([b"x" * 94])
    count = FEW_PICKS + 1
    assert _cut(value.picks(count * 100 - 1, -count, size=8 * count + 1), count)
    assert value.calls == [-count]


def test_picks_that_fit_are_made_whole() -> None:
    value = _Value([b"a", b"bc"])  # 7 or 8 bytes a pick
    count = 3 * CHUNK + 5
    got = value.picks(8 * count, -count)  # fits whatever is drawn: drawn at once
    assert type(got) is list and len(got) == count and set(got) == {b"a", b"bc"}
    assert all(x is value.members[0] or x is value.members[1] for x in got)  # (shared)
    got = value.picks(7 * count + 4 * count, -count)  # may not fit: drawn and weighed
    assert type(got) is list and len(got) == count
    assert len(encode_reply(got)) - len(b"*%d\r\n" % count) <= 11 * count
    assert value.calls == [] and value.pools == 2
    few = value.picks(MB, -100)
    assert len(few) == 100 and value.calls == [-100]  # (the value's own picks)


def test_no_budget_or_a_positive_count_is_picked_as_asked() -> None:
    for budget, count in ((0, -10**6), (16, 1000)):
        value = _Value([b"m"])
        assert len(value.picks(budget, count)) == abs(count)
        assert value.calls == [count] and value.pools == 0


def test_pairs_weigh_their_members() -> None:
    value = _Value([(b"ab", 1.5), (b"c", 2.0)])
    count = FEW_PICKS + 1
    assert _cut(value.picks(count * 11 - 1, -count, weigh=first_len, framing=10), count)
    got = value.picks(count * 12, -count, weigh=first_len, framing=10)
    assert type(got) is list and len(got) == count


def _session(budget: int, protocol: int) -> Session:
    s = Session()

    class Client:
        addr = "127.0.0.1:1"  # (SLOWLOG's, for a slow call)

        def reply_budget(self) -> int:
            return budget

        def elements_budget(self) -> int:
            return budget

    Client.protocol = protocol  # type: ignore[attr-defined]
    s.client = Client()  # type: ignore[assignment]
    return s


@pytest.mark.parametrize("protocol", [2, 3])
def test_the_random_pick_commands_cut_or_fit(protocol: int) -> None:
    """Each command with a hostile count gets the cut reply (its encoding closes the
    connection); with a count that fits its reply whole, shaped for the protocol; in the
    embedded engine every pick."""
    e = Engine()
    e.execute("SADD", "s", "a", "b")
    e.execute("HSET", "h", "a", "1", "b", "2")
    e.execute("ZADD", "z", "1", "a", "2", "b")
    s = _session(MB, protocol)
    hostile = str(-(1 << 60))
    for argv in (("SRANDMEMBER", "s", hostile), ("HRANDFIELD", "h", hostile),
                 ("HRANDFIELD", "h", hostile, "WITHVALUES"), ("ZRANDMEMBER", "z", hostile),
                 ("ZRANDMEMBER", "z", hostile, "WITHSCORES")):
        reply, _ = e.submit(s, argv_bytes(argv))
        with pytest.raises(OutputLimitReached):
            encode_reply(reply, protocol)
    for argv, n in ((("SRANDMEMBER", "s", "-1000"), 1000), (("HRANDFIELD", "h", "-1000"), 1000),
                    (("HRANDFIELD", "h", "-1000", "WITHVALUES"), 1000 if protocol == 3 else 2000),
                    (("ZRANDMEMBER", "z", "-1000"), 1000),
                    (("ZRANDMEMBER", "z", "-1000", "WITHSCORES"),
                     1000 if protocol == 3 else 2000)):
        reply, _ = e.submit(s, argv_bytes(argv))
        assert type(reply) is list and len(reply) == n, argv
        if protocol == 3 and len(argv) == 4:
            assert all(len(pair) == 2 for pair in reply)
        assert len(e.execute(*argv)) == 1000 * (len(argv) - 2)  # (embedded: RESP2's shape)
    assert len(e.execute("SRANDMEMBER", "s", str(-(MB // BULK_LEAST + 1)))) == MB // 6 + 1
