"""Incremental reads (tools.export.since through the data source's reader, no Spark): the
entries the XADDs after an LSN added, from the AOF or, once compacted, from the snapshot above
each stream's position; a base read plus an incremental one equals a full read at the later
LSN; the errors say what is wrong."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.tools.export import since as since_mod
from streamkeep.tools.export.datasource import StreamkeepReader
from streamkeep.tools.export.pin import ExportError, pin_log


def read(path: str, table: str = "entries", **options: object) -> list[tuple]:
    reader = StreamkeepReader({"path": path, "table": table, "arrow": "false",
                               **{k: str(v) for k, v in options.items()}})
    return [row for part in reader.partitions() for row in reader.read(part)]


def entry_set(rows: list[tuple]) -> set[tuple]:
    """(db, stream, id, pairs): a row without the as-of LSN column."""
    return {(r[0], r[1], r[3], tuple(r[7])) for r in rows}


def snapshot_lsn(engine: Engine) -> int:
    lsn = engine.compact(wait=True)
    assert lsn is not None
    return lsn.lsn


def end_lsn(path: str) -> int:
    with pin_log(path) as log:
        return since_mod.log_end(log)


def manifest(tmp: Path, path: str, lsn: int) -> str:
    """What an export at `lsn` records: its LSN and every stream's position then."""
    with pin_log(path) as log:
        positions = since_mod.positions_to_json(since_mod.positions_at(log, lsn))
    out = tmp / f"manifest-{lsn}.json"
    out.write_text(json.dumps({"lsn": lsn, "positions": positions}))
    return str(out)


