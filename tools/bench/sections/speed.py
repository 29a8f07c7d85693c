"""The command path's speed: the engine in process (``embedded``), redis-py against a
redis-server (``redis-py``), the network server (``server``), string commands and scripts
(``strings``), sorted sets, hashes, sets, functions and a task framework (``types``), lists
and a durable job queue on them (``lists``), the durable work queue (``queue``), packed stream
nodes against other checkouts (``nodes``) and the consume path against an older one
(``consume``).

Owns those sections' rows, targets and figures, the ratios between the embedded and redis-py
rows (:data:`RATIOS`), the server, types and lists sections' summary tables (:data:`REPORTS`)
and the compiled-over-pure target of the embedded XADD row (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (each section's own module), the run order (the
registry), running, printing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from streamkeep.tools.bench import (
    asyncio_rows,
    consume,
    datatypes,
    lists,
    nodes,
    server,
    strings,
    workqueue,
)
from streamkeep.tools.bench.declarations import Benchmark, Figure, Ratio, Section
from streamkeep.tools.bench.embedded import (
    LIST_BACKLOG,
    bench_embedded_capped_read,
    bench_embedded_consume,
    bench_embedded_list_pairs,
    bench_embedded_redis_xadd,
    bench_embedded_type_write,
    bench_embedded_xadd,
    bench_embedded_xadd_idmp,
)
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.latency import LATENCY_CONSUMERS, LATENCY_RATE
from streamkeep.tools.bench.redis_py import PIPELINE, bench_redis_consume, bench_redis_xadd
from streamkeep.tools.bench.server import SERVER_CLIENTS
from streamkeep.tools.bench.tables import Table
from streamkeep.tools.bench.workload import BATCH, Measurement

# --- embedded: the engine in process ------------------------------------------------------------

XADD_TARGET = 250_000  # embedded XADD/s, one thread
CONSUME_TARGET = 150_000  # embedded consumed (read + acked) msgs/s
TYPE_WRITE_TARGET = 150_000  # embedded ZADD / HSET of a new member/s, one thread
LIST_PAIRS_TARGET = 200_000  # embedded LPUSH + RPOP pairs/s on a list with a backlog
IDMP_XADD_TARGET = 1.2  # time per XADD IDMP (new iid) / per plain XADD, at most
MAXCOUNT_READ_TARGET = 0.95  # entries/s reading with MAXCOUNT n / with COUNT n, at least


def _idmp_figures(key: str, what: str, target: float | None) -> tuple[Figure, ...]:
    """An IDMP row's figures: the time per XADD of each kind as timed in its turns, then
    their quotient (against `target`, a maximum)."""
    return (Figure("embedded", f"{what}: time per XADD, in turns with plain XADDs", key,
                   extra="idmp_us", unit="us"),
            Figure("embedded", f"{what}: time per plain XADD in the same turns", key,
                   extra="plain_us", unit="us"),
            Figure("embedded", f"{what}: its time / the plain one's, the two above", key,
                   extra="idmp_cost", target=target, at_most=True))


EMBEDDED = Section("embedded", (
    Benchmark("embedded.xadd", "XADD, 1 thread",
              lambda env: bench_embedded_xadd(env.n), target=XADD_TARGET),
    Benchmark("embedded.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
              lambda env: bench_embedded_consume(env.n), target=CONSUME_TARGET),
    Benchmark("embedded.zadd", "ZADD of a new member, one growing sorted set",
              lambda env: bench_embedded_type_write(env.n, "ZADD"), target=TYPE_WRITE_TARGET),
    Benchmark("embedded.hset", "HSET of a new field, one growing hash",
              lambda env: bench_embedded_type_write(env.n, "HSET"), target=TYPE_WRITE_TARGET),
    Benchmark("embedded.sadd", "SADD of a new member, one growing set",
              lambda env: bench_embedded_type_write(env.n, "SADD")),
    Benchmark("embedded.lpush_rpop", f"LPUSH + RPOP pairs, a list holding "
                                     f"{LIST_BACKLOG:,} elements",
              lambda env: bench_embedded_list_pairs(env.n), target=LIST_PAIRS_TARGET),
    # XADD IDMP p <new iid> against plain XADD, interleaved in chunks (an IDMP XADD takes at
    # most IDMP_XADD_TARGET times a plain one's time); IDMP's adds/s, the ratio in the figures.
    Benchmark("embedded.xadd_idmp", "XADD IDMP (new iid, vs plain XADD)",
              lambda env: bench_embedded_xadd_idmp(env.n)),
    Benchmark("embedded.xadd_idmpauto", "XADD IDMPAUTO (new content, vs plain XADD)",
              lambda env: bench_embedded_xadd_idmp(env.n, auto=True)),
    # Redis 8.10's MAXCOUNT against COUNT over the same data, interleaved reply by reply
    # (MAXCOUNT reads cost no more than COUNT reads); MAXCOUNT's entries/s.
    Benchmark("embedded.xreadgroup_maxcount", f"XREADGROUP MAXCOUNT {BATCH} (vs COUNT)",
              lambda env: bench_embedded_capped_read(env.n, delivering=True)),
    Benchmark("embedded.xread_maxcount", f"XREAD MAXCOUNT {BATCH} (vs COUNT)",
              lambda env: bench_embedded_capped_read(env.n, delivering=False)),
), figures=(
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
))

# --- redis-py: the same calls against a redis-server --------------------------------------------

# An application on redis-py's API in process, against the same calls pipelined to a local
# redis-server (what it would use otherwise): at least this many times as fast.
REDIS_API_XADD_TARGET = 3.0

REDIS_PY = Section("redis-py", (
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
), option="redis", figures=(
    Figure("redis-py", f"XADD in process (Engine.redis()) / pipelined ({PIPELINE}) to redis-server",
           "redis.embedded_xadd", denominator="redis.xadd_pipe", target=REDIS_API_XADD_TARGET),
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


def _lowest_p999(m: Measurement) -> float:
    """The latency rows' best repeat: the lowest p99.9."""
    return -m.figures.get("p999_us", math.inf)


