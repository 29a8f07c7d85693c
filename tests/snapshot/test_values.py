"""snapshot.values: a big sorted set, hash, set or list is stored as chunk rows (its keys row points
them) and loads back to the same state; a small value keeps its one row; a snapshot written with
every value in one row (before chunks) still loads; a damaged or missing chunk is reported,
naming the key and the chunk; a compaction leaves a value nothing changed where it is and writes
the changed one again. The thresholds are lowered so that a few thousand elements chunk."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import lmdb
import msgpack
import pytest

from streamkeep.engine.runtime.core import EngineCore
from streamkeep.snapshot import layout, segments, values
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.services.build import noting_changes
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.value_formats import packb
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
        # (a hash's or set's chunks are runs of a power of two of buckets: as many as hold
        # 256 elements at the table's full load, fewer at its load now)
        assert -(-MEMBERS // 256) <= ref.chunks <= MEMBERS // 150
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
    child.replay.apply_many(noting_changes(_effects(e, "HSET", "h", "f1", "changed"), homes))
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
    child.replay.apply_many(noting_changes(_effects(e, "RENAME", "z", "z2"), homes))
    second = write_segmented(child.dbs, str(tmp_path / "snapshot-2.mdb"),
                             str(tmp_path / "part-2.mdb"), 2, 0, "r", values=child.keyspaces,
                             expires=child.expires, homes=homes)
    refs = rows_of(tmp_path / "snapshot-2.mdb")
    assert b"z" not in refs and refs[b"z2"].part == 1  # type: ignore[union-attr]
    assert refs[b"h"].part == 0  # type: ignore[union-attr]
    assert loaded(tmp_path / "snapshot-2.mdb").digest() == child.digest()
    homes.replace(second.homes)
    child.replay.apply_many(noting_changes(_effects(e, "FLUSHALL"), homes))
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
    child.replay.apply_many(noting_changes(_effects(e, "SADD", "s", "new"), homes))
    second = write_segmented(child.dbs, str(tmp_path / "snapshot-2.mdb"),
                             str(tmp_path / "part-2.mdb"), 2, 0, "r", values=child.keyspaces,
                             expires=child.expires, homes=homes)
    refs = rows_of(tmp_path / "snapshot-2.mdb")
    assert refs[b"l"].part == 0 and refs[b"s"].part == 1  # type: ignore[union-attr]
    assert loaded(tmp_path / "snapshot-2.mdb").digest() == child.digest()
    homes.replace(second.homes)
    child.replay.apply_many(noting_changes(_effects(e, "RPUSH", "l", "more"), homes))
    assert homes.touched == {b"l"}
    third = write_segmented(child.dbs, str(tmp_path / "snapshot-3.mdb"),
                            str(tmp_path / "part-3.mdb"), 3, 0, "r", values=child.keyspaces,
                            expires=child.expires, homes=homes)
    ref = rows_of(tmp_path / "snapshot-3.mdb")[b"l"]
    assert ref is not None and not ref.indexed  # (the second form: runs)
    # Its chunks but the tail's stay in part-1; the tail's is written again.
    assert [third.parts[r.part] for r in ref.runs] == [  # type: ignore[index]
        "part-1.mdb", "part-3.mdb"]
    assert ref.runs[1].chunks == 1 and ref.runs[0].first == 0
    back = loaded(tmp_path / "snapshot-3.mdb")
    assert back.digest() == child.digest() and back.execute("RPOP", "l") == b"more"


# --- a changed list: its unchanged chunks referred to where they are -------------------------


def test_the_keys_rows_two_forms_of_chunks() -> None:
    whole = layout.ChunkRef.whole(2, 7, 3, 900, 5000)
    raw = layout.encode_chunked_key(whole, 12, "list")
    assert layout.decode_value(raw) == [None, 12, "list", [2, 7, 3, 900, 5000]]
    assert layout.decode_key_row(raw) == (None, 12, "list", whole)
    assert (whole.part, whole.number, whole.chunks, whole.indexed) == (2, 7, 3, True)
    runs = layout.ChunkRef((layout.ChunkRun(1, 4, 0, 1), layout.ChunkRun(0, 9, 3, 5),
                            layout.ChunkRun(1, 4, 1, 2)), 1234, 99, indexed=False)
    raw = layout.encode_chunked_key(runs, None, "list")
    assert layout.decode_value(raw) == [None, None, "list", [
        1234, 99, [[1, 4, 0, 1], [0, 9, 3, 5], [1, 4, 1, 2]]]]
    assert layout.decode_key_row(raw) == (None, None, "list", runs) and runs.chunks == 8
    import msgpack

    for item, why in (
            ([1234, 99, []], "chunked keys value"),
            ([1234, 99, [[0, 1, 0, 0]]], "chunk run"),
            ([1234, 99, [[0, 1, -1, 2]]], "chunk run"),
            ([1234, 99, [[0, 1, True, 2]]], "chunk run"),
            ([1234, 99, [["0", 1, 0, 2]]], "chunk run"),
            ([1234, 99, [[0, 1, 0, 2, 5]]], "chunk run"),
            ([1234, 99, [[0, 1, (1 << 32) - 1, 2]]], "chunk run"),
            ([1234, 99, [[0, 1, 0, 3], [1, 1, 0, 1], [0, 1, 2, 1]]], "overlap"),
            ([-1, 99, [[0, 1, 0, 2]]], "chunked keys value"),
            ([0, 1, 2, 3], "chunked keys value")):
        with pytest.raises(ValueError, match=why):
            layout.decode_key_row(msgpack.packb([None, None, "list", item]))


def _queue(count: int) -> EngineCore:
    e = EngineCore()
    for i in range(0, count, 1000):
        e.execute("RPUSH", "q", *[b"job-%07d" % j for j in range(i, i + 1000)])
    e.execute("SADD", "s", *[b"%d" % j for j in range(1001)])
    return e


def _stored(path: Path, key: bytes = b"q") -> tuple[layout.ChunkRef, dict[str, int], list]:
    """The list's ChunkRef, the body bytes of its chunks per part file, its elements."""
    with Snapshot(str(path)) as snap:
        row = next(r for r in snap.key_rows() if r.key == key)
        assert row.chunked is not None
        per_part: dict[str, int] = {}
        for part, _run, _index, body in snap.value_chunk_rows(row):
            name = os.path.basename(part.path)
            per_part[name] = per_part.get(name, 0) + len(body)
        assert snap.check() == []
        return row.chunked, per_part, list(snap.value_elements(row))


