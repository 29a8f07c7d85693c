"""`streamkeep aof stats PATH`: what an AOF holds, counted by command, key, database and time.

Owns the statistics (one pass over the records, batch by batch: memory grows with the number
of distinct keys, commands, time buckets and record sizes, not with the number of records) and
their renderings: rich tables for people, `--json` for machines, and `--html FILE`, the same
document drawn as charts (tools.report.aof; with a timeline by command whose buckets widen to
keep it at most TIMELINE_BUCKETS long, and each segment's span of record times). Must not touch: the files
read, the record format (aof.codec, aof.segment_reader).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streamkeep.tools.inspect.aof_records import (
    EXIT_DAMAGED,
    EXIT_OK,
    EXIT_USAGE,
    InspectError,
    fail,
)

PROG = "streamkeep aof stats"
BUCKETS = {"1m": 60_000, "1h": 3_600_000, "1d": 86_400_000}
PERCENTILES = (50, 90, 99, 99.9, 100)
# The timeline by command (the --html charts): buckets of the first of these widths (ms; each
# a multiple of the one before, then weeks doubling) that fits the AOF's time span in at most
# TIMELINE_BUCKETS of them; widened as the span grows (memory bounded whatever the span).
TIMELINE_BUCKETS = 240
TIMELINE_WIDTHS = (1, 2, 10, 20, 100, 200, 1000, 2000, 10_000, 20_000, 60_000, 120_000,
                   600_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
                   604_800_000)

EPILOG = """\
what is counted:
  records and effects per command (XGROUP subcommands apart, streamkeep-only
  SK.* marked), the effects' bytes per command (their msgpack size), per key
  (top N by effects), per database (the database each effect applies in:
  SELECT inside a transaction counts), per time bucket, the record size
  distribution (framed size: 8-byte header + payload; percentiles and a
  power-of-two histogram) and per segment: size, records, LSN range and where
  its good records end. Fsync policy and times are not recorded in segments.

--html FILE: the same as one self-contained HTML page of charts: records and
  bytes over time by command, the log's growth with its segments and snapshot
  on the same time axis, effects per record and per command (needs
  matplotlib: streamkeep[report]).

examples:
  streamkeep aof stats ./data
  streamkeep aof stats ./data --html aof.html
  streamkeep aof stats --top 20 --bucket 1m data/segment-000005.aof
  streamkeep aof stats --json ./data | jq '.commands.XADD.effects'

exit status:
  0    every record was read
  2    damaged input: the statistics cover the records before the first bad
       one, and stderr says where it is (file and byte offset)
  3    usage or I/O error (missing or unreadable path, not a data directory;
       --html FILE exists without --force, is inside a data directory, or
       matplotlib is missing)
  130  interrupted (Ctrl-C)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Count an AOF's records and effects (a data directory's segments in\n"
                          "order, or one segment file) by command, key, database and time.")
    parser.epilog = EPILOG
    parser.add_argument("path", metavar="PATH", help="a data directory or a segment file")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="how many keys to list, by effects (default: 10)")
    parser.add_argument("--bucket", choices=tuple(BUCKETS), default="1h",
                        help="time bucket width (default: 1h)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--html", metavar="FILE", help="also write the statistics as one "
                        "self-contained HTML page of charts (a new file, outside any data "
                        "directory)")
    parser.add_argument("--force", action="store_true",
                        help="replace the --html FILE if it exists")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (shown on stderr when it is a terminal)")


def _effect_size(effect: Any) -> int:
    """The effect's msgpack size: array header, then each bin's header and bytes."""
    n = len(effect)
    size = 1 if n < 16 else 3 if n < 1 << 16 else 5
    for arg in effect:
        k = len(arg)
        size += k + (2 if k < 256 else 3 if k < 1 << 16 else 5)
    return size


