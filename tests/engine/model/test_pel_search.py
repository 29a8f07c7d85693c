"""engine.model.pel_search: the compiled chunk search against its pure-Python reference.

Both twins (`pel_search_impl`) find an ID in two parallel `array('Q')` columns sorted as (ms,
seq) pairs, or say where it would go; hypothesis feeds the same chunks and probes to both and
to a plain sorted list of 128-bit IDs, the meaning of the search."""

from __future__ import annotations

from array import array
from bisect import bisect_left

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

pel_search_impl = kernel_fixture("streamkeep.engine.model", "pel_search")

U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
SMALL = st.integers(min_value=0, max_value=5)  # few values: equal ms and neighbours happen
IDS = st.lists(st.tuples(st.one_of(SMALL, U64), st.one_of(SMALL, U64)), max_size=60)


def _columns(pairs: list[tuple[int, int]]) -> tuple[array, array]:
    ordered = sorted(set(pairs))
    return array("Q", [m for m, _ in ordered]), array("Q", [s for _, s in ordered])


def _expected(ms: array, seq: array, m: int, s: int) -> int:
    ids = [a << 64 | b for a, b in zip(ms, seq, strict=True)]
    i = bisect_left(ids, m << 64 | s)
    return i if i < len(ids) and ids[i] == m << 64 | s else -1 - i


@pytest.mark.parametrize("m,s,found", [(1, 0, 0), (1, 5, 1), (2, 0, 2), (0, 9, -1),
                                       (1, 3, -2), (1, 6, -3), (3, 0, -4)])
def test_finds_or_says_where(pel_search_impl, m: int, s: int, found: int) -> None:  # type: ignore[no-untyped-def]
    ms, seq = array("Q", [1, 1, 2]), array("Q", [0, 5, 0])
    assert pel_search_impl.find(ms, seq, m, s) == found


def test_empty_chunk_and_wrong_columns(pel_search_impl) -> None:  # type: ignore[no-untyped-def]
    assert pel_search_impl.find(array("Q"), array("Q"), 7, 7) == -1
    with pytest.raises(TypeError):
        pel_search_impl.find(array("q", [1]), array("Q", [1]), 1, 1)
    with pytest.raises(TypeError):
        pel_search_impl.find(array("Q", [1, 2]), array("Q", [1]), 1, 1)


@settings(max_examples=300, deadline=None)
@given(IDS, st.one_of(SMALL, U64), st.one_of(SMALL, U64))
def test_twins_agree_with_a_sorted_list(pairs: list[tuple[int, int]], m: int, s: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_search")
    ms, seq = _columns(pairs)
    expected = _expected(ms, seq, m, s)
    assert outcome(pure.find, ms, seq, m, s) == outcome(compiled.find, ms, seq, m, s) == (
        "ok", expected)
    for k in range(len(ms)):  # every member is found where it is
        assert pure.find(ms, seq, ms[k], seq[k]) == compiled.find(ms, seq, ms[k], seq[k]) == k


def _pel(rows: dict[int, tuple[int, int, int]], load: int) -> tuple[list[int], list]:
    """A PEL's (maxes, chunks) as pel_store lays them out, `load` IDs a chunk."""
    ordered = sorted(rows)
    maxes, chunks = [], []
    for at in range(0, len(ordered), load):
        part = ordered[at:at + load]
        chunks.append((array("Q", [s >> 64 for s in part]),
                       array("Q", [s & ((1 << 64) - 1) for s in part]),
                       array("q", [rows[s][0] for s in part]),
                       array("Q", [rows[s][1] for s in part]),
                       array("i", [rows[s][2] for s in part])))
        maxes.append(part[-1])
    return maxes, chunks


ROW = st.tuples(st.integers(0, 1 << 62), st.sampled_from([0, 1, (1 << 63) - 1, (1 << 64) - 1]),
                st.integers(-1, 5))
SID = st.builds(lambda m, s: m << 64 | s, st.one_of(SMALL, U64), st.one_of(SMALL, U64))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(SID, ROW, max_size=40), st.integers(1, 5), st.integers(1, 5),
       st.data())
