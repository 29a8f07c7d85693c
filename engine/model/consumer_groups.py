"""Consumer groups, consumers and the pending entries list (PEL).

Owns the group state: last delivered ID, entries-read counter, the PEL indexed by ID (a dict plus a
sorted index for ranges) and by consumer (each consumer has its own sorted index), and consumers'
seen/active times. Also the entries-read / lag arithmetic Redis uses. Must not touch: argument
parsing, replies, effects, stream entries (it only reads stream metadata for lag).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from streamkeep.engine.model.ids import MAX_ID
from streamkeep.engine.model.sortedids import SortedIDs

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Stream

INVALID_ENTRIES_READ = -1


class Nack:
    """A pending entry: who has it, when it was last delivered, how many times.

    `consumer` is None for an entry XNACK released (Redis 8.8): it stays pending, owned by no
    consumer, with delivery time 0, so every claim takes it first whatever its min-idle-time."""

    __slots__ = ("consumer", "delivery_time", "delivery_count")

    def __init__(self, consumer: Consumer | None, delivery_time: int,
                 delivery_count: int) -> None:
        self.consumer = consumer
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count


def pending_idle(nack: Nack, now: int) -> int:
    """XPENDING's idle time of a pending entry: -1 for one XNACK released (Redis 8.8)."""
    if nack.consumer is None:
        return -1
    return max(now - nack.delivery_time, 0)


class Consumer:
    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, now: int) -> None:
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel = SortedIDs()


class DeliveryOrder:
    """Pending entries by last delivery time, oldest first (XREADGROUP CLAIM needs them so).

    One bucket per delivery time (the IDs delivered then, ascending) and a heap of the bucket
    times: a pending entry costs a list slot here, where a heap key of its own (`time << 128 |
    id`) cost a 48-byte int more (issue 18). Deletion is lazy: when a NACK is acked or
    redelivered its ID stays in the old bucket, is recognised as stale (no NACK, or another
    time) and dropped when it leads its bucket in a walk, or when the buckets hold more than
    twice the PEL. Deliveries come in ID order, so a bucket stays sorted by appending; one that
    gets an ID out of order (a claim at the same millisecond) is sorted by the next walk. This
    keeps deliveries and acks, the hot path, at one append (one heap push per new time) and
    nothing, and a walk that stops at the first live entry at the stale ones before it."""

    __slots__ = ("times", "buckets", "unsorted", "size")

    def __init__(self) -> None:
        self.times: list[int] = []  # a heap of the times that have a bucket
        self.buckets: dict[int, list[int]] = {}  # time -> IDs delivered then, stale ones too
        self.unsorted: set[int] = set()  # times whose bucket got an ID out of order
        self.size = 0  # IDs in the buckets

    def push(self, time_ms: int, sid: int, pel: dict[int, Nack]) -> None:
        bucket = self.buckets.get(time_ms)
        if bucket is None:
            self.buckets[time_ms] = [sid]
            heapq.heappush(self.times, time_ms)
        else:
            if bucket[-1] >= sid:
                self.unsorted.add(time_ms)
            bucket.append(sid)
        self.size += 1
        if self.size > 2 * len(pel) + 64:
            self._rebuild(pel)

    def _rebuild(self, pel: dict[int, Nack]) -> None:
        buckets: dict[int, list[int]] = {}
        for sid, nack in pel.items():
            bucket = buckets.get(nack.delivery_time)
            if bucket is None:
                buckets[nack.delivery_time] = [sid]
            else:
                bucket.append(sid)
        for bucket in buckets.values():
            bucket.sort()
        self.buckets = buckets
        self.times = list(buckets)
        heapq.heapify(self.times)
        self.unsorted = set()
        self.size = len(pel)

    def iter_oldest(self, pel: dict[int, Nack]):  # type: ignore[no-untyped-def]
        """Yield live (time, id) oldest first, by ID within a time, without losing anything:
        every time popped is pushed back when the caller stops iterating. Nothing may be
        pushed while the iteration is open. Stale IDs cost a walk once: those leading a
        bucket are dropped at once, a bucket a walk found an eighth stale is compacted
        when the walk ends, and acks (which leave stale IDs without pushing) are bounded by
        the same rebuild rule as pushes."""
        if self.size > 2 * len(pel) + 64:
            self._rebuild(pel)
        times, buckets = self.times, self.buckets
        popped: list[int] = []
        stale_heavy: list[int] | None = None
        try:
            while times:
                t = heapq.heappop(times)
                bucket = buckets[t]
                if t in self.unsorted:
                    self.unsorted.discard(t)
                    ordered = sorted(set(bucket))
                    self.size -= len(bucket) - len(ordered)
                    bucket = buckets[t] = ordered
                leading = 0  # the run of stale IDs leading the bucket: dropped for good
                for sid in bucket:
                    nack = pel.get(sid)
                    if nack is not None and nack.delivery_time == t:
                        break
                    leading += 1
                if leading:
                    del bucket[:leading]
                    self.size -= leading
                if not bucket:
                    del buckets[t]
                    continue
                popped.append(t)
                skipped, heavy = 0, 32 + (len(bucket) >> 3)
                for sid in bucket:
                    nack = pel.get(sid)
                    if nack is not None and nack.delivery_time == t:
                        yield t, sid
                    else:
                        skipped += 1
                        if skipped == heavy:
                            stale_heavy = [*(stale_heavy or ()), t]
        finally:
            for t in stale_heavy or ():
                bucket = buckets[t]
                live = [sid for sid in bucket
                        if (nack := pel.get(sid)) is not None and nack.delivery_time == t]
                self.size -= len(bucket) - len(live)
                buckets[t] = live  # never empty: a walk visits a bucket from a live ID on
            for t in popped:
                heapq.heappush(times, t)


