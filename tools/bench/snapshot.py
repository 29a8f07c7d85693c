"""The ``snapshot`` section's workloads: the restart of a stream with a consumer group from its
snapshot, XADD p99 while it compacts against p99 just before, and the directory's size under a
steady workload with automatic compaction. Must not touch: engine internals (its public API,
the compactor's job and the "snapshot ... loaded" log line).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import (
    GROUP,
    KEY,
    Measurement,
    Size,
    clocked,
    fill,
    percentile_us,
    warmup_size,
)
from streamkeep.tools.text_width import format_table

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

SNAPSHOT_ENTRIES_PER_N = 5  # the snapshot section's stream: 5 x N entries (1,000,000 at full N)
STREAM_ENTRIES = Size(SNAPSHOT_ENTRIES_PER_N, per_n=True)
SNAPSHOT_READ_FRACTION = 10  # its group reads the first 1/10 of the stream ...
SNAPSHOT_CONSUMERS = 4  # ... in chunks, round-robin over this many consumers, acking every other
DISK_MAXLEN = 5_000  # the bounded-disk workload: XADD MAXLEN ~ this ...
DISK_READ_EVERY = 100  # ... with XREADGROUP COUNT this + XACK after every this many XADDs
DISK_CONSUMERS = 3
DISK_MIN_SIZE = Size(1 << 20, 128 << 10)  # its auto-aof-rewrite-min-size
DISK_OPS_QUICK_FACTOR = 8  # with --quick (or a small N) it runs 8 x N XADDs, else N
DISK_OPS = Size(1, DISK_OPS_QUICK_FACTOR, per_n=True)
DISK_SAMPLES = 100  # directory size samples over the run (the series prints every tenth)
# The restart and no-pause row's engine:
SETTINGS: dict[str, Any] = {"appendfsync": "everysec", "auto_aof_rewrite_percentage": 0}


def load(env: BenchEnv) -> Measurement:
    return env.in_dir("snapshot", bench_snapshot, STREAM_ENTRIES(env), env.n)


def disk(env: BenchEnv) -> Measurement:
    return env.in_dir("disk", bench_snapshot_disk, DISK_OPS(env), DISK_MIN_SIZE(env))


class _SnapshotLoadLog(logging.Handler):
    """Catches the data directory's ``snapshot <file> loaded: ... E entries, ... in T s`` line
    while ``Engine.open`` runs: (entries, seconds; unrounded when the record's last argument)."""

    LINE = re.compile(r"^snapshot \S+ loaded: .*?(\d+) entries, .* in ([\d.]+) s$")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.loaded: tuple[int, float] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if m := self.LINE.match(record.getMessage()):
            seconds = record.args[-1] if isinstance(record.args, tuple) and record.args else None
            self.loaded = (int(m.group(1)), seconds if isinstance(seconds, float)
                           else float(m.group(2)))


@contextlib.contextmanager
def _catch_snapshot_load() -> Iterator[_SnapshotLoadLog]:
    logger = logging.getLogger("streamkeep.aof")
    handler, level = _SnapshotLoadLog(), logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _timed_xadds(execute: Callable[..., Any], limit: int,
                 running: Callable[[], bool] = lambda: True) -> list[int]:
    """Up to ``limit`` XADDs to a side stream, each timed (ns, in order), while ``running()``
    (checked before each, outside its time)."""
    clock, times = time.perf_counter_ns, []
    for _ in range(limit):
        if not running():
            break
        start = clock()
        execute("XADD", "latency", "*", "f", "v")
        times.append(clock() - start)
    return times


def _latency_row(label: str, times: Sequence[int]) -> list[str]:
    ordered = sorted(times)
    return ["snapshot", label, f"{len(ordered):,}",
            *(f"{percentile_us(ordered, q):,.1f}" for q in (0.5, 0.99, 0.999)),
            f"{ordered[-1] / 1000:,.1f}"]


def bench_snapshot(path: str, entries: int, latency_ops: int) -> Measurement:
    """Restart and no pause, on one data directory (automatic compaction off): ``entries``
    XADDs and a group with a PEL (reading the first tenth, acking every other), compacted
    (``compact_s``); ``Engine.open`` timed (``restart_s``; the rate: entries loaded per second
    of the load its log line gives); ``latency_ops`` timed XADDs, then as many at most while a
    ``compact(wait=False)`` runs (its call: ``start_ms``), both phases' p99 over the same
    number of XADDs (``p99_ratio``)."""
    from streamkeep import Engine

    to_read = entries // SNAPSHOT_READ_FRACTION
    state = datasets.DataSet(entries, KEY, group=GROUP, read=to_read, ack_every=2,
                             consumers=tuple(f"c{i}" for i in range(SNAPSHOT_CONSUMERS)),
                             chunk=max(1, min(1000, to_read // (10 * SNAPSHOT_CONSUMERS))))
    with Engine.open(path, **SETTINGS) as engine:
        pending = datasets.write(engine.execute, state)
        written, compact_s = clocked(engine.compact, wait=True)
        if written is None:
            raise AssertionError("compact() wrote no snapshot of the built stream")
    with _catch_snapshot_load() as caught:
        engine, restart_s = clocked(Engine.open, path, **SETTINGS)
    try:
        execute, compactor = engine.execute, engine.datadir.compactor
        restored = (execute("XLEN", KEY), execute("XPENDING", KEY, GROUP)[0],
                    len(execute("XINFO", "CONSUMERS", KEY, GROUP)))
        if restored != (entries, pending, SNAPSHOT_CONSUMERS):
            raise AssertionError(f"restart restored {restored} (entries, pending, consumers); "
                                 f"expected {(entries, pending, SNAPSHOT_CONSUMERS)}")
        if caught.loaded is None or caught.loaded[0] != entries:
            raise AssertionError(f"Engine.open logged {caught.loaded} (entries, seconds) for "
                                 f"the snapshot's load, expected {entries} entries")
        fill(execute, "latency", warmup_size(latency_ops))
        without = _timed_xadds(execute, latency_ops)
        start = time.perf_counter()
        engine.compact(wait=False)
        started = time.perf_counter()
        if (job := compactor.job) is None:
            raise AssertionError("compact(wait=False) started no compaction")
        during = _timed_xadds(execute, latency_ops, lambda: compactor.job is not None)
        window_s = time.perf_counter() - started
        job.done.wait()
        compaction_s = time.perf_counter() - start
        if job.error is not None:
            raise AssertionError(f"the compaction failed: {job.error}")
    finally:
        engine.close()
    if not during:
        raise AssertionError("the compaction ended before the first XADD of its window")
    baseline = without[-len(during):]
    p99_without, p99_during = (percentile_us(sorted(t), 0.99) for t in (baseline, during))
    note = "" if len(baseline) == len(without) else \
        f" (its last {len(baseline):,} of {len(without):,}: the window held fewer)"
    table = format_table(
        ["section", "XADD latency in us (1 thread, appendfsync everysec)", "XADDs", "p50", "p99",
         "p99.9", "max"],
        [_latency_row("without a compaction" + note, baseline),
         _latency_row(f"during a compaction: a {window_s:.2f} s window of its "
                      f"{compaction_s:.2f} s", during)], right={2, 3, 4, 5, 6})
    return Measurement(entries / caught.loaded[1], count=entries, notes=[table], figures={
        "restart_s": restart_s, "compact_s": compact_s, "start_ms": (started - start) * 1000,
        "p99_without_us": p99_without, "p99_during_us": p99_during,
        "p99_ratio": p99_during / p99_without})


def _dir_bytes(path: str) -> int:
    """Bytes of the segments and snapshots in a data directory, a snapshot being built too."""
    total = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name.startswith(("segment-", "snapshot-")):
                with contextlib.suppress(FileNotFoundError):  # removed by a compaction meanwhile
                    total += entry.stat().st_size
    return total


def bench_snapshot_disk(path: str, ops: int, min_size: int) -> Measurement:
    """Bounded disk: ``ops`` XADD MAXLEN ~ DISK_MAXLEN, the group reading and acking after
    every DISK_READ_EVERY (consumers in turn), automatic compaction at ``min_size``; the
    directory's segment + snapshot bytes sampled DISK_SAMPLES times: compactions completed, the
    peak of each half of the run and their ratio (an AOF that only grows doubles); XADDs/s."""
    from streamkeep import Engine

    engine: Any
    with Engine.open(path, appendfsync="everysec", auto_aof_rewrite_min_size=min_size) as engine:
        execute, compactor = engine.execute, engine.datadir.compactor
        execute("XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM")
        every, samples, turn = max(1, ops // DISK_SAMPLES), [], 0
        spans: list[list[float]] = []  # [seen start, seen end] of each compaction, polled
        seen = None
        start = time.perf_counter()
        for i in range(1, ops + 1):
            execute("XADD", KEY, "MAXLEN", "~", str(DISK_MAXLEN), "*", "f", "v")
            if compactor.job is not seen:
                now, seen = time.perf_counter(), compactor.job
                if spans and len(spans[-1]) == 1:
                    spans[-1].append(now)
                if seen is not None:
                    spans.append([now])
            if i % DISK_READ_EVERY == 0:
                reply = execute("XREADGROUP", "GROUP", GROUP, f"c{turn % DISK_CONSUMERS}",
                                "COUNT", str(DISK_READ_EVERY), "STREAMS", KEY, ">")
                turn += 1
                if reply:
                    execute("XACK", KEY, GROUP, *[entry[0] for entry in reply[0][1]])
            if i % every == 0:
                samples.append(_dir_bytes(path))
        elapsed = time.perf_counter() - start
        if (job := compactor.job) is not None:  # closing would abandon it
            job.done.wait()
        if spans and len(spans[-1]) == 1:
            spans[-1].append(time.perf_counter())
        runs, error = compactor.runs, compactor.last_error
    half = len(samples) // 2
    first, second = max(samples[:half] or samples), max(samples[half:])
    took = [f"{end - begin:.2f}" for begin, end in spans]
    if len(took) > 16:
        took[8:-7] = ["..."]
    notes = ["bounded disk: segments + snapshots, MB at 10%, 20%, ... 100% of the run: "
             + " ".join(f"{samples[max(0, len(samples) * k // 10 - 1)] / 1e6:.2f}"
                        for k in range(1, 11)),
             f"bounded disk: {len(spans)} compactions ran, seconds each (from the XADD loop): "
             + (" ".join(took) or "none"),
             *([f"bounded disk: the last compaction failed: {error}"] if error is not None
               else [])]
    return Measurement(ops / elapsed, count=ops, notes=notes, figures={
        "compactions": float(runs), "peak_first_mb": first / 1e6,
        "peak_second_mb": second / 1e6, "growth": second / first})
