"""Linear hashing over packed buckets: the table behind a big set, a big hash and a big sorted
set's member index.

Owns `BucketTable`, and the packs its records live in as far as building them goes
(`build_pack`; the reads and the row writes are engine.model.packed_columns'
kernels). A record is `ncols` strings keyed by its first: a set's member (one column), a
hash's field and value, a sorted set's member and its packed score (two). Bucket i of
`buckets` holds the records whose key's hash h has `h & (size - 1) == i`, or, for i < split
(buckets already split this round), `h & (2 * size - 1) == i`. The hash is SipHash-1-3 keyed
by the table's own 16-byte `seed` (engine.model.packed_columns' `bucket_of`): the process's
when the table is made (`process_seed`, drawn from the system's randomness at start, as
Redis's dict seed is; a compaction child takes its parent's, `use_process_seed`, so that a
table it builds by replaying the parent's writes is placed as the parent's is), then kept by
its copies and its snapshot: so where a key goes is the same in every process that holds the
table (a restart adopts the snapshot's
buckets as they are, `adopt`, with no record placed again), and no client can choose keys
that crowd one bucket without knowing the seed. Growing splits bucket `split`
into itself and bucket `split + size` (appended): one bucket's records per insertion, no
stop-the-world rehash, and records only ever move to a higher bucket, so a scan by increasing
bucket index misses nothing present throughout. `nbytes` is the sum of the buckets' lengths.

A bucket is one bytes object (a pack: a width byte w, 1 or 4 when the count or a length
reaches 255, the count in w bytes, the columns' lengths, then the columns' strings), so a
record costs its strings and a few bytes: no object a record.

A big table's buckets may be *cold* (a `backlog-memory` budget, engine.model.residency): a run
of buckets the current snapshot holds exactly is dropped from memory, each of its slots in
`buckets` the one-byte `COLD` (no pack is shorter than two bytes), and its `home` (a
residency.TableHome) reads them back: a lookup that meets a cold bucket reads only that
bucket's pack (`peek`), a change makes the bucket's whole run resident again first (`thaw`).
Every method here reads through a cold bucket; `count` counts its records, `nbytes` only what
is resident.

Must not touch: what the records mean (a hash's field TTLs are engine.model.hashes'), values,
commands, replies.
"""

from __future__ import annotations

import os
import random
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.model.packed_columns import (
    SEED_BYTES,
    bucket_of,
    pack_add,
    pack_count,
    pack_delete,
    pack_get,
    pack_index,
    pack_placed,
    pack_put,
    pack_split,
    pack_strings,
)

if TYPE_CHECKING:
    from streamkeep.engine.model.residency import TableHome

LOAD: Final = 6  # a table's average records per bucket before it splits one
SAMPLE_CAP: Final = 2 * LOAD  # random picks: a table's first slots per bucket
EMPTY: Final = b"\x01\x00"  # the empty pack
COLD: Final = b"\x00"  # a cold bucket's slot (see the module docstring): never a pack
PLACEMENT_BYTES: Final = 24  # a table's placement as bytes: its seed, size and split
_LONG: Final = 255  # a count or length from which a pack's lengths take 4 bytes
_LEN: Final = tuple(bytes((i,)) for i in range(_LONG))
_BIG_ENDIAN: Final = sys.byteorder == "big"

# Kernels the per-command paths call, bound once: an imported name is looked up in this
# module's globals at each call, a Final one is read from a static (mypyc).
_BUCKET_OF: Final = bucket_of
_PACK_ADD: Final = pack_add
_PACK_DELETE: Final = pack_delete
_PACK_GET: Final = pack_get
_PACK_INDEX: Final = pack_index
_PACK_PUT: Final = pack_put


_PROCESS_SEED: Final = [os.urandom(SEED_BYTES)]


def process_seed() -> bytes:
    """The seed a table made in this process places its keys under (see the module
    docstring)."""
    return _PROCESS_SEED[0]


