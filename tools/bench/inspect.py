"""The ``inspect`` section: the offline inspection CLI's speed and memory on a big AOF.

Owns its workload: a data directory of :func:`records` XADD records (5 x N: 1M at the default
N), built once per run with appendfsync no and reused by both rows; each row runs the real
command (``python -m streamkeep aof verify DIR --json`` / ``aof dump DIR --format json``, output
to /dev/null) as a child process, timed from its start to its exit (interpreter start-up
included), and reports its peak RSS (``VmHWM``, or its largest worker process's) as a figure:
constant memory means it does not grow with the AOF. Must not touch: the commands (tools/inspect), the registry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RECORDS_PER_N = 5
SENSOR = ("sensor-id", "1234", "temperature", "19.8")  # each record's fields
# The child: run one CLI command, then report its exit status and peak RSS on stderr's last line.
# (VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a big bench process
# would report the bench's own peak.)
_CHILD = (
    "import json, resource, sys\n"
    "from streamkeep.tools.main import main\n"
    "rc = main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
    "rss = int(hwm.split()[1]) * 1024\n"
    "workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps({'rc': rc, 'peak_rss': rss, 'workers_peak_rss': workers}), "
    "file=sys.stderr)\n"
)


def records(env: BenchEnv) -> int:
    return RECORDS_PER_N * env.n


def describe(env: BenchEnv) -> list[str]:
    return [f"inspect: a data directory of {records(env):,} XADD records (appendfsync no, "
            f"segments of 64 MB, no snapshot); each row runs the command as a child process "
            f"(python -m streamkeep ..., output to /dev/null), timed from start to exit, and "
            f"reports the peak RSS of the child or its largest worker process"]


def _data(env: BenchEnv) -> str:
    """The run's shared data directory (built on first use)."""
    def start() -> Any:
        ctx = env.data_dir("inspect")
        path = ctx.__enter__()
        datasets.build(path, datasets.DataSet(records(env), "sensor", streams=16,
                                              fields=lambda _i: SENSOR), compact=False)
        return _Shared(path, ctx)

    shared: _Shared = env.shared("inspect-data", start)
    return shared.path


class _Shared:
    def __init__(self, path: str, ctx: Any) -> None:
        self.path = path
        self.ctx = ctx

    def stop(self) -> None:
        self.ctx.__exit__(None, None, None)

    def describe(self) -> list[str]:
        return []


def _run_child(argv: list[str], keep_output: bool = False) -> tuple[float, int, str]:
    """(wall seconds, peak RSS of the command's process or of its largest worker, stdout)."""
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv],
                          stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False,
                          **temporaries.child_options())
    elapsed = time.perf_counter() - began
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "{}"
    try:
        report = json.loads(last)
    except ValueError:
        report = {}
    if report.get("rc") not in (0,):
        raise AssertionError(f"streamkeep {' '.join(argv)} failed (status "
                             f"{report.get('rc', proc.returncode)}): {proc.stderr[-500:]}")
    return elapsed, max(int(report["peak_rss"]), int(report["workers_peak_rss"])), \
        proc.stdout or ""


def _measure(env: BenchEnv, argv: list[str], own_time: bool = False) -> Measurement:
    """Run the command on the shared directory. With `own_time`, the rate is the one the
    command's JSON report gives (its checking time, the interpreter's start-up left out), and
    the command's wall time is a figure; else records / wall time."""
    path = _data(env)
    elapsed, rss, out = _run_child([*argv[:2], path, *argv[2:]], keep_output=own_time)
    n = records(env)
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if f.endswith(".aof"))
    rate = n / elapsed
    figures = {"peak_rss_mb": rss / 1e6}
    note = (f"streamkeep {' '.join(argv)}: {n:,} records ({size / 1e6:.1f} MB of segments) in "
            f"{elapsed:.3f} s from start to exit, peak RSS {rss / 1e6:.1f} MB (the command's "
            f"process or its largest worker)")
    if own_time:
        seconds = float(json.loads(out)["seconds"])
        rate = n / seconds
        figures["wall_records_per_s"] = n / elapsed
        note += f"; its own report: {seconds:.3f} s checking ({rate:,.0f} records/s)"
    return Measurement(rate, count=n, figures=figures, notes=[note])


def bench_verify(env: BenchEnv) -> Measurement:
    return _measure(env, ["aof", "verify", "--json"], own_time=True)


def bench_dump_json(env: BenchEnv) -> Measurement:
    return _measure(env, ["aof", "dump", "--format", "json"])
