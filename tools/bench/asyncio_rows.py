"""The ``asyncio`` section's workloads: one task awaiting one call at a time, on
``Engine.aredis()`` against the sync calls, redis.asyncio, burner-redis; a child SIGKILLed after
its writes (the entries kept); AsyncStreamQueue; a thousand tasks blocked in ``get`` (the
loop's longest stall). Must not touch: the engine, the queue (public APIs only).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import workqueue
from streamkeep.tools.bench.workload import (
    KEY,
    Measurement,
    Size,
    Skip,
    rate,
    timed,
    warmup_size,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

CALLS = Size(1, per_n=True, least=1_000)  # the XADD rows (redis.asyncio: a tenth)
KILL_WRITES = Size(100_000, 10_000)
BLOCKED_TASKS = 1_000  # (quick: a tenth)
CHILD_TIMEOUT = 300.0


async def _timed_xadds(xadd: Callable[..., Awaitable[Any]], n: int) -> float:
    for _ in range(warmup_size(n)):
        await xadd("warmup", {"f": "v"})
    began = time.perf_counter()
    for _ in range(n):
        await xadd(KEY, {"f": "v"})
    return time.perf_counter() - began


def bench_aredis_xadd(env: BenchEnv, name: str | None = None) -> Measurement:
    """The awaited XADD loop on a fresh ``Engine.aredis()``: in memory, or with an everysec
    AOF on a data directory (``name``)."""
    settings = {} if name is None else {"appendfsync": "everysec",
                                        "auto_aof_rewrite_percentage": 0}
    with env.engine(name, **settings) as engine:
        return rate(CALLS(env), asyncio.run(_timed_xadds(engine.aredis().xadd, CALLS(env))))


def bench_sync_xadd(env: BenchEnv) -> Measurement:
    """The same loop with the sync calls (``Engine.redis()``)."""
    def loop(key: str, count: int) -> None:
        for _ in range(count):
            xadd(key, {"f": "v"})

    with env.engine() as engine:
        xadd = engine.redis().xadd
        return rate(CALLS(env), timed(loop, CALLS(env)))


def bench_redis_asyncio_xadd(env: BenchEnv) -> Measurement:
    import redis.asyncio

    kwargs = env.redis.connection_pool.connection_kwargs  # (starts the run's redis-server)
    return _on_client(lambda: redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"]),
                      max(CALLS(env) // 10, 1_000), flush=True)


def _on_client(make: Callable[[], Any], n: int, flush: bool = False) -> Measurement:
    """The awaited XADD loop on the async client ``make()`` (with ``flush``, its database
    emptied before and after), closed at the end."""
    async def run() -> float:
        db = make()
        try:
            if flush:
                await db.flushall()
            return await _timed_xadds(db.xadd, n)
        finally:
            if flush:
                await db.flushall()
            await db.aclose()

    return rate(n, asyncio.run(run()))


def _burner() -> Any:
    try:
        from burner_redis import BurnerRedis  # type: ignore[import-untyped]
    except ImportError:
        raise Skip("burner-redis is not installed (pip install 'streamkeep[dev]')") from None
    return BurnerRedis


def bench_burner_xadd(env: BenchEnv) -> Measurement:
    return _on_client(_burner(), CALLS(env))


# --- SIGKILL after the writes ---------------------------------------------------------------

CHILD = """
import asyncio, sys, time
which, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
async def main():
    if which == "streamkeep":
        from streamkeep import Engine
        db = Engine.open(path, appendfsync="everysec").aredis()
    else:
        from burner_redis import BurnerRedis  # type: ignore[import-untyped]
        db = BurnerRedis(persistence_path=path)
    began = time.perf_counter()
    for _ in range(n):
        await db.xadd("kept", {"f": "v"})
    print(n / (time.perf_counter() - began), flush=True)
    await asyncio.sleep(3600)  # killed here
