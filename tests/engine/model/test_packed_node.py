"""engine.model.packed_node: a stream node held as Redis's listpack, on both twins.

Each test runs on both twins (`impl`); the property tests check a packed node against a plain
model (a list of (ID, fields, deleted)) for random entries with varied field sets, deletions
(by mark_deleted, delete_many, or entries built as deleted), lookups and ranges, and that the
twins write the same bytes. `validate`, the parser of untrusted bytes, is fuzzed on both twins
with damaged nodes (the compiled one in a child process: a bad read fails the test rather than
killing pytest): the same accept or reject, the same result, the same message. Redis's own
bytes for the same entries are compared in tests/differential/test_packed_node_redis.py."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.packed_node import Invalid
from streamkeep.engine.wire.reply import EntryArray
from streamkeep.engine.wire.reply_encoder import encode_reply
from tests.support import kernels
from tests.support.kernels import kernel_fixture, outcome

packed_impl = kernel_fixture("streamkeep.engine.model", "packed_node")

U64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
Entry = tuple[int, tuple[bytes, ...], bool]

NAMES = st.sampled_from([b"temp", b"unit", b"f", b"", b"12", b"007", b"n" * 70])
VALUES = st.one_of(
    st.sampled_from([b"", b"0", b"-0", b"-1", b"007", b"127", b"128", b"-4096", b"4095", b"70000",
                     b"-8388609", b"2147483648", b"9223372036854775807",
                     b"9223372036854775808", b"-9223372036854775808", b"01", b"C"]),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1).map(lambda v: b"%d" % v),
    st.binary(max_size=80),
    st.integers(4094, 4098).map(lambda n: b"v" * n))


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[int], list[tuple[bytes, ...]], list[int]]:
    """Ascending IDs (deltas from the master small, large, beyond int64 so that they wrap, or a
    seq below the master's), their flat fields (mostly the first entry's names), and the IDs
    to delete."""
    n = draw(st.integers(min_value=1, max_value=40))
    ms = draw(st.sampled_from([0, 5, 1_700_000_000_000, U64 - 5_000_000]))
    seq = draw(st.sampled_from([0, 3, 1 << 40, U64 - 400]))
    master_names = draw(st.lists(NAMES, min_size=1, max_size=3))
    ids, fields = [], []
    for _ in range(n):
        ids.append(ms << 64 | seq)
        names = master_names if draw(st.integers(0, 3)) else draw(
            st.lists(NAMES, min_size=1, max_size=3))
        values = draw(st.lists(VALUES, min_size=len(names), max_size=len(names)))
        fields.append(tuple(x for pair in zip(names, values, strict=True) for x in pair))
        step = draw(st.sampled_from(["seq", "ms", "far", "huge"]))
        if step == "seq" and seq + 300 <= U64:
            seq += draw(st.integers(1, 300))
        elif step == "huge" and U64 - ms > 1 << 40:  # an ms delta past int64: it wraps
            ms += draw(st.integers(1 << 32, (U64 - ms) - (1 << 39)))
            seq = draw(st.sampled_from([0, U64]))
        else:
            ms += draw(st.integers(1, 5) if step == "ms" else st.integers(100, 90_000))
            seq = draw(st.integers(0, 2))
    deleted = draw(st.lists(st.sampled_from(ids), max_size=n, unique=True))
    return ids, fields, deleted


def _twins() -> list[ModuleType]:
    """The pure twin, and the compiled one when it is built (a failure when it must be):
    the property tests run in both modes."""
    compiled = kernels.compiled("streamkeep.engine.model", "packed_node")
    pure = kernels.pure("streamkeep.engine.model", "packed_node")
    return [pure] if compiled is None else [pure, compiled]


def _model(ids: list[int], fields: list[tuple[bytes, ...]], deleted: list[int]) -> list[Entry]:
    gone = set(deleted)
    return [(sid, f, sid in gone) for sid, f in zip(ids, fields, strict=True)]


def _expected(model: list[Entry], start: int, end: int, count: int, rev: bool):
    picked = [(sid, f) for sid, f, dead in model if not dead and start <= sid <= end]
    if rev:
        picked.reverse()
    if count > 0:
        picked = picked[:count]
    return [b"%d-%d" % (sid >> 64, sid & U64) for sid, _f in picked], [f for _s, f in picked]


def _packed(impl: ModuleType, ids, fields, deleted, by_append: bool) -> bytearray:
    if by_append:
        lp = impl.build(ids[:1], fields[:1])
        names = fields[0][0::2]
        for sid, f in zip(ids[1:], fields[1:], strict=True):
            impl.append(lp, ids[0], names, sid, f)
    else:
        lp = impl.build(ids, fields)
    for sid in deleted:
        assert impl.mark_deleted(lp, ids[0], sid)
    return lp


@settings(max_examples=150, deadline=None)
@given(nodes(), st.data())
def test_packed_node_reads_as_the_plain_model(node, data) -> None:
    ids, fields, deleted = node
    model = _model(ids, fields, deleted)
    made = []
    for impl in _twins():
        for by_append in (False, True):
            lp = _packed(impl, ids, fields, deleted, by_append)
            made.append(bytes(lp))
            assert impl.entries(lp, ids[0]) == model
            assert impl.counts(lp) == (len(ids) - len(deleted), len(deleted))
            assert impl.names(lp) == fields[0][0::2]
            assert impl.entry_bytes(lp) == len(lp) == int.from_bytes(lp[:4], "little")
            for _ in range(4):
                start = data.draw(st.sampled_from(ids) | st.integers(0, MAX_ID))
                end = data.draw(st.sampled_from(ids) | st.just(MAX_ID) | st.integers(0, MAX_ID))
                count = data.draw(st.integers(0, 5))
                rev = data.draw(st.booleans())
                want = _expected(model, start, end, count, rev)
                assert impl.read_range(lp, ids[0], start, end, count, rev) == want
                out = bytearray(b"+before\r\n")
                n = impl.range_reply(lp, ids[0], start, end, count, rev, out)
                assert n == len(want[0])
                for protocol in (2, 3):  # XRANGE's reply, the same in both
                    assert b"+before\r\n*%d\r\n" % n + out[9:] == \
                        b"+before\r\n" + encode_reply(EntryArray(*want), protocol)
    assert len(set(made)) == 1  # built or appended, pure or compiled: the same bytes


def test_deleting_twice_or_a_missing_id(packed_impl) -> None:
    ids = [5 << 64 | 0, 5 << 64 | 1, 7 << 64 | 0]
    fields = [(b"f", b"a"), (b"f", b"b"), (b"g", b"c")]
    lp = packed_impl.build(ids, fields)
    assert packed_impl.mark_deleted(lp, ids[0], ids[1])
    assert not packed_impl.mark_deleted(lp, ids[0], ids[1])
    assert not packed_impl.mark_deleted(lp, ids[0], 6 << 64)
    assert packed_impl.read_range(lp, ids[0], 0, MAX_ID) == ([b"5-0", b"7-0"],
                                                             [(b"f", b"a"), (b"g", b"c")])
    assert packed_impl.read_range(lp, ids[0], 0, MAX_ID, 1, True) == ([b"7-0"], [(b"g", b"c")])
    assert packed_impl.read_range(lp, ids[0], 6 << 64, 5 << 64) == ([], [])


def test_counters_change_size_as_they_cross_encodings(packed_impl) -> None:
    """The master's live and deleted counts grow from 1-byte to 2-byte integers (127 -> 128)
    and back: the rest of the node moves, as Redis's lpReplaceInteger does."""
    ids = [1000 << 64 | k for k in range(200)]
    fields = [(b"f", b"v%d" % k) for k in range(200)]
    lp = packed_impl.build(ids[:1], fields[:1])
    for sid, f in zip(ids[1:], fields[1:], strict=True):
        packed_impl.append(lp, ids[0], (b"f",), sid, f)
    assert bytes(lp) == bytes(packed_impl.build(ids, fields))
    for sid in ids[:150]:
        assert packed_impl.mark_deleted(lp, ids[0], sid)
    assert packed_impl.counts(lp) == (50, 150)
    got = packed_impl.read_range(lp, ids[0], 0, MAX_ID)
    assert got == ([b"1000-%d" % k for k in range(150, 200)], fields[150:])


