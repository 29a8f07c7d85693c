"""The offline tools, run on a data directory no server holds: the AOF inspection CLI
(``inspect``: aof verify, aof dump) and the Spark export (``export``: snapshot -> Parquet).

Owns those sections' rows, targets and figures.
Must not touch: how a workload measures (:mod:`..offline`), the run order, running, printing.
"""

from __future__ import annotations

from functools import partial

from streamkeep.tools.bench import offline
from streamkeep.tools.bench.declarations import Benchmark, Section, extra, ratio

# The offline inspection CLI (`streamkeep bench inspect`), records/s at least:
INSPECT_VERIFY_TARGET = 1_000_000
INSPECT_DUMP_TARGET = 200_000

INSPECT = Section("inspect", (
    Benchmark("verify", "streamkeep aof verify --json: XADD records checked (its own time)",
              partial(offline.command, argv=["aof", "verify", "--json"], own_time=True),
              INSPECT_VERIFY_TARGET),
    Benchmark("dump_json", "streamkeep aof dump --format json: XADD records",
              partial(offline.command, argv=["aof", "dump", "--format", "json"]),
              INSPECT_DUMP_TARGET),
), sizes=(("XADD records", offline.RECORDS),), figures=(
    extra("aof verify: records/s from start to exit", "verify", "wall_records_per_s", "/s"),
    extra("aof verify: peak RSS", "verify", "peak_rss_mb", "MB"),
    extra("aof dump --format json: peak RSS", "dump_json", "peak_rss_mb", "MB"),
))

# The Spark export (`streamkeep bench export`):
EXPORT_PARQUET_TARGET = 300_000  # entries/s, snapshot -> Parquet on local[2], at least
EXPORT_DRIVER_RATIO_TARGET = 2.0  # the data source / read on the driver + createDataFrame

EXPORT = Section("export", (
    Benchmark("parquet", f"snapshot -> Parquet through the data source, {offline.MASTER}: "
                         "entries", offline.bench_parquet, EXPORT_PARQUET_TARGET),
    Benchmark("driver", "read on the driver + createDataFrame -> Parquet: entries",
              offline.bench_driver),
), sizes=(
    ("entries", offline.ENTRIES), ("streams", offline.STREAMS), ("Spark master", offline.MASTER)), figures=(
    ratio("data source entries/s / driver + createDataFrame entries/s", "parquet", "driver",
          EXPORT_DRIVER_RATIO_TARGET),
    extra("Spark start-up and a first small export (not counted)", "parquet", "startup_s", "s"),
    extra("the data's first, cold export (JIT warm-up; not counted)", "parquet", "cold_rate",
          "/s"),
))
