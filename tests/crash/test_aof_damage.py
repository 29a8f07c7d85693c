"""Damaged data directories, one fixture per kind of damage, each with its exact outcome.

* Torn tails of the last segment, past the synced watermark (a short record header, a short
  payload, a CRC mismatch in the last record, a garbage tail, a partial next record, a cut inside the last record; for the last two the watermark is set back to before
  the last record, as when the power went before the fsync that would have covered it): the
  directory opens, the cut bytes are saved to `<segment>.cut-<offset>`, the segment is truncated
  at the last good record, a WARNING on the "streamkeep.aof" logger names the file, the byte
  offset and the records dropped, and a write after that, then a reopen, gives the right state:
  the new record is not glued onto the garbage (Redis's aof.tcl "INCR after a truncated AOF
  reads 6" check). The same tails with aof_load_truncated="no" are refused and the file is left
  untouched.
* The same damage inside bytes the watermark says were fsynced (a flipped byte or a cut in the
  last record of a cleanly closed directory): refused, naming the file, offset and LSN and the
  `aof fix` option that gets past it; nothing is modified. Without a watermark file (a directory
  written before it existed) such damage is taken for a torn tail, as before.
* Zeros from a segment's last record to its end (space allocated ahead of the log, a mapped
  tail a killed process left, or an extension a power loss left unwritten): not damage. They are
  cut at open, in any segment and with aof-load-truncated "no" too, with an INFO line and no side
  file, and the next record follows the last one; zeros where fsynced records were are refused.
* A bad record followed by valid records (a flipped byte, a bad length, a zeroed hole), damage
  in a segment that is not the last, and a bad segment header are refused with
  aof.recovery.AOFCorruptError naming the file and the byte offset; nothing is truncated.
* The manifest: missing while segments exist, malformed (not JSON, wrong format or version,
  empty or out-of-order segment list, inconsistent entries), or naming a missing segment, or
  leaving a hole in the LSN sequence: refused (ManifestError / AOFCorruptError), never an empty
  start. A segment newer than the manifest (an interrupted rotation) and a leftover
  manifest.json.tmp are removed and the directory opens.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.codec import FRAME, HEADER_SIZE, encode, encode_header
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import MANIFEST, ManifestError, encode_doc
from streamkeep.aof.recovery import AOFCorruptError
from streamkeep.aof.watermark import WATERMARK, Watermark, store
from tests.support.scaling import growth

LOGGER = "streamkeep.aof"
T0 = 1_000


def script(n: int) -> list[list[str]]:
    """n commands, each of which writes exactly one record (commands that would change
    nothing are left out)."""
    clock = [T0]
    engine = Engine(clock=lambda: clock[0])
    out: list[list[str]] = []
    i = 0
    while len(out) < n:
        i += 1
        candidates = [["XADD", "s", f"{i}-1", "f", f"v{i}", "pad", "x" * (i % 7)]]
        if i == 1:
            candidates.insert(0, ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"])
        if i % 3 == 0:
            candidates.append(["XREADGROUP", "GROUP", "g", f"c{i % 2}", "COUNT", "2",
                               "STREAMS", "s", ">"])
        if i % 4 == 0:
            candidates.append(["XACK", "s", "g", f"{i - 2}-1"])
        for argv in candidates:
            clock[0] += 5
            if engine.execute_with_effects(*argv)[1]:
                out.append(argv)
            else:
                clock[0] -= 5
    return out[:n]


def run(engine: Engine, commands: list[list[str]], clock: list[int]) -> None:
    for argv in commands:
        clock[0] += 5
        engine.execute(*argv)


def reference(commands: list[list[str]]) -> str:
    clock = [T0]
    engine = Engine(clock=lambda: clock[0])
    run(engine, commands, clock)
    return engine.digest()


def build(directory: Path, n: int, segment_max: int = 1 << 20) -> list[list[str]]:
    """A closed data directory holding n records (one per command)."""
    commands = script(n)
    clock = [T0]
    with Engine.open(str(directory), appendfsync="always", aof_segment_max_bytes=segment_max,
                     clock=lambda: clock[0]) as engine:
        run(engine, commands, clock)
        assert engine.journal is not None and engine.journal.lsn == n
    return commands


def spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each record of a well-formed segment."""
    out, pos = [], HEADER_SIZE
    while pos < len(data):
        length, _crc = FRAME.unpack_from(data, pos)
        out.append((pos, pos + FRAME.size + length))
        pos += FRAME.size + length
    assert pos == len(data)
    return out


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("segment-*.aof"))