SERVER = Section("server", (
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
), figures=(
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
))

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None, the
# runner's Result and FigureResult lists.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = (
    server.summary, datatypes.summary, lists.summary)

# --- strings: string commands and a script, against redis-server --------------------------------

# Strings and scripts (`streamkeep bench strings`), against redis-server in the same run, as the
# server section: pipelined (-P 16) throughput / redis-server's at least this; -P 1 untargeted.
STRINGS_P16_TARGET = 0.5  # SET and GET
EVALSHA_P16_TARGET = 0.3  # redis-py's lock release

# The strings and types sections' two servers: (row key prefix, row label, the run's shared
# server).
_BOTH_SERVERS: tuple[tuple[str, str, Callable[[BenchEnv], Any]], ...] = (
    ("", "streamkeep", server.streamkeep),
    ("redis_", "redis-server", server.redis_aof),
)

STRINGS = Section("strings", (
    *(Benchmark(f"strings.{prefix}{test}_p{p}", f"{test.upper()}, redis-benchmark -c "
                                                f"{SERVER_CLIENTS} -P {p} -r "
                                                f"{strings.KEYSPACE:,}: {name}",
                strings.row(server_of, strings.set_get, test, p))
      for test in ("set", "get") for p in (1, 16)
      for prefix, name, server_of in _BOTH_SERVERS),
    *(Benchmark(f"strings.{prefix}evalsha_p{p}", f"EVALSHA of redis-py's lock release, "
                                                 f"-c {SERVER_CLIENTS} -P {p}: {name}",
                strings.row(server_of, strings.evalsha, p))
      for p in (1, 16) for prefix, name, server_of in _BOTH_SERVERS),
), describe=strings.describe, figures=tuple(
    Figure("strings", f"{what.upper()} -P {p}: streamkeep / redis-server", f"strings.{what}_p{p}",
           denominator=f"strings.redis_{what}_p{p}",
           target=(None if p != 16 else EVALSHA_P16_TARGET if what == "evalsha"
                   else STRINGS_P16_TARGET))
    for what in ("set", "get", "evalsha") for p in (1, 16)))

# --- types: sorted sets, hashes, sets, functions and a task framework, against redis-server -----

