"""The ``nodes`` section: streams held as packed nodes, measured against other checkouts.

Owns its rows and how they compare. Every row runs in child processes, so the same workload
code runs under another checkout's interpreter (``--base DIR`` / ``--before DIR``: DIR's
``.venv/bin/python``, with that checkout installed):
- embedded rows: ``<python> -I nodes_child.py WORKLOAD ...`` (the public API alone, see
  tools/bench/nodes_child.py);
- server rows: ``<python> -m streamkeep serve`` as a child, driven over its socket by this
  process's redis-py. The client's parsing takes most of the wall time of such a loop, the
  same for both checkouts, so these rows compare the server's CPU time per op (its threads'
  nanosecond run time, processes.cpu_seconds; server and client on CPUs of their own while
  timed) as their figure; the wall-clock rates are in the note;
- import: ``<python> -m streamkeep import`` of one dump.rdb a redis-server SAVEd, timed whole.
Each interpreter's packages are compiled to bytecode before its first timed run
(``Bytecode``), as an installed package has its .pyc files.
Given the other checkout, a row runs RUNS times this checkout then the other, alternately (a
machine whose speed drifts affects both alike); its rate is this checkout's best, its figures
the ratio (this / other, higher is better) of every run: the worst (``ratio_min``), the best
and each in a note. Without it a row runs this checkout once and reports no ratio.
The footprint row (this checkout only) builds sensor entries live and restarts by snapshot
load and by AOF replay, each in a fresh process: RSS growth over the interpreter's.
Must not touch: the engine (it only runs it), the registry, other checkouts' files (their
servers and data dirs live in this run's temp dirs).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RUNS = 3  # alternating runs of each checkout per row
BATCH = 100
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nodes_child.py")
RANGE_PER_N = 2.5  # entries of the range rows' stream (nodes_child._ranges): 500k at N 200k
SNAPSHOT_PER_N = 5  # snapshot load, cold reads, footprint: 1M entries at the default N
IMPORT_PER_N = 2.5  # the imported dump.rdb: 500k entries at the default N
PIPELINE = 1_000
TIMEOUT = 3600.0
IMPORT_KEY = "mystream"

Run = Callable[[str], dict[str, Any]]  # python -> {"ops", "seconds", ...}


def python_of(checkout: str) -> str:
    """A checkout's interpreter, DIR/.venv/bin/python."""
    return os.path.join(os.path.abspath(checkout), ".venv", "bin", "python")


def describe(env: BenchEnv) -> list[str]:
    others = ", ".join(f"{label} {path}" for label, path in env.others.items()) or "none given"
    return [f"nodes: each row in child processes, this checkout ({os.path.dirname(CHILD)}) "
            f"and the other alternately, {RUNS} runs each, ratio this/other per run; other "
            f"checkouts: {others}; range rows over {int(env.n * RANGE_PER_N):,} entries, "
            f"snapshot rows {snapshot_entries(env):,}, import {import_entries(env):,}"]


def snapshot_entries(env: BenchEnv) -> int:
    return max(env.n * SNAPSHOT_PER_N, 1_000)


def import_entries(env: BenchEnv) -> int:
    return max(int(env.n * IMPORT_PER_N), 1_000)


# --- running the children ---------------------------------------------------------------------


class Bytecode:
    """The checkouts' bytecode, compiled once per interpreter before its first timed run
    (into the packages' ``__pycache__``, where a child started with ``-I`` would write it
    anyway).

    An installed package runs from the .pyc files its install compiled; a child that may not
    write bytecode (PYTHONDONTWRITEBYTECODE, which ``-I`` ignores but ``python -m streamkeep``
    honours) would compile every module from source at every start, and the rows that time a
    start (snapshot load, import) would time the compiler. Both checkouts are treated alike."""

    PACKAGES = ("streamkeep.engine", "streamkeep.aof", "streamkeep.snapshot",
                "streamkeep.replication", "streamkeep.tools")

    def __init__(self) -> None:
        self.warm: set[str] = set()

    def ready(self, python: str) -> None:
        """``python``'s packages compiled (the first time it is asked)."""
        if python in self.warm:
            return
        code = ("import compileall, importlib.util\n"
                f"for name in {self.PACKAGES!r}:\n"
                "    for path in importlib.util.find_spec(name).submodule_search_locations:\n"
                "        compileall.compile_dir(path, quiet=1)\n")
        subprocess.run([python, "-I", "-c", code], check=True, capture_output=True,
                       timeout=TIMEOUT, **temporaries.child_options())
        self.warm.add(python)

    def describe(self) -> list[str]:
        return []

    def stop(self) -> None:
        pass


def bytecode(env: BenchEnv) -> Bytecode:
    return env.shared("nodes bytecode", Bytecode)  # type: ignore[no-any-return]


