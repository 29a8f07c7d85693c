"""`streamkeep restore DIR --to-lsn N | --to-time T --out NEWDIR`: point-in-time recovery.

Owns building a new data directory that holds exactly the state after one record of DIR's
history: the manifest's snapshot (when it covers no more than that record) copied, then the
prefix of the segments up to that record (the last one cut at the record's end), and a manifest
naming them under a new replication ID. DIR is only read (not locked: a server may run on it).
NEWDIR is built beside its final name and renamed into place once complete (tools.safe_output: it
must be new or an empty directory, outside every data directory). Also owns `current_state`:
DIR's latest state (its snapshot and every record after it) opened from such a copy, which
`export-rdb` and `export` read.
Must not touch: the record format (aof.codec), the manifest's schema (aof.manifest).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from streamkeep.engine.wire.errors import StreamkeepError  # stdlib only behind it

if TYPE_CHECKING:
    from streamkeep.engine.services.engine import Engine

EPILOG = """\
examples:
  streamkeep restore data/ --to-lsn 51000 --out restored/
  streamkeep restore data/ --to-time 2026-11-23T10:15:00Z --out restored/
  streamkeep restore data/ --to-time 1795314384650 --out restored/  # in ms
  streamkeep serve --dir restored/                            # then use it

The new directory holds the state right after the last record at or before the LSN or time
(a record's time is the server clock when the command ran; an ISO time without a zone is UTC).
It needs the manifest's snapshot to cover no more than that: an earlier point was compacted
away and cannot be restored from this directory (use a backup). DIR is never changed or
locked; NEWDIR must not exist or be empty, and not be inside a data directory. NEWDIR is
built beside its final name and renamed into place once complete: an error or Ctrl-C leaves
none. The new history gets its own replication ID.

exit status:
  0    restored
  2    impossible: the point is before the snapshot, after the log's end, or
       damage precedes it; or --to-time is before the first record (NEWDIR
       would be empty: `--to-lsn 0` asks for that)
  3    usage or I/O error (bad arguments, NEWDIR not empty or inside a data
       directory, unreadable files)
  130  interrupted (Ctrl-C): no NEWDIR is left
"""

OK, IMPOSSIBLE, USAGE = 0, 2, 3
COPY_CHUNK = 1 << 24
# A time after every record's: the state after the last record, whatever the log holds.
END_OF_TIME = 1 << 62


class Impossible(StreamkeepError):
    """This point in time cannot be restored from this directory (exit 2)."""


class Usage(StreamkeepError):
    """Bad arguments or an I/O error (exit 3)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Point-in-time recovery: build a new data directory holding the "
                          "state right after a given LSN or time.")
    parser.epilog = EPILOG
    parser.add_argument("path", metavar="DIR", help="the data directory to restore from")
    point = parser.add_mutually_exclusive_group(required=True)
    point.add_argument("--to-lsn", type=int, metavar="N", help="the last LSN to keep")
    point.add_argument("--to-time", metavar="T",
                       help="keep records at or before T (ISO 8601, or milliseconds)")
    parser.add_argument("--out", required=True, metavar="NEWDIR",
                        help="the new data directory (must not exist, or be empty)")


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from digits or an ISO 8601 time (UTC unless a zone)."""
    import datetime

    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Usage(f"--to-time {text!r}: not an ISO 8601 time or milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


class Restored(NamedTuple):
    """What a restore built: the state after LSN `lsn`, the record's time (None: no record,
    the snapshot's state or the empty one), the snapshot under it (None: none)."""

    lsn: int
    time_ms: int | None
    snapshot: str | None


def main(args: argparse.Namespace) -> int:
    from streamkeep.tools.progress import Ticker

    try:
        # a line every few seconds while it replays, when stderr is not a terminal
        with Ticker("streamkeep restore", f"restoring {args.path} into {args.out}",
                    quiet=sys.stderr.isatty()):
            done = restore(args.path, args.out, args.to_lsn,
                           None if args.to_time is None else parse_time(args.to_time))
    except Usage as err:
        print(f"streamkeep restore: {err}", file=sys.stderr)
        return USAGE
    except Impossible as err:
        print(f"streamkeep restore: impossible: {err}", file=sys.stderr)
        return IMPOSSIBLE
    except OSError as err:
        print(f"streamkeep restore: {err.filename or args.path}: {err.strerror or err}",
              file=sys.stderr)
        return USAGE
    print(f"{args.out}: restored the state after LSN {done.lsn} from {args.path} "
          f"({_what(done)})")
    return OK


