"""engine.model.pel_claim: the claim step's kernels against plain Python models.

Both twins (`pel_claim_impl`) get PEL chunks cut at random sizes (so walks and batches cross
chunk boundaries) and must do what a dict of rows and a sorted set say: `scan` picks rows as
XAUTOCLAIM's one-row-at-a-time loop did (a gone entry whatever its idle time, then idle or
XNACK-released ones, within the attempts), `claim` rewrites rows in place and reports what they
were, `remove_sorted` and `pop_one` take IDs out of a packed set. Hypothesis also feeds one input to both
twins, which must agree exactly (results, errors, the chunks they leave)."""

from __future__ import annotations

import sys
from array import array
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.pel_store import NO_OWNER
from tests.support.kernels import kernel_fixture, outcome, pure_and_compiled

pel_claim_impl = kernel_fixture("streamkeep.engine.model", "pel_claim")

_LOW = (1 << 64) - 1
U64 = st.integers(min_value=0, max_value=_LOW)
SMALL = st.integers(min_value=0, max_value=4)
SIDS = st.lists(st.tuples(st.one_of(SMALL, SMALL, U64), st.one_of(SMALL, SMALL, U64)).map(
    lambda p: p[0] << 64 | p[1]), max_size=40, unique=True)
EDGES = st.sampled_from([-(1 << 63), (1 << 63) - 1])  # the 64-bit ends: nothing overflows
ROW = st.tuples(st.one_of(st.integers(0, 50), st.integers(0, 50), EDGES),
                st.sampled_from([0, 1, 7, (1 << 63) - 1, (1 << 64) - 2]),
                st.sampled_from([NO_OWNER, 0, 1, 2]))
CUTS = st.lists(st.integers(1, 5), min_size=1, max_size=8)

Rows = dict[int, tuple[int, int, int]]
Chunks = list[tuple[array, ...]]


def _pel_chunks(rows: Rows, cuts: list[int]) -> tuple[list[int], Chunks]:
    """The rows as a PEL's chunks (ms, seq, time, count, owner), cut at the sizes in `cuts`
    (cycled), and the chunks' last IDs."""
    ids = sorted(rows)
    maxes: list[int] = []
    chunks: Chunks = []
    i = k = 0
    while i < len(ids):
        part = ids[i:i + cuts[k % len(cuts)]]
        chunks.append((array("Q", [s >> 64 for s in part]), array("Q", [s & _LOW for s in part]),
                       array("q", [rows[s][0] for s in part]),
                       array("Q", [rows[s][1] for s in part]),
                       array("i", [rows[s][2] for s in part])))
        maxes.append(part[-1])
        i += len(part)
        k += 1
    return maxes, chunks


def _id_chunks(ids: list[int], cuts: list[int]) -> tuple[list[int], Chunks]:
    maxes, chunks = _pel_chunks({s: (0, 0, 0) for s in ids}, cuts)
    return maxes, [chunk[:2] for chunk in chunks]


def _read_back(maxes: list[int], chunks: Chunks) -> tuple[list[int], list[tuple[int, ...]]]:
    """(maxes, every row as a tuple of its columns' values) with the chunk invariants checked:
    no empty chunk, each chunk's last ID is its max, IDs ascending across chunks."""
    assert len(maxes) == len(chunks)
    rows: list[tuple[int, ...]] = []
    for top, chunk in zip(maxes, chunks, strict=True):
        assert len(chunk[0]) and all(len(col) == len(chunk[0]) for col in chunk)
        assert top == chunk[0][-1] << 64 | chunk[1][-1]
        rows += [(chunk[0][k] << 64 | chunk[1][k], *[col[k] for col in chunk[2:]])
                 for k in range(len(chunk[0]))]
    assert [r[0] for r in rows] == sorted({r[0] for r in rows})
    return list(maxes), rows


def _copy(chunks: Chunks) -> Chunks:
    return [tuple(array(col.typecode, col) for col in chunk) for chunk in chunks]


def _get(deleted: set[int]):  # type: ignore[no-untyped-def]
    return lambda sid: None if sid in deleted else (b"f", b"%d" % sid)


