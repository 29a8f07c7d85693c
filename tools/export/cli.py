"""`streamkeep export DIR --out OUT`: a data directory's tables written by Spark, whole or
incremental: the stream tables, `keys` (every key with its type) and one table per value type
(tools.value_tables: `strings`, `zset_members`, ...).

Owns the command's arguments and output. A whole export of a data directory reads its current
state, the snapshot and every record after it (tools.export.state: DIR's snapshot when no record
follows it, else a snapshot of the state built from a point-in-time copy in a scratch directory
beside OUT or in --work-dir); `--snapshot-only` reads DIR's last snapshot as it is and says how
far behind the directory it is; a snapshot file is read as it is; an incremental export
(`--since`, `--since-lsn`) reads the AOF records after an LSN (and the snapshot, if compacted).
What is read is pinned (tools.export.pin) for exactly as long as the export runs. Starts a
SparkSession (local by default; JVM start-up timed apart), writes each table through the
`streamkeep` data source as Parquet, JSON or CSV (optionally partitioned by stream, by the
entries' UTC date or by node; --streams filters the key tables by key name too), shows the running table's
Spark tasks on stderr (a terminal only), prints the LSN the export is as of and rows and seconds
per table, and writes OUT/export-manifest.json: that LSN, the snapshot's, what was read, row
counts, and every stream's position (last generated ID) at that LSN, which the next incremental
export (`--since OUT`) starts from. OUT follows tools.safe_output' rules: never inside a data
directory, new or empty unless --force (then each table written and the manifest replace their
namesakes), built beside its final name and renamed into place once complete. Importing it stays
cheap: pyspark is imported when the command runs.
A cluster (`--cluster HOST:PORT`: each primary's data directory, as the node names it; or
`--shard DIR` repeated: cluster nodes' directories; tools.export.shards finds and checks them)
is exported in one Spark job per table: each shard's state is pinned as a directory's alone is,
the data source plans every shard (its `shards` option) and each row carries its node and
slot; the manifest has one entry per shard. Must not touch: the snapshot and AOF formats, the
engine, the data directory (apart from the pins), the nodes (they are asked, never changed).

Exit status: 0 ok; 2 not a readable snapshot or data directory; 3 usage or I/O error (no such
path, no snapshot yet with --snapshot-only, OUT exists without --force or is inside a data
directory, records after --since-lsn compacted with no previous manifest, pyspark or Java
missing, a --shard that is no cluster node's data directory or repeats a shard); 4 a cluster
node cannot be reached, is no cluster node, or its data directory is not readable here.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.tools.export.pin import (
    ExportError,
    LogPin,
    check_exists,
    claim,
    pin,
    pin_log,
    release_pins,
    resolve,
    sweep_dead,
)
from streamkeep.tools.value_tables import STREAM_TABLES, export_tables

HELP = ("export a data directory's tables (its current state), or a cluster's, to Parquet, "
        "JSON or CSV with Spark, whole or incremental")
TABLES = STREAM_TABLES  # the stream tables; every table (key tables too): export_tables()
MANIFEST = "export-manifest.json"
EXIT_SNAPSHOT, EXIT_USAGE, EXIT_NODE = 2, 3, 4
DAY_MS = 86_400_000
CSV_OPTIONS = {"header": "true", "escape": '"'}
EPILOG = """examples:
  streamkeep export ./data --out ./export             every table, Parquet
  streamkeep export ./data --out ./z --table zset_members  sorted sets
  streamkeep export ./data --out ./export --table entries --streams 'orders:*'
  streamkeep export ./data --out ./x --format csv --partition-by date
  streamkeep export ./data/snapshot-000000001234.mdb --out /tmp/x --format json
  streamkeep export ./data --out ./day2 --since ./day1
                                       the entries added since ./day1's export
  streamkeep export ./data --out ./tail --since-lsn 5000 --json
  streamkeep export ./data --out ./snap --snapshot-only  the last snapshot
  streamkeep export --cluster 127.0.0.1:7001 --out ./all
                                       every primary of the cluster, one job
  streamkeep export --shard ./n1 --shard ./n2 --shard ./n3 --out ./all
                                       the same, from the nodes' directories

