"""`streamkeep import SOURCE --out DIR`: a Redis dump.rdb's streams into a new data directory.

Owns the command's arguments, the report and the exit status. Every stream key comes in as it
is (entries, IDs, metadata, groups, PELs, consumers), through RESTORE with a DUMP payload made
from the value's stored bytes, so the AOF logs it and the engine checks it as a RESTORE would;
then the directory is compacted into a snapshot. Keys of other types are skipped and counted
by type, never silently; databases are kept. Redis's AOF files are not read yet (issue 20).
Must not touch: the RDB format (snapshot.rdb owns it), the engine's storage.

Exit status: 0 imported; 2 SOURCE is not a readable RDB file (damaged, unknown version or
type); 3 usage or I/O error (DIR exists and is not empty, SOURCE cannot be read).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from typing import Any

HELP = "import the streams of a Redis dump.rdb into a new data directory"
EXIT_BAD_SOURCE, EXIT_USAGE = 2, 3
EPILOG = """examples:
  streamkeep import /var/lib/redis/dump.rdb --out ./data
  streamkeep import dump.rdb --out ./data --json        the report for scripts

Stream keys are imported exactly; keys of other types are skipped and reported by type.
Redis expiries are not kept (streamkeep keys do not expire): keys already expired are
skipped, the others imported without their expiry, both counted in the report.

exit status: 0 imported; 2 not a readable RDB file; 3 usage or I/O error."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE", help="a Redis RDB file (versions 9 to 13)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the data directory to create (must not exist, or be empty)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main(args: argparse.Namespace) -> int:
    from streamkeep.snapshot.rdb import RdbError, read_rdb

    if os.path.exists(args.out) and (not os.path.isdir(args.out) or os.listdir(args.out)):
        print(f"streamkeep import: {args.out} exists and is not an empty directory",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        with open(args.source, "rb") as f:
            data = f.read()
    except OSError as err:
        print(f"streamkeep import: {args.source}: {err.strerror}", file=sys.stderr)
        return EXIT_USAGE
    began = time.perf_counter()
    try:
        version, _aux, keys = read_rdb(data)
    except RdbError as err:
        print(f"streamkeep import: {args.source}: {err}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    report = _import(args.out, version, keys)
    report["source"], report["rdb_version"] = args.source, version
    report["seconds"] = round(time.perf_counter() - began, 3)
    _print(report, args.json)
    return 0


def _import(out: str, version: int, keys: list) -> dict[str, Any]:
    from streamkeep import Engine
    from streamkeep.snapshot.rdb import STREAM_TYPES, TYPE_NAMES, payload_from

    skipped: Counter[str] = Counter()
    streams = entries = expired = expiry_dropped = 0
    now = int(time.time() * 1000)
    with Engine.open(out, auto_aof_rewrite_percentage=0) as engine:
        for item in keys:
            if item.rdb_type not in STREAM_TYPES:
                skipped[TYPE_NAMES.get(item.rdb_type, f"type {item.rdb_type}")] += 1
                continue
            if item.expire_ms is not None:
                if item.expire_ms <= now:
                    expired += 1
                    continue
                expiry_dropped += 1
            engine.execute("SELECT", str(item.db))
            engine.execute("RESTORE", item.key, "0",
                           payload_from(item.rdb_type, item.value, version), "REPLACE")
            streams += 1
            entries += engine.execute("XLEN", item.key)
        engine.compact()
    return {"out": out, "streams": streams, "entries": entries, "skipped": dict(skipped),
            "expired_skipped": expired, "expiry_dropped": expiry_dropped}


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    print(f"imported {report['streams']:,} stream(s), {report['entries']:,} entries from "
          f"{report['source']} (RDB {report['rdb_version']}) into {report['out']} in "
          f"{report['seconds']:.2f} s")
    for name, count in sorted(report["skipped"].items()):
        print(f"skipped {count:,} {name} key(s): streamkeep stores streams only")
    if report["expired_skipped"]:
        print(f"skipped {report['expired_skipped']:,} stream(s) already expired")
    if report["expiry_dropped"]:
        print(f"imported {report['expiry_dropped']:,} stream(s) without their expiry")
