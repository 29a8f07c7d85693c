"""`streamkeep aof fix` on real data directories: a torn tail cut after being saved (the
directory then opens, with the same state), the confirmation prompt, damage refused without
--force-skip-damaged and skipped with it (later records kept, renumbered, the directory opens),
what it cannot fix, and a directory an open Engine holds (exit 3, nothing changed)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentReader
from tests.support.datadir import fingerprint
from tests.support.inspect_util import (
    Written,
    append_bytes,
    cli,
    flip_byte,
    manifest,
    record_offsets,
    segments,
    verify_json,
    write_dir,
)


@pytest.fixture
def written(tmp_path: Path) -> Written:
    return write_dir(tmp_path / "data", commands=400, compact_after=250)


def reopened(path: Path) -> tuple[str, int]:
    with Engine.open(str(path), auto_aof_rewrite_percentage=0) as engine:
        return engine.digest(), engine.journal.lsn  # type: ignore[union-attr]


@pytest.mark.parametrize("tail", [bytes(200) + b"\x05", random.Random(3).randbytes(333)])
def test_torn_tail_is_cut_and_saved(written: Written, tail: bytes) -> None:
    last = segments(written.path)[-1]
    size = last.stat().st_size
    append_bytes(last, tail)
    code, out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 0, (out, err)
    assert last.stat().st_size == size
    side = last.with_name(f"{last.name}.cut-{size}")
    assert side.read_bytes() == tail
    assert f"cut at offset {size}" in out and str(side) in out
    assert verify_json(written.path)[0] == 0
    assert reopened(written.path) == (written.digest_at(written.lsn), written.lsn)


def test_prompt_no_changes_nothing(written: Written) -> None:
    last = segments(written.path)[-1]
    append_bytes(last, bytes(50) + b"\x05")
    before = fingerprint(written.path)
    code, _out, err = cli("aof", "fix", str(written.path), stdin="n\n")
    assert code == 3 and "not confirmed" in err and "truncate" in err
    after = fingerprint(written.path)
    before.pop("LOCK"), after.pop("LOCK")  # fix took the lock: LOCK holds its pid
    assert before == after
    code, _out, _err = cli("aof", "fix", str(written.path), stdin="y\n")
    assert code == 0 and verify_json(written.path)[0] == 0


def test_clean_directory_nothing_to_fix(written: Written) -> None:
    code, out, _err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 0 and "nothing to fix" in out


def _flip_middle(written: Written) -> tuple[Path, int, int]:
    """Damage a record in the middle of the second-to-last segment: (segment, its offset,
    the LSN it held)."""
    seg = segments(written.path)[-2]
    offsets = record_offsets(seg)
    index = len(offsets) // 2
    doc = manifest(written.path)
    first_lsn = next(s["first_lsn"] for s in doc["segments"] if s["file"] == seg.name)
    flip_byte(seg, offsets[index] + 12)
    return seg, offsets[index], first_lsn + index


def test_damage_refused_without_force(written: Written) -> None:
    seg, offset, _lsn = _flip_middle(written)
    before = fingerprint(written.path)
    code, _out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 2
    assert f"{seg.name}:{offset}" in err and "--force-skip-damaged" in err
    after = fingerprint(written.path)
    before.pop("LOCK"), after.pop("LOCK")
    assert before == after


def records(path: Path) -> list[tuple]:
    """Every record of the directory's segments as (time_ms, db, effects), LSNs left out."""
    fs = RealFS()
    out = []
    for seg in segments(path):
        out += [(t, db, effects) for _lsn, t, db, effects in SegmentReader(fs, str(seg)).records()]
    return out


def test_force_skip_damaged_keeps_later_records(written: Written) -> None:
    original = records(written.path)
    seg, offset, lost_lsn = _flip_middle(written)
    old_repl_id = manifest(written.path)["repl_id"]
    code, out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", str(written.path))
    assert code == 0, (out, err)
    assert f"{seg.name}:{offset}: 1 record(s) lost (LSN {lost_lsn}" in out
    assert seg.with_name(f"{seg.name}.cut-{offset}").exists()
    code, doc = verify_json(written.path)
    assert code == 0, doc["problems"]
    assert doc["records"] == written.lsn - manifest(written.path)["snapshot"]["lsn"] - 1
    assert manifest(written.path)["repl_id"] != old_repl_id
    digest, lsn = reopened(written.path)
    assert lsn == written.lsn - 1  # every record but the damaged one
    # Every record but the lost one is kept, in order, with its time, db and effects.
    first = manifest(written.path)["snapshot"]["lsn"] + 1
    assert records(written.path) == original[:lost_lsn - first] + original[lost_lsn - first + 1:]
    assert digest != written.digest_at(lost_lsn - 1)


