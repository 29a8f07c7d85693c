"""The sections comparing this checkout with others (``--base``/``--before DIR``): ``nodes``,
``consume``, ``crashbench``. Every row runs in child processes under each checkout's
interpreter (DIR/.venv/bin/python), its packages compiled first; given the other checkout, RUNS
times each, in turns (:func:`.workload.alternate`): this checkout's best rate and the ratio
(this / other) of every run, ``ratio_min`` the worst. Must not touch: other checkouts' files.
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
from streamkeep.tools.bench.processes import StreamkeepServer, running
from streamkeep.tools.bench.workload import (
    BATCH,
    Measurement,
    Size,
    Skip,
    alternate,
    child_json,
    pipelined,
    run_child,
)
from streamkeep.tools.servers import cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RUNS = 3  # alternating runs of each checkout per row
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nodes_child.py")
RANGE_PER_N = 2.5  # entries of the range rows' stream (nodes_child._ranges): 500k at N 200k
SNAPSHOT_ENTRIES = Size(5, per_n=True, least=1_000)  # snapshot load, cold reads, footprint: 1M
CRASH_OPS = Size(200, 40)  # the crash bench's operations (its documented run: 2,000)
POLICY = "always"
PACKAGES = ("streamkeep.engine", "streamkeep.aof", "streamkeep.snapshot",
            "streamkeep.replication", "streamkeep.tools")

Run = Callable[[str], dict[str, Any]]  # python -> {"ops", "seconds", ...}


def python_of(checkout: str) -> str:
    """A checkout's interpreter, DIR/.venv/bin/python."""
    return os.path.join(os.path.abspath(checkout), ".venv", "bin", "python")


def describe_nodes(env: BenchEnv) -> list[str]:
    others = ", ".join(f"{label} {path}" for label, path in env.others.items()) or "none given"
    return [f"nodes: each row in child processes, this checkout ({os.path.dirname(CHILD)}) "
            f"and the other alternately, {RUNS} runs each, ratio this/other per run; other "
            f"checkouts: {others}; range rows over {int(env.n * RANGE_PER_N):,} entries, "
            f"snapshot rows {SNAPSHOT_ENTRIES(env):,}, import {interop.IMPORT_ENTRIES(env):,}"]


def describe_consume(env: BenchEnv) -> list[str]:
    other = env.others.get("before", "none given (no ratios)")
    return [f"consume: each row in child processes, this checkout and --before ({other}) "
            f"alternately, {RUNS} runs each, ratio this/before per run; catch-up of "
            f"{catchup_entries(env):,} entries over a {BACKLOG_ENTRIES(env):,}-entry backlog "
            f"(backlog-memory 128mb)"]


def describe_crashbench(env: BenchEnv) -> list[str]:
    other = env.others.get("before", "none given (no ratio)")
    return [f"crashbench: `streamkeep crashbench --policy {POLICY} --ops {CRASH_OPS(env):,}` "
            f"(exhaustive, every fault model, 2 workers) in a child process, this checkout and "
            f"--before ({other}) alternately; points judged per second from its JSON report"]


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


def _rate(result: dict[str, Any]) -> float:
    return float(result["ops"]) / max(float(result["seconds"]), 1e-9)


def _cpu_per_op(result: dict[str, Any]) -> float:
    return float(result["server_cpu"]) / max(float(result["ops"]), 1.0)


def versus(env: BenchEnv, key: str, other: str, run: Run,
           kept: list[dict[str, Any]] | None = None) -> Measurement:
    """``run`` under this interpreter and the ``other`` checkout's alternately, RUNS times
    (each round's {"this": ..., "other": ...} results added to ``kept``); this one's best
    rate, the ratios' range in figures and a note."""
    if other not in env.others:
        result = run(sys.executable)
        (kept if kept is not None else []).append({"this": result})
        return Measurement(_rate(result), count=int(result["ops"]),
                           notes=[f"{key}: no --{other} checkout given, no ratio"])
    theirs = python_of(env.others[other])
    rounds = alternate(RUNS, {"this": lambda _r: run(sys.executable),
                              "other": lambda _r: run(theirs)})
    (kept if kept is not None else []).extend(rounds)
    mine, their = [_rate(r["this"]) for r in rounds], [_rate(r["other"]) for r in rounds]
    ratios = [a / max(b, 1e-9) for a, b in zip(mine, their, strict=True)]
    figures = {"ratio_min": min(ratios), "ratio_max": max(ratios), "other_rate": max(their)}
    notes = [f"{key}: this / {other} per run {', '.join(f'{r:.2f}x' for r in ratios)} (range "
             f"{min(ratios):.2f}-{max(ratios):.2f}x); best {max(mine):,.0f}/s vs "
             f"{max(their):,.0f}/s"]
    cpu = [_cpu_per_op(r["other"]) / max(_cpu_per_op(r["this"]), 1e-12) for r in rounds
           if "server_cpu" in r["this"] and "server_cpu" in r["other"]]
    if cpu:
        figures |= {"cpu_ratio_min": min(cpu), "cpu_ratio_max": max(cpu)}
        notes.append(f"{key}: server CPU per op, {other} / this per run "
                     f"{', '.join(f'{r:.2f}x' for r in cpu)} (range {min(cpu):.2f}-"
                     f"{max(cpu):.2f}x)")
    return Measurement(max(mine), figures=figures, notes=notes)


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


def embedded(env: BenchEnv, workload: str) -> Measurement:
    """An embedded workload of nodes_child.py, this checkout vs --base."""
    return versus(env, f"nodes.{workload}", "base",
                  lambda python: child(python, workload, env.n, cache=bytecode(env)))


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


