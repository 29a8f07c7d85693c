"""The ``inspect`` and ``export`` sections' workloads, on data directories built once per run:
``aof verify`` and ``aof dump`` as child processes (with their peak RSS), and the Spark export
to Parquet on ``local[2]`` against the rows read on the driver (one SparkSession, its start-up
and JVM warm-up timed apart). Must not touch: the commands, the data source.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.workload import Measurement, Size, Skip, clocked

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RECORDS = Size(5, per_n=True)  # the inspected directory's XADD records
SENSOR = ("sensor-id", "1234", "temperature", "19.8")  # each record's fields
# The child: run one CLI command, then report its exit status and peak RSS on stderr's last line.
# (VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a big bench process
# would report the bench's own peak.)
_CHILD = (
    "import json, resource, sys\n"
    "from streamkeep.tools.main import main\n"
    "rc = main(sys.argv[1:])\n"
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
    "rss = int(hwm.split()[1]) * 1024\n"
    "workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024\n"
    "print(json.dumps({'rc': rc, 'peak_rss': rss, 'workers_peak_rss': workers}), "
    "file=sys.stderr)\n"
)
ENTRIES = Size(10, 2, per_n=True)  # the export's (--quick checks the rows: start-up is most)
STREAMS = 4
MASTER = "local[2]"
WARMUP_ENTRIES = 20_000  # the first export, timed with the start-up (quick: 2,000)
DRIVER_SLICES = 64  # createDataFrame's tasks (its default, one per core, ships 1M-row tasks)


def _records_dir(env: BenchEnv) -> str:
    """The run's data directory of XADD records (built on first use)."""
    def made() -> Iterator[str]:
        with env.data_dir("inspect") as path:
            datasets.build(path, datasets.DataSet(RECORDS(env), "sensor", streams=16,
                                                  fields=lambda _i: SENSOR), compact=False)
            yield path

    return env.shared("inspect-data", made)  # type: ignore[no-any-return]


def command(env: BenchEnv, argv: list[str], own_time: bool = False) -> Measurement:
    """An inspect row: ``streamkeep ARGV`` on the shared directory, as a child: records / its
    wall time, or with `own_time` / the time its JSON report gives (the interpreter's start-up
    left out, the wall time's rate a figure); its peak RSS a figure."""
    path, n = _records_dir(env), RECORDS(env)
    command = [*argv[:2], path, *argv[2:]]
    proc, elapsed = clocked(subprocess.run, [sys.executable, "-c", _CHILD, *command],
                            stdout=subprocess.PIPE if own_time else subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, check=False,
                            **temporaries.child_options())
    try:
        report = json.loads(proc.stderr.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report = {}
    if report.get("rc") != 0:
        raise AssertionError(f"streamkeep {' '.join(command)} failed (status "
                             f"{report.get('rc', proc.returncode)}): {proc.stderr[-500:]}")
    rss = max(int(report["peak_rss"]), int(report["workers_peak_rss"]))
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if f.endswith(".aof"))
    # (the peak RSS: the command's process or its largest worker)
    rate, figures = n / elapsed, {"peak_rss_mb": rss / 1e6, "segments_mb": size / 1e6,
                                  "wall_s": elapsed}
    if own_time:
        rate, figures["wall_records_per_s"] = n / float(json.loads(proc.stdout)["seconds"]), rate
    return Measurement(rate, count=n, figures=figures)


def data_set(n: int) -> datasets.DataSet:
    """n entries over STREAMS streams, three field/value pairs each, one field repeated."""
    return datasets.DataSet(n, "stream", streams=STREAMS, fields=lambda i: (
        "item", str(i), "qty", str(i % 97), "item", b"\xff\x00repeat"))


def write_parquet(spark: Any, path: str, out: str) -> None:
    """What `streamkeep export --table entries` does: the data source, its default
    partitions, the export's Parquet options."""
    from streamkeep.tools.export.session import PARQUET_OPTIONS, default_partitions

    (spark.read.format("streamkeep").option("table", "entries")
     .option("numPartitions", str(default_partitions(spark))).load(path)
     .write.mode("overwrite").options(**PARQUET_OPTIONS).parquet(out))


def _spark(env: BenchEnv) -> dict[str, Any]:
    """The run's data directory and SparkSession, started once (its JVM stopped at the end):
    {"spark", "path", "out", "startup" (s), "cold_rate", "warmup"}."""
    def made() -> Iterator[dict[str, Any]]:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise Skip("pyspark is not installed (pip install 'streamkeep[spark]')") from None
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise Skip("no Java runtime (make java)")
        from streamkeep.tools.export import session

        with env.data_dir("export") as path, env.data_dir("export-warmup") as warm, \
                env.data_dir("export-out") as out:
            datasets.build(path, data_set(ENTRIES(env)))
            datasets.build(warm, data_set(warmup := 2_000 if env.quick else WARMUP_ENTRIES))
            began = time.perf_counter()
            spark = session.start(MASTER, "streamkeep-bench-export")
            try:
                write_parquet(spark, warm, out)
                startup = time.perf_counter() - began
                # The JVM compiles its hot paths during the first big writes (the first ran
                # 2-3x slower, the second still 10-20%): two exports of the data itself before
                # the timed ones (one when quick), the first one's rate the cold figure.
                began = time.perf_counter()
                write_parquet(spark, path, out)
                cold_rate = ENTRIES(env) / (time.perf_counter() - began)
                if not env.quick:
                    write_parquet(spark, path, out)
                yield {"spark": spark, "path": path, "out": out, "startup": startup,
                       "cold_rate": cold_rate, "warmup": warmup}
            finally:
                session.stop(spark)  # and its JVM

    return env.shared("export-spark", made)  # type: ignore[no-any-return]


def _exported(env: BenchEnv, shared: dict[str, Any], write: Any) -> tuple[int, float]:
    """``write()`` timed, the rows written checked: (entries, seconds)."""
    n, (_none, seconds) = ENTRIES(env), clocked(write)
    written = shared["spark"].read.parquet(shared["out"]).count()
    if written != n:
        raise AssertionError(f"the export wrote {written:,} rows, not {n:,}")
    return n, seconds


def bench_parquet(env: BenchEnv) -> Measurement:
    s = _spark(env)
    n, seconds = _exported(env, s, lambda: write_parquet(s["spark"], s["path"], s["out"]))
    return Measurement(n / seconds, count=n, figures={"startup_s": s["startup"],
                                                      "cold_rate": s["cold_rate"]})


def driver_rows(path: str) -> list[tuple[Any, ...]]:
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


def bench_driver(env: BenchEnv) -> Measurement:
    from streamkeep.tools.export.datasource import SCHEMAS
    from streamkeep.tools.export.session import PARQUET_OPTIONS

    s = _spark(env)

    def write() -> None:
        rdd = s["spark"].sparkContext.parallelize(driver_rows(s["path"]), DRIVER_SLICES)
        (s["spark"].createDataFrame(rdd, SCHEMAS["entries"]).write.mode("overwrite")
         .options(**PARQUET_OPTIONS).parquet(s["out"]))

    n, seconds = _exported(env, s, write)
    return Measurement(n / seconds, count=n)
