"""Replication and interoperability: asynchronous replicas of streamkeep (``replication``),
one data directory shared by many processes through its server (``shared``), and Redis's own
formats and protocol (``interop``: a dump.rdb imported, a redis-server primary followed).

Owns those sections' rows, targets and figures, and the compiled-over-pure targets of the
interop rows (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (:mod:`..replication`, :mod:`..shared`,
:mod:`..interop`), the run order, running, printing.
"""

from __future__ import annotations

from functools import partial

from streamkeep.tools.bench import interop, replication, shared
from streamkeep.tools.bench.declarations import Benchmark, Section, extra, lowest, ratio
from streamkeep.tools.bench.server import SERVER_CLIENTS, server_requests

# --- replication: a streamkeep primary and its replicas -----------------------------------------

REPLICA_XADD_RATIO_TARGET = 0.8  # primary XADD/s with one replica attached / without, at least
REPLICA_APPLY_RATIO_TARGET = 1.5  # replica apply records/s / primary XADD/s at -P 16, at least
APPLY_REPLAY_RATIO_TARGET = 1.0  # replica apply records/s / AOF replay of them, at least
REPLICA_LAG_P99_TARGET_MS = 10.0  # write-to-visible on the replica at 10k XADD/s, p99 at most
LAG = f"lag at {replication.LAG_RATE:,} XADD/s"
P16 = f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: primary"


REPLICATION = Section("replication", (
    Benchmark("xadd_p16", f"{P16}, no replica", partial(replication.xadd_p16, replicas=0)),
    Benchmark("xadd_p16_replica", f"{P16}, 1 replica attached",
              partial(replication.xadd_p16, replicas=1)),
    Benchmark("embedded_xadd", "embedded XADD (engine + Server thread), no replica",
              partial(replication.embedded_xadd, replicas=0)),
    Benchmark("embedded_xadd_replica", "embedded XADD (engine + Server thread), 1 replica "
                                       "attached", partial(replication.embedded_xadd, replicas=1)),
    Benchmark("apply", "replica catching up a backlog of XADD records, records applied",
              replication.apply),
    Benchmark("lag", f"{LAG}: XADD on the primary -> XREAD BLOCK on the replica",
              replication.lag, rank=lowest("p99_ms")),
    Benchmark("full_sync", "full sync of a fresh replica: stream of 5 x N entries, a tenth "
                           "pending, entries", replication.full_sync),
), sizes=(
    ("redis-benchmark -n", lambda env: server_requests(env.n, replication.P16)),
    ("embedded and catch-up XADDs", lambda env: env.n), ("lag XADD/s", replication.LAG_RATE),
    ("lag seconds", replication.LAG_SECONDS.seconds),
    ("full sync entries", replication.FULL_SYNC_ENTRIES)), figures=(
    ratio("XADD -P 16: primary with 1 replica / without", "xadd_p16_replica", "xadd_p16",
          REPLICA_XADD_RATIO_TARGET),
    ratio("embedded XADD: with 1 replica / without", "embedded_xadd_replica", "embedded_xadd",
          REPLICA_XADD_RATIO_TARGET),
    ratio("replica apply records/s / primary XADD/s at -P 16 (no replica)", "apply",
          "xadd_p16", REPLICA_APPLY_RATIO_TARGET),
    extra("AOF replay of the same records at Engine.open", "apply", "replay_per_s", "/s"),
    extra("replica apply / AOF replay of the same records", "apply", "apply_over_replay",
          target=APPLY_REPLAY_RATIO_TARGET),
    extra(f"{LAG}, p50", "lag", "p50_ms", "ms"),
    extra(f"{LAG}, p99", "lag", "p99_ms", "ms", REPLICA_LAG_P99_TARGET_MS, at_most=True),
    extra("full sync: seconds to link up and equal offsets", "full_sync", "seconds", "s"),
))

# --- shared: one data directory, many processes -------------------------------------------------

