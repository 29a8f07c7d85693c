"""What `aof verify` and `aof fix` say a damaged span held, against what was really there.

Segments are cut (truncated) at several offsets inside bytes the synced watermark says were
fsynced, and torn tails are written past it (part of a real record's frame, a whole damaged
record and part of the next, zeros, garbage); the LSNs reported as lost are compared with a
copy of the log taken before the damage (and with what the repaired log still holds), and
"exactly" or "at least" with what the bytes and the watermark can tell. Also the frame walk
over hostile bytes (tools/inspect/loss.py)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from streamkeep.aof import codec
from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentReader
from streamkeep.aof.watermark import read as read_watermark
from streamkeep.tools.inspect import loss
from tests.support.inspect_util import (
    Written,
    append_bytes,
    cli,
    manifest,
    record_offsets,
    segments,
    verify_json,
    write_dir,
)


@pytest.fixture
def written(tmp_path: Path) -> Written:
    # Bigger segments than the default: the last one holds enough records to cut between.
    return write_dir(tmp_path / "data", commands=300, aof_segment_max_bytes=6000)


def log_records(path: Path) -> list[tuple]:
    """Every record of the directory's segments, (lsn, time_ms, db, effects)."""
    fs = RealFS()
    return [tuple(r) for seg in segments(path) for r in SegmentReader(fs, str(seg)).records()]


def fix_json(path: Path) -> tuple[int, dict, str]:
    code, out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", "--json", str(path))
    return code, json.loads(out), err


def the_problem(path: Path) -> dict:
    code, doc = verify_json(path)
    assert code in (1, 2), doc
    (problem,) = doc["problems"]
    return problem


# Where a cut inside the last segment falls, relative to its records (index from the end).
CUTS = {
    "at a record boundary": lambda offs, i: offs[i],
    "inside a frame header": lambda offs, i: offs[i] + 5,
    "inside the payload's LSN": lambda offs, i: offs[i] + 10,
    "inside the payload": lambda offs, i: offs[i] + 30,
    "right after the segment header": lambda offs, i: codec.HEADER_SIZE,
}


@pytest.mark.parametrize("where", sorted(CUTS))
@pytest.mark.parametrize("back", [1, 3])
def test_a_cut_inside_fsynced_bytes_reports_every_record_it_removed(
        written: Written, where: str, back: int) -> None:
    before = log_records(written.path)
    last = segments(written.path)[-1]
    offsets = record_offsets(last)
    assert len(offsets) > back
    mark = read_watermark(RealFS(), str(written.path))
    assert mark is not None and mark.offset == last.stat().st_size  # a clean close
    cut = CUTS[where](offsets, len(offsets) - back)
    whole = sum(1 for o in [*offsets[1:], last.stat().st_size] if o <= cut)
    first_removed = manifest(written.path)["segments"][-1]["first_lsn"] + whole
    os.truncate(last, cut)

    problem = the_problem(written.path)
    assert problem["kind"] == "damage-in-synced"
    lost = problem["lost"]
    assert (lost["first_lsn"], lost["last_lsn"]) == (first_removed, written.lsn)
    assert lost["count"] == written.lsn - first_removed + 1
    # The watermark vouches for what was fsynced; what came after it cannot be ruled out.
    assert lost["exact"] is False and "cannot be counted" in lost["unknown"]

    code, doc, err = fix_json(written.path)
    assert code == 0, err
    (cut_doc,) = doc["cuts"]
    assert cut_doc["lost"] == lost
    assert doc["records_lost"] == {"count": written.lsn - first_removed + 1, "exact": False}
    assert doc["log_ends_at_lsn"] == first_removed - 1
    # Exactly the reported records are gone: the log is the copy's prefix before them.
    after = log_records(written.path)
    assert after == before[:len(after)]
    assert {r[0] for r in before} - {r[0] for r in after} == set(
        range(first_removed, written.lsn + 1))