def open_digest(directory: Path, **config: object) -> str:
    with Engine.open(str(directory), **config) as engine:
        return engine.digest()


def aof_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.WARNING]


# --- torn tails of the last segment ---------------------------------------------------------

N = 12
NEXT = encode(N + 1, T0 + 500, 0, [[b"XADD", b"s", b"999-1", b"f", b"next-record-payload"]])


def _flip_last_byte(data: bytes, sp: list[tuple[int, int]]) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0x5A])


def _cut_last_record(data: bytes, sp: list[tuple[int, int]]) -> bytes:
    return data[: sp[-1][0] + 11]


def unsync_last_record(directory: Path, sp: list[tuple[int, int]]) -> None:
    """Set the synced watermark back to the start of the last record: the power went before
    the fsync that would have covered it."""
    store(RealFS(), str(directory), Watermark(1, sp[-1][0], N - 1))


# Damage to the last record itself: a torn tail only if no fsync had covered that record.
IN_LAST_RECORD = {"crc mismatch in the last record", "cut inside the last record"}
TORN_TAILS = {
    # name: (damage(data, spans) -> data, records kept, offset of the cut as f(spans, size))
    "short record header": (lambda d, sp: d + NEXT[:5], N, lambda sp, size: size),
    "short payload": (lambda d, sp: d + NEXT[: FRAME.size + 3], N, lambda sp, size: size),
    "partial record": (lambda d, sp: d + NEXT[:-1], N, lambda sp, size: size),
    "crc mismatch in the last record": (_flip_last_byte, N - 1, lambda sp, size: sp[-1][0]),
    "cut inside the last record": (_cut_last_record, N - 1, lambda sp, size: sp[-1][0]),
    "garbage tail": (lambda d, sp: d + random.Random(5).randbytes(3000), N,
                     lambda sp, size: size),
    "zeros then a partial record": (lambda d, sp: d + bytes(100) + NEXT[:20], N,
                                    lambda sp, size: size),
}


@pytest.fixture(params=sorted(TORN_TAILS))
def torn(request: pytest.FixtureRequest, tmp_path: Path):
    """(directory, commands, records kept, offset of the first bad byte, damaged bytes)."""
    damage, kept, offset_of = TORN_TAILS[request.param]
    directory = tmp_path / "db"
    commands = build(directory, N)
    (seg,) = segments(directory)
    data = seg.read_bytes()
    sp = spans(data)
    offset = offset_of(sp, len(data))
    damaged = damage(data, sp)
    seg.write_bytes(damaged)
    if request.param in IN_LAST_RECORD:
        unsync_last_record(directory, sp)
    return directory, commands, kept, offset, damaged


def test_torn_tail_is_truncated_with_a_warning(torn, caplog: pytest.LogCaptureFixture) -> None:
    directory, commands, kept, offset, damaged = torn
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert open_digest(directory) == reference(commands[:kept])
    (seg,) = segments(directory)
    assert seg.stat().st_size == offset, "not truncated at the last good record"
    warnings = aof_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert str(seg) in warnings[0]
    assert f"byte offset {offset}" in warnings[0]
    side = Path(f"{seg}.cut-{offset}")
    assert side.read_bytes() == damaged[offset:], "the cut bytes were not saved first"
    assert str(side) in warnings[0]
    if kept < N:  # the record cut is named with its LSN
        assert f"1 record(s) not yet fsynced, LSN {N}" in warnings[0], warnings[0]


