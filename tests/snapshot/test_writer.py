"""snapshot.writer: an engine's state written to a real LMDB file and read back with the reader
(snapshot.reader): the meta, every stream's metadata, entries, groups, consumers,
pending entries (a released one included) and idempotent producers; every value sealed under
its key; the numbering of streams; the whole-file checksum; and cold nodes copied as stored,
without being read back."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.engine.model import lists
from streamkeep.engine.model.list_node import node_count
from streamkeep.engine.model.residency import value_node_hash
from streamkeep.engine.model.value_types import LIST
from streamkeep.snapshot import layout
from streamkeep.snapshot.layout import ID
from streamkeep.snapshot.reader import Snapshot
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.writer import SnapshotInfo, stream_numbers, write_snapshot
from tests.support.snapshot_util import body, stored_values, varied_engine

REPL_ID = "ab" * 20


def written(engine: Engine, path: Path, lsn: int = 77) -> SnapshotInfo:
    return write_snapshot(engine.dbs, str(path), lsn, 1700000000123, REPL_ID,
                          values=engine.keyspaces, expires=engine.expires)


def kv(reply: list) -> dict:
    return dict(zip(reply[0::2], reply[1::2], strict=True))


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, str, SnapshotInfo]:
    engine = varied_engine()
    engine.execute("SET", "greeting", "hello", "PXAT", "99999")  # the keys table: a string
    engine.execute("PEXPIRE", "audit", "5000")  # a stream's TTL
    path = tmp_path_factory.mktemp("writer") / "snapshot.mdb"
    return engine, str(path), written(engine, path)


def test_info_counts_and_the_whole_file_checksum(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    engine, path, info = varied
    assert (info.lsn, info.streams) == (77, 4)
    assert info.entries == sum(s.length for db in engine.dbs for s in db.values())
    with open(path, "rb") as f:
        assert info.crc32 == zlib.crc32(f.read())


def test_without_checksum_nothing_is_read_back(tmp_path: Path) -> None:
    engine = varied_engine()
    info = write_snapshot(engine.dbs, str(tmp_path / "s.mdb"), 5, 1, REPL_ID, checksum=False)
    assert info == SnapshotInfo(5, 4, info.entries, None)


def test_meta(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    _engine, path, info = varied
    with Snapshot(path) as snap:
        meta = snap.meta
    assert (meta.format, meta.version) == (layout.FORMAT, layout.VERSION)
    assert (meta.lsn, meta.repl_offset, meta.created_ms, meta.repl_id) == \
        (77, 77, 1700000000123, REPL_ID)
    assert (meta.streams, meta.entries) == (info.streams, info.entries)


def test_streams_and_their_entries(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    engine, path, _info = varied
    with Snapshot(path) as snap:
        infos = snap.streams()
        assert [(i.db, i.key) for i in infos] == \
            [(0, b"audit"), (0, b"orders"), (2, b"bin\x00\xff"), (2, b"other")]
        for i in infos:
            engine.execute("SELECT", str(i.db))
            plain = kv(engine.execute("XINFO", "STREAM", i.key))
            assert i.length == plain[b"length"]
            assert str(i.last_id).encode() == plain[b"last-generated-id"]
            assert str(i.max_deleted_id).encode() == plain[b"max-deleted-entry-id"]
            assert i.entries_added == plain[b"entries-added"]
            assert i.groups == plain[b"groups"]
            assert [[str(e.id).encode(), list(e.fields)] for e in snap.entries(i.db, i.key)] \
                == engine.execute("XRANGE", i.key, "-", "+")
        engine.execute("SELECT", "0")
        orders = snap.stream(0, b"orders")
    assert orders is not None
    assert orders.nodes == len(engine.dbs[0][b"orders"].nodes) > 1
    assert orders.max_deleted_id == ID(6, 1)


def test_groups_consumers_and_pending(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    engine, path, _info = varied
    with Snapshot(path) as snap:
        groups = {g.name: g for g in snap.groups(0, b"orders")}
        assert sorted(groups) == [b"audit", b"billing"]
        billing = groups[b"billing"]
        assert (billing.last_id, billing.pending, billing.consumers) == (ID(7, 1), 5, 3)
        consumers = snap.consumers(0, b"orders", b"billing")
        pending = list(snap.pending(0, b"orders", b"billing"))
    assert [c.name for c in consumers] == [b"alice", b"bob", b"idle"]
    assert [(c.seen_time, c.active_time) for c in consumers] == \
        [(1000, 1000), (1000, 1000), (1000, -1)]
    assert [(str(p.id), p.consumer, p.delivery_count) for p in pending] == [
        ("1-1", b"alice", 1), ("2-1", None, 1), ("4-1", b"alice", 1), ("5-1", b"bob", 1),
        ("7-1", b"bob", 1)]
    assert engine.execute("XPENDING", "orders", "billing")[0] == len(pending)


def test_idempotent_producers(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    engine, path, _info = varied
    with Snapshot(path) as snap:
        orders, audit = snap.stream(0, b"orders"), snap.stream(0, b"audit")
    assert orders is not None and audit is not None
    assert audit.idmp is None  # never used IDMP
    idmp = orders.idmp
    assert idmp is not None and idmp.added == 1
    [(pid, recorded)] = idmp.producers
    assert pid == b"producer"
    assert [(r.iid, r.id, r.recorded_ms) for r in recorded] == [(b"iid-1", ID(1000, 0), 1000)]
    state = engine.dbs[0][b"orders"].idmp
    assert state is not None and (idmp.duration, idmp.maxsize) == (state.duration, state.maxsize)


@pytest.mark.parametrize("table", [*layout.TABLES, "nodeinfo", "keys"])  # (no runs: one file)
def test_every_value_is_sealed_under_its_key(varied: tuple[Engine, str, SnapshotInfo],
                                             table: str) -> None:
    _engine, path, _info = varied
    rows = stored_values(path, table)
    assert rows
    for key, value in rows:
        body(table, key, value)  # asserts the documented check


def test_node_keys_and_values_follow_the_engine(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    engine, path, _info = varied
    numbers = {(db, key): number for number, db, key, _s in stream_numbers(engine.dbs)}
    expected = [layout.node_key(numbers[0, key], node.master)
                for key in (b"audit", b"orders") for node in engine.dbs[0][key].nodes]
    expected += [layout.node_key(numbers[2, key], node.master)
                 for key in (b"bin\x00\xff", b"other") for node in engine.dbs[2][key].nodes]
    rows = stored_values(path, "nodes")
    assert [key for key, _value in rows] == expected
    first = engine.dbs[0][b"orders"].nodes[0]
    key = layout.node_key(numbers[0, b"orders"], first.master)
    node = layout.decode_packed_node(first.master, body("nodes", key, dict(rows)[key]))
    assert node.ids == first.entry_ids() and node.live == first.live
    assert node.size == first.lp_bytes() and node.lp == first.buffer()
    assert list(node.fields) == first.entry_fields()


def test_stream_numbers_count_across_databases_in_key_order() -> None:
    dbs: list[dict] = [{b"b": "B", b"a": "A"}, {}, {b"c": "C"}]
    assert list(stream_numbers(dbs)) == [(1, 0, b"a", "A"), (2, 0, b"b", "B"), (3, 2, b"c", "C")]


def test_an_empty_engine_writes_an_empty_snapshot(tmp_path: Path) -> None:
    info = written(Engine(), tmp_path / "empty.mdb", lsn=0)
    assert (info.streams, info.entries) == (0, 0)
    with Snapshot(str(tmp_path / "empty.mdb")) as snap:
        assert snap.streams() == []
        assert snap.check() == []


def test_cold_nodes_are_copied_as_stored_without_being_read(tmp_path: Path) -> None:
    source = Engine(stream_node_max_entries=5)
    for i in range(1, 31):
        source.execute("XADD", "orders", f"{i}-0", "f", f"value-{i}")
    first = tmp_path / "first.mdb"
    written(source, first)
    old = dict(stored_values(str(first), "nodes"))  # (before the engine holds the file open)
    lazy = Engine()
    load_snapshot(lazy, str(first), lazy=True)
    lazy.execute("XADD", "a-first", "1-0", "f", "v")  # renumbers orders: 1 -> 2
    stream = lazy.dbs[0][b"orders"]
    assert all(node.is_cold() for node in stream.nodes)
    second = tmp_path / "second.mdb"
    written(lazy, second)
    assert all(node.is_cold() for node in stream.nodes)  # nothing was read back
    lazy.close()
    new = dict(stored_values(str(second), "nodes"))
    assert len(old) == len(stream.nodes) == 6
    for node in stream.nodes:
        old_key, new_key = layout.node_key(1, node.master), layout.node_key(2, node.master)
        assert body("nodes", new_key, new[new_key]) == body("nodes", old_key, old[old_key])
    with Snapshot(str(second)) as snap:
        assert snap.check() == []
        assert len(list(snap.entries(0, b"orders"))) == 30


def test_the_keys_table_holds_strings_and_ttls(varied: tuple[Engine, str, SnapshotInfo]) -> None:
    _engine, path, _info = varied
    rows = [(key, layout.decode_key(body("keys", key, value)))
            for key, value in stored_values(path, "keys")]
    assert rows == [(b"\x00audit", (None, 6000, None)),
                    (b"\x00greeting", (b"hello", 99999, "string"))]


def test_every_list_chunk_has_its_node_index(tmp_path: Path) -> None:
    """A chunked list's chunks each get a listnodes row: their nodes' hashes, bytes and
    elements, in order (what a backlog-memory budget finds cold-able nodes by)."""
    engine = Engine()
    for first in range(0, 30_000, 1000):
        engine.execute("RPUSH", "q", *[b"item-%d" % i for i in range(first, first + 1000)])
    engine.execute("RPUSH", "small", "a", "b")
    path = str(tmp_path / "lists.mdb")
    write_snapshot(engine.dbs, path, 1, 0, "r", values=engine.keyspaces,
                   expires=engine.expires)
    nodes = lists.nodes_of(engine.keyspaces[LIST.slot][0][b"q"])
    with Snapshot(path) as snap:
        rows = {row.key: row for row in snap.key_rows()}
        chunked = rows[b"q"].chunked
        assert chunked is not None and rows[b"small"].chunked is None
        index = list(snap.list_node_index(rows[b"q"]))
        assert [chunk for _part, _number, chunk, _nodes in index] == list(range(chunked.chunks))
        assert [node for *_where, found in index for node in found] == [
            (value_node_hash(node), len(node), node_count(node)) for node in nodes]
