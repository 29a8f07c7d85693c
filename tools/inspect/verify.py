"""`streamkeep aof verify PATH`: check a data directory's (or one segment's) integrity offline.

Owns the analysis the other offline commands share (`analyse`: the manifest, every segment
header, every record's framing and CRC-32C and LSN, LSN continuity across segments, the named
snapshot's size and meta LSN, each problem classified as opening the directory would treat it)
and its report, as text or JSON; reading a segment's records is tools.inspect.segment_scan's.
Never takes the directory's lock and never writes: a live server may be appending to the last
segment (an incomplete record there is a torn tail).
Must not touch: the record format (aof.codec), the manifest's schema (aof.manifest).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from streamkeep.tools.inspect import UsageError, loss
from streamkeep.tools.inspect.loss import Loss
from streamkeep.tools.inspect.segment_scan import HEADER_BYTES, Scanned, scan_all, scan_segment

if TYPE_CHECKING:
    from streamkeep.aof.watermark import Synced

EPILOG = """\
examples:
  streamkeep aof verify data/                  # a whole data directory
  streamkeep aof verify data/segment-000007.aof
  streamkeep aof verify --json data/ | jq .problems
  streamkeep aof verify --deep data/           # decode every record, as replay
  streamkeep aof verify --jobs 4 data/         # 4 segments at once (workers)