def test_the_header_count_saturates(packed_impl) -> None:
    """More than 65534 elements: the header's count says 65535 (unknown), as Redis's does."""
    n = 14_000  # 5 elements each with the master's one field
    ids = [1 << 64 | k for k in range(n)]
    fields = [(b"f", b"x")] * n
    lp = packed_impl.build(ids, fields)
    assert int.from_bytes(lp[4:6], "little") == 65535
    small = packed_impl.build(ids[:10], fields[:10])
    assert int.from_bytes(small[4:6], "little") == 4 + 1 + 10 * 5
    packed_impl.append(small, ids[0], (b"f",), ids[10], fields[10])
    assert int.from_bytes(small[4:6], "little") == 4 + 1 + 11 * 5


def test_per_entry_bytes_of_a_small_entry(packed_impl) -> None:
    """The figure the design rests on: a one-field entry with a short value, IDs 1 ms apart,
    takes 10 bytes plus its value in the node, as in Redis."""
    ids = [(1_700_000_000_000 + k) << 64 for k in range(100)]
    lp = packed_impl.build(ids, [(b"temp", b"abc")] * 100)
    master = 6 + 2 + 2 + 2 + 6 + 2 + 1  # header, counts, field count, name, 0, end
    assert len(lp) == master + 100 * (10 + 3)


