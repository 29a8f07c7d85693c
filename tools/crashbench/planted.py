"""Planted durability bugs: known bugs the crash bench must find, off unless a test plants them.

A bench that has never caught a bug proves nothing, so tests/crash/test_planted_bugs.py plants
each bug of BUGS in turn and checks that the bench reports it. The bugs are mutants kept here,
outside the product: nothing in aof/, snapshot/, engine/ or replication/ knows of them. They
reach an engine through one seam, `open_engine`: every engine the bench runs in process (the
power-loss and I/O-error modes, recoveries included) is opened by it, which is `Engine.open`
itself while nothing is planted.

- The file-layer bugs are `PlantedFS`, a wrapper of the file layer the engine is opened on
  (`Engine.open(path, fs=...)`, aof.fs): the product's own calls, carried out or answered the
  way the bug would leave the disk (a dropped directory fsync, an fdatasync that does not
  reach the disk, a zero-filled tail refused, the synced watermark not seen by recovery).
- The engine bugs cannot be told from a file's bytes: XADD's `*` and XCLAIM's replay wrap
  those commands' handlers in the command table (engine.exec.table) for the rest of the
  process (engines built after it run them); a failed write kept wraps the rollback the data
  directory hands the journal (`on_rollback`) of the engine just opened.
A served streamkeep (the SIGKILL mode's) never plants anything.

Off by default: the set is read once, when this module is first imported, from the environment
variable STREAMKEEP_PLANTED_BUGS (comma-separated names from BUGS); unset or empty, nothing is
planted. An unknown name is refused (`UnknownPlantedBug`), at import and at every `planted()`
call, so a typo never plants nothing silently. Because it is read at import, a test plants bugs
in a child process it starts with the variable set.
Must not touch: the bench's modes and checks (they only open engines through `open_engine`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from streamkeep.aof.fs import FileSystem, RealFS
from streamkeep.aof.manifest import MANIFEST, is_segment_file
from streamkeep.aof.recovery import AOFCorruptError
from streamkeep.aof.watermark import WATERMARK
from streamkeep.engine.wire.errors import StreamkeepError

ENV = "STREAMKEEP_PLANTED_BUGS"

# What each bug does (the file layer's are PlantedFS's; the engine's, _plant_commands' and
# _keep_failed_writes').
FILE_LAYER_BUGS = frozenset({
    "ack-before-fsync",  # appendfsync always: a command acknowledged before an fdatasync covers it
    "everysec-stops-when-idle",  # everysec syncs only on writes: nothing once writes stop
    "manifest-rename-no-dirfsync",  # the manifest replaced without the directory fsync
    "zero-tail-is-damage",  # recovery refuses a zero-filled tail instead of truncating it
    "rot-is-a-torn-tail",  # recovery cuts damage to fsynced records as if it were a torn tail
})
ENGINE_BUGS = frozenset({
    "ldi-backwards",  # replaying a claim moves the group's last-delivered ID back
    "star-id-reuse",  # XADD * ignores the clock: IDs lost with a tail are handed out again
    "failed-write-kept",  # a record that could not be written is dropped, its command not undone
})
BUGS = FILE_LAYER_BUGS | ENGINE_BUGS
COMMAND_BUGS = frozenset({"ldi-backwards", "star-id-reuse"})  # of ENGINE_BUGS: a handler wrapped

# The journal's threads (aof.journal): the group commit's fdatasyncs acknowledge `always`
# writes; the once-a-second thread's are everysec's.
GROUP_COMMIT_THREAD = "aof-group-commit"
EVERY_SECOND_THREAD = "aof-every-second"


class UnknownPlantedBug(StreamkeepError):
    """A name that is not in BUGS: a typo would otherwise plant nothing, silently."""


def _read(value: str) -> frozenset[str]:
    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    unknown = names - BUGS
    if unknown:
        raise UnknownPlantedBug(f"{ENV} names unknown bugs: {', '.join(sorted(unknown))}")
    return names


ACTIVE: frozenset[str] = _read(os.environ.get(ENV, ""))


def planted(name: str) -> bool:
    """Whether the bug `name` (one of BUGS) is planted in this process."""
    if name not in BUGS:
        raise UnknownPlantedBug(f"no planted bug is called {name!r}")
    return name in ACTIVE


def open_engine(path: str, fs: FileSystem | None = None, **settings: Any) -> Any:
    """`Engine.open(path, fs=fs, **settings)` with the planted bugs: the file layer (`fs`, None:
    the operating system's) wrapped in PlantedFS, the command handlers wrapped first and the
    journal's rollback after; exactly Engine.open when nothing is planted."""
    from streamkeep import Engine

    if not ACTIVE:
        return Engine.open(path, fs=fs, **settings)
    _plant_commands(ACTIVE & COMMAND_BUGS)
    file_layer = ACTIVE & FILE_LAYER_BUGS
    if file_layer:
        fs = PlantedFS(fs if fs is not None else RealFS(), file_layer)
    engine = Engine.open(path, fs=fs, **settings)
    if "failed-write-kept" in ACTIVE:
        _keep_failed_writes(engine)
    return engine


def _name(path: str) -> str:
    return os.path.basename(path)


def _is_segment(path: str) -> bool:
    return is_segment_file(_name(path))


class PlantedFS:
    """A file layer (`inner`: RealFS or one of the bench's) with file-layer bugs planted; every
    call the bugs do not change goes to `inner` as it is.

    - ack-before-fsync: the group-commit thread's fdatasyncs of a segment do not reach the
      disk, nor do the watermark records it appends after them, so `always` acknowledges what
      no fsync covered; a rotation still syncs the segment it closes (owed: done before the
      next segment is created, as the rotation's own fdatasync would have).
    - everysec-stops-when-idle: the once-a-second thread's fdatasyncs of a segment (and its
      watermark records) do not reach the disk; a write syncs its segment when the last sync is
      a second old, so nothing is synced once writes stop.
    - manifest-rename-no-dirfsync: the directory fsync after the manifest's rename is dropped.
    - zero-tail-is-damage: cutting a segment's zero-filled tail refuses to load instead.
    - rot-is-a-torn-tail: the synced watermark is not there for recovery, which then takes
      damage to fsynced records for a torn tail and cuts it."""

    def __init__(self, inner: FileSystem, bugs: frozenset[str]) -> None:
        self.inner = inner
        self.bugs = bugs
        self.unsynced_threads = frozenset(
            name for bug, name in (("ack-before-fsync", GROUP_COMMIT_THREAD),
                                   ("everysec-stops-when-idle", EVERY_SECOND_THREAD))
            if bug in bugs)
        self.kinds: dict[int, str] = {}  # descriptor opened for appending -> segment | watermark
        self.owed: set[int] = set()  # segments whose group-commit fdatasync was dropped
        self.synced_at = time.monotonic()  # the last fdatasync of a segment that reached the disk
        self.dir_fsyncs_dropped: set[str] = set()  # directories whose next fsync is dropped

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _unsynced_thread(self) -> str | None:
        name = threading.current_thread().name
        return name if name in self.unsynced_threads else None

    def open_append(self, path: str, create: bool = True) -> int:
        fd = self.inner.open_append(path, create)
        if _is_segment(path):
            self.kinds[fd] = "segment"
        elif _name(path) == WATERMARK:
            self.kinds[fd] = "watermark"
        return fd

    def open_write_new(self, path: str) -> int:
        if self.owed and _is_segment(path):  # a rotation creates its next segment
            for fd in sorted(self.owed):
                self.inner.fdatasync(fd)
            self.owed.clear()
            self.synced_at = time.monotonic()
        return self.inner.open_write_new(path)

    def close(self, fd: int) -> None:
        self.kinds.pop(fd, None)
        self.owed.discard(fd)
        self.inner.close(fd)

    def write(self, fd: int, data: bytes) -> None:
        kind = self.kinds.get(fd)
        thread = self._unsynced_thread() if self.unsynced_threads else None
        if kind == "watermark" and thread is not None:
            return  # the record of an fsync that did not happen never reaches the file
        self.inner.write(fd, data)
        if kind == "segment" and "everysec-stops-when-idle" in self.bugs and thread is None \
                and time.monotonic() - self.synced_at >= 1.0:
            self.fdatasync(fd)  # the only everysec sync left: on a write

    def fdatasync(self, fd: int) -> None:
        if self.kinds.get(fd) == "segment":
            thread = self._unsynced_thread() if self.unsynced_threads else None
            if thread is not None:
                if thread == GROUP_COMMIT_THREAD:
                    self.owed.add(fd)
                return
            self.inner.fdatasync(fd)
            self.synced_at = time.monotonic()
            return
        self.inner.fdatasync(fd)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)
        if "manifest-rename-no-dirfsync" in self.bugs and _name(dst) == MANIFEST:
            self.dir_fsyncs_dropped.add(os.path.normpath(os.path.dirname(dst) or "."))

    def fsync_dir(self, path: str) -> None:
        key = os.path.normpath(path)
        if key in self.dir_fsyncs_dropped:
            self.dir_fsyncs_dropped.discard(key)
            return
        self.inner.fsync_dir(path)

    def truncate(self, path: str, size: int) -> None:
        if "zero-tail-is-damage" in self.bugs and _is_segment(path):
            tail = self.inner.read_file(path)[size:]
            if tail and not tail.strip(b"\0"):
                raise AOFCorruptError(f"{path}: zero-filled tail at byte offset {size}; "
                                      "refusing to load")
        self.inner.truncate(path, size)

    def exists(self, path: str) -> bool:
        if "rot-is-a-torn-tail" in self.bugs and _name(path) == WATERMARK:
            return False
        return self.inner.exists(path)


