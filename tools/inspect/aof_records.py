"""The records of an AOF path for `aof stats` and `aof dump`: segments in order, batch by batch.

Owns resolving PATH (a data directory: its manifest's segments in order; or one segment file),
reading each segment through `aof.segment_reader.SegmentReader` over a memory map (pages already read
are released, so memory stays flat whatever the file size), what a key of an effect is, the
per-effect database (SELECT effects inside a transaction's record), time parsing/formatting and
the exit statuses both commands share. Must not touch: output formats (each command's own).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.errors import StreamkeepError

if TYPE_CHECKING:
    from streamkeep.aof.watermark import Synced

# Exit statuses (the manual's "Exit codes" page lists every command's): 2 and 3 mean what
# they mean for verify, restore, import and the others.
EXIT_OK = 0
EXIT_DAMAGED = 2
EXIT_USAGE = 3
EXIT_IO = 3

_RELEASE_EVERY = 8 << 20  # madvise(DONTNEED) the pages read, every this many bytes


class InspectError(StreamkeepError):
    """A problem to report on stderr (no traceback) with an exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class SegmentInfo:
    """One segment read: what the stats' segment table shows."""

    file: str
    segment: int
    first_lsn: int
    size: int
    records: int = 0
    last_lsn: int | None = None
    end: int = 0  # offset just past the last good record
    damage: str | None = None
    # What the damage is, as opening the directory judges it (aof.recovery.judge_end, whose
    # kinds `aof verify` reports): "torn-tail", "damage-in-synced", "damage-before-valid";
    # "lsn-gap" for records missing before the next segment's first LSN.
    damage_kind: str | None = None


class _MappedFS:
    """The one FileSystem method SegmentReader uses, returning a read-only memory map."""

    def read_file(self, path: str) -> bytes | mmap.mmap:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


@dataclass(slots=True)
class Source:
    """What PATH names: the segment files to read, in order, with what the manifest says."""

    path: str
    segments: list[tuple[str, int | None, int | None]]  # (file, segment number, first LSN)
    snapshot_lsn: int | None = None  # the data directory's snapshot covers LSNs up to this
    snapshot_created_ms: int | None = None  # ... and was made then


def open_source(path: str) -> Source:
    """Resolve PATH; InspectError (status 3: missing/unreadable, 2: malformed manifest)."""
    from streamkeep.aof import manifest
    from streamkeep.aof.fs import RealFS

    if not os.path.exists(path):
        raise InspectError(f"{path}: no such file or directory", EXIT_IO)
    if os.path.isdir(path):
        mpath = os.path.join(path, manifest.MANIFEST)
        if not os.path.exists(mpath):
            raise InspectError(f"{mpath}: manifest is missing (not a data directory?)", EXIT_IO)
        try:
            man = manifest.load(RealFS(), path)
        except OSError as err:
            raise InspectError(f"{mpath}: {err.strerror or err}", EXIT_IO) from None
        except manifest.ManifestError as err:
            raise InspectError(str(err), EXIT_DAMAGED) from None
        return Source(path, [(os.path.join(path, s.file), s.segment, s.first_lsn)
                             for s in man.segments],
                      None if man.snapshot is None else man.snapshot.lsn,
                      None if man.snapshot is None else man.snapshot.created_ms)
    return Source(path, [(path, None, None)])


