"""The sorted set value: both encodings and the conversion between them, against a plain
reference model (a dict sorted on demand) and, for encodings and ranges, redis-server."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.model import zset as zset_module
from streamkeep.engine.model.scores import (
    LEX_MAX,
    LEX_MIN,
    LEX_VALUE,
    LexRange,
    ScoreRange,
    format_score,
    parse_lex_range,
)
from streamkeep.engine.model.zset import (
    ADD_ADDED,
    ADD_NAN,
    ADD_NOP,
    ADD_SAME,
    ADD_UPDATED,
    DEFAULT_LIMITS,
    LISTPACK,
    SKIPLIST,
    ZSet,
    ZSetLimits,
    normalize_rank_range,
)
from tests.support.resp_client import RespClient


@contextmanager
def small_chunks(load: int = 4) -> Iterator[None]:
    """Chunks of a few elements, so that small sets split, merge and drop chunks."""
    with mock.patch.object(zset_module, "_LOAD", load):
        yield


def filled(pairs: dict[bytes, float], limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
    z = ZSet()
    for member, score in pairs.items():
        assert z.add(member, score, limits=limits)[0] == ADD_ADDED
    return z


def score_of(z: ZSet, member: bytes) -> float:
    score = z.score(member)
    assert score is not None
    return score


# ---- adds ----------------------------------------------------------------------------------

def test_add_outcomes() -> None:
    z = ZSet()
    assert z.add(b"a", 1.0) == (ADD_ADDED, 1.0)
    assert z.add(b"a", 1.0) == (ADD_SAME, 1.0)
    assert z.add(b"a", 2.0) == (ADD_UPDATED, 2.0)
    assert z.add(b"a", 5.0, nx=True) == (ADD_NOP, None)
    assert z.add(b"b", 5.0, xx=True) == (ADD_NOP, None) and len(z) == 1
    assert z.add(b"a", 1.0, gt=True) == (ADD_NOP, None)
    assert z.add(b"a", 3.0, gt=True) == (ADD_UPDATED, 3.0)
    assert z.add(b"a", 4.0, lt=True) == (ADD_NOP, None)
    assert z.add(b"a", 3.0, lt=True) == (ADD_NOP, None)  # equal is not less
    assert z.add(b"a", 2.5, incr=True) == (ADD_UPDATED, 5.5)
    assert z.add(b"a", -1.0, incr=True, gt=True) == (ADD_NOP, None)
    assert z.add(b"c", 7.0, incr=True) == (ADD_ADDED, 7.0)  # a new member takes the increment
    assert z.add(b"d", 1.0, gt=True) == (ADD_ADDED, 1.0)  # GT/LT do not stop a new member
    assert z.score(b"a") == 5.5 and z.score(b"zz") is None


def test_add_nan() -> None:
    z = ZSet()
    assert z.add(b"a", math.nan) == (ADD_NAN, None)
    z.add(b"a", math.inf)
    assert z.add(b"a", -math.inf, incr=True) == (ADD_NAN, None)
    assert z.score(b"a") == math.inf
    assert z.add(b"a", math.inf, incr=True) == (ADD_SAME, math.inf)


def test_negative_zero_is_zero_but_keeps_its_sign() -> None:
    z = ZSet()
    z.add(b"b", -0.0)
    z.add(b"a", 0.0)
    assert z.range_by_rank(0, -1) == [(b"a", 0.0), (b"b", 0.0)]  # a tie: member order
    assert format_score(score_of(z, b"b")) == b"-0"
    assert z.add(b"b", 0.0) == (ADD_SAME, 0.0)  # 0 == -0: nothing changes ...
    assert format_score(score_of(z, b"b")) == b"-0"  # ... so ZSCORE still reads -0
    assert z.add(b"b", 0.0, incr=True) == (ADD_SAME, 0.0)  # ZINCRBY replies 0
    assert z.count_in_score_range(ScoreRange(0.0, 0.0)) == 2
    assert z.count_in_score_range(ScoreRange(-0.0, -0.0, True, False)) == 0


# ---- encodings -----------------------------------------------------------------------------

def test_a_skiplist_sets_plain_add_keeps_a_zeros_sign_and_moves_a_changed_member() -> None:
    """The plain ZADD of a skiplist set (one table write: `put`) keeps the stored zero's sign
    for an equal score, and moves a member whose score changed."""
    z = filled({b"m%03d" % i: float(i) for i in range(300)})
    assert z.encoding == "skiplist"
    assert z.add(b"zero", -0.0) == (ADD_ADDED, -0.0)
    assert z.add(b"zero", 0.0) == (ADD_SAME, 0.0)
    assert format_score(score_of(z, b"zero")) == b"-0"
    assert z.add(b"m000", -0.0) == (ADD_SAME, -0.0)
    assert format_score(score_of(z, b"m000")) == b"0"
    assert z.add(b"m001", 250.5) == (ADD_UPDATED, 250.5)
    assert z.rank(b"m001") == 251 and z.score(b"m001") == 250.5  # after m000, zero, m002..m250
    assert [m for m, _ in z.range_by_rank(0, 2)] == [b"m000", b"zero", b"m002"]


def test_converts_at_the_entries_limit_and_never_back() -> None:
    z = ZSet()
    for i in range(128):
        z.add(b"m%03d" % i, float(i))
    assert z.encoding == LISTPACK and len(z) == 128
    z.add(b"m000", 5.0)  # an update never converts
    assert z.encoding == LISTPACK
    z.add(b"extra", 1.5)
    assert z.encoding == SKIPLIST and len(z) == 129
    for i in range(120):
        z.remove(b"m%03d" % i)
    assert z.encoding == SKIPLIST and len(z) == 9


def test_converts_at_the_value_limit() -> None:
    z = ZSet()
    z.add(b"x" * 64, 1.0)
    assert z.encoding == LISTPACK
    z.add(b"y" * 65, 2.0)
    assert z.encoding == SKIPLIST
    assert z.range_by_rank(0, -1) == [(b"x" * 64, 1.0), (b"y" * 65, 2.0)]


def test_limits_are_read_at_each_add() -> None:
    limits = ZSetLimits(max_listpack_entries=3, max_listpack_value=4)
    z = ZSet()
    for m in (b"a", b"b", b"c"):
        z.add(m, 1.0, limits=limits)
    assert z.encoding == LISTPACK
    z.add(b"d", 1.0, limits=limits)
    assert z.encoding == SKIPLIST
    none = ZSetLimits(0, 64)
    z = ZSet()
    z.add(b"a", 1.0, limits=none)
    assert z.encoding == SKIPLIST


def test_create_and_maybe_convert_take_size_hints() -> None:
    assert ZSet.create(128, 64).encoding == LISTPACK
    assert ZSet.create(129, 1).encoding == SKIPLIST
    assert ZSet.create(1, 65).encoding == SKIPLIST
    z = ZSet.create(2, 1)
    z.add(b"a", 1.0)
    z.maybe_convert(128)
    assert z.encoding == LISTPACK
    z.maybe_convert(129)  # ZADD with 129 pairs converts first, whatever they hold
    assert z.encoding == SKIPLIST and z.range_by_rank(0, -1) == [(b"a", 1.0)]


def test_from_items_picks_the_encoding_its_size_calls_for() -> None:
    small = ZSet.from_items([(b"b", 2.0), (b"a", 1.0), (b"b", 0.5)])
    assert small.encoding == LISTPACK
    assert list(small.items()) == [(b"b", 0.5), (b"a", 1.0)]
    big = ZSet.from_items((b"%d" % i, float(-i)) for i in range(129))
    assert big.encoding == SKIPLIST and big.range_by_rank(0, 0) == [(b"128", -128.0)]
    assert ZSet.from_items([(b"x" * 65, 1.0)]).encoding == SKIPLIST
    assert ZSet.from_items([(b"x" * 65, 1.0)], ZSetLimits(128, 100)).encoding == LISTPACK


def test_copy_is_independent_and_keeps_the_encoding() -> None:
    for size in (5, 300):
        z = filled({b"m%d" % i: float(i % 7) for i in range(size)})
        twin = z.copy()
        assert twin.encoding == z.encoding
        twin.add(b"new", 0.5)
        twin.remove(b"m1")
        assert z.score(b"new") is None and z.score(b"m1") == 1.0
        assert len(twin) == len(z)


@pytest.mark.parametrize("size", [0, 1, 5, 128, 129, 2000])
def test_serialization_round_trip(size: int) -> None:
    rng = random.Random(size)
    pairs = {rng.randbytes(rng.randrange(0, 12)): rng.choice([0.0, -0.0, 1.5, math.inf,
                                                             -math.inf, rng.random()])
             for _ in range(size)}
    z = filled(pairs)
    data = z.to_bytes()
    assert data[0] == 1  # the format's version
    back = ZSet.from_bytes(data)
    assert list(back.items()) == list(z.items())
    assert [math.copysign(1, s) for _m, s in back.items()] == [
        math.copysign(1, s) for _m, s in z.items()]
    assert back.encoding == z.encoding


def test_from_bytes_picks_the_encoding_as_rdb_loading_does() -> None:
    shrunk = filled({b"m%d" % i: float(i) for i in range(200)})
    shrunk.remove_range_by_rank(0, 189)
    assert shrunk.encoding == SKIPLIST
    assert ZSet.from_bytes(shrunk.to_bytes()).encoding == LISTPACK  # small again: listpack
    small = filled({b"a": 1.0, b"b": 2.0, b"c": 3.0})
    assert ZSet.from_bytes(small.to_bytes(), ZSetLimits(2, 64)).encoding == SKIPLIST
    # a listpack's long member does not convert it on loading (Redis checks the count only)
    assert ZSet.from_bytes(small.to_bytes(), ZSetLimits(128, 0)).encoding == LISTPACK


def test_from_bytes_refuses_malformed_data() -> None:
    data = filled({b"a": 1.0, b"b": 2.0}).to_bytes()
    for bad in (b"", data[:-1], b"\x09" + data[1:], data + b"x"):
        with pytest.raises(ValueError):
            ZSet.from_bytes(bad)
    swapped = ZSet.from_items([(b"a", 1.0), (b"b", 1.0)]).to_bytes()
    swapped = swapped.replace(b"ab", b"ba")  # members out of order for their scores
    with pytest.raises(ValueError):
        ZSet.from_bytes(swapped)


# ---- ranges --------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [10, 1000])
def test_ranks_and_ranges(size: int) -> None:
    pairs = {b"m%05d" % i: float(i // 3) for i in range(size)}
    z = filled(pairs)
    order = sorted(pairs, key=lambda m: (pairs[m], m))
    for i in (0, 1, size // 2, size - 1):
        assert z.rank(order[i]) == i
        assert z.rank(order[i], reverse=True) == size - 1 - i
        assert z.rank_with_score(order[i]) == (i, pairs[order[i]])
    assert z.rank(b"nope") is None
    assert [m for m, _ in z.range_by_rank(2, 4)] == order[2:5]
    assert [m for m, _ in z.range_by_rank(-3, -1)] == order[-3:]
    assert [m for m, _ in z.range_by_rank(0, 1, reverse=True)] == order[::-1][:2]
    assert z.range_by_rank(5, 2) == [] and z.range_by_rank(size, size + 5) == []
    rng = ScoreRange(1.0, 2.0, False, True)
    inside = [m for m in order if rng.contains(pairs[m])]
    assert [m for m, _ in z.range_by_score(rng)] == inside
    assert [m for m, _ in z.range_by_score(rng, reverse=True)] == inside[::-1]
    assert [m for m, _ in z.range_by_score(rng, offset=1, count=1)] == inside[1:2]
    assert [m for m, _ in z.range_by_score(rng, True, 1, 5)] == inside[::-1][1:6]
    assert z.range_by_score(rng, offset=-1) == []  # 8.x: a negative offset yields nothing
    assert z.range_by_score(rng, count=0) == []
    assert z.count_in_score_range(rng) == len(inside)
    assert z.count_in_score_range(ScoreRange(3.0, 1.0)) == 0


def test_normalize_rank_range() -> None:
    assert normalize_rank_range(0, -1, 5) == (0, 4)
    assert normalize_rank_range(-100, 100, 5) == (0, 4)
    assert normalize_rank_range(3, 2, 5) is None
    assert normalize_rank_range(5, 10, 5) is None
    assert normalize_rank_range(0, -1, 0) is None


@pytest.mark.parametrize("size", [8, 600])
def test_lex_ranges(size: int) -> None:
    members = sorted({b"%x" % (i * 7919 % 4096) for i in range(size)})
    z = filled(dict.fromkeys(members, 0.0))
    rng = parse_lex_range(b"[3", b"(a")
    assert rng is not None
    inside = [m for m in members if rng.contains(m)]
    assert [m for m, _ in z.range_by_lex(rng)] == inside
    assert [m for m, _ in z.range_by_lex(rng, True, 1, 2)] == inside[::-1][1:3]
    assert z.count_in_lex_range(rng) == len(inside)
    everything = LexRange(LEX_MIN, b"", True, LEX_MAX, b"", True)
    assert z.count_in_lex_range(everything) == len(members)
    assert z.count_in_lex_range(LexRange(LEX_MAX, b"", True, LEX_MAX, b"", True)) == 0
    assert z.remove_range_by_lex(rng) == inside
    assert len(z) == len(members) - len(inside)


def test_removals_and_pops() -> None:
    for size in (20, 3000):
        pairs = {b"k%d" % i: float(i) for i in range(size)}
        z = filled(pairs)
        assert z.remove_range_by_rank(0, 2) == [b"k0", b"k1", b"k2"]
        assert z.remove_range_by_rank(-2, -1) == [b"k%d" % (size - 2), b"k%d" % (size - 1)]
        assert z.remove_range_by_score(ScoreRange(5.0, 7.0, True, False)) == [b"k6", b"k7"]
        assert z.pop() == [(b"k3", 3.0)]
        assert z.pop(2, max=True) == [(b"k%d" % (size - 3), size - 3.0),
                                      (b"k%d" % (size - 4), size - 4.0)]
        assert z.remove(b"k4") and not z.remove(b"k4")
        assert len(z) == size - 11
        rest = z.pop(size)
        assert len(rest) == size - 11 and len(z) == 0
        assert z.pop() == [] and z.range_by_rank(0, -1) == []


def test_random_members() -> None:
    rng = random.Random(5)
    for size in (10, 500):
        z = filled({b"r%d" % i: float(i) for i in range(size)})
        picks = z.random_members(rng, 30, with_repeats=True)
        assert len(picks) == 30 and all(z.score(m) == s for m, s in picks)
        distinct = z.random_members(rng, 7, with_repeats=False)
        assert len({m for m, _ in distinct}) == 7
        if z.encoding == LISTPACK:  # a listpack's distinct picks come in set order
            assert distinct == sorted(distinct, key=lambda p: p[1])
        assert z.random_members(rng, size + 5, with_repeats=False) == list(z.items())
        assert z.random_members(rng, 0, with_repeats=True) == []
        member, score = z.random_member(rng)
        assert z.score(member) == score


def test_memory_usage_estimates() -> None:
    small = filled({b"a": 1.0, b"b": 2.5})
    # a listpack: header 6, a (2) + 1 (2), b (2) + "2.5" (4), end 1 = 17 bytes -> 32 (the
    # oracle's jemalloc size class) + object 16
    assert small.memory_usage() == 48
    big = filled({b"member:%d" % i: i * 0.5 for i in range(1000)})
    per_member = big.memory_usage() / 1000
    assert 80 < per_member < 130


# ---- against a reference model -------------------------------------------------------------

class Reference:
    """A sorted set as a dict, sorted on demand, with zsetAdd's rules written out."""

    def __init__(self, limits: ZSetLimits) -> None:
        self.scores: dict[bytes, float] = {}
        self.limits = limits
        self.encoding = LISTPACK

    def ordered(self) -> list[tuple[bytes, float]]:
        return sorted(self.scores.items(), key=lambda kv: (kv[1], kv[0]))

    def add(self, member: bytes, score: float, flags: dict[str, bool]) -> tuple[int, float | None]:
        current = self.scores.get(member)
        if current is None:
            if flags["xx"]:
                return ADD_NOP, None
            if self.encoding == LISTPACK and (
                    len(self.scores) + 1 > self.limits.max_listpack_entries
                    or len(member) > self.limits.max_listpack_value):
                self.encoding = SKIPLIST
            self.scores[member] = score
            return ADD_ADDED, score
        if flags["nx"]:
            return ADD_NOP, None
        if flags["incr"]:
            score += current
            if math.isnan(score):
                return ADD_NAN, None
        if (flags["lt"] and score >= current) or (flags["gt"] and score <= current):
            return ADD_NOP, None
        if score == current:
            return ADD_SAME, score
        self.scores[member] = score
        return ADD_UPDATED, score

    def remove_positions(self, positions: list[int]) -> list[bytes]:
        ordered = self.ordered()
        removed = [ordered[p][0] for p in positions]
        for member in removed:
            del self.scores[member]
        return removed


