"""Consumer groups, consumers and the pending entries list (PEL).

Owns the group state: last delivered ID, entries-read counter, the PEL (a packed table sorted by
ID, `pel_store.PendingTable`: delivery time, count and owner slot beside each ID; read as `Nack`
snapshots), each consumer's own packed set of its pending IDs, the delivery-time buckets of
claims, and consumers' seen/active times. Also the entries-read / lag arithmetic Redis uses. Must not touch: argument
parsing, replies, effects, stream entries (it only reads stream metadata for lag).
"""

from __future__ import annotations

import heapq
import itertools
from array import array
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Final

from streamkeep.engine.model.ids import MAX_ID, split_ids
from streamkeep.engine.model.pel_store import (
    NO_OWNER,
    PackedIDs,
    PendingTable,
    bucket_drop_leading,
    bucket_extend,
    bucket_ids,
    bucket_last,
    bucket_new,
    bucket_push,
    bucket_size,
)

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Stream

INVALID_ENTRIES_READ: Final = -1
_LOW: Final = (1 << 64) - 1
# Bound Final: the compiled build calls them without a lookup in the module's globals.
_split_ids: Final = split_ids
_heappush: Final = heapq.heappush


class Nack:
    """A pending entry as read: who has it, when it was last delivered, how many times.

    A snapshot of the group's packed PEL row (`Pel.get`), not the storage: changes go through
    the group (`add_pending`, `set_delivery`, `ack`, `release`). `consumer` is None for an entry
    XNACK released (Redis 8.8): it stays pending, owned by no consumer, with delivery time 0, so
    every claim takes it first whatever its min-idle-time."""

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
    """A consumer: its seen/active times, its slot in the group's owner column, and its own
    pending IDs (packed, as the group's PEL is)."""

    __slots__ = ("name", "seen_time", "active_time", "pel", "slot")

    def __init__(self, name: bytes, now: int, slot: int = NO_OWNER) -> None:
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel = PackedIDs()
        self.slot = slot


class Pel(PendingTable):
    """The group's PEL: the packed table, read as NACKs (the owner slot resolved to the
    Consumer through the group's `owners`)."""

    __slots__ = ("owners",)

    def __init__(self, owners: list[Consumer | None]) -> None:
        super().__init__()
        self.owners = owners

    def get(self, sid: int) -> Nack | None:
        row = self.entry(sid)
        if row is None:
            return None
        time_ms, count, owner = row
        return Nack(None if owner == NO_OWNER else self.owners[owner], time_ms, count)

    def __getitem__(self, sid: int) -> Nack:
        nack = self.get(sid)
        if nack is None:
            raise KeyError(sid)
        return nack

    def items(self) -> Iterator[tuple[int, Nack]]:
        for sid in self:
            yield sid, self[sid]


def _bucket_of(ids: list[int]) -> array:
    return bucket_new([sid >> 64 for sid in ids], [sid & _LOW for sid in ids])


