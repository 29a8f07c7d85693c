"""The sorted set value: members (bytes) with scores (doubles), ordered by (score, member).

Owns `ZSet` and its two encodings, as Redis keeps them (OBJECT ENCODING's words):
- "listpack": a small set packed in three buffers (the members' bytes end to end, their start
  offsets, their scores as doubles), while it has at most `zset-max-listpack-entries` (128)
  members of at most `zset-max-listpack-value` (64) bytes. A member is found with one C-level
  substring search; an insert or a removal moves at most a few kilobytes.
- "skiplist": the members in order, in sorted chunks of a few hundred (a list of the members
  beside an `array('d')` of their scores), the chunks' last elements as the index (their
  scores one `array('d')`), and a Fenwick tree over the chunk sizes for positions. A lookup
  by (score, member) is a C-level bisection of contiguous doubles, among the chunks then in
  one, the members compared only between a score's ties. Beside the chunks, the member ->
  score index is a bucket table (engine.model.bucket_table: each member's bytes and its
  score as an 8-byte value, packed with a few others in a bucket), so ZSCORE is a table
  lookup. Insert, delete, rank, element at a rank and the first position at a score or
  member bound are O(log n) plus a move inside one chunk; a range costs O(log n + returned).
  Per member that is the member's bytes object and its list slot, 8 bytes of score and the
  table's packed record: no node objects, no float object, no dict entry.
A set converts to "skiplist" when an add crosses either limit (or when a command sizes it so,
`maybe_convert`), never back on removal; a set built whole (`from_items`, `create`, a snapshot's
`from_bytes`) takes the encoding its size calls for, as Redis's ZRANGESTORE, ZUNIONSTORE and
RDB loading do.

Scores compare as doubles (-0.0 == 0.0, ties broken by the members' bytes as memcmp then
length, which is Python's bytes order); the stored score keeps its sign (ZSCORE of a member
added with -0 reads "-0"). The lex operations assume what Redis documents, one score for all
members: they bisect on the members.

Must not touch: commands, replies, error lines (an add reports NaN as an outcome), the keyspace.
"""

from __future__ import annotations

import math
import operator
import random
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from typing import ClassVar, Final

from streamkeep.engine.model.bucket_table import BucketTable
from streamkeep.engine.model.limits import Limits, Setting
from streamkeep.engine.model.listpack import str_size
from streamkeep.engine.model.redis_alloc import jemalloc_size, sds_alloc
from streamkeep.engine.model.score_search import bisect_scores
from streamkeep.engine.model.scores import LEX_MAX, LEX_MIN, LexRange, ScoreRange, format_score

# add()'s outcomes: what ZADD counts (added, changed) and whether ZADD INCR replies a score.
ADD_NOP = 0  # nothing done (NX on a member, XX on none, GT/LT refused): INCR replies nil
ADD_ADDED = 1  # a new member
ADD_UPDATED = 2  # an existing member's score changed
ADD_SAME = 3  # an existing member, its score as it was (counted as processed, not changed)
ADD_NAN = -1  # the new score would be NaN: "ERR resulting score is not a number (NaN)"

LISTPACK = "listpack"
SKIPLIST = "skiplist"
_LISTPACK_SAFETY = 1 << 30  # lpSafeToAdd: a listpack never grows past 1 GiB
_LOAD = 512  # a chunk splits past twice this, merges with a neighbour under a quarter
_FORMAT_VERSION = 1
_SCORE = struct.Struct("<d")  # a score in the member index: a little-endian double
_PACK_SCORE = _SCORE.pack

# Kernels the per-command paths call, bound once: an imported name is looked up in this
# module's globals at each call, a Final one is read from a static (mypyc).
_BISECT_SCORES: Final = bisect_scores