@pytest.mark.parametrize("load_truncated", ["yes", "no"])
@pytest.mark.parametrize("zeros", [1, 8, 4096, 1 << 20])
def test_a_zero_filled_tail_is_cut_as_space_never_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, zeros: int, load_truncated: str) -> None:
    directory = tmp_path / "db"
    commands = build(directory, N)
    (seg,) = segments(directory)
    data = seg.read_bytes()
    seg.write_bytes(data + bytes(zeros))
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock = [T0 + 5 * N]
    extra = ["XADD", "s", "5000-1", "after", "crash"]
    with Engine.open(str(directory), appendfsync="always", clock=lambda: clock[0],
                     aof_load_truncated=load_truncated) as engine:
        assert engine.digest() == reference(commands)
        engine.execute(*extra)
    assert not aof_warnings(caplog), "nothing was lost: no warning"
    cut = [r.getMessage() for r in caplog.records
           if r.name == LOGGER and "bytes of zeros" in r.getMessage()]
    assert len(cut) == 1 and f"cut {zeros} bytes" in cut[0] and str(seg) in cut[0], cut
    assert not list(directory.glob("*.cut-*")), "zeros are not saved"
    data_after = seg.read_bytes()
    assert [s for s, _e in spans(data_after)][-1] == len(data), "appended after the last record"
    assert open_digest(directory) == reference([*commands, extra])


def test_a_zero_filled_tail_in_a_segment_before_the_last_is_cut(tmp_path: Path) -> None:
    directory, segs = _rotated(tmp_path)
    digest = open_digest(directory)
    victim = segs[1]
    data = victim.read_bytes()
    victim.write_bytes(data + bytes(4096))
    assert open_digest(directory) == digest
    assert victim.read_bytes() == data


def test_zeros_where_fsynced_records_were_are_refused(tmp_path: Path) -> None:
    """The watermark says the last record was fsynced; zeros in its place are lost data."""
    directory, seg, sp, damaged = damaged_dir(
        tmp_path, lambda d, sp: d[:sp[-1][0]] + bytes(sp[-1][1] - sp[-1][0]))
    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory))
    assert "were fsynced" in str(err.value) and str(seg) in str(err.value), str(err.value)
    assert seg.read_bytes() == damaged


def damaged_dir(tmp_path: Path, damage) -> tuple[Path, Path, list[tuple[int, int]], bytes]:
    """A closed directory of N records whose one segment `damage(data, spans)` changed:
    (directory, segment, the records' spans before, the damaged bytes)."""
    directory = tmp_path / "db"
    build(directory, N)
    (seg,) = segments(directory)
    data = seg.read_bytes()
    sp = spans(data)
    damaged = damage(data, sp)
    seg.write_bytes(damaged)
    return directory, seg, sp, damaged


@pytest.mark.parametrize("kind", sorted(IN_LAST_RECORD))
def test_damage_to_fsynced_records_is_refused(tmp_path: Path, kind: str) -> None:
    """A cleanly closed `always` directory: its last record was fsynced, so damage to it is
    corruption, not a torn tail. Nothing is cut; the message says how to get past it."""
    directory, seg, _sp, damaged = damaged_dir(tmp_path, TORN_TAILS[kind][0])
    for _attempt in range(2):  # refused again: the first refusal repaired nothing
        with pytest.raises(AOFCorruptError) as err:
            Engine.open(str(directory))
        message = str(err.value)
        assert str(seg) in message and f"LSN {N}" in message, message
        assert f"aof fix --force-skip-damaged {directory}" in message, message
        assert seg.read_bytes() == damaged
        assert not list(directory.glob("*.cut-*"))


def test_without_a_watermark_damage_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    """A directory written before the watermark existed: the end of its last segment cannot be
    told from a torn tail, so it is cut as one (saved first), as it always was."""
    directory = tmp_path / "db"
    commands = build(directory, N)
    (seg,) = segments(directory)
    data = seg.read_bytes()
    sp = spans(data)
    seg.write_bytes(_flip_last_byte(data, sp))
    (directory / WATERMARK).unlink()
    assert open_digest(directory) == reference(commands[:N - 1])
    assert Path(f"{seg}.cut-{sp[-1][0]}").exists()
    assert (directory / WATERMARK).exists(), "the open starts a watermark"


