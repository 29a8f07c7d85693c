"""`streamkeep aof fix DIR`: repair a data directory so that it opens, saving what it cuts.

Owns the repairs: a torn tail of the last segment is truncated at the last good record after
the bytes it cuts are copied to `<segment>.cut-<offset>`; damage followed by valid records, or
inside bytes the synced watermark says were fsynced, is refused unless `--force-skip-damaged`,
which keeps every valid record after each damaged span (the damaged segments and every later
one are rewritten under new segment numbers with consecutive LSNs: write, fsync, rename, fsync
the directory, then one manifest switch under a new replication ID, and a new watermark).
Takes the directory's lock first: never edits a directory a server holds. Reports every span
it drops with the records, by LSN, that it held (tools.inspect.loss: exactly, or at least and
why), the renumbering, and the log's new end, as text or JSON.
Must not touch: the record format (aof.codec), the analysis (tools.inspect.verify).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from streamkeep.tools.exits import uninterrupted
from streamkeep.tools.inspect import loss
from streamkeep.tools.inspect.loss import Loss

EPILOG = """\
examples:
  streamkeep aof fix data/                       # asks before cutting
  streamkeep aof fix --yes data/
  streamkeep aof fix --force-skip-damaged data/  # keep the records after
  streamkeep aof fix --yes --json data/ | jq .records_lost

A torn tail (an incomplete last record of the last segment, past what was
fsynced) is cut after being copied to <segment>.cut-<offset> in the directory.
Damage followed by valid records, or inside records that were fsynced (bit rot,
a truncated file: not a torn tail), is refused unless --force-skip-damaged:
every damaged span is then copied to its own .cut- file and dropped, the later
records are kept and renumbered (LSNs stay consecutive; records that depend on
lost ones and fail to replay are dropped too, saved to <segment>.inapplicable),
and the history gets a new replication ID (replicas resynchronise).

Every span dropped is reported with the records it held, by LSN: exactly (from
the next valid record, the next segment's first LSN, or the record frames in a
torn tail), or "at least" with the reason when that cannot be known (a file cut
inside what the synced watermark says was fsynced: the records up to its LSN
were there, and any after it cannot be counted). Then the renumbering (old LSNs
-> new) and where the log now ends. --json prints the same as one document.

A missing segment, a bad manifest or snapshot, or an LSN gap cannot be fixed
here. The directory's lock is taken first: a directory a running server holds
is never edited.

exit status:
  0    fixed (the directory opens), or nothing to fix
  2    damage not fixed: needs --force-skip-damaged, or not fixable here
  3    usage or I/O error, the directory is locked by a running server, or
       not confirmed
  130  interrupted (Ctrl-C): the directory is as it was, or repaired (never
       half)