def test_entries_added_after_the_lsn_as_they_were_added(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        for i in range(5):
            engine.execute("XADD", "s", f"{i + 1}-0", "a", str(i))
        base = snapshot_lsn(engine)
        added = [
            (0, b"s", engine.execute("XADD", "s", "MAXLEN", "3", "*", "a", "5", "a", "6")),
            (0, b"s", engine.execute("XADD", "s", "IDMP", "p", "i1", "*", "b", b"\xff")),
        ]
        engine.execute("MULTI")
        engine.execute("SELECT", "3")
        engine.execute("XADD", "t", "9-9", "x", "y")
        engine.execute("EXEC")
        engine.execute("SELECT", "0")
        added.append((3, b"t", b"9-9"))
        added.append((0, b"u", engine.execute("XADD", "u", "*", "q", "r")))
        engine.execute("XDEL", "s", added[0][2])  # deleted since: still exported
        engine.execute("XGROUP", "CREATE", "s", "g", "0")  # no entry added
        end = end_lsn(path)
        rows = read(path, sinceLsn=base)
    assert [(r[0], r[1], r[3].encode()) for r in rows] == added
    assert rows[0][7] == [(b"a", b"5"), (b"a", b"6")] and rows[0][6] == {"a": b"6"}
    assert rows[1][7] == [(b"b", b"\xff")]
    assert {r[-1] for r in rows} == {end}  # as of the log's end when planned


def test_base_plus_incremental_equals_a_full_read_at_the_later_lsn(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path, stream_node_max_entries=4) as engine:
        for i in range(30):
            engine.execute("XADD", f"k{i % 3}", "*", "n", str(i), "n", "again")
        first = snapshot_lsn(engine)
        base = read(path)
        for i in range(30, 70):
            engine.execute("XADD", f"k{i % 4}", "*", "n", str(i))
        end = end_lsn(path)
        incremental = read(path, sinceLsn=first, numPartitions=3)
        assert snapshot_lsn(engine) == end
        full = read(path)
    assert len(incremental) == 40 and {r[-1] for r in incremental} == {end}
    assert entry_set(base) | entry_set(incremental) == entry_set(full)
    assert not entry_set(base) & entry_set(incremental)


def test_records_compacted_meanwhile_come_from_the_snapshot_above_the_positions(
        tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path, stream_node_max_entries=4) as engine:
        for i in range(20):
            engine.execute("XADD", "a", f"{i + 1}-0", "n", str(i))
            engine.execute("XADD", "b", f"{i + 1}-1", "n", str(i))
        engine.execute("XADD", "gone", "1-0", "n", "0")
        engine.execute("XADD", "old", "100-0", "n", "0")
        first = snapshot_lsn(engine)
        base = read(path)
        prev = manifest(tmp_path, path, first)
        engine.execute("XADD", "a", "21-0", "n", "20")
        engine.execute("XADD", "a", "22-0", "n", "21")
        engine.execute("XDEL", "a", "21-0")  # added and removed before the compaction: lost
        engine.execute("DEL", "gone")
        engine.execute("XADD", "gone", "2-0", "n", "again")  # made again, IDs above: exported
        engine.execute("DEL", "old")
        engine.execute("XADD", "old", "5-0", "n", "lower")  # made again with a lower ID
        engine.execute("RENAME", "b", "b2")  # unknowable once compacted: exported whole
        engine.execute("XADD", "c", "3-3", "n", "new")
        snapshot_lsn(engine)
        engine.execute("XADD", "a", "23-0", "n", "22")  # after the compaction: the AOF's
        engine.execute("XDEL", "a", "23-0")  # ... and exported though deleted since
        rows = read(path, sinceManifest=prev, numPartitions=2)
        with pytest.raises(ExportError, match="compacted into the snapshot"):
            read(path, sinceLsn=first)  # without positions: refused, not guessed
    got = sorted((r[1], r[3]) for r in rows)
    assert got == sorted([(b"a", "22-0"), (b"a", "23-0"), (b"c", "3-3"), (b"gone", "2-0"),
                          (b"old", "5-0"), *((b"b2", f"{i + 1}-1") for i in range(20))])
    assert (b"b", "1-1") in {(r[1], r[3]) for r in base}


def test_positions_follow_the_keyspace() -> None:
    positions: since_mod.Positions = {(0, b"a"): 5, (0, b"b"): 7, (1, b"c"): 9}
    since_mod.advance(positions, 0, [b"XADD", b"a", b"MAXLEN", b"=", b"2", b"6-1", b"f", b"v"])
    since_mod.advance(positions, 0, [b"XADD", b"a", b"1-0", b"f", b"v"])  # never lowers
    assert positions[(0, b"a")] == 6 << 64 | 1
    since_mod.advance(positions, 0, [b"RENAME", b"a", b"b"])
    assert positions == {(0, b"b"): 6 << 64 | 1, (1, b"c"): 9}
    since_mod.advance(positions, 0, [b"DEL", b"b", b"nothing"])
    since_mod.advance(positions, 2, [b"FLUSHDB"])
    assert positions == {(1, b"c"): 9}
    since_mod.advance(positions, 1, [b"FLUSHDB"])
    assert positions == {}
    positions[(4, b"x")] = 1
    since_mod.advance(positions, 0, [b"FLUSHALL"])
    assert positions == {}
    doc = since_mod.positions_to_json({(1, b"\x00k"): 3 << 64 | 4})
    assert doc == [{"db": 1, "stream": "006b", "last_id": "3-4"}]
    assert since_mod.positions_from_json(doc, "m") == {(1, b"\x00k"): 3 << 64 | 4}
    with pytest.raises(ExportError, match="m: malformed stream positions"):
        since_mod.positions_from_json([{"db": 0, "stream": "zz", "last_id": "1-1"}], "m")


def test_a_read_keeps_its_records_while_a_compaction_removes_them(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        engine.execute("XADD", "s", "1-0", "a", "b")
        first = snapshot_lsn(engine)
        for i in range(50):
            engine.execute("XADD", "s", f"{i + 2}-0", "n", str(i))
        reader = StreamkeepReader({"path": path, "table": "entries", "arrow": "false",
                                   "sinceLsn": str(first)})
        parts = reader.partitions()
        snapshot_lsn(engine)  # removes the segments the parts name: their pins hold them
        assert not [n for n in os.listdir(path) if n.startswith("segment-")
                    and n < "segment-000002"]
        rows = [row for part in parts for row in reader.read(part)]
    assert [r[3] for r in rows] == [f"{i + 2}-0" for i in range(50)]


def test_errors_say_what_is_wrong(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        engine.execute("XADD", "s", "1-0", "a", "b")
        lsn = snapshot_lsn(engine)
        snapshot = os.path.join(path, [n for n in os.listdir(path) if n.endswith(".mdb")][0])
        cases: list[tuple[dict[str, Any], str]] = [
            ({"sinceLsn": lsn + 5}, "after the log's end"),
            ({"sinceLsn": "-1"}, "must be an LSN"),
            ({"sinceLsn": 0, "table": "streams"}, "entries table only"),
            ({"sinceManifest": str(tmp_path / "nope.json")}, "not a readable export manifest"),
            ({"sinceLsn": 0, "untilLsn": lsn + 9}, "after the log's end"),
        ]
        for options, message in cases:
            table = str(options.pop("table", "entries"))
            with pytest.raises(ExportError, match=message):
                read(path, table, **options)
        with pytest.raises(ExportError, match="needs a data directory"):
            read(snapshot, sinceLsn=0)
        # a refused read leaves no pin behind
        assert not [n for n in os.listdir(path) if n.startswith("export-pin-")]
        assert read(path, sinceLsn=lsn) == []