class Stats:
    """The counters, filled batch by batch."""

    def __init__(self, bucket_ms: int) -> None:
        self.bucket_ms = bucket_ms
        self.records = 0
        self.effects = 0
        self.bytes = 0
        self.first: tuple[int, int] | None = None  # (lsn, time_ms)
        self.last: tuple[int, int] | None = None
        self.min_time: int | None = None
        self.max_time: int | None = None
        self.multi_effect_records = 0
        # command -> [effects, records, bytes]
        self.commands: dict[str, list[int]] = {}
        self.keys: dict[tuple[int, bytes], list[int]] = {}  # (db, key) -> [effects, bytes]
        self.dbs: dict[int, list[int]] = {}  # db -> [records, effects]
        self.buckets: dict[int, list[int]] = {}  # bucket start -> [records, effects, bytes]
        self.sizes: dict[int, int] = {}  # framed record size -> records
        self.per_record: dict[int, int] = {}  # effects in a record -> records
        # timeline: bucket start -> leading command -> [records, framed bytes]
        self.width_ms = TIMELINE_WIDTHS[0]
        self.timeline: dict[int, dict[str, list[int]]] = {}
        self.segment_times: dict[int, list[int]] = {}  # segment index -> [first, last] time

    def add(self, batch: list[tuple], sizes: list[int], segment: int = 0) -> None:
        from streamkeep.tools.inspect.aof_records import command_name, effect_keys, selected_db

        commands, keys, dbs, buckets, size_counts = (
            self.commands, self.keys, self.dbs, self.buckets, self.sizes)
        bucket_ms = self.bucket_ms
        for (lsn, time_ms, db, effects), size in zip(batch, sizes, strict=True):
            if self.first is None:
                self.first = (lsn, time_ms)
            self.last = (lsn, time_ms)
            if self.min_time is None or time_ms < self.min_time:
                self.min_time = time_ms
            if self.max_time is None or time_ms > self.max_time:
                self.max_time = time_ms
            self.records += 1
            self.effects += len(effects)
            self.bytes += size
            if len(effects) > 1:
                self.multi_effect_records += 1
            self.per_record[len(effects)] = self.per_record.get(len(effects), 0) + 1
            span = self.segment_times.setdefault(segment, [time_ms, time_ms])
            span[0], span[1] = min(span[0], time_ms), max(span[1], time_ms)
            size_counts[size] = size_counts.get(size, 0) + 1
            bucket = buckets.setdefault(time_ms - time_ms % bucket_ms, [0, 0, 0])
            bucket[0] += 1
            bucket[1] += len(effects)
            bucket[2] += size
            rec_dbs = {db}
            seen: set[str] = set()
            edb = db
            lead: str | None = None  # the record's command: its first effect's (not SELECT)
            for effect in effects:
                name = command_name(effect)
                if lead is None and name != "SELECT":
                    lead = name
                esize = _effect_size(effect)
                row = commands.setdefault(name, [0, 0, 0])
                row[0] += 1
                row[2] += esize
                if name not in seen:
                    seen.add(name)
                    row[1] += 1
                if name == "SELECT":
                    edb = selected_db(effect, edb)
                    continue
                rec_dbs.add(edb)
                dbs.setdefault(edb, [0, 0])[1] += 1
                for key in effect_keys(effect):
                    krow = keys.setdefault((edb, bytes(key)), [0, 0])
                    krow[0] += 1
                    krow[1] += esize
            for d in rec_dbs:
                dbs.setdefault(d, [0, 0])[0] += 1
            point = self.timeline.setdefault(time_ms - time_ms % self.width_ms, {}).setdefault(
                lead or "(none)", [0, 0])
            point[0] += 1
            point[1] += size
        self._fit_timeline()

    def _fit_timeline(self) -> None:
        """Wider buckets until the span fits in TIMELINE_BUCKETS of them."""
        if self.min_time is None or self.max_time is None:
            return
        while (self.max_time - self.min_time) // self.width_ms >= TIMELINE_BUCKETS:
            wider = [w for w in TIMELINE_WIDTHS if w > self.width_ms]
            self.width_ms = wider[0] if wider else 2 * self.width_ms
            merged: dict[int, dict[str, list[int]]] = {}
            for start, by_command in self.timeline.items():
                into = merged.setdefault(start - start % self.width_ms, {})
                for name, (records, size) in by_command.items():
                    row = into.setdefault(name, [0, 0])
                    row[0] += records
                    row[1] += size
            self.timeline = merged

    def percentiles(self) -> dict[str, int]:
        total = sum(self.sizes.values())
        out: dict[str, int] = {}
        if not total:
            return out
        ordered = sorted(self.sizes.items())
        for p in PERCENTILES:
            rank = max(1, -(-total * p // 100))  # the smallest size with >= p% at or below it
            seen = 0
            for size, count in ordered:
                seen += count
                if seen >= rank:
                    out[f"p{p:g}"] = size
                    break
        return out

    def histogram(self) -> list[dict[str, int]]:
        """Records per power-of-two size range: [lo, hi)."""
        bins: dict[int, int] = {}
        for size, count in self.sizes.items():
            bit = max(size - 1, 1).bit_length()
            bins[bit] = bins.get(bit, 0) + count
        return [{"min": 1 << (bit - 1), "max": (1 << bit) - 1, "records": bins[bit]}
                for bit in sorted(bins)]


def to_json(stats: Stats, source: Any, infos: list[Any], top: int, bucket: str,
            damage: str | None) -> dict[str, Any]:
    from streamkeep.engine import commands  # noqa: F401  (the table the vocabulary comes from)
    from streamkeep.engine.exec.table import effect_vocabulary
    from streamkeep.tools.inspect.aof_records import format_time
    from streamkeep.tools.inspect.dump import json_arg

    vocabulary = effect_vocabulary()
    top_keys = sorted(stats.keys.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    sizes = stats.sizes
    return {
        "path": source.path,
        "snapshot_lsn": source.snapshot_lsn,
        "records": stats.records,
        "effects": stats.effects,
        "bytes": stats.bytes,
        "multi_effect_records": stats.multi_effect_records,
        "first_lsn": stats.first[0] if stats.first else None,
        "last_lsn": stats.last[0] if stats.last else None,
        "first_time_ms": stats.min_time,
        "last_time_ms": stats.max_time,
        "first_time": None if stats.min_time is None else format_time(stats.min_time),
        "last_time": None if stats.max_time is None else format_time(stats.max_time),
        "commands": {
            name: {"effects": row[0], "records": row[1], "bytes": row[2],
                   "streamkeep_only": vocabulary[name].streamkeep_only
                   if name in vocabulary else None,
                   "known": name in vocabulary}
            for name, row in sorted(stats.commands.items(), key=lambda kv: -kv[1][0])},
        "keys": {"distinct": len(stats.keys),
                 "top": [{"db": db, "key": json_arg(key), "effects": row[0], "bytes": row[1]}
                         for (db, key), row in top_keys]},
        "databases": {str(db): {"records": row[0], "effects": row[1]}
                      for db, row in sorted(stats.dbs.items())},
        "time_buckets": {"width": bucket, "buckets": [
            {"start_ms": start, "start": format_time(start), "records": row[0],
             "effects": row[1], "bytes": row[2]}
            for start, row in sorted(stats.buckets.items())]},
        "record_sizes": {
            "min": min(sizes) if sizes else None,
            "max": max(sizes) if sizes else None,
            "mean": round(stats.bytes / stats.records, 1) if stats.records else None,
            "percentiles": stats.percentiles(),
            "histogram": stats.histogram()},
        "segments": [{"file": i.file, "segment": i.segment, "first_lsn": i.first_lsn,
                      "last_lsn": i.last_lsn, "records": i.records, "size": i.size,
                      "end": i.end, "damage": i.damage, "damage_kind": i.damage_kind,
                      "first_time_ms": stats.segment_times.get(n, [None, None])[0],
                      "last_time_ms": stats.segment_times.get(n, [None, None])[1]}
                     for n, i in enumerate(infos)],
        "snapshot_created_ms": source.snapshot_created_ms,
        "effects_per_record": {str(n): count for n, count in sorted(stats.per_record.items())},
        "timeline": {"width_ms": stats.width_ms, "buckets": [
            {"start_ms": start, "commands": {name: {"records": row[0], "bytes": row[1]}
                                             for name, row in sorted(by_command.items())}}
            for start, by_command in sorted(stats.timeline.items())]},
        "fsync": None,  # not recorded in segments
        "damage": damage,
        # what the damage is, as opening judges it (aof verify's problem kinds), or None
        "damage_kind": next((i.damage_kind for i in infos if i.damage), None),
    }


def _show_key(key: Any) -> str:
    """A key as the JSON has it, for a table: as is when printable, else redis-cli-quoted."""
    import base64

    from streamkeep.tools.inspect.dump import quote

    if isinstance(key, str):
        return key if key.isprintable() else quote(key.encode())
    return quote(base64.b64decode(key["b64"]))


def render(doc: dict[str, Any], stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from streamkeep.tools.text_width import print_table, width

    # The width to fit (COLUMNS, the terminal's, or 80 when piped): a table too wide for it
    # is printed a row per block, never with its cells cut.
    columns = width(stream)
    console = Console(file=stream, highlight=False, soft_wrap=False, width=columns)

    def table(title: str, *columns: str) -> Table:
        t = Table(title=title, title_justify="left", title_style="bold",
                  show_header=any(columns))
        for i, c in enumerate(columns):
            t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
        return t

    def n(v: Any) -> str:
        return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)

    summary = table(f"AOF {doc['path']}", "", "")
    for label, value in (("records", doc["records"]), ("effects", doc["effects"]),
                         ("bytes", doc["bytes"]),
                         ("records with several effects", doc["multi_effect_records"]),
                         ("LSNs", f"{n(doc['first_lsn'])} .. {n(doc['last_lsn'])}"),
                         ("time", f"{doc['first_time'] or '-'} .. {doc['last_time'] or '-'}"),
                         ("snapshot covers LSNs up to", doc["snapshot_lsn"]),
                         ("distinct keys", doc["keys"]["distinct"])):
        summary.add_row(label, n(value))
    print_table(console, summary, columns)

    cmds = table("Commands", "command", "effects", "records", "bytes", "")
    for name, row in doc["commands"].items():
        mark = "streamkeep-only" if row["streamkeep_only"] else "" if row["known"] else "UNKNOWN"
        cmds.add_row(name, n(row["effects"]), n(row["records"]), n(row["bytes"]), mark)
    print_table(console, cmds, columns)

    keys = table(f"Top {len(doc['keys']['top'])} keys by effects", "key", "db", "effects",
                 "bytes")
    for row in doc["keys"]["top"]:
        keys.add_row(_show_key(row["key"]), str(row["db"]), n(row["effects"]), n(row["bytes"]))
    print_table(console, keys, columns)

    dbs = table("Databases", "db", "records", "effects")
    for db, row in doc["databases"].items():
        dbs.add_row(db, n(row["records"]), n(row["effects"]))
    print_table(console, dbs, columns)

    times = table(f"Per {doc['time_buckets']['width']}", "from (UTC)", "records", "effects",
                  "bytes")
    for row in doc["time_buckets"]["buckets"]:
        times.add_row(row["start"], n(row["records"]), n(row["effects"]), n(row["bytes"]))
    print_table(console, times, columns)

    rs = doc["record_sizes"]
    sizes = table("Record sizes (bytes, framed)", "", "")
    for label in ("min", "mean", "max"):
        sizes.add_row(label, n(rs[label]))
    for label, value in rs["percentiles"].items():
        sizes.add_row(label, n(value))
    print_table(console, sizes, columns)
    hist = table("Record size histogram", "size", "records", "")
    peak = max((h["records"] for h in rs["histogram"]), default=1)
    for h in rs["histogram"]:
        hist.add_row(f"{h['min']:,}..{h['max']:,}", n(h["records"]),
                     "#" * max(1, round(30 * h["records"] / peak)))
    print_table(console, hist, columns)

    segs = table("Segments (fsync policy and times are not recorded in segments)", "file",
                 "segment", "LSNs", "records", "size", "good up to", "damage")
    for s in doc["segments"]:
        segs.add_row(s["file"], n(s["segment"]), f"{n(s['first_lsn'])} .. {n(s['last_lsn'])}",
                     n(s["records"]), n(s["size"]), n(s["end"]), s["damage"] or "")
    print_table(console, segs, columns)


def _html_refused(args: argparse.Namespace) -> str | None:
    """Why --html FILE cannot be written (or drawn), said before the AOF is read; or None."""
    if not getattr(args, "html", None):
        return None
    from streamkeep.tools.report.charts import ReportUnavailable, require
    from streamkeep.tools.safe_output import OutputRefused, check_output

    try:
        require()
        check_output(args.html, directory=False, force=args.force, sources=[args.path])
    except (ReportUnavailable, OutputRefused) as err:
        return f"--html: {err}"
    return None


def main(args: argparse.Namespace) -> int:
    import json

    from streamkeep.tools.inspect.aof_records import (
        ByteProgress,
        SegmentInfo,
        iter_batches,
        open_source,
    )

    if args.top < 0:
        print(f"{PROG}: --top must be >= 0", file=sys.stderr)
        return EXIT_USAGE
    problem = _html_refused(args)
    if problem is not None:
        print(f"{PROG}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        source = open_source(args.path)
    except InspectError as err:
        return fail(err, PROG)
    stats = Stats(BUCKETS[args.bucket])
    infos: list[SegmentInfo] = []
    sizes: list[int] = []
    try:
        with ByteProgress(source, "stats", not args.quiet) as progress:
            for batch in iter_batches(source, infos, sizes=sizes, progress=progress):
                stats.add(batch, sizes, len(infos) - 1)
    except InspectError as err:
        return fail(err, PROG)
    damaged = next((i for i in infos if i.damage), None)
    damage = damaged.damage if damaged is not None else None
    doc = to_json(stats, source, infos, args.top, args.bucket, damage)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        render(doc, sys.stdout)
    sys.stdout.flush()
    if getattr(args, "html", None):
        from streamkeep.tools.report import aof as aof_report
        from streamkeep.tools.safe_output import OutputRefused

        try:
            aof_report.write(args.html, doc, args.force)
        except OutputRefused as err:  # made meanwhile
            print(f"{PROG}: {err}", file=sys.stderr)
            return EXIT_USAGE
    if damage is not None:
        print(f"{PROG}: {damage}; the statistics cover the records before it", file=sys.stderr)
        return EXIT_DAMAGED
    return EXIT_OK
