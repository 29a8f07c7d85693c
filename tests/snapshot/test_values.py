"""snapshot.values: a big sorted set, hash, set or list is stored as chunk rows (its keys row points
them) and loads back to the same state; a small value keeps its one row; a snapshot written with
every value in one row (before chunks) still loads; a damaged or missing chunk is reported,
naming the key and the chunk; a compaction leaves a value nothing changed where it is and writes
the changed one again. The thresholds are lowered so that a few thousand elements chunk."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from streamkeep.engine.runtime.core import EngineCore
from streamkeep.snapshot import layout, values
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.services.build import noting_changes
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.values import ValueHomes
from streamkeep.snapshot.writer import write_segmented, write_snapshot

MEMBERS = 3000


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(values, "CHUNKED_ELEMENTS", 1000)
    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 256)


def filled() -> EngineCore:
    """A zset, a hash (two fields with a TTL) and a set of MEMBERS elements each, small values
    of each type, a string and a stream."""
    e = EngineCore()
    for i in range(0, MEMBERS, 500):
        e.execute("ZADD", "z", *[x for j in range(i, i + 500)
                                 for x in (str(j % 7 - 3.5), b"m%d" % j)])
        e.execute("HSET", "h", *[x for j in range(i, i + 500) for x in (b"f%d" % j, b"v%d" % j)])
        e.execute("SADD", "s", *[b"m%d" % j for j in range(i, i + 500)])
    e.execute("HPEXPIREAT", "h", "4000000000000", "FIELDS", "2", "f1", "f2999")
    e.execute("PEXPIREAT", "z", "4000000000000")
    e.execute("ZADD", "small-z", "1", "a", "2", "b")
    e.execute("HSET", "small-h", "f", "v")
    e.execute("SADD", "small-s", "x", "1")
    e.execute("SET", "str", "value")
    e.execute("XADD", "st", "1-1", "a", "b")
    return e


def rows_of(path: Path) -> dict[bytes, layout.ChunkRef | None]:
    with Snapshot(str(path)) as snap:
        return {row.key: row.chunked for row in snap.key_rows()}


def loaded(path: Path, homes: ValueHomes | None = None) -> EngineCore:
    e = EngineCore()
    load_snapshot(e, str(path), homes=homes)
    return e


def test_big_values_are_chunked_and_load_back(tmp_path: Path) -> None:
    e = filled()
    path = tmp_path / "snap.mdb"
    write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
    found = rows_of(path)
    for key in (b"z", b"h", b"s"):
        ref = found[key]
        assert ref is not None and ref.part is None and ref.elements == MEMBERS
        assert ref.chunks == -(-MEMBERS // 256)
    assert all(found[k] is None for k in (b"small-z", b"small-h", b"small-s", b"str"))
    back = loaded(path)
    assert back.digest() == e.digest()
    assert back.execute("PTTL", "z") > 0
    assert back.execute("HPEXPIRETIME", "h", "FIELDS", "2", "f1", "f2") == [4000000000000, -1]
    assert back.execute("OBJECT", "ENCODING", "z") == b"skiplist"
    assert back.execute("OBJECT", "ENCODING", "h") == b"hashtable"
    with Snapshot(str(path)) as snap:
        assert snap.check() == []


def test_chunks_follow_the_values_own_order(tmp_path: Path) -> None:
    e = filled()
    path = tmp_path / "snap.mdb"
    write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
    z, h, s = (e.keyspaces[slot][0][k] for slot, k in ((2, b"z"), (3, b"h"), (4, b"s")))
    with Snapshot(str(path)) as snap:
        rows = {row.key: row for row in snap.key_rows()}
        assert list(snap.value_elements(rows[b"z"])) == list(z.items())  # score order
        assert list(snap.value_elements(rows[b"s"])) == [(m,) for m in s]
        assert list(snap.value_elements(rows[b"h"])) == [
            (f, v, h.field_expiry(f)) for f, v in h.items()]


def test_a_chunk_is_cut_by_bytes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(values, "CHUNK_BYTES", 4096)
    e = EngineCore()
    e.execute("SADD", "s", *[b"%04d" % i + b"x" * 200 for i in range(1500)])
    path = tmp_path / "snap.mdb"
    write_snapshot(e.dbs, str(path), 1, 0, "r", values=e.keyspaces, expires=e.expires)
    ref = rows_of(path)[b"s"]
    assert ref is not None and ref.chunks >= 1500 * 200 // 4096
    assert loaded(path).digest() == e.digest()


def test_a_snapshot_written_before_chunks_still_loads(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    e = filled()
    path = tmp_path / "old.mdb"
    with monkeypatch.context() as m:  # every value in its one keys row, as before chunks
        m.setattr(values, "CHUNKED_ELEMENTS", 1 << 40)
        m.setattr(values, "CHUNKED_BYTES", 1 << 40)
        write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False, max_dbs=16)
    with env.begin() as txn:
        raw = txn.get(layout.stream_key(0, b"z"), db=env.open_db(b"keys", txn=txn))
    env.close()
    stored = layout.decode_value(raw[:-layout.CHECK_SIZE])
    assert len(stored) == 3 and isinstance(stored[0], bytes) and stored[2] == "zset"
    assert all(ref is None for ref in rows_of(path).values())
    assert loaded(path).digest() == e.digest()


def _tamper(path: Path, change: str) -> None:
    """Damage the second chunk of value number 3 (the sorted set "z", by key order)."""
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16)
    key = layout.chunk_key(3, 1)
    with env.begin(write=True) as txn:
        chunks = env.open_db(b"chunks", txn=txn)
        if change == "flip":
            value = bytearray(txn.get(key, db=chunks))
            value[10] ^= 1
            txn.put(key, bytes(value), db=chunks)
        else:
            txn.delete(key, db=chunks)
    env.close()


@pytest.mark.parametrize(("change", "why"), [("flip", "chunk 1: checksum mismatch"),
                                             ("delete", "chunk 1: missing")])
def test_a_damaged_or_missing_chunk_is_reported(tmp_path: Path, change: str, why: str) -> None:
    e = filled()
    path = tmp_path / "snap.mdb"
    write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
    assert rows_of(path)[b"z"].number == 3  # type: ignore[union-attr]
    _tamper(path, change)
    with Snapshot(str(path)) as snap:
        problems = snap.check()
    assert len(problems) == 1
    assert "table chunks, key 'z' (db 0), " + why in problems[0]
    with pytest.raises(SnapshotError, match=re.escape("key 'z' (db 0), " + why)):
        loaded(path)


def _effects(e: EngineCore, *argv: str) -> Iterator[tuple]:
    """The record a command logs, as a segment hands it to the build child's replay."""
    _reply, effects = e.execute_with_effects(*argv)
    yield (1, 0, 0, effects)


