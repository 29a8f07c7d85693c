"""Cold nodes over real snapshot files (snapshot.cold, the lazy load, the raw copy), streams' and
lists', and the cold runs of big hashes' and sets' bucket tables.

A data directory opened with a `backlog-memory` budget loads its snapshot lazily (every node
cold), reads nodes back when touched, keeps within its budget by making clean nodes cold again,
compacts without decoding the nodes nothing touched, and keeps a replaced snapshot readable
while cold nodes still refer to it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import zlib
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import file_identity
from streamkeep.engine.model import lists, packed_node
from streamkeep.engine.model.bucket_table import COLD, BucketTable, build_pack
from streamkeep.engine.model.packed_columns import pack_count
from streamkeep.engine.model.residency import (
    ColdRun,
    ColdValueNode,
    Residency,
    TableIndex,
    run_hash,
)
from streamkeep.engine.model.value_types import HASH, LIST, SET
from streamkeep.engine.wire.errors import ReplyError, StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.value_formats import Cut, run_buckets, table_chunks

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
        keyspace = _info(engine, "keyspace")["db0"]  # Redis's four fields (exporters parse it)
        assert [field.split("=")[0] for field in keyspace.split(",")] == [
            "keys", "expires", "avg_ttl", "subexpiry"]


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


# --- cold list nodes ---------------------------------------------------------------------------
# A long list under the budget keeps in memory only the nodes it needs: after a compaction, the
# nodes the snapshot holds with exactly their bytes go cold (found by the snapshot's listnodes
# index, by content), every list command reads and changes them as if they were resident, a
# restart with the budget loads the list cold, and a damaged chunk is refused, naming the file.
# Every reply is checked against a Python list doing the same.

ELEMENTS = 200_000
BUDGET = 256 << 10


def _element(i: int) -> bytes:
    return f"element-{i}".encode()


def _fill_list(engine: Engine, key: str = "q", count: int = ELEMENTS) -> list[bytes]:
    model = []
    for first in range(0, count, 1000):
        batch = [_element(i) for i in range(first, min(first + 1000, count))]
        engine.execute("RPUSH", key, *batch)
        model.extend(batch)
    return model


def _list_value(engine: Engine, key: bytes = b"q") -> lists.QuickList:
    value = engine.keyspaces[LIST.slot][0][key]
    assert isinstance(value, lists.QuickList)
    return value


def _cold_nodes(value: lists.QuickList) -> int:
    return sum(not isinstance(node, bytearray) for node in value.nodes)



@pytest.fixture
def list_compacted(tmp_path) -> str:
    """A directory holding the ELEMENTS-element list `q`, compacted (no budget)."""
    path = str(tmp_path / "data")
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        _fill_list(engine)
        engine.compact()
    return path


def test_a_compaction_lets_the_nodes_it_holds_go_cold(tmp_path) -> None:
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine:
        model = _fill_list(engine)
        value = _list_value(engine)
        assert _cold_nodes(value) == 0  # nothing is in a snapshot yet
        engine.compact()
        engine.execute("PING")  # (eviction runs between commands)
        nodes = len(value.nodes)
        assert _cold_nodes(value) > nodes * 0.8
        assert engine.residency.resident <= BUDGET
        assert isinstance(value.nodes[0], bytearray) and isinstance(value.nodes[-1], bytearray)
        resident = sum(len(node) for node in value.nodes if isinstance(node, bytearray))
        assert resident <= BUDGET
        info = _info(engine, "memory")
        assert int(info["list_nodes_cold"]) == _cold_nodes(value)
        assert int(info["list_elements_cold"]) == sum(
            node.count for node in value.nodes if isinstance(node, ColdValueNode))
        assert int(info["stream_nodes_evicted"]) >= _cold_nodes(value)  # (stream and list nodes)
        assert engine.execute("LRANGE", "q", 0, -1) == model
        assert engine.execute("LLEN", "q") == ELEMENTS


def test_without_a_budget_nothing_goes_cold(list_compacted) -> None:
    with Engine.open(list_compacted) as engine:
        value = _list_value(engine)
        assert _cold_nodes(value) == 0 and value.home is None
        assert _info(engine, "memory")["list_nodes_cold"] == "0"


@pytest.mark.parametrize("compacted_here", [False, True])
def test_turning_the_budget_on_binds_the_long_lists_at_once(list_compacted,
                                                            compacted_here: bool) -> None:
    """CONFIG SET backlog-memory from 0: a long list the current snapshot holds (loaded, or
    compacted by this process) counts against the budget at once, as a stream does, without
    waiting for another compaction."""
    with Engine.open(list_compacted, auto_aof_rewrite_percentage=0) as engine:
        if compacted_here:
            engine.execute("RPUSH", "q", "one more")
            engine.compact()
        value = _list_value(engine)
        assert _cold_nodes(value) == 0
        engine.execute("CONFIG", "SET", "backlog-memory", str(BUDGET))
        engine.execute("PING")  # (eviction runs between commands)
        assert _cold_nodes(value) > len(value.nodes) * 0.8
        assert engine.residency.resident <= BUDGET
        assert int(_info(engine, "memory")["list_nodes_cold"]) == _cold_nodes(value)
        assert engine.execute("LINDEX", "q", ELEMENTS // 2) == _element(ELEMENTS // 2)


def test_a_restart_with_a_budget_loads_the_list_cold(list_compacted) -> None:
    model = [_element(i) for i in range(ELEMENTS)]
    with Engine.open(list_compacted, backlog_memory=BUDGET) as engine:
        value = _list_value(engine)
        assert _cold_nodes(value) == len(value.nodes) - 2  # only its ends were read
        assert engine.residency.resident <= BUDGET
        assert engine.execute("LINDEX", "q", 123_456) == model[123_456]
        assert engine.execute("LRANGE", "q", 0, -1) == model  # (read, left cold)
        assert _cold_nodes(value) >= len(value.nodes) - 3
        assert engine.execute("LPOP", "q") == model.pop(0)
        assert engine.execute("RPOP", "q") == model.pop()
        engine.execute("RPUSH", "q", "new")
        model.append(b"new")
        assert engine.execute("LRANGE", "q", -3, -1) == model[-3:]
    with Engine.open(list_compacted, backlog_memory=BUDGET) as engine:  # the AOF replayed on top
        assert engine.execute("LRANGE", "q", 0, -1) == model


def _each_command(engine: Engine, model: list[bytes]) -> None:
    """Every list command over cold nodes, each reply checked against `model` (changed as
    the command changes the list)."""
    def check() -> None:
        engine.execute("PING")  # (evicts: changed nodes must not go cold stale)
        assert engine.execute("LLEN", "q") == len(model)
        for i in (0, 1, 4095, 77_777, len(model) // 2, len(model) - 2, len(model) - 1):
            assert engine.execute("LINDEX", "q", i) == model[i], i

    assert engine.execute("LRANGE", "q", 50_000, 50_099) == model[50_000:50_100]
    assert engine.execute("LRANGE", "q", -60_000, -59_990) == model[-60_000:-59_989]
    assert engine.execute("LPOS", "q", _element(150_000)) == model.index(_element(150_000))
    assert engine.execute("LPOS", "q", _element(42), "RANK", -1) == 42
    assert engine.execute("LSET", "q", 100_000, "changed") == "OK"
    model[100_000] = b"changed"
    check()
    at = model.index(_element(120_000))
    assert engine.execute("LINSERT", "q", "BEFORE", _element(120_000), "inserted") == \
        len(model) + 1
    model.insert(at, b"inserted")
    check()
    engine.execute("LSET", "q", 130_000, "dup")
    engine.execute("LSET", "q", 140_000, "dup")
    model[130_000] = model[140_000] = b"dup"
    assert engine.execute("LREM", "q", 0, "dup") == 2
    model[:] = [x for x in model if x != b"dup"]
    check()
    assert engine.execute("LREM", "q", -1, _element(170_000)) == 1
    model.remove(_element(170_000))
    check()
    assert engine.execute("LTRIM", "q", 10_000, -10_001) == "OK"
    model[:] = model[10_000:-10_000]
    check()
    assert engine.execute("LPOP", "q", 5_000) == model[:5_000]
    del model[:5_000]
    check()
    assert engine.execute("LRANGE", "q", 0, -1) == model


def test_every_command_reads_and_changes_cold_nodes(tmp_path) -> None:
    with Engine.open(str(tmp_path / "cold"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine, \
            Engine.open(str(tmp_path / "plain"), auto_aof_rewrite_percentage=0) as plain:
        model = _fill_list(engine)
        _fill_list(plain)
        engine.compact()
        plain.compact()
        engine.execute("PING")
        assert _cold_nodes(_list_value(engine)) > len(_list_value(engine).nodes) // 2
        assert engine.execute("DUMP", "q") == plain.execute("DUMP", "q")
        assert lists.to_bytes(_list_value(engine)) == lists.to_bytes(_list_value(plain))
        assert engine.execute("MEMORY", "USAGE", "q") == plain.execute("MEMORY", "USAGE", "q")
        plain_model = list(model)
        _each_command(engine, model)
        _each_command(plain, plain_model)  # (the same steps, from the same state)
        assert plain_model == model
        assert engine.digest() == plain.digest()
        assert engine.execute("DUMP", "q") == plain.execute("DUMP", "q")
        engine.compact()  # the changed nodes are in the new snapshot: they may go cold now
        engine.execute("PING")
        assert _cold_nodes(_list_value(engine)) > len(_list_value(engine).nodes) // 2
        assert engine.execute("LRANGE", "q", 0, -1) == model
        # RPOP to the end: every cold node read back as it becomes the tail
        popped = []
        while (item := engine.execute("RPOP", "q", 997)) is not None:
            popped.extend(item)
        assert popped == model[::-1]
        assert engine.execute("EXISTS", "q") == 0
    with Engine.open(str(tmp_path / "cold"), backlog_memory=BUDGET) as engine:
        assert engine.execute("EXISTS", "q") == 0


def test_copy_rename_and_delete_keep_cold_nodes_right(tmp_path) -> None:
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine:
        model = _fill_list(engine)
        engine.compact()
        engine.execute("PING")
        assert engine.execute("COPY", "q", "c") == 1
        copied = _list_value(engine, b"c")
        assert _cold_nodes(copied) == _cold_nodes(_list_value(engine)) > 0
        engine.execute("LSET", "c", 100_000, "copy's")
        assert engine.execute("LINDEX", "q", 100_000) == model[100_000]
        assert engine.execute("LINDEX", "c", 100_000) == b"copy's"
        assert engine.execute("RENAME", "q", "r") == "OK"
        assert engine.execute("LRANGE", "r", 0, -1) == model
        engine.execute("DEL", "r")
        engine.execute("PING")
        assert engine.execute("LRANGE", "c", 99_999, 100_000) == [model[99_999], b"copy's"]


def test_a_node_changed_after_it_was_queued_does_not_go_cold_stale(tmp_path) -> None:
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=1 << 30) as engine:
        model = _fill_list(engine)
        engine.compact()  # every middle node queued, none cold (within the budget)
        value = _list_value(engine)
        assert _cold_nodes(value) == 0
        engine.execute("LSET", "q", 100_000, "changed")  # a queued node changes in place
        model[100_000] = b"changed"
        engine.execute("CONFIG", "SET", "backlog-memory", "64kb")
        engine.execute("PING")
        assert _cold_nodes(value) > len(value.nodes) // 2
        assert engine.execute("LINDEX", "q", 100_000) == b"changed"
        assert engine.execute("LRANGE", "q", 0, -1) == model
        assert int(_info(engine, "memory")["backlog_unsaved_bytes"]) > 0  # it waits


def test_a_compaction_points_cold_nodes_at_the_new_snapshot(tmp_path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path, auto_aof_rewrite_percentage=0, backlog_memory=BUDGET) as engine:
        model = _fill_list(engine)
        engine.compact()
        engine.execute("PING")
        value = _list_value(engine)
        first = {id(node.store) for node in value.nodes if isinstance(node, ColdValueNode)}
        engine.execute("RPUSH", "q", "more")
        model.append(b"more")
        engine.compact()
        engine.execute("PING")
        stores = {id(node.store) for node in value.nodes if isinstance(node, ColdValueNode)}
        assert stores and not stores & first
        assert engine.execute("LRANGE", "q", 0, -1) == model
        held = [node for node in value.nodes if isinstance(node, ColdValueNode)]
    # Closing the engine lets go of every store cold list nodes refer to.
    assert held and all(node.store.identities == [] for node in held)  # type: ignore[attr-defined]


def _damage_a_chunk(path: str) -> str:
    """Flip a byte inside a list chunk's value in the part file holding it (its size kept:
    every copy of the element there, a page LMDB left unused may hold one too); returns that
    file's name."""
    needle = _element(100_001)
    for name in sorted(glob.glob(os.path.join(path, "*.mdb"))):
        with open(name, "rb") as f:
            data = bytearray(f.read())
        at = data.find(needle)
        if at < 0:
            continue
        while at >= 0:
            data[at + len(needle) - 1] ^= 0x01
            at = data.find(needle, at + 1)
        with open(name, "r+b") as f:
            f.write(data)
        return os.path.basename(name)
    raise AssertionError("no chunk holds the element")


