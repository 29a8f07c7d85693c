"""A replica's full sync arriving: the snapshot's bytes written to temp files as they come.

Owns splitting the bulk a full sync sends (replication.bundle: one self-contained file, or a
segmented snapshot's own file and its parts) into `<name>.tmp` files in the data directory,
each one's size and CRC-32 (the manifest's checksum of the file) as written, and making them
durable or removing them. The temp names are never a live file's, and the next open removes
any left by a crash (aof.recovery: snapshot and part files ending in .tmp). Must not touch: the
manifest and the installed files (engine.runtime.datadir installs them), the link's framing.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from dataclasses import dataclass

from streamkeep.aof.fs import FileSystem
from streamkeep.aof.manifest import snapshot_file
from streamkeep.engine.wire.errors import StorageError
from streamkeep.replication.bundle import Splitter

TMP = ".tmp"


@dataclass(slots=True)
class Received:
    """One file of the snapshot, complete: its temp path, its name once installed, its size
    and CRC-32."""

    tmp: str
    name: str
    size: int
    crc32: int


class IncomingSnapshot:
    def __init__(self, fs: FileSystem, directory: str, lsn: int, total: int) -> None:
        self.fs = fs
        self.directory = directory
        self.lsn = lsn
        self.splitter = Splitter(total)
        self.files: list[Received] = []
        self.fds: list[int] = []

    def feed(self, data: bytes) -> None:
        for index, piece in self.splitter.feed(data):
            while index >= len(self.files):
                self._open(len(self.files))
            received = self.files[index]
            self.fs.write(self.fds[index], piece)
            received.size += len(piece)
            received.crc32 = zlib.crc32(piece, received.crc32)

    def _open(self, index: int) -> None:
        assert self.splitter.files is not None  # (pieces come once the files are known)
        name = self.splitter.files[index][0] or snapshot_file(self.lsn)
        tmp = os.path.join(self.directory, name + TMP)
        if self.fs.exists(tmp):
            self.fs.unlink(tmp)
        self.fds.append(self.fs.open_write_new(tmp))
        self.files.append(Received(tmp, name, 0, 0))

    def finish(self) -> list[Received]:
        """Every file fdatasync'ed and closed, the snapshot's own first; StorageError if one
        is short of what the bulk announced."""
        expected = self.splitter.files or []
        while len(self.files) < len(expected):  # (an empty file sends no piece)
            self._open(len(self.files))
        fds, self.fds = self.fds, []
        try:
            for fd in fds:
                self.fs.fdatasync(fd)
        finally:
            for fd in fds:
                self.fs.close(fd)
        for received, (_name, size) in zip(self.files, expected, strict=True):
            if received.size != size:
                raise StorageError(f"{received.tmp}: {received.size} bytes arrived of {size}")
        return self.files

    def abandon(self) -> None:
        """A full sync cut short: close and remove what was written."""
        fds, self.fds = self.fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                self.fs.close(fd)
        for received in self.files:
            with contextlib.suppress(OSError):
                if self.fs.exists(received.tmp):
                    self.fs.unlink(received.tmp)


__all__ = ["IncomingSnapshot", "Received"]
