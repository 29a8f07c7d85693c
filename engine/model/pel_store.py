"""Packed containers of the pending entries list: sorted stream IDs with columns beside them.

Owns the layout only. A PEL entry held as objects (a 128-bit int key of ~44 bytes, a dict slot,
a NACK object, a slot in each index) cost ~160 bytes of RSS; here the IDs live in bounded sorted
chunks of parallel arrays (`array('Q')` milliseconds and sequence numbers, plus the value
columns), ~16 bytes an ID and 8 a value, with no object per entry for the garbage collector to
walk. Chunks are bisected by their last IDs, then searched by `pel_search.find` (a compiled
kernel). Must not touch: groups, consumers, streams (`consumer_groups` gives the columns their
meaning).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Generator, Iterator
from typing import Final

from streamkeep.engine.model.pel_claim import (
    claim,
    extend_above,
    pop_one,
    pop_sorted,
    remove_sorted,
    scan,
)
from streamkeep.engine.model.pel_search import (
    bucket_live,
    find,
    narrow_bucket,
    owned_rows,
    range_rows,
    wide_bucket,
)

_LOAD: int = 512  # a chunk splits in two above 2 * _LOAD IDs
# The kernels the hot paths call, bound Final: the compiled build calls them without a lookup
# in the module's globals.
_extend_above: Final = extend_above
_pop_one: Final = pop_one
_LOW: Final = (1 << 64) - 1
_EMPTY_COLUMNS: Final = {code: array(code) for code in "Qqi"}  # copied for a new chunk
_EMPTY_Q: Final = _EMPTY_COLUMNS["Q"]


class PackedIDs:
    """A sorted set of stream IDs: chunks of columns, the first two the IDs' ms and seq.

    Subclasses add value columns (`_EXTRA` typecodes); `add` takes their values in order."""

    __slots__ = ("_chunks", "_maxes", "_len", "_spare")
    _EXTRA: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._chunks: list[tuple[array, ...]] = []
        self._maxes: list[int] = []  # each chunk's last ID, for the bisect that picks a chunk
        self._len = 0
        # The last chunk `pop_one` emptied, its columns empty: a queue's PEL empties and fills
        # again every message, and new columns cost more than the row they hold.
        self._spare: tuple[array, ...] | None = None

    def __len__(self) -> int:
        return self._len

    def _new_chunk(self) -> tuple[array, ...]:
        spare = self._spare
        if spare is not None:
            self._spare = None
            return spare
        # Copies of empty columns: array(code) parses its arguments and raises an audit event,
        # ~1.8k instructions a column, paid by every delivery to an emptied PEL (a queue's).
        return (_EMPTY_Q[:], _EMPTY_Q[:], *[_EMPTY_COLUMNS[code][:] for code in self._EXTRA])

    def _locate(self, sid: int) -> tuple[int, int]:
        """(chunk, index) of `sid`; index is -1 - insertion point when absent, chunk is
        len(chunks) when `sid` is above every ID."""
        c = bisect_left(self._maxes, sid)
        if c == len(self._maxes):
            return c, -1
        chunk = self._chunks[c]
        return c, find(chunk[0], chunk[1], sid >> 64, sid & _LOW)

    def __contains__(self, sid: int) -> bool:
        return self._locate(sid)[1] >= 0

    def add(self, sid: int, *values: int) -> None:
        """Insert an ID known not to be present, with its value columns."""
        maxes, chunks = self._maxes, self._chunks
        self._len += 1
        if not maxes or sid > maxes[-1]:  # the common case: deliveries come in ID order
            if not chunks or len(chunks[-1][0]) >= 2 * _LOAD:
                # A full last chunk is left full, not split: halves would leave each one's
                # freed tail as a hole in the heap (RSS the allocator cannot give back).
                chunks.append(self._new_chunk())
                maxes.append(sid)
            chunk = chunks[-1]
            chunk[0].append(sid >> 64)
            chunk[1].append(sid & _LOW)
            if values:
                for col, v in zip(chunk[2:], values, strict=True):
                    col.append(v)
            maxes[-1] = sid
            return
        c = bisect_left(maxes, sid)
        chunk = chunks[c]
        j = -1 - find(chunk[0], chunk[1], sid >> 64, sid & _LOW)
        chunk[0].insert(j, sid >> 64)
        chunk[1].insert(j, sid & _LOW)
        if values:
            for col, v in zip(chunk[2:], values, strict=True):
                col.insert(j, v)
        if len(chunk[0]) > 2 * _LOAD:
            chunks.insert(c + 1, tuple(col[_LOAD:] for col in chunk))
            for col in chunk:
                del col[_LOAD:]
            maxes.insert(c, chunk[0][-1] << 64 | chunk[1][-1])

    def extend_above(self, ms: list[int], seq: list[int], *values: int) -> None:
        """Append IDs (as ms and seq lists) known to be ascending and above every ID, each with
        the same value columns: a batch of deliveries in one go (`pel_claim.extend_above`)."""
        chunks = self._chunks
        if chunks or self._spare is None:
            _extend_above(self._maxes, chunks, ms, seq, values, self._EXTRA, 2 * _LOAD)
        else:  # the rows go into the spare chunk's columns
            chunks.append(self._new_chunk())
            self._maxes.append(0)
            try:
                _extend_above(self._maxes, chunks, ms, seq, values, self._EXTRA, 2 * _LOAD)
            finally:
                if not chunks[0][0]:  # (refused: a chunk holds at least one ID)
                    self._spare = chunks.pop()
                    self._maxes.pop()
        self._len += len(ms)

    def _remove_at(self, c: int, j: int) -> None:
        chunk = self._chunks[c]
        for col in chunk:
            del col[j]
        self._len -= 1
        if not chunk[0]:
            del self._chunks[c]
            del self._maxes[c]
        elif j == len(chunk[0]):
            self._maxes[c] = chunk[0][-1] << 64 | chunk[1][-1]

    @staticmethod
    def _run(sids: list[int], k: int, ms: array, seq: array, e: int) -> tuple[int, int]:
        """How far `sids` from k go on matching the chunk's IDs from e (the ends of the run):
        compared in windows that double while they match (a batch's run costs a few slices,
        not a step an ID), then one by one inside the window that does not, so a batch that
        only starts runs costs no more than the runs it has."""
        n, size, width = len(sids), len(ms), 1
        while k < n and e < size:
            w = min(width, n - k, size - e)
            if [m << 64 | q for m, q in zip(ms[e:e + w], seq[e:e + w], strict=True)] != \
                    sids[k:k + w]:
                while sids[k] == ms[e] << 64 | seq[e]:  # (the window holds a mismatch)
                    k += 1
                    e += 1
                break
            k += w
            e += w
            width *= 2
        return k, e

    def pop_many(self, sids: list[int], column: int = -1) -> list[int | None]:
        """Remove each of `sids`; per ID, None when it was not there, else its value in
        `column` (-1: True). IDs that follow one another in a chunk, as an acknowledged batch
        of deliveries does, go in one slice per column rather than one deletion each."""
        out: list[int | None] = [None] * len(sids)
        chunks, maxes = self._chunks, self._maxes
        i, n = 0, len(sids)
        while i < n:
            c, j = self._locate(sids[i])
            if j < 0:
                i += 1
                continue
            chunk = chunks[c]
            ms, seq = chunk[0], chunk[1]
            k, e = self._run(sids, i + 1, ms, seq, j + 1)
            out[i:k] = chunk[column][j:e].tolist() if column >= 0 else [True] * (k - i)
            for col in chunk:
                del col[j:e]
            self._len -= e - j
            if not ms:
                del chunks[c]
                del maxes[c]
            elif j == len(ms):  # (the run reached the chunk's end: a new last ID)
                maxes[c] = ms[-1] << 64 | seq[-1]
            i = k
        return out

    def remove_sorted(self, ms: list[int], seq: list[int]) -> int:
        """Remove the IDs given as ascending ms and seq lists (absent ones are skipped), one
        pass a chunk (`pel_claim.remove_sorted`); how many were there."""
        removed = remove_sorted(self._maxes, self._chunks, ms, seq)
        self._len -= removed
        return removed

    def pop_one(self, m: int, s: int, column: int) -> int | None:
        """Remove the ID (m, s) (`pel_claim.pop_one`): its value in `column` (0: its ms), None
        when it was not there."""
        chunks = self._chunks
        only = chunks[0] if len(chunks) == 1 else None
        value = _pop_one(self._maxes, chunks, m, s, column)
        if value is not None:
            self._len -= 1
            if not chunks:  # (the kernel left the emptied chunk's columns empty)
                self._spare = only
        return value

    def pop_sorted(self, ms: list[int], seq: list[int], column: int) -> list[int | None]:
        """Remove the IDs given as ascending ms and seq lists, one pass a chunk
        (`pel_claim.pop_sorted`): per ID, its value in `column`, None when it was not there."""
        out = pop_sorted(self._maxes, self._chunks, ms, seq, column)
        self._len -= len(out) - out.count(None)
        return out

    def add_sorted(self, sids: list[int], ms: list[int], seq: list[int]) -> None:
        """Insert ascending IDs known not to be present (also as ms and seq lists), without
        value columns: one batch append when they are above every ID, else one `add` each."""
        if not sids:
            return
        if not self._maxes or sids[0] > self._maxes[-1]:
            self.extend_above(ms, seq)
            return
        for sid in sids:
            self.add(sid)

    def discard(self, sid: int) -> bool:
        """Remove `sid`; False when it was not there."""
        c, j = self._locate(sid)
        if j < 0:
            return False
        self._remove_at(c, j)
        return True

    def first(self) -> int | None:
        if not self._chunks:
            return None
        chunk = self._chunks[0]
        return chunk[0][0] << 64 | chunk[1][0]

    def last(self) -> int | None:
        return self._maxes[-1] if self._maxes else None

    def irange(self, start: int, end: int) -> Iterator[int]:
        """IDs with start <= id <= end, ascending."""
        chunks = self._chunks
        c = bisect_left(self._maxes, start)
        if c == len(chunks):
            return
        chunk = chunks[c]
        j = find(chunk[0], chunk[1], start >> 64, start & _LOW)
        if j < 0:
            j = -1 - j
        while c < len(chunks):
            ms, seq = chunks[c][0], chunks[c][1]
            for k in range(j, len(ms)):
                sid = ms[k] << 64 | seq[k]
                if sid > end:
                    return
                yield sid
            c += 1
            j = 0

    def next_after(self, sid: int) -> int | None:
        """The smallest ID above `sid`."""
        c = bisect_right(self._maxes, sid)
        if c == len(self._maxes):
            return None
        chunk = self._chunks[c]
        j = find(chunk[0], chunk[1], sid >> 64, sid & _LOW)
        j = j + 1 if j >= 0 else -1 - j
        return chunk[0][j] << 64 | chunk[1][j]

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks:
            ms, seq = chunk[0], chunk[1]
            for k in range(len(ms)):
                yield ms[k] << 64 | seq[k]


NO_OWNER: Final = -1  # the owner column of an entry XNACK released


class PendingTable(PackedIDs):
    """The group's PEL: each ID with its delivery time, delivery count and owner (a consumer's
    slot in the group, or NO_OWNER)."""

    __slots__ = ()
    # delivery time, delivery count (unsigned: LLONG_MAX, as XNACK FATAL sets, still counts
    # claims), owner slot
    _EXTRA: tuple[str, ...] = ("q", "Q", "i")

    def entry(self, sid: int) -> tuple[int, int, int] | None:
        """(delivery time, delivery count, owner) of `sid`, None when it is not pending."""
        maxes = self._maxes
        c = bisect_left(maxes, sid)
        if c == len(maxes):
            return None
        chunk = self._chunks[c]
        j = find(chunk[0], chunk[1], sid >> 64, sid & _LOW)
        if j < 0:
            return None
        return chunk[2][j], chunk[3][j], chunk[4][j]

    def delivery_time(self, sid: int) -> int | None:
        c, j = self._locate(sid)
        return None if j < 0 else self._chunks[c][2][j]

    def put(self, sid: int, time_ms: int, count: int, owner: int) -> tuple[int, int] | None:
        """Set (or create) `sid`'s entry; the former (delivery time, owner), None if new."""
        maxes = self._maxes
        if maxes and sid <= maxes[-1]:
            c = bisect_left(maxes, sid)
            chunk = self._chunks[c]
            j = find(chunk[0], chunk[1], sid >> 64, sid & _LOW)
            if j >= 0:
                before = chunk[2][j], chunk[4][j]
                chunk[2][j] = time_ms
                chunk[3][j] = count
                chunk[4][j] = owner
                return before
            self.add(sid, time_ms, count, owner)
            return None
        chunks = self._chunks  # appended in ID order: inlined, the XREADGROUP hot path
        if not chunks or len(chunks[-1][0]) >= 2 * _LOAD:
            chunks.append(self._new_chunk())
            maxes.append(sid)
        ms, seq, times, counts, owners = chunks[-1]
        ms.append(sid >> 64)
        seq.append(sid & _LOW)
        times.append(time_ms)
        counts.append(count)
        owners.append(owner)
        maxes[-1] = sid
        self._len += 1
        return None

    def scan(self, start: int, min_idle: int, now: int, count: int, attempts: int, inc: int,
             get: Callable[[int], object | None],
             ) -> tuple[list[int], list[int], list[object | None], int | None]:
        """XAUTOCLAIM's pick from the first ID >= `start` (`pel_claim.scan`): the IDs, their
        delivery counts plus `inc`, what `get` gave for each (None: a deleted entry), and the
        next cursor (None at the end)."""
        return scan(self._maxes, self._chunks, start, min_idle, now, count, attempts, inc, get)

    def claim(self, sids: list[int], time_ms: int, counts: list[int],
              owner: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """Rewrite the rows of `sids` (ascending, all here) in place (`pel_claim.claim`): the IDs
        as ms and seq lists, and the rows' former owners and delivery times."""
        return claim(self._maxes, self._chunks, sids, time_ms, counts, owner)

    def pop(self, sid: int) -> int | None:
        """Remove `sid`; its owner, None when it was not pending."""
        c, j = self._locate(sid)
        if j < 0:
            return None
        owner: int = self._chunks[c][4][j]
        self._remove_at(c, j)
        return owner

    def pop_owners(self, sids: list[int]) -> list[int | None]:
        """`pop` of each of `sids` (see `pop_many`): their owners, None where not pending."""
        return self.pop_many(sids, 4)

    def pop_owners_sorted(self, ms: list[int], seq: list[int]) -> list[int | None]:
        """`pop_owners` of strictly ascending IDs given as ms and seq lists, in one kernel pass
        a chunk (`pop_sorted`)."""
        return self.pop_sorted(ms, seq, 4)

    def owned_rows(self, ids: PackedIDs, start: int,
                   end: int) -> Iterator[tuple[int, int, int, int]]:
        """(id, delivery time, count, owner) of the IDs of `ids` (a consumer's, all pending
        here) in [start, end], ascending: XPENDING of one consumer, walked by the kernel."""
        return owned_rows(self._maxes, self._chunks, ids._maxes, ids._chunks, start, end)

    def irange_rows(self, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """(id, delivery time, count, owner) of the IDs in [start, end], ascending."""
        return range_rows(self._maxes, self._chunks, start, end)

    def bucket_live(self, bucket: array, t: int) -> Generator[tuple[int, int], None, None]:
        """(ordinal, id) of a delivery-time bucket's IDs pending here with delivery time `t`
        (the others are stale), in bucket order: walked by the kernel."""
        return bucket_live(bucket, self._maxes, self._chunks, t)

    def times(self) -> Iterator[tuple[int, int]]:
        """(id, delivery time), ascending."""
        for chunk in self._chunks:
            ms, seq, times = chunk[0], chunk[1], chunk[2]
            for k in range(len(ms)):
                yield ms[k] << 64 | seq[k], times[k]


# --- delivery-time buckets ------------------------------------------------------------------------
# A bucket holds the IDs delivered at one time, in delivery order, packed in one array: narrow
# ('I': the smallest ms as two words, then (ms - that, seq) pairs, 8 bytes an ID) when every ID
# fits, which a batch of deliveries does, else wide ('Q': (ms, seq) pairs, 16 bytes an ID).

_WORD: Final = 1 << 32
_ONE_NARROW: Final = array("I", [0, 0, 0, 0])  # a narrow bucket of one ID: base, 0, seq


def bucket_new(ms: list[int], seq: list[int]) -> array:
    """A bucket of the IDs given as ms and seq lists (empty only for a bucket a walk emptied:
    the next walk drops it): narrow from their smallest ms when every ID fits, else wide
    (`pel_search.narrow_bucket`, `wide_bucket`)."""
    if not ms:
        return array("Q")
    if len(ms) == 1 and seq[0] < _WORD:
        # One delivery (a queue's): narrow_bucket's bucket, from a copied template rather than
        # built through lists and array()
        m = ms[0]
        one = _ONE_NARROW[:]
        one[0] = m >> 32
        one[1] = m & (_WORD - 1)
        one[3] = seq[0]
        return one
    bucket = narrow_bucket(ms, seq, min(ms))
    return bucket if bucket is not None else wide_bucket(ms, seq)


def bucket_ids(bucket: array) -> Iterator[int]:
    """The bucket's IDs, in the order they were added."""
    if bucket.typecode == "I":
        base = bucket[0] << 32 | bucket[1]
        for k in range(2, len(bucket), 2):
            yield (base + bucket[k]) << 64 | bucket[k + 1]
    else:
        for k in range(0, len(bucket), 2):
            yield bucket[k] << 64 | bucket[k + 1]


def bucket_size(bucket: array) -> int:
    return (len(bucket) - (2 if bucket.typecode == "I" else 0)) >> 1


def bucket_last(bucket: array) -> int:
    if bucket.typecode == "I":
        return ((bucket[0] << 32 | bucket[1]) + bucket[-2]) << 64 | bucket[-1]
    return bucket[-2] << 64 | bucket[-1]


def bucket_extend(bucket: array, ms: list[int], seq: list[int]) -> array:
    """The bucket with these IDs added: the same array, or a wide copy when they do not fit."""
    if bucket.typecode == "I":
        more = narrow_bucket(ms, seq, bucket[0] << 32 | bucket[1])
        if more is None:
            ids = [*bucket_ids(bucket)]
            return bucket_new([s >> 64 for s in ids] + ms, [s & _LOW for s in ids] + seq)
        bucket.extend(more[2:])
        return bucket
    bucket.extend(wide_bucket(ms, seq))
    return bucket


def bucket_push(bucket: array, sid: int) -> array:
    """`bucket_extend` with one ID (a claim), without building lists when it fits."""
    m, s = sid >> 64, sid & _LOW
    if bucket.typecode == "I":
        base = bucket[0] << 32 | bucket[1]
        if 0 <= m - base < _WORD and s < _WORD:
            bucket.append(m - base)
            bucket.append(s)
            return bucket
        return bucket_extend(bucket, [m], [s])
    bucket.append(m)
    bucket.append(s)
    return bucket


def bucket_drop_leading(bucket: array, n: int) -> None:
    """Remove the first `n` IDs (a bucket keeps at least one: callers drop empty ones)."""
    start = 2 if bucket.typecode == "I" else 0
    del bucket[start:start + 2 * n]
