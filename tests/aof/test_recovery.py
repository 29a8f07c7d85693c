"""aof.recovery: what a directory's log files mean when it opens, judged with no engine at all.

Checked here on files written by hand: a new directory's first files (and an interrupted first
open made again; data without a manifest refused); the orphans a crash leaves, removed with
their reasons; a segment that does not start where the previous one ended, refused; the end of
a replayed segment judged against the synced watermark: fsynced bytes missing or damaged
refused, a torn tail past them saved and cut, damage in an earlier segment refused, a torn tail
refused when aof-load-truncated is no. The same cases through Engine.open, every kind of
damage, are tests/crash/test_aof_damage.py's.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamkeep.aof import manifest as manifest_mod
from streamkeep.aof.codec import HEADER_SIZE, encode_header, encode_record
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import ManifestError, SegmentEntry
from streamkeep.aof.recovery import (
    AOFCorruptError,
    initialise,
    judge_segment,
    open_segment,
    remove_orphans,
)
from streamkeep.aof.segment_reader import SegmentReader
from streamkeep.aof.watermark import Synced
from streamkeep.engine.model.effects import Record

FS = RealFS()


def segment_of(path: Path, n: int, first_lsn: int = 1,
               number: int = 1) -> tuple[SegmentEntry, int]:
    """A segment file of `n` XADD records from `first_lsn`; (its entry, its size)."""
    entry = SegmentEntry(manifest_mod.segment_file(number), number, first_lsn)
    data = encode_header(number, first_lsn) + b"".join(
        encode_record(Record(first_lsn + i, 1000 + i, 0, [[b"XADD", b"s", b"%d-1" % (i + 1),
                                                          b"f", b"v"]]))
        for i in range(n))
    (path / entry.file).write_bytes(data)
    return entry, len(data)


def replayed(path: Path, entry: SegmentEntry, expected: int = 1) -> SegmentReader:
    """Open the segment and read every record, as the data directory replays it."""
    reader = open_segment(FS, str(path), entry, expected)
    for _batch in reader.records():
        pass
    return reader


def test_a_new_directory_gets_its_first_segment_and_manifest(tmp_path: Path) -> None:
    manifest, fd = initialise(FS, str(tmp_path))
    FS.close(fd)
    assert [s.file for s in manifest.segments] == ["segment-000001.aof"]
    assert manifest_mod.load(FS, str(tmp_path)) == manifest
    assert (tmp_path / "segment-000001.aof").stat().st_size == HEADER_SIZE


def test_an_interrupted_first_open_is_made_again(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "segment-000001.aof").write_bytes(encode_header(1, 1))  # no manifest named it
    manifest, fd = initialise(FS, str(tmp_path))
    FS.close(fd)
    assert manifest.segments[0].first_lsn == 1
    assert "re-initialising after an interrupted first open" in caplog.text


def test_data_without_a_manifest_is_refused(tmp_path: Path) -> None:
    segment_of(tmp_path, 3)
    with pytest.raises(ManifestError, match="manifest is missing but the directory holds"):
        initialise(FS, str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["segment-000001.aof"]


def test_orphans_are_removed_with_their_reasons(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    manifest, fd = initialise(FS, str(tmp_path))
    FS.close(fd)
    for name in ("segment-000002.aof", "snapshot-000000000009.mdb", manifest_mod.MANIFEST_TMP,
                 "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    caplog.set_level(logging.WARNING, logger="streamkeep.aof")
    remove_orphans(FS, str(tmp_path), manifest)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "manifest.json", "notes.txt", "segment-000001.aof"]
    assert "interrupted rotation" in caplog.text and "does not name" in caplog.text


def test_a_segment_must_start_where_the_last_ended(tmp_path: Path) -> None:
    entry, _size = segment_of(tmp_path, 2, first_lsn=5)
    with pytest.raises(AOFCorruptError, match="starts at LSN 5 but the previous segment ends at 3"):
        open_segment(FS, str(tmp_path), entry, 4)


def test_a_whole_segment_passes(tmp_path: Path) -> None:
    entry, size = segment_of(tmp_path, 4)
    reader = replayed(tmp_path, entry)
    judge_segment(FS, str(tmp_path), entry, reader, Synced(size, 4), True)
    assert (tmp_path / entry.file).stat().st_size == size


def test_fsynced_bytes_missing_are_refused(tmp_path: Path) -> None:
    entry, size = segment_of(tmp_path, 4)
    reader = replayed(tmp_path, entry)
    with pytest.raises(AOFCorruptError, match="LSNs 5..6 are missing"):
        judge_segment(FS, str(tmp_path), entry, reader, Synced(size + 80, 6), True)


def test_a_torn_tail_is_saved_and_cut(tmp_path: Path) -> None:
    entry, size = segment_of(tmp_path, 4)
    file = tmp_path / entry.file
    with file.open("ab") as f:
        f.write(b"\xff" * 30)
    reader = replayed(tmp_path, entry)
    judge_segment(FS, str(tmp_path), entry, reader, Synced(size, 4), True)
    assert file.stat().st_size == size
    assert Path(f"{file}.cut-{size}").read_bytes() == b"\xff" * 30


def test_damage_inside_fsynced_bytes_is_refused_and_nothing_cut(tmp_path: Path) -> None:
    entry, size = segment_of(tmp_path, 4)
    file = tmp_path / entry.file
    data = bytearray(file.read_bytes())
    data[-2] ^= 0xFF
    file.write_bytes(bytes(data))
    reader = replayed(tmp_path, entry)
    with pytest.raises(AOFCorruptError, match="inside data already fsynced"):
        judge_segment(FS, str(tmp_path), entry, reader, Synced(size, 4), True)
    assert file.read_bytes() == bytes(data) and not list(tmp_path.glob("*.cut-*"))


@pytest.mark.parametrize(("durable", "load_truncated", "message"), [
    (None, True, "in a segment before the last"),
    (Synced(HEADER_SIZE, 0), False, "aof-load-truncated is no"),
])
def test_a_tail_that_may_not_be_cut_is_refused(tmp_path: Path, durable: Synced | None,
                                               load_truncated: bool, message: str) -> None:
    entry, _size = segment_of(tmp_path, 2)
    with (tmp_path / entry.file).open("ab") as f:
        f.write(b"\xff" * 30)
    reader = replayed(tmp_path, entry)
    with pytest.raises(AOFCorruptError, match=message):
        judge_segment(FS, str(tmp_path), entry, reader, durable, load_truncated)