class DeliveryOrder:
    """Pending entries by last delivery time, oldest first (XREADGROUP CLAIM needs them so).

    One bucket per delivery time (the IDs delivered then, ascending, packed in an array: 8
    bytes an ID, see `pel_store.bucket_new`) and a heap of the bucket times. Deletion is lazy: when a
    NACK is acked or redelivered its ID stays in the old bucket, is recognised as stale (not
    pending, or at another time) and dropped when it leads its bucket in a walk, or when the
    buckets hold more than twice the PEL. Deliveries come in ID order, so a bucket stays sorted
    by appending; one that gets an ID out of order (a claim at the same millisecond) is sorted
    by the next walk. This keeps deliveries and acks, the hot path, at one append (one heap
    push per new time) and nothing, and a walk that stops at the first live entry at the stale
    ones before it."""

    __slots__ = ("times", "buckets", "unsorted", "size")

    def __init__(self) -> None:
        self.times: list[int] = []  # a heap of the times that have a bucket
        self.buckets: dict[int, array] = {}  # time -> IDs delivered then, stale ones too
        self.unsorted: set[int] = set()  # times whose bucket got an ID out of order
        self.size = 0  # IDs in the buckets

    def clear(self) -> None:
        """Drop every bucket: the PEL is empty, so every ID they hold is stale (a consumer that
        keeps up acknowledges all it read; its stale IDs would otherwise pile up to the rebuild
        threshold and be walked again and again)."""
        self.times.clear()
        self.buckets.clear()
        self.unsorted.clear()
        self.size = 0

    def push(self, time_ms: int, sid: int, pel: PendingTable) -> None:
        bucket = self.buckets.get(time_ms)
        if bucket is None:
            self.buckets[time_ms] = bucket_new([sid >> 64], [sid & _LOW])
            heapq.heappush(self.times, time_ms)
        else:
            if bucket_last(bucket) >= sid:
                self.unsorted.add(time_ms)
            self.buckets[time_ms] = bucket_push(bucket, sid)
        self.size += 1
        if self.size > 2 * len(pel) + 64:
            self._rebuild(pel)

    def extend(self, time_ms: int, sids: list[int], ms: list[int], seq: list[int],
               pel: PendingTable) -> None:
        """`push` of ascending `sids` (split as ms and seq) all delivered at `time_ms`."""
        bucket = self.buckets.get(time_ms)
        if bucket is None:  # allocated at its size (a bucket mostly gets one batch)
            self.buckets[time_ms] = bucket_new(ms, seq)
            _heappush(self.times, time_ms)
        else:
            if bucket_last(bucket) >= sids[0]:
                self.unsorted.add(time_ms)
            self.buckets[time_ms] = bucket_extend(bucket, ms, seq)
        self.size += len(sids)
        if self.size > 2 * len(pel) + 64:
            self._rebuild(pel)

    def _rebuild(self, pel: PendingTable) -> None:
        by_time: dict[int, list[int]] = {}
        for sid, time_ms in pel.times():  # ascending IDs: every bucket comes out sorted
            ids = by_time.get(time_ms)
            if ids is None:
                by_time[time_ms] = [sid]
            else:
                ids.append(sid)
        buckets = {t: _bucket_of(ids) for t, ids in by_time.items()}
        self.buckets = buckets
        self.times = list(buckets)
        heapq.heapify(self.times)
        self.unsorted = set()
        self.size = len(pel)

    def iter_oldest(self, pel: PendingTable):  # type: ignore[no-untyped-def]
        """Yield live (time, id) oldest first, by ID within a time, without losing anything:
        every time popped is pushed back when the caller stops iterating. Nothing may be
        pushed while the iteration is open. Stale IDs cost a walk once: those leading a
        bucket are dropped at once, a bucket a walk found an eighth stale is compacted
        when the walk ends, and acks (which leave stale IDs without pushing) are bounded by
        the same rebuild rule as pushes."""
        if self.size > 2 * len(pel) + 64:
            self._rebuild(pel)
        times, buckets = self.times, self.buckets
        delivered = pel.delivery_time
        popped: list[int] = []
        stale_heavy: list[int] | None = None
        try:
            while times:
                t = heapq.heappop(times)
                bucket = buckets[t]
                if t in self.unsorted:
                    self.unsorted.discard(t)
                    ordered = sorted(set(bucket_ids(bucket)))
                    self.size -= bucket_size(bucket) - len(ordered)
                    bucket = buckets[t] = _bucket_of(ordered)
                live: Generator[tuple[int, int], None, None] = pel.bucket_live(bucket, t)
                lead = next(live, None)
                if lead is None:  # all stale: dropped for good
                    self.size -= bucket_size(bucket)
                    del buckets[t]
                    continue
                if lead[0]:  # the run of stale IDs leading the bucket: dropped for good
                    live.close()  # (it reads the array this changes)
                    bucket_drop_leading(bucket, lead[0])
                    self.size -= lead[0]
                    live = pel.bucket_live(bucket, t)
                    lead = next(live)
                popped.append(t)
                size, heavy, yielded = bucket_size(bucket), 32 + (bucket_size(bucket) >> 3), 0
                for k, sid in itertools.chain((lead,), live):
                    if k - yielded >= heavy and (stale_heavy is None or stale_heavy[-1] != t):
                        stale_heavy = [*(stale_heavy or ()), t]
                    yielded += 1
                    yield t, sid
                if size - yielded >= heavy and (stale_heavy is None or stale_heavy[-1] != t):
                    stale_heavy = [*(stale_heavy or ()), t]
        finally:
            for t in stale_heavy or ():
                bucket = buckets[t]
                kept = [sid for sid in bucket_ids(bucket) if delivered(sid) == t]
                self.size -= bucket_size(bucket) - len(kept)
                buckets[t] = _bucket_of(kept)  # never empty: a walk visits from a live ID on
            for t in popped:
                heapq.heappush(times, t)


