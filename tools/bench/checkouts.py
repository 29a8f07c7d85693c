"""The sections comparing this checkout with others (``--base``/``--before DIR``): ``nodes``,
``consume``, ``crashbench``. Every row (:func:`row`) is a :data:`Side`, run in child processes
under an interpreter (DIR/.venv/bin/python), its packages compiled first: this checkout's, and
the other checkout's as its reference, which the runner runs in turns with it every repeat
(:func:`.runner.compared`: the ratio this / other of every repeat, ``ratio_min`` the worst).
Must not touch: other checkouts' files.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import interop
from streamkeep.tools.bench.backlog import ENTRIES as BACKLOG_ENTRIES
from streamkeep.tools.bench.backlog import catchup_entries
from streamkeep.tools.bench.declarations import Benchmark, Reference
from streamkeep.tools.bench.processes import StreamkeepServer, running
from streamkeep.tools.bench.workload import (
    BATCH,
    Measurement,
    Size,
    Skip,
    child_json,
    pipelined,
    run_child,
)
from streamkeep.tools.servers import cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nodes_child.py")
RANGE_PER_N = 2.5  # entries of the range rows' stream (nodes_child._ranges): 500k at N 200k
SNAPSHOT_ENTRIES = Size(5, per_n=True, least=1_000)  # snapshot load, cold reads, footprint: 1M
CRASH_OPS = Size(200, 40)  # the crash bench's operations (its documented run: 2,000)
POLICY = "always"
PACKAGES = ("streamkeep.engine", "streamkeep.aof", "streamkeep.snapshot",
            "streamkeep.replication", "streamkeep.tools")

Side = Callable[["BenchEnv", str], Measurement]  # a row's run under an interpreter


def python_of(checkout: str) -> str:
    """A checkout's interpreter, DIR/.venv/bin/python."""
    return os.path.join(os.path.abspath(checkout), ".venv", "bin", "python")


def bytecode(env: BenchEnv) -> set[str]:
    """The run's interpreters whose packages are compiled (:func:`ready`): as an installed
    package's, else a child that may not write them would compile at every start, and the rows
    that time a start would time the compiler."""
    return env.shared("nodes bytecode", set)  # type: ignore[no-any-return]


def ready(python: str, warm: set[str] | None) -> None:
    """``python``'s packages compiled into their ``__pycache__`` (once per run)."""
    if warm is None or python in warm:
        return
    code = ("import compileall, importlib.util\n"
            f"for name in {PACKAGES!r}:\n"
            "    for path in importlib.util.find_spec(name).submodule_search_locations:\n"
            "        compileall.compile_dir(path, quiet=1)\n")
    run_child([python, "-I", "-c", code])
    warm.add(python)


def child(python: str, workload: str, n: int, path: str = "-", seed: int = 1,
          cache: set[str] | None = None) -> dict[str, Any]:
    """One ``nodes_child.py`` workload under ``python``; its JSON line."""
    ready(python, cache)
    return child_json([python, "-I", CHILD, workload, str(n), path, str(seed)])


def _rate(result: dict[str, Any], **figures: float) -> Measurement:
    """A child's {"ops", "seconds"} as a Measurement."""
    return Measurement(float(result["ops"]) / max(float(result["seconds"]), 1e-9),
                       count=int(result["ops"]), figures=figures)


def row(key: str, workload: str, side: Side, other: str, *costs: tuple[str, str]) -> Benchmark:
    """The row ``side`` under this checkout's interpreter, its reference the same under the
    ``--<other>`` checkout's (none without it), ``costs`` compared too."""
    def reference(env: BenchEnv) -> Callable[[BenchEnv], Measurement] | str:
        if other not in env.others:
            return f"no --{other} checkout given"
        python = python_of(env.others[other])
        return lambda env: side(env, python)

    return Benchmark(key, workload, lambda env: side(env, sys.executable),
                     reference=Reference(other, reference, costs))