def _model_scan(rows: Rows, deleted: set[int], start: int, min_idle: int, now: int, count: int,
                attempts: int, inc: int) -> tuple[list, list, list, int | None]:
    """XAUTOCLAIM's loop as it was, one row at a time."""
    sids: list[int] = []
    counts: list[int] = []
    got: list = []
    walk = [s for s in sorted(rows) if s >= start]
    for sid in walk:
        if not (attempts and count):
            return sids, counts, got, sid
        attempts -= 1
        fields = None if sid in deleted else (b"f", b"%d" % sid)
        time_ms, n, owner = rows[sid]
        if fields is not None and min_idle and now - time_ms < min_idle and owner != NO_OWNER:
            continue
        sids.append(sid)
        counts.append(n + inc)
        got.append(fields)
        count -= 1
    return sids, counts, got, None


SCAN_ARGS = st.tuples(st.one_of(SMALL, U64), st.sampled_from([0, 1, 10, 60, (1 << 63) - 1]),
                      st.one_of(st.integers(-5, 60), EDGES), st.integers(1, 12), st.integers(1, 30),
                      st.sampled_from([0, 1]))


@settings(max_examples=150, deadline=None)
@given(SIDS, st.data(), CUTS, SCAN_ARGS)
def test_scan_picks_as_the_one_row_loop_did(pel_claim_impl: ModuleType, sids: list[int],
                                            data: st.DataObject, cuts: list[int],
                                            args: tuple[int, ...]) -> None:
    rows = {sid: data.draw(ROW) for sid in sids}
    deleted = {sid for sid in sids if data.draw(st.booleans())}
    start_ms, min_idle, now, count, attempts, inc = args
    start = data.draw(st.sampled_from(sids)) if sids and data.draw(st.booleans()) else start_ms
    maxes, chunks = _pel_chunks(rows, cuts)
    before = _read_back(maxes, chunks)
    got = pel_claim_impl.scan(maxes, chunks, start, min_idle, now, count, attempts, inc,
                              _get(deleted))
    assert got == _model_scan(rows, deleted, start, min_idle, now, count, attempts, inc)
    assert _read_back(maxes, chunks) == before  # a scan only reads


@settings(max_examples=150, deadline=None)
@given(SIDS, st.data(), CUTS, st.integers(0, 1 << 40), st.sampled_from([NO_OWNER, 0, 3]))
def test_claim_rewrites_rows_in_place(pel_claim_impl: ModuleType, sids: list[int],
                                      data: st.DataObject, cuts: list[int], time_ms: int,
                                      owner: int) -> None:
    rows = {sid: data.draw(ROW) for sid in sids}
    chosen = sorted(sid for sid in sids if data.draw(st.booleans()))
    counts = [data.draw(st.sampled_from([0, 2, (1 << 64) - 1])) for _ in chosen]
    maxes, chunks = _pel_chunks(rows, cuts)
    ms, seq, owners, times = pel_claim_impl.claim(maxes, chunks, chosen, time_ms, counts, owner)
    assert ms == [s >> 64 for s in chosen] and seq == [s & _LOW for s in chosen]
    assert owners == [rows[s][2] for s in chosen] and times == [rows[s][0] for s in chosen]
    for sid, n in zip(chosen, counts, strict=True):
        rows[sid] = (time_ms, n, owner)
    assert _read_back(maxes, chunks)[1] == [(s, *rows[s]) for s in sorted(rows)]


def test_claim_refuses_what_is_not_pending(pel_claim_impl: ModuleType) -> None:
    maxes, chunks = _pel_chunks({1 << 64: (5, 1, 0), 3 << 64: (5, 1, 0)}, [1])
    with pytest.raises(KeyError):
        pel_claim_impl.claim(maxes, chunks, [2 << 64], 9, [1], 1)
    with pytest.raises(KeyError):
        pel_claim_impl.claim(maxes, chunks, [4 << 64], 9, [1], 1)
    with pytest.raises(ValueError):
        pel_claim_impl.claim(maxes, chunks, [1 << 64], 9, [1, 2], 1)
    wrong = [(chunks[0][0], chunks[0][1], array("Q", [5]), chunks[0][3], chunks[0][4])]
    with pytest.raises(TypeError):
        pel_claim_impl.claim(maxes[:1], wrong, [1 << 64], 9, [1], 1)
    with pytest.raises(TypeError):
        pel_claim_impl.scan(maxes[:1], wrong, 0, 0, 9, 1, 10, 1, lambda sid: None)