def test_a_damaged_chunk_is_refused_naming_the_file(list_compacted, tmp_path) -> None:
    damaged = str(tmp_path / "damaged")
    shutil.copytree(list_compacted, damaged)
    name = _damage_a_chunk(damaged)
    with Engine.open(damaged, backlog_memory=BUDGET) as engine:  # lazy: the middle unread
        assert engine.execute("LINDEX", "q", 0) == _element(0)
        value = _list_value(engine)
        bad = [node for node in value.nodes if isinstance(node, ColdValueNode)
               and node.chunk == _chunk_of(value, 100_001)]
        assert bad
        with pytest.raises(StorageError, match=f"{name}.*table chunks.*checksum mismatch"):
            bad[0].read()
        # A command reading it fails with the error line, the list unchanged.
        with pytest.raises(ReplyError, match=f"{name}.*table chunks.*checksum mismatch"):
            engine.execute("LRANGE", "q", 0, -1)
        assert engine.execute("LINDEX", "q", 0) == _element(0)
        assert engine.execute("LLEN", "q") == ELEMENTS


def _chunk_of(value: lists.QuickList, index: int) -> int:
    """The chunk of the cold node holding element `index`."""
    for node in value.nodes:
        count = node.count if isinstance(node, ColdValueNode) else lists.length(node)
        if index < count:
            assert isinstance(node, ColdValueNode)
            return node.chunk
        index -= count
    raise IndexError(index)