class Built(dict[str, str]):
    """Per interpreter, a data dir built once per run by a ``nodes_child.py`` workload
    (``build``: a snapshot of numbered entries; ``build_backlog``): python -> its path."""

    def __init__(self, entries: int, workload: str) -> None:
        super().__init__()
        self.entries, self.workload = entries, workload
        self.root = temporaries.temp_directory_path("bench-nodes")

    def path(self, python: str) -> str:
        if python not in self:
            self[python] = os.path.join(self.root, f"data{len(self)}")
            child(python, self.workload, self.entries, self[python])
        return self[python]

    def stop(self) -> None:
        temporaries.remove(self.root)


def built(env: BenchEnv, name: str, entries: int, workload: str) -> Callable[[str], str]:
    return env.shared(name, lambda: Built(entries, workload)).path  # type: ignore[no-any-return]


def embedded(workload: str) -> Side:
    """An embedded workload of nodes_child.py."""
    return lambda env, python: _rate(child(python, workload, env.n, cache=bytecode(env)))


@contextlib.contextmanager
def _apart(pid: int) -> Iterator[None]:
    """The server's threads on one CPU and this process (the client) on another while the
    loop is timed. Left to the scheduler, whether the two shared a CPU changed from one run to
    the next, and the server's CPU per op with it, by up to 15%: more than the rows measure."""
    mine = os.sched_getaffinity(0) if hasattr(os, "sched_setaffinity") else set()
    if len(mine) < 2:
        yield
        return
    cpus = sorted(mine)
    with contextlib.suppress(OSError):  # (a thread gone meanwhile: the loop runs unpinned)
        for task in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(task), {cpus[1]})
        os.sched_setaffinity(0, {cpus[0]})
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def _served_loop(client: Any, what: str, starts: list[int]) -> int:
    """XRANGE/XREVRANGE COUNT 100 from each of ``starts``, or consuming until drained:
    entries read."""
    command, got = client.execute_command, 0
    if what == "consume":
        command("XGROUP", "CREATE", "bench", "g", "0")
        while (reply := command("XREADGROUP", "GROUP", "g", "c", "COUNT", BATCH, "STREAMS",
                                "bench", ">")) and reply[0][1]:
            command("XACK", "bench", "g", *[e[0] for e in reply[0][1]])
            got += len(reply[0][1])
    for s in starts:
        got += len(command("XREVRANGE", "bench", f"{s}-1", "-", "COUNT", BATCH)
                   if what == "xrevrange" else
                   command("XRANGE", "bench", f"{s}-1", "+", "COUNT", BATCH))
    return got