"""

OK, REFUSED, USAGE = 0, 2, 3
FIXABLE = {"torn-tail", "damage-before-valid", "damage-in-synced"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Truncate a torn tail (after saving what it cuts), or with "
                          "--force-skip-damaged drop damaged records and keep later ones.")
    parser.epilog = EPILOG
    parser.add_argument("path", help="a data directory")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--force-skip-damaged", action="store_true",
                        help="drop damaged spans followed by valid records, keeping the "
                             "valid records after them (they are renumbered)")
    parser.add_argument("--json", action="store_true",
                        help="print what was done as JSON (the records lost by LSN, the "
                             "files saved, the renumbering)")


def _confirm(question: str) -> bool:
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    except KeyboardInterrupt:
        print(file=sys.stderr)  # Ctrl-C at the prompt: what follows starts a line of its own
        raise
    return answer.strip().lower() in ("y", "yes")


@dataclass
class Cut:
    """One span of a segment the repair drops: bytes `offset`..`end` of `file` (saved to
    `saved_to`; none when the bytes were already gone) and the records they held."""

    file: str
    offset: int
    end: int
    saved_to: str | None
    reason: str
    lost: Loss

    def line(self) -> str:
        where = f"{self.file}:{self.offset}: {self.lost.describe()}"
        if self.saved_to is None:
            return f"{where}: {self.reason}"
        return (f"{where} (bytes {self.offset}..{self.end}, saved to {self.saved_to}): "
                f"{self.reason}")

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "offset": self.offset, "end": self.end,
                "saved_to": self.saved_to, "reason": self.reason, "lost": self.lost.to_json()}


@dataclass
class Outcome:
    """What `aof fix` did, printed as text or (--json) as one document."""

    path: str
    status: str = "clean"  # clean | fixed | refused | not-confirmed
    cuts: list[Cut] = field(default_factory=list)
    inapplicable: list[int] = field(default_factory=list)  # old LSNs dropped for replay
    inapplicable_saved_to: str | None = None
    renumbered: list[tuple[int, int, int]] = field(default_factory=list)  # old a..b -> new c..
    log_ends_at: int | None = None  # the last LSN after the fix (new numbering)
    log_ended_at: int | None = None  # that record's LSN before (old numbering)
    repl_id: str | None = None
    records: int | None = None  # records in the segments once fixed and verified
    problems: list[str] = field(default_factory=list)  # refused, or still there after

    def lost(self) -> tuple[int, bool]:
        count, exact = loss.total([cut.lost for cut in self.cuts])
        return count + len(self.inapplicable), exact

    def to_json(self, code: int) -> dict[str, Any]:
        count, exact = self.lost()
        return {
            "path": self.path, "status": self.status, "exit_code": code,
            "cuts": [cut.to_json() for cut in self.cuts],
            "inapplicable": {"lsns": self.inapplicable, "saved_to": self.inapplicable_saved_to},
            "records_lost": {"count": count, "exact": exact},  # (not exact: at least)
            "renumbered": [{"old_first": a, "old_last": b, "new_first": c}
                           for a, b, c in self.renumbered],
            "log_ends_at_lsn": self.log_ends_at, "log_ended_at_old_lsn": self.log_ended_at,
            "repl_id": self.repl_id, "records": self.records, "problems": self.problems,
        }


def main(args: argparse.Namespace) -> int:
    from streamkeep.aof.fs import LockedError, RealFS
    from streamkeep.aof.manifest import LOCK_FILE
    from streamkeep.tools.inspect.verify import UsageError, analyse

    path = args.path
    if not os.path.isdir(path):
        what = "not a directory" if os.path.exists(path) else "does not exist"
        print(f"streamkeep aof fix: {path}: {what} (fix takes a data directory)",
              file=sys.stderr)
        return USAGE
    if not os.path.exists(os.path.join(path, "manifest.json")):
        print(f"streamkeep aof fix: {path}: no manifest.json: not a data directory streamkeep "
              f"can fix", file=sys.stderr)
        return USAGE
    fs = RealFS()
    try:
        lock_fd = fs.lock(os.path.join(path, LOCK_FILE))
    except LockedError as err:
        print(f"streamkeep aof fix: {err}; stop the server first", file=sys.stderr)
        return USAGE
    except OSError as err:
        print(f"streamkeep aof fix: {path}: cannot lock ({err.strerror})", file=sys.stderr)
        return USAGE
    outcome = Outcome(path)
    try:
        report = analyse(path, deep=True)  # the verdict opening reaches, decoding included
        code = _fix(fs, path, report, args, outcome)
    except UsageError as err:
        print(f"streamkeep aof fix: {err}", file=sys.stderr)
        return USAGE
    except OSError as err:
        print(f"streamkeep aof fix: {err.filename or path}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    finally:
        fs.unlock(lock_fd)
    if args.json:
        print(json.dumps(outcome.to_json(code), indent=1))
    return code


def _say(args: argparse.Namespace, line: str) -> None:
    """A line of the text report (--json prints the document instead)."""
    if not args.json:
        print(line)


def _fix(fs: Any, path: str, report: Any, args: argparse.Namespace, outcome: Outcome) -> int:
    problems = report.problems
    if not problems:
        _say(args, f"{path}: clean, nothing to fix")
        ok = report.ok_up_to()
        outcome.records, outcome.log_ends_at = report.records, ok[0] if ok else None
        outcome.log_ended_at = outcome.log_ends_at
        return OK
    outcome.status = "refused"
    unfixable = [p for p in problems if p.kind not in FIXABLE]
    if unfixable:
        for problem in unfixable:
            print(f"cannot fix {problem.describe()}", file=sys.stderr)
            outcome.problems.append(problem.describe())
        return REFUSED
    damaged = [p for p in problems if p.action == "refuse"]
    if damaged and not args.force_skip_damaged:
        for problem in damaged:
            held = f" ({problem.lost.describe()})" if problem.lost is not None else ""
            print(f"refusing: {problem.describe()}{held}", file=sys.stderr)
            outcome.problems.append(problem.describe())
        print("--force-skip-damaged drops the damaged span(s), saving them, and keeps the valid "
              "records after them (renumbered)", file=sys.stderr)
        return REFUSED
    if not damaged:
        (tail,) = problems
        file = os.path.join(path, tail.file)
        side = f"{file}.cut-{tail.offset}"
        lost = tail.lost or _tail_loss(fs, path, report, tail)
        if not args.yes and not _confirm(
                f"truncate {file} at byte offset {tail.offset} ({tail.bytes} bytes, saved to "
                f"{side}; {lost.describe()})?"):
            print("not confirmed: nothing changed", file=sys.stderr)
            outcome.status = "not-confirmed"
            return USAGE
        with uninterrupted():  # Ctrl-C now: the directory as it was or repaired, not half
            _truncate_tail(fs, path, file, tail.offset, side)
            cut = Cut(tail.file, tail.offset, tail.offset + (tail.bytes or 0), side,
                      "torn tail", lost)
            outcome.cuts.append(cut)
            outcome.status = "fixed"
            outcome.log_ends_at = outcome.log_ended_at = lost.first_lsn - 1
            _say(args, f"{file}: torn tail of {tail.bytes} bytes cut at offset {tail.offset} "
                       f"(saved to {side}): {lost.describe()}")
        return _check_after(path, args, outcome)
    first = min(report.segments.index(next(s for s in report.segments if s.file == p.file))
                for p in damaged)
    if not args.yes and not _confirm(
            f"drop the damaged records from {report.segments[first].file} on and keep the valid "
            f"ones after them (renumbered; cut bytes saved as .cut- files)?"):
        print("not confirmed: nothing changed", file=sys.stderr)
        outcome.status = "not-confirmed"
        return USAGE
    status = _skip_damaged(fs, path, first, args, outcome)
    return _check_after(path, args, outcome) if status == OK else status


def _tail_loss(fs: Any, path: str, report: Any, tail: Any) -> Loss:
    """The records of a torn tail, when the analysis could not read them again."""
    from streamkeep.aof.watermark import durable_part

    seg = next(s for s in report.segments if s.file == tail.file)
    data = fs.read_file(os.path.join(path, tail.file))
    first_lsn = (seg.last_lsn + 1) if seg.last_lsn is not None else _header_lsn(data)
    return loss.tail(data[tail.offset:], tail.offset, first_lsn,
                     durable_part(fs, path, seg.segment))


def _header_lsn(data: bytes) -> int:
    from streamkeep.aof import codec

    return codec.decode_header(data).first_lsn


def _write_file(fs: Any, file: str, parts: list[bytes]) -> None:
    """Write a new file durably (temp, fdatasync, rename, fsync the directory)."""
    tmp = file + ".tmp"
    fd = fs.open_write_new(tmp)
    try:
        for part in parts:
            fs.write(fd, part)
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, file)
    fs.fsync_dir(os.path.dirname(file) or ".")


def _truncate_tail(fs: Any, path: str, file: str, offset: int, side: str) -> None:
    data = fs.read_file(file)
    _write_file(fs, side, [data[offset:]])
    fs.truncate(file, offset)
    fd = fs.open_append(file, create=False)
    try:
        fs.fdatasync(fd)
    finally:
        fs.close(fd)


def _segment_cuts(fs: Any, path: str, entries: list[Any], index: int, durable: Any,
                  sides: list[tuple[str, bytes]], cuts: list[Cut]) -> list[tuple]:
    """The valid records of segment `index` of the manifest (old LSNs); each damaged span is
    a Cut (its bytes to be saved: `sides`) with the records it held, from the next valid
    record's LSN, the next segment's first LSN, or the bytes and the synced watermark
    (`durable`, of the last segment)."""
    from streamkeep.aof import codec

    entry = entries[index]
    last = index == len(entries) - 1
    file = os.path.join(path, entry.file)
    data = fs.read_file(file)
    header = codec.decode_header(data)
    records: list[tuple] = []
    pos, expected = codec.HEADER_SIZE, header.first_lsn
    while True:
        result = codec.ScanResult(end=pos)
        for batch in codec.scan_batches(data, pos, expected, result, 4096):
            records.extend(batch)
        expected += result.count
        if result.damage is None:
            if last and durable.offset is not None and result.end < durable.offset:
                # Cut at a record boundary inside what was fsynced: nothing to save, but the
                # records the watermark vouches for are gone.
                cuts.append(Cut(entry.file, result.end, result.end, None,
                                f"the file ends at byte {result.end}, inside the bytes "
                                f"fsynced (up to {durable.offset})",
                                loss.tail(b"", result.end, expected, durable)))
            break
        bad = result.damage.offset
        resume = codec.next_valid_record(data, bad, expected)
        stop = resume[0] if resume is not None else len(data)
        side = f"{file}.cut-{bad}"
        sides.append((side, data[bad:stop]))
        if resume is None:
            lost = loss.tail(data[bad:], bad, expected, durable if last else None,
                             None if last else entries[index + 1].first_lsn)
            cuts.append(Cut(entry.file, bad, stop, side,
                            f"{result.damage.reason}, nothing valid after it", lost))
            break
        cuts.append(Cut(entry.file, bad, stop, side, result.damage.reason,
                        loss.before_resume(expected, resume[0], resume[1])))
        pos, expected = resume
    return records


def _skip_damaged(fs: Any, path: str, first: int, args: argparse.Namespace,
                  outcome: Outcome) -> int:
    """Rewrite segments first.. of the manifest with their valid records, renumbered from the
    first LSN of segment `first`, under new segment numbers; then switch the manifest. Nothing
    is written until the new segments are worked out, then everything is (Ctrl-C waits): an
    interrupted fix leaves the directory as it was or repaired."""
    from streamkeep.aof import codec, watermark
    from streamkeep.aof import manifest as manifest_mod

    manifest = manifest_mod.load(fs, path)
    entries = manifest.segments
    # What was fsynced of the last segment: the records up to its LSN were there, whatever
    # the bytes left say.
    durable = watermark.durable_part(fs, path, entries[-1].segment)
    kept: list[list[tuple]] = []  # per rewritten segment: its valid records (old LSNs)
    sides: list[tuple[str, bytes]] = []  # (.cut- file, the bytes it saves)
    cuts: list[Cut] = []
    for index in range(first, len(entries)):
        kept.append(_segment_cuts(fs, path, entries, index, durable, sides, cuts))
    # Later records may depend on lost ones (an XACK on a group whose XGROUP CREATE was lost):
    # replay must not fail on them, so they are found by replaying and dropped too (saved).
    inapplicable = _inapplicable(fs, path, manifest, first, kept)
    if inapplicable is None:
        print(f"{path}: the records kept do not replay cleanly even after dropping the ones "
              f"that fail; nothing changed", file=sys.stderr)
        return REFUSED
    if inapplicable:
        side = os.path.join(path, f"{entries[first].file}.inapplicable")
        sides.append((side, b"".join(codec.encode(*record) for record in inapplicable)))
        dropped = {record[0] for record in inapplicable}
        kept = [[r for r in records if r[0] not in dropped] for records in kept]
        outcome.inapplicable, outcome.inapplicable_saved_to = sorted(dropped), side
    lsn = entries[first].first_lsn
    number = entries[-1].segment
    new_entries = list(entries[:first])
    segments: list[tuple[str, list[bytes]]] = []
    for records in kept:
        number += 1
        new = manifest_mod.SegmentEntry(manifest_mod.segment_file(number), number, lsn)
        parts = [codec.encode_header(number, lsn)]
        for old_lsn, time_ms, db, effects in records:
            parts.append(codec.encode(lsn, time_ms, db, effects))
            _renumber(outcome.renumbered, old_lsn, lsn)
            lsn += 1
        segments.append((os.path.join(path, new.file), parts))
        new_entries.append(new)
    new_manifest = manifest_mod.Manifest(new_entries, manifest.snapshot)  # a new repl_id
    with uninterrupted():
        for side, saved in sides:
            _write_file(fs, side, [saved])
        for file, parts in segments:
            _write_file(fs, file, parts)
        manifest_mod.store(fs, path, new_manifest)
        # Everything written above is fsynced: the watermark says so (it named the old ones).
        last = new_entries[-1]
        watermark.store(fs, path, watermark.Watermark(
            last.segment, fs.size(os.path.join(path, last.file)), lsn - 1))
        for entry in entries[first:]:
            fs.unlink(os.path.join(path, entry.file))
        fs.fsync_dir(path)
        outcome.cuts, outcome.status = cuts, "fixed"
        outcome.log_ends_at, outcome.repl_id = lsn - 1, new_manifest.repl_id
        outcome.log_ended_at = _old_lsn(outcome.renumbered, lsn - 1)
        _report_skip(args, outcome, len(entries) - first)
    return OK


def _renumber(ranges: list[tuple[int, int, int]], old: int, new: int) -> None:
    """Record that old LSN `old` is now `new`: runs of (old first, old last, new first) where
    the two differ."""
    if old == new:
        return
    if ranges and ranges[-1][1] + 1 == old and ranges[-1][2] + old - ranges[-1][0] == new:
        ranges[-1] = (ranges[-1][0], old, ranges[-1][2])
    else:
        ranges.append((old, old, new))


def _old_lsn(ranges: list[tuple[int, int, int]], new: int) -> int:
    for old_first, old_last, new_first in ranges:
        if new_first <= new <= new_first + old_last - old_first:
            return old_first + new - new_first
    return new


SHOWN = 10  # LSNs or ranges listed in the text report (--json lists them all)


def _report_skip(args: argparse.Namespace, outcome: Outcome, rewritten: int) -> None:
    for cut in outcome.cuts:
        _say(args, cut.line())
    if outcome.inapplicable:
        lsns = outcome.inapplicable
        shown = ", ".join(map(str, lsns[:SHOWN])) + (", ..." if len(lsns) > SHOWN else "")
        _say(args, f"{len(lsns)} later record(s) depend on lost ones and do not replay (old "
                   f"LSNs {shown}): dropped too, saved to {outcome.inapplicable_saved_to}")
    if outcome.renumbered:
        runs = [f"{a}..{b} -> {c}..{c + b - a}" if a != b else f"{a} -> {c}"
                for a, b, c in outcome.renumbered]
        _say(args, "renumbered (old LSNs -> new): " + ", ".join(runs[:SHOWN])
             + (", ..." if len(runs) > SHOWN else ""))
    count, exact = outcome.lost()
    ended = "" if outcome.log_ended_at == outcome.log_ends_at \
        else f" (old LSN {outcome.log_ended_at})"
    _say(args, f"{outcome.path}: rewrote {rewritten} segment(s); "
               f"{loss.describe_total(count, exact)}; the log now ends at LSN "
               f"{outcome.log_ends_at}{ended}; new replication ID {outcome.repl_id}")


REPLAY_ROUNDS = 5


def _inapplicable(fs: Any, path: str, manifest: Any, first: int,
                  kept: list[list[tuple]]) -> list[tuple] | None:
    """The kept records that fail to replay after the state before them (the snapshot and the
    segments before `first`), found by replaying into an in-memory engine; then checked by a
    replay from scratch without them (a failing record may have applied part of its effects),
    up to REPLAY_ROUNDS times. None: no clean replay was reached."""
    from streamkeep import Engine
    from streamkeep.aof.segment_reader import SegmentReader
    from streamkeep.snapshot.services.load import load_snapshot

    candidates = [record for records in kept for record in records]
    dropped: list[tuple] = []
    for _round in range(REPLAY_ROUNDS):
        engine = Engine()
        if manifest.snapshot is not None:
            load_snapshot(engine, os.path.join(path, manifest.snapshot.file))
        for entry in manifest.segments[:first]:
            engine.replay.apply_many(SegmentReader(fs, os.path.join(path, entry.file)).records())
        failed = []
        for record in candidates:
            try:
                engine.replay.apply_many((record,))
            except Exception:  # noqa: BLE001 (any failure of a record's replay drops it)
                failed.append(record)
        if not failed:
            return dropped
        dropped += failed
        failing = {id(record) for record in failed}
        candidates = [record for record in candidates if id(record) not in failing]
    return None


def _check_after(path: str, args: argparse.Namespace, outcome: Outcome) -> int:
    from streamkeep.tools.inspect.verify import analyse

    after = analyse(path, deep=True)
    if after.problems:
        for problem in after.problems:
            print(f"still damaged: {problem.describe()}", file=sys.stderr)
            outcome.problems.append(problem.describe())
        outcome.status = "refused"
        return REFUSED
    ok = after.ok_up_to()
    outcome.records, outcome.log_ends_at = after.records, ok[0] if ok else None
    _say(args, f"{path}: clean, {after.records} records")
    return OK