# --- the stream model's lookups, tombstones built in, deleting many ------------------------------


def _id_text(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & U64)


@settings(max_examples=150, deadline=None)
@given(nodes(), st.data())
def test_lookups_and_deletions_agree_with_the_plain_model(node, data) -> None:
    """build with deleted entries (None) and explicit master names, find, ids, last_id,
    delete_many, range_reply's IDs and validate, on both twins: the model's answers, and the
    same bytes from both."""
    ids, fields, deleted = node
    gone = set(deleted)
    master_names = fields[0][0::2] if data.draw(st.integers(0, 3)) else tuple(
        data.draw(st.lists(NAMES, max_size=3)))
    blank = tuple(x for name in master_names for x in (name, b""))
    # Half the deletions are built in (their values gone), the rest deleted afterwards.
    built_dead = {sid for sid in deleted if data.draw(st.booleans())}
    later = [sid for sid in deleted if sid not in built_dead]
    model = [(sid, blank if sid in built_dead else f, sid in gone)
             for sid, f in zip(ids, fields, strict=True)]
    given_fields = [None if sid in built_dead else f for sid, f in zip(ids, fields, strict=True)]
    probes = ids + [data.draw(st.integers(0, MAX_ID)) for _ in range(3)] + [
        ids[0] - 1, ids[-1] + 1]
    # IDs that are not entries (a drawn one may be: then it is not an extra)
    extra = [x for x in data.draw(st.lists(st.integers(0, MAX_ID), max_size=2))
             if x not in ids]
    made = []
    for impl in _twins():
        lp = impl.build(ids, given_fields, master_names)
        assert impl.names(lp) == master_names
        assert impl.validate(bytes(lp), ids[0]) == (len(ids), len(ids) - len(built_dead), ids[-1])
        if later:
            assert impl.delete_many(lp, ids[0], sorted(later + extra)) == len(later)
            assert impl.delete_many(lp, ids[0], later) == 0  # already deleted
        made.append(bytes(lp))
        assert impl.entries(lp, ids[0]) == model
        assert impl.counts(lp) == (len(ids) - len(gone), len(gone))
        assert impl.ids(lp, ids[0]) == ids
        assert impl.last_id(lp, ids[0]) == ids[-1]
        assert impl.validate(lp, ids[0]) == (len(ids), len(ids) - len(gone), ids[-1])
        assert impl.validate(memoryview(bytes(lp)), ids[0])[2] == ids[-1]
        live = {sid: f for sid, f, dead in model if not dead}
        for sid in probes:
            assert impl.find(lp, ids[0], sid) == live.get(sid)
        start = data.draw(st.sampled_from(ids) | st.integers(0, MAX_ID))
        count = data.draw(st.integers(0, 5))
        rev = data.draw(st.booleans())
        want = _expected(model, start, MAX_ID, count, rev)
        sids: list[int] = [7]
        assert impl.range_reply(lp, ids[0], start, MAX_ID, count, rev, bytearray(), sids) == \
            len(want[0])
        assert [7, *map(_id_text, sids[1:])] == [7, *want[0]]
    assert len(set(made)) == 1


