"""Which snapshot an export reads, and keeping that file for as long as the read needs it.

Owns resolving an export's PATH (a data directory: its manifest's current snapshot; or a snapshot
file) and pinning the snapshot: a directory `export-pin-<ms>-<token>` beside it holding hard
links to the snapshot's file and its part files (their names unchanged, so the pinned snapshot
finds its parts in the pin), so a compaction that replaces and deletes them meanwhile unlinks
only its own names and the inodes (the data) stay until the pin goes. Spark's tasks open the snapshot in other processes,
later than the planning that chose it: holding a descriptor in the planner would not keep it for
them, a name does. The data directory's cleanup at open ignores these names (they are neither
snapshots nor segments). The export command's pins are named after its process and locked
while it runs (`claim`): those a killed export left are swept by the next (`sweep_dead`); a
Spark application's go by age (`sweep`). Must not touch: the snapshot format (snapshot.reader owns it), the
manifest (read only, through snapshot.reader.current_snapshot), the engine. Never imports
pyspark: the CLI and tests use it without Spark.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass

from streamkeep.engine.wire.errors import StorageError

PIN_PREFIX = "export-pin-"
# a snapshot's pin (a directory; a file `.mdb` before part files), or (incremental reads) one of
# an AOF segment's: export-pin-<ms>-<token>...
_PIN_FILE = re.compile(r"export-pin-(\d+)-([0-9a-f]+)(?:-p(\d+))?(?:\.mdb|-segment-\d+\.aof)?")
# A process that `claim`ed its pins (the export command) names them after itself
# (export-pin-<ms>-<token>-p<pid>...) and holds a shared flock on each while it lives: the
# pins a killed export left are then provably its, and the next export sweeps them
# (`sweep_dead`). Other pins (a Spark application's reads) go by age (`sweep`).
_claimed: list[int] = []
_locks: dict[str, int] = {}  # a claimed pin -> the descriptor its shared lock is on
_ATTEMPTS = 5  # a compaction may delete the snapshot between resolving and linking it


class ExportError(StorageError):
    """An export's PATH is not a snapshot (or a data directory that has one), or the snapshot
    a read planned on is gone."""


def check_exists(path: str) -> None:
    """ExportError, in words naming it, when nothing is at PATH."""
    if not os.path.exists(path):
        raise ExportError(f"{path}: no such file or directory (expected a streamkeep data "
                          "directory or a snapshot file)")


def resolve(path: str) -> str:
    """The snapshot file PATH names: itself, or a data directory's current snapshot."""
    from streamkeep.aof.manifest import ManifestError
    from streamkeep.snapshot.reader import current_snapshot

    check_exists(path)
    if not os.path.isdir(path):
        return path
    try:
        found = current_snapshot(path)
    except ManifestError as err:
        raise ExportError(f"{path}: not a streamkeep data directory ({err})") from None
    if found is None:
        raise ExportError(f"{path}: the data directory has no snapshot yet (nothing compacted)")
    return found


@dataclass(frozen=True, slots=True)
class Pin:
    """A hard link keeping one snapshot file's data while a read uses it."""

    path: str  # the link: what the read opens

    def release(self) -> None:
        # released twice, or expired by another read's sweep: either way gone
        _remove(pin_of(self.path))

    def __enter__(self) -> Pin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def pin(path: str) -> Pin:
    """Pin the snapshot PATH names (see `resolve`) under a fresh name in the snapshot's own
    directory (a hard link must stay on its file system). A data directory's snapshot that a
    compaction deletes before the link is made is resolved again: the pin then holds the new
    one, still one whole snapshot."""
    for _ in range(_ATTEMPTS):
        snapshot = resolve(path)
        directory = os.path.dirname(os.path.abspath(snapshot))
        stamp = f"{PIN_PREFIX}{int(time.time() * 1000)}-{secrets.token_hex(6)}{_mark()}"
        made: list[str] = []
        try:
            target = _pin_snapshot(directory, os.path.basename(snapshot), stamp, made)
        except FileNotFoundError:
            _undo(made)
            if not os.path.isdir(path):
                raise ExportError(f"{snapshot}: removed before the read could pin it") from None
            continue
        _hold(pin_of(target))
        return Pin(target)
    raise ExportError(f"{path}: its snapshot kept being replaced while the read pinned it")