def test_write_after_torn_tail_is_not_glued_to_garbage(torn) -> None:
    directory, commands, kept, offset, _damaged = torn
    clock = [T0 + 5 * kept]
    extra = ["XADD", "s", "5000-1", "after", "crash"]
    with Engine.open(str(directory), appendfsync="always", clock=lambda: clock[0]) as engine:
        clock[0] += 5
        engine.execute(*extra)
    want = reference([*commands[:kept], extra])
    assert open_digest(directory) == want
    (seg,) = segments(directory)
    data = seg.read_bytes()
    assert [s for s, _e in spans(data)][-1] == offset, "the new record does not start at the cut"
    assert open_digest(directory) == want  # and a third open agrees (nothing left to truncate)


def test_torn_tail_refused_when_load_truncated_is_no(torn) -> None:
    directory, _commands, _kept, offset, damaged = torn
    (seg,) = segments(directory)
    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory), aof_load_truncated="no")
    assert str(seg) in str(err.value) and f"byte offset {offset}" in str(err.value)
    assert seg.read_bytes() == damaged, "a refused open must not modify the file"
    assert open_digest(directory, aof_load_truncated="yes")  # the lock was released


# --- damage followed by valid records ----------------------------------------------------------

def _flip_in_record(index: int):
    def damage(data: bytes, sp: list[tuple[int, int]]) -> bytes:
        start, end = sp[index]
        pos = (start + FRAME.size + end) // 2
        return data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1:]
    return damage


def _bad_length(index: int):
    def damage(data: bytes, sp: list[tuple[int, int]]) -> bytes:
        start, _end = sp[index]
        return data[:start] + (len(data) * 3).to_bytes(4, "little") + data[start + 4:]
    return damage


def _zero_hole(index: int):
    def damage(data: bytes, sp: list[tuple[int, int]]) -> bytes:
        start, end = sp[index]
        return data[:start] + bytes(end - start) + data[end:]
    return damage


def _duplicate(index: int):
    def damage(data: bytes, sp: list[tuple[int, int]]) -> bytes:
        start, end = sp[index]
        return data[:start] + data[start:end] + data[start:]
    return damage


MID_FILE = {
    "flipped byte in record 3": (_flip_in_record(3), 3),
    "flipped byte in the first record": (_flip_in_record(0), 0),
    "bad length in record 5": (_bad_length(5), 5),
    "zeroed record 4 (a hole)": (_zero_hole(4), 4),
    "record 6 duplicated": (_duplicate(6), 7),
}


@pytest.mark.parametrize("kind", sorted(MID_FILE))
def test_damage_followed_by_valid_records_is_refused(tmp_path: Path, kind: str) -> None:
    damage, bad_index = MID_FILE[kind]
    directory, seg, sp, damaged = damaged_dir(tmp_path, damage)
    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory))
    message = str(err.value)
    assert str(seg) in message
    assert f"byte offset {sp[bad_index][0]}" in message, message
    assert seg.read_bytes() == damaged
    with pytest.raises(AOFCorruptError):  # and again: nothing was "repaired" by the first try
        Engine.open(str(directory), aof_load_truncated="yes")


# --- damage in a segment that is not the last ----------------------------------------------------

def _rotated(tmp_path: Path) -> tuple[Path, list[Path]]:
    directory = tmp_path / "db"
    build(directory, 40, segment_max=400)
    segs = segments(directory)
    assert len(segs) >= 3
    return directory, segs


@pytest.mark.parametrize("kind", ["torn tail", "flipped byte in the last record",
                                  "garbage tail", "flipped byte mid-segment"])
def test_damage_in_a_non_last_segment_is_refused(tmp_path: Path, kind: str) -> None:
    directory, segs = _rotated(tmp_path)
    victim = segs[1]
    data = victim.read_bytes()
    sp = spans(data)
    if kind == "torn tail":
        damaged, offset = data[:-3], sp[-1][0]
    elif kind == "flipped byte in the last record":
        damaged, offset = data[:-1] + bytes([data[-1] ^ 1]), sp[-1][0]
    elif kind == "garbage tail":
        damaged, offset = data + random.Random(2).randbytes(64), len(data)
    else:
        damaged, offset = _flip_in_record(0)(data, sp), sp[0][0]
    victim.write_bytes(damaged)
    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory))
    assert str(victim) in str(err.value)
    assert f"byte offset {offset}" in str(err.value), str(err.value)
    assert victim.read_bytes() == damaged


