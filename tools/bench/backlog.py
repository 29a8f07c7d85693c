"""The ``backlog`` section: a stream bigger than memory, cold against resident.

Owns its data set and how it is measured. The data set is a data directory whose snapshot holds
one stream of ENTRIES_PER_N x N small entries (`v <8 digits>`; 20M at the default N) and a
group BEHIND_SHARE of them behind (never delivered), written directly with the snapshot writer
as a compaction would write it (datasets.build_generated; building it through XADD and a first
compaction would take the bench many minutes and twice the resident memory). Each mode runs in
a fresh child process on its own copy (`python -m streamkeep.tools.bench.backlog MODE PATH ...`,
one JSON line):

- ``backlog.cold``: `backlog-memory 128mb`; ``backlog.resident``: no budget (everything loaded).
  Each: restart to serving (open + PING), XADD rate of APPENDS_PER_N x N new entries, the
  lagging consumer's catch-up rate (XREADGROUP COUNT 100 + XACK, CATCHUP_PER_N x N entries),
  the process's peak and final RSS, and the time of a compaction after COMPACT_ENTRIES new
  entries and the bytes it wrote against the log bytes of those entries (the row's rate is the
  XADD rate). The cold mode then restarts again, now from the segmented snapshot the
  compactions left (its part files: the generated file, still holding the backlog's nodes,
  and the compactions' parts), and scans the whole stream through the snapshot reader as a
  Spark task does, against the same scan of the generated one-file snapshot (its entries/s
  over the one-file's);
- ``backlog.compact_small``: the same compaction on a stream of COMPACT_ENTRIES entries (after
  a first compaction, as the cold mode's timed one comes after another: the build child runs);
- ``backlog.trimmed``: a stream of TRIMMED_ENTRIES entries trimmed as fast as it grows,
  compacted TRIMMED_ROUNDS times: the disk its snapshot takes (its file and its parts) against
  a one-file snapshot of the same state (the live data).
Must not touch: the engine's storage (it only measures it), the registry.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from streamkeep.tools import temporaries
from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.engine.services.datadir import DataDir
    from streamkeep.tools.bench.env import BenchEnv

KEY = "backlog"
GROUP = "g"
BUDGET = 128 << 20  # backlog-memory of the cold mode: 128mb
ENTRIES_PER_N = 100  # 20,000,000 at the default N
BEHIND_SHARE = 0.75  # the group is 15M entries behind
APPENDS_PER_N = 1  # new entries timed: 200,000 at the default N
CATCHUP_PER_N = 5  # entries the lagging consumer reads and acknowledges: 1,000,000
COMPACT_ENTRIES = 100_000  # new entries before the timed compaction (quick: 2,000)
TRIMMED_ENTRIES = 100_000  # the trimmed stream's length (quick: 2,000)
TRIMMED_ROUNDS = 50  # compactions of the trimmed stream, each after 1/10 of it is replaced
BASE_MS = 1_700_000_000_000


def entries(env: BenchEnv) -> int:
    return max(env.n * (4 if env.quick else ENTRIES_PER_N), 10_000)


def catchup_entries(env: BenchEnv) -> int:
    return min(env.n * CATCHUP_PER_N, int(entries(env) * BEHIND_SHARE))


def compact_entries(env: BenchEnv) -> int:
    return 2_000 if env.quick else COMPACT_ENTRIES


def describe(env: BenchEnv) -> list[str]:
    n = entries(env)
    return [f"backlog: one stream of {n:,} entries `v <8 digits>`, a group "
            f"{int(n * BEHIND_SHARE):,} behind, written as a snapshot; each mode in a fresh "
            f"child process on its own copy: cold = backlog-memory {BUDGET >> 20}mb, resident "
            f"= no budget; RSS = the child's peak (VmHWM) and final (VmRSS); compaction after "
            f"{compact_entries(env):,} new entries, against the same on a "
            f"{compact_entries(env):,}-entry stream"]


# --- the data set --------------------------------------------------------------------------------


def _fields(i: int) -> tuple[bytes, bytes]:
    return (b"v", b"%08d" % i)


def build(path: str, n: int) -> None:
    """A data directory at `path` holding the data set (see the module docstring). (Under this
    name: nodes_child.py builds it with each checkout's own.)"""
    datasets.build_generated(path, datasets.DataSet(
        n, KEY, fields=_fields, first_ms=BASE_MS, group=GROUP, read=n - int(n * BEHIND_SHARE),
        ack_every=1))


# --- the child: one mode ---------------------------------------------------------------------


def proc_status(name: str) -> int:
    """A field of /proc/self/status in bytes (VmRSS, VmHWM); 0 if absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    return 0


def child(mode: str, path: str, appends: int, catchup: int, new: int) -> dict[str, float]:
    """Open the copy in `path` in this process and measure it (see the module docstring)."""
    from streamkeep import Engine

    budget = BUDGET if mode == "cold" else 0
    began = time.perf_counter()
    engine = Engine.open(path, backlog_memory=budget)
    engine.execute("PING")
    out: dict[str, float] = {"restart_s": time.perf_counter() - began,
                             "open_rss": proc_status("VmRSS")}
    execute = engine.execute
    began = time.perf_counter()
    for i in range(appends):
        execute("XADD", KEY, "*", "v", f"{i:08d}")
    out["xadd_per_s"] = appends / (time.perf_counter() - began)
    done = 0
    began = time.perf_counter()
    while done < catchup:
        reply = execute("XREADGROUP", "GROUP", GROUP, "c", "COUNT", "100", "STREAMS", KEY, ">")
        if not reply:
            break
        ids = [entry[0] for entry in reply[0][1]]
        execute("XACK", KEY, GROUP, *ids)
        done += len(ids)
    out["catchup_per_s"] = done / (time.perf_counter() - began)
    engine.compact()  # what the budget asked for meanwhile, untimed
    journal = cast("DataDir", engine.datadir).journal
    logged = journal.aof_bytes
    for i in range(new):
        execute("XADD", KEY, "*", "v", f"{i:08d}")
    out["new_log_bytes"] = journal.aof_bytes - logged
    began = time.perf_counter()
    entry = engine.compact()
    out["compact_s"] = time.perf_counter() - began
    out["compact_written"] = float(written_by(path, entry))
    info = dict(line.split(":", 1) for line in
                engine.execute("INFO", "memory").decode().splitlines() if ":" in line)
    out["cold_entries"] = float(info["stream_entries_cold"])
    out["final_rss"] = proc_status("VmRSS")
    out["peak_rss"] = proc_status("VmHWM")
    engine.close()
    if mode == "cold":
        began = time.perf_counter()
        with Engine.open(path, backlog_memory=budget) as engine:
            engine.execute("PING")
            out["restart_segmented_s"] = time.perf_counter() - began
        out.update(scans(path))
    return out


def written_by(path: str, entry: object) -> int:
    """Bytes of the files a compaction wrote: its snapshot's own file and its new part."""
    from streamkeep.aof.manifest import SnapshotEntry, part_file

    assert isinstance(entry, SnapshotEntry)
    new = [p.size for p in entry.parts if p.file == part_file(entry.lsn)]
    return entry.size + sum(new)


def scans(path: str) -> dict[str, float]:
    """The whole stream scanned through the reader (nodes decoded, as a Spark task reads
    them): the segmented snapshot's entries/s, and the generated one-file snapshot's."""
    from streamkeep.aof.manifest import snapshot_file
    from streamkeep.snapshot.reader import Snapshot, current_snapshot

    single = os.path.join(path, snapshot_file(1))
    segmented = current_snapshot(path)
    out: dict[str, float] = {}
    if segmented is None or not os.path.exists(single):  # (merged away: nothing to compare)
        return out
    for name, file in (("single", single), ("segmented", segmented)):
        with Snapshot(file) as snap:
            number = snap.streams()[0].number
            began = time.perf_counter()
            count = sum(len(node.ids) for node in snap.nodes(number))
            out[f"scan_{name}_per_s"] = count / (time.perf_counter() - began)
    out["scan_ratio"] = out["scan_segmented_per_s"] / out["scan_single_per_s"]
    return out


def run_child(module: str, *args: object) -> dict[str, float]:
    """`python -m <module> ARGS...` in a fresh process: its last stdout line, as JSON."""
    proc = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                          text=True, check=False, **temporaries.child_options())
    if proc.returncode != 0:
        raise AssertionError(f"{module} failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


class SharedDataSet:
    """A data set of a run built once, under `prefix`, by `build(path)`, for every mode (an
    env.shared resource)."""

    def __init__(self, env: BenchEnv, prefix: str, build_at: Callable[[str], None]) -> None:
        with env.data_dir("probe"):  # (makes the run's directory of data directories)
            pass
        self.parent = tempfile.mkdtemp(prefix=prefix, dir=env.tmp_root)
        self.path = os.path.join(self.parent, "data")
        build_at(self.path)

    def stop(self) -> None:
        shutil.rmtree(self.parent, ignore_errors=True)

    def describe(self) -> list[str]:
        return []


# The cold row's measurement, by run: the small compaction row divides by it.
_cold: dict[int, Measurement] = {}


def bench_mode(env: BenchEnv, mode: str) -> Measurement:
    source = env.shared("backlog-data", lambda: SharedDataSet(
        env, "backlog-source-", lambda path: build(path, entries(env)))).path
    with env.data_dir(f"backlog-{mode}") as path:
        shutil.copytree(source, path)
        got = run_child("streamkeep.tools.bench.backlog", mode, path, env.n * APPENDS_PER_N,
                        catchup_entries(env), compact_entries(env))
    mb = 1 << 20
    figures = {"restart_s": got["restart_s"], "catchup_per_s": got["catchup_per_s"],
               "peak_rss_mb": got["peak_rss"] / mb, "final_rss_mb": got["final_rss"] / mb,
               "open_rss_mb": got["open_rss"] / mb, "compact_s": got["compact_s"],
               "cold_entries": got["cold_entries"],
               "compact_written_mb": got["compact_written"] / mb,
               "compact_written_ratio": got["compact_written"] / max(got["new_log_bytes"], 1)}
    figures.update({name: got[name] for name in ("restart_segmented_s", "scan_ratio",
                                                 "scan_single_per_s", "scan_segmented_per_s")
                    if name in got})
    notes = [f"backlog.{mode}: restart {got['restart_s']:.2f} s, RSS peak "
             f"{figures['peak_rss_mb']:.0f} MB (after open {figures['open_rss_mb']:.0f} MB), "
             f"catch-up {got['catchup_per_s']:,.0f} entries/s, compaction after "
             f"{compact_entries(env):,} new entries {got['compact_s']:.2f} s writing "
             f"{figures['compact_written_mb']:.1f} MB ({figures['compact_written_ratio']:.2f}x "
             f"their log bytes), {got['cold_entries']:,.0f} entries cold at the end"]
    measured = Measurement(got["xadd_per_s"], count=env.n * APPENDS_PER_N, figures=figures,
                           notes=notes)
    if mode == "cold":
        _cold[id(env)] = measured
    return measured


def bench_compact_small(env: BenchEnv) -> Measurement:
    """A compaction of a stream of compact_entries(env) entries (rate: its entries/s)."""
    from streamkeep import Engine

    with env.data_dir("backlog-small") as path:
        engine = Engine.open(path, auto_aof_rewrite_percentage=0)
        try:
            # A first compaction starts the build child, as the big backlog's has run one
            # before its timed one: both time a compaction of a running server.
            engine.execute("XADD", "warm-up", "*", "v", "0")
            engine.compact()
            for i in range(compact_entries(env)):
                engine.execute("XADD", KEY, "*", "v", f"{i:08d}")
            began = time.perf_counter()
            engine.compact()
            seconds = time.perf_counter() - began
        finally:
            engine.close()
    figures = {"compact_s": seconds}
    cold = _cold.get(id(env))
    if cold is not None:  # the backlog's compaction over this one
        figures["compact_ratio"] = cold.figures["compact_s"] / seconds
    n = compact_entries(env)
    return Measurement(n / seconds, count=n, figures=figures)

def trimmed_entries(env: BenchEnv) -> int:
    return 2_000 if env.quick else TRIMMED_ENTRIES


def bench_trimmed(env: BenchEnv) -> Measurement:
    """A stream trimmed as fast as it grows, compacted TRIMMED_ROUNDS times: the disk its
    snapshot takes over a one-file snapshot of the same state (rate: compactions/s)."""
    from streamkeep import Engine
    from streamkeep.snapshot.writer import write_snapshot

    n = trimmed_entries(env)
    step = n // 10
    with env.data_dir("backlog-trimmed") as path:
        engine = Engine.open(path, auto_aof_rewrite_percentage=0)
        try:
            for i in range(n):
                engine.execute("XADD", KEY, "*", "v", f"{i:08d}")
            began = time.perf_counter()
            written = 0
            for round_ in range(TRIMMED_ROUNDS):
                for i in range(step):
                    engine.execute("XADD", KEY, "*", "v", f"{round_:04d}{i:06d}")
                engine.execute("XTRIM", KEY, "MAXLEN", str(n))
                written += written_by(path, engine.compact())
            seconds = time.perf_counter() - began
            snap = cast("DataDir", engine.datadir).journal.manifest.snapshot
            assert snap is not None
            on_disk = snap.total_size
            single = os.path.join(path, "single.mdb.check")
            write_snapshot(engine.dbs, single, snap.lsn, 0, "0" * 40, checksum=False)
            live = os.path.getsize(single)
            os.unlink(single)
            parts = len(snap.parts)
        finally:
            engine.close()
    figures = {"space_ratio": on_disk / live, "on_disk_mb": on_disk / (1 << 20),
               "live_mb": live / (1 << 20), "parts": parts,
               "written_per_round_mb": written / TRIMMED_ROUNDS / (1 << 20)}
    notes = [f"backlog.trimmed: {TRIMMED_ROUNDS} compactions of a {n:,}-entry stream trimmed "
             f"as it grows: {on_disk / (1 << 20):.1f} MB on disk in {parts} part files for "
             f"{live / (1 << 20):.1f} MB as one file ({on_disk / live:.2f}x); "
             f"{written / TRIMMED_ROUNDS / (1 << 20):.2f} MB written per compaction"]
    return Measurement(TRIMMED_ROUNDS / seconds, count=TRIMMED_ROUNDS, figures=figures,
                       notes=notes)


if __name__ == "__main__":  # the child
    print(json.dumps(child(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]))))