class ConsumerGroup:
    __slots__ = ("name", "last_id", "entries_read", "pel", "pel_index", "pel_by_time",
                 "consumers", "owners", "free_slots")

    def __init__(self, name: bytes, last_id: int, entries_read: int) -> None:
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.owners: list[Consumer | None] = []  # by slot: the owner column's consumers
        self.free_slots: list[int] = []  # slots of deleted consumers, reused first
        self.pel = Pel(self.owners)
        self.pel_index = self.pel  # the same table: its IDs are sorted (ranges, XAUTOCLAIM)
        self.pel_by_time = DeliveryOrder()
        self.consumers: dict[bytes, Consumer] = {}

    # --- consumers ---------------------------------------------------------------------------

    def create_consumer(self, name: bytes, now: int) -> Consumer:
        if self.free_slots:
            slot = self.free_slots.pop()
        else:
            slot = len(self.owners)
            self.owners.append(None)
        consumer = self.owners[slot] = Consumer(name, now, slot)
        self.consumers[name] = consumer
        return consumer

    def delete_consumer(self, consumer: Consumer) -> int:
        """Remove a consumer and its pending entries; returns how many were pending."""
        pending = len(consumer.pel)
        for sid in consumer.pel:
            self.pel.pop(sid)
        del self.consumers[consumer.name]
        self.owners[consumer.slot] = None
        self.free_slots.append(consumer.slot)
        return pending

    # --- PEL ---------------------------------------------------------------------------------

    def add_pending(self, sid: int, consumer: Consumer, now: int, count: int) -> None:
        """Create or reassign the NACK for `sid` (a rewound group re-delivering, or a claim)."""
        before = self.pel.put(sid, now, count, consumer.slot)
        if before is None:
            self.pel_by_time.push(now, sid, self.pel)
            consumer.pel.add(sid)
            return
        time_ms, owner = before
        if owner != consumer.slot:
            if owner != NO_OWNER:
                self.owners[owner].pel.discard(sid)  # type: ignore[union-attr]
            consumer.pel.add(sid)
        if time_ms != now:
            self.pel_by_time.push(now, sid, self.pel)

    def add_new_pending(self, sids: list[int], consumer: Consumer, now: int) -> None:
        """First deliveries of `sids` (ascending) to `consumer` at `now`, count 1: one batch
        append when they are above every pending ID, else one `add_pending` each."""
        if not sids:
            return
        pel, mine = self.pel, consumer.pel
        top, my_top = pel.last(), mine.last()
        if (top is not None and sids[0] <= top) or (my_top is not None and sids[0] <= my_top):
            for sid in sids:
                self.add_pending(sid, consumer, now, 1)
            return
        ms, seq = _split_ids(sids)
        pel.extend_above(ms, seq, now, 1, consumer.slot)
        mine.extend_above(ms, seq)
        self.pel_by_time.extend(now, sids, ms, seq, pel)

    def claim_many(self, sids: list[int], counts: list[int], consumer: Consumer,
                   time_ms: int) -> None:
        """`add_pending(sid, consumer, time_ms, count)` of each of `sids` (ascending, all pending)
        with its count from `counts`, in bulk: the rows rewritten in place in one kernel call,
        the IDs moved out of their former owners' sets and into `consumer`'s a batch each, and
        those delivered at another time pushed to the `time_ms` bucket in one go."""
        if not sids:
            return
        slot = consumer.slot
        ms, seq, old_owners, old_times = self.pel.claim(sids, time_ms, counts, slot)
        first = old_owners[0]
        if first != slot and old_owners.count(first) == len(old_owners):
            moved, moved_ms, moved_seq = sids, ms, seq  # the common case: all from one owner
            if first != NO_OWNER:
                self.owners[first].pel.remove_sorted(ms, seq)  # type: ignore[union-attr]
        else:
            moved, moved_ms, moved_seq = [], [], []
            for sid, m, s, owner in zip(sids, ms, seq, old_owners, strict=True):
                if owner != slot:
                    moved.append(sid)
                    moved_ms.append(m)
                    moved_seq.append(s)
            self._remove_from_owners(ms, seq, [o if o != slot else None for o in old_owners])
        consumer.pel.add_sorted(moved, moved_ms, moved_seq)
        if time_ms not in old_times:
            self.pel_by_time.extend(time_ms, sids, ms, seq, self.pel)
            return
        keep = [k for k, t in enumerate(old_times) if t != time_ms]
        if keep:
            self.pel_by_time.extend(time_ms, [sids[k] for k in keep], [ms[k] for k in keep],
                                    [seq[k] for k in keep], self.pel)

    def set_delivery(self, sid: int, nack: Nack, time_ms: int, count: int) -> None:
        """Every change of a NACK's delivery time goes through here (keeps pel_by_time);
        `nack` (read from `pel`) is updated too."""
        moved = nack.delivery_time != time_ms
        nack.delivery_time = time_ms
        nack.delivery_count = count
        owner = NO_OWNER if nack.consumer is None else nack.consumer.slot
        self.pel.put(sid, time_ms, count, owner)
        if moved:
            self.pel_by_time.push(time_ms, sid, self.pel)

    def ack_many(self, sids: list[int]) -> list[int]:
        """`ack` of each of `sids`, in batches (XACK of a read's IDs): the ones that were
        pending, in the order given."""
        owners = self.pel.pop_owners(sids)
        self._drop_stale_buckets()
        distinct = set(owners)
        if len(distinct) == 1 and None not in distinct:  # one consumer's batch, all pending
            owner = owners[0]
            if owner != NO_OWNER:
                self.owners[owner].pel.pop_many(sids)  # type: ignore[union-attr,index]
            return list(sids)
        acked: list[int] = []
        mine: dict[int, list[int]] = {}
        for sid, owner in zip(sids, owners, strict=True):
            if owner is not None:
                acked.append(sid)
                if owner != NO_OWNER:
                    mine.setdefault(owner, []).append(sid)
        for slot, theirs in mine.items():
            self.owners[slot].pel.pop_many(theirs)  # type: ignore[union-attr]
        return acked

    def ack_sorted(self, ms: list[int], seq: list[int]) -> list[int | None]:
        """`ack_many` of strictly ascending IDs given as ms and seq lists (an XACK of a read's
        IDs), each table walked once by the kernel: per ID its owner slot (NO_OWNER when it was
        released), None when it was not pending."""
        if len(ms) == 1:  # (a queue's ack of one message: one kernel call a table)
            m, s = ms[0], seq[0]
            owner = self.pel.pop_one(m, s, 4)
            if owner is not None:
                self._drop_stale_buckets()
                if owner != NO_OWNER:
                    self.owners[owner].pel.pop_one(m, s, 0)  # type: ignore[union-attr]
            return [owner]
        owners = self.pel.pop_owners_sorted(ms, seq)
        self._drop_stale_buckets()
        first = owners[0]
        if first is not None and owners.count(first) == len(owners):  # one consumer's batch
            if first != NO_OWNER:
                self.owners[first].pel.remove_sorted(ms, seq)  # type: ignore[union-attr]
            return owners
        self._remove_from_owners(ms, seq, owners)
        return owners

    def _remove_from_owners(self, ms: list[int], seq: list[int],
                            owners: list[int | None]) -> None:
        """Take each ID (ascending ms and seq lists) out of the pending set of its owner in
        `owners` (None or NO_OWNER: none), a batch a consumer."""
        mine: dict[int, tuple[list[int], list[int]]] = {}
        for m, q, owner in zip(ms, seq, owners, strict=True):
            if owner is not None and owner != NO_OWNER:
                pair = mine.get(owner)
                if pair is None:
                    pair = mine[owner] = ([], [])
                pair[0].append(m)
                pair[1].append(q)
        for slot, (oms, oseq) in mine.items():
            self.owners[slot].pel.remove_sorted(oms, oseq)  # type: ignore[union-attr]

    def _drop_stale_buckets(self) -> None:
        """After acks: an emptied PEL leaves only stale IDs in the delivery-time buckets."""
        if not self.pel and self.pel_by_time.size:
            self.pel_by_time.clear()

    def ack(self, sid: int) -> bool:
        owner = self.pel.pop(sid)
        if owner is None:
            return False
        self._drop_stale_buckets()
        if owner != NO_OWNER:
            self.owners[owner].pel.discard(sid)  # type: ignore[union-attr]
        return True

    def release(self, sid: int, count: int) -> None:
        """XNACK (Redis 8.8): `sid` stays pending, owned by no consumer, delivered at time 0 (so
        the oldest for every claim) with delivery count `count`; created when not pending (its
        FORCE)."""
        before = self.pel.put(sid, 0, count, NO_OWNER)
        if before is None:
            self.pel_by_time.push(0, sid, self.pel)
            return
        time_ms, owner = before
        if owner != NO_OWNER:
            self.owners[owner].pel.discard(sid)  # type: ignore[union-attr]
        if time_ms != 0:
            self.pel_by_time.push(0, sid, self.pel)


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
