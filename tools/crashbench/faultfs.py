"""The crash bench's file layers: `TrackingFS` models power loss, `FaultyFS` injects I/O errors.
Both are `aof.fs.RealFS` underneath (real files) and plug into `Engine.open(path, fs=...)`.

Owns the power-loss model (what a data directory may hold after the power goes), the operation
triggers, the I/O-error injection and `stop_threads`. Must not touch: the engine's, the AOF's or
the snapshot's internals (it sees only `FileSystem` calls); top-level imports stay the stdlib
and aof.fs, so the bench's CLI loads it cheaply.

TrackingFS (after ALICE / LazyFS / SQLite's crash VFS):
  * the real file always holds the live contents; per inode the overlay remembers only the
    durable length (what the last fdatasync covered) and, copy-on-write, the durable bytes a
    later write overwrote or a truncate removed (the AOF only appends: in practice nothing is
    copied). fdatasync is O(1); a file that loses its name (rename over it, unlink) stays
    readable through a descriptor the overlay keeps open on it;
  * directory entries (creates, renames, unlinks) are durable only once the parent directory
    is fsynced: by default a file created since is dropped, a rename since is undone (the old
    target comes back with its durable contents), an unlink since is undone;
  * triggers: `cut_at=N, cut_kind=K` cuts the power at the N-th operation of kind K ("any"
    counts every mutating call; "write", "fsync" = fdatasync of a file, "rename", "dirfsync" =
    fsync_dir). That operation raises `PowerCut` (a BaseException, so nothing in the engine can
    swallow it) and so does every later one. A cut write reaches the page cache first (its
    bytes are volatile); any other cut operation does not happen. `stats` counts each kind, so
    a runner can run a workload once, read the counts, then enumerate every N;
  * `materialise(directory, dst, rng, model)` writes the post-power-loss disk into a fresh
    directory; MODELS / MODEL_DESCRIPTIONS list the models (deterministic given the rng).
  Models ("none" is the default; every model drops or undoes the directory entries whose
  directory was not fsynced since, as above):
    - the tails "none", "all", "partial", "zeros", "garbage": per file, its volatile bytes are
      lost, all kept, a prefix kept, or a random length of them reads as zeros or garbage;
    - "prefix-torn": the unsynced writes of the materialised files, in call order across
      files, are replayed up to a random one; that last one is torn (cut short, possibly to
      nothing or not at all, or its bytes all zeros, or all garbage);
    - "sector512" / "sector4096": per file, the volatile bytes are kept up to a random sector
      boundary (file offsets that are multiples of the sector size, or none kept), and the
      sector after it (up to the end of the written data) is torn: each eighth of it holds
      either the new bytes or zeros;
    - "nonatomic-rename": unsynced data is lost (as "none"); each rename since its
      destination directory's last fsync is, in order, independently: undone (the default
      model), done (the destination names the renamed file with its durable contents, the
      source name is gone), or, when the file had unsynced data at the rename, done with the
      destination naming an empty file, or a file holding a strict prefix of the renamed
      file's durable contents (what a file system that commits the rename before the file's
      data blocks leaves, as ext3/4 without auto_da_alloc). A file fdatasynced before its
      rename keeps its data. A replaced destination's old file is not kept under any other
      name;
    - "bitrot": not a power loss but a process crash (every written byte reached the disk),
      then one bit of data an fdatasync had covered flips in one file (its name and offset are
      reported; half the time in its last TAIL_BYTES fsynced bytes, where damage and a torn
      tail look alike): what recovery must detect, never apply or drop silently.
  Volatile bytes are those past a file's durable length, when its durable bytes are intact
  (nothing overwrote or truncated them since the fdatasync); a file rewritten since its last
  fdatasync comes back as its durable contents under every model.
  By default it issues no real fsyncs (durability is simulated, and this is faster).

FaultyFS: raises OSError(errno) from writes or fdatasyncs of files whose name contains `match`,
or from directory fsyncs, once armed (after N more successful calls; a failing write can write
half of its bytes first), until cleared; counts calls. `fill(free)` models a disk with `free`
bytes left for those files: space allocated ahead (`reserve`) and writes past what is allocated
take from it, a truncation gives back what lay past the new end; an allocation that does not
fit fails whole with ENOSPC, a write that does not fit writes what fits, then fails.
`FaultSpec` is the armed fault as a value (`FaultSpec.parse("ENOSPC:write:3")`,
`FaultSpec.parse("ENOSPC:space:4096")`: 4096 bytes left), what a CLI builds.

stop_threads(engine): what a crash does to an abandoned engine's threads (the journal's), without
close().
"""

