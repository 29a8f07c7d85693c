"""File layers for the AOF fault tests: `TrackingFS` models power loss, `FaultyFS` injects I/O
errors. Both are `aof.fs.RealFS` underneath (real files in a tmp dir) and plug into
`Engine.open(path, fs=...)`.

TrackingFS (the power-loss model, after ALICE / LazyFS / SQLite's crash VFS):
  * file data is durable only up to what the last fdatasync of that file covered; everything
    written after it is volatile (it may be lost, kept, or torn when the power goes);
  * directory entries (creates, renames, unlinks) are durable only once the parent directory
    is fsynced: a file created since is dropped, a rename since is undone (the old target comes
    back with its durable contents), an unlink since is undone;
  * `cut_at=N` cuts the power at the N-th mutating operation: that operation raises `PowerCut`
    (a BaseException, so nothing in the engine can swallow it) and so does every later one. A
    write that is cut reaches the page cache first (its bytes are volatile), so torn tails can
    be made of it.
  * `materialise(dst, rng, tail)` writes the post-power-loss disk into a fresh directory:
    durable entries only, each file cut back to its durable contents, then (for files with
    volatile bytes) a tail: "none" (all volatile bytes lost), "all" (all reached the disk),
    "partial" (a prefix of them: a torn append), "zeros" or "garbage" (the size grew but the
    data did not land, as ALICE models appends).
  By default it does not issue real fsyncs (durability is simulated, and this is faster).

FaultyFS: raises OSError(errno) from writes or fdatasyncs of files whose name contains `match`,
or from directory fsyncs, once armed (after N more successful calls; a failing write can write
half of its bytes first), until cleared; counts calls.

stop_threads(engine): what a crash does to an abandoned engine's threads (the journal's), without
close().
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamkeep.aof.fs import RealFS

if TYPE_CHECKING:
    from streamkeep import Engine


class PowerCut(BaseException):
    """The simulated power failure (not an OSError: the engine must not handle it)."""


@dataclass(eq=False)
class Inode:
    durable: bytes = b""  # contents as of the last fdatasync
    path: str | None = None  # its live name, None once unlinked or replaced
    last_seen: bytes | None = None  # contents when it lost its live name
    synced_once: bool = False


@dataclass
class Stats:
    ops: int = 0
    writes: int = 0
    fdatasyncs: int = 0
    fsync_dirs: int = 0
    renames: int = 0
    history: list[str] = field(default_factory=list)


TAILS = ("none", "all", "partial", "zeros", "garbage")


class TrackingFS(RealFS):
    def __init__(self, cut_at: int | None = None, real_sync: bool = False,
                 log_ops: bool = False) -> None:
        self.cut_at = cut_at
        self.real_sync = real_sync
        self.log_ops = log_ops
        self.live: dict[str, Inode] = {}  # the namespace as the running process sees it
        self.durable: dict[str, Inode] = {}  # the namespace as of each directory's last fsync
        self.fds: dict[int, Inode] = {}
        self.seen: set[str] = set()  # every path this file system created, adopted or touched
        self.lock_fds: set[int] = set()
        self.stats = Stats()
        self.dead = False

    # --- the power switch --------------------------------------------------------------------

    def _tick(self, what: str) -> None:
        if self.dead:
            raise PowerCut(f"power is off ({what})")
        self.stats.ops += 1
        if self.log_ops:
            self.stats.history.append(what)
        if self.cut_at is not None and self.stats.ops >= self.cut_at:
            self.dead = True
            raise PowerCut(f"power cut at operation {self.stats.ops} ({what})")

    def abandon(self) -> None:
        """After the cut: close every descriptor (and drop the directory lock) without any
        further effect on the files, as a dead process would."""
        self.dead = True
        for fd in list(self.fds) + list(self.lock_fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()
        self.lock_fds.clear()

    # --- namespace bookkeeping ---------------------------------------------------------------

    def _adopt(self, path: str) -> Inode | None:
        """A file that existed before this TrackingFS: durable as it is."""
        self.seen.add(os.path.abspath(path))
        inode = self.live.get(path)
        if inode is None and os.path.exists(path):
            inode = Inode(durable=super().read_file(path), path=path, synced_once=True)
            self.live[path] = inode
            self.durable[path] = inode
        return inode

    def _current(self, inode: Inode) -> bytes:
        if inode.path is not None:
            return super().read_file(inode.path)
        return inode.last_seen or b""

    def _forget(self, path: str) -> None:
        inode = self.live.pop(path, None)
        if inode is not None:
            inode.last_seen = super().read_file(path)
            inode.path = None

    # --- FileSystem ------------------------------------------------------------------------

    def open_append(self, path: str, create: bool = True) -> int:
        self._tick(f"open_append {os.path.basename(path)}")
        inode = self._adopt(path)
        fd = super().open_append(path, create)
        if inode is None:
            inode = self.live[path] = Inode(path=path)
        self.fds[fd] = inode
        return fd

    def open_write_new(self, path: str) -> int:
        self._tick(f"open_write_new {os.path.basename(path)}")
        inode = self._adopt(path)
        fd = super().open_write_new(path)  # O_TRUNC: the same inode, emptied (volatile)
        if inode is None:
            inode = self.live[path] = Inode(path=path)
        self.fds[fd] = inode
        return fd

    def write(self, fd: int, data: bytes) -> None:
        inode = self.fds[fd]
        if self.dead:
            raise PowerCut("power is off (write)")
        self.stats.writes += 1
        try:
            self._tick(f"write {os.path.basename(inode.path or '?')} {len(data)}")
        except PowerCut:
            super().write(fd, data)  # the cut write reached the page cache: volatile bytes
            raise
        super().write(fd, data)

    def fdatasync(self, fd: int) -> None:
        inode = self.fds[fd]
        self._tick(f"fdatasync {os.path.basename(inode.path or '?')}")
        self.stats.fdatasyncs += 1
        if self.real_sync:
            super().fdatasync(fd)
        assert inode.path is not None, "fdatasync of a file that has no name"
        inode.durable = super().read_file(inode.path)
        inode.synced_once = True

    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)
        super().close(fd)

    def truncate(self, path: str, size: int) -> None:
        self._tick(f"truncate {os.path.basename(path)} {size}")
        self._adopt(path)
        super().truncate(path, size)

    def ftruncate(self, fd: int, size: int) -> None:
        self._tick(f"ftruncate {size}")
        super().ftruncate(fd, size)

    def rename(self, src: str, dst: str) -> None:
        self._tick(f"rename {os.path.basename(src)} {os.path.basename(dst)}")
        self.stats.renames += 1
        inode = self._adopt(src)
        self._adopt(dst)
        self._forget(dst)
        super().rename(src, dst)
        self.live.pop(src, None)
        if inode is not None:
            inode.path = dst
            self.live[dst] = inode

    def unlink(self, path: str) -> None:
        self._tick(f"unlink {os.path.basename(path)}")
        self._adopt(path)
        self._forget(path)
        super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        self._tick(f"fsync_dir {os.path.basename(path)}")
        self.stats.fsync_dirs += 1
        if self.real_sync:
            super().fsync_dir(path)
        path = os.path.abspath(path)
        for name in list(self.durable):
            if os.path.dirname(os.path.abspath(name)) == path and name not in self.live:
                del self.durable[name]
        for name, inode in self.live.items():
            if os.path.dirname(os.path.abspath(name)) == path:
                self.durable[name] = inode

    def lock(self, path: str) -> int:
        self._tick("lock")
        if path not in self.live and not os.path.exists(path):
            self.seen.add(os.path.abspath(path))
            self.live[path] = Inode(path=path)
        else:
            self._adopt(path)
        fd = super().lock(path)
        self.lock_fds.add(fd)
        return fd

    def unlock(self, fd: int) -> None:
        self.lock_fds.discard(fd)
        super().unlock(fd)

    def read_file(self, path: str) -> bytes:
        if self.dead:
            raise PowerCut("power is off (read)")
        return super().read_file(path)

    # --- after the power cut -----------------------------------------------------------------

    def volatile_files(self, directory: str) -> dict[str, int]:
        """name -> volatile bytes (written after the last fdatasync) of durable entries."""
        out = {}
        for path, inode in self.durable.items():
            if os.path.dirname(os.path.abspath(path)) != os.path.abspath(directory):
                continue
            current = self._current(inode)
            if current.startswith(inode.durable) and len(current) > len(inode.durable):
                out[os.path.basename(path)] = len(current) - len(inode.durable)
        return out

    def materialise(self, directory: str, dst: str, rng: random.Random,
                    tail: str = "none") -> dict[str, str]:
        """Write what `directory` holds after the power loss into `dst` (a new directory).
        Returns name -> what happened to its volatile bytes."""
        assert tail in TAILS, tail
        os.makedirs(dst)
        report: dict[str, str] = {}
        src_dir = os.path.abspath(directory)
        for name in os.listdir(directory):  # files that were there before and never touched
            path = os.path.join(directory, name)
            if os.path.abspath(path) not in self.seen and os.path.isfile(path):
                with open(path, "rb") as src, open(os.path.join(dst, name), "wb") as out:
                    out.write(src.read())
        for path, inode in sorted(self.durable.items()):
            if os.path.dirname(os.path.abspath(path)) != src_dir:
                continue
            name = os.path.basename(path)
            data = inode.durable
            current = self._current(inode)
            volatile = b""
            if current.startswith(data):
                volatile = current[len(data):]
            if volatile and tail != "none":
                n = rng.randint(1, len(volatile))
                if tail == "all":
                    data += volatile
                elif tail == "partial":
                    data += volatile[: rng.randint(1, len(volatile))]
                elif tail == "zeros":
                    data += bytes(n)
                elif tail == "garbage":
                    data += rng.randbytes(n)
                report[name] = f"{tail} ({len(data) - len(inode.durable)} of {len(volatile)})"
            with open(os.path.join(dst, name), "wb") as f:
                f.write(data)
        return report


class FaultyFS(RealFS):
    """Injects OSError into writes or fdatasyncs of files whose name contains `match`."""

    def __init__(self, match: str = "segment-") -> None:
        self.match = match
        self.paths: dict[int, str] = {}
        self.write_errno: int | None = None
        self.write_after = 0  # successful matching writes still allowed before failing
        self.partial = False  # write half of the bytes before raising
        self.fsync_errno: int | None = None
        self.fsync_after = 0
        self.fsync_dir_errno: int | None = None
        self.fsync_dir_after = 0
        self.fsync_dirs = 0
        self.writes = 0
        self.failed_writes = 0
        self.fdatasyncs = 0
        self.failed_fdatasyncs = 0

    def fail_writes(self, err: int = errno_mod.ENOSPC, after: int = 0,
                    partial: bool = False) -> None:
        self.write_errno, self.write_after, self.partial = err, after, partial

    def fail_fsyncs(self, err: int = errno_mod.EIO, after: int = 0) -> None:
        self.fsync_errno, self.fsync_after = err, after

    def fail_fsync_dirs(self, err: int = errno_mod.EIO, after: int = 0) -> None:
        self.fsync_dir_errno, self.fsync_dir_after = err, after

    def clear(self) -> None:
        self.write_errno = self.fsync_errno = self.fsync_dir_errno = None

    def _matches(self, fd: int) -> bool:
        return self.match in os.path.basename(self.paths.get(fd, ""))

    def open_append(self, path: str, create: bool = True) -> int:
        fd = super().open_append(path, create)
        self.paths[fd] = path
        return fd

    def open_write_new(self, path: str) -> int:
        fd = super().open_write_new(path)
        self.paths[fd] = path
        return fd

    def close(self, fd: int) -> None:
        self.paths.pop(fd, None)
        super().close(fd)

    def write(self, fd: int, data: bytes) -> None:
        if self._matches(fd):
            self.writes += 1
            if self.write_errno is not None:
                if self.write_after > 0:
                    self.write_after -= 1
                else:
                    self.failed_writes += 1
                    if self.partial and len(data) > 1:
                        super().write(fd, data[: len(data) // 2])
                    raise OSError(self.write_errno, os.strerror(self.write_errno))
        super().write(fd, data)

    def fdatasync(self, fd: int) -> None:
        if self._matches(fd):
            self.fdatasyncs += 1
            if self.fsync_errno is not None:
                if self.fsync_after > 0:
                    self.fsync_after -= 1
                else:
                    self.failed_fdatasyncs += 1
                    raise OSError(self.fsync_errno, os.strerror(self.fsync_errno))
        super().fdatasync(fd)

    def fsync_dir(self, path: str) -> None:
        self.fsync_dirs += 1
        if self.fsync_dir_errno is not None:
            if self.fsync_dir_after > 0:
                self.fsync_dir_after -= 1
            else:
                raise OSError(self.fsync_dir_errno, os.strerror(self.fsync_dir_errno))
        super().fsync_dir(path)


def stop_threads(engine: Engine | None) -> None:
    """A dead process's threads die with it: stop the journal's threads of an abandoned engine
    (without close(), which would fsync), or every crash leaks them."""
    journal = getattr(engine, "journal", None)
    if journal is not None:
        journal.stop_threads()
