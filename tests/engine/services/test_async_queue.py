"""engine.services.async_queue: AsyncStreamQueue keeps StreamQueue's guarantees in an event loop,
on each backend (the engine in this process, with and without `appendfsync always`; a shared
directory's server; a `streamkeep serve` child): idempotent puts, a batch in one transaction,
reclaiming after the visibility timeout, exact delivery counts, dead-lettering after exactly
max_deliveries, requeue_dead, stats, the sweep of deleted messages, process()'s ack and nack,
consume()'s batch settling. Cancellation acknowledges nothing: a task cancelled in process()
releases its message uncounted, a cancelled blocking get loses no later message, a get served
by a write and cancelled before it ran hands its message back uncounted, a consume() left by a
`break` or a cancellation settles its batch. A sync StreamQueue and an AsyncStreamQueue share a
queue; each refuses the other's client. 1,000 gets blocked on one queue each get one of 1,000
puts while the loop keeps turning (a ticker counts its iterations)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import AsyncStreamQueue, Engine, StreamQueue, aredis_from_url
from streamkeep.engine.runtime.async_redis import AsyncRedis
from streamkeep.engine.services.queue import QueueError

BACKENDS = ["embedded", "embedded-aof-always", "shared", "serve"]
# How many loop iterations (or short sleeps) a test waits for a state before failing: a
# bound on iterations, never on time, so that a busy machine only makes the wait longer.
ITERATIONS = 20_000
FOREVER = float("inf")


class Target:
    """One backend of the queue: what an AsyncStreamQueue is given (`client()`), AsyncRedis
    clients to look at the queue's stream (`aredis()`), a synchronous client of the same data
    for a StreamQueue (`sync_client()`). Clients made in the loop are closed by `aclose()`."""

    def __init__(self, kind: str, tmp_path: Path, shared_dir: Path,
                 spawn: Callable[..., Any]) -> None:
        self.kind = kind
        self.engine: Any = None
        self.server: Any = None
        self.aof_path: str | None = None
        self._opened: list[AsyncRedis] = []
        self._sync: list[Any] = []
        if kind == "embedded":
            self.engine = Engine.open()
        elif kind == "embedded-aof-always":
            self.aof_path = str(tmp_path / "d")
            self.engine = Engine.open(self.aof_path, appendfsync="always")
        elif kind == "shared":
            self.engine = Engine.open(str(shared_dir), shared=True)
        else:
            self.server = spawn(tmp_path / "data")

    async def aredis(self) -> AsyncRedis:
        if self.server is not None:
            r = await aredis_from_url(f"redis://{self.server.host}:{self.server.port}")
        else:
            r = self.engine.aredis()
        self._opened.append(r)
        return r

    async def client(self) -> Any:
        """The embedded engine itself (AsyncStreamQueue makes its aredis()), else an AsyncRedis."""
        return self.engine if self.kind == "embedded" else await self.aredis()

    async def queue(self, name: str = "jobs", **options: Any) -> AsyncStreamQueue:
        return AsyncStreamQueue(await self.client(), name, **options)

    def sync_client(self) -> Any:
        if self.server is None:
            return self.engine
        client = self.server.client()
        self._sync.append(client)
        return client

    async def blocked(self) -> int:
        """How many clients wait in a blocking command."""
        if self.kind.startswith("embedded"):
            return int(self.engine.waiting.blocked_clients())
        r = self._opened[0] if self._opened else await self.aredis()
        return int((await r.info("clients"))["blocked_clients"])

    async def aclose(self) -> None:
        for r in self._opened:
            await r.aclose()
        self._opened.clear()

    def close(self) -> None:
        for client in self._sync:
            client.close()
        if self.engine is not None:
            self.engine.close()

    def run(self, body: Callable[[], Awaitable[Any]]) -> Any:
        async def main() -> Any:
            try:
                return await body()
            finally:
                await self.aclose()

        return asyncio.run(main())


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path, shared_dir: Path,
           spawn: Callable[..., Any]) -> Iterator[Target]:
    made = Target(request.param, tmp_path, shared_dir, spawn)
    try:
        yield made
    finally:
        made.close()


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait until `check()` holds, at most ITERATIONS short sleeps (a bound on iterations)."""
    for _ in range(ITERATIONS):
        if await check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


