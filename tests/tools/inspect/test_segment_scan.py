"""Checking a segment file a window at a time (`segment_scan`): the same verdict as the codec's
checker over the whole file, under every kind of damage, with records bigger than a window;
a clean scan never reads more than a window at once; a big segment checked in parts by worker
processes reaches the serial verdict, and parts join only where their records meet."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof import codec
from streamkeep.tools.inspect import segment_scan, verify
from tests.support.inspect_util import append_bytes, flip_byte, record_offsets, segments


def _segment_file(path: Path, first_lsn: int, sizes: list[int]) -> bytes:
    parts = [codec.encode_header(1, first_lsn)]
    for i, size in enumerate(sizes):
        effects = [[b"XADD", b"s", b"%d-0" % i, b"f", b"v" * size]]
        parts.append(codec.encode(first_lsn + i, 1_700_000_000_000 + i, 0, effects))
    data = b"".join(parts)
    path.write_bytes(data)
    return data


def _whole(data: bytes, first_lsn: int) -> tuple:
    found = codec.verify_scan(data, codec.HEADER_SIZE, first_lsn)
    damage = found.damage
    return (found.end, found.count, found.first_time_ms, found.last_time_ms,
            None if damage is None else (damage.offset, damage.reason, damage.valid_after))


def _windowed(path: Path) -> tuple:
    s = segment_scan.scan_segment(str(path))
    return (s.end, s.records, s.first_time_ms, s.last_time_ms, s.damage)


@pytest.mark.parametrize("seed", range(60))
def test_windows_give_the_whole_file_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             seed: int) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(segment_scan, "WINDOW", rng.choice([64, 300, 1000, 4096]))
    first_lsn = rng.choice([1, 65_520, 2**32 - 10])
    # Some records bigger than any window: a window holds one record at least.
    sizes = [rng.choice([0, 10, 50, 200, 5000]) for _ in range(rng.randint(0, 40))]
    path = tmp_path / "segment-000001.aof"
    data = bytearray(_segment_file(path, first_lsn, sizes))
    kind = rng.choice(["none", "flip", "truncate", "append", "zeros"])
    if kind == "flip" and len(data) > codec.HEADER_SIZE:
        data[rng.randrange(codec.HEADER_SIZE, len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncate" and len(data) > codec.HEADER_SIZE:
        del data[rng.randrange(codec.HEADER_SIZE, len(data)):]
    elif kind == "append":
        data += rng.randbytes(rng.randint(1, 200))
    elif kind == "zeros" and len(data) > codec.HEADER_SIZE:
        at = rng.randrange(codec.HEADER_SIZE, len(data))
        data[at:at + 64] = bytes(len(data[at:at + 64]))
    path.write_bytes(bytes(data))
    assert _windowed(path) == _whole(bytes(data), first_lsn), kind


def test_a_clean_scan_reads_a_window_at_a_time(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "segment-000001.aof"
    data = _segment_file(path, 1, [30] * 2000)
    monkeypatch.setattr(segment_scan, "WINDOW", 4096)
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting_pread)
    assert _windowed(path)[:2] == (len(data), 2000)
    assert max(reads) <= 4096 and sum(reads) < len(data) * 1.1


def _big_segment_dir(path: Path) -> Path:
    with Engine.open(str(path), aof_segment_max_bytes=1 << 30,
                     auto_aof_rewrite_percentage=0) as db:
        for i in range(6000):
            db.execute("XADD", f"k{i % 7}", "*", "f", "v" * (i % 50), "i", str(i))
    return path


@pytest.mark.parametrize("damage", ["none", "middle", "tail"])
def test_a_segment_checked_in_parts_gives_the_serial_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    d = _big_segment_dir(tmp_path / "d")
    (segment,) = segments(d)
    offsets = record_offsets(segment)
    if damage == "middle":  # a CRC flip in the second part, valid records after it
        flip_byte(segment, offsets[len(offsets) * 2 // 3] + 20)
    elif damage == "tail":
        append_bytes(segment, b"\x40\x00\x00\x00garbage")
    timing = ("seconds", "records_per_second")
    serial = {k: v for k, v in verify.analyse(str(d), jobs=1).to_json().items()
              if k not in timing}
    monkeypatch.setattr(segment_scan, "SPLIT_BYTES", 4096)  # 3 parts of this ~300 KB segment
    monkeypatch.setattr(segment_scan, "WINDOW", 20_000)  # and several windows in each
    if damage != "middle":  # the parts join: the segment is not rescanned whole
        monkeypatch.setattr(segment_scan, "scan_segment", None)
    parts = {k: v for k, v in verify.analyse(str(d), jobs=3).to_json().items()
             if k not in timing}
    assert parts == serial
    assert damage == "middle" or parts["records"] == 6000


def test_parts_join_only_where_records_meet() -> None:
    scanned = segment_scan.Scanned(1000, header=(1, 1), end=500, records=10)
    first = segment_scan.Part(32, 1, scanned, False)
    # The next part's first record must start where the first part ended, with LSN 11.
    good = segment_scan.Part(500, 11, scanned._replace(end=1000, records=5), False)
    assert segment_scan.join_parts([first, good]).records == 15
    assert segment_scan.join_parts([first, good._replace(start=501)]) is None
    assert segment_scan.join_parts([first, good._replace(first_lsn=12)]) is None
    assert segment_scan.join_parts([first._replace(refused=True), good]) is None
    assert segment_scan.join_parts([first, None]) is None


def test_a_scan_left_early_leaves_no_pool_thread(tmp_path: Path) -> None:
    """A parallel scan given up before its end (Ctrl-C, a reader that stops) stops its workers
    and waits for the pool's manager thread: one left running at the interpreter's exit raced
    its wake-up pipe's closing ("Exception ignored ... Bad file descriptor" after Ctrl-C)."""
    import threading

    files = []
    for k in range(4):
        path = tmp_path / f"segment-{k:06d}.aof"
        _segment_file(path, 1 + 100 * k, [200] * 100)
        files.append(str(path))
    scans = segment_scan.scan_all(files, deep=True, jobs=2)
    assert next(scans).records == 100
    scans.close()  # what an interrupt does: GeneratorExit through the pool's `except`
    managers = [t for t in threading.enumerate() if "ExecutorManager" in type(t).__name__]
    assert managers == []
