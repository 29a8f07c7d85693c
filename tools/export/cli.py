"""`streamkeep export DIR --out OUT`: a snapshot's tables written by Spark, whole or incremental.

Owns the command's arguments and output: pins what the export reads (tools.export.pin: the
snapshot, and for an incremental export the AOF segments too, for exactly as long as the export
runs), starts a SparkSession (local by default; JVM start-up timed apart), writes each table
through the `streamkeep` data source to OUT/<table> as Parquet, JSON or CSV (optionally
partitioned by stream or by the entries' UTC date), shows the running table's Spark tasks on
stderr (a terminal only), prints rows and seconds per table, and writes OUT/export-manifest.json:
the LSN the export is as of, the snapshot's, row counts, and every stream's position (last
generated ID) at that LSN, which the next incremental export (`--since OUT`) starts from.
Importing it stays cheap: pyspark is imported when the command runs. Must not touch: the
snapshot and AOF formats, the engine, the data directory (apart from the pins).

Exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error (no such path, no snapshot
yet, OUT/<table> exists, records after --since-lsn compacted with no previous manifest, pyspark
or Java missing).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.tools.export.pin import ExportError, LogPin, pin, pin_log, pins_of, resolve

HELP = "export a snapshot's tables to Parquet, JSON or CSV with Spark (whole or incremental)"
TABLES = ("entries", "streams", "groups", "pending", "consumers")
MANIFEST = "export-manifest.json"
EXIT_SNAPSHOT, EXIT_USAGE = 2, 3
DAY_MS = 86_400_000
CSV_OPTIONS = {"header": "true", "escape": '"'}
EPILOG = """examples:
  streamkeep export ./data --out ./export                     every table, Parquet, local[*]
  streamkeep export ./data --out ./export --table entries --streams 'orders:*'
  streamkeep export ./data --out ./x --format csv --partition-by date
  streamkeep export ./data/snapshot-000000001234.mdb --out /tmp/x --format json
  streamkeep export ./data --out ./day2 --since ./day1        entries added since ./day1's export
  streamkeep export ./data --out ./tail --since-lsn 5000 --json

An incremental export (--since PREV, or --since-lsn N) writes the entries the XADDs after that
LSN added, read from the AOF (the snapshot too, above each stream's position in PREV's manifest,
if a compaction folded some of those records); deleted or trimmed entries are not taken back.
CSV: a header line, RFC 4180 quoting, binary columns as base64, the fields map and the pairs
list as JSON text.

Spark's Python workers must import streamkeep: PYSPARK_PYTHON names their interpreter (default
here: this one). Needs pyspark and a Java runtime (pip install 'streamkeep[spark]').

exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error; 130 interrupted (Ctrl-C:
OUT is left without the tables being written, removed if the export made it)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.epilog = EPILOG
    parser.add_argument("path", help="a data directory (its current snapshot) or a snapshot")
    parser.add_argument("--out", required=True, help="output directory (one folder per table)")
    parser.add_argument("--format", choices=("parquet", "json", "csv"), default="parquet")
    parser.add_argument("--table", choices=(*TABLES, "all"), default="all")
    parser.add_argument("--streams", metavar="GLOB", help="only streams whose name matches")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--partition-by", choices=("stream", "date"),
                        help="one folder per stream, or per UTC day of the entry IDs' ms "
                             "(entries and pending; the other tables are not partitioned)")
    since = parser.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="PREV", help="only entries added after a previous "
                       "export (its OUT directory or manifest): incremental")
    since.add_argument("--since-lsn", metavar="N", type=int,
                       help="only entries added after LSN N (needs the AOF records after N)")
    parser.add_argument("--num-partitions", type=int,
                        help="read partitions per table (default: one per core of the cluster)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing output")
    parser.add_argument("--json", action="store_true",
                        help="print the manifest as JSON on stdout instead of the table")


class _Failed(StreamkeepError):
    """A failure this command reports as one line and an exit status (never escapes main)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Plan:
    """What this run reads: the load path and options every table shares, the LSN it is as
    of, and the positions at that LSN (for the next incremental export)."""

    load: str
    options: dict[str, str] = field(default_factory=dict)
    lsn: int = 0
    snapshot_lsn: int = 0
    since_lsn: int | None = None
    gap: bool = False
    positions: list[dict] = field(default_factory=list)


def main(args: argparse.Namespace) -> int:
    names: dict[str, str] = {}  # a pin -> the user's file it holds, for messages
    try:
        return _export(args, names)
    except _Failed as err:
        print(f"streamkeep export: {_unpinned(str(err), names)}", file=sys.stderr)
        return err.status


def _unpinned(text: str, names: dict[str, str]) -> str:
    """A message naming the user's files, not the pins (hard links) the export read."""
    for pinned, own in names.items():
        text = text.replace(pinned, own).replace(os.path.basename(pinned),
                                                 os.path.basename(own))
    return text


