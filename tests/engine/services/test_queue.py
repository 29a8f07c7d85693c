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
from streamkeep.engine.services.queue import QueueError, StreamQueue, missing_features


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
    from streamkeep.aof.segment_reader import SegmentReader

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
    assert [d.source_id for d in dead] == [sid]
    assert dead[0].fields == {b"poison": b"yes"} and dead[0].deliveries == 3
    assert dead[0].consumer == b"" and b"visibility timeout" in dead[0].error
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


def test_a_message_is_acked_nacked_and_extended_as_itself(
        client: Callable[[Engine], Any]) -> None:
    """ack(), nack() and extend() take the message from get() (or a batch of them) as well as
    its ID; a message settled so is left alone by process() and consume()."""
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=30)
    a, b, c, d = (q.put({"n": n}) for n in "abcd")
    first, second = q.get(2)
    assert q.ack(first) == 1 and first.done
    assert q.ack(first) == 0  # already acknowledged
    assert q.nack(second) == 1 and second.done  # released, counted
    assert [(m.id, m.deliveries) for m in q.get(1)] == [(b, 2)]
    batch = q.get(2)
    assert [m.id for m in batch] == [c, d]
    q.extend(batch[0], 10)
    assert q.ack(batch) == 2 and all(m.done for m in batch)
    assert q.ack(b.decode()) == 1  # an ID as str too
    assert q.ack() == 0 and q.ack([]) == 0
    assert engine.execute("XPENDING", "jobs", "workers")[0] == 0
    e = q.put({"n": "e"})
    with q.process() as msg:
        assert msg is not None and msg.id == e
        q.nack(msg, counted=False)  # settled by hand: process() leaves it released
    assert [(m.id, m.deliveries) for m in q.get(1)] == [(e, 1)]
    with pytest.raises(QueueError, match="a message or its ID"):
        q.ack(42)  # type: ignore[arg-type]