def served(env: BenchEnv, what: str) -> Measurement:
    """XRANGE, XREVRANGE or consume through ``<python> -m streamkeep serve`` (appendfsync
    no), this checkout vs --base: the server's CPU per op over the timed loop alone."""
    def run(python: str) -> dict[str, Any]:
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
        result: dict[str, Any] = {"ops": ops, "seconds": seconds}
        if cpu is not None and after is not None:
            result["server_cpu"] = after - cpu
        return result

    return versus(env, f"nodes.serve_{what}", "base", run)


def snapshot_load(env: BenchEnv) -> Measurement:
    path = built(env, "nodes snapshots", SNAPSHOT_ENTRIES(env), "build")
    return versus(env, "nodes.snapshot_load", "before", lambda python: child(
        python, "load", SNAPSHOT_ENTRIES(env), path(python), cache=bytecode(env)))


def cold_read(env: BenchEnv) -> Measurement:
    path = built(env, "nodes snapshots", SNAPSHOT_ENTRIES(env), "build")
    m = versus(env, "nodes.cold_read", "before", lambda python: child(
        python, "cold_read", env.n, path(python), cache=bytecode(env)))
    m.figures["us_per_read"] = 1e6 / m.rate
    return m


def import_rdb(env: BenchEnv) -> Measurement:
    """``<python> -m streamkeep import`` of the dump.rdb, timed as a whole process."""
    if shutil.which("redis-server") is None:
        raise Skip("redis-server not found on PATH")
    rdb, entries = interop.dump_rdb(env)

    def run(python: str) -> dict[str, Any]:
        out = os.path.join(os.path.dirname(rdb), "out")
        shutil.rmtree(out, ignore_errors=True)
        ready(python, bytecode(env))
        try:
            _done, seconds = run_child([python, "-m", "streamkeep", "import", rdb, "--out", out,
                                        "--json"], cwd=os.path.dirname(rdb))
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return {"ops": entries, "seconds": seconds}

    return versus(env, "nodes.import_rdb", "before", run)


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
    note = (f"nodes.footprint: {n:,} sensor entries, RSS growth live {figures['live_mb']:.1f} "
            f"MB, after a snapshot load {figures['load_mb']:.1f} MB, after an AOF replay "
            f"{figures['replay_mb']:.1f} MB")
    return Measurement(_rate(live), count=n, figures=figures, notes=[note])


def consume_embedded(env: BenchEnv) -> Measurement:
    return versus(env, "consume.embedded", "before",
                  lambda python: child(python, "consume", env.n, cache=bytecode(env)))


def consume_queue_batch(env: BenchEnv) -> Measurement:
    def run(python: str) -> dict[str, Any]:
        with env.data_dir("consume-queue") as path:
            return child(python, "queue_batch", env.n, path, cache=bytecode(env))
    return versus(env, "consume.queue_batch", "before", run)


def consume_catchup(env: BenchEnv) -> Measurement:
    """The backlog section's data set (each checkout's own build, once per run), copied
    afresh for each run and caught up on with backlog-memory 128mb."""
    path = built(env, "consume backlogs", BACKLOG_ENTRIES(env), "build_backlog")

    def run(python: str) -> dict[str, Any]:
        with env.data_dir("consume-catchup") as copy:
            shutil.copytree(path(python), copy)
            return child(python, "catchup", catchup_entries(env), copy, cache=bytecode(env))
    return versus(env, "consume.catchup", "before", run)


def _children_cpu() -> float:
    """User + system seconds of this process's waited-for children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def crash_run(env: BenchEnv, python: str) -> dict[str, Any]:
    """One ``crashbench --policy always --ops OPS --json FILE`` under ``python`` (a run that
    reports a violation still gives its rate): {"ops": points judged, "seconds": the report's,
    "wall_s": start to exit, "cpu_s": its and its workers' CPU, "violations"}."""
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
    return {"ops": sum(r["covered"] for r in rows), "seconds": sum(r["seconds"] for r in rows),
            "wall_s": wall, "cpu_s": cpu,
            "violations": sum(sum(r["violations"].values()) for r in rows)}


def crash_exhaustive(env: BenchEnv) -> Measurement:
    """This checkout's best points/s; figures: CPU ms per point, the wall time, and given
    --before each pair's time and CPU, before / this (the checkouts may count different points
    for one run; on a busy machine its CPU says more than its wall time)."""
    rounds: list[dict[str, Any]] = []
    measured = versus(env, "crashbench.exhaustive", "before",
                      lambda python: crash_run(env, python), rounds)
    mine, theirs = [r["this"] for r in rounds], [r["other"] for r in rounds if "other" in r]
    best = max(mine, key=lambda r: r["ops"] / r["seconds"])
    measured.count = best["ops"]
    measured.figures["wall_s"] = best["wall_s"]
    measured.figures["cpu_ms_per_point"] = min(1000 * r["cpu_s"] / max(r["ops"], 1)
                                               for r in mine)
    for name, what in (("seconds", "time"), ("cpu_s", "CPU")) if theirs else ():
        ratios = [t[name] / max(m[name], 1e-9) for m, t in zip(mine, theirs, strict=True)]
        measured.figures[f"{name}_ratio_min"] = min(ratios)
        measured.notes.append(
            f"crashbench.exhaustive: the run's {what}, before / this per run "
            f"{', '.join(f'{r:.2f}x' for r in ratios)}; best "
            f"{min(m[name] for m in mine):.1f} s vs {min(t[name] for t in theirs):.1f} s")
    if any(r["violations"] for r in mine + theirs):
        measured.notes.append("crashbench: a run reported violations (its rate still counts; "
                              "`streamkeep crashbench` shows them)")
    return measured