def test_a_compaction_leaves_an_unchanged_value_where_it_is(tmp_path: Path) -> None:
    e = filled()
    first = write_segmented(e.dbs, str(tmp_path / "snapshot-1.mdb"),
                            str(tmp_path / "part-1.mdb"), 1, 0, "r", values=e.keyspaces,
                            expires=e.expires)
    assert first.parts == ["part-1.mdb"] and set(first.homes) == {
        (0, b"z"), (0, b"h"), (0, b"s")}
    # The child: the snapshot loaded, its chunked values' homes noted, then a replay.
    homes = ValueHomes()
    child = loaded(tmp_path / "snapshot-1.mdb", homes)
    assert set(homes.homes) == set(first.homes)
    child.apply_many(noting_changes(_effects(e, "HSET", "h", "f1", "changed"), homes))
    assert homes.touched == {b"h"}
    second = write_segmented(child.dbs, str(tmp_path / "snapshot-2.mdb"),
                             str(tmp_path / "part-2.mdb"), 2, 0, "r", values=child.keyspaces,
                             expires=child.expires, homes=homes)
    assert second.parts == ["part-1.mdb", "part-2.mdb"]
    refs = rows_of(tmp_path / "snapshot-2.mdb")
    assert refs[b"z"].part == refs[b"s"].part == 0  # type: ignore[union-attr]
    assert refs[b"h"].part == 1  # type: ignore[union-attr]
    with Snapshot(str(tmp_path / "part-2.mdb")) as part:  # only the hash's chunks there
        numbers = {layout.split_chunk_key(bytes(k))[0] for k, _v in
                   part._prefixed("chunks", b"")}
    assert numbers == {refs[b"h"].number}  # type: ignore[union-attr]
    again = loaded(tmp_path / "snapshot-2.mdb")
    assert again.digest() == child.digest() == e.digest()
    with Snapshot(str(tmp_path / "snapshot-2.mdb")) as snap:
        assert snap.check() == []
    # The child goes on from the snapshot it wrote: nothing changed, no new part.
    homes.replace(second.homes)
    os.rename(tmp_path / "part-2.mdb", tmp_path / "part-2.mdb")  # (its final name already)
    third = write_segmented(child.dbs, str(tmp_path / "snapshot-3.mdb"),
                            str(tmp_path / "part-3.mdb"), 3, 0, "r", values=child.keyspaces,
                            expires=child.expires, homes=homes)
    assert third.parts == ["part-1.mdb", "part-2.mdb"] and not third.new_part
    assert loaded(tmp_path / "snapshot-3.mdb").digest() == e.digest()


