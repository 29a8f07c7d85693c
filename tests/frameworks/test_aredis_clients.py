"""Frameworks handed a redis.asyncio client *instance* get streamkeep's `AsyncRedis` instead, with
no server: `Engine.aredis()` in this process, and a shared directory's `aredis()` (its detached
server, reached over the directory's socket). Each scenario runs on both.

* saq (`saq.queue.redis.RedisQueue(redis, name=...)`: its Lua scripts through register_script
  (enqueue, schedule, sweep), BLMOVE to dequeue, MULTI/EXEC pipelines to retry, finish and
  abort, SET/MGET/SCAN for jobs, PSUBSCRIBE for job updates, INFO for the version): jobs enqueued
  and run by a `Worker` in the same event loop, results read back (`jobs`, `apply`, `listen`,
  `info`); a failing job retried then failed, a flaky one retried (at once, and after a delay
  through the schedule script) then completed, a job scheduled in the past, a queued job
  aborted; and jobs enqueued, the engine closed, reopened from its directory with every job
  still queued, then run;
* redis-py's own `redis.asyncio.lock.Lock(client, name)` (SET NX PX, EVALSHA scripts):
  mutual exclusion between tasks, a TTL that hands the lock to a waiting task and leaves the
  lapsed holder owning nothing, extend (added and replaced TTL) and reacquire.

Also what such code reaches for besides the commands, as redis.asyncio has it: the client's
`connection_pool` (saq's `disconnect()`, the Lock's explicit token and its `owned()` on a
decoding client), `lock()`, an `aclose()` that ends the client's subscribers, and a registered
script called with another client (redis-py's Lock caches its scripts on the class, so the
first client's script serves every later Lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from redis.asyncio.lock import Lock
from redis.exceptions import LockError, LockNotOwnedError
from saq import Worker
from saq.job import TERMINAL_STATUSES, Job, Status
from saq.queue.redis import RedisQueue

from streamkeep import Engine
from streamkeep.aof.manifest import SHARED_SOCKET

pytestmark = pytest.mark.timeout(120)

GUARD = 60.0  # seconds: only so that a lost wake-up fails instead of hanging the run
LONG = 300.0  # seconds: a lock TTL no step of a test outlives
POLL = 0.01  # seconds between two looks at a job's state

Client = Any  # streamkeep's AsyncRedis, standing where a redis.asyncio.Redis is expected


# --- where the client comes from ----------------------------------------------------------------


class Place:
    """A data directory opened embedded (`Engine.open(path)`) or shared (`shared=True`): its
    `aredis()` clients, and a close and reopen of the same directory."""

    def __init__(self, kind: str, path: Path, **options: Any) -> None:
        self.kind, self.path, self.options = kind, path, options
        self.engine: Any = None
        self.open()

    def open(self) -> None:
        assert self.engine is None
        if self.kind == "shared":
            self.engine = Engine.open(str(self.path), shared=True)
        else:
            self.engine = Engine.open(str(self.path), **self.options)

    def close(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()

    def reopen(self) -> None:
        self.close()
        if self.kind == "shared":  # (its detached server goes too: the directory is reloaded)
            from tests.support.shared_dirs import stop_servers

            assert stop_servers(self.path), "the shared directory had no server"
        self.open()

    def aredis(self, decode_responses: bool = False) -> Client:
        return self.engine.aredis(decode_responses=decode_responses)


@pytest.fixture(params=["embedded", "shared"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "shared":
        path: Path = request.getfixturevalue("shared_dir")
    else:
        path = tmp_path / "data"
    found = Place(request.param, path)
    try:
        yield found
    finally:
        found.close()


def run(body: Callable[[], Awaitable[None]]) -> None:
    async def guarded() -> None:
        await asyncio.wait_for(body(), GUARD * 2)

    asyncio.run(guarded())


# --- saq ------------------------------------------------------------------------------------------

QUEUE = "sk"


async def add(ctx: Any, *, a: int, b: int) -> int:
    return a + b


async def boom(ctx: Any) -> None:
    raise ValueError("boom")


async def flaky(ctx: Any, *, succeed_on: int) -> int:
    """Fails until its job's `succeed_on`-th attempt, then returns that attempt's number."""
    attempts: int = ctx["job"].attempts
    if attempts < succeed_on:
        raise RuntimeError(f"attempt {attempts} fails")
    return attempts


FUNCTIONS: list[Any] = [add, boom, flaky]


@contextlib.asynccontextmanager
async def queue_on(client: Client) -> AsyncIterator[RedisQueue]:
    """saq's Redis queue over `client`, closed on the way out as its `disconnect()` would (that
    needs `connection_pool`: test_saq_disconnect), its subscriber closed too (the client's
    aclose leaves it open: test_aclose_ends_the_clients_subscribers)."""
    queue = RedisQueue(client, name=QUEUE)
    await queue.connect()
    try:
        yield queue
    finally:
        await queue._pubsub.close()
        await queue._pubsub.pubsub.aclose()
        await client.aclose()


@contextlib.asynccontextmanager
async def running_worker(queue: RedisQueue, concurrency: int = 4) -> AsyncIterator[Worker[Any]]:
    """A saq Worker started in this event loop (no signal handlers: pytest keeps its own),
    stopped on the way out.

    The sweep is run first, with nothing active: saq's worker sweeps at its start, racing its
    own first dequeues (a job BLMOVEd to the active list but not yet marked active is "swept",
    aborted; seen against redis-server 7.0 too, about one start in ten); the sweep's lock
    (SETEX, 60 s) then keeps the worker's from running during the test."""
    assert await queue.count("active") == 0
    assert await queue.sweep() == []
    worker: Worker[Any] = Worker(queue, FUNCTIONS, concurrency=concurrency)
    worker.SIGNALS = []
    task = asyncio.create_task(worker.start())
    try:
        yield worker
    finally:
        await worker.stop()
        await task


