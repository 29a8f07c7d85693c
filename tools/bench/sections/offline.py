"""The offline tools, run on a data directory no server holds: the AOF inspection CLI
(``inspect``: aof verify, aof dump) and the Spark export (``export``: snapshot -> Parquet).

Owns those sections' rows, targets and figures.
Must not touch: how a workload measures (:mod:`..inspect`, :mod:`..export`), the run order
(the registry), running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import export, inspect
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section

# --- inspect: the offline inspection CLI ---------------------------------------------------------

# The offline inspection CLI (`streamkeep bench inspect`), records/s at least:
INSPECT_VERIFY_TARGET = 1_000_000
INSPECT_DUMP_TARGET = 200_000

INSPECT = Section("inspect", (
    Benchmark("inspect.verify", "streamkeep aof verify --json: XADD records checked (its "
              "own time)",
              inspect.bench_verify, target=INSPECT_VERIFY_TARGET),
    Benchmark("inspect.dump_json", "streamkeep aof dump --format json: XADD records",
              inspect.bench_dump_json, target=INSPECT_DUMP_TARGET),
), describe=inspect.describe, figures=(
    Figure("inspect", "aof verify: records/s from start to exit", "inspect.verify",
           extra="wall_records_per_s", unit="/s"),
    Figure("inspect", "aof verify: peak RSS", "inspect.verify", extra="peak_rss_mb",
           unit="MB"),
    Figure("inspect", "aof dump --format json: peak RSS", "inspect.dump_json",
           extra="peak_rss_mb", unit="MB"),
))

# --- export: the Spark export ---------------------------------------------------------------------

# The Spark export (`streamkeep bench export`):
EXPORT_PARQUET_TARGET = 300_000  # entries/s, snapshot -> Parquet on local[2], at least
EXPORT_DRIVER_RATIO_TARGET = 2.0  # the data source / read on the driver + createDataFrame

EXPORT = Section("export", (
    Benchmark("export.parquet", f"snapshot -> Parquet through the data source, "
                                f"{export.MASTER}: entries",
              export.bench_parquet, target=EXPORT_PARQUET_TARGET),
    Benchmark("export.driver", "read on the driver + createDataFrame -> Parquet: entries",
              export.bench_driver),
), describe=export.describe, figures=(
    Figure("export", "data source entries/s / driver + createDataFrame entries/s",
           "export.parquet", denominator="export.driver", target=EXPORT_DRIVER_RATIO_TARGET),
    Figure("export", "Spark start-up and a first small export (not counted)",
           "export.parquet", extra="startup_s", unit="s"),
    Figure("export", "the data's first, cold export (JIT warm-up; not counted)",
           "export.parquet", extra="cold_rate", unit="/s"),
))