class ZSetLimits(Limits):
    """zset-max-listpack-entries and zset-max-listpack-value; shared by the sorted sets of one
    engine and changed in place on CONFIG SET (engine.model.limits)."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting("zset-max-listpack-entries", "max_listpack_entries", "int", 128,
                "members a sorted set holds in its compact (listpack) encoding at most",
                alias="zset-max-ziplist-entries"),
        Setting("zset-max-listpack-value", "max_listpack_value", "memory", 64,
                "bytes of the longest member a listpack-encoded sorted set holds",
                alias="zset-max-ziplist-value"),
    )

    def __init__(self, max_listpack_entries: int = 128, max_listpack_value: int = 64) -> None:
        self.max_listpack_entries = max_listpack_entries
        self.max_listpack_value = max_listpack_value


DEFAULT_LIMITS = ZSetLimits()


def normalize_rank_range(start: int, stop: int, length: int) -> tuple[int, int] | None:
    """ZRANGE's and ZREMRANGEBYRANK's inclusive indexes (negative from the end) as Redis
    clamps them: (first, last), or None for an empty range."""
    if start < 0:
        start += length
    if stop < 0:
        stop += length
    if start < 0:
        start = 0
    if start > stop or start >= length:
        return None
    return start, min(stop, length - 1)


# ---------------------------------------------------------------------------------------------
# the listpack encoding


class _Packed:
    """A small set: `blob` holds the members end to end in order, `offs` their start offsets
    (one more: the blob's length), `scores` the doubles."""

    __slots__ = ("blob", "offs", "scores")

    def __init__(self, members: Iterable[bytes] = (), scores: Iterable[float] = ()) -> None:
        members = list(members)
        self.blob = b"".join(members)
        offs = array("I", [0])
        total = 0
        for member in members:
            total += len(member)
            offs.append(total)
        self.offs = offs
        self.scores = array("d", scores)

    def __len__(self) -> int:
        return len(self.scores)

    def member(self, k: int) -> bytes:
        return self.blob[self.offs[k]:self.offs[k + 1]]

    def find(self, member: bytes) -> int:
        """The index of `member`, or -1: a substring search, each hit checked against the
        entries' bounds."""
        size = len(member)
        offs = self.offs
        if size == 0:
            for k in range(len(self.scores)):
                if offs[k] == offs[k + 1]:
                    return k
            return -1
        blob = self.blob
        count = len(self.scores)
        pos = blob.find(member)
        while pos >= 0:
            # the last entry starting there (empty members before it start there too)
            k = bisect_right(offs, pos) - 1
            if k < count and offs[k] == pos and offs[k + 1] - pos == size:
                return k
            pos = blob.find(member, pos + 1)
        return -1

    def get(self, member: bytes) -> float | None:
        k = self.find(member)
        return None if k < 0 else self.scores[k]

    def position(self, member: bytes, score: float) -> int:
        """Where (score, member) is or would go."""
        scores = self.scores
        k = _BISECT_SCORES(scores, score, False)
        hi = _BISECT_SCORES(scores, score, True, k)
        while k < hi and self.member(k) < member:
            k += 1
        return k

    def insert(self, member: bytes, score: float) -> None:
        # new arrays of the exact size (an array grown in place keeps spare room)
        k = self.position(member, score)
        offs = self.offs
        start = offs[k]
        self.blob = self.blob[:start] + member + self.blob[start:]
        size = len(member)
        self.offs = offs[:k + 1] + array("I", [x + size for x in offs[k:]])
        scores = self.scores
        self.scores = scores[:k] + array("d", (score,)) + scores[k:]

    def remove_at(self, k: int) -> None:
        offs = self.offs
        start, end = offs[k], offs[k + 1]
        self.blob = self.blob[:start] + self.blob[end:]
        size = end - start
        self.offs = offs[:k] + array("I", [x - size for x in offs[k + 1:]])
        self.scores = self.scores[:k] + self.scores[k + 1:]

    def remove(self, member: bytes) -> float | None:
        k = self.find(member)
        if k < 0:
            return None
        score = self.scores[k]
        self.remove_at(k)
        return score

    def update(self, member: bytes, _old: float, new: float) -> None:
        """Give a member the score `new`."""
        self.remove(member)
        self.insert(member, new)

    def rank(self, member: bytes, _score: float) -> int:
        return self.find(member)

    def bisect_score(self, x: float, right: bool) -> int:
        return _BISECT_SCORES(self.scores, x, right)

    def bisect_member(self, member: bytes, right: bool) -> int:
        lo, hi = 0, len(self.scores)
        while lo < hi:
            mid = (lo + hi) >> 1
            current = self.member(mid)
            if current < member or (right and current == member):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def slice(self, i: int, j: int, scores: bool = True) -> tuple[list[bytes], list[float]]:
        offs, blob = self.offs, self.blob
        members = [blob[offs[k]:offs[k + 1]] for k in range(i, j)]
        return members, self.scores[i:j].tolist() if scores else []

    def at(self, i: int) -> tuple[bytes, float]:
        return self.member(i), self.scores[i]

    def take_slice(self, i: int, j: int) -> tuple[list[bytes], list[float]]:
        """Remove the elements at positions [i, j): their members and scores."""
        scores = self.scores[i:j].tolist()
        return self.delete_slice(i, j), scores

    def delete_slice(self, i: int, j: int) -> list[bytes]:
        members, _scores = self.slice(i, j, False)
        offs = self.offs
        start, end = offs[i], offs[j]
        self.blob = self.blob[:start] + self.blob[end:]
        size = end - start
        self.offs = offs[:i] + array("I", [x - size for x in offs[j:]])
        self.scores = self.scores[:i] + self.scores[j:]
        return members

    def items(self) -> Iterator[tuple[bytes, float]]:
        members, scores = self.slice(0, len(self.scores))
        return zip(members, scores, strict=True)

    def approx_bytes(self) -> int:
        """A bound on the Redis listpack's size, for lpSafeToAdd."""
        return 7 + len(self.blob) + 16 * len(self.scores)

    def copy(self) -> _Packed:
        twin = _Packed()
        twin.blob, twin.offs, twin.scores = self.blob, array("I", self.offs), array(
            "d", self.scores)
        return twin


# ---------------------------------------------------------------------------------------------
# the skiplist encoding


class _Chunked:
    """A large set: the elements in order, in chunks (every chunk non-empty): `cm` the chunks'
    members (lists), `cs` their scores (`array('d')`, parallel to the members); `max_s` (one
    `array('d')`) and `max_m` each chunk's last element; `fen` a Fenwick tree over the chunk
    sizes (None once a chunk was split, merged or dropped: rebuilt when a position is asked);
    `table` the member -> score index (a two-column `BucketTable`, the score as its 8-byte
    value)."""

    __slots__ = ("cm", "cs", "fen", "max_m", "max_s", "table")

    def __init__(self) -> None:
        self.table = BucketTable(2, 0)
        self.cm: list[list[bytes]] = []
        self.cs: list[array[float]] = []
        self.max_s: array[float] = array("d")
        self.max_m: list[bytes] = []
        self.fen: list[int] | None = None

    @classmethod
    def from_sorted(cls, members: list[bytes], scores: list[float]) -> _Chunked:
        """A set from its elements in order (members unique)."""
        self = cls()
        self.append_run(members, scores)
        self.index_members()
        return self

    def append_run(self, members: list[bytes], scores: list[float]) -> None:
        """Append elements in order, all past the set's last one, as new chunks; the table
        is `index_members`'s to build once every run is in."""
        column = array("d", scores)
        load = _LOAD
        for start in range(0, len(members), load):
            part = members[start:start + load]
            self.cm.append(part)
            self.cs.append(column[start:start + load])
            self.max_m.append(part[-1])
            self.max_s.append(column[start + len(part) - 1])
        self.fen = None

    def index_members(self) -> None:
        """A new table indexing every element of the chunks (one bulk load, no splits)."""
        table = BucketTable(2, sum(map(len, self.cm)))
        table.load(zip(chain.from_iterable(self.cm),
                       map(_PACK_SCORE, chain.from_iterable(self.cs)), strict=True))
        self.table = table

    def __len__(self) -> int:
        return self.table.count

    def get(self, member: bytes) -> float | None:
        raw = self.table.get(member)
        return None if raw is None else _unpack_score(raw)

    # -- positions ------------------------------------------------------------------------

    def _index(self) -> list[int]:
        fen = self.fen
        if fen is None:
            count = len(self.cm)
            fen = [0] * (count + 1)
            for i, chunk in enumerate(self.cm, 1):
                fen[i] += len(chunk)
                parent = i + (i & -i)
                if parent <= count:
                    fen[parent] += fen[i]
            self.fen = fen
        return fen

    def _prefix(self, ci: int) -> int:
        """The number of elements in the chunks before chunk `ci`."""
        if ci == 0:
            return 0
        fen = self._index()
        total = 0
        while ci:
            total += fen[ci]
            ci &= ci - 1
        return total

    def _fen_add(self, ci: int, delta: int) -> None:
        fen = self.fen
        if fen is None:
            return
        ci += 1
        count = len(fen)
        while ci < count:
            fen[ci] += delta
            ci += ci & -ci

    def _seek(self, i: int) -> tuple[int, int]:
        """The chunk holding position i (0 <= i < len) and the offset in it."""
        first = len(self.cm[0])
        if i < first:
            return 0, i
        last = len(self.cm[-1])
        total = self.table.count
        if i >= total - last:
            return len(self.cm) - 1, i - (total - last)
        fen = self._index()
        ci, step = 0, 1 << (len(fen) - 1).bit_length()
        while step:
            nxt = ci + step
            if nxt < len(fen) and fen[nxt] <= i:
                ci = nxt
                i -= fen[nxt]
            step >>= 1
        return ci, i

    def _locate(self, score: float, member: bytes) -> tuple[int, int]:
        """The chunk and offset where (score, member) is or would go (appending to the last
        chunk past every element): C-level bisections of the doubles, the members compared
        only between a score's tie bounds."""
        max_s = self.max_s
        ci = _BISECT_SCORES(max_s, score, False)
        nchunks = len(max_s)
        if ci < nchunks and max_s[ci] == score:
            ci = bisect_left(self.max_m, member, ci, _BISECT_SCORES(max_s, score, True, ci))
        if ci == nchunks:
            ci -= 1
            return ci, len(self.cm[ci])
        scores = self.cs[ci]
        pos = _BISECT_SCORES(scores, score, False)
        if pos < len(scores) and scores[pos] == score:
            pos = bisect_left(self.cm[ci], member, pos, _BISECT_SCORES(scores, score, True, pos))
        return ci, pos

    # -- changes --------------------------------------------------------------------------

    def insert(self, member: bytes, score: float) -> None:
        """Add a member absent from the set."""
        self.table.put(member, _PACK_SCORE(score))
        self._place(member, score)

    def remove(self, member: bytes) -> float | None:
        raw = self.table.pop(member)
        if raw is None:
            return None
        score = _unpack_score(raw)
        self._unplace(member, score)
        return score

    def put(self, member: bytes, score: float) -> float | None:
        """ZADD's plain case in one table lookup: the member added with `score`, or given it;
        its score before (None when it is new). An equal score (-0.0 and 0.0) keeps the
        stored one, its sign included."""
        packed = _PACK_SCORE(score)
        raw = self.table.put(member, packed)
        if raw is None:
            self._place(member, score)
            return None
        old = _unpack_score(raw)
        if old == score:
            if raw != packed:  # the other zero: the stored sign stays
                self.table.put(member, raw)
        else:
            self._unplace(member, old)
            self._place(member, score)
        return old

    def update(self, member: bytes, old: float, new: float) -> None:
        """Give a member (at score `old`) the score `new`: its record rewritten in place, the
        element moved."""
        self.table.put(member, _PACK_SCORE(new))
        self._unplace(member, old)
        self._place(member, new)

    def _place(self, member: bytes, score: float) -> None:
        """Put the element in its chunk (the table is the caller's)."""
        if not self.cm:
            self.cm.append([member])
            self.cs.append(array("d", (score,)))
            self.max_s.append(score)
            self.max_m.append(member)
            self.fen = None
            return
        ci, pos = self._locate(score, member)
        members = self.cm[ci]
        if pos == len(members):  # last in its chunk (rising scores: times, counters)
            members.append(member)
            self.cs[ci].append(score)
            self.max_s[ci] = score
            self.max_m[ci] = member
        else:
            members.insert(pos, member)
            self.cs[ci].insert(pos, score)
        if len(members) > 2 * _LOAD:
            self._split(ci)
        else:
            self._fen_add(ci, 1)

    def _unplace(self, member: bytes, score: float) -> None:
        """Take the element out of its chunk (the table is the caller's)."""
        ci, pos = self._locate(score, member)
        members = self.cm[ci]
        del members[pos]
        scores = self.cs[ci]
        del scores[pos]
        if not members:
            self._drop_chunk(ci)
            return
        if pos == len(members):
            self.max_s[ci] = scores[-1]
            self.max_m[ci] = members[-1]
        self._fen_add(ci, -1)
        if len(members) < _LOAD // 4 and len(self.cm) > 1:
            self._merge(ci)

    def _split(self, ci: int) -> None:
        members, scores = self.cm[ci], self.cs[ci]
        load = _LOAD
        self.cm[ci:ci + 1] = [members[:load], members[load:]]
        self.cs[ci:ci + 1] = [scores[:load], scores[load:]]
        self.max_s.insert(ci, scores[load - 1])
        self.max_m.insert(ci, members[load - 1])
        self.fen = None

    def _drop_chunk(self, ci: int) -> None:
        del self.cm[ci], self.cs[ci], self.max_s[ci], self.max_m[ci]
        self.fen = None

    def _merge(self, ci: int) -> None:
        """Join chunk ci with a neighbour (splitting again when the two are too big)."""
        left = ci - 1 if ci > 0 else ci
        self.cm[left] += self.cm[left + 1]
        self.cs[left] += self.cs[left + 1]
        self.max_s[left] = self.max_s[left + 1]
        self.max_m[left] = self.max_m[left + 1]
        self._drop_chunk(left + 1)
        if len(self.cm[left]) > 2 * _LOAD:
            self._split(left)

    def rank(self, member: bytes, score: float) -> int:
        ci, pos = self._locate(score, member)
        return self._prefix(ci) + pos

    def bisect_score(self, x: float, right: bool) -> int:
        ci = _BISECT_SCORES(self.max_s, x, right)
        if ci == len(self.max_s):
            return self.table.count
        return self._prefix(ci) + _BISECT_SCORES(self.cs[ci], x, right)

    def bisect_member(self, member: bytes, right: bool) -> int:
        find = bisect_right if right else bisect_left
        ci = find(self.max_m, member)
        if ci == len(self.max_m):
            return self.table.count
        return self._prefix(ci) + find(self.cm[ci], member)

    # -- ranges ---------------------------------------------------------------------------

    def slice(self, i: int, j: int, scores: bool = True) -> tuple[list[bytes], list[float]]:
        """The members and the scores at positions [i, j) (no scores unless `scores`)."""
        if i >= j:
            return [], []
        ci, off = self._seek(i)
        wanted = j - i
        chunk = self.cm[ci]
        if off + wanted <= len(chunk):
            return (chunk[off:off + wanted],
                    self.cs[ci][off:off + wanted].tolist() if scores else [])
        members: list[bytes] = []
        taken: list[float] = []
        while wanted > 0:
            part = self.cm[ci][off:off + wanted]
            members += part
            if scores:
                taken += self.cs[ci][off:off + len(part)].tolist()
            wanted -= len(part)
            ci, off = ci + 1, 0
        return members, taken

    def at(self, i: int) -> tuple[bytes, float]:
        ci, off = self._seek(i)
        return self.cm[ci][off], self.cs[ci][off]

    def delete_slice(self, i: int, j: int) -> list[bytes]:
        return self.take_slice(i, j)[0]

    def take_slice(self, i: int, j: int) -> tuple[list[bytes], list[float]]:
        """Remove the elements at positions [i, j): their members and scores."""
        if i >= j:
            return [], []
        size = self.table.count
        ci, off = self._seek(i)
        wanted = j - i
        members = self.cm[ci]
        if off + wanted < len(members):  # inside one chunk, its last element kept (a pop)
            if wanted == 1:  # (ZPOPMIN's: no slices made, no method looked up)
                removed = [members.pop(off)]
                scores = self.cs[ci]
                taken = [scores[off]]
                del scores[off]
            else:
                removed = members[off:off + wanted]
                del members[off:off + wanted]
                scores = self.cs[ci]
                taken = scores[off:off + wanted].tolist()
                del scores[off:off + wanted]
            self._fen_add(ci, -wanted)
            if len(members) < _LOAD // 4 and len(self.cm) > 1:
                self._merge(ci)
        else:
            removed, taken = self._take_chunks(ci, off, wanted)
        if 2 * len(removed) > size:  # most of the set: index the survivors afresh
            self.index_members()
        else:
            table = self.table  # (its method called natively: no bound method made)
            for member in removed:
                table.pop(member)
        return removed, taken

    def _take_chunks(self, ci: int, off: int, wanted: int) -> tuple[list[bytes], list[float]]:
        """take_slice's elements from chunk ci (offset off) on, over as many chunks as they
        span; the chunks repaired after."""
        removed: list[bytes] = []
        taken: list[float] = []
        first = ci
        while wanted > 0:
            members = self.cm[ci]
            part = members[off:off + wanted]
            removed += part
            del members[off:off + len(part)]
            scores = self.cs[ci]
            taken += scores[off:off + len(part)].tolist()
            del scores[off:off + len(part)]
            self._fen_add(ci, -len(part))
            wanted -= len(part)
            ci, off = ci + 1, 0
        self._repair(first, ci)
        return removed, taken

    def _repair(self, first: int, stop: int) -> None:
        """After chunks first..stop-1 lost elements: drop the empty ones, reset the maxima,
        merge a small survivor."""
        for ci in range(stop - 1, first - 1, -1):
            members = self.cm[ci]
            if not members:
                self._drop_chunk(ci)
            else:
                self.max_s[ci] = self.cs[ci][-1]
                self.max_m[ci] = members[-1]
        for ci in (first, first - 1):
            if 0 <= ci < len(self.cm) and len(self.cm[ci]) < _LOAD // 4 and len(self.cm) > 1:
                self._merge(ci)
                break

    def items(self) -> Iterator[tuple[bytes, float]]:
        for members, scores in zip(self.cm, self.cs, strict=True):
            yield from zip(members, scores.tolist(), strict=True)

    def copy(self) -> _Chunked:
        """An independent copy: the chunks copied, the table's buckets (immutable bytes)
        shared until either side rewrites one."""
        twin = _Chunked()
        twin.table = self.table.copy()
        twin.cm = [list(c) for c in self.cm]
        twin.cs = [c[:] for c in self.cs]
        twin.max_s = self.max_s[:]
        twin.max_m = list(self.max_m)
        return twin


# ---------------------------------------------------------------------------------------------
# the value


_SKIPLIST_NODE = 46  # a node's mean allocation: 24 bytes plus 16 a level, levels p = 1/4


class ZSet:
    """A sorted set value (see the module docstring)."""

    __slots__ = ("_store",)

    def __init__(self, encoding: str = LISTPACK, store: _Packed | _Chunked | None = None) -> None:
        """An empty set in `encoding` ("listpack" or "skiplist"), or one holding `store`."""
        if store is None:
            store = _Packed() if encoding == LISTPACK else _Chunked()
        self._store: _Packed | _Chunked = store

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def create(cls, size_hint: int, value_len_hint: int,
               limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
        """zsetTypeCreate: an empty set for about `size_hint` members, the first of about
        `value_len_hint` bytes (ZADD on a new key passes its pair count and first member's
        length; ZRANGESTORE its result count and 0)."""
        small = (size_hint <= limits.max_listpack_entries
                 and value_len_hint <= limits.max_listpack_value)
        return cls(LISTPACK if small else SKIPLIST)

    @classmethod
    def from_items(cls, items: Iterable[tuple[bytes, float]],
                   limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
        """A new set holding `items` (member, score) in the encoding its size calls for
        (zsetConvertToListpackIfNeeded: ZUNIONSTORE and its kin, a loaded snapshot). A member
        given twice keeps its last score. NaN scores are the caller's to refuse."""
        ordered = sorted(dict(items).items(), key=_SCORE_THEN_MEMBER)
        return cls._build([m for m, _ in ordered], [s for _, s in ordered], limits)

    @classmethod
    def _build(cls, members: list[bytes], scores: list[float], limits: ZSetLimits) -> ZSet:
        """A set from its elements in order, in the encoding its size calls for."""
        if _fits_listpack(members, limits):
            return cls(store=_Packed(members, scores))
        return cls(store=_Chunked.from_sorted(members, scores))

    def copy(self) -> ZSet:
        """An independent copy in the same encoding (COPY: zsetDup)."""
        return ZSet(store=self._store.copy())

    # -- encoding -------------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        """OBJECT ENCODING's word: "listpack" or "skiplist"."""
        return LISTPACK if isinstance(self._store, _Packed) else SKIPLIST

    def convert(self, encoding: str) -> None:
        """Re-encode in place (members and order unchanged)."""
        if encoding == self.encoding:
            return
        members, scores = self._store.slice(0, len(self._store))
        if encoding == SKIPLIST:
            self._store = _Chunked.from_sorted(members, scores)
        else:
            self._store = _Packed(members, scores)

    def maybe_convert(self, size_hint: int, limits: ZSetLimits = DEFAULT_LIMITS) -> None:
        """zsetTypeMaybeConvert: a listpack set that a command is about to give `size_hint`
        more elements (ZADD's pair count, existing members included) turns into a skiplist
        when that count alone is over the entries limit."""
        if isinstance(self._store, _Packed) and size_hint > limits.max_listpack_entries:
            self.convert(SKIPLIST)

    # -- members --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, member: object) -> bool:
        return isinstance(member, bytes) and self._store.get(member) is not None

    def score(self, member: bytes) -> float | None:
        """ZSCORE: the member's score, or None."""
        return self._store.get(member)

    def add(self, member: bytes, score: float, *, nx: bool = False, xx: bool = False,
            gt: bool = False, lt: bool = False, incr: bool = False,
            limits: ZSetLimits = DEFAULT_LIMITS) -> tuple[int, float | None]:
        """zsetAdd: (outcome, the member's score now) where outcome is ADD_ADDED,
        ADD_UPDATED, ADD_SAME, ADD_NOP (score None: ZADD INCR replies nil) or ADD_NAN (score
        None). With `incr` the score is added to the current one (a new member gets `score`).
        `limits` are the current zset-max-listpack-* settings, read when a member is added."""
        if score != score:
            return ADD_NAN, None
        store = self._store
        if type(store) is _Chunked and not (nx or xx or gt or lt or incr):
            before = store.put(member, score)
            if before is None:
                return ADD_ADDED, score
            return (ADD_SAME if before == score else ADD_UPDATED), score
        current = store.get(member)
        if current is not None:
            if nx:
                return ADD_NOP, None
            if incr:
                score = current + score
                if score != score:
                    return ADD_NAN, None
            if (lt and score >= current) or (gt and score <= current):
                return ADD_NOP, None
            if score == current:  # -0.0 == 0.0: the stored sign stays
                return ADD_SAME, score
            store.update(member, current, score)
            return ADD_UPDATED, score
        if xx:
            return ADD_NOP, None
        if isinstance(store, _Packed) and (
                len(store) + 1 > limits.max_listpack_entries
                or len(member) > limits.max_listpack_value
                or store.approx_bytes() + len(member) > _LISTPACK_SAFETY):
            self.convert(SKIPLIST)
            store = self._store
        store.insert(member, score)
        return ADD_ADDED, score

    def remove(self, member: bytes) -> bool:
        """ZREM of one member: whether it was there."""
        return self._store.remove(member) is not None

    def rank(self, member: bytes, reverse: bool = False) -> int | None:
        """ZRANK / ZREVRANK: the member's 0-based position, or None."""
        found = self.rank_with_score(member, reverse)
        return None if found is None else found[0]

    def rank_with_score(self, member: bytes, reverse: bool = False) -> tuple[int, float] | None:
        """ZRANK ... WITHSCORE: (position, score), or None."""
        store = self._store
        score = store.get(member)
        if score is None:
            return None
        rank = store.rank(member, score)
        return (len(store) - 1 - rank if reverse else rank), score

    # -- ranges ---------------------------------------------------------------------------

    def items(self) -> Iterator[tuple[bytes, float]]:
        """Every (member, score), ascending (a skiplist set's is a live view: the set must not
        change while it is iterated)."""
        return self._store.items()

    def range_by_index(self, first: int, stop: int,
                       reverse: bool = False) -> list[tuple[bytes, float]]:
        """The elements at ascending positions [first, stop) (clamped), or those positions
        counted from the top, highest first, when `reverse`."""
        return _paired(self.index_columns(first, stop, reverse))

    def index_columns(self, first: int, stop: int, reverse: bool = False,
                      scores: bool = True) -> tuple[list[bytes], list[float]]:
        """`range_by_index`'s elements as two columns, their members and their scores (what a
        reply is written from: no pair made an element; the scores left empty unless
        `scores`)."""
        size = len(self._store)
        first, stop = max(first, 0), min(stop, size)
        if first >= stop:
            return [], []
        if reverse:
            return _reversed(self._store.slice(size - stop, size - first, scores))
        return self._store.slice(first, stop, scores)

    def range_by_rank(self, start: int, stop: int,
                      reverse: bool = False) -> list[tuple[bytes, float]]:
        """ZRANGE start stop [REV]: Redis's inclusive indexes, negative from the end (clamped
        here as Redis does)."""
        return _paired(self.rank_columns(start, stop, reverse))

    def rank_columns(self, start: int, stop: int, reverse: bool = False,
                     scores: bool = True) -> tuple[list[bytes], list[float]]:
        """`range_by_rank`'s elements as columns (see `index_columns`)."""
        span = normalize_rank_range(start, stop, len(self._store))
        if span is None:
            return [], []
        return self.index_columns(span[0], span[1] + 1, reverse, scores)

    def _score_span(self, rng: ScoreRange) -> tuple[int, int]:
        """The positions [i, j) of the scores in `rng`."""
        if rng.is_empty():
            return 0, 0
        store = self._store
        i = store.bisect_score(rng.min, rng.minex)
        j = store.bisect_score(rng.max, not rng.maxex)
        return i, max(i, j)

    def _lex_span(self, rng: LexRange) -> tuple[int, int]:
        """The positions [i, j) of the members in `rng` (members in order: one score)."""
        if rng.is_empty():
            return 0, 0
        store = self._store
        size = len(store)
        if rng.min_kind == LEX_MIN:
            i = 0
        elif rng.min_kind == LEX_MAX:
            i = size
        else:
            i = store.bisect_member(rng.min, rng.minex)
        if rng.max_kind == LEX_MAX:
            j = size
        elif rng.max_kind == LEX_MIN:
            j = 0
        else:
            j = store.bisect_member(rng.max, not rng.maxex)
        return i, max(i, j)

    def _window(self, span: tuple[int, int], reverse: bool, offset: int, count: int,
                scores: bool = True) -> tuple[list[bytes], list[float]]:
        """LIMIT offset count over the positions in `span` (a negative offset: nothing, as
        8.x; a negative count: all), as columns (see `index_columns`)."""
        i, j = span
        if offset < 0 or i >= j:
            return [], []
        width = j - i - offset
        if count >= 0:
            width = min(width, count)
        if width <= 0:
            return [], []
        if reverse:  # from position j - 1 - offset down
            return _reversed(self._store.slice(j - offset - width, j - offset, scores))
        return self._store.slice(i + offset, i + offset + width, scores)

    def range_by_score(self, rng: ScoreRange, reverse: bool = False, offset: int = 0,
                       count: int = -1) -> list[tuple[bytes, float]]:
        """ZRANGEBYSCORE / ZREVRANGEBYSCORE [LIMIT offset count] (`rng` as parsed: for the
        reverse commands the caller passes the bounds as min, max)."""
        return _paired(self.score_columns(rng, reverse, offset, count))

    def score_columns(self, rng: ScoreRange, reverse: bool = False, offset: int = 0,
                      count: int = -1, scores: bool = True) -> tuple[list[bytes], list[float]]:
        """`range_by_score`'s elements as columns (see `index_columns`)."""
        return self._window(self._score_span(rng), reverse, offset, count, scores)

    def range_by_lex(self, rng: LexRange, reverse: bool = False, offset: int = 0,
                     count: int = -1) -> list[tuple[bytes, float]]:
        """ZRANGEBYLEX / ZREVRANGEBYLEX [LIMIT offset count]."""
        return _paired(self.lex_columns(rng, reverse, offset, count))

    def lex_columns(self, rng: LexRange, reverse: bool = False, offset: int = 0,
                    count: int = -1, scores: bool = True) -> tuple[list[bytes], list[float]]:
        """`range_by_lex`'s elements as columns (see `index_columns`)."""
        return self._window(self._lex_span(rng), reverse, offset, count, scores)

    def count_in_score_range(self, rng: ScoreRange) -> int:
        """ZCOUNT."""
        i, j = self._score_span(rng)
        return j - i

    def count_in_lex_range(self, rng: LexRange) -> int:
        """ZLEXCOUNT."""
        i, j = self._lex_span(rng)
        return j - i

    # -- removals -------------------------------------------------------------------------

    def remove_range_by_index(self, first: int, stop: int) -> list[bytes]:
        """Remove the elements at positions [first, stop); their members, ascending."""
        first, stop = max(first, 0), min(stop, len(self._store))
        if first >= stop:
            return []
        return self._store.delete_slice(first, stop)

    def remove_range_by_rank(self, start: int, stop: int) -> list[bytes]:
        """ZREMRANGEBYRANK (Redis's inclusive indexes, negative from the end)."""
        span = normalize_rank_range(start, stop, len(self._store))
        if span is None:
            return []
        return self._store.delete_slice(span[0], span[1] + 1)

    def remove_range_by_score(self, rng: ScoreRange) -> list[bytes]:
        """ZREMRANGEBYSCORE: the members removed, ascending."""
        i, j = self._score_span(rng)
        return self._store.delete_slice(i, j) if i < j else []

    def remove_range_by_lex(self, rng: LexRange) -> list[bytes]:
        """ZREMRANGEBYLEX: the members removed, ascending."""
        i, j = self._lex_span(rng)
        return self._store.delete_slice(i, j) if i < j else []

    def pop(self, count: int = 1, max: bool = False) -> list[tuple[bytes, float]]:
        """ZPOPMIN / ZPOPMAX: up to `count` elements removed, in the order popped (lowest
        first, or highest first with `max`)."""
        return _paired(self.pop_columns(count, max))

    def pop_columns(self, count: int = 1, max: bool = False) -> tuple[list[bytes], list[float]]:
        """`pop`'s elements as columns (see `index_columns`)."""
        size = len(self._store)
        count = min(count, size)
        if count <= 0:
            return [], []
        if max:
            members, scores = self._store.take_slice(size - count, size)
            members.reverse()
            scores.reverse()
            return members, scores
        return self._store.take_slice(0, count)

    # -- sampling -------------------------------------------------------------------------

    def random_member(self, rng: random.Random) -> tuple[bytes, float]:
        """One uniformly random (member, score) of a non-empty set."""
        return self._store.at(rng.randrange(len(self._store)))

    def random_members(self, rng: random.Random, count: int,
                       with_repeats: bool) -> list[tuple[bytes, float]]:
        """ZRANDMEMBER count: `count` independent picks with repeats (a negative count), or up
        to `count` distinct members: the whole set in order when count reaches its size, a
        listpack set's picks in set order, a skiplist set's in random order (as Redis)."""
        size = len(self._store)
        if count <= 0 or size == 0:
            return []
        if with_repeats:
            if count * 8 < size:  # a few picks of a big set: no list of it all
                at = self._store.at
                return [at(rng.randrange(size)) for _ in range(count)]
            # Many picks: they share the set's (member, score) pairs, so a huge count costs a
            # list slot per pick, not a new pair (and a listpack's member copy) per pick.
            return rng.choices(list(self.items()), k=count)
        if count >= size:
            return list(self.items())
        picks = rng.sample(range(size), count)
        if isinstance(self._store, _Packed):
            picks.sort()
        at = self._store.at
        return [at(k) for k in picks]

    # -- size and serialization -----------------------------------------------------------

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE's estimate of the value as Redis would hold it: the object header and
        the listpack's allocation; or the dict's buckets, the skiplist header and, per
        element, its dict entry, node and string (averaged over the first `samples`
        elements, all of them for 0)."""
        store = self._store
        if isinstance(store, _Packed):
            members, scores = store.slice(0, len(store))
            size = 7 + sum(map(str_size, members)) + sum(
                str_size(format_score(s)) for s in scores)
            return 16 + jemalloc_size(size)
        count = len(store)
        buckets = 1 << max(2, (count - 1).bit_length()) if count else 0
        fixed = 16 + 16 + 32 + 56 + 8 * buckets + jemalloc_size(24 + 16 * 32)
        sampled = store.slice(0, count if samples <= 0 else min(samples, count), False)[0]
        if not sampled:
            return fixed
        per = sum(24 + _SKIPLIST_NODE + sds_alloc(len(m)) for m in sampled)
        return fixed + per * count // len(sampled)

    def to_bytes(self) -> bytes:
        """A compact serialization (snapshots, DUMP): version, encoding, count, the members'
        lengths at the narrowest width that fits, the scores as little-endian doubles, the
        members end to end, in order."""
        members, scores = self._store.slice(0, len(self._store))
        lengths = list(map(len, members))
        longest = max(lengths, default=0)
        code = "B" if longest < 256 else "H" if longest < 65536 else "I"
        encoding = 0 if isinstance(self._store, _Packed) else 1
        head = struct.pack("<BBQB", _FORMAT_VERSION, encoding, len(members), ord(code))
        packed_scores = array("d", scores)
        packed_lengths = array(code, lengths)
        if _BIG_ENDIAN:
            packed_scores.byteswap()
            packed_lengths.byteswap()
        return b"".join((head, packed_lengths.tobytes(), packed_scores.tobytes(),
                         b"".join(members)))

    @classmethod
    def from_bytes(cls, data: bytes, limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
        """The set `to_bytes` wrote, in the encoding Redis's RDB loading picks: a listpack set
        stays one unless it has more entries than the limit; a skiplist set becomes a listpack
        when small enough. ValueError for malformed data."""
        if len(data) < 11:
            raise ValueError("sorted set data too short")
        version, encoding, count, code_byte = struct.unpack_from("<BBQB", data)
        code = chr(code_byte)
        if version != _FORMAT_VERSION or encoding > 1 or code not in "BHI":
            raise ValueError("unknown sorted set data format")
        lengths = array(code)
        pos = 11
        lengths.frombytes(data[pos:pos + count * lengths.itemsize])
        pos += count * lengths.itemsize
        scores = array("d")
        scores.frombytes(data[pos:pos + 8 * count])
        pos += 8 * count
        if _BIG_ENDIAN:
            lengths.byteswap()
            scores.byteswap()
        if len(lengths) != count or len(scores) != count or len(data) - pos != sum(lengths):
            raise ValueError("sorted set data truncated")
        members = []
        for size in lengths:
            members.append(data[pos:pos + size])
            pos += size
        score_list = scores.tolist()
        _check_order(members, score_list)
        if encoding == 0:
            if count > limits.max_listpack_entries:
                return cls(store=_Chunked.from_sorted(members, score_list))
            return cls(store=_Packed(members, score_list))
        return cls._build(members, score_list, limits)

    def __eq__(self, other: object) -> bool:
        """The same members with equal scores (either encoding)."""
        if not isinstance(other, ZSet):
            return NotImplemented
        return len(self) == len(other) and list(self.items()) == list(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ZSet({self.encoding}, {len(self)} members)"

    @classmethod
    def from_chunks(cls, count: int, chunks: Iterable[tuple[list[bytes], list[float]]],
                    limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
        """A set of `count` elements from its elements in order, a chunk (members, scores) at
        a time (a snapshot's chunked value), in the encoding `from_bytes` would pick; a big
        one is built chunk by chunk, never as one list of pairs. ValueError for elements out
        of order or a NaN score."""
        if count <= limits.max_listpack_entries:
            members: list[bytes] = []
            scores: list[float] = []
            for chunk_members, chunk_scores in chunks:
                members += chunk_members
                scores += chunk_scores
            _check_order(members, scores)
            return cls._build(members, scores, limits)
        store = _Chunked()
        last: tuple[float, bytes] | None = None
        for chunk_members, chunk_scores in chunks:
            if not chunk_members:
                continue
            _check_order(chunk_members, chunk_scores)
            if last is not None and (chunk_scores[0], chunk_members[0]) <= last:
                raise ValueError("sorted set data out of order")
            last = (chunk_scores[-1], chunk_members[-1])
            store.append_run(chunk_members, chunk_scores)
        store.index_members()
        return cls(store=store)

    def columns(self, first: int, stop: int) -> tuple[list[bytes], list[float]]:
        """The members and the scores at ascending positions [first, stop) (clamped), as two
        lists (a snapshot writes a big set a chunk of them at a time)."""
        size = len(self._store)
        first, stop = max(first, 0), min(stop, size)
        if first >= stop:
            return [], []
        return self._store.slice(first, stop)


_BIG_ENDIAN = struct.pack("=H", 1) == b"\x00\x01"
_SCORE_THEN_MEMBER = operator.itemgetter(1, 0)


def _reversed(columns: tuple[list[bytes], list[float]]) -> tuple[list[bytes], list[float]]:
    columns[0].reverse()
    columns[1].reverse()
    return columns


def _paired(columns: tuple[list[bytes], list[float]]) -> list[tuple[bytes, float]]:
    # (columns of one length by construction; zip's keyword parsing costs more than the pairs)
    return list(zip(columns[0], columns[1]))  # noqa: B905


def _unpack_score(raw: bytes) -> float:
    """A score as the member index stores it (8 bytes, the sign of -0.0 kept)."""
    value: float = _SCORE.unpack(raw)[0]
    return value


def _fits_listpack(members: list[bytes], limits: ZSetLimits) -> bool:
    """zsetConvertToListpackIfNeeded's test."""
    if len(members) > limits.max_listpack_entries:
        return False
    total = sum(map(len, members))
    return (max(map(len, members), default=0) <= limits.max_listpack_value
            and total <= _LISTPACK_SAFETY)


def _check_order(members: list[bytes], scores: list[float]) -> None:
    """ValueError unless the elements are strictly ascending by (score, member), NaN-free."""
    if any(map(math.isnan, scores)):
        raise ValueError("sorted set data holds a NaN score")
    if not all(map(operator.le, scores, islice(scores, 1, None))):
        raise ValueError("sorted set data out of order")
    for k in range(len(scores) - 1):
        if scores[k] == scores[k + 1] and not members[k] < members[k + 1]:
            raise ValueError("sorted set data out of order")


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

VALUE_CLASS: Final = ZSet
STORED_AS: Final[tuple[type, ...]] = ()
LIMITS: Final = ZSetLimits
min_subexpiry: Final = None  # (a sorted set's members have no TTLs)
NODES: Final = None  # (no nodes that go cold)
table_of: Final = None  # (no bucket table whose runs go cold)


def encoding(value: ZSet) -> str:
    return value.encoding


def memory_usage(value: ZSet) -> int:
    return value.memory_usage()


def to_bytes(value: ZSet) -> bytes:
    return value.to_bytes()


def from_bytes(data: bytes) -> ZSet:
    return ZSet.from_bytes(data)


def copy_value(value: ZSet) -> ZSet:
    return value.copy()


def digest(value: ZSet) -> list[object]:
    """The members and their scores, in order."""
    return [part for item in value.items() for part in item]


def opened(value: ZSet) -> ZSet:
    return value


__all__ = ["table_of", "ADD_ADDED", "ADD_NAN", "ADD_NOP", "ADD_SAME", "ADD_UPDATED", "DEFAULT_LIMITS",
           "LIMITS", "LISTPACK", "NODES", "SKIPLIST", "STORED_AS", "VALUE_CLASS", "copy_value", "digest",
           "encoding", "from_bytes", "memory_usage", "min_subexpiry", "normalize_rank_range",
           "opened", "to_bytes", "ZSet", "ZSetLimits"]
