"""The durable work queue (groundwork, embedded): idempotent puts, one transaction for a batch,
reclaiming after the visibility timeout, exact delivery counts, dead-lettering after exactly
max_deliveries deliveries, clear errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.engine.runtime.queue import QueueError, StreamQueue


def test_put_is_idempotent_and_put_many_is_one_record(tmp_path: Path) -> None:
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load
    from streamkeep.aof.reader import SegmentReader

    path = str(tmp_path / "d")
    with Engine.open(path) as engine:
        q = StreamQueue(engine, "jobs", consumer="w")
        first = q.put({"task": "a"}, idempotency_key="k1")
        assert q.put({"task": "a"}, idempotency_key="k1") == first
        assert engine.execute("XLEN", "jobs") == 1
        ids = q.put_many([{"n": str(i)} for i in range(5)])
        assert len(ids) == 5 and engine.execute("XLEN", "jobs") == 6
    segments = load(RealFS(), path).segments
    records = [r for s in segments
               for r in SegmentReader(RealFS(), f"{path}/{s.file}").records()]
    adds = [sum(bytes(e[0]) == b"XADD" for e in r[3]) for r in records]
    assert adds[-1] == 5  # the batch: one record


def test_reclaim_counts_and_dead_letter_after_max_deliveries() -> None:
    engine = Engine()
    q = StreamQueue(engine, "jobs", consumer="w1", visibility_timeout=0.01, max_deliveries=3)
    sid = q.put({"poison": "yes"})
    seen = []
    for _ in range(6):
        for msg in q.get(1):
            seen.append(msg.deliveries)  # never acknowledged: a handler that always fails
        time.sleep(0.02)
    assert seen == [1, 2, 3]
    dead = q.dead()
    assert [f[b"source-id"] for _, f in dead] == [sid]
    assert dead[0][1][b"poison"] == b"yes" and dead[0][1][b"deliveries"] == b"3"
    assert engine.execute("XPENDING", "jobs", "workers")[0] == 0  # acknowledged on the source


def test_ack_nack_extend_and_process() -> None:
    engine = Engine()
    q = StreamQueue(engine, "jobs", consumer="w1", visibility_timeout=30)
    a, b = q.put({"n": "a"}), q.put({"n": "b"})
    got = q.get(2)
    assert [m.id for m in got] == [a, b]
    got[0].ack()
    got[1].nack(counted=False)  # released at once, this delivery not counted
    again = q.get(2)
    assert [(m.id, m.deliveries) for m in again] == [(b, 1)]
    again[0].extend()
    with pytest.raises(RuntimeError), q.process() as msg:
        assert msg is None  # nothing new, nothing idle
        raise RuntimeError


def test_clear_errors() -> None:
    engine = Engine()  # (a key of another type: only a real Redis has one; issue 17's next step)
    with pytest.raises(QueueError, match="not an Engine"):
        StreamQueue(object(), "jobs")
    q = StreamQueue(engine, "jobs", group="g")
    engine.execute("XGROUP", "DESTROY", "jobs", "g")
    with pytest.raises(QueueError, match="group g of jobs is gone"):
        q.get()