def test_the_snapshot_indexes_each_list_chunk(list_compacted) -> None:
    path = glob.glob(os.path.join(list_compacted, "snapshot-*.mdb"))[0]
    with Snapshot(path) as snap:
        (row,) = [r for r in snap.key_rows() if r.key == b"q"]
        assert row.chunked is not None
        index = list(snap.list_node_index(row))
        assert len(index) == row.chunked.chunks
        assert sum(count for *_where, nodes in index for _h, _s, count in nodes) == ELEMENTS
    assert layout.decode_list_nodes(layout.encode_list_nodes([(b"h" * 16, 2, 3)])) == [
        (b"h" * 16, 2, 3)]


def test_a_snapshot_without_an_index_keeps_the_list_resident(list_compacted, tmp_path) -> None:
    """An older snapshot's chunks have no listnodes rows: the list loads whole, nothing cold."""
    import lmdb

    old = str(tmp_path / "old")
    shutil.copytree(list_compacted, old)
    for name in glob.glob(os.path.join(old, "*.mdb")):
        env = lmdb.open(name, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
        with env.begin(write=True) as txn, contextlib.suppress(lmdb.NotFoundError):
            txn.drop(env.open_db(b"listnodes", txn=txn, create=False), delete=True)
        env.close()
    with Engine.open(old, backlog_memory=BUDGET, auto_aof_rewrite_percentage=0) as engine:
        value = _list_value(engine)
        assert _cold_nodes(value) == 0
        engine.execute("PING")
        assert _cold_nodes(value) == 0
        assert engine.execute("LLEN", "q") == ELEMENTS


def test_random_list_commands_over_cold_nodes_match_a_python_list(tmp_path) -> None:
    """Random pushes, pops, sets, inserts, removals, trims and reads of a list whose nodes go
    cold between commands, compactions among them, then a restart: a Python list agrees."""
    rng = random.Random(7)
    path = str(tmp_path / "data")
    options = {"auto_aof_rewrite_percentage": 0, "backlog_memory": "16kb",
               "list_max_listpack_size": 32}
    with Engine.open(path, **options) as engine:
        model = _fill_list(engine, count=20_000)
        engine.compact()
        for step in range(600):
            size = len(model)
            op = rng.randrange(10)
            at = rng.randrange(size)
            if op == 0:
                items = [b"new-%d-%d" % (step, i) for i in range(rng.randrange(1, 40))]
                engine.execute("RPUSH" if step % 2 else "LPUSH", "q", *items)
                model[:] = model + items if step % 2 else items[::-1] + model
            elif op == 1:
                count = rng.randrange(1, 50)
                got = engine.execute("LPOP" if step % 2 else "RPOP", "q", count)
                expected = model[:count] if step % 2 else model[::-1][:count]
                assert got == expected
                model[:] = model[count:] if step % 2 else model[:-count]
            elif op == 2:
                engine.execute("LSET", "q", at, b"set-%d" % step)
                model[at] = b"set-%d" % step
            elif op == 3:
                pivot = model[at]
                where = model.index(pivot) + (step % 2)
                engine.execute("LINSERT", "q", "AFTER" if step % 2 else "BEFORE", pivot,
                               b"ins-%d" % step)
                model.insert(where, b"ins-%d" % step)
            elif op == 4:
                item = model[at]
                assert engine.execute("LREM", "q", 1, item) == 1
                model.remove(item)
            elif op == 5 and size > 4000:
                start, stop = rng.randrange(50), rng.randrange(50)
                engine.execute("LTRIM", "q", start, -1 - stop)
                model[:] = model[start:size - stop]
            elif op == 6:
                stop = min(at + rng.randrange(2000), size - 1)
                assert engine.execute("LRANGE", "q", at, stop) == model[at:stop + 1]
            elif op == 7:
                assert engine.execute("LPOS", "q", model[at]) == model.index(model[at])
            else:
                assert engine.execute("LINDEX", "q", at) == model[at]
            if step % 150 == 149:
                engine.compact()
        assert engine.execute("LRANGE", "q", 0, -1) == model
        info = _info(engine, "memory")
        assert int(info["list_nodes_cold"]) > 0 and int(info["stream_nodes_loaded"]) > 1000
    with Engine.open(path, **options) as engine:
        assert engine.execute("LRANGE", "q", 0, -1) == model


# --- big hashes' and sets' bucket tables: cold runs ------------------------------------------
# Under a budget a big hash's or set's runs of buckets that the current snapshot holds exactly
# go cold; a read takes one bucket back from the snapshot and leaves the run cold, a write makes
# the run resident again; a restart under a budget reads no run (but those holding field TTLs);
# a compaction points the cold runs at the new file. Every reply is checked against a model and
# against an engine that keeps everything resident.

FIELDS = 60_000
MEMBERS = 40_000


def _fill_tables(engine: Engine, fields: int = FIELDS, members: int = MEMBERS) -> dict[bytes, bytes]:
    model = {}
    for first in range(0, fields, 2000):
        args: list[bytes] = []
        for i in range(first, min(first + 2000, fields)):
            model[b"field-%d" % i] = b"value-%d" % i
            args += [b"field-%d" % i, b"value-%d" % i]
        engine.execute("HSET", "h", *args)
    for first in range(0, members, 2000):
        engine.execute("SADD", "s", *[b"m%d" % i for i in range(first, min(first + 2000,
                                                                              members))])
    return model


def _table(engine: Engine, key: bytes = b"h", vt=HASH) -> BucketTable:
    table = engine.keyspaces[vt.slot][0][key].table()
    assert isinstance(table, BucketTable)
    return table


def _cold_runs(table: BucketTable) -> int:
    home = table.home
    return 0 if home is None else sum(table.buckets[run.first] is COLD for run in home.runs)


def _pairs(reply: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(reply[::2], reply[1::2], strict=True))


@pytest.fixture
def tables_compacted(tmp_path) -> tuple[str, dict[bytes, bytes], str]:
    """A directory holding the hash `h` (one field with a TTL) and the set `s`, compacted
    with no budget; the hash's model and the state's digest."""
    path = str(tmp_path / "data")
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        model = _fill_tables(engine)
        engine.execute("HEXPIRE", "h", 100_000, "FIELDS", 1, "field-7")
        engine.compact()
        return path, model, engine.digest()


def test_a_compaction_lets_the_runs_it_holds_go_cold(tmp_path) -> None:
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine:
        model = _fill_tables(engine)
        table = _table(engine)
        assert table.home is None  # nothing is in a snapshot yet
        engine.compact()
        engine.execute("PING")  # (eviction runs between commands)
        home = table.home
        assert home is not None and len(home.runs) > 50
        assert _cold_runs(table) > len(home.runs) * 0.8
        assert engine.residency.resident <= BUDGET
        assert table.nbytes < BUDGET  # what stays of the table's packs
        info = _info(engine, "memory")
        assert int(info["hash_runs_cold"]) == _cold_runs(table) == home.cold_runs
        assert int(info["hash_elements_cold"]) == sum(
            run.elements for run in home.runs if table.buckets[run.first] is COLD)
        assert int(info["set_runs_cold"]) == _cold_runs(_table(engine, b"s", SET)) > 0
        assert engine.execute("HLEN", "h") == FIELDS
        assert _pairs(engine.execute("HGETALL", "h")) == model
        assert engine.execute("SCARD", "s") == MEMBERS
        assert engine.execute("SISMEMBER", "s", "m39999") == 1


def test_a_read_leaves_its_run_cold_and_a_write_makes_it_resident(tmp_path) -> None:
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine:
        _fill_tables(engine)
        engine.compact()
        engine.execute("PING")
        table = _table(engine)
        assert table.home is not None
        cold = table.home.cold_runs
        loads = engine.residency.loads
        assert engine.execute("HGET", "h", "field-4242") == b"value-4242"
        assert engine.execute("HEXISTS", "h", "no-such-field") == 0
        assert engine.execute("HDEL", "h", "no-such-field") == 0  # (a miss changes nothing)
        assert table.home.cold_runs == cold and engine.residency.loads > loads
        i = table.slot(b"field-4242")
        assert table.buckets[i] is COLD
        engine.execute("HSET", "h", "field-4242", "changed")
        assert table.buckets[i] is not COLD and table.home.cold_runs == cold - 1
        engine.execute("CONFIG", "SET", "backlog-memory", "1")  # (every clean run goes)
        engine.execute("PING")  # changed since the snapshot: it stays resident, and waits
        assert table.buckets[i] is not COLD
        assert engine.execute("HGET", "h", "field-4242") == b"changed"
        assert int(_info(engine, "memory")["backlog_unsaved_bytes"]) > 0
        engine.compact()  # the snapshot holds the change: the run may go now
        engine.execute("PING")
        assert table.buckets[i] is COLD
        assert all(b is COLD for b in table.buckets)
        assert engine.execute("HGET", "h", "field-4242") == b"changed"


def test_a_changed_run_no_snapshot_takes_again_stays_resident_and_asks_no_more(tmp_path
                                                                              ) -> None:
    """A table that stops being chunked (most of its fields deleted) is not bound to the next
    snapshot: its changed runs stop waiting for one (they stay resident) instead of asking for
    compaction after compaction."""
    with Engine.open(str(tmp_path / "data"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine:
        model = _fill_tables(engine)
        engine.compact()
        engine.execute("PING")
        table = _table(engine)
        home = table.home
        assert home is not None and home.cold_runs > 0
        engine.execute("CONFIG", "SET", "backlog-memory", "1")
        gone = [b"field-%d" % i for i in range(0, FIELDS) if i % 20]
        for first in range(0, len(gone), 2000):
            engine.execute("HDEL", "h", *gone[first:first + 2000])
        for field in gone:
            del model[field]
        engine.execute("PING")  # (changed since the snapshot: they wait, and ask for one)
        assert int(_info(engine, "memory")["backlog_unsaved_bytes"]) > 0
        # (a compaction the pressure started during the HDELs may bind the table again to a
        # snapshot still holding it chunked: this one waits for it, and holds the hash as one
        # keys row)
        engine.compact()
        before = table.home
        engine.execute("PING")  # (found changed again, after the snapshot that left it out)
        engine.execute("SET", "another", "write")  # (so that the next compaction rotates)
        engine.compact()  # (the hash is one keys row: its table is not bound again)
        assert table.home is before
        engine.execute("PING")
        assert int(_info(engine, "memory")["backlog_unsaved_bytes"]) == 0
        assert not engine.residency.waiting
        assert _pairs(engine.execute("HGETALL", "h")) == model


def test_a_restart_with_a_budget_reads_no_run(tables_compacted) -> None:
    path, model, digest = tables_compacted
    with Engine.open(path, backlog_memory=BUDGET) as engine:
        table = _table(engine)
        home = table.home
        assert home is not None
        assert home.cold_runs == len(home.runs) and table.nbytes == len(table.buckets)
        assert engine.residency.loads == 0  # (the TTL's run was read, not made resident)
        assert engine.execute("HTTL", "h", "FIELDS", 1, "field-7")[0] > 0
        assert engine.execute("HGET", "h", "field-59999") == b"value-59999"
        assert engine.digest() == digest
        assert _pairs(engine.execute("HGETALL", "h")) == model
        assert home.cold_runs == len(home.runs)  # (a scan reads, it leaves them cold)
        assert _cold_runs(_table(engine, b"s", SET)) == len(_table(engine, b"s", SET).home.runs)
    with Engine.open(path) as engine:  # no budget: loaded whole, as before
        assert _table(engine).home is None
        assert engine.digest() == digest


def _hash_step(engine: Engine, plain: Engine, model: dict[bytes, bytes], rng: random.Random
               ) -> None:
    """One random hash command on both engines: the same reply, and the model kept."""
    field = b"field-%d" % rng.randrange(FIELDS + 500)
    op = rng.randrange(8)
    if op == 0:
        command = ["HSET", "h", field, b"v%d" % rng.randrange(1000)]
        model[field] = command[3]
    elif op == 1:
        command = ["HDEL", "h", field]
        model.pop(field, None)
    elif op == 2:
        command = ["HINCRBY", "h", b"counter-%d" % rng.randrange(50), 3]
        model[command[2]] = b"%d" % (int(model.get(command[2], b"0")) + 3)
    elif op == 3:
        command = ["HMGET", "h", field, b"field-%d" % rng.randrange(FIELDS)]
    elif op == 4:
        command = ["HSTRLEN", "h", field]
    elif op == 5:
        command = ["HSCAN", "h", rng.randrange(20_000), "COUNT", 50]
    elif op == 6:
        command = ["HRANDFIELD", "h", -5]  # (random: compared by membership below)
    else:
        command = ["HGETDEL", "h", "FIELDS", 1, field]
        model.pop(field, None)
    got, want = engine.execute(*command), plain.execute(*command)
    if op == 6:
        assert len(got) == 5 and all(f in model for f in got)
    else:
        assert got == want, command


def _set_step(engine: Engine, plain: Engine, members: set[bytes], rng: random.Random) -> None:
    member = b"m%d" % rng.randrange(MEMBERS + 500)
    op = rng.randrange(6)
    if op == 0:
        command = ["SADD", "s", member]
        members.add(member)
    elif op == 1:
        command = ["SREM", "s", member]
        members.discard(member)
    elif op == 2:
        command = ["SMISMEMBER", "s", member, b"m%d" % rng.randrange(MEMBERS)]
    elif op == 3:
        command = ["SSCAN", "s", rng.randrange(20_000), "COUNT", 40]
    elif op == 4:
        command = ["SRANDMEMBER", "s", 3]
    else:
        command = ["SCARD", "s"]
    got, want = engine.execute(*command), plain.execute(*command)
    if op == 4:
        assert len(got) == 3 and all(m in members for m in got)
    else:
        assert got == want, command


def test_random_commands_over_cold_runs_match_a_resident_engine(tmp_path) -> None:
    rng = random.Random(75)
    with Engine.open(str(tmp_path / "cold"), auto_aof_rewrite_percentage=0,
                     backlog_memory=BUDGET) as engine, \
            Engine.open(str(tmp_path / "plain"), auto_aof_rewrite_percentage=0) as plain:
        model = _fill_tables(engine)
        _fill_tables(plain)
        members = {b"m%d" % i for i in range(MEMBERS)}
        for round_ in range(4):
            engine.compact()
            engine.execute("PING")
            assert _cold_runs(_table(engine)) > 0 and _cold_runs(_table(engine, b"s", SET)) > 0
            assert engine.execute("DUMP", "h") == plain.execute("DUMP", "h")
            assert engine.execute("MEMORY", "USAGE", "s") > 0
            for _ in range(400):
                _hash_step(engine, plain, model, rng)
                _set_step(engine, plain, members, rng)
            assert engine.digest() == plain.digest(), round_
        assert _pairs(engine.execute("HGETALL", "h")) == model
        assert set(engine.execute("SMEMBERS", "s")) == members
        assert engine.execute("COPY", "h", "c") == 1  # a copy of a cold table is resident
        assert _cold_runs(_table(engine, b"c")) == 0
        assert _pairs(engine.execute("HGETALL", "c")) == model
        engine.execute("RESTORE", "r", 0, engine.execute("DUMP", "s"))
        assert set(engine.execute("SMEMBERS", "r")) == members
        digest = engine.digest()
    with Engine.open(str(tmp_path / "cold"), backlog_memory=BUDGET) as engine:
        assert engine.digest() == digest


def test_a_compaction_points_cold_runs_at_the_new_snapshot(tmp_path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path, auto_aof_rewrite_percentage=0, backlog_memory=BUDGET) as engine:
        model = _fill_tables(engine)
        engine.compact()
        engine.execute("PING")
        table = _table(engine)
        assert table.home is not None
        first = table.home.runs[0].store
        engine.execute("HSET", "h", "one", "more")
        model[b"one"] = b"more"
        engine.compact()
        engine.execute("PING")
        assert table.home.runs[0].store is not first
        assert _cold_runs(table) > len(table.home.runs) * 0.8
        assert _pairs(engine.execute("HGETALL", "h")) == model
        held = table.home.runs
    # Closing the engine lets go of every store cold runs refer to.
    assert all(run.store.identities == [] for run in held)  # type: ignore[attr-defined]


def test_a_data_directory_four_times_the_budget_opens_serves_and_compacts(tmp_path) -> None:
    """Values of about 4x the budget: opened under it, every command served, compacted, and
    what the engine keeps of them stays within it."""
    path = str(tmp_path / "data")
    budget = 1 << 20
    with Engine.open(path, auto_aof_rewrite_percentage=0) as engine:
        model = _fill_tables(engine, fields=150_000, members=120_000)
        engine.compact()
        stored = _table(engine).nbytes + _table(engine, b"s", SET).nbytes
        assert stored > 4 * budget
        digest = engine.digest()
    with Engine.open(path, auto_aof_rewrite_percentage=0, backlog_memory=budget) as engine:
        tables = [_table(engine), _table(engine, b"s", SET)]
        assert sum(t.nbytes for t in tables) <= budget
        assert engine.digest() == digest
        assert _pairs(engine.execute("HGETALL", "h")) == model
        for i in range(0, 150_000, 997):
            assert engine.execute("HGET", "h", b"field-%d" % i) == b"value-%d" % i
            engine.execute("HSET", "h", b"field-%d" % i, b"new-%d" % i)
            model[b"field-%d" % i] = b"new-%d" % i
        engine.execute("SREM", "s", *[b"m%d" % i for i in range(0, 120_000, 5)])
        engine.execute("PING")  # (what changed waits for the snapshot: it asks for one)
        assert int(_info(engine, "memory")["backlog_unsaved_bytes"]) > 0
        engine.compact()
        engine.execute("PING")
        assert engine.residency.resident <= budget
        assert sum(t.nbytes for t in tables) <= budget
        assert _pairs(engine.execute("HGETALL", "h")) == model
        assert engine.execute("SCARD", "s") == 96_000
        digest = engine.digest()
    with Engine.open(path) as engine:
        assert engine.digest() == digest


def test_the_snapshot_indexes_each_run_of_a_table(tables_compacted) -> None:
    path, _model, _digest = tables_compacted
    name = next(f for f in os.listdir(path) if f.startswith("snapshot-"))
    with Snapshot(os.path.join(path, name)) as snap:
        row = next(r for r in snap.key_rows() if r.key == b"h")
        found = list(snap.table_run_index(row))
        assert row.chunked is not None and len(found) == row.chunked.chunks
        assert sum(run.elements for *_at, run in found) == FIELDS
        assert [run.extras for *_at, run in found].count(1) == 1  # the one field TTL
        # (each chunk's place in its file: a cold run's read is one pread there)
        assert all(run.offset > 0 and run.stored > run.nbytes for *_at, run in found)
        at = 0
        for _part, number, chunk, run in found:
            assert run.first == at
            at += run.buckets
            body = layout.unseal("chunks", layout.chunk_key(number, chunk),
                                 snap.parts[0].chunk_stored(number, chunk)
                                 if snap.parts else snap.chunk_stored(number, chunk))
            assert body is not None
        assert at == found[0][3].size + found[0][3].split


def test_a_damaged_run_is_refused_naming_the_file(tables_compacted) -> None:
    path, _model, _digest = tables_compacted
    with Engine.open(path, backlog_memory=BUDGET) as engine:
        table = _table(engine)
        assert table.home is not None
        run = table.home.runs[3]
        assert len(run.read()) == run.buckets  # (kept read: another run's hash reads again)
        bad = ColdRun(run.store, run.part, run.number, run.chunk, run.first, run.buckets,
                      run.elements, run.size, bytes(16))  # (another hash than the chunk's)
        with pytest.raises(StorageError, match="not the table run recorded"):
            bad.read()
        assert run.offset > 0
        moved = ColdRun(run.store, run.part, run.number, run.chunk, run.first, run.buckets,
                        run.elements, run.size, run.hash, run.extras, run.offset + 1,
                        run.stored)  # (a place off by a byte)
        with pytest.raises(StorageError, match="undecodable value|not the table run recorded"):
            moved.read()
        with pytest.raises(StorageError, match="checksum mismatch"):
            run.store.table_run_chunk(moved)  # (what keeps the TTLs: its checksum fails too)
        assert len(run.read()) == run.buckets  # (the right place still reads)
        # A byte in the middle of another run's packs changed in its file: the packs' hash
        # tells (no checksum is computed).
        other = table.home.runs[4]
        with Snapshot(_snapshot_path_of(path)) as snap:
            file = snap.parts[other.part].path if other.part >= 0 else snap.path
        with open(file, "r+b") as f:
            f.seek(other.offset + other.stored // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x01]))
        with pytest.raises(StorageError, match="undecodable value|not the table run recorded"):
            other.read()


def test_an_index_claiming_more_buckets_than_its_file_holds_is_refused(tables_compacted
                                                                        ) -> None:
    """A damaged tableruns row (checksum recomputed: a forgery) naming billions of buckets
    is refused with an error naming the file, before anything is allocated for them."""
    import lmdb

    path, _model, _digest = tables_compacted
    with Snapshot(_snapshot_path_of(path)) as snap:
        row = next(r for r in snap.key_rows() if r.key == b"s")
        part, number, chunk, run = list(snap.table_run_index(row))[-1]
        file = snap.parts[part].path if part >= 0 else snap.path
    key = layout.chunk_key(number, chunk)
    forged = run._replace(buckets=run.buckets + (1 << 40), nbytes=run.nbytes + (1 << 40))
    env = lmdb.open(file, subdir=False, max_dbs=layout.MAX_TABLES, lock=False)
    try:
        with env.begin(write=True, db=env.open_db(b"tableruns")) as txn:
            txn.put(key, layout.seal("tableruns", key, layout.encode_table_run(forged)))
    finally:
        env.close()
    store = SnapshotNodes(_snapshot_path_of(path), 0)  # (no manifest: its sizes would tell)
    try:
        with pytest.raises(SnapshotError, match="buckets recorded"):
            store.table_runs(0, b"s")
    finally:
        store.close()


def _forge_run_row(path: str, key_name: bytes, change: dict[str, Any]) -> tuple[str, int]:
    """Rewrite the last tableruns row of key `key_name` with `change` (its check recomputed:
    a forgery); the file holding it and the row's chunk index."""
    import lmdb

    with Snapshot(_snapshot_path_of(path)) as snap:
        row = next(r for r in snap.key_rows() if r.key == key_name)
        part, number, chunk, run = list(snap.table_run_index(row))[-1]
        file = snap.parts[part].path if part >= 0 else snap.path
    key = layout.chunk_key(number, chunk)
    env = lmdb.open(file, subdir=False, max_dbs=layout.MAX_TABLES, lock=False)
    try:
        with env.begin(write=True, db=env.open_db(b"tableruns")) as txn:
            txn.put(key, layout.seal("tableruns", key,
                                     layout.encode_table_run(run._replace(**change))))
    finally:
        env.close()
    return file, chunk


@pytest.mark.parametrize(("change", "says"), [
    ({"hash": b"\x00" * 16}, "describes another run than its chunk holds"),
    ({"elements": 1}, "describes another run than its chunk holds"),
    ({"offset": 0}, "places its chunk at offset 0"),
], ids=["hash", "elements", "offset"])
def test_the_snapshots_check_compares_each_run_row_with_its_chunk(
        tables_compacted, change: dict[str, Any], says: str) -> None:
    """`verify --deep`'s check of a snapshot reads every tableruns row's chunk: a row that
    does not describe it (a forgery: its check recomputed) is reported naming the file, the
    table and the chunk."""
    path, _model, _digest = tables_compacted
    with Snapshot(_snapshot_path_of(path)) as snap:
        assert snap.check() == []
    file, chunk = _forge_run_row(path, b"s", change)
    with Snapshot(_snapshot_path_of(path)) as snap:
        problems = snap.check()
    assert len(problems) == 1 and problems[0].startswith(file), problems
    assert f"table tableruns, key 's' (db 0), chunk {chunk}: {says}" in problems[0], problems


def test_runs_are_cut_where_they_were(tmp_path) -> None:
    """A table written, changed in one bucket, written again: every run but that bucket's is
    the same run (a cold one stays pointed at the new file)."""
    table = BucketTable(2, 0)
    for i in range(50_000):
        table.put(b"field-%d" % i, b"value-%d" % i)
    cut = Cut(4096, 64 << 10)
    before = [run for _body, _n, run in table_chunks(table, cut, lambda _start, _end: [])]
    table.put(b"field-7", b"changed")
    after = [run for _body, _n, run in table_chunks(table, cut, lambda _start, _end: [])]
    assert len(before) == len(after) > 10
    changed = [a for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 1 and changed[0].first <= table.slot(b"field-7") < \
        changed[0].first + changed[0].buckets
    assert run_buckets(table, cut) & (run_buckets(table, cut) - 1) == 0  # a power of two


class _Store:
    """Runs kept in memory, as a snapshot would hold them."""

    def __init__(self) -> None:
        self.packs: dict[int, list[bytes]] = {}
        self.reads = 0

    def table_run(self, run: ColdRun) -> list[bytes]:
        self.reads += 1
        return self.packs[run.first]

    def close(self) -> None:
        pass


def _bound(budget: int) -> tuple[BucketTable, Residency, _Store]:
    table = BucketTable(1, 0)
    for i in range(5_000):
        table.add(b"member-%d" % i)
    store = _Store()
    runs = []
    for first in range(0, len(table.buckets), 64):
        packs = table.buckets[first:first + 64]
        store.packs[first] = list(packs)
        runs.append(ColdRun(store, -1, 1, first // 64, first, len(packs),
                            sum(pack_count(b, 1) for b in packs), sum(map(len, packs)),
                            run_hash(packs)))
    residency = Residency(budget)
    assert residency.bind_table(table, TableIndex(table.seed, table.size, table.split,
                                                  runs)) is not None
    return table, residency, store


def test_a_table_reads_through_its_cold_buckets() -> None:
    table, residency, store = _bound(1)
    residency.evict()
    assert all(b is COLD for b in table.buckets) and table.nbytes == len(table.buckets)
    assert b"member-17" in table and b"member-5000" not in table
    assert store.reads == 2 and all(b is COLD for b in table.buckets)
    assert sorted(table.keys()) == sorted(b"member-%d" % i for i in range(5_000))
    assert table.add(b"member-5000") and table.pop(b"member-3") == b"member-3"
    assert table.count == 5_000
    resident = [b for b in table.buckets if b is not COLD]
    assert 0 < len(resident) <= 128 and table.nbytes == sum(map(len, table.buckets))
    twin = table.copy()
    assert COLD not in twin.buckets and sorted(twin.keys()) == sorted(table.keys())


def test_a_table_placed_otherwise_is_not_bound() -> None:
    table = BucketTable(1, 0, seed=bytes(16))
    table.add(b"x")
    assert Residency(1).bind_table(table, TableIndex(b"\x01" * 16, 1, 0, [
        ColdRun(_Store(), -1, 1, 0, 0, 1, 1, len(table.buckets[0]),
                run_hash(table.buckets))])) is None
    assert table.home is None


def test_a_tableruns_row_round_trips_and_bad_ones_are_refused() -> None:
    row = layout.TableRunRow(bytes(16), 8, 3, 0, 4, 20, 300, bytes(range(16)), 1)
    assert layout.decode_table_run(layout.encode_table_run(row)) == row
    for bad in (row._replace(hash=b"short"), row._replace(buckets=0),
                row._replace(elements=-1)):
        with pytest.raises(ValueError):
            layout.decode_table_run(layout.encode_table_run(bad))
    with pytest.raises(ValueError):
        layout.decode_table_run(b"\x93\x01\x02\x03")
    assert build_pack([[b"a"]]) != COLD
