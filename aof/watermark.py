"""The synced watermark: how far the last segment is known to be on disk, kept beside it.

Owns the file `watermark` of a data directory and its format. Recovery reads it to tell a torn
tail (bytes written after the last fsync, which a power loss may leave incomplete: cut, saved)
from damage inside data that was already fsynced (bit rot, an overwrite: never cut, refused).
Without it the two look alike, and a flipped byte in the last acknowledged records would be
truncated away with everything after it.

    record (32 bytes, little-endian), appended after every fsync of the log
        magic     4 bytes  b"SKWM"
        segment   u64      the segment the fsync covered
        offset    u64      bytes of that segment the fsync covered (whole records)
        lsn       u64      the LSN of the last record in those bytes
        crc       u32      CRC-32C of the 28 bytes above

A record is written only once the fdatasync it describes has returned, so whatever the file
holds is never ahead of what the segment holds durably; the file is fdatasync'ed once a second,
at rotation-free moments of its own (the log's every-second thread) and at close, so after a
power loss it lags the log by about a second at most (damage in that last second of fsynced
records is taken for a torn tail: cut, saved, warned about). Each record is checked alone: a
torn or garbled record is skipped, and the valid record with the highest (segment, offset) is
the watermark. The file is replaced whole (temp file, fdatasync, rename, directory fsync) at
an open that finds it other than what the log says, and whenever it grows past
`REPLACE_BYTES`, so it stays small.

Must not touch: the segments, the manifest, engine state. Files only through aof.fs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
from dataclasses import dataclass

from streamkeep.aof.codec import HEADER_SIZE, crc32c
from streamkeep.aof.fs import FileSystem
from streamkeep.engine.wire.errors import StorageError

log = logging.getLogger("streamkeep.aof")

WATERMARK = "watermark"
WATERMARK_TMP = "watermark.tmp"
MAGIC = b"SKWM"
RECORD = struct.Struct("<4sQQQI")
RECORD_SIZE = RECORD.size  # 32
REPLACE_BYTES = 256 << 10  # 8,192 records between replacements


@dataclass(frozen=True, slots=True, order=True)
class Watermark:
    """Segment `segment` is durable up to byte `offset`, which ends the record of LSN `lsn`."""

    segment: int
    offset: int
    lsn: int


def encode(mark: Watermark) -> bytes:
    body = RECORD.pack(MAGIC, mark.segment, mark.offset, mark.lsn, 0)[:-4]
    return body + struct.pack("<I", crc32c(body))


def decode(data: bytes) -> Watermark | None:
    """The watermark a file's bytes hold: its highest valid record (None: no valid record).
    Recovery reads the file at every open and it holds up to REPLACE_BYTES of records: they are
    unpacked at once and checked from the highest down, so normally one CRC is computed."""
    whole = len(data) - len(data) % RECORD_SIZE
    candidates = sorted(((segment, offset, lsn, pos, crc) for pos, (magic, segment, offset, lsn,
                                                                   crc)
                         in zip(range(0, whole, RECORD_SIZE), RECORD.iter_unpack(data[:whole]),
                                strict=True)
                         if magic == MAGIC), reverse=True)
    for segment, offset, lsn, pos, crc in candidates:
        if crc == crc32c(data[pos:pos + RECORD_SIZE - 4]):
            return Watermark(segment, offset, lsn)
    return None


class WatermarkDamaged(StorageError):
    """The file exists but holds no valid record."""


def read(fs: FileSystem, directory: str) -> Watermark | None:
    """The directory's watermark; None if it has no watermark file (a directory written before
    the watermark existed, or one whose file was removed). WatermarkDamaged if the file is there
    but unreadable as one."""
    path = os.path.join(directory, WATERMARK)
    if not fs.exists(path):
        return None
    data = fs.read_file(path)
    mark = decode(data)
    if mark is None:
        raise WatermarkDamaged(f"{path}: {len(data)} bytes holding no valid watermark record")
    return mark


@dataclass(frozen=True, slots=True)
class Synced:
    """What the watermark says of the last segment: its first `offset` bytes (ending with the
    record of LSN `lsn`) were fsynced. offset None: unknown, `why` says why (`damaged`: the
    watermark file is there but unreadable)."""

    offset: int | None
    lsn: int = 0
    why: str = ""
    damaged: bool = False

    def describe(self) -> str:
        return self.why or f"fsynced up to byte {self.offset}, LSN {self.lsn}"


def durable_part(fs: FileSystem, directory: str, segment: int) -> Synced:
    """How much of segment number `segment` (the directory's last) is known to be durable: the
    watermark's offset if it names this segment; just the header if it names an earlier one
    (the rotation synced that one whole, and the new one holds only its synced header until a
    record of it is synced); unknown without a watermark, or with one from another history."""
    try:
        mark = read(fs, directory)
    except WatermarkDamaged as err:
        return Synced(None, why=f"the synced watermark is damaged ({err})", damaged=True)
    if mark is None:
        return Synced(None, why="no synced watermark (a directory written by an older "
                                "version, or its watermark file was removed)")
    if mark.segment > segment:
        return Synced(None, why=f"the synced watermark names segment {mark.segment}, after "
                                f"the last one ({segment})")
    if mark.segment < segment:
        return Synced(HEADER_SIZE, why=f"no record of segment {segment} fsynced yet")
    return Synced(mark.offset, mark.lsn)


def store(fs: FileSystem, directory: str, mark: Watermark) -> None:
    """Replace the directory's watermark file with one holding `mark`, durably (temp file,
    fdatasync, rename, directory fsync): at every open, and by tools that write segments."""
    tmp = os.path.join(directory, WATERMARK_TMP)
    fd = fs.open_write_new(tmp)
    try:
        fs.write(fd, encode(mark))
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, os.path.join(directory, WATERMARK))
    fs.fsync_dir(directory)


class WatermarkLog:
    """The open watermark file of a data directory (the journal owns it while the directory is
    open). `advance` after each fsync of the log, `sync` once a second, `close` at the end.
    An I/O error on it is logged once and stops its updates until the directory is reopened:
    the watermark then lags, which only makes recovery take more for a torn tail, never less."""

    def __init__(self, fs: FileSystem, directory: str, mark: Watermark) -> None:
        self.fs = fs
        self.directory = directory
        self.mark = mark
        self.fd = -1
        self.size = 0
        self.dirty = False
        self.failed = False
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        """Keep the file if it already holds exactly `self.mark` (a clean reopen changes
        nothing on disk), else write it anew."""
        path = os.path.join(self.directory, WATERMARK)
        if self.fs.exists(path):
            data = self.fs.read_file(path)
            if len(data) % RECORD_SIZE == 0 and len(data) < REPLACE_BYTES \
                    and decode(data) == self.mark:
                self.fd = self.fs.open_append(path, create=False)
                # What a killed process left may be in the page cache only: synced with the rest.
                self.size, self.dirty = len(data), True
                return
        self._replace()

    def _replace(self) -> None:
        """Write the file anew holding `self.mark` and keep it open for appending."""
        store(self.fs, self.directory, self.mark)
        path = os.path.join(self.directory, WATERMARK)
        old, self.fd = self.fd, self.fs.open_append(path, create=False)
        if old >= 0:
            with contextlib.suppress(OSError):
                self.fs.close(old)
        self.size, self.dirty = RECORD_SIZE, False

    def advance(self, mark: Watermark) -> None:
        """The log is durable up to `mark` (an fdatasync covering it has returned)."""
        with self._lock:
            if self.failed or self.fd < 0 or mark <= self.mark:
                return
            self.mark = mark
            try:
                if self.size >= REPLACE_BYTES:
                    self._replace()
                else:
                    self.fs.write(self.fd, encode(mark))
                    self.size += RECORD_SIZE
                    self.dirty = True
            except OSError as err:
                self._failed(err)

    def sync(self) -> None:
        """Make the appended records durable (the log's every-second thread, and close)."""
        with self._lock:
            if self.failed or self.fd < 0 or not self.dirty:
                return
            try:
                self.fs.fdatasync(self.fd)
                self.dirty = False
            except OSError as err:
                self._failed(err)

    def _failed(self, err: OSError) -> None:
        log.error("cannot update %s: %s; the synced watermark stays at segment %d byte %d "
                  "until the directory is reopened", os.path.join(self.directory, WATERMARK),
                  err, self.mark.segment, self.mark.offset)
        self.failed = True

    def close(self) -> None:
        self.sync()
        with self._lock:
            if self.fd >= 0:
                with contextlib.suppress(OSError):
                    self.fs.close(self.fd)
                self.fd = -1