from __future__ import annotations

import contextlib
import errno as errno_mod
import os
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamkeep.aof.fs import RealFS
from streamkeep.engine.wire.errors import StreamkeepError


class PowerCut(BaseException):
    """The simulated power failure (not an OSError, not a StreamkeepError: the engine must not
    handle it)."""


class FaultSpecError(StreamkeepError):
    """A fault or trigger description the file layer does not understand."""


TAILS = ("none", "all", "partial", "zeros", "garbage")
MODEL_DESCRIPTIONS: dict[str, str] = {
    "none": "every unsynced byte is lost",
    "all": "every unsynced byte reached the disk",
    "partial": "each file keeps a random prefix of its unsynced bytes (a torn append)",
    "zeros": "each file grew by a random part of its unsynced bytes, but they read as zeros",
    "garbage": "each file grew by a random part of its unsynced bytes, but they read as garbage",
    "prefix-torn": "a random prefix of the unsynced writes (in call order, across files) "
                   "landed, the last one torn: cut short, zeroed or garbage",
    "sector512": "each file keeps its unsynced bytes up to a random 512-byte sector boundary, "
                 "the next sector a mix of new bytes and zeros",
    "sector4096": "each file keeps its unsynced bytes up to a random 4096-byte sector "
                  "boundary, the next sector a mix of new bytes and zeros",
    "nonatomic-rename": "unsynced data lost; each rename not followed by a directory fsync is "
                        "undone or done, and, for a file renamed before its data was synced, "
                        "done with the target empty or truncated",
    "bitrot": "a process crash (every written byte kept), then one bit of fsynced data "
              "flipped in one file",
}
BITROT = "bitrot"  # the model whose report names the flipped file: `report[BITROT]`
NOT_DATA = ("LOCK",)  # never read back as data: bit rot there changes nothing
TAIL_BYTES = 512  # bitrot: half the flips land in a file's last TAIL_BYTES fsynced bytes
MODELS = tuple(MODEL_DESCRIPTIONS)
KINDS = ("any", "write", "fsync", "rename", "dirfsync")


@dataclass(eq=False)
class Inode:
    path: str | None = None  # its live name, None once unlinked or replaced
    durable_len: int = 0  # the length the last fdatasync covered
    # Copy-on-write: the durable bytes [cow_from, durable_len) as they were before a write or
    # truncate changed them; durable contents = live[:cow_from] + cow.
    cow_from: int = 0
    cow: bytes = b""
    keep_fd: int | None = None  # a descriptor on it once it lost its name (its live contents)
    writes: list[Write] = field(default_factory=list)  # unsynced writes, oldest first
    synced_once: bool = False

    @property
    def rewritten(self) -> bool:
        return self.cow_from < self.durable_len


@dataclass
class Write:
    seq: int  # the write call's number across the whole file system
    inode: Inode
    offset: int
    length: int


@dataclass
class PendingRename:
    """A rename whose directory has not been fsynced since (nonatomic-rename's material)."""
    src: str
    dst: str
    inode: Inode
    synced: bool  # the file's data was all fdatasynced when it was renamed


@dataclass
class Stats:
    ops: int = 0
    writes: int = 0
    fdatasyncs: int = 0
    fsync_dirs: int = 0
    renames: int = 0
    overlay_bytes_read: int = 0  # what the overlay itself read back (copy-on-write, materialise)
    history: list[str] = field(default_factory=list)

    def count(self, kind: str) -> int:
        """Operations of a trigger kind so far (see KINDS)."""
        return {"any": self.ops, "write": self.writes, "fsync": self.fdatasyncs,
                "rename": self.renames, "dirfsync": self.fsync_dirs}[kind]

    def counts(self) -> dict[str, int]:
        """kind -> operations so far, for every trigger kind: what a runner enumerates N over
        after a first run without a cut."""
        return {kind: self.count(kind) for kind in KINDS}


