"""`streamkeep snapshot info|dump`: what a snapshot holds, read through the snapshot read API.

Owns the two commands' arguments and output: `info` prints the meta (LSN, creation time,
replication id, format), then every stream (length, first/last/max-deleted IDs, entries added,
nodes, expiry time), its groups (last delivered ID, entries read, PEL size) and consumers (seen
and active times, pending counts), and how many keys of each type (engine.model.value_types)
and keys with a TTL it holds; `dump` prints entries by stream and ID range, then every key of
another type with its value (rendered from its type's rows, tools.value_tables: a string's
bytes, a sorted set's members and scores, a list's elements, ...) and expiry time, as text
(redis-cli style quoting, binary-safe) or JSON lines. PATH is a snapshot file or a data
directory (its manifest's current snapshot). The whole file is checked against the checksum its
manifest recorded before it is read, and every value as it is read: damage is exit 2 with one
line naming the file, table and key. Never writes, never takes the directory's lock; a snapshot
a running server's compaction replaces stays readable while open. Must not touch: the snapshot
format (the read API owns it), the engine.

Exit status: 0 ok; 2 not a readable snapshot (damaged, truncated, another format); 3 usage or
I/O error (no such file, a directory without a snapshot).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

from streamkeep.tools.inspect.aof_records import EXIT_IO, InspectError, fail, format_time
from streamkeep.tools.inspect.dump import json_arg, quote
from streamkeep.tools.value_tables import BY_TYPE, Column, elements, type_counts

EPILOG_INFO = """examples:
  streamkeep snapshot info ./data            a data directory's current snapshot
  streamkeep snapshot info ./data/snapshot-000000001234.mdb --json

exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error; 130 interrupted."""

EPILOG_DUMP = """examples:
  streamkeep snapshot dump ./data            every entry of every stream
  streamkeep snapshot dump ./data --key orders --start 1700000000000 --count 10
  streamkeep snapshot dump ./data --db 1 --format json | jq .fields

JSON lines: {"db", "key", "id", "fields": [[field, value], ...]} per entry, then
{"db", "key", "value", "expires_ms"} per string key (expires_ms null: no TTL) and
{"db", "key", "type", "value", "expires_ms"} per key of another type, its value a list of
its elements: a sorted set's [member, score] pairs (the score as Redis prints it), a hash's
[field, value, field_expire_ms], a set's members, a list's elements head first; a string that
is not UTF-8 is {"b64": "<base64>"}. Text: one line per entry (db, key, ID, fields), then one
per key of another type (db, key, its type, its elements: a string's value, a sorted set's
members and scores, a hash's fields and values (field_expire_ms=<ms> after a field with a
TTL), a set's members, a list's elements head first; and "PXAT <ms>" when the key has a TTL),
redis-cli quoting.
--start, --end and --count select entries; the other keys are dumped unless --streams-only.

