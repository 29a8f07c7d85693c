"""aof.manifest: the file names, the document's round trip, its validation (every refusal
names the file and what is wrong), its checksum, and the atomic replace on real files:
`store` then `load`, a failure before the rename leaving the previous manifest in place."""

from __future__ import annotations

import errno
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pytest

from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import (
    MANIFEST,
    MANIFEST_TMP,
    NO_REPL_ID,
    Manifest,
    ManifestError,
    ManifestUnchanged,
    SegmentEntry,
    SnapshotEntry,
    encode_doc,
    is_segment_file,
    is_snapshot_file,
    load,
    new_repl_id,
    segment_file,
    snapshot_file,
    store,
)
from streamkeep.engine.wire.errors import StorageError

WHERE = "/data/manifest.json"
REPL_ID = "ab" * 20


def sample(crc32: int | None = 0xDEADBEEF) -> Manifest:
    return Manifest(
        segments=[SegmentEntry(segment_file(7), 7, 1235), SegmentEntry(segment_file(8), 8, 1300)],
        snapshot=SnapshotEntry(snapshot_file(1234), 1234, 81920, 1700000000000, crc32),
        repl_id=REPL_ID, repl_id2="cd" * 20, repl_offset2=1100)


def doc_of(manifest: Manifest) -> dict[str, Any]:
    doc = json.loads(manifest.to_json())
    del doc["checksum"]
    return doc


def refusal(data: bytes) -> str:
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(data, WHERE)
    assert isinstance(caught.value, StorageError)
    return str(caught.value)


def create_files(directory: Path, manifest: Manifest) -> None:
    for entry in manifest.segments:
        (directory / entry.file).write_bytes(b"")
    if manifest.snapshot is not None:
        (directory / manifest.snapshot.file).write_bytes(b"")


def test_file_names() -> None:
    assert segment_file(7) == "segment-000007.aof"
    assert segment_file(1234567) == "segment-1234567.aof"
    assert snapshot_file(1234) == "snapshot-000000001234.mdb"
    assert is_segment_file("segment-000007.aof") and is_segment_file("segment-1234567.aof")
    assert not is_segment_file("segment-7.aof") and not is_segment_file("segment-000007.aof.tmp")
    assert is_snapshot_file(snapshot_file(5)) and is_snapshot_file(snapshot_file(5) + ".tmp")
    assert not is_snapshot_file("snapshot-5.mdb") and not is_snapshot_file(MANIFEST)


def test_new_history_ids() -> None:
    first, second = new_repl_id(), new_repl_id()
    assert re.fullmatch(r"[0-9a-f]{40}", first) and first != second
    assert NO_REPL_ID == "0" * 40
    assert Manifest().repl_id != Manifest().repl_id
    assert (Manifest().repl_id2, Manifest().repl_offset2) == (NO_REPL_ID, -1)


@pytest.mark.parametrize("crc32", [0xDEADBEEF, None])
def test_round_trip(crc32: int | None) -> None:
    manifest = sample(crc32)
    assert Manifest.from_json(manifest.to_json(), WHERE) == manifest
    snapshot_doc = doc_of(manifest)["snapshot"]
    assert ("crc32" in snapshot_doc) is (crc32 is not None)  # absent as older versions wrote


def test_round_trip_without_a_snapshot() -> None:
    manifest = Manifest([SegmentEntry(segment_file(1), 1, 1)], None, REPL_ID)
    assert Manifest.from_json(manifest.to_json(), WHERE) == manifest


def test_the_checksum_covers_the_rest_of_the_document() -> None:
    data = sample().to_json()
    doc = json.loads(data)
    checksum = doc.pop("checksum")
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    assert checksum == zlib.crc32(canonical)
    assert encode_doc({**doc, "checksum": 1}) == data  # a stale checksum is recomputed


def test_a_changed_byte_is_refused_not_read_as_another_value() -> None:
    data = sample().to_json().replace(b'"first_lsn": 1300', b'"first_lsn": 1309')
    assert refusal(data) == (f"{WHERE}: damaged: its checksum does not match its contents "
                             f"(a changed byte); refusing to guess what it said")


def test_a_manifest_without_checksum_is_accepted_unchecked() -> None:
    doc = doc_of(sample())
    assert Manifest.from_json(json.dumps(doc).encode(), WHERE) == sample()


def test_a_manifest_without_repl_id_gets_one() -> None:
    doc = doc_of(sample())
    del doc["repl_id"], doc["repl_id2"], doc["repl_offset2"]
    manifest = Manifest.from_json(encode_doc(doc), WHERE)
    assert re.fullmatch(r"[0-9a-f]{40}", manifest.repl_id)
    assert (manifest.repl_id2, manifest.repl_offset2) == (NO_REPL_ID, -1)


def test_not_json_names_the_file_and_the_offset() -> None:
    data = sample().to_json()
    cut = data[:40]
    message = refusal(cut)
    assert message.startswith(f"{WHERE}: not valid JSON (")
    assert re.search(r"\(char \d+\)\)$", message)
    assert refusal(b"\xff\xfe").startswith(f"{WHERE}: not valid JSON (")
    assert refusal(b"[1]") == f"{WHERE}: not a streamkeep manifest"


def mutated(change: Any) -> bytes:
    doc = doc_of(sample())
    change(doc)
    return encode_doc(doc)