def test_row_walks_agree(rows: dict, load: int, my_load: int, data: st.DataObject) -> None:
    """range_rows and owned_rows (over a consumer's subset) read what the rows are."""
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_search")
    start, end = sorted((data.draw(SID), data.draw(SID)))
    maxes, chunks = _pel(rows, load)
    mine = data.draw(st.sets(st.sampled_from(sorted(rows)))) if rows else set()
    my_maxes, my_chunks = _pel({s: rows[s] for s in mine}, my_load)
    want = [(s, *rows[s]) for s in sorted(rows) if start <= s <= end]
    assert list(pure.range_rows(maxes, chunks, start, end)) == want
    assert list(compiled.range_rows(maxes, chunks, start, end)) == want
    owned = [r for r in want if r[0] in mine]
    assert list(pure.owned_rows(maxes, chunks, my_maxes, my_chunks, start, end)) == owned
    assert list(compiled.owned_rows(maxes, chunks, my_maxes, my_chunks, start, end)) == owned


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(SID, ROW, max_size=40), st.integers(1, 5), st.data())
def test_bucket_walks_agree(rows: dict, load: int, data: st.DataObject) -> None:
    """bucket_live keeps a bucket's IDs pending at the bucket's time, in bucket order, from a
    narrow or a wide bucket, stale and unknown IDs among them."""
    from streamkeep.engine.model.pel_store import bucket_new

    pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_search")
    maxes, chunks = _pel(rows, load)
    ids = data.draw(st.lists(st.one_of(st.sampled_from(sorted(rows)), SID) if rows else SID,
                             min_size=1, max_size=20))
    t = data.draw(st.sampled_from([rows[s][0] for s in ids if s in rows] or [0]))
    bucket = bucket_new([s >> 64 for s in ids], [s & ((1 << 64) - 1) for s in ids])
    want = [(k, s) for k, s in enumerate(ids) if s in rows and rows[s][0] == t]
    assert list(pure.bucket_live(bucket, maxes, chunks, t)) == want
    assert list(compiled.bucket_live(bucket, maxes, chunks, t)) == want


def test_bucket_layouts(pel_search_impl) -> None:  # type: ignore[no-untyped-def]
    base = 5 << 32 | 7
    narrow = pel_search_impl.narrow_bucket([base, base + 3], [0, 9], base)
    assert narrow.typecode == "I" and list(narrow) == [5, 7, 0, 0, 3, 9]
    assert list(pel_search_impl.narrow_bucket([], [], base)) == [5, 7]
    for ms, seq in (([base - 1], [0]), ([base + (1 << 32)], [0]), ([base], [1 << 32])):
        assert pel_search_impl.narrow_bucket(ms, seq, base) is None  # does not fit
    wide = pel_search_impl.wide_bucket([1 << 63, 2], [(1 << 64) - 1, 0])
    assert wide.typecode == "Q" and list(wide) == [1 << 63, (1 << 64) - 1, 2, 0]
    with pytest.raises(ValueError):
        pel_search_impl.wide_bucket([1], [])


U64S = st.lists(st.one_of(st.integers(0, 40), st.integers(0, (1 << 64) - 1)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(U64S, st.data(), st.one_of(st.integers(0, 40), st.integers(0, (1 << 64) - 1)))
def test_bucket_builders_agree(ms: list[int], data: st.DataObject, base: int) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_search")
    seq = data.draw(st.lists(st.one_of(st.integers(0, 40), st.integers(0, (1 << 64) - 1)),
                             min_size=len(ms), max_size=len(ms)))
    assert outcome(pure.narrow_bucket, ms, seq, base) == outcome(
        compiled.narrow_bucket, ms, seq, base)
    assert outcome(pure.wide_bucket, ms, seq) == outcome(compiled.wide_bucket, ms, seq)
