"""Idempotent producers (Redis 8.6's IDMP): a stream's per-producer maps of recent idempotent IDs.

Owns the data structure behind `XADD ... IDMP pid iid` / `IDMPAUTO pid`, `XCFGSET` and
`XIDMPRECORD`: for each producer ID (pid), its idempotent IDs (iids) in the order they were
recorded, each with the stream entry ID it produced and the command time it was recorded at;
retention by duration (seconds, against the *command* time, so replaying the log at another
wall-clock time rebuilds the same maps) and by size per producer (the oldest iid evicted first);
the stream's two settings and its lifetime counters (iids added, duplicates refused); and the
content hash IDMPAUTO derives an iid from. Must not touch: argument parsing, replies, effects
(the stream commands own those), anything outside one stream's IDMP state.

Expiry is lazy and deterministic: `lookup` treats an expired iid as absent without removing it;
`record` (the only writer, run by XADD's effect XIDMPRECORD and by XIDMPRECORD itself) drops the
expired iids at the front of that producer's map before inserting, and a new producer's first
recording checks the next two producers of a rotation and drops those whose iids have all
expired, decided by the state and the command time alone, so the maps after a replay are the
maps before it. Counts reported by XINFO leave expired iids out.
"""

from __future__ import annotations

import hashlib
import struct
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

DEFAULT_DURATION: Final = 100  # seconds (stream-idmp-duration)
DEFAULT_MAXSIZE: Final = 100  # iids per producer (stream-idmp-maxsize)
DURATION_RANGE: Final = (1, 86400)
PRODUCER_CHECKS: Final = 2  # producers checked for expiry each time a new one starts
MAXSIZE_RANGE: Final = (1, 10000)


class Producer:
    """One producer's recent iids, oldest first, in a ring of three parallel lists (`iids`,
    `sids`: the entry ID each produced, `times`: when it was recorded, ms) starting at `head`;
    `slots` maps each iid to its place. Recording and evicting the oldest are O(1) list and
    dict steps, with no object made per iid beyond the dict's entry (a producer's every send
    pays them: a deque's method calls and a tuple per iid cost more than the XADD's own
    append). The ring doubles up to the stream's maxsize, then each new iid takes the oldest's
    place."""

    __slots__ = ("slots", "iids", "sids", "times", "head")

    def __init__(self) -> None:
        self.slots: dict[bytes, int] = {}
        self.iids: list[bytes] = []
        self.sids: list[int] = []
        self.times: list[int] = []
        self.head = 0

    def newest_at(self) -> int:
        n = len(self.slots)
        if not n:
            return -(1 << 62)
        return self.times[(self.head + n - 1) % len(self.iids)]

    def oldest_at(self) -> int:
        """The oldest iid's recording time (the producer holds one)."""
        return self.times[self.head]

    def push(self, iid: bytes, sid: int, at: int, limit: int) -> None:
        """Record `iid` as the newest (not held; the caller made room below `limit`, the most
        iids it keeps). A full ring doubles, up to `limit`: growing costs O(1) a push however
        expiry and bursts alternate."""
        size, n = len(self.iids), len(self.slots)
        if n == size:
            self._grow(max(size + 1, min(2 * size, limit)))
            size = len(self.iids)
        slot = (self.head + n) % size
        self.iids[slot] = iid
        self.sids[slot] = sid
        self.times[slot] = at
        self.slots[iid] = slot

    def pop_oldest(self) -> None:
        head = self.head
        iids = self.iids
        del self.slots[iids[head]]
        iids[head] = b""  # (the iid's bytes go now, not when its place is taken again)
        self.head = (head + 1) % len(iids)

    def ordered(self) -> list[tuple[bytes, int, int]]:
        """(iid, entry ID, recorded at ms) of each iid, oldest first."""
        iids, sids, times = self.iids, self.sids, self.times
        size, head = len(iids), self.head
        out = []
        for i in range(len(self.slots)):
            slot = (head + i) % size
            out.append((iids[slot], sids[slot], times[slot]))
        return out

    def remove(self, iid: bytes) -> None:
        """Forget `iid` wherever it is (rare: an expired iid behind a live one, the clock
        having gone back): the ring rebuilt in order without it."""
        self._rebuild([e for e in self.ordered() if e[0] != iid], len(self.iids))

    def _grow(self, size: int) -> None:
        """The ring `size` places long, its iids in order from place 0."""
        self._rebuild(self.ordered(), size)

    def _rebuild(self, entries: list[tuple[bytes, int, int]], size: int) -> None:
        free = max(size - len(entries), 0)
        self.iids = [e[0] for e in entries] + [b""] * free
        self.sids = [e[1] for e in entries] + [0] * free
        self.times = [e[2] for e in entries] + [0] * free
        self.slots = {e[0]: i for i, e in enumerate(entries)}
        self.head = 0


