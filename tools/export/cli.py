"""`streamkeep export DIR --out OUT`: a snapshot's tables written by Spark (first cut).

Owns the command's arguments and output: pins the snapshot PATH names (tools.export.pin, for
exactly as long as the export runs), starts a SparkSession (local by default), writes each table
through the `streamkeep` data source to OUT/<table>, prints rows and seconds per table and
writes OUT/export-manifest.json (snapshot LSN and file, time, row counts). Importing it stays
cheap: pyspark is imported when the command runs. Must not touch: the snapshot format, the
engine, the data directory (apart from the pin).

Not yet (issue 16): csv, --partition-by, --since-lsn (incremental), a progress display.

Exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error (no such path, no snapshot
yet, OUT/<table> exists, pyspark or Java missing).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.tools.export.pin import ExportError, Pin, pin

HELP = "export a snapshot's tables to Parquet or JSON with Spark"
TABLES = ("entries", "streams", "groups", "pending", "consumers")
MANIFEST = "export-manifest.json"
EXIT_SNAPSHOT, EXIT_USAGE = 2, 3
EPILOG = """examples:
  streamkeep export ./data --out ./export                     every table, Parquet, local[*]
  streamkeep export ./data --out ./export --table entries --streams 'orders:*'
  streamkeep export ./data/snapshot-000000001234.mdb --out /tmp/x --format json

Spark's Python workers must import streamkeep: PYSPARK_PYTHON names their interpreter (default
here: this one). Needs pyspark and a Java runtime (pip install 'streamkeep[spark]').

exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.epilog = EPILOG
    parser.add_argument("path", help="a data directory (its current snapshot) or a snapshot")
    parser.add_argument("--out", required=True, help="output directory (one folder per table)")
    parser.add_argument("--format", choices=("parquet", "json"), default="parquet")
    parser.add_argument("--table", choices=(*TABLES, "all"), default="all")
    parser.add_argument("--streams", metavar="GLOB", help="only streams whose name matches")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--num-partitions", type=int, help="read partitions per table (default: the cluster's parallelism)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output")


class _Failed(StreamkeepError):
    """A failure this command reports as one line and an exit status (never escapes main)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def main(args: argparse.Namespace) -> int:
    try:
        return _export(args)
    except _Failed as err:
        print(f"streamkeep export: {err}", file=sys.stderr)
        return err.status


def _export(args: argparse.Namespace) -> int:
    tables = list(TABLES) if args.table == "all" else [args.table]
    if not args.overwrite:
        existing = [t for t in tables if os.path.exists(os.path.join(args.out, t))]
        if existing:
            raise _Failed(f"{os.path.join(args.out, existing[0])} exists (--overwrite "
                          "replaces it)", EXIT_USAGE)
    with _pinned(args.path) as pinned:
        lsn = _lsn(pinned.path)
        spark, owned = _session(args.master)
        try:
            counts = {t: _write(spark, pinned.path, t, args) for t in tables}
        finally:
            if owned:
                spark.stop()
    _write_manifest(args, lsn, counts)
    return 0


def _pinned(path: str) -> Pin:
    try:
        return pin(path)
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None


def _lsn(path: str) -> int:
    try:
        with Snapshot(path) as snap:
            return snap.meta.lsn
    except SnapshotError as err:
        raise _Failed(str(err), EXIT_SNAPSHOT) from None


def _session(master: str) -> tuple[Any, bool]:
    """A SparkSession, and whether this command started it (and stops it): a caller's
    running session (tests, notebooks) is used as it is, --master aside."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise _Failed("pyspark is not installed (pip install 'streamkeep[spark]')",
                      EXIT_USAGE) from None
    from streamkeep.tools.export.datasource import StreamkeepDataSource

    running = SparkSession.getActiveSession()
    if running is not None:
        running.dataSource.register(StreamkeepDataSource)
        return running, False
    # Local workers must be this interpreter: it has streamkeep and its dependencies.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        spark = (SparkSession.builder.master(master).appName("streamkeep-export")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    except Exception as err:  # py4j/JVM start-up: no Java, bad master; one line, not a trace
        raise _Failed(f"cannot start Spark ({type(err).__name__}: {err})", EXIT_USAGE) from None
    spark.dataSource.register(StreamkeepDataSource)
    return spark, True


def _write(spark: Any, path: str, table: str, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql.functions import col

    started = time.monotonic()
    # push-down only where the session allows it (a caller's session may not)
    pushdown = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false").lower()
    reader = spark.read.format("streamkeep").option("table", table).option("pushdown", pushdown)
    # default: the cluster's parallelism (the data source alone cannot ask the cluster)
    parts = args.num_partitions or spark.sparkContext.defaultParallelism
    reader = reader.option("numPartitions", str(parts))
    df = reader.load(path)
    if args.streams:  # a regex Spark applies; not pushed down (stream_str = ... would be)
        df = df.where(col("stream_str").rlike(fnmatch.translate(args.streams)))
    target = os.path.join(args.out, table)
    df.write.mode("overwrite" if args.overwrite else "errorifexists").format(args.format) \
        .save(target)
    # The written files' own count (Parquet: from the footers), not a second snapshot read.
    rows = spark.read.format(args.format).load(target).count()
    seconds = round(time.monotonic() - started, 3)
    print(f"{table:<10} {rows:>12,} rows  {seconds:8.2f} s  -> {target}")
    return {"rows": rows, "seconds": seconds}


def _write_manifest(args: argparse.Namespace, lsn: int, counts: dict[str, Any]) -> None:
    doc = {"format": "streamkeep-export", "version": 1, "source": os.path.abspath(args.path),
           "snapshot_lsn": lsn, "created_ms": int(time.time() * 1000),
           "output_format": args.format, "streams": args.streams, "tables": counts}
    with open(os.path.join(args.out, MANIFEST), "w") as out:
        json.dump(doc, out, indent=2)
        out.write("\n")
