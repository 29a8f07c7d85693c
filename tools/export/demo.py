"""`make export-demo`: a data directory exported to Parquet by Spark, whole and then incrementally.

    python -m streamkeep.tools.export.demo [--dir ./export-demo] [--master local[2]]

Owns the demo script only: a fresh data directory (DIR/data) with a few streams of orders, a
consumer group with pending entries and an idle consumer, compacted; `streamkeep export` of
every table to DIR/full; more orders; `streamkeep export --since DIR/full` to DIR/day2; then a
few rows of each read back from the Parquet files (pyarrow, no Spark) and printed. DIR is
replaced only if it is the demo's own (nothing in it but data, full and day2) and not inside a
data directory. Must not touch: engine internals, the export's code (it runs the command as a
user would).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from streamkeep import Engine

DEMO_NAMES = ("data", "full", "day2")  # what the demo makes in DIR
ITEMS = ("kettle", "teapot", "mug", "whisk", "ladle")


def populate(engine: Engine, start: int, count: int) -> None:
    for i in range(start, start + count):
        region = ("eu", "us", "apac")[i % 3]
        engine.execute("XADD", f"orders:{region}", "*", "item", ITEMS[i % len(ITEMS)],
                       "qty", str(1 + i % 4), "note", "gift" if i % 7 == 0 else "")


def build(path: str) -> None:
    with Engine.open(path) as engine:
        populate(engine, 0, 60)
        engine.execute("XADD", "audit", "*", "who", "ops", "what", b"\xffbinary\x00")
        engine.execute("XGROUP", "CREATE", "orders:eu", "shipping", "0")
        engine.execute("XREADGROUP", "GROUP", "shipping", "alice", "COUNT", "6", "STREAMS",
                       "orders:eu", ">")
        engine.execute("XGROUP", "CREATECONSUMER", "orders:eu", "shipping", "bob")
        engine.execute("XACK", "orders:eu", "shipping",
                       engine.execute("XRANGE", "orders:eu", "-", "+", "COUNT", "1")[0][0])
        engine.compact(wait=True)


def show(title: str, path: str, columns: list[str], limit: int = 4) -> None:
    import pyarrow.parquet as pq
    from rich.console import Console
    from rich.table import Table

    table = pq.read_table(path, columns=columns)
    view = Table(title=f"{title}: {table.num_rows} rows (first {min(limit, table.num_rows)})")
    for name in columns:
        view.add_column(name)
    for row in table.slice(0, limit).to_pylist():
        view.add_row(*(_cell(row[name]) for name in columns))
    Console().print(view)


def _cell(value: object) -> str:
    if isinstance(value, bytes):
        return repr(value)[2:-1]
    if isinstance(value, list):  # pairs
        return " ".join(f"{_cell(p['field'])}={_cell(p['value'])}" for p in value)
    return str(value)


def main(argv: list[str] | None = None) -> int:
    from streamkeep.tools.main import main as cli

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="./export-demo")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from streamkeep.tools.safe_output import data_directory_of

    home = data_directory_of(args.dir)
    # (dot names: an interrupted export's temporaries beside its OUT, the demo's own too)
    leftovers = {n for n in os.listdir(args.dir) if not n.startswith(".")} - set(DEMO_NAMES) \
        if os.path.isdir(args.dir) else set()
    if home is not None or leftovers or (os.path.exists(args.dir) and
                                         not os.path.isdir(args.dir)):
        why = f"inside the data directory {home}" if home else "not a previous demo's"
        print(f"export demo: {args.dir} is {why}: not replacing it (give another --dir)",
              file=sys.stderr)
        return 3
    shutil.rmtree(args.dir, ignore_errors=True)  # a previous demo's: made again
    data, full, day2 = (os.path.join(args.dir, n) for n in DEMO_NAMES)
    print(f"building {data}: orders:eu/us/apac, audit, group 'shipping' (compacted)")
    build(data)
    status = cli(["export", data, "--out", full, "--master", args.master])
    if status:
        return status
    with Engine.open(data) as engine:
        populate(engine, 60, 9)
    print(f"\n9 more orders; incremental export since {full}:")
    status = cli(["export", data, "--out", day2, "--since", full, "--master", args.master])
    if status:
        return status
    print()
    show(f"{full}/entries", os.path.join(full, "entries"),
         ["stream_str", "id", "pairs", "snapshot_lsn"])
    show(f"{full}/pending", os.path.join(full, "pending"),
         ["stream_str", "group_str", "id", "consumer", "delivery_count"])
    show(f"{day2}/entries (incremental)", os.path.join(day2, "entries"),
         ["stream_str", "id", "pairs", "snapshot_lsn"])
    with open(os.path.join(day2, "export-manifest.json")) as f:
        doc = json.load(f)
    print(f"{day2}/export-manifest.json: as of LSN {doc['lsn']}, since LSN "
          f"{doc['incremental']['since_lsn']}, {doc['tables']['entries']['rows']} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