def _pin_snapshot(directory: str, name: str, stamp: str, made: list[str]) -> str:
    """Link snapshot `name` of `directory` and its part files into a new pin directory
    `stamp` (recorded in `made`); the pinned snapshot's path. FileNotFoundError: a compaction
    deleted one of them first."""
    from streamkeep.snapshot.reader import Snapshot, SnapshotError

    # A pinned snapshot pinned again: the new pin goes beside the first, which may go first.
    home = os.path.dirname(directory) if is_pin_file(os.path.basename(directory)) else directory
    pin_dir = os.path.join(home, stamp)
    try:
        os.mkdir(pin_dir)
    except OSError as err:
        raise ExportError(f"{directory}: cannot pin the snapshot for the read "
                          f"({err.strerror}); is the directory writable?") from None
    made.append(pin_dir)
    target = _link(os.path.join(directory, name), os.path.join(pin_dir, name), [])
    try:  # the parts as the linked file names them (the link keeps that file as it is)
        with Snapshot(target, parts=False) as snap:
            parts = [info.file for info in snap.part_infos]
    except SnapshotError:
        parts = []  # not a snapshot: the read says so when it opens the pin
    for part in parts:
        _link(os.path.join(directory, part), os.path.join(pin_dir, part), [])
    return target


def _remove(path: str) -> None:
    """A pin: a directory with its links, or a file."""
    fd = _locks.pop(path, None)
    if fd is not None:
        os.close(fd)
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _undo(made: list[str]) -> None:
    for path in made:
        _remove(path)


def pin_of(path: str) -> str:
    """The pin a pinned path is in: its directory for a snapshot's, else itself."""
    parent = os.path.dirname(os.path.abspath(path))
    return parent if is_pin_file(os.path.basename(parent)) else path


def is_pinned(path: str) -> bool:
    """Whether `path` is a pin's (a pinned snapshot or segment), which is never pinned again."""
    return pin_of(path) != path or is_pin_file(os.path.basename(path))


def sweep(directory: str, older_than_s: float) -> list[str]:
    """Remove pins older than `older_than_s` seconds (reads that ended without releasing,
    since Spark's batch reads have no end-of-read hook); returns the names removed."""
    removed = []
    now_ms = time.time() * 1000
    for name in os.listdir(directory):
        match = _PIN_FILE.fullmatch(name)
        if match is None or now_ms - int(match.group(1)) < older_than_s * 1000:
            continue
        if not os.path.lexists(os.path.join(directory, name)):
            continue  # another read's sweep got there first
        _remove(os.path.join(directory, name))
        removed.append(name)
    return removed


def claim() -> None:
    """From now on the pins this process makes are named after it and locked while it lives
    (the export command: its reads end with it)."""
    _claimed[:] = [os.getpid()]


def _mark() -> str:
    return f"-p{_claimed[0]}" if _claimed and _claimed[0] == os.getpid() else ""


def _hold(path: str) -> None:
    """A claimed pin's shared lock (several exports may pin the same segment's inode)."""
    if not _mark() or path in _locks:
        return
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    fd = os.open(path, flags)
    with contextlib.suppress(OSError):  # no flock here: never provably stale, never swept
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    _locks[path] = fd


def sweep_dead(directory: str) -> list[str]:
    """Remove the claimed pins in `directory` whose process is gone and that nobody holds a
    lock on (an export killed before it could release them); returns their names."""
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        match = _PIN_FILE.fullmatch(name)
        if match is None or match.group(3) is None or _alive(int(match.group(3))):
            continue
        path = os.path.join(directory, name)
        if os.path.islink(path):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held (or no flock here)
        else:
            _remove(path)
            removed.append(name)
        finally:
            os.close(fd)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_pin_file(name: str) -> bool:
    return _PIN_FILE.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class PinnedSegment:
    path: str  # the pin (a hard link to the segment)
    segment: int
    first_lsn: int


