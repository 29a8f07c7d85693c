"""`streamkeep aof verify` on real data directories written by a real Engine: a clean directory
(text and JSON), every kind of damage with its exit status, file and offset, a segment file on
its own, usage errors without tracebacks, and a directory verified while an engine writes it."""

from __future__ import annotations

import io
import json
import os
import random
import re
import threading
import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof import codec
from streamkeep.aof.manifest import encode_doc
from streamkeep.engine.wire.errors import StorageError
from streamkeep.tools.inspect import verify
from tests.support import v3_snapshot as v3
from tests.support.aof_workload import FakeClock, run
from tests.support.datadir import open_dir
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


def problem(doc: dict) -> dict:
    (only,) = doc["problems"]
    return only


def test_clean_directory_text_and_json(written: Written) -> None:
    code, out, err = cli("aof", "verify", str(written.path))
    assert code == 0, (out, err)
    assert "status:   clean" in out
    last = segments(written.path)[-1]
    assert f"ok up to LSN {written.lsn} at {last.name}:{last.stat().st_size}" in out
    assert "time:     2023-11-14T" in out

    code, doc = verify_json(written.path)
    assert code == 0 and doc["status"] == "ok" and doc["exit_code"] == 0
    assert set(doc) >= {"path", "kind", "status", "exit_code", "records", "segments",
                        "lsn_range", "time_range_ms", "snapshot", "ok_up_to", "problems",
                        "locked_by", "notes", "seconds", "records_per_second"}
    snap = manifest(written.path)["snapshot"]
    assert doc["snapshot"]["ok"] and doc["snapshot"]["lsn"] == snap["lsn"]
    assert doc["lsn_range"] == [snap["lsn"] + 1, written.lsn]
    assert doc["records"] == written.lsn - snap["lsn"]
    assert doc["ok_up_to"] == {"lsn": written.lsn, "file": last.name,
                               "offset": last.stat().st_size}
    times = [written.times[lsn] for lsn in range(snap["lsn"] + 1, written.lsn + 1)]
    assert doc["time_range_ms"] == [min(times), max(times)]
    assert [s["file"] for s in doc["segments"]] == [p.name for p in segments(written.path)]
    assert doc["problems"] == [] and doc["locked_by"] is None and doc["notes"] == []
    for seg in doc["segments"]:
        assert set(seg) == {"file", "segment", "size", "records", "first_lsn", "last_lsn",
                            "first_time_ms", "last_time_ms", "end"}


def _last_record(segment: Path) -> bytes:
    data = segment.read_bytes()
    return data[record_offsets(segment)[-1]:]


def _last_record_before(segment: Path, end: int) -> bytes:
    """The last record of a segment whose records end at `end` (zeros may follow)."""
    data = segment.read_bytes()[:end]
    pos = codec.HEADER_SIZE
    while True:
        length = codec.FRAME.unpack_from(data, pos)[0]
        if pos + codec.FRAME_SIZE + length >= end:
            return data[pos:end]
        pos += codec.FRAME_SIZE + length


@pytest.mark.parametrize("tail", ["zeros then garbage", "garbage", "short-record",
                                  "short-header"])
def test_torn_tail_exit_1(written: Written, tail: str) -> None:
    last = segments(written.path)[-1]
    size = last.stat().st_size
    record = _last_record(last)
    append_bytes(last, {"zeros then garbage": bytes(300) + b"\x07",
                        "garbage": random.Random(7).randbytes(500),
                        "short-record": record[:-3],
                        "short-header": record[:5]}[tail])
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 1, out
    assert f"torn-tail at {last.name}:{size}" in out
    assert "would save the tail" in out and "may be writing" in out
    code, doc = verify_json(written.path)
    assert code == 1 and doc["status"] == "torn-tail"
    p = problem(doc)
    assert (p["kind"], p["file"], p["offset"], p["action"]) == ("torn-tail", last.name, size,
                                                                "truncate")
    assert p["bytes"] == last.stat().st_size - size
    assert doc["ok_up_to"] == {"lsn": written.lsn, "file": last.name, "offset": size}
    # What verify says opening does, opening does.
    with Engine.open(str(written.path), auto_aof_rewrite_percentage=0) as engine:
        assert engine.journal.lsn == written.lsn  # type: ignore[union-attr]
    assert last.stat().st_size == size


