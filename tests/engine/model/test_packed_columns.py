"""engine.model.packed_columns: the compiled kernel and its pure twin read the packs of the small
hashes and sets (one and two columns, both widths) as lists of strings would: a string found
by its index (not inside another, not in the header), its offset and bytes; and a malformed
pack, as a snapshot or an RDB file could hold, is a ValueError from both, never a crash."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

packed_impl = kernel_fixture("streamkeep.engine.model", "packed_columns")
SEED = bytes(range(16))  # a bucket table's placement seed


def _pack(columns: list[list[bytes]], wide: bool = False) -> bytes:
    """The pack of equally long columns: width byte, count, lengths, strings."""
    n = len(columns[0])
    lens = [len(s) for column in columns for s in column]
    strings = b"".join(s for column in columns for s in column)
    if not wide:
        return bytes((1, n, *lens)) + strings
    return (b"\x04" + n.to_bytes(4, "little")
            + b"".join(size.to_bytes(4, "little") for size in lens) + strings)


def test_a_string_inside_another_is_not_found_there(packed_impl: ModuleType) -> None:
    strings = [b"abcabc", b"bca", b"", b"c", b"ab"]
    for wide in (False, True):
        blob = _pack([strings], wide)
        for i, s in enumerate(strings):
            assert packed_impl.pack_index(blob, 1, s) == i
        assert packed_impl.pack_index(blob, 1, b"cab") == -1
        assert packed_impl.pack_index(blob, 1, blob[:2]) == -1  # the header is no string


def test_a_value_is_not_found_as_a_field(packed_impl: ModuleType) -> None:
    blob = _pack([[b"f1", b"f2"], [b"v1", b"f3"]])
    assert packed_impl.pack_index(blob, 2, b"f3") == -1
    assert packed_impl.pack_get(blob, 2, b"f2", 1) == b"f3"
    assert packed_impl.pack_get(blob, 2, b"v1", 1) is None
    assert packed_impl.pack_get(blob, 2, b"f1", 0) == b"f1"


def test_the_empty_pack(packed_impl: ModuleType) -> None:
    for blob in (b"\x01\x00", _pack([[]], wide=True)):
        assert packed_impl.pack_count(blob, 1) == 0
        assert packed_impl.pack_index(blob, 1, b"") == -1
        assert packed_impl.pack_offset(blob, 1, 0, 0) == len(blob)
        with pytest.raises(IndexError):
            packed_impl.pack_item(blob, 1, 0, 0)


def test_a_bytes_subclass_is_a_pack(packed_impl: ModuleType) -> None:
    class Kept(bytes):
        pass

    blob = Kept(_pack([[b"f"], [b"v"]]))
    assert packed_impl.pack_get(blob, 2, b"f", 1) == b"v"
    assert type(packed_impl.pack_item(blob, 2, 1, 0)) is bytes


def _strings(max_size: int = 6) -> st.SearchStrategy[list[bytes]]:
    return st.lists(st.binary(max_size=max_size), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from([1, 2]), st.booleans(), st.binary(max_size=6))
def test_as_lists_read_it(packed_impl: ModuleType, data: st.DataObject, ncols: int,
                          wide: bool, needle: bytes) -> None:
    first = data.draw(_strings())
    columns = [first] + [data.draw(st.lists(st.binary(max_size=300 if wide else 6),
                                            min_size=len(first), max_size=len(first)))
                         for _ in range(ncols - 1)]
    blob = _pack(columns, wide)
    want = first.index(needle) if needle in first else -1
    assert packed_impl.pack_count(blob, ncols) == len(first)
    assert packed_impl.pack_index(blob, ncols, needle) == want
    for col, column in enumerate(columns):
        assert packed_impl.pack_get(blob, ncols, needle, col) == (
            None if want < 0 else column[want])
        header = 2 + 3 * wide + ncols * len(first) * (4 if wide else 1)
        at = header + sum(len(s) for c in columns[:col] for s in c)
        for i, s in enumerate(column):
            assert packed_impl.pack_offset(blob, ncols, col, i) == at
            assert packed_impl.pack_item(blob, ncols, col, i) == s
            at += len(s)
        assert packed_impl.pack_offset(blob, ncols, col, len(column)) == at
    assert packed_impl.pack_strings(blob, ncols) == [s for column in columns for s in column]


def test_out_of_range_places_are_index_errors(packed_impl: ModuleType) -> None:
    blob = _pack([[b"a", b"b"], [b"x", b"y"]])
    for col, i in ((-1, 0), (2, 0), (0, -1), (0, 3), (1, 3)):
        with pytest.raises(IndexError):
            packed_impl.pack_offset(blob, 2, col, i)
    for col, i in ((0, 2), (1, 2), (2, 0)):
        with pytest.raises(IndexError):
            packed_impl.pack_item(blob, 2, col, i)
    with pytest.raises(IndexError):
        packed_impl.pack_get(blob, 2, b"a", 2)


HOSTILE = {
    "empty": b"",
    "one byte": b"\x01",
    "width byte 2": b"\x02\x01\x01a",
    "width byte 0": b"\x00\x00",
    "wide count cut": b"\x04\x01\x00",
    "count past the end": b"\x01\x05\x01a",
    "huge wide count": b"\x04\xff\xff\xff\xff\x01\x00\x00\x00a",
    "length past the end": b"\x01\x01\x09abc",
    "wide length past the end": b"\x04\x01\x00\x00\x00\xff\xff\xff\xffabc",
    "truncated string": _pack([[b"abc", b"de"]])[:-1],
    "truncated wide string": _pack([[b"abc", b"de"]], wide=True)[:-1],
    "bytes after the strings": _pack([[b"abc"]]) + b"x",
    "a value column missing": _pack([[b"abc", b"de"]]),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_malformed_pack_is_a_value_error(packed_impl: ModuleType, name: str) -> None:
    blob = HOSTILE[name]
    ncols = 2 if name == "a value column missing" else 1
    calls = [(packed_impl.pack_count, (blob, ncols)),
             (packed_impl.pack_index, (blob, ncols, b"a")),
             (packed_impl.pack_offset, (blob, ncols, 0, 0)),
             (packed_impl.pack_item, (blob, ncols, 0, 0)),
             (packed_impl.pack_get, (blob, ncols, b"a", 0)),
             (packed_impl.pack_strings, (blob, ncols)),
             (packed_impl.pack_split, (blob, ncols, SEED, 1, 0)),
             (packed_impl.pack_placed, (blob, ncols, SEED, 1, 0, 0))]
    for function, args in calls:
        with pytest.raises(ValueError):
            function(*args)


def test_no_columns_is_a_value_error(packed_impl: ModuleType) -> None:
    with pytest.raises(ValueError):
        packed_impl.pack_count(b"\x01\x00", 0)


def _calls(blob: bytes, ncols: int, needle: bytes, col: int, i: int) -> list[tuple[str, tuple]]:
    return [("pack_count", (blob, ncols)), ("pack_index", (blob, ncols, needle)),
            ("pack_offset", (blob, ncols, col, i)), ("pack_item", (blob, ncols, col, i)),
            ("pack_get", (blob, ncols, needle, col)), ("pack_strings", (blob, ncols)),
            ("pack_put", (blob, ncols, needle, b"v")), ("pack_split", (blob, ncols, SEED, 3, i & 3)),
            ("pack_placed", (blob, ncols, SEED, 4, i & 3, i & 7)),
            ("pack_delete", (blob, ncols, needle)), ("pack_add", (blob, ncols, needle))]


def test_twins_agree_on_damaged_packs() -> None:
    """Random packs, cut, with a byte changed or one added: the same result or the same
    error (type and message) from both."""
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "packed_columns")
    rng = random.Random(53)
    for _ in range(3000):
        ncols, n = rng.choice((1, 2)), rng.randint(0, 10)
        columns = [[bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 4)))
                    for _ in range(n)] for _ in range(ncols)]
        blob = bytearray(_pack(columns, rng.random() < 0.5))
        damage = rng.randrange(4)
        if damage == 0:
            del blob[rng.randrange(len(blob)):]
        elif damage == 1:
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        elif damage == 2:
            blob.insert(rng.randrange(len(blob) + 1), rng.randrange(256))
        needle = bytes(rng.choice(b"ab") for _ in range(rng.randint(0, 4)))
        calls = _calls(bytes(blob), rng.choice((ncols, ncols, 1, 3)), needle,
                       rng.randint(-1, ncols), rng.randint(-1, n + 1))
        for name, args in calls:
            assert outcome(getattr(pure, name), *args) == outcome(
                getattr(compiled, name), *args), (name, args)


def _canonical(columns: list[list[bytes]]) -> bytes:
    """The one form the model keeps a pack in: one-byte lengths while the count and every
    length are under 255."""
    lens = [len(s) for column in columns for s in column]
    return _pack(columns, wide=len(columns[0]) >= 255 or max(lens, default=0) >= 255)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.booleans(), st.binary(max_size=8), st.binary(max_size=300))
def test_put_sets_a_row_in_place_or_last(packed_impl: ModuleType, data: st.DataObject,
                                         wide: bool, key: bytes, value: bytes) -> None:
    keys = data.draw(st.lists(st.binary(max_size=8), unique=True, max_size=30))
    values = data.draw(st.lists(st.binary(max_size=300 if wide else 8),
                                min_size=len(keys), max_size=len(keys)))
    blob = _pack([keys, values], wide)
    new, old = packed_impl.pack_put(blob, 2, key, value)
    if key in keys:
        i = keys.index(key)
        assert old == values[i]
        values[i] = value
    else:
        assert old is None
        keys.append(key)
        values.append(value)
    assert new == _canonical([keys, values])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), unique=True, max_size=300), st.binary(max_size=300))
def test_add_appends_a_new_string_last(packed_impl: ModuleType, members: list[bytes],
                                       member: bytes) -> None:
    """A new string goes last, in the pack's one form (narrow to wide at 255 strings or a
    255-byte string); one already there gives None."""
    new = packed_impl.pack_add(_canonical([members]), 1, member)
    if member in members:
        assert new is None
    else:
        assert new == _canonical([[*members, member]])
    with pytest.raises(ValueError):
        packed_impl.pack_add(_canonical([members, members]), 2, member)


def test_put_crosses_to_wide_lengths_and_back(packed_impl: ModuleType) -> None:
    blob = _pack([[b"f"], [b"v"]])
    wide, _ = packed_impl.pack_put(blob, 2, b"f", b"x" * 300)
    assert wide[0] == 4 and packed_impl.pack_get(wide, 2, b"f", 1) == b"x" * 300
    narrow, old = packed_impl.pack_put(wide, 2, b"f", b"y")
    assert narrow == blob.replace(b"v", b"y") and old == b"x" * 300
    for ncols in (1, 3):
        with pytest.raises(ValueError):
            packed_impl.pack_put(blob, ncols, b"f", b"v")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), unique=True, max_size=40), st.sampled_from([1, 2]),
       st.integers(0, 5))
def test_split_parts_rows_by_their_hash(packed_impl: ModuleType, keys: list[bytes], ncols: int,
                                        bits: int) -> None:
    mask = (1 << bits) - 1
    keep = random.Random(len(keys)).randint(0, mask)
    columns = [keys] + [[k[::-1] + b"v" for k in keys]] * (ncols - 1)
    kept, moved = packed_impl.pack_split(_pack(columns, wide=len(keys) > 30), ncols, SEED, mask,
                                         keep)
    rows = list(zip(*columns, strict=True)) if keys else []
    left = [r for r in rows if packed_impl.key_hash(r[0], SEED) & mask == keep]
    right = [r for r in rows if packed_impl.key_hash(r[0], SEED) & mask != keep]
    for part, got in ((left, kept), (right, moved)):
        want = [list(c) for c in zip(*part, strict=True)] if part else [[] for _ in range(ncols)]
        assert got == _canonical(want)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), ncols=st.sampled_from([1, 2]),
       strings=st.lists(st.binary(max_size=300), min_size=1, max_size=40, unique=True))
def test_delete_takes_a_row_out(packed_impl: ModuleType, data: st.DataObject, ncols: int,
                                strings: list[bytes]) -> None:
    """A row deleted by its key: the others in their order, the pack in its one form (narrow
    again when what made it wide went), the row's last string returned; an absent key: None."""
    keys = strings
    columns = [keys] if ncols == 1 else [keys, [b"v" + k for k in keys]]
    blob = _pack(columns, wide=any(len(s) >= 255 for c in columns for s in c) or len(keys) >= 255)
    i = data.draw(st.integers(0, len(keys) - 1))
    new, last = packed_impl.pack_delete(blob, ncols, keys[i])
    assert last == columns[-1][i]
    rest = [[s for j, s in enumerate(c) if j != i] for c in columns]
    wide = any(len(s) >= 255 for c in rest for s in c) or len(rest[0]) >= 255
    assert new == _pack(rest, wide)
    assert packed_impl.pack_delete(new, ncols, keys[i]) is None