def _in_dir(path: str, directory: str) -> bool:
    return os.path.dirname(os.path.abspath(path)) == directory


class TrackingFS(RealFS):
    def __init__(self, cut_at: int | None = None, real_sync: bool = False,
                 log_ops: bool = False, cut_kind: str = "any") -> None:
        if cut_kind not in KINDS:
            raise FaultSpecError(f"unknown operation kind {cut_kind!r} (one of {KINDS})")
        self.cut_at = cut_at
        self.cut_kind = cut_kind
        self.real_sync = real_sync
        self.log_ops = log_ops
        self.live: dict[str, Inode] = {}  # the namespace as the running process sees it
        self.durable: dict[str, Inode] = {}  # the namespace as of each directory's last fsync
        self.fds: dict[int, Inode] = {}
        self.positions: dict[int, int] = {}  # offset of the non-append descriptors
        self.seen: set[str] = set()  # every path this file system created, adopted or touched
        self.lock_fds: set[int] = set()
        # Every inode that ever got a keeper descriptor: release() closes them all, including
        # those of inodes no name reaches any more (a manifest replaced many times over).
        self.kept: dict[int, Inode] = {}
        self.pending_renames: list[PendingRename] = []
        self.stats = Stats()
        self.dead = False
        self._seq = 0
        # The journal's and the compactor's threads both do I/O: the bookkeeping is one lock.
        self._mutex = threading.RLock()

    # --- the power switch --------------------------------------------------------------------

    def _tick(self, kind: str, what: str) -> None:
        if self.dead:
            raise PowerCut(f"power is off ({what})")
        self.stats.ops += 1
        if kind == "write":
            self.stats.writes += 1
        elif kind == "fsync":
            self.stats.fdatasyncs += 1
        elif kind == "rename":
            self.stats.renames += 1
        elif kind == "dirfsync":
            self.stats.fsync_dirs += 1
        if self.log_ops:
            self.stats.history.append(what)
        if self.cut_at is not None and kind_matches(self.cut_kind, kind) \
                and self.stats.count(self.cut_kind) >= self.cut_at:
            self.dead = True
            raise PowerCut(f"power cut at {self.cut_kind} operation {self.cut_at} ({what})")

    def abandon(self) -> None:
        """After the cut: close every descriptor (and drop the directory lock) without any
        further effect on the files, as a dead process would."""
        self.dead = True
        for fd in list(self.fds) + list(self.lock_fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()
        self.lock_fds.clear()

    def release(self) -> None:
        """Close the descriptors kept on nameless inodes (after the last materialise)."""
        for inode in self.kept.values():
            self._drop_keeper(inode)
        self.kept.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down os
            self.release()

    # --- contents ------------------------------------------------------------------------------

    def _read(self, inode: Inode, start: int, end: int) -> bytes:
        """Live bytes [start, end) of an inode, named or not."""
        if end <= start:
            return b""
        if inode.keep_fd is not None:
            data = os.pread(inode.keep_fd, end - start, start)
        elif inode.path is not None:
            fd = os.open(inode.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.pread(fd, end - start, start)
            finally:
                os.close(fd)
        else:
            data = b""
        self.stats.overlay_bytes_read += len(data)
        return data

    def _live_size(self, inode: Inode) -> int:
        if inode.keep_fd is not None:
            return os.fstat(inode.keep_fd).st_size
        if inode.path is not None and os.path.exists(inode.path):
            return os.stat(inode.path).st_size
        return 0

    def _preserve(self, inode: Inode, start: int) -> None:
        """Copy-on-write: durable bytes from `start` are about to change; save them."""
        if start < inode.cow_from:
            inode.cow = self._read(inode, start, inode.cow_from) + inode.cow
            inode.cow_from = start

    def durable_contents(self, inode: Inode) -> bytes:
        return self._read(inode, 0, inode.cow_from) + inode.cow

    def _volatile(self, inode: Inode) -> bytes:
        if inode.rewritten:
            return b""
        return self._read(inode, inode.durable_len, self._live_size(inode))

    # --- namespace bookkeeping ---------------------------------------------------------------

    def _adopt(self, path: str) -> Inode | None:
        """A file that existed before this TrackingFS: durable as it is."""
        self.seen.add(os.path.abspath(path))
        inode = self.live.get(path)
        if inode is None and os.path.exists(path):
            size = os.stat(path).st_size
            inode = Inode(path=path, durable_len=size, cow_from=size, synced_once=True)
            self.live[path] = inode
            self.durable[path] = inode
        return inode

    def _forget(self, path: str) -> None:
        """`path` loses its name: keep its inode readable through a descriptor, no copy."""
        inode = self.live.pop(path, None)
        if inode is not None:
            # Only an inode a durable name or an unsynced rename refers to can come back.
            wanted = any(i is inode for i in self.durable.values()) or any(
                r.inode is inode for r in self.pending_renames)
            if wanted and inode.keep_fd is None:
                inode.keep_fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                self.kept[id(inode)] = inode
            inode.path = None

    def _drop_keeper(self, inode: Inode) -> None:
        if inode.keep_fd is not None:
            with contextlib.suppress(OSError):
                os.close(inode.keep_fd)
            inode.keep_fd = None

    def _open(self, path: str, fd: int, inode: Inode | None) -> int:
        if inode is None:
            inode = self.live[path] = Inode(path=path)
        self.fds[fd] = inode
        return fd

    # --- FileSystem ------------------------------------------------------------------------

    def open_append(self, path: str, create: bool = True) -> int:
        with self._mutex:
            self._tick("open", f"open_append {os.path.basename(path)}")
            inode = self._adopt(path)
            return self._open(path, super().open_append(path, create), inode)

    def open_write_new(self, path: str) -> int:
        with self._mutex:
            self._tick("open", f"open_write_new {os.path.basename(path)}")
            inode = self._adopt(path)
            if inode is not None:  # O_TRUNC: the same inode, emptied (volatile)
                self._preserve(inode, 0)
            fd = self._open(path, super().open_write_new(path), inode)
            self.positions[fd] = 0
            return fd

    def write(self, fd: int, data: bytes) -> None:
        with self._mutex:
            inode = self.fds[fd]
            if self.dead:
                raise PowerCut("power is off (write)")
            try:
                self._tick("write", f"write {os.path.basename(inode.path or '?')} {len(data)}")
            except PowerCut:
                self._write(fd, inode, data)  # the cut write reached the page cache: volatile
                raise
            self._write(fd, inode, data)

    def _write(self, fd: int, inode: Inode, data: bytes) -> None:
        position = self.positions.get(fd)
        offset = os.fstat(fd).st_size if position is None else position
        self._preserve(inode, offset)
        super().write(fd, data)
        if position is not None:
            self.positions[fd] = position + len(data)
        self._seq += 1
        inode.writes.append(Write(self._seq, inode, offset, len(data)))

    def fdatasync(self, fd: int) -> None:
        with self._mutex:
            inode = self.fds[fd]
            self._tick("fsync", f"fdatasync {os.path.basename(inode.path or '?')}")
            if self.real_sync:
                super().fdatasync(fd)
            assert inode.path is not None, "fdatasync of a file that has no name"
            # O(1): the live file is now the durable one; nothing read, nothing copied.
            inode.durable_len = inode.cow_from = os.fstat(fd).st_size
            inode.cow = b""
            inode.writes = []
            inode.synced_once = True

    def close(self, fd: int) -> None:
        with self._mutex:
            self.fds.pop(fd, None)
            self.positions.pop(fd, None)
            super().close(fd)

    def truncate(self, path: str, size: int) -> None:
        with self._mutex:
            self._tick("truncate", f"truncate {os.path.basename(path)} {size}")
            inode = self._adopt(path)
            if inode is not None:
                self._preserve(inode, size)
            super().truncate(path, size)

    def ftruncate(self, fd: int, size: int) -> None:
        with self._mutex:
            self._tick("truncate", f"ftruncate {size}")
            inode = self.fds.get(fd)
            if inode is not None:
                self._preserve(inode, size)
            super().ftruncate(fd, size)

    def rename(self, src: str, dst: str) -> None:
        with self._mutex:
            self._tick("rename", f"rename {os.path.basename(src)} {os.path.basename(dst)}")
            inode = self._adopt(src)
            self._adopt(dst)
            self._forget(dst)
            super().rename(src, dst)
            self.live.pop(src, None)
            if inode is not None:
                inode.path = dst
                self.live[dst] = inode
                synced = inode.synced_once and not inode.writes and not inode.rewritten
                self.pending_renames.append(PendingRename(src, dst, inode, synced))

    def unlink(self, path: str) -> None:
        with self._mutex:
            self._tick("unlink", f"unlink {os.path.basename(path)}")
            self._adopt(path)
            self._forget(path)
            super().unlink(path)

    def fsync_dir(self, path: str) -> None:
        with self._mutex:
            self._tick("dirfsync", f"fsync_dir {os.path.basename(path)}")
            if self.real_sync:
                super().fsync_dir(path)
            path = os.path.abspath(path)
            dropped = [inode for name, inode in self.durable.items()
                       if _in_dir(name, path) and name not in self.live]
            for name in [n for n in self.durable if _in_dir(n, path) and n not in self.live]:
                del self.durable[name]
            for name, inode in self.live.items():
                if _in_dir(name, path):
                    self.durable[name] = inode
            self.pending_renames = [r for r in self.pending_renames if not _in_dir(r.dst, path)]
            # A nameless inode no durable entry names can never come back: free its descriptor.
            still = {id(i) for i in self.durable.values()} | {id(r.inode)
                                                               for r in self.pending_renames}
            for inode in dropped:
                if inode.path is None and id(inode) not in still:
                    self._drop_keeper(inode)

    def lock(self, path: str) -> int:
        with self._mutex:
            self._tick("lock", "lock")
            if path not in self.live and not os.path.exists(path):
                self.seen.add(os.path.abspath(path))
                self.live[path] = Inode(path=path)
            else:
                self._adopt(path)
            fd = super().lock(path)
            self.lock_fds.add(fd)
            return fd

    def unlock(self, fd: int) -> None:
        with self._mutex:
            self.lock_fds.discard(fd)
            super().unlock(fd)

    def read_file(self, path: str) -> bytes:
        if self.dead:
            raise PowerCut("power is off (read)")
        return super().read_file(path)

    # --- after the power cut -----------------------------------------------------------------

    def volatile_files(self, directory: str) -> dict[str, int]:
        """name -> volatile bytes (written after the last fdatasync) of durable entries."""
        directory = os.path.abspath(directory)
        out = {}
        for path, inode in self.durable.items():
            if _in_dir(path, directory) and not inode.rewritten:
                extra = self._live_size(inode) - inode.durable_len
                if extra > 0:
                    out[os.path.basename(path)] = extra
        return out

    def materialise(self, directory: str, dst: str, rng: random.Random,
                    tail: str = "none") -> dict[str, str]:
        """Write what `directory` holds after the power loss under model `tail` (see MODELS)
        into `dst` (a new directory). Returns name -> what happened to its volatile bytes."""
        if tail not in MODEL_DESCRIPTIONS:
            raise FaultSpecError(f"unknown power-loss model {tail!r} (one of {MODELS})")
        os.makedirs(dst)
        src_dir = os.path.abspath(directory)
        self._copy_untouched(directory, dst)
        names = {os.path.basename(p): i for p, i in sorted(self.durable.items())
                 if _in_dir(p, src_dir)}
        report: dict[str, str] = {}
        if tail == "nonatomic-rename":
            files = self._renamed(names, src_dir, rng, report)
        elif tail == "prefix-torn":
            files = self._prefix_torn(names, rng, report)
        elif tail == BITROT:
            files = self._bitrot(names, rng, report)
        else:
            files = {}
            for name, inode in names.items():
                files[name] = self._tail(name, inode, tail, rng, report)
        for name, data in sorted(files.items()):
            with open(os.path.join(dst, name), "wb") as f:
                f.write(data)
        return report

    def _copy_untouched(self, directory: str, dst: str) -> None:
        """Files that were there before and never touched are copied as they are."""
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if os.path.abspath(path) not in self.seen and os.path.isfile(path):
                with open(path, "rb") as src, open(os.path.join(dst, name), "wb") as out:
                    out.write(src.read())

    def _tail(self, name: str, inode: Inode, tail: str, rng: random.Random,
              report: dict[str, str]) -> bytes:
        """One file under a per-file model (TAILS, sector512, sector4096)."""
        data = self.durable_contents(inode)
        volatile = self._volatile(inode)
        if not volatile or tail == "none":
            return data
        if tail.startswith("sector"):
            kept = torn_sector(inode.durable_len, volatile, int(tail[len("sector"):]), rng)
            report[name] = f"{tail} ({len(kept)} of {len(volatile)})"
            return data + kept
        n = rng.randint(1, len(volatile))
        if tail == "all":
            data += volatile
        elif tail == "partial":
            data += volatile[: rng.randint(1, len(volatile))]
        elif tail == "zeros":
            data += bytes(n)
        elif tail == "garbage":
            data += rng.randbytes(n)
        report[name] = f"{tail} ({len(data) - inode.durable_len} of {len(volatile)})"
        return data

    def _bitrot(self, names: dict[str, Inode], rng: random.Random,
                report: dict[str, str]) -> dict[str, bytes]:
        """Every file as the process left it, then one bit of one file's fsynced bytes flipped
        (report[BITROT] = "<name>:<offset>")."""
        files = {name: self._tail(name, inode, "all", rng, {}) for name, inode in names.items()}
        durable = {name: min(inode.durable_len, len(files[name]))
                   for name, inode in names.items() if name not in NOT_DATA}
        candidates = sorted(name for name, size in durable.items() if size > 0)
        if candidates:
            name = rng.choice(candidates)
            # Half the flips land in the last fsynced bytes, where damage looks like a torn tail.
            size = durable[name]
            offset = rng.randrange(max(0, size - TAIL_BYTES) if rng.random() < 0.5 else 0,
                                   size)
            data = bytearray(files[name])
            data[offset] ^= 1 << rng.randrange(8)
            files[name] = bytes(data)
            report[BITROT] = f"{name}:{offset}"
        return files

    def _prefix_torn(self, names: dict[str, Inode], rng: random.Random,
                     report: dict[str, str]) -> dict[str, bytes]:
        """A prefix of the unsynced writes (in call order, across the directory's files) lands,
        the last one torn. Writes to files rewritten since their fdatasync are not replayed."""
        contents = {id(i): bytearray(self.durable_contents(i)) for i in names.values()}
        writes = sorted((w for i in {id(i): i for i in names.values()}.values()
                         if not i.rewritten for w in i.writes), key=lambda w: w.seq)
        kept = rng.randint(0, len(writes))
        live = self._live_bytes(writes[:kept])
        for k, w in enumerate(writes[:kept]):
            data = live(w)
            how = "whole"
            if k == kept - 1:
                data, how = tear(data, rng)
            buf = contents[id(w.inode)]
            if len(buf) < w.offset:
                buf.extend(bytes(w.offset - len(buf)))
            buf[w.offset:w.offset + len(data)] = data
            if k == kept - 1:
                report["last write"] = f"#{k + 1} of {len(writes)}: {how}"
        report.setdefault("writes", f"{kept} of {len(writes)} kept")
        return {name: bytes(contents[id(i)]) for name, i in names.items()}

    def _live_bytes(self, writes: list[Write]) -> Callable[[Write], bytes]:
        """A write's bytes as its file holds them now: each file's span under the writes read
        once (a log's unsynced tail is many small writes; a read each would cost more than the
        recovery it feeds)."""
        spans: dict[int, tuple[Inode, int, int]] = {}
        for w in writes:
            _inode, low, high = spans.get(id(w.inode), (w.inode, w.offset, w.offset))
            spans[id(w.inode)] = (w.inode, min(low, w.offset), max(high, w.offset + w.length))
        held = {key: (low, self._read(inode, low, high))
                for key, (inode, low, high) in spans.items()}

        def of(w: Write) -> bytes:
            low, data = held[id(w.inode)]
            return data[w.offset - low:w.offset - low + w.length]

        return of

    def _renamed(self, names: dict[str, Inode], src_dir: str, rng: random.Random,
                 report: dict[str, str]) -> dict[str, bytes]:
        """Each pending rename in this directory, in order: undone (the default model), done,
        or done with the target's data not there: empty, or cut to a prefix of the durable
        contents. Done renames remove the source name. Unsynced data is lost."""
        files: dict[str, bytes | Inode] = dict(names)
        for r in self.pending_renames:
            if not _in_dir(r.dst, src_dir):
                continue
            src, dst = os.path.basename(r.src), os.path.basename(r.dst)
            # A file fdatasynced before its rename keeps its data whatever the rename's fate
            # (the blocks were on disk before the directory entry changed); only a file
            # renamed with unsynced data can come back empty or cut.
            outcome = rng.choice(("undone", "done") if r.synced else
                                 ("undone", "done", "empty", "truncated"))
            report[f"rename {src} -> {dst}"] = outcome
            if outcome == "undone":
                continue
            if files.get(src) is r.inode:
                del files[src]
            if outcome == "done":
                files[dst] = r.inode
            elif outcome == "empty":
                files[dst] = b""
            else:
                durable = self.durable_contents(r.inode)
                files[dst] = durable[: rng.randint(0, max(0, len(durable) - 1))]
        return {name: value if isinstance(value, bytes) else self.durable_contents(value)
                for name, value in files.items()}


def kind_matches(wanted: str, kind: str) -> bool:
    return wanted == "any" or wanted == kind


def tear(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A torn write: cut short (possibly to nothing or to all of it), or its bytes zeroed, or
    garbage of the same length."""
    how = rng.choice(("short", "zeros", "garbage"))
    if how == "short":
        n = rng.randint(0, len(data))
        return data[:n], f"short ({n} of {len(data)})"
    if how == "zeros":
        return bytes(len(data)), how
    return rng.randbytes(len(data)), how


def torn_sector(start: int, volatile: bytes, sector: int, rng: random.Random) -> bytes:
    """The unsynced bytes (at file offset `start`) kept up to a random sector boundary (or none
    of them), then the next sector (up to the end of the data) torn: each of its eighths holds
    either the new bytes or zeros."""
    end = start + len(volatile)
    first = (start // sector + 1) * sector
    boundaries = [start, *range(first, end + 1, sector)]
    cut = rng.choice(boundaries)
    torn_end = min((cut // sector + 1) * sector, end)
    kept = bytearray(volatile[: cut - start])
    piece = max(1, sector // 8)
    for at in range(cut, torn_end, piece):
        chunk = volatile[at - start: min(at + piece, torn_end) - start]
        kept += chunk if rng.random() < 0.5 else bytes(len(chunk))
    return bytes(kept)


# --- I/O errors ------------------------------------------------------------------------------

FAULT_OPS = ("write", "fsync", "dirfsync", "space")


@dataclass(frozen=True)
class FaultSpec:
    """One injected I/O error: `errno` from the operation `op` ("write", "fsync" = fdatasync
    of a file whose name contains `match`, "dirfsync"), after `after` more successful calls;
    `partial`: a failing write writes half of its bytes first. "space": a full disk, `after`
    bytes left for the matching files (`FaultyFS.fill`; the errno is ENOSPC)."""
    errno: int = errno_mod.EIO
    op: str = "write"
    after: int = 0
    match: str = "segment-"
    partial: bool = False

    def __post_init__(self) -> None:
        if self.op not in FAULT_OPS:
            raise FaultSpecError(f"unknown fault operation {self.op!r} (one of {FAULT_OPS})")

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """"ERRNO:OP[:AFTER[:MATCH]]", e.g. "ENOSPC:write:3", "EIO:fsync", "EIO:dirfsync:1";
        "+partial" after OP makes a failing write half-write."""
        parts = text.split(":")
        if len(parts) < 2:
            raise FaultSpecError(f"fault {text!r}: expected ERRNO:OP[:AFTER[:MATCH]]")
        code = getattr(errno_mod, parts[0].upper(), None)
        if not isinstance(code, int):
            raise FaultSpecError(f"fault {text!r}: unknown errno {parts[0]!r}")
        op, _, flag = parts[1].partition("+")
        if flag not in ("", "partial"):
            raise FaultSpecError(f"fault {text!r}: unknown flag {flag!r}")
        try:
            after = int(parts[2]) if len(parts) > 2 and parts[2] else 0
        except ValueError:
            raise FaultSpecError(f"fault {text!r}: AFTER must be a number") from None
        extra: dict[str, Any] = {"match": parts[3]} if len(parts) > 3 else {}
        return cls(errno=code, op=op, after=after, partial=flag == "partial", **extra)

    def describe(self) -> str:
        if self.op == "space":
            return f"a full disk: {self.after} bytes left for *{self.match}*"
        name = errno_mod.errorcode.get(self.errno, str(self.errno))
        where = "directory fsync" if self.op == "dirfsync" else f"{self.op} of *{self.match}*"
        return f"{name} on {where} after {self.after} more successful calls" + \
            (" (half written)" if self.partial else "")


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
        # The full-disk model (`fill`): bytes left (None: no limit), and per descriptor how far
        # its file's blocks reach (its size, or further where space was allocated ahead).
        self.space: int | None = None
        self.allocated: dict[int, int] = {}
        self.failed_reserves = 0

    @classmethod
    def from_spec(cls, spec: FaultSpec) -> FaultyFS:
        fs = cls(match=spec.match)
        fs.arm(spec)
        return fs

    def arm(self, spec: FaultSpec) -> None:
        """Arm the fault `spec` describes (its `match` becomes this layer's)."""
        self.match = spec.match
        if spec.op == "write":
            self.fail_writes(spec.errno, spec.after, spec.partial)
        elif spec.op == "space":
            self.fill(spec.after)
        elif spec.op == "fsync":
            self.fail_fsyncs(spec.errno, spec.after)
        else:
            self.fail_fsync_dirs(spec.errno, spec.after)

    def fail_writes(self, err: int = errno_mod.ENOSPC, after: int = 0,
                    partial: bool = False) -> None:
        self.write_errno, self.write_after, self.partial = err, after, partial

    def fail_fsyncs(self, err: int = errno_mod.EIO, after: int = 0) -> None:
        self.fsync_errno, self.fsync_after = err, after

    def fail_fsync_dirs(self, err: int = errno_mod.EIO, after: int = 0) -> None:
        self.fsync_dir_errno, self.fsync_dir_after = err, after

    def fill(self, free: int = 0) -> None:
        """The disk is full but for `free` bytes (for the matching files), until cleared."""
        self.space = free

    def clear(self) -> None:
        self.write_errno = self.fsync_errno = self.fsync_dir_errno = None
        self.space = None

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
        self.allocated.pop(fd, None)
        super().close(fd)

    def _blocks(self, fd: int) -> int:
        return max(self.allocated.get(fd, 0), self.fsize(fd))

    def reserve(self, fd: int, offset: int, length: int) -> None:
        if self._matches(fd):
            more = max(offset + length - self._blocks(fd), 0)
            if self.space is not None:
                if more > self.space:
                    self.failed_reserves += 1
                    raise OSError(errno_mod.ENOSPC, os.strerror(errno_mod.ENOSPC))
                self.space -= more
            self.allocated[fd] = max(self._blocks(fd), offset + length)
        super().reserve(fd, offset, length)

    def ftruncate(self, fd: int, size: int) -> None:
        if self._matches(fd) and self.space is not None:
            self.space += max(self._blocks(fd) - size, 0)  # what lay past the end is freed
        self.allocated[fd] = size
        super().ftruncate(fd, size)

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
            if self.space is not None:
                blocks = self._blocks(fd)
                more = max(self.fsize(fd) + len(data) - blocks, 0)
                if more > self.space:  # a short write up to the last free byte, then ENOSPC
                    fits = len(data) - more + self.space
                    self.failed_writes += 1
                    if fits > 0:
                        super().write(fd, data[:fits])
                    self.space = 0
                    self.allocated[fd] = self.fsize(fd)
                    raise OSError(errno_mod.ENOSPC, os.strerror(errno_mod.ENOSPC))
                self.space -= more
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


def stop_threads(engine: object | None) -> None:
    """A dead process's threads and children die with it: stop the journal's threads, the
    expiry timer and the compactor's build child of an abandoned engine (without close(),
    which would fsync), or every crash leaks them (a build child serves its parent process,
    which lives on here; a run of many crash points left hundreds of expiry threads)."""
    timer = getattr(engine, "expiry_timer", None)
    if timer is not None:
        timer.stopped.set()  # (its thread ends at its next tick; not joined: it may be mid-cycle)
    journal = getattr(engine, "journal", None)
    if journal is not None:
        journal.stop_threads()
    compactor = getattr(getattr(engine, "datadir", None), "compactor", None)
    if compactor is not None:
        compactor.stop()