@dataclass(frozen=True, slots=True)
class LogPin:
    """A data directory's snapshot and AOF segments as one manifest named them, pinned: what
    an incremental read needs (the records after an LSN, and the snapshot under them)."""

    snapshot: str | None  # the snapshot's pin, None before the first compaction
    snapshot_lsn: int  # 0 without a snapshot
    segments: tuple[PinnedSegment, ...]

    def paths(self) -> list[str]:
        return [p for p in (self.snapshot, *(s.path for s in self.segments)) if p]

    def release(self) -> None:
        for path in self.paths():
            _remove(pin_of(path))

    def to_json(self) -> dict:
        return {"snapshot": self.snapshot, "snapshot_lsn": self.snapshot_lsn,
                "segments": [[s.path, s.segment, s.first_lsn] for s in self.segments]}

    @classmethod
    def from_json(cls, doc: dict) -> LogPin:
        """A LogPin a caller made (and releases): `.option("pinned", json.dumps(...))`."""
        try:
            return cls(doc["snapshot"], int(doc["snapshot_lsn"]),
                       tuple(PinnedSegment(str(p), int(n), int(f)) for p, n, f in
                             doc["segments"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ExportError(f"malformed pinned option ({err})") from None

    def __enter__(self) -> LogPin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def pin_log(directory: str, token: str | None = None) -> LogPin:
    """Pin a data directory's snapshot and segments, all named by one reading of its
    manifest (a compaction that removes one before it is linked: read the manifest again).
    `token` names the pins (pins_of finds them); default a fresh one."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import ManifestError, load

    if not os.path.isdir(directory):
        raise ExportError(f"{directory}: an incremental read needs a data directory (its AOF), "
                          "not a snapshot file")
    token = token or secrets.token_hex(6)
    # The pins are named absolutely: Spark's tasks open them from other processes.
    home = os.path.abspath(directory)
    gone = ""
    for _ in range(_ATTEMPTS):
        try:
            manifest = load(RealFS(), directory)
        except ManifestError as err:
            raise ExportError(f"{directory}: not a streamkeep data directory ({err})") from None
        stamp = f"{PIN_PREFIX}{int(time.time() * 1000)}-{token}{_mark()}"
        made: list[str] = []
        try:
            snap = None
            if manifest.snapshot is not None:
                snap = _pin_snapshot(home, manifest.snapshot.file, stamp, made)
            segments = tuple(
                PinnedSegment(_link(os.path.join(home, s.file),
                                    os.path.join(home, f"{stamp}-segment-{s.segment}.aof"),
                                    made), s.segment, s.first_lsn)
                for s in manifest.segments)
        except FileNotFoundError as err:  # compacted meanwhile: undo, read the new manifest
            _undo(made)
            gone = f" (last: {err.filename} was gone)"
            continue
        lsn = 0 if manifest.snapshot is None else manifest.snapshot.lsn
        log = LogPin(snap, lsn, segments)
        for path in log.paths():
            _hold(pin_of(path))
        return log
    raise ExportError(f"{directory}: its files kept being replaced while the read pinned "
                      f"them{gone}")


def _link(source: str, target: str, made: list[str]) -> str:
    """Hard-link `source` as `target` (recorded in `made`). FileNotFoundError: `source` is
    gone (a compaction deleted it)."""
    try:
        os.link(source, target)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise ExportError(f"{source}: cannot pin it for the read ({err.strerror}); is the "
                          f"directory writable?") from None
    made.append(target)
    return target


def release_pins(directory: str, token: str) -> None:
    """Remove the pins a token named."""
    for path in pins_of(directory, token):
        _remove(path)


def pins_of(directory: str, token: str) -> list[str]:
    """The pins a token named (an export releases its own when it ends)."""
    return sorted(os.path.join(directory, name) for name in os.listdir(directory)
                  if (m := _PIN_FILE.fullmatch(name)) is not None and m.group(2) == token)