def test_cannot_fix_missing_segment(written: Written) -> None:
    segments(written.path)[1].unlink()
    code, _out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", str(written.path))
    assert code == 2 and "cannot fix missing-segment" in err


def test_locked_directory_exit_3(written: Written) -> None:
    append_bytes(segments(written.path)[-1], bytes(10))
    with Engine.open(str(written.path), auto_aof_rewrite_percentage=0):
        # The open truncated the tail itself; the point: fix refuses to edit a held directory.
        before = fingerprint(written.path)
        code, _out, err = cli("aof", "fix", "--yes", str(written.path))
        assert code == 3 and "locked by process" in err and "stop the server" in err
        assert fingerprint(written.path) == before


def test_usage_errors(tmp_path: Path) -> None:
    code, _out, err = cli("aof", "fix", str(tmp_path / "nope"))
    assert code == 3 and "Traceback" not in err
    code, _out, err = cli("aof", "fix", str(tmp_path))
    assert code == 3 and "manifest" in err
    code, out, _err = cli("aof", "fix", "--help")
    assert code == 0 and "examples:" in out and "exit status:" in out


def test_force_skip_in_the_first_segment_without_snapshot(tmp_path: Path) -> None:
    written = write_dir(tmp_path / "data", commands=200)
    original = records(written.path)
    seg = segments(written.path)[0]
    offsets = record_offsets(seg)
    flip_byte(seg, offsets[0] + 12)  # the very first record of the log
    code, out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", str(written.path))
    assert code == 0, (out, err)
    assert f"{seg.name}:{offsets[0]}: 1 record(s) lost (LSN 1" in out
    # The lost record created a group: later records acting on it cannot replay. They are
    # dropped too (saved), and what is kept is the rest, in order.
    match = re.search(r"(\d+) later record\(s\) depend on lost ones", out)
    assert match, out
    inapplicable = int(match.group(1))
    side = seg.with_name(f"{seg.name}.inapplicable")
    assert len(record_offsets_of(side)) == inapplicable
    kept = records(written.path)
    assert len(kept) == len(original) - 1 - inapplicable
    rest = iter(original[1:])
    assert all(record in rest for record in kept)  # a subsequence, in order
    assert reopened(written.path)[1] == written.lsn - 1 - inapplicable
    assert manifest(written.path)["segments"][0]["first_lsn"] == 1


def record_offsets_of(frames: Path) -> list[int]:
    """Offsets of the frames of a header-less file of records."""
    data = frames.read_bytes()
    offsets, pos = [], 0
    while pos < len(data):
        offsets.append(pos)
        pos += 8 + int.from_bytes(data[pos:pos + 4], "little")
    return offsets


def test_damage_inside_fsynced_bytes_needs_force(written: Written) -> None:
    """A flipped byte in the last record of a cleanly closed directory: opening refuses, fix
    refuses without --force-skip-damaged and with it drops the record (saved) and starts a
    new watermark; the directory then opens to the state before that record."""
    from streamkeep.aof.watermark import read

    last = segments(written.path)[-1]
    offset = record_offsets(last)[-1]
    flip_byte(last, offset + 12)
    code, _out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 2 and "damage-in-synced" in err and "--force-skip-damaged" in err
    code, out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", str(written.path))
    assert code == 0, (out, err)
    assert last.with_name(f"{last.name}.cut-{offset}").exists()
    assert reopened(written.path) == (written.digest_at(written.lsn - 1), written.lsn - 1)
    mark = read(RealFS(), str(written.path))
    newest = segments(written.path)[-1]
    assert mark is not None and (mark.segment, mark.offset) == (
        int(newest.name[8:-4]), newest.stat().st_size)