def use_process_seed(seed: bytes) -> None:
    """Make the tables this process makes from now on place their keys under `seed` (a
    compaction child's: its parent's `process_seed`)."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"a table's seed is {SEED_BYTES} bytes")
    _PROCESS_SEED[0] = seed


def _wide(lens: list[int]) -> bytes:
    out = array("I", lens)
    if _BIG_ENDIAN:
        out.byteswap()
    return out.tobytes()


def build_pack(columns: Sequence[Sequence[bytes]]) -> bytes:
    """The pack of equally long columns, in its one form: one-byte lengths when the count and
    every length are under 255, else four."""
    n = len(columns[0])
    lens = [len(s) for column in columns for s in column]
    if n < _LONG and max(lens, default=0) < _LONG:
        return b"".join((b"\x01", _LEN[n], bytes(lens), *(s for c in columns for s in c)))
    return b"".join((b"\x04", n.to_bytes(4, "little"), _wide(lens),
                     *(s for c in columns for s in c)))


class BucketTable:
    """The table (see the module docstring) of `ncols`-string records."""

    __slots__ = ("ncols", "seed", "buckets", "size", "split", "count", "nbytes", "cap", "home")

    def __init__(self, ncols: int, capacity: int, seed: bytes | None = None) -> None:
        size = 1
        while size * LOAD < capacity:
            size <<= 1
        self.ncols = ncols
        self.seed = _PROCESS_SEED[0] if seed is None else seed
        self.buckets: list[bytes] = [EMPTY] * size
        self.size = size
        self.split = 0
        self.count = 0
        self.cap = SAMPLE_CAP  # random picks: slots per bucket, at least the largest seen
        self.nbytes = len(EMPTY) * size
        self.home: TableHome | None = None  # its place in the current snapshot, if any

    def slot(self, key: bytes) -> int:
        return _BUCKET_OF(key, self.seed, self.size, self.split)

    def __contains__(self, key: bytes) -> bool:
        i = self.slot(key)
        b = self.buckets[i]
        if b is COLD:
            b = self.peek(i)
        return _PACK_INDEX(b, self.ncols, key) >= 0

    def get(self, key: bytes) -> bytes | None:
        """The last string of key's record (a hash's value), None when absent."""
        i = self.slot(key)
        b = self.buckets[i]
        if b is COLD:
            b = self.peek(i)
        return _PACK_GET(b, self.ncols, key, self.ncols - 1)

    def peek(self, i: int) -> bytes:
        """Bucket i's pack, read from the snapshot when it is cold (it stays cold)."""
        b = self.buckets[i]
        if b is not COLD:
            return b
        home = self.home
        assert home is not None  # (a table with cold buckets has a home)
        return home.peek(self, i)

    def warm(self, i: int) -> bytes:
        """Bucket i's pack, its run made resident first when it is cold (a change follows)."""
        b = self.buckets[i]
        if b is not COLD:
            return b
        home = self.home
        assert home is not None
        return home.thaw(self, i)

    def resident_buckets(self) -> list[bytes]:
        """Every bucket's pack, cold ones read (they stay cold): what a copy or a one-row
        record holds."""
        buckets = self.buckets
        if self.home is None or self.home.cold_runs == 0:
            return buckets.copy()
        return [b if b is not COLD else self.peek(i) for i, b in enumerate(buckets)]

    def put(self, key: bytes, value: bytes) -> bytes | None:
        """Set a two-column record: the value it replaced, None when the key is new (one
        lookup)."""
        i = self.slot(key)
        b = self.buckets[i]
        if b is COLD:
            b = self.warm(i)
        new_b, old = _PACK_PUT(b, 2, key, value)
        self._rewrote(i, b, new_b)
        if old is None:
            self._grew()
        return old

    def add(self, key: bytes) -> bool:
        """Add a one-column record: whether it is new."""
        i = self.slot(key)
        b = self.buckets[i]
        if b is COLD:
            b = self.warm(i)
        new_b = _PACK_ADD(b, 1, key)
        if new_b is None:
            return False
        self._rewrote(i, b, new_b)
        self._grew()
        return True

    def pop(self, key: bytes) -> bytes | None:
        """Delete key's record: its last string (a hash's value, a set's member), None when
        absent."""
        i = self.slot(key)
        b = self.buckets[i]
        if b is COLD:
            b = self.peek(i)  # (read first: a miss leaves the run cold)
            if _PACK_INDEX(b, self.ncols, key) < 0:
                return None
            b = self.warm(i)
        removed = _PACK_DELETE(b, self.ncols, key)
        if removed is None:
            return None
        self._rewrote(i, b, removed[0])
        self.count -= 1
        return removed[1]

    def _rewrote(self, i: int, old: bytes, new: bytes) -> None:
        self.buckets[i] = new
        self.nbytes += len(new) - len(old)

    def _grew(self) -> None:
        self.count += 1
        if self.count > LOAD * len(self.buckets):
            self._split_one()

    def _split_one(self) -> None:
        s, size = self.split, self.size
        b = self.buckets[s]
        if b is COLD:
            b = self.warm(s)
        kept, moved = pack_split(b, self.ncols, self.seed, (size << 1) - 1, s)
        self.buckets[s] = kept
        self.buckets.append(moved)
        self.nbytes += len(kept) + len(moved) - len(b)
        s += 1
        if s == size:
            self.size = size << 1
            s = 0
        self.split = s

    def keys(self) -> Iterator[bytes]:
        """Every record's key, bucket by bucket (a generator: a caller that stops early reads
        only the buckets it reached)."""
        ncols = self.ncols
        for strings in self.bucket_strings():
            yield from strings[:len(strings) // ncols] if ncols > 1 else strings

    def bucket_strings(self) -> Iterator[list[bytes]]:
        """Each non-empty bucket's strings, column after column (pack_strings's order); a cold
        bucket's read (it stays cold)."""
        for i, b in enumerate(self.buckets):
            if b is COLD:
                b = self.peek(i)
            if len(b) > 2:
                yield pack_strings(b, self.ncols)

    def load(self, rows: Iterable[Any]) -> None:
        """Fill an empty table sized for the rows (no key twice): members for one column,
        (key, value) pairs for two."""
        ncols = self.ncols
        parts: list[list[list[bytes]]] = [[[] for _ in range(ncols)] for _ in self.buckets]
        seed, size = self.seed, self.size
        n = 0
        for row in rows:
            if ncols == 1:
                parts[_BUCKET_OF(row, seed, size, 0)][0].append(row)
            else:
                part = parts[_BUCKET_OF(row[0], seed, size, 0)]
                part[0].append(row[0])
                part[1].append(row[1])
            n += 1
        self.buckets = [build_pack(p) for p in parts]
        self.count = n
        self.nbytes = sum(len(b) for b in self.buckets)
        while self.count > LOAD * len(self.buckets):
            self._split_one()

    def placement(self) -> bytes:
        """Where the table puts a key, as `PLACEMENT_BYTES` bytes: its seed, then its size and
        split (4 bytes each, little-endian): with the buckets, what `adopt_placed` takes."""
        return self.seed + self.size.to_bytes(4, "little") + self.split.to_bytes(4, "little")

    def adopt_placed(self, placement: bytes, buckets: list[bytes]) -> None:
        """`adopt` of buckets stored with their table's `placement()` bytes."""
        if len(placement) != PLACEMENT_BYTES:
            raise ValueError("a table's placement is 24 bytes")
        self.adopt(placement[:SEED_BYTES], int.from_bytes(placement[16:20], "little"),
                   int.from_bytes(placement[20:24], "little"), buckets)

    def adopt(self, seed: bytes, size: int, split: int, buckets: list[bytes]) -> None:
        """Make this empty table hold `buckets` (a snapshot's: packs of `ncols`-string records
        placed under `seed` in a table of `size` buckets, `split` of them split), each checked
        where it is (ValueError: a bucket malformed, a key in the wrong bucket or twice, or a
        geometry no table has). No record is placed again: the packs are kept as they are."""
        if size < 1 or size & (size - 1) or not 0 <= split < size or \
                len(buckets) != size + split:
            raise ValueError(f"no bucket table has {len(buckets)} buckets of size {size} "
                             f"split {split}")
        count = 0
        widest = SAMPLE_CAP
        ncols = self.ncols
        for i, b in enumerate(buckets):
            n = pack_placed(b, ncols, seed, size, split, i)
            count += n
            widest = max(widest, n)
        self.seed, self.size, self.split, self.buckets = seed, size, split, buckets
        self.count = count
        self.cap = widest
        self.nbytes = sum(map(len, buckets))
        while self.count > LOAD * len(self.buckets):
            self._split_one()

    def cold(self, seed: bytes, size: int, split: int, count: int) -> None:
        """Make this empty table one of `count` records placed under `seed` in `size` buckets,
        `split` of them split, every bucket cold (a lazy load's: the caller binds it to the
        snapshot's runs, engine.model.residency.Residency.bind_table). ValueError: a geometry
        no table has."""
        if size < 1 or size & (size - 1) or not 0 <= split < size or count < 0:
            raise ValueError(f"no bucket table has size {size} split {split}")
        n = size + split
        self.seed, self.size, self.split = seed, size, split
        self.buckets = [COLD] * n
        self.count = count
        self.nbytes = n

    def random_slot(self, rng: random.Random) -> tuple[bytes, int]:
        """A uniformly random record as (its bucket, its row there): a random (bucket, slot)
        until the slot holds one."""
        buckets = self.buckets
        nb = len(buckets)
        while True:
            i = rng.randrange(nb)
            b = buckets[i]
            if b is COLD:
                b = self.peek(i)
            k = pack_count(b, self.ncols)
            if k > self.cap:  # a crowded bucket: widen the slots for good and draw again
                self.cap = k
                continue
            r = rng.randrange(self.cap)
            if r < k:
                return b, r

    def copy_into(self, twin: BucketTable) -> None:
        """Make `twin` (a new table of as many columns) hold these records: the buckets are
        immutable bytes, shared until either side rewrites one; cold ones are read, the twin
        holds every bucket)."""
        twin.buckets = self.resident_buckets()
        twin.seed = self.seed
        twin.size, twin.split, twin.count = self.size, self.split, self.count
        twin.nbytes = sum(map(len, twin.buckets)) if self.home is not None else self.nbytes
        twin.cap = self.cap

    def copy(self) -> BucketTable:
        twin = BucketTable(self.ncols, 0)
        self.copy_into(twin)
        return twin


__all__ = ["COLD", "EMPTY", "LOAD", "PLACEMENT_BYTES", "SAMPLE_CAP", "BucketTable", "build_pack",
           "process_seed", "use_process_seed"]
