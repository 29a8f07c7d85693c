"""A quick benchmark of the Spark export's read path (issue 16's speed target), no pytest.

    python -m streamkeep.tools.export.bench [--entries N] [--runs R] [--no-spark]

Owns its data directory (built once under /dev/shm, or the temp directory, and reused while its
entry count matches) and its figures: the in-process read of every partition into Arrow batches
(no Spark: what one task does), then snapshot -> Parquet through the data source on local[2],
JVM start-up excluded and printed apart. Must not touch: the snapshot format, the engine (only
Engine.open / execute / compact / close), anything outside its own directories.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from streamkeep import Engine

STREAMS = 4  # the entries spread over this many streams (several partitions per stream)
ROOT = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def build(entries: int) -> str:
    """A compacted data directory of `entries` entries (three field/value pairs each, one
    field repeated), reused if an earlier run built the same."""
    path = os.path.join(ROOT, f"streamkeep-export-bench-{entries}")
    stamp = os.path.join(path, "bench-entries")
    if os.path.exists(stamp):
        return path
    shutil.rmtree(path, ignore_errors=True)
    started = time.monotonic()
    engine = Engine.open(path)
    try:
        each = entries // STREAMS
        for s in range(STREAMS):
            key = f"stream:{s}"
            for i in range(each + (entries % STREAMS if s == 0 else 0)):
                engine.execute("XADD", key, "*", "item", str(i), "qty", str(i % 97),
                               "item", b"\xff\x00repeat")
        assert engine.compact(wait=True) is not None
    finally:
        engine.close()
    with open(stamp, "w") as out:
        out.write(f"{entries}\n")
    print(f"built {path} ({entries:,} entries) in {time.monotonic() - started:.1f} s")
    return path


def read_in_process(path: str, parts: int) -> int:
    """Every partition read into Arrow batches as a task would (no Spark); rows read."""
    from streamkeep.tools.export.datasource import StreamkeepReader

    reader = StreamkeepReader({"path": path, "table": "entries", "numPartitions": str(parts)})
    rows = 0
    for part in reader.partitions():
        for batch in reader.read(part):
            rows += batch.num_rows
    return rows


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    from streamkeep.tools.export.datasource import StreamkeepDataSource

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    spark = (SparkSession.builder.master("local[2]").appName("streamkeep-export-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.dataSource.register(StreamkeepDataSource)
    return spark


def write_parquet(spark: Any, path: str, out: str, parts: int) -> None:
    (spark.read.format("streamkeep").option("table", "entries")
     .option("numPartitions", str(parts)).load(path)
     .write.mode("overwrite").parquet(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args(argv)
    path = build(args.entries)
    # imports (pyarrow, numpy, pyspark's schema conversion) out of the first timed run
    import pyarrow  # noqa: F401
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: F401

    from streamkeep.tools.export import columnar  # noqa: F401
    for run in range(args.runs):
        started = time.perf_counter()
        rows = read_in_process(path, args.partitions)
        seconds = time.perf_counter() - started
        assert rows == args.entries, rows
        print(f"in-process read  run {run + 1}: {rows:,} rows {seconds:6.2f} s "
              f"{rows / seconds:10,.0f} entries/s")
    if args.no_spark:
        return 0
    started = time.perf_counter()
    spark = spark_session()
    print(f"Spark start-up (not counted): {time.perf_counter() - started:.1f} s")
    out = os.path.join(ROOT, "streamkeep-export-bench-out")
    try:
        for run in range(args.runs):
            started = time.perf_counter()
            write_parquet(spark, path, out, args.partitions)
            seconds = time.perf_counter() - started
            print(f"Parquet local[2] run {run + 1}: {args.entries:,} rows {seconds:6.2f} s "
                  f"{args.entries / seconds:10,.0f} entries/s")
    finally:
        spark.stop()
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
