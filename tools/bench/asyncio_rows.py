"""The ``asyncio`` section: the engine and the work queue inside an event loop, against
redis.asyncio to a redis-server, the synchronous calls, burner-redis (an in-process Redis for
asyncio) and persist-queue, in the same run.

Owns its workloads:
- ``asyncio.aredis_xadd``: ``await r.xadd(...)`` one at a time on ``Engine.aredis()`` (in
  memory); ``asyncio.sync_xadd``: ``Engine.redis().xadd`` on a fresh engine, the same loop;
  ``asyncio.redis_asyncio_xadd``: redis.asyncio to the run's redis-server, one command per
  round trip (its pipelines of one);
- ``asyncio.aredis_xadd_everysec``: the same awaited XADD on a data directory with an AOF
  fsynced every second; ``asyncio.burner_xadd``: burner-redis's ``await db.xadd`` in memory
  (skipped if burner-redis is not installed);
- ``asyncio.kill_streamkeep`` / ``asyncio.kill_burner``: a child process makes KILL_WRITES
  awaited XADDs (streamkeep everysec; burner-redis with its persistence file), says so, and is
  killed with SIGKILL; the directory or file is reopened and the entries kept are counted (the
  ``kept`` figure); the rate is the child's writes/s;
- ``asyncio.queue``: AsyncStreamQueue, everysec, one task, put + get + ack per message, and
  ``asyncio.sync_queue`` (StreamQueue, the same) and ``asyncio.persist_queue``
  (persist-queue's SQLiteAckQueue, the queue section's reference) in the same run;
- ``asyncio.blocked_gets``: BLOCKED_TASKS tasks blocked in ``get(block=inf)`` on one queue,
  then as many puts from another task: every message delivered once; figures: the loop's
  longest stall (the most CPU time the loop's thread spent between two turns of a ticker
  task) and the mean time of one put (the command batch that serves one waiter). Reported,
  not a target.
Must not touch: the engine, the queue (driven through their public APIs only), the section
declarations (.sections).
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
from streamkeep.tools.bench.workload import Measurement, Skip, warmup_size

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

KEY = "bench"
KILL_WRITES = 100_000
BLOCKED_TASKS = 1_000
CHILD_TIMEOUT = 300.0


def _n(env: BenchEnv) -> int:
    return max(env.n, 1_000)


async def _timed_xadds(xadd: Callable[..., Awaitable[Any]], n: int) -> float:
    for _ in range(warmup_size(n)):
        await xadd("warmup", {"f": "v"})
    began = time.perf_counter()
    for _ in range(n):
        await xadd(KEY, {"f": "v"})
    return time.perf_counter() - began


def bench_aredis_xadd(env: BenchEnv) -> Measurement:
    from streamkeep import Engine

    n = _n(env)
    engine = Engine.open()
    try:
        seconds = asyncio.run(_timed_xadds(engine.aredis().xadd, n))
    finally:
        engine.close()
    return Measurement(n / seconds, count=n)


def bench_sync_xadd(env: BenchEnv) -> Measurement:
    from streamkeep import Engine

    n = _n(env)
    engine = Engine.open()
    try:
        xadd = engine.redis().xadd
        for _ in range(warmup_size(n)):
            xadd("warmup", {"f": "v"})
        began = time.perf_counter()
        for _ in range(n):
            xadd(KEY, {"f": "v"})
        seconds = time.perf_counter() - began
    finally:
        engine.close()
    return Measurement(n / seconds, count=n)


def bench_redis_asyncio_xadd(env: BenchEnv) -> Measurement:
    import redis.asyncio

    client = env.redis  # (starts the run's redis-server)
    kwargs = client.connection_pool.connection_kwargs
    n = max(_n(env) // 10, 1_000)

    async def run() -> float:
        r = redis.asyncio.Redis(host=kwargs["host"], port=kwargs["port"])
        try:
            await r.flushall()
            return await _timed_xadds(r.xadd, n)
        finally:
            await r.flushall()
            await r.aclose()

    return Measurement(n / asyncio.run(run()), count=n)


def bench_aredis_xadd_everysec(env: BenchEnv) -> Measurement:
    from streamkeep import Engine

    n = _n(env)
    with env.data_dir("asyncio-everysec") as path:
        engine = Engine.open(path, appendfsync="everysec", auto_aof_rewrite_percentage=0)
        try:
            seconds = asyncio.run(_timed_xadds(engine.aredis().xadd, n))
        finally:
            engine.close()
    return Measurement(n / seconds, count=n)


def _burner() -> Any:
    try:
        from burner_redis import BurnerRedis  # type: ignore[import-untyped]
    except ImportError:
        raise Skip("burner-redis is not installed (pip install 'streamkeep[dev]')") from None
    return BurnerRedis


def bench_burner_xadd(env: BenchEnv) -> Measurement:
    burner = _burner()
    n = _n(env)

    async def run() -> float:
        db = burner()
        try:
            return await _timed_xadds(db.xadd, n)
        finally:
            await db.aclose()

    return Measurement(n / asyncio.run(run()), count=n)


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


def _killed_after_writes(which: str, path: str, n: int) -> float:
    """Run the child until it says its writes are done, SIGKILL it; its writes/s."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, which, path, str(n)],
                             stdout=subprocess.PIPE, text=True, **temporaries.child_options())
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line:
            raise AssertionError(f"the {which} child ended before its writes were done")
        return float(line)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
        child.wait(CHILD_TIMEOUT)
        if child.stdout is not None:
            child.stdout.close()


