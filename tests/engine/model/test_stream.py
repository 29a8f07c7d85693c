"""Stream.range: the columns it returns match the entry iterators, whatever the deletions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.ids import MAX_ID
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.reply import EntryArray


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 300), st.sets(st.integers(1, 300)), st.integers(1, 8),
       st.integers(0, 320), st.integers(0, 320), st.integers(0, 50))
def test_range_matches_the_iterators(n: int, deleted: set[int], node_entries: int,
                                     start: int, end: int, count: int) -> None:
    """Forward (node slices, tombstones filtered by column) and reverse reads return the live
    entries the iterators yield, cut at count, as an EntryArray."""
    s = Stream()
    for i in range(1, n + 1):
        s.append(i << 64, (b"f", b"%d" % i), node_entries, 1 << 20)
    for i in deleted:
        s.delete(i << 64)
    lo, hi = start << 64, end << 64 if end < 320 else MAX_ID
    for rev in (False, True):
        it = s.iter_backward(lo, hi) if rev else s.iter_forward(lo, hi)
        expected = [[idb, f] for _, idb, f in it]
        if count:
            expected = expected[:count]
        got = s.range(lo, hi, count, rev)
        assert type(got) is EntryArray
        assert got == expected
