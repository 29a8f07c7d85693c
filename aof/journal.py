"""The AOF writer: assigns LSNs, appends records, fsyncs by policy, rotates segments.

Owns the write path. `append` runs under the engine lock: it encodes the record and, under
`everysec` and `no`, writes it to the OS before returning, so an acknowledged write survives a
process crash. Under `always` it buffers the record, and `wait_durable` (engine lock released)
returns only once the record is written and an fdatasync covers it: a group-commit thread writes
everything buffered with one write(), fsyncs it, and wakes every caller that round covered, so
concurrent callers share writes and fsyncs. The server buffers under every policy (deferred
mode) and writes each batch's records before the batch's replies; a record carrying a big value
is written at once, in parts, never copied into the buffer. `everysec` fsyncs from a
background thread once a second while unsynced bytes remain; `no` leaves it to the OS.

Failures. An error reply means the command had no effect: not in memory, not in the log, not
on a replica, not after a restart. So:
  * space is allocated ahead of the log's end (`preallocate` bytes, fallocate without growing
    the file: aof.fs.reserve) and topped up as it is used; when it cannot be, the gate closes
    (`error`, the MISCONF line) and write commands are refused before they run, while the
    space left takes the record of the command that noticed it. A full disk is met at a
    record boundary, never inside a record;
  * a record that cannot be written all the same (an I/O error, a record bigger than what
    could be allocated, a file system that cannot allocate ahead) is cut back off the file and
    dropped with everything buffered after the last record written; the LSNs go back and
    `on_rollback` makes the engine's state the log's again (the data directory reloads it),
    so the commands it answers MISCONF leave nothing behind;
  * the once-a-second thread tries to allocate again and reopens the gate when it can: writes
    resume by themselves once the log can take them;
  * a failed fsync is never retried (the page cache may have dropped the data): writes are
    refused until the directory is reopened. Under `always` what it covered was not
    acknowledged, so it is cut back to the last fsync and rolled back too, and replicas are
    sent only what an fsync covered (`written_end`); under everysec and no it had been
    acknowledged, and stays.
A rotation that cannot create its new segment for want of descriptors (EMFILE/ENFILE) loses
nothing: writes go on into the current segment and the rotation is retried. A replica's
records (`append_raw`) are its primary's, acknowledged there: one that fails to be written is
kept and written by the retry instead. Reads go on. What others hand the journal to call (a
durable write's callback, replication's and the compactor's hooks, the retry) is contained
where it is called: logged if it raises, it neither ends a thread of the journal nor makes it
refuse writes, which only the log's own failures do. After every fsync the synced watermark
(aof.watermark) advances to the bytes it covered, so recovery can tell a torn tail from damage
to data that was already durable. Must not touch: record format details (aof.codec), the
manifest format (aof.manifest), engine state (the rollback is the data directory's).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import threading
import time
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable
from typing import Any, Final

from streamkeep.aof import manifest as manifest_mod
from streamkeep.aof.codec import (
    HEADER_SIZE,
    encode_header,
    encode_parts,
    encode_small,
)
from streamkeep.aof.fs import (
    MAPPABLE_FILE_SYSTEMS,
    UNSUPPORTED_ERRNOS,
    FileSystem,
    MappedTail,
    RealFS,
    file_system_type,
)
from streamkeep.aof.manifest import Manifest, SegmentEntry
from streamkeep.aof.watermark import Watermark, WatermarkLog
from streamkeep.engine.wire.errors import ReplyError, StorageError

log = logging.getLogger("streamkeep.aof")
# The write path's codec kernels, bound once: the compiled build calls a name bound Final
# without looking it up in the module's globals (a Cython function is not one of its native
# calls).
_encode_small: Final = encode_small

POLICIES = ("always", "everysec", "no")
# Out of descriptors (the process's or the system's): transient, retried, never a lost write.
TRANSIENT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
ROTATE_RETRY_SECONDS = 0.1  # a postponed rotation is retried by the first write after this
ROTATE_RETRY_SECONDS_IO = 1.0  # ... after an I/O error on the new segment (not descriptors)
DEFAULT_PREALLOCATE = 4 << 20  # aof-preallocate: space allocated ahead of the log's end
MAX_RETRY_BACKOFF = 60.0  # seconds, at most, between a failed write and the next attempt
UNLIMITED = 1 << 62  # the room where nothing is allocated ahead (preallocate 0, or no support)


def misconf(err: OSError) -> str:
    return f"MISCONF Errors writing to the AOF file: {os.strerror(err.errno or 5)}"


def _hook_failed(name: str) -> None:
    """A service's hook raised on the write path or a journal thread (called inside its
    `except`): its failure, logged, never the log's: the records are written and writes go on."""
    log.exception("the AOF's %s hook failed; the log goes on", name)