MEMBERS = st.sampled_from([b"", b"a", b"aa", b"ab", b"b", b"ba", b"abc", b"c\x00", b"zz",
                           b"long-member", b"\xff", b"a" * 9])
SCORES = st.sampled_from([0.0, -0.0, 1.0, 1.5, -2.0, 3.0, math.inf, -math.inf, 1e-300, 7.25])
FLAGS = st.sampled_from([{}, {"nx": True}, {"xx": True}, {"gt": True}, {"lt": True},
                         {"incr": True}, {"xx": True, "gt": True}, {"incr": True, "lt": True}])
BOUND = st.sampled_from([-math.inf, -2.0, -0.0, 0.0, 1.0, 1.5, 3.0, 7.25, math.inf])
LEX_BOUND = st.one_of(st.just((LEX_MIN, b"", True)), st.just((LEX_MAX, b"", True)),
                      st.tuples(st.just(LEX_VALUE), MEMBERS, st.booleans()))

OPS = st.one_of(
    st.tuples(st.just("add"), MEMBERS, SCORES, FLAGS),
    st.tuples(st.just("add"), MEMBERS, SCORES, FLAGS),
    st.tuples(st.just("remove"), MEMBERS),
    st.tuples(st.just("remrank"), st.integers(-8, 8), st.integers(-8, 8)),
    st.tuples(st.just("remscore"), BOUND, BOUND, st.booleans(), st.booleans()),
    st.tuples(st.just("pop"), st.integers(0, 4), st.booleans()),
    st.tuples(st.just("grow"), st.integers(0, 12)),
)