# --- segment headers -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["bad magic", "header crc", "short header",
                                  "wrong segment number", "wrong first lsn", "empty file"])
@pytest.mark.parametrize("which", ["first", "last"])
def test_bad_segment_header_is_refused(tmp_path: Path, kind: str, which: str) -> None:
    directory, segs = _rotated(tmp_path)
    victim = segs[0] if which == "first" else segs[-1]
    data = victim.read_bytes()
    number = int(victim.stem.split("-")[1])
    if kind == "bad magic":
        damaged = b"XKAOF" + data[5:]
    elif kind == "header crc":
        damaged = data[:20] + bytes([data[20] ^ 1]) + data[21:]
    elif kind == "short header":
        damaged = data[:HEADER_SIZE - 1]
    elif kind == "wrong segment number":
        damaged = encode_header(number + 7, 1 if which == "first" else 2) + data[HEADER_SIZE:]
    elif kind == "wrong first lsn":
        damaged = encode_header(number, 999) + data[HEADER_SIZE:]
    else:
        damaged = b""
    victim.write_bytes(damaged)
    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory))
    assert str(victim) in str(err.value)
    assert victim.read_bytes() == damaged


# --- the manifest ------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["several segments", "one segment with records",
                                    "first segment with one record", "only a later segment"])
def test_missing_manifest_with_segments_is_refused(tmp_path: Path, layout: str) -> None:
    if layout == "several segments":
        directory, _segs = _rotated(tmp_path)
    else:
        directory = tmp_path / "db"
        build(directory, 1 if layout == "first segment with one record" else N)
        if layout == "only a later segment":
            (directory / "segment-000001.aof").rename(directory / "segment-000004.aof")
    (directory / MANIFEST).unlink()
    before = sorted(os.listdir(directory))
    with pytest.raises(ManifestError, match="manifest is missing"):
        Engine.open(str(directory))
    assert sorted(os.listdir(directory)) == before, "refusal must not create or remove files"
    with pytest.raises(ManifestError):  # still refused: it never starts empty
        Engine.open(str(directory))


def _manifest(directory: Path) -> dict:
    return json.loads((directory / MANIFEST).read_text())