asyncio.run(main())
"""


def _killed(env: BenchEnv, which: str, count: Callable[[str], int]) -> Measurement:
    """Run the child until it says its writes are done, SIGKILL it, then ``count(path)`` the
    entries kept; the child's writes/s, figure ``kept``."""
    n = KILL_WRITES(env)
    with env.data_dir(f"asyncio-kill-{which}") as directory:
        path = directory if which == "streamkeep" else os.path.join(directory, "burner.dat")
        child = subprocess.Popen([sys.executable, "-c", CHILD, which, path, str(n)],
                                 stdout=subprocess.PIPE, text=True, **temporaries.child_options())
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            if not line:
                raise AssertionError(f"the {which} child ended before its writes were done")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            child.wait(CHILD_TIMEOUT)
            if child.stdout is not None:
                child.stdout.close()
        return Measurement(float(line), count=n, figures={"kept": count(path)})


def bench_kill_streamkeep(env: BenchEnv) -> Measurement:
    from streamkeep import Engine

    def kept(path: str) -> int:
        with Engine.open(path) as engine:
            return int(engine.execute("XLEN", "kept"))

    return _killed(env, "streamkeep", kept)


def bench_kill_burner(env: BenchEnv) -> Measurement:
    burner = _burner()

    async def kept(path: str) -> int:
        db = burner(persistence_path=path)
        try:
            return int(await db.xlen("kept"))
        finally:
            await db.aclose()

    return _killed(env, "burner", lambda path: asyncio.run(kept(path)))


def bench_async_queue(env: BenchEnv) -> Measurement:
    from streamkeep import AsyncStreamQueue

    n = workqueue.CYCLES(env)
    with workqueue.engine(env, "asyncio-queue") as engine:
        async def run() -> float:
            q = AsyncStreamQueue(engine, "jobs", consumer="bench")
            for count in (min(n // 10, 2_000), n):  # a warm-up, then the timed loop
                began = time.perf_counter()
                for i in range(count):
                    await q.put({"n": i})
                    await (await q.get())[0].ack()
            return time.perf_counter() - began

        return rate(n, asyncio.run(run()))


def bench_blocked_gets(env: BenchEnv) -> Measurement:
    from streamkeep import AsyncStreamQueue

    tasks = BLOCKED_TASKS // 10 if env.quick else BLOCKED_TASKS
    with env.engine() as engine:
        delivered, seconds, stall, put_s = asyncio.run(_blocked_gets(
            AsyncStreamQueue(engine, "jobs", consumer="bench"), tasks))
    if sorted(delivered) != list(range(tasks)):
        raise AssertionError(f"{len(delivered)} deliveries of {tasks} messages, "
                             f"{len(set(delivered))} distinct")
    return rate(tasks, seconds, longest_stall_us=stall * 1e6, put_us=put_s * 1e6)


async def _blocked_gets(q: Any, tasks: int) -> tuple[list[int], float, float, float]:
    """(the messages delivered, the seconds from the first put to the last delivery, the
    loop's longest stall, the mean seconds of one put)."""
    delivered: list[int] = []
    gaps, running = [0.0], [True]

    async def ticker() -> None:
        # The loop's own time between two of the ticker's turns: the thread's CPU time, so
        # that another process taking the core meanwhile is not counted as the loop's stall.
        clock = time.thread_time
        last = clock()
        while running[0]:
            await asyncio.sleep(0)
            now = clock()
            gaps[0], last = max(gaps[0], now - last), now

    async def worker() -> None:
        (msg,) = await q.get(block=float("inf"))
        delivered.append(int(msg.fields[b"n"]))
        await msg.ack()

    await q.put({"n": -1})  # the stream and group made, then emptied
    await (await q.get())[0].ack()
    workers = [asyncio.create_task(worker()) for _ in range(tasks)]
    await asyncio.sleep(0)  # every worker blocked
    tick = asyncio.create_task(ticker())
    began, put_time = time.perf_counter(), 0.0
    for i in range(tasks):
        t = time.perf_counter()
        await q.put({"n": i})
        put_time += time.perf_counter() - t
        await asyncio.sleep(0)
    while len(delivered) < tasks:  # the last ones served: their tasks' next turns
        await asyncio.sleep(0)
    seconds = time.perf_counter() - began
    running[0] = False  # (before the gather: its thousand callbacks are the harness's)
    await tick
    await asyncio.gather(*workers)
    return delivered, seconds, gaps[0], put_time / tasks