async def settled(queue: RedisQueue, keys: list[str]) -> list[Job]:
    """The jobs of `keys` once every one of them is complete, failed or aborted."""
    while True:
        jobs = await queue.jobs(keys)
        if all(job is not None and job.status in TERMINAL_STATUSES for job in jobs):
            return [job for job in jobs if job is not None]
        await asyncio.sleep(POLL)


async def counted(queue: RedisQueue, complete: int, failed: int = 0) -> None:
    """Waits until the worker counted `complete` and `failed` jobs: saq counts a job once it
    stored its status, so one already seen finished may not be counted yet (and a worker
    stopped then never counts it)."""
    while queue.complete < complete or queue.failed < failed:
        await asyncio.sleep(POLL)


async def enqueue(queue: RedisQueue, function: str, **kwargs: Any) -> Job:
    job = await queue.enqueue(function, **kwargs)
    assert job is not None, f"{function} {kwargs} was not enqueued"
    return job


async def psubscribed(client: Client) -> None:
    """Waits until a subscriber listens on a pattern (saq's multiplexer subscribes in a task
    of its own)."""
    try:
        while await client.execute_command("PUBSUB", "NUMPAT") < 1:
            await asyncio.sleep(POLL)
    finally:
        await client.aclose()


def test_saq_worker_runs_enqueued_jobs(place: Place) -> None:
    count = 20

    async def body() -> None:
        async with queue_on(place.aredis()) as queue:
            assert (await queue.version())[0] >= 8  # INFO's redis_version
            jobs = [await enqueue(queue, "add", a=n, b=1000) for n in range(count)]
            keys = [job.key for job in jobs]
            assert await queue.enqueue("add", key=keys[0], a=0, b=0) is None  # (not twice)
            assert await queue.count("queued") == count
            assert await queue.count("incomplete") == count

            finished: dict[str, Status] = {}

            def seen(key: str, status: Status) -> bool:  # (saq's PSUBSCRIBE notifications)
                if status in TERMINAL_STATUSES:
                    finished[key] = status
                return len(finished) == count

            listening = asyncio.create_task(queue.listen(keys, seen, timeout=GUARD))
            await psubscribed(place.aredis())
            async with running_worker(queue) as worker:
                await listening
                assert finished == dict.fromkeys(keys, Status.COMPLETE)
                done = await settled(queue, keys)
                assert [job.result for job in done] == [n + 1000 for n in range(count)]
                assert all(job.attempts == 1 and job.worker_id == worker.id for job in done)

                # queue.apply: one more job, its result waited for by polling MGET.
                assert await queue.apply("add", a=2, b=3, timeout=GUARD,
                                         poll_interval=POLL) == 5
                info = await queue.info(jobs=True)
                assert str(worker.id) in info["workers"]  # (its SETEX'd worker_info)
                assert (info["queued"], info["active"], info["scheduled"]) == (0, 0, 0)
                await counted(queue, count + 1)
            assert queue.complete == count + 1
            assert await queue.count("incomplete") == 0
            stored = [job async for job in queue.iter_jobs([Status.COMPLETE])]  # (SCAN)
            assert len(stored) == count + 1

    run(body)


