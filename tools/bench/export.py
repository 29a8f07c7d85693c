"""The ``export`` section: the Spark export, snapshot -> Parquet on local[2].

Owns its workload and its Spark session: a compacted data directory of :func:`entries` entries
(10 x N: 2M at the default N) over four streams, three field/value pairs each with one field
repeated, built once per run; one SparkSession on ``local[2]`` per run, whose start-up with a
first small export (the Python workers' start), then two exports of the data (the JVM
compiling its hot paths) are timed apart and reported as figures, never counted in a row. The rows write the entries table (every column)
to Parquet:

- ``export.parquet``: through the ``streamkeep`` data source (Arrow batches, partitions cut
  from the snapshot's keys), entries/s;
- ``export.driver``: the simple alternative: the same rows read on the driver through the
  snapshot reader, parallelized in 64 slices and handed to ``spark.createDataFrame``.

Must not touch: the data source and the export command (tools.export), the registry.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import Measurement, Skip

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

ENTRIES_PER_N = 10
QUICK_ENTRIES_PER_N = 2  # --quick checks the rows, not the rate: Spark's start-up is most of it
STREAMS = 4
MASTER = "local[2]"
WARMUP_ENTRIES = 20_000  # the first export, timed with the start-up (quick: 2,000)
DRIVER_SLICES = 64  # createDataFrame's tasks (its default, one per core, ships 1M-row tasks)


def entries(env: BenchEnv) -> int:
    return (QUICK_ENTRIES_PER_N if env.quick else ENTRIES_PER_N) * env.n


def warmup_entries(env: BenchEnv) -> int:
    return 2_000 if env.quick else WARMUP_ENTRIES


def describe(env: BenchEnv) -> list[str]:
    return [f"export: a compacted data directory of {entries(env):,} entries over {STREAMS} "
            f"streams (3 field/value pairs, one field repeated); entries table, every column, "
            f"to Parquet (snappy, the export's writer options) on {MASTER}, output under the "
            f"bench's temporary directory; Spark's start-up and a first small export are timed "
            f"apart (figure), not counted"]


def data_set(n: int) -> datasets.DataSet:
    """n entries over STREAMS streams, three field/value pairs each, one field repeated."""
    return datasets.DataSet(n, "stream", streams=STREAMS, fields=lambda i: (
        "item", str(i), "qty", str(i % 97), "item", b"\xff\x00repeat"))


class _Spark:
    """The run's data directory and SparkSession (env.shared): started once, stopped at close."""

    def __init__(self, env: BenchEnv) -> None:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise Skip("pyspark is not installed (pip install 'streamkeep[spark]')") from None
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise Skip("no Java runtime (make java)")
        self._dirs = [env.data_dir("export"), env.data_dir("export-warmup"),
                      env.data_dir("export-out")]
        self.path, warm, self.out = (ctx.__enter__() for ctx in self._dirs)
        datasets.build(self.path, data_set(entries(env)))
        self.warmup_entries = warmup_entries(env)
        datasets.build(warm, data_set(self.warmup_entries))
        from streamkeep.tools.export import session

        started = time.perf_counter()
        self.spark = session.start(MASTER, "streamkeep-bench-export")
        write_parquet(self.spark, warm, self.out)
        self.startup = time.perf_counter() - started
        # The JVM compiles its hot paths during the first big writes (here the first ran 2-3x
        # slower, the second still 10-20%): two exports of the data itself before the timed
        # ones (one when quick), the first one's rate reported as the cold figure.
        started = time.perf_counter()
        write_parquet(self.spark, self.path, self.out)
        self.cold_rate = entries(env) / (time.perf_counter() - started)
        if not env.quick:
            write_parquet(self.spark, self.path, self.out)

    def stop(self) -> None:
        from streamkeep.tools.export import session

        session.stop(self.spark)  # and its JVM
        for ctx in reversed(self._dirs):
            ctx.__exit__(None, None, None)

    def describe(self) -> list[str]:
        return []


def _shared(env: BenchEnv) -> _Spark:
    return env.shared("export-spark", lambda: _Spark(env))


def write_parquet(spark: Any, path: str, out: str) -> None:
    """What `streamkeep export --table entries` does: the data source, its default
    partitions, the export's Parquet options."""
    from streamkeep.tools.export.session import PARQUET_OPTIONS, default_partitions

    (spark.read.format("streamkeep").option("table", "entries")
     .option("numPartitions", str(default_partitions(spark))).load(path)
     .write.mode("overwrite").options(**PARQUET_OPTIONS).parquet(out))


def driver_rows(path: str) -> list[tuple]:
    """Every entry as a row of the entries table, read on the driver through the snapshot
    reader, one row at a time (the data source's own row builder, no Arrow, no partitions)."""
    from streamkeep.snapshot.layout import MAX_ID
    from streamkeep.snapshot.reader import Snapshot, current_snapshot
    from streamkeep.tools.export.datasource import SCHEMAS, Range, entry_rows

    snapshot = current_snapshot(path)
    assert snapshot is not None
    wanted = set(SCHEMAS["entries"].fieldNames())
    with Snapshot(snapshot) as snap:
        lsn = snap.meta.lsn
        return [(*row, lsn) for info in snap.streams()
                for row in entry_rows(snap, Range(info.db, info.key, 0, MAX_ID), wanted)]


def bench_parquet(env: BenchEnv) -> Measurement:
    shared = _shared(env)
    n = entries(env)
    began = time.perf_counter()
    write_parquet(shared.spark, shared.path, shared.out)
    seconds = time.perf_counter() - began
    _check_count(shared, n)
    return Measurement(n / seconds, count=n, figures={"startup_s": shared.startup,
                                                      "cold_rate": shared.cold_rate}, notes=[
        f"export.parquet: {n:,} entries in {seconds:.2f} s through the data source; Spark "
        f"start-up and a {shared.warmup_entries:,}-entry export {shared.startup:.1f} s, the "
        f"first warm-up export of the data {shared.cold_rate:,.0f} entries/s (not counted)"])


def bench_driver(env: BenchEnv) -> Measurement:
    from streamkeep.tools.export.datasource import SCHEMAS

    shared = _shared(env)
    n = entries(env)
    began = time.perf_counter()
    from streamkeep.tools.export.session import PARQUET_OPTIONS

    spark = shared.spark
    rdd = spark.sparkContext.parallelize(driver_rows(shared.path), DRIVER_SLICES)
    df = spark.createDataFrame(rdd, SCHEMAS["entries"])
    df.write.mode("overwrite").options(**PARQUET_OPTIONS).parquet(shared.out)
    seconds = time.perf_counter() - began
    _check_count(shared, n)
    return Measurement(n / seconds, count=n, notes=[
        f"export.driver: {n:,} entries in {seconds:.2f} s read on the driver, "
        f"createDataFrame, Parquet"])


def _check_count(shared: _Spark, n: int) -> None:
    written = shared.spark.read.parquet(shared.out).count()
    if written != n:
        raise AssertionError(f"the export wrote {written:,} rows, not {n:,}")
