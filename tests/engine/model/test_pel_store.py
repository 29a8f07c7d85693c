"""engine.model.pel_store: the packed PEL containers against plain Python models.

Random adds, updates, removals and range reads on `PackedIDs` and `PendingTable` (with tiny
chunks, so that splits, appends into full chunks, emptied chunks and cross-chunk ranges all
happen) must read back what a dict and a sorted list say. A group's PEL, once packed, leaves the
garbage collector next to nothing to track: counted in objects, not timed."""

from __future__ import annotations

import gc
import random
from bisect import bisect_right

import pytest

from streamkeep.engine.model import pel_store
from streamkeep.engine.model.consumer_groups import ConsumerGroup
from streamkeep.engine.model.pel_store import NO_OWNER, PackedIDs, PendingTable


def _sid(rng: random.Random) -> int:
    # A few milliseconds, many sequence numbers, and now and then a huge one.
    seq = rng.randrange(0, 40) if rng.random() < 0.9 else rng.randrange(1 << 63, 1 << 64)
    return rng.randrange(1, 6) << 64 | seq


@pytest.mark.parametrize("seed", range(12))
def test_packed_ids_read_back_as_a_sorted_set(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pel_store, "_LOAD", 3)
    rng = random.Random(seed)
    ids, model = PackedIDs(), set()
    for step in range(700):
        sid = _sid(rng) if step % 3 else max(model, default=0) + rng.randrange(1, 3)
        if rng.random() < 0.6:
            if sid not in model:
                ids.add(sid)
                model.add(sid)
        else:
            assert ids.discard(sid) == (sid in model)
            model.discard(sid)
        ordered = sorted(model)
        assert list(ids) == ordered and len(ids) == len(model)
        assert ids.first() == (ordered[0] if ordered else None)
        assert ids.last() == (ordered[-1] if ordered else None)
        probe, end = sorted((_sid(rng), _sid(rng)))
        assert list(ids.irange(probe, end)) == [v for v in ordered if probe <= v <= end]
        after = bisect_right(ordered, probe)
        assert ids.next_after(probe) == (ordered[after] if after < len(ordered) else None)
        assert (probe in ids) == (probe in model)


def test_extend_above_fills_chunks_as_adds_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pel_store, "_LOAD", 2)
    one, batch = PendingTable(), PendingTable()
    for start in (1, 4, 13):
        sids = list(range(start << 64, (start << 64) + start))
        for sid in sids:
            one.put(sid, 7, 1, 3)
        batch.extend_above([s >> 64 for s in sids], [s & ((1 << 64) - 1) for s in sids], 7, 1, 3)
    assert list(batch) == list(one) and len(batch) == len(one) == 18
    assert [batch.entry(s) for s in batch] == [(7, 1, 3)] * 18
    assert batch.last() == one.last() and batch.next_after(4 << 64) == (4 << 64) + 1


def test_an_emptied_table_fills_its_spare_chunk_again() -> None:
    """A queue's PEL: one delivery, its ack, the next delivery. The chunk the ack emptied holds
    the next delivery (no new columns a message), and the table reads back as it should."""
    table, low = PendingTable(), (1 << 64) - 1
    table.extend_above([1], [0], 7, 1, 3)
    chunk = table._chunks[0]
    for k in range(2, 6):
        assert table.pop_one(k - 1, 0, 4) == 3 and len(table) == 0 and list(table) == []
        table.extend_above([k], [0], 7 + k, 1, 3)
        assert table._chunks[0] is chunk
        assert list(table) == [k << 64] and table.entry(k << 64) == (7 + k, 1, 3)
    assert table.pop_one(5, 0, 4) == 3
    with pytest.raises(OverflowError):  # refused: the table stays empty, its spare kept
        table.extend_above([6], [0], 7, -1, 3)
    assert len(table) == 0 and list(table) == [] and table.last() is None
    table.put(7 << 64 | low, 1, 2, 0)
    assert table._chunks[0] is chunk and table.entry(7 << 64 | low) == (1, 2, 0)


@pytest.mark.parametrize("seed", range(8))
def test_pending_table_reads_back_as_a_dict(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pel_store, "_LOAD", 4)
    rng = random.Random(seed)
    table, model = PendingTable(), {}
    for _ in range(800):
        sid = _sid(rng)
        if rng.random() < 0.6:
            row = (rng.randrange(0, 1 << 40), rng.choice([0, 1, 5, (1 << 63) - 1, 1 << 63]),
                   rng.choice([NO_OWNER, 0, 1, 70000]))
            before = model.get(sid)
            assert table.put(sid, *row) == (None if before is None else (before[0], before[2]))
            model[sid] = row
        else:
            gone = model.pop(sid, None)
            assert table.pop(sid) == (None if gone is None else gone[2])
        assert len(table) == len(model)
        assert table.entry(sid) == model.get(sid)
        assert table.delivery_time(sid) == (model[sid][0] if sid in model else None)
    assert list(table.times()) == [(s, model[s][0]) for s in sorted(model)]


