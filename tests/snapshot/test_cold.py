"""Cold nodes over real snapshot files (snapshot.cold, the lazy load, the raw copy).

A data directory opened with a `backlog-memory` budget loads its snapshot lazily (every node
cold), reads nodes back when touched, keeps within its budget by making clean nodes cold again,
compacts without decoding the nodes nothing touched, and keeps a replaced snapshot readable
while cold nodes still refer to it.
"""

from __future__ import annotations

import glob
import os
import shutil
import zlib

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import file_identity
from streamkeep.engine.model import packed_node
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.reader import Snapshot, SnapshotError

ENTRIES = 3_000  # 30 nodes of 100


def _fill(engine: Engine, n: int, key: str = "s", start: int = 0) -> None:
    for i in range(start, start + n):
        engine.execute("XADD", key, f"{i + 1}-0", "v", f"value-{i}")


def _info(engine: Engine, section: str) -> dict[str, str]:
    text = engine.execute("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _snapshot_path(engine: Engine, path: str) -> str:
    snap = engine.datadir.journal.manifest.snapshot  # type: ignore[union-attr]
    return os.path.join(path, snap.file)


@pytest.fixture
def compacted(tmp_path) -> tuple[str, str]:
    """A directory holding ENTRIES entries of `s` and a group, compacted; its digest."""
    path = str(tmp_path / "data")
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        _fill(engine, ENTRIES)
        engine.execute("XGROUP", "CREATE", "s", "g", "0")
        engine.execute("XDEL", "s", "7-0", "1500-0")
        engine.compact()
        return path, engine.digest()


def test_a_budget_loads_lazily_and_reads_back(compacted) -> None:
    path, digest = compacted
    with Engine.open(path, backlog_memory="20kb") as engine:
        info = _info(engine, "memory")
        assert info["stream_entries_cold"] == str(ENTRIES - 2)  # every node: nothing loaded
        assert info["stream_nodes_cold"] == "30"
        assert engine.digest() == digest  # every node read back (and made cold again)
        assert engine.execute("XRANGE", "s", "1499", "1502") == [
            [b"1499-0", [b"v", b"value-1498"]], [b"1501-0", [b"v", b"value-1500"]],
            [b"1502-0", [b"v", b"value-1501"]]]
        assert engine.residency.resident <= 2 * 20 * 1024
        xinfo = engine.execute("XINFO", "STREAM", "s")
        cold = xinfo[xinfo.index(b"cold-entries") + 1]
        assert cold > ENTRIES // 2
        assert xinfo[xinfo.index(b"resident-entries") + 1] == ENTRIES - 2 - cold
        assert 0 < xinfo[xinfo.index(b"resident-bytes") + 1] <= 2 * 20 * 1024
        keyspace = _info(engine, "keyspace")["db0"]
        assert f"entries={ENTRIES - 2}," in keyspace and "cold_entries=" in keyspace


def test_without_a_budget_everything_is_resident(compacted) -> None:
    path, digest = compacted
    with Engine.open(path) as engine:
        assert _info(engine, "memory")["stream_entries_cold"] == "0"
        assert b"cold-entries" not in engine.execute("XINFO", "STREAM", "s")
        assert engine.digest() == digest
        assert not engine.residency.queue  # nothing queued: no budget


def test_a_group_catches_up_over_cold_entries(compacted) -> None:
    path, _digest = compacted
    with Engine.open(path, backlog_memory="20kb") as engine:
        read = 0
        while reply := engine.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "100",
                                      "STREAMS", "s", ">"):
            ids = [entry[0] for entry in reply[0][1]]
            assert engine.execute("XACK", "s", "g", *ids) == len(ids)
            read += len(ids)
        assert read == ENTRIES - 2
        assert engine.residency.loads >= 30
        assert engine.residency.resident <= 2 * 20 * 1024
        # The new entries were read from the snapshot: their nodes stayed cold, none evicted.
        assert engine.residency.evictions == 0


