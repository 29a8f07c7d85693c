"""A format 3 snapshot the previous code wrote, for the compatibility tests: how it was made,
and the helpers the tests read it with.

tests/data/snapshot_v3.mdb is a format 3 snapshot (nodes as msgpack arrays of entries, before
nodes were stored as listpacks); tests/data/snapshot_v3.expected.msgpack the state it holds.
Both were made by `main` below, runnable only against a checkout that writes format 3 (commit
4dd49f5 or older, with its virtualenv; it refuses to run otherwise). From that checkout:

    .venv/bin/python /path/to/tests/support/v3_snapshot.py /path/to/tests/data

It opens a data directory in a temporary directory, builds a varied state (several streams,
binary keys, three databases, nodes split by entry count and by bytes, XDEL'd entries among
them a node's first, trims, consumer groups with pending entries, one XNACK released, idle
consumers, IDMP state, string keys with and without TTLs), compacts it and copies the snapshot
file out, with the expected state (the engine's digest, and per key what `expected` replies)
as msgpack. A second run makes a file of the same entries, with delivery times a few ms apart
(background threads read the clock too): the two files committed are one run's.

The tests' side: `want` (the expected state), `state` (the same of an engine now), `v3_datadir`
(a data directory whose manifest names a copy of the file), `read_api` (what the snapshot read
API returns for a file), `export_entries` (what the export's reader returns, no Spark), and
`compacted` (a v3 directory loaded lazily and compacted: a format 4 file).

Must not touch: tests/data but through `main`, run by hand.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgpack

DATA = Path(__file__).resolve().parents[1] / "data"
V3 = DATA / "snapshot_v3.mdb"
EXPECTED = DATA / "snapshot_v3.expected.msgpack"
T0 = 1_764_000_000_000  # the engine's clock, in ms: a fixed start (the tests run at its end)
FAR = 4_102_444_800_000  # 2100-01-01: string keys' TTLs outlive any test's clock


class Clock:
    """A clock that moves 7 ms on each read: deliveries and consumers get varied times."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 7
        return self.now