exit status: 0 ok; 2 not a readable snapshot; 3 usage or I/O error; 130 interrupted."""


def add_arguments_info(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG_INFO
    parser.add_argument("path", help="a snapshot file or a data directory")
    parser.add_argument("--json", action="store_true", help="one JSON document")


def add_arguments_dump(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG_DUMP
    parser.add_argument("path", help="a snapshot file or a data directory")
    parser.add_argument("--key", help="only this key (exact name)")
    parser.add_argument("--db", type=int, help="only this database")
    parser.add_argument("--start", default="0", help="first ID (ms or ms-seq; default 0)")
    parser.add_argument("--end", default=None, help="last ID (ms or ms-seq; default the end)")
    parser.add_argument("--count", type=int, help="at most this many entries per stream")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--streams-only", action="store_true",
                        help="no keys of other types (strings, sorted sets, ...)")


add_arguments = add_arguments_info


def _snapshot_path(path: str) -> str:
    from streamkeep.aof.manifest import ManifestError
    from streamkeep.snapshot.reader import current_snapshot

    if not os.path.exists(path):
        raise InspectError(f"{path}: no such file or directory", EXIT_IO)
    if not os.path.isdir(path):
        return path
    try:
        found = current_snapshot(path)
    except ManifestError as err:
        raise InspectError(str(err), EXIT_IO) from None
    if found is None:
        raise InspectError(f"{path}: the manifest names no snapshot yet (nothing compacted)",
                           EXIT_IO)
    return found


def _run(args: argparse.Namespace, body: Any, prog: str) -> int:
    from streamkeep.snapshot.integrity import open_checked
    from streamkeep.snapshot.reader import SnapshotError

    try:
        path = _snapshot_path(args.path)
        with open_checked(path) as snap:
            body(snap, args, sys.stdout)
    except InspectError as err:
        return fail(err, prog)
    except SnapshotError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `| head` (before OSError, which it is)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (Python's flush at exit: nowhere, quietly)
        return 0
    except OSError as err:  # lmdb's errors name the file; ours too
        print(f"{prog}: {args.path}: {err}", file=sys.stderr)
        return 3
    return 0


def main_info(args: argparse.Namespace) -> int:
    return _run(args, _info, "streamkeep snapshot info")


def main_dump(args: argparse.Namespace) -> int:
    return _run(args, _dump, "streamkeep snapshot dump")


main = main_info


def _time(ms: int) -> str:
    return format_time(ms) if ms > 0 else "-"


# --- info --------------------------------------------------------------------------------------


def _info_doc(snap: Any) -> dict[str, Any]:
    meta = snap.meta
    key_rows = snap.key_rows()
    stream_ttls = {(row.db, row.key): row.expires_ms for row in key_rows if row.value is None}
    streams = []
    for info in snap.streams():
        groups = []
        for group in snap.groups(info.db, info.key):
            owned: dict[bytes, int] = {}
            released = 0
            for entry in snap.pending(info.db, info.key, group.name):
                if entry.consumer is None:
                    released += 1
                else:
                    owned[entry.consumer] = owned.get(entry.consumer, 0) + 1
            consumers = [{"name": json_arg(c.name), "seen_ms": c.seen_time,
                          "active_ms": c.active_time, "pending": owned.get(c.name, 0)}
                         for c in snap.consumers(info.db, info.key, group.name)]
            groups.append({"name": json_arg(group.name), "last_delivered_id": str(group.last_id),
                           "entries_read": group.entries_read, "pending": group.pending,
                           "pending_unowned": released, "consumers": consumers})
        streams.append({
            "db": info.db, "key": json_arg(info.key), "length": info.length,
            "first_id": str(info.first_id), "last_id": str(info.last_id),
            "max_deleted_id": str(info.max_deleted_id), "entries_added": info.entries_added,
            "nodes": info.nodes, "expires_ms": stream_ttls.get((info.db, info.key)),
            "idempotent_producers":
                None if info.idmp is None else len(info.idmp.producers),
            "groups": groups})
    return {"path": snap.path, "format": meta.format, "version": meta.version, "lsn": meta.lsn,
            "created_ms": meta.created_ms, "created": _time(meta.created_ms),
            "repl_id": meta.repl_id, "streams": meta.streams, "entries": meta.entries,
            "size": os.path.getsize(snap.path),
            "parts": [{"file": part.file, "size": os.path.getsize(reader.path),
                       "nodes": part.nodes}
                      for part, reader in zip(snap.part_infos, snap.parts, strict=True)],
            "strings": sum(row.type == "string" for row in key_rows),
            "keys_by_type": type_counts(len(streams), (row.type for row in key_rows)),
            "keys_with_ttl": sum(row.expires_ms is not None for row in key_rows),
            "stream_list": streams}


def _parts_text(parts: list[dict]) -> str:
    """What a segmented snapshot's part files add to the header line."""
    if not parts:
        return ""
    names = ", ".join(f"{p['file']} ({p['size']:,} bytes)" for p in parts)
    return f" and {len(parts)} part files of its stream nodes and big values: {names}"