def test_the_text_report_says_at_least(written: Written) -> None:
    last = segments(written.path)[-1]
    offsets = record_offsets(last)
    os.truncate(last, offsets[-2] + 20)
    first = written.lsn - 1
    code, out, err = cli("aof", "verify", str(written.path))
    assert code == 2 and f"at least 2 record(s) lost (LSN {first}..{written.lsn}" in out
    code, out, err = cli("aof", "fix", "--yes", "--force-skip-damaged", str(written.path))
    assert code == 0, err
    assert f"{last.name}:{offsets[-2]}: at least 2 record(s) lost (LSN {first}.." in out
    assert "; at least 2 record(s) lost; the log now ends at LSN " f"{first - 1};" in out
    assert "0 record(s) lost" not in out


def test_a_cut_at_a_record_boundary_saves_nothing_but_reports_the_records(
        written: Written) -> None:
    last = segments(written.path)[-1]
    offsets = record_offsets(last)
    os.truncate(last, offsets[-2])
    code, doc, err = fix_json(written.path)
    assert code == 0, err
    (cut,) = doc["cuts"]
    assert cut["saved_to"] is None and cut["offset"] == cut["end"] == offsets[-2]
    assert (cut["lost"]["first_lsn"], cut["lost"]["last_lsn"]) == (written.lsn - 1, written.lsn)
    assert not list(written.path.glob("*.cut-*"))


def next_record(written: Written) -> bytes:
    """The frame of a record with the next LSN (the last record's effects again)."""
    _lsn, time_ms, db, effects = log_records(written.path)[-1]
    return codec.encode(written.lsn + 1, time_ms + 1, db, effects)


@pytest.mark.parametrize("kept", [3, 8, 10, 11, 25])
def test_a_torn_tail_past_the_watermark_is_the_partial_record(
        written: Written, kept: int) -> None:
    """A record cut short after the last fsync (the torn tail of a power loss): exactly it is
    reported, by its LSN when enough of its payload is there to say, else by its place."""
    before = log_records(written.path)
    last = segments(written.path)[-1]
    size = last.stat().st_size
    append_bytes(last, next_record(written)[:kept])
    problem = the_problem(written.path)
    assert problem["kind"] == "torn-tail"
    lost = problem["lost"]
    assert (lost["first_lsn"], lost["last_lsn"], lost["exact"], lost["torn"]) == (
        written.lsn + 1, written.lsn + 1, True, True)
    code, out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 0, err
    assert f"cut at offset {size}" in out and f"1 record(s) lost (LSN {written.lsn + 1})" in out
    assert log_records(written.path) == before


def test_a_damaged_record_then_a_partial_one_past_the_watermark(written: Written) -> None:
    frame = bytearray(next_record(written))
    frame[-1] ^= 0xFF  # the CRC no longer matches: whole but damaged
    _lsn, time_ms, db, effects = log_records(written.path)[-1]
    following = codec.encode(written.lsn + 2, time_ms + 2, db, effects)
    append_bytes(segments(written.path)[-1], bytes(frame) + following[:15])
    lost = the_problem(written.path)["lost"]
    assert (lost["first_lsn"], lost["last_lsn"], lost["count"], lost["exact"]) == (
        written.lsn + 1, written.lsn + 2, 2, True)


def test_zeros_alone_after_the_last_record_are_no_damage(written: Written) -> None:
    """Space allocated ahead of the log (a killed process's mapped tail): nothing to fix."""
    append_bytes(segments(written.path)[-1], bytes(100))
    code, doc = verify_json(written.path)
    assert code == 0 and doc["problems"] == [] and len(doc["notes"]) == 1, doc
    code, out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 0, (out, err)


