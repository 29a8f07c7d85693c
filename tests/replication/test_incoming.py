"""replication.incoming: a full sync's bulk written to temp files as it arrives, one file or a
segmented snapshot's several; checked, synced, or removed when the sync is cut short."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from streamkeep.aof.fs import RealFS
from streamkeep.engine.wire.errors import StorageError
from streamkeep.replication.bundle import encode_header
from streamkeep.replication.incoming import IncomingSnapshot

FILES = [("snapshot-000000000009.mdb", b"m" * 7000), ("part-000000000005.mdb", b"p" * 3000)]


def _bundle() -> bytes:
    return encode_header([(n, len(b)) for n, b in FILES]) + b"".join(b for _n, b in FILES)


def test_a_bundle_becomes_its_files_under_temp_names(tmp_path: Path) -> None:
    data = _bundle()
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data))
    for start in range(0, len(data), 999):
        incoming.feed(data[start:start + 999])
    files = incoming.finish()
    assert [(f.name, f.size, f.crc32) for f in files] == [
        (n, len(b), zlib.crc32(b)) for n, b in FILES]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "part-000000000005.mdb.tmp", "snapshot-000000000009.mdb.tmp"]
    assert (tmp_path / "part-000000000005.mdb.tmp").read_bytes() == FILES[1][1]


def test_one_file_is_the_snapshot_of_the_synced_lsn(tmp_path: Path) -> None:
    body = b"\0" * 8 + b"lmdb" * 100
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 77, len(body))
    incoming.feed(body)
    (only,) = incoming.finish()
    assert (only.name, only.size) == ("snapshot-000000000077.mdb", len(body))
    assert Path(only.tmp).read_bytes() == body


def test_a_cut_short_sync_is_refused_and_abandoned(tmp_path: Path) -> None:
    data = _bundle()
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data))
    incoming.feed(data[:-10])
    with pytest.raises(StorageError, match="arrived of 3000"):
        incoming.finish()
    incoming.abandon()
    assert list(tmp_path.iterdir()) == []


def test_a_cut_short_sync_keeps_the_parts_that_arrived_whole(tmp_path: Path) -> None:
    data = _bundle()
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data))
    incoming.feed(data[:-10])  # the snapshot's file whole, the part not
    assert incoming.abandon() == []  # the snapshot's own file is always sent again
    files = [FILES[0], ("part-000000000005.mdb", b"p" * 3000), ("part-000000000007.mdb", b"q")]
    data = encode_header([(n, len(b)) for n, b in files]) + b"".join(b for _n, b in files)
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data))
    incoming.feed(data[:-1])
    kept = incoming.abandon()
    assert [(k.name, k.size, k.crc32) for k in kept] == [
        ("part-000000000005.mdb", 3000, zlib.crc32(b"p" * 3000))]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-000000000005.mdb.tmp"]


def test_a_held_part_is_linked_from_the_replicas_copy(tmp_path: Path) -> None:
    own = tmp_path / "part-000000000005.mdb"  # the replica's snapshot's part, as it holds it
    own.write_bytes(FILES[1][1])
    header = encode_header([(n, len(b)) for n, b in FILES], frozenset({FILES[1][0]}))
    data = header + FILES[0][1]  # the part as a name only
    holdings = {FILES[1][0]: (str(own), len(FILES[1][1]), zlib.crc32(FILES[1][1]))}
    incoming = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data), holdings)
    incoming.feed(data)
    files = incoming.finish()
    assert [(f.name, f.size, f.crc32) for f in files] == [
        (n, len(b), zlib.crc32(b)) for n, b in FILES]
    linked = tmp_path / "part-000000000005.mdb.tmp"
    assert linked.read_bytes() == FILES[1][1] and linked.stat().st_ino == own.stat().st_ino
    unknown = IncomingSnapshot(RealFS(), str(tmp_path), 9, len(data))  # holds nothing
    with pytest.raises(StorageError, match="does not hold"):
        unknown.feed(data)
        unknown.finish()