@settings(max_examples=150, deadline=None)
@given(SIDS, SIDS, CUTS, st.booleans())
def test_remove_sorted_is_a_set_difference(pel_claim_impl: ModuleType, ids: list[int],
                                           extra: list[int], cuts: list[int],
                                           wide: bool) -> None:
    # Half the IDs removed are members, the others (from `extra`) mostly are not.
    gone = sorted(set(ids[::2]) | set(extra))
    if wide:  # a PEL's five columns move with the IDs
        rows = {sid: (sid % 97, sid % 89, sid % 5) for sid in ids}
        maxes, chunks = _pel_chunks(rows, cuts)
    else:
        maxes, chunks = _id_chunks(ids, cuts)
    removed = pel_claim_impl.remove_sorted(maxes, chunks, [s >> 64 for s in gone],
                                           [s & _LOW for s in gone])
    left = sorted(set(ids) - set(gone))
    assert removed == len(ids) - len(left)
    _, rows_left = _read_back(maxes, chunks)
    assert [r[0] for r in rows_left] == left
    if wide:
        assert rows_left == [(s, s % 97, s % 89, s % 5) for s in left]


@settings(max_examples=150, deadline=None)
@given(SIDS, SIDS, CUTS, st.booleans())
def test_pop_sorted_gives_each_removed_ids_column_value(
        pel_claim_impl: ModuleType, ids: list[int], extra: list[int], cuts: list[int],
        repeat: bool) -> None:
    rows = {sid: (sid % 97, sid % 89, sid % 5) for sid in ids}
    maxes, chunks = _pel_chunks(rows, cuts)
    gone = sorted(set(ids[::2]) | set(extra))
    if repeat and gone:  # an ID given twice: its second place finds it gone
        gone.insert(0, gone[0])
    got = pel_claim_impl.pop_sorted(maxes, chunks, [s >> 64 for s in gone],
                                    [s & _LOW for s in gone], 4)
    expected = [rows[s][2] if s in rows else None for s in gone]
    if repeat and gone:
        expected[1] = None
    assert got == expected
    left = sorted(set(ids) - set(gone))
    assert _read_back(maxes, chunks)[1] == [(s, *rows[s]) for s in left]


@settings(max_examples=150, deadline=None)
@given(SIDS, SIDS, CUTS)
def test_pop_one_removes_one_id_and_gives_its_column_value(
        pel_claim_impl: ModuleType, ids: list[int], probes: list[int], cuts: list[int]) -> None:
    rows = {sid: (sid % 97, sid % 89, sid % 5) for sid in ids}
    maxes, chunks = _pel_chunks(rows, cuts)
    left = set(ids)
    for sid in probes + ids[::3] + ids[::3]:  # (the second pass finds them gone)
        got = pel_claim_impl.pop_one(maxes, chunks, sid >> 64, sid & _LOW, 4)
        assert got == (rows[sid][2] if sid in left else None)
        left.discard(sid)
        assert _read_back(maxes, chunks)[1] == [(s, *rows[s]) for s in sorted(left)]
    id_maxes, id_chunks = _id_chunks(sorted(left), cuts)
    for sid in sorted(left):  # a consumer's set: column 0, the ID's ms, says it was there
        assert pel_claim_impl.pop_one(id_maxes, id_chunks, sid >> 64, sid & _LOW, 0) == sid >> 64
    assert (id_maxes, id_chunks) == ([], [])


def test_pop_one_leaves_an_emptied_chunks_columns_empty(pel_claim_impl: ModuleType) -> None:
    """The chunk its last ID left is out of the lists, its columns empty: the packed set keeps
    it to hold the next IDs (a queue's PEL empties every message)."""
    maxes, chunks = _pel_chunks({1 << 64: (5, 1, 0), 2 << 64: (6, 1, 1)}, [1])
    emptied = chunks[0]
    assert pel_claim_impl.pop_one(maxes, chunks, 1, 0, 4) == 0
    assert all(len(col) == 0 for col in emptied)
    assert _read_back(maxes, chunks) == ([2 << 64], [(2 << 64, 6, 1, 1)])