def test_crc_flip_followed_by_valid_records_exit_2(written: Written) -> None:
    seg = segments(written.path)[-2]
    offsets = record_offsets(seg)
    bad = offsets[len(offsets) // 2]
    flip_byte(seg, bad + 12)  # inside the payload: a CRC mismatch
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 2, out
    assert f"damage-before-valid at {seg.name}:{bad}" in out and "would refuse" in out
    code, doc = verify_json(written.path)
    p = problem(doc)
    assert (p["kind"], p["file"], p["offset"], p["action"]) == (
        "damage-before-valid", seg.name, bad, "refuse")
    assert "CRC" in p["reason"]
    assert doc["ok_up_to"]["file"] == seg.name and doc["ok_up_to"]["offset"] == bad
    with pytest.raises(StorageError, match=f"byte offset {bad}"):
        Engine.open(str(written.path))


def test_damaged_end_of_a_middle_segment_refuses(written: Written) -> None:
    seg = segments(written.path)[1]
    cut = record_offsets(seg)[-1] + 5
    os.truncate(seg, cut)
    code, doc = verify_json(written.path)
    assert code == 2
    p = problem(doc)
    assert (p["kind"], p["file"], p["offset"], p["action"]) == (
        "torn-tail", seg.name, cut - 5, "refuse")


def test_missing_segment(written: Written) -> None:
    seg = segments(written.path)[1]
    seg.unlink()
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 2 and f"missing-segment at {seg.name}" in out
    code, doc = verify_json(written.path)
    assert problem(doc)["kind"] == "missing-segment"


@pytest.mark.parametrize("content", [b"{not json", b'{"format": "other"}', None])
def test_bad_manifest(written: Written, content: bytes | None) -> None:
    path = written.path / "manifest.json"
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    code, doc = verify_json(written.path)
    assert code == 2
    p = problem(doc)
    assert p["kind"] == "bad-manifest" and p["file"] == "manifest.json"


def test_lsn_gap(written: Written) -> None:
    doc = manifest(written.path)
    dropped = doc["segments"].pop(1)
    (written.path / "manifest.json").write_bytes(encode_doc(doc))
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 2, out
    code, report = verify_json(written.path)
    p = problem(report)
    assert p["kind"] == "lsn-gap" and p["file"] == doc["segments"][1]["file"]
    assert f"ends at LSN {dropped['first_lsn'] - 1}" in p["reason"]


def test_snapshot_size_mismatch(written: Written) -> None:
    snap = written.path / manifest(written.path)["snapshot"]["file"]
    append_bytes(snap, bytes(4096))
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 2 and f"bad-snapshot at {snap.name}" in out
    p = problem(verify_json(written.path)[1])
    assert p["kind"] == "bad-snapshot" and "the manifest says" in p["reason"]


def test_segment_header_mismatch(written: Written) -> None:
    seg = segments(written.path)[0]
    flip_byte(seg, 20)  # inside first_lsn: the header CRC no longer matches
    p = problem(verify_json(written.path)[1])
    assert (p["kind"], p["file"], p["offset"]) == ("bad-segment-header", seg.name, 0)


def test_one_segment_file(written: Written) -> None:
    seg = segments(written.path)[0]
    code, doc = verify_json(seg)
    assert code == 0 and doc["kind"] == "segment" and doc["records"] > 0
    append_bytes(seg, bytes(10) + b"\x01")  # (zeros alone are space allocated ahead)
    code, doc = verify_json(seg)
    assert code == 1 and problem(doc)["kind"] == "torn-tail"
    seg.write_bytes(b"not a segment at all, just some bytes")
    code, doc = verify_json(seg)
    assert code == 2 and problem(doc)["kind"] == "bad-segment-header"


def test_usage_errors_exit_3_without_traceback(tmp_path: Path) -> None:
    for path in (tmp_path / "nope", tmp_path):
        code, out, err = cli("aof", "verify", str(path))
        assert code == 3 and out == ""
        assert str(path) in err and "Traceback" not in err
    code, _out, err = cli("aof", "verify")
    assert code == 3 and "usage" in err  # a missing argument: usage, as everywhere


def test_help_has_examples_and_exit_codes() -> None:
    code, out, _err = cli("aof", "verify", "--help")
    assert code == 0 and "examples:" in out and "exit status:" in out


def test_never_writes_or_locks(written: Written) -> None:
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in written.path.iterdir()}
    lock = written.path / "LOCK"
    lock_bytes = lock.read_bytes()
    assert cli("aof", "verify", str(written.path))[0] == 0
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in written.path.iterdir()}
    assert before == after and lock.read_bytes() == lock_bytes