def test_built_tombstones_are_redis_deleted_entries(packed_impl) -> None:
    """An entry built as None is the one Redis's XDEL leaves of an entry with the master's
    names and empty values: the same bytes; its first, middle or last place alike."""
    ids = [9 << 64 | k for k in range(5)]
    fields = [(b"a", b"1", b"b", b"x" * 70), (b"a", b"-1"), (b"a", b"007", b"b", b"y" * 5000),
              (b"a", b"9223372036854775808", b"b", b""), (b"c", b"0")]
    for dead in ([0], [2], [4], [0, 2, 4], [0, 1, 2, 3, 4]):
        given_fields = [None if k in dead else f for k, f in enumerate(fields)]
        lp = packed_impl.build(ids, given_fields, (b"a", b"b"))
        other = packed_impl.build(
            ids, [(b"a", b"", b"b", b"") if k in dead else f for k, f in enumerate(fields)],
            (b"a", b"b"))
        for k in dead:
            assert packed_impl.mark_deleted(other, ids[0], ids[k])
        assert lp == other
        assert packed_impl.counts(lp) == (5 - len(dead), len(dead))
        assert packed_impl.last_id(lp, ids[0]) == ids[4]
        assert packed_impl.find(lp, ids[0], ids[4]) == (None if 4 in dead else fields[4])
    with pytest.raises(ValueError, match="needs its master's names"):
        packed_impl.build(ids[:1], [None])
    with pytest.raises(ValueError, match="at least one entry"):
        packed_impl.build([], [])


def test_new_node_then_appends_is_the_built_node(packed_impl) -> None:
    ids = [(1 << 64 | 5) + k for k in range(3)] + [(U64 - 1) << 64]
    fields = [(b"t", b"%d" % k) for k in range(3)] + [(b"u", b"z" * 300)]
    lp = packed_impl.new_node((b"t",))
    assert packed_impl.last_id(lp, ids[0]) == ids[0]
    assert packed_impl.ids(lp, ids[0]) == []
    assert packed_impl.find(lp, ids[0], ids[0]) is None
    assert packed_impl.validate(lp, ids[0]) == (0, 0, ids[0])
    for sid, f in zip(ids, fields, strict=True):
        packed_impl.append(lp, ids[0], (b"t",), sid, f)
        assert packed_impl.last_id(lp, ids[0]) == sid
    assert lp == packed_impl.build(ids, fields)
    assert packed_impl.delete_many(lp, ids[0], [ids[3], ids[0], ids[0]]) == 2
    assert packed_impl.last_id(lp, ids[0]) == ids[3]
    assert packed_impl.find(lp, ids[0], ids[1]) == fields[1]


def test_last_id_reads_back_over_long_entries(packed_impl) -> None:
    """The backward read decodes 1- to 3-byte backlens (values of 70, 5000 and 20000 bytes)
    and entries with their own field names."""
    ids = [3 << 64 | k for k in range(0, 40, 7)]
    for value in (b"v" * 70, b"w" * 5000, b"x" * 20_000, b"12"):
        for fields in ([(b"f", value)] * len(ids),
                       [(b"f", b"1")] * (len(ids) - 1) + [(b"g", value, b"h", value)]):
            lp = packed_impl.build(ids, fields)
            assert packed_impl.last_id(lp, ids[0]) == ids[-1]
            packed_impl.mark_deleted(lp, ids[0], ids[-1])
            assert packed_impl.last_id(lp, ids[0]) == ids[-1]


# --- validate: untrusted bytes -------------------------------------------------------------------