def score_range(low: float, high: float, minex: bool, maxex: bool) -> ScoreRange:
    return ScoreRange(low, high, minex, maxex)


def check_queries(z: ZSet, ref: Reference, data: st.DataObject) -> None:
    ordered = ref.ordered()
    assert len(z) == len(ordered)
    assert z.encoding == ref.encoding
    assert list(z.items()) == ordered
    for member in (data.draw(MEMBERS), ordered[0][0] if ordered else b"x"):
        expected_rank = next((i for i, (m, _) in enumerate(ordered) if m == member), None)
        assert z.rank(member) == expected_rank
        assert z.score(member) == ref.scores.get(member)
    start, stop = data.draw(st.integers(-10, 10)), data.draw(st.integers(-10, 10))
    span = normalize_rank_range(start, stop, len(ordered))
    expected = [] if span is None else ordered[span[0]:span[1] + 1]
    assert z.range_by_rank(start, stop) == expected
    backwards = ordered[::-1]
    assert z.range_by_rank(start, stop, True) == ([] if span is None else
                                                  backwards[span[0]:span[1] + 1])
    rng = score_range(data.draw(BOUND), data.draw(BOUND), data.draw(st.booleans()),
                      data.draw(st.booleans()))
    inside = [] if rng.is_empty() else [p for p in ordered if rng.contains(p[1])]
    offset, count = data.draw(st.integers(-1, 5)), data.draw(st.integers(-1, 5))
    reverse = data.draw(st.booleans())
    window = inside[::-1] if reverse else inside
    expected = [] if offset < 0 else window[offset:] if count < 0 else window[
        offset:offset + count]
    assert z.range_by_score(rng, reverse, offset, count) == expected
    assert z.count_in_score_range(rng) == len(inside)