# Sorted sets, hashes, sets and Redis Functions (`streamkeep bench types`), against redis-server
# in the same run: redis-benchmark -P 16 requests/s / redis-server's, at least
TYPES_P16_TARGET = 0.5
# arq no-op tasks through one worker, streamkeep serve / redis-server (AOF everysec both)
TYPES_ARQ_TARGET = 0.7

TYPES = Section("types", (
    *(Benchmark(f"types.{prefix}{c.name}", f"{c.label}, redis-benchmark -c {SERVER_CLIENTS} "
                                           f"-P {datatypes.PIPELINE}: {name}",
                strings.row(server_of, datatypes.command, c))
      for c in datatypes.COMMANDS for prefix, name, server_of in _BOTH_SERVERS),
    *(Benchmark(f"types.{prefix}arq", f"arq no-op tasks, one worker: {name}",
                strings.row(server_of, datatypes.arq))
      for prefix, name, server_of in _BOTH_SERVERS),
), describe=datatypes.describe, figures=(
    *(Figure("types", f"{c.verb} -P {datatypes.PIPELINE}: streamkeep / redis-server",
             f"types.{c.name}", denominator=f"types.redis_{c.name}", target=TYPES_P16_TARGET)
      for c in datatypes.COMMANDS),
    Figure("types", "arq no-op tasks/s: streamkeep / redis-server", "types.arq",
           denominator="types.redis_arq", target=TYPES_ARQ_TARGET),
))

# --- lists: list commands and a durable job queue, against redis-server -------------------------

# Lists (`streamkeep bench lists`), against redis-server in the same run: redis-benchmark
# requests/s / redis-server's, at least
LISTS_P16_TARGET = 0.5  # LPUSH, RPOP, LRANGE_100 at -P 16
LISTS_P1_TARGET = 0.7  # LPUSH, RPOP one at a time
# RQ no-op jobs through one worker, streamkeep serve / redis-server, appendfsync always both (a
# durable broker)
LISTS_RQ_TARGET = 1.0

# The lists section's durable pair: (row key prefix, row label, the run's shared server).
_ALWAYS_SERVERS: tuple[tuple[str, str, Callable[[BenchEnv], Any]], ...] = (
    ("", "streamkeep", lambda env: server.streamkeep(env, "always")),
    ("redis_", "redis-server", lambda env: server.redis_aof(env, "always")),
)

LISTS = Section("lists", (
    *(Benchmark(f"lists.{prefix}{c.name}_p{p}", f"{c.label}, redis-benchmark -c "
                                                f"{SERVER_CLIENTS} -P {p}: {name}",
                strings.row(server_of, datatypes.command, c, p))
      for c, p in lists.ROWS for prefix, name, server_of in _BOTH_SERVERS),
    *(Benchmark(f"lists.{prefix}rq", f"RQ no-op jobs, one worker, appendfsync always: {name}",
                strings.row(server_of, lists.rq))
      for prefix, name, server_of in _ALWAYS_SERVERS),
), describe=lists.describe, figures=(
    *(Figure("lists", f"{c.name.upper()} -P {p}: streamkeep / redis-server",
             f"lists.{c.name}_p{p}", denominator=f"lists.redis_{c.name}_p{p}",
             target=LISTS_P16_TARGET if p == 16 else LISTS_P1_TARGET)
      for c, p in lists.ROWS),
    Figure("lists", "RQ no-op jobs/s, appendfsync always: streamkeep / redis-server", "lists.rq",
           denominator="lists.redis_rq", target=LISTS_RQ_TARGET),
))

# --- queue: the durable work queue against persist-queue ----------------------------------------

# The durable work queue (`streamkeep bench queue`), against persist-queue's SQLiteAckQueue
# measured in the same run:
QUEUE_EVERYSEC_RATIO_TARGET = 50.0  # put+get+ack msgs/s, embedded everysec, 1 thread, at least
QUEUE_BATCH_TARGET = 100_000  # msgs/s with put_many + get(count=100) + ack, everysec
QUEUE_ALWAYS_RATIO_TARGET = 10.0  # 16 threads, appendfsync always / persist-queue 16 threads
# StreamQueue over redis-py against streamkeep serve / the same commands from a plain redis-py
# loop against redis-server (one round trip each): the server's per-command cost, at least
QUEUE_REDIS_PY_RATIO_TARGET = 0.8

