"""The ``aof`` section's workloads, each on a fresh data directory: XADD under each appendfsync
policy, threads sharing an ``always`` engine (records per fsync: :func:`group_commit`, which the
queue section's threaded row uses too), the machine's serial write + fdatasync rate, and the
replay of a written directory at ``Engine.open``.
Must not touch: engine internals (its public API and the journal's counters).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.workload import (
    GROUP,
    KEY,
    Measurement,
    Size,
    fill,
    threads_until,
    timed,
    warmup_size,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

AOF_THREADS = 16  # threads sharing one appendfsync-always engine
REPLAY_TARGET = 300_000  # records/s replayed by Engine.open, on the XADD-records workload
ALWAYS_SECONDS = Size(2.0, 0.25)  # appendfsync-always loops stop after this
FSYNC_N = Size(500, 100)  # serial write + fdatasync loop
FSYNC_WARMUP = 20
FSYNC_RECORD = 100  # bytes per os.write in that loop (an XADD record is about 60)
REPLAY_STREAMS = 4  # the replay workload round-robins XADDs over this many streams ...
REPLAY_CHUNK = 100  # ... this many at a time, each chunk then read (COUNT chunk) and acked


def xadd(env: BenchEnv, policy: str) -> float:
    """The embedded XADD loop on an engine whose AOF uses ``policy``; adds/s. The final fsync
    at close is not timed (everysec's background fsyncs during the loop are)."""
    with env.engine(policy, appendfsync=policy) as engine:
        return env.n / timed(lambda key, count: fill(engine.execute, key, count), env.n)


def group_commit(engine: Any, threads: int, seconds: float,
                 make: Callable[[str], Callable[[int], Callable[[], object]]],
                 limit: int | None = None) -> tuple[Measurement, int]:
    """``threads`` threads calling ``make(key)(i)()`` on one engine for a tenth of ``seconds``
    (key "warmup"), then for ``seconds`` or ``limit`` calls (key KEY): calls/s, with the
    journal's records per fsync over the timed part (its group commit) as figure
    ``records_per_fsync``; and the records written."""
    threads_until(threads, seconds / 10, make("warmup"), limit and warmup_size(limit))
    journal = engine.journal
    records, fsyncs = journal.records_written, journal.fsyncs
    done, elapsed = threads_until(threads, seconds, make(KEY), limit)
    records, fsyncs = journal.records_written - records, journal.fsyncs - fsyncs
    figures = {"records_per_fsync": records / fsyncs} if fsyncs else {}
    return Measurement(done / elapsed, count=done, figures=figures), records


def bench_aof_threads(path: str, threads: int, max_ops: int, seconds: float,
                      policy: str = "always") -> Measurement:
    """``threads`` threads XADD on one shared engine (AOF ``policy``) for up to ``max_ops``
    adds or ``seconds`` (:func:`group_commit`); adds/s, figure ``records_per_fsync``."""
    from streamkeep import Engine

    with Engine.open(path, appendfsync=policy) as engine:
        m, records = group_commit(
            engine, threads, seconds,
            lambda key: lambda _i: lambda: engine.execute("XADD", key, "*", "f", "v"), max_ops)
    if records != m.count:
        raise AssertionError(f"the journal wrote {records} records for {m.count} XADDs")
    return m


def serial_fsync(path: str, n: int) -> Measurement:
    """The machine's fsync rate where the AOF lives: n x (os.write FSYNC_RECORD bytes +
    os.fdatasync) appending to one file in ``path``; fsyncs/s."""
    os.makedirs(path, exist_ok=True)
    fd = os.open(os.path.join(path, "fsync.bin"),
                 os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    record = b"x" * FSYNC_RECORD

    def loop(_key: str, count: int) -> None:
        for _ in range(count):
            os.write(fd, record)
            os.fdatasync(fd)

    try:
        return Measurement(n / timed(loop, n, FSYNC_WARMUP), count=n)
    finally:
        os.close(fd)


def _streams(prefix: str) -> list[str]:
    return [f"{prefix}:{i}" for i in range(REPLAY_STREAMS)]


def _write_replay_workload(engine: Any, n: int, consume: bool = True) -> int:
    """n XADDs round-robin over REPLAY_STREAMS streams, REPLAY_CHUNK at a time; with
    ``consume`` each full chunk is then read by the stream's group (two consumers in turn) and
    acked: two records per chunk, but an effect per entry delivered. Effects logged."""
    run, streams, effects = engine.execute_with_effects, _streams(KEY), 0
    for key in streams:
        effects += len(run("XGROUP", "CREATE", key, GROUP, "$", "MKSTREAM")[1])
    for chunk, start in enumerate(range(0, n, REPLAY_CHUNK)):
        key, size = streams[chunk % REPLAY_STREAMS], min(REPLAY_CHUNK, n - start)
        for _ in range(size):
            effects += len(run("XADD", key, "*", "f", "v")[1])
        if size < REPLAY_CHUNK or not consume:
            continue
        reply, logged = run("XREADGROUP", "GROUP", GROUP, f"c{chunk % 2}", "COUNT",
                            str(REPLAY_CHUNK), "STREAMS", key, ">")
        ids = [entry[0] for entry in reply[0][1]]
        effects += len(logged) + len(run("XACK", key, GROUP, *ids)[1])
    return effects


def _replay_once(path: str, n: int, consume: bool) -> tuple[int, int, float]:
    """Write the replay workload to a new directory, close, time Engine.open on it (its
    contents checked); (records, effects, seconds)."""
    from streamkeep import Engine

    writer: Any
    with Engine.open(path, appendfsync="no") as writer:  # (the close fsyncs: any policy)
        effects = _write_replay_workload(writer, n, consume)
        records = writer.journal.records_written
    began = time.perf_counter()
    with Engine.open(path) as engine:
        elapsed = time.perf_counter() - began
        total = sum(engine.execute("XLEN", key) for key in _streams(KEY))
        pending = sum(engine.execute("XPENDING", key, GROUP)[0] for key in _streams(KEY))
    if total != n or pending != 0:
        raise AssertionError(f"replay restored {total} entries ({pending} pending), "
                             f"expected {n} (0 pending)")
    return records, effects, elapsed


def bench_aof_replay(path: str, n: int, consume: bool = True) -> Measurement:
    """Replay at open of n XADDs plus (with `consume`) their consumption, after a smaller
    directory's as a warm-up; records/s, figures ``effects_per_s`` and ``of_target``
    (records/s / REPLAY_TARGET)."""
    _replay_once(os.path.join(path, "warmup"), warmup_size(n), consume)
    records, effects, elapsed = _replay_once(os.path.join(path, "data"), n, consume)
    return Measurement(records / elapsed, count=records,
                       figures={"effects_per_s": effects / elapsed,
                                "of_target": records / elapsed / REPLAY_TARGET})
