"""Storage: snapshots and compaction (``snapshot``: restart, no pause, bounded disk), what an
entry costs in memory against Redis (``memory``), and backlogs bigger than memory
(``backlog``: cold against resident).

Owns those sections' rows, targets and figures.
Must not touch: how a workload measures (:mod:`..snapshot`, :mod:`..memory`,
:mod:`..backlog`), the run order (the registry), running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import backlog, backlog_list, memory, snapshot
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section
from streamkeep.tools.bench.snapshot import DISK_MAXLEN, bench_snapshot, bench_snapshot_disk

# --- snapshot: restart, compaction without a pause, bounded disk --------------------------------

SNAPSHOT_LOAD_TARGET = 500_000  # entries/s loaded from the snapshot at restart
PAUSE_RATIO_TARGET = 2.0  # XADD p99 during a compaction / p99 without one, at most
DISK_GROWTH_TARGET = 1.5  # peak bytes in the run's second half / first half, at most

SNAPSHOT = Section("snapshot", (
    Benchmark("snapshot.load", "entries loaded from the snapshot at restart (stream+group)",
              lambda env: env.in_dir("snapshot", bench_snapshot, snapshot.stream_entries(env),
                                     snapshot.phase_ops(env)),
              target=SNAPSHOT_LOAD_TARGET),
    Benchmark("snapshot.disk", f"XADD MAXLEN ~ {DISK_MAXLEN:,} + group read/ack, "
                               "auto compaction",
              lambda env: env.in_dir("disk", bench_snapshot_disk, snapshot.disk_ops(env),
                                     snapshot.disk_min_size(env))),
), describe=snapshot.describe, figures=(
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
))

# --- memory: compact streams in memory, against redis-server ------------------------------------

# Compact streams in memory (`streamkeep bench memory`), at most:
MEMORY_ENTRY_TARGET = 40.0  # bytes per entry, the sensor workload (RSS growth)
MEMORY_PENDING_TARGET = 80.0  # bytes per pending entry
MEMORY_GC_TARGET_US = 10_000.0  # one full collection with the sensor workload held
MEMORY_OVER_REDIS_TARGET = 1.5  # every other workload: RSS growth / redis-server's used_memory
MEMORY_TYPES_OVER_REDIS_TARGET = 1.25  # sorted sets, hashes, sets, lists: the same ratio

MEMORY = Section("memory", tuple(
    Benchmark(f"memory.{name}", f"{'a' if name in memory.TYPE_WORKLOADS else 'XADD'} "
              f"fill, in a fresh process: {label}",
              lambda env, name=name: memory.bench(env, name))  # type: ignore[misc]
    for name, (label, _make) in memory.WORKLOADS.items()), describe=memory.describe, figures=(
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
    *(Figure("memory", f"{name}: {what}", f"memory.{name}", extra=extra, unit=unit,
             target=target, at_most=target is not None)
      for name in memory.WORKLOADS if name != "sensor"
      for what, extra, unit, target in (
          ("bytes per entry, streamkeep", "bytes_per_entry", "", None),
          ("bytes per entry, redis-server", "redis_bytes_per_entry", "", None),
          ("streamkeep / redis-server", "over_redis", "x",
           MEMORY_TYPES_OVER_REDIS_TARGET if name in memory.TYPE_WORKLOADS
           else MEMORY_OVER_REDIS_TARGET))),
))

# --- backlog: a stream bigger than memory -------------------------------------------------------

# Backlogs bigger than memory (`streamkeep bench backlog`), backlog-memory 128mb:
BACKLOG_RSS_TARGET = 400.0  # MB, the process's peak RSS, at most
BACKLOG_XADD_RATIO_TARGET = 0.8  # XADD/s against the same stream fully resident, at least
BACKLOG_CATCHUP_TARGET = 150_000  # entries/s, XREADGROUP COUNT 100 + XACK over cold entries
BACKLOG_RESTART_TARGET = 1.5  # s, open to serving, at most (the segmented snapshot too)
BACKLOG_COMPACT_RATIO_TARGET = 1.5  # compaction after 100k entries / on a 100k stream, at most
BACKLOG_WRITTEN_TARGET = 3.0  # bytes that compaction writes / the log bytes of the entries
BACKLOG_SCAN_TARGET = 0.9  # a full scan of the segmented snapshot / of the one-file one
BACKLOG_SPACE_TARGET = 1.5  # a trimmed stream after 50 compactions: disk / one file, at most

BACKLOG = Section("backlog", (
    Benchmark("backlog.cold", f"XADD on a big backlog, backlog-memory "
                              f"{backlog.BUDGET >> 20}mb (fresh process)",
              lambda env: backlog.bench_mode(env, "cold")),
    Benchmark("backlog.resident", "XADD on a big backlog, all resident (fresh process)",
              lambda env: backlog.bench_mode(env, "resident")),
    Benchmark("backlog.compact_small", "compaction of a small stream (entries/s)",
              backlog.bench_compact_small),
    Benchmark("backlog.trimmed", "compactions of a stream trimmed as it grows (/s)",
              backlog.bench_trimmed),
    Benchmark("backlog.list_cold", f"a long list scanned by LRANGE pages, backlog-memory "
                                   f"{backlog_list.BUDGET >> 20}mb (elements/s, fresh process)",
              lambda env: backlog_list.bench_mode(env, "list_cold")),
    Benchmark("backlog.list_resident", "a long list scanned by LRANGE pages, all resident "
                                       "(elements/s, fresh process)",
              lambda env: backlog_list.bench_mode(env, "list_resident")),
), describe=lambda env: backlog.describe(env) + backlog_list.describe(env), figures=(
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
    Figure("backlog", "list cold: elements cold after the restart", "backlog.list_cold",
           extra="cold_elements", unit="count"),
    Figure("backlog", "list cold: restart to serving", "backlog.list_cold", extra="restart_s",
           unit="s"),
    Figure("backlog", "list resident: restart to serving", "backlog.list_resident",
           extra="restart_s", unit="s"),
    Figure("backlog", "list cold: RSS after the restart", "backlog.list_cold",
           extra="open_rss_mb", unit="MB"),
    Figure("backlog", "list resident: RSS after the restart", "backlog.list_resident",
           extra="open_rss_mb", unit="MB"),
    Figure("backlog", "list scan (LRANGE pages), cold / resident", "backlog.list_cold",
           denominator="backlog.list_resident"),
))