A data directory is exported as it is now: its snapshot and every record after it (the state
export-rdb writes). When records follow the snapshot, the directory is copied as of its last
record and that state written as a new snapshot in a scratch directory beside OUT (or in
--work-dir; Spark's executors read it from there), removed at the end; the directory itself is
never locked or changed, so a server may be running on it. The export prints the LSN it is as
of (also in OUT/export-manifest.json). --snapshot-only reads the last snapshot as it is,
without the copy, and says how far behind the directory it is.

An incremental export (--since PREV, or --since-lsn N) writes the entries the XADDs after that
LSN added, read from the AOF (the snapshot too, above each stream's position in PREV's manifest,
if a compaction folded some of those records); deleted or trimmed entries are not taken back.
Besides the stream tables: keys (every key of every type: db, key, type, expire_ms) and one
table per value type: strings (db, key, value, expire_ms), zset_members (db, key, member,
score), hash_fields (db, key, field, value, field_expire_ms), set_members (db, key, member) and
list_elements (db, key, index, element; index 0 is the head). --streams GLOB keeps the keys
whose name matches in those tables too.

CSV: a header line, RFC 4180 quoting, binary columns as base64, the fields map and the pairs
list as JSON text.

OUT is written beside its final name and renamed into place once complete: an error or Ctrl-C
leaves no partial export. It must be new or an empty directory, unless --force (then each
table written and export-manifest.json replace their namesakes in OUT, whatever else is there
is left); it is never written inside a data directory.

A cluster: --cluster HOST:PORT asks that node for the topology and each primary for its data
directory (CONFIG GET dir); the export reads those directories, so they must be readable where
it runs, at the paths the nodes give (run it on the nodes' machine, or on a file system they
share). --shard DIR (once per shard) names cluster nodes' data directories instead: a
replica's directory stands for its shard when its primary is down. Every shard's current
state is exported in one Spark job per table, each planned as it would be alone; every row
has two more columns, node (the id of the node whose directory held it) and slot (its stream's
or key's hash slot, as CLUSTER KEYSLOT gives it). Replicas are not read with --cluster; a
primary that cannot be reached is an error naming it and its replicas. The manifest has a
shards list (each node's address, directory, LSN, positions) and no single LSN.

Spark's Python workers must import streamkeep: PYSPARK_PYTHON names their interpreter (default
here: this one). Needs pyspark and a Java runtime (pip install 'streamkeep[spark]').

exit status: 0 ok; 2 not a readable snapshot or data directory; 3 usage or I/O error; 4 a
cluster node cannot be reached, is no cluster node, or its data directory is not readable
here; 130 interrupted (Ctrl-C: OUT left as it was)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.epilog = EPILOG
    parser.add_argument("path", nargs="?",
                        help="a data directory (its current state) or a snapshot file (or "
                             "--cluster, --shard)")
    parser.add_argument("--cluster", metavar="HOST:PORT",
                        help="export every primary of the cluster this node belongs to, from "
                             "the data directories the nodes name (readable from here)")
    parser.add_argument("--shard", metavar="DIR", action="append",
                        help="a cluster node's data directory, one per shard (repeat it): "
                             "export them together")
    parser.add_argument("--out", required=True,
                        help="output directory (one folder per table): new or empty, unless "
                             "--force")
    parser.add_argument("--format", choices=("parquet", "json", "csv"), default="parquet")
    tables = export_tables()
    parser.add_argument("--table", choices=(*tables, "all"), default="all", metavar="TABLE",
                        help=f"the table to export: {', '.join(tables)} or all (default all)")
    parser.add_argument("--streams", metavar="GLOB",
                        help="only streams (and, in the key tables, keys) whose name matches")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--partition-by", choices=("stream", "date", "node"),
                        help="one folder per stream (the stream tables), per UTC day of "
                             "the entry IDs' ms (entries and pending), or per node (a "
                             "cluster's export); the other tables are not partitioned")
    since = parser.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="PREV", help="only entries added after a previous "
                       "export (its OUT directory or manifest): incremental")
    since.add_argument("--since-lsn", metavar="N", type=int,
                       help="only entries added after LSN N (needs the AOF records after N)")
    parser.add_argument("--snapshot-only", action="store_true",
                        help="a data directory: export its last snapshot as it is (no copy), "
                             "and say how far behind the directory it is")
    parser.add_argument("--work-dir", metavar="DIR",
                        help="where the current state's snapshot is built (default: beside "
                             "OUT); every Spark executor must be able to read it")
    parser.add_argument("--num-partitions", type=int,
                        help="read partitions per table (default: one per core of the cluster)")
    parser.add_argument("--force", "--overwrite", dest="force", action="store_true",
                        help="write into an existing OUT: the tables written and the manifest "
                             "replace theirs (--overwrite: the same)")
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
    of, what it is (`state`: current, snapshot, snapshot-file or incremental, and the line that
    says so), and the positions at that LSN (for the next incremental export)."""

    load: str
    options: dict[str, str] = field(default_factory=dict)
    lsn: int = 0
    snapshot_lsn: int = 0
    since_lsn: int | None = None
    gap: bool = False
    positions: list[dict] = field(default_factory=list)
    state: str = "current"
    described: str = ""
    built_seconds: float | None = None  # the current state's snapshot: copy and write
    behind: dict | None = None  # --snapshot-only: how far the snapshot is behind DIR
    shards: list[tuple[Any, _Plan]] | None = None  # a cluster's: each Shard and its own plan


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
    from streamkeep.tools.safe_output import OutputRefused, check_output, staged_directory

    shards = _shards(args)  # a cluster's (asked or given), before anything else is done
    incremental = args.since is not None or args.since_lsn is not None
    if incremental and args.table not in ("entries", "all"):
        raise _Failed(f"an incremental export writes the entries table, not {args.table}",
                      EXIT_USAGE)
    if incremental and args.snapshot_only:
        raise _Failed("--snapshot-only exports a whole snapshot: not with --since or "
                      "--since-lsn", EXIT_USAGE)
    tables = ["entries"] if incremental else list(export_tables()) if args.table == "all" \
        else [args.table]
    read = [s.directory for s in shards] if shards is not None else [args.path]
    try:  # before anything is read or started
        check_output(args.out, directory=True, force=args.force,
                     sources=[*read, *([args.since] if args.since else [])])
        if args.work_dir is not None:
            _check_work_dir(args.work_dir)
    except OutputRefused as err:
        raise _Failed(str(err), EXIT_USAGE) from None
    try:  # what the user named is there, before what the machine lacks is looked for
        check_exists(read[0])
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None
    previous = _previous_manifest(args.since) if args.since is not None else None
    _check_spark()  # before anything is pinned, copied or built for it
    # This command's pins are named after it and locked while it runs; those of an export
    # killed before it could release them are removed now.
    claim()
    for path in read:
        sweep_dead(path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path)))
    pinned = _pinned(args, previous, names) if shards is None \
        else _pinned_shards(args, shards, names)
    try:
        with pinned as plan, staged_directory(args.out, merge=args.force) as stage:
            if not args.json:
                for line in plan.described.splitlines():
                    print(f"{'state':<10} {line}")
            started = time.monotonic()
            spark, owned = _session(args.master)
            startup = round(time.monotonic() - started, 3)
            if owned and not args.json:
                print(f"{'spark':<10} started in {startup:.1f} s ({args.master})")
            try:
                counts = {t: _write(spark, plan, t, args, stage) for t in tables}
            finally:
                if owned:
                    from streamkeep.tools.export import session

                    session.stop(spark)
            doc = _manifest(args, plan, counts, startup if owned else None, previous, stage)
    except OutputRefused as err:  # OUT made by someone else meanwhile
        raise _Failed(str(err), EXIT_USAGE) from None
    except OSError as err:
        raise _Failed(f"{err.filename or args.out}: {err.strerror or err}", EXIT_USAGE) from None
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
    elif plan.shards is not None:
        print(f"{'export':<10} {len(plan.shards)} shards as of LSN "
              f"{', '.join(f'{p.lsn:,}' for _s, p in plan.shards)} -> {args.out}")
    else:
        print(f"{'export':<10} as of LSN {plan.lsn:,} -> {args.out}")
    return 0


def _shards(args: argparse.Namespace) -> list[Any] | None:
    """A cluster export's shards (tools.export.shards), or None for a single directory's
    export; _Failed for a source given twice over or not at all, or one not to be had."""
    from streamkeep.tools.export import shards as shards_mod

    given = [name for name, value in (("DIR", args.path), ("--cluster", args.cluster),
                                      ("--shard", args.shard)) if value]
    if len(given) != 1:
        raise _Failed("give what to export: a DIR, --cluster HOST:PORT or --shard DIR ..." if
                      not given else f"{' and '.join(given)} name what to export twice: give "
                      "one of them", EXIT_USAGE)
    if args.path:
        return None
    if args.since is not None or args.since_lsn is not None:
        raise _Failed("an incremental export (--since, --since-lsn) reads one data directory: "
                      "not with --cluster or --shard", EXIT_USAGE)
    if args.cluster is not None:
        from streamkeep.tools.cluster import split_address

        try:
            split_address(args.cluster)
        except ValueError as err:
            raise _Failed(f"--cluster {err}", EXIT_USAGE) from None
        try:
            return shards_mod.from_cluster(args.cluster)
        except shards_mod.NodeProblem as err:
            raise _Failed(str(err), EXIT_NODE) from None
    try:
        return shards_mod.from_directories(args.shard)
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None


def _check_spark() -> None:
    """What starting Spark needs, checked before any work: pyspark importable, and a Java
    runtime where Spark's launcher looks for it (JAVA_HOME's, else `java` on PATH) unless this
    process runs a session already (a caller's: it is used as it is)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as err:
        raise _Failed(f"pyspark cannot be imported ({err}): pip install 'streamkeep[spark]'",
                      EXIT_USAGE) from None
    if SparkSession.getActiveSession() is not None:
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise _Failed(f"JAVA_HOME is {home}, which has no bin/java: Spark needs a Java "
                          "runtime (17 or later)", EXIT_USAGE)
    elif shutil.which("java") is None:
        raise _Failed("no Java runtime (no java on PATH, no JAVA_HOME): Spark needs one, "
                      "17 or later", EXIT_USAGE)


def _check_work_dir(path: str) -> None:
    from streamkeep.tools.safe_output import OutputRefused, data_directory_of

    if not os.path.isdir(path):
        raise OutputRefused(f"--work-dir {path}: not a directory")
    home = data_directory_of(path)
    if home is not None:
        raise OutputRefused(f"--work-dir {path} is inside the streamkeep data directory "
                            f"{home}: work elsewhere")


def _previous_manifest(where: str) -> str:
    path = os.path.join(where, MANIFEST) if os.path.isdir(where) else where
    if not os.path.isfile(path):
        raise _Failed(f"{path}: no export manifest (--since takes a previous export's OUT "
                      "directory or its manifest)", EXIT_USAGE)
    return path


@contextlib.contextmanager
def _pinned(args: argparse.Namespace, previous: str | None,
            names: dict[str, str]) -> Iterator[_Plan]:
    """Pin what the export reads for as long as it runs: DIR's current state (a whole export
    of a data directory), a snapshot as it is (a snapshot file, --snapshot-only), or the
    snapshot and the AOF (incremental), all from one manifest reading. `names` gets each
    pin's user-facing name (the file it holds)."""
    if args.since is not None or args.since_lsn is not None:
        with _pinned_log(args, previous, names) as plan:
            yield plan
    elif os.path.isdir(args.path) and not args.snapshot_only:
        with _current(args) as plan:
            yield plan
    else:
        with _snapshot(args, names) as plan:
            yield plan


@contextlib.contextmanager
def _pinned_shards(args: argparse.Namespace, shards: list[Any],
                   names: dict[str, str]) -> Iterator[_Plan]:
    """Every shard's directory pinned as it would be alone (its current state, or its last
    snapshot with --snapshot-only), for as long as the export runs: one plan whose `shards`
    option makes the data source read them all."""
    with contextlib.ExitStack() as stack:
        each: list[tuple[Any, _Plan]] = []
        for shard in shards:
            alone = argparse.Namespace(**{**vars(args), "path": shard.directory})
            each.append((shard, stack.enter_context(_pinned(alone, None, names))))
        plan = _Plan("", state=each[0][1].state, shards=each)
        plan.options = {"shards": json.dumps([{"path": one.load, "node": shard.node}
                                              for shard, one in each])}
        plan.described = "\n".join(
            f"{shard.node[:8]}... {shard.address or shard.role}: {one.described}"
            for shard, one in each)
        yield plan


@contextlib.contextmanager
def _current(args: argparse.Namespace) -> Iterator[_Plan]:
    from streamkeep.tools.export import state

    near = args.out if args.work_dir is None else os.path.join(args.work_dir, "export")
    try:
        with state.current(args.path, near) as now:
            plan = _Plan(now.pin.path, lsn=now.lsn, snapshot_lsn=_lsn(now.pin.path),
                         built_seconds=now.seconds)
            if now.seconds is None:
                plan.described = (f"{args.path} as of LSN {now.lsn:,}: its snapshot (no record "
                                  "after it)")
            else:
                plan.described = (f"{args.path} as of LSN {now.lsn:,}: its snapshot (LSN "
                                  f"{now.base_lsn:,}) and the {now.records:,} record(s) after "
                                  f"it, copied and written as one snapshot in "
                                  f"{now.seconds:.2f} s")
            plan.positions = _positions(LogPin(now.pin.path, plan.lsn, ()), plan.lsn)
            yield plan
    except state.Unreadable as err:
        raise _Failed(str(err), EXIT_SNAPSHOT) from None
    except ExportError as err:
        raise _Failed(str(err), EXIT_USAGE) from None


@contextlib.contextmanager
def _snapshot(args: argparse.Namespace, names: dict[str, str]) -> Iterator[_Plan]:
    """A snapshot as it is: a snapshot file, or (--snapshot-only) a data directory's last
    snapshot, with how far behind the directory's log it is."""
    from streamkeep.tools.export import state

    try:
        source = resolve(args.path)
        held = pin(args.path)
    except ExportError as err:
        hint = " (without --snapshot-only the export reads its current state)" \
            if args.snapshot_only and os.path.isdir(args.path) else ""
        raise _Failed(f"{err}{hint}", EXIT_USAGE) from None
    names[held.path] = source
    with held:
        try:
            state.checked(held.path, source)
        except state.Unreadable as err:
            raise _Failed(str(err), EXIT_SNAPSHOT) from None
        plan = _Plan(held.path, state="snapshot-file")
        plan.lsn = plan.snapshot_lsn = _lsn(held.path)
        plan.described = f"{args.path} (a snapshot) as of LSN {plan.lsn:,}"
        if os.path.isdir(args.path):
            try:
                lag = state.lag(args.path, plan.lsn, _created_ms(held.path))
            except ExportError as err:
                raise _Failed(str(err), EXIT_SNAPSHOT) from None
            plan.state, plan.behind = "snapshot", lag.to_json()
            plan.described = f"{args.path}'s snapshot, as of LSN {plan.lsn:,}: " + (
                f"{lag.records:,} record(s) behind the directory (its log ends at LSN "
                f"{lag.log_lsn:,}, written up to {_duration(lag.seconds)} after the snapshot; "
                "export without --snapshot-only to include them)" if lag.records else
                "the directory's current state (no record after it)")
        plan.positions = _positions(LogPin(held.path, plan.lsn, ()), plan.lsn)
        yield plan


@contextlib.contextmanager
def _pinned_log(args: argparse.Namespace, previous: str | None,
                names: dict[str, str]) -> Iterator[_Plan]:
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
        plan = _incremental(args, log, previous)
        plan.state = "incremental"
        plan.described = (f"{args.path}: the entries added after LSN {plan.since_lsn:,}, as of "
                          f"LSN {plan.lsn:,}" + (
                              f" (those up to LSN {plan.snapshot_lsn:,} from the snapshot, "
                              "above the previous export's positions)" if plan.gap else ""))
        yield plan
    finally:
        log.release()
        release_pins(args.path, token)  # none expected: the read used `log`


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours < 48 else f"{hours // 24} days"


def _incremental(args: argparse.Namespace, log: LogPin, previous: str | None) -> _Plan:
    from streamkeep.tools.export import since as since_mod

    since = args.since_lsn
    if previous is not None:
        try:
            with open(previous) as f:
                doc = json.load(f)
            if isinstance(doc, dict) and doc.get("shards"):
                raise _Failed(f"{previous}: a cluster's export (one LSN per shard): --since "
                              "takes a single directory's export", EXIT_USAGE)
            since = int(doc["lsn"])
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
        plan.options["sinceManifest"] = os.path.abspath(previous)  # (read by Spark's tasks)
    plan.positions = _positions(log, win.until)
    return plan


def _positions(log: LogPin, lsn: int) -> list[dict]:
    from streamkeep.tools.export import since as since_mod

    try:
        return since_mod.positions_to_json(since_mod.positions_at(log, lsn))
    except ExportError as err:
        raise _Failed(str(err), EXIT_SNAPSHOT) from None


def _meta(path: str) -> Any:
    try:
        with Snapshot(path) as snap:
            return snap.meta
    except SnapshotError as err:
        raise _Failed(str(err), EXIT_SNAPSHOT) from None


def _lsn(path: str) -> int:
    return int(_meta(path).lsn)


def _created_ms(path: str) -> int:
    return int(_meta(path).created_ms)


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
    from streamkeep.tools.progress import Ticker

    try:
        # the JVM's start takes tens of seconds: said while it runs
        with Ticker("streamkeep export", f"starting Spark ({master})"):
            return session.start(master), True
    except Exception as err:  # noqa: BLE001 (py4j/JVM start-up: no Java, a bad master)
        raise _Failed(f"cannot start Spark ({type(err).__name__}: {err})", EXIT_USAGE) from None


def _write(spark: Any, plan: _Plan, table: str, args: argparse.Namespace,
           stage: str) -> dict[str, Any]:
    """One table written into `stage` (OUT's temporary name): its rows and seconds."""
    from pyspark.sql.functions import col

    from streamkeep.tools.export.session import PARQUET_OPTIONS, default_partitions
    from streamkeep.tools.progress import Bar

    started = time.monotonic()
    # push-down only where the session allows it (a caller's session may not)
    pushdown = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false").lower()
    reader = spark.read.format("streamkeep").option("table", table).option("pushdown", pushdown)
    # default: from the cluster's parallelism (the data source alone cannot ask the cluster)
    parts = args.num_partitions or default_partitions(spark)
    reader = reader.option("numPartitions", str(parts))
    for name, value in plan.options.items():
        reader = reader.option(name, value)
    df = reader.load(plan.load) if plan.load else reader.load()
    if args.streams:  # a regex Spark applies; not pushed down (stream_str = ... would be)
        name = "stream_str" if "stream_str" in df.columns else "key_str"
        df = df.where(col(name).rlike(fnmatch.translate(args.streams)))
    df, partition = _shaped(df, args)
    target = os.path.join(stage, table)
    writer = df.write.mode("errorifexists").format(args.format)
    if args.format == "csv":  # RFC 4180 quoting (a quote doubled), as most readers expect
        writer = writer.options(**CSV_OPTIONS)
    elif args.format == "parquet":
        writer = writer.options(**PARQUET_OPTIONS)
    if partition:
        writer = writer.partitionBy(partition)
    try:
        with Bar("streamkeep export", f"writing {table}", quiet=args.json,
                 poll=_spark_tasks(spark, table)):
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
        print(f"{table:<10} {rows:>12,} rows  {seconds:8.2f} s  -> "
              f"{os.path.join(args.out, table)}")
    return {"rows": rows, "seconds": seconds}


def _spark_tasks(spark: Any, table: str) -> Any:
    """A progress Bar's poll while `table` is written: the running stages' Spark tasks, done
    of all, from Spark's status tracker."""
    tracker = spark.sparkContext.statusTracker()

    def poll(bar: Any) -> None:
        total = done = 0
        for stage in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage)
            if info is not None:
                total += info.numTasks
                done += info.numCompletedTasks
        if total:
            bar.update(f"{table} tasks", completed=done, total=total,
                       detail=f"{done}/{total} tasks")

    return poll