def test_a_flush_or_a_rename_writes_the_values_again(tmp_path: Path) -> None:
    e = filled()
    first = write_segmented(e.dbs, str(tmp_path / "snapshot-1.mdb"),
                            str(tmp_path / "part-1.mdb"), 1, 0, "r", values=e.keyspaces,
                            expires=e.expires)
    homes = ValueHomes()
    child = loaded(tmp_path / "snapshot-1.mdb", homes)
    assert set(homes.homes) == set(first.homes)
    child.apply_many(noting_changes(_effects(e, "RENAME", "z", "z2"), homes))
    second = write_segmented(child.dbs, str(tmp_path / "snapshot-2.mdb"),
                             str(tmp_path / "part-2.mdb"), 2, 0, "r", values=child.keyspaces,
                             expires=child.expires, homes=homes)
    refs = rows_of(tmp_path / "snapshot-2.mdb")
    assert b"z" not in refs and refs[b"z2"].part == 1  # type: ignore[union-attr]
    assert refs[b"h"].part == 0  # type: ignore[union-attr]
    assert loaded(tmp_path / "snapshot-2.mdb").digest() == child.digest()
    homes.replace(second.homes)
    child.apply_many(noting_changes(_effects(e, "FLUSHALL"), homes))
    assert homes.everything and not homes.homes


# --- lists: chunks of their nodes -------------------------------------------------------------


def _with_lists() -> EngineCore:
    """A big list (an element past a node's limit among them: a plain node), a small one."""
    e = EngineCore()
    e.execute("RPUSH", "l", *[b"e%d" % j for j in range(MEMBERS)], b"\xff" * 20_000, b"7")
    e.execute("LPUSH", "l", *[b"%d" % j for j in range(500)])
    e.execute("RPUSH", "small-l", "a", "1", "")
    e.execute("PEXPIREAT", "l", "4000000000000")
    return e


def test_a_big_list_is_chunked_by_its_nodes_and_loads_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import msgpack

    from streamkeep.engine.model import lists
    from streamkeep.engine.model.value_types import LIST

    e = _with_lists()
    value = e.keyspaces[LIST.slot][0][b"l"]
    total = MEMBERS + 502
    for cut in (values.CHUNK_BYTES, 4096):  # cut by elements, then by bytes too
        monkeypatch.setattr(values, "CHUNK_BYTES", cut)
        path = tmp_path / f"snap-{cut}.mdb"
        write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
        found = rows_of(path)
        ref = found[b"l"]
        assert ref is not None and ref.elements == total and found[b"small-l"] is None
        bodies = list(values.chunk_bodies("list", value))
        assert ref.chunks == len(bodies) >= 2 and sum(n for _body, n in bodies) == total
        assert all(n <= 256 or len(msgpack.unpackb(body)[1]) == 1 for body, n in bodies)
        with Snapshot(str(path)) as snap:
            rows = {row.key: row for row in snap.key_rows()}
            assert list(snap.value_elements(rows[b"l"])) == list(
                enumerate(lists.elements(value)))
            assert snap.check() == []
        back = loaded(path)
        assert back.digest() == e.digest()
        again = back.keyspaces[LIST.slot][0][b"l"]
        assert lists.nodes_of(again) == lists.nodes_of(value)  # node for node
        assert back.execute("OBJECT", "ENCODING", "l") == b"quicklist"
        assert back.execute("PEXPIRETIME", "l") == 4000000000000
        assert back.execute("LINDEX", "l", "-2") == b"\xff" * 20_000