def _element_offsets(lp: bytes) -> list[int]:
    """Every element's offset in a well-formed listpack (the test's own reading of it)."""
    offsets, i = [], 6
    while lp[i] != 0xFF:
        offsets.append(i)
        b = lp[i]
        if b < 0x80:
            size = 1
        elif b < 0xC0:
            size = 1 + (b & 0x3F)
        elif b < 0xE0:
            size = 2
        elif b < 0xF0:
            size = 2 + ((b & 0x0F) << 8 | lp[i + 1])
        elif b == 0xF0:
            size = 5 + int.from_bytes(lp[i + 1:i + 5], "little")
        else:
            size = {0xF1: 3, 0xF2: 4, 0xF3: 5, 0xF4: 9}[b]
        i += size + (1 if size <= 127 else 2 if size < 16383 else 3)
    return offsets


HOSTILE_LENGTHS = [0, 1, 63, 64, 4095, 4096, 16383, 1 << 31, (1 << 32) - 1, (1 << 32) - 5,
                   (1 << 32) - 6]
HOSTILE_INTS = [-1, 127, 128, (1 << 62) + 1, (1 << 63) - 1, -(1 << 63), (1 << 31) - 1, 65535]


def _hostile_element(rng: random.Random, room: int) -> bytes:
    """A string claiming a length near 2**32 or near what is left, or a huge count."""
    kind = rng.randrange(3)
    if kind == 0:
        n = rng.choice([*HOSTILE_LENGTHS, room, room - 5, room + 1, rng.getrandbits(32)])
        return b"\xf0" + (n & 0xFFFFFFFF).to_bytes(4, "little") + bytes(rng.randrange(3))
    if kind == 1:
        v = rng.choice(HOSTILE_INTS)
        return b"\xf4" + (v & U64).to_bytes(8, "little") + b"\x09"
    return bytes([rng.choice([0xE0, 0xEF, 0xBF, 0xF5, 0xFE, 0xFF]), rng.randrange(256)])


def _valid_node(rng: random.Random) -> tuple[bytes, int]:
    from streamkeep.engine.model import _packed_node_py as pure
    n = rng.randint(1, 12)
    master = rng.choice([0, 5 << 64 | 3, (U64 - 9) << 64 | U64 - 100])
    names = tuple(rng.sample([b"a", b"temp", b"12", b"n" * 70], rng.randint(0, 3)))
    ids, fields = [], []
    sid = master
    for _ in range(n):
        ids.append(sid)
        if rng.random() < 0.2:
            fields.append(None)
        else:
            keys = names if rng.random() < 0.7 else (b"k", b"-7")
            fields.append(tuple(x for k in keys for x in (k, rng.choice(
                [b"", b"0", b"-1", b"007", b"x" * rng.choice([3, 70, 5000])]))))
        sid = min(sid + rng.choice([1, 1 << 64, 1 << 70]), MAX_ID - 20 + len(ids))
    if fields[0] is None and rng.random() < 0.5:
        fields[0] = tuple(x for k in names for x in (k, b"1"))
    return bytes(pure.build(ids, fields, names)), master


def _mutate(rng: random.Random, lp: bytes) -> bytes:
    blob = bytearray(lp)
    offsets = _element_offsets(lp)
    for _ in range(rng.randint(1, 3)):
        what = rng.randrange(7)
        at = rng.randrange(len(blob))
        if what == 0:  # a flipped byte
            blob[at] ^= 1 << rng.randrange(8)
        elif what == 1:  # a random byte
            blob[at] = rng.randrange(256)
        elif what == 2:  # truncated, often with an end byte again
            del blob[max(1, at):]
            blob += b"\xff" * rng.randrange(2)
        elif what == 3:  # bytes inserted
            blob[at:at] = rng.randbytes(rng.randint(1, 4))
        elif what == 4 and offsets:  # an element replaced by a hostile one
            k = rng.choice(offsets)
            blob[k:k + rng.randint(1, 3)] = _hostile_element(rng, len(blob) - k)
        elif what == 5 and offsets:  # a backlen lie: the byte before an element
            k = rng.choice(offsets)
            if 6 < k <= len(blob):
                blob[k - 1] = rng.choice([0, 127, 128, 255, blob[k - 1] + 1 & 0xFF])
        else:  # the header's element count rewritten (unknown, or a lie)
            blob[4:6] = rng.choice([65535, 0, rng.randrange(65536)]).to_bytes(2, "little")
    if len(blob) >= 4 and rng.random() < 0.8:  # the total made to match: deeper checks run
        blob[0:4] = len(blob).to_bytes(4, "little")
    return bytes(blob)