def test_garbage_past_the_watermark_is_an_unknown_number(written: Written) -> None:
    append_bytes(segments(written.path)[-1], b"\x07\x00\x01\x00" + random.Random(5).randbytes(90))
    lost = the_problem(written.path)["lost"]
    assert (lost["count"], lost["exact"]) == (0, False) and "cannot be told" in lost["unknown"]
    code, out, err = cli("aof", "fix", "--yes", str(written.path))
    assert code == 0 and "an unknown number of records lost" in out, (out, err)


def test_a_torn_tail_inside_a_middle_segment_counts_to_the_next_one(written: Written) -> None:
    seg = segments(written.path)[-2]
    offsets = record_offsets(seg)
    doc = manifest(written.path)["segments"]
    first_lsn, next_first = doc[-2]["first_lsn"], doc[-1]["first_lsn"]
    data = seg.read_bytes()
    seg.write_bytes(data[:offsets[1] + 9])  # inside its second record: the rest is gone
    problem = the_problem(written.path)
    lost = problem["lost"]
    assert (lost["first_lsn"], lost["last_lsn"], lost["exact"]) == (
        first_lsn + 1, next_first - 1, True)
    before = log_records(written.path)
    code, doc_fix, err = fix_json(written.path)
    assert code == 0, err
    assert doc_fix["cuts"][0]["lost"] == lost
    assert doc_fix["records_lost"] == {"count": next_first - first_lsn - 1, "exact": True}
    # The later segment's records are kept, renumbered down by the records lost.
    (run,) = doc_fix["renumbered"]
    assert (run["old_first"], run["new_first"]) == (next_first, first_lsn + 1)
    removed = range(first_lsn + 1, next_first)
    after = log_records(written.path)
    assert [r[1:] for r in after] == [r[1:] for r in before if r[0] not in removed]


def test_a_damaged_watermark_makes_the_count_a_lower_bound(written: Written) -> None:
    (written.path / "watermark").write_bytes(b"garbage" * 5)
    append_bytes(segments(written.path)[-1], next_record(written)[:20])
    lost = the_problem(written.path)["lost"]
    assert (lost["first_lsn"], lost["count"], lost["exact"]) == (written.lsn + 1, 1, False)
    assert "watermark is damaged" in lost["unknown"]


# --- the frame walk, over bytes ------------------------------------------------------------

def frames(first_lsn: int, count: int) -> bytes:
    return b"".join(codec.encode(first_lsn + i, 1000 + i, 0, [[b"SET", b"k", b"v" * i]])
                    for i in range(count))


@pytest.mark.parametrize("cut", range(0, 120, 7))
def test_walk_counts_whole_and_partial_frames(cut: int) -> None:
    data = frames(70_000, 5)
    starts = [0]
    for _ in range(5):
        starts.append(starts[-1] + 8 + int.from_bytes(data[starts[-1]:starts[-1] + 4], "little"))
    head = data[:cut]
    partial = cut not in starts and cut < starts[-1]
    whole = sum(1 for s in starts[1:] if s <= cut)
    assert loss.walk(head, 0, 70_000) == (whole + partial, None, partial)


def test_walk_stops_at_a_wrong_lsn_or_garbage() -> None:
    data = frames(10, 3)
    assert loss.walk(data, 0, 11) == (0, 0, False)
    second = 8 + int.from_bytes(data[:4], "little")
    assert loss.walk(data[:second] + b"\xff" * 40, 0, 10) == (1, second, False)
    assert loss.walk(data + bytes(64), 0, 10) == (3, None, False)  # zeros: not records



def test_a_refusal_in_json_names_the_problem_and_its_records(written: Written) -> None:
    last = segments(written.path)[-1]
    os.truncate(last, record_offsets(last)[-1] + 9)
    code, out, err = cli("aof", "fix", "--yes", "--json", str(written.path))
    doc = json.loads(out)
    assert code == 2 == doc["exit_code"] and doc["status"] == "refused"
    assert doc["cuts"] == [] and "damage-in-synced" in doc["problems"][0]
    assert f"at least 1 record(s) lost (LSN {written.lsn}" in err
