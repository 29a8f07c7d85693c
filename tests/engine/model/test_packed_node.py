"""engine.model.packed_node: a stream node held as Redis's listpack, on both twins.

Each test runs on both twins (`impl`); the property test checks a packed node against a plain
model (a list of (ID, fields, deleted)) for random entries with varied field sets, deletions
and ranges, and that the twins write the same bytes. Redis's own bytes for the same entries are
compared in tests/differential/test_packed_node_redis.py."""

from __future__ import annotations

from types import ModuleType

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.reply import EntryArray
from streamkeep.engine.wire.reply_encoder import encode_reply
from tests.support.kernels import kernel_fixture, pure_and_compiled

packed_impl = kernel_fixture("streamkeep.engine.model", "packed_node")

U64 = (1 << 64) - 1
MAX_ID = (1 << 128) - 1
Entry = tuple[int, tuple[bytes, ...], bool]

NAMES = st.sampled_from([b"temp", b"unit", b"f", b"", b"12", b"007", b"n" * 70])
VALUES = st.one_of(
    st.sampled_from([b"", b"0", b"-0", b"127", b"128", b"-4096", b"4095", b"70000",
                     b"-8388609", b"2147483648", b"9223372036854775807",
                     b"9223372036854775808", b"-9223372036854775808", b"01", b"C"]),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1).map(lambda v: b"%d" % v),
    st.binary(max_size=80),
    st.integers(4094, 4098).map(lambda n: b"v" * n))


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[int], list[tuple[bytes, ...]], list[int]]:
    """Ascending IDs (deltas from the master small, large, or a seq below the master's), their
    flat fields (mostly the first entry's names), and the IDs to delete."""
    n = draw(st.integers(min_value=1, max_value=40))
    ms = draw(st.sampled_from([0, 5, 1_700_000_000_000, U64 - 5_000_000]))
    seq = draw(st.sampled_from([0, 3, 1 << 40]))
    master_names = draw(st.lists(NAMES, min_size=1, max_size=3))
    ids, fields = [], []
    for _ in range(n):
        ids.append(ms << 64 | seq)
        names = master_names if draw(st.integers(0, 3)) else draw(
            st.lists(NAMES, min_size=1, max_size=3))
        values = draw(st.lists(VALUES, min_size=len(names), max_size=len(names)))
        fields.append(tuple(x for pair in zip(names, values, strict=True) for x in pair))
        step = draw(st.sampled_from(["seq", "ms", "far"]))
        if step == "seq":
            seq += draw(st.integers(1, 300))
        else:
            ms += draw(st.integers(1, 5) if step == "ms" else st.integers(100, 90_000))
            seq = draw(st.integers(0, 2))
    deleted = draw(st.lists(st.sampled_from(ids), max_size=n, unique=True))
    return ids, fields, deleted


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
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "packed_node")
    impls = [pure] if compiled is None else [pure, compiled]
    made = []
    for impl in impls:
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