def test_live_directory_verified_while_written(tmp_path: Path) -> None:
    """An open Engine writes in another thread (rotating segments) while verify runs: never a
    refusal; a torn tail at most (the live tail); the holder of the lock is reported."""
    clock = FakeClock()
    engine = open_dir(tmp_path / "live", clock)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            run(engine, clock, "live", i, i + 20)
            i += 20

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        codes = []
        for _ in range(15):
            code, doc = verify_json(tmp_path / "live")
            codes.append(code)
            assert code in (0, 1), doc["problems"]
            assert doc["locked_by"] == str(os.getpid())
            if code == 1:
                assert problem(doc)["action"] == "truncate"
    finally:
        stop.set()
        thread.join()
        engine.close()
    assert verify_json(tmp_path / "live")[0] == 0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_a_bar_on_a_terminal_after_a_while_else_lines(
        written: Written, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamkeep.tools import progress as progress_module

    piped = io.StringIO()
    with verify.progress_display(piped) as progress:
        assert progress is not None
        verify.analyse(str(written.path), progress)
    assert piped.getvalue() == ""  # a short run, piped: no line (one every 5 s)
    monkeypatch.setattr(progress_module, "EVERY_S", 0.0005)
    with verify.progress_display(piped) as progress:
        verify.analyse(str(written.path), progress)
        deadline = time.monotonic() + 60  # (the lines come from a thread of their own)
        while not piped.getvalue() and time.monotonic() < deadline:
            time.sleep(0.005)
    assert re.match(r"streamkeep aof verify: verifying(: .+)?, \d+ s elapsed", piped.getvalue())
    terminal = _Terminal()
    with verify.progress_display(terminal) as progress:
        assert progress is not None
        verify.analyse(str(written.path), progress)
    assert terminal.getvalue() == ""  # a short run: nothing
    monkeypatch.setattr(verify, "PROGRESS_AFTER", 0.0)
    terminal = _Terminal()
    with verify.progress_display(terminal) as progress:
        report = verify.analyse(str(written.path), progress)
    assert report.status == 0 and "verify" in terminal.getvalue()


def test_ok_up_to_stops_before_an_unusable_segment(written: Written) -> None:
    segs = segments(written.path)
    segs[2].unlink()
    doc = verify_json(written.path)[1]
    first_lsn = manifest(written.path)["segments"][2]["first_lsn"]
    assert doc["ok_up_to"] == {"lsn": first_lsn - 1, "file": segs[1].name,
                               "offset": segs[1].stat().st_size}


def test_incomplete_record_at_a_held_directory_tail(tmp_path: Path) -> None:
    """A record being appended by the server holding the directory (its bytes partly there):
    a torn tail, exit 1, and the report says a server (this process) may be writing it."""
    clock = FakeClock()
    engine = open_dir(tmp_path / "held", clock)
    try:
        run(engine, clock, "held", 0, 60)
        engine.locked(engine.journal.flush_pending)  # type: ignore[union-attr]
        last = segments(tmp_path / "held")[-1]
        size = engine.journal.size  # type: ignore[union-attr]
        partial = _last_record_before(last, size)[:-7]
        with open(last, "r+b") as f:  # at the written end (a mapped tail's zeros follow it)
            f.seek(size)
            f.write(partial)
        code, out, _err = cli("aof", "verify", str(tmp_path / "held"))
        assert code == 1, out
        assert f"locked by process {os.getpid()}" in out
        assert "a server may be writing it" in out and f"torn-tail at {last.name}:{size}" in out
    finally:
        engine.close()


def test_deep_decodes_what_the_fast_scan_does_not(tmp_path: Path) -> None:
    """A record with a valid CRC and the right LSN but a payload replay cannot decode: only
    --deep (a replay's decoding) sees it; both agree on a sound directory."""
    written = write_dir(tmp_path / "data", commands=120)
    assert verify_json(written.path)[1]["records"] == cli_deep(written.path)[1]["records"]
    seg = segments(written.path)[-1]
    offsets = record_offsets(seg)
    data = bytearray(seg.read_bytes())
    at = offsets[len(offsets) // 2]
    length = codec.FRAME.unpack_from(data, at)[0]
    payload = bytearray(data[at + 8:at + 8 + length])
    pos = 1 + {0xCC: 2, 0xCD: 3, 0xCE: 5}.get(payload[1], 1)  # past the LSN
    pos += {0xCE: 5, 0xCF: 9}[payload[pos]] + 1  # past time_ms and db
    payload[pos] = 0xC1  # msgpack's never-used byte where the effects array starts
    data[at + 4:at + 8] = codec.crc32c(bytes(payload)).to_bytes(4, "little")
    data[at + 8:at + 8 + length] = payload
    seg.write_bytes(bytes(data))
    assert verify_json(written.path)[0] == 0
    code, doc = cli_deep(written.path)
    assert code == 2 and problem(doc)["offset"] == at
    assert "undecodable" in problem(doc)["reason"]


def cli_deep(path: Path) -> tuple[int, dict]:
    code, out, _err = cli("aof", "verify", "--deep", "--json", str(path))
    return code, json.loads(out)


def test_leftover_files_are_notes_not_damage(written: Written) -> None:
    last = segments(written.path)[-1]
    number = int(last.name[8:-4]) + 1
    orphan = written.path / f"segment-{number:06d}.aof"
    orphan.write_bytes(last.read_bytes()[:32])
    (written.path / "manifest.json.tmp").write_text("{")
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 0 and f"note:     {orphan.name}: not named by the manifest" in out
    assert len(verify_json(written.path)[1]["notes"]) == 2


@pytest.mark.parametrize("deep", [False, True])
def test_a_zero_filled_tail_is_a_note_not_damage(written: Written, deep: bool) -> None:
    """Zeros after the last record (space allocated ahead of the log: what a process killed
    while appending through its mapped tail leaves): opening cuts them, nothing is lost."""
    last = segments(written.path)[-1]
    size = last.stat().st_size
    append_bytes(last, bytes(70_000))
    code, doc = cli_deep(written.path) if deep else verify_json(written.path)
    assert code == 0 and doc["problems"] == [], doc["problems"]
    (note,) = doc["notes"]
    assert f"70000 bytes of zeros after the last record (byte {size} on)" in note, note
    assert doc["ok_up_to"]["lsn"] == written.lsn


def test_jobs_give_the_same_report(written: Written) -> None:
    seg = segments(written.path)[2]
    flip_byte(seg, record_offsets(seg)[1] + 12)
    segments(written.path)[3].unlink()
    append_bytes(segments(written.path)[-1], bytes(20) + b"\x01")
    reports = []
    for jobs in ("1", "3"):
        code, out, err = cli("aof", "verify", "--json", "--jobs", jobs, str(written.path))
        doc = json.loads(out)
        del doc["seconds"], doc["records_per_second"]
        reports.append((code, doc))
    assert reports[0] == reports[1]
    assert reports[0][0] == 2
    assert [p["kind"] for p in reports[0][1]["problems"]] == [
        "damage-before-valid", "missing-segment", "torn-tail"]
    code, _out, err = cli("aof", "verify", "--jobs", "0", str(written.path))
    assert code == 3 and "--jobs" in err


# --- the synced watermark: torn tail or damage to fsynced data -----------------------------------

def test_damage_inside_fsynced_bytes_exit_2(written: Written) -> None:
    """The directory was closed cleanly: its last record was fsynced, so a flipped byte in it
    is not a torn tail, whatever follows it."""
    last = segments(written.path)[-1]
    size = last.stat().st_size
    offset = record_offsets(last)[-1]
    flip_byte(last, offset + 12)
    code, doc = verify_json(written.path)
    assert code == 2
    assert doc["watermark"]["offset"] == size and doc["watermark"]["lsn"] == written.lsn
    found = problem(doc)
    assert (found["kind"], found["file"], found["offset"], found["action"]) == (
        "damage-in-synced", last.name, offset, "refuse")
    assert f"LSN {written.lsn}" in found["reason"]
    code, out, _err = cli("aof", "verify", str(written.path))
    assert code == 2 and "--force-skip-damaged" in out and f"synced    up to byte {size}" in out


def test_fsynced_bytes_missing_exit_2(written: Written) -> None:
    last = segments(written.path)[-1]
    offset = record_offsets(last)[-1]
    os.truncate(last, offset)  # a whole record gone: no damage left in the file itself
    code, doc = verify_json(written.path)
    found = problem(doc)
    assert code == 2 and found["kind"] == "damage-in-synced"
    assert "were fsynced" in found["reason"] and found["offset"] == offset


def test_without_a_watermark_the_end_is_taken_for_a_torn_tail(written: Written) -> None:
    last = segments(written.path)[-1]
    flip_byte(last, record_offsets(last)[-1] + 12)
    (written.path / "watermark").unlink()
    code, doc = verify_json(written.path)
    assert code == 1 and problem(doc)["kind"] == "torn-tail"
    assert "no synced watermark" in doc["watermark"]["unknown"]
    assert any("cannot be told from a torn tail" in note for note in doc["notes"])


def test_a_damaged_watermark_makes_tail_damage_undecidable(written: Written) -> None:
    last = segments(written.path)[-1]
    flip_byte(last, record_offsets(last)[-1] + 12)
    (written.path / "watermark").write_bytes(random.Random(2).randbytes(64))
    code, doc = verify_json(written.path)
    found = problem(doc)
    assert code == 2 and found["kind"] == "damage-in-synced"
    assert "watermark is damaged" in found["reason"]


def test_deep_checks_a_format_3_snapshot(tmp_path: Path) -> None:
    d = v3.v3_datadir(tmp_path / "data")
    code, out, err = cli("aof", "verify", "--deep", "--json", str(d))
    doc = json.loads(out)
    assert code == 0 and doc["snapshot"]["ok"] and doc["problems"] == [], (out, err)
