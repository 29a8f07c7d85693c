"""engine.model.sets: the SET value against a Python set, its encodings and their conversion
thresholds (t_set.c's rules, Redis 7.2+: intset, listpack, hashtable), the encoding a new set
starts in, SPOP's and SRANDMEMBER's cases and the serialisation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.sets import RSet, SetLimits


def ints(n: int, start: int = 0) -> list[bytes]:
    return [b"%d" % i for i in range(start, start + n)]


def strs(n: int) -> list[bytes]:
    return [b"m%d" % i for i in range(n)]


def built(members: list[bytes], limits: SetLimits | None = None) -> RSet:
    s = RSet(limits)
    for m in members:
        s.add(m)
    return s


# ---- basics and order -------------------------------------------------------------------

def test_intset_is_sorted_and_takes_only_canonical_integers():
    s = RSet()
    assert [s.add(m) for m in (b"5", b"-3", b"5", b"100", b"0")] == [True, True, False, True, True]
    assert s.encoding == "intset" and s.members() == [b"-3", b"0", b"5", b"100"]
    assert list(s) == s.members() and len(s) == 4
    assert b"5" in s and b"05" not in s and b"+5" not in s and b"x" not in s and 5 not in s
    assert s.remove(b"0") and not s.remove(b"0") and not s.remove(b"abc")
    for odd in (b"07", b"+1", b"-0", b" 1", b"9223372036854775808"):
        t = built([b"1"])
        t.add(odd)
        assert t.encoding == "listpack" and odd in t and t.members() == [b"1", odd]
    edge = built([b"9223372036854775807", b"-9223372036854775808"])
    assert edge.encoding == "intset" and edge.members()[0] == b"-9223372036854775808"


def test_listpack_keeps_insertion_order():
    s = built([b"b", b"a", b"", b"a", b"c1", b"c"])
    assert s.encoding == "listpack" and s.members() == [b"b", b"a", b"", b"c1", b"c"]
    assert b"c" in s and b"c1" in s and b"1" not in s and b"" in s
    assert s.remove(b"a") and s.remove(b"") and not s.remove(b"zz")
    assert s.members() == [b"b", b"c1", b"c"]


# ---- encodings --------------------------------------------------------------------------

def test_intset_up_to_512_then_hashtable():
    s = built(ints(512))
    assert s.encoding == "intset"
    s.add(b"512")
    assert s.encoding == "hashtable" and len(s) == 513 and b"77" in s


@pytest.mark.parametrize(("size", "member", "encoding"), [
    (127, b"x", "listpack"),  # 127 integers and one string: 128 members fit a listpack
    (128, b"x", "hashtable"),
    (3, b"x" * 64, "listpack"),
    (3, b"x" * 65, "hashtable"),
])
def test_intset_meeting_a_string(size, member, encoding):
    s = built(ints(size))
    s.add(member)
    assert s.encoding == encoding and len(s) == size + 1 and member in s
    if encoding == "listpack":
        assert s.members() == ints(size) + [member]  # the integers ascending, then it


def test_intset_of_long_integers_skips_the_listpack_when_their_text_is_too_long():
    limits = SetLimits(max_listpack_value=5)
    s = built([b"123456"], limits)
    assert s.encoding == "intset"
    s.add(b"abc")
    assert s.encoding == "hashtable"
    short = built([b"-1234"], limits)
    short.add(b"abc")
    assert short.encoding == "listpack"


def test_listpack_up_to_128_then_hashtable_for_good():
    s = built(strs(128))
    assert s.encoding == "listpack"
    s.add(b"m0")
    assert s.encoding == "listpack"
    s.add(b"one-more")
    assert s.encoding == "hashtable"
    for m in strs(128):
        s.remove(m)
    assert s.members() == [b"one-more"] and s.encoding == "hashtable"
    long_member = built([b"a"])
    long_member.add(b"x" * 65)
    assert long_member.encoding == "hashtable"


def test_sadd_of_many_converts_first_even_with_duplicates():
    s = built([b"a"])
    assert s.add_many([b"a"] * 129) == 0 and s.encoding == "hashtable"
    t = built([b"1"])
    assert t.add_many([b"1"] * 513) == 0 and t.encoding == "hashtable"
    u = built([b"1"])
    assert u.add_many([b"1"] * 200) == 0 and u.encoding == "intset"


@pytest.mark.parametrize(("first", "hint", "encoding"), [
    (b"1", 1, "intset"), (b"1", 512, "intset"), (b"1", 513, "hashtable"),
    (b"a", 128, "listpack"), (b"a", 129, "hashtable"), (b"01", 1, "listpack"),
])
def test_the_encoding_of_a_new_key(first, hint, encoding):
    s = RSet.for_new_key(first, hint)
    assert s.encoding == encoding and len(s) == 0


def test_store_results():
    assert RSet.from_members(ints(5)).encoding == "intset"
    assert RSet.from_members(ints(5) + [b"a"]).encoding == "listpack"
    assert RSet.from_members(ints(600)).encoding == "hashtable"
    # SINTERSTORE: from a hashtable's walk a listpack, then an intset when all are integers
    assert RSet.intersection_result(ints(5), "hashtable").encoding == "intset"
    assert RSet.intersection_result(ints(300), "hashtable").encoding == "intset"
    assert RSet.intersection_result(ints(600), "hashtable").encoding == "hashtable"
    mixed = RSet.intersection_result([b"b", b"1", b"a"], "listpack")
    assert mixed.encoding == "listpack" and mixed.members() == [b"b", b"1", b"a"]
    assert RSet.intersection_result([b"3", b"1"], "intset").members() == [b"1", b"3"]


def test_custom_limits():
    limits = SetLimits(max_intset_entries=3, max_listpack_entries=2, max_listpack_value=4)
    s = built(ints(3), limits)
    assert s.encoding == "intset"
    s.add(b"9")
    assert s.encoding == "hashtable"
    t = built([b"ab"], limits)
    t.add(b"cd")
    assert t.encoding == "listpack"
    t.add(b"ef")
    assert t.encoding == "hashtable"


def test_long_members_and_big_listpacks():
    s = RSet(SetLimits(max_listpack_entries=400, max_listpack_value=1000))
    s.add(b"k" * 300)
    for m in strs(300):
        s.add(m)
    assert s.encoding == "listpack" and len(s) == 301 and s.members()[0] == b"k" * 300
    assert b"k" * 300 in s and b"m299" in s and s.remove(b"m7") and b"m7" not in s
    assert RSet.from_bytes(s.to_bytes(), s.limits).members() == s.members()
    t = built([b"a", b"x" * 5000, b"y" * 300])
    assert t.encoding == "hashtable" and b"x" * 5000 in t and t.remove(b"y" * 300)
    assert sorted(RSet.from_bytes(t.to_bytes()).members()) == sorted([b"a", b"x" * 5000])


# ---- random members ---------------------------------------------------------------------

@pytest.mark.parametrize("members", [ints(20), strs(20), strs(1000)],
                         ids=["intset", "listpack", "hashtable"])
def test_srandmember_cases(members):
    s = built(members)
    rng = random.Random(4)
    size = len(members)
    assert s.random_members(0, rng) == []
    assert s.random_members(size, rng) == s.members()  # count >= size: all, in order
    assert s.random_members(size + 5, rng) == s.members()
    one = s.random_members(1, rng)
    assert len(one) == 1 and one[0] in s
    rep = s.random_members(-3 * size, rng)
    assert len(rep) == 3 * size and len(set(rep)) < len(rep) and all(m in s for m in rep)
    for count in (2, size // 2, size - 1):  # distinct, members
        got = s.random_members(count, rng)
        assert len(got) == count == len(set(got)) and all(m in s for m in got)
    if s.encoding == "listpack":  # sampled in the listpack's order
        got = s.random_members(7, rng)
        assert got == [m for m in s.members() if m in got]
    assert len(s) == size


def test_random_member_is_uniform_enough_on_a_hashtable():
    s = built(strs(500))
    rng = random.Random(9)
    counts: dict[bytes, int] = {}
    for _ in range(50_000):
        m = s.random_member(rng)
        counts[m] = counts.get(m, 0) + 1
    assert len(counts) == 500 and min(counts.values()) > 50 and max(counts.values()) < 160


@pytest.mark.parametrize(("members", "count", "after"), [
    (ints(20), 3, "intset"), (ints(20), 19, "intset"),
    (strs(20), 3, "listpack"), (strs(20), 19, "listpack"),
    (strs(1000), 10, "hashtable"),
    (strs(1000), 900, "listpack"),  # 100 left: SPOP moves them into a new listpack
    (strs(1000), 500, "hashtable"),
    (strs(1000), 990, "listpack"),
    (ints(500) + [b"a" * 70], 490, "listpack"),  # (hashtable if the long member is kept)
])
def test_spop_cases(members, count, after):
    s = built(members)
    before = set(s.members())
    popped = s.pop_random(count, random.Random(count))
    assert len(popped) == count == len(set(popped)) and set(popped) <= before
    assert set(s.members()) == before - set(popped)
    if b"a" * 70 in s:
        after = "hashtable"  # a new listpack cannot take it
    assert s.encoding == after


def test_spop_all_and_more():
    s = built(strs(10))
    everything = s.members()
    assert s.pop_random(10, random.Random(1)) == everything and len(s) == 0
    t = built(ints(5))
    assert t.pop_random(50, random.Random(1)) == ints(5) and len(t) == 0
    assert t.pop_random(3, random.Random(1)) == [] and built(ints(3)).pop_random(0, random.Random(1)) == []


def test_spop_keeps_listpack_order():
    s = built(strs(30))
    order = s.members()
    popped = s.pop_random(5, random.Random(2))
    assert popped == [m for m in order if m in popped]
    assert s.members() == [m for m in order if m not in popped]


# ---- copies, scans, serialisation -------------------------------------------------------

@pytest.mark.parametrize("members", [ints(10), strs(10), strs(300)],
                         ids=["intset", "listpack", "hashtable"])
def test_copy_and_round_trip(members):
    s = built(members)
    c = s.copy()
    c.add(b"new")
    c.remove(members[0])
    assert b"new" not in s and members[0] in s and len(s) == len(members)
    back = RSet.from_bytes(s.to_bytes())
    assert back.encoding == s.encoding
    if s.encoding == "hashtable":
        assert sorted(back.members()) == sorted(s.members())
    else:
        assert back.members() == s.members()
    data = s.to_bytes()
    for bad in (b"", b"\x02" + data[1:], data[:-1], data + b"\x00"):
        with pytest.raises(ValueError):
            RSet.from_bytes(bad)


def test_load_converts_when_the_limits_no_longer_allow():
    data = built(ints(10)).to_bytes()
    assert RSet.from_bytes(data, SetLimits(max_intset_entries=5)).encoding == "hashtable"
    data = built(strs(10)).to_bytes()
    assert RSet.from_bytes(data, SetLimits(max_listpack_entries=5)).encoding == "hashtable"


def test_scan_visits_every_member_while_the_table_grows():
    s = built(strs(600))
    seen: set[bytes] = set()
    cursor, rounds = 0, 0
    while True:
        cursor, got = s.scan(cursor, 10)
        seen.update(got)
        s.add(b"extra%d" % rounds)
        rounds += 1
        if cursor == 0:
            break
    assert set(strs(600)) <= seen
    assert built(ints(3)).scan(0) == (0, ints(3))


def test_memory_usage():
    assert built(ints(10)).memory_usage() == 16 + 32  # an intset of 16-bit members: 8 + 20
    assert built(strs(10)).memory_usage() == 16 + 48  # a listpack: 7 + 10 * 4 bytes
    big = built(strs(5000))
    assert big.memory_usage(0) == 16 + 56 + 8 * 8192 + 5000 * (24 + 8)  # sds "m0".."m4999": 8
    assert 0 < built(ints(10)).footprint() < 300 and big.footprint() > 5000 * 5


# ---- against a Python set ---------------------------------------------------------------

MEMBERS = st.one_of(
    st.integers(-40, 40).map(lambda n: b"%d" % n),
    st.sampled_from([b"", b"a", b"ab", b"07", b"-0", b"+1", b"x" * 70, b"9223372036854775807",
                     b"-9223372036854775808", b"9223372036854775808"]),
    st.binary(max_size=6),
)
SET_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), MEMBERS),
    st.tuples(st.just("rem"), MEMBERS),
    st.tuples(st.just("pop"), st.integers(0, 12).map(lambda n: b"%d" % n)),
    st.tuples(st.just("many"), st.lists(MEMBERS, min_size=2, max_size=8)),
    st.tuples(st.just("many"), st.lists(st.integers(-99, 99).map(lambda n: b"%d" % n),
                                        min_size=2, max_size=8)),
), max_size=120)


@settings(max_examples=120, deadline=None)
@given(ops=SET_OPS, limits=st.sampled_from([(512, 128, 64), (8, 4, 64), (3, 16, 4)]))
def test_matches_a_python_set(ops, limits):
    s = RSet(SetLimits(*limits))
    model: dict[bytes, None] = {}
    rng = random.Random(0)
    rank = {"intset": 0, "listpack": 1, "hashtable": 2}
    for op, member in ops:
        before = s.encoding
        if op == "many":
            twin = s.copy()  # adding one at a time must end in the same place
            one_by_one = 0
            twin.maybe_convert(len(member))
            for m in member:
                one_by_one += twin.add(m)
            assert s.add_many(member) == one_by_one == len(set(member) - set(model))
            assert s.encoding == twin.encoding
            if s.encoding != "hashtable":
                assert s.members() == twin.members()
            model.update(dict.fromkeys(member))
        elif op == "add":
            assert s.add(member) == (member not in model)
            model[member] = None
        elif op == "rem":
            assert s.remove(member) == (member in model)
            model.pop(member, None)
        else:
            popped = s.pop_random(int(member), rng)
            assert len(popped) == min(int(member), len(model)) == len(set(popped))
            for m in popped:
                del model[m]
            continue  # SPOP may rebuild the set in a smaller encoding
        assert rank[s.encoding] >= rank[before]
        assert len(s) == len(model)
    assert set(s.members()) == set(model) and len(s.members()) == len(model)
    assert all(m in s for m in model)
    if s.encoding == "intset":
        assert [int(m) for m in s.members()] == sorted(int(m) for m in model)
    back = RSet.from_bytes(s.to_bytes(), s.limits)
    assert back.encoding == s.encoding and set(back.members()) == set(model)


# ---- against redis-server (7.0 has intset and hashtable; 7.2's listpack is stated above) ----

def test_intset_order_and_threshold_match_redis_server(redis_client):
    rng = random.Random(3)
    s = RSet()
    for _ in range(700):
        member = b"%d" % rng.randrange(-(1 << 40), 1 << 40)
        assert redis_client.sadd(b"s", member) == s.add(member)
        if len(s) == 400:
            assert redis_client.sscan(b"s", 0, count=1000) == (0, s.members())
            assert redis_client.object("encoding", b"s") == b"intset" == s.encoding.encode()
    assert redis_client.object("encoding", b"s") == b"hashtable" == s.encoding.encode()
    assert set(redis_client.smembers(b"s")) == set(s.members())
    # MEMORY USAGE less the key's sds (8 bytes) and entry (24): intsets of each width, a table
    for key, members in ((b"i16", ints(300)), (b"i32", ints(300, 40_000)),
                         (b"i64", ints(3, 1 << 40)), (b"s", s.members())):
        ours = built(members)
        redis_client.sadd(key, *members)
        assert redis_client.memory_usage(key, samples=0) - 8 - 24 == ours.memory_usage(0)


def test_a_hashtable_record_keeps_its_buckets_as_they_are():
    """As a hash's (tests/engine/model/test_hashes.py): the placement and every bucket kept,
    the record of before still read, a bucket out of place refused."""
    s = built(strs(3000))
    back = RSet.from_bytes(s.to_bytes())
    table, twin = s.table(), back.table()
    assert table is not None and twin is not None
    assert (twin.seed, twin.size, twin.split, twin.buckets) == (
        table.seed, table.size, table.split, table.buckets)
    packs = [b for b in table.buckets if len(b) > 2]
    old = b"".join([b"\x01\x02", len(packs).to_bytes(4, "little"),
                    *(len(p).to_bytes(4, "little") + p for p in packs)])
    assert sorted(RSet.from_bytes(old).members()) == sorted(s.members())
    swapped = list(table.buckets)
    at = next(i for i in range(len(swapped) - 1) if swapped[i] != swapped[i + 1])
    swapped[at], swapped[at + 1] = swapped[at + 1], swapped[at]
    record = b"".join([b"\x01\x03", table.placement(), len(swapped).to_bytes(4, "little"),
                       *(len(p).to_bytes(4, "little") + p for p in swapped)])
    with pytest.raises(ValueError, match="another bucket"):
        RSet.from_bytes(record)
    with pytest.raises(ValueError, match="truncated"):
        RSet.from_bytes(b"\x01\x03" + bytes(24) + b"\xff\xff\xff\xff")