SEGMENT = {"file": "segment-000007.aof", "segment": 7, "first_lsn": 1235}
REFUSALS = {
    "empty": (lambda d: d.clear(), "not a streamkeep manifest"),
    "format": (lambda d: d.update(format="other"), "not a streamkeep manifest"),
    "version": (lambda d: d.update(version=2), "unsupported manifest version 2"),
    "no segments": (lambda d: d.update(segments=[]), "'segments' must be a non-empty list"),
    "segments not a list": (lambda d: d.update(segments={}),
                            "'segments' must be a non-empty list"),
    "segment not an object": (lambda d: d.update(segments=[7]),
                              "segment entries must be objects"),
    "segment lacks a field": (lambda d: d.update(segments=[{"file": "segment-000007.aof"}]),
                              "segment entry {'file': 'segment-000007.aof'} lacks "
                              "file/segment/first_lsn"),
    "segment misnamed": (lambda d: d["segments"][0].update(file="segment-000009.aof"),
                         "inconsistent segment entry {'file': 'segment-000009.aof', "
                         "'segment': 7, 'first_lsn': 1235}"),
    "segments out of order": (lambda d: d["segments"].reverse(),
                              "segments out of order at segment-000007.aof"),
    "a gap after the snapshot": (lambda d: d["segments"][0].update(first_lsn=1236),
                                 "the first segment starts at LSN 1236, but the snapshot "
                                 "covers up to LSN 1234"),
    "no snapshot, not at 1": (lambda d: d.update(snapshot=None),
                              "the first segment starts at LSN 1235, but the log starts at 1"),
    "snapshot not an object": (lambda d: d.update(snapshot=[1]),
                               "'snapshot' must be an object or null"),
    "snapshot lacks a field": (lambda d: d["snapshot"].pop("size"),
                               "lacks file/lsn/size/created_ms"),
    "snapshot misnamed": (lambda d: d["snapshot"].update(lsn=1233),
                          "inconsistent snapshot entry"),
    "snapshot crc": (lambda d: d["snapshot"].update(crc32=1 << 32), "'crc32' is not a CRC-32"),
    "repl_id": (lambda d: d.update(repl_id="XYZ"), "'repl_id' must be 40 hex digits"),
    "repl_id2": (lambda d: d.update(repl_id2="0"),
                 "'repl_id2' must be 40 hex digits and 'repl_offset2' an integer"),
    "repl_offset2": (lambda d: d.update(repl_offset2="7"),
                     "'repl_id2' must be 40 hex digits and 'repl_offset2' an integer"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_what_is_refused(name: str) -> None:
    change, expected = REFUSALS[name]
    message = refusal(mutated(change))
    assert message.startswith(f"{WHERE}: ")
    assert expected in message, message


def test_store_then_load(tmp_path: Path) -> None:
    fs = RealFS()
    manifest = sample()
    create_files(tmp_path, manifest)
    store(fs, str(tmp_path), manifest)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("manifest")) == \
        [MANIFEST]  # no temp file left
    assert load(fs, str(tmp_path)) == manifest
    replacement = Manifest([SegmentEntry(segment_file(9), 9, 1400)],
                           SnapshotEntry(snapshot_file(1399), 1399, 1, 2, 3), REPL_ID)
    create_files(tmp_path, replacement)
    store(fs, str(tmp_path), replacement)
    assert load(fs, str(tmp_path)) == replacement
    assert (tmp_path / MANIFEST).read_bytes() == replacement.to_json()


def test_load_refuses_a_missing_manifest_or_a_missing_file(tmp_path: Path) -> None:
    fs = RealFS()
    path = tmp_path / MANIFEST
    with pytest.raises(ManifestError, match=f"^{re.escape(str(path))}: manifest is missing$"):
        load(fs, str(tmp_path))
    manifest = sample()
    create_files(tmp_path, manifest)
    store(fs, str(tmp_path), manifest)
    for name in ("segment-000008.aof", "snapshot-000000001234.mdb"):
        (tmp_path / name).rename(tmp_path / "aside")
        with pytest.raises(ManifestError) as caught:
            load(fs, str(tmp_path))
        assert str(caught.value) == f"{path}: names {name}, which does not exist"
        (tmp_path / "aside").rename(tmp_path / name)


def test_load_names_the_file_of_a_damaged_manifest(tmp_path: Path) -> None:
    fs = RealFS()
    manifest = sample()
    create_files(tmp_path, manifest)
    store(fs, str(tmp_path), manifest)
    path = tmp_path / MANIFEST
    data = bytearray(path.read_bytes())
    data[data.index(b"81920")] = ord("9")
    path.write_bytes(bytes(data))
    with pytest.raises(ManifestError, match=f"^{re.escape(str(path))}: damaged: "):
        load(fs, str(tmp_path))


class FailingSync(RealFS):
    """fdatasync fails (EIO) for the manifest's temp file."""

    def __init__(self) -> None:
        self.temp_fds: set[int] = set()

    def open_write_new(self, path: str) -> int:
        fd = super().open_write_new(path)
        if path.endswith(MANIFEST_TMP):
            self.temp_fds.add(fd)
        return fd

    def fdatasync(self, fd: int) -> None:
        if fd in self.temp_fds:
            raise OSError(errno.EIO, "injected")
        super().fdatasync(fd)


def test_a_failure_before_the_rename_leaves_the_previous_manifest(tmp_path: Path) -> None:
    fs = RealFS()
    manifest = sample()
    create_files(tmp_path, manifest)
    store(fs, str(tmp_path), manifest)
    before = (tmp_path / MANIFEST).read_bytes()
    with pytest.raises(ManifestUnchanged) as caught:
        store(FailingSync(), str(tmp_path), Manifest([SegmentEntry(segment_file(1), 1, 1)]))
    assert caught.value.errno == errno.EIO
    assert caught.value.filename == str(tmp_path / MANIFEST_TMP)
    assert isinstance(caught.value, OSError) and isinstance(caught.value, StorageError)
    assert (tmp_path / MANIFEST).read_bytes() == before
    assert load(fs, str(tmp_path)) == manifest