def test_list_chunks_are_checked_as_they_are_read() -> None:
    import msgpack

    from streamkeep.engine.model.list_node import node_new
    from streamkeep.engine.model.lists import QuickList

    good = bytes(node_new([b"a", b"b"]))
    body = msgpack.packb([0, [good, good]])
    assert values.chunk_elements("list", body) == [(0, b"a"), (1, b"b"), (2, b"a"), (3, b"b")]
    assert values.chunk_elements("list", msgpack.packb([7, [good]])) == [(7, b"a"), (8, b"b")]
    built = values.build_value("list", 4, [body])  # (nodes kept: a quicklist of two)
    assert isinstance(built, QuickList) and built.nodes == [node_new([b"a", b"b"])] * 2
    assert values.build_value("list", 2, [msgpack.packb([0, [good]])]) == good  # a listpack
    bad_backlen = good[:-2] + b"\x09" + good[-1:]
    for bodies, why in (
            ([msgpack.packb([0, [bad_backlen]])], "not a listpack"),
            ([msgpack.packb([0, [good[:-1]]])], "not a listpack"),
            ([msgpack.packb([0, [good]]), msgpack.packb([3, [good]])], "starts at index 3"),
            ([msgpack.packb([0, [good]])], "2 elements found"),
            ([msgpack.packb([0, good])], "first index and its nodes"),
            ([msgpack.packb(["0", [good]])], "first index and its nodes"),
            ([msgpack.packb([0, [good], 1])], "unpack")):
        with pytest.raises(ValueError, match=why):
            values.build_value("list", 4, bodies)


def test_a_compaction_leaves_an_unchanged_list_where_it_is(tmp_path: Path) -> None:
    e = _with_lists()
    e.execute("RPUSH", "l", *[b"more-%d" % j for j in range(20_000)])
    e.execute("SADD", "s", *[b"%d" % j for j in range(1001)])  # (small beside the list: its
    # change leaves part-1 mostly live, not merged away)
    first = write_segmented(e.dbs, str(tmp_path / "snapshot-1.mdb"),
                            str(tmp_path / "part-1.mdb"), 1, 0, "r", values=e.keyspaces,
                            expires=e.expires)
    assert set(first.homes) == {(0, b"l"), (0, b"s")}
    homes = ValueHomes()
    child = loaded(tmp_path / "snapshot-1.mdb", homes)
    assert set(homes.homes) == set(first.homes)
    child.apply_many(noting_changes(_effects(e, "SADD", "s", "new"), homes))
    second = write_segmented(child.dbs, str(tmp_path / "snapshot-2.mdb"),
                             str(tmp_path / "part-2.mdb"), 2, 0, "r", values=child.keyspaces,
                             expires=child.expires, homes=homes)
    refs = rows_of(tmp_path / "snapshot-2.mdb")
    assert refs[b"l"].part == 0 and refs[b"s"].part == 1  # type: ignore[union-attr]
    assert loaded(tmp_path / "snapshot-2.mdb").digest() == child.digest()
    homes.replace(second.homes)
    child.apply_many(noting_changes(_effects(e, "RPUSH", "l", "more"), homes))
    assert homes.touched == {b"l"}
    third = write_segmented(child.dbs, str(tmp_path / "snapshot-3.mdb"),
                            str(tmp_path / "part-3.mdb"), 3, 0, "r", values=child.keyspaces,
                            expires=child.expires, homes=homes)
    ref = rows_of(tmp_path / "snapshot-3.mdb")[b"l"]
    assert ref is not None and ref.part is not None
    assert third.parts[ref.part] == "part-3.mdb"  # written again
    back = loaded(tmp_path / "snapshot-3.mdb")
    assert back.digest() == child.digest() and back.execute("RPOP", "l") == b"more"