def _export(args: argparse.Namespace, names: dict[str, str]) -> int:
    incremental = args.since is not None or args.since_lsn is not None
    if incremental and args.table not in ("entries", "all"):
        raise _Failed(f"an incremental export writes the entries table, not {args.table}",
                      EXIT_USAGE)
    tables = ["entries"] if incremental else list(TABLES) if args.table == "all" \
        else [args.table]
    if not args.overwrite:
        existing = [t for t in tables if os.path.exists(os.path.join(args.out, t))]
        if existing:
            raise _Failed(f"{os.path.join(args.out, existing[0])} exists (--overwrite "
                          "replaces it)", EXIT_USAGE)
    previous = _previous_manifest(args.since) if args.since is not None else None
    made = not os.path.exists(args.out)
    begun: list[str] = []  # the tables this run (re)writes, once it starts writing them
    try:
        try:  # (found now, not after Spark's start-up and inside its first write's error)
            os.makedirs(args.out, exist_ok=True)
        except OSError as err:
            raise _Failed(f"--out {args.out}: cannot make it ({err.strerror or err})",
                          EXIT_USAGE) from None
        with _pinned(args, previous, names) as plan:
            started = time.monotonic()
            spark, owned = _session(args.master)
            startup = round(time.monotonic() - started, 3)
            if owned and not args.json:
                print(f"{'spark':<10} started in {startup:.1f} s ({args.master})")
            try:
                counts = {t: _write(spark, plan, t, args, begun) for t in tables}
            finally:
                if owned:
                    from streamkeep.tools.export import session

                    session.stop(spark)
        doc = _manifest(args, plan, counts, startup if owned else None, previous)
    except BaseException:  # a failure or Ctrl-C: no partial OUT (nor table) is left behind
        from streamkeep.tools.exits import discard

        if made:
            discard(args.out, True)
        for table in begun:
            discard(os.path.join(args.out, table), True)
        raise
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
    return 0


def _previous_manifest(where: str) -> str:
    path = os.path.join(where, MANIFEST) if os.path.isdir(where) else where
    if not os.path.isfile(path):
        raise _Failed(f"{path}: no export manifest (--since takes a previous export's OUT "
                      "directory or its manifest)", EXIT_USAGE)
    return path


@contextlib.contextmanager
def _pinned(args: argparse.Namespace, previous: str | None,
            names: dict[str, str]) -> Iterator[_Plan]:
    """Pin what the export reads for as long as it runs: the snapshot (a whole export), or
    the snapshot and the AOF (incremental), all from one manifest reading. `names` gets each
    pin's user-facing name (the file it holds)."""
    if args.since is None and args.since_lsn is None:
        try:
            source = resolve(args.path)
            held = pin(args.path)
        except ExportError as err:
            raise _Failed(str(err), EXIT_USAGE) from None
        names[held.path] = source
        with held:
            plan = _Plan(held.path)
            plan.lsn = plan.snapshot_lsn = _lsn(held.path)
            plan.positions = _positions(LogPin(held.path, plan.lsn, ()), plan.lsn)
            yield plan
        return
    token = secrets.token_hex(6)
    try:
        log = pin_log(args.path, token)
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None
    from streamkeep.aof.manifest import segment_file, snapshot_file

    if log.snapshot is not None:
        names[log.snapshot] = os.path.join(args.path, snapshot_file(log.snapshot_lsn))
    for segment in log.segments:
        names[segment.path] = os.path.join(args.path, segment_file(segment.segment))
    try:
        yield _incremental(args, log, previous)
    finally:
        log.release()
        for stray in pins_of(args.path, token):  # none expected: the read used `log`
            os.unlink(stray)