def served(what: str) -> Side:
    """XRANGE, XREVRANGE or consume through ``<python> -m streamkeep serve`` (appendfsync
    no): figure ``cpu``, the server's CPU per op over the timed loop alone."""
    def run(env: BenchEnv, python: str) -> Measurement:
        with running(StreamkeepServer(appendfsync="no", python=python)) as server:
            client, n = server.client, env.n
            size = n if what == "consume" else int(n * RANGE_PER_N)
            pipelined(client, (("XADD", "bench", f"{i}-1", "f", "v") for i in range(1, size + 1)))
            rng = random.Random(1)
            starts = [] if what == "consume" else [rng.randint(1, size)
                                                   for _ in range(max(n // 20, 10))]
            with _apart(server.pid):
                cpu, began = cpu_seconds(server.pid), time.perf_counter()
                ops = _served_loop(client, what, starts)
                seconds, after = time.perf_counter() - began, cpu_seconds(server.pid)
        cost = {} if cpu is None or after is None else {"cpu": (after - cpu) / max(ops, 1)}
        return _rate({"ops": ops, "seconds": seconds}, **cost)

    return run


def snapshot_load(env: BenchEnv, python: str) -> Measurement:
    path = built(env, "nodes snapshots", SNAPSHOT_ENTRIES(env), "build")
    return _rate(child(python, "load", SNAPSHOT_ENTRIES(env), path(python), cache=bytecode(env)))


def cold_read(env: BenchEnv, python: str) -> Measurement:
    path = built(env, "nodes snapshots", SNAPSHOT_ENTRIES(env), "build")
    m = _rate(child(python, "cold_read", env.n, path(python), cache=bytecode(env)))
    m.figures["us_per_read"] = 1e6 / m.rate
    return m


def hash_load(env: BenchEnv, python: str) -> Measurement:
    """Engine.open of a data dir holding one big hash (its build: the checkout's own), to the
    first HGET served, in a fresh process: fields/s and the peak RSS."""
    path = built(env, "nodes hashes", SNAPSHOT_ENTRIES(env), "build_hash")
    result = child(python, "hash_load", SNAPSHOT_ENTRIES(env), path(python), cache=bytecode(env))
    return _rate(result, peak_rss_mb=float(result["peak_rss_mb"]))


def import_rdb(env: BenchEnv, python: str) -> Measurement:
    """``<python> -m streamkeep import`` of the dump.rdb, timed as a whole process."""
    if shutil.which("redis-server") is None:
        raise Skip("redis-server not found on PATH")
    rdb, entries = interop.dump_rdb(env)
    out = os.path.join(os.path.dirname(rdb), "out")
    shutil.rmtree(out, ignore_errors=True)
    ready(python, bytecode(env))
    try:
        _done, seconds = run_child([python, "-m", "streamkeep", "import", rdb, "--out", out,
                                    "--json"], cwd=os.path.dirname(rdb))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return _rate({"ops": entries, "seconds": seconds})


def footprint(env: BenchEnv) -> Measurement:
    """RSS growth: sensor entries built live; the same data restarted by AOF replay and, once
    compacted, by snapshot load; each in a fresh process (this checkout only)."""
    n, python = SNAPSHOT_ENTRIES(env), sys.executable
    with env.data_dir("nodes-footprint") as path:
        live = child(python, "footprint_live", n, path)
        replay = child(python, "footprint_restart", n, path)
        child(python, "compact", n, path)
        load = child(python, "footprint_restart", n, path)
    mb = 1 << 20
    figures = {"live_mb": live["rss_bytes"] / mb, "load_mb": load["rss_bytes"] / mb,
               "replay_mb": replay["rss_bytes"] / mb,
               "load_over_live": load["rss_bytes"] / max(live["rss_bytes"], 1),
               "replay_over_live": replay["rss_bytes"] / max(live["rss_bytes"], 1)}
    return Measurement(_rate(live).rate, count=n, figures=figures)


def consume_queue_batch(env: BenchEnv, python: str) -> Measurement:
    with env.data_dir("consume-queue") as path:
        return _rate(child(python, "queue_batch", env.n, path, cache=bytecode(env)))


def consume_catchup(env: BenchEnv, python: str) -> Measurement:
    """The backlog section's data set (each checkout's own build, once per run), copied
    afresh for each run and caught up on with backlog-memory 128mb."""
    path = built(env, "consume backlogs", BACKLOG_ENTRIES(env), "build_backlog")
    with env.data_dir("consume-catchup") as copy:
        shutil.copytree(path(python), copy)
        return _rate(child(python, "catchup", catchup_entries(env), copy, cache=bytecode(env)))


def _children_cpu() -> float:
    """User + system seconds of this process's waited-for children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def crash_run(env: BenchEnv, python: str) -> Measurement:
    """One ``crashbench --policy always --ops OPS --json FILE`` under ``python`` (a run that
    reports a violation still gives its rate): points judged per second of the report's time;
    figures ``seconds`` (the report's), ``wall_s`` (start to exit), ``cpu_s`` (its and its
    workers' CPU) and ``cpu_ms_per_point`` (the checkouts may count different points for one
    run; on a busy machine its CPU says more than its wall time)."""
    with env.data_dir("crashbench") as path:
        os.makedirs(path)
        report = os.path.join(path, "report.json")
        cpu = _children_cpu()
        _done, wall = run_child([python, "-m", "streamkeep", "crashbench", "--policy", POLICY,
                                 "--ops", str(CRASH_OPS(env)), "--json", report], ok=(0, 1),
                                stdin=subprocess.DEVNULL)
        cpu = _children_cpu() - cpu
        with open(report) as f:
            rows = json.load(f)["rows"]
    ops, seconds = sum(r["covered"] for r in rows), sum(r["seconds"] for r in rows)
    m = _rate({"ops": ops, "seconds": seconds}, seconds=seconds, wall_s=wall, cpu_s=cpu,
              cpu_ms_per_point=1000 * cpu / max(ops, 1))
    if any(sum(r["violations"].values()) for r in rows):
        m.notes.append("crashbench: a run reported violations (its rate still counts; "
                       "`streamkeep crashbench` shows them)")
    return m
