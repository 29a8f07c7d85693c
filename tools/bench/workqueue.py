"""The ``queue`` section's workloads: a put, a get and an acknowledgement per message, timed on a
fresh data directory; StreamQueue (everysec, consume(), batches, threads under ``always``, over
redis-py to ``streamkeep serve``) against persist-queue's SQLiteAckQueue and a plain redis-py
loop to redis-server. Must not touch: the queue (engine.services.queue).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.processes import streamkeep
from streamkeep.tools.bench.workload import Measurement, Skip, rate, threads_until, timed

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

BATCH = 100  # put_many / get(count=...) in the batch row
QUEUE_THREADS = 16
REFERENCE_CYCLES = 2_000  # persist-queue at ~1k cycles/s: about two seconds
THREAD_SECONDS = 3.0  # the threaded rows are duration-bound (quick: a tenth)


def cycles(env: BenchEnv) -> int:
    """Messages in the one-thread StreamQueue rows: N / 10 (20,000 at the default N)."""
    return max(env.n // 10, 200)


def thread_seconds(env: BenchEnv) -> float:
    return THREAD_SECONDS / 10 if env.quick else THREAD_SECONDS


def describe(env: BenchEnv) -> list[str]:
    lines = [f"queue: one message = put + get + ack; StreamQueue rows on an embedded Engine "
             f"(fresh data directory), persist-queue's SQLiteAckQueue (auto_commit) in a "
             f"temporary directory on the same file system; threaded rows "
             f"{thread_seconds(env):g} s"]
    if not env.use_redis:
        return lines
    try:
        version = str(env.redis.info("server").get("redis_version", "?"))
    except Skip as exc:
        return [*lines, f"queue: redis-server reference not run: {exc}"]
    from streamkeep.engine.services.queue import missing_features

    if lacking := missing_features(version):
        lines.append(f"queue: redis-server {version} cannot run the queue (it lacks "
                     f"{', '.join(lacking)}): no redis-server StreamQueue row (its plain "
                     f"redis-py loop runs)")
    return lines


def persist_queue(path: str, multithreading: bool = False, **options: Any) -> Any:
    try:
        from persistqueue import SQLiteAckQueue
    except ImportError:
        raise Skip("persist-queue is not installed (pip install 'streamkeep[dev]')") from None
    return SQLiteAckQueue(path, auto_commit=True, multithreading=multithreading, **options)


def bench_persist_queue(env: BenchEnv) -> Measurement:
    n = REFERENCE_CYCLES // 10 if env.quick else REFERENCE_CYCLES
    with env.data_dir("persist-queue") as path:
        q = persist_queue(path)

        def loop(_key: str, count: int) -> None:
            for i in range(count):
                q.put({"n": i})
                q.ack(q.get())

        seconds = timed(loop, n, min(n // 10, 100))  # (warm-up: SQLite's first pages)
        if q.size != 0:
            raise AssertionError(f"persist-queue left {q.size} messages")
    return rate(n, seconds)


@contextlib.contextmanager
def engine(env: BenchEnv, name: str, policy: str = "everysec", left: int = 0) -> Iterator[Any]:
    """An Engine on a fresh data directory, automatic compaction off; the queue checked to
    have ``left`` messages pending at the end."""
    from streamkeep import Engine

    with env.data_dir(name) as path:
        opened = Engine.open(path, appendfsync=policy, auto_aof_rewrite_percentage=0)
        try:
            yield opened
            pending = opened.execute("XPENDING", "jobs", "workers")[0]
            if pending != left:
                raise AssertionError(f"the queue bench left {pending} messages pending, "
                                     f"not {left}")
        finally:
            opened.close()


def queue(client: Any, consumer: str = "bench", name: str = "jobs") -> Any:
    from streamkeep import StreamQueue

    return StreamQueue(client, name, consumer=consumer)


def cycle_loop(q: Any) -> Callable[[str, int], None]:
    """A :func:`.workload.timed` loop: n x (put, get, ack)."""
    def loop(_key: str, n: int) -> None:
        for i in range(n):
            q.put({"n": i})
            q.get()[0].ack()
    return loop


def bench_everysec(env: BenchEnv) -> Measurement:
    n = cycles(env)
    with engine(env, "queue-everysec") as e:
        return rate(n, timed(cycle_loop(queue(e)), n, min(n // 10, 2_000)))


def bench_everysec_consume(env: BenchEnv) -> Measurement:
    n = cycles(env)
    # (the message in hand when the stream closes is released: left pending)
    with engine(env, "queue-consume", left=1) as e:
        q = queue(e)
        stream = q.consume(block=0.01)

        def loop(_key: str, count: int) -> None:
            for i in range(count):
                q.put({"n": i})
                next(stream)

        seconds = timed(loop, n, min(n // 10, 2_000))
        stream.close()
    return rate(n, seconds)


def bench_batch(env: BenchEnv) -> Measurement:
    """put_many(BATCH) + get(BATCH) + one ack: the consume section's child workload, in
    process."""
    from streamkeep.tools.bench import nodes_child

    with env.data_dir("queue-batch") as path:
        got = nodes_child.queue_batch(max(env.n // BATCH * BATCH, BATCH), path, None)
    return rate(got["ops"], got["seconds"])


def bench_persist_queue_threads(env: BenchEnv) -> Measurement:
    with env.data_dir("persist-queue-threads") as path:
        q = persist_queue(path, multithreading=True)

        def make(index: int) -> Callable[[], None]:
            def cycle() -> None:
                q.put({"n": index})
                q.ack(q.get())
            return cycle

        done, seconds = threads_until(QUEUE_THREADS, thread_seconds(env), make)
    return rate(done, seconds)


def bench_always_threads(env: BenchEnv) -> Measurement:
    with engine(env, "queue-always", "always") as e:
        queues = [queue(e, f"w{i}") for i in range(QUEUE_THREADS)]

        def make(index: int) -> Callable[[], None]:
            q = queues[index]

            def cycle() -> None:
                q.put({"n": index})
                for msg in q.get():
                    msg.ack()
            return cycle

        threads_until(QUEUE_THREADS, thread_seconds(env) / 10, make)  # warm-up
        journal = e.journal
        records, fsyncs = journal.records_written, journal.fsyncs
        done, seconds = threads_until(QUEUE_THREADS, thread_seconds(env), make)
        records, fsyncs = journal.records_written - records, journal.fsyncs - fsyncs
    figures = {"records_per_fsync": records / fsyncs} if fsyncs else {}
    return rate(done, seconds, **figures)


def bench_redis_py(env: BenchEnv) -> Measurement:
    import redis

    n = max(cycles(env) // 4, 200)  # a round trip per command: a quarter of the messages
    name = f"jobs-{time.monotonic_ns()}"  # the shared server may have run this row before
    with contextlib.closing(redis.Redis(host="127.0.0.1", port=streamkeep(env).port)) as client:
        seconds = timed(cycle_loop(queue(client, name=name)), n, min(n // 10, 2_000))
        client.delete(name)
    return rate(n, seconds)


def bench_redis_py_loop_redis(env: BenchEnv) -> Measurement:
    """The plain redis-py loop against the reference redis-server (Skip without one)."""
    client = env.redis
    n = max(cycles(env) // 4, 200)  # as many as queue.redis_py
    name = f"jobs-loop-{time.monotonic_ns()}"
    client.xgroup_create(name, "workers", "0", mkstream=True)

    def loop(_key: str, count: int) -> None:
        for i in range(count):
            client.xadd(name, {"n": i})
            reply = client.xreadgroup("workers", "bench", {name: ">"}, count=1)
            entries = next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]
            client.xack(name, "workers", entries[0][0])

    try:
        seconds = timed(loop, n, min(n // 10, 2_000))
        if left := client.xpending(name, "workers")["pending"]:
            raise AssertionError(f"the redis-py loop left {left} messages pending")
    finally:
        client.delete(name)
    return rate(n, seconds)