class Idmp:
    """One stream's IDMP state: settings, per-producer maps and lifetime counters."""

    __slots__ = ("duration", "maxsize", "producers", "rotation", "added", "duplicates")

    def __init__(self, duration: int = DEFAULT_DURATION, maxsize: int = DEFAULT_MAXSIZE) -> None:
        self.duration = duration  # seconds
        self.maxsize = maxsize
        self.producers: dict[bytes, Producer] = {}
        # Every producer once, in the order _new_producer checks them for expiry (and the order
        # a snapshot and the digest list them, so a reload checks in the same order).
        self.rotation: deque[bytes] = deque()
        self.added = 0  # iids recorded, over the stream's life (XINFO iids-added)
        self.duplicates = 0  # XADDs refused as duplicates (XINFO iids-duplicates)

    def lookup(self, pid: bytes, iid: bytes, now: int) -> int | None:
        """The entry ID `pid`/`iid` produced, if recorded and not expired at `now` (ms)."""
        producer = self.producers.get(pid)
        if producer is not None:
            slot = producer.slots.get(iid)
            if slot is not None and producer.times[slot] + self.duration * 1000 > now:
                return producer.sids[slot]
        return None

    def record(self, pid: bytes, iid: bytes, sid: int, now: int) -> None:
        """Remember that `pid`/`iid` produced entry `sid` at `now` (ms); the caller checked
        `lookup` found nothing live. Drops the producer's expired iids first, then its oldest
        ones beyond `maxsize`."""
        producer = self.producers.get(pid)
        if producer is None:
            producer = self._new_producer(pid, now)
        self._insert(producer, iid, sid, now, True)

    def lookup_or_record(self, pid: bytes, iid: bytes, sid: int, now: int) -> int | None:
        """`lookup`, then, when it finds nothing live, `record` of entry `sid`: the entry ID
        of a live duplicate (nothing recorded), else None. One pass over the producer's map
        for XADD IDMP's every send (the caller appends `sid` next)."""
        producer = self.producers.get(pid)
        if producer is None:
            self.record(pid, iid, sid, now)
            return None
        slot = producer.slots.get(iid)
        if slot is not None and producer.times[slot] + self.duration * 1000 > now:
            return producer.sids[slot]
        self._insert(producer, iid, sid, now, slot is not None)
        return None

    def _insert(self, producer: Producer, iid: bytes, sid: int, now: int,
                maybe_held: bool) -> None:
        """`record`'s steps on the producer's map (`maybe_held`: the iid may be in it still,
        expired)."""
        if producer.slots:
            horizon = now - self.duration * 1000  # recorded at or before: expired
            if producer.oldest_at() <= horizon:
                while producer.slots and producer.oldest_at() <= horizon:
                    producer.pop_oldest()
            if maybe_held and iid in producer.slots:  # expired, not at the front (clock went back)
                producer.remove(iid)
            if len(producer.slots) >= self.maxsize:
                producer.pop_oldest()
        producer.push(iid, sid, now, self.maxsize)
        self.added += 1

    def _new_producer(self, pid: bytes, now: int) -> Producer:
        """A map for a new producer, after checking the next PRODUCER_CHECKS producers of the
        rotation: one whose newest iid has expired is forgotten (a client restarted under a
        new UUID must not stay forever), a live one goes to the back. O(1) per new producer
        whatever their count, and decided by the state alone, so replay and a snapshot's
        reload forget the same producers at the same points."""
        producers, rotation = self.producers, self.rotation
        horizon = now - self.duration * 1000
        for _ in range(min(PRODUCER_CHECKS, len(rotation))):
            candidate = rotation.popleft()
            if producers[candidate].newest_at() <= horizon:
                del producers[candidate]
            else:
                rotation.append(candidate)
        producer = producers[pid] = Producer()
        rotation.append(pid)
        return producer

    def configure(self, duration: int, maxsize: int) -> None:
        """XCFGSET: new settings; the maps are cleared when either value changes (setting the
        same values again keeps them, as Redis does), the lifetime counters never."""
        if (duration, maxsize) != (self.duration, self.maxsize):
            self.producers.clear()
            self.rotation.clear()
        self.duration, self.maxsize = duration, maxsize

    def live_counts(self, now: int) -> tuple[int, int]:
        """(producers with a live iid, live iids) at `now`: XINFO's pids-tracked, iids-tracked."""
        horizon = now - self.duration * 1000
        pids = iids = 0
        for producer in self.producers.values():
            live = 0
            for _iid, _sid, at in producer.ordered():
                if at > horizon:
                    live += 1
            if live:
                pids += 1
                iids += live
        return pids, iids

    def entries(self) -> Iterator[tuple[bytes, list[tuple[bytes, int, int]]]]:
        """(pid, [(iid, entry ID, recorded at ms), ...] oldest first) for each producer: what a
        snapshot stores and the digest hashes: iids in recording order, producers in the
        rotation's."""
        for pid in self.rotation:
            yield pid, self.producers[pid].ordered()

    def restore(self, pid: bytes, recorded: Iterable[Sequence]) -> None:
        """Put back a producer's map as `entries` gave it (snapshot load), in that order (an
        iid a damaged file repeats is kept where it first appears)."""
        producer = self.producers[pid] = Producer()
        self.rotation.append(pid)
        for iid, sid, at in recorded:
            iid = bytes(iid)
            if iid not in producer.slots:
                producer.push(iid, sid, at, max(self.maxsize, len(producer.slots) + 1))


def auto_iid(fields: Sequence[bytes]) -> bytes:
    """IDMPAUTO's iid: a 128-bit hash of the entry's field/value pairs, independent of their
    order (Redis documents that the same content gives the same iid whatever the field order;
    its exact hash function is not documented, so this one is streamkeep's own: BLAKE2b-128
    over the sorted pairs, each pair its two lengths then its two strings, so no two contents
    collide by concatenation)."""
    if len(fields) == 2 and len(fields[1]) < _COPY_LIMIT:  # one short pair: one call
        field, value = fields
        return _blake2b(_LENGTHS(len(field), len(value)) + field + value,
                        digest_size=16).digest()
    # Fed piece by piece: a big value is hashed where it lies, never copied.
    h = _blake2b(digest_size=16)
    for field, value in sorted(zip(fields[0::2], fields[1::2], strict=True)):
        h.update(_LENGTHS(len(field), len(value)))
        h.update(field)
        h.update(value)
    return h.digest()


_COPY_LIMIT: Final = 4096
_LENGTHS: Final = struct.Struct("<QQ").pack
_blake2b: Final = hashlib.blake2b