QUEUE = Section("queue", (
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
), describe=workqueue.describe, figures=(
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
))

# --- nodes: packed stream nodes against other checkouts -----------------------------------------

# Packed stream nodes (`streamkeep bench nodes --base DIR --before DIR`): this checkout's rate /
# the other's, each run (the worst run's ratio is the figure), at least:
NODES_BASE_TARGET = 0.95  # no embedded op slower than the base by more than 5%
NODES_RANGE_TARGET = 1.0  # range reads faster than the base (strictly: > 1)
NODES_LOAD_TARGET = 5.0  # snapshot load entries/s against the older commit
NODES_COLD_TARGET = 5.0  # cold 100-entry node reads against the older commit
NODES_IMPORT_TARGET = 10.0  # streamkeep import of a dump.rdb against the older commit
NODES_FOOTPRINT_TARGET = 1.10  # RSS after a restart / RSS built live, at most

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

NODES = Section("nodes", (
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
), describe=nodes.describe, figures=(
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
    Figure("nodes", "cold node read, this checkout", "nodes.cold_read", extra="us_per_read",
           unit="us"),
    *(Figure("nodes", f"footprint: RSS {what}", "nodes.footprint", extra=extra, unit="MB")
      for what, extra in (("built live", "live_mb"), ("after a snapshot load", "load_mb"),
                          ("after an AOF replay", "replay_mb"))),
    *(Figure("nodes", f"footprint: {what} / live", "nodes.footprint", extra=extra,
             target=NODES_FOOTPRINT_TARGET, at_most=True)
      for what, extra in (("snapshot load", "load_over_live"), ("AOF replay", "replay_over_live"))),
))

# --- consume: the consume path against an older checkout ----------------------------------------

# The consume path (`streamkeep bench consume --before DIR`): this checkout's rate / the older
# commit's, each run (the worst run's ratio is the figure), at least:
CONSUME_EMBEDDED_TARGET = 4.0  # XREADGROUP COUNT 100 + XACK in memory
CONSUME_BATCH_TARGET = 5.0  # StreamQueue put_many(100) + get(100) + ack, everysec
CONSUME_CATCHUP_TARGET = 3.0  # a group's catch-up over a cold backlog

CONSUME = Section("consume", (
    Benchmark("consume.embedded", f"embedded XREADGROUP COUNT {BATCH} + XACK, in memory: "
                                  "this checkout (vs --before)", consume.embedded),
    Benchmark("consume.queue_batch", f"StreamQueue put_many({BATCH}) + get({BATCH}) + ack, "
                                     "everysec: this checkout (vs --before)",
              consume.queue_batch),
    Benchmark("consume.catchup", f"catch-up (XREADGROUP COUNT {BATCH} + XACK) over a cold "
                                 "backlog: this checkout (vs --before)", consume.catchup),
), describe=consume.describe, figures=tuple(
    Figure("consume", f"{label}: this / before, worst run", f"consume.{name}",
           extra="ratio_min", target=target)
    for name, label, target in (("embedded", "embedded consume msgs/s", CONSUME_EMBEDDED_TARGET),
                                ("queue_batch", "queue batches msgs/s", CONSUME_BATCH_TARGET),
                                ("catchup", "cold catch-up entries/s", CONSUME_CATCHUP_TARGET))))

# `bench --compare-pure`: compiled over pure-Python rate per row, the compiled core's targets
# (each round's ratio must reach it).
NATIVE_TARGETS: dict[str, float] = {"embedded.xadd": 4.0}

# --- asyncio: the engine and the work queue inside an event loop ---------------------------------