def apply(z: ZSet, ref: Reference, op: tuple, limits: ZSetLimits) -> None:
    kind = op[0]
    if kind == "add":
        flags = {f: op[3].get(f, False) for f in ("nx", "xx", "gt", "lt", "incr")}
        assert z.add(op[1], op[2], limits=limits, **flags) == ref.add(op[1], op[2], flags)
    elif kind == "remove":
        assert z.remove(op[1]) == (ref.scores.pop(op[1], None) is not None)
    elif kind == "remrank":
        span = normalize_rank_range(op[1], op[2], len(ref.scores))
        positions = [] if span is None else list(range(span[0], span[1] + 1))
        assert z.remove_range_by_rank(op[1], op[2]) == ref.remove_positions(positions)
    elif kind == "remscore":
        rng = score_range(*op[1:])
        positions = [] if rng.is_empty() else [
            i for i, (_, s) in enumerate(ref.ordered()) if rng.contains(s)]
        assert z.remove_range_by_score(rng) == ref.remove_positions(positions)
    elif kind == "pop":
        ordered = ref.ordered()
        taken = (ordered[::-1] if op[2] else ordered)[:op[1]]
        for member, _ in taken:
            del ref.scores[member]
        assert z.pop(op[1], max=op[2]) == taken
    elif kind == "grow":
        for i in range(op[1]):
            member = b"g%d" % i
            flags = dict.fromkeys(("nx", "xx", "gt", "lt", "incr"), False)
            assert z.add(member, float(i % 3), limits=limits) == ref.add(
                member, float(i % 3), flags)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10), st.integers(0, 4), st.lists(OPS, max_size=25), st.data())