def test_changes_to_cold_nodes_survive_eviction_and_restart(compacted) -> None:
    path, _digest = compacted
    with Engine.open(path, backlog_memory="10kb", auto_aof_rewrite_percentage=0) as engine:
        assert engine.execute("XDEL", "s", "10-0", "2000-0") == 2  # thawed, changed
        engine.execute("XTRIM", "s", "MINID", "301")  # whole cold nodes trimmed
        for _ in range(3):
            engine.execute("PING")  # evictions between commands: the changed nodes stay
        assert engine.execute("XRANGE", "s", "1999", "2001") == [
            [b"1999-0", [b"v", b"value-1998"]], [b"2001-0", [b"v", b"value-2000"]]]
        engine.compact()  # now the snapshot holds them as they are: they may go cold
        engine.execute("PING")
        assert engine.execute("XRANGE", "s", "1999", "2001") == [
            [b"1999-0", [b"v", b"value-1998"]], [b"2001-0", [b"v", b"value-2000"]]]
        assert engine.execute("XRANGE", "s", "-", "+", "COUNT", "1")[0][0] == b"301-0"
        digest = engine.digest()
    with Engine.open(path, backlog_memory="10kb") as engine:
        assert engine.digest() == digest


def test_compaction_keeps_untouched_nodes_where_they_are(compacted) -> None:
    """A compaction writes the node that changed into its new part file; every other node
    stays in the part file that held it, as stored, referenced by the new snapshot's runs."""
    path, _digest = compacted
    with Snapshot(_snapshot_path_of(path)) as before:
        old = _stored_nodes(before, 1)
    with Engine.open(path, backlog_memory="10kb", auto_aof_rewrite_percentage=0) as engine:
        _fill(engine, 500, start=ENTRIES)
        engine.execute("XDEL", "s", "50-0")
        engine.compact()
        new_path = _snapshot_path(engine, path)
    with Snapshot(new_path) as after:
        new = _stored_nodes(after, 1)
        newest = after.part_infos[-1].file
    first = 1 << 64
    assert new[first][0] == newest and new[first][1] != old[first][1]  # written again
    same = [m for m in old if m != first and new.get(m) == old[m]]
    assert len(same) == len(old) - 1  # every other one where it was (the old tail was full)
    assert {new[m][0] for m in new if m not in old} == {newest}  # the new ones


def _stored_nodes(snap: Snapshot, number: int) -> dict[int, tuple[str, bytes]]:
    """Each node of stream `number`: the file that holds it and its stored value."""
    found = {}
    for run in snap.runs(number):
        name = os.path.basename(run.part.path)
        for master in run.part.run_masters(run):
            found[master] = (name, run.part.node_stored(run.number, master))
    return found


def _nodes_file_of(path: str) -> str:
    """The part file of the data directory's snapshot that holds stream 1's first nodes."""
    with Snapshot(_snapshot_path_of(path)) as snap:
        return snap.runs(1)[0].part.path


def _snapshot_path_of(path: str) -> str:
    from streamkeep.snapshot.reader import current_snapshot

    found = current_snapshot(path)
    assert found is not None
    return found


def _nodes(snap: Snapshot) -> list[tuple[bytes, bytes]]:
    with snap.env.begin(db=snap.env.open_db(b"nodes", create=False)) as txn:
        return list(txn.cursor())


def test_a_replaced_snapshot_stays_readable_while_cold_nodes_use_it(compacted) -> None:
    path, digest = compacted
    old = _snapshot_path_of(path)
    store = SnapshotNodes(old, clean_before=1)
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        engine.execute("XADD", "s", "*", "v", "new")
        engine.compact()  # deletes the old file
    assert not os.path.exists(old)
    lp, _crc = store.load(1, 1 << 64)  # still readable through the open store
    read = packed_node.entries(lp, 1 << 64)
    assert [sid for sid, _f, _d in read[:2]] == [1 << 64, 2 << 64]
    assert read[0][1] == (b"v", b"value-0")
    with pytest.raises(StorageError, match="has no node"):
        store.load(1, 12345)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux /proc only")