def _write(child: EngineCore, d: Path, n: int, homes: ValueHomes, **options: object
           ) -> list[str]:
    written = write_segmented(child.dbs, str(d / f"snapshot-{n}.mdb"), str(d / f"part-{n}.mdb"),
                              n, 0, "r", values=child.keyspaces, expires=child.expires,
                              homes=homes, **options)  # type: ignore[arg-type]
    homes.replace(written.homes)
    return written.parts


def _queue_work(e: EngineCore, child: EngineCore, homes: ValueHomes, rounds: int) -> None:
    """Pushes and pops at both ends, on `e` and replayed into the child."""
    for k in range(rounds):
        for argv in (("RPUSH", "q", f"new-{k}", f"more-{k}"), ("LPOP", "q"),
                     ("LPUSH", "q", f"head-{k}"), ("RPOP", "q"), ("LPOP", "q", "2")):
            child.replay.apply_many(noting_changes(_effects(e, *argv), homes))


def test_a_changed_list_refers_to_its_unchanged_chunks(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A queue: pushes and pops at both ends rewrite its end chunks only, the others are
    referred to where they are (the keys row's second form); what it reads back (load, the
    elements with their indexes, check) is the list; the child going on, a restart (a fresh
    child loading runs from several parts), a change in the middle and merged parts too."""
    from streamkeep.engine.model.value_types import LIST

    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 2048)
    e = _queue(40_000)
    homes = ValueHomes()
    assert _write(e, tmp_path, 1, homes) == ["part-1.mdb"]
    child = loaded(tmp_path / "snapshot-1.mdb", homes)
    first, per_part, _elements = _stored(tmp_path / "snapshot-1.mdb")
    assert first.indexed and first.chunks >= 10 and per_part == {"part-1.mdb": first.size}
    _queue_work(e, child, homes, 50)
    assert _write(child, tmp_path, 2, homes) == ["part-1.mdb", "part-2.mdb"]
    ref, per_part, elements = _stored(tmp_path / "snapshot-2.mdb")
    assert not ref.indexed and len(ref.runs) == 3
    assert per_part["part-2.mdb"] <= 3 * ref.size // first.chunks  # its two end chunks
    assert elements == list(enumerate(e.execute("LRANGE", "q", "0", "-1")))
    assert loaded(tmp_path / "snapshot-2.mdb").digest() == child.digest() == e.digest()

    # The child goes on; then a fresh one (a restart) from the snapshot of runs.
    _queue_work(e, child, homes, 20)
    _write(child, tmp_path, 3, homes)
    homes = ValueHomes()
    child = loaded(tmp_path / "snapshot-3.mdb", homes)
    assert child.digest() == e.digest()
    _queue_work(e, child, homes, 20)
    child.replay.apply_many(noting_changes(_effects(e, "LSET", "q", "20000", "middle"), homes))
    parts = _write(child, tmp_path, 4, homes)
    ref, per_part, elements = _stored(tmp_path / "snapshot-4.mdb")
    assert per_part["part-4.mdb"] <= 4 * ref.size // first.chunks  # the ends and the middle
    assert sum(per_part.values()) == ref.size and parts == ["part-1.mdb", "part-4.mdb"]
    assert elements == list(enumerate(e.execute("LRANGE", "q", "0", "-1")))
    assert loaded(tmp_path / "snapshot-4.mdb").digest() == e.digest()

    # Parts merged: the chunks they held are written again, the others stay.
    _queue_work(e, child, homes, 5)
    parts = _write(child, tmp_path, 5, homes, policy=segments.MergePolicy(max_parts=2))
    assert parts == ["part-1.mdb", "part-5.mdb"]  # part-4 merged into part-5
    ref, per_part, elements = _stored(tmp_path / "snapshot-5.mdb")
    assert set(per_part) == set(parts) and sum(per_part.values()) == ref.size
    assert elements == list(enumerate(e.execute("LRANGE", "q", "0", "-1")))
    back = loaded(tmp_path / "snapshot-5.mdb")
    assert back.digest() == e.digest()
    assert back.keyspaces[LIST.slot][0][b"q"].nodes == child.keyspaces[LIST.slot][0][b"q"].nodes

    # Everything popped but the chunks of the middle: a row of runs of part-5 alone.
    child.replay.apply_many(noting_changes(_effects(e, "LTRIM", "q", "15000", "-15000"), homes))
    _write(child, tmp_path, 6, homes)
    ref, _per_part, elements = _stored(tmp_path / "snapshot-6.mdb")
    assert elements == list(enumerate(e.execute("LRANGE", "q", "0", "-1")))
    assert loaded(tmp_path / "snapshot-6.mdb").digest() == e.digest()


def _set_row(path: Path, key: bytes, item: list) -> None:
    """Replace a keys row's chunks item (sealed again: damage its checksum does not show)."""
    import msgpack

    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16)
    raw = layout.stream_key(0, key)
    with env.begin(write=True) as txn:
        keys = env.open_db(b"keys", txn=txn)
        row = layout.decode_value(txn.get(raw, db=keys)[:-layout.CHECK_SIZE])
        row[3] = item
        txn.put(raw, layout.seal("keys", raw, msgpack.packb(row)), db=keys)
    env.close()


