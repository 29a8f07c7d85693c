"""The ``backlog`` section's workloads: a stream, a list and a hash bigger than their memory
budget, cold against resident, each mode in a fresh child process (``python -m streamkeep.tools.bench.backlog
MODE PATH ...``) on its own copy of a data set built once per run (the stream's written as a
snapshot directly: :func:`build`, which nodes_child.py runs under each checkout); a small
stream's compaction; a trimmed stream compacted 50 times. Must not touch: the engine's storage.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, cast

from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import (
    Measurement,
    Size,
    clocked,
    consume,
    info_fields,
    module_child,
)
from streamkeep.tools.servers import proc_status

if TYPE_CHECKING:
    from streamkeep.engine.services.datadir import DataDir
    from streamkeep.tools.bench.env import BenchEnv

KEY, GROUP = "backlog", "g"
BUDGET = 128 << 20  # backlog-memory of the cold mode: 128mb
ENTRIES = Size(100, 4, per_n=True, least=10_000)  # 20,000,000 at the default N
BEHIND_SHARE = 0.75  # the group is 15M entries behind
CATCHUP_PER_N = 5  # entries the lagging consumer reads and acknowledges: 1,000,000
COMPACT_ENTRIES = Size(100_000, 2_000)  # new entries before the timed compaction
TRIMMED_ENTRIES = Size(100_000, 2_000)  # the trimmed stream's length
TRIMMED_ROUNDS = 50  # compactions of the trimmed stream, each after 1/10 of it is replaced
BASE_MS = 1_700_000_000_000
LIST_KEY = "queue"
LIST_BUDGET = 8 << 20  # backlog-memory of the list_cold mode: 8mb
ELEMENTS = Size(10, 1, per_n=True, least=50_000)  # the list's: 2,000,000 at the default N
PUSH_BATCH = PAGE = 1_000  # elements an RPUSH of the build, an LRANGE of the scan
HASH_KEY = "big"
HASH_BUDGET = 64 << 20  # backlog-memory of the hash_cold mode: 64mb
FIELDS = Size(50, 1, per_n=True, least=100_000)  # the hash's: 10,000,000 at the default N
HGETS = 50_000  # HGETs of random fields, timed
MB = 1 << 20


def catchup_entries(env: BenchEnv) -> int:
    return min(env.n * CATCHUP_PER_N, int(ENTRIES(env) * BEHIND_SHARE))


def build(path: str, n: int) -> None:
    """A data directory at `path` holding the stream's data set (see the module docstring).
    (Under this name: nodes_child.py builds it with each checkout's own.)"""
    datasets.build_generated(path, datasets.DataSet(
        n, KEY, fields=lambda i: (b"v", b"%08d" % i), first_ms=BASE_MS, group=GROUP,
        read=n - int(n * BEHIND_SHARE), ack_every=1))


def build_list(path: str, count: int) -> None:
    """A data directory at `path` holding the list's data set (see the module docstring)."""
    from streamkeep import Engine

    with Engine.open(path, appendfsync="no") as engine:
        for first in range(0, count, PUSH_BATCH):
            engine.execute("RPUSH", LIST_KEY, *(b"job:%08d:payload-xxxxxxxxxx" % i
                                                for i in range(first, min(first + PUSH_BATCH,
                                                                          count))))
        engine.compact(wait=True)


def _field(i: int) -> bytes:
    return b"field:%010d" % i


def build_hash(path: str, count: int) -> None:
    """A data directory at `path` holding the hash's data set: `count` fields, compacted."""
    from streamkeep import Engine

    with Engine.open(path, appendfsync="no", auto_aof_rewrite_percentage=0) as engine:
        for first in range(0, count, PUSH_BATCH):
            engine.execute("HSET", HASH_KEY, *(x for i in range(first, min(first + PUSH_BATCH,
                                                                          count))
                                               for x in (_field(i), b"value-%d" % i)))
        engine.compact(wait=True)


def _in_child(env: BenchEnv, name: str, build_at: Callable[[str], None], mode: str,
              *args: object) -> dict[str, float]:
    """A mode's child on a fresh copy of the run's data set ``name`` (built once, by
    ``build_at(path)``): its JSON report."""
    def made() -> Iterator[str]:
        with env.data_dir(name) as path:
            build_at(path)
            yield path

    source = env.shared(name, made)
    with env.data_dir(f"backlog-{mode}") as path:
        shutil.copytree(source, path)
        return module_child(__name__, mode, path, *args)


def child(mode: str, path: str, appends: int, catchup: int, new: int) -> dict[str, float]:
    """A stream mode: open the copy in `path` in this process and measure it."""
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
    done, seconds = clocked(consume, execute, KEY, limit=catchup)
    out["catchup_per_s"] = done / seconds
    engine.compact()  # what the budget asked for meanwhile, untimed
    journal = cast("DataDir", engine.datadir).journal
    logged = journal.aof_bytes
    for i in range(new):
        execute("XADD", KEY, "*", "v", f"{i:08d}")
    out["new_log_bytes"] = journal.aof_bytes - logged
    entry, out["compact_s"] = clocked(engine.compact)
    out["compact_written"] = float(written_by(path, entry))
    out["cold_entries"] = float(info_fields(engine.execute("INFO", "memory"))["stream_entries_cold"])
    out["final_rss"], out["peak_rss"] = proc_status("VmRSS"), proc_status("VmHWM")
    engine.close()
    if mode == "cold":
        began = time.perf_counter()
        with Engine.open(path, backlog_memory=budget) as engine:
            engine.execute("PING")
            out["restart_segmented_s"] = time.perf_counter() - began
        out.update(scans(path))
    return out


def list_child(mode: str, path: str) -> dict[str, float]:
    """A list mode: open the copy in `path` in this process and measure it."""
    from streamkeep import Engine

    began = time.perf_counter()
    with Engine.open(path, backlog_memory=LIST_BUDGET if mode == "list_cold" else 0) as engine:
        count = int(engine.execute("LLEN", LIST_KEY))
        restart, rss = time.perf_counter() - began, proc_status("VmRSS")
        middle = engine.execute("LINDEX", LIST_KEY, count // 2)
        assert middle == b"job:%08d:payload-xxxxxxxxxx" % (count // 2), middle
        cold = int(info_fields(engine.execute("INFO", "memory")).get("list_elements_cold", "0"))
        began, seen = time.perf_counter(), 0
        for start in range(0, count, PAGE):
            seen += len(engine.execute("LRANGE", LIST_KEY, start, start + PAGE - 1))
        scan = time.perf_counter() - began
        assert seen == count, (seen, count)
    return {"restart_s": restart, "open_rss": rss, "cold_elements": cold, "elements": count,
            "scan_s": scan}


def hash_child(mode: str, path: str) -> dict[str, float]:
    """A hash mode: open the copy in `path` in this process, to its first HGET served, then
    HGETS random fields."""
    import random

    from streamkeep import Engine

    rng = random.Random(7)
    budget = HASH_BUDGET if mode == "hash_cold" else 0
    began = time.perf_counter()
    with Engine.open(path, backlog_memory=budget, auto_aof_rewrite_percentage=0) as engine:
        execute = engine.execute
        count = int(execute("HLEN", HASH_KEY))
        assert execute("HGET", HASH_KEY, _field(count - 1)) == b"value-%d" % (count - 1)
        restart, rss = time.perf_counter() - began, proc_status("VmRSS")
        picks = [rng.randrange(count) for _ in range(HGETS)]
        began = time.perf_counter()
        for i in picks:
            execute("HGET", HASH_KEY, _field(i))
        hgets = HGETS / (time.perf_counter() - began)
        assert execute("HGET", HASH_KEY, _field(picks[0])) == b"value-%d" % picks[0]
        cold = int(info_fields(execute("INFO", "memory")).get("hash_elements_cold", "0"))
    return {"restart_s": restart, "open_rss": rss, "peak_rss": proc_status("VmHWM"),
            "hget_per_s": hgets, "cold_fields": cold, "fields": count}


def written_by(path: str, entry: object) -> int:
    """Bytes of the files a compaction wrote: its snapshot's own file and its new part."""
    from streamkeep.aof.manifest import SnapshotEntry, part_file

    assert isinstance(entry, SnapshotEntry)
    return entry.size + sum(p.size for p in entry.parts if p.file == part_file(entry.lsn))


def scans(path: str) -> dict[str, float]:
    """The whole stream scanned through the reader (nodes decoded, as a Spark task reads
    them): the segmented snapshot's entries/s, and the generated one-file snapshot's."""
    from streamkeep.aof.manifest import snapshot_file
    from streamkeep.snapshot.reader import Snapshot, current_snapshot

    single, segmented = os.path.join(path, snapshot_file(1)), current_snapshot(path)
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


def bench_mode(env: BenchEnv, mode: str) -> Measurement:
    """``cold`` or ``resident``: the XADD rate; the rest as figures and a note."""
    compact = COMPACT_ENTRIES(env)
    got = _in_child(env, "backlog-data", lambda path: build(path, ENTRIES(env)), mode, env.n,
                    catchup_entries(env), compact)
    figures = {"restart_s": got["restart_s"], "catchup_per_s": got["catchup_per_s"],
               "peak_rss_mb": got["peak_rss"] / MB, "final_rss_mb": got["final_rss"] / MB,
               "open_rss_mb": got["open_rss"] / MB, "compact_s": got["compact_s"],
               "cold_entries": got["cold_entries"],
               "compact_written_mb": got["compact_written"] / MB,
               "compact_written_ratio": got["compact_written"] / max(got["new_log_bytes"], 1)}
    figures.update({name: got[name] for name in ("restart_segmented_s", "scan_ratio",
                                                 "scan_single_per_s", "scan_segmented_per_s")
                    if name in got})
    return Measurement(got["xadd_per_s"], count=env.n, figures=figures)


def bench_list_mode(env: BenchEnv, mode: str) -> Measurement:
    """``list_cold`` or ``list_resident``: elements scanned per second."""
    got = _in_child(env, "backlog-list-data", lambda path: build_list(path, ELEMENTS(env)),
                    mode)
    count = int(got["elements"])
    figures = {"restart_s": got["restart_s"], "open_rss_mb": got["open_rss"] / MB,
               "cold_elements": got["cold_elements"], "scan_s": got["scan_s"]}
    return Measurement(count / got["scan_s"], count=count, figures=figures)


def bench_hash(env: BenchEnv) -> Measurement:
    """The big hash cold (``hash_cold``, a fresh process under HASH_BUDGET) and resident
    (``hash_resident``), one after the other on copies of one data set: the cold process's
    HGET rate, its restart and RSS against the resident one's as figures."""
    def made(path: str) -> None:
        build_hash(path, FIELDS(env))

    resident = _in_child(env, "backlog-hash-data", made, "hash_resident")
    cold = _in_child(env, "backlog-hash-data", made, "hash_cold")
    figures = {"restart_s": cold["restart_s"], "resident_restart_s": resident["restart_s"],
               "restart_ratio": cold["restart_s"] / resident["restart_s"],
               "open_rss_mb": cold["open_rss"] / MB, "resident_rss_mb": resident["open_rss"] / MB,
               "rss_ratio": cold["open_rss"] / resident["open_rss"],
               "peak_rss_mb": cold["peak_rss"] / MB,
               "hget_per_s": cold["hget_per_s"], "resident_hget_per_s": resident["hget_per_s"],
               "cold_fields": cold["cold_fields"], "fields": cold["fields"]}
    return Measurement(cold["hget_per_s"], count=HGETS, figures=figures)


def bench_compact_small(env: BenchEnv) -> Measurement:
    """A compaction of a small stream (rate: its entries/s); figure ``compact_ratio``, the
    cold row's compaction (of the same run) over this one."""
    from streamkeep import Engine

    n = COMPACT_ENTRIES(env)
    with env.data_dir("backlog-small") as path, \
            Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        # A first compaction starts the build child, as the big backlog's has run one before
        # its timed one: both time a compaction of a running server.
        engine.execute("XADD", "warm-up", "*", "v", "0")
        engine.compact()
        for i in range(n):
            engine.execute("XADD", KEY, "*", "v", f"{i:08d}")
        _snapshot, seconds = clocked(engine.compact)
    figures = {"compact_s": seconds}
    cold = env.results.get("backlog.cold")
    if cold is not None and "compact_s" in cold.figures:
        figures["compact_ratio"] = cold.figures["compact_s"] / seconds
    return Measurement(n / seconds, count=n, figures=figures)


def bench_trimmed(env: BenchEnv) -> Measurement:
    """A stream trimmed as fast as it grows, compacted TRIMMED_ROUNDS times: the disk its
    snapshot takes over a one-file snapshot of the same state (rate: compactions/s)."""
    from streamkeep import Engine
    from streamkeep.snapshot.writer import write_snapshot

    n = TRIMMED_ENTRIES(env)
    with env.data_dir("backlog-trimmed") as path, \
            Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        for i in range(n):
            engine.execute("XADD", KEY, "*", "v", f"{i:08d}")
        began, written = time.perf_counter(), 0
        for round_ in range(TRIMMED_ROUNDS):
            for i in range(n // 10):
                engine.execute("XADD", KEY, "*", "v", f"{round_:04d}{i:06d}")
            engine.execute("XTRIM", KEY, "MAXLEN", str(n))
            written += written_by(path, engine.compact())
        seconds = time.perf_counter() - began
        snap = cast("DataDir", engine.datadir).journal.manifest.snapshot
        assert snap is not None
        single = os.path.join(path, "single.mdb.check")
        write_snapshot(engine.dbs, single, snap.lsn, 0, "0" * 40, checksum=False)
        live, on_disk, parts = os.path.getsize(single), snap.total_size, len(snap.parts)
        os.unlink(single)
    figures = {"space_ratio": on_disk / live, "on_disk_mb": on_disk / MB, "live_mb": live / MB,
               "parts": parts, "written_per_round_mb": written / TRIMMED_ROUNDS / MB}
    return Measurement(TRIMMED_ROUNDS / seconds, count=TRIMMED_ROUNDS, figures=figures)


if __name__ == "__main__":  # the child
    if sys.argv[1].startswith("list_"):
        print(json.dumps(list_child(sys.argv[1], sys.argv[2])), flush=True)
    elif sys.argv[1].startswith("hash_"):
        print(json.dumps(hash_child(sys.argv[1], sys.argv[2])), flush=True)
    else:
        print(json.dumps(child(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6]))))
