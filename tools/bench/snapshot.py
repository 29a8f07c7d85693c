"""The ``snapshot`` section: the snapshot targets (restart, no pause, bounded disk) measured in
one run.

Owns its workloads and their parameters: the restart of a stream of 5 x N entries with a
consumer group (1,000,000 at full N) from its snapshot, XADD p99 while that state compacts
against the p99 just before (same directory, same number of XADDs) (:func:`bench_snapshot`),
and the directory's size under a steady workload with automatic compaction
(:func:`bench_snapshot_disk`); and its header line (:func:`describe`). A benchmark's notes (a
latency table, a size series) print under the figures.
Must not touch: engine internals (only ``Engine.open``/``execute``/``compact``/``close``, the
compactor's ``job``/``runs``/``last_error`` and the data directory's "snapshot ... loaded" log
line), other sections, or any data outside the directories ``BenchEnv.data_dir`` hands out.
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
from streamkeep.tools.bench.tables import format_table
from streamkeep.tools.bench.workload import (
    GROUP,
    KEY,
    Measurement,
    fill,
    percentile_us,
    warmup_size,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

SNAPSHOT_ENTRIES_PER_N = 5  # the snapshot section's stream: 5 x N entries (1,000,000 at full N)
SNAPSHOT_READ_FRACTION = 10  # its group reads the first 1/10 of the stream ...
SNAPSHOT_CONSUMERS = 4  # ... in chunks, round-robin over this many consumers, acking every other
DISK_MAXLEN = 5_000  # the bounded-disk workload: XADD MAXLEN ~ this ...
DISK_READ_EVERY = 100  # ... with XREADGROUP COUNT this + XACK after every this many XADDs
DISK_CONSUMERS = 3
DISK_MIN_SIZE, QUICK_DISK_MIN_SIZE = 1 << 20, 128 << 10  # its auto-aof-rewrite-min-size
DISK_OPS_QUICK_FACTOR = 8  # with --quick (or a small N) it runs 8 x N XADDs, else N
DISK_SAMPLES = 100  # directory size samples over the run (the series prints every tenth)


def stream_entries(env: BenchEnv) -> int:
    """Entries of the section's stream: 1,000,000 at full N."""
    return env.n * SNAPSHOT_ENTRIES_PER_N


def phase_ops(env: BenchEnv) -> int:
    """Timed XADDs per phase of the no-pause measurement (at most, while compacting)."""
    return env.n


def disk_ops(env: BenchEnv) -> int:
    """XADDs of the bounded-disk workload."""
    return env.n * DISK_OPS_QUICK_FACTOR if env.quick else env.n


def disk_min_size(env: BenchEnv) -> int:
    """The bounded-disk workload's auto-aof-rewrite-min-size."""
    return QUICK_DISK_MIN_SIZE if env.quick else DISK_MIN_SIZE


def describe(env: BenchEnv) -> list[str]:
    """The section's header line: where its data directories were and what its workloads ran."""
    where = env.where()
    if where is None:
        return []
    return [
        f"snapshot: {where}; appendfsync everysec; a {stream_entries(env):,}-entry "
        f"stream whose group read the first 1/{SNAPSHOT_READ_FRACTION} with "
        f"{SNAPSHOT_CONSUMERS} consumers, acking every other entry; no-pause phases of "
        f"{phase_ops(env):,} XADDs at most; bounded disk: {disk_ops(env):,} XADD "
        f"MAXLEN ~ {DISK_MAXLEN:,}, XREADGROUP COUNT {DISK_READ_EVERY} + XACK every "
        f"{DISK_READ_EVERY}, auto-aof-rewrite-min-size {disk_min_size(env) >> 10} KiB, "
        f"percentage 100"]


def _open_everysec(path: str, **config: Any) -> Any:
    from streamkeep import Engine

    return Engine.open(path, appendfsync="everysec", **config)