def test_pop_one_gives_back_the_buffers_of_a_chunk_that_held_many_rows() -> None:
    """The compiled twin frees an emptied column's buffer that has room for many rows: a
    table that once held them gives their memory back when it empties (a small one is kept
    for the next rows)."""
    _pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_claim")
    for rows, freed in ((200, True), (2, False)):
        ids = [(1 << 64) + k for k in range(rows)]
        maxes, chunks = _pel_chunks({sid: (1, 1, 0) for sid in ids}, [rows])
        emptied = chunks[0]
        for sid in ids:
            assert compiled.pop_one(maxes, chunks, sid >> 64, sid & _LOW, 4) == 0
        assert (maxes, chunks) == ([], [])
        assert all(len(col) == 0 for col in emptied)
        empty = [sys.getsizeof(array(col.typecode)) for col in emptied]
        assert ([sys.getsizeof(col) for col in emptied] == empty) is freed


def test_extend_above_leaves_the_slack_array_append_leaves(pel_claim_impl: ModuleType) -> None:
    """A few rows written in place grow each column as array.append would have (the pure
    twin's appends): the same bytes allocated, row after row."""
    maxes, chunks = _id_chunks([1 << 64], [1])
    mirror = [array("Q", [1]), array("Q", [0])]
    for k in range(2, 60):
        pel_claim_impl.extend_above(maxes, chunks, [k], [0], (), (), 1024)
        mirror[0].append(k)
        mirror[1].append(0)
        assert [sys.getsizeof(col) for col in chunks[0]] == [sys.getsizeof(c) for c in mirror]
    assert list(chunks[0][0]) == list(mirror[0])


def test_pop_one_refuses_a_column_the_chunks_lack(pel_claim_impl: ModuleType) -> None:
    maxes, chunks = _id_chunks([1 << 64, 2 << 64], [2])
    for column in (2, -1):
        with pytest.raises(IndexError):
            pel_claim_impl.pop_one(maxes, chunks, 1, 0, column)
    assert _read_back(maxes, chunks)[1] == [(1 << 64,), (2 << 64,)]


def test_extend_above_refuses_a_value_its_column_cannot_hold_and_keeps_the_chunk(
        pel_claim_impl: ModuleType) -> None:
    """One row or a few appended to a chunk (value by value) or many (columns extended): a
    value out of its column's range is refused, and the chunk is left as it was."""
    for rows in (1, 2, 30):
        maxes, chunks = _pel_chunks({1 << 64: (5, 1, 0)}, [1])
        sids = [(2 << 64) + k for k in range(rows)]
        with pytest.raises(OverflowError):
            pel_claim_impl.extend_above(maxes, chunks, [s >> 64 for s in sids],
                                        [s & _LOW for s in sids], (1, -1, 0), ("q", "Q", "i"),
                                        1024)
        assert _read_back(maxes, chunks) == ([1 << 64], [(1 << 64, 5, 1, 0)])


@pytest.mark.parametrize("cap", [1, 2, 3, 1024])
def test_extend_above_appends_in_chunks_of_at_most_cap(pel_claim_impl: ModuleType,
                                                       cap: int) -> None:
    maxes, chunks = _pel_chunks({1 << 64: (5, 1, 0)}, [1])
    all_rows = {1 << 64: (5, 1, 0)}
    for start in (2, 5, 9):
        sids = [start << 64 | k for k in range(start)]
        pel_claim_impl.extend_above(maxes, chunks, [s >> 64 for s in sids],
                                    [s & _LOW for s in sids], (-7, (1 << 64) - 1, NO_OWNER),
                                    ("q", "Q", "i"), cap)
        all_rows.update({s: (-7, (1 << 64) - 1, NO_OWNER) for s in sids})
        assert all(len(chunk[0]) <= max(cap, 1) for chunk in chunks)
    assert _read_back(maxes, chunks)[1] == [(s, *all_rows[s]) for s in sorted(all_rows)]
    ids_maxes, id_chunks = _id_chunks([], [1])
    pel_claim_impl.extend_above(ids_maxes, id_chunks, [1, 2], [0, 0], (), (), cap)
    assert _read_back(ids_maxes, id_chunks)[1] == [(1 << 64,), (2 << 64,)]
    with pytest.raises(ValueError):
        pel_claim_impl.extend_above(ids_maxes, id_chunks, [3], [], (), (), cap)
    with pytest.raises(ValueError):
        pel_claim_impl.extend_above(ids_maxes, id_chunks, [3], [0], (1,), (), cap)