_commands_planted: set[str] = set()


def _plant_commands(bugs: frozenset[str]) -> None:
    """Wrap the handlers of the commands the planted command bugs change, once per process."""
    todo = bugs - _commands_planted
    if not todo:
        return
    import streamkeep.engine.commands  # noqa: F401  (registers every command)
    from streamkeep.engine.exec.table import COMMANDS

    if "star-id-reuse" in todo:
        spec = COMMANDS[b"xadd"]
        assert spec.handler is not None
        spec.handler = _ignoring_the_clock(spec.handler)
    if "ldi-backwards" in todo:
        spec = COMMANDS[b"xclaim"]
        assert spec.handler is not None
        spec.handler = _moving_the_group_back(spec.handler)
    _commands_planted.update(todo)


def _ignoring_the_clock(xadd: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """star-id-reuse: XADD runs as if the clock read 0, so `*` always takes the stream's last
    ID's successor and never the time: IDs a lost tail held are handed out again."""
    def planted_xadd(ctx: Any, argv: Any) -> Any:
        if ctx.replaying:  # (a record holds explicit IDs)
            return xadd(ctx, argv)
        now, ctx.now = ctx.now, 0
        try:
            return xadd(ctx, argv)
        finally:
            ctx.now = now

    return planted_xadd


def _moving_the_group_back(xclaim: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """ldi-backwards: a replayed claim leaves its group's last-delivered ID at the last entry
    it claimed, which is older when the claim was an XCLAIM's or an XAUTOCLAIM's."""
    from streamkeep.engine.model.ids import try_parse_strict

    def planted_xclaim(ctx: Any, argv: Any) -> Any:
        reply = xclaim(ctx, argv)
        if ctx.replaying:
            claimed = []
            for arg in argv[5:]:  # the IDs, up to the first option
                sid = try_parse_strict(arg)
                if sid is None:
                    break
                claimed.append(sid)
            stream = ctx.db.get(argv[1])
            group = stream.groups.get(argv[2]) if stream is not None else None
            if claimed and group is not None:
                group.last_id = claimed[-1]
        return reply

    return planted_xclaim


def _keep_failed_writes(engine: Any) -> None:
    """failed-write-kept: the journal drops a record it could not write but no longer rolls
    its command back (the data directory's rollback runs only after a failed fsync, which
    `always` cuts back), so a command answered MISCONF stays in memory."""
    journal = engine.journal
    rollback = journal.on_rollback

    def after_a_failed_fsync_only(lsn: int) -> None:
        if journal.fsync_failed and rollback is not None:
            rollback(lsn)

    journal.on_rollback = after_a_failed_fsync_only
