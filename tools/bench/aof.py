"""The ``aof`` section: the engine with its append-only file, each run on a fresh data directory.

Owns its workloads and their parameters: XADD under each appendfsync policy
(:func:`bench_aof_xadd`), threads sharing one ``always`` engine (:func:`bench_aof_threads`,
group commit: records per fsync), the machine's serial ``os.write`` + ``fdatasync`` rate in the
same directory (:func:`bench_serial_fsync`), and the replay of a written directory by
``Engine.open`` (:func:`bench_aof_replay`: a log of XADD records, the row the replay target
applies to, and a mixed log with group reads); and its header line (:func:`describe`).
Must not touch: engine internals (only ``Engine.open``/``execute``/``execute_with_effects``/
``close`` and the journal's ``records_written``/``fsyncs`` counters), other sections, or any
data outside the directories ``BenchEnv.data_dir`` hands out.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.workload import GROUP, KEY, Measurement, fill, warmup_size

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

AOF_THREADS = 16  # threads sharing one appendfsync-always engine
REPLAY_TARGET = 300_000  # records/s replayed by Engine.open, on the XADD-records workload
ALWAYS_SECONDS, QUICK_ALWAYS_SECONDS = 2.0, 0.25  # appendfsync-always loops stop after this
FSYNC_N, QUICK_FSYNC_N = 500, 100  # serial write + fdatasync loop
FSYNC_WARMUP = 20
FSYNC_RECORD = 100  # bytes per os.write in that loop (an XADD record is about 60)
REPLAY_STREAMS = 4  # the replay workload round-robins XADDs over this many streams ...
REPLAY_CHUNK = 100  # ... this many at a time, each chunk then read (COUNT chunk) and acked


def always_seconds(env: BenchEnv) -> float:
    """How long the appendfsync-always loops run at most."""
    return QUICK_ALWAYS_SECONDS if env.quick else ALWAYS_SECONDS


def fsync_n(env: BenchEnv) -> int:
    """fsyncs in the serial write + fdatasync loop."""
    return QUICK_FSYNC_N if env.quick else FSYNC_N


def describe(env: BenchEnv) -> list[str]:
    """The section's header line: where its data directories were and how its loops ran."""
    where = env.where()
    if where is None:
        return []
    return [
        f"aof: {where}; appendfsync always loops stop after "
        f"{always_seconds(env):g} s; serial fsync {fsync_n(env):,} x "
        f"(os.write {FSYNC_RECORD} B + fdatasync); replay workloads over "
        f"{REPLAY_STREAMS} streams, {REPLAY_CHUNK} XADDs to each in turn: XADD records "
        f"only (the target's row), and mixed: each {REPLAY_CHUNK} XADDs then read by "
        f"XREADGROUP COUNT {REPLAY_CHUNK} + XACK"]


def _open_engine(path: str, policy: str) -> Any:
    from streamkeep import Engine

    return Engine.open(path, appendfsync=policy)


def bench_aof_xadd(path: str, n: int, policy: str) -> float:
    """The embedded XADD loop on an engine whose AOF in ``path`` uses ``policy``; adds/s. The
    final fsync at close is not timed (everysec's background fsyncs during the loop are)."""
    engine = _open_engine(path, policy)
    try:
        execute = engine.execute
        fill(execute, "warmup", warmup_size(n))
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
