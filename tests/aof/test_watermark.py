"""The synced watermark (aof/watermark.py): its records, how a damaged or torn file reads, what
it says of the last segment, and that the journal advances it exactly to what each fsync
covered (counted in records and bytes, never timed)."""

from __future__ import annotations

import errno
import logging
import os
import random
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof import watermark as wm
from streamkeep.aof.codec import HEADER_SIZE
from streamkeep.aof.fs import RealFS
from streamkeep.tools.crashbench.faultfs import FaultyFS, PowerCut, TrackingFS, stop_threads


def test_records_round_trip_and_the_highest_valid_one_wins() -> None:
    marks = [wm.Watermark(3, 100, 7), wm.Watermark(3, 400, 9), wm.Watermark(2, 9000, 5)]
    data = b"".join(map(wm.encode, marks))
    assert len(data) == 3 * wm.RECORD_SIZE
    assert wm.decode(data) == wm.Watermark(3, 400, 9)
    damaged = bytearray(data)
    damaged[wm.RECORD_SIZE + 10] ^= 1  # the best record is damaged: the next best stands
    assert wm.decode(bytes(damaged)) == wm.Watermark(3, 100, 7)
    assert wm.decode(data + wm.encode(wm.Watermark(3, 500, 10))[:17]) == marks[1]  # torn append
    assert wm.decode(b"") is None and wm.decode(bytes(64)) is None
    assert wm.decode(os.urandom(4096)) is None


def test_read_tells_missing_from_damaged(tmp_path: Path) -> None:
    fs = RealFS()
    assert wm.read(fs, str(tmp_path)) is None
    (tmp_path / wm.WATERMARK).write_bytes(b"\x00" * 40)
    with pytest.raises(wm.WatermarkDamaged, match="holding no valid watermark record"):
        wm.read(fs, str(tmp_path))
    wm.store(fs, str(tmp_path), wm.Watermark(4, 77, 12))
    assert wm.read(fs, str(tmp_path)) == wm.Watermark(4, 77, 12)
    assert not (tmp_path / wm.WATERMARK_TMP).exists()


def test_what_the_watermark_says_of_the_last_segment(tmp_path: Path) -> None:
    fs, d = RealFS(), str(tmp_path)
    unknown = wm.durable_part(fs, d, 5)
    assert unknown.offset is None and "no synced watermark" in unknown.why
    wm.store(fs, d, wm.Watermark(5, 900, 40))
    assert wm.durable_part(fs, d, 5) == wm.Synced(900, 40)
    assert wm.durable_part(fs, d, 6).offset == HEADER_SIZE  # rotated since: only its header
    assert wm.durable_part(fs, d, 4).offset is None  # names a later segment: another history
    (tmp_path / wm.WATERMARK).write_bytes(b"garbage")
    damaged = wm.durable_part(fs, d, 5)
    assert damaged.offset is None and damaged.damaged


def _written(directory: Path) -> tuple[int, int]:
    """(segment number, size) of the directory's newest segment."""
    newest = sorted(directory.glob("segment-*.aof"))[-1]
    return int(newest.name[8:-4]), newest.stat().st_size


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_the_journal_advances_it_to_what_each_fsync_covered(tmp_path: Path,
                                                             policy: str) -> None:
    engine = Engine.open(str(tmp_path), appendfsync=policy)
    journal = engine.journal
    assert journal is not None
    try:
        for i in range(50):
            engine.execute("XADD", "s", "*", "n", str(i))
            if policy == "always":  # each command returned after its fsync: covered now
                assert journal.watermark is not None
                assert journal.watermark.mark == wm.Watermark(*_written(tmp_path), journal.lsn)
        journal.sync()
        # (the written end: under everysec the file runs on into its mapped tail until closed)
        segment, size = journal.written_end
        assert wm.read(RealFS(), str(tmp_path)) == wm.Watermark(segment, size, 50)
    finally:
        engine.close()
    assert wm.read(RealFS(), str(tmp_path)) == wm.Watermark(*_written(tmp_path), 50)


def test_it_is_replaced_before_it_grows_large(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wm, "REPLACE_BYTES", 10 * wm.RECORD_SIZE)
    with Engine.open(str(tmp_path), appendfsync="always") as engine:
        for i in range(100):
            engine.execute("XADD", "s", "*", "n", str(i))
            assert (tmp_path / wm.WATERMARK).stat().st_size <= 11 * wm.RECORD_SIZE
    assert wm.read(RealFS(), str(tmp_path)) == wm.Watermark(*_written(tmp_path), 100)


def test_a_failing_watermark_stops_advancing_and_loses_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fs = FaultyFS(match=wm.WATERMARK)
    with Engine.open(str(tmp_path), appendfsync="always", fs=fs) as engine:
        engine.execute("XADD", "s", "1-1", "a", "b")
        fs.fail_writes(errno.ENOSPC)
        with caplog.at_level(logging.ERROR, logger="streamkeep.aof"):
            for i in range(2, 6):
                engine.execute("XADD", "s", f"{i}-1", "a", "b")  # writes go on
        assert sum("synced watermark stays" in r.getMessage() for r in caplog.records) == 1
        fs.clear()
        digest = engine.digest()
    stuck = wm.read(RealFS(), str(tmp_path))
    assert stuck is not None and stuck.lsn <= 2  # it lags: never ahead of what is durable
    with Engine.open(str(tmp_path)) as engine:  # the next open starts it afresh
        assert engine.digest() == digest
    assert wm.read(RealFS(), str(tmp_path)) == wm.Watermark(*_written(tmp_path), 5)


def test_after_a_power_cut_it_is_never_ahead_of_the_durable_log(tmp_path: Path) -> None:
    """Whatever the power leaves of the watermark (its appends are fsynced once a second at
    most), it names no byte of the segment that was not fsynced."""
    for cut in range(1, 40, 3):
        directory = tmp_path / f"cut{cut}"
        fs = TrackingFS(cut_at=cut, cut_kind="write")
        engine = None
        try:
            engine = Engine.open(str(directory), appendfsync="always", fs=fs)
            for i in range(30):
                engine.execute("XADD", "s", "*", "n", str(i))
        except PowerCut:
            pass
        finally:
            stop_threads(engine)
            fs.abandon()
        after = tmp_path / f"after{cut}"
        fs.materialise(str(directory), str(after), random.Random(cut), "none")
        mark = wm.read(RealFS(), str(after))
        if mark is not None:
            segment = after / f"segment-{mark.segment:06d}.aof"
            assert segment.stat().st_size >= mark.offset, (cut, mark)
        with Engine.open(str(after)):  # and the directory opens
            pass