def test_a_damaged_reference_is_refused(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of runs naming chunks that are not there, a part that is not, chunks of
    another value (not as many elements), the same chunk twice: each a SnapshotError naming
    the key (load, check, the elements), never a wrong list."""
    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 2048)
    e = _queue(20_000)
    homes = ValueHomes()
    _write(e, tmp_path, 1, homes)
    child = loaded(tmp_path / "snapshot-1.mdb", homes)
    _queue_work(e, child, homes, 10)
    _write(child, tmp_path, 2, homes)
    ref, _per_part, _elements = _stored(tmp_path / "snapshot-2.mdb")
    runs = [list(run) for run in ref.runs]
    assert len(runs) == 3 and runs[1][0] == 0
    s_number = rows_of(tmp_path / "snapshot-1.mdb")[b"s"].number  # type: ignore[union-attr]
    good = layout.decode_value(_raw_row(tmp_path / "snapshot-2.mdb", b"q"))[3]
    for n, (item, why) in enumerate((
            ([ref.elements, ref.size, [runs[0], [0, runs[1][1], runs[1][2], 99], runs[2]]],
             "missing"),
            ([ref.elements, ref.size, [runs[0], [5, *runs[1][1:]], runs[2]]], "names part 5"),
            ([ref.elements, ref.size, [runs[0], [0, s_number, 0, 1], runs[2]]],
             "not a listpack|unpack|first index"),
            ([ref.elements, ref.size, [runs[0], runs[1]]], "elements"),
            ([ref.elements, ref.size, [runs[0], runs[1], runs[1]]], "overlap"),
            ([ref.elements + 1, ref.size, runs], "elements"))):
        path = tmp_path / f"damaged-{n}.mdb"  # (a copy each: a failed load's file stays open
        shutil.copyfile(tmp_path / "snapshot-2.mdb", path)  # while its traceback lives)
        _set_row(path, b"q", item)
        with pytest.raises(SnapshotError, match=f"key b?'q' \\(db 0\\).*({why})"):
            loaded(path)
        with Snapshot(str(path)) as snap:
            problems = snap.check()
            assert problems and re.search(why, problems[0]), problems
    path = tmp_path / "repaired.mdb"
    shutil.copyfile(tmp_path / "snapshot-2.mdb", path)
    _set_row(path, b"q", good)
    assert loaded(path).digest() == e.digest()


def _raw_row(path: Path, key: bytes) -> bytes:
    env = lmdb.open(str(path), subdir=False, lock=False, max_dbs=16)
    with env.begin() as txn:
        raw = bytes(txn.get(layout.stream_key(0, key), db=env.open_db(b"keys", txn=txn)))
    env.close()
    return raw[:-layout.CHECK_SIZE]


def test_a_big_hash_or_set_loads_its_buckets_as_they_are(tmp_path: Path) -> None:
    """A hashtable's chunks hold its buckets and placement: the loaded table has the same seed
    and the same buckets (no record placed again), and grows as the original does."""
    e = filled()
    path = tmp_path / "snap.mdb"
    write_snapshot(e.dbs, str(path), 10, 0, "r", values=e.keyspaces, expires=e.expires)
    back = loaded(path)
    for slot, key in ((3, b"h"), (4, b"s")):
        table, twin = (engine.keyspaces[slot][0][key].table() for engine in (e, back))
        assert table is not None and twin is not None
        assert (twin.seed, twin.size, twin.split) == (table.seed, table.size, table.split)
        assert twin.buckets == table.buckets
    for engine in (e, back):
        engine.execute("HSET", "h", *[x for j in range(5000) for x in (b"g%d" % j, b"w")])
    assert back.keyspaces[3][0][b"h"].table().buckets == e.keyspaces[3][0][b"h"].table().buckets
    assert back.digest() == e.digest()


def test_a_hashtable_chunked_as_pairs_still_loads() -> None:
    """The layout every big hash and set had before their buckets were stored: pairs and
    members in the value's order."""
    fields = [b"f%d" % i for i in range(1200)]
    body = packb([fields[:700], [b"v"] * 700, [[3, 4000000000000]]])
    rest = packb([fields[700:], [b"w"] * 500, []])
    h = values.build_value("hash", 1200, [body, rest])
    assert h.encoding == "hashtable" and len(h) == 1200
    assert h.get(b"f3") == b"v" and h.get(b"f1199") == b"w"
    assert h.field_expiry(b"f3") == 4000000000000
    s = values.build_value("set", 1200, [packb([fields])])
    assert s.encoding == "hashtable" and sorted(s) == sorted(fields)


def _table_bodies(key_type: str) -> list[list]:
    e = filled()
    value = e.keyspaces[3 if key_type == "hash" else 4][0][b"h" if key_type == "hash" else b"s"]
    return [msgpack.unpackb(body, raw=True) for body, _n in
            values.chunk_bodies(key_type, value)]


@pytest.mark.parametrize("key_type", ["hash", "set"])
@pytest.mark.parametrize("damage", ["buckets swapped", "a run out of place", "another seed",
                                    "another split", "a chunk of another layout"])
def test_a_table_chunk_that_does_not_fit_is_refused(key_type: str, damage: str) -> None:
    docs = _table_bodies(key_type)
    doc = docs[1]
    if damage == "buckets swapped":
        packs = doc[4]
        at = next(i for i in range(len(packs) - 1) if packs[i] != packs[i + 1])
        packs[at], packs[at + 1] = packs[at + 1], packs[at]
    elif damage == "a run out of place":
        doc[3] += 1
    elif damage == "another seed":
        doc[0] = bytes(16)
    elif damage == "another split":
        doc[2] ^= 1
    else:
        docs[1] = [[b"x"], [b"y"], []] if key_type == "hash" else [[b"x"]]
    with pytest.raises(ValueError):
        values.build_value(key_type, MEMBERS, [packb(d) for d in docs])