def _what(done: Restored) -> str:
    from streamkeep.tools.inspect.verify import format_time

    if done.time_ms is not None:
        return f"its record of {format_time(done.time_ms)}"
    if done.snapshot is not None:
        return f"the snapshot {done.snapshot}, no record after it"
    return "the empty state: no record at or before the point"


def restore(src: str, out: str, to_lsn: int | None, to_time: int | None) -> Restored:
    """Build `out` from `src`; returns the LSN whose state it holds (and that record's time)."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.tools.safe_output import OutputRefused, check_output

    fs = RealFS()
    if to_lsn is not None and to_lsn < 0:
        raise Usage(f"--to-lsn {to_lsn}: an LSN is >= 0")
    if not os.path.isdir(src):
        raise Usage(f"{src}: not a directory")
    try:
        check_output(out, directory=True, force=None, sources=[src])
    except OutputRefused as err:
        raise Usage(str(err)) from None
    manifest, fds = _open_files(fs, src)
    try:  # (NEWDIR is built beside its name: an error or Ctrl-C leaves none)
        return _restore(fs, src, out, to_lsn, to_time, manifest, fds)
    finally:
        for fd in fds.values():
            fs.close(fd)


def _open_files(fs: Any, src: str) -> tuple[Any, dict[str, int]]:
    """The manifest and a read descriptor on every file it names. A server's compaction may
    replace the manifest and delete what it named meanwhile: then the manifest is read again.
    Once open, the files stay readable even if a compaction unlinks them."""
    from streamkeep.aof import manifest as manifest_mod

    for attempt in range(3):
        try:
            manifest = manifest_mod.load(fs, src)
        except manifest_mod.ManifestError as err:
            raise Impossible(str(err)) from None
        names = [entry.file for entry in manifest.segments]
        if manifest.snapshot is not None:
            names += manifest.snapshot.files
        fds: dict[str, int] = {}
        try:
            for name in names:
                fds[name] = fs.open_read(os.path.join(src, name))
        except FileNotFoundError:
            for fd in fds.values():
                fs.close(fd)
            if attempt == 2:
                raise
            continue
        return manifest, fds
    raise AssertionError("unreachable")


def _restore(fs: Any, src: str, out: str, to_lsn: int | None, to_time: int | None,
             manifest: Any, fds: dict[str, int]) -> Restored:
    from streamkeep.aof import codec
    from streamkeep.aof.watermark import durable_part

    snap = manifest.snapshot
    base = snap.lsn if snap is not None else 0
    # What was fsynced of the last segment: damage there is a torn tail only past it. Read
    # before the segments, which a live server may be appending to.
    durable = durable_part(fs, src, manifest.segments[-1].segment)
    if snap is not None:
        _check_snapshot(fs, os.path.join(src, snap.file), fds[snap.file], snap)
        for part in snap.parts:
            _check_file(fs, os.path.join(src, part.file), fds[part.file], part)
    if to_lsn is not None and to_lsn < base:
        raise Impossible(
            f"LSN {to_lsn} is before the snapshot {snap.file if snap else ''} (LSN {base}): "
            f"records up to LSN {base} were compacted away; restore from an older backup")
    # Walk the segments: which records to keep, and where the last kept one ends.
    kept: list[tuple[Any, int]] = []  # (segment entry, bytes to copy)
    target, target_time = base, None
    first: tuple[int, int] | None = None  # the first record after the snapshot: LSN, time
    expected = base + 1
    done = False
    for entry in manifest.segments:
        if done:
            break
        file = os.path.join(src, entry.file)
        fd = fds[entry.file]
        data = fs.pread(fd, fs.fsize(fd), 0)
        try:
            header = codec.decode_header(data)
        except codec.FormatError as err:
            raise Impossible(f"{file}: {err}") from None
        if (header.segment, header.first_lsn) != (entry.segment, entry.first_lsn):
            raise Impossible(f"{file}: header says segment {header.segment} first LSN "
                             f"{header.first_lsn}, the manifest says segment {entry.segment} "
                             f"first LSN {entry.first_lsn}")
        if header.first_lsn != expected:
            raise Impossible(f"{file}: starts at LSN {header.first_lsn}, expected {expected}")
        result = codec.ScanResult(end=codec.HEADER_SIZE)
        pos, end = codec.HEADER_SIZE, codec.HEADER_SIZE
        for batch in codec.scan_batches(data, codec.HEADER_SIZE, expected, result, 4096):
            for lsn, time_ms, _db, _effects in batch:
                first = first or (lsn, time_ms)
                if (to_lsn is not None and lsn > to_lsn) or \
                        (to_time is not None and time_ms > to_time):
                    done = True
                    break
                length = codec.FRAME.unpack_from(data, pos)[0]
                pos += codec.FRAME_SIZE + length
                end, target, target_time = pos, lsn, time_ms
            if done:
                break
        last = entry is manifest.segments[-1]
        damage = result.damage
        if damage is not None and codec.zero_tail_at(data, damage.offset):
            damage = None  # zeros allocated ahead of the log: its records end there
        if not done and last and damage is None and durable.offset is not None \
                and result.end < durable.offset:
            raise Impossible(f"{file} ends at byte {result.end}, but bytes up to "
                             f"{durable.offset} (LSN {durable.lsn}) were fsynced: records "
                             f"from LSN {target + 1} are missing")
        if not done and damage is not None:
            torn = last and not damage.valid_after and not durable.damaged and (
                durable.offset is None or damage.offset >= durable.offset)
            if (to_lsn is not None and to_lsn <= target) or (to_time is not None and torn):
                done = True  # the point is before the damage, or the damage is a torn tail
            else:
                point = "the log's end" if to_time == END_OF_TIME else "the point asked for"
                raise Impossible(f"{damage.reason} at {file}:{damage.offset} "
                                 f"(LSN {target + 1}), before {point}")
        if end > codec.HEADER_SIZE or not kept:
            kept.append((entry, end))
        expected = header.first_lsn + result.count
    if to_lsn is not None and target < to_lsn:
        raise Impossible(f"the log ends at LSN {target}; LSN {to_lsn} was never written")
    if to_time is not None and target == base and snap is not None \
            and to_time < snap.created_ms:
        # No record after the snapshot is that old: the point, if any, is inside the snapshot.
        raise Impossible(f"no record after the snapshot {snap.file} (LSN {base}, created at "
                         f"{snap.created_ms} ms) is at or before {to_time} ms: that time was "
                         f"compacted away")
    if to_time is not None and target == base and snap is None and first is not None:
        # Before the first record the directory held nothing: an empty NEWDIR is never what
        # a time was asked for (a wrong date or zone, most likely), so it is refused.
        from streamkeep.tools.inspect.verify import format_time

        raise Impossible(f"no record is at or before {format_time(to_time)} ({to_time} ms): "
                         f"the log starts with LSN {first[0]} at {format_time(first[1])} "
                         f"({first[1]} ms); `--to-lsn 0` restores the empty state before it")
    _build(fs, fds, out, manifest, kept, target)
    return Restored(target, target_time, snap.file if snap is not None else None)


def _check_snapshot(fs: Any, file: str, fd: int, snap: Any) -> None:
    """The snapshot is the one the manifest names, undamaged: its size, its bytes against the
    checksum the manifest recorded (read through the descriptor held: a compaction may unlink
    the name), and its meta's LSN."""
    from streamkeep.snapshot.reader import Snapshot, SnapshotError

    _check_file(fs, file, fd, snap)
    try:
        with Snapshot(file) as reader:
            lsn = reader.meta.lsn
    except SnapshotError as err:
        raise Impossible(str(err)) from None
    if lsn != snap.lsn:
        raise Impossible(f"{file}: covers LSN {lsn}, the manifest says {snap.lsn}")