def _incremental(args: argparse.Namespace, log: LogPin, previous: str | None) -> _Plan:
    from streamkeep.tools.export import since as since_mod

    since = args.since_lsn
    if previous is not None:
        try:
            with open(previous) as f:
                since = int(json.load(f)["lsn"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise _Failed(f"{previous}: not a readable export manifest ({err})",
                          EXIT_USAGE) from None
    assert since is not None
    try:
        win = since_mod.window(log, since)
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None
    if win.gap and previous is None:
        raise _Failed(f"the records after LSN {since} were compacted into the snapshot at LSN "
                      f"{win.snapshot_lsn}: use --since with the previous export (its "
                      "manifest has each stream's position then), or export everything",
                      EXIT_USAGE)
    plan = _Plan(os.path.abspath(args.path), lsn=win.until, snapshot_lsn=log.snapshot_lsn,
                 since_lsn=since, gap=win.gap)
    plan.options = {"sinceLsn": str(since), "untilLsn": str(win.until),
                    "pinned": json.dumps(log.to_json())}
    if previous is not None:
        plan.options["sinceManifest"] = previous
    plan.positions = _positions(log, win.until)
    return plan


def _positions(log: LogPin, lsn: int) -> list[dict]:
    from streamkeep.tools.export import since as since_mod

    try:
        return since_mod.positions_to_json(since_mod.positions_at(log, lsn))
    except ExportError as err:
        raise _Failed(str(err), EXIT_SNAPSHOT) from None


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
    from streamkeep.tools.export import session

    running = SparkSession.getActiveSession()
    if running is not None:
        session.register(running)
        return running, False
    try:
        return session.start(master), True
    except Exception as err:  # noqa: BLE001 (py4j/JVM start-up: no Java, a bad master)
        raise _Failed(f"cannot start Spark ({type(err).__name__}: {err})", EXIT_USAGE) from None


def _write(spark: Any, plan: _Plan, table: str, args: argparse.Namespace,
           begun: list[str]) -> dict[str, Any]:
    from pyspark.sql.functions import col

    from streamkeep.tools.export.progress import TableProgress
    from streamkeep.tools.export.session import PARQUET_OPTIONS, default_partitions

    started = time.monotonic()
    # push-down only where the session allows it (a caller's session may not)
    pushdown = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false").lower()
    reader = spark.read.format("streamkeep").option("table", table).option("pushdown", pushdown)
    # default: from the cluster's parallelism (the data source alone cannot ask the cluster)
    parts = args.num_partitions or default_partitions(spark)
    reader = reader.option("numPartitions", str(parts))
    for name, value in plan.options.items():
        reader = reader.option(name, value)
    df = reader.load(plan.load)
    if args.streams:  # a regex Spark applies; not pushed down (stream_str = ... would be)
        df = df.where(col("stream_str").rlike(fnmatch.translate(args.streams)))
    df, partition = _shaped(df, args)
    target = os.path.join(args.out, table)
    writer = df.write.mode("overwrite" if args.overwrite else "errorifexists") \
        .format(args.format)
    if args.format == "csv":  # RFC 4180 quoting (a quote doubled), as most readers expect
        writer = writer.options(**CSV_OPTIONS)
    elif args.format == "parquet":
        writer = writer.options(**PARQUET_OPTIONS)
    if partition:
        writer = writer.partitionBy(partition)
    begun.append(table)
    try:
        with TableProgress(spark, table, enabled=not args.json):
            writer.save(target)
    except Exception as err:  # noqa: BLE001 (a task's ExportError arrives wrapped by py4j)
        raise _Failed(f"{table}: {_cause(err)}", EXIT_USAGE) from None
    # The written files' own count (Parquet: from the footers), not a second snapshot read.
    back = spark.read.format(args.format)
    if args.format == "csv":
        back = back.options(**CSV_OPTIONS)
    rows = back.load(target).count()
    seconds = round(time.monotonic() - started, 3)
    if not args.json:
        print(f"{table:<10} {rows:>12,} rows  {seconds:8.2f} s  -> {target}")
    return {"rows": rows, "seconds": seconds}


def _shaped(df: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """The table as the output format holds it, and the column to partition by."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)
    from pyspark.sql.types import ArrayType, BinaryType, MapType

    partition = None
    if args.partition_by == "stream":
        partition = "stream_str"
    elif args.partition_by == "date" and "ms" in df.columns:
        # the entry ID's UTC day, whatever the session's time zone
        df = df.withColumn("date", F.date_add(F.lit("1970-01-01").cast("date"),
                                              F.floor(F.col("ms") / DAY_MS).cast("int")))
        partition = "date"
    if args.format == "csv":  # CSV holds text: binary as base64, nested columns as JSON
        for f in df.schema.fields:
            if isinstance(f.dataType, BinaryType):
                df = df.withColumn(f.name, F.base64(F.col(f.name)))
            elif isinstance(f.dataType, (MapType, ArrayType)):
                df = df.withColumn(f.name, F.to_json(F.col(f.name)))
    return df, partition


def _cause(err: BaseException) -> str:
    """The one line worth showing of a Spark failure: a task's ExportError if there is one."""
    text = str(err)
    for line in text.splitlines():
        if "ExportError:" in line:
            return line.split("ExportError:", 1)[1].strip()
    return text.splitlines()[0] if text else type(err).__name__


def _manifest(args: argparse.Namespace, plan: _Plan, counts: dict[str, Any],
              startup: float | None, previous: str | None) -> dict[str, Any]:
    doc = {"format": "streamkeep-export", "version": 2, "source": os.path.abspath(args.path),
           "lsn": plan.lsn, "snapshot_lsn": plan.snapshot_lsn,
           "incremental": None if plan.since_lsn is None else {
               "since_lsn": plan.since_lsn, "previous": previous,
               # records compacted meanwhile: entries added and removed between are not here
               "from_snapshot": plan.gap},
           "created_ms": int(time.time() * 1000), "output_format": args.format,
           "partition_by": args.partition_by, "streams": args.streams,
           "spark_startup_seconds": startup, "tables": counts, "positions": plan.positions}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, MANIFEST), "w") as out:
        json.dump(doc, out, indent=2)
        out.write("\n")
    return doc
