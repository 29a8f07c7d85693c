"""A replica's full sync arriving: the snapshot's bytes written to temp files as they come.

Owns splitting the bulk a full sync sends (replication.bundle: one self-contained file, or a
segmented snapshot's own file and its parts) into `<name>.tmp` files in the data directory,
each one's size and CRC-32 (the manifest's checksum of the file) as written, and making them
durable or removing them. A part file the bundle names as held (the replica announced it:
REPLCONF sk-have) is hard-linked from the replica's own copy instead. A sync cut short keeps
the part files that arrived whole, to announce at the next attempt (`abandon`), so that a
full sync resumes rather than starting over. The temp names are never a live file's, and the
next open removes any left by a crash (aof.recovery: snapshot and part files ending in .tmp). Must not touch: the
manifest and the installed files (engine.services.datadir installs them), the link's framing.
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
    """`holdings`: the part files the replica announced, name -> (its path, size, CRC-32)."""

    def __init__(self, fs: FileSystem, directory: str, lsn: int, total: int,
                 holdings: dict[str, tuple[str, int, int]] | None = None) -> None:
        self.fs = fs
        self.directory = directory
        self.lsn = lsn
        self.splitter = Splitter(total)
        self.holdings = holdings or {}
        self.files: list[Received] = []
        self.fds: list[int] = []  # -1: a held file (linked, not written)

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
        if name in self.splitter.held:
            self.files.append(self._held(name, tmp))
            self.fds.append(-1)
            return
        if self.fs.exists(tmp):
            self.fs.unlink(tmp)
        self.fds.append(self.fs.open_write_new(tmp))
        self.files.append(Received(tmp, name, 0, 0))

    def _held(self, name: str, tmp: str) -> Received:
        """A file the primary did not send because this replica has it: linked to `tmp`."""
        found = self.holdings.get(name)
        if found is None:
            raise StorageError(f"the primary did not send {name}, which this replica does not "
                               f"hold")
        path, size, crc32 = found
        if path != tmp:
            if self.fs.exists(tmp):
                self.fs.unlink(tmp)
            os.link(path, tmp)  # (part files are never changed: a link is a copy)
        return Received(tmp, name, size, crc32)

    def finish(self) -> list[Received]:
        """Every file fdatasync'ed and closed, the snapshot's own first; StorageError if one
        is short of what the bulk announced."""
        expected = self.splitter.files or []
        while len(self.files) < len(expected):  # (an empty file sends no piece)
            self._open(len(self.files))
        fds, self.fds = [fd for fd in self.fds if fd >= 0], []
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

    def abandon(self) -> list[Received]:
        """A full sync cut short: close what was written, keep the part files that arrived
        whole (returned: the next attempt announces them), remove the rest."""
        expected = dict(self.splitter.files or [])
        fds, self.fds = self.fds, []
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    self.fs.close(fd)
        kept = []
        for received in self.files:
            if received.name.startswith("part-") and received.size == expected.get(
                    received.name):
                kept.append(received)
                continue
            with contextlib.suppress(OSError):
                if self.fs.exists(received.tmp):
                    self.fs.unlink(received.tmp)
        return kept


__all__ = ["IncomingSnapshot", "Received"]
