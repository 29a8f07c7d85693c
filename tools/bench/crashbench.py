"""The ``crashbench`` section: how fast the crash bench judges crash points, against an older
checkout (``--before DIR``).

Owns its row: ``<python> -m streamkeep crashbench --policy always --ops OPS --json FILE``, the
documented run's configuration (exhaustive power loss, every fault model, two workers) on a
shorter workload, as a child process under this checkout's interpreter and, given
``--before``, the other's alternately (``nodes.versus``: the crash bench's command line is the
same in both, so each checkout measures its own code). The rate is the crash points judged per
second as the run's JSON report gives them (its rows' points over its seconds: recording the
workload and judging every point, the interpreter's start left out); the child's wall time
from start to exit is a figure beside it. A run that reports a violation still gives its rate
(the section measures speed; the crash bench's tests judge correctness), and says so in a note.
Must not touch: the crash bench (it only runs its command), the registry, other checkouts'
files (each run's report is written under this run's temp dirs).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.nodes import TIMEOUT, versus
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

OPS = 200  # operations of the recorded run (the documented run has 2,000)
QUICK_OPS = 40
POLICY = "always"


def ops(env: BenchEnv) -> int:
    return QUICK_OPS if env.quick else OPS


def describe(env: BenchEnv) -> list[str]:
    other = env.others.get("before", "none given (no ratio)")
    return [f"crashbench: `streamkeep crashbench --policy {POLICY} --ops {ops(env):,}` "
            f"(exhaustive, every fault model, 2 workers) in a child process, this checkout and "
            f"--before ({other}) alternately; points judged per second from its JSON report"]


def run_once(env: BenchEnv, python: str) -> dict[str, Any]:
    """One crash bench run under ``python``: {"ops": points judged, "seconds": the report's
    seconds, "wall_s": start to exit, "cpu_s": the CPU time of the run and its workers,
    "violations": how many}."""
    with env.data_dir("crashbench") as path:
        os.makedirs(path)
        report = os.path.join(path, "report.json")
        began, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run([python, "-m", "streamkeep", "crashbench", "--policy", POLICY,
                               "--ops", str(ops(env)), "--json", report],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              check=False, timeout=TIMEOUT, **temporaries.child_options())
        wall, cpu = time.perf_counter() - began, _children_cpu() - cpu
        if done.returncode not in (0, 1) or not os.path.exists(report):
            raise AssertionError(f"crashbench under {python} exited {done.returncode}: "
                                 f"{done.stderr.strip()[-2000:]}")
        with open(report) as f:
            rows = json.load(f)["rows"]
    return {"ops": sum(r["covered"] for r in rows), "seconds": sum(r["seconds"] for r in rows),
            "wall_s": wall, "cpu_s": cpu,
            "violations": sum(sum(r["violations"].values()) for r in rows)}


def _children_cpu() -> float:
    """User + system seconds of this process's waited-for children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def exhaustive(env: BenchEnv) -> Measurement:
    """The row: this checkout's best points/s (and, given --before, the ratio of each pair of
    runs). Figures: CPU milliseconds per point, the run's wall time, and, given --before, the
    same run's time and CPU, before / this, of each pair: the checkouts may count different
    points for the same run (this one judges a write and the fdatasync right after it once),
    and on a busy machine the CPU a run costs says more than the wall time it took."""
    mine: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []

    def run(python: str) -> dict[str, Any]:
        result = run_once(env, python)
        (mine if python == sys.executable else theirs).append(result)
        return result

    measured = versus(env, "crashbench.exhaustive", "before", run)
    best = max(mine, key=lambda r: r["ops"] / r["seconds"])
    measured.count = best["ops"]
    measured.figures["wall_s"] = best["wall_s"]
    measured.figures["cpu_ms_per_point"] = min(_cpu_ms(r) for r in mine)
    if theirs:
        pairs = list(zip(mine, theirs, strict=True))
        for name, what in (("seconds", "time"), ("cpu_s", "CPU")):
            ratios = [t[name] / max(m[name], 1e-9) for m, t in pairs]
            measured.figures[f"{name}_ratio_min"] = min(ratios)
            measured.notes.append(
                f"crashbench.exhaustive: the run's {what}, before / this per run "
                f"{', '.join(f'{r:.2f}x' for r in ratios)}; best "
                f"{min(m[name] for m in mine):.1f} s vs {min(t[name] for t in theirs):.1f} s")
    if any(r["violations"] for r in mine + theirs):
        measured.notes.append("crashbench: a run reported violations (its rate still counts; "
                              "`streamkeep crashbench` shows them)")
    return measured


def _cpu_ms(result: dict[str, Any]) -> float:
    return 1000 * result["cpu_s"] / max(result["ops"], 1)