def child(python: str, workload: str, n: int, path: str = "-", seed: int = 1,
          cache: Bytecode | None = None) -> dict[str, Any]:
    """One ``nodes_child.py`` workload under ``python``; its JSON line."""
    if cache is not None:
        cache.ready(python)
    done = subprocess.run([python, "-I", CHILD, workload, str(n), path, str(seed)],
                          capture_output=True, text=True, check=False, timeout=TIMEOUT,
                          **temporaries.child_options())
    if done.returncode != 0:
        raise AssertionError(f"nodes child {workload} under {python} failed: "
                             f"{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _rate(result: dict[str, Any]) -> float:
    return float(result["ops"]) / max(float(result["seconds"]), 1e-9)


def versus(env: BenchEnv, key: str, other: str, run: Run) -> Measurement:
    """``run`` under this interpreter and the ``other`` checkout's alternately, RUNS times;
    this one's best rate, the ratios' range in figures and a note."""
    if other not in env.others:
        result = run(sys.executable)
        return Measurement(_rate(result), count=int(result["ops"]),
                           notes=[f"{key}: no --{other} checkout given, no ratio"])
    theirs = python_of(env.others[other])
    mine_rates, ratios, their_rates, cpu_ratios = [], [], [], []
    for _ in range(RUNS):
        mine_run, their_run = run(sys.executable), run(theirs)
        mine, their = _rate(mine_run), _rate(their_run)
        mine_rates.append(mine)
        their_rates.append(their)
        ratios.append(mine / max(their, 1e-9))
        if "server_cpu" in mine_run and "server_cpu" in their_run:
            cpu_ratios.append(_cpu_per_op(their_run) / max(_cpu_per_op(mine_run), 1e-12))
    figures = {"ratio_min": min(ratios), "ratio_max": max(ratios),
               "other_rate": max(their_rates)}
    each = ", ".join(f"{r:.2f}x" for r in ratios)
    notes = [f"{key}: this / {other} per run {each} (range {min(ratios):.2f}-"
             f"{max(ratios):.2f}x); best {max(mine_rates):,.0f}/s vs {max(their_rates):,.0f}/s"]
    if cpu_ratios:
        figures |= {"cpu_ratio_min": min(cpu_ratios), "cpu_ratio_max": max(cpu_ratios)}
        each = ", ".join(f"{r:.2f}x" for r in cpu_ratios)
        notes.append(f"{key}: server CPU per op, {other} / this per run {each} (range "
                     f"{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}x)")
    return Measurement(max(mine_rates), figures=figures, notes=notes)


def _cpu_per_op(result: dict[str, Any]) -> float:
    return float(result["server_cpu"]) / max(float(result["ops"]), 1.0)


def embedded(env: BenchEnv, workload: str, other: str = "base") -> Measurement:
    """An embedded workload of nodes_child.py, this checkout vs ``other``."""
    return versus(env, f"nodes.{workload}", other,
                  lambda python: child(python, workload, env.n, cache=bytecode(env)))


# --- the server rows --------------------------------------------------------------------------


def _served(python: str, n: int, what: str, seed: int = 1) -> dict[str, Any]:
    server = StreamkeepServer(appendfsync="no", python=python).start()
    try:
        client = server.client
        size = n if what == "consume" else int(n * RANGE_PER_N)
        for start in range(1, size + 1, PIPELINE):
            pipe = client.pipeline(transaction=False)
            for i in range(start, min(start + PIPELINE, size + 1)):
                pipe.execute_command("XADD", "bench", f"{i}-1", "f", "v")
            pipe.execute()
        assert server.pid is not None  # (started)
        pid = server.pid
        with _apart(pid):
            cpu = cpu_seconds(pid)
            result = _served_consume(client) if what == "consume" else _served_ranges(
                client, size, what, random.Random(seed), max(n // 20, 10))
            after = cpu_seconds(pid)
        if cpu is None or after is None:
            return result
        return {**result, "server_cpu": after - cpu}
    finally:
        server.stop()


@contextlib.contextmanager
def _apart(pid: int) -> Iterator[None]:
    """The server's threads on one CPU and this process (the client) on another while the
    loop is timed. Left to the scheduler, whether the two shared a CPU changed from one run to
    the next, and the server's CPU per op with it, by up to 15%: more than the rows measure."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    mine = os.sched_getaffinity(0)
    cpus = sorted(mine)
    if len(cpus) < 2:
        yield
        return
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(task), {cpus[1]})
        os.sched_setaffinity(0, {cpus[0]})
    except OSError:  # (a thread gone meanwhile: the loop runs unpinned, as before)
        pass
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def _served_ranges(client: Any, size: int, what: str, rng: random.Random,
                   reads: int) -> dict[str, Any]:
    starts = [rng.randint(1, size) for _ in range(reads)]
    got = 0
    began = time.perf_counter()
    for s in starts:
        if what == "xrevrange":
            got += len(client.execute_command("XREVRANGE", "bench", f"{s}-1", "-", "COUNT",
                                              BATCH))
        else:
            got += len(client.execute_command("XRANGE", "bench", f"{s}-1", "+", "COUNT",
                                              BATCH))
    return {"ops": got, "seconds": time.perf_counter() - began}


def _served_consume(client: Any) -> dict[str, Any]:
    client.execute_command("XGROUP", "CREATE", "bench", "g", "0")
    done = 0
    began = time.perf_counter()
    while True:
        reply = client.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", BATCH,
                                       "STREAMS", "bench", ">")
        if not reply or not reply[0][1]:
            break
        entries = reply[0][1]
        client.execute_command("XACK", "bench", "g", *[e[0] for e in entries])
        done += len(entries)
    return {"ops": done, "seconds": time.perf_counter() - began}


def served(env: BenchEnv, what: str) -> Measurement:
    return versus(env, f"nodes.serve_{what}", "base", lambda python: _served(python, env.n, what))


# --- the rows against the older commit --------------------------------------------------------


class Built:
    """Per interpreter, one data dir built once per run by a ``nodes_child.py`` workload
    (``build``: a snapshot of numbered entries), removed at the run's end."""

    def __init__(self, entries: int, workload: str = "build") -> None:
        self.entries = entries
        self.workload = workload
        self.root = temporaries.temp_directory_path("bench-nodes")
        self.paths: dict[str, str] = {}

    def path(self, python: str) -> str:
        if python not in self.paths:
            path = os.path.join(self.root, f"data{len(self.paths)}")
            child(python, self.workload, self.entries, path)
            self.paths[python] = path
        return self.paths[python]

    def describe(self) -> list[str]:
        return []

    def stop(self) -> None:
        temporaries.remove(self.root)


def _built(env: BenchEnv) -> Built:
    return env.shared("nodes snapshots", lambda: Built(snapshot_entries(env)))  # type: ignore[no-any-return]


def snapshot_load(env: BenchEnv) -> Measurement:
    built = _built(env)
    return versus(env, "nodes.snapshot_load", "before",
                  lambda python: child(python, "load", built.entries, built.path(python),
                                       cache=bytecode(env)))


def cold_read(env: BenchEnv) -> Measurement:
    built = _built(env)
    m = versus(env, "nodes.cold_read", "before",
               lambda python: child(python, "cold_read", env.n, built.path(python),
                                    cache=bytecode(env)))
    m.figures["us_per_read"] = 1e6 / m.rate
    return m


class Dump:
    """A dump.rdb of one stream, filled and SAVEd by the run's redis-server, copied out."""

    def __init__(self, env: BenchEnv) -> None:
        client = env.redis
        self.entries = import_entries(env)
        client.delete(IMPORT_KEY)
        for start in range(0, self.entries, PIPELINE):
            pipe = client.pipeline(transaction=False)
            for _ in range(start, min(start + PIPELINE, self.entries)):
                pipe.execute_command("XADD", IMPORT_KEY, "*", "myfield", "myvalue")
            pipe.execute()
        client.save()
        client.delete(IMPORT_KEY)
        self.root = temporaries.temp_directory_path("bench-nodes-rdb")
        self.rdb = os.path.join(self.root, "dump.rdb")
        shutil.copy(os.path.join(str(client.config_get("dir")["dir"]),
                                 str(client.config_get("dbfilename")["dbfilename"])), self.rdb)

    def describe(self) -> list[str]:
        return []

    def stop(self) -> None:
        temporaries.remove(self.root)


def _import(python: str, dump: Dump, cache: Bytecode) -> dict[str, Any]:
    out = os.path.join(dump.root, "out")
    shutil.rmtree(out, ignore_errors=True)
    cache.ready(python)
    began = time.perf_counter()
    done = subprocess.run([python, "-m", "streamkeep", "import", dump.rdb, "--out", out,
                           "--json"], capture_output=True, text=True, check=False,
                          cwd=dump.root, timeout=TIMEOUT, **temporaries.child_options())
    seconds = time.perf_counter() - began
    shutil.rmtree(out, ignore_errors=True)
    if done.returncode != 0:
        raise AssertionError(f"streamkeep import under {python} exited {done.returncode}: "
                             f"{done.stderr.strip()[-2000:]}")
    return {"ops": dump.entries, "seconds": seconds}


def import_rdb(env: BenchEnv) -> Measurement:
    if shutil.which("redis-server") is None:
        raise Skip("redis-server not found on PATH")
    dump: Dump = env.shared("nodes dump.rdb", lambda: Dump(env))
    return versus(env, "nodes.import_rdb", "before",
                  lambda python: _import(python, dump, bytecode(env)))


# --- the restart footprint (this checkout only) -----------------------------------------------


def footprint(env: BenchEnv) -> Measurement:
    """RSS growth: n sensor entries built live; the same data restarted by AOF replay and, once
    compacted, by snapshot load; each in a fresh process."""
    n = snapshot_entries(env)
    python = sys.executable
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