# StreamQueue put+get+ack msgs/s of WORKERS processes through the directory's shared server,
# everysec, at least:
SHARED_WORKERS_RATIO_TARGET = 1.5  # ... / one process using the queue in process
SHARED_PERSIST_RATIO_TARGET = 10.0  # ... / persist-queue's SQLiteAckQueue in the same processes
SHARED_XADD_TCP_TARGET = 0.9  # a shared opener's r.xadd / redis-py's over TCP to serve, at least
SHARED_OPEN_MS_TARGET = 50.0  # opening a directory whose server runs, to the first reply, at most
WORKERS, HANDLER_MS = shared.WORKERS, f"{shared.HANDLER_SECONDS * 1000:g} ms"
OPEN = "open a running shared directory to the first reply"

SHARED = Section("shared", (
    Benchmark("in_process", "StreamQueue in process, 1 process: put + get + ack",
              shared.bench_in_process),
    Benchmark("workers", f"StreamQueue shared, {WORKERS} processes: put + get + ack",
              shared.bench_workers),
    Benchmark("persist_queue", f"persist-queue SQLiteAckQueue, {WORKERS} processes: put + get "
                               "+ ack", shared.bench_persist_queue),
    Benchmark("in_process_handler", f"the same in process, a {HANDLER_MS} handler",
              partial(shared.bench_in_process, handler=shared.HANDLER_SECONDS)),
    Benchmark("workers_handler", f"the same shared, {WORKERS} processes, a {HANDLER_MS} handler",
              partial(shared.bench_workers, handler=shared.HANDLER_SECONDS)),
    Benchmark("xadd", "r.xadd one at a time, shared (Unix socket; vs TCP interleaved)",
              shared.bench_xadd),
    Benchmark("open", "open a running shared directory + first reply", shared.bench_open),
), sizes=(
    ("worker processes", shared.WORKERS), ("seconds per throughput row", shared.SECONDS.seconds),
    ("XADDs a turn", shared.XADD_CHUNK), ("opens", shared.OPENS)), figures=(
    ratio(f"{WORKERS} processes shared / 1 process in process", "workers", "in_process",
          SHARED_WORKERS_RATIO_TARGET),
    ratio(f"{WORKERS} processes: shared / persist-queue", "workers", "persist_queue",
          SHARED_PERSIST_RATIO_TARGET),
    ratio(f"with a {HANDLER_MS} handler: {WORKERS} processes shared / 1 process in process",
          "workers_handler", "in_process_handler"),
    extra("r.xadd: shared (Unix socket) / redis-py over TCP to serve", "xadd", "over_tcp",
          target=SHARED_XADD_TCP_TARGET),
    extra("r.xadd: redis-py over TCP to serve", "xadd", "tcp_per_s", "/s"),
    extra("r.xadd, the transport alone: redis-py over the Unix socket / over TCP", "xadd",
          "unix_over_tcp"),
    extra(f"{OPEN}, median", "open", "open_ms", "ms", SHARED_OPEN_MS_TARGET, at_most=True),
    extra(f"{OPEN}, worst", "open", "open_max_ms", "ms"),
    extra("a new process: import + open + first reply, median", "open", "process_ms", "ms"),
))

# --- interop: Redis's dump.rdb and a redis-server primary ---------------------------------------

IMPORT_RDB_TARGET = 500_000  # entries/s, streamkeep import of a redis-server dump.rdb
REDIS_REPLICA_TARGET = 100_000  # XADD/s a replica of a redis-server applies (-P 16)

INTEROP = Section("interop", (
    Benchmark("import_rdb", "streamkeep import of a redis-server dump.rdb, entries (compaction "
                            "included)", interop.import_rdb, IMPORT_RDB_TARGET),
    Benchmark("replica_apply", "replica of a redis-server under redis-benchmark -P 16 XADD, "
                               "XADDs applied", interop.replica_apply, REDIS_REPLICA_TARGET),
    Benchmark("replica_catchup", "the same replica stopped while redis-benchmark runs, then "
                                 "continued: XADDs applied", interop.replica_catchup),
), sizes=(
    ("dump.rdb entries", interop.IMPORT_ENTRIES),
    ("XADDs to the replica's primary", lambda env: env.n * interop.APPLY_PER_N)))

# `bench --compare-pure`: compiled over pure-Python rate per row, each round at least.
NATIVE_TARGETS: dict[str, float] = {
    "interop.import_rdb": 3.0,
    # following a redis-server: the replica's own apply rate. (interop.replica_apply's wall
    # time holds redis-benchmark's run, which takes the CPU from both builds alike.)
    "interop.replica_catchup": 2.0,
}