class ConsumerGroup:
    __slots__ = ("name", "last_id", "entries_read", "pel", "pel_index", "pel_by_time",
                 "consumers")

    def __init__(self, name: bytes, last_id: int, entries_read: int) -> None:
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: dict[int, Nack] = {}
        self.pel_index = SortedIDs()  # IDs, for ranges (XPENDING, XAUTOCLAIM)
        self.pel_by_time = DeliveryOrder()
        self.consumers: dict[bytes, Consumer] = {}

    # --- consumers ---------------------------------------------------------------------------

    def create_consumer(self, name: bytes, now: int) -> Consumer:
        consumer = Consumer(name, now)
        self.consumers[name] = consumer
        return consumer

    def delete_consumer(self, consumer: Consumer) -> int:
        """Remove a consumer and its pending entries; returns how many were pending."""
        pending = len(consumer.pel)
        for sid in consumer.pel:
            del self.pel[sid]
            self.pel_index.discard(sid)
        del self.consumers[consumer.name]
        return pending

    # --- PEL ---------------------------------------------------------------------------------

    def add_pending(self, sid: int, consumer: Consumer, now: int, count: int) -> Nack:
        """Create or reassign the NACK for `sid` (a rewound group re-delivering, or a claim)."""
        pel = self.pel
        nack = pel.get(sid)
        if nack is None:
            nack = pel[sid] = Nack(consumer, now, count)
            self.pel_index.add(sid)
            self.pel_by_time.push(now, sid, pel)
            consumer.pel.add(sid)
            return nack
        if nack.consumer is not consumer:
            if nack.consumer is not None:
                nack.consumer.pel.discard(sid)
            consumer.pel.add(sid)
            nack.consumer = consumer
        self.set_delivery(sid, nack, now, count)
        return nack

    def set_delivery(self, sid: int, nack: Nack, time_ms: int, count: int) -> None:
        """Every change of a NACK's delivery time goes through here (keeps pel_by_time)."""
        if nack.delivery_time != time_ms:
            nack.delivery_time = time_ms
            self.pel_by_time.push(time_ms, sid, self.pel)
        nack.delivery_count = count

    def ack(self, sid: int) -> bool:
        nack = self.pel.pop(sid, None)
        if nack is None:
            return False
        self.pel_index.discard(sid)
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
        return True

    def release(self, sid: int, count: int) -> None:
        """XNACK (Redis 8.8): `sid` stays pending, owned by no consumer, delivered at time 0 (so
        the oldest for every claim) with delivery count `count`; created when not pending (its
        FORCE)."""
        nack = self.pel.get(sid)
        if nack is None:
            self.pel[sid] = nack = Nack(None, 0, count)
            self.pel_index.add(sid)
            self.pel_by_time.push(0, sid, self.pel)
            return
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
            nack.consumer = None
        self.set_delivery(sid, nack, 0, count)


# --- entries-read and lag (Redis's logical read counter) ------------------------------------------


def has_tombstones_between(s: Stream, start: int, end: int = MAX_ID) -> bool:
    """Redis 8's streamRangeHasTombstones: could an XDEL'd entry lie in [start, end]?"""
    if not s.length or not s.max_deleted_id:
        return False
    return start <= s.max_deleted_id <= end


def estimate_entries_read(s: Stream, sid: int) -> int:
    """Redis 8's streamEstimateDistanceFromFirstEverEntry: the read counter of `sid`, or -1."""
    if not s.entries_added:
        return 0
    if not s.length and sid <= s.last_id:
        return s.entries_added
    if sid and sid < s.max_deleted_id:
        return INVALID_ENTRIES_READ
    if sid == s.last_id:
        return s.entries_added
    if sid > s.last_id:
        return INVALID_ENTRIES_READ
    if not s.max_deleted_id or s.max_deleted_id < s.first_id:
        if sid < s.first_id:
            return s.entries_added - s.length
        if sid == s.first_id:
            return s.entries_added - s.length + 1
    return INVALID_ENTRIES_READ


def advance_entries_read(s: Stream, group: ConsumerGroup, sid: int) -> None:
    """Move the group's last ID to a newly delivered `sid`, keeping entries-read valid."""
    if (
        group.entries_read != INVALID_ENTRIES_READ
        and group.last_id >= s.first_id
        and not has_tombstones_between(s, group.last_id)
    ):
        group.entries_read += 1
    elif s.entries_added:
        group.entries_read = estimate_entries_read(s, sid)
    group.last_id = sid


def group_lag(s: Stream, group: ConsumerGroup) -> int | None:
    """XINFO GROUPS lag (Redis 8's streamReplyWithCGLag), None when it cannot be known."""
    if not s.entries_added or not s.length:
        return 0
    if group.last_id < s.first_id and s.max_deleted_id < s.first_id:
        return s.length
    if group.entries_read != INVALID_ENTRIES_READ and not has_tombstones_between(
        s, group.last_id
    ):
        return s.entries_added - group.entries_read
    read = estimate_entries_read(s, group.last_id)
    if read == INVALID_ENTRIES_READ:
        return None
    return s.entries_added - read
