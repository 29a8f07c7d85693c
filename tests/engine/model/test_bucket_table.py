"""engine.model.bucket_table: the linear-hashing table of packed buckets keeps every record it
was given through splits (one and two columns, records long enough to widen a bucket), finds,
replaces and deletes them as a dict would, never moves a record to a lower bucket while it
grows, and picks random records from what it holds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.bucket_table import LOAD, BucketTable, build_pack
from streamkeep.engine.model.packed_columns import pack_add, pack_item, pack_strings

keys = st.lists(st.binary(max_size=40) | st.binary(min_size=250, max_size=300), max_size=200,
                unique=True)


@settings(max_examples=60, deadline=None)
@given(keys=keys, data=st.data())
def test_two_columns_behave_as_a_dict(keys: list[bytes], data: st.DataObject) -> None:
    table = BucketTable(2, 0)
    model: dict[bytes, bytes] = {}
    for k in keys:
        value = b"v" + k[:3]
        assert table.put(k, value) is None
        model[k] = value
    for k in data.draw(st.lists(st.sampled_from(keys), max_size=20)) if keys else []:
        assert table.put(k, b"new") == model[k]
        model[k] = b"new"
    for k in data.draw(st.lists(st.sampled_from(keys), max_size=40)) if keys else []:
        assert table.pop(k) == model.pop(k, None)
    assert table.count == len(model)
    assert all(table.get(k) == v and k in table for k, v in model.items())
    assert table.get(b"absent" * 10) is None
    assert sum(len(b) for b in table.buckets) == table.nbytes
    pairs = [(s[i], s[len(s) // 2 + i]) for s in table.bucket_strings()
             for i in range(len(s) // 2)]
    assert sorted(pairs) == sorted(model.items())
    assert sorted(table.keys()) == sorted(model)


def test_one_column_adds_each_member_once_and_splits_as_it_grows() -> None:
    table = BucketTable(1, 0)
    members = [b"m%d" % i for i in range(1000)]
    for m in members:
        assert table.add(m)
    assert not table.add(members[7])
    assert table.count == 1000 and len(table.buckets) * LOAD >= 1000
    assert sorted(m for s in table.bucket_strings() for m in s) == sorted(members)
    assert sorted(table.keys()) == sorted(members)
    assert table.pop(members[7]) == members[7] and members[7] not in table
    for i, b in enumerate(table.buckets):  # every member where slot() looks for it
        assert all(table.slot(m) == i for m in pack_strings(b, 1))


def test_load_and_copy_hold_the_same_records() -> None:
    pairs = [(b"f%d" % i, b"%d" % i) for i in range(500)]
    table = BucketTable(2, len(pairs))
    table.load(pairs)
    twin = table.copy()
    twin.put(b"f1", b"changed")
    assert table.get(b"f1") == b"1" and twin.get(b"f1") == b"changed"
    assert all(table.get(f) == v for f, v in pairs)
    rng = random.Random(5)
    seen = {pack_item(b, 2, 0, r) for b, r in (table.random_slot(rng) for _ in range(3000))}
    assert len(seen) > 400 and seen <= {f for f, _ in pairs}


def test_packs_are_built_in_their_one_form() -> None:
    assert build_pack([[b"a", b"bc"], [b"1", b""]]) == b"\x01\x02\x01\x02\x01\x00abc1"
    wide = build_pack([[b"x" * 300]])
    assert wide[0] == 4 and pack_strings(wide, 1) == [b"x" * 300]
    assert pack_add(b"\x01\x01\x01a", 1, b"b") == b"\x01\x02\x01\x01ab"
    assert pack_add(b"\x01\x01\x01a", 1, b"a") is None
    assert pack_strings(pack_add(wide, 1, b"y") or b"", 1) == [b"x" * 300, b"y"]


def test_a_table_adopts_another_ones_buckets_with_its_seed() -> None:
    """The buckets and seed of a table (as a snapshot stores them) make a table that finds,
    places and grows as the original does: every record where it was, none placed again."""
    source = BucketTable(2, 0)
    for i in range(3000):
        source.put(b"field:%d" % i, b"value-%d" % i)
    twin = BucketTable(2, 0)
    twin.adopt(source.seed, source.size, source.split, list(source.buckets))
    assert twin.buckets == source.buckets and twin.count == source.count == 3000
    assert twin.nbytes == source.nbytes and twin.seed == source.seed
    for i in range(3000, 4000):  # both grow alike: the placement is the seed's, not hash()'s
        assert source.put(b"field:%d" % i, b"v") is None and twin.put(b"field:%d" % i, b"v") is None
    assert twin.buckets == source.buckets
    assert all(twin.get(b"field:%d" % i) == source.get(b"field:%d" % i) for i in range(4000))


def test_adopt_refuses_buckets_no_table_could_hold() -> None:
    source = BucketTable(1, 0)
    for i in range(200):
        source.add(b"m%d" % i)
    seed, size, split, buckets = source.seed, source.size, source.split, list(source.buckets)
    other_seed = bytes(16) if seed != bytes(16) else bytes(15) + b"\x01"
    swapped = [buckets[1], buckets[0], *buckets[2:]]
    at = source.slot(b"m0")
    twice = [*buckets[:at], build_pack([[b"m0", b"m0"]]), *buckets[at + 1:]]
    bad = {
        "a size not a power of two": (seed, 3, 0, buckets),
        "split past the size": (seed, size, size, buckets),
        "a bucket missing": (seed, size, split, buckets[:-1]),
        "another seed": (other_seed, size, split, buckets),
        "buckets swapped": (seed, size, split, swapped),
        "a malformed pack": (seed, size, split, [b"\x07", *buckets[1:]]),
        "a key twice": (seed, size, split, twice),
    }
    for name, args in bad.items():
        with pytest.raises(ValueError):
            BucketTable(1, 0).adopt(*args)
            pytest.fail(name)