class Journal:
    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        manifest: Manifest,
        fd: int,
        size: int,
        last_lsn: int,
        policy: str,
        segment_max_bytes: int,
        watermark: WatermarkLog | None = None,
        preallocate: int = DEFAULT_PREALLOCATE,
        mapped: bool = True,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"appendfsync must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.fs = fs
        # The operating system's files are written with os.write itself (`RealFS.write_some`),
        # not through RealFS.write (an interpreted call a record); any other FileSystem (the
        # crash tests' fault injection) through its own write.
        self.write_some: Callable[[int, bytes], int] | None = (
            RealFS.write_some if type(fs) is RealFS else None)
        self.directory = directory
        self.manifest = manifest
        self.fd = fd
        self.size = size  # bytes in the current segment, all of them written to the OS
        # (the current segment's number, its written size), replaced whole after each write:
        # replication's senders read it without the engine lock.
        self.written_end = (manifest.segments[-1].segment, size)
        # (segment, size, last LSN in it) written to the OS, replaced whole after each write:
        # a sync round reads it before its fdatasync, which then covers those bytes, and
        # advances the synced watermark (aof.watermark) to it.
        self.written_mark = (manifest.segments[-1].segment, size, last_lsn)
        self.synced_mark = self.written_mark  # what the last fsync covered (`always` cuts back to it)
        self.watermark = watermark
        self.lsn = last_lsn  # the last LSN assigned
        self.policy = policy
        self.sync_on_commit = policy == "always"
        self.segment_max_bytes = segment_max_bytes
        # The last LSN whose bytes the OS has: advanced only after write() returns, so a sync
        # round never counts a record another thread is still writing.
        self.written_lsn = last_lsn
        self.synced_lsn = last_lsn  # everything replayed at open is already on disk
        self.error: str | None = None  # the MISCONF line while writes are refused
        self.fsync_failed = False
        self.rotate_retry_at = 0.0  # a rotation postponed for want of descriptors: retry then
        # After a failed write the gate reopens at `retry_at`, later after each failure in a
        # row (a reopened gate's next write is the probe: a failing device's costs a rollback).
        self.retry_at = 0.0
        self.retry_backoff = 0.0
        self.unwritten: list[bytes] = []  # a replica's records whose write failed, in order
        self.pending_raw = False  # the buffer holds a replica's records (kept if they fail)
        # Space allocated ahead of the log's end, topped up to `preallocate` bytes once less
        # than `low_water` of it is left: `room` is how much may be appended (buffered or
        # written) before that, so what is left is room + low_water (one subtraction and one
        # test per record on the write path).
        self.preallocate = max(int(preallocate), 0)
        self.low_water = self.preallocate // 2
        self.room = -self.low_water if self.preallocate else UNLIMITED
        # aof-mapped-appends: records written one at a time (everysec and no, outside the
        # server's deferred mode) are copied into a mapping of the segment's allocated tail
        # rather than written with write(2), on the operating system's files where a mapped
        # write into allocated blocks cannot fail for want of space (aof.fs.MappedTail).
        self.mapped = mapped
        self.mappable = type(fs) is RealFS and file_system_type(directory) in MAPPABLE_FILE_SYSTEMS
        self.tail: MappedTail | None = None
        # The tail's current window, as MappedTail last mapped it (`_to_tail`).
        self._window: Any = None
        self._window_base = 0
        self._window_stop = 0
        # The data directory's rollback (engine lock held): make the engine's state the log's,
        # which ends at the given LSN, after records were dropped.
        self.on_rollback: Callable[[int], None] | None = None
        # Deferred mode (the server turns it on: every command runs on its loop thread): records
        # are buffered and written by flush_pending, once per batch of commands, before replies.
        self.deferred = False
        # Under `always` records are buffered too: the group-commit thread writes the buffer
        # and fsyncs it in one round, so writer threads never release the GIL inside the
        # engine lock (one os.write each would convoy them on it).
        self.buffered = self.sync_on_commit
        self.flush_lock = threading.Lock()  # the engine lock, once the data directory sets it
        self.pending = bytearray()
        self.pending_records = 0
        self.fsyncs = 0
        self.records_written = 0
        # Compaction (the snapshot issue): bytes in the segments after the snapshot, and the
        # size at which the auto trigger fires (never while a compaction runs).
        self.aof_bytes = 0
        self.rewrite_at = float("inf")
        self.on_rewrite: Callable[[], None] | None = None
        # Rotation and the compactor's switch both replace the manifest.
        self.manifest_lock = threading.Lock()
        self._cond = threading.Condition()
        self._syncing = False
        self._closing = threading.Event()
        # Every policy needs the once-a-second thread: it retries failed writes; under
        # everysec it also fsyncs.
        self._ticker = threading.Thread(target=self._every_second, name="aof-every-second",
                                        daemon=True)
        self._ticker.start()
        # `always`: callers of wait_durable queue requests here for the group-commit thread.
        self._crash: BaseException | None = None  # what broke that thread's round, if not I/O
        self._requests: queue.SimpleQueue[list | None] = queue.SimpleQueue()
        self._syncer_thread = threading.Thread(target=self._syncer, name="aof-group-commit",
                                               daemon=True)
        self._syncer_thread.start()
        if self.preallocate:
            self._top_up(self.preallocate)  # a full disk at open: writes refused until space

    # --- the write path (engine lock held) ---------------------------------------------------

    def append(self, time_ms: int, db: int, effects: list) -> int:
        """Log one command execution's effects under the next LSN and write them to the OS.
        In deferred mode (the server's) the record joins a buffer that `flush_pending` writes
        with one write() before any reply leaves. ReplyError(MISCONF) if the record cannot be
        logged: it is dropped and the command rolled back (see the module's docstring)."""
        lsn = self.lsn + 1
        data = _encode_small(lsn, time_ms, db, effects)
        if data is None:  # an argument of BIG_ARG bytes or more
            return self._append_big(time_ms, db, effects)
        room = self.room - len(data)
        if room < 0:
            if not self._make_room(len(data)):
                raise self._undo_after_flush()  # no room for its record: it must not stay
            room = self.room - len(data)
        self.lsn = lsn
        self.room = room
        if self.buffered:
            self.pending += data
            self.pending_records += 1
            return lsn
        try:
            self._write(data, 1)
        except ReplyError as err:
            self._undo()
            raise err from None
        return lsn

    def _append_big(self, time_ms: int, db: int, effects: list) -> int:
        """A record carrying a big value is written at once, in parts (`encode_parts`): the
        value is neither packed into a copy nor joined to its frame nor buffered, only written
        (behind the deferred records, which go first to keep the LSN order)."""
        if not self.flush_pending():
            raise ReplyError(self.error or "MISCONF Errors writing to the AOF file")
        lsn = self.lsn + 1
        parts = encode_parts(lsn, time_ms, db, effects)
        size = sum(map(len, parts))
        if self.room < size and not self._make_room(size):
            raise self._undo_after_flush()
        self.lsn = lsn
        self.room -= size
        try:
            self._write(parts[0], 1, parts[1:])
        except ReplyError as err:
            self._undo()
            raise err from None
        return lsn

    def _make_room(self, size: int) -> bool:
        """`room` ran out before a record of `size` bytes: top the allocation up (to at least
        `size`). If that fails, the gate closes (`_top_up`); the record is still taken if what
        is left allocated holds it, and refused (False) if not."""
        fits = self.room + self.low_water >= size
        return self._top_up(max(self.preallocate, size)) or fits

    def _top_up(self, length: int) -> bool:
        """Allocate `length` bytes past the log's end (written and buffered) so that appends
        into them cannot meet a full disk. False if the space is not there: `error` is then
        the MISCONF line and write commands are refused until the once-a-second retry finds
        it (what is left allocated still takes the record in hand)."""
        if self.fd < 0:
            return False
        if not self.preallocate:
            return True
        if self.tail is None and self._wants_tail():
            try:
                self.tail = MappedTail(self._segment_path(), self.size)
            except OSError as err:  # (out of descriptors): write(2) until the next top-up
                log.warning("cannot map the AOF's tail (%s); appending with write(2)", err)
        try:
            if self.tail is not None:
                self.tail.extend(self.size + len(self.pending), length)
            else:
                self.fs.reserve(self.fd, self.size + len(self.pending), length)
        except OSError as err:
            if self.tail is not None and err.errno in UNSUPPORTED_ERRNOS:
                self.mappable = False  # allocated by reserve() from now on
                self._release_tail()
                return self._top_up(length)
            if err.errno in UNSUPPORTED_ERRNOS:
                log.warning("cannot allocate AOF space ahead here (%s): a full disk will be "
                            "met while writing a record, which is then rolled back", err)
                self.preallocate = self.low_water = 0
                self.room = UNLIMITED
                return True
            if self.error is None:
                log.error("cannot allocate AOF space (%s); refusing writes until it can be",
                          err)
            self.error = misconf(err)
            return False
        self.room = length - self.low_water
        return True

    def _wants_tail(self) -> bool:
        """Records go through a mapped tail: one at a time, on a file system where that is
        safe, with space allocated ahead, nothing waiting to be rewritten."""
        return (self.mapped and self.mappable and not self.buffered and self.preallocate > 0
                and not self.fsync_failed and not self.unwritten)

    def _segment_path(self) -> str:
        return os.path.join(self.directory, self.manifest.segments[-1].file)

    def _to_tail(self, tail: MappedTail, data: bytes) -> bool:
        """Copy a record into the mapped tail at the written end: False if it does not fit
        what was allocated. The tail's mapped window is kept here as well (native fields): a
        record that fits it, every record under everysec but one per window, is copied
        without a call into the tail."""
        offset = self.size
        stop = offset + len(data)
        window = self._window
        if window is not None and stop <= self._window_stop:
            base = self._window_base
            window[offset - base:stop - base] = data
            return True
        done = tail.write(offset, data)
        self._window, self._window_base, self._window_stop = tail.window, tail.base, tail.stop
        return done

    def _close_tail(self) -> None:
        """Back to write(2): unmap, and cut the file back to its written end (what was
        allocated past it goes back: `room` says so). OSError if the cut failed."""
        tail, self.tail = self.tail, None
        self._window, self._window_stop = None, 0  # (unmapped by its close)
        self.room = -self.low_water if self.preallocate else UNLIMITED
        if tail is not None:
            tail.close(self.size)

    def _drop_tail(self) -> None:
        """_close_tail where a failed cut is left to the file's next reader: the write failed
        anyway, or the segment is being let go (recovery cuts the zeros at the next open)."""
        with contextlib.suppress(OSError):
            self._close_tail()

    def _release_tail(self) -> bool:
        """_close_tail, where a failed cut refuses writes until the directory is reopened
        (the file ends in zeros that an append would follow; recovery cuts them)."""
        try:
            self._close_tail()
        except OSError as err:
            log.error("cannot cut the AOF back to its written end (%s); refusing writes until "
                      "reopened", err)
            self.fsync_failed = True
            self.error = misconf(err)
            return False
        return True

    def set_mapped(self, mapped: bool) -> None:
        """CONFIG SET aof-mapped-appends (engine lock held)."""
        self.mapped = mapped
        self._refresh_tail()

    def _refresh_tail(self) -> None:
        """After a setting changed: the tail opened or closed as `_wants_tail` now says."""
        if self.tail is not None and not self._wants_tail():
            self._release_tail()
        elif self.tail is None and self._wants_tail():
            self.room = -self.low_water
            self._top_up(self.preallocate)

    def _undo_after_flush(self) -> ReplyError:
        """The command in hand ran but its record cannot be given room: write what is buffered
        (it had room), then roll back to the log's end. Returns the error to raise."""
        if self.flush_pending():
            self._undo()
        return ReplyError(self.error or "MISCONF Errors writing to the AOF file")

    def _undo(self) -> None:
        """Records after the last one written were dropped (engine lock held): the LSNs go back
        to it, the buffer is emptied and the engine's state is made the log's again."""
        now = time.monotonic()
        # 1 s after a first failure, twice as long after each one that follows within a minute.
        self.retry_backoff = 1.0 if now - self.retry_at > MAX_RETRY_BACKOFF \
            else min(self.retry_backoff * 2, MAX_RETRY_BACKOFF)
        self.retry_at = now + self.retry_backoff
        self.pending.clear()
        self.pending_records = 0
        self.pending_raw = False
        self.lsn = self.written_lsn
        if self.on_rollback is not None:
            self.on_rollback(self.written_lsn)

    @property
    def refusing_writes(self) -> bool:
        """Write commands are refused: a failed fsync (never retried), a failed write or a
        full disk awaiting the retry, a replica's record awaiting its own."""
        return self.error is not None or self.fsync_failed or bool(self.unwritten)

    def stop_writes(self, line: str) -> None:
        """Refuse writes with `line` until the directory is reopened, as after a failed fsync
        (engine lock held): a command failed half-way on storage damage, so the state in memory
        may differ from the log's, and nothing more may be logged on top of it."""
        log.error("refusing writes until the data directory is reopened: %s", line)
        self.flush_pending()
        self.fsync_failed = True
        self.error = line

    def set_deferred(self, deferred: bool) -> None:
        """The server's mode (engine lock held): it writes the buffer once per batch."""
        if not deferred:
            self.flush_pending()
        self.deferred = deferred
        self.buffered = deferred or self.sync_on_commit
        self._refresh_tail()

    def set_policy(self, policy: str) -> None:
        """CONFIG SET appendfsync (engine lock held). Buffered records are written first: a
        caller that appended under `always` may find the new policy and not wait."""
        if policy not in POLICIES:
            raise ValueError(f"appendfsync must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.flush_pending()
        self.policy = policy
        self.sync_on_commit = policy == "always"
        self.buffered = self.deferred or self.sync_on_commit
        self._refresh_tail()
        if not self.sync_on_commit and self.written_end != self.written_mark[:2]:
            self.written_end = self.written_mark[:2]  # replicas may have what is written now
            self._tell_written()

    def set_preallocate(self, size: int) -> None:
        """CONFIG SET aof-preallocate (engine lock held): allocate that much ahead from now on
        (0: nothing; a full disk is then met while writing a record, which is rolled back)."""
        self.preallocate, self.low_water = size, size // 2
        self.room = -self.low_water if size else UNLIMITED
        if not size:
            self._refresh_tail()
        else:
            self._top_up(size)

    def flush_pending(self) -> bool:
        """Write the deferred records with one write() (engine lock held). False if that
        failed: their commands are not acknowledged (MISCONF) and are rolled back (a replica's
        records wait for the retry instead)."""
        if not self.pending:
            return True
        data, count = bytes(self.pending), self.pending_records
        raw, self.pending_raw = self.pending_raw, False
        self.pending.clear()
        self.pending_records = 0
        try:
            self._write(data, count)
        except ReplyError:
            if raw:
                self.unwritten.append(data)
            else:
                self._undo()
            return False
        return True

    def _write(self, data: bytes, records: int, more: list[bytes] | None = None) -> None:
        """Write `data` (then the parts in `more`, one record's payload written as it is).
        ReplyError(MISCONF) if that failed: the file is cut back to where it was."""
        size = len(data)
        try:
            tail = self.tail
            if tail is not None and more is None and self._to_tail(tail, data):
                pass  # copied into the mapped tail: in the page cache, as a write's bytes are
            else:
                if tail is not None:  # (a big record, or past what was allocated)
                    self._close_tail()  # the file cut back to its written end, to append there
                write_some = self.write_some
                if write_some is None:
                    self.fs.write(self.fd, data)
                elif (done := write_some(self.fd, data)) != size:  # a short write: the rest
                    self.fs.write(self.fd, data[done:])
            if more:  # (no iterator made for a record in one piece)
                for part in more:
                    self.fs.write(self.fd, part)
                    size += len(part)
        except OSError as err:
            self._write_failed(err)
            raise ReplyError(self.error) from None  # type: ignore[arg-type]
        self.size += size
        self.records_written += records
        self.written_lsn = self.lsn  # pending records are only added while nothing is unwritten
        if self.size >= self.segment_max_bytes and time.monotonic() >= self.rotate_retry_at:
            self._rotate()
        self.aof_bytes += size
        if self.aof_bytes >= self.rewrite_at and self.on_rewrite is not None:
            try:
                self.on_rewrite()
            except Exception:  # (a try costs nothing until it raises; once per trigger anyway)
                _hook_failed("on_rewrite")
        # _written(), inlined: this is every write's path.
        self.written_mark = (self.written_end[0], self.size, self.written_lsn)
        if not self.sync_on_commit:
            self.written_end = (self.written_end[0], self.size)
            if self.on_written is not None:
                # _tell_written(), inlined. A try block is no per-record cost: nothing runs
                # for it unless the hook raises (CPython's and mypyc's exceptions are
                # zero-cost on the path that does not raise).
                try:
                    self.on_written()
                except Exception:
                    _hook_failed("on_written")

    def _written(self) -> None:
        """The written end moved: a sync round covers up to here; under everysec and no the
        replicas may have it now (under `always` once an fsync covers it: `_sync_round`)."""
        self.written_mark = (self.written_end[0], self.size, self.written_lsn)
        if not self.sync_on_commit:
            self.written_end = (self.written_end[0], self.size)
            self._tell_written()

    def _tell_written(self) -> None:
        """`on_written` (replication's pump): a failure of it is replication's, logged, never
        the log's (the records are written; the next call pumps them)."""
        if self.on_written is not None:
            try:
                self.on_written()
            except Exception:
                _hook_failed("on_written")

    def _write_failed(self, err: OSError) -> None:
        log.error("AOF write failed: %s; refusing writes until it succeeds", err)
        self._drop_tail()  # (its window could not be mapped): back to write(2)
        self.error = misconf(err)
        self.room = -self.low_water  # the cut freed what was allocated ahead: allocate again
        try:  # a partial write must not stay: the next record would be glued onto it
            self.fs.ftruncate(self.fd, self.size)
        except OSError as terr:
            log.error("cannot truncate the partial AOF write: %s", terr)
            self.fsync_failed = True  # the file's tail is unknown: never write to it again

    def retry_writes(self) -> None:
        """The once-a-second retry (engine lock held): a replica's records that failed are
        written; otherwise, once space can be allocated again, the gate reopens."""
        if self.fsync_failed or self.fd < 0:
            return
        if self.unwritten:
            self.retry_unwritten()
        elif (self.error is not None and time.monotonic() >= self.retry_at
              and self._top_up(self.preallocate)):
            log.warning("AOF writes can go on again; accepting writes")
            self.error = None

    def retry_unwritten(self) -> None:
        """Write a replica's records that failed (engine lock held). Clears the error on
        success."""
        if not self.unwritten or self.fsync_failed:
            return
        if self.tail is not None and not self._release_tail():
            return
        while self.unwritten:
            data = self.unwritten[0]
            try:
                self.fs.write(self.fd, data)
            except OSError as err:
                try:
                    self.fs.ftruncate(self.fd, self.size)
                except OSError:
                    self.fsync_failed = True
                self.error = misconf(err)
                return
            self.unwritten.pop(0)
            self.size += len(data)
            self.aof_bytes += len(data)
            self.records_written += 1
        # Every LSN assigned is written now (an element may be a batch of deferred records).
        self.written_lsn = self.lsn
        log.warning("AOF writes succeed again; accepting writes")
        self.error = None
        self.room = -self.low_water
        self._top_up(self.preallocate)
        self._written()

    # --- durability (engine lock not held) -----------------------------------------------------

    def wait_durable(self, lsn: int) -> None:
        """Return once an fdatasync covers `lsn` (group commit); MISCONF if fsync failed.

        The caller hands the group-commit thread a lock of its own and blocks on it: the
        thread writes what is buffered, fsyncs everything written, and releases the requests
        that fsync covered, one after another. Per-caller locks wake exactly the callers a round
        covered, with no condition-variable convoy; while one fsync runs, the callers it does
        not cover append their records, so the next round covers them all."""
        if self.synced_lsn >= lsn:
            return
        if not self.fsync_failed:
            done = _allocate_lock()
            done.acquire()
            request: list[Any] = [lsn, done, None]
            self._requests.put(request)
            try:
                # Released by the group-commit thread or by the caller before this one. The
                # timeout only notices a journal closed under a caller that asked too late.
                while not done.acquire(True, 1.0):
                    if not self._syncer_thread.is_alive():
                        break
            except BaseException:  # a signal (KeyboardInterrupt) in the main thread
                _pass_on_later(request)
                raise
            if request[2] is not None:
                request[2][1].release()  # wake the next caller the round covered
        self.check_durable(lsn)

    def check_durable(self, lsn: int) -> None:
        """After a wait for `lsn` ended: raise what broke it (the round's crash, or MISCONF
        when no fsync covers it)."""
        if self._crash is not None:  # the round broke (not an I/O error): its callers see why
            raise self._crash
        if self.synced_lsn < lsn:
            raise ReplyError(self.error or "MISCONF Errors writing to the AOF file")

    def when_durable(self, lsn: int, done: Callable[[], None]) -> bool:
        """`wait_durable` without a waiting thread (an event loop's caller): True if `lsn` is
        durable already or can never be (fsync failed; closed: call `check_durable` now);
        otherwise False, and the group-commit thread calls `done()` once the round covering
        `lsn` ended (then `check_durable`). `done` must not block: it runs on that thread."""
        if self.synced_lsn >= lsn or self.fsync_failed or self._closing.is_set():
            return True
        request: list[Any] = [lsn, None, None]
        request[1] = _CallbackRelease(done, request)
        self._requests.put(request)
        return False

    def commit_now(self, lsn: int) -> None:
        """`wait_durable`'s round, run by the caller itself: the server's event loop under
        `always` (as Redis fsyncs before it replies), which hands nothing to the group-commit
        thread and waits for no wake-up from it. The same outcome: it returns once an
        fdatasync covers `lsn`, MISCONF if that fsync failed (what it covered cut off and rolled
        back first, as the thread does). Records appended while it runs wait for the caller's
        next round: the loop's clients of one iteration share one fsync."""
        if self.synced_lsn >= lsn:
            return
        if not self.fsync_failed:
            try:
                self._commit_round(lsn)
                if self.fsync_failed and self.sync_on_commit:
                    with self.flush_lock:
                        self._drop_unsynced()
            except BaseException as exc:  # a bug, or a test's power cut, as in _syncer
                log.error("AOF commit failed: %r; refusing writes until reopened", exc)
                self.fsync_failed = True
                self.error = self.error or "MISCONF Errors writing to the AOF file"
                self._crash = exc
        if self._crash is not None:
            raise self._crash
        if self.synced_lsn < lsn:
            raise ReplyError(self.error or "MISCONF Errors writing to the AOF file")

    def _syncer(self) -> None:
        """The group-commit thread: one fsync round per batch of wait_durable requests."""
        get, get_nowait = self._requests.get, self._requests.get_nowait
        stop = False
        while not stop:
            batch = [get()]
            while True:  # everyone who asked while the last round ran shares this one
                try:
                    batch.append(get_nowait())
                except queue.Empty:
                    break
            want = 0
            for request in batch:
                if request is None:
                    stop = True
                elif request[0] > want:
                    want = request[0]
            try:
                self._commit_round(want)
                if self.fsync_failed and self.sync_on_commit:
                    # Nothing the failed fsync covered was acknowledged: cut it off and roll
                    # it back before its callers hear MISCONF.
                    with self.flush_lock:
                        self._drop_unsynced()
            except BaseException as exc:  # OSErrors are handled inside: a bug, or a test's power cut
                log.error("AOF group commit failed: %r; refusing writes until reopened", exc)
                self.fsync_failed = True
                self.error = self.error or "MISCONF Errors writing to the AOF file"
                self._crash = exc  # raised in the callers this round covered
            # Wake the covered callers one after another, not all at once: each wakes the next
            # (wait_durable), so they take the GIL in turn instead of stampeding for it.
            waiting = [request for request in batch if request is not None]
            for request, after in zip(waiting, waiting[1:], strict=False):
                request[2] = after
            if waiting:
                waiting[0][1].release()

    def _commit_round(self, want: int) -> None:
        if self._crash is not None:  # a broken round left the files unknown: no more I/O
            return
        if self.written_lsn < want:  # buffered under `always`: write everyone's records
            with self.flush_lock:
                self.flush_pending()
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self.synced_lsn < want and not self.fsync_failed:
                self._sync_round()

    def _sync_round(self) -> None:
        """fdatasync everything written so far (self._cond held; released during the sync)."""
        self._syncing = True
        target, fd, mark = self.written_lsn, self.fd, self.written_mark
        self._cond.release()
        failed: OSError | None = None
        try:
            self.fs.fdatasync(fd)
        except OSError as err:
            failed = err
        else:  # written only now: the watermark is never ahead of what is durable
            if self.watermark is not None:
                self.watermark.advance(Watermark(*mark))
        finally:  # also when something else broke the fsync: nobody may wait for it forever
            self._cond.acquire()
            self._syncing = False
            self._cond.notify_all()
        if failed is not None:
            log.error("AOF fsync failed: %s; refusing writes until reopened", failed)
            self.fsync_failed = True
            self.error = misconf(failed)
        else:
            self.fsyncs += 1
            self.synced_lsn = max(self.synced_lsn, target)
            self.synced_mark = max(self.synced_mark, mark)
            if self.sync_on_commit and mark[:2] > self.written_end:
                self.written_end = mark[:2]  # `always`: replicas are sent what is durable
                self._tell_written()

    def _drop_unsynced(self, rollback: bool = True) -> None:
        """After a failed fsync under `always` (engine lock held): nothing written since the
        last good fsync was acknowledged, so it is cut off the file and, with `rollback`, out
        of the engine's state. If the cut itself fails, those LSNs may come back after a
        restart: said in the log, since nothing more can be done on this device."""
        segment, size, lsn = self.synced_mark
        self.pending.clear()
        self.pending_records = 0
        if self.lsn <= lsn:
            return
        dropped = f"LSNs {lsn + 1}-{self.lsn}" if self.lsn > lsn + 1 else f"LSN {self.lsn}"
        if self.written_lsn > lsn:
            if segment != self.written_mark[0]:
                log.error("the AOF's last fsync is in segment %d, not the current one: %s, "
                          "refused, may come back after a restart", segment, dropped)
            else:
                try:
                    self.fs.ftruncate(self.fd, size)
                    self.fs.fdatasync(self.fd)
                except OSError as err:
                    log.error("cannot cut the AOF back to its last fsync (%s): %s, refused, "
                              "may come back after a restart", err, dropped)
            self.size, self.written_lsn = size, lsn
            self.written_mark = (segment, size, lsn)
            self.written_end = min(self.written_end, (segment, size))
        log.error("AOF fsync failed under appendfsync always: %s dropped (not acknowledged)",
                  dropped)
        self.lsn = lsn
        self.room = -self.low_water
        if rollback and self.on_rollback is not None:
            self.on_rollback(lsn)

    def sync(self) -> None:
        """Make everything written so far durable now (any policy)."""
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self.synced_lsn < self.written_lsn and not self.fsync_failed:
                self._sync_round()

    def _every_second(self) -> None:
        """Once a second: retry failed writes; under everysec, fsync while unsynced bytes remain
        (also after writes stop). A tick that fails for any other reason than I/O (a hook the
        retry runs: replication's, a served caller's) is logged and the next one runs: this
        thread is everysec's only fsync, and writes go on meanwhile."""
        next_tick = time.monotonic() + 1.0
        failed = ""
        while True:
            # Its own event, not self._cond: every fsync round notifies _cond, and this thread
            # must not wake thousands of times a second under `always`.
            while (delay := next_tick - time.monotonic()) > 0:
                if self._closing.wait(delay):
                    return
            next_tick += 1.0
            try:
                self._tick()
            except Exception as exc:  # (a try per second: no write's cost)
                if repr(exc) != failed:  # one traceback per kind of failure, not one a second
                    log.exception("the AOF's once-a-second tick failed; ticking on")
                failed = repr(exc)
            else:
                failed = ""

    def _tick(self) -> None:
        with self._cond:
            if (self.policy == "everysec" and self.synced_lsn < self.written_lsn
                    and not self._syncing and not self.fsync_failed):
                self._sync_round()
            retry = self.on_retry
        if self.watermark is not None:
            self.watermark.sync()
        if retry is not None and self.error is not None and not self.fsync_failed:
            retry()

    on_retry: Callable[[], None] | None = None  # set by the data directory (takes engine lock)
    # Called (engine lock held, on the writing thread) after records reach the OS: replication
    # sends them on from the segment file.
    on_written: Callable[[], None] | None = None

    # --- a replica's write path (engine lock held) ---------------------------------------------

    def append_raw(self, data: bytes, first_lsn: int, count: int, buffer: bool = False
                   ) -> None:
        """Log `count` records another node framed and numbered (a replica logs its primary's
        records byte for byte, with their LSNs). `first_lsn` must follow the last LSN. With
        `buffer` they join the buffer `flush_pending` writes (the replica flushes once per
        read from its primary). A failed write is kept and retried in order, as `append`'s
        are; StorageError if this log can never be written again (a failed fsync)."""
        if first_lsn != self.lsn + 1:
            raise StorageError(f"record LSN {first_lsn} does not follow this log's {self.lsn}")
        if self.fsync_failed:
            raise StorageError(self.error or "the AOF cannot be written")
        self.room -= len(data)
        if buffer and not self.unwritten:
            self.lsn += count
            self.pending += data
            self.pending_records += count
            self.pending_raw = True
        elif not self.flush_pending() or self.unwritten:
            self.lsn += count
            self.unwritten.append(data)
        else:
            self.lsn += count
            try:
                self._write(data, count)
            except ReplyError:  # kept; the retry writes it
                self.unwritten.append(data)
        if self.room < 0 and not self.unwritten:
            self._top_up(self.preallocate)

    def reset(self, manifest: Manifest, fd: int, size: int, lsn: int, aof_bytes: int) -> None:
        """Continue on another history (a replica's full sync installed a snapshot): the new
        manifest's last segment, open as `fd` with `size` bytes, after LSN `lsn` (engine lock
        held; nothing may be buffered or awaiting a retry: the old history is dropped)."""
        self._drop_tail()  # (the old history's segment)
        with self._cond:
            while self._syncing:
                self._cond.wait()
            with self.manifest_lock:
                old = self.fd
                self.manifest, self.fd, self.size = manifest, fd, size
                self.written_end = (manifest.segments[-1].segment, size)
                self.written_mark = self.synced_mark = (manifest.segments[-1].segment, size, lsn)
            self.lsn = self.written_lsn = self.synced_lsn = lsn
            self.pending.clear()
            self.pending_records = 0
            self.pending_raw = False
            self.unwritten.clear()
            self.error = None
            self.aof_bytes = aof_bytes
            if old >= 0:
                with contextlib.suppress(OSError):
                    self.fs.close(old)
            self.room = -self.low_water if self.preallocate else UNLIMITED
            self._top_up(self.preallocate)

    # --- segments ------------------------------------------------------------------------------

    def _rotate(self) -> bool:
        """Start a new segment (engine lock held): sync and close the old one, create the new
        one durably, then switch the manifest to it. False if that failed (writes are then
        refused until the directory is reopened)."""
        # A closed segment ends at its last record: replication reads one to its size.
        if self.tail is not None and not self._release_tail():
            return False
        with self._cond:
            while self._syncing:
                self._cond.wait()
            failed = False
            if not self.fsync_failed:
                try:
                    self.fs.fdatasync(self.fd)
                    self.fsyncs += 1
                    self.synced_lsn = self.written_lsn
                    # (called from _write before written_mark catches up with its record)
                    self.synced_mark = (self.written_mark[0], self.size, self.written_lsn)
                except OSError as err:
                    log.error("AOF fsync failed: %s; refusing writes until reopened", err)
                    self.fsync_failed = failed = True
                    self.error = misconf(err)
                    self._cond.notify_all()
            if not failed:
                return self._switch_segment()
        if self.sync_on_commit:
            self._drop_unsynced()
        return False

    def _switch_segment(self) -> bool:
        """_rotate's second half, the old segment synced (self._cond held)."""
        with self.manifest_lock:
            last = self.manifest.segments[-1]
            entry = SegmentEntry(manifest_mod.segment_file(last.segment + 1),
                                 last.segment + 1, self.lsn + 1)
            try:
                fd = create_segment(self.fs, self.directory, entry)
            except OSError as err:
                # Nothing references the new segment and the current one is intact, so
                # keep appending to it and retry later, whatever failed: descriptors, or
                # the new file's write, fdatasync or directory fsync (EIO, ENOSPC). A
                # failing disk then shows in the current segment's own writes and fsyncs,
                # which refuse writes (MISCONF) as they always do. (Found by crashbench's
                # ioerror mode: an EIO here escaped the command as an exception.)
                self._postpone_rotation(err, entry)
                self._cond.notify_all()
                return False
            try:
                self.manifest.segments.append(entry)
                manifest_mod.store(self.fs, self.directory, self.manifest)
            except OSError as err:
                if isinstance(err, manifest_mod.ManifestUnchanged) \
                        and err.errno in TRANSIENT_ERRNOS:  # nothing renamed: retry later
                    self.manifest.segments.pop()
                    self.fs.close(fd)
                    self._postpone_rotation(err, entry)
                    self._cond.notify_all()
                    return False
                # Which manifest is durable is now unknown (a rename may be in place
                # without its directory fsync). Both reopen consistently as long as
                # nothing more is written: refuse writes until the directory is reopened,
                # as for a failed fsync.
                log.error("AOF rotation failed: %s; refusing writes until reopened", err)
                self.fsync_failed = True
                self.error = misconf(err)
                self._cond.notify_all()
                return False
        with contextlib.suppress(OSError):  # what was allocated past its end goes back
            self.fs.ftruncate(self.fd, self.size)
        self.fs.close(self.fd)
        self.fd = fd
        self.size = self.fs.size(os.path.join(self.directory, entry.file))
        self.written_end = (entry.segment, self.size)
        self.written_mark = self.synced_mark = (entry.segment, self.size, self.written_lsn)
        self.aof_bytes += self.size
        log.info("AOF rotated to %s (first LSN %d)", entry.file, entry.first_lsn)
        self._cond.notify_all()
        # The old segment, fsynced whole above, is now replicas' to read to its end. Under
        # `always` no sync round follows for the records that fsync covered (their callers find
        # synced_lsn past them), so replicas are told here, or the last of them waits for the
        # next write (engine lock held, as on_written needs).
        self._tell_written()
        if self.preallocate:
            self.room = -self.low_water
            self._top_up(self.preallocate)
        return True

    def _postpone_rotation(self, err: OSError, entry: SegmentEntry) -> None:
        """The new segment could not be created (out of descriptors, EMFILE/ENFILE, or an I/O
        error on it): nothing was lost and the manifest was not touched, so keep appending to
        the current segment (it is still good) and try again on a later write. A half-made
        segment file is unreferenced; the retry truncates it, an open removes it."""
        transient = err.errno in TRANSIENT_ERRNOS
        (log.warning if transient else log.error)(
            "AOF rotation postponed: %s; still writing to the current segment", err)
        self.rotate_retry_at = time.monotonic() + (ROTATE_RETRY_SECONDS if transient
                                                   else ROTATE_RETRY_SECONDS_IO)
        with contextlib.suppress(OSError):
            self.fs.unlink(os.path.join(self.directory, entry.file))

    def rotate_for_snapshot(self) -> tuple[int, list[SegmentEntry]] | None:
        """Close the current segment so a snapshot can cover everything before the next one
        (engine lock held). Returns (last LSN covered, the closed segments after the current
        snapshot), or None if writes are refused. A current segment with no record is not
        rotated: the segments before it already end at the last LSN."""
        if not self.flush_pending() or self.fsync_failed or self.unwritten:
            return None
        if self.size > HEADER_SIZE and not self._rotate():
            return None
        with self.manifest_lock:
            closed = list(self.manifest.segments[:-1])
        return self.lsn, closed

    def stop_threads(self) -> None:
        """Stop the background threads (no I/O of its own). close() starts with it; a test
        that abandons an engine as a dead process would calls it alone."""
        self._closing.set()
        self._ticker.join()
        self._requests.put(None)  # after every request already queued: they are served first
        self._syncer_thread.join()

    def close(self) -> None:
        """Stop the background threads, fsync what was written, close the segment."""
        self.stop_threads()
        self.on_rollback = None  # the engine is going away: nothing to roll back in memory
        if self.fd >= 0 and not self.fsync_failed:
            self.flush_pending()
        if not self.fsync_failed:
            self.sync()
            if self.fsync_failed and self.sync_on_commit:
                self._drop_unsynced(rollback=False)
        if self.watermark is not None:
            self.watermark.close()
        self._drop_tail()
        if self.fd >= 0 and self.preallocate:
            with contextlib.suppress(OSError):  # what was allocated past its end goes back
                self.fs.ftruncate(self.fd, self.size)
        self.fs.close(self.fd)
        # The descriptor number will be reused by the next file anyone opens: never write
        # through it again. Writes are refused the way MISCONF refuses them; reads go on.
        self.fd = -1
        self.fsync_failed = True
        self.error = "ERR the data directory is closed"


class _CallbackRelease:
    """A group-commit request's wake-up that calls back instead of releasing a waiting
    thread (`Journal.when_durable`), then wakes the next caller of its round at once, as a
    woken thread would (wait_durable).

    The callback is the caller's code, run on the group-commit thread (or on the thread of a
    wait_durable caller woken before it in the round): what it raises is the caller's loss
    (logged), never that thread's end nor the journal's failure. The callbacks that follow
    in the round are called here in turn, a loop rather than a call each (a round may cover
    thousands of them); the first caller waiting in a thread is woken and wakes the rest."""

    def __init__(self, done: Callable[[], None], request: list) -> None:
        self.done = done
        self.request = request

    def release(self) -> None:
        request = self.request
        while True:
            try:
                request[1].done()
            except Exception:  # (a try costs a write nothing unless its callback raises)
                log.exception("a durable write's callback failed; the group commit goes on")
            except BaseException:  # a signal in the thread running the round's wake-ups
                if request[2] is not None:
                    request[2][1].release()  # the callers after this one still wake
                raise
            after = request[2]
            if after is None:
                return
            if type(after[1]) is not _CallbackRelease:
                after[1].release()  # a thread waiting in wait_durable: it wakes the rest
                return
            request = after


def _pass_on_later(request: list) -> None:
    """A caller interrupted while waiting for its round: the callers after it in that round
    are woken through it, so a helper thread waits for its wake-up and passes it on."""
    def pass_on() -> None:
        request[1].acquire()
        if request[2] is not None:
            request[2][1].release()

    threading.Thread(target=pass_on, name="aof-pass-on", daemon=True).start()


def create_segment(fs: FileSystem, directory: str, entry: SegmentEntry) -> int:
    """Create a segment holding only its header, durable (file and directory entry) before
    anything relies on it. Returns the fd, open for appending."""
    path = os.path.join(directory, entry.file)
    fd = fs.open_write_new(path)
    try:
        fs.write(fd, encode_header(entry.segment, entry.first_lsn))
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.fsync_dir(directory)
    return fs.open_append(path, create=False)