def test_key_hash_is_siphash_1_3() -> None:
    """Under the all-zero key, the keyed hash is CPython's own hash() of bytes with
    PYTHONHASHSEED=0 (SipHash-1-3, that key): an outside yardstick for both twins."""
    samples = [bytes(range(n)) for n in range(1, 40)] + [b"field:%010d" % i for i in range(50)]
    code = ("import sys\nfor line in sys.stdin.read().split():\n"
            "    print(hash(bytes.fromhex(line)) & (2**64 - 1))")
    out = subprocess.run([sys.executable, "-c", code], input=" ".join(s.hex() for s in samples),
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "0"}).stdout.split()
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "packed_columns")
    for impl in (pure, compiled):
        assert [impl.key_hash(s, bytes(16)) for s in samples] == [int(x) for x in out]


def test_twins_agree_on_the_keyed_hash() -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "packed_columns")
    rng = random.Random(7)
    for _ in range(2000):
        key, seed = rng.randbytes(rng.randint(0, 40)), rng.randbytes(16)
        size = 1 << rng.randint(0, 12)
        split = rng.randrange(size)
        assert pure.key_hash(key, seed) == compiled.key_hash(key, seed)
        assert pure.bucket_of(key, seed, size, split) == \
            compiled.bucket_of(key, seed, size, split)
    for impl in (pure, compiled):
        for bad in (b"short", "not bytes" * 2, bytes(17)):
            with pytest.raises(ValueError):
                impl.key_hash(b"k", bad)


def test_placed_counts_a_bucket_and_refuses_a_key_elsewhere_or_twice(
        packed_impl: ModuleType) -> None:
    size, split = 8, 3
    keys = [b"k%d" % i for i in range(400)]
    buckets: dict[int, list[bytes]] = {}
    for key in keys:
        buckets.setdefault(packed_impl.bucket_of(key, SEED, size, split), []).append(key)
    for index, members in buckets.items():
        for ncols in (1, 2):
            columns = [members] + [[b"v"] * len(members)] * (ncols - 1)
            blob = _pack(columns, wide=len(members) >= 255)
            assert packed_impl.pack_placed(blob, ncols, SEED, size, split, index) == len(members)
            with pytest.raises(ValueError, match="another bucket"):
                packed_impl.pack_placed(blob, ncols, SEED, size, split, (index + 1) % 11)
        with pytest.raises(ValueError, match="twice"):
            packed_impl.pack_placed(_pack([members[:3] + members[:1]]), 1, SEED, size, split,
                                    index)
    crowded = keys[:100] + keys[:1]  # past the count compared pairwise: found by a set
    with pytest.raises(ValueError, match="twice"):
        packed_impl.pack_placed(_pack([crowded]), 1, SEED, 1, 0, 0)
