"""The command path's speed: the engine in process (``embedded``), redis-py against a
redis-server (``redis-py``), the network server (``server``), string commands and scripts
(``strings``), sorted sets, hashes, sets, functions and a task framework (``types``), lists and
a durable job queue on them (``lists``), the durable work queue (``queue``), the engine in an
event loop (``asyncio``), a cluster node against a plain server (``cluster``), packed
stream nodes against other checkouts (``nodes``) and the consume path against an older one
(``consume``).

Owns those sections' rows, targets and figures, the ratios between the embedded and redis-py
rows (:data:`RATIOS`), the summary tables (:data:`REPORTS`) and the compiled-over-pure target
of the embedded XADD row (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (each section's own module), the run order, running.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from streamkeep.tools.bench import (
    asyncio_rows,
    checkouts,
    datatypes,
    embedded,
    interop,
    server,
    workqueue,
)
from streamkeep.tools.bench import cluster as bench_cluster
from streamkeep.tools.bench import failover as bench_failover
from streamkeep.tools.bench import slot_move as bench_slot_move
from streamkeep.tools.bench.declarations import (
    Benchmark,
    Figure,
    Ratio,
    Section,
    ServerOf,
    both,
    each_server,
    extra,
    lowest,
    ratio,
    vs_redis,
)
from streamkeep.tools.bench.latency import LATENCY_CONSUMERS, LATENCY_RATE
from streamkeep.tools.bench.processes import cluster_node, streamkeep
from streamkeep.tools.bench.server import SERVER_CLIENTS, server_requests
from streamkeep.tools.bench.workload import BATCH
from streamkeep.tools.text_width import Table

# --- embedded: the engine in process ------------------------------------------------------------

XADD_TARGET = 250_000  # embedded XADD/s, one thread
CONSUME_TARGET = 150_000  # embedded consumed (read + acked) msgs/s
TYPE_WRITE_TARGET = 150_000  # embedded ZADD / HSET of a new member/s, one thread
LIST_PAIRS_TARGET = 200_000  # embedded LPUSH + RPOP pairs/s on a list with a backlog
IDMP_XADD_TARGET = 1.2  # time per XADD IDMP (new iid) / per plain XADD, at most
MAXCOUNT_READ_TARGET = 0.95  # entries/s reading with MAXCOUNT n / with COUNT n, at least


def _idmp_figures(key: str, what: str, target: float | None) -> tuple[Figure, ...]:
    """An IDMP row's figures: the time per XADD of each kind as timed in its turns (the plain
    ones on the same engine, at the same moments: not the embedded.xadd row's), then their
    quotient (against `target`, a maximum)."""
    return (extra(f"{what}: time per XADD, in turns with plain XADDs", key, "idmp_us", "us"),
            extra(f"{what}: time per plain XADD in the same turns", key, "plain_us", "us"),
            extra(f"{what}: its time / the plain one's, the two above", key, "idmp_cost",
                  target=target, at_most=True))


EMBEDDED = Section("embedded", (
    Benchmark("xadd", "XADD, 1 thread", embedded.xadd, XADD_TARGET),
    Benchmark("consume", f"consume: XREADGROUP COUNT {BATCH} + XACK", embedded.consume_rate,
              CONSUME_TARGET),
    *(Benchmark(cmd.lower(), f"{cmd} of a new {what}, one growing {kind}",
                partial(embedded.type_write, command=cmd), target)
      for cmd, what, kind, target in (
          ("ZADD", "member", "sorted set", TYPE_WRITE_TARGET),
          ("HSET", "field", "hash", TYPE_WRITE_TARGET), ("SADD", "member", "set", None))),
    Benchmark("lpush_rpop", f"LPUSH + RPOP pairs, a list holding {embedded.LIST_BACKLOG:,} "
                            f"elements", embedded.list_pairs, LIST_PAIRS_TARGET),
    # XADD IDMP against plain XADD, and MAXCOUNT against COUNT, each pair taking turns on one
    # engine (the first's rate; the quotient in the figures).
    Benchmark("xadd_idmp", "XADD IDMP (new iid, vs plain XADD)", embedded.xadd_idmp),
    Benchmark("xadd_idmpauto", "XADD IDMPAUTO (new content, vs plain XADD)",
              partial(embedded.xadd_idmp, auto=True)),
    Benchmark("xreadgroup_maxcount", f"XREADGROUP MAXCOUNT {BATCH} (vs COUNT)",
              partial(embedded.capped_read, delivering=True)),
    Benchmark("xread_maxcount", f"XREAD MAXCOUNT {BATCH} (vs COUNT)",
              partial(embedded.capped_read, delivering=False)),
), figures=(
    *(extra(f"{cmd} entries/s: MAXCOUNT {BATCH} / COUNT {BATCH}", key, "maxcount_over_count",
            target=MAXCOUNT_READ_TARGET)
      for cmd, key in (("XREADGROUP", "xreadgroup_maxcount"), ("XREAD", "xread_maxcount"))),
    *_idmp_figures("xadd_idmp", "XADD IDMP (new iid)", IDMP_XADD_TARGET),
    *_idmp_figures("xadd_idmpauto", "XADD IDMPAUTO (new content)", None),
))

# --- redis-py: the same calls against a redis-server --------------------------------------------

# An application on redis-py's API in process, against the same calls pipelined to a local
# redis-server (what it would use otherwise): at least this many times as fast.
REDIS_API_XADD_TARGET = 3.0
PIPELINE = embedded.PIPELINE

REDIS_PY = Section("redis-py", (
    Benchmark("redis.xadd", "XADD, one at a time", embedded.redis_xadd),
    Benchmark("redis.xadd_pipe", f"XADD, pipeline of {PIPELINE}",
              partial(embedded.redis_xadd, pipeline=PIPELINE)),
    Benchmark("redis.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
              embedded.redis_consume),
    Benchmark("redis.consume_pipe", "consume: XACK + next XREADGROUP pipelined",
              partial(embedded.redis_consume, pipelined=True)),
    # redis-py's API in process: what the same application pays without a server.
    Benchmark("redis.embedded_xadd", "XADD, one at a time, in process (Engine.redis())",
              embedded.redis_xadd_in_process),
), option="redis", figures=(
    ratio(f"XADD in process (Engine.redis()) / pipelined ({PIPELINE}) to redis-server",
          "redis.embedded_xadd", "redis.xadd_pipe", REDIS_API_XADD_TARGET),
))

# The embedded rows against the redis-py ones, printed apart from the figures.
RATIOS: tuple[Ratio, ...] = (
    Ratio("XADD", "redis-py XADD, one at a time", "embedded.xadd", "redis.xadd"),
    Ratio("XADD", f"redis-py XADD, pipeline of {PIPELINE}", "embedded.xadd", "redis.xadd_pipe"),
    Ratio("consume", "redis-py XREADGROUP + XACK", "embedded.consume", "redis.consume"),
    Ratio("consume", "redis-py XACK + next XREADGROUP pipelined", "embedded.consume",
          "redis.consume_pipe"),
)

# --- server: streamkeep serve against redis-server under redis-benchmark ------------------------

# The compiled command path's targets: streamkeep XADD/s / redis-server XADD/s, at least.
SERVER_P16_TARGET = 0.4  # at -P 16
SERVER_P1_TARGET = 0.45  # one at a time
LATENCY_P999_TARGET_US = 2000  # streamkeep's delivery latency p99.9, at most


XADD_BENCH = f"XADD, redis-benchmark -c {SERVER_CLIENTS}"
LATENCY = f"latency: {LATENCY_RATE:,} msg/s to {LATENCY_CONSUMERS} consumers, delivered"

SERVER = Section("server", (
    *both("xadd_p1", f"{XADD_BENCH} -P 1", server.bench_xadd, 1),
    *both("xadd_p16", f"{XADD_BENCH} -P 16", server.bench_xadd, 16),
    Benchmark("xadd_p16_always", f"{XADD_BENCH} -P 16: streamkeep, appendfsync always",
              lambda env: server.bench_xadd(env, streamkeep(env, "always"), 16)),
    *(Benchmark(b.key, b.workload, b.run, rank=lowest("p999_us"))
      for b in both("latency", LATENCY, server.latency)),
), figures=(
    vs_redis("XADD -P 1", "xadd_p1", SERVER_P1_TARGET),
    vs_redis("XADD -P 16", "xadd_p16", SERVER_P16_TARGET),
    ratio("XADD -P 16, streamkeep: appendfsync always / everysec", "xadd_p16_always", "xadd_p16"),
    *each_server("XADD -P 16, {server}: server CPU per XADD", "xadd_p16", "server_cpu_us", "us"),
    extra("delivery latency p99, streamkeep", "latency", "p99_us", "us"),
    extra("delivery latency p99.9, streamkeep", "latency", "p999_us", "us",
          LATENCY_P999_TARGET_US, at_most=True),
    extra("delivery latency p99.9, redis-server (the harness's share)", "redis_latency",
          "p999_us", "us"),
))

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = (
    server.summary, partial(server.section_summary, section="types"),
    partial(server.section_summary, section="lists"))

# --- strings, types, lists: data types against redis-server -------------------------------------

# requests/s / redis-server's under the same redis-benchmark load, at least (-P 1 strings:
# untargeted):
STRINGS_P16_TARGET = 0.5  # SET and GET
EVALSHA_P16_TARGET = 0.3  # redis-py's lock release
TYPES_P16_TARGET = 0.5  # every types command at -P 16
TYPES_ARQ_TARGET = 0.7  # arq no-op tasks through one worker (AOF everysec both)
LISTS_P16_TARGET = 0.5  # LPUSH, RPOP, LRANGE_100 at -P 16
LISTS_P1_TARGET = 0.7  # LPUSH, RPOP one at a time
LISTS_RQ_TARGET = 1.0  # RQ no-op jobs through one worker, appendfsync always both
KEYSPACE = datatypes.KEYSPACE
# The two servers the cluster section compares: (key prefix, label, the run's server).
NODE_KINDS: tuple[tuple[str, str, ServerOf], ...] = (
    ("", "streamkeep serve --cluster-enabled yes", cluster_node),
    ("plain_", "streamkeep serve", streamkeep))

STRINGS = Section("strings", (
    *(row for test in ("set", "get") for p in (1, 16) for row in both(
        f"{test}_p{p}", f"{test.upper()}, redis-benchmark -c {SERVER_CLIENTS} -P {p} -r "
                        f"{KEYSPACE:,}", datatypes.set_get, test, p)),
    *(row for p in (1, 16) for row in both(
        f"evalsha_p{p}", f"EVALSHA of redis-py's lock release, -c {SERVER_CLIENTS} -P {p}",
        datatypes.evalsha, p)),
), sizes=(
    ("redis-benchmark -n", lambda env: server_requests(env.n, 16)), ("-r", KEYSPACE),
    ("--dbnum", datatypes.STRINGS_DB)), figures=tuple(
    vs_redis(f"{what.upper()} -P {p}", f"{what}_p{p}",
             None if p != 16 else EVALSHA_P16_TARGET if what == "evalsha" else STRINGS_P16_TARGET)
    for what in ("set", "get", "evalsha") for p in (1, 16)))

TYPES = Section("types", (
    *(row for c in datatypes.COMMANDS for row in both(
        c.name, f"{c.label}, redis-benchmark -c {SERVER_CLIENTS} -P {datatypes.PIPELINE}",
        datatypes.command, c)),
    *both("arq", "arq no-op tasks, one worker", datatypes.framework, "arq"),
), sizes=(
    ("redis-benchmark -n", lambda env: server_requests(env.n, datatypes.PIPELINE)),
    ("--dbnum", datatypes.DB), ("arq no-op tasks", datatypes.ARQ_TASKS)), figures=(
    *(vs_redis(f"{c.verb} -P {datatypes.PIPELINE}", c.name, TYPES_P16_TARGET)
      for c in datatypes.COMMANDS),
    vs_redis("arq no-op tasks/s", "arq", TYPES_ARQ_TARGET),
))

LISTS = Section("lists", (
    *(row for c, p in datatypes.LIST_ROWS for row in both(
        f"{c.name}_p{p}", f"{c.label}, redis-benchmark -c {SERVER_CLIENTS} -P {p}",
        datatypes.command, c, p)),
    *both("rq", "RQ no-op jobs, one worker, appendfsync always", datatypes.framework, "rq",
          appendfsync="always"),
), sizes=(
    *((f"redis-benchmark -n (-P {p})", lambda env, p=p: server_requests(env.n, p))
      for p in (16, 1)),
    ("--dbnum", datatypes.DB), ("rq no-op jobs", datatypes.RQ_JOBS)), figures=(
    *(vs_redis(f"{c.name.upper()} -P {p}", f"{c.name}_p{p}",
               LISTS_P16_TARGET if p == 16 else LISTS_P1_TARGET)
      for c, p in datatypes.LIST_ROWS),
    vs_redis("RQ no-op jobs/s, appendfsync always", "rq", LISTS_RQ_TARGET),
))

# --- queue: the durable work queue against persist-queue ----------------------------------------

QUEUE_EVERYSEC_RATIO_TARGET = 50.0  # put+get+ack msgs/s, embedded everysec, 1 thread, at least
QUEUE_BATCH_TARGET = 100_000  # msgs/s with put_many + get(count=100) + ack, everysec
QUEUE_ALWAYS_RATIO_TARGET = 10.0  # 16 threads, appendfsync always / persist-queue 16 threads
# StreamQueue over redis-py against streamkeep serve / the same commands from a plain redis-py
# loop against redis-server (one round trip each): the server's per-command cost, at least
QUEUE_REDIS_PY_RATIO_TARGET = 0.8
THREADS, QBATCH = workqueue.QUEUE_THREADS, workqueue.BATCH

QUEUE = Section("queue", (
    Benchmark("persist_queue", "persist-queue SQLiteAckQueue, 1 thread: put + get + ack",
              workqueue.bench_persist_queue),
    Benchmark("everysec", "StreamQueue, everysec, 1 thread: put + get + ack",
              workqueue.bench_everysec),
    Benchmark("everysec_consume", "StreamQueue, everysec, 1 thread: put + consume()",
              workqueue.bench_everysec_consume),
    Benchmark("batch", f"StreamQueue, everysec: put_many({QBATCH}) + get(count={QBATCH}) + ack",
              workqueue.bench_batch, QUEUE_BATCH_TARGET),
    Benchmark("persist_queue_threads", f"persist-queue SQLiteAckQueue, {THREADS} threads",
              workqueue.bench_persist_queue_threads),
    Benchmark("always_threads", f"StreamQueue, always, {THREADS} threads: put + get + ack",
              workqueue.bench_always_threads),
    Benchmark("redis_py", "StreamQueue over redis-py, streamkeep serve (everysec)",
              workqueue.bench_redis_py),
    Benchmark("redis_py_loop_redis", "redis-py XADD + XREADGROUP + XACK loop, redis-server",
              workqueue.bench_redis_py_loop_redis),
), sizes=(
    ("one-thread cycles", workqueue.CYCLES), ("persist-queue cycles", workqueue.REFERENCE_CYCLES),
    ("threaded rows' seconds", workqueue.THREAD_SECONDS.seconds)), figures=(
    ratio("everysec, 1 thread: StreamQueue / persist-queue", "everysec", "persist_queue",
          QUEUE_EVERYSEC_RATIO_TARGET),
    ratio("everysec, 1 thread, consume(): StreamQueue / persist-queue", "everysec_consume",
          "persist_queue"),
    ratio(f"always, {THREADS} threads: StreamQueue / persist-queue ({THREADS} threads)",
          "always_threads", "persist_queue_threads", QUEUE_ALWAYS_RATIO_TARGET),
    ratio(f"always, {THREADS} threads: StreamQueue / persist-queue (1 thread)",
          "always_threads", "persist_queue"),
    extra(f"StreamQueue always, {THREADS} threads: records per fsync", "always_threads",
          "records_per_fsync", ""),
    ratio("redis-py: StreamQueue on streamkeep serve / plain loop on redis-server", "redis_py",
          "redis_py_loop_redis", QUEUE_REDIS_PY_RATIO_TARGET),
))

# --- asyncio: the engine and the work queue inside an event loop ---------------------------------

ASYNC_OVER_NETWORK_TARGET = 10.0  # await r.xadd in process / redis.asyncio to redis-server
ASYNC_OVER_SYNC_TARGET = 0.7  # await r.xadd / Engine.redis().xadd, in process
ASYNC_EVERYSEC_OVER_BURNER_TARGET = 0.5  # await xadd, AOF everysec / burner-redis in memory
ASYNC_QUEUE_OVER_SYNC_TARGET = 0.7  # AsyncStreamQueue / StreamQueue, put + get + ack
ASYNC_QUEUE_OVER_PERSIST_TARGET = 20.0  # AsyncStreamQueue / persist-queue

ASYNCIO = Section("asyncio", (
    Benchmark("aredis_xadd", "await r.xadd, in process (Engine.aredis())",
              asyncio_rows.bench_aredis_xadd),
    Benchmark("sync_xadd", "r.xadd, in process (Engine.redis())", asyncio_rows.bench_sync_xadd),
    Benchmark("redis_asyncio_xadd", "await r.xadd, redis.asyncio to redis-server",
              asyncio_rows.bench_redis_asyncio_xadd),
    Benchmark("aredis_xadd_everysec", "await r.xadd, in process, AOF everysec",
              partial(asyncio_rows.bench_aredis_xadd, name="asyncio-everysec")),
    Benchmark("burner_xadd", "await db.xadd, burner-redis in memory",
              asyncio_rows.bench_burner_xadd),
    Benchmark("kill_streamkeep", "await r.xadd then SIGKILL: streamkeep everysec",
              asyncio_rows.bench_kill_streamkeep),
    Benchmark("kill_burner", "await db.xadd then SIGKILL: burner-redis with its persistence "
                             "file", asyncio_rows.bench_kill_burner),
    Benchmark("queue", "AsyncStreamQueue, everysec, 1 task: put + get + ack",
              asyncio_rows.bench_async_queue),
    Benchmark("sync_queue", "StreamQueue, everysec, 1 thread: put + get + ack",
              workqueue.bench_everysec),
    Benchmark("persist_queue", "persist-queue SQLiteAckQueue, 1 thread: put + get + ack",
              workqueue.bench_persist_queue),
    Benchmark("blocked_gets", f"{asyncio_rows.BLOCKED_TASKS:,} tasks blocked in get, then as "
                              f"many puts: deliveries", asyncio_rows.bench_blocked_gets),
), sizes=(
    ("XADD calls (redis.asyncio: a tenth)", asyncio_rows.CALLS),
    ("awaited XADDs before SIGKILL", asyncio_rows.KILL_WRITES)), figures=(
    ratio("await r.xadd in process / redis.asyncio to redis-server", "aredis_xadd",
          "redis_asyncio_xadd", ASYNC_OVER_NETWORK_TARGET),
    ratio("await r.xadd / r.xadd (sync), in process", "aredis_xadd", "sync_xadd",
          ASYNC_OVER_SYNC_TARGET),
    ratio("await r.xadd, AOF everysec / burner-redis in memory", "aredis_xadd_everysec",
          "burner_xadd", ASYNC_EVERYSEC_OVER_BURNER_TARGET),
    *(extra(f"entries kept after SIGKILL: {name}", f"kill_{key}", "kept", "count")
      for key, name in (("streamkeep", "streamkeep"), ("burner", "burner-redis"))),
    ratio("AsyncStreamQueue / StreamQueue, put + get + ack", "queue", "sync_queue",
          ASYNC_QUEUE_OVER_SYNC_TARGET),
    ratio("AsyncStreamQueue / persist-queue, put + get + ack", "queue", "persist_queue",
          ASYNC_QUEUE_OVER_PERSIST_TARGET),
    extra("blocked gets: the loop's longest stall", "blocked_gets", "longest_stall_us", "us"),
    extra("blocked gets: the mean time of one put (serving one waiter)", "blocked_gets",
          "put_us", "us"),
))

# --- nodes: packed stream nodes against other checkouts -----------------------------------------

# This checkout's rate / the other's, each repeat (the worst one's ratio is the figure), at least:
NODES_BASE_TARGET = 0.95  # no embedded op slower than the base by more than 5%
NODES_RANGE_TARGET = 1.0  # range reads faster than the base (strictly: > 1)
NODES_LOAD_TARGET = 5.0  # snapshot load entries/s against the older commit
NODES_COLD_TARGET = 5.0  # cold 100-entry node reads against the older commit
NODES_IMPORT_TARGET = 10.0  # streamkeep import of a dump.rdb against the older commit
NODES_FOOTPRINT_TARGET = 1.10  # RSS after a restart / RSS built live, at most

RANGE = (("xrange", f"XRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET),
         ("xrevrange", f"XREVRANGE COUNT {BATCH} at random, entries", NODES_RANGE_TARGET))
_CONSUME = ("consume", f"consume: XREADGROUP COUNT {BATCH} + XACK", NODES_BASE_TARGET)
# The rows against --base: (workload, label, the worst run's ratio at least).
NODES_EMBEDDED: tuple[tuple[str, str, float], ...] = (
    ("xadd", "XADD, one field", NODES_BASE_TARGET), _CONSUME, *RANGE,
    ("xdel", "XDEL of entries in the middle", NODES_BASE_TARGET),
    ("trim_exact", "XADD + XTRIM MAXLEN = as the stream grows", NODES_BASE_TARGET),
    ("trim_approx", "XADD + XTRIM MAXLEN ~ as the stream grows", NODES_BASE_TARGET),
    ("trim_minid", "XADD + XTRIM MINID as the stream grows", NODES_BASE_TARGET),
    ("xautoclaim", f"XAUTOCLAIM COUNT {BATCH} over a big PEL, min-idle 0, entries",
     NODES_BASE_TARGET),
)
NODES_SERVED: tuple[tuple[str, str, float], ...] = (*RANGE, _CONSUME)
NODES_BEFORE = (("snapshot_load", "snapshot load entries/s", NODES_LOAD_TARGET),
                ("cold_read", "cold node reads/s", NODES_COLD_TARGET),
                ("import_rdb", "import entries/s", NODES_IMPORT_TARGET))

NODES = Section("nodes", (
    *(checkouts.row(name, f"embedded {label}: this checkout (vs --base)",
                    checkouts.embedded(name), "base")
      for name, label, _target in NODES_EMBEDDED),
    *(checkouts.row(f"serve_{name}", f"streamkeep serve + redis-py, {label}: this checkout (vs "
                                     "--base)", checkouts.served(name), "base",
                    ("cpu", "server CPU per op"))
      for name, label, _target in NODES_SERVED),
    checkouts.row("snapshot_load", "snapshot load at Engine.open, entries: this checkout (vs "
                                   "--before)", checkouts.snapshot_load, "before"),
    checkouts.row("cold_read", f"cold XRANGE COUNT {BATCH} at random, backlog-memory 1mb, "
                               "reads: this checkout (vs --before)", checkouts.cold_read,
                  "before"),
    checkouts.row("import_rdb", "streamkeep import of a redis-server dump.rdb, entries (process "
                                "timed whole): this checkout (vs --before)",
                  checkouts.import_rdb, "before"),
    checkouts.row("hash_load", "Engine.open of a data dir holding one big hash, to its first "
                               "HGET, fields: this checkout (vs --before)", checkouts.hash_load,
                  "before", ("peak_rss_mb", "peak RSS")),
    Benchmark("footprint", "sensor entries built live, then restarted (RSS): XADD",
              checkouts.footprint),
), sizes=(
    ("other checkouts", lambda env: ", ".join(
        f"{label} {path}" for label, path in env.others.items()) or "none given"),
    ("range rows' entries", lambda env: int(env.n * checkouts.RANGE_PER_N)),
    ("snapshot rows' entries (the big hash's fields)", checkouts.SNAPSHOT_ENTRIES),
    ("import entries", interop.IMPORT_ENTRIES)), figures=(
    *(extra(f"{label}: this / base, worst run", name, "ratio_min", target=target)
      for name, label, target in NODES_EMBEDDED),
    *(extra(f"served {label}: server CPU per op, base / this, worst run", f"serve_{name}",
            "cpu_ratio_min", target=target) for name, label, target in NODES_SERVED),
    *(extra(f"served {label}: client's rate, this / base, worst run", f"serve_{name}",
            "ratio_min") for name, label, _target in NODES_SERVED),
    *(extra(f"{label}: this / before, worst run", name, "ratio_min", target=target)
      for name, label, target in NODES_BEFORE),
    extra("big hash load: this / before, worst run", "hash_load", "ratio_min"),
    extra("big hash load: peak RSS, before / this, worst run", "hash_load",
          "peak_rss_mb_ratio_min"),
    extra("big hash load: peak RSS, this checkout", "hash_load", "peak_rss_mb", "MB"),
    extra("cold node read, this checkout", "cold_read", "us_per_read", "us"),
    *(extra(f"footprint: RSS {what}", "footprint", name, "MB")
      for what, name in (("built live", "live_mb"), ("after a snapshot load", "load_mb"),
                         ("after an AOF replay", "replay_mb"))),
    *(extra(f"footprint: {what} / live", "footprint", name, target=NODES_FOOTPRINT_TARGET,
            at_most=True)
      for what, name in (("snapshot load", "load_over_live"), ("AOF replay", "replay_over_live"))),
))

# --- consume: the consume path against an older checkout ----------------------------------------

# This checkout's rate / the older commit's, each repeat (the worst one's ratio), at least:
CONSUME_EMBEDDED_TARGET = 4.0  # XREADGROUP COUNT 100 + XACK in memory
CONSUME_BATCH_TARGET = 5.0  # StreamQueue put_many(100) + get(100) + ack, everysec
CONSUME_CATCHUP_TARGET = 3.0  # a group's catch-up over a cold backlog

CONSUME = Section("consume", (
    checkouts.row("embedded", f"embedded XREADGROUP COUNT {BATCH} + XACK, in memory: this "
                              "checkout (vs --before)", checkouts.embedded("consume"), "before"),
    checkouts.row("queue_batch", f"StreamQueue put_many({BATCH}) + get({BATCH}) + ack, "
                                 "everysec: this checkout (vs --before)",
                  checkouts.consume_queue_batch, "before"),
    checkouts.row("catchup", f"catch-up (XREADGROUP COUNT {BATCH} + XACK) over a cold backlog: "
                             "this checkout (vs --before)", checkouts.consume_catchup, "before"),
), sizes=(
    ("--before", lambda env: env.others.get("before", "none given (no ratios)")),
    ("catch-up entries", checkouts.catchup_entries),
    ("backlog entries", checkouts.BACKLOG_ENTRIES)), figures=tuple(
    extra(f"{label}: this / before, worst run", name, "ratio_min", target=target)
    for name, label, target in (("embedded", "embedded consume msgs/s", CONSUME_EMBEDDED_TARGET),
                                ("queue_batch", "queue batches msgs/s", CONSUME_BATCH_TARGET),
                                ("catchup", "cold catch-up entries/s", CONSUME_CATCHUP_TARGET))))

# --- cluster: what being a cluster node costs ----------------------------------------------------

# A node with cluster-enabled yes alone (every command's keys hashed to their slot, its keys
# indexed by slot) / the same server without, XADD -P 16 under the same load, at least. (SET
# over many keys, each new key indexed by its slot, is shown beside it.)
CLUSTER_NODE_TARGET = 0.95

# (A node's rows run ten times the section's requests: a few seconds each, so that the two
# servers' turns are long enough for their ratio to be read to a few percent.)
def _node_xadd(server_of: ServerOf) -> Callable[[Any], Any]:
    return lambda env: server.bench_xadd(env, server_of(env), 16,
                                         scale=bench_cluster.SCALING_SCALE)


def _node_set(server_of: ServerOf) -> Callable[[Any], Any]:
    return lambda env: server.redis_benchmark(env, server_of(env), 16,
                                              ("-t", "set", "-r", str(KEYSPACE)),
                                              scale=bench_cluster.SCALING_SCALE)


# Two streamkeep primaries / one node, under redis-benchmark --cluster -P 16 (two event loops
# on two cores, redis-benchmark beside them), at least; and / two redis-server primaries.
CLUSTER_SCALING_TARGET = 1.4
CLUSTER_VS_REDIS_TARGET = 0.5
# A primary's SIGKILL until its slots take writes at its promoted replica, at most (seconds).
FAILOVER_TARGET = 5.0
# A slot's move under a producer: its rate during / before, at least; entries moved per second.
SLOT_MOVE_PRODUCER_TARGET = 0.5
SLOT_MOVE_RATE_TARGET = 100_000
SCALING = f"redis-benchmark --cluster -c {SERVER_CLIENTS} -P {bench_cluster.PIPELINE}"

CLUSTER = Section("cluster", (
    *(Benchmark(f"{prefix}xadd_p16", f"{XADD_BENCH} -P 16: {label}", _node_xadd(server_of))
      for prefix, label, server_of in NODE_KINDS),
    *(Benchmark(f"{prefix}set_p16", f"SET, redis-benchmark -c {SERVER_CLIENTS} -P 16 -r "
                                    f"{KEYSPACE:,}: {label}", _node_set(server_of))
      for prefix, label, server_of in NODE_KINDS),
    *(Benchmark(f"{command}_{key}", f"{command.upper()}, {SCALING}: {label}",
                        bench_cluster.scaling(nodes, command, redis))
      for command in ("xadd", "set")
      for key, label, nodes, redis in (
          ("one", "one streamkeep node", 1, False),
          ("two", "two streamkeep primaries", 2, False),
          ("redis_two", "two redis-server primaries", 2, True))),
    Benchmark("failover", f"failover under a controller (etcd), cluster-node-timeout "
                          f"{bench_failover.NODE_TIMEOUT_MS} ms: a primary SIGKILLed until "
                          f"its slots take writes at the new one, {bench_failover.ROUNDS} "
                          f"rounds", bench_failover.failover),
    Benchmark("slot_move", f"a slot of {bench_slot_move.ENTRIES:,} stream entries moved to "
                           f"another primary by the controller while a producer XADDs to it "
                           f"(-P {bench_slot_move.PIPELINE})", bench_slot_move.slot_move),
), figures=(
    ratio("XADD -P 16: cluster node / plain server", "xadd_p16", "plain_xadd_p16",
          CLUSTER_NODE_TARGET),
    ratio("SET -P 16 over many slots: cluster node / plain server", "set_p16", "plain_set_p16"),
    *(figure for command in ("xadd", "set") for figure in (
        ratio(f"{command.upper()} --cluster: two streamkeep primaries / one node",
              f"{command}_two", f"{command}_one", CLUSTER_SCALING_TARGET),
        ratio(f"{command.upper()} --cluster: two streamkeep primaries / two redis-server ones",
              f"{command}_two", f"{command}_redis_two", CLUSTER_VS_REDIS_TARGET))),
    extra("failover: SIGKILL to writes at the new primary, median of the rounds", "failover",
          "median_s", unit="s", target=FAILOVER_TARGET, at_most=True),
    extra("failover: the worst round", "failover", "worst_s", unit="s"),
    extra("slot move: the producer's XADD rate during the move / before it", "slot_move",
          "during_before", target=SLOT_MOVE_PRODUCER_TARGET),
    extra("slot move: entries moved per second", "slot_move", "entries_per_s", unit="/s",
          target=SLOT_MOVE_RATE_TARGET),
))

# `bench --compare-pure`: compiled over pure-Python rate per row, each round at least.
NATIVE_TARGETS: dict[str, float] = {"embedded.xadd": 4.0}
