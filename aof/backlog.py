"""The AOF segments as a replication backlog: the framed records after an LSN, read from disk.

Owns finding where the records after an LSN start (walking the segment's frames by their
lengths, `aof.codec.frame_offsets`) and reading them on, segment after segment, as the bytes the
files hold: a replica receives exactly what the primary wrote, CRCs included. A cursor holds an
open descriptor on each segment it will read, taken under the manifest lock, so a compaction that
removes them meanwhile does not take them away (unlinked files stay readable); segments made
later are opened as the cursor reaches them, and one already removed ends the cursor (the replica
then needs a full sync). Reads stop at what the journal has written: never a record still being
written, never one that a failed write may take back. Must not touch: the engine, the record
format beyond frame lengths (aof.codec), the manifest format (aof.manifest).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Protocol

from streamkeep.aof.codec import HEADER_SIZE, frame_offsets
from streamkeep.aof.fs import FileSystem
from streamkeep.aof.manifest import Manifest, SegmentEntry, SnapshotEntry
from streamkeep.engine.wire.errors import StorageError


class BacklogGone(StorageError):
    """The records a cursor needs next were compacted away: the replica needs a full sync."""


class WrittenLog(Protocol):
    """What a cursor needs of the journal (aof.journal.Journal): the manifest (read under
    `manifest_lock`) and how far its newest segment is written (`written_end`: the segment's
    number and written size, replaced whole after each write, so read without the engine
    lock)."""

    manifest: Manifest
    written_end: tuple[int, int]

    @property
    def manifest_lock(self) -> object: ...


@dataclass(slots=True)
class _Open:
    entry: SegmentEntry
    fd: int


class BacklogCursor:
    """Reads the records after an LSN from a data directory's segments, as framed bytes."""

    def __init__(self, fs: FileSystem, directory: str, opened: list[_Open], offset: int) -> None:
        self.fs = fs
        self.directory = directory
        self.opened = opened  # from the segment being read on; the first is the current one
        self.offset = offset  # in opened[0]
        self.closed = False

    def read(self, max_bytes: int, last_segment: int, written: int) -> bytes:
        """Up to `max_bytes` of the records not read yet (b"" when caught up). `last_segment`
        and `written` are the journal's newest segment number and its written size, read
        together under the engine lock. BacklogGone if a segment it needs was removed."""
        while True:
            cur = self.opened[0]
            newest = cur.entry.segment >= last_segment
            end = written if newest else self.fs.fsize(cur.fd)
            if self.offset < end:
                data = self.fs.pread(cur.fd, min(max_bytes, end - self.offset), self.offset)
                self.offset += len(data)
                return data
            if newest:
                return b""
            # This segment is closed and read: go on to the next one.
            if len(self.opened) == 1:
                self._open_next(cur.entry.segment + 1)
            self.fs.close(cur.fd)
            self.opened.pop(0)
            self.offset = HEADER_SIZE

    def _open_next(self, number: int) -> None:
        from streamkeep.aof.manifest import segment_file

        path = os.path.join(self.directory, segment_file(number))
        try:
            fd = self.fs.open_read(path)
        except FileNotFoundError:
            raise BacklogGone(f"{path} was compacted away before it was sent") from None
        self.opened.append(_Open(SegmentEntry(segment_file(number), number, 0), fd))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for item in self.opened:
            with contextlib.suppress(OSError):
                self.fs.close(item.fd)
        self.opened = []


@dataclass(slots=True)
class Position:
    """Where the records after an LSN are, and the CRC of the record at that LSN (None when it
    is not in the segments: the LSN is the snapshot's, or 0)."""

    cursor: BacklogCursor
    crc: int | None


def _open_segments(fs: FileSystem, directory: str, manifest: Manifest) -> list[_Open]:
    """A descriptor on every segment the manifest names (manifest lock held)."""
    opened: list[_Open] = []
    try:
        for entry in manifest.segments:
            opened.append(_Open(entry, fs.open_read(os.path.join(directory, entry.file))))
    except OSError:
        for item in opened:
            fs.close(item.fd)
        raise
    return opened


def _position(fs: FileSystem, directory: str, written_end: tuple[int, int], lsn: int,
              opened: list[_Open]) -> Position | None:
    """Where the records after `lsn` start. Reads the segment holding record `lsn` (without
    the engine lock: only bytes `written_end` says are written); an LSN beyond them is not
    found (None), as one compacted away."""
    covered = opened[0].entry.first_lsn - 1  # the snapshot's LSN (0: none)
    try:
        if lsn < covered:
            raise LookupError
        # The segment holding record `lsn`, or the first one when it is the snapshot's.
        index = 0
        for i, item in enumerate(opened):
            if item.entry.first_lsn <= lsn:
                index = i
        crc = None
        offset = HEADER_SIZE
        if lsn > covered:
            cur = opened[index]
            # The segment being written: up to its written size; a closed one (or one made
            # after written_end was read, holding no record yet): the whole file.
            end = written_end[1] if cur.entry.segment == written_end[0] else fs.fsize(cur.fd)
            data = fs.pread(cur.fd, end, 0)
            offset, crc = frame_offsets(data, HEADER_SIZE, lsn - cur.entry.first_lsn + 1)
    except (LookupError, ValueError):
        for item in opened:
            fs.close(item.fd)
        return None
    for item in opened[:index]:
        fs.close(item.fd)
    return Position(BacklogCursor(fs, directory, opened[index:], offset), crc)


def open_after(fs: FileSystem, directory: str, journal: WrittenLog, lsn: int
               ) -> Position | None:
    """A cursor on the records after `lsn`, or None if they are not all in the segments (the
    LSN was compacted into the snapshot, or is beyond what is written). Needs no engine lock:
    it reads a segment (up to 64 MB), so callers run it off the server's loop."""
    with journal.manifest_lock:  # type: ignore[attr-defined]
        opened = _open_segments(fs, directory, journal.manifest)
        written_end = journal.written_end
    return _position(fs, directory, written_end, lsn, opened)


def open_snapshot(fs: FileSystem, directory: str, journal: WrittenLog
                  ) -> tuple[SnapshotEntry | None, list[int], Position]:
    """For a full sync (engine lock held): the current snapshot (None: the log starts at LSN
    1), a descriptor on each of its files (its own, then its parts: `SnapshotEntry.files`),
    and a cursor on every record after it, taken together under the manifest lock so that a
    compaction cannot switch between them."""
    fds: list[int] = []
    with journal.manifest_lock:  # type: ignore[attr-defined]
        written_end = journal.written_end
        snap = journal.manifest.snapshot
        try:
            for name in snap.files if snap is not None else ():
                fds.append(fs.open_read(os.path.join(directory, name)))
            opened = _open_segments(fs, directory, journal.manifest)
        except OSError:
            _close_all(fs, fds)
            raise
    position = _position(fs, directory, written_end, snap.lsn if snap is not None else 0,
                         opened)
    if position is None:  # cannot happen: a manifest's segments follow its snapshot
        _close_all(fs, fds)
        raise StorageError(f"{directory}: the segments do not follow the snapshot")
    return snap, fds, position


def _close_all(fs: FileSystem, fds: list[int]) -> None:
    for fd in fds:
        fs.close(fd)