def _info(snap: Any, args: argparse.Namespace, out: IO[str]) -> None:
    doc = _info_doc(snap)
    if args.json:
        out.write(json.dumps(doc, indent=1) + "\n")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from streamkeep.tools.text_width import print_table, width, wrap

    # The width to fit (COLUMNS, the terminal's, or 80 when piped): a table too wide for it
    # is printed a row per block, never with its IDs cut. Piped: no colours.
    tty = out.isatty()
    columns = width(out)
    console = Console(file=out, highlight=False, soft_wrap=True, width=columns,
                      no_color=not tty)
    console.print(Text(wrap(
        f"snapshot {doc['path']}: {doc['format']} v{doc['version']}, LSN {doc['lsn']}, created "
        f"{doc['created']}, {doc['size']:,} bytes{_parts_text(doc['parts'])}, replid "
        f"{doc['repl_id']}; "
        f"{doc['streams']:,} streams, {doc['entries']:,} entries, {doc['strings']:,} string "
        f"keys{_other_types(doc['keys_by_type'])}, {doc['keys_with_ttl']:,} keys with a TTL",
        columns, "  ")))
    table = Table("db", "stream", "length", "first id", "last id", "max deleted", "added",
                  "nodes", "groups", "expires", title="streams", title_justify="left")
    for s in doc["stream_list"]:
        table.add_row(str(s["db"]), _show(s["key"]), f"{s['length']:,}", s["first_id"],
                      s["last_id"], s["max_deleted_id"], f"{s['entries_added']:,}",
                      f"{s['nodes']:,}", str(len(s["groups"])),
                      "-" if s["expires_ms"] is None else _time(s["expires_ms"]))
    print_table(console, table, columns)
    groups = Table("db", "stream", "group", "last delivered", "entries read", "pending",
                   "consumer", "consumer pending", "seen", "active",
                   title="groups and consumers", title_justify="left")
    for s in doc["stream_list"]:
        for g in s["groups"]:
            rows = g["consumers"] or [None]
            for c in rows:
                groups.add_row(str(s["db"]), _show(s["key"]), _show(g["name"]),
                               g["last_delivered_id"], str(g["entries_read"]),
                               f"{g['pending']:,}", _show(c["name"]) if c else "-",
                               f"{c['pending']:,}" if c else "-",
                               _time(c["seen_ms"]) if c else "-",
                               _time(c["active_ms"]) if c else "-")
    if groups.row_count:
        print_table(console, groups, columns)


def _other_types(counts: dict[str, int]) -> str:
    """The header's counts of the types other than stream and string that have keys."""
    return "".join(f", {n:,} {name} keys" for name, n in counts.items()
                   if n and name not in ("stream", "string"))


def _show(value: Any) -> str:
    return value if isinstance(value, str) else "b64:" + value["b64"]


# --- dump --------------------------------------------------------------------------------------


def _id_bound(text: str | None, end: bool) -> Any:
    if text is None:
        return None
    ms, dash, seq = text.partition("-")
    if not ms.isdigit() or (dash and not seq.isdigit()):
        raise InspectError(f"{text!r} is not a stream ID (ms or ms-seq)", EXIT_IO)
    return text


def _dump(snap: Any, args: argparse.Namespace, out: IO[str]) -> None:
    start, end = _id_bound(args.start, False), _id_bound(args.end, True)
    key = args.key.encode("utf-8", "surrogateescape") if args.key is not None else None
    for info in snap.streams(args.db):
        if key is not None and info.key != key:
            continue
        lines = _json_lines if args.format == "json" else _text_lines
        entries = snap.entries(info.db, info.key, start,
                               *([end] if end is not None else []), count=args.count)
        out.writelines(lines(info.db, info.key, entries))
    if not args.streams_only:
        values = _json_values if args.format == "json" else _text_values
        out.writelines(values(snap, (row for row in snap.key_rows(args.db)
                                     if row.type is not None
                                     and (key is None or row.key == key))))
    out.flush()


