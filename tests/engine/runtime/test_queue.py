"""The durable work queue (groundwork): the same tests on an Engine and on a redis-py client of
a streamkeep server (idempotent puts, a batch in one transaction, reclaiming after the visibility
timeout, exact delivery counts, dead-lettering after exactly max_deliveries deliveries, clear
errors), and a redis-server older than 8.8 refused with what it lacks."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.runtime.queue import QueueError, StreamQueue, missing_features


@pytest.fixture(params=["embedded", "redis-py-resp2", "redis-py-resp3"])
def client(request: pytest.FixtureRequest) -> Iterator[Callable[[Engine], Any]]:
    """`client(engine)`: the engine itself, or a redis-py client (RESP2 or RESP3) of a server
    serving it."""
    import redis

    from tests.support.server_util import start_server

    handles = []

    def make(engine: Engine) -> Any:
        if request.param == "embedded":
            return engine
        handle = start_server(engine)
        handles.append(handle)
        protocol = 3 if request.param.endswith("resp3") else 2
        return redis.Redis(host=handle.host, port=handle.port, protocol=protocol)

    try:
        yield make
    finally:
        for handle in handles:
            handle.stop()


def test_put_is_idempotent_and_put_many_is_one_record(tmp_path: Path,
                                                      client: Callable[[Engine], Any]) -> None:
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load
    from streamkeep.aof.reader import SegmentReader

    path = str(tmp_path / "d")
    engine = Engine.open(path)
    q = StreamQueue(client(engine), "jobs", consumer="w")
    first = q.put({"task": "a"}, idempotency_key="k1")
    assert q.put({"task": "a"}, idempotency_key="k1") == first
    assert engine.execute("XLEN", "jobs") == 1
    ids = q.put_many([{"n": str(i)} for i in range(5)])
    assert len(ids) == 5 and engine.execute("XLEN", "jobs") == 6
    engine.close()
    segments = load(RealFS(), path).segments
    records = [r for s in segments
               for r in SegmentReader(RealFS(), f"{path}/{s.file}").records()]
    adds = [sum(bytes(e[0]) == b"XADD" for e in r[3]) for r in records]
    assert adds[-1] == 5  # the batch: one record


def test_reclaim_counts_and_dead_letter_after_max_deliveries(
        client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=0.01,
                    max_deliveries=3)
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


def test_ack_nack_extend_and_process(client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=30)
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


def test_clear_errors(client: Callable[[Engine], Any]) -> None:
    engine = Engine()  # (a key of another type: only a real Redis has one; issue 17's next step)
    with pytest.raises(QueueError, match="neither an Engine nor a redis-py client"):
        StreamQueue(object(), "jobs")
    q = StreamQueue(client(engine), "jobs", group="g")
    engine.execute("XGROUP", "DESTROY", "jobs", "g")
    with pytest.raises(QueueError, match="group g of jobs is gone"):
        q.get()


@pytest.mark.redis
def test_an_older_redis_is_refused_with_what_it_lacks(redis_client: Any) -> None:
    version = redis_client.info("server")["redis_version"]
    lacking = missing_features(version)
    if not lacking:
        pytest.fail(f"redis-server {version} has every feature: test the queue against it")
    with pytest.raises(QueueError, match=f"Redis {version}. lacks what the queue needs: "):
        StreamQueue(redis_client, "jobs")
    assert missing_features("8.10.2") == []
    assert missing_features("8.4.0") == ["XADD IDMP (8.6)", "XNACK (8.8)"]


def test_consume_stats_and_requeue(client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=0.01,
                    max_deliveries=1)
    for i in range(3):
        q.put({"n": str(i)})
    done = []
    for msg in q.consume(count=2, block=0.01):
        done.append(msg.fields[b"n"])
        if len(done) == 2:
            msg.nack(counted=False)  # stopping: this delivery does not count
            break
    assert done == [b"0", b"1"]
    stats = q.stats()
    assert stats["length"] == 3 and stats["pending"] == 1 and stats["dead"] == 0
    assert stats["consumers"].keys() == {b"w1"}
    poison = q.put({"n": "poison"})
    time.sleep(0.02)
    held = q.get(5)  # the released one (its delivery not counted), then the new ones
    assert sorted((m.fields[b"n"], m.deliveries) for m in held) == [
        (b"1", 1), (b"2", 1), (b"poison", 1)]
    time.sleep(0.02)
    assert q.get(5) == []  # each is past its single delivery: dead-lettered, not returned
    dead = q.dead()
    assert sorted(f[b"n"] for _, f in dead) == [b"1", b"2", b"poison"]
    assert poison in [f[b"source-id"] for _, f in dead]
    back = q.requeue_dead([d for d, _ in dead])
    assert len(back) == len(dead) and q.dead() == []
    assert q.stats()["dead"] == 0


def test_extend_keeps_a_claim_for_the_time_asked(client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=0.2)
    other = StreamQueue(client(engine), "jobs", consumer="w2", visibility_timeout=0.2)
    q.put({"n": "long"})
    (msg,) = q.get(1)
    msg.extend(0.0)  # reclaimable at once
    (taken,) = other.get(1)
    assert taken.id == msg.id and taken.deliveries == 2
    taken.extend()  # a whole visibility timeout from now
    assert q.get(1) == []
    with pytest.raises(QueueError, match="extend by 0 to 0.2 s"):
        taken.extend(5)