def fuzz_validate(seed: int, cases: int) -> tuple[int, int]:
    """Both twins (the pure one alone when the other is not built) on `cases` damaged nodes:
    the same outcome each time, Invalid or a result (the compiled one's reads stay in the
    buffer: this runs in a child). (accepted, rejected)."""
    twins = _twins()
    rng = random.Random(seed)
    accepted = rejected = 0
    for _ in range(cases):
        lp, master = _valid_node(rng)
        blob = _mutate(rng, lp)
        if rng.random() < 0.1:
            master = rng.choice([master + 1, master - 1, -1, 1 << 128, 0])
        got = outcome(twins[0].validate, blob, master)
        assert all(outcome(t.validate, blob, master) == got for t in twins[1:]), (blob, master)
        assert got[0] == "ok" or got[1][0] == "Invalid", got
        if got[0] == "ok":
            accepted += 1
        else:
            rejected += 1
    return accepted, rejected


ROOT = Path(__file__).resolve().parents[3]
FUZZ_CHILD = ("import sys; from tests.engine.model.test_packed_node import fuzz_validate; "
              "ok, bad = fuzz_validate(int(sys.argv[1]), int(sys.argv[2])); "
              "assert ok and bad, (ok, bad); print('ok')")


def _fuzz_in_a_child(seed: int, cases: int, timeout: int) -> None:
    done = subprocess.run([sys.executable, "-c", FUZZ_CHILD, str(seed), str(cases)],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


@pytest.mark.parametrize("seed", [1, 2])
def test_validate_fuzz_twins_agree(seed: int) -> None:
    """Thousands of damaged nodes: both twins accept the same ones with the same result and
    reject the others with the same Invalid message; a bad read in the compiled one fails the
    test (a crashed child) rather than pytest."""
    _fuzz_in_a_child(seed, 2000, 300)


@pytest.mark.slow
def test_validate_fuzz_twins_agree_long() -> None:
    _fuzz_in_a_child(7, 100_000, 1800)


def test_validate_rejects_hostile_lengths_and_counts(packed_impl) -> None:
    """Lengths near 2**32, counts near 2**63, negative counts, a truncated element, a wrong
    backlen, header lies: Invalid (never an IndexError, an OverflowError or a bad read), with
    the reason."""
    master = 5 << 64
    good = bytes(packed_impl.build([master, master + 1], [(b"f", b"v"), (b"g", b"w")]))
    assert packed_impl.validate(good, master) == (2, 2, master + 1)

    def framed(body: bytes, count: int = 65535) -> bytes:
        return (len(body) + 7).to_bytes(4, "little") + count.to_bytes(2, "little") + body + \
            b"\xff"

    def f4(v: int) -> bytes:
        return b"\xf4" + (v & U64).to_bytes(8, "little") + b"\x09"

    cases = {
        b"": "shorter than",
        b"\x06\x00\x00\x00\x00\xff": "shorter than",
        good[:-1]: "the header says",
        b"\xff\xff\xff\xff" + good[4:]: "the header says",
        good[:-1] + b"\xfe": "no end byte",
        framed(b"\xf0\xff\xff\xff\xff\x01\x01\x01\x00\x01"): "runs past the end",
        framed(b"\xf0\xfa\xff\xff\xff" + b"x" * 20): "runs past the end",
        framed(b"\xf0\x01"): "runs past the end",
        framed(b"\xe0"): "runs past the end",
        framed(b"\xf4\x01\x02"): "runs past the end",
        framed(b"\x81a\x02"): "not an integer",
        framed(b"\x01\x02"): "wrong backlen",
        framed(b"\xf5\x01"): "unknown encoding 0xf5",
        framed(f4(-1) + b"\x00\x01\x00\x01\x00\x01"): "negative or impossible",
        framed(b"\x00\x01\x00\x01" + f4((1 << 63) - 1) + b"\x00\x01"): "negative or impossible",
        framed(b"\x00\x01\x00\x01" + f4(1 << 32) + b"\x00\x01"): "negative or impossible",
        framed(b"\x01\x01\x00\x01\x00\x01\x00\x01" + b"\x00\x01\x00\x01\x00\x01"
               + f4((1 << 63) - 1) + b"\x04\x01"): "impossible field count",
        framed(b"\x01\x01\x00\x01\x00\x01\x00\x01" + b"\x00\x01\x00\x01\x00\x01"
               + b"\x7f\x01" * 60): "runs past the end",
        framed(b"\x01\x01\x00\x01\x00\x01\x00\x01" + b"\x04\x01"): "unknown flags 4",
        framed(b"\x01\x01\x00\x01\x00\x01\x00\x01" + b"\x00\x01\x00\x01\x00\x01\x00\x01"
               + b"\x05\x01"): "wrong element count",
        framed(b"\x01\x01\x00\x01\x00\x01\x00\x01" + b"\x00\x01" + f4(-1) + b"\x00\x01\x00\x01"
               + b"\x04\x01"): "out of order",
        framed(b"\x02\x01\x00\x01\x00\x01\x00\x01" + b"\x00\x01\x00\x01\x00\x01\x00\x01"
               + b"\x04\x01"): "the master counts 2 live",
        framed(b"\x00\x01\x00\x01\x00\x01\x00\x01", 3): "the header counts 3 elements",
    }
    for blob, reason in cases.items():
        with pytest.raises(Invalid, match=reason):
            packed_impl.validate(blob, master)
    assert packed_impl.validate(framed(b"\x00\x01\x00\x01\x00\x01\x00\x01", 4), master) == \
        (0, 0, master)


def test_validate_agrees_with_the_pure_one_on_every_truncation_and_byte() -> None:
    """Exhaustive over one node: each truncation (the total made to match) and each byte set
    to each of a few values: the same outcome from both twins, a result or Invalid."""
    twins = _twins()
    master = 1 << 64
    lp = bytes(twins[0].build([master, master + 1, master + (1 << 64)],
                          [(b"a", b"1", b"b", b"x" * 70), None, (b"c", b"-1")], (b"a", b"b")))
    for cut in range(len(lp) + 1):
        blob = bytearray(lp[:cut])
        if cut >= 4:
            blob[:4] = cut.to_bytes(4, "little")
        assert len({repr(outcome(t.validate, bytes(blob), master)) for t in twins}) == 1
    for at in range(len(lp)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xBF, 0xC0, 0xE0, 0xF0, 0xF4, 0xFF):
            blob = bytearray(lp)
            blob[at] = value
            got = [outcome(t.validate, bytes(blob), master) for t in twins]
            assert got[0][0] == "ok" or got[0][1][0] == "Invalid", got
            assert got[1:] in ([], got[:1]), got


def test_plain_reads_share_a_repeated_value_and_keep_the_others_apart(
        packed_impl: ModuleType) -> None:
    """read_plain's entries: equal to what was appended, a value repeated at a position one
    object in the compiled twin (`text_reused`), a value that differs by a byte, by its length
    or by being an integer never taken for the previous one."""
    values = [b"1234", b"1234", b"12345", b"1234", b"abcd", b"abce", b"-7", b"-7", b"", b""]
    ids = [(1 << 64) | k for k in range(len(values))]
    fields = [(b"f", v, b"g", b"x" * (k % 3)) for k, v in enumerate(values)]
    lp = packed_impl.build(ids, fields)
    out: list = []
    assert packed_impl.read_plain(lp, ids[0], 0, 1 << 127, 0, False, out) == len(values)
    assert [e[1] for e in out] == [list(f) for f in fields]
    assert [e[0] for e in out] == [b"1-%d" % k for k in range(len(values))]
    if packed_impl.__name__.endswith("_c"):
        assert out[0][1][1] is out[1][1][1] and out[6][1][1] is out[7][1][1]