what is checked: the manifest (and its checksum); every segment's header (number and first LSN
as the manifest names them); every record's framing, CRC-32C and LSN (consecutive within and
across segments); the synced watermark against the last segment; the snapshot the manifest
names (present, the manifest's size, the checksum of the whole file, its meta LSN; with --deep
also every value's checksum and the counts its tables keep). Records are CRC-checked but not
decoded beyond their LSN. The directory is not locked and nothing is
written: a server may be running on it.

problem kinds: torn-tail (an incomplete or damaged end of the last segment, past what the
synced watermark says was fsynced, with nothing valid after it: opening saves it and cuts it),
damage-in-synced (damage inside bytes that were fsynced, or fsynced bytes missing: bit rot or
an overwrite, not a torn tail), damage-before-valid (a bad record followed by valid ones),
missing-segment, bad-segment-header, lsn-gap, bad-manifest, bad-snapshot (opening refuses all
of these but torn-tail). Each problem in a segment says which records, by LSN,
the damaged bytes held: exactly, or "at least" and why more cannot be told.

exit status:
  0    clean
  1    a torn tail only: opening the directory truncates it (`streamkeep aof
       fix` saves it first)
  2    damage that makes opening the directory refuse
  3    usage or I/O error (no such path, not a data directory, unreadable file)
  130  interrupted (Ctrl-C)
"""

OK, TORN, REFUSE, USAGE = 0, 1, 2, 3
# Problems that make a whole segment unusable (none of its records is "ok").
_SEGMENT_UNUSABLE = ("missing-segment", "bad-segment-header", "lsn-gap")


@dataclass
class Problem:
    kind: str  # torn-tail | damage-in-synced | damage-before-valid | missing-segment |
    #            bad-segment-header | lsn-gap | bad-manifest | bad-snapshot
    file: str | None
    offset: int | None
    reason: str
    action: str  # what opening the directory would do: "truncate" or "refuse"
    bytes: int | None = None  # torn tail: how many bytes opening would cut
    # The records the damaged span held, which cutting it (opening, `aof fix`) removes
    # (tools.inspect.loss); None for problems that are no span of a segment.
    lost: Loss | None = None

    def describe(self) -> str:
        where = self.file or "?"
        if self.offset is not None:
            where += f":{self.offset}"
        return f"{self.kind} at {where}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "lost": None if self.lost is None else self.lost.to_json()}


@dataclass
class SegmentReport:
    file: str
    segment: int | None
    size: int
    records: int = 0
    first_lsn: int | None = None
    last_lsn: int | None = None
    first_time_ms: int | None = None
    last_time_ms: int | None = None
    end: int = 0  # offset just past the last good record


@dataclass
class Report:
    path: str
    kind: str  # "directory" or "segment"
    segments: list[SegmentReport] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    # The synced watermark of the last segment: segment, offset, lsn (what was fsynced), or
    # {"unknown": why}; None for a directory whose manifest could not be read.
    watermark: dict[str, Any] | None = None
    problems: list[Problem] = field(default_factory=list)
    locked_by: str | None = None  # a process holding the directory's lock (a server)
    notes: list[str] = field(default_factory=list)  # not damage: files opening would remove
    seconds: float = 0.0
    bytes_read: int = 0

    @property
    def status(self) -> int:
        if any(p.action == "refuse" for p in self.problems):
            return REFUSE
        return TORN if self.problems else OK

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    def ok_up_to(self) -> tuple[int, str, int] | None:
        """(LSN, file, offset) of the end of the good prefix: the last good record before the
        first problem (a segment's header end if it has none). None if nothing is good: a bad
        manifest or snapshot, or a first segment that is missing or unusable."""
        if any(p.kind in ("bad-manifest", "bad-snapshot") for p in self.problems):
            return None
        lsn = self.snapshot["lsn"] if self.snapshot else 0
        last: tuple[int, str, int] | None = None
        for seg in self.segments:
            found = [p for p in self.problems if p.file == seg.file]
            if any(p.kind in _SEGMENT_UNUSABLE for p in found):
                break
            if seg.last_lsn is not None:
                lsn = seg.last_lsn
            last = (lsn, seg.file, seg.end)
            if found:
                break
        return last

    def lsn_range(self) -> tuple[int, int] | None:
        lsns = [lsn for s in self.segments if s.records
                for lsn in (s.first_lsn, s.last_lsn) if lsn is not None]
        return (min(lsns), max(lsns)) if lsns else None

    def time_range(self) -> tuple[int, int] | None:
        times = [t for s in self.segments if s.records
                 for t in (s.first_time_ms, s.last_time_ms) if t is not None]
        return (min(times), max(times)) if times else None

    def to_json(self) -> dict[str, Any]:
        ok = self.ok_up_to()
        lsns, times = self.lsn_range(), self.time_range()
        return {
            "path": self.path,
            "kind": self.kind,
            "status": ("ok", "torn-tail", "refuse")[self.status],
            "exit_code": self.status,
            "records": self.records,
            "segments": [asdict(s) for s in self.segments],
            "lsn_range": list(lsns) if lsns else None,
            "time_range_ms": list(times) if times else None,
            "snapshot": self.snapshot,
            "watermark": self.watermark,
            "ok_up_to": None if ok is None else {"lsn": ok[0], "file": ok[1], "offset": ok[2]},
            "problems": [p.to_json() for p in self.problems],
            "locked_by": self.locked_by,
            "notes": self.notes,
            "seconds": round(self.seconds, 6),
            "records_per_second": round(self.records / self.seconds) if self.seconds else None,
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Check a data directory's (or one segment file's) integrity, "
                          "like redis-check-aof, without locking or writing anything.")
    parser.epilog = EPILOG
    parser.add_argument("path", help="a data directory or a segment file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="segments scanned at once, in worker processes (default: one "
                             "per CPU, at most 4, when the segments hold 64 MiB or more; "
                             "else 1)")
    parser.add_argument("--deep", action="store_true",
                        help="decode every record as replay does (slower; by default records "
                             "are CRC-checked and only their LSN is decoded)")


def lock_holder(directory: str) -> str | None:
    """The pid holding the directory's LOCK (from /proc/locks, read-only: the lock is never
    taken here), or None if no process holds it (or this is not Linux)."""
    from streamkeep.aof.fs import lock_holder as holder_of
    from streamkeep.aof.manifest import LOCK_FILE  # (not engine.services.datadir: the engine)

    pid = holder_of(os.path.join(directory, LOCK_FILE))
    return None if pid is None else str(pid)


Progress = Callable[[int, int, str], None]  # (bytes done, bytes in all, file just done)


def analyse(path: str, progress: Progress | None = None, deep: bool = False,
            jobs: int = 1) -> Report:
    """Verify PATH (a data directory or a segment file). UsageError for a path that is
    neither; every kind of damage is a Problem in the report. `progress` is called after each
    segment; `deep` decodes every record as replay does (slower) instead of its LSN only;
    `jobs` > 1 scans that many segments at once in worker processes."""
    started = time.perf_counter()
    if os.path.isdir(path):
        for _attempt in range(3):
            # A live server's compaction may replace the manifest and delete the segments it
            # named while they are read: a segment missing under a manifest that has changed
            # since is that, not damage, and the directory is read again.
            before = _manifest_bytes(path)
            report = _analyse_directory(path, progress, deep, jobs)
            if not any(p.kind == "missing-segment" for p in report.problems) \
                    or _manifest_bytes(path) == before:
                break
    elif os.path.isfile(path):
        report = _analyse_segment_file(path, deep)
    else:
        raise UsageError(f"{path}: no such file or directory")
    report.seconds = time.perf_counter() - started
    return report


def _manifest_bytes(directory: str) -> bytes | None:
    from streamkeep.aof.manifest import MANIFEST

    try:
        with open(os.path.join(directory, MANIFEST), "rb") as file:
            return file.read()
    except OSError:
        return None


def _read(file: str) -> bytes:
    from streamkeep.aof.fs import RealFS

    try:
        return RealFS().read_file(file)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise UsageError(f"{file}: cannot read ({err.strerror})") from None


def _check_records(report: Report, seg: SegmentReport, scanned: Scanned, file: str,
                   durable: Synced | None, path: str | None = None,
                   next_first_lsn: int | None = None) -> None:
    """The problems of one segment's scan. `durable` (aof.watermark.Synced) is what the synced
    watermark says of the last segment; None for the others. `path`: the segment's file, read
    from the damage on to count the records it held; `next_first_lsn`: the next segment's
    first LSN (None: the last segment, or unknown)."""
    from streamkeep.aof.recovery import DAMAGE_BEFORE_VALID, DAMAGE_IN_SYNCED, judge_end

    assert scanned.header is not None
    first_lsn = scanned.header[1]
    seg.records, seg.end = scanned.records, scanned.end
    seg.first_time_ms, seg.last_time_ms = scanned.first_time_ms, scanned.last_time_ms
    if scanned.records:
        seg.first_lsn, seg.last_lsn = first_lsn, first_lsn + scanned.records - 1
    next_lsn = first_lsn + scanned.records
    synced = durable.offset if durable is not None else None
    zeros = _zero_tail(path or file, scanned)
    if zeros:
        report.notes.append(f"{file}: {zeros} bytes of zeros after the last record (byte "
                            f"{scanned.end} on): space allocated ahead of the log, never "
                            f"written; opening cuts them")
    # What the end means is opening's judgement (aof.recovery.judge_end: `aof stats` and `aof
    # dump` name it the same way); the words here add what verify counts.
    damage = None if scanned.damage is None or zeros else scanned.damage
    judged = judge_end(scanned.end, None if damage is None else (damage[0], damage[2]),
                       durable)
    if judged is None:
        return
    if damage is None:
        assert durable is not None
        report.problems.append(Problem(
            judged.kind, file, scanned.end,
            f"the file ends at byte {scanned.end}, but bytes up to {synced} (LSN "
            f"{durable.lsn}) were fsynced: LSN {next_lsn} on are missing", "refuse",
            lost=loss.tail(b"", scanned.end, next_lsn, durable)))
        return
    offset, reason, valid_after = damage
    cut = scanned.size - offset
    lost = _span_loss(path, offset, scanned.size, next_lsn, valid_after, durable,
                      next_first_lsn)
    action = "truncate" if judged.cut else "refuse"
    if judged.kind == DAMAGE_BEFORE_VALID:
        report.problems.append(Problem(
            judged.kind, file, offset,
            f"{reason}, followed by valid records (LSN {next_lsn} expected)", action,
            lost=lost))
    elif durable is None:
        report.problems.append(Problem(
            judged.kind, file, offset,
            f"{reason}; not the last segment, so records may be missing", action, cut, lost))
    elif judged.kind == DAMAGE_IN_SYNCED and synced is not None:
        report.problems.append(Problem(
            judged.kind, file, offset,
            f"{reason} (LSN {next_lsn}), inside bytes already fsynced (up to {synced}, LSN "
            f"{durable.lsn}): not a torn tail", action, cut, lost))
    elif judged.kind == DAMAGE_IN_SYNCED:
        report.problems.append(Problem(
            judged.kind, file, offset,
            f"{reason} (LSN {next_lsn}), and {durable.why}: whether it was fsynced cannot be "
            f"told", action, cut, lost))
    else:
        report.problems.append(Problem(
            judged.kind, file, offset, f"{reason}, {cut} bytes with no valid record, past the "
            f"bytes fsynced ({durable.describe()})", action, cut, lost))


def _zero_tail(file: str, scanned: Scanned) -> int:
    """Bytes of zeros from the scan's damage to the end of the file (aof.codec.zero_tail_at),
    0 if there is anything else or no damage."""
    from streamkeep.aof.codec import zero_tail_at

    if scanned.damage is None or scanned.damage[2]:
        return 0
    offset = scanned.damage[0]
    try:
        with open(file, "rb") as f:
            f.seek(offset)
            tail = f.read(scanned.size - offset + 1)
    except OSError:
        return 0
    return zero_tail_at(tail, 0) if len(tail) == scanned.size - offset else 0


def _span_loss(path: str | None, offset: int, size: int, first_lsn: int, valid_after: bool,
               durable: Synced | None, next_first_lsn: int | None) -> Loss | None:
    """The records the damaged span from `offset` held (tools.inspect.loss), from the file's
    bytes from there on (None: the file cannot be read again)."""
    from streamkeep.aof.codec import next_valid_record

    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(size - offset)
    except OSError:
        return None
    if valid_after:
        resume = next_valid_record(data, 0, first_lsn)
        if resume is not None:
            return loss.before_resume(first_lsn, offset + resume[0], resume[1])
    return loss.tail(data, offset, first_lsn, durable, next_first_lsn)


def _analyse_segment_file(file: str, deep: bool = False) -> Report:
    report = Report(file, "segment")
    directory = os.path.dirname(file) or "."
    # The watermark before the records (as for a directory), for the segment the file's
    # header names (a bad header is reported by the scan below).
    number = _header_segment(file)
    durable = _durable(report, directory, number) if number is not None else None
    scanned = scan_segment(file, deep)
    if scanned.missing:
        raise UsageError(f"{file}: no such file")
    report.bytes_read = scanned.size
    seg = SegmentReport(os.path.basename(file), None, scanned.size)
    report.segments.append(seg)
    if scanned.header is None:
        report.problems.append(Problem("bad-segment-header", seg.file, 0,
                                       str(scanned.header_error), "refuse"))
        return report
    seg.segment = scanned.header[0]
    _check_records(report, seg, scanned, seg.file, durable, file)
    report.locked_by = lock_holder(directory)
    return report


def _header_segment(file: str) -> int | None:
    from streamkeep.aof.codec import FormatError, decode_header

    try:
        with open(file, "rb") as f:
            return decode_header(f.read(HEADER_BYTES)).segment
    except (OSError, FormatError):
        return None


def _durable(report: Report, directory: str, segment: int) -> Synced:
    """What the directory's synced watermark says of its last segment, `segment` (recorded in
    the report, and as a note when it is unknown)."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.watermark import durable_part

    durable = durable_part(RealFS(), directory, segment)
    if durable.offset is None:
        report.watermark = {"unknown": durable.why}
        report.notes.append(f"{durable.why}: damage at the end of the last segment cannot be "
                            f"told from a torn tail" + ("; opening rewrites it"
                                                        if durable.damaged else ""))
    else:
        report.watermark = {"segment": segment, "offset": durable.offset, "lsn": durable.lsn}
    return durable