def iter_batches(source: Source, infos: list[SegmentInfo], from_lsn: int = 0,
                 sizes: list[int] | None = None,
                 progress: ByteProgress | None = None) -> Iterator[list[tuple]]:
    """Every good record of the source, in LSN order, as batches of `(lsn, time_ms, db,
    effects)`. Appends a SegmentInfo per segment to `infos` as it is reached; stops after the
    first damaged segment (its info's `damage` says where) and raises InspectError for a
    segment that cannot be opened (status 3) or whose header is bad (status 2). Segments
    whose records all precede `from_lsn` (the manifest says so) are not read. With `sizes`,
    that list is refilled before each batch is yielded with its records' framed sizes.
    `progress` is told the bytes read so far, now and then."""
    from streamkeep.aof.codec import FRAME, HEADER_SIZE
    from streamkeep.aof.recovery import judge_end
    from streamkeep.aof.segment_reader import SegmentError, SegmentReader

    fs = _MappedFS()
    unpack_frame = FRAME.unpack_from
    segments = source.segments
    base = 0  # bytes of the segments before this one
    for index, (file, number, first) in enumerate(segments):
        following = segments[index + 1][2] if index + 1 < len(segments) else None
        if following is not None and following <= from_lsn:
            with contextlib.suppress(OSError):
                base += os.path.getsize(file)
            continue
        try:
            reader = SegmentReader(fs, file, number, first)  # type: ignore[arg-type]
        except SegmentError as err:
            raise InspectError(f"{err} (at byte offset 0)", EXIT_DAMAGED) from None
        except OSError as err:
            raise InspectError(f"{file}: {err.strerror or err}", EXIT_IO) from None
        info = SegmentInfo(file, reader.header.segment, reader.first_lsn, reader.size)
        infos.append(info)
        data = reader.data
        release = getattr(data, "madvise", None) if isinstance(data, mmap.mmap) else None
        released = 0
        pos = HEADER_SIZE
        tick = 0
        for batch in reader.batches():
            if progress is not None:
                tick += 1
                if not tick % 256:
                    progress.update(base + reader.end)
            if sizes is not None:
                sizes.clear()
                for _ in batch:
                    size = FRAME.size + unpack_frame(data, pos)[0]
                    sizes.append(size)
                    pos += size
            yield batch
            if release is not None and reader.end - released >= _RELEASE_EVERY:
                upto = (reader.end // mmap.PAGESIZE) * mmap.PAGESIZE
                if upto > released:
                    release(mmap.MADV_DONTNEED, released, upto - released)
                    released = upto
        info.records, info.end = reader.count, reader.end
        info.last_lsn = reader.first_lsn + reader.count - 1 if reader.count else None
        damage = reader.damage
        # The last segment's end is judged against the synced watermark, as opening does.
        durable = (_durable(source, reader.header.segment) if index == len(segments) - 1
                   else None)
        judged = judge_end(reader.end, None if damage is None
                           else (damage.offset, damage.valid_after), durable)
        if damage is not None and judged is not None:
            info.damage, info.damage_kind = f"{damage} ({judged.describe()})", judged.kind
        elif judged is not None:
            info.damage = (f"{file}: records end at LSN {reader.first_lsn + reader.count - 1} "
                           f"at byte offset {reader.end} ({judged.describe()})")
            info.damage_kind = judged.kind
        elif following is not None and reader.first_lsn + reader.count != following:
            info.damage = (f"{file}: records end at LSN {reader.first_lsn + reader.count - 1} "
                           f"at byte offset {reader.end}, but the next segment starts at LSN "
                           f"{following} (records missing)")
            info.damage_kind = "lsn-gap"
        base += reader.size
        if progress is not None:
            progress.update(base)
        if isinstance(data, mmap.mmap):
            data.close()
        if info.damage is not None:
            return


def _durable(source: Source, segment: int) -> Synced:
    """What the synced watermark of the source's directory (a segment file's: the one it is
    in) says of its last segment, number `segment` (aof.watermark.Synced), as `aof verify`
    reads it."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.watermark import durable_part

    directory = source.path if os.path.isdir(source.path) else os.path.dirname(source.path)
    return durable_part(RealFS(), directory or ".", segment)


class ByteProgress:
    """Progress over the bytes to read, on stderr (when `enabled`): a transient bar on a
    terminal, else a line every few seconds (tools.progress: ``streamkeep aof stats: reading:
    12.5 of 64.0 MB (19%), 10 s elapsed``). Use as a context manager."""

    def __init__(self, source: Source, label: str, enabled: bool = True) -> None:
        self._progress: Any = None
        self._ticker: Any = None
        self._total = 0
        if not enabled:
            return
        for file, _number, _first in source.segments:
            with contextlib.suppress(OSError):
                self._total += os.path.getsize(file)
        if not sys.stderr.isatty():
            from streamkeep.tools.progress import Ticker

            self._ticker = Ticker(f"streamkeep aof {label}", "reading")
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(TextColumn(label), BarColumn(), DownloadColumn(),
                                  TimeRemainingColumn(), console=Console(file=sys.stderr),
                                  transient=True, refresh_per_second=2)
        self._task = self._progress.add_task(label, total=self._total)

    def update(self, done: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=done)
        if self._ticker is not None:
            share = f" ({100 * done // self._total}%)" if self._total else ""
            self._ticker.update(f"{done / 1e6:,.1f} of {self._total / 1e6:,.1f} MB{share}")

    def __enter__(self) -> ByteProgress:
        if self._progress is not None:
            self._progress.start()
        if self._ticker is not None:
            self._ticker.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._ticker is not None:
            self._ticker.__exit__()


# --- effects --------------------------------------------------------------------------------------


# Where an effect's keys are, for the commands whose keys are not just their first argument
# (every type's own writes, ZADD, HSET, SREM, ... and the *STORE commands' destination, are).
_KEY_SLICES = {b"FLUSHDB": slice(0), b"FLUSHALL": slice(0), b"SELECT": slice(0),
               b"FUNCTION": slice(0), b"XGROUP": slice(2, 3), b"DEL": slice(1, None),
               b"RENAME": slice(1, None), b"SMOVE": slice(1, 3)}
_FIRST = slice(1, 2)


def effect_keys(effect: tuple | list) -> tuple[bytes, ...]:
    """The keys an effect names: its first argument, but none for FLUSHDB, FLUSHALL, SELECT
    and FUNCTION's, the third argument for XGROUP's, every argument for DEL and RENAME, source
    and destination for SMOVE."""
    return tuple(effect[_KEY_SLICES.get(bytes(effect[0]).upper(), _FIRST)])


def selected_db(effect: tuple | list, db: int) -> int:
    """The database a SELECT effect switches to (`db` if it is malformed)."""
    try:
        return int(effect[1])
    except (IndexError, ValueError):
        return db


def command_name(effect: tuple | list) -> str:
    """The vocabulary name ("XGROUP SETID" for a subcommand): the command table's, imported the
    first time a name is needed (reading records alone needs no command module)."""
    global _effect_command
    if _effect_command is None:
        from streamkeep.engine import commands  # noqa: F401  (the table knows the containers)
        from streamkeep.engine.exec.table import effect_command

        _effect_command = effect_command
    return _effect_command(effect)


_effect_command: Any = None


# --- time -----------------------------------------------------------------------------------------


def parse_time(text: str) -> int:
    """`--since/--until`: milliseconds since the epoch, or an ISO 8601 time (UTC unless it
    says otherwise). ValueError otherwise."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def format_time(ms: int) -> str:
    """`2026-11-23T11:17:16.213Z`."""
    try:
        when = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def fail(err: InspectError, prog: str) -> int:
    print(f"{prog}: {err}", file=sys.stderr)
    return err.status