def _snapshot_state(entries: int) -> datasets.DataSet:
    """The stream the snapshot section compacts and reloads: ``entries`` XADDs to KEY, whose
    group reads the first 1/SNAPSHOT_READ_FRACTION of them in chunks, round-robin over
    SNAPSHOT_CONSUMERS consumers, acking every other entry it reads."""
    to_read = entries // SNAPSHOT_READ_FRACTION
    return datasets.DataSet(entries, KEY, group=GROUP,
                            consumers=tuple(f"c{i}" for i in range(SNAPSHOT_CONSUMERS)),
                            read=to_read, ack_every=2,
                            chunk=max(1, min(1000, to_read // (10 * SNAPSHOT_CONSUMERS))))


def _check_snapshot_state(engine: Any, entries: int, pending: int) -> None:
    length = engine.execute("XLEN", KEY)
    found = engine.execute("XPENDING", KEY, GROUP)[0]
    consumers = len(engine.execute("XINFO", "CONSUMERS", KEY, GROUP))
    if (length, found, consumers) != (entries, pending, SNAPSHOT_CONSUMERS):
        raise AssertionError(
            f"restart restored {length} entries, {found} pending, {consumers} consumers; "
            f"expected {entries}, {pending}, {SNAPSHOT_CONSUMERS}")


_SNAPSHOT_LOADED = re.compile(r"^snapshot \S+ loaded: .*?(\d+) entries, .* in ([\d.]+) s$")


class _SnapshotLoadLog(logging.Handler):
    """Catches the data directory's ``snapshot <file> loaded: ... E entries, ... in T s`` line
    while ``Engine.open`` runs: (entries, seconds), the seconds unrounded when the record
    carries them as its last argument."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.loaded: tuple[int, float] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        m = _SNAPSHOT_LOADED.match(record.getMessage())
        if m is None:
            return
        seconds = record.args[-1] if isinstance(record.args, tuple) and record.args else None
        if not isinstance(seconds, float):
            seconds = float(m.group(2))
        self.loaded = (int(m.group(1)), seconds)


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


def _timed_xadds(execute: Callable[..., Any], key: str, limit: int,
                 running: Callable[[], bool] | None = None) -> list[int]:
    """Up to ``limit`` XADD key * f v, each timed with perf_counter_ns (nanoseconds, in order);
    stops early once ``running()`` is false (checked before each XADD, outside its time)."""
    clock = time.perf_counter_ns
    times: list[int] = []
    record = times.append
    for _ in range(limit):
        if running is not None and not running():
            break
        start = clock()
        execute("XADD", key, "*", "f", "v")
        record(clock() - start)
    return times


def _latency_row(label: str, times: Sequence[int]) -> list[str]:
    ordered = sorted(times)
    return ["snapshot", label, f"{len(ordered):,}",
            *(f"{percentile_us(ordered, q):,.1f}" for q in (0.5, 0.99, 0.999)),
            f"{ordered[-1] / 1000:,.1f}"]


def bench_snapshot(path: str, entries: int, latency_ops: int) -> Measurement:
    """The snapshot section's restart and no-pause targets, on one data directory (appendfsync
    everysec, automatic compaction off: the bench compacts when it means to):

    1. build: ``entries`` XADDs plus a group with a PEL (:func:`_snapshot_state`), then
       ``compact(wait=True)`` (figure ``compact_s``) and close;
    2. restart: ``Engine.open`` timed (``restart_s``; the AOF tail is empty), the snapshot load
       taken from the open's log line; the row's rate is entries loaded per second;
    3. no pause: ``latency_ops`` timed XADDs to a side stream (the baseline), then
       ``compact(wait=False)`` (its call, the rotation under the engine lock: ``start_ms``) and
       timed XADDs only while that compaction runs, at most ``latency_ops``: the ops in that
       window. Both phases' p99 compare over the same number of XADDs (the last ones of the
       baseline if the window held fewer); p99 during / p99 without is ``p99_ratio``.
    """
    off = {"auto_aof_rewrite_percentage": 0}
    engine = _open_everysec(path, **off)
    try:
        pending = datasets.write(engine.execute, _snapshot_state(entries))
        start = time.perf_counter()
        if engine.compact(wait=True) is None:
            raise AssertionError("compact() wrote no snapshot of the built stream")
        compact_s = time.perf_counter() - start
    finally:
        engine.close()

    with _catch_snapshot_load() as caught:
        start = time.perf_counter()
        engine = _open_everysec(path, **off)
        restart_s = time.perf_counter() - start
    try:
        _check_snapshot_state(engine, entries, pending)
        if caught.loaded is None:
            raise AssertionError("Engine.open logged no 'snapshot ... loaded' line")
        loaded, load_s = caught.loaded
        if loaded != entries:
            raise AssertionError(f"the snapshot held {loaded} entries, expected {entries}")

        execute, compactor = engine.execute, engine.datadir.compactor
        fill(execute, "latency", warmup_size(latency_ops))
        without = _timed_xadds(execute, "latency", latency_ops)
        start = time.perf_counter()
        engine.compact(wait=False)
        started = time.perf_counter()
        job = compactor.job
        if job is None:
            raise AssertionError("compact(wait=False) started no compaction")
        during = _timed_xadds(execute, "latency", latency_ops,
                              lambda: compactor.job is not None)
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
    p99_without = percentile_us(sorted(baseline), 0.99)
    p99_during = percentile_us(sorted(during), 0.99)
    note = "" if len(baseline) == len(without) else \
        f" (its last {len(baseline):,} of {len(without):,}: the window held fewer)"
    table = format_table(
        ["section", "XADD latency in us (1 thread, appendfsync everysec)", "XADDs", "p50", "p99",
         "p99.9", "max"],
        [_latency_row("without a compaction" + note, baseline),
         _latency_row(f"during a compaction: a {window_s:.2f} s window of its "
                      f"{compaction_s:.2f} s", during)],
        right={2, 3, 4, 5, 6})
    return Measurement(entries / load_s, count=entries, figures={
        "restart_s": restart_s, "compact_s": compact_s, "start_ms": (started - start) * 1000,
        "p99_without_us": p99_without, "p99_during_us": p99_during,
        "p99_ratio": p99_during / p99_without,
    }, notes=[table])


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
    """Bounded disk: ``ops`` XADD MAXLEN ~ DISK_MAXLEN on one stream, its group reading
    (XREADGROUP COUNT DISK_READ_EVERY, consumers round-robin) and acking after every
    DISK_READ_EVERY XADDs, with automatic compaction at auto-aof-rewrite-min-size ``min_size``
    (percentage 100). The directory's segment + snapshot bytes are sampled DISK_SAMPLES times;
    figures: compactions completed, the peak of each half of the run and their ratio (an AOF
    that only grows doubles). XADDs/s is the row's rate."""
    engine = _open_everysec(path, auto_aof_rewrite_min_size=min_size)
    try:
        execute, compactor = engine.execute, engine.datadir.compactor
        maxlen, count = str(DISK_MAXLEN), str(DISK_READ_EVERY)
        execute("XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM")
        every = max(1, ops // DISK_SAMPLES)
        samples: list[int] = []
        spans: list[list[float]] = []  # [seen start, seen end] of each compaction, polled
        seen = None
        turn = 0
        start = time.perf_counter()
        for i in range(1, ops + 1):
            execute("XADD", KEY, "MAXLEN", "~", maxlen, "*", "f", "v")
            if compactor.job is not seen:
                now, seen = time.perf_counter(), compactor.job
                if spans and len(spans[-1]) == 1:
                    spans[-1].append(now)
                if seen is not None:
                    spans.append([now])
            if i % DISK_READ_EVERY == 0:
                reply = execute("XREADGROUP", "GROUP", GROUP, f"c{turn % DISK_CONSUMERS}",
                                "COUNT", count, "STREAMS", KEY, ">")
                turn += 1
                if reply:
                    execute("XACK", KEY, GROUP, *[entry[0] for entry in reply[0][1]])
            if i % every == 0:
                samples.append(_dir_bytes(path))
        elapsed = time.perf_counter() - start
        job = compactor.job
        if job is not None:  # closing would abandon it
            job.done.wait()
        if spans and len(spans[-1]) == 1:
            spans[-1].append(time.perf_counter())
        runs, error = compactor.runs, compactor.last_error
    finally:
        engine.close()
    half = len(samples) // 2
    first, second = max(samples[:half] or samples), max(samples[half:])
    tenths = [samples[max(0, len(samples) * k // 10 - 1)] for k in range(1, 11)]
    took = [f"{end - begin:.2f}" for begin, end in spans]
    if len(took) > 16:
        took[8:-7] = ["..."]
    notes = ["bounded disk: segments + snapshots, MB at 10%, 20%, ... 100% of the run: "
             + " ".join(f"{b / 1e6:.2f}" for b in tenths),
             f"bounded disk: {len(spans)} compactions ran, seconds each (from the XADD loop): "
             + (" ".join(took) or "none")]
    if error is not None:
        notes.append(f"bounded disk: the last compaction failed: {error}")
    return Measurement(ops / elapsed, count=ops, figures={
        "compactions": float(runs), "peak_first_mb": first / 1e6,
        "peak_second_mb": second / 1e6, "growth": second / first,
    }, notes=notes)