def _analyse_directory(directory: str, progress: Progress | None = None,
                       deep: bool = False, jobs: int = 1) -> Report:
    from streamkeep.aof import manifest as manifest_mod

    report = Report(directory, "directory")
    report.locked_by = lock_holder(directory)
    manifest_path = os.path.join(directory, manifest_mod.MANIFEST)
    names = os.listdir(directory)
    if not os.path.exists(manifest_path):
        data_files = [n for n in names if manifest_mod.is_segment_file(n)
                      or manifest_mod.is_snapshot_file(n)]
        if not data_files:
            raise UsageError(f"{directory}: not a streamkeep data directory (no "
                             f"{manifest_mod.MANIFEST}, no segments)")
        report.problems.append(Problem(
            "bad-manifest", manifest_mod.MANIFEST, None,
            f"manifest is missing but the directory holds {', '.join(sorted(data_files)[:3])}",
            "refuse"))
        return report
    try:
        manifest = manifest_mod.Manifest.from_json(_read(manifest_path), manifest_mod.MANIFEST)
    except manifest_mod.ManifestError as err:
        report.problems.append(Problem("bad-manifest", manifest_mod.MANIFEST, None, str(err),
                                       "refuse"))
        return report
    snap = manifest.snapshot
    if snap is not None:
        _check_snapshot(report, directory, snap, deep)
    named = {entry.file for entry in manifest.segments} | set(snap.files if snap else ())
    for name in sorted(names):
        if name not in named and (manifest_mod.is_segment_file(name) or name.endswith(".tmp")
                                  or manifest_mod.is_snapshot_file(name)):
            report.notes.append(f"{name}: not named by the manifest (a leftover of an "
                                f"interrupted rotation, compaction or replace, or a file a "
                                f"running server is creating); opening removes leftovers")
    expected = snap.lsn + 1 if snap is not None else 1
    total = done = 0
    if progress is not None:
        for entry in manifest.segments:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(directory, entry.file)).st_size
    files = [os.path.join(directory, entry.file) for entry in manifest.segments]
    # Read before the segments: a server may be appending and advancing it meanwhile, and what
    # it said before is still true of what they hold after.
    durable = _durable(report, directory, manifest.segments[-1].segment)
    scans = scan_all(files, deep, jobs)
    for index, (entry, scanned) in enumerate(zip(manifest.segments, scans, strict=True)):
        last = index == len(manifest.segments) - 1
        if scanned.missing:
            report.segments.append(SegmentReport(entry.file, entry.segment, 0))
            report.problems.append(Problem(
                "missing-segment", entry.file, None,
                f"the manifest names it (LSNs from {entry.first_lsn}) but it does not exist",
                "refuse"))
            expected = -1
            continue
        report.bytes_read += scanned.size
        done += scanned.size
        if progress is not None:
            progress(done, total, entry.file)
        seg = SegmentReport(entry.file, entry.segment, scanned.size)
        report.segments.append(seg)
        if scanned.header is None:
            report.problems.append(Problem("bad-segment-header", entry.file, 0,
                                           str(scanned.header_error), "refuse"))
            expected = -1
            continue
        segment, first_lsn = scanned.header
        if (segment, first_lsn) != (entry.segment, entry.first_lsn):
            report.problems.append(Problem(
                "bad-segment-header", entry.file, 0,
                f"header says segment {segment} first LSN {first_lsn}, the "
                f"manifest says segment {entry.segment} first LSN {entry.first_lsn}", "refuse"))
        if expected != -1 and entry.first_lsn != expected:
            report.problems.append(Problem(
                "lsn-gap", entry.file, 0,
                f"starts at LSN {entry.first_lsn} but the previous "
                f"{'segment' if index else 'snapshot'} ends at LSN {expected - 1}", "refuse"))
        problems = len(report.problems)
        following = None if last else manifest.segments[index + 1].first_lsn
        _check_records(report, seg, scanned, entry.file, durable if last else None,
                       os.path.join(directory, entry.file), following)
        # After damage the next segment's LSNs cannot be checked against this one's end: the
        # damage is the problem, not a gap.
        expected = -1 if len(report.problems) > problems else first_lsn + seg.records
    return report


