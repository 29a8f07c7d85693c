"""The bench's registry: what ``streamkeep bench`` runs, in which order, against which targets.

Owns the declarations (:class:`Benchmark`, :class:`Section`, :class:`Ratio`, :class:`Figure`),
the issue targets, and the registry itself: :data:`SECTIONS` (each benchmark a row, with its
workload label and optional target), :data:`RATIOS` between sections, :data:`FIGURES` derived
from a run's rows (ratios of two rates or extras a benchmark reported, with a minimum or a
maximum as target), :data:`REPORTS` (extra tables, e.g. the server section's summary) and
:func:`select_sections`. Later issues add sections here rather than new commands.
Must not touch: how a workload measures (each section module owns its own), running (the
runner), printing (the report), the command line.

The registry is read through this module's attributes when a run starts, so a test may
replace :data:`SECTIONS` or :data:`FIGURES` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamkeep.tools.bench import (
    aof,
    backlog,
    bigvalues,
    consume,
    crashbench,
    export,
    inspect,
    interop,
    memory,
    nodes,
    parsing,
    replication,
    server,
    shared,
    snapshot,
    stalls,
    strings,
    workqueue,
)
from streamkeep.tools.bench.aof import (
    AOF_THREADS,
    FSYNC_RECORD,
    REPLAY_CHUNK,
    REPLAY_TARGET,
    bench_aof_replay,
    bench_aof_threads,
    bench_aof_xadd,
    bench_serial_fsync,
)
from streamkeep.tools.bench.embedded import (
    bench_embedded_capped_read,
    bench_embedded_consume,
    bench_embedded_redis_xadd,
    bench_embedded_xadd,
    bench_embedded_xadd_idmp,
)
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.latency import LATENCY_CONSUMERS, LATENCY_RATE
from streamkeep.tools.bench.redis_py import PIPELINE, bench_redis_consume, bench_redis_xadd
from streamkeep.tools.bench.server import SERVER_CLIENTS
from streamkeep.tools.bench.snapshot import DISK_MAXLEN, bench_snapshot, bench_snapshot_disk
from streamkeep.tools.bench.tables import Table
from streamkeep.tools.bench.workload import BATCH, Measurement

XADD_TARGET = 250_000  # embedded XADD/s, one thread
CONSUME_TARGET = 150_000  # embedded consumed (read + acked) msgs/s
# An application on redis-py's API in process, against the same calls pipelined to a local
# redis-server (what it would use otherwise): at least this many times as fast.
REDIS_API_XADD_TARGET = 3.0
AOF_EVERYSEC_TARGET = 150_000  # XADD/s, appendfsync everysec, one thread
AOF_EVERYSEC_RATIO_TARGET = 0.6  # ... as a fraction of the in-memory XADD/s of the same run
AOF_ALWAYS_TARGET = 20_000  # XADD/s, appendfsync always, AOF_THREADS threads
RECORDS_PER_FSYNC_TARGET = 5  # group commit under those threads
SNAPSHOT_LOAD_TARGET = 500_000  # entries/s loaded from the snapshot at restart
PAUSE_RATIO_TARGET = 2.0  # XADD p99 during a compaction / p99 without one, at most
DISK_GROWTH_TARGET = 1.5  # peak bytes in the run's second half / first half, at most
# The compiled command path's targets: streamkeep XADD/s / redis-server XADD/s, at least.
SERVER_P16_TARGET = 0.4  # at -P 16
SERVER_P1_TARGET = 0.45  # one at a time
# Strings and scripts (`streamkeep bench strings`), against redis-server in the same run, as the
# server section: pipelined (-P 16) throughput / redis-server's at least this; -P 1 untargeted.
STRINGS_P16_TARGET = 0.5  # SET and GET
EVALSHA_P16_TARGET = 0.3  # redis-py's lock release
LATENCY_P999_TARGET_US = 2000  # streamkeep's delivery latency p99.9, at most
RANGE_REPLY_TARGET = 1_000_000  # XRANGE reply entries/s (issue 11 E)
BIG_XADD_TIME_TARGET = 3.0  # a big XADD's time / redis-server's, at most (issue 11 D)
CRLF_PIPELINE_TARGET = 1.5  # pipelined XADDs, CRLF in values: time / without, at most (11 A)
BIG_XADD_PEAK_TARGET = 2.5  # its peak RSS above the baseline / the value's size, at most
IDMP_XADD_TARGET = 1.2  # time per XADD IDMP (new iid) / per plain XADD, at most
MAXCOUNT_READ_TARGET = 0.95  # entries/s reading with MAXCOUNT n / with COUNT n, at least (12)
# Asynchronous replication (`streamkeep bench replication`):
REPLICA_XADD_RATIO_TARGET = 0.8  # primary XADD/s with one replica attached / without, at least
REPLICA_APPLY_RATIO_TARGET = 1.5  # replica apply records/s / primary XADD/s at -P 16, at least
APPLY_REPLAY_RATIO_TARGET = 1.0  # replica apply records/s / AOF replay of them, at least
REPLICA_LAG_P99_TARGET_MS = 10.0  # write-to-visible on the replica at 10k XADD/s, p99 at most
# The offline inspection CLI (`streamkeep bench inspect`, issue 14), records/s at least:
INSPECT_VERIFY_TARGET = 1_000_000
INSPECT_DUMP_TARGET = 200_000
# The Spark export (`streamkeep bench export`, issue 16):
EXPORT_PARQUET_TARGET = 300_000  # entries/s, snapshot -> Parquet on local[2], at least
EXPORT_DRIVER_RATIO_TARGET = 2.0  # the data source / read on the driver + createDataFrame
# The durable work queue (`streamkeep bench queue`, issue 17), against persist-queue's
# SQLiteAckQueue measured in the same run:
QUEUE_EVERYSEC_RATIO_TARGET = 50.0  # put+get+ack msgs/s, embedded everysec, 1 thread, at least
QUEUE_BATCH_TARGET = 100_000  # msgs/s with put_many + get(count=100) + ack, everysec
QUEUE_ALWAYS_RATIO_TARGET = 10.0  # 16 threads, appendfsync always / persist-queue 16 threads
# StreamQueue over redis-py against streamkeep serve / the same commands from a plain redis-py
# loop against redis-server (one round trip each): the server's per-command cost, at least
QUEUE_REDIS_PY_RATIO_TARGET = 0.8
# One data directory, many processes (`streamkeep bench shared`): StreamQueue put+get+ack
# msgs/s of 4 worker processes through the directory's shared server, everysec, at least
SHARED_WORKERS_RATIO_TARGET = 1.5  # ... / one process using the queue in process
SHARED_PERSIST_RATIO_TARGET = 10.0  # ... / persist-queue's SQLiteAckQueue in the same 4 processes
SHARED_XADD_TCP_TARGET = 0.9  # a shared opener's r.xadd / redis-py's over TCP to serve, at least
SHARED_OPEN_MS_TARGET = 50.0  # opening a directory whose server runs, to the first reply, at most
# Compact streams in memory (`streamkeep bench memory`, issue 18), at most:
MEMORY_ENTRY_TARGET = 40.0  # bytes per entry, the sensor workload (RSS growth)
MEMORY_PENDING_TARGET = 80.0  # bytes per pending entry
MEMORY_GC_TARGET_US = 10_000.0  # one full collection with the sensor workload held
MEMORY_OVER_REDIS_TARGET = 1.5  # every other workload: RSS growth / redis-server's used_memory
# Backlogs bigger than memory (`streamkeep bench backlog`, issue 19), backlog-memory 128mb:
BACKLOG_RSS_TARGET = 400.0  # MB, the process's peak RSS, at most
BACKLOG_XADD_RATIO_TARGET = 0.8  # XADD/s against the same stream fully resident, at least
BACKLOG_CATCHUP_TARGET = 150_000  # entries/s, XREADGROUP COUNT 100 + XACK over cold entries
BACKLOG_RESTART_TARGET = 1.5  # s, open to serving, at most (the segmented snapshot too)
BACKLOG_COMPACT_RATIO_TARGET = 1.5  # compaction after 100k entries / on a 100k stream, at most
BACKLOG_WRITTEN_TARGET = 3.0  # bytes that compaction writes / the log bytes of the entries
BACKLOG_SCAN_TARGET = 0.9  # a full scan of the segmented snapshot / of the one-file one
BACKLOG_SPACE_TARGET = 1.5  # a trimmed stream after 50 compactions: disk / one file, at most
# Redis interoperability (`streamkeep bench interop`, issue 20), at least:
IMPORT_RDB_TARGET = 500_000  # entries/s, streamkeep import of a redis-server dump.rdb
REDIS_REPLICA_TARGET = 100_000  # XADD/s a replica of a redis-server applies (-P 16)
# Packed stream nodes (`streamkeep bench nodes --base DIR --before DIR`): this checkout's rate /
# the other's, each run (the worst run's ratio is the figure), at least:
NODES_BASE_TARGET = 0.95  # no embedded op slower than the base by more than 5%
NODES_RANGE_TARGET = 1.0  # range reads faster than the base (strictly: > 1)
NODES_LOAD_TARGET = 5.0  # snapshot load entries/s against the older commit
NODES_COLD_TARGET = 5.0  # cold 100-entry node reads against the older commit
NODES_IMPORT_TARGET = 10.0  # streamkeep import of a dump.rdb against the older commit
NODES_FOOTPRINT_TARGET = 1.10  # RSS after a restart / RSS built live, at most
# The consume path (`streamkeep bench consume --before DIR`): this checkout's rate / the older
# commit's, each run (the worst run's ratio is the figure), at least:
CONSUME_EMBEDDED_TARGET = 4.0  # XREADGROUP COUNT 100 + XACK in memory
CONSUME_BATCH_TARGET = 5.0  # StreamQueue put_many(100) + get(100) + ack, everysec
CONSUME_CATCHUP_TARGET = 3.0  # a group's catch-up over a cold backlog


# The nodes section's rows against --base: (workload, label, the worst run's ratio at least).
NODES_EMBEDDED: tuple[tuple[str, str, float], ...] = (
    ("xadd", "XADD, one field", NODES_BASE_TARGET),
    ("consume", f"consume: XREADGROUP COUNT {BATCH} + XACK", NODES_BASE_TARGET),
    ("xrange", f"XRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET),
    ("xrevrange", f"XREVRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET),
    ("xdel", "XDEL of entries in the middle", NODES_BASE_TARGET),
    ("trim_exact", "XADD + XTRIM MAXLEN = as the stream grows", NODES_BASE_TARGET),
    ("trim_approx", "XADD + XTRIM MAXLEN ~ as the stream grows", NODES_BASE_TARGET),
    ("trim_minid", "XADD + XTRIM MINID as the stream grows", NODES_BASE_TARGET),
    ("xautoclaim", f"XAUTOCLAIM COUNT {BATCH} over a big PEL, min-idle 0, entries",
     NODES_BASE_TARGET),
)
NODES_SERVED: tuple[tuple[str, str, float], ...] = (
    ("xrange", f"XRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET),
    ("xrevrange", f"XREVRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET),
    ("consume", f"consume: XREADGROUP COUNT {BATCH} + XACK", NODES_BASE_TARGET),
)


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
    describe: Callable[[BenchEnv], list[str]] | None = None  # its header lines, after the run

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


def _idmp_figures(key: str, what: str, target: float | None) -> tuple[Figure, ...]:
    """An IDMP row's figures: the time per XADD of each kind as timed in its turns, then
    their quotient (against `target`, a maximum)."""
    return (Figure("embedded", f"{what}: time per XADD, in turns with plain XADDs", key,
                   extra="idmp_us", unit="us"),
            Figure("embedded", f"{what}: time per plain XADD in the same turns", key,
                   extra="plain_us", unit="us"),
            Figure("embedded", f"{what}: its time / the plain one's, the two above", key,
                   extra="idmp_cost", target=target, at_most=True))


def _lowest_p999(m: Measurement) -> float:
    """The latency rows' best repeat: the lowest p99.9."""
    return -m.figures.get("p999_us", math.inf)