async def other_tasks_done() -> None:
    """Let the loop finish what a dropped async generator left it (its finalizer schedules its
    aclose() as a task): one turn for the task to be made, then every other task awaited."""
    await asyncio.sleep(0)
    current = asyncio.current_task()
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not current))


async def pending(r: AsyncRedis, name: str = "jobs") -> int:
    return int((await r.xpending(name, "workers"))["pending"])


async def cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --- StreamQueue's guarantees, awaited -------------------------------------------------------


def test_put_is_idempotent_and_put_many_is_one_transaction(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w")
        r = await target.aredis()
        first = await q.put({"task": "a"}, idempotency_key="k1")
        assert await q.put({"task": "a"}, idempotency_key="k1") == first
        assert await r.xlen("jobs") == 1
        ids = await q.put_many([{"n": str(i)} for i in range(5)])
        assert len(set(ids)) == 5 and await r.xlen("jobs") == 6
        if target.aof_path is not None:  # (always: the batch is fsynced before its reply)
            assert last_record_adds(target.aof_path) == 5  # the batch: one record
        keyed = await q.put_many([{"a": 1}], idempotency_keys=["k"])
        assert await q.put_many([{"a": 1}], idempotency_keys=["k"]) == keyed
        assert await r.xlen("jobs") == 7  # a retried batch adds nothing again
        with pytest.raises(QueueError, match="2 idempotency keys for 1 messages"):
            await q.put_many([{"a": 1}], idempotency_keys=["x", "y"])
        with pytest.raises(QueueError, match="at least one field"):
            await q.put({})

    target.run(body)


def last_record_adds(path: str) -> int:
    """How many XADDs the last record of the AOF at `path` holds."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load
    from streamkeep.aof.segment_reader import SegmentReader

    records = [r for s in load(RealFS(), path).segments
               for r in SegmentReader(RealFS(), f"{path}/{s.file}").records()]
    return sum(bytes(e[0]) == b"XADD" for e in records[-1][3])


def test_reclaim_counts_and_dead_letter_after_max_deliveries(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=0.01, max_deliveries=3)
        sid = await q.put({"poison": "yes"})
        seen = []
        for _ in range(6):
            for msg in await q.get(1):
                seen.append(msg.deliveries)  # never acknowledged: a handler that always fails
            await asyncio.sleep(0.02)  # past the visibility timeout (a lower bound only)
        assert seen == [1, 2, 3]
        dead = await q.dead()
        assert [d.source_id for d in dead] == [sid]
        assert dead[0].fields == {b"poison": b"yes"} and dead[0].deliveries == 3
        assert dead[0].consumer == b"" and b"visibility timeout" in dead[0].error
        assert await pending(await target.aredis()) == 0  # acknowledged on the source

    target.run(body)


def test_ack_nack_extend_and_process(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=30)
        a, b = await q.put({"n": "a"}), await q.put({"n": "b"})
        got = await q.get(2)
        assert [(m.id, m.deliveries, m.fields) for m in got] == [
            (a, 1, {b"n": b"a"}), (b, 1, {b"n": b"b"})]
        assert list(got[0].flat) == [b"n", b"a"]
        await got[0].ack()
        assert got[0].done
        await got[1].nack(counted=False)  # released at once, this delivery not counted
        again = await q.get(2)
        assert [(m.id, m.deliveries) for m in again] == [(b, 1)]
        await again[0].extend()
        with pytest.raises(RuntimeError):
            async with q.process() as msg:
                assert msg is None  # nothing new, nothing idle
                raise RuntimeError
        c = await q.put({"n": "c"})
        async with q.process() as msg:
            assert msg is not None and msg.id == c
        r = await target.aredis()
        assert await pending(r) == 1  # c acknowledged on success; b still held
        assert await q.ack(b) == 1 and await q.ack(b) == 0
        d = await q.put({"n": "d"})
        (held,) = await q.get()
        assert await q.nack(held.id) == 1  # released, counted
        assert [(m.id, m.deliveries) for m in await q.get()] == [(d, 2)]

    target.run(body)


def test_a_message_is_acked_nacked_and_extended_as_itself(target: Target) -> None:
    """ack(), nack() and extend() take the message from get() (or a batch of them) as well
    as its ID; requeue_dead() takes the dead letters from dead()."""
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=30, max_deliveries=2)
        a, b, c, d = [await q.put({"n": n}) for n in "abcd"]
        first, second = await q.get(2)
        assert await q.ack(first) == 1 and first.done
        assert await q.ack(first) == 0  # already acknowledged
        assert await q.nack(second) == 1 and second.done  # released, counted
        assert [(m.id, m.deliveries) for m in await q.get(1)] == [(b, 2)]
        batch = await q.get(2)
        assert [m.id for m in batch] == [c, d]
        await q.extend(batch[0], 10)
        assert await q.ack(batch) == 2 and all(m.done for m in batch)
        assert await q.ack() == 0
        async with q.process() as msg:
            assert msg is None  # b: held, its claim not timed out
        assert await q.nack(b) == 1  # by ID: its second (last) delivery failed
        assert await q.get(1) == []  # one more would pass max_deliveries: dead-lettered
        assert [letter.source_id for letter in await q.dead()] == [b]
        (again,) = await q.requeue_dead(await q.dead())
        assert [m.id for m in await q.get(5)] == [again] and await q.dead() == []
        assert await pending(await target.aredis()) == 1

    target.run(body)


def test_extend_keeps_a_claim_for_the_time_asked(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=30)
        other = await target.queue(consumer="w2", visibility_timeout=30)
        await q.put({"n": "long"})
        (msg,) = await q.get(1)
        await msg.extend(0.0)  # reclaimable at once
        (taken,) = await other.get(1)
        assert taken.id == msg.id and taken.deliveries == 2
        await taken.extend()  # a whole visibility timeout from now
        assert await q.get(1) == []
        with pytest.raises(QueueError, match="extend by 0 to 30 s"):
            await taken.extend(60)

    target.run(body)


def test_a_failure_on_the_last_delivery_dead_letters_with_its_error(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", max_deliveries=2)
        sid = await q.put({"task": "x"})
        deliveries = []
        for _ in range(2):
            with pytest.raises(ValueError):
                async with q.process() as msg:
                    assert msg is not None and msg.id == sid
                    deliveries.append(msg.deliveries)
                    raise ValueError("bad input")
        assert deliveries == [1, 2]  # the first failure released it, counted
        assert await q.get(5) == []
        (letter,) = await q.dead()
        assert (letter.source_id, letter.deliveries, letter.consumer, letter.error) == (
            sid, 2, b"w1", b"ValueError: bad input")
        assert letter.pairs == ((b"task", b"x"),)
        assert await pending(await target.aredis()) == 0

    target.run(body)


def test_consume_stats_and_requeue(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=0.01, max_deliveries=1)
        for i in range(3):
            await q.put({"n": str(i)})
        done = []
        consumer = q.consume(count=2, block=0.01)
        async with contextlib.aclosing(consumer):
            async for msg in consumer:
                done.append(msg.fields[b"n"])
                if len(done) == 2:
                    await msg.nack(counted=False)  # stopping: this delivery does not count
                    break
        assert done == [b"0", b"1"]
        stats = await q.stats()
        assert stats["length"] == 3 and stats["pending"] == 1 and stats["dead"] == 0
        assert stats["lag"] == 1 and stats["consumers"].keys() == {b"w1"}
        poison = await q.put({"n": "poison"})
        await asyncio.sleep(0.02)
        held = await q.get(5)  # the released one (its delivery not counted), then the new ones
        assert sorted((m.fields[b"n"], m.deliveries) for m in held) == [
            (b"1", 1), (b"2", 1), (b"poison", 1)]
        await asyncio.sleep(0.02)
        assert await q.get(5) == []  # each is past its single delivery: dead-lettered
        dead = await q.dead()
        assert sorted(d.fields[b"n"] for d in dead) == [b"1", b"2", b"poison"]
        assert poison in [d.source_id for d in dead]
        assert len(await q.dead(count=2)) == 2
        back = await q.requeue_dead([d.id for d in dead])
        assert len(back) == len(dead) and await q.dead() == []
        assert (await q.stats())["dead"] == 0
        assert await q.requeue_dead([]) == []
        with pytest.raises(QueueError, match=f"no dead-lettered message {dead[0].id.decode()}"):
            await q.requeue_dead([dead[0].id])  # already put back
        assert sorted(m.id for m in await q.get(5)) == sorted(back)

    target.run(body)


def test_consume_settles_each_batch_with_the_next_read(target: Target) -> None:
    """The messages of a batch the body neither acked nor nacked are acknowledged when the
    next batch is read; closing the loop acks the finished ones and releases the one in hand
    (counted) and the unread rest (uncounted)."""
    async def body() -> None:
        q = await target.queue(consumer="w1")
        ids = await q.put_many([{"n": str(i)} for i in range(5)])
        r = await target.aredis()
        consumer = q.consume(count=2, block=0.01)
        seen = []
        async for msg in consumer:
            seen.append(msg.id)
            if len(seen) == 3:  # the second batch read: the first one settled with it
                assert await pending(r) == 2
                await msg.ack()
            if len(seen) == 4:
                break
        assert await pending(r) == 1  # (the last batch is not settled until it is closed)
        await consumer.aclose()
        again = await q.get(5)
        assert [(m.id, m.deliveries) for m in again] == [(ids[3], 2), (ids[4], 1)]

    target.run(body)


def test_consume_left_by_a_break_settles_its_batch(target: Target) -> None:
    """A bare `break`: the loop closes the dropped generator in a task of its own; then the
    finished message is acknowledged and the one in hand released, counted (as the sync
    consume() does: the loop cannot tell a break for success from one for failure)."""
    async def body() -> None:
        q = await target.queue(consumer="w1")
        a, b, c = await q.put_many([{"n": "a"}, {"n": "b"}, {"n": "c"}])
        seen = []
        async for msg in q.consume(count=2, block=0.01):
            seen.append(msg.id)
            if len(seen) == 2:
                break
        await other_tasks_done()
        assert seen == [a, b]
        assert await pending(await target.aredis()) == 1  # a acknowledged
        assert [(m.id, m.deliveries) for m in await q.get(5)] == [(b, 2), (c, 1)]

    target.run(body)


def test_consume_cancelled_while_it_waits_keeps_what_it_finished(target: Target) -> None:
    """A consume() task cancelled while the loop waits for the next message: the finished
    message was acknowledged with that read, nothing is left pending, and a later put goes
    to the next get, first delivery."""
    async def body() -> None:
        q = await target.queue(consumer="w1")
        first = await q.put({"n": "first"})
        handled: list[bytes] = []
        got = asyncio.Event()

        async def work() -> None:
            async for msg in q.consume(count=1, block=FOREVER):
                handled.append(msg.id)
                got.set()

        task = asyncio.create_task(work())
        await got.wait()
        await until(lambda: _blocked_at_least(target, 1), "the consumer waits for more")
        await cancelled(task)
        await until(lambda: _blocked_at_most(target, 0), "the cancelled wait ends")
        r = await target.aredis()
        assert handled == [first] and await pending(r) == 0
        later = await q.put({"n": "later"})
        assert [(m.id, m.deliveries) for m in await q.get()] == [(later, 1)]

    target.run(body)


async def _blocked_at_least(target: Target, n: int) -> bool:
    return await target.blocked() >= n


async def _blocked_at_most(target: Target, n: int) -> bool:
    return await target.blocked() <= n


def test_sweep_acknowledges_messages_deleted_while_held(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1", visibility_timeout=0.01)
        a, b = await q.put({"n": "a"}), await q.put({"n": "b"})
        assert len(await q.get(2)) == 2
        r = await target.aredis()
        await r.xdel("jobs", a)
        await asyncio.sleep(0.02)
        assert await q.sweep() == 1  # only the deleted one; b is still pending, claimable
        assert [(m.id, m.deliveries) for m in await q.get(2)] == [(b, 2)]
        assert await pending(r) == 1

    target.run(body)


def test_stats_of_a_missing_queue_and_a_destroyed_group(target: Target) -> None:
    async def body() -> None:
        with pytest.raises(QueueError, match="no queue nope"):
            await (await target.queue("nope", create=False)).stats()
        q = await target.queue(group="g", consumer="w")
        await q.put({"n": 1})
        await (await target.aredis()).xgroup_destroy("jobs", "g")
        with pytest.raises(QueueError, match="group g of jobs is gone"):
            await q.get()

    target.run(body)


# --- cancellation -----------------------------------------------------------------------------


def test_a_task_cancelled_in_process_releases_its_message_uncounted(target: Target) -> None:
    """max_deliveries=1: a counted release would dead-letter it; an uncounted one gives the
    next get the same first delivery."""
    async def body() -> None:
        q = await target.queue(consumer="w1", max_deliveries=1)
        sid = await q.put({"n": "slow"})
        inside = asyncio.Event()
        seen = []

        async def work() -> None:
            async with q.process() as msg:
                assert msg is not None
                seen.append(msg.deliveries)
                inside.set()
                await asyncio.Event().wait()  # a handler still at work when cancelled

        task = asyncio.create_task(work())
        await inside.wait()
        await cancelled(task)
        (again,) = await q.get()
        assert (again.id, again.deliveries) == (sid, seen[0]) == (sid, 1)
        assert await q.dead() == []

    target.run(body)


def test_a_cancelled_blocking_get_loses_no_later_message(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1")
        producer = await target.queue(consumer="producer")
        for block in (FOREVER, 30.0):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(q.get(block=block), 0.05)
            # (over a socket the server ends the wait when it sees the connection close)
            await until(lambda: _blocked_at_most(target, 0), "the cancelled wait ends")
            sid = await producer.put({"n": "after"})
            assert [(m.id, m.deliveries) for m in await q.get(block=block)] == [(sid, 1)]
            await q.ack(sid)
        assert await pending(await target.aredis()) == 0

    target.run(body)


def test_a_blocked_get_is_served_by_a_put_from_another_task(target: Target) -> None:
    async def body() -> None:
        q = await target.queue(consumer="w1")
        producer = await target.queue(consumer="producer")
        waiting = asyncio.create_task(q.get(block=FOREVER))
        await until(lambda: _blocked_at_least(target, 1), "the get waits")
        sid = await producer.put({"n": "wake"})
        assert [(m.id, m.deliveries, m.fields) for m in await waiting] == [
            (sid, 1, {b"n": b"wake"})]

    target.run(body)


@pytest.mark.parametrize(("kind", "producer"), [
    ("embedded", "sync"), ("embedded", "async"),
    ("embedded-aof-always", "sync")])  # (an `always` put awaits its fsync: the get would run)
def test_a_get_served_then_cancelled_hands_its_message_back(tmp_path: Path, kind: str,
                                                            producer: str) -> None:
    """The race in this process: a put serves the blocked get (the message is delivered to its
    consumer in that instant) and the get's task is cancelled before it runs. The message
    goes back uncounted: another consumer's get has it as a first delivery."""
    engine = (Engine.open() if kind == "embedded"
              else Engine.open(str(tmp_path / "d"), appendfsync="always"))

    async def body() -> None:
        q = AsyncStreamQueue(engine, "jobs", consumer="w1")
        other = AsyncStreamQueue(engine, "jobs", consumer="w2")
        waiting = asyncio.create_task(q.get(block=FOREVER))
        for _ in range(ITERATIONS):
            if engine.waiting.blocked_clients():
                break
            await asyncio.sleep(0)
        assert engine.waiting.blocked_clients() == 1
        if producer == "sync":
            sid = StreamQueue(engine, "jobs", consumer="producer").put({"n": "raced"})
        else:
            sid = await AsyncStreamQueue(engine, "jobs", consumer="producer").put(
                {"n": "raced"})  # (runs at once: the get's task has not run since)
        assert not waiting.done()
        summary = engine.execute("XPENDING", "jobs", "workers")
        assert summary[0] == 1 and summary[3] == [[b"w1", b"1"]]  # served: w1's delivery
        await cancelled(waiting)
        assert engine.waiting.blocked_clients() == 0
        (msg,) = await other.get()
        assert (msg.id, msg.deliveries) == (sid, 1)  # as if w1 had never had it

    try:
        asyncio.run(body())
    finally:
        engine.close()


def test_consume_left_by_cancellation_settles_its_batch(target: Target) -> None:
    """A consume() task cancelled while its body handles a message, the loop closed by
    `contextlib.aclosing` (so that its batch is settled in that task): the finished message
    acknowledged, the one in hand released uncounted (the test below checks its count)."""
    async def body() -> None:
        q = await target.queue(consumer="w1")
        a, b, c = await q.put_many([{"n": "a"}, {"n": "b"}, {"n": "c"}])
        inside = asyncio.Event()

        async def work() -> None:
            consumer = q.consume(count=2, block=0.01)
            async with contextlib.aclosing(consumer):
                async for msg in consumer:
                    if msg.id == b:
                        inside.set()
                        await asyncio.Event().wait()

        task = asyncio.create_task(work())
        await inside.wait()
        await cancelled(task)
        assert await pending(await target.aredis()) == 1  # a acknowledged, b released
        again = [(m.id, m.deliveries) for m in await q.get(5)]
        assert again[1:] == [(c, 1)]
        assert again[0][0] == b  # released: deliverable again at once

    target.run(body)


def test_consume_left_by_cancellation_does_not_count_the_message_in_hand() -> None:
    """The documented rule: "left by a cancellation, the message in hand is released
    uncounted". A task is cancelled while its body awaits (the usual place: a handler doing
    I/O); the CancelledError is raised in the task, outside the generator, which is then
    closed by aclosing's aclose() (GeneratorExit): it takes that for a `break`. (The fix:
    consume() catching GeneratorExit too, with `cancelled = task.cancelling() > 0` for the
    current task.)"""
    engine = Engine.open()

    async def body() -> None:
        q = AsyncStreamQueue(engine, "jobs", consumer="w1")
        sid = await q.put({"n": "slow"})
        inside = asyncio.Event()

        async def work() -> None:
            consumer = q.consume(count=1, block=0.01)
            async with contextlib.aclosing(consumer):
                async for _msg in consumer:
                    inside.set()
                    await asyncio.Event().wait()

        task = asyncio.create_task(work())
        await inside.wait()
        await cancelled(task)
        assert [(m.id, m.deliveries) for m in await q.get()] == [(sid, 1)]

    try:
        asyncio.run(body())
    finally:
        engine.close()


# --- sync and async together, and refused clients ---------------------------------------------


def test_sync_and_async_queues_share_a_queue(target: Target) -> None:
    async def body() -> None:
        aq = await target.queue(consumer="async")
        sq = StreamQueue(target.sync_client(), "jobs", consumer="sync")
        from_sync = sq.put({"from": "sync"})
        from_async = await aq.put({"from": "async"})
        (got,) = await aq.get()
        assert (got.id, got.fields) == (from_sync, {b"from": b"sync"})
        (other,) = sq.get()
        assert (other.id, other.fields) == (from_async, {b"from": b"async"})
        await got.ack()
        other.nack(counted=False)
        assert sq.stats()["pending"] == 1  # released, still in the group's pending list
        (again,) = await aq.get()
        assert (again.id, again.deliveries) == (from_async, 1)
        await again.ack()
        stats = await aq.stats()
        assert stats["pending"] == 0 and stats["length"] == 2
        assert stats["consumers"].keys() == {b"async", b"sync"} == sq.stats()["consumers"].keys()

    target.run(body)


def test_each_queue_refuses_the_other_kind_of_client(shared_dir: Path) -> None:
    import redis

    engine = Engine.open()
    shared = Engine.open(str(shared_dir), shared=True)

    async def body() -> None:
        for client in (engine.aredis(), shared.aredis()):
            with pytest.raises(TypeError, match="is an asyncio client: StreamQueue does not "
                                                "support async clients"):
                StreamQueue(client, "jobs")
            await client.aclose()
        sync_client = redis.Redis(port=1)  # (never connects: refused before any command)
        for wrong in (object(), "redis://127.0.0.1:6379", sync_client):
            with pytest.raises(QueueError, match="is neither an Engine nor an AsyncRedis"):
                AsyncStreamQueue(wrong, "jobs")
        sync_client.close()
        given_shared = AsyncStreamQueue(shared, "jobs", consumer="w")  # (its aredis() is used)
        sid = await given_shared.put({"n": 1})
        assert [m.id for m in await given_shared.get()] == [sid]
        await given_shared.redis.aclose()
        q = AsyncStreamQueue(engine, "jobs")
        with pytest.raises(QueueError, match="block must be more than 0 seconds"):
            async for _msg in q.consume(block=0):
                pass
        with pytest.raises(QueueError, match="block must be None or a number of seconds"):
            await q.get(block=-1)
        with pytest.raises(QueueError, match="max_deliveries must be at least 1"):
            AsyncStreamQueue(engine, "jobs", max_deliveries=0)

    try:
        asyncio.run(body())
    finally:
        shared.close()
        engine.close()


# --- scale ------------------------------------------------------------------------------------

WAITERS = 1000


def test_a_thousand_blocked_gets_each_get_one_of_a_thousand_puts() -> None:
    """1,000 tasks wait in get(block=inf) on one queue; another task puts 1,000 messages,
    yielding to the loop after each. Each message goes to exactly one task, and a ticker task
    kept turning all along (its iterations counted, not timed): no wait parked the loop."""
    engine = Engine.open()

    async def body() -> None:
        q = AsyncStreamQueue(engine, "jobs", consumer="w")
        producer = AsyncStreamQueue(engine, "jobs", consumer="producer")
        received: list[list[bytes]] = []

        async def worker() -> None:
            received.append([m.id for m in await q.get(block=FOREVER)])

        workers = [asyncio.create_task(worker()) for _ in range(WAITERS)]
        for _ in range(ITERATIONS):
            if engine.waiting.blocked_clients() == WAITERS:
                break
            await asyncio.sleep(0)
        assert engine.waiting.blocked_clients() == WAITERS
        ticks = 0
        running = True

        async def ticker() -> None:
            nonlocal ticks
            while running:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        put: list[bytes] = []

        async def produce() -> None:
            for i in range(WAITERS):
                put.append(await producer.put({"n": i}))
                await asyncio.sleep(0)

        before = ticks
        await asyncio.create_task(produce())
        during = ticks - before
        await asyncio.gather(*workers)
        running = False
        await ticking
        assert all(len(ids) == 1 for ids in received)  # one message per get
        delivered = [ids[0] for ids in received]
        assert len(delivered) == WAITERS and sorted(delivered) == sorted(put)  # each once
        assert during >= WAITERS // 2, f"the loop turned {during} times during the puts"
        assert engine.waiting.blocked_clients() == 0
        stats = await q.stats()
        assert stats["pending"] == WAITERS and stats["lag"] == 0

    try:
        asyncio.run(body())
    finally:
        engine.close()