def test_matches_the_reference_model(entries: int, value: int, ops: list[tuple],
                                     data: st.DataObject) -> None:
    limits = ZSetLimits(entries, value)
    with small_chunks():
        z, ref = ZSet(), Reference(limits)
        for op in ops:
            apply(z, ref, op, limits)
            check_queries(z, ref, data)
        twin = ZSet.from_bytes(z.to_bytes(), ZSetLimits(1 << 20, 1 << 20))
        assert list(twin.items()) == ref.ordered()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(MEMBERS, max_size=12), st.lists(st.tuples(LEX_BOUND, LEX_BOUND),
                                                              min_size=1, max_size=6),
       st.integers(-1, 4), st.integers(-1, 4), st.booleans())
def test_lex_operations_match_the_reference(big: bool, members: list[bytes],
                                            ranges: list[tuple], offset: int, count: int,
                                            reverse: bool) -> None:
    with small_chunks(2):
        z = ZSet("skiplist" if big else "listpack")
        for member in members:
            z.add(member, 0.0)
        ordered = sorted(set(members))
        for low, high in ranges:
            rng = LexRange(*low, *high)
            inside = [] if rng.is_empty() else [m for m in ordered if rng.contains(m)]
            assert z.count_in_lex_range(rng) == len(inside)
            window = inside[::-1] if reverse else inside
            expected = [] if offset < 0 else window[offset:] if count < 0 else window[
                offset:offset + count]
            assert [m for m, _ in z.range_by_lex(rng, reverse, offset, count)] == expected
        low, high = ranges[0]
        rng = LexRange(*low, *high)
        inside = [] if rng.is_empty() else [m for m in ordered if rng.contains(m)]
        assert z.remove_range_by_lex(rng) == inside
        assert [m for m, _ in z.items()] == [m for m in ordered if m not in inside]