def test_a_dead_letter_is_requeued_as_itself(client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", max_deliveries=1)
    q.put({"n": "1"})
    q.get()[0].nack(error="boom")
    (letter,) = q.dead()
    with pytest.raises(QueueError, match="requeue_dead"):
        q.ack(letter)  # type: ignore[arg-type]  # its ID is the dead-letter stream's
    (again,) = q.requeue_dead(q.dead())
    assert [m.id for m in q.get(5)] == [again] and q.dead() == []


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
    assert sorted(d.fields[b"n"] for d in dead) == [b"1", b"2", b"poison"]
    assert poison in [d.source_id for d in dead]
    back = q.requeue_dead([d.id for d in dead])
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


def test_a_failure_on_the_last_delivery_dead_letters_with_its_error(
        client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", max_deliveries=2)
    sid = q.put({"task": "x"})
    for _ in range(2):
        with pytest.raises(ValueError), q.process() as msg:
            assert msg is not None and msg.id == sid
            raise ValueError("bad input")
    assert q.get(5) == []
    (letter,) = q.dead()
    assert (letter.source_id, letter.deliveries, letter.consumer, letter.error) == (
        sid, 2, b"w1", b"ValueError: bad input")
    assert letter.pairs == ((b"task", b"x"),)
    assert engine.execute("XPENDING", "jobs", "workers")[0] == 0


def test_retention_never_trims_what_is_not_acknowledged(
        client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", maxlen=10)
    ids = q.put_many([{"n": str(i)} for i in range(300)])
    for msg in q.get(250):
        msg.ack()
    held = q.get(10)  # delivered, not acknowledged
    q.put({"n": "last"})  # trims whole nodes of acknowledged entries (MAXLEN ~)
    length = engine.execute("XLEN", "jobs")
    assert length < 301  # it trimmed
    left = {e[0] for e in engine.execute("XRANGE", "jobs", "-", "+")}
    assert set(ids[250:]) <= left and {m.id for m in held} <= left
    aged = StreamQueue(client(engine), "old", consumer="w1", max_age=0.0)
    first = aged.put({"n": "unread"})
    time.sleep(0.01)
    aged.put({"n": "next"})
    assert first in {e[0] for e in engine.execute("XRANGE", "old", "-", "+")}


def test_sweep_acknowledges_messages_deleted_while_held(
        client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", visibility_timeout=0.01)
    a, b = q.put({"n": "a"}), q.put({"n": "b"})
    assert len(q.get(2)) == 2
    engine.execute("XDEL", "jobs", a)
    time.sleep(0.02)
    assert q.sweep() == 1  # only the deleted one; b is still pending, claimable
    assert [(m.id, m.deliveries) for m in q.get(2)] == [(b, 2)]
    assert engine.execute("XPENDING", "jobs", "workers")[0] == 1


def test_threads_share_an_engine(tmp_path: Path) -> None:
    import threading

    engine = Engine.open(str(tmp_path / "d"), appendfsync="always")
    producer = StreamQueue(engine, "jobs", consumer="producer")
    ids = set(producer.put_many([{"n": str(i)} for i in range(400)]))
    handled: list[bytes] = []
    errors: list[BaseException] = []

    def work(index: int) -> None:
        q = StreamQueue(engine, "jobs", consumer=f"t{index}")
        try:
            while len(handled) < len(ids):
                for msg in q.get(7, block=0.01):
                    handled.append(msg.id)
                    msg.ack()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and sorted(handled) == sorted(ids)  # each exactly once: nothing failed
    stats = producer.stats()
    assert stats["pending"] == 0 and stats["lag"] == 0
    assert set(stats["consumers"]) >= {b"t0", b"t1", b"t2", b"t3"}
    engine.close()


def test_a_temporary_redis_client_keeps_its_connections(engine_server: Any) -> None:
    """redis-py closes a client's pool when the client is collected: the queue keeps it."""
    import gc

    import redis

    q = StreamQueue(redis.Redis(port=engine_server.port), "jobs", consumer="w")
    gc.collect()
    sid = q.put({"n": "1"})
    gc.collect()
    assert [m.id for m in q.get(1)] == [sid]


@pytest.fixture
def engine_server() -> Iterator[Any]:
    from tests.support.server_util import start_server

    handle = start_server(Engine())
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.redis
def test_a_key_of_another_type_is_a_clear_error(redis_client: Any) -> None:
    """Only a real Redis has other types; the one here is too old for the queue, so its
    WRONGTYPE reply is fed to the mapping the queue applies to every reply."""
    import redis

    from streamkeep.engine.services.queue import error_line, group_error
    from streamkeep.engine.wire.errors import ReplyError

    redis_client.set("jobs", "a string")
    with pytest.raises(redis.ResponseError) as raised:
        redis_client.xgroup_create("jobs", "workers", "0", mkstream=True)
    err = group_error(b"jobs", b"workers", ReplyError(error_line(raised.value)))
    assert isinstance(err, QueueError)
    assert str(err) == "jobs: the key holds something other than a stream"
    with pytest.raises(QueueError, match="neither an Engine nor a redis-py client"):
        StreamQueue("localhost:6379", "jobs")


def test_bad_arguments_are_clear_errors() -> None:
    engine = Engine()
    with pytest.raises(QueueError, match="max_deliveries must be at least 1"):
        StreamQueue(engine, "jobs", max_deliveries=0)
    q = StreamQueue(engine, "jobs")
    with pytest.raises(QueueError, match="at least one field"):
        q.put({})
    with pytest.raises(QueueError, match="cannot send object"):
        q.put({"a": object()})
    with pytest.raises(QueueError, match="2 idempotency keys for 1 messages"):
        q.put_many([{"a": 1}], idempotency_keys=["x", "y"])
    with pytest.raises(QueueError, match="no queue nope"):
        StreamQueue(engine, "nope", create=False).stats()
    assert q.put_many([{"a": 1}], idempotency_keys=["k"]) == q.put_many(
        [{"a": 1}], idempotency_keys=["k"])  # a retried batch adds nothing again
    assert engine.execute("XLEN", "jobs") == 1


def test_a_message_is_dead_lettered_once_when_two_workers_race(
        client: Callable[[Engine], Any]) -> None:
    """w1's last delivery fails after its visibility timeout, when w2 has already claimed
    the message and dead-lettered it: w1's dead-lettering finds it gone and does nothing."""
    engine = Engine()
    make = client(engine)
    w1 = StreamQueue(make, "jobs", consumer="w1", visibility_timeout=0.01, max_deliveries=1)
    w2 = StreamQueue(make, "jobs", consumer="w2", visibility_timeout=0.01, max_deliveries=1)
    late = w1.put({"n": "late"})
    (held,) = w1.get()
    time.sleep(0.02)
    assert w2.get() == []  # claimed past its single delivery: dead-lettered by w2
    held.nack(error="too late")
    assert [(d.source_id, d.consumer) for d in w1.dead()] == [(late, b"")]
    early = w1.put({"n": "early"})
    (held,) = w1.get()
    held.nack(error="failed")  # in time: w1 moves it, w2 finds nothing to claim
    time.sleep(0.02)
    assert w2.get() == []
    assert [(d.source_id, d.consumer) for d in w1.dead()] == [(late, b""), (early, b"w1")]


def test_a_dead_letter_is_requeued_once(client: Callable[[Engine], Any]) -> None:
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w1", max_deliveries=1)
    q.put({"n": "1"})
    q.get()[0].nack(error="boom")
    (letter,) = q.dead()
    other = StreamQueue(client(engine), "jobs", consumer="w2", max_deliveries=1)
    (again,) = other.requeue_dead([letter.id])
    with pytest.raises(QueueError, match=f"no dead-lettered message {letter.id.decode()}"):
        q.requeue_dead([letter.id])  # already put back by w2
    assert [m.id for m in q.get(5)] == [again] and q.dead() == []
    assert q.requeue_dead([]) == []



def _blocks(engine: Engine, call: Callable[[], Any]) -> tuple[bool, Any]:
    """Run `call` in a thread until it returns: (False, its result) if it returned without
    waiting; (True, its result) if the engine held it as a blocked read first, which a
    message put then woke. No wall-clock bound: each outcome is observed, not timed."""
    import threading

    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    while thread.is_alive() and engine.waiting.blocked_clients() == 0:
        time.sleep(0.002)
    blocked = thread.is_alive()
    if blocked:
        engine.execute("XADD", "jobs", "*", "wake", "up")
    thread.join()
    return blocked, result[0]


def test_block_zero_or_none_returns_at_once(client: Callable[[Engine], Any]) -> None:
    """`block` is seconds to wait: 0 (and None) waits none, where Redis's BLOCK 0 would wait
    for ever; get, a batch read and process alike."""
    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w")

    def processed(block: float | None) -> Any:
        with q.process(block=block) as msg:
            return msg

    for call in (lambda: q.get(block=0), lambda: q.get(5, block=0), lambda: q.get(block=0.0),
                 lambda: q.get(block=None), lambda: processed(0), lambda: processed(None)):
        blocked, got = _blocks(engine, call)
        assert not blocked, "block=0 waited (BLOCK 0) instead of returning at once"
        assert got in ([], None)
    sid = q.put({"n": 1})
    assert [m.id for m in q.get(block=0)] == [sid]


def test_block_inf_waits_for_ever_and_bad_blocks_are_refused(
        client: Callable[[Engine], Any]) -> None:
    """float('inf') is the way to wait for ever (BLOCK 0); a wait under a millisecond is not
    rounded down to BLOCK 0; a negative or NaN block, and a consume() whose reads would not
    wait (a busy loop), are QueueErrors."""
    from streamkeep.engine.services.queue import _block_ms

    engine = Engine()
    q = StreamQueue(client(engine), "jobs", consumer="w")
    blocked, got = _blocks(engine, lambda: q.get(block=float("inf")))
    assert blocked and [m.fields for m in got] == [{b"wake": b"up"}]
    got[0].ack()
    assert _block_ms(float("inf")) == b"0"
    assert _block_ms(0.0004) == b"1" and _block_ms(0.25) == b"250"
    for bad in (-1, -0.5, float("nan"), float("-inf")):
        with pytest.raises(QueueError, match="block must be None or a number of seconds"):
            q.get(block=bad)
    for never in (0, 0.0, None, -1, float("nan")):
        with pytest.raises(QueueError, match="block must be more than 0 seconds"):
            q.consume(block=never)
    sid = q.put({"n": 1})
    consumer = q.consume(block=float("inf"))
    assert next(consumer).id == sid
    consumer.close()


def test_an_async_client_is_refused_with_what_to_use() -> None:
    """redis.asyncio's client (its calls return coroutines) is refused when the queue is
    made, saying what works instead, rather than failing at its first command."""
    import redis.asyncio

    client = redis.asyncio.Redis(port=1)  # never connects: refused before any command
    with pytest.raises(TypeError, match="does not support async clients.*synchronous "
                                        "redis.Redis.*or an Engine"):
        StreamQueue(client, "jobs")

    class AsyncLike:
        connection_pool = None

        async def execute_command(self, *args: Any) -> Any:
            return None

    with pytest.raises(TypeError, match="does not support async clients"):
        StreamQueue(AsyncLike(), "jobs")
