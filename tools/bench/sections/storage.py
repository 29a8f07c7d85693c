"""Storage: snapshots and compaction (``snapshot``: restart, no pause, bounded disk), what an
entry costs in memory against Redis (``memory``), maxmemory and its eviction policies against
Redis's (``eviction``: the accounting's cost, a cache at its limit), and backlogs bigger than
memory (``backlog``: cold against resident).

Owns those sections' rows, targets and figures.
Must not touch: how a workload measures (:mod:`..snapshot`, :mod:`..memory`,
:mod:`..eviction`, :mod:`..backlog`), the run order, running, printing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from streamkeep.tools.bench import backlog, eviction, memory, snapshot
from streamkeep.tools.bench.declarations import Benchmark, Section, both, extra, ratio, vs_redis
from streamkeep.tools.bench.server import SERVER_CLIENTS, server_requests
from streamkeep.tools.text_width import Table

# --- snapshot: restart, compaction without a pause, bounded disk --------------------------------

SNAPSHOT_LOAD_TARGET = 500_000  # entries/s loaded from the snapshot at restart
PAUSE_RATIO_TARGET = 2.0  # XADD p99 during a compaction / p99 without one, at most
DISK_GROWTH_TARGET = 1.5  # peak bytes in the run's second half / first half, at most

SNAPSHOT = Section("snapshot", (
    Benchmark("load", "entries loaded from the snapshot at restart (stream+group)",
              snapshot.load, SNAPSHOT_LOAD_TARGET),
    Benchmark("disk", f"XADD MAXLEN ~ {snapshot.DISK_MAXLEN:,} + group read/ack, auto "
                      "compaction", snapshot.disk),
), sizes=(
    ("stream entries", snapshot.STREAM_ENTRIES), ("bounded disk XADDs", snapshot.DISK_OPS),
    ("bounded disk auto-aof-rewrite-min-size KiB", lambda env: snapshot.DISK_MIN_SIZE(env) >> 10)), figures=(
    extra("restart: Engine.open of that stream with groups", "load", "restart_s", "s"),
    extra("its compaction from the AOF, compact(wait=True)", "load", "compact_s", "s"),
    extra("no pause: XADD p99 without a compaction", "load", "p99_without_us", "us"),
    extra("no pause: XADD p99 while that stream compacts again", "load", "p99_during_us", "us"),
    extra("no pause: p99 during / p99 without", "load", "p99_ratio", target=PAUSE_RATIO_TARGET,
          at_most=True),
    extra("compact(wait=False) call: rotation under the engine lock", "load", "start_ms", "ms"),
    extra("bounded disk: compactions completed", "disk", "compactions", "count"),
    extra("bounded disk: peak segments + snapshots, 1st half", "disk", "peak_first_mb", "MB"),
    extra("bounded disk: peak segments + snapshots, 2nd half", "disk", "peak_second_mb", "MB"),
    extra("bounded disk: peak 2nd half / 1st (an AOF only growing: 2x)", "disk", "growth",
          target=DISK_GROWTH_TARGET, at_most=True),
))

# --- memory: compact streams in memory, against redis-server ------------------------------------

# At most:
MEMORY_ENTRY_TARGET = 40.0  # bytes per entry, the sensor workload (RSS growth)
MEMORY_PENDING_TARGET = 80.0  # bytes per pending entry
MEMORY_GC_TARGET_US = 10_000.0  # one full collection with the sensor workload held
MEMORY_OVER_REDIS_TARGET = 1.5  # every other workload: RSS growth / redis-server's used_memory
MEMORY_TYPES_OVER_REDIS_TARGET = 1.25  # sorted sets, hashes, sets, lists: the same ratio

MEMORY = Section("memory", tuple(
    Benchmark(name, f"{'a' if name in memory.TYPE_WORKLOADS else 'XADD'} fill, in a fresh "
                    f"process: {label}", partial(memory.bench, workload=name))
    for name, (label, _make) in memory.WORKLOADS.items()), sizes=tuple(
    (f"{what} items", partial(memory.entries, workload=name)) for what, name in (
        ("sensor (a tenth pending) and the others'", "sensor"), ("1 KB", "kilobyte"),
        ("small hashes' and small lists'", "small_hashes"))), figures=(
    extra("sensor: bytes per entry, streamkeep (RSS)", "sensor", "bytes_per_entry", "",
          MEMORY_ENTRY_TARGET, at_most=True),
    extra("sensor: bytes per entry, redis-server (used_memory)", "sensor",
          "redis_bytes_per_entry", ""),
    extra("sensor: streamkeep / redis-server", "sensor", "over_redis"),
    extra("sensor: bytes per pending entry, streamkeep", "sensor", "bytes_per_pending", "",
          MEMORY_PENDING_TARGET, at_most=True),
    extra("sensor: bytes per pending entry, redis-server", "sensor", "redis_bytes_per_pending",
          ""),
    extra("sensor: time in collections during the fill", "sensor", "gc_fill_us", "us"),
    extra("sensor: one full collection after the fill", "sensor", "full_gc_us", "us",
          MEMORY_GC_TARGET_US, at_most=True),
    *(extra(f"{name}: {what}", name, figure, unit, target, at_most=target is not None)
      for name in memory.WORKLOADS if name != "sensor"
      for what, figure, unit, target in (
          ("bytes per entry, streamkeep", "bytes_per_entry", "", None),
          ("bytes per entry, redis-server", "redis_bytes_per_entry", "", None),
          ("streamkeep / redis-server", "over_redis", "x",
           MEMORY_TYPES_OVER_REDIS_TARGET if name in memory.TYPE_WORKLOADS
           else MEMORY_OVER_REDIS_TARGET))),
))

# --- eviction: maxmemory and its policies, against redis-server ----------------------------------

# At least:
ACCOUNTING_TARGET = 0.95  # write rate with maxmemory far above use / with maxmemory 0
LRU_SET_TARGET = 0.5  # SET rate of an allkeys-lru cache at its limit / redis-server's
# At most: the points a read-through cache's hit rate is below redis-server's at the same limit
HIT_RATE_POINTS_TARGET = 5.0

_P, _FAR = eviction.PIPELINE, eviction.FAR_LIMIT
_LIMIT = f"at the maxmemory limit ({eviction.POLICY})"

EVICTION = Section("eviction", (
    *(Benchmark(f"{what}_{key}", f"{what.upper()}, redis-benchmark -c {SERVER_CLIENTS} -P {_P}"
                f"{rest}: streamkeep, {label}", partial(run, limit=limit))
      for what, rest, run in (
          ("set", f" -r {eviction.ACCOUNTING_KEYSPACE:,}", eviction.accounting_set),
          ("xadd", "", eviction.accounting_xadd))
      for key, label, limit in (("accounting", f"maxmemory {_FAR} noeviction", _FAR),
                                ("unlimited", "maxmemory 0", "0"))),
    *both("lru_set", f"SET {_LIMIT}, redis-benchmark -c {SERVER_CLIENTS} -P {_P} -t set -r "
                     f"{eviction.SET_KEYSPACE:,}",
          eviction.limit_set, servers=(lambda env: "streamkeep", lambda env: "redis-server")),
    Benchmark("hit_rate", f"read-through cache {_LIMIT}, Zipf GETs + a SET on each miss, the "
                          "same keys on both: requests against streamkeep", eviction.hit_rate),
), sizes=(
    ("accounting rows' redis-benchmark -n",
     lambda env: server_requests(env.n, _P) * eviction.ACCOUNTING_SCALE),
    ("maxmemory", lambda env: f"used_memory at start + {eviction.DATA_ROOM(env) / eviction.MB:g} "
                              "MB, on each server"),
    ("fill runs' -n", eviction.FILL_CHUNK),
    ("SET rows' -n", lambda env: server_requests(env.n, _P)),
    ("Zipf keys", eviction.ZIPF_KEYS), ("s", eviction.ZIPF_S), ("seed", eviction.ZIPF_SEED),
    ("value bytes", eviction.VALUE_BYTES),
    ("requests warming the cache up, then counted", eviction.ZIPF_REQUESTS)), figures=(
    *(ratio(f"{what} -P {_P}: maxmemory {_FAR} (noeviction) / maxmemory 0", f"{key}_accounting",
            f"{key}_unlimited", ACCOUNTING_TARGET) for what, key in (("SET", "set"),
                                                                      ("XADD", "xadd"))),
    vs_redis(f"SET -P {_P} at the {eviction.POLICY} limit", "lru_set", LRU_SET_TARGET),
    *(extra(f"SET at the limit, {server}: {what}", key, name, unit)
      for key, server in (("lru_set", "streamkeep"), ("redis_lru_set", "redis-server"))
      for what, name, unit in (("keys held (DBSIZE)", "keys", "count"),
                               ("used_memory", "used_mb", "MB"),
                               ("keys evicted per SET", "evicted_per_set", ""),
                               ("new keys (not overwrites) per SET", "new_per_set", ""))),
    *(extra(f"read-through: hit rate, {server} (%)", "hit_rate", name, "")
      for server, name in (("streamkeep", "hit_pct"), ("redis-server", "redis_hit_pct"))),
    extra("read-through: hit rate, points below redis-server's", "hit_rate", "points_below", "",
          HIT_RATE_POINTS_TARGET, at_most=True),
    *(extra(f"read-through: {what}, {server}", "hit_rate", prefix + name, unit)
      for what, name, unit in (("keys held (DBSIZE)", "keys", "count"),
                               ("used_memory", "used_mb", "MB"))
      for server, prefix in (("streamkeep", ""), ("redis-server", "redis_"))),
    extra("read-through: requests/s against redis-server", "hit_rate", "redis_rate", "/s"),
))

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = (
    eviction.summary,)

# --- backlog: a stream bigger than memory -------------------------------------------------------

BACKLOG_RSS_TARGET = 400.0  # MB, the process's peak RSS, at most
BACKLOG_XADD_RATIO_TARGET = 0.8  # XADD/s against the same stream fully resident, at least
BACKLOG_CATCHUP_TARGET = 150_000  # entries/s, XREADGROUP COUNT 100 + XACK over cold entries
BACKLOG_RESTART_TARGET = 1.5  # s, open to serving, at most (the segmented snapshot too)
BACKLOG_COMPACT_RATIO_TARGET = 1.5  # compaction after 100k entries / on a 100k stream, at most
BACKLOG_WRITTEN_TARGET = 3.0  # bytes that compaction writes / the log bytes of the entries
BACKLOG_SCAN_TARGET = 0.9  # a full scan of the segmented snapshot / of the one-file one
BACKLOG_SPACE_TARGET = 1.5  # a trimmed stream after 50 compactions: disk / one file, at most

HASH_RESTART_RATIO_TARGET = 0.2  # a big hash's restart to serving, cold / resident, at most
HASH_RSS_RATIO_TARGET = 0.3  # its RSS after that restart, cold / resident, at most
HASH_COLD_HGET_TARGET = 20_000  # HGETs/s of random cold fields, at least

BACKLOG = Section("backlog", (
    Benchmark("cold", f"XADD on a big backlog, backlog-memory {backlog.BUDGET >> 20}mb (fresh "
                      "process)", partial(backlog.bench_mode, mode="cold")),
    Benchmark("resident", "XADD on a big backlog, all resident (fresh process)",
              partial(backlog.bench_mode, mode="resident")),
    Benchmark("compact_small", "compaction of a small stream (entries/s)",
              backlog.bench_compact_small),
    Benchmark("trimmed", "compactions of a stream trimmed as it grows (/s)",
              backlog.bench_trimmed),
    Benchmark("list_cold", f"a long list scanned by LRANGE pages, backlog-memory "
                           f"{backlog.LIST_BUDGET >> 20}mb (elements/s, fresh process)",
              partial(backlog.bench_list_mode, mode="list_cold")),
    Benchmark("list_resident", "a long list scanned by LRANGE pages, all resident "
                               "(elements/s, fresh process)",
              partial(backlog.bench_list_mode, mode="list_resident")),
    Benchmark("hash_cold", f"HGET of random fields of a big hash, backlog-memory "
                           f"{backlog.HASH_BUDGET >> 20}mb, after a restart (fresh process; "
                           "the same hash resident beside it)", backlog.bench_hash),
), sizes=(
    ("stream entries", backlog.ENTRIES), ("new entries before the compaction", backlog.COMPACT_ENTRIES),
    ("list elements", backlog.ELEMENTS), ("hash fields", backlog.FIELDS)), figures=(
    extra("cold: peak RSS", "cold", "peak_rss_mb", "MB", BACKLOG_RSS_TARGET, at_most=True),
    extra("resident: peak RSS", "resident", "peak_rss_mb", "MB"),
    ratio("XADD/s, cold / resident", "cold", "resident", BACKLOG_XADD_RATIO_TARGET),
    extra("cold: catch-up (XREADGROUP COUNT 100 + XACK), entries", "cold", "catchup_per_s",
          "/s", BACKLOG_CATCHUP_TARGET),
    extra("resident: catch-up, entries", "resident", "catchup_per_s", "/s"),
    extra("cold: restart to serving", "cold", "restart_s", "s", BACKLOG_RESTART_TARGET,
          at_most=True),
    extra("resident: restart to serving", "resident", "restart_s", "s"),
    extra("cold: compaction after the new entries", "cold", "compact_s", "s"),
    extra("cold: that compaction's bytes written / the entries' log bytes", "cold",
          "compact_written_ratio", target=BACKLOG_WRITTEN_TARGET, at_most=True),
    extra("cold: restart from the segmented snapshot", "cold", "restart_segmented_s", "s",
          BACKLOG_RESTART_TARGET, at_most=True),
    extra("cold: full scan, segmented / one-file snapshot", "cold", "scan_ratio",
          target=BACKLOG_SCAN_TARGET),
    extra("trimmed stream, 50 compactions: disk / one file", "trimmed", "space_ratio",
          target=BACKLOG_SPACE_TARGET, at_most=True),
    extra("small stream: compaction", "compact_small", "compact_s", "s"),
    extra("compaction: big backlog / small stream", "compact_small", "compact_ratio",
          target=BACKLOG_COMPACT_RATIO_TARGET, at_most=True),
    extra("list cold: elements cold after the restart", "list_cold", "cold_elements", "count"),
    extra("list cold: restart to serving", "list_cold", "restart_s", "s"),
    extra("list resident: restart to serving", "list_resident", "restart_s", "s"),
    extra("list cold: RSS after the restart", "list_cold", "open_rss_mb", "MB"),
    extra("list resident: RSS after the restart", "list_resident", "open_rss_mb", "MB"),
    ratio("list scan (LRANGE pages), cold / resident", "list_cold", "list_resident"),
    extra("hash cold: HGET of random cold fields", "hash_cold", "hget_per_s", "/s",
          HASH_COLD_HGET_TARGET),
    extra("hash: restart to serving, cold / resident", "hash_cold", "restart_ratio",
          target=HASH_RESTART_RATIO_TARGET, at_most=True),
    extra("hash: RSS after the restart, cold / resident", "hash_cold", "rss_ratio",
          target=HASH_RSS_RATIO_TARGET, at_most=True),
    extra("hash cold: restart to serving", "hash_cold", "restart_s", "s"),
    extra("hash resident: restart to serving", "hash_cold", "resident_restart_s", "s"),
    extra("hash cold: RSS after the restart", "hash_cold", "open_rss_mb", "MB"),
    extra("hash resident: RSS after the restart", "hash_cold", "resident_rss_mb", "MB"),
    extra("hash resident: HGET of random fields", "hash_cold", "resident_hget_per_s", "/s"),
))