def _check_file(fs: Any, file: str, fd: int, part: Any) -> None:
    """A file of the snapshot (its own or a part) as the manifest recorded it (`part.size`,
    `part.crc32`): its size and its bytes, read through the descriptor held."""
    from streamkeep.snapshot.integrity import check_whole
    from streamkeep.snapshot.reader import SnapshotError

    size = fs.fsize(fd)
    if size != part.size:
        raise Impossible(f"{file}: {size} bytes, the manifest says {part.size} (truncated or "
                         f"replaced)")
    try:
        check_whole(file, part.crc32, lambda: _chunks(fs, fd, size))
    except SnapshotError as err:
        raise Impossible(str(err)) from None


def _chunks(fs: Any, fd: int, size: int) -> Iterator[bytes]:
    offset = 0
    while offset < size:
        chunk = fs.pread(fd, min(COPY_CHUNK, size - offset), offset)
        if not chunk:
            raise OSError(0, f"ends at {offset}, expected {size} bytes")
        offset += len(chunk)
        yield chunk


def _copy(fs: Any, fd_in: int, dst: str, size: int) -> None:
    fd_out = fs.open_write_new(dst)
    try:
        for chunk in _chunks(fs, fd_in, size):
            fs.write(fd_out, chunk)
        fs.fdatasync(fd_out)
    finally:
        fs.close(fd_out)