def test_pages_are_released_from_the_map_found_when_first_needed(compacted, tmp_path) -> None:
    """A store finds where its file is mapped only when it first releases pages (a restart
    that reads little never reads the process's map list), by the file's identity: the map of
    a file a compaction unlinked meanwhile is found still."""
    path, _digest = compacted
    copy = str(tmp_path / "snapshot.mdb")
    shutil.copy(_snapshot_path_of(path), copy)
    for part in glob.glob(os.path.join(path, "part-*.mdb")):
        shutil.copy(part, tmp_path)
    store = SnapshotNodes(copy, clean_before=1)
    try:
        assert store.ranges is None
        os.unlink(copy)
        store.release_pages()
        assert store.ranges and sum(high - low for low, high in store.ranges) > 0
    finally:
        store.close()


def test_node_header_reads_counts_without_decoding() -> None:
    ids = [(5 << 64) | i for i in range(40)]
    fields = [(b"f", b"x" * i) if i % 3 else None for i in range(40)]
    raw = layout.encode_node(26, 999, (b"f",), ids, fields)
    assert layout.node_header(raw) == (26, 999, (b"f",), 40)
    long_names = tuple(b"name-%d" % i * 20 for i in range(40))  # past the peeked prefix
    raw = layout.encode_node(1, 5, long_names, ids[:1], [(b"a", b"b")])
    assert layout.node_header(memoryview(raw)) == (1, 5, long_names, 1)


def _put_node(path: str, key: bytes, value: bytes) -> None:
    """Store `value` under `key` in the file's nodes table (a test's way to forge a node)."""
    import lmdb

    env = lmdb.open(path, subdir=False, max_dbs=layout.MAX_TABLES, lock=False)
    try:
        with env.begin(write=True, db=env.open_db(b"nodes", create=False)) as txn:
            txn.put(key, value)
    finally:
        env.close()


def test_a_read_back_checks_structure_unless_the_bytes_are_known(compacted, tmp_path) -> None:
    """The stored value's checksum is always checked; the listpack's structure is checked
    unless its CRC is the one the caller says it held (bytes it validated or built)."""
    path, _digest = compacted
    copy = str(tmp_path / "forged.mdb")
    with open(_nodes_file_of(path), "rb") as src, open(copy, "wb") as dst:
        dst.write(src.read())
    master = 101 << 64  # the second node (100 entries a node)
    key = layout.node_key(1, master)
    with Snapshot(copy) as snap:
        good, good_crc = snap.node_readback(1, master)
        assert good_crc == zlib.crc32(good)
        assert snap.node_readback(1, master, good_crc) == (good, good_crc)
    forged = bytes(good[:-2]) + b"\x7f\xff"  # sealed as if written so, not a listpack
    _put_node(copy, key, layout.seal("nodes", key, forged))
    with Snapshot(copy) as snap:
        with pytest.raises(SnapshotError, match="table nodes.*undecodable value"):
            snap.node_readback(1, master)  # unknown bytes: checked
        with pytest.raises(SnapshotError, match="table nodes.*undecodable value"):
            snap.node_readback(1, master, good_crc)  # not the bytes held: checked
        assert snap.node_readback(1, master, zlib.crc32(forged))[0] == forged  # vouched for
    damaged = layout.seal("nodes", key, bytes(good))[:-1] + b"\0"
    _put_node(copy, key, damaged)
    with Snapshot(copy) as snap, \
            pytest.raises(SnapshotError, match="table nodes.*checksum mismatch"):
        snap.node_readback(1, master, good_crc)  # known CRC or not: the seal is checked


