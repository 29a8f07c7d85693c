"""``streamkeep bench``: throughput of the engine, with real Redis measured in the same run.

Owns the benchmark registry and its report: reusable workload functions that return messages per
second (``bench_embedded_xadd(n)``, ``bench_embedded_consume(n)``, ``bench_redis_xadd(client, n)``,
``bench_redis_consume(client, n)``, ...), the :data:`SECTIONS` that name and group them (each
benchmark may carry an issue target), the :data:`RATIOS` between sections, the lifetime of the
reference redis-server the bench starts on a free loopback port, and the aligned table it prints.
Later issues add sections here rather than new commands.
Must not touch: engine internals (only ``Engine.open``/``execute``/``compact``/``close``, the
journal's ``records_written``/``fsyncs`` counters, the compactor's ``job``/``runs``/
``last_error`` and the data directory's "snapshot ... loaded" log line) or any data outside its
temp dirs.

The ``aof`` section opens engines on fresh data directories under one temp dir (removed when the
run ends): XADD under each appendfsync policy, 16 threads sharing one ``always`` engine (group
commit: records per fsync), the machine's serial ``os.write`` + ``fdatasync`` rate in the same
directory, and the replay of written directories by ``Engine.open`` (a log of XADD records,
the row the replay target applies to, and a mixed log with group reads). A benchmark may return a
:class:`Measurement` (its own op count, extra figures) instead of a bare rate; :data:`FIGURES`
derive ratios and those extras, with their own targets (a minimum, or a maximum).

The ``snapshot`` section (:func:`bench_snapshot`, :func:`bench_snapshot_disk`) measures the
snapshot issue's targets in one run: the restart of a stream of 5 x N entries with a consumer
group (1,000,000 at full N) from its snapshot, XADD p99 while that state compacts against the
p99 just before (same directory, same number of XADDs), and the directory's size under a steady
workload with automatic compaction. A benchmark's notes (a latency table, a size series) print
under the figures.

The ``server`` section (workloads in :mod:`tools.bench_server`) starts ``streamkeep serve`` as a
child process and a redis-server persisting alike (AOF, appendfsync everysec) on free loopback
ports, shared by its rows through :meth:`BenchEnv.shared`: Debian's redis-benchmark XADD with 50
clients at -P 1 and -P 16 against both (and streamkeep under appendfsync always), and the delivery
latency of one group (a producer at 10k msg/s, 10 consumers in XREADGROUP BLOCK + XACK) against
both; :data:`REPORTS` print its side-by-side summary.

Timing: every workload runs a warm-up on a separate key first, then times only its loop with
``time.perf_counter``; a row's rate is messages per second and ``us/op`` its inverse.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

FULL_N = 200_000
QUICK_N = 5_000
BATCH = 100  # XREADGROUP COUNT in the consume loops
PIPELINE = 100  # commands per redis-py pipeline round trip

XADD_TARGET = 250_000  # embedded XADD/s, one thread
CONSUME_TARGET = 150_000  # embedded consumed (read + acked) msgs/s

AOF_EVERYSEC_TARGET = 150_000  # XADD/s, appendfsync everysec, one thread
AOF_EVERYSEC_RATIO_TARGET = 0.6  # ... as a fraction of the in-memory XADD/s of the same run
AOF_THREADS = 16  # threads sharing one appendfsync-always engine
AOF_ALWAYS_TARGET = 20_000  # XADD/s, appendfsync always, AOF_THREADS threads
RECORDS_PER_FSYNC_TARGET = 5  # group commit under those threads
REPLAY_TARGET = 300_000  # records/s replayed by Engine.open, on the XADD-records workload
ALWAYS_SECONDS, QUICK_ALWAYS_SECONDS = 2.0, 0.25  # appendfsync-always loops stop after this
FSYNC_N, QUICK_FSYNC_N = 500, 100  # serial write + fdatasync loop
FSYNC_WARMUP = 20
FSYNC_RECORD = 100  # bytes per os.write in that loop (an XADD record is about 60)
REPLAY_STREAMS = 4  # the replay workload round-robins XADDs over this many streams ...
REPLAY_CHUNK = 100  # ... this many at a time, each chunk then read (COUNT chunk) and acked

SNAPSHOT_ENTRIES_PER_N = 5  # the snapshot section's stream: 5 x N entries (1,000,000 at full N)
SNAPSHOT_READ_FRACTION = 10  # its group reads the first 1/10 of the stream ...
SNAPSHOT_CONSUMERS = 4  # ... in chunks, round-robin over this many consumers, acking every other
SNAPSHOT_LOAD_TARGET = 500_000  # entries/s loaded from the snapshot at restart
PAUSE_RATIO_TARGET = 2.0  # XADD p99 during a compaction / p99 without one, at most
DISK_MAXLEN = 5_000  # the bounded-disk workload: XADD MAXLEN ~ this ...
DISK_READ_EVERY = 100  # ... with XREADGROUP COUNT this + XACK after every this many XADDs
DISK_CONSUMERS = 3
DISK_MIN_SIZE, QUICK_DISK_MIN_SIZE = 1 << 20, 128 << 10  # its auto-aof-rewrite-min-size
DISK_OPS_QUICK_FACTOR = 8  # with --quick (or a small N) it runs 8 x N XADDs, else N
DISK_SAMPLES = 100  # directory size samples over the run (the series prints every tenth)
DISK_GROWTH_TARGET = 1.5  # peak bytes in the run's second half / first half, at most

SERVER_CLIENTS = 50  # redis-benchmark -c in the server section
SERVER_P16_TARGET = 0.3  # streamkeep XADD/s / redis-server XADD/s at -P 16, at least
LATENCY_RATE = 10_000  # the latency test's producer, messages per second
LATENCY_CONSUMERS = 10  # ... and its consumers, one group
LATENCY_P999_TARGET_US = 2000  # streamkeep's delivery latency p99.9, at most

KEY = "bench"
GROUP = "g"
CONSUMER = "c"


def warmup_size(n: int) -> int:
    """Warm-up operations before a timed loop of n: a tenth, between 200 and 20,000."""
    return max(200, min(n // 10, 20_000))


class Skip(Exception):
    """A benchmark cannot run on this machine (e.g. no redis-server); reported, not fatal."""


@dataclass
class Measurement:
    """One run of a benchmark: its rate, the ops it timed when that is not the run's N (e.g. a
    duration-bound loop), figures the FIGURES table reads (e.g. records per fsync), and notes:
    lines printed under the tables (e.g. a latency table, a size series)."""

    rate: float
    count: int | None = None
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# --- embedded workloads --------------------------------------------------------------------------


def _new_engine() -> Any:
    from streamkeep import Engine

    return Engine.open()


def _embedded_fill(execute: Callable[..., Any], key: str, n: int) -> None:
    for _ in range(n):
        execute("XADD", key, "*", "f", "v")


def _embedded_consume_loop(execute: Callable[..., Any], key: str, batch: int) -> int:
    """XREADGROUP COUNT batch ``>`` then XACK of the returned IDs until drained; messages seen."""
    count = str(batch)
    consumed = 0
    while True:
        reply = execute("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", count,
                        "STREAMS", key, ">")
        if not reply:
            return consumed
        ids = [entry[0] for entry in reply[0][1]]
        execute("XACK", key, GROUP, *ids)
        consumed += len(ids)


def bench_embedded_xadd(n: int) -> float:
    """XADD bench * f v, n times on one thread through ``Engine.execute``; adds per second."""
    execute = _new_engine().execute
    _embedded_fill(execute, "warmup", warmup_size(n))
    start = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "f", "v")
    return n / (time.perf_counter() - start)


def bench_embedded_consume(n: int, batch: int = BATCH) -> float:
    """n pre-filled entries, one group, XREADGROUP COUNT batch + XACK until drained; msgs/s."""
    execute = _new_engine().execute
    warm = warmup_size(n)
    _embedded_fill(execute, "warmup", warm)
    execute("XGROUP", "CREATE", "warmup", GROUP, "0")
    if _embedded_consume_loop(execute, "warmup", batch) != warm:
        raise AssertionError("embedded warm-up consumed the wrong number of messages")
    _embedded_fill(execute, KEY, n)
    execute("XGROUP", "CREATE", KEY, GROUP, "0")
    start = time.perf_counter()
    consumed = _embedded_consume_loop(execute, KEY, batch)
    elapsed = time.perf_counter() - start
    if consumed != n:
        raise AssertionError(f"embedded consume saw {consumed} messages, expected {n}")
    return consumed / elapsed


# --- AOF workloads (a data directory per run, under BenchEnv.data_dir) ---------------------------


def _open_engine(path: str, policy: str) -> Any:
    from streamkeep import Engine

    return Engine.open(path, appendfsync=policy)


def bench_aof_xadd(path: str, n: int, policy: str) -> float:
    """The embedded XADD loop on an engine whose AOF in ``path`` uses ``policy``; adds/s. The
    final fsync at close is not timed (everysec's background fsyncs during the loop are)."""
    engine = _open_engine(path, policy)
    try:
        execute = engine.execute
        _embedded_fill(execute, "warmup", warmup_size(n))
        start = time.perf_counter()
        for _ in range(n):
            execute("XADD", KEY, "*", "f", "v")
        elapsed = time.perf_counter() - start
    finally:
        engine.close()
    return n / elapsed


def _xadd_threads(engine: Any, key: str, threads: int, max_ops: int,
                  seconds: float) -> tuple[int, float]:
    """``threads`` threads XADD to ``key`` on ``engine`` until together they have done
    ``max_ops`` or ``seconds`` have passed; (adds done, seconds from release to the last
    join)."""
    per_thread = max(1, max_ops // threads)
    done = [0] * threads
    errors: list[BaseException] = []
    gate = threading.Barrier(threads + 1)
    deadline = 0.0

    def worker(index: int) -> None:
        execute, clock = engine.execute, time.perf_counter
        gate.wait()
        count = 0
        try:
            while count < per_thread and clock() < deadline:
                execute("XADD", key, "*", "f", "v")
                count += 1
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        done[index] = count

    workers = [threading.Thread(target=worker, args=(i,), name=f"bench-xadd-{i}", daemon=True)
               for i in range(threads)]
    for w in workers:
        w.start()
    start = time.perf_counter()
    deadline = start + seconds
    gate.wait()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(done), elapsed


def bench_aof_threads(path: str, threads: int, max_ops: int, seconds: float,
                      policy: str = "always") -> Measurement:
    """``threads`` threads XADD on one shared engine (AOF policy ``policy``) for up to
    ``max_ops`` adds or ``seconds``; adds/s, with the journal's records per fsync over the
    timed loop (group commit) as figure ``records_per_fsync``."""
    engine = _open_engine(path, policy)
    try:
        _xadd_threads(engine, "warmup", threads, warmup_size(max_ops), seconds / 10)
        journal = engine.journal
        records, fsyncs = journal.records_written, journal.fsyncs
        done, elapsed = _xadd_threads(engine, KEY, threads, max_ops, seconds)
        records, fsyncs = journal.records_written - records, journal.fsyncs - fsyncs
    finally:
        engine.close()
    if records != done:
        raise AssertionError(f"the journal wrote {records} records for {done} XADDs")
    figures = {"records_per_fsync": records / fsyncs} if fsyncs else {}
    return Measurement(done / elapsed, count=done, figures=figures)


def bench_serial_fsync(path: str, n: int) -> Measurement:
    """The machine's fsync rate where the AOF lives: n x (os.write FSYNC_RECORD bytes +
    os.fdatasync) appending to one file in ``path``, one after another; fsyncs/s."""
    os.makedirs(path, exist_ok=True)
    fd = os.open(os.path.join(path, "fsync.bin"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    record = b"x" * FSYNC_RECORD
    try:
        for _ in range(FSYNC_WARMUP):
            os.write(fd, record)
            os.fdatasync(fd)
        start = time.perf_counter()
        for _ in range(n):
            os.write(fd, record)
            os.fdatasync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    return Measurement(n / elapsed, count=n)


def _replay_streams(prefix: str) -> list[str]:
    return [f"{prefix}:{i}" for i in range(REPLAY_STREAMS)]


def _write_replay_workload(engine: Any, prefix: str, n: int, consume: bool = True) -> int:
    """n XADDs round-robin over REPLAY_STREAMS streams, REPLAY_CHUNK at a time; each full chunk
    is then read by the stream's group (two consumers, alternating) with XREADGROUP COUNT
    REPLAY_CHUNK and acked. Mostly XADD records: two consume records per REPLAY_CHUNK adds,
    but each XREADGROUP record carries an effect per entry delivered. Without `consume`, only
    the XADDs (one record, one effect each). Returns effects logged."""
    run = engine.execute_with_effects
    streams = _replay_streams(prefix)
    effects = 0
    for key in streams:
        effects += len(run("XGROUP", "CREATE", key, GROUP, "$", "MKSTREAM")[1])
    count = str(REPLAY_CHUNK)
    for chunk, start in enumerate(range(0, n, REPLAY_CHUNK)):
        key = streams[chunk % REPLAY_STREAMS]
        size = min(REPLAY_CHUNK, n - start)
        for _ in range(size):
            effects += len(run("XADD", key, "*", "f", "v")[1])
        if size < REPLAY_CHUNK or not consume:
            continue
        reply, logged = run("XREADGROUP", "GROUP", GROUP, f"c{chunk % 2}", "COUNT", count,
                            "STREAMS", key, ">")
        effects += len(logged)
        ids = [entry[0] for entry in reply[0][1]]
        effects += len(run("XACK", key, GROUP, *ids)[1])
    return effects


def _check_replayed(engine: Any, prefix: str, n: int) -> None:
    total = sum(engine.execute("XLEN", key) for key in _replay_streams(prefix))
    pending = sum(engine.execute("XPENDING", key, GROUP)[0] for key in _replay_streams(prefix))
    # (without consumption nothing is pending either: the groups start at "$")
    if total != n or pending != 0:
        raise AssertionError(f"replay restored {total} entries ({pending} pending), "
                             f"expected {n} (0 pending)")


def _replay_once(path: str, n: int, consume: bool = True) -> tuple[int, int, float]:
    """Write the replay workload to a new directory, close, time Engine.open on it; (records,
    effects, seconds)."""
    from streamkeep import Engine

    writer = _open_engine(path, "no")  # the close below fsyncs; the policy does not matter
    try:
        effects = _write_replay_workload(writer, KEY, n, consume)
        records = writer.journal.records_written
    finally:
        writer.close()
    start = time.perf_counter()
    engine = Engine.open(path)
    elapsed = time.perf_counter() - start
    try:
        _check_replayed(engine, KEY, n)
    finally:
        engine.close()
    return records, effects, elapsed


def bench_aof_replay(path: str, n: int, consume: bool = True) -> Measurement:
    """Replay at open: a directory holding n XADDs plus (with `consume`) their consumption (see
    :func:`_write_replay_workload`), timed through ``Engine.open``; records/s, with effects/s
    as figure ``effects_per_s`` and records/s / REPLAY_TARGET as ``of_target``. The warm-up
    replays a smaller directory first."""
    _replay_once(os.path.join(path, "warmup"), warmup_size(n), consume)
    records, effects, elapsed = _replay_once(os.path.join(path, "data"), n, consume)
    rate = records / elapsed
    return Measurement(rate, count=records,
                       figures={"effects_per_s": effects / elapsed,
                                "of_target": rate / REPLAY_TARGET})


# --- snapshot workloads (data directories under BenchEnv.data_dir) -------------------------------


def _open_everysec(path: str, **config: Any) -> Any:
    from streamkeep import Engine

    return Engine.open(path, appendfsync="everysec", **config)


def _build_snapshot_state(engine: Any, entries: int) -> int:
    """The stream the snapshot section compacts and reloads: ``entries`` XADDs to KEY, whose
    group reads the first 1/SNAPSHOT_READ_FRACTION of them in chunks, round-robin over
    SNAPSHOT_CONSUMERS consumers, acking every other entry it reads. Returns the PEL size."""
    execute = engine.execute
    execute("XGROUP", "CREATE", KEY, GROUP, "$", "MKSTREAM")
    _embedded_fill(execute, KEY, entries)
    to_read = entries // SNAPSHOT_READ_FRACTION
    chunk = str(max(1, min(1000, to_read // (10 * SNAPSHOT_CONSUMERS))))
    read = pending = turn = 0
    while read < to_read:
        reply = execute("XREADGROUP", "GROUP", GROUP, f"c{turn % SNAPSHOT_CONSUMERS}",
                        "COUNT", chunk, "STREAMS", KEY, ">")
        ids = [entry[0] for entry in reply[0][1]]
        acked = ids[::2]
        execute("XACK", KEY, GROUP, *acked)
        read += len(ids)
        pending += len(ids) - len(acked)
        turn += 1
    return pending


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


def _percentile_us(ordered: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of sorted nanosecond times, in microseconds."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000


def _latency_row(label: str, times: Sequence[int]) -> list[str]:
    ordered = sorted(times)
    return ["snapshot", label, f"{len(ordered):,}",
            *(f"{_percentile_us(ordered, q):,.1f}" for q in (0.5, 0.99, 0.999)),
            f"{ordered[-1] / 1000:,.1f}"]


def bench_snapshot(path: str, entries: int, latency_ops: int) -> Measurement:
    """The snapshot issue's restart and no-pause targets, on one data directory (appendfsync
    everysec, automatic compaction off: the bench compacts when it means to):

    1. build: ``entries`` XADDs plus a group with a PEL (:func:`_build_snapshot_state`), then
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
        pending = _build_snapshot_state(engine, entries)
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
        _embedded_fill(execute, "latency", warmup_size(latency_ops))
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
    p99_without = _percentile_us(sorted(baseline), 0.99)
    p99_during = _percentile_us(sorted(during), 0.99)
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


# --- redis-py workloads (the reference) ----------------------------------------------------------


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply, RESP2 (list) or RESP3 (dict) shaped."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return next(iter(reply.values()))[0]
    return reply[0][1]


def _redis_fill(client: Any, key: str, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        for _ in range(min(1000, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_xadd_loop(client: Any, key: str, n: int, pipeline: int) -> None:
    if pipeline <= 1:
        for _ in range(n):
            client.xadd(key, {"f": "v"})
        return
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, pipeline):
        for _ in range(min(pipeline, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_consume_loop(client: Any, key: str, batch: int, pipelined: bool) -> int:
    """Like the embedded loop. ``pipelined`` sends each XACK with the next XREADGROUP in one
    round trip (the reads still wait for the previous reply: the IDs to ack come from it)."""
    consumed = 0
    reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    pipe = client.pipeline(transaction=False)
    while entries := _entries(reply):
        ids = [entry[0] for entry in entries]
        consumed += len(ids)
        if pipelined:
            pipe.xack(key, GROUP, *ids)
            pipe.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
            _acked, reply = pipe.execute()
        else:
            client.xack(key, GROUP, *ids)
            reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    return consumed


def bench_redis_xadd(client: Any, n: int, pipeline: int = 1) -> float:
    """XADD bench * f v, n times via redis-py (one per round trip, or ``pipeline`` per trip)."""
    client.flushall()
    _redis_xadd_loop(client, "warmup", warmup_size(n), pipeline)
    start = time.perf_counter()
    _redis_xadd_loop(client, KEY, n, pipeline)
    elapsed = time.perf_counter() - start
    client.flushall()
    return n / elapsed


def bench_redis_consume(client: Any, n: int, batch: int = BATCH, pipelined: bool = False) -> float:
    """The embedded consume workload against redis-server via redis-py; msgs/s."""
    client.flushall()
    warm = warmup_size(n)
    _redis_fill(client, "warmup", warm)
    client.xgroup_create("warmup", GROUP, id="0")
    if _redis_consume_loop(client, "warmup", batch, pipelined) != warm:
        raise AssertionError("redis warm-up consumed the wrong number of messages")
    _redis_fill(client, KEY, n)
    client.xgroup_create(KEY, GROUP, id="0")
    start = time.perf_counter()
    consumed = _redis_consume_loop(client, KEY, batch, pipelined)
    elapsed = time.perf_counter() - start
    client.flushall()
    if consumed != n:
        raise AssertionError(f"redis consume saw {consumed} messages, expected {n}")
    return consumed / elapsed


# --- the reference server ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A throw-away ``redis-server`` on a free 127.0.0.1 port: no RDB, no AOF (unless
    ``persistence`` says otherwise), temp dir."""

    STARTUP_TIMEOUT = 10.0
    STOP_TIMEOUT = 5.0  # after SIGTERM, before SIGKILL
    ATTEMPTS = 5

    def __init__(self, binary: str = "redis-server",
                 persistence: Sequence[str] = ("--appendonly", "no")) -> None:
        self.binary = binary
        self.persistence = tuple(persistence)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None
        self.client: Any = None

    def start(self) -> Any:
        """Start the server and return a connected redis-py client; raises Skip if impossible."""
        try:
            import redis
        except ImportError as exc:
            raise Skip("redis-py not installed") from exc
        path = shutil.which(self.binary)
        if path is None:
            raise Skip(f"{self.binary} not found on PATH")
        self.dir = tempfile.mkdtemp(prefix="streamkeep-bench-")
        log = os.path.join(self.dir, "redis.log")
        for _ in range(self.ATTEMPTS):  # a free port can be taken before redis binds it
            self.port = _free_port()
            self.proc = subprocess.Popen(
                [path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 *self.persistence, "--dir", self.dir, "--logfile", log],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
            if self._wait(client):
                self.client = client
                return client
            client.close()
            self._stop_process()
        tail = ""
        try:
            with open(log, errors="replace") as f:
                tail = "".join(f.readlines()[-5:]).strip()
        except OSError:
            pass
        self.stop()
        raise Skip(f"redis-server did not start: {tail or 'no log'}")

    def _wait(self, client: Any) -> bool:
        import redis

        deadline = time.monotonic() + self.STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False  # exited, e.g. the port was taken
            try:
                if client.ping():
                    return True
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.02)
        return False

    def version(self) -> str:
        return str(self.client.info("server").get("redis_version", "?")) if self.client else "?"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _stop_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()  # SIGTERM: a clean shutdown
        try:
            proc.wait(timeout=self.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self._stop_process()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _filesystem(path: str) -> str:
    """``<type> on <device>`` of the mount holding path (Linux /proc/mounts), else ``?``."""
    best, found = "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                device, mount, fstype = line.split()[:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, found = mount, f"{fstype} on {device}"
    except OSError:
        pass
    return found


class BenchEnv:
    """What benchmarks share in one run: N and resources started on first use, stopped by close.

    ``env.redis`` starts the reference server the first time a benchmark asks for it; if that
    fails every later redis benchmark is skipped with the same reason.
    """

    def __init__(self, n: int, use_redis: bool = True, quick: bool = False) -> None:
        self.n = n
        self.quick = quick  # short duration-bound loops and fewer fsyncs
        self.use_redis = use_redis
        self.server: RedisServer | None = None
        self._redis_error: str | None = None if use_redis else "disabled (--no-redis)"
        self.tmp_root: str | None = None  # the AOF data directories' parent, made on first use
        self.dirs_used: set[str] = set()  # names passed to data_dir, for describe()
        self.resources: dict[str, Any] = {}  # shared(): started once, stopped by close()
        self._resource_errors: dict[str, str] = {}

    @property
    def always_seconds(self) -> float:
        return QUICK_ALWAYS_SECONDS if self.quick else ALWAYS_SECONDS

    @property
    def fsync_n(self) -> int:
        return QUICK_FSYNC_N if self.quick else FSYNC_N

    @property
    def snapshot_entries(self) -> int:
        """Entries of the snapshot section's stream: 1,000,000 at full N."""
        return self.n * SNAPSHOT_ENTRIES_PER_N

    @property
    def latency_ops(self) -> int:
        """Timed XADDs per phase of the no-pause measurement (at most, while compacting)."""
        return self.n

    @property
    def disk_ops(self) -> int:
        return self.n * DISK_OPS_QUICK_FACTOR if self.quick else self.n

    @property
    def disk_min_size(self) -> int:
        return QUICK_DISK_MIN_SIZE if self.quick else DISK_MIN_SIZE

    @contextlib.contextmanager
    def data_dir(self, name: str) -> Iterator[str]:
        """A path for a new data directory (not yet created), removed when the block ends."""
        self.dirs_used.add(name)
        if self.tmp_root is None:
            self.tmp_root = tempfile.mkdtemp(prefix="streamkeep-bench-aof-")
        parent = tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp_root)
        try:
            yield os.path.join(parent, "data")
        finally:
            shutil.rmtree(parent, ignore_errors=True)

    @property
    def latency_seconds(self) -> float:
        """The server section's latency test: seconds of producing."""
        from streamkeep.tools import bench_server

        return bench_server.QUICK_LATENCY_SECONDS if self.quick else bench_server.LATENCY_SECONDS

    def shared(self, name: str, start: Callable[[], Any]) -> Any:
        """A resource the benchmarks of a run share (a server process, a tool): ``start()``
        the first time ``name`` is asked for, its ``stop()`` at close, its ``describe()`` lines
        in the header. A Skip from ``start()`` is remembered and raised again."""
        if name in self._resource_errors:
            raise Skip(self._resource_errors[name])
        if name not in self.resources:
            try:
                self.resources[name] = start()
            except Skip as exc:
                self._resource_errors[name] = str(exc)
                raise
        return self.resources[name]

    @property
    def redis(self) -> Any:
        if self._redis_error is not None:
            raise Skip(self._redis_error)
        if self.server is None:
            self.server = RedisServer()
            try:
                self.server.start()
            except Skip as exc:
                self._redis_error = str(exc)
                raise
        return self.server.client

    def describe(self) -> list[str]:
        """Header lines about the resources that were used."""
        lines = []
        where = ""
        if self.tmp_root is not None:
            where = (f"data dirs under {self.tmp_root} ({_filesystem(self.tmp_root)}), removed "
                     f"after the run")
        if where and self.dirs_used - set(SNAPSHOT_DIRS):
            lines.append(
                f"aof: {where}; appendfsync always loops stop after "
                f"{self.always_seconds:g} s; serial fsync {self.fsync_n:,} x "
                f"(os.write {FSYNC_RECORD} B + fdatasync); replay workloads over "
                f"{REPLAY_STREAMS} streams, {REPLAY_CHUNK} XADDs to each in turn: XADD records "
                f"only (the target's row), and mixed: each {REPLAY_CHUNK} XADDs then read by "
                f"XREADGROUP COUNT {REPLAY_CHUNK} + XACK")
        if where and self.dirs_used & set(SNAPSHOT_DIRS):
            lines.append(
                f"snapshot: {where}; appendfsync everysec; a {self.snapshot_entries:,}-entry "
                f"stream whose group read the first 1/{SNAPSHOT_READ_FRACTION} with "
                f"{SNAPSHOT_CONSUMERS} consumers, acking every other entry; no-pause phases of "
                f"{self.latency_ops:,} XADDs at most; bounded disk: {self.disk_ops:,} XADD "
                f"MAXLEN ~ {DISK_MAXLEN:,}, XREADGROUP COUNT {DISK_READ_EVERY} + XACK every "
                f"{DISK_READ_EVERY}, auto-aof-rewrite-min-size {self.disk_min_size >> 10} KiB, "
                f"percentage 100")
        if self.server is not None and self.server.client is not None:
            import redis

            lines.append(f"reference: redis-server {self.server.version()} on 127.0.0.1:"
                         f"{self.server.port} (started by this bench, no persistence), "
                         f"redis-py {redis.__version__}")
        elif self._redis_error is not None:
            lines.append(f"reference: none ({self._redis_error})")
        for resource in self.resources.values():
            lines.extend(resource.describe())
        for name, error in self._resource_errors.items():
            lines.append(f"{name}: none ({error})")
        return lines

    def close(self) -> None:
        for resource in reversed(list(self.resources.values())):
            resource.stop()
        self.resources.clear()
        if self.server is not None:
            self.server.stop()
        if self.tmp_root is not None:
            shutil.rmtree(self.tmp_root, ignore_errors=True)

    def __enter__(self) -> BenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- registry ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    key: str  # stable id, "section.name"; ratios and figures refer to it
    workload: str  # the row label
    run: Callable[[BenchEnv], float | Measurement]  # ops per second (messages, fsyncs, records)
    target: float | None = None  # the minimum, printed with PASS/FAIL
    rank: Callable[[Measurement], float] | None = None  # which repeat is best (highest); rate


@dataclass(frozen=True)
class Section:
    name: str  # the rows' first column
    benchmarks: tuple[Benchmark, ...]
    option: str = ""  # another name ``--sections`` accepts for it

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.option) if self.option else (self.name,)


@dataclass(frozen=True)
class Ratio:
    workload: str
    reference: str  # what it is compared with
    numerator: str  # Benchmark.key
    denominator: str


@dataclass(frozen=True)
class Figure:
    """A number derived from benchmarks of the same run: the ratio of two rates (``denominator``
    set) or a figure the numerator's best run reported (``extra``), with an optional target:
    a minimum, or a maximum with ``at_most``."""

    section: str
    label: str
    numerator: str  # Benchmark.key
    denominator: str | None = None  # Benchmark.key
    extra: str | None = None  # a Measurement.figures name
    unit: str = "x"  # "x" (a ratio), "" (a mean count), "count", "/s" (a rate), or one of UNITS
    target: float | None = None
    at_most: bool = False  # the target is a maximum

    UNITS = {"s": "{:.3f} s", "ms": "{:.1f} ms", "us": "{:,.1f} us", "MB": "{:.2f} MB"}

    def format(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "/s":
            return f"{value:,.0f}/s"
        if self.unit == "count":
            return f"{value:,.0f}"
        if self.unit in self.UNITS:
            return self.UNITS[self.unit].format(value)
        return f"{value:.1f}"


def _lowest_p999(m: Measurement) -> float:
    """The latency rows' best repeat: the lowest p99.9."""
    return -m.figures.get("p999_us", math.inf)


SECTIONS: tuple[Section, ...] = (
    Section("embedded", (
        Benchmark("embedded.xadd", "XADD, 1 thread",
                  lambda env: bench_embedded_xadd(env.n), target=XADD_TARGET),
        Benchmark("embedded.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_embedded_consume(env.n), target=CONSUME_TARGET),
    )),
    Section("aof", (
        Benchmark("aof.everysec", "XADD, appendfsync everysec, 1 thread",
                  lambda env: _in_dir(env, "everysec", bench_aof_xadd, env.n, "everysec"),
                  target=AOF_EVERYSEC_TARGET),
        Benchmark("aof.always_threads", f"XADD, appendfsync always, {AOF_THREADS} threads",
                  lambda env: _in_dir(env, "always", bench_aof_threads, AOF_THREADS, env.n,
                                      env.always_seconds),
                  target=AOF_ALWAYS_TARGET),
        Benchmark("aof.fsync", f"fsyncs: os.write {FSYNC_RECORD} B + fdatasync, serial",
                  lambda env: _in_dir(env, "fsync", bench_serial_fsync, env.fsync_n)),
        Benchmark("aof.always", "XADD, appendfsync always, 1 thread",
                  lambda env: _in_dir(env, "always1", bench_aof_threads, 1, env.n,
                                      env.always_seconds)),
        Benchmark("aof.no", "XADD, appendfsync no, 1 thread",
                  lambda env: _in_dir(env, "no", bench_aof_xadd, env.n, "no")),
        # The replay target applies to a log of XADD records, which dominate real logs. The
        # mixed workload (each XREADGROUP record holding an XCLAIM per entry delivered) is
        # printed beside it, with its effects/s, and compared with it in FIGURES.
        Benchmark("aof.replay_xadd", "replay at Engine.open: XADD records (the target's row)",
                  lambda env: _in_dir(env, "replay-xadd", bench_aof_replay, env.n, False),
                  target=REPLAY_TARGET),
        Benchmark("aof.replay", f"replay at Engine.open: mixed, XADDs + XREADGROUP COUNT "
                                f"{REPLAY_CHUNK} + XACK",
                  lambda env: _in_dir(env, "replay", bench_aof_replay, env.n)),
    )),
    Section("redis-py", (
        Benchmark("redis.xadd", "XADD, one at a time",
                  lambda env: bench_redis_xadd(env.redis, env.n)),
        Benchmark("redis.xadd_pipe", f"XADD, pipeline of {PIPELINE}",
                  lambda env: bench_redis_xadd(env.redis, env.n, pipeline=PIPELINE)),
        Benchmark("redis.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_redis_consume(env.redis, env.n)),
        Benchmark("redis.consume_pipe", "consume: XACK + next XREADGROUP pipelined",
                  lambda env: bench_redis_consume(env.redis, env.n, pipelined=True)),
    ), option="redis"),
    Section("snapshot", (
        Benchmark("snapshot.load", "entries loaded from the snapshot at restart (stream+group)",
                  lambda env: _in_dir(env, "snapshot", bench_snapshot, env.snapshot_entries,
                                      env.latency_ops),
                  target=SNAPSHOT_LOAD_TARGET),
        Benchmark("snapshot.disk", f"XADD MAXLEN ~ {DISK_MAXLEN:,} + group read/ack, "
                                   "auto compaction",
                  lambda env: _in_dir(env, "disk", bench_snapshot_disk, env.disk_ops,
                                      env.disk_min_size)),
    )),
    Section("server", (
        Benchmark("server.xadd_p1", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 1: "
                                    "streamkeep",
                  lambda env: _server_xadd(env, _streamkeep(env), 1)),
        Benchmark("server.redis_xadd_p1", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 1: "
                                          "redis-server",
                  lambda env: _server_xadd(env, _redis_aof(env), 1)),
        Benchmark("server.xadd_p16", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                     "streamkeep",
                  lambda env: _server_xadd(env, _streamkeep(env), 16)),
        Benchmark("server.redis_xadd_p16", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                           "redis-server",
                  lambda env: _server_xadd(env, _redis_aof(env), 16)),
        Benchmark("server.xadd_p16_always", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                            "streamkeep, appendfsync always",
                  lambda env: _server_xadd(env, _streamkeep(env, "always"), 16)),
        Benchmark("server.latency", f"latency: {LATENCY_RATE:,} msg/s to {LATENCY_CONSUMERS} "
                                    "consumers, delivered: streamkeep",
                  lambda env: _server_latency(env, _streamkeep(env)), rank=_lowest_p999),
        Benchmark("server.redis_latency", f"latency: {LATENCY_RATE:,} msg/s to "
                                          f"{LATENCY_CONSUMERS} consumers, delivered: "
                                          "redis-server",
                  lambda env: _server_latency(env, _redis_aof(env)), rank=_lowest_p999),
    )),
)
SNAPSHOT_DIRS = ("snapshot", "disk")  # the snapshot section's data_dir names

RATIOS: tuple[Ratio, ...] = (
    Ratio("XADD", "redis-py XADD, one at a time", "embedded.xadd", "redis.xadd"),
    Ratio("XADD", f"redis-py XADD, pipeline of {PIPELINE}", "embedded.xadd", "redis.xadd_pipe"),
    Ratio("consume", "redis-py XREADGROUP + XACK", "embedded.consume", "redis.consume"),
    Ratio("consume", "redis-py XACK + next XREADGROUP pipelined", "embedded.consume",
          "redis.consume_pipe"),
)

FIGURES: tuple[Figure, ...] = (
    Figure("aof", "everysec XADD/s / in-memory XADD/s (embedded row)", "aof.everysec",
           denominator="embedded.xadd", target=AOF_EVERYSEC_RATIO_TARGET),
    Figure("aof", f"always, {AOF_THREADS} threads: records per fsync", "aof.always_threads",
           extra="records_per_fsync", unit="", target=RECORDS_PER_FSYNC_TARGET),
    Figure("aof", f"always, {AOF_THREADS} threads XADD/s / serial fsyncs/s",
           "aof.always_threads", denominator="aof.fsync"),
    Figure("aof", "always, 1 thread: records per fsync", "aof.always",
           extra="records_per_fsync", unit=""),
    Figure("aof", f"replay, XADD records: records/s / the {REPLAY_TARGET:,} target",
           "aof.replay_xadd", extra="of_target"),
    Figure("aof", "replay, mixed: effects applied per second", "aof.replay",
           extra="effects_per_s", unit="/s"),
    Figure("aof", "replay, mixed records/s / XADD records/s", "aof.replay",
           denominator="aof.replay_xadd"),
    Figure("snapshot", "restart: Engine.open of that stream with groups", "snapshot.load",
           extra="restart_s", unit="s"),
    Figure("snapshot", "its compaction from the AOF, compact(wait=True)", "snapshot.load",
           extra="compact_s", unit="s"),
    Figure("snapshot", "no pause: XADD p99 without a compaction", "snapshot.load",
           extra="p99_without_us", unit="us"),
    Figure("snapshot", "no pause: XADD p99 while that stream compacts again", "snapshot.load",
           extra="p99_during_us", unit="us"),
    Figure("snapshot", "no pause: p99 during / p99 without", "snapshot.load",
           extra="p99_ratio", target=PAUSE_RATIO_TARGET, at_most=True),
    Figure("snapshot", "compact(wait=False) call: rotation under the engine lock",
           "snapshot.load", extra="start_ms", unit="ms"),
    Figure("snapshot", "bounded disk: compactions completed", "snapshot.disk",
           extra="compactions", unit="count"),
    Figure("snapshot", "bounded disk: peak segments + snapshots, 1st half", "snapshot.disk",
           extra="peak_first_mb", unit="MB"),
    Figure("snapshot", "bounded disk: peak segments + snapshots, 2nd half", "snapshot.disk",
           extra="peak_second_mb", unit="MB"),
    Figure("snapshot", "bounded disk: peak 2nd half / 1st (an AOF only growing: 2x)",
           "snapshot.disk", extra="growth", target=DISK_GROWTH_TARGET, at_most=True),
    Figure("server", "XADD -P 1: streamkeep / redis-server", "server.xadd_p1",
           denominator="server.redis_xadd_p1"),
    Figure("server", "XADD -P 16: streamkeep / redis-server", "server.xadd_p16",
           denominator="server.redis_xadd_p16", target=SERVER_P16_TARGET),
    Figure("server", "XADD -P 16, streamkeep: appendfsync always / everysec",
           "server.xadd_p16_always", denominator="server.xadd_p16"),
    Figure("server", "XADD -P 16, streamkeep: server CPU per XADD", "server.xadd_p16",
           extra="server_cpu_us", unit="us"),
    Figure("server", "XADD -P 16, redis-server: server CPU per XADD", "server.redis_xadd_p16",
           extra="server_cpu_us", unit="us"),
    Figure("server", "delivery latency p99, streamkeep", "server.latency", extra="p99_us",
           unit="us"),
    Figure("server", "delivery latency p99.9, streamkeep", "server.latency", extra="p999_us",
           unit="us", target=LATENCY_P999_TARGET_US, at_most=True),
    Figure("server", "delivery latency p99.9, redis-server (the harness's share)",
           "server.redis_latency", extra="p999_us", unit="us"),
)


def _server_module() -> Any:
    from streamkeep.tools import bench_server

    return bench_server


def _streamkeep(env: BenchEnv, appendfsync: str = "everysec") -> Any:
    """The run's ``streamkeep serve`` child process under that policy."""
    return env.shared(f"streamkeep serve --appendfsync {appendfsync}",
                      lambda: _server_module().StreamkeepServer(appendfsync).start())


def _redis_aof(env: BenchEnv) -> Any:
    """The server section's reference: redis-server with an everysec AOF."""
    if not env.use_redis:
        raise Skip("disabled (--no-redis)")
    return env.shared("redis-server --appendonly yes",
                      lambda: _server_module().RedisAofServer().start())


def _server_xadd(env: BenchEnv, server: Any, pipeline: int) -> Measurement:
    bs = _server_module()
    tool = env.shared("redis-benchmark", lambda: bs.RedisBenchmark(env.n))
    return bs.bench_redis_benchmark(server, tool, bs.server_requests(env.n, pipeline), pipeline)


def _server_latency(env: BenchEnv, server: Any) -> Measurement:
    return _server_module().bench_latency(server, env.latency_seconds)


def _server_summary(results: Sequence[Result]) -> str | None:
    if not any(r.section == "server" for r in results):
        return None
    return _server_module().format_summary(results, derive_figures(results))


# Extra tables format_results prints after the ratios: fn(results) -> text or None.
REPORTS: tuple[Callable[[Sequence[Result]], str | None], ...] = (_server_summary,)


def _in_dir(env: BenchEnv, name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(path, *args) with a fresh data directory path, removed afterwards."""
    with env.data_dir(name) as path:
        return fn(path, *args)


def select_sections(names: str | Sequence[str] | None) -> tuple[Section, ...]:
    """The :data:`SECTIONS` named (comma-separated or a list; a section's name or option), in
    registry order; all of them for None/empty. ValueError names unknown ones."""
    if names is None:
        return SECTIONS
    wanted = [w.strip() for w in (names.split(",") if isinstance(names, str) else names)]
    wanted = [w for w in wanted if w]
    if not wanted:
        return SECTIONS
    known = {name for section in SECTIONS for name in section.names}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"unknown bench section(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(s.option or s.name for s in SECTIONS)}")
    return tuple(s for s in SECTIONS if any(name in wanted for name in s.names))


@dataclass
class Result:
    section: str
    bench: Benchmark
    rate: float | None = None  # best ops/s over the repeats
    skipped: str | None = None
    count: int | None = None  # ops the best run timed, when not the run's N
    figures: dict[str, float] = field(default_factory=dict)  # the best run's
    notes: list[str] = field(default_factory=list)  # the best run's

    @property
    def verdict(self) -> str:
        if self.bench.target is None:
            return ""
        if self.rate is None:
            return "n/a"
        return "PASS" if self.rate >= self.bench.target else "FAIL"


@dataclass
class FigureResult:
    figure: Figure
    value: float | None = None
    missing: str | None = None  # why there is no value

    @property
    def verdict(self) -> str:
        if self.figure.target is None:
            return ""
        if self.value is None:
            return "n/a"
        if self.figure.at_most:
            return "PASS" if self.value <= self.figure.target else "FAIL"
        return "PASS" if self.value >= self.figure.target else "FAIL"


def run_benchmarks(env: BenchEnv, sections: Sequence[Section] | None = None, repeat: int = 1,
                   progress: Callable[[str], None] | None = None) -> list[Result]:
    """Run every benchmark of ``sections`` (default :data:`SECTIONS`), best of ``repeat``;
    skipped ones carry the reason."""
    results = []
    for section in SECTIONS if sections is None else sections:
        for bench in section.benchmarks:
            result = Result(section.name, bench)
            if progress:
                progress(f"{section.name}: {bench.workload}")
            try:
                runs = [bench.run(env) for _ in range(max(1, repeat))]
            except Skip as exc:
                result.skipped = str(exc)
            else:
                best = max((r if isinstance(r, Measurement) else Measurement(r) for r in runs),
                           key=bench.rank or (lambda m: m.rate))
                result.rate, result.count, result.figures = best.rate, best.count, best.figures
                result.notes = best.notes
            results.append(result)
    return results


def derive_figures(results: Sequence[Result]) -> list[FigureResult]:
    """The :data:`FIGURES` whose numerator benchmark ran (measured or skipped)."""
    by_key = {r.bench.key: r for r in results}
    out = []
    for figure in FIGURES:
        num = by_key.get(figure.numerator)
        if num is None:
            continue
        fr = FigureResult(figure)
        if num.rate is None:
            fr.missing = f"{figure.numerator} skipped"
        elif figure.denominator is not None:
            den = by_key.get(figure.denominator)
            if den is None or not den.rate:
                fr.missing = f"{figure.denominator} " + ("not run" if den is None else "skipped")
            else:
                fr.value = num.rate / den.rate
        elif figure.extra is not None:
            fr.value = num.figures.get(figure.extra)
            if fr.value is None:
                fr.missing = f"{figure.numerator} reported no {figure.extra}"
        out.append(fr)
    return out


# --- report --------------------------------------------------------------------------------------


def _fmt_rate(rate: float) -> str:
    return f"{rate:,.0f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Aligned plain-text table; columns listed in ``right`` are right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w)
               for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def _fmt_target(target: float, unit: str = "", at_most: bool = False) -> str:
    number = _fmt_rate(target) if target >= 1000 else f"{target:g}"
    suffix = "x" if unit == "x" else f" {unit}" if unit in Figure.UNITS else ""
    return f"{'<=' if at_most else '>='} {number}{suffix}"


def format_results(results: Sequence[Result], n: int) -> str:
    """The rows (ops is each row's timed count: messages, fsyncs or records), the
    embedded/reference ratios, the derived figures and the targets line."""
    rows = []
    for r in results:
        target = _fmt_target(r.bench.target) if r.bench.target is not None else ""
        count = f"{r.count if r.count is not None else n:,}"
        if r.rate is None:
            rows.append([r.section, r.bench.workload, count, "skipped", "", target, r.verdict])
            continue
        rows.append([r.section, r.bench.workload, count, _fmt_rate(r.rate),
                     f"{1e6 / r.rate:.2f}", target, r.verdict])
    table = format_table(["section", "workload", "ops", "ops/s", "us/op", "target", "result"],
                         rows, right={2, 3, 4})
    by_key = {r.bench.key: r.rate for r in results}
    ratio_rows = []
    for ratio in RATIOS:
        num, den = by_key.get(ratio.numerator), by_key.get(ratio.denominator)
        if num and den:  # both measured (not skipped, not absent)
            ratio_rows.append([ratio.workload, ratio.reference, f"{num / den:.2f}x"])
    parts = [table]
    if ratio_rows:
        parts.append(format_table(["embedded", "/ reference", "ratio"], ratio_rows, right={2}))
    for report in REPORTS:
        text = report(results)
        if text:
            parts.append(text)
    figures = derive_figures(results)
    if figures:
        figure_rows = []
        for fr in figures:
            f = fr.figure
            value = f.format(fr.value) if fr.value is not None else f"n/a ({fr.missing})"
            target = _fmt_target(f.target, f.unit, f.at_most) if f.target is not None else ""
            figure_rows.append([f.section, f.label, value, target, fr.verdict])
        parts.append(format_table(["section", "figure", "value", "target", "result"],
                                  figure_rows, right={2}))
    lines = []  # one-line notes, together; tables (several lines) apart
    for r in results:
        parts.extend(note for note in r.notes if "\n" in note)
        lines.extend(f"{r.section}: {note}" for note in r.notes if "\n" not in note)
    if lines:
        parts.append("\n".join(lines))
    verdicts = [r.verdict for r in results if r.bench.target is not None]
    verdicts += [fr.verdict for fr in figures if fr.figure.target is not None]
    if verdicts:
        line = f"targets: {verdicts.count('PASS')}/{len(verdicts)} PASS"
        if "n/a" in verdicts:
            line += f", {verdicts.count('n/a')} not measured"
        parts.append(line)
    skipped = sorted({r.skipped for r in results if r.skipped})
    if skipped:
        parts.append("skipped: " + "; ".join(skipped))
    return "\n\n".join(parts)


def _header(n: int, repeat: int, sections: Sequence[Section] = SECTIONS) -> str:
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    python = f"Python {platform.python_version()} ({platform.python_implementation()})"
    load = ""
    if hasattr(os, "getloadavg"):  # other work on the machine skews every figure
        load = "; load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join([
        f"streamkeep bench: {n:,} messages per workload, warm-up {warmup_size(n):,}, "
        f"best of {repeat}; consume batch {BATCH}; sections "
        f"{', '.join(s.name for s in sections)}",
        f"machine: {cores} cores ({usable} usable), {platform.machine()} {platform.system()} "
        f"{platform.release()}; {python}{load}",
    ])


def _parse(args: argparse.Namespace | Sequence[str] | None) -> argparse.Namespace:
    if isinstance(args, argparse.Namespace):
        return args
    from streamkeep.tools.cli import build_parser

    return build_parser().parse_args(["bench", *(args or [])])


def _section_names(opts: argparse.Namespace) -> list[str] | None:
    """``--sections LIST`` and the positional ``bench SECTION ...`` together; None: all."""
    names = []
    for value in [getattr(opts, "sections", None), *(getattr(opts, "only", None) or [])]:
        if value:
            names.extend(w.strip() for w in value.split(",") if w.strip())
    return names or None


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run the suite and print the table. 1 only with ``--strict`` and a FAILed target."""
    opts = _parse(args)
    quick = getattr(opts, "quick", False)
    n = getattr(opts, "n", None) or (QUICK_N if quick else FULL_N)
    repeat = max(1, getattr(opts, "repeat", 1) or 1)
    use_redis = not getattr(opts, "no_redis", False)
    sections = select_sections(_section_names(opts))
    short = quick or n <= QUICK_N  # also shortens the duration-bound and fsync loops

    print(_header(n, repeat, sections), flush=True)

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            print(f"  running {msg} ...", file=sys.stderr, flush=True)

    with BenchEnv(n, use_redis=use_redis, quick=short) as env:
        results = run_benchmarks(env, sections, repeat=repeat, progress=progress)
        described = env.describe()
    for line in described:
        print(line)
    print()
    print(format_results(results, n))
    failed = any(r.verdict == "FAIL" for r in results)
    failed = failed or any(fr.verdict == "FAIL" for fr in derive_figures(results))
    return 1 if failed and getattr(opts, "strict", False) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