def build(run: Any, compact: Any) -> None:
    """The state: every command an old engine accepted, the file keeps its outcome. A
    compaction replays the log with the settings it finds then: one after each part keeps the
    node layout that part's settings made."""
    run("CONFIG", "SET", "stream-node-max-entries", "8")
    run("CONFIG", "SET", "stream-node-max-bytes", "0")
    for i in range(1, 60):  # split by entries: 8 a node
        run("XADD", "orders", f"{1000 + i}-{i % 3}", "item", f"sku-{i}", "qty", str(i),
            "note", "x" * (i % 5))
    run("XADD", "orders", "2000-0", "other", "fields", "here", "too")  # not the master's
    run("XDEL", "orders", "1001-1", "1009-0", "1010-1", "1030-0", "1031-1")  # node firsts too
    run("XGROUP", "CREATE", "orders", "billing", "0")
    run("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "5", "STREAMS", "orders", ">")
    run("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "4", "STREAMS", "orders", ">")
    run("XACK", "orders", "billing", "1003-0")
    run("XCLAIM", "orders", "billing", "carol", "0", "1004-1")
    run("XGROUP", "CREATECONSUMER", "orders", "billing", "idle")
    run("XNACK", "orders", "billing", "FAIL", "IDS", "1", "1002-2")
    run("XGROUP", "CREATE", "orders", "audit", "1020-0", "ENTRIESREAD", "15")
    run("XREADGROUP", "GROUP", "audit", "dave", "COUNT", "3", "STREAMS", "orders", ">")
    run("XCFGSET", "orders", "IDMP-DURATION", "86400", "IDMP-MAXSIZE", "50")
    run("XADD", "orders", "IDMP", "producer-1", "iid-1", "*", "item", "once")
    run("XADD", "orders", "IDMP", "producer-1", "iid-2", "*", "item", "twice")
    run("XADD", "orders", "IDMP", b"p\x00bin", b"i\xff", "*", "item", "bin")
    compact()

    run("CONFIG", "SET", "stream-node-max-entries", "1000")
    run("CONFIG", "SET", "stream-node-max-bytes", "300")
    for i in range(1, 40):  # split by bytes: a few entries a node
        run("XADD", "logs", "*", "line", f"line {i} " + "y" * (i * 3), "level", str(i % 4))
    run("XTRIM", "logs", "MAXLEN", "30")
    run("XDEL", "logs", *[r[0] for r in run("XRANGE", "logs", "-", "+", "COUNT", "3")])
    run("XADD", "trimmed", "MAXLEN", "5", "*", "a", "1")
    for i in range(20):
        run("XADD", "trimmed", "MAXLEN", "5", "*", "a", str(i), "b", b"\x00\x01" * i)
    run("XADD", "emptied", "1-1", "f", "v")
    run("XDEL", "emptied", "1-1")  # an empty stream with a last ID
    run("XGROUP", "CREATE", "emptied", "g", "$", "MKSTREAM")
    run("XGROUP", "CREATE", "nogroup-yet", "g0", "$", "MKSTREAM")
    run("SET", "plain", "value")
    run("SET", b"bin\x00key", b"\xff\x00val")
    run("SET", "ttl", "soon", "PXAT", str(FAR))
    run("PEXPIREAT", "logs", str(FAR + 1))  # a stream with a TTL
    compact()

    run("CONFIG", "SET", "stream-node-max-entries", "4")
    run("CONFIG", "SET", "stream-node-max-bytes", "4096")
    run("SELECT", "2")
    run("XADD", b"bin\x00\xff", "5-5", b"\x00", b"\xff")
    run("XADD", b"bin\x00\xff", "5-6", b"\x00", b"\xfe", b"\x01", b"")
    run("XADD", "numbers", "1-0", "n", "123", "neg", "-5", "big", "9223372036854775807",
        "over", "9223372036854775808", "lead", "007")
    run("XGROUP", "CREATE", b"bin\x00\xff", b"g\xff", "0")
    run("XREADGROUP", "GROUP", b"g\xff", b"c\x00", "STREAMS", b"bin\x00\xff", ">")
    run("SET", "db2-string", "x", "PXAT", str(FAR + 5))
    run("SELECT", "5")
    for i in range(1, 10):
        run("XADD", "s5", f"{i}-0", "k", str(i))
    run("XDEL", "s5", "1-0", "5-0")  # the first node's first, the second node's first
    run("SELECT", "0")


def expected(engine: Any) -> dict:
    """What the test compares: the digest, and each key's replies."""
    run = engine.execute
    keys: list = []
    for db in range(16):
        run("SELECT", str(db))
        for key in sorted(run("KEYS", "*")):
            kind = run("TYPE", key)
            row: dict = {"db": db, "key": key, "type": kind, "pexpiretime": run("PEXPIRETIME", key)}
            if kind == "stream":
                row["xrange"] = run("XRANGE", key, "-", "+")
                row["full"] = run("XINFO", "STREAM", key, "FULL")
            else:
                row["value"] = run("GET", key)
            keys.append(row)
    run("SELECT", "0")
    return {"digest": engine.digest(), "keys": keys, "clock_ms": engine.clock()}


def main(out_dir: str) -> None:
    from streamkeep import Engine
    from streamkeep.snapshot import layout

    if layout.VERSION != 3:
        sys.exit(f"this checkout writes snapshot format {layout.VERSION}, not 3: "
                 "run this script with an older checkout")
    work = tempfile.mkdtemp()
    try:
        clock = Clock()
        engine = Engine.open(os.path.join(work, "data"), clock=clock)
        build(engine.execute, engine.compact)
        clock.now = T0 + 10_000_000  # the state is read at a time of its own, past them all
        state = expected(engine)
        engine.compact()
        engine.close()
        (snapshot,) = glob.glob(os.path.join(work, "data", "snapshot-*.mdb"))
        shutil.copyfile(snapshot, os.path.join(out_dir, V3.name))
        with open(os.path.join(out_dir, EXPECTED.name), "wb") as f:
            f.write(msgpack.packb(state, use_bin_type=True))
    finally:
        shutil.rmtree(work)



# --- the tests' side (current code) -------------------------------------------------------------


def plain(value: Any) -> Any:
    """A reply as the expected state's msgpack holds it (tuples as lists)."""
    return msgpack.unpackb(msgpack.packb(value, use_bin_type=True), raw=False)


def want() -> dict:
    """The state the file was written from (`expected` when it was made)."""
    return plain(msgpack.unpackb(EXPECTED.read_bytes(), raw=False))  # type: ignore[no-any-return]


def state(engine: Any) -> dict:
    """`expected` of an engine now, but for its clock, as `want` has it."""
    got: dict = plain(expected(engine))
    del got["clock_ms"]
    return got


def same(engine: Any, wanted: dict) -> None:
    assert state(engine) == {k: v for k, v in wanted.items() if k != "clock_ms"}


def streams(wanted: dict) -> list[dict]:
    return [row for row in wanted["keys"] if row["type"] == "stream"]


def field(reply: list, name: str) -> Any:
    """One field of an XINFO reply (a flat list of names and values)."""
    return reply[reply.index(name.encode()) + 1]


def full(row: dict, name: str) -> Any:
    """One field of a stream's XINFO STREAM FULL in `want`."""
    return field(row["full"], name)


def v3_datadir(dest: Path) -> Path:
    """A data directory whose manifest names a copy of the format 3 file and one empty
    segment after it."""
    from streamkeep.aof.codec import encode_header
    from streamkeep.aof.manifest import (
        MANIFEST,
        Manifest,
        SegmentEntry,
        SnapshotEntry,
        segment_file,
        snapshot_file,
    )
    from streamkeep.snapshot import layout
    from streamkeep.snapshot.reader import Snapshot, file_chunks

    dest.mkdir()
    with Snapshot(str(V3)) as snap:
        meta = snap.meta
    name = snapshot_file(meta.lsn)
    shutil.copyfile(V3, dest / name)
    crc = layout.file_checksum(file_chunks(str(dest / name)))
    entry = SnapshotEntry(name, meta.lsn, V3.stat().st_size, meta.created_ms, crc)
    segment = SegmentEntry(segment_file(1), 1, meta.lsn + 1)
    (dest / segment.file).write_bytes(encode_header(1, meta.lsn + 1))
    (dest / MANIFEST).write_bytes(
        Manifest([segment], snapshot=entry, repl_id=meta.repl_id).to_json())
    return dest


def opened(path: Path, wanted: dict, **config: Any) -> Any:
    """The data directory opened at the expected state's clock, automatic compaction off."""
    from streamkeep import Engine

    clock = wanted["clock_ms"]
    return Engine.open(str(path), clock=lambda: clock, auto_aof_rewrite_percentage=0, **config)


def compacted(dest: Path, wanted: dict) -> str:
    """A v3 data directory at `dest`, loaded lazily (a budget: every node cold but the few
    read) and compacted: the path of the format 4 snapshot that wrote (the compaction's child
    loads the v3 file lazily too, so its cold nodes are packed as they are copied)."""
    from streamkeep.snapshot.reader import current_snapshot

    v3_datadir(dest)
    with opened(dest, wanted, backlog_memory="2kb") as engine:
        engine.execute("XRANGE", "orders", "-", "+", "COUNT", "3")  # some read back, most not
        engine.execute("SET", "scratch", "x")  # a record to compact, the state unchanged
        engine.execute("DEL", "scratch")
        engine.compact()
    new = current_snapshot(str(dest))
    assert new is not None
    return new


def read_api(path: str) -> dict:
    """Everything the read API returns for a snapshot but its meta and stream numbers, its
    `check` clean and its `split` ranges covering each stream's entries once."""
    from streamkeep.snapshot.reader import Snapshot

    out: dict = {}
    with Snapshot(path) as snap:
        assert snap.check() == []
        out["keys"] = snap.key_rows()
        for info in snap.streams():
            db, key = info.db, info.key
            entries = list(snap.entries(db, key))
            parts = [e for lo, hi in snap.split(db, key, 3) for e in snap.entries(db, key, lo, hi)]
            assert parts == entries
            groups = snap.groups(db, key)
            out[db, key] = {
                "info": (info.length, info.first_id, info.last_id, info.max_deleted_id,
                         info.entries_added, info.nodes, info.idmp),
                "entries": entries, "groups": groups,
                "consumers": [snap.consumers(db, key, g.name) for g in groups],
                "pending": [list(snap.pending(db, key, g.name)) for g in groups]}
    return out


def export_entries(path: str) -> dict:
    """(db, stream) -> [[id, [field, value, ...]], ...] as the export's reader returns the
    entries table, its Arrow batches (built from columns) equal to its tuple rows. `path` must
    be in a scratch directory: the reader pins a copy beside it (removed here)."""
    from streamkeep.tools.export.datasource import StreamkeepReader

    options = {"path": path, "numPartitions": 3, "batchSize": 5}
    arrow, tuples = StreamkeepReader(options), StreamkeepReader({**options, "arrow": "false"})
    planned = tuples.partitions()
    names = [f.name for f in tuples.schema.fields]
    got: dict = {}
    try:
        for part in planned:
            rows = [dict(zip(names, row, strict=True)) for row in tuples.rows(part)]
            batches = [row for b in arrow.read(part) for row in b.to_pylist()]
            assert [(r["id"], r["pairs"]) for r in batches] == [
                (r["id"], [{"field": f, "value": v} for f, v in r["pairs"]]) for r in rows]
            for r in rows:
                got.setdefault((r["db"], r["stream"]), []).append(
                    [r["id"].encode(), [x for pair in r["pairs"] for x in pair]])
    finally:
        for pinned in {part.snapshot for part in planned}:
            Path(pinned).unlink()
    return got


def xranges(wanted: dict) -> dict:
    """(db, stream) -> XRANGE of every stream with entries, as `export_entries` has it."""
    return {(row["db"], row["key"]): row["xrange"] for row in streams(wanted) if row["xrange"]}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DATA))
