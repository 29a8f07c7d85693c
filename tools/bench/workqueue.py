"""The ``queue`` section: the durable work queue against persist-queue's SQLiteAckQueue.

Owns its workloads, each a full cycle per message (put, get, acknowledge) timed on a fresh data
directory, the reference measured in the same run:

- ``queue.persist_queue`` / ``queue.persist_queue_threads``: persist-queue's SQLiteAckQueue
  (put, get, ack; auto_commit, SQLite's default FULL sync) on one thread / QUEUE_THREADS
  threads: the reference (installed with the dev extra: `pip install persist-queue`);
- ``queue.everysec``: StreamQueue on an embedded Engine, appendfsync everysec, one thread,
  put + get() + Message.ack() per message;
- ``queue.everysec_consume``: the same with ``for msg in q.consume()`` (the ack travels with
  the next read: one record);
- ``queue.batch``: put_many(BATCH) + get(count=BATCH) + one ack of the batch's IDs;
- ``queue.always_threads``: QUEUE_THREADS worker threads, each put + get + ack, appendfsync
  always (group commit; records per fsync as a figure);
- ``queue.redis_py``: the same helper over redis-py against the run's `streamkeep serve`;
- ``queue.redis_py_loop_redis``: the reference for that row: a plain redis-py loop of the
  same three round trips without the queue's options (XADD, XREADGROUP COUNT 1 `>`, XACK)
  against the run's redis-server, which runs on any version from 5.0, unlike the queue.

A redis-server older than 8.8 cannot run the queue (it lacks CLAIM, IDMP, XNACK): the section's
header says so instead of a StreamQueue row. Must not touch: the queue
(engine.services.queue), the registry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.workload import Measurement, Skip

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

BATCH = 100  # put_many / get(count=...) in the batch row
QUEUE_THREADS = 16
REFERENCE_CYCLES = 2_000  # persist-queue at ~1k cycles/s: about two seconds
THREAD_SECONDS = 3.0  # the threaded rows are duration-bound (quick: a tenth)


def cycles(env: BenchEnv) -> int:
    """Messages in the one-thread StreamQueue rows: N / 10 (20,000 at the default N)."""
    return max(env.n // 10, 200)


def reference_cycles(env: BenchEnv) -> int:
    return REFERENCE_CYCLES // 10 if env.quick else REFERENCE_CYCLES


def thread_seconds(env: BenchEnv) -> float:
    return THREAD_SECONDS / 10 if env.quick else THREAD_SECONDS


def describe(env: BenchEnv) -> list[str]:
    lines = [f"queue: one message = put + get + ack; StreamQueue rows on an embedded Engine "
             f"(fresh data directory), persist-queue's SQLiteAckQueue (auto_commit) in a "
             f"temporary directory on the same file system; threaded rows "
             f"{thread_seconds(env):g} s"]
    lines += [f"queue: {line}" for line in _redis_server_note(env)]
    return lines


def _redis_server_note(env: BenchEnv) -> list[str]:
    """Why there is no redis-server row (its version lacks what the queue needs), if so."""
    if not env.use_redis:
        return []
    try:
        client = env.redis
    except Skip as exc:
        return [f"redis-server reference not run: {exc}"]
    from streamkeep.engine.services.queue import missing_features

    version = str(client.info("server").get("redis_version", "?"))
    lacking = missing_features(version)
    if lacking:
        return [f"redis-server {version} cannot run the queue (it lacks {', '.join(lacking)}): "
                f"no redis-server StreamQueue row (its plain redis-py loop runs)"]
    return []


def _persist_queue(path: str, multithreading: bool = False) -> Any:
    try:
        from persistqueue import SQLiteAckQueue
    except ImportError:
        raise Skip("persist-queue is not installed (pip install 'streamkeep[dev]')") from None
    return SQLiteAckQueue(path, auto_commit=True, multithreading=multithreading)


def bench_persist_queue(env: BenchEnv) -> Measurement:
    n = reference_cycles(env)
    with env.data_dir("persist-queue") as path:
        q = _persist_queue(path)
        for i in range(min(n // 10, 100)):  # warm-up: SQLite's first pages
            q.put({"n": i})
            q.ack(q.get())
        began = time.perf_counter()
        for i in range(n):
            q.put({"n": i})
            q.ack(q.get())
        seconds = time.perf_counter() - began
        if q.size != 0:
            raise AssertionError(f"persist-queue left {q.size} messages")
    return Measurement(n / seconds, count=n)


def _engine(path: str, policy: str) -> Any:
    from streamkeep import Engine

    return Engine.open(path, appendfsync=policy, auto_aof_rewrite_percentage=0)


def _queue(client: Any, consumer: str = "bench") -> Any:
    from streamkeep import StreamQueue

    return StreamQueue(client, "jobs", consumer=consumer)


def _timed_cycles(q: Any, n: int) -> float:
    """n x (put, get, ack); seconds."""
    put, get = q.put, q.get
    for i in range(min(n // 10, 2_000)):  # warm-up
        put({"n": i})
        get()[0].ack()
    began = time.perf_counter()
    for i in range(n):
        put({"n": i})
        get()[0].ack()
    return time.perf_counter() - began


def bench_everysec(env: BenchEnv) -> Measurement:
    n = cycles(env)
    with env.data_dir("queue-everysec") as path:
        engine = _engine(path, "everysec")
        try:
            seconds = _timed_cycles(_queue(engine), n)
            check_drained(engine)
        finally:
            engine.close()
    return Measurement(n / seconds, count=n)


def bench_everysec_consume(env: BenchEnv) -> Measurement:
    n = cycles(env)
    with env.data_dir("queue-consume") as path:
        engine = _engine(path, "everysec")
        try:
            q = _queue(engine)
            stream = q.consume(block=0.01)
            for i in range(min(n // 10, 2_000)):
                q.put({"n": i})
                next(stream)
            began = time.perf_counter()
            for i in range(n):
                q.put({"n": i})
                next(stream)
            seconds = time.perf_counter() - began
            stream.close()  # the message in hand is released: acknowledge it first
            check_drained(engine, left=1)
        finally:
            engine.close()
    return Measurement(n / seconds, count=n)


def bench_batch(env: BenchEnv) -> Measurement:
    n = max(env.n // BATCH * BATCH, BATCH)
    with env.data_dir("queue-batch") as path:
        engine = _engine(path, "everysec")
        try:
            q = _queue(engine)
            batch = [{"n": i} for i in range(BATCH)]

            def run(rounds: int) -> None:
                for _ in range(rounds):
                    q.put_many(batch)
                    q.ack(*[m.id for m in q.get(BATCH)])

            run(max(n // BATCH // 10, 1))
            began = time.perf_counter()
            run(n // BATCH)
            seconds = time.perf_counter() - began
            check_drained(engine)
        finally:
            engine.close()
    return Measurement(n / seconds, count=n)


def _run_threads(threads: int, seconds: float, make: Callable[[int], Callable[[], None]]
                 ) -> tuple[int, float]:
    """`threads` threads each calling its `make(i)()` cycle until `seconds` have passed;
    (cycles done, seconds from release to the last join)."""
    done = [0] * threads
    errors: list[BaseException] = []
    gate = threading.Barrier(threads + 1)
    deadline = [0.0]

    def worker(index: int) -> None:
        cycle, clock, count = make(index), time.perf_counter, 0
        gate.wait()
        try:
            while clock() < deadline[0]:
                cycle()
                count += 1
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        done[index] = count

    workers = [threading.Thread(target=worker, args=(i,), name=f"bench-queue-{i}", daemon=True)
               for i in range(threads)]
    for w in workers:
        w.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    gate.wait()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return sum(done), time.perf_counter() - began


def bench_persist_queue_threads(env: BenchEnv) -> Measurement:
    with env.data_dir("persist-queue-threads") as path:
        q = _persist_queue(path, multithreading=True)

        def make(index: int) -> Callable[[], None]:
            def cycle() -> None:
                q.put({"n": index})
                q.ack(q.get())
            return cycle

        done, seconds = _run_threads(QUEUE_THREADS, thread_seconds(env), make)
    return Measurement(done / seconds, count=done)


def bench_always_threads(env: BenchEnv) -> Measurement:
    with env.data_dir("queue-always") as path:
        engine = _engine(path, "always")
        try:
            queues = [_queue(engine, f"w{i}") for i in range(QUEUE_THREADS)]

            def make(index: int) -> Callable[[], None]:
                q = queues[index]

                def cycle() -> None:
                    q.put({"n": index})
                    for msg in q.get():
                        msg.ack()
                return cycle

            _run_threads(QUEUE_THREADS, thread_seconds(env) / 10, make)  # warm-up
            journal = engine.journal
            records, fsyncs = journal.records_written, journal.fsyncs
            done, seconds = _run_threads(QUEUE_THREADS, thread_seconds(env), make)
            records, fsyncs = journal.records_written - records, journal.fsyncs - fsyncs
        finally:
            engine.close()
    figures = {"records_per_fsync": records / fsyncs} if fsyncs else {}
    return Measurement(done / seconds, count=done, figures=figures)


def bench_redis_py(env: BenchEnv) -> Measurement:
    import redis

    from streamkeep.tools.bench import server

    handle = server.streamkeep(env)
    n = max(cycles(env) // 4, 200)  # a round trip per command: a quarter of the messages
    client = redis.Redis(host="127.0.0.1", port=handle.port)
    name = f"jobs-{time.monotonic_ns()}"  # the shared server may have run this row before
    try:
        from streamkeep import StreamQueue

        seconds = _timed_cycles(StreamQueue(client, name, consumer="bench"), n)
        client.delete(name)
    finally:
        client.close()
    return Measurement(n / seconds, count=n)


def bench_redis_py_loop_redis(env: BenchEnv) -> Measurement:
    """The plain redis-py loop against the reference redis-server (Skip without one)."""
    client = env.redis
    n = max(cycles(env) // 4, 200)  # as many as queue.redis_py
    name = f"jobs-loop-{time.monotonic_ns()}"
    client.xgroup_create(name, "workers", "0", mkstream=True)
    try:
        _plain_cycles(client, name, min(n // 10, 2_000))  # warm-up
        began = time.perf_counter()
        _plain_cycles(client, name, n)
        seconds = time.perf_counter() - began
        left = client.xpending(name, "workers")["pending"]
        if left:
            raise AssertionError(f"the redis-py loop left {left} messages pending")
    finally:
        client.delete(name)
    return Measurement(n / seconds, count=n)


def _plain_cycles(client: Any, name: str, n: int) -> None:
    """n x (XADD, XREADGROUP COUNT 1 >, XACK of the entry read), a round trip each."""
    xadd, xreadgroup, xack = client.xadd, client.xreadgroup, client.xack
    for i in range(n):
        xadd(name, {"n": i})
        reply = xreadgroup("workers", "bench", {name: ">"}, count=1)
        xack(name, "workers", _first_id(reply))


def _first_id(reply: Any) -> Any:
    """The first entry's ID in a one-stream XREADGROUP reply, RESP2 (list) or RESP3 (dict)."""
    entries = next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]
    return entries[0][0]


def check_drained(engine: Any, left: int = 0) -> None:
    pending = engine.execute("XPENDING", "jobs", "workers")[0]
    if pending != left:
        raise AssertionError(f"the queue bench left {pending} messages pending, not {left}")

