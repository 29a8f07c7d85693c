"""Replication and interoperability: asynchronous replicas of streamkeep (``replication``),
one data directory shared by many processes through its server (``shared``), and Redis's own
formats and protocol (``interop``: a dump.rdb imported, a redis-server primary followed).

Owns those sections' rows, targets and figures, and the compiled-over-pure targets of the
interop rows (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (:mod:`..replication`, :mod:`..shared`,
:mod:`..interop`), the run order (the registry), running, printing.
"""

from __future__ import annotations

import math

from streamkeep.tools.bench import interop, replication, shared
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section
from streamkeep.tools.bench.server import SERVER_CLIENTS
from streamkeep.tools.bench.workload import Measurement

# --- replication: a streamkeep primary and its replicas -----------------------------------------

# Asynchronous replication (`streamkeep bench replication`):
REPLICA_XADD_RATIO_TARGET = 0.8  # primary XADD/s with one replica attached / without, at least
REPLICA_APPLY_RATIO_TARGET = 1.5  # replica apply records/s / primary XADD/s at -P 16, at least
APPLY_REPLAY_RATIO_TARGET = 1.0  # replica apply records/s / AOF replay of them, at least
REPLICA_LAG_P99_TARGET_MS = 10.0  # write-to-visible on the replica at 10k XADD/s, p99 at most


def _lowest_p99_ms(m: Measurement) -> float:
    """The replication lag row's best repeat: the lowest p99."""
    return -m.figures.get("p99_ms", math.inf)


REPLICATION = Section("replication", (
    Benchmark("replication.xadd_p16", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                      "primary, no replica",
              lambda env: replication.bench_xadd_p16(env, 0)),
    Benchmark("replication.xadd_p16_replica", f"XADD, redis-benchmark -c {SERVER_CLIENTS} "
                                              "-P 16: primary, 1 replica attached",
              lambda env: replication.bench_xadd_p16(env, 1)),
    Benchmark("replication.embedded_xadd", "embedded XADD (engine + Server thread), no "
                                           "replica",
              lambda env: env.in_dir("embedded-primary", replication.bench_embedded_xadd,
                                     env.n, 0)),
    Benchmark("replication.embedded_xadd_replica", "embedded XADD (engine + Server "
                                                   "thread), 1 replica attached",
              lambda env: env.in_dir("embedded-primary", replication.bench_embedded_xadd,
                                     env.n, 1)),
    Benchmark("replication.apply", "replica catching up a backlog of XADD records, "
                                   "records applied",
              replication.bench_apply),
    Benchmark("replication.lag", f"lag at {replication.LAG_RATE:,} XADD/s: XADD on the "
                                 "primary -> XREAD BLOCK on the replica",
              replication.bench_lag, rank=_lowest_p99_ms),
    Benchmark("replication.full_sync", "full sync of a fresh replica: stream of 5 x N "
                                       "entries, a tenth pending, entries",
              lambda env: env.in_dir("full-sync", replication.bench_full_sync, env)),
), describe=replication.describe, figures=(
    Figure("replication", "XADD -P 16: primary with 1 replica / without",
           "replication.xadd_p16_replica", denominator="replication.xadd_p16",
           target=REPLICA_XADD_RATIO_TARGET),
    Figure("replication", "embedded XADD: with 1 replica / without",
           "replication.embedded_xadd_replica", denominator="replication.embedded_xadd",
           target=REPLICA_XADD_RATIO_TARGET),
    Figure("replication", "replica apply records/s / primary XADD/s at -P 16 (no replica)",
           "replication.apply", denominator="replication.xadd_p16",
           target=REPLICA_APPLY_RATIO_TARGET),
    Figure("replication", "AOF replay of the same records at Engine.open", "replication.apply",
           extra="replay_per_s", unit="/s"),
    Figure("replication", "replica apply / AOF replay of the same records",
           "replication.apply", extra="apply_over_replay", target=APPLY_REPLAY_RATIO_TARGET),
    Figure("replication", f"lag at {replication.LAG_RATE:,} XADD/s, p50", "replication.lag",
           extra="p50_ms", unit="ms"),
    Figure("replication", f"lag at {replication.LAG_RATE:,} XADD/s, p99", "replication.lag",
           extra="p99_ms", unit="ms", target=REPLICA_LAG_P99_TARGET_MS, at_most=True),
    Figure("replication", "full sync: seconds to link up and equal offsets",
           "replication.full_sync", extra="seconds", unit="s"),
))

# --- shared: one data directory, many processes -------------------------------------------------