def _check_snapshot(report: Report, directory: str, snap: Any, deep: bool) -> None:
    """The snapshot the manifest names: there, its size, its whole-file checksum (when the
    manifest recorded one), its meta's LSN; with `deep`, every value's checksum and the counts
    its tables keep (snapshot.reader's `check`)."""
    file = os.path.join(directory, snap.file)
    info: dict[str, Any] = {"file": snap.file, "lsn": snap.lsn, "size": snap.size,
                            "created_ms": snap.created_ms, "ok": False,
                            "checksum": "whole file" if snap.crc32 is not None else None}
    report.snapshot = info
    try:
        size = os.stat(file).st_size
    except OSError as err:
        report.problems.append(Problem("bad-snapshot", snap.file, None,
                                       f"the manifest names it but {err.strerror}", "refuse"))
        return
    if size != snap.size:
        report.problems.append(Problem(
            "bad-snapshot", snap.file, None,
            f"{size} bytes, the manifest says {snap.size} (truncated or replaced)", "refuse"))
        return
    from streamkeep.snapshot.integrity import check_parts, check_whole
    from streamkeep.snapshot.reader import Snapshot, SnapshotError

    problems: list[str] = []
    try:
        check_whole(file, snap.crc32)
        check_parts(directory, snap)
        if snap.crc32 is None:
            report.notes.append(f"{snap.file}: the manifest recorded no checksum of the whole "
                                f"file (written by an older version)")
        with Snapshot(file) as reader:
            meta = reader.meta
            if not reader.checked:
                report.notes.append(f"{snap.file}: no checksums (a version "
                                    f"{meta.version} snapshot): damage to its values can only "
                                    f"show as values that do not decode")
            if deep:
                problems = reader.check()
    except SnapshotError as err:
        problems = [str(err)]
    if problems:
        for problem in problems:
            report.problems.append(Problem("bad-snapshot", snap.file, None,
                                           problem.removeprefix(f"{file}: "), "refuse"))
        return
    if meta.lsn != snap.lsn:
        report.problems.append(Problem(
            "bad-snapshot", snap.file, None,
            f"covers LSN {meta.lsn}, the manifest says {snap.lsn}", "refuse"))
        return
    info.update(ok=True, streams=meta.streams, entries=meta.entries,
                checksums=reader.checked, values_checked=deep)


