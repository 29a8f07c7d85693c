"""The consumer group's PEL bookkeeping: the delivery order XREADGROUP CLAIM walks (time
buckets with lazy deletion) always equals the live pending entries sorted by (delivery time,
ID), through random deliveries, claims, releases, acks and abandoned walks."""

from __future__ import annotations

import random

import pytest

from streamkeep.engine.model import pel_store
from streamkeep.engine.model.consumer_groups import ConsumerGroup


@pytest.mark.parametrize("seed", range(20))
def test_delivery_order_is_the_live_pel_oldest_first(seed: int) -> None:
    rng = random.Random(seed)
    group = ConsumerGroup(b"g", 0, 0)
    consumers = [group.create_consumer(b"c%d" % i, 0) for i in range(3)]
    now = 1
    for _ in range(600):
        op = rng.random()
        sid = rng.randrange(1, 80)
        if op < 0.45:
            group.add_pending(sid, rng.choice(consumers), now, rng.randrange(1, 5))
        elif op < 0.6 and sid in group.pel:  # XCLAIM TIME: an arbitrary, even earlier, time
            group.set_delivery(sid, group.pel[sid], rng.randrange(0, now + 1), 2)
        elif op < 0.7:
            group.release(sid, 1)
        elif op < 0.85:
            group.ack(sid)
        else:  # a walk left early (as claims do), then a full one
            order = group.pel_by_time.iter_oldest(group.pel)
            for _, _ in zip(range(rng.randrange(0, 5)), order, strict=False):
                pass
            order.close()
        now += rng.randrange(0, 3)  # several deliveries often share a millisecond
        expected = sorted((n.delivery_time, s) for s, n in group.pel.items())
        assert list(group.pel_by_time.iter_oldest(group.pel)) == expected
        assert group.pel_by_time.size <= 2 * len(group.pel) + 64 + 1


def test_a_walk_compacts_a_bucket_it_found_mostly_stale() -> None:
    group = ConsumerGroup(b"g", 0, 0)
    consumer = group.create_consumer(b"c", 0)
    for sid in range(1, 1001):  # one read: a thousand deliveries in one millisecond
        group.add_pending(sid, consumer, 7, 1)
    rng = random.Random(3)
    for sid in rng.sample(range(2, 1001), 600):  # acked out of order, the first one kept
        group.ack(sid)
    order = group.pel_by_time
    assert order.size == 1000  # acks leave their IDs behind
    assert list(order.iter_oldest(group.pel)) == sorted((7, s) for s in group.pel)
    assert order.size == len(group.pel) == 400  # the walk dropped the stale ones
    walk = order.iter_oldest(group.pel)
    assert next(walk) == (7, 1)
    walk.close()
    assert list(order.iter_oldest(group.pel))[0] == (7, 1)  # a walk left early loses nothing


def _state(group: ConsumerGroup) -> tuple:
    """Everything a claim may change: the PEL rows, each consumer's IDs, the delivery order."""
    return (list(group.pel.irange_rows(0, (1 << 128) - 1)),
            {name: list(c.pel) for name, c in group.consumers.items()},
            list(group.pel_by_time.iter_oldest(group.pel)))


@pytest.mark.parametrize("seed", range(16))
def test_claim_many_is_add_pending_of_each(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk claim (XAUTOCLAIM, XCLAIM) leaves what one `add_pending` an ID does: the same
    rows, consumers' sets and delivery order, from IDs held by several owners, XNACK-released
    ones, and ones the claimer holds already, delivered at the claim's time or not."""
    monkeypatch.setattr(pel_store, "_LOAD", 3)
    rng = random.Random(seed)
    groups = (ConsumerGroup(b"g", 0, 0), ConsumerGroup(b"g", 0, 0))
    for group in groups:
        for i in range(3):
            group.create_consumer(b"c%d" % i, 0)
    now = 1
    for _ in range(40):
        for _ in range(rng.randrange(0, 12)):  # deliveries and releases, the same to both
            sid = rng.randrange(1, 120) | rng.choice([0, 5 << 64])
            name = b"c%d" % rng.randrange(3)
            released, count = rng.random() < 0.15, rng.randrange(1, 4)
            for group in groups:
                if released:
                    group.release(sid, 3)
                else:
                    group.add_pending(sid, group.consumers[name], now, count)
        pending = list(groups[0].pel)
        sids = sorted(rng.sample(pending, min(len(pending), rng.randrange(0, 30))))
        counts = [rng.randrange(0, 9) for _ in sids]
        name = b"c%d" % rng.randrange(3)
        when = rng.choice([now, now - 1, 0])
        one, bulk = groups
        for sid, count in zip(sids, counts, strict=True):
            one.add_pending(sid, one.consumers[name], when, count)
        bulk.claim_many(sids, counts, bulk.consumers[name], when)
        assert _state(bulk) == _state(one)
        now += rng.randrange(0, 2)