def test_saq_retries_then_fails_or_completes(place: Place) -> None:
    async def body() -> None:
        async with queue_on(place.aredis()) as queue:
            failing = await enqueue(queue, "boom", retries=3)
            at_once = await enqueue(queue, "flaky", retries=5, succeed_on=3)
            # A retry after a delay waits in the incomplete sorted set until saq's schedule
            # script (run by the worker every second) moves it back to the queue.
            delayed = await enqueue(queue, "flaky", retries=5, succeed_on=2, retry_delay=0.01,
                                    retry_backoff=False)
            scheduled = await enqueue(queue, "add", a=1, b=2, scheduled=1)  # (already due)
            aborted = await enqueue(queue, "add", a=3, b=4)
            assert await queue.count("queued") == 4  # (the scheduled job is not queued yet)
            await queue.abort(aborted, "not wanted")
            assert await queue.count("queued") == 3

            async with running_worker(queue, concurrency=2):
                got = await settled(queue, [failing.key, at_once.key, delayed.key,
                                            scheduled.key, aborted.key])
                await counted(queue, 3, failed=1)
            boomed, thrice, twice, due, dropped = got

            assert boomed.status == Status.FAILED and boomed.attempts == 3
            assert boomed.error is not None and "ValueError: boom" in boomed.error
            assert (thrice.status, thrice.attempts, thrice.result) == (Status.COMPLETE, 3, 3)
            assert (twice.status, twice.attempts, twice.result) == (Status.COMPLETE, 2, 2)
            assert (due.status, due.result) == (Status.COMPLETE, 3)
            assert (dropped.status, dropped.error, dropped.attempts) == \
                (Status.ABORTED, "not wanted", 0)
            assert (queue.retried, queue.failed, queue.complete) == (2 + 2 + 1, 1, 3)
            for kind in ("queued", "active", "incomplete"):
                assert await queue.count(kind) == 0, kind  # type: ignore[arg-type]

    run(body)


@pytest.mark.parametrize("appendfsync", ["everysec", "always"])
def test_saq_jobs_survive_a_restart(tmp_path: Path, appendfsync: str) -> None:
    """Embedded and durable: jobs enqueued, the engine closed and reopened from its directory,
    every job still queued (nothing lost, nothing run), then run by a worker."""
    place = Place("embedded", tmp_path / "data", appendfsync=appendfsync)
    count = 10
    keys: list[str] = []

    async def before() -> None:
        async with queue_on(place.aredis()) as queue:
            for n in range(count):
                keys.append((await enqueue(queue, "add", a=n, b=n)).key)
            assert await queue.count("queued") == count

    async def after() -> None:
        async with queue_on(place.aredis()) as queue:
            assert await queue.count("queued") == count
            jobs = await queue.jobs(keys)
            assert [(job.status, job.kwargs) for job in jobs if job is not None] == \
                [(Status.QUEUED, {"a": n, "b": n}) for n in range(count)]
            async with running_worker(queue):
                done = await settled(queue, keys)
            assert [job.result for job in done] == [2 * n for n in range(count)]
            assert await queue.count("queued") == await queue.count("incomplete") == 0

    try:
        run(before)
        place.reopen()
        run(after)
    finally:
        place.close()


def test_saq_jobs_survive_a_shared_directory_restart(shared_dir: Path) -> None:
    """The same over a shared directory: its server stopped, the directory opened again."""
    place = Place("shared", shared_dir)
    keys: list[str] = []

    async def before() -> None:
        async with queue_on(place.aredis()) as queue:
            for n in range(5):
                keys.append((await enqueue(queue, "add", a=n, b=1)).key)

    async def after() -> None:
        async with queue_on(place.aredis()) as queue:
            assert await queue.count("queued") == 5
            async with running_worker(queue):
                done = await settled(queue, keys)
            assert [job.result for job in done] == [n + 1 for n in range(5)]

    try:
        run(before)
        place.reopen()
        run(after)
    finally:
        place.close()


def test_saq_disconnect(place: Place) -> None:
    async def body() -> None:
        queue = RedisQueue(place.aredis(), name=QUEUE)
        await queue.connect()
        await enqueue(queue, "add", a=1, b=1)
        try:
            await queue.disconnect()
        finally:
            await queue._pubsub.pubsub.aclose()  # (test_aclose_ends_the_clients_subscribers)

    run(body)


def test_aclose_ends_the_clients_subscribers(place: Place) -> None:
    async def body() -> None:
        client = place.aredis()
        pubsub = client.pubsub()
        await pubsub.psubscribe("saq:*")
        await client.aclose()
        other = place.aredis()
        try:
            assert await other.execute_command("PUBSUB", "NUMPAT") == 0
        finally:
            await pubsub.aclose()  # (this test's own cleanup, whatever the outcome)
            await other.aclose()

    run(body)


# --- redis-py's asyncio Lock --------------------------------------------------------------------

KEY = "fw:alock"


