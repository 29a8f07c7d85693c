"""Segmented snapshots (snapshot.segments, snapshot.writer.write_segmented): a compaction writes
what changed into a new part file and refers to the nodes nothing changed where they are; the
merge policy bounds dead space and the number of part files; every reader sees one snapshot.
Real data directories, real compaction children, real LMDB."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import SnapshotEntry, new_repl_id, snapshot_file
from streamkeep.aof.recovery import initialise_with_snapshot
from streamkeep.snapshot import segments
from streamkeep.snapshot.reader import Snapshot, current_snapshot
from streamkeep.snapshot.segments import MergePolicy, PartUse, choose_merges
from streamkeep.snapshot.writer import write_snapshot

ENTRY = "x" * 40


def _open(path: Path, **options: object) -> Engine:
    options.setdefault("auto_aof_rewrite_percentage", 0)
    return Engine.open(str(path), **options)


def _add(engine: Engine, key: str, first: int, count: int) -> None:
    for i in range(first, first + count):
        engine.execute("XADD", key, f"{i}-1", "n", str(i), "pad", ENTRY)


def _files(path: Path) -> dict[str, int]:
    doc = _open_manifest(path)
    return {name: (path / name).stat().st_size for name in doc.files}


def _open_manifest(path: Path) -> SnapshotEntry:
    from streamkeep.aof.manifest import load

    snap = load(RealFS(), str(path)).snapshot
    assert snap is not None
    return snap


def _whole(path: Path) -> list:
    """Every stream's entries and groups as the current snapshot's reader gives them."""
    found = current_snapshot(str(path))
    assert found is not None
    with Snapshot(found) as snap:
        assert snap.check() == []
        return [(i.db, i.key, [(e.id, e.fields) for e in snap.entries(i.db, i.key)],
                 [(g.name, g.last_id, g.pending) for g in snap.groups(i.db, i.key)])
                for i in snap.streams()]


def _engine_view(engine: Engine) -> list:
    out = []
    for key in sorted(engine.execute("KEYS", "*")):
        entries = engine.execute("XRANGE", key, "-", "+")
        groups = engine.execute("XINFO", "GROUPS", key)
        out.append((key, len(entries), len(groups)))
    return out


# --- the merge policy (pure) ----------------------------------------------------------------

def test_a_part_mostly_dead_is_merged_and_one_still_live_is_kept() -> None:
    parts = {"a": PartUse("a", 1000, 100, 95), "b": PartUse("b", 1000, 100, 10)}
    assert choose_merges(parts, 100) == {"b"}  # 900 dead bytes of 2100: over 25%
    parts = {"a": PartUse("a", 1000, 100, 95), "b": PartUse("b", 1000, 100, 90)}
    assert choose_merges(parts, 100) == set()  # 150 dead of 2100


def test_too_many_parts_merge_the_smallest_first() -> None:
    parts = {f"p{i}": PartUse(f"p{i}", 1000 * (i + 1), 10, 10) for i in range(9)}
    merged = choose_merges(parts, 10, MergePolicy(max_parts=8))
    assert merged == {"p0", "p1"}  # 9 + the new one: two go, the two with the fewest bytes


def test_dead_space_merges_stop_once_under_the_bound() -> None:
    parts = {"a": PartUse("a", 4000, 40, 10), "b": PartUse("b", 4000, 40, 20),
             "c": PartUse("c", 4000, 40, 40)}
    merged = choose_merges(parts, 0)
    assert merged == {"a"}  # a: 3000 dead; then b's 2000 of 9000 is under 25%
    kept = [u for p, u in parts.items() if p not in merged]
    assert sum(u.dead for u in kept) <= 0.25 * (sum(u.size for u in kept) + parts["a"].live)


# --- compactions -------------------------------------------------------------------------------

def test_a_compaction_writes_what_changed_and_refers_to_the_rest(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with _open(d) as engine:
        _add(engine, "big", 1, 5000)
        engine.compact()
        first = _open_manifest(d)
        (base_part,) = first.parts
        before = len(engine.dbs[0][b"big"].nodes)
        _add(engine, "big", 5001, 200)  # new nodes, and the old tail changed
        engine.execute("XDEL", "big", "2500-1")  # a node in the middle changed
        entry = engine.compact()
        assert entry is not None
        assert [p.file for p in entry.parts] == [base_part.file, f"part-{entry.lsn:012d}.mdb"]
        assert entry.parts[0] == base_part  # the same file, untouched
        new_part = entry.parts[1]
        assert new_part.size < base_part.size / 4  # 5 nodes of 69, and LMDB's pages
        nodes = len(engine.dbs[0][b"big"].nodes)
        with Snapshot(str(d / entry.file)) as snap:
            runs = snap.runs(1)
            in_new = [r for r in runs if r.part.path.endswith(new_part.file)]
            assert [r.nodes for r in in_new] == [1, nodes - before + 1]  # middle; tail, new
            assert sum(r.nodes for r in runs) == nodes
        digest = engine.digest()
    for lazy in ("0", "64kb"):
        with _open(d, backlog_memory=lazy) as engine:
            assert engine.digest() == digest
            assert engine.execute("XLEN", "big") == 5199


def test_a_node_emptied_in_the_middle_of_a_run_is_not_read_from_the_old_part(
        tmp_path: Path) -> None:
    """XDEL of every entry of a node removes it: the nodes on either side stay in the old
    part, where the removed one still is; the new runs must step over it."""
    d = tmp_path / "d"
    with _open(d) as engine:
        _add(engine, "s", 1, 1000)
        engine.compact()
        node = engine.dbs[0][b"s"].nodes[4]  # the 5th node, whole
        low, high = node.master >> 64, (node.master >> 64) + node.count
        nodes = len(engine.dbs[0][b"s"].nodes)
        engine.execute("XDEL", "s", *[f"{i}-1" for i in range(low, high)])
        assert engine.execute("XLEN", "s") == 1000 - node.count
        entry = engine.compact()
        assert entry is not None and len(entry.parts) == 1  # nothing new to write
        with Snapshot(str(d / entry.file)) as snap:
            assert [r.nodes for r in snap.runs(1)] == [4, nodes - 5]
            ids = [e.id.ms for e in snap.entries(0, b"s")]
            assert ids == [*range(1, low), *range(high, 1001)]
            assert snap.check() == []
            cut = snap.split(0, b"s", nodes - 1)[4][0].ms  # a range a node: the 5th is next
            assert cut == high
        digest = engine.digest()
    with _open(d, backlog_memory="32kb") as engine:
        assert engine.digest() == digest
        assert engine.execute("XRANGE", "s", str(low - 1), str(high)) == [
            [f"{low - 1}-1".encode(), [b"n", str(low - 1).encode(), b"pad", ENTRY.encode()]],
            [f"{high}-1".encode(), [b"n", str(high).encode(), b"pad", ENTRY.encode()]]]


def test_a_trimmed_stream_keeps_its_disk_space_bounded(tmp_path: Path) -> None:
    """A stream trimmed as fast as it grows: every compaction's new part holds the new
    entries, the oldest parts die whole (dropped without copying) or are merged."""
    d = tmp_path / "d"
    live = []
    with _open(d) as engine:
        _add(engine, "s", 1, 2000)
        for round_ in range(20):
            _add(engine, "s", 2001 + round_ * 300, 300)
            engine.execute("XTRIM", "s", "MAXLEN", "2000")
            entry = engine.compact()
            assert entry is not None
            assert len(entry.parts) <= segments.DEFAULT_POLICY.max_parts
            files = _files(d)
            parts = sum(size for name, size in files.items() if name.startswith("part-"))
            live.append(parts)
        digest = engine.digest()
    # 2000 entries of ~60 bytes in 20-node parts: the bound allows 25% dead, plus LMDB's pages.
    assert max(live[5:]) <= 1.5 * min(live[5:]), live
    with _open(d, backlog_memory="32kb") as engine:
        assert engine.digest() == digest


def test_every_reader_sees_the_same_entries_through_the_runs(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with _open(d) as engine:
        for key in ("a", "b", "c"):
            _add(engine, key, 1, 350)
        engine.execute("XGROUP", "CREATE", "b", "g", "0")
        engine.execute("XREADGROUP", "GROUP", "g", "c1", "COUNT", "5", "STREAMS", "b", ">")
        engine.compact()
        _add(engine, "b", 351, 150)
        engine.execute("DEL", "a")
        _add(engine, "d", 1, 10)
        engine.compact()
        expected = {key: engine.execute("XRANGE", key, "-", "+")
                    for key in (b"b", b"c", b"d")}
    got = _whole(d)
    assert [(key, len(entries)) for _db, key, entries, _groups in got] == [
        (b"b", 500), (b"c", 350), (b"d", 10)]
    for _db, key, entries, _groups in got:
        assert [(e.ms, e.seq) for e, _f in entries] == [
            tuple(map(int, sid.split(b"-"))) for sid, _fields in expected[key]]
    assert got[0][3] == [(b"g", got[0][2][4][0], 5)]


def test_a_self_contained_snapshot_opens_and_its_file_becomes_a_part(tmp_path: Path) -> None:
    """A directory whose snapshot is one file (an import, or written before parts): it
    opens, and its first compaction refers to its nodes in it instead of copying them."""
    d = tmp_path / "d"
    d.mkdir()
    staging = Engine()
    _add(staging, "s", 1, 1000)
    name = snapshot_file(1)
    repl_id, created = new_repl_id(), int(time.time() * 1000)
    info = write_snapshot(staging.dbs, str(d / name), 1, created, repl_id)
    initialise_with_snapshot(RealFS(), str(d), SnapshotEntry(
        name, 1, os.path.getsize(d / name), created, info.crc32), repl_id)
    with _open(d) as engine:
        assert engine.execute("XLEN", "s") == 1000
        _add(engine, "s", 1001, 10)
        entry = engine.compact()
        assert entry is not None
        assert [p.file for p in entry.parts] == [name, f"part-{entry.lsn:012d}.mdb"]
        assert entry.parts[0].crc32 == info.crc32
        digest = engine.digest()
    assert (d / name).exists()  # still the home of 9 of its 10 nodes
    with _open(d, backlog_memory="16kb") as engine:
        assert engine.digest() == digest


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_restart_after_many_compactions(tmp_path: Path, policy: str) -> None:
    d = tmp_path / "d"
    with _open(d, appendfsync=policy) as engine:
        for round_ in range(12):
            _add(engine, f"k{round_ % 3}", 1 + round_ * 100, 100)
            engine.execute("XGROUP", "CREATE", f"k{round_ % 3}", f"g{round_}", "0")
            engine.compact()
        digest = engine.digest()
        assert len(_open_manifest(d).parts) <= 8
    with _open(d) as engine:
        assert engine.digest() == digest