MALFORMED = {
    "not json": lambda doc: b"{not json",
    "empty file": lambda doc: b"",
    "not an object": lambda doc: json.dumps([doc]).encode(),
    "wrong format": lambda doc: json.dumps({**doc, "format": "redis-manifest"}).encode(),
    "wrong version": lambda doc: json.dumps({**doc, "version": 2}).encode(),
    "no segments": lambda doc: json.dumps({**doc, "segments": []}).encode(),
    "segments out of order": lambda doc: json.dumps(
        {**doc, "segments": [doc["segments"][1], doc["segments"][0], *doc["segments"][2:]]}
    ).encode(),
    "first_lsn going backwards": lambda doc: json.dumps(
        {**doc, "segments": [doc["segments"][0],
                             {**doc["segments"][1], "first_lsn": 0}, *doc["segments"][2:]]}
    ).encode(),
    "file name disagrees with number": lambda doc: json.dumps(
        {**doc, "segments": [{**doc["segments"][0], "file": "segment-000009.aof"},
                             *doc["segments"][1:]]}
    ).encode(),
    "entry lacks a field": lambda doc: json.dumps(
        {**doc, "segments": [{"file": doc["segments"][0]["file"]}, *doc["segments"][1:]]}
    ).encode(),
    "snapshot of the wrong type": lambda doc: json.dumps({**doc, "snapshot": 3}).encode(),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_manifest_is_refused(tmp_path: Path, kind: str) -> None:
    directory, _segs = _rotated(tmp_path)
    bad = MALFORMED[kind](_manifest(directory))
    (directory / MANIFEST).write_bytes(bad)
    with pytest.raises(ManifestError) as err:
        Engine.open(str(directory))
    assert str(directory / MANIFEST) in str(err.value)
    assert (directory / MANIFEST).read_bytes() == bad


@pytest.mark.parametrize("which", [0, 1, -1])
def test_manifest_naming_a_missing_segment_is_refused(tmp_path: Path, which: int) -> None:
    directory, segs = _rotated(tmp_path)
    segs[which].unlink()
    with pytest.raises(ManifestError, match=re.escape(segs[which].name)):
        Engine.open(str(directory))


def test_segment_missing_from_manifest_and_disk_is_a_hole(tmp_path: Path) -> None:
    """Segment 2 gone from both: the LSNs jump, which is refused, not silently skipped."""
    directory, segs = _rotated(tmp_path)
    doc = _manifest(directory)
    doc["segments"].pop(1)
    (directory / MANIFEST).write_bytes(encode_doc(doc))
    segs[1].unlink()
    with pytest.raises(AOFCorruptError, match="LSN"):
        Engine.open(str(directory))


@pytest.mark.parametrize("orphan", ["header only", "with records", "torn header", "empty"])
def test_orphan_newer_segment_is_removed(tmp_path: Path, orphan: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """A rotation killed after creating the next segment but before the manifest named it."""
    directory, segs = _rotated(tmp_path)
    commands = script(40)
    last = int(segs[-1].stem.split("-")[1])
    name = directory / f"segment-{last + 1:06d}.aof"
    header = encode_header(last + 1, 41)
    content = {
        "header only": header,
        "with records": header + encode(41, 9_999, 0, [[b"XADD", b"s", b"9999-1", b"f", b"x"]]),
        "torn header": header[:10],
        "empty": b"",
    }[orphan]
    name.write_bytes(content)
    (directory / "manifest.json.tmp").write_bytes(b'{"half": ')
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert open_digest(directory) == reference(commands)
    assert not name.exists()
    assert not (directory / "manifest.json.tmp").exists()
    assert any(name.name in w for w in aof_warnings(caplog))
    # The next rotation reuses the number cleanly.
    clock = [T0 + 5 * 40]
    with Engine.open(str(directory), aof_segment_max_bytes=400, clock=lambda: clock[0]) as e:
        for i in range(20):
            clock[0] += 5
            e.execute("XADD", "s", f"{10_000 + i}-1", "f", "after")
    assert name.exists()
    with Engine.open(str(directory)) as engine:
        assert engine.execute("XLEN", "s") == len([c for c in commands if c[0] == "XADD"]) + 20


# --- how long a torn tail takes -------------------------------------------------------------

@pytest.mark.parametrize("kind", ["zeros", "garbage"])
def test_large_torn_tail_is_recovered_in_bounded_time(tmp_path: Path, kind: str) -> None:
    """After a power cut under everysec/no, a tail of several MiB of zeros or garbage is
    plausible (the size grew, the data did not land). Deciding it is a torn tail means looking
    for a valid record after the damage; that search must stay about linear in the tail's size.
    (A search that computed a CRC wherever the length field fitted took 0.5, 2.0, 11.4 s for
    1, 2, 4 MiB of garbage; the structural pre-filter takes about 0.25 s for 64 MiB.)"""
    directory = tmp_path / "db"
    commands = build(directory, N)
    (seg,) = segments(directory)
    size, clean = seg.stat().st_size, seg.read_bytes()
    rng = random.Random(9)

    def recover(mib: int) -> None:
        tail = bytes(mib << 20) if kind == "zeros" else rng.randbytes(mib << 20)
        seg.write_bytes(clean + tail)
        assert open_digest(directory) == reference(commands)
        assert seg.stat().st_size == size

    ratio = growth(lambda: recover(1), lambda: recover(4))
    assert ratio < 8, f"a 4 MiB {kind} tail took {ratio:.1f}x as long as a 1 MiB one"


def test_crc_valid_record_with_wrong_lsn_at_the_end_is_refused(tmp_path: Path) -> None:
    """A last record whose CRC matches was written whole; if its LSN is not the next one, it is
    foreign or misplaced data, not a torn tail, and truncating it could drop synced data."""
    directory = tmp_path / "db"
    build(directory, N)
    (seg,) = segments(directory)
    before = seg.read_bytes()
    stray = encode(N + 5, T0 + 500, 0, [[b"XADD", b"s", b"999-1", b"f", b"x"]])
    seg.write_bytes(before + stray)
    with pytest.raises(AOFCorruptError, match=rf"{re.escape(seg.name)}.*{len(before)}"):
        Engine.open(str(directory))
    assert seg.read_bytes() == before + stray
