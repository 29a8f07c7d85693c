"""`streamkeep aof fix DIR`: repair a data directory so that it opens, saving what it cuts.

Owns the repairs: a torn tail of the last segment is truncated at the last good record after
the bytes it cuts are copied to `<segment>.cut-<offset>`; damage followed by valid records, or
inside bytes the synced watermark says were fsynced, is refused unless `--force-skip-damaged`,
which keeps every valid record after each damaged span (the damaged segments and every later
one are rewritten under new segment numbers with consecutive LSNs: write, fsync, rename, fsync
the directory, then one manifest switch under a new replication ID, and a new watermark). Takes the directory's lock first: never edits a directory a server holds.
Must not touch: the record format (aof.codec), the analysis (tools.inspect.verify).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from streamkeep.tools.exits import uninterrupted

EPILOG = """\
examples:
  streamkeep aof fix data/                        # asks before truncating a torn tail
  streamkeep aof fix --yes data/
  streamkeep aof fix --force-skip-damaged data/   # keep the valid records after damage

A torn tail (an incomplete last record of the last segment, past what was fsynced) is cut
after being copied to <segment>.cut-<offset> in the directory. Damage followed by valid
records, or inside records that were fsynced (bit rot, not a torn tail), is refused unless
--force-skip-damaged: every damaged span is then copied to its own .cut- file and dropped,
the later records are kept and renumbered (LSNs stay consecutive; records that depend on
lost ones and fail to replay are dropped too, saved to <segment>.inapplicable), the history
gets a new replication ID (replicas resynchronise), and the records lost are reported with
file and offset. A missing segment, a bad manifest or snapshot, or an LSN gap cannot be fixed here.
The directory's lock is taken first: a directory a running server holds is never edited.

exit status:
  0    fixed (the directory opens), or nothing to fix
  2    damage not fixed: needs --force-skip-damaged, or not fixable by this command
  3    usage or I/O error, the directory is locked by a running server, or not confirmed
  130  interrupted (Ctrl-C): the directory is as it was, or repaired (never half)
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