def _build(fs: Any, fds: dict[str, int], out: str, manifest: Any,
           kept: list[tuple[Any, int]], target: int) -> None:
    """The new directory, built beside `out` and renamed into place once complete."""
    from streamkeep.tools.safe_output import staged_directory

    with staged_directory(out) as stage:
        _fill(fs, fds, stage, manifest, kept, target)


def _fill(fs: Any, fds: dict[str, int], out: str, manifest: Any,
          kept: list[tuple[Any, int]], target: int) -> None:
    from streamkeep.aof import codec, watermark
    from streamkeep.aof import manifest as manifest_mod

    snap = manifest.snapshot
    if snap is not None:
        _copy(fs, fds[snap.file], os.path.join(out, snap.file), snap.size)
        for part in snap.parts:
            _copy(fs, fds[part.file], os.path.join(out, part.file), part.size)
    entries = []
    for entry, end in kept:
        _copy(fs, fds[entry.file], os.path.join(out, entry.file), end)
        entries.append(entry)
    if not entries:  # no segment kept (cannot happen: the first is always kept), be safe
        number = manifest.segments[0].segment
        entry = manifest_mod.SegmentEntry(manifest_mod.segment_file(number), number, target + 1)
        fd = fs.open_write_new(os.path.join(out, entry.file))
        try:
            fs.write(fd, codec.encode_header(number, target + 1))
            fs.fdatasync(fd)
        finally:
            fs.close(fd)
        entries.append(entry)
    fs.fsync_dir(out)
    manifest_mod.store(fs, out, manifest_mod.Manifest(entries, snap))
    # Every file above is fsynced: the new directory's watermark says so from the start.
    last = entries[-1]
    watermark.store(fs, out, watermark.Watermark(
        last.segment, fs.size(os.path.join(out, last.file)), target))


@contextlib.contextmanager
def current_state(src: str, work: str, **config: Any) -> Iterator[tuple[Engine, int]]:
    """DIR's latest state (its snapshot and every record after it; a torn tail left out, as
    opening DIR would) as an engine opened on a point-in-time copy made in `work` (a
    directory of the caller's, which it removes), and the LSN that state is as of. DIR itself
    is never locked or changed: a server may be running on it. `config`: the engine's settings
    (automatic compaction is off). Raises Usage or Impossible as `restore` does."""
    from streamkeep import Engine

    copy = os.path.join(work, "state")
    lsn = restore(src, copy, None, END_OF_TIME).lsn
    with Engine.open(copy, auto_aof_rewrite_percentage=0, **config) as engine:
        yield engine, lsn