def _lowest_p99_ms(m: Measurement) -> float:
    """The replication lag row's best repeat: the lowest p99."""
    return -m.figures.get("p99_ms", math.inf)


# The strings section's two servers: (row key prefix, row label, the run's shared server).
_STRINGS_SERVERS: tuple[tuple[str, str, Callable[[BenchEnv], Any]], ...] = (
    ("", "streamkeep", server.streamkeep),
    ("redis_", "redis-server", server.redis_aof),
)

SECTIONS: tuple[Section, ...] = (
    Section("embedded", (
        Benchmark("embedded.xadd", "XADD, 1 thread",
                  lambda env: bench_embedded_xadd(env.n), target=XADD_TARGET),
        Benchmark("embedded.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_embedded_consume(env.n), target=CONSUME_TARGET),
        # XADD IDMP p <new iid> against plain XADD, interleaved in chunks (issue 12: "IDMP costs
        # at most 1.3x a plain XADD"); IDMP's adds/s, the ratio in the figures.
        Benchmark("embedded.xadd_idmp", "XADD IDMP (new iid, vs plain XADD)",
                  lambda env: bench_embedded_xadd_idmp(env.n)),
        Benchmark("embedded.xadd_idmpauto", "XADD IDMPAUTO (new content, vs plain XADD)",
                  lambda env: bench_embedded_xadd_idmp(env.n, auto=True)),
        # Redis 8.10's MAXCOUNT against COUNT over the same data, interleaved reply by reply
        # (issue 12: "MAXCOUNT reads cost no more than COUNT reads"); MAXCOUNT's entries/s.
        Benchmark("embedded.xreadgroup_maxcount", f"XREADGROUP MAXCOUNT {BATCH} (vs COUNT)",
                  lambda env: bench_embedded_capped_read(env.n, delivering=True)),
        Benchmark("embedded.xread_maxcount", f"XREAD MAXCOUNT {BATCH} (vs COUNT)",
                  lambda env: bench_embedded_capped_read(env.n, delivering=False)),
    )),
    Section("aof", (
        Benchmark("aof.everysec", "XADD, appendfsync everysec, 1 thread",
                  lambda env: env.in_dir("everysec", bench_aof_xadd, env.n, "everysec"),
                  target=AOF_EVERYSEC_TARGET),
        Benchmark("aof.always_threads", f"XADD, appendfsync always, {AOF_THREADS} threads",
                  lambda env: env.in_dir("always", bench_aof_threads, AOF_THREADS, env.n,
                                        aof.always_seconds(env)),
                  target=AOF_ALWAYS_TARGET),
        Benchmark("aof.fsync", f"fsyncs: os.write {FSYNC_RECORD} B + fdatasync, serial",
                  lambda env: env.in_dir("fsync", bench_serial_fsync, aof.fsync_n(env))),
        Benchmark("aof.always", "XADD, appendfsync always, 1 thread",
                  lambda env: env.in_dir("always1", bench_aof_threads, 1, env.n,
                                        aof.always_seconds(env))),
        Benchmark("aof.no", "XADD, appendfsync no, 1 thread",
                  lambda env: env.in_dir("no", bench_aof_xadd, env.n, "no")),
        # The replay target applies to a log of XADD records, which dominate real logs. The
        # mixed workload (each XREADGROUP record holding an XCLAIM per entry delivered) is
        # printed beside it, with its effects/s, and compared with it in FIGURES.
        Benchmark("aof.replay_xadd", "replay at Engine.open: XADD records (the target's row)",
                  lambda env: env.in_dir("replay-xadd", bench_aof_replay, env.n, False),
                  target=REPLAY_TARGET),
        Benchmark("aof.replay", f"replay at Engine.open: mixed, XADDs + XREADGROUP COUNT "
                                f"{REPLAY_CHUNK} + XACK",
                  lambda env: env.in_dir("replay", bench_aof_replay, env.n)),
    ), describe=aof.describe),
    Section("redis-py", (
        Benchmark("redis.xadd", "XADD, one at a time",
                  lambda env: bench_redis_xadd(env.redis, env.n)),
        Benchmark("redis.xadd_pipe", f"XADD, pipeline of {PIPELINE}",
                  lambda env: bench_redis_xadd(env.redis, env.n, pipeline=PIPELINE)),
        Benchmark("redis.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_redis_consume(env.redis, env.n)),
        Benchmark("redis.consume_pipe", "consume: XACK + next XREADGROUP pipelined",
                  lambda env: bench_redis_consume(env.redis, env.n, pipelined=True)),
        # redis-py's API in process: what the same application pays without a server.
        Benchmark("redis.embedded_xadd", "XADD, one at a time, in process (Engine.redis())",
                  lambda env: bench_embedded_redis_xadd(env.n)),
    ), option="redis"),
    Section("snapshot", (
        Benchmark("snapshot.load", "entries loaded from the snapshot at restart (stream+group)",
                  lambda env: env.in_dir("snapshot", bench_snapshot, snapshot.stream_entries(env),
                                        snapshot.phase_ops(env)),
                  target=SNAPSHOT_LOAD_TARGET),
        Benchmark("snapshot.disk", f"XADD MAXLEN ~ {DISK_MAXLEN:,} + group read/ack, "
                                   "auto compaction",
                  lambda env: env.in_dir("disk", bench_snapshot_disk, snapshot.disk_ops(env),
                                        snapshot.disk_min_size(env))),
    ), describe=snapshot.describe),
    Section("server", (
        Benchmark("server.xadd_p1", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 1: "
                                    "streamkeep",
                  lambda env: server.xadd(env, server.streamkeep(env), 1)),
        Benchmark("server.redis_xadd_p1", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 1: "
                                          "redis-server",
                  lambda env: server.xadd(env, server.redis_aof(env), 1)),
        Benchmark("server.xadd_p16", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                     "streamkeep",
                  lambda env: server.xadd(env, server.streamkeep(env), 16)),
        Benchmark("server.redis_xadd_p16", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                           "redis-server",
                  lambda env: server.xadd(env, server.redis_aof(env), 16)),
        Benchmark("server.xadd_p16_always", f"XADD, redis-benchmark -c {SERVER_CLIENTS} -P 16: "
                                            "streamkeep, appendfsync always",
                  lambda env: server.xadd(env, server.streamkeep(env, "always"), 16)),
        Benchmark("server.latency", f"latency: {LATENCY_RATE:,} msg/s to {LATENCY_CONSUMERS} "
                                    "consumers, delivered: streamkeep",
                  lambda env: server.latency(env, server.streamkeep(env)), rank=_lowest_p999),
        Benchmark("server.redis_latency", f"latency: {LATENCY_RATE:,} msg/s to "
                                          f"{LATENCY_CONSUMERS} consumers, delivered: "
                                          "redis-server",
                  lambda env: server.latency(env, server.redis_aof(env)), rank=_lowest_p999),
    )),
    Section("strings", (
        *(Benchmark(f"strings.{prefix}{test}_p{p}", f"{test.upper()}, redis-benchmark -c "
                                                    f"{SERVER_CLIENTS} -P {p} -r "
                                                    f"{strings.KEYSPACE:,}: {name}",
                    strings.row(server_of, strings.set_get, test, p))
          for test in ("set", "get") for p in (1, 16)
          for prefix, name, server_of in _STRINGS_SERVERS),
        *(Benchmark(f"strings.{prefix}evalsha_p{p}", f"EVALSHA of redis-py's lock release, "
                                                     f"-c {SERVER_CLIENTS} -P {p}: {name}",
                    strings.row(server_of, strings.evalsha, p))
          for p in (1, 16) for prefix, name, server_of in _STRINGS_SERVERS),
    ), describe=strings.describe),
    Section("hardening", (
        Benchmark("hardening.xrange", f"XRANGE COUNT {bigvalues.RANGE_ENTRIES:,} reply, "
                                      "entries/s: streamkeep",
                  lambda env: bigvalues.bench_xrange(server.streamkeep(env),
                                                     bigvalues.range_entries(env)),
                  target=RANGE_REPLY_TARGET),
        Benchmark("hardening.redis_xrange", f"XRANGE COUNT {bigvalues.RANGE_ENTRIES:,} reply, "
                                            "entries/s: redis-server",
                  lambda env: bigvalues.bench_xrange(server.redis_aof(env),
                                                     bigvalues.range_entries(env))),
        Benchmark("hardening.big_xadd", "XADD of one big value (STREAMKEEP_BENCH_BIG_VALUE_MB), "
                                        "MB/s: streamkeep",
                  lambda env: bigvalues.bench_big_xadd(bigvalues.streamkeep_server,
                                                       bigvalues.big_value_bytes(env))),
        Benchmark("hardening.redis_big_xadd", "XADD of one big value (STREAMKEEP_BENCH_BIG_VALUE"
                                              "_MB), MB/s: redis-server",
                  lambda env: bigvalues.bench_big_xadd(bigvalues.redis_server_for(env),
                                                       bigvalues.big_value_bytes(env))),
        Benchmark("hardening.pipeline_plain", f"{parsing.PIPELINE_REQUESTS:,} pipelined XADDs, "
                                              "values without CRLF: streamkeep",
                  lambda env: parsing.bench_pipeline(server.streamkeep(env), crlf=False)),
        Benchmark("hardening.pipeline_crlf", f"{parsing.PIPELINE_REQUESTS:,} pipelined XADDs, "
                                             "values with CRLF: streamkeep",
                  lambda env: parsing.bench_pipeline(server.streamkeep(env), crlf=True)),
        Benchmark("hardening.keys_pattern", "KEYS *a{1000}b over one 100 KB key, KB: streamkeep",
                  lambda env: stalls.keys_pattern(server.streamkeep(env))),
        Benchmark("hardening.redis_keys_pattern", "KEYS *a{1000}b over one 100 KB key, KB: "
                                                  "redis-server",
                  lambda env: stalls.keys_pattern(server.redis_aof(env))),
        Benchmark("hardening.pipeline_bystander", f"{stalls.PIPELINED_PINGS:,} pipelined PINGs "
                                                  "beside a PINGing client: streamkeep",
                  lambda env: stalls.bystander_ping(server.streamkeep(env))),
        Benchmark("hardening.redis_pipeline_bystander", f"{stalls.PIPELINED_PINGS:,} pipelined "
                                                        "PINGs beside a PINGing client: "
                                                        "redis-server",
                  lambda env: stalls.bystander_ping(server.redis_aof(env))),
    )),
    Section("replication", (
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
    ), describe=replication.describe),
    Section("inspect", (
        Benchmark("inspect.verify", "streamkeep aof verify --json: XADD records checked (its "
                  "own time)",
                  inspect.bench_verify, target=INSPECT_VERIFY_TARGET),
        Benchmark("inspect.dump_json", "streamkeep aof dump --format json: XADD records",
                  inspect.bench_dump_json, target=INSPECT_DUMP_TARGET),
    ), describe=inspect.describe),
    Section("export", (
        Benchmark("export.parquet", f"snapshot -> Parquet through the data source, "
                                    f"{export.MASTER}: entries",
                  export.bench_parquet, target=EXPORT_PARQUET_TARGET),
        Benchmark("export.driver", "read on the driver + createDataFrame -> Parquet: entries",
                  export.bench_driver),
    ), describe=export.describe),
    Section("queue", (
        Benchmark("queue.persist_queue", "persist-queue SQLiteAckQueue, 1 thread: put + get + "
                                         "ack", workqueue.bench_persist_queue),
        Benchmark("queue.everysec", "StreamQueue, everysec, 1 thread: put + get + ack",
                  workqueue.bench_everysec),
        Benchmark("queue.everysec_consume", "StreamQueue, everysec, 1 thread: put + consume()",
                  workqueue.bench_everysec_consume),
        Benchmark("queue.batch", f"StreamQueue, everysec: put_many({workqueue.BATCH}) + "
                                 f"get(count={workqueue.BATCH}) + ack",
                  workqueue.bench_batch, target=QUEUE_BATCH_TARGET),
        Benchmark("queue.persist_queue_threads", f"persist-queue SQLiteAckQueue, "
                                                 f"{workqueue.QUEUE_THREADS} threads",
                  workqueue.bench_persist_queue_threads),
        Benchmark("queue.always_threads", f"StreamQueue, always, {workqueue.QUEUE_THREADS} "
                                          "threads: put + get + ack",
                  workqueue.bench_always_threads),
        Benchmark("queue.redis_py", "StreamQueue over redis-py, streamkeep serve (everysec)",
                  workqueue.bench_redis_py),
        Benchmark("queue.redis_py_loop_redis", "redis-py XADD + XREADGROUP + XACK loop, "
                                               "redis-server", workqueue.bench_redis_py_loop_redis),
    ), describe=workqueue.describe),
    Section("shared", (
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
    ), describe=shared.describe),
    Section("memory", tuple(
        Benchmark(f"memory.{name}", f"XADD fill, in a fresh process: {label}",
                  lambda env, name=name: memory.bench(env, name))  # type: ignore[misc]
        for name, (label, _make) in memory.WORKLOADS.items()), describe=memory.describe),
    Section("interop", (
        Benchmark("interop.import_rdb", "streamkeep import of a redis-server dump.rdb, "
                                        "entries (compaction included)",
                  interop.bench_import_rdb, target=IMPORT_RDB_TARGET),
        Benchmark("interop.replica_apply", "replica of a redis-server under redis-benchmark "
                                           "-P 16 XADD, XADDs applied",
                  interop.bench_replica_apply, target=REDIS_REPLICA_TARGET),
        Benchmark("interop.replica_catchup", "the same replica stopped while redis-benchmark "
                                             "runs, then continued: XADDs applied",
                  interop.bench_replica_catchup),
    ), describe=interop.describe),
    Section("nodes", (
        *(Benchmark(f"nodes.{name}", f"embedded {label}: this checkout (vs --base)",
                    lambda env, name=name: nodes.embedded(env, name))  # type: ignore[misc]
          for name, label, _target in NODES_EMBEDDED),
        *(Benchmark(f"nodes.serve_{name}", f"streamkeep serve + redis-py, {label}: this "
                                           "checkout (vs --base)",
                    lambda env, name=name: nodes.served(env, name))  # type: ignore[misc]
          for name, label, _target in NODES_SERVED),
        Benchmark("nodes.snapshot_load", "snapshot load at Engine.open, entries: this checkout "
                                         "(vs --before)", nodes.snapshot_load),
        Benchmark("nodes.cold_read", f"cold XRANGE COUNT {BATCH} at random, backlog-memory "
                                     "1mb, reads: this checkout (vs --before)", nodes.cold_read),
        Benchmark("nodes.import_rdb", "streamkeep import of a redis-server dump.rdb, entries "
                                      "(process timed whole): this checkout (vs --before)",
                  nodes.import_rdb),
        Benchmark("nodes.footprint", "sensor entries built live, then restarted (RSS): XADD",
                  nodes.footprint),
    ), describe=nodes.describe),
    Section("consume", (
        Benchmark("consume.embedded", f"embedded XREADGROUP COUNT {BATCH} + XACK, in memory: "
                                      "this checkout (vs --before)", consume.embedded),
        Benchmark("consume.queue_batch", f"StreamQueue put_many({BATCH}) + get({BATCH}) + ack, "
                                         "everysec: this checkout (vs --before)",
                  consume.queue_batch),
        Benchmark("consume.catchup", f"catch-up (XREADGROUP COUNT {BATCH} + XACK) over a cold "
                                     "backlog: this checkout (vs --before)", consume.catchup),
    ), describe=consume.describe),
    Section("crashbench", (
        Benchmark("crashbench.exhaustive", f"crash points judged/s: exhaustive power loss, "
                                           f"{crashbench.POLICY}, every fault model: this "
                                           f"checkout (vs --before)", crashbench.exhaustive),
    ), describe=crashbench.describe),
    Section("backlog", (
        Benchmark("backlog.cold", f"XADD on a big backlog, backlog-memory "
                                  f"{backlog.BUDGET >> 20}mb (fresh process)",
                  lambda env: backlog.bench_mode(env, "cold")),
        Benchmark("backlog.resident", "XADD on a big backlog, all resident (fresh process)",
                  lambda env: backlog.bench_mode(env, "resident")),
        Benchmark("backlog.compact_small", "compaction of a small stream (entries/s)",
                  backlog.bench_compact_small),
        Benchmark("backlog.trimmed", "compactions of a stream trimmed as it grows (/s)",
                  backlog.bench_trimmed),
    ), describe=backlog.describe),
)

# `bench --compare-pure`: compiled over pure-Python rate per row, the compiled core's targets
# (each round's ratio must reach it).
NATIVE_TARGETS: dict[str, float] = {
    "embedded.xadd": 4.0,
    "aof.replay_xadd": 2.5,
    "interop.import_rdb": 3.0,
    # following a redis-server: the replica's own apply rate. (interop.replica_apply's wall
    # time holds redis-benchmark's run, which takes the CPU from both builds alike.)
    "interop.replica_catchup": 2.0,
}

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
           denominator="server.redis_xadd_p1", target=SERVER_P1_TARGET),
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
    *(Figure("strings", f"{what.upper()} -P {p}: streamkeep / redis-server", f"strings.{what}_p{p}",
             denominator=f"strings.redis_{what}_p{p}",
             target=(None if p != 16 else EVALSHA_P16_TARGET if what == "evalsha"
                     else STRINGS_P16_TARGET))
      for what in ("set", "get", "evalsha") for p in (1, 16)),
    Figure("hardening", "XRANGE reply: streamkeep entries/s / redis-server",
           "hardening.xrange", denominator="hardening.redis_xrange"),
    Figure("hardening", "big XADD: streamkeep time / redis-server time",
           "hardening.redis_big_xadd", denominator="hardening.big_xadd",
           target=BIG_XADD_TIME_TARGET, at_most=True),
    Figure("hardening", "big XADD: streamkeep seconds", "hardening.big_xadd", extra="seconds",
           unit="s"),
    Figure("hardening", "big XADD: streamkeep peak RSS above baseline / value size",
           "hardening.big_xadd", extra="peak_over_value", target=BIG_XADD_PEAK_TARGET,
           at_most=True),
    Figure("hardening", "big XADD: redis-server peak RSS above baseline / value size",
           "hardening.redis_big_xadd", extra="peak_over_value"),
    Figure("hardening", "pipeline: time with CRLF in values / time without",
           "hardening.pipeline_plain", denominator="hardening.pipeline_crlf",
           target=CRLF_PIPELINE_TARGET, at_most=True),
    Figure("hardening", "KEYS *a{1000}b over 100 KB, streamkeep", "hardening.keys_pattern",
           extra="us", unit="us"),
    Figure("hardening", "KEYS *a{1000}b over 100 KB, redis-server",
           "hardening.redis_keys_pattern", extra="us", unit="us"),
    Figure("hardening", "bystander PING during a 100k pipeline, max, streamkeep",
           "hardening.pipeline_bystander", extra="max_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, p99, streamkeep",
           "hardening.pipeline_bystander", extra="p99_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, max, redis-server",
           "hardening.redis_pipeline_bystander", extra="max_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, p99, redis-server",
           "hardening.redis_pipeline_bystander", extra="p99_ms", unit="ms"),
    Figure("embedded", f"XREADGROUP entries/s: MAXCOUNT {BATCH} / COUNT {BATCH}",
           "embedded.xreadgroup_maxcount", extra="maxcount_over_count",
           target=MAXCOUNT_READ_TARGET),
    Figure("embedded", f"XREAD entries/s: MAXCOUNT {BATCH} / COUNT {BATCH}",
           "embedded.xread_maxcount", extra="maxcount_over_count", target=MAXCOUNT_READ_TARGET),
    # The IDMP rows time plain XADDs in turns with their own (same engine, same moments): the
    # cost is the quotient of those two times, both shown, not of the IDMP row's rate and the
    # embedded.xadd row's (another engine, another moment).
    *_idmp_figures("embedded.xadd_idmp", "XADD IDMP (new iid)", IDMP_XADD_TARGET),
    *_idmp_figures("embedded.xadd_idmpauto", "XADD IDMPAUTO (new content)", None),
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
    Figure("inspect", "aof verify: records/s from start to exit", "inspect.verify",
           extra="wall_records_per_s", unit="/s"),
    Figure("inspect", "aof verify: peak RSS", "inspect.verify", extra="peak_rss_mb",
           unit="MB"),
    Figure("inspect", "aof dump --format json: peak RSS", "inspect.dump_json",
           extra="peak_rss_mb", unit="MB"),
    Figure("export", "data source entries/s / driver + createDataFrame entries/s",
           "export.parquet", denominator="export.driver", target=EXPORT_DRIVER_RATIO_TARGET),
    Figure("export", "Spark start-up and a first small export (not counted)",
           "export.parquet", extra="startup_s", unit="s"),
    Figure("export", "the data's first, cold export (JIT warm-up; not counted)",
           "export.parquet", extra="cold_rate", unit="/s"),
    Figure("queue", "everysec, 1 thread: StreamQueue / persist-queue", "queue.everysec",
           denominator="queue.persist_queue", target=QUEUE_EVERYSEC_RATIO_TARGET),
    Figure("queue", "everysec, 1 thread, consume(): StreamQueue / persist-queue",
           "queue.everysec_consume", denominator="queue.persist_queue"),
    Figure("queue", f"always, {workqueue.QUEUE_THREADS} threads: StreamQueue / persist-queue "
                    f"({workqueue.QUEUE_THREADS} threads)",
           "queue.always_threads", denominator="queue.persist_queue_threads",
           target=QUEUE_ALWAYS_RATIO_TARGET),
    Figure("queue", f"always, {workqueue.QUEUE_THREADS} threads: StreamQueue / persist-queue "
                    "(1 thread)",
           "queue.always_threads", denominator="queue.persist_queue"),
    Figure("queue", f"StreamQueue always, {workqueue.QUEUE_THREADS} threads: records per "
                    "fsync",
           "queue.always_threads", extra="records_per_fsync", unit=""),
    Figure("queue", "redis-py: StreamQueue on streamkeep serve / plain loop on redis-server",
           "queue.redis_py", denominator="queue.redis_py_loop_redis",
           target=QUEUE_REDIS_PY_RATIO_TARGET),
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
    Figure("memory", "sensor: bytes per entry, streamkeep (RSS)", "memory.sensor",
           extra="bytes_per_entry", unit="", target=MEMORY_ENTRY_TARGET, at_most=True),
    Figure("memory", "sensor: bytes per entry, redis-server (used_memory)", "memory.sensor",
           extra="redis_bytes_per_entry", unit=""),
    Figure("memory", "sensor: streamkeep / redis-server", "memory.sensor", extra="over_redis"),
    Figure("memory", "sensor: bytes per pending entry, streamkeep", "memory.sensor",
           extra="bytes_per_pending", unit="", target=MEMORY_PENDING_TARGET, at_most=True),
    Figure("memory", "sensor: bytes per pending entry, redis-server", "memory.sensor",
           extra="redis_bytes_per_pending", unit=""),
    Figure("memory", "sensor: time in collections during the fill", "memory.sensor",
           extra="gc_fill_us", unit="us"),
    Figure("memory", "sensor: one full collection after the fill", "memory.sensor",
           extra="full_gc_us", unit="us", target=MEMORY_GC_TARGET_US, at_most=True),
    Figure("backlog", "cold: peak RSS", "backlog.cold", extra="peak_rss_mb", unit="MB",
           target=BACKLOG_RSS_TARGET, at_most=True),
    Figure("backlog", "resident: peak RSS", "backlog.resident", extra="peak_rss_mb",
           unit="MB"),
    Figure("backlog", "XADD/s, cold / resident", "backlog.cold",
           denominator="backlog.resident", target=BACKLOG_XADD_RATIO_TARGET),
    Figure("backlog", "cold: catch-up (XREADGROUP COUNT 100 + XACK), entries",
           "backlog.cold", extra="catchup_per_s", unit="/s", target=BACKLOG_CATCHUP_TARGET),
    Figure("backlog", "resident: catch-up, entries", "backlog.resident",
           extra="catchup_per_s", unit="/s"),
    Figure("backlog", "cold: restart to serving", "backlog.cold", extra="restart_s", unit="s",
           target=BACKLOG_RESTART_TARGET, at_most=True),
    Figure("backlog", "resident: restart to serving", "backlog.resident", extra="restart_s",
           unit="s"),
    Figure("backlog", "cold: compaction after the new entries", "backlog.cold",
           extra="compact_s", unit="s"),
    Figure("backlog", "cold: that compaction's bytes written / the entries' log bytes",
           "backlog.cold", extra="compact_written_ratio", target=BACKLOG_WRITTEN_TARGET,
           at_most=True),
    Figure("backlog", "cold: restart from the segmented snapshot", "backlog.cold",
           extra="restart_segmented_s", unit="s", target=BACKLOG_RESTART_TARGET, at_most=True),
    Figure("backlog", "cold: full scan, segmented / one-file snapshot", "backlog.cold",
           extra="scan_ratio", target=BACKLOG_SCAN_TARGET),
    Figure("backlog", "trimmed stream, 50 compactions: disk / one file", "backlog.trimmed",
           extra="space_ratio", target=BACKLOG_SPACE_TARGET, at_most=True),
    Figure("backlog", "small stream: compaction", "backlog.compact_small", extra="compact_s",
           unit="s"),
    Figure("backlog", "compaction: big backlog / small stream", "backlog.compact_small",
           extra="compact_ratio", target=BACKLOG_COMPACT_RATIO_TARGET, at_most=True),
    *(Figure("nodes", f"{label}: this / base, worst run", f"nodes.{name}", extra="ratio_min",
             target=target)
      for name, label, target in NODES_EMBEDDED),
    *(Figure("nodes", f"served {label}: server CPU per op, base / this, worst run",
             f"nodes.serve_{name}", extra="cpu_ratio_min", target=target)
      for name, label, target in NODES_SERVED),
    *(Figure("nodes", f"served {label}: client's rate, this / base, worst run",
             f"nodes.serve_{name}", extra="ratio_min")
      for name, label, _target in NODES_SERVED),
    *(Figure("nodes", f"{label}: this / before, worst run", f"nodes.{name}", extra="ratio_min",
             target=target)
      for name, label, target in (("snapshot_load", "snapshot load entries/s", NODES_LOAD_TARGET),
                                  ("cold_read", "cold node reads/s", NODES_COLD_TARGET),
                                  ("import_rdb", "import entries/s", NODES_IMPORT_TARGET))),
    *(Figure("consume", f"{label}: this / before, worst run", f"consume.{name}",
             extra="ratio_min", target=target)
      for name, label, target in (("embedded", "embedded consume msgs/s", CONSUME_EMBEDDED_TARGET),
                                  ("queue_batch", "queue batches msgs/s", CONSUME_BATCH_TARGET),
                                  ("catchup", "cold catch-up entries/s",
                                   CONSUME_CATCHUP_TARGET))),
    Figure("crashbench", "crash points judged/s: this / before, worst run",
           "crashbench.exhaustive", extra="ratio_min"),
    Figure("crashbench", "the same run's time: before / this, worst run",
           "crashbench.exhaustive", extra="seconds_ratio_min"),
    Figure("crashbench", "the same run's CPU: before / this, worst run",
           "crashbench.exhaustive", extra="cpu_s_ratio_min"),
    Figure("crashbench", "CPU per point judged, this checkout", "crashbench.exhaustive",
           extra="cpu_ms_per_point", unit="ms"),
    Figure("crashbench", "the run's wall time, start to exit, this checkout",
           "crashbench.exhaustive", extra="wall_s", unit="s"),
    Figure("nodes", "cold node read, this checkout", "nodes.cold_read", extra="us_per_read",
           unit="us"),
    *(Figure("nodes", f"footprint: RSS {what}", "nodes.footprint", extra=extra, unit="MB")
      for what, extra in (("built live", "live_mb"), ("after a snapshot load", "load_mb"),
                          ("after an AOF replay", "replay_mb"))),
    *(Figure("nodes", f"footprint: {what} / live", "nodes.footprint", extra=extra,
             target=NODES_FOOTPRINT_TARGET, at_most=True)
      for what, extra in (("snapshot load", "load_over_live"), ("AOF replay", "replay_over_live"))),
    *(Figure("memory", f"{name}: {what}", f"memory.{name}", extra=extra, unit=unit,
             target=target, at_most=target is not None)
      for name in memory.WORKLOADS if name != "sensor"
      for what, extra, unit, target in (
          ("bytes per entry, streamkeep", "bytes_per_entry", "", None),
          ("bytes per entry, redis-server", "redis_bytes_per_entry", "", None),
          ("streamkeep / redis-server", "over_redis", "x", MEMORY_OVER_REDIS_TARGET))),
    Figure("redis-py", f"XADD in process (Engine.redis()) / pipelined ({PIPELINE}) to redis-server",
           "redis.embedded_xadd", denominator="redis.xadd_pipe", target=REDIS_API_XADD_TARGET),
)

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None, the
# runner's Result and FigureResult lists.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = (server.summary,)


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