def test_large_set_against_the_reference() -> None:
    """Thousands of members in default-sized chunks: positions across chunk boundaries."""
    rng = random.Random(11)
    z, ref = ZSet(), Reference(DEFAULT_LIMITS)
    flags = dict.fromkeys(("nx", "xx", "gt", "lt", "incr"), False)
    for _ in range(6000):
        member, score = b"m%d" % rng.randrange(4000), float(rng.randrange(50))
        assert z.add(member, score) == ref.add(member, score, flags)
    for _ in range(1500):
        member = b"m%d" % rng.randrange(4000)
        assert z.remove(member) == (ref.scores.pop(member, None) is not None)
    ordered = ref.ordered()
    assert list(z.items()) == ordered
    for i in range(0, len(ordered), 97):
        assert z.rank(ordered[i][0]) == i
        assert z.range_by_rank(i, i + 3) == ordered[i:i + 4]
    rng_scores = ScoreRange(10.0, 20.0, True, False)
    inside = [p for p in ordered if rng_scores.contains(p[1])]
    assert z.range_by_score(rng_scores, offset=700, count=50) == inside[700:750]
    assert z.remove_range_by_score(rng_scores) == [m for m, _ in inside]
    assert z.remove_range_by_rank(100, 2000) == [m for m, _ in
                                                  [p for p in ordered if p not in inside][100:2001]]


