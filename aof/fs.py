"""The file-layer seam: every byte aof/ and snapshot/ read or write goes through a `FileSystem`.

Owns the small set of operations durability depends on (open for append, write all, fdatasync,
read, size, truncate, rename, fsync of a directory, list, unlink, exclusive lock, space
allocated ahead of a file's end) and `RealFS`,
their implementation on the operating system, which can also write a file's next bytes through
a shared mapping (`MappedTail`: no system call a record). The crash-recovery bench swaps in a file system
that models power loss (unsynced data dropped, torn appends) and I/O errors (EIO, ENOSPC), so
nothing in aof/ or snapshot/ may call `open`, `os.write`, `os.rename` & co. directly (a test
enforces it). The crash bench's planted bugs (tools/crashbench/planted) come in through it
too: its storage bugs are a wrapper of this layer, not switches in the code that calls it.
Must not touch: record formats, the manifest, engine state.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
from collections.abc import Iterable
from typing import Any, Protocol

from streamkeep.engine.wire.errors import StorageError

FALLOC_FL_KEEP_SIZE = 1  # linux/falloc.h: allocate blocks past the end, the size unchanged
# reserve() on a file system that cannot allocate ahead (or a platform without fallocate).
UNSUPPORTED_ERRNOS = frozenset({errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})
_fallocate: Any = None  # libc's fallocate(2), looked up by the first reserve()


def _libc_fallocate() -> Any:
    """libc's fallocate (ctypes, loaded once, by the first writer: readers never pay for it);
    None where there is none."""
    global _fallocate
    if _fallocate is None:
        import ctypes

        fn: Any = False
        with contextlib.suppress(AttributeError, OSError):
            fn = ctypes.CDLL(None, use_errno=True).fallocate
            fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
            fn.restype = ctypes.c_int
        _fallocate = fn
    return _fallocate or None


# File systems whose mapped writes into blocks fallocate allocated cannot fail for want of space
# (a copy-on-write one, btrfs or zfs, allocates again when a page is written back: a full disk
# would be a SIGBUS in the writer, not an error), or that keep the pages in memory (tmpfs).
MAPPABLE_FILE_SYSTEMS = frozenset({"ext4", "xfs", "tmpfs"})
MAP_WINDOW = 256 << 10  # bytes of a file's tail mapped at once (its touched pages count in RSS)


def file_system_type(path: str) -> str | None:
    """The type of the file system holding `path` (Linux /proc/self/mountinfo: the mount
    with the longest mount point containing it); None if it cannot be told."""
    real = os.path.realpath(path)
    best, kind = -1, None
    try:
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                if " - " not in line or len(fields) < 7:
                    continue
                point = fields[4].replace("\\040", " ")
                fstype = line.split(" - ", 1)[1].split()[0]
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) > best:
                    best, kind = len(point), fstype
    except OSError:
        return None
    return kind


class MappedTail:
    """A file's next bytes written through a shared mapping of it (no system call a record).

    The file is grown past its written end by fallocate (`extend`: blocks allocated, zeros
    read back) and a window of MAP_WINDOW bytes of it is mapped; `write` copies a record into
    the window, which slides forward as the end moves. The bytes are in the page cache once
    copied, as a write(2)'s are: a killed process loses none of them, and an fdatasync of any
    descriptor of the file makes them durable. Until `close` cuts the file back to its written
    end, it ends in zeros (readers stop at a zero-filled tail: aof.segment_reader). Owns its
    own read-write descriptor (a mapping needs one; the journal's is write-only, appending).
    Must not touch: what the bytes are, when they are synced."""

    def __init__(self, path: str, written: int) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        self.end = written  # the file's size: allocated up to here
        self.base = 0  # file offset of the window's first byte
        self.stop = 0  # ... and of the byte after its last
        self.window: mmap.mmap | None = None

    def extend(self, offset: int, length: int) -> None:
        """Allocate [offset, offset + length), growing the file to its end: OSError(ENOSPC)
        when the space is not there, OSError(EOPNOTSUPP) where it cannot be allocated."""
        fallocate = _libc_fallocate()
        if fallocate is None:
            raise OSError(errno.EOPNOTSUPP, "fallocate is not available")
        if fallocate(self.fd, 0, offset, length) != 0:
            import ctypes

            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.end = max(self.end, offset + length)

    def write(self, offset: int, data: bytes) -> bool:
        """Copy `data` to `offset`; False (nothing written) if it would pass the allocated
        end. OSError if the window cannot be mapped."""
        stop = offset + len(data)
        if stop > self.stop:
            if stop > self.end:
                return False
            self._slide(offset, stop)
        window = self.window
        assert window is not None
        window[offset - self.base:stop - self.base] = data
        return True

    def _slide(self, offset: int, stop: int) -> None:
        """Map the window that holds [offset, stop) (and up to MAP_WINDOW bytes, within the
        allocated end)."""
        self.unmap()
        base = offset - offset % mmap.ALLOCATIONGRANULARITY
        length = min(max(MAP_WINDOW, stop - base), self.end - base)
        # The page holding `offset` may hold written bytes that are not in memory: read it
        # here, where an I/O error is an OSError, not a SIGBUS in the copy.
        os.pread(self.fd, 1, offset)
        self.window = mmap.mmap(self.fd, length, mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_READ,
                                offset=base)
        self.base, self.stop = base, base + length

    def unmap(self) -> None:
        if self.window is not None:
            self.window.close()
            self.window = None
            self.base = self.stop = 0

    def close(self, written: int) -> None:
        """Unmap, and cut the file back to `written` bytes (what was allocated past it goes
        back). OSError if the cut failed: the file still ends in zeros."""
        self.unmap()
        try:
            if self.end > written:
                os.ftruncate(self.fd, written)
                self.end = written
        finally:
            os.close(self.fd)
            self.fd = -1


class LockedError(StorageError):
    """The data directory is locked by another process."""


class NotADirectory(StorageError):
    """A data directory's path names something that is not a directory, or lies under one."""


def not_a_directory(path: str) -> tuple[str, str] | None:
    """Why `path` can be neither opened nor made as a directory, when what is there is not one:
    (what is in the way, absolute: `path` itself or the nearest of its parents that exists;
    what it is: "a file, not a directory", or "not a directory" for a pipe, a socket...).
    None otherwise (a directory, or nothing yet)."""
    import stat

    here = os.path.abspath(path)
    while True:
        try:
            mode = os.stat(here).st_mode
        except (FileNotFoundError, NotADirectoryError):  # (the latter: a parent is a file)
            parent = os.path.dirname(here)
            if parent == here:
                return None
            here = parent
            continue
        except OSError:
            return None  # (opening says why: permission, a loop of links)
        if stat.S_ISDIR(mode):
            return None
        return here, "a file, not a directory" if stat.S_ISREG(mode) else "not a directory"


def refuse_not_a_directory(path: str) -> None:
    """NotADirectory, in words naming it, when a file is in the way of the directory `path`
    (the operating system's "File exists" or "Not a directory" says neither which nor why);
    nothing otherwise."""
    found = not_a_directory(path)
    if found is None:
        return
    here, what = found
    if here == os.path.abspath(path):
        raise NotADirectory(f"{path} is {what}")
    raise NotADirectory(f"{path}: {here} is {what}")


class FileSystem(Protocol):
    def open_append(self, path: str, create: bool = True) -> int: ...
    def open_write_new(self, path: str) -> int: ...
    def write(self, fd: int, data: bytes) -> None: ...
    def fdatasync(self, fd: int) -> None: ...
    def close(self, fd: int) -> None: ...
    def read_file(self, path: str) -> bytes: ...
    def size(self, path: str) -> int: ...
    def truncate(self, path: str, size: int) -> None: ...
    def ftruncate(self, fd: int, size: int) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def listdir(self, path: str) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def unlink(self, path: str) -> None: ...
    def makedirs(self, path: str) -> None: ...
    def lock(self, path: str) -> int: ...
    def unlock(self, fd: int) -> None: ...
    def open_read(self, path: str) -> int: ...
    def pread(self, fd: int, size: int, offset: int) -> bytes: ...
    def fsize(self, fd: int) -> int: ...
    def reserve(self, fd: int, offset: int, length: int) -> None: ...


class RealFS:
    """The operating system's files."""

    # One write(2), which may write less than asked: os.write itself, for the journal's write
    # path (a record a command), which an interpreted `write` would cost ~1k instructions more.
    write_some = staticmethod(os.write)

    def open_append(self, path: str, create: bool = True) -> int:
        flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if create else 0)
        return os.open(path, flags | os.O_CLOEXEC, 0o644)

    def open_write_new(self, path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)

    def write(self, fd: int, data: bytes) -> None:
        """Write every byte (os.write may write less than asked)."""
        written = os.write(fd, data)
        if written == len(data):
            return
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def read_file(self, path: str) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            # One read of the file's size: one allocation, which goes back to the OS when it
            # is freed. Chunks joined left a replay's AOF segment's worth of freed heap behind
            # (the allocator keeps what it took in pieces): RSS 3x the data after a replay.
            size = os.fstat(fd).st_size
            parts = [os.read(fd, size + 1)]
            if len(parts[0]) != size:  # a short read, or the file grew: the rest as it comes
                while chunk := os.read(fd, 1 << 24):
                    parts.append(chunk)
            return parts[0] if len(parts) == 1 else b"".join(parts)
        except OSError as err:  # (a directory opens, then fails to read): name the file
            raise OSError(err.errno, err.strerror, path) from None
        finally:
            os.close(fd)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def makedirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            refuse_not_a_directory(path)
            raise

    def lock(self, path: str) -> int:
        """Take an exclusive lock held for the process's life; LockedError names the holder."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise LockedError(
                f"data directory is in use: {path} is locked by process {holder}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        return fd

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def open_read(self, path: str) -> int:
        """A read-only descriptor: it keeps the file readable after a compaction unlinks it
        (replication reads segments and snapshots through these)."""
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def reserve(self, fd: int, offset: int, length: int) -> None:
        """Allocate the blocks of [offset, offset + length) without changing the file's size
        (fallocate with FALLOC_FL_KEEP_SIZE): appends into them cannot fail for want of space.
        OSError(ENOSPC) when the space is not there; OSError(EOPNOTSUPP) where the file system
        or the platform cannot allocate ahead. Truncating the file to its size frees them."""
        fallocate = _libc_fallocate()
        if fallocate is None:
            raise OSError(errno.EOPNOTSUPP, "fallocate is not available")
        if fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) != 0:
            import ctypes

            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def lock_holder(path: str) -> int | None:
    """The pid of the process holding an exclusive lock (`RealFS.lock`) on the file at
    `path`, read from Linux's /proc/locks: the lock is never taken here, so a look cannot make
    an opener fail. None if no process holds it, or the file or /proc/locks cannot be read."""
    try:
        st = os.stat(path)
        with open("/proc/locks") as locks:
            lines = locks.read().splitlines()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        parts = line.split()
        if "->" in parts:
            continue  # a waiter, not a holder
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == inode:
            return int(parts[4])
    return None


def file_identity(path: str) -> tuple[int, int]:
    """(device, inode) of the file at `path`: what names its mappings even once it is unlinked."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def open_identified(path: str, identity: tuple[int, int]) -> int | None:
    """A read-only descriptor of the file at `path` if it is still the file `identity` names
    (file_identity), else None (gone, or replaced): for preads of a file another handle
    (an LMDB map) has open, which may be unlinked later."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != identity:
        os.close(fd)
        return None
    return fd


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_file_bytes() -> int:
    """This process's resident file-backed (and shared) bytes: /proc/self/statm's third
    field; 0 where there is none (not Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[2]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class _Buffer(ctypes.Structure):
    """CPython's Py_buffer, as far as `buffer_address` reads it."""

    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_GET_BUFFER = ctypes.pythonapi.PyObject_GetBuffer
_GET_BUFFER.argtypes = [ctypes.py_object, ctypes.POINTER(_Buffer), ctypes.c_int]
_GET_BUFFER.restype = ctypes.c_int
_RELEASE_BUFFER = ctypes.pythonapi.PyBuffer_Release
_RELEASE_BUFFER.argtypes = [ctypes.POINTER(_Buffer)]
_RELEASE_BUFFER.restype = None


def buffer_address(view: memoryview) -> int:
    """Where a buffer's bytes are in this process's memory (-1: it has none): with
    `map_start`, where a view into a file's map is in the file."""
    buf = _Buffer()
    if _GET_BUFFER(view, ctypes.byref(buf), 0) != 0:
        return -1
    try:
        return buf.buf or -1
    finally:
        _RELEASE_BUFFER(ctypes.byref(buf))


def map_start(identity: tuple[int, int]) -> int:
    """Where this process maps the file `identity` names (its offset 0), -1 where that
    cannot be told."""
    ranges = mapped_ranges_of([identity])
    return min(low for low, _high in ranges) if ranges else -1


def mapped_ranges(path: str, identity: tuple[int, int] | None = None) -> list[tuple[int, int]]:
    """The address ranges where this process maps the file at `path`, or the file
    `identity` (file_identity) names (Linux /proc/self/maps; empty elsewhere). Process
    introspection, not a data file: it lives here because this is the one module that opens
    files directly (snapshot.cold releases an LMDB map's pages)."""
    return mapped_ranges_of([identity or file_identity(path)])


def mapped_ranges_of(identities: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """mapped_ranges of several files at once, by their identities (one read of the map list:
    a snapshot and its part files)."""
    wanted = {(f"{os.major(dev):02x}:{os.minor(dev):02x}", str(ino)) for dev, ino in identities}
    ranges = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                if len(parts) >= 5 and (parts[3], parts[4]) in wanted:
                    low, high = (int(x, 16) for x in parts[0].split("-"))
                    ranges.append((low, high))
    except OSError:
        return []
    return ranges