def _json_values(snap: Any, rows: Iterator[Any]) -> Iterator[str]:
    """A line per key: a string's value as it is, another type's elements as a list (one
    column: the values; several: a list each), its type named; a type without a
    tools.value_tables entry: the size of its stored value. A big value stored in chunks is
    written as it is read, a chunk at a time (the same line)."""
    for row in rows:
        doc: dict[str, Any] = {"db": row.db, "key": json_arg(row.key)}
        table = BY_TYPE.get(row.type)
        if row.type != "string":
            doc["type"] = row.type
        if row.chunked is not None and table is not None:
            yield from _json_streamed(snap, row, table, doc)
            continue
        if table is None and row.chunked is not None:
            doc["stored_bytes"] = row.chunked.size
        elif table is None:
            doc["stored_bytes"] = len(row.value)
        else:
            value = table.decode(row.value)
            elements = [_json_element(table.columns, r) for r in table.rows(value)]
            doc["value"] = elements[0] if row.type == "string" else elements
        doc["expires_ms"] = row.expires_ms
        yield json.dumps(doc) + "\n"


def _json_streamed(snap: Any, row: Any, table: Any, doc: dict[str, Any]) -> Iterator[str]:
    """`_json_values`' line for a chunked value, its elements written as they are read: the
    same text json.dumps makes of the whole document."""
    head = json.dumps(doc)
    yield head[:-1] + ', "value": ['
    first = True
    for element in elements(snap, row):
        text = json.dumps(_json_element(table.columns, element))
        yield text if first else ", " + text
        first = False
    yield "], " + json.dumps({"expires_ms": row.expires_ms})[1:] + "\n"


def _json_element(columns: tuple[Column, ...], element: tuple) -> Any:
    # (an index column is not shown: the elements are in its order)
    values = [_json_cell(c, v) for c, v in zip(columns, element, strict=True)
              if c.kind != "index"]
    return values[0] if len(values) == 1 else values


def _json_cell(column: Column, value: Any) -> Any:
    if column.kind == "binary":
        return json_arg(value)
    if column.text is not None:  # (a score: ZSCORE's text)
        return column.text(value)
    return value  # an expiry: ms or None


def _text_values(snap: Any, rows: Iterator[Any]) -> Iterator[str]:
    """A line per key: db, key, type, its elements' cells (a type without a
    tools.value_tables entry: the size of its stored value), then PXAT and the key's expiry.
    A big value stored in chunks is written as it is read, a chunk at a time."""
    for row in rows:
        ttl = "" if row.expires_ms is None else f" PXAT {row.expires_ms}"
        table = BY_TYPE.get(row.type)
        if row.chunked is not None and table is not None:
            yield f"db{row.db} {quote(row.key)} {row.type}"
            for r in elements(snap, row):
                cells = " ".join(cell for c, v in zip(table.columns, r, strict=True)
                                 if (cell := _text_cell(c, v)))
                if cells:
                    yield " " + cells
            yield f"{ttl}\n"
            continue
        if table is None and row.chunked is not None:
            body = f"({row.chunked.size:,} bytes stored)"
        elif table is None:
            body = f"({len(row.value):,} bytes stored)"
        else:
            body = " ".join(cell for r in table.rows(table.decode(row.value))
                            for c, v in zip(table.columns, r, strict=True)
                            if (cell := _text_cell(c, v)))
        yield f"db{row.db} {quote(row.key)} {row.type} {body}".rstrip() + f"{ttl}\n"


def _text_cell(column: Column, value: Any) -> str:
    if column.kind == "binary":
        return quote(value)
    if column.text is not None:  # (a score: ZSCORE's text)
        return column.text(value)
    if column.kind == "index":
        return ""  # (the elements are in its order)
    return "" if value is None else f"{column.name}={value}"  # an element's expiry


def _json_lines(db: int, key: bytes, entries: Iterator[Any]) -> Iterator[str]:
    name = json_arg(key)
    for entry in entries:
        fields = entry.fields
        pairs = [[json_arg(fields[i]), json_arg(fields[i + 1])]
                 for i in range(0, len(fields), 2)]
        yield json.dumps({"db": db, "key": name, "id": str(entry.id), "fields": pairs}) + "\n"


def _text_lines(db: int, key: bytes, entries: Iterator[Any]) -> Iterator[str]:
    prefix = f"db{db} {quote(key)} "
    for entry in entries:
        yield prefix + str(entry.id) + " " + " ".join(map(quote, entry.fields)) + "\n"