@pytest.fixture(autouse=True)
def lock_scripts(monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py's Lock registers its three scripts once, on the class, with the first client
    it is given: each test starts without them and leaves none of its own behind."""
    for name in ("lua_release", "lua_extend", "lua_reacquire"):
        monkeypatch.setattr(Lock, name, None)


def test_lock_excludes_other_tasks(place: Place) -> None:
    tasks, rounds = 8, 5

    async def body() -> None:
        client = place.aredis()
        inside: list[int] = []
        most = 0

        async def contender(number: int) -> None:
            nonlocal most
            for _ in range(rounds):
                async with Lock(client, KEY, timeout=LONG, sleep=0.001, blocking_timeout=GUARD):
                    inside.append(number)
                    most = max(most, len(inside))
                    value = await client.get("fw:counter")  # a read-modify-write the lock guards
                    await asyncio.sleep(0)
                    await client.set("fw:counter", int(value or 0) + 1)
                    inside.remove(number)

        await asyncio.gather(*(contender(n) for n in range(tasks)))
        assert most == 1
        assert int(await client.get("fw:counter")) == tasks * rounds
        assert await client.exists(KEY) == 0
        await client.aclose()

    run(body)


def test_lock_acquire_refuse_extend_reacquire_release(place: Place) -> None:
    async def body() -> None:
        client = place.aredis()
        first = Lock(client, KEY, timeout=LONG)
        second = Lock(client, KEY, timeout=LONG, sleep=0.01)
        assert await first.acquire(blocking=False)
        assert await first.owned() and await first.locked()
        assert not await second.acquire(blocking=False)
        assert not await second.acquire(blocking=True, blocking_timeout=0.05)
        assert not await second.owned()

        assert await first.extend(LONG)  # added to the TTL left
        assert await client.pttl(KEY) > LONG * 1000
        assert await first.extend(LONG / 2, replace_ttl=True)
        assert 0 < await client.pttl(KEY) <= LONG / 2 * 1000
        assert await first.reacquire()  # back to the lock's own timeout
        assert LONG / 2 * 1000 < await client.pttl(KEY) <= LONG * 1000
        with pytest.raises(LockError):
            await Lock(client, KEY).extend(1)  # never acquired: no token

        await first.release()
        assert not await first.locked() and await client.exists(KEY) == 0
        with pytest.raises(LockError):  # released already: nothing left to release
            await first.release()
        assert await second.acquire(blocking=True, blocking_timeout=GUARD)
        assert await second.owned() and not await first.owned()
        await second.release()
        await client.aclose()

    run(body)


def test_lock_ttl_hands_it_to_a_waiting_task(place: Place) -> None:
    async def body() -> None:
        client = place.aredis()
        lapsed = Lock(client, KEY, timeout=0.05)
        assert await lapsed.acquire(blocking=False)
        waiter = Lock(client, KEY, timeout=LONG, sleep=0.01)
        taken = asyncio.create_task(waiter.acquire(blocking=True, blocking_timeout=GUARD))
        assert await taken  # once the holder's TTL ran out
        assert await waiter.owned() and not await lapsed.owned()
        with pytest.raises(LockNotOwnedError):
            await lapsed.extend(1)
        with pytest.raises(LockNotOwnedError):
            await lapsed.reacquire()
        with pytest.raises(LockNotOwnedError):
            await lapsed.release()
        assert await waiter.owned()  # the failed calls left the new holder's lock alone
        assert await client.pttl(KEY) > 0
        await waiter.release()
        await client.aclose()

    run(body)


@pytest.mark.parametrize("case", ["explicit token", "owned() decoding"])
def test_lock_encodes_with_the_clients_encoder(place: Place, case: str) -> None:
    async def body() -> None:
        if case == "explicit token":
            lock = Lock(place.aredis(), KEY, timeout=LONG)
            assert await lock.acquire(blocking=False, token="mine")
            assert lock.local.token == b"mine"
        else:
            lock = Lock(place.aredis(decode_responses=True), KEY, timeout=LONG)
            assert await lock.acquire(blocking=False)
            assert await lock.owned()
        await lock.release()

    run(body)


def test_lock_method(place: Place) -> None:
    async def body() -> None:
        client = place.aredis()
        lock = client.lock(KEY, timeout=LONG)
        async with lock:
            assert await lock.owned()
        await client.aclose()

    run(body)


def test_lock_scripts_registered_by_aredis_serve_a_redis_py_client(shared_dir: Path) -> None:
    place = Place("shared", shared_dir)

    async def body() -> None:
        ours = Lock(place.aredis(), KEY, timeout=LONG)  # (registers the class's scripts)
        assert await ours.acquire(blocking=False)
        await ours.release()
        real = redis.asyncio.Redis(unix_socket_path=str(shared_dir / SHARED_SOCKET))
        try:
            theirs = Lock(real, KEY, timeout=LONG)
            assert await theirs.acquire(blocking=False)
            await theirs.release()  # EVALSHA through the streamkeep-made script
        finally:
            await real.aclose()

    try:
        run(body)
    finally:
        place.close()


logging.getLogger("saq").setLevel(logging.CRITICAL)  # (its tracebacks of the failing jobs)
