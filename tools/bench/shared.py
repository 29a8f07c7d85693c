"""The ``shared`` section's workloads: one data directory used by many processes through its
shared server, against one process, persist-queue in the same processes, redis-py over TCP
(turns: :func:`.workload.take_turns`), and the cost of opening it. Every shared server a row
starts is stopped before it ends. Must not touch: the shared mode (public API only).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import workqueue
from streamkeep.tools.bench.processes import streamkeep
from streamkeep.tools.bench.workload import (
    Measurement,
    Size,
    Skip,
    child_json,
    chunks,
    take_turns,
    warmup_size,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

WORKERS = 4
SECONDS = Size(3.0, 0.3)  # each throughput row
XADD_CHUNK = 500
HANDLER_SECONDS = 0.001  # the handler rows' wait per message
OPENS = 30
IDLE_SHUTDOWN = 2  # seconds: a bench killed midway leaves its servers running this long


def _cycles(call: Callable[[int], None], until: float) -> int:
    """``call(i)`` (one message's :func:`.workqueue.cycle`) until the monotonic clock reads
    ``until``; how many."""
    done = 0
    clock = time.monotonic
    while clock() < until:
        call(done)
        done += 1
    return done


def bench_in_process(env: BenchEnv, handler: float = 0.0) -> Measurement:
    with workqueue.engine(env, "shared-in-process") as engine:
        call = workqueue.cycle(workqueue.queue(engine, "only"), handler)
        _cycles(call, time.monotonic() + SECONDS.seconds(env) / 10)  # warm-up
        began = time.monotonic()
        done = _cycles(call, began + SECONDS.seconds(env))
        elapsed = time.monotonic() - began
    return Measurement(done / elapsed, count=done)


def _shared_worker(path: str, index: int, start: Any, until: Any, out: Any,
                   handler: float = 0.0) -> None:
    temporaries.init_worker()
    from streamkeep import Engine

    with Engine.open(path, shared=True) as engine:
        call = workqueue.cycle(workqueue.queue(engine, f"w{index}"), handler)
        _cycles(call, time.monotonic() + 0.1)  # warm-up
        start.wait()
        out.put(_cycles(call, until.value))


def _persist_worker(path: str, index: int, start: Any, until: Any, out: Any) -> None:
    temporaries.init_worker()
    from persistqueue import Empty, SQLiteAckQueue

    q = SQLiteAckQueue(path, auto_commit=True, multithreading=True, timeout=60)

    def call(i: int) -> None:
        q.put({"n": i})
        with contextlib.suppress(Empty):
            q.ack(q.get(timeout=1))

    start.wait()
    out.put(_cycles(call, until.value))


def _run_workers(target: Any, path: str, span: float, *args: Any) -> tuple[int, float]:
    """WORKERS forked processes running `target` from one start until `span` seconds later:
    (cycles done, seconds)."""
    ctx = multiprocessing.get_context("fork")
    start, until, out = ctx.Event(), ctx.Value("d", 0.0), ctx.Queue()
    procs = [ctx.Process(target=target, args=(path, i, start, until, out, *args), daemon=True)
             for i in range(WORKERS)]
    with temporaries.shielded_starts():
        for proc in procs:
            proc.start()
    try:
        time.sleep(1.0)  # every worker started and warmed up (a late one starts late: fair)
        began = time.monotonic()
        until.value = began + span
        start.set()
        done = sum(out.get(timeout=span + 120) for _ in procs)
        elapsed = time.monotonic() - began
    finally:
        for proc in procs:
            proc.join(30)
            if proc.exitcode is None:
                proc.kill()
                proc.join()
    if any(proc.exitcode for proc in procs):
        raise RuntimeError(f"a worker failed: exit codes {[p.exitcode for p in procs]}")
    return done, max(elapsed, span)


@contextlib.contextmanager
def _shared_server(path: str, **settings: Any) -> Any:
    """A shared engine on `path` (its server started), the server stopped at the end."""
    from streamkeep import Engine
    from streamkeep.engine.services.shared import wait_exited

    engine = Engine.open(path, shared=True, idle_shutdown=IDLE_SHUTDOWN, **settings)
    pid = engine.server_pid
    try:
        yield engine
    finally:
        engine.shutdown_server()
        engine.close()
        wait_exited(pid)


def bench_workers(env: BenchEnv, handler: float = 0.0) -> Measurement:
    with env.data_dir("shared-workers") as path, \
            _shared_server(path, appendfsync="everysec", auto_aof_rewrite_percentage=0):
        done, elapsed = _run_workers(_shared_worker, path, SECONDS.seconds(env), handler)
    return Measurement(done / elapsed, count=done)


def bench_persist_queue(env: BenchEnv) -> Measurement:
    try:
        import persistqueue  # noqa: F401
    except ImportError:
        raise Skip("persist-queue is not installed (pip install 'streamkeep[dev]')") from None
    with env.data_dir("shared-persist-queue") as path:
        done, elapsed = _run_workers(_persist_worker, path, SECONDS.seconds(env))
    return Measurement(done / elapsed, count=done)


def bench_xadd(env: BenchEnv) -> Measurement:
    """See the module docstring; figures `over_tcp` (the shared opener's rate / redis-py's
    over TCP), `tcp_per_s`, and `unix_over_tcp` (redis-py's over the Unix socket / over
    TCP)."""
    import redis

    from streamkeep.aof.manifest import SHARED_SOCKET

    n = max(env.n // 10, 2 * XADD_CHUNK)
    sent = -(-n // XADD_CHUNK) * XADD_CHUNK
    with env.data_dir("shared-xadd") as path, \
            _shared_server(path, appendfsync="everysec") as engine, \
            contextlib.closing(redis.Redis(
                unix_socket_path=os.path.join(path, SHARED_SOCKET))) as unix:
        clients = {"shared": engine.redis(), "tcp": streamkeep(env).client, "unix": unix}

        def turns(client: Any) -> Any:
            def run(_lo: int, _hi: int) -> None:
                for _ in range(XADD_CHUNK):
                    client.xadd("shared-bench", {"f": "v"})
            return chunks(run, sent, XADD_CHUNK)

        for client in clients.values():
            for _ in range(warmup_size(n) // 4):
                client.xadd("warmup", {"f": "v"})
        spent = take_turns({name: turns(client) for name, client in clients.items()})
    shared_rate, tcp_rate = sent / spent["shared"], sent / spent["tcp"]
    return Measurement(shared_rate, count=sent,
                       figures={"over_tcp": shared_rate / tcp_rate, "tcp_per_s": tcp_rate,
                                "unix_over_tcp": spent["tcp"] / spent["unix"]})


_NEW_PROCESS = """
import sys, time
began = time.perf_counter()
from streamkeep import Engine
with Engine.open(sys.argv[1], shared=True) as engine:
    engine.execute("PING")
    print(f"{(time.perf_counter() - began) * 1000:.3f}")
"""


def bench_open(env: BenchEnv) -> Measurement:
    """See the module docstring; the rate is opens to a first reply per second; figures
    `open_ms` (the median), `open_max_ms`, `process_ms` (a new process, its median)."""
    from streamkeep import Engine

    with env.data_dir("shared-open") as path, _shared_server(path):
        times = []
        for _ in range(OPENS):
            began = time.perf_counter()
            engine = Engine.open(path, shared=True)
            engine.execute("PING")
            times.append(time.perf_counter() - began)
            engine.close()
        process_ms = [child_json([sys.executable, "-c", _NEW_PROCESS, path], timeout=120,
                                 stdin=subprocess.DEVNULL) for _ in range(3 if env.quick else 5)]
    median = statistics.median(times)
    return Measurement(1 / median, count=OPENS,
                       figures={"open_ms": median * 1000, "open_max_ms": max(times) * 1000,
                                "process_ms": statistics.median(process_ms)})