def format_time(ms: int) -> str:
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def render(report: Report) -> str:
    lines = []
    lines.append(f"{report.path}: {report.kind}"
                 + (f", locked by process {report.locked_by} (a server is running on it)"
                    if report.locked_by else ""))
    if report.snapshot is not None:
        snap = report.snapshot
        state = "ok" if snap["ok"] else "BAD"
        lines.append(f"snapshot  {snap['file']}: LSN {snap['lsn']}, {snap['size']} bytes, "
                     f"{state}")
    mark = report.watermark
    if mark is not None and "unknown" not in mark:
        lines.append(f"synced    up to byte {mark['offset']} of the last segment (LSN "
                     f"{mark['lsn']}), per the watermark")
    missing = {p.file for p in report.problems if p.kind == "missing-segment"}
    for seg in report.segments:
        if seg.file in missing:
            lines.append(f"segment   {seg.file}: MISSING")
            continue
        span = f", LSN {seg.first_lsn}..{seg.last_lsn}" if seg.records else ""
        lines.append(f"segment   {seg.file}: {seg.records} records{span}, {seg.size} bytes")
    lines.append(f"records:  {report.records} in {len(report.segments)} segment(s)")
    lsns, times = report.lsn_range(), report.time_range()
    if lsns:
        lines.append(f"LSNs:     {lsns[0]}..{lsns[1]}")
    if times:
        lines.append(f"time:     {format_time(times[0])} .. {format_time(times[1])}")
    ok = report.ok_up_to()
    if ok is not None:
        lines.append(f"ok up to LSN {ok[0]} at {ok[1]}:{ok[2]}")
    for note in report.notes:
        lines.append(f"note:     {note}")
    for problem in report.problems:
        lines.append(f"DAMAGE {problem.describe()}")
        if problem.lost is not None:
            lines.append(f"       {problem.lost.describe()}, known "
                         f"from {problem.lost.how}")
        if problem.action == "truncate":
            note = ("opening the directory would save the tail beside the segment and cut "
                    f"it ({problem.bytes} bytes; `streamkeep aof fix` does the same)")
            if report.locked_by:
                note += ("; a server may be writing it (the directory is locked by process "
                         f"{report.locked_by}): a live tail is not damage, verify again")
            else:
                note += "; a server may be writing it, if one runs here: verify again"
            lines.append(f"       {note}")
        else:
            fix = " (`streamkeep aof fix --force-skip-damaged` gets past it)" \
                if problem.kind in ("damage-in-synced", "damage-before-valid") else ""
            lines.append(f"       opening the directory would refuse{fix}")
    if report.seconds:
        rate = f", {report.records / report.seconds:,.0f} records/s" if report.records else ""
        lines.append(f"verified in {report.seconds:.3f} s{rate}")
    status = ("clean", "torn tail only (repairable: exit 1)",
              "damage: opening refuses (exit 2)")[report.status]
    lines.append(f"status:   {status}")
    return "\n".join(lines)