def _shaped(df: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """The table as the output format holds it, and the column to partition by."""
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own idiom)
    from pyspark.sql.types import ArrayType, BinaryType, MapType

    partition = None
    if args.partition_by == "stream" and "stream_str" in df.columns:
        partition = "stream_str"
    elif args.partition_by == "node" and "node" in df.columns:
        partition = "node"
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
              startup: float | None, previous: str | None, stage: str) -> dict[str, Any]:
    if plan.shards is not None:  # a cluster's: what each shard's own export would record
        doc = {"format": "streamkeep-export", "version": 2, "source": None,
               "cluster": args.cluster, "lsn": None, "snapshot_lsn": None, "state": plan.state,
               "shards": [{**shard.to_json(), "lsn": one.lsn, "snapshot_lsn": one.snapshot_lsn,
                           "state": one.state, "state_seconds": one.built_seconds,
                           "behind": one.behind, "positions": one.positions}
                          for shard, one in plan.shards],
               "created_ms": int(time.time() * 1000), "output_format": args.format,
               "partition_by": args.partition_by, "streams": args.streams,
               "spark_startup_seconds": startup, "tables": counts, "positions": None}
        return _written(doc, stage)
    doc = {"format": "streamkeep-export", "version": 2, "source": os.path.abspath(args.path),
           "lsn": plan.lsn, "snapshot_lsn": plan.snapshot_lsn,
           # what was read: current (the snapshot and every record after it), snapshot
           # (--snapshot-only: DIR's last snapshot; `behind` says by how much), snapshot-file,
           # incremental
           "state": plan.state, "state_seconds": plan.built_seconds, "behind": plan.behind,
           "incremental": None if plan.since_lsn is None else {
               "since_lsn": plan.since_lsn, "previous": previous,
               # records compacted meanwhile: entries added and removed between are not here
               "from_snapshot": plan.gap},
           "created_ms": int(time.time() * 1000), "output_format": args.format,
           "partition_by": args.partition_by, "streams": args.streams,
           "spark_startup_seconds": startup, "tables": counts, "positions": plan.positions,
           "shards": None}
    return _written(doc, stage)


def _written(doc: dict[str, Any], stage: str) -> dict[str, Any]:
    with open(os.path.join(stage, MANIFEST), "w") as out:
        json.dump(doc, out, indent=2)
        out.write("\n")
    return doc