def test_reads_share_a_transaction_that_ends_with_the_store(compacted) -> None:
    """A store reads every cold node through one read transaction: it can be ended (a later
    read begins another) and ends with the store."""
    path, _digest = compacted
    store = SnapshotNodes(_snapshot_path_of(path), clean_before=1)
    first, crc = store.load(1, 1 << 64)
    assert store.load(1, 1 << 64, crc) == (first, crc)
    store.snapshot.end_reads()
    assert store.load(1, 101 << 64)[0] != first
    store.close()
    with pytest.raises(StorageError):
        store.load(1, 1 << 64)


def test_cold_reads_after_a_compaction_read_the_new_file(compacted) -> None:
    """Nodes cold in a replaced snapshot and nodes cold in its successor read back right, their
    CRCs carried over (the moved bytes are the same)."""
    path, digest = compacted
    with Engine.open(path, backlog_memory="10kb", auto_aof_rewrite_percentage=0) as engine:
        assert engine.digest() == digest  # every node read back once (validated), cold again
        stream = engine.dbs[0][b"s"]  # type: ignore[attr-defined]
        crcs = {node.master: node.crc for node in stream.nodes if node.is_cold()}
        assert crcs and all(crc >= 0 for crc in crcs.values())
        engine.execute("XADD", "s", "*", "v", "new")
        engine.compact()
        engine.execute("PING")
        assert engine.digest() != digest
        assert engine.execute("XRANGE", "s", "1499", "1502")[0] == \
            [b"1499-0", [b"v", b"value-1498"]]
        assert all(node.crc == crcs[node.master] for node in stream.nodes
                   if node.is_cold() and node.master in crcs)


def test_pages_are_released_once_enough_was_read(compacted,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding the map reads the process's map list: a store does it once RELEASE_BYTES were
    read through the map (a load counts the file's size), never for a small read."""
    from streamkeep.snapshot import cold

    path, _digest = compacted
    looked: list[object] = []
    monkeypatch.setattr(cold, "mapped_ranges_of",
                        lambda identities: looked.append(identities) or [])
    store = SnapshotNodes(_snapshot_path_of(path), clean_before=1)
    try:
        store.count_read(cold.RELEASE_BYTES // 2)
        store.count_read(cold.RELEASE_BYTES // 2)
        assert looked == []
        store.count_read(1)
        assert len(looked) == 1 and store.read_bytes == 0  # released
        store.count_read(cold.RELEASE_BYTES + 1)
        assert len(looked) == 1  # the ranges found once
    finally:
        store.close()
    looked.clear()
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:  # a small load
        assert engine.execute("XLEN", "s") > 0
    assert looked == []


def _mapped_rss(identities: list[tuple[int, int]]) -> int:
    """Bytes of these files' maps resident in this process (/proc/self/smaps)."""
    wanted = {(f"{os.major(dev):02x}:{os.minor(dev):02x}", str(ino)) for dev, ino in identities}
    total, counting = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            parts = line.split()
            if parts and not parts[0].endswith(":"):  # a map's header line
                counting = len(parts) >= 5 and (parts[3], parts[4]) in wanted
            elif counting and parts[0] == "Rss:":
                total += int(parts[1]) * 1024
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux /proc only")
def test_a_load_leaves_no_page_of_the_part_files_resident(compacted,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The nodes are in the part files: after an eager load (which reads all of them through
    the maps the node store keeps open) their pages leave the RSS, as the main file's do: a
    restarted process does not hold the snapshot twice, as nodes and as mapped pages."""
    from streamkeep.snapshot import cold

    path, digest = compacted
    monkeypatch.setattr(cold, "RELEASE_BYTES", 0)  # (the fixture's files are small)
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        store = engine.residency.store  # type: ignore[attr-defined]
        parts = [file_identity(part.path) for part in store.snapshot.parts]
        assert parts and _mapped_rss(parts) == 0
        assert engine.digest() == digest  # the entries are all in memory
        assert _mapped_rss(parts) == 0  # (the digest read nodes, not the maps)
        assert store.size == sum(os.path.getsize(p.path) for p in
                                 (store.snapshot, *store.snapshot.parts))