# `streamkeep bench asyncio`, every ratio against a row of the same run:
ASYNC_OVER_NETWORK_TARGET = 10.0  # await r.xadd in process / redis.asyncio to redis-server
ASYNC_OVER_SYNC_TARGET = 0.7  # await r.xadd / Engine.redis().xadd, in process
ASYNC_EVERYSEC_OVER_BURNER_TARGET = 0.5  # await xadd, AOF everysec / burner-redis in memory
ASYNC_QUEUE_OVER_SYNC_TARGET = 0.7  # AsyncStreamQueue / StreamQueue, put + get + ack
ASYNC_QUEUE_OVER_PERSIST_TARGET = 20.0  # AsyncStreamQueue / persist-queue

ASYNCIO = Section("asyncio", (
    Benchmark("asyncio.aredis_xadd", "await r.xadd, in process (Engine.aredis())",
              asyncio_rows.bench_aredis_xadd),
    Benchmark("asyncio.sync_xadd", "r.xadd, in process (Engine.redis())",
              asyncio_rows.bench_sync_xadd),
    Benchmark("asyncio.redis_asyncio_xadd", "await r.xadd, redis.asyncio to redis-server",
              asyncio_rows.bench_redis_asyncio_xadd),
    Benchmark("asyncio.aredis_xadd_everysec", "await r.xadd, in process, AOF everysec",
              asyncio_rows.bench_aredis_xadd_everysec),
    Benchmark("asyncio.burner_xadd", "await db.xadd, burner-redis in memory",
              asyncio_rows.bench_burner_xadd),
    Benchmark("asyncio.kill_streamkeep", "await r.xadd then SIGKILL: streamkeep everysec",
              asyncio_rows.bench_kill_streamkeep),
    Benchmark("asyncio.kill_burner", "await db.xadd then SIGKILL: burner-redis with its "
                                     "persistence file", asyncio_rows.bench_kill_burner),
    Benchmark("asyncio.queue", "AsyncStreamQueue, everysec, 1 task: put + get + ack",
              asyncio_rows.bench_async_queue),
    Benchmark("asyncio.sync_queue", "StreamQueue, everysec, 1 thread: put + get + ack",
              workqueue.bench_everysec),
    Benchmark("asyncio.persist_queue", "persist-queue SQLiteAckQueue, 1 thread: put + get + "
                                       "ack", workqueue.bench_persist_queue),
    Benchmark("asyncio.blocked_gets", f"{asyncio_rows.BLOCKED_TASKS:,} tasks blocked in get, "
                                      f"then as many puts: deliveries",
              asyncio_rows.bench_blocked_gets),
), describe=asyncio_rows.describe, figures=(
    Figure("asyncio", "await r.xadd in process / redis.asyncio to redis-server",
           "asyncio.aredis_xadd", denominator="asyncio.redis_asyncio_xadd",
           target=ASYNC_OVER_NETWORK_TARGET),
    Figure("asyncio", "await r.xadd / r.xadd (sync), in process", "asyncio.aredis_xadd",
           denominator="asyncio.sync_xadd", target=ASYNC_OVER_SYNC_TARGET),
    Figure("asyncio", "await r.xadd, AOF everysec / burner-redis in memory",
           "asyncio.aredis_xadd_everysec", denominator="asyncio.burner_xadd",
           target=ASYNC_EVERYSEC_OVER_BURNER_TARGET),
    Figure("asyncio", "entries kept after SIGKILL: streamkeep", "asyncio.kill_streamkeep",
           extra="kept", unit="count"),
    Figure("asyncio", "entries kept after SIGKILL: burner-redis", "asyncio.kill_burner",
           extra="kept", unit="count"),
    Figure("asyncio", "AsyncStreamQueue / StreamQueue, put + get + ack", "asyncio.queue",
           denominator="asyncio.sync_queue", target=ASYNC_QUEUE_OVER_SYNC_TARGET),
    Figure("asyncio", "AsyncStreamQueue / persist-queue, put + get + ack", "asyncio.queue",
           denominator="asyncio.persist_queue", target=ASYNC_QUEUE_OVER_PERSIST_TARGET),
    Figure("asyncio", "blocked gets: the loop's longest stall", "asyncio.blocked_gets",
           extra="longest_stall_us", unit="us"),
    Figure("asyncio", "blocked gets: the mean time of one put (serving one waiter)",
           "asyncio.blocked_gets", extra="put_us", unit="us"),
))