# One data directory, many processes (`streamkeep bench shared`): StreamQueue put+get+ack
# msgs/s of 4 worker processes through the directory's shared server, everysec, at least
SHARED_WORKERS_RATIO_TARGET = 1.5  # ... / one process using the queue in process
SHARED_PERSIST_RATIO_TARGET = 10.0  # ... / persist-queue's SQLiteAckQueue in the same 4 processes
SHARED_XADD_TCP_TARGET = 0.9  # a shared opener's r.xadd / redis-py's over TCP to serve, at least
SHARED_OPEN_MS_TARGET = 50.0  # opening a directory whose server runs, to the first reply, at most

SHARED = Section("shared", (
    Benchmark("shared.in_process", "StreamQueue in process, 1 process: put + get + ack",
              shared.bench_in_process),
    Benchmark("shared.workers", f"StreamQueue shared, {shared.WORKERS} processes: put + "
                                "get + ack", shared.bench_workers),
    Benchmark("shared.persist_queue", f"persist-queue SQLiteAckQueue, {shared.WORKERS} "
                                      "processes: put + get + ack",
              shared.bench_persist_queue),
    Benchmark("shared.in_process_handler", f"the same in process, a "
                                           f"{shared.HANDLER_SECONDS * 1000:g} ms handler",
              lambda env: shared.bench_in_process(env, shared.HANDLER_SECONDS)),
    Benchmark("shared.workers_handler", f"the same shared, {shared.WORKERS} processes, a "
                                        f"{shared.HANDLER_SECONDS * 1000:g} ms handler",
              lambda env: shared.bench_workers(env, shared.HANDLER_SECONDS)),
    Benchmark("shared.xadd", "r.xadd one at a time, shared (Unix socket; vs TCP "
                             "interleaved)", shared.bench_xadd),
    Benchmark("shared.open", "open a running shared directory + first reply",
              shared.bench_open),
), describe=shared.describe, figures=(
    Figure("shared", f"{shared.WORKERS} processes shared / 1 process in process",
           "shared.workers", denominator="shared.in_process",
           target=SHARED_WORKERS_RATIO_TARGET),
    Figure("shared", f"{shared.WORKERS} processes: shared / persist-queue",
           "shared.workers", denominator="shared.persist_queue",
           target=SHARED_PERSIST_RATIO_TARGET),
    Figure("shared", f"with a {shared.HANDLER_SECONDS * 1000:g} ms handler: {shared.WORKERS} "
                     "processes shared / 1 process in process",
           "shared.workers_handler", denominator="shared.in_process_handler"),
    Figure("shared", "r.xadd: shared (Unix socket) / redis-py over TCP to serve",
           "shared.xadd", extra="over_tcp", target=SHARED_XADD_TCP_TARGET),
    Figure("shared", "r.xadd: redis-py over TCP to serve", "shared.xadd", extra="tcp_per_s",
           unit="/s"),
    Figure("shared", "r.xadd, the transport alone: redis-py over the Unix socket / over TCP",
           "shared.xadd", extra="unix_over_tcp"),
    Figure("shared", "open a running shared directory to the first reply, median",
           "shared.open", extra="open_ms", unit="ms", target=SHARED_OPEN_MS_TARGET,
           at_most=True),
    Figure("shared", "open a running shared directory to the first reply, worst",
           "shared.open", extra="open_max_ms", unit="ms"),
    Figure("shared", "a new process: import + open + first reply, median", "shared.open",
           extra="process_ms", unit="ms"),
))

# --- interop: Redis's dump.rdb and a redis-server primary ---------------------------------------

# Redis interoperability (`streamkeep bench interop`), at least:
IMPORT_RDB_TARGET = 500_000  # entries/s, streamkeep import of a redis-server dump.rdb
REDIS_REPLICA_TARGET = 100_000  # XADD/s a replica of a redis-server applies (-P 16)

INTEROP = Section("interop", (
    Benchmark("interop.import_rdb", "streamkeep import of a redis-server dump.rdb, "
                                    "entries (compaction included)",
              interop.bench_import_rdb, target=IMPORT_RDB_TARGET),
    Benchmark("interop.replica_apply", "replica of a redis-server under redis-benchmark "
                                       "-P 16 XADD, XADDs applied",
              interop.bench_replica_apply, target=REDIS_REPLICA_TARGET),
    Benchmark("interop.replica_catchup", "the same replica stopped while redis-benchmark "
                                         "runs, then continued: XADDs applied",
              interop.bench_replica_catchup),
), describe=interop.describe)

# `bench --compare-pure`: compiled over pure-Python rate per row, the compiled core's targets
# (each round's ratio must reach it).
NATIVE_TARGETS: dict[str, float] = {
    "interop.import_rdb": 3.0,
    # following a redis-server: the replica's own apply rate. (interop.replica_apply's wall
    # time holds redis-benchmark's run, which takes the CPU from both builds alike.)
    "interop.replica_catchup": 2.0,
}