def test_remove_sorted_drops_emptied_chunks(pel_claim_impl: ModuleType) -> None:
    ids = [m << 64 | s for m in range(1, 4) for s in range(3)]
    maxes, chunks = _id_chunks(ids, [3])
    assert pel_claim_impl.remove_sorted(maxes, chunks, [2, 2, 2, 3], [0, 1, 2, 2]) == 4
    assert _read_back(maxes, chunks) == (
        [1 << 64 | 2, 3 << 64 | 1], [(s,) for s in ids[:3] + ids[6:8]])
    with pytest.raises(ValueError):
        pel_claim_impl.remove_sorted(maxes, chunks, [1], [])


@settings(max_examples=200, deadline=None)
@given(SIDS, st.data(), CUTS, SCAN_ARGS)
def test_twins_agree(sids: list[int], data: st.DataObject, cuts: list[int],
                     args: tuple[int, ...]) -> None:
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "pel_claim")
    rows = {sid: data.draw(ROW) for sid in sids}
    deleted = {sid for sid in sids if data.draw(st.booleans())}
    maxes, chunks = _pel_chunks(rows, cuts)
    start, min_idle, now, count, attempts, inc = args
    get = _get(deleted)
    assert outcome(pure.scan, maxes, chunks, start, min_idle, now, count, attempts, inc,
                   get) == outcome(compiled.scan, maxes, chunks, start, min_idle, now, count,
                                   attempts, inc, get)
    # Claims (present or not, in order or not) and removals on copies: the same results, the
    # same chunks left.
    chosen = data.draw(st.lists(st.sampled_from(sids + [0, 5 << 64]), max_size=8)) if sids \
        else []
    counts = [data.draw(st.sampled_from([0, 3, (1 << 64) - 1])) for _ in chosen]
    one, two = _copy(chunks), _copy(chunks)
    assert outcome(pure.claim, list(maxes), one, chosen, now, counts, 1) == outcome(
        compiled.claim, list(maxes), two, chosen, now, counts, 1)
    assert one == two
    gone = sorted(set(chosen))
    m1, m2 = list(maxes), list(maxes)
    assert outcome(pure.remove_sorted, m1, one, [s >> 64 for s in gone],
                   [s & _LOW for s in gone]) == outcome(
        compiled.remove_sorted, m2, two, [s >> 64 for s in gone], [s & _LOW for s in gone])
    assert (m1, one) == (m2, two)
    popped = data.draw(st.lists(st.sampled_from(sids + [0, 5 << 64]), max_size=8)) if sids \
        else []
    popped.sort()
    assert outcome(pure.pop_sorted, m1, one, [s >> 64 for s in popped],
                   [s & _LOW for s in popped], 3) == outcome(
        compiled.pop_sorted, m2, two, [s >> 64 for s in popped], [s & _LOW for s in popped], 3)
    assert (m1, one) == (m2, two)
    for sid in data.draw(st.lists(st.sampled_from(sids + [0, 5 << 64]), max_size=4)) if sids \
            else []:
        assert outcome(pure.pop_one, m1, one, sid >> 64, sid & _LOW, 2) == outcome(
            compiled.pop_one, m2, two, sid >> 64, sid & _LOW, 2)
        assert (m1, one) == (m2, two)
    more = [((5 << 64) + k) for k in range(data.draw(st.integers(0, 6)))]
    if not maxes or (more and more[0] > max(m1 or [0])):
        assert outcome(pure.extend_above, m1, one, [s >> 64 for s in more],
                       [s & _LOW for s in more], (3, 4, 1), ("q", "Q", "i"), 3) == outcome(
            compiled.extend_above, m2, two, [s >> 64 for s in more], [s & _LOW for s in more],
            (3, 4, 1), ("q", "Q", "i"), 3)
        assert (m1, one) == (m2, two)
