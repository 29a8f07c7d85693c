"""aof.segment_reader: the one segment reader (recovery, the snapshot build, later the inspector and a
replica's catch-up). Real segments written by a real engine on disk, then read back, damaged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.codec import FRAME_SIZE, HEADER_SIZE, encode
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import segment_file
from streamkeep.aof.segment_reader import SegmentDamage, SegmentError, SegmentReader
from streamkeep.engine.wire.errors import StorageError


def _segment(tmp_path: Path, records: int = 5) -> str:
    with Engine.open(str(tmp_path), appendfsync="no") as db:
        for i in range(records):
            db.execute("XADD", "s", f"{i + 1}-0", "f", f"v{i}")
    return str(tmp_path / segment_file(1))


def test_reads_every_record_in_order(tmp_path: Path) -> None:
    file = _segment(tmp_path, 200)
    reader = SegmentReader(RealFS(), file, 1, 1)
    batches = list(reader.batches())
    records = [r for batch in batches for r in batch]
    assert len(batches) > 1  # batch by batch, not all at once
    assert [r[0] for r in records] == list(range(1, 201))
    assert records[0][3][0][:3] == (b"XADD", b"s", b"1-0")
    assert reader.count == 200 and reader.end == reader.size and reader.damage is None


def test_damage_names_the_file_and_offset(tmp_path: Path) -> None:
    file = _segment(tmp_path)
    data = bytearray(Path(file).read_bytes())
    third = HEADER_SIZE + 2 * (len(data) - HEADER_SIZE) // 5  # records are the same size
    data[third + FRAME_SIZE + 2] ^= 0xFF  # a payload byte: the CRC no longer matches
    Path(file).write_bytes(bytes(data))
    reader = SegmentReader(RealFS(), file, 1, 1)
    assert [r[0] for r in reader.records()] == [1, 2]
    damage = reader.damage
    assert isinstance(damage, SegmentDamage)
    assert (damage.file, damage.offset) == (file, third) and reader.end == third
    assert damage.valid_after  # records 4 and 5 follow: damage to refuse, not a torn tail
    assert str(damage).startswith(f"{file}: ") and str(damage).endswith(f"byte offset {third}")


def test_torn_tail_is_not_followed_by_valid_records(tmp_path: Path) -> None:
    file = _segment(tmp_path)
    os.truncate(file, os.path.getsize(file) - 3)
    reader = SegmentReader(RealFS(), file)
    assert [r[0] for r in reader.records()] == [1, 2, 3, 4]
    assert reader.damage is not None and not reader.damage.valid_after


@pytest.mark.parametrize(("segment", "first_lsn"), [(2, 1), (1, 7)])
def test_header_must_match_the_manifest(tmp_path: Path, segment: int, first_lsn: int) -> None:
    file = _segment(tmp_path)
    with pytest.raises(SegmentError, match=f"^{file}: header says segment 1 first LSN 1, the "
                                           f"manifest says segment {segment} first LSN "
                                           f"{first_lsn}$"):
        SegmentReader(RealFS(), file, segment, first_lsn)


def test_not_a_segment(tmp_path: Path) -> None:
    file = tmp_path / "segment-000001.aof"
    file.write_bytes(encode(1, 0, 0, [[b"XADD", b"s", b"1-0", b"f", b"v"]]) * 4)
    with pytest.raises(SegmentError, match="bad magic") as err:
        SegmentReader(RealFS(), str(file))
    assert isinstance(err.value, StorageError)  # one family: storage errors
    assert str(err.value).startswith(str(file))