def test_large_set_index_after_bulk_removals_and_copies() -> None:
    """A big set's member index (scores, -0's sign) stays right when a range removes most of
    the set, and a copy shares nothing it can change."""
    rng = random.Random(5)
    pairs = {b"element:%012d" % rng.randrange(10 ** 12): rng.choice(
        [-0.0, 0.0, 1.0, rng.random()]) for _ in range(3000)}
    z = filled(pairs)
    assert z.encoding == SKIPLIST
    twin = z.copy()
    negative = [m for m, s in pairs.items() if s == 0.0 and math.copysign(1.0, s) < 0]
    assert negative and all(format_score(score_of(z, m)) == b"-0" for m in negative)
    ordered = sorted(pairs.items(), key=lambda p: (p[1], p[0]))
    assert z.remove_range_by_rank(100, -100) == [m for m, _ in ordered[100:-99]]
    for member, score in ordered[:100] + ordered[-99:]:
        assert z.score(member) == score and z.rank(member) is not None
    assert all(z.score(m) is None for m, _ in ordered[100:-99])
    assert z.add(ordered[150][0], 2.0) == (ADD_ADDED, 2.0)
    assert z.add(ordered[0][0], 5.0) == (ADD_UPDATED, 5.0)
    assert len(z) == 200 and list(z.items()) == sorted(z.items(), key=lambda p: (p[1], p[0]))
    assert list(twin.items()) == ordered
    assert all(twin.score(m) == s for m, s in pairs.items())


# ---- against redis-server ------------------------------------------------------------------

def test_encodings_and_ranges_match_redis(redis_raw: RespClient) -> None:
    """Single-member adds and removals, as redis-server 7.0 encodes and orders them (7.0 and
    8.x agree for these; 8.x's size hints for multi-pair ZADD are tested from its source)."""
    redis_raw.execute("CONFIG", "SET", "zset-max-listpack-entries", "16")
    try:
        limits = ZSetLimits(16, 64)
        rng = random.Random(3)
        z = ZSet()
        for step in range(300):
            member = rng.choice([b"m%d" % rng.randrange(40), b"x" * rng.choice([64, 65])])
            if rng.random() < 0.7:
                score = rng.choice([0.0, -0.0, 1.0, 2.5, math.inf, float(rng.randrange(5))])
                redis_raw.execute("ZADD", "z", format_score(score), member)
                z.add(member, score, limits=limits)
            else:
                redis_raw.execute("ZREM", "z", member)
                z.remove(member)
                if not len(z):  # Redis deletes the emptied key: a new one starts small
                    z = ZSet()
            if not len(z):
                continue
            assert redis_raw.execute("OBJECT", "ENCODING", "z").decode() == z.encoding, step
            flat = redis_raw.execute("ZRANGE", "z", "0", "-1", "WITHSCORES")
            assert flat[0::2] == [m for m, _ in z.items()]
            assert [float(s) for s in flat[1::2]] == [s for _, s in z.items()]
            assert redis_raw.execute("ZCOUNT", "z", "(0", "2.5") == z.count_in_score_range(
                ScoreRange(0.0, 2.5, True, False))
            offset, count = rng.randrange(4), rng.randrange(-1, 4)
            flat = redis_raw.execute("ZREVRANGEBYSCORE", "z", "inf", "(0", "WITHSCORES",
                                     "LIMIT", str(offset), str(count))
            window = z.range_by_score(ScoreRange(0.0, math.inf, True, False), True, offset,
                                      count)
            assert flat[0::2] == [m for m, _ in window]
            assert redis_raw.execute("ZRANK", "z", member) == z.rank(member)
            assert redis_raw.execute("ZREVRANK", "z", member) == z.rank(member, reverse=True)
    finally:
        redis_raw.execute("CONFIG", "SET", "zset-max-listpack-entries", "128")