@pytest.mark.parametrize("seed", range(10))
def test_pop_many_removes_as_pops_one_by_one_do(seed: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of runs (whole, across chunk edges), absent IDs and repeats, against `pop`."""
    monkeypatch.setattr(pel_store, "_LOAD", 3)
    rng = random.Random(seed)
    batch, one = PendingTable(), PendingTable()
    for table in (batch, one):
        for k, sid in enumerate(range(1 << 64, (1 << 64) + 60)):
            table.put(sid, k, 1, k % 3)
    for _ in range(25):
        present = list(batch)
        start = rng.randrange(len(present)) if present else 0
        sids = present[start:start + rng.randrange(0, 9)]
        if rng.random() < 0.4:
            sids.append(rng.choice([(1 << 64) + 500, *sids[:1]]))  # absent, or a repeat
        if rng.random() < 0.3:
            rng.shuffle(sids)
        assert batch.pop_owners(sids) == [one.pop(sid) for sid in sids]
        assert list(batch) == list(one) and len(batch) == len(one)
        assert batch.last() == one.last() and [batch.entry(s) for s in batch] == \
            [one.entry(s) for s in one]


def test_ack_many_acks_as_acks_one_by_one_do() -> None:
    """XACK's batch: several owners, a released entry, absent IDs and a repeat."""
    groups = [ConsumerGroup(b"g", 0, 0) for _ in range(2)]
    for group in groups:
        consumers = [group.create_consumer(b"c%d" % i, 0) for i in range(3)]
        for k in range(30):
            group.add_new_pending([(1 << 64) + k], consumers[k % 3], 5)
        group.release((1 << 64) + 4, 2)
    sids = [(1 << 64) + k for k in (0, 1, 2, 3, 4, 5, 5, 99, 7, 10, 11, 12)]
    batch, one = groups
    assert batch.ack_many(sids) == [sid for sid in sids if one.ack(sid)]
    for a, b in zip(batch.consumers.values(), one.consumers.values(), strict=True):
        assert list(a.pel) == list(b.pel)
    assert list(batch.pel) == list(one.pel)
    assert batch.ack_many([(1 << 64) + 20, (1 << 64) + 23]) == [(1 << 64) + 20, (1 << 64) + 23]


def test_a_packed_pel_leaves_the_collector_next_to_nothing() -> None:
    group = ConsumerGroup(b"g", 0, 0)
    consumers = [group.create_consumer(b"c%d" % i, 0) for i in range(4)]
    gc.collect()
    before = len(gc.get_objects())
    for batch in range(100):  # 100k pending entries, delivered a thousand at a time
        base = (1_700_000_000_000 + batch) << 64
        group.add_new_pending([base | seq for seq in range(1000)], consumers[batch % 4], batch)
    for sid in list(group.pel)[::7]:  # and some claimed and released, out of order
        group.add_pending(sid, consumers[0], 500, 2)
    for sid in list(group.pel)[::11]:
        group.release(sid, 3)
    gc.collect()
    assert len(group.pel) == 100_000
    # A NACK object per entry was 100k tracked objects; chunk tuples are what is left.
    assert len(gc.get_objects()) - before < 2_000


@pytest.mark.parametrize("ids", [
    [5 << 64, 5 << 64 | 1, 9 << 64 | 7],  # a batch: narrow
    [(1 << 40) << 64 | (1 << 33)],  # a sequence number past 32 bits: wide
    [3 << 64, (3 + (1 << 32)) << 64],  # milliseconds 2^32 apart: wide
])
def test_buckets_read_back_narrow_or_wide(ids: list[int]) -> None:
    low = (1 << 64) - 1
    bucket = pel_store.bucket_new([s >> 64 for s in ids], [s & low for s in ids])
    assert list(pel_store.bucket_ids(bucket)) == ids
    assert pel_store.bucket_size(bucket) == len(ids) and pel_store.bucket_last(bucket) == ids[-1]
    more = [2 << 64 | 3, (1 << 63) << 64 | low]  # below the base, then too wide: widens
    for sid in more:
        bucket = pel_store.bucket_extend(bucket, [sid >> 64], [sid & low])
    assert list(pel_store.bucket_ids(bucket)) == ids + more
    pel_store.bucket_drop_leading(bucket, 2)
    assert list(pel_store.bucket_ids(bucket)) == (ids + more)[2:]
    pushed = pel_store.bucket_new([ids[0] >> 64], [ids[0] & low])  # one claim at a time
    for sid in ids[1:] + more:
        pushed = pel_store.bucket_push(pushed, sid)
    assert list(pel_store.bucket_ids(pushed)) == ids + more


@pytest.mark.parametrize("seed", range(6))
def test_delivery_order_with_wide_ids(seed: int) -> None:
    """The delivery order stays the live PEL by (time, ID) when IDs do not fit a narrow
    bucket (huge sequence numbers) and batches mix with single claims."""
    rng = random.Random(seed)
    group = ConsumerGroup(b"g", 0, 0)
    consumers = [group.create_consumer(b"c%d" % i, 0) for i in range(2)]
    now, top = 1, 1 << 64
    for _ in range(300):
        op = rng.random()
        if op < 0.2:
            batch = sorted({top + rng.randrange(1, 1 << 20) for _ in range(rng.randrange(1, 6))})
            top = batch[-1] + 1
            group.add_new_pending(batch, rng.choice(consumers), now)
        elif op < 0.5:
            group.add_pending(_sid(rng), rng.choice(consumers), now, 2)
        elif op < 0.6:
            group.release(_sid(rng), 1)
        elif op < 0.8:
            group.ack(_sid(rng))
        now += rng.randrange(0, 2)
        expected = sorted((n.delivery_time, s) for s, n in group.pel.items())
        assert list(group.pel_by_time.iter_oldest(group.pel)) == expected
        for c in consumers:
            assert list(c.pel) == [s for s, n in group.pel.items() if n.consumer is c]
