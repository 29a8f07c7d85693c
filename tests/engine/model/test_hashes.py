"""engine.model.hashes: the HASH value against a dict model, its encodings and their conversion
thresholds (t_hash.c's rules), field expiry and listpackex's order, HINCRBY/HINCRBYFLOAT,
HRANDFIELD's cases and the serialisation."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.hashes import Hash, HashLimits
from streamkeep.engine.model.strings import parse_long_double
from streamkeep.engine.wire.errors import ReplyError


def filled(n: int, limits: HashLimits | None = None, value: bytes = b"v") -> Hash:
    h = Hash(limits)
    for i in range(n):
        h.set(b"f%d" % i, value + b"%d" % i)
    return h


# ---- basics and order -------------------------------------------------------------------

def test_set_get_delete_and_insertion_order():
    h = Hash()
    assert h.encoding == "listpack" and len(h) == 0 and h.items() == []
    assert h.set(b"a", b"1") is True
    assert h.set(b"b", b"2") is True
    assert h.set(b"a", b"3") is False  # replaced in place: the order stays
    assert h.items() == [(b"a", b"3"), (b"b", b"2")]
    assert h.keys() == [b"a", b"b"] and h.values() == [b"3", b"2"]
    assert h.get(b"a") == b"3" and h.get(b"zz") is None
    assert b"a" in h and b"zz" not in h and "a" not in h
    assert h.strlen(b"a") == 1 and h.strlen(b"zz") == 0
    assert h.delete(b"a") is True and h.delete(b"a") is False
    assert h.items() == [(b"b", b"2")] and len(h) == 1


def test_binary_fields_and_lookalikes():
    h = Hash()
    fields = [b"", b"f", b"ff", b"f1", b"f11", b"1f", b"\x00", b"\x02f1", b"\xff" * 3]
    for i, f in enumerate(fields):
        h.set(f, f + b"=%d" % i)
    h.set(b"x", b"f1")  # a value equal to a field name must not be found as a field
    for i, f in enumerate(fields):
        assert h.get(f) == f + b"=%d" % i
    assert h.get(b"f111") is None and h.get(b"1") is None
    assert h.delete(b"f1") and h.get(b"f11") == b"f11=4" and h.get(b"f1") is None
    assert h.delete(b"") and h.get(b"") is None and len(h) == len(fields) - 1


def test_hsetnx():
    h = Hash()
    assert h.setnx(b"a", b"1") is True
    assert h.setnx(b"a", b"2") is False
    assert h.get(b"a") == b"1"


# ---- encodings --------------------------------------------------------------------------

def test_listpack_up_to_512_entries_then_hashtable_for_good():
    # hash-max-listpack-entries is 512 in redis-server's config.c (128 is the sets' limit)
    assert HashLimits().max_listpack_entries == 512
    h = filled(512)
    assert h.encoding == "listpack"
    h.set(b"f0", b"again")  # an update does not count
    assert h.encoding == "listpack"
    h.set(b"one-more", b"x")
    assert h.encoding == "hashtable" and len(h) == 513
    for i in range(513):
        h.delete(b"f%d" % i)
    assert len(h) == 1 and h.encoding == "hashtable"  # never back


@pytest.mark.parametrize(("field", "value", "encoding"), [
    (b"f" * 64, b"v", "listpack"),
    (b"f", b"v" * 64, "listpack"),
    (b"f" * 65, b"v", "hashtable"),
    (b"f", b"v" * 65, "hashtable"),
])
def test_listpack_value_limit(field, value, encoding):
    h = filled(3)
    h.set(field, value)
    assert h.encoding == encoding and h.get(field) == value and h.get(b"f1") == b"v1"


def test_hset_of_many_pairs_converts_first_even_with_duplicates():
    h = Hash()
    assert h.set_many([(b"a", b"%d" % i) for i in range(513)]) == 1
    assert h.encoding == "hashtable" and h.items() == [(b"a", b"512")]
    small = Hash()
    assert small.set_many([(b"a", b"1"), (b"b", b"2"), (b"a", b"3")]) == 2
    assert small.encoding == "listpack" and small.items() == [(b"a", b"3"), (b"b", b"2")]
    long_value = Hash()
    long_value.set_many([(b"a", b"1"), (b"b", b"x" * 65)])
    assert long_value.encoding == "hashtable"


def test_custom_limits_are_read_at_each_write():
    limits = HashLimits(max_listpack_entries=4, max_listpack_value=8)
    h = filled(4, limits)
    assert h.encoding == "listpack"
    limits.max_listpack_entries = 2  # CONFIG SET: an update does not convert ...
    h.set(b"f0", b"x")
    assert h.encoding == "listpack"
    h.set(b"new", b"x")  # ... a new field does
    assert h.encoding == "hashtable"
    assert Hash.from_pairs([(b"a", b"123456789")], HashLimits(4, 8)).encoding == "hashtable"


def test_hincrby_with_a_long_field_converts():
    h = Hash()
    h.incr_by(b"f" * 65, 1)
    assert h.encoding == "hashtable" and h.get(b"f" * 65) == b"1"


def test_long_strings_in_a_listpack_when_the_limit_allows():
    h = Hash(HashLimits(max_listpack_entries=300, max_listpack_value=5000))
    h.set(b"k" * 300, b"v" * 4000)
    for i in range(280):
        h.set(b"f%d" % i, b"%d" % i)
    assert h.encoding == "listpack" and len(h) == 281
    assert h.get(b"k" * 300) == b"v" * 4000 and h.get(b"f279") == b"279"
    assert h.delete(b"f3") and h.get(b"f3") is None and len(h) == 280
    h.set(b"k" * 300, b"w")
    assert h.items()[0] == (b"k" * 300, b"w")


# ---- arithmetic -------------------------------------------------------------------------

def test_incr_by():
    h = Hash()
    assert h.incr_by(b"n", 5) == 5
    assert h.incr_by(b"n", -7) == -2 and h.get(b"n") == b"-2"
    h.set(b"s", b"abc")
    h.set(b"z", b"007")
    h.set(b"big", b"%d" % (2**63 - 1))
    for field in (b"s", b"z"):
        with pytest.raises(ReplyError, match="^ERR hash value is not an integer$"):
            h.incr_by(field, 1)
    with pytest.raises(ReplyError, match="^ERR increment or decrement would overflow$"):
        h.incr_by(b"big", 1)
    assert h.get(b"big") == b"%d" % (2**63 - 1)


def test_incr_by_float():
    h = Hash()
    tenth, fifth = parse_long_double(b"0.1"), parse_long_double(b"0.2")
    assert tenth is not None and fifth is not None
    assert h.incr_by_float(b"f", tenth) == b"0.1"
    assert h.incr_by_float(b"f", fifth) == b"0.3"
    h.set(b"s", b"abc")
    with pytest.raises(ReplyError, match="^ERR hash value is not a float$"):
        h.incr_by_float(b"s", Fraction(1))
    h.set(b"inf", b"inf")
    with pytest.raises(ReplyError, match="^ERR increment would produce NaN or Infinity$"):
        h.incr_by_float(b"inf", Fraction(1))


# ---- field expiry -----------------------------------------------------------------------

def test_plain_hashes_carry_no_expiry_state():
    h = filled(600)
    assert h.encoding == "hashtable"
    assert h.min_field_expiry() is None and h.expired_fields(1 << 60) == []
    assert h._data.ttl is None and h._data.heap is None  # type: ignore[union-attr]


def test_listpackex_orders_fields_by_expiry():
    h = filled(5)
    h.prepare_field_expiry()
    assert h.encoding == "listpackex"
    assert h.set_field_expiry(b"f3", 300) and h.set_field_expiry(b"f1", 100)
    assert h.set_field_expiry(b"f4", 300)  # ties: before the first >= it
    assert not h.set_field_expiry(b"nope", 1)
    assert h.keys() == [b"f1", b"f4", b"f3", b"f0", b"f2"]
    assert h.fields_with_expiry() == [(b"f1", 100), (b"f4", 300), (b"f3", 300)]
    assert h.min_field_expiry() == 100 and h.field_expiry(b"f0") is None
    assert h.expired_fields(299) == [b"f1"] and h.expired_fields(300) == [b"f1", b"f4", b"f3"]
    assert h.expired_fields(300, limit=2) == [b"f1", b"f4"]
    h.set(b"f4", b"new")  # HSET drops the TTL: the pair goes last
    assert h.keys() == [b"f1", b"f3", b"f0", b"f2", b"f4"] and h.field_expiry(b"f4") is None
    h.incr_by(b"n", 1)
    h.set_field_expiry(b"n", 200)
    assert h.incr_by(b"n", 1) == 2 and h.field_expiry(b"n") == 200  # HINCRBY keeps it
    assert h.persist_field(b"f1") and not h.persist_field(b"f1") and not h.persist_field(b"f0")
    assert h.keys()[-1] == b"f1"
    assert h.delete_expired(1000) == [b"n", b"f3"] and len(h) == 4
    assert h.encoding == "listpackex" and h.min_field_expiry() is None  # stays listpackex
    h.set(b"f0", b"x")
    assert h.encoding == "listpackex"


def test_a_listpack_becomes_listpackex_on_the_first_ttl_and_hashtable_keeps_them():
    h = filled(10)
    assert h.set_field_expiry(b"f2", 50) and h.encoding == "listpackex"
    h.set_field_expiry(b"f7", 40)
    h.set(b"long", b"x" * 100)
    assert h.encoding == "hashtable"
    assert h.fields_with_expiry() == [(b"f7", 40), (b"f2", 50)] and h.min_field_expiry() == 40
    h.set_field_expiry(b"f7", 60)  # moved later: the stale heap entry is skipped
    assert h.min_field_expiry() == 50 and h.expired_fields(55) == [b"f2"]
    h.set(b"f2", b"new")  # HSET clears it
    assert h.min_field_expiry() == 60 and h.field_expiry(b"f2") is None
    assert h.delete_expired(60) == [b"f7"] and h.get(b"f7") is None
    assert h.min_field_expiry() is None and h._data.ttl is None  # type: ignore[union-attr]


def test_hashtable_expiry_heap_with_many_fields():
    h = filled(2000)
    assert h.encoding == "hashtable"
    rng = random.Random(5)
    times = {}
    for i in rng.sample(range(2000), 300):
        times[b"f%d" % i] = rng.randrange(10_000)
        h.set_field_expiry(b"f%d" % i, times[b"f%d" % i])
    for f in list(times)[:50]:
        times[f] = rng.randrange(10_000)
        h.set_field_expiry(f, times[f])
    for f in list(times)[50:80]:
        assert h.persist_field(f)
        del times[f]
    assert h.min_field_expiry() == min(times.values())
    expected = sorted((w, f) for f, w in times.items() if w <= 5000)
    assert sorted((times[f], f) for f in h.expired_fields(5000)) == expected
    assert sorted(h.delete_expired(5000)) == sorted(f for _, f in expected)
    assert len(h) == 2000 - len(expected)


# ---- random fields ----------------------------------------------------------------------

def test_random_fields_cases_small():
    h = filled(10)
    rng = random.Random(1)
    assert h.random_fields(0, False, rng) == []
    assert Hash().random_fields(5, False, rng) == []
    assert h.random_fields(10, False, rng) == h.keys()  # count >= size: the whole hash
    assert h.random_fields(50, True, rng) == [x for p in h.items() for x in p]
    picked = h.random_fields(4, False, rng)
    order = h.keys()
    assert len(set(picked)) == 4 and picked == sorted(picked, key=order.index)
    repeats = h.random_fields(-100, True, rng)
    pairs = zip(repeats[::2], repeats[1::2], strict=True)
    assert len(repeats) == 200 and all(h.get(f) == v for f, v in pairs)
    assert len(set(repeats[::2])) < 100


@pytest.mark.parametrize("count", [1, 5, 400, 999])
def test_random_fields_distinct_on_a_hashtable(count):
    h = filled(1000)
    fields = h.random_fields(count, False, random.Random(count))
    assert len(fields) == count and len(set(fields)) == count and all(f in h for f in fields)


def test_random_picks_are_uniform_enough():
    h = filled(600)  # a hashtable: buckets of different sizes must not bias the picks
    rng = random.Random(7)
    counts: dict[bytes, int] = {}
    for f in h.random_fields(-60_000, False, rng):
        counts[f] = counts.get(f, 0) + 1
    assert len(counts) == 600 and min(counts.values()) > 50 and max(counts.values()) < 160


# ---- copies, scans, serialisation -------------------------------------------------------

@pytest.mark.parametrize("kind", ["listpack", "listpackex", "hashtable"])
def test_copy_is_independent(kind):
    h = filled(600 if kind == "hashtable" else 5)
    if kind != "listpack":
        h.set_field_expiry(b"f1", 99)
    c = h.copy()
    assert c.encoding == h.encoding == kind and c.items() == h.items()
    c.set(b"f1", b"changed")
    c.set(b"new", b"x")
    assert h.get(b"f1") == b"v1" and b"new" not in h
    assert h.field_expiry(b"f1") == (None if kind == "listpack" else 99)
    assert c.field_expiry(b"f1") is None


@pytest.mark.parametrize("kind", ["listpack", "listpackex", "hashtable"])
def test_bytes_round_trip(kind):
    h = filled(600 if kind == "hashtable" else 7)
    h.set(b"", b"")
    if kind != "listpack":
        h.set_field_expiry(b"f3", 1234)
        h.set_field_expiry(b"f1", -5)
    data = h.to_bytes()
    assert data[0] == 1
    back = Hash.from_bytes(data)
    assert back.encoding == kind and back.fields_with_expiry() == h.fields_with_expiry()
    if kind == "hashtable":
        assert sorted(back.items()) == sorted(h.items())
    else:
        assert back.items() == h.items()
    assert Hash.from_bytes(data, HashLimits(max_listpack_entries=2)).encoding == "hashtable"
    for bad in (b"", b"\x02" + data[1:], data[:-1], data + b"\x00"):
        with pytest.raises(ValueError):
            Hash.from_bytes(bad)


def test_scan_visits_every_field_while_the_table_grows():
    h = filled(600)
    seen: set[bytes] = set()
    cursor, rounds = 0, 0
    while True:
        cursor, pairs = h.scan(cursor, 10)
        seen.update(f for f, _ in pairs)
        h.set(b"extra%d" % rounds, b"x")  # splits buckets under the scan
        rounds += 1
        if cursor == 0:
            break
    assert {b"f%d" % i for i in range(600)} <= seen
    assert filled(3).scan(0) == (0, filled(3).items())


def test_memory_usage_estimates_redis_and_footprint_ours():
    small, big = filled(10), filled(5000)
    assert small.memory_usage() == 16 + 96  # 7 + 10 * 4 (f0..f9) + 10 * 4 (v0..v9): 87
    assert big.memory_usage() > 5000 * (24 + 8 + 8)  # entries, two small sds each, buckets
    assert 0 < small.footprint() < 400 and big.footprint() > 5000 * 10
    small.set_field_expiry(b"f1", 1)
    assert small.memory_usage() == 16 + 32 + 112  # and 10 TTL entries of 2 bytes: 107


# ---- against a dict ---------------------------------------------------------------------

FIELDS = st.sampled_from([b"", b"a", b"b", b"ab", b"f1", b"f11", b"x" * 70] +
                         [b"k%d" % i for i in range(40)])
VALUES = st.one_of(st.binary(max_size=12), st.sampled_from([b"0", b"-3", b"z" * 80]))
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), FIELDS, VALUES),
    st.tuples(st.just("del"), FIELDS, st.just(b"")),
    st.tuples(st.just("ttl"), FIELDS, st.integers(0, 50).map(lambda n: b"%d" % n)),
    st.tuples(st.just("persist"), FIELDS, st.just(b"")),
    st.tuples(st.just("incr"), FIELDS, st.just(b"")),
    st.tuples(st.just("many"), st.lists(st.tuples(FIELDS, VALUES), min_size=2, max_size=6),
              st.just(b"")),
), max_size=120)


@settings(max_examples=120, deadline=None)
@given(ops=OPS, entries=st.sampled_from([4, 16, 128]))
def test_matches_a_dict(ops, entries):
    h = Hash(HashLimits(max_listpack_entries=entries, max_listpack_value=64))
    model: dict[bytes, bytes] = {}
    ttl: dict[bytes, int] = {}
    seen_encoding = ["listpack"]
    for op, field, arg in ops:
        if op == "many":
            created = len({f for f, _ in field} - set(model))
            assert h.set_many(field) == created
            for f, v in field:
                if f in ttl and h.encoding == "listpackex":  # it moves last
                    model.pop(f)
                model[f] = v
                ttl.pop(f, None)
        elif op == "set":
            assert h.set(field, arg) == (field not in model)
            if field in ttl and h.encoding == "listpackex":  # it moves last
                model.pop(field)
            model[field] = arg
            ttl.pop(field, None)
        elif op == "del":
            assert h.delete(field) == (field in model)
            model.pop(field, None)
            ttl.pop(field, None)
        elif op == "ttl":
            assert h.set_field_expiry(field, int(arg)) == (field in model)
            if field in model:
                ttl[field] = int(arg)
        elif op == "persist":
            assert h.persist_field(field) == (field in ttl)
            if field in ttl and h.encoding == "listpackex":
                model[field] = model.pop(field)
            ttl.pop(field, None)
        else:
            try:
                old = int(model.get(field, b"0"))
                ok = model.get(field, b"0") == b"%d" % old
            except ValueError:
                ok = False
            if ok:
                assert h.incr_by(field, 2) == old + 2
                model[field] = b"%d" % (old + 2)
            else:
                with pytest.raises(ReplyError):
                    h.incr_by(field, 2)
        assert len(h) == len(model)
        order = ["listpack", "listpackex", "hashtable"]
        assert order.index(h.encoding) >= order.index(seen_encoding[-1])
        seen_encoding.append(h.encoding)
    assert dict(h.items()) == model
    for f, v in model.items():
        assert h.get(f) == v
    assert {f: w for f, w in h.fields_with_expiry()} == ttl
    assert h.min_field_expiry() == (min(ttl.values()) if ttl else None)
    if h.encoding == "listpack":
        assert h.items() == list(model.items())
    elif h.encoding == "listpackex":  # TTL'd fields by time, then the others in order
        with_ttl = [f for f, _ in h.fields_with_expiry()]
        assert h.keys() == with_ttl + [f for f in model if f not in ttl]
    back = Hash.from_bytes(h.to_bytes(), h.limits)
    assert back.encoding == h.encoding and dict(back.items()) == model
    assert dict(back.fields_with_expiry()) == ttl


# ---- against redis-server (7.0: listpack and hashtable as 8.x has them, no field TTLs) ----

def test_order_encoding_and_arithmetic_match_redis_server(redis_client):
    rng = random.Random(11)
    hashes: dict[bytes, Hash] = {}
    for step in range(600):
        key = b"h%d" % rng.randrange(3)
        h = hashes.setdefault(key, Hash())
        field = b"f%d" % rng.randrange(140 if key == b"h0" else 20)
        roll = rng.random()
        if roll < 0.7:
            value = b"x" * (70 if step == 500 and key == b"h2" else rng.randrange(1, 9))
            assert redis_client.hset(key, field, value) == h.set(field, value)
        elif roll < 0.85:
            assert redis_client.hdel(key, field) == h.delete(field)
        else:
            value = h.get(field)
            if value is None or value.isdigit():
                assert redis_client.hincrby(key, field, 3) == h.incr_by(field, 3)
            else:
                assert redis_client.hsetnx(key, field, b"n") == h.setnx(field, b"n")
    for key, h in hashes.items():
        if len(h) == 0:
            continue
        assert redis_client.object("encoding", key) == h.encoding.encode()
        theirs = list(redis_client.hgetall(key).items())  # the reply's order kept
        if h.encoding == "listpack":
            assert theirs == h.items()
            assert redis_client.hrandfield(key, len(h) + 1) == h.keys()
        else:
            assert dict(theirs) == dict(h.items())
    big = Hash()
    for i in range(514):
        assert redis_client.hset(b"big", b"k%d" % i, b"v") == big.set(b"k%d" % i, b"v")
        if i in (511, 512):  # 512 fields: a listpack still; 513: a hashtable
            assert redis_client.object("encoding", b"big") == big.encoding.encode()
    assert big.encoding == "hashtable"
    for key, value in ((b"h1", hashes.get(b"h1")), (b"big", big)):
        if value is not None and len(value):  # MEMORY USAGE less the key's sds and entry
            theirs = redis_client.memory_usage(key, samples=0) - 8 - 24
            assert value.memory_usage(0) == theirs
    h = Hash()
    for step in ("0.1", "0.2", "1e3", "-1000.3", "2.5e-5"):
        increment = parse_long_double(step.encode())  # as the command parses it
        assert increment is not None
        ours = h.incr_by_float(b"f", increment)
        assert redis_client.hincrbyfloat(b"float", b"f", step) == float(ours)
        assert redis_client.hget(b"float", b"f") == ours


def _old_record(h: Hash) -> bytes:
    """The record a hashtable had before placements were stored: its non-empty buckets."""
    table = h.table()
    assert table is not None
    packs = [b for b in table.buckets if len(b) > 2]
    ttls = h.fields_with_expiry()
    return b"".join([b"\x01\x02", len(packs).to_bytes(4, "little"),
                     *(len(p).to_bytes(4, "little") + p for p in packs),
                     len(ttls).to_bytes(4, "little"),
                     *(len(f).to_bytes(4, "little") + f + w.to_bytes(8, "little", signed=True)
                       for f, w in ttls)])


def test_a_hashtable_record_keeps_its_buckets_as_they_are():
    """The record holds the table's placement and every bucket: the hash read back adopts
    them (the same seed, the same buckets) and grows as the original does; the record of
    before (no placement) still loads, its pairs placed again; a bucket that does not fit the
    placement, or a count of packs past the record's bytes, is refused."""
    h = filled(3000)
    h.set_field_expiry(b"f3", 1234)
    back = Hash.from_bytes(h.to_bytes())
    table, twin = h.table(), back.table()
    assert table is not None and twin is not None
    assert (twin.seed, twin.size, twin.split, twin.buckets) == (
        table.seed, table.size, table.split, table.buckets)
    assert back.fields_with_expiry() == h.fields_with_expiry()
    for x in (h, back):
        x.set_many([(b"g%d" % i, b"w") for i in range(2000)])
    assert twin.buckets == table.buckets
    old = Hash.from_bytes(_old_record(h))
    assert sorted(old.items()) == sorted(h.items())
    assert old.fields_with_expiry() == h.fields_with_expiry()
    swapped = list(table.buckets)
    at = next(i for i in range(len(swapped) - 1) if swapped[i] != swapped[i + 1])
    swapped[at], swapped[at + 1] = swapped[at + 1], swapped[at]
    other = Hash.from_table(table.copy())
    other_table = other.table()
    assert other_table is not None
    other_table.buckets = swapped
    with pytest.raises(ValueError, match="another bucket"):
        Hash.from_bytes(other.to_bytes())
    with pytest.raises(ValueError, match="truncated"):
        Hash.from_bytes(b"\x01\x03" + bytes(24) + b"\xff\xff\xff\xff")