def _kill_n(env: BenchEnv) -> int:
    return KILL_WRITES // 10 if env.quick else KILL_WRITES


def bench_kill_streamkeep(env: BenchEnv) -> Measurement:
    from streamkeep import Engine

    n = _kill_n(env)
    with env.data_dir("asyncio-kill") as path:
        rate = _killed_after_writes("streamkeep", path, n)
        engine = Engine.open(path)
        try:
            kept = int(engine.execute("XLEN", "kept"))
        finally:
            engine.close()
    return Measurement(rate, count=n, figures={"kept": kept})


def bench_kill_burner(env: BenchEnv) -> Measurement:
    burner = _burner()
    n = _kill_n(env)
    with env.data_dir("asyncio-kill-burner") as directory:
        path = os.path.join(directory, "burner.dat")
        rate = _killed_after_writes("burner", path, n)

        async def kept() -> int:
            db = burner(persistence_path=path)
            try:
                return int(await db.xlen("kept"))
            finally:
                await db.aclose()

        count = asyncio.run(kept())
    return Measurement(rate, count=n, figures={"kept": count})


# --- the work queue ---------------------------------------------------------------------------


def bench_async_queue(env: BenchEnv) -> Measurement:
    from streamkeep import AsyncStreamQueue, Engine

    n = workqueue.cycles(env)
    with env.data_dir("asyncio-queue") as path:
        engine = Engine.open(path, appendfsync="everysec", auto_aof_rewrite_percentage=0)
        try:
            async def run() -> float:
                q = AsyncStreamQueue(engine, "jobs", consumer="bench")
                for i in range(min(n // 10, 2_000)):  # warm-up
                    await q.put({"n": i})
                    await (await q.get())[0].ack()
                began = time.perf_counter()
                for i in range(n):
                    await q.put({"n": i})
                    await (await q.get())[0].ack()
                return time.perf_counter() - began

            seconds = asyncio.run(run())
            workqueue.check_drained(engine)
        finally:
            engine.close()
    return Measurement(n / seconds, count=n)


def bench_blocked_gets(env: BenchEnv) -> Measurement:
    from streamkeep import AsyncStreamQueue, Engine

    tasks = BLOCKED_TASKS // 10 if env.quick else BLOCKED_TASKS
    engine = Engine.open()
    try:
        delivered, seconds, stall, put_s = asyncio.run(_blocked_gets(
            AsyncStreamQueue(engine, "jobs", consumer="bench"), tasks))
    finally:
        engine.close()
    if sorted(delivered) != list(range(tasks)):
        raise AssertionError(f"{len(delivered)} deliveries of {tasks} messages, "
                             f"{len(set(delivered))} distinct")
    return Measurement(tasks / seconds, count=tasks,
                       figures={"longest_stall_us": stall * 1e6, "put_us": put_s * 1e6})


async def _blocked_gets(q: Any, tasks: int) -> tuple[list[int], float, float, float]:
    """(the messages delivered, the seconds from the first put to the last delivery, the
    loop's longest stall, the mean seconds of one put)."""
    delivered: list[int] = []
    gaps = [0.0]
    running = True

    async def ticker() -> None:
        # The loop's own time between two of the ticker's turns: the thread's CPU time, so
        # that another process taking the core meanwhile is not counted as the loop's stall.
        clock = time.thread_time
        last = clock()
        while running:
            await asyncio.sleep(0)
            now = clock()
            gaps[0] = max(gaps[0], now - last)
            last = now

    async def worker() -> None:
        (msg,) = await q.get(block=float("inf"))
        delivered.append(int(msg.fields[b"n"]))
        await msg.ack()

    await q.put({"n": -1})  # the stream and group made, then emptied
    await (await q.get())[0].ack()
    workers = [asyncio.create_task(worker()) for _ in range(tasks)]
    await asyncio.sleep(0)  # every worker blocked
    tick = asyncio.create_task(ticker())
    began = time.perf_counter()
    put_time = 0.0
    for i in range(tasks):
        t = time.perf_counter()
        await q.put({"n": i})
        put_time += time.perf_counter() - t
        await asyncio.sleep(0)
    while len(delivered) < tasks:  # the last ones served: their tasks' next turns
        await asyncio.sleep(0)
    seconds = time.perf_counter() - began
    running = False  # (before the gather: its thousand callbacks are the harness's, not ours)
    await tick
    await asyncio.gather(*workers)
    return delivered, seconds, gaps[0], put_time / tasks


def describe(env: BenchEnv) -> list[str]:
    return [f"asyncio: one task awaiting one call at a time (asyncio's own loop); XADD rows of "
            f"{_n(env):,} calls (redis.asyncio: a tenth); SIGKILL rows after "
            f"{_kill_n(env):,} awaited XADDs; queue rows: put + get + ack per message"]