def main(args: argparse.Namespace) -> int:
    from streamkeep.aof.fs import LockedError, RealFS
    from streamkeep.aof.manifest import LOCK_FILE
    from streamkeep.tools.inspect.verify import UsageError, analyse

    path = args.path
    if not os.path.isdir(path):
        print(f"streamkeep aof fix: {path}: not a directory (fix takes a data directory)",
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
    try:
        report = analyse(path, deep=True)  # the verdict opening reaches, decoding included
        return _fix(fs, path, report, args)
    except UsageError as err:
        print(f"streamkeep aof fix: {err}", file=sys.stderr)
        return USAGE
    except OSError as err:
        print(f"streamkeep aof fix: {err.filename or path}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    finally:
        fs.unlock(lock_fd)


def _fix(fs: Any, path: str, report: Any, args: argparse.Namespace) -> int:
    problems = report.problems
    if not problems:
        print(f"{path}: clean, nothing to fix")
        return OK
    unfixable = [p for p in problems if p.kind not in FIXABLE]
    if unfixable:
        for problem in unfixable:
            print(f"cannot fix {problem.describe()}", file=sys.stderr)
        return REFUSED
    damaged = [p for p in problems if p.action == "refuse"]
    if damaged and not args.force_skip_damaged:
        for problem in damaged:
            print(f"refusing: {problem.describe()}", file=sys.stderr)
        print("--force-skip-damaged drops the damaged span(s), saving them, and keeps the valid "
              "records after them (renumbered)", file=sys.stderr)
        return REFUSED
    if not damaged:
        (tail,) = problems
        file = os.path.join(path, tail.file)
        side = f"{file}.cut-{tail.offset}"
        if not args.yes and not _confirm(
                f"truncate {file} at byte offset {tail.offset} ({tail.bytes} bytes, saved to "
                f"{side})?"):
            print("not confirmed: nothing changed", file=sys.stderr)
            return USAGE
        with uninterrupted():  # Ctrl-C now: the directory as it was or repaired, not half
            _truncate_tail(fs, path, file, tail.offset, side)
            print(f"{file}: torn tail of {tail.bytes} bytes cut at offset {tail.offset} "
                  f"(saved to {side})")
        return _check_after(path)
    first = min(report.segments.index(next(s for s in report.segments if s.file == p.file))
                for p in damaged)
    if not args.yes and not _confirm(
            f"drop the damaged records from {report.segments[first].file} on and keep the valid "
            f"ones after them (renumbered; cut bytes saved as .cut- files)?"):
        print("not confirmed: nothing changed", file=sys.stderr)
        return USAGE
    status = _skip_damaged(fs, path, first)
    return _check_after(path) if status == OK else status


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


def _skip_damaged(fs: Any, path: str, first: int) -> int:
    """Rewrite segments first.. of the manifest with their valid records, renumbered from the
    first LSN of segment `first`, under new segment numbers; then switch the manifest. Nothing
    is written until the new segments are worked out, then everything is (Ctrl-C waits): an
    interrupted fix leaves the directory as it was or repaired."""
    from streamkeep.aof import codec, watermark
    from streamkeep.aof import manifest as manifest_mod

    manifest = manifest_mod.load(fs, path)
    entries = manifest.segments
    lost_total = 0
    kept: list[list[tuple]] = []  # per rewritten segment: its valid records (old LSNs)
    sides: list[tuple[str, bytes]] = []  # (.cut- file, the bytes it saves)
    said: list[str] = []  # what is printed once it is done
    for entry in entries[first:]:
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
                break
            bad = result.damage.offset
            resume = codec.next_valid_record(data, bad, expected)
            stop = resume[0] if resume is not None else len(data)
            side = f"{file}.cut-{bad}"
            sides.append((side, data[bad:stop]))
            if resume is None:
                said.append(f"{entry.file}:{bad}: dropped {stop - bad} bytes of torn tail "
                            f"(saved to {side})")
                break
            lost = resume[1] - expected
            lost_total += lost
            said.append(f"{entry.file}:{bad}: {lost} record(s) lost (LSN {expected}"
                        f"{'' if lost == 1 else f'..{resume[1] - 1}'}, bytes {bad}..{stop}, "
                        f"saved to {side}): {result.damage.reason}")
            pos, expected = resume
        kept.append(records)
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
        lsns = sorted(dropped)
        shown = ", ".join(map(str, lsns[:10])) + (", ..." if len(lsns) > 10 else "")
        said.append(f"{len(lsns)} later record(s) depend on lost ones and do not replay (old "
                    f"LSNs {shown}): dropped too, saved to {side}")
    lsn = entries[first].first_lsn
    number = entries[-1].segment
    new_entries = list(entries[:first])
    segments: list[tuple[str, list[bytes]]] = []
    for records in kept:
        number += 1
        new = manifest_mod.SegmentEntry(manifest_mod.segment_file(number), number, lsn)
        parts = [codec.encode_header(number, lsn)]
        for _old_lsn, time_ms, db, effects in records:
            parts.append(codec.encode(lsn, time_ms, db, effects))
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
        lost_total += len(inapplicable)
        for line in said:
            print(line)
        print(f"{path}: rewrote {len(entries) - first} segment(s); {lost_total} record(s) "
              f"lost; the log now ends at LSN {lsn - 1}; new replication ID "
              f"{new_manifest.repl_id}")
    return OK


REPLAY_ROUNDS = 5


def _inapplicable(fs: Any, path: str, manifest: Any, first: int,
                  kept: list[list[tuple]]) -> list[tuple] | None:
    """The kept records that fail to replay after the state before them (the snapshot and the
    segments before `first`), found by replaying into an in-memory engine; then checked by a
    replay from scratch without them (a failing record may have applied part of its effects),
    up to REPLAY_ROUNDS times. None: no clean replay was reached."""
    from streamkeep import Engine
    from streamkeep.aof.segment_reader import SegmentReader
    from streamkeep.snapshot.load import load_snapshot

    candidates = [record for records in kept for record in records]
    dropped: list[tuple] = []
    for _round in range(REPLAY_ROUNDS):
        engine = Engine()
        if manifest.snapshot is not None:
            load_snapshot(engine, os.path.join(path, manifest.snapshot.file))
        for entry in manifest.segments[:first]:
            engine.apply_many(SegmentReader(fs, os.path.join(path, entry.file)).records())
        failed = []
        for record in candidates:
            try:
                engine.apply_many((record,))
            except Exception:  # noqa: BLE001 (any failure of a record's replay drops it)
                failed.append(record)
        if not failed:
            return dropped
        dropped += failed
        failing = {id(record) for record in failed}
        candidates = [record for record in candidates if id(record) not in failing]
    return None


def _check_after(path: str) -> int:
    from streamkeep.tools.inspect.verify import analyse

    after = analyse(path, deep=True)
    if after.problems:
        for problem in after.problems:
            print(f"still damaged: {problem.describe()}", file=sys.stderr)
        return REFUSED
    print(f"{path}: clean, {after.records} records")
    return OK
