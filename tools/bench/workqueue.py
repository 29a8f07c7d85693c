"""The ``queue`` section's workloads: a put, a get and an acknowledgement per message (a
:func:`cycle` of the queue), timed on a fresh data directory; StreamQueue (everysec, consume(),
batches, threads under ``always``, over redis-py to ``streamkeep serve``) against
persist-queue's SQLiteAckQueue and a plain redis-py loop to redis-server.
Must not touch: the queue (engine.services.queue).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench import workload
from streamkeep.tools.bench.aof import group_commit
from streamkeep.tools.bench.processes import streamkeep
from streamkeep.tools.bench.workload import (
    Measurement,
    Size,
    Skip,
    rate,
    threads_until,
    timed,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

BATCH = 100  # put_many / get(count=...) in the batch row
QUEUE_THREADS = 16
REFERENCE_CYCLES = Size(2_000, 200)  # persist-queue at ~1k cycles/s: about two seconds
CYCLES = Size(0.1, per_n=True, least=200)  # the one-thread StreamQueue rows: N / 10
THREAD_SECONDS = Size(3.0, 0.3)  # the threaded rows are duration-bound


def persist_queue(path: str, multithreading: bool = False, **options: Any) -> Any:
    try:
        from persistqueue import SQLiteAckQueue
    except ImportError:
        raise Skip("persist-queue is not installed (pip install 'streamkeep[dev]')") from None
    return SQLiteAckQueue(path, auto_commit=True, multithreading=multithreading, **options)


def cycle(q: Any, handler: float = 0.0) -> Callable[[int], None]:
    """One message through ``q``: put, get, ack (a StreamQueue's, or persist-queue's); with
    ``handler``, that many seconds' wait between a StreamQueue's get and its ack."""
    def stream_queue(i: int) -> None:
        q.put({"n": i})
        for msg in q.get():
            if handler:
                time.sleep(handler)
            msg.ack()

    def sqlite_queue(i: int) -> None:
        q.put({"n": i})
        q.ack(q.get())

    return stream_queue if hasattr(q, "consume") else sqlite_queue


def cycles(call: Callable[[int], object], n: int, warm: int) -> Measurement:
    """``call(i)`` n times after ``warm`` untimed: per second."""
    def loop(_key: str, count: int) -> None:
        for i in range(count):
            call(i)

    return rate(n, timed(loop, n, warm))


@contextlib.contextmanager
def engine(env: BenchEnv, name: str, policy: str = "everysec", left: int = 0) -> Iterator[Any]:
    """An Engine on a fresh data directory, automatic compaction off; the queue checked to
    have ``left`` messages pending at the end."""
    with env.engine(name, appendfsync=policy, auto_aof_rewrite_percentage=0) as opened:
        yield opened
        pending = opened.execute("XPENDING", "jobs", "workers")[0]
        if pending != left:
            raise AssertionError(f"the queue bench left {pending} messages pending, not {left}")


def queue(client: Any, consumer: str = "bench", name: str = "jobs") -> Any:
    from streamkeep import StreamQueue

    return StreamQueue(client, name, consumer=consumer)


def bench_persist_queue(env: BenchEnv) -> Measurement:
    n = REFERENCE_CYCLES(env)
    with env.data_dir("persist-queue") as path:
        q = persist_queue(path)
        m = cycles(cycle(q), n, min(n // 10, 100))  # (warm-up: SQLite's first pages)
        if q.size != 0:
            raise AssertionError(f"persist-queue left {q.size} messages")
    return m


def bench_everysec(env: BenchEnv) -> Measurement:
    n = CYCLES(env)
    with engine(env, "queue-everysec") as e:
        return cycles(cycle(queue(e)), n, min(n // 10, 2_000))


def bench_everysec_consume(env: BenchEnv) -> Measurement:
    n = CYCLES(env)
    # (the message in hand when the stream closes is released: left pending)
    with engine(env, "queue-consume", left=1) as e:
        q = queue(e)
        with contextlib.closing(q.consume(block=0.01)) as stream:
            def put_consume(i: int) -> None:
                q.put({"n": i})
                next(stream)

            return cycles(put_consume, n, min(n // 10, 2_000))


def bench_batch(env: BenchEnv) -> Measurement:
    """put_many(BATCH) + get(BATCH) + one ack: the consume section's child workload, in
    process."""
    from streamkeep.tools.bench import nodes_child

    with env.data_dir("queue-batch") as path:
        got = nodes_child.queue_batch(max(env.n // BATCH * BATCH, BATCH), path, None)
    return rate(got["ops"], got["seconds"])


def bench_persist_queue_threads(env: BenchEnv) -> Measurement:
    with env.data_dir("persist-queue-threads") as path:
        call = cycle(persist_queue(path, multithreading=True))
        done, seconds = threads_until(QUEUE_THREADS, THREAD_SECONDS.seconds(env),
                                      lambda index: lambda: call(index))
    return rate(done, seconds)


def bench_always_threads(env: BenchEnv) -> Measurement:
    with engine(env, "queue-always", "always") as e:
        calls = [cycle(queue(e, f"w{i}")) for i in range(QUEUE_THREADS)]
        return group_commit(e, QUEUE_THREADS, THREAD_SECONDS.seconds(env),
                            lambda _key: lambda index: lambda: calls[index](index))[0]


def bench_redis_py(env: BenchEnv) -> Measurement:
    import redis

    n = max(CYCLES(env) // 4, 200)  # a round trip per command: a quarter of the messages
    name = f"jobs-{time.monotonic_ns()}"  # the shared server may have run this row before
    with contextlib.closing(redis.Redis(host="127.0.0.1", port=streamkeep(env).port)) as client:
        m = cycles(cycle(queue(client, name=name)), n, min(n // 10, 2_000))
        client.delete(name)
    return m


def bench_redis_py_loop_redis(env: BenchEnv) -> Measurement:
    """The plain redis-py loop against the reference redis-server (Skip without one)."""
    client = env.redis
    n = max(CYCLES(env) // 4, 200)  # as many as queue.redis_py
    name = f"jobs-loop-{time.monotonic_ns()}"
    client.xgroup_create(name, "workers", "0", mkstream=True)

    def loop(i: int) -> None:
        client.xadd(name, {"n": i})
        reply = client.xreadgroup("workers", "bench", {name: ">"}, count=1)
        client.xack(name, "workers", workload.read_entries(reply)[0][0])

    try:
        m = cycles(loop, n, min(n // 10, 2_000))
        if left := client.xpending(name, "workers")["pending"]:
            raise AssertionError(f"the redis-py loop left {left} messages pending")
    finally:
        client.delete(name)
    return m