PROGRESS_AFTER = 1.0  # seconds: a shorter run shows no progress
PARALLEL_BYTES = 64 << 20  # segments this big in all are worth worker processes
MAX_AUTO_JOBS = 4


def _jobs(path: str, asked: int | None) -> int:
    """--jobs, or its default: one per CPU (at most MAX_AUTO_JOBS) for PARALLEL_BYTES of
    segments or more, else 1."""
    if asked is not None:
        if asked < 1:
            raise UsageError(f"--jobs {asked}: at least 1")
        return asked
    if not os.path.isdir(path):
        return 1
    total = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(path):
            if entry.name.endswith(".aof"):
                total += entry.stat().st_size
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(cpus or 1, MAX_AUTO_JOBS) if total >= PARALLEL_BYTES else 1


@contextlib.contextmanager
def progress_display(stream: TextIO) -> Iterator[Progress | None]:
    """A progress bar over the bytes verified, on `stream` (stderr) when it is a terminal, once
    the run has lasted PROGRESS_AFTER seconds; when it is not, a line every few seconds
    (tools.progress)."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        from streamkeep.tools.progress import Ticker

        with Ticker("streamkeep aof verify", "verifying", stream=stream) as tick:
            def line(done: int, total: int, name: str) -> None:
                share = f" ({100 * done // total}%)" if total else ""
                tick.update(f"{name}, {done / 1e6:,.1f} of {total / 1e6:,.1f} MB{share}")

            yield line
        return
    started = time.monotonic()
    state: dict[str, Any] = {}

    def update(done: int, total: int, name: str) -> None:
        if "bar" not in state:
            if time.monotonic() - started < PROGRESS_AFTER:
                return
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

            bar = Progress(TextColumn("verify {task.description}"), BarColumn(),
                           DownloadColumn(), console=Console(file=stream), transient=True)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task(name, total=total)
        state["bar"].update(state["task"], completed=done, description=name)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"].stop()


def main(args: argparse.Namespace) -> int:
    import json

    try:
        with progress_display(sys.stderr) as progress:
            report = analyse(args.path, progress, args.deep, _jobs(args.path, args.jobs))
    except UsageError as err:
        print(f"streamkeep aof verify: {err}", file=sys.stderr)
        return USAGE
    except OSError as err:  # (the file that failed, when the error says which)
        print(f"streamkeep aof verify: {err.filename or args.path}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    if args.json:
        print(json.dumps(report.to_json(), indent=1))
    else:
        print(render(report))
    return report.status
