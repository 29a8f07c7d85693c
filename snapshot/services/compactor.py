"""Background compaction: fold the closed AOF segments into a new snapshot, switch atomically.

Owns when to compact (Redis's auto-aof-rewrite-min-size and auto-aof-rewrite-percentage, or on
demand) and the steps, each of which leaves a directory that opens to the same state:

    1. rotate      under the engine lock, the journal closes the current segment; the snapshot
                   will cover every LSN before the new one. Writes go on into the new segment.
                   The change clock ticks and the streams' numbers in the new snapshot are
                   noted (engine.model.residency: which nodes it will hold as they are).
    2. build       a child process (snapshot.services.build, kept between compactions: it goes on
                   from the state it wrote last instead of loading it again) loads the
                   previous snapshot, replays the
                   closed segments through the engine's apply path and writes the segmented
                   snapshot-<lsn>.mdb.tmp, and part-<lsn>.mdb.tmp with the nodes that changed
                   (the others stay in the part files they are in; snapshot.segments). A crash
                   here leaves temp files nobody names.
    3. publish     fdatasync the files, rename them to snapshot-<lsn>.mdb and part-<lsn>.mdb,
                   fsync the directory. Still named by nobody: the old snapshot and segments
                   are the state. A crash from here to the switch leaves them as orphans,
                   not a state: the next open removes every snapshot and part file the
                   manifest does not name, with a WARNING naming it (aof.recovery).
    4. switch      replace the manifest with (new snapshot, segments after it): the one atomic
                   step. Before it the old files are the state, after it the new ones.
                   Under the engine lock the streams are bound to the new file: their cold
                   nodes are read from it from now on, and the nodes unchanged since step 1
                   may go cold; with a backlog-memory budget, so are the big values kept as
                   nodes (a long list's) to the index of their nodes the file holds (read
                   before, outside the lock), whose nodes of exactly those bytes may go cold. The old file, unlinked in step 5, stays readable while a
                   stream still refers to it.
    5. remove      delete the old snapshot, the part files the new one no longer refers to
                   and the closed segments (a crash, or a failure to
                   delete, leaves them for the next open to delete: the manifest no longer
                   names them). The compaction has succeeded at the switch: what goes wrong
                   here is a warning, not a failure.

Every file operation goes through the file-layer seam, except the child's writes of its own
temp file (LMDB's), which nothing relies on until step 3 syncs it. Must not touch: engine state
(the child has its own engine), the record or snapshot formats.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from streamkeep.aof import manifest as manifest_mod
from streamkeep.aof.fs import FileSystem
from streamkeep.aof.manifest import Manifest, PartEntry, SegmentEntry, SnapshotEntry
from streamkeep.engine.exec.settings import (
    parse_size,  # Redis's memory units; engine.services.datadir imports it from here
)
from streamkeep.engine.model.bucket_table import process_seed
from streamkeep.engine.model.value_types import TYPES
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.integrity import child_env
from streamkeep.snapshot.layout import file_checksum
from streamkeep.snapshot.reader import SnapshotError, file_chunks
from streamkeep.snapshot.services.load import (
    bind_node_indexes,
    bind_table_indexes,
    node_indexes,
    noded_values,
    table_indexes,
    tabled_values,
)
from streamkeep.snapshot.writer import stream_numbers

if TYPE_CHECKING:
    import subprocess

    from streamkeep.engine.model.stream import Stream
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.snapshot")

DEFAULT_MIN_SIZE = 64 << 20  # Redis's auto-aof-rewrite-min-size default (64mb)
DEFAULT_PERCENTAGE = 100  # Redis's auto-aof-rewrite-percentage default
# After a failed compaction, the backlog budget's requests wait this long: a budget that cannot
# be kept must not start a doomed build (or log a refusal) on every command.
PRESSURE_RETRY_S = 5.0

class CompactionLog(Protocol):
    """What the compactor needs of the append-only file (aof.journal.Journal implements it):
    the manifest it switches (under `manifest_lock`), the rotation that closes the segments a
    snapshot covers, and the auto trigger (`on_rewrite` fires once `aof_bytes` reaches
    `rewrite_at`)."""

    manifest: Manifest
    manifest_lock: threading.Lock
    aof_bytes: int
    rewrite_at: float
    on_rewrite: Callable[[], None] | None

    @property
    def refusing_writes(self) -> bool:
        """A failed fsync or a write awaiting its retry: nothing may be compacted."""
        ...

    def rotate_for_snapshot(self) -> tuple[int, list[SegmentEntry]] | None:
        """Start a new segment (engine lock held); the last LSN before it and the closed
        segments, or None when writes are refused."""
        ...


# The phase a compaction is in after each step (Compactor._step's names).
_PHASE_AFTER = {"rotated": "replay", "spawned": "replay", "built": "publish",
                "published": "switch", "switched": "remove", "removed": "done"}


class CompactionError(StorageError):
    """A compaction did not complete; the directory still holds the previous state."""


@dataclass(slots=True)
class Job:
    lsn: int  # the last LSN the new snapshot covers
    closed: list[SegmentEntry]
    base: SnapshotEntry | None
    created_ms: int
    tick: int = 0  # the change clock at the rotation: nodes changed before it are in the file
    numbering: list[tuple[Stream, int]] = field(default_factory=list)  # streams' numbers in it
    config: dict = field(default_factory=dict)  # node limits the build replays with
    done: threading.Event = field(default_factory=threading.Event)
    proc: subprocess.Popen | None = None
    result: SnapshotEntry | None = None
    error: str | None = None
    # where it is (INFO persistence): rotate, replay, write, publish, switch, remove; what the
    # build child said last of the records it replayed and the nodes it wrote
    phase: str = "rotate"
    records: int = 0
    nodes: int = 0


class _Checksum:
    """A file's whole-file checksum, computed in a thread of its own (zlib and pread let go of
    the GIL: it runs beside the fsync and the server)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.value: int | None = None
        self.error: OSError | StorageError | None = None
        self.thread = threading.Thread(target=self._run, name="snapshot-checksum", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.value = file_checksum(file_chunks(self.path))
        except (OSError, StorageError) as err:
            self.error = err

    def result(self) -> int:
        self.thread.join()
        if self.value is None:
            raise CompactionError(f"{self.path}: cannot read it for its checksum: {self.error}")
        return self.value


def _spawn_builder() -> subprocess.Popen:
    """Start a build child from a thread of its own that lives as long as the child: the child
    dies with the thread that started it (PR_SET_PDEATHSIG is per thread), and a compaction's
    thread ends with the compaction while the child serves the next ones. The child is in a
    session of its own: the terminal's Ctrl-C and hang-up reach the process that owns the
    engine, which decides (closing the engine stops the child), never the child directly."""
    import subprocess  # (a compaction's, not every engine start's)

    started: list[subprocess.Popen | BaseException] = []
    ready = threading.Event()

    def parent() -> None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "streamkeep.snapshot.services.build", "--serve",
                 str(os.getpid())],  # it checks we are still its parent once it can die with us
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True, env=child_env(),
                start_new_session=True)
        except BaseException as err:  # (OSError: no process could be started)
            started.append(err)
            ready.set()
            return
        started.append(proc)
        ready.set()
        proc.wait()

    threading.Thread(target=parent, name="snapshot-build-parent", daemon=True).start()
    ready.wait()
    if isinstance(started[0], BaseException):
        raise started[0]
    return started[0]


class Compactor:
    def __init__(self, engine: EngineCore, fs: FileSystem, directory: str, journal: CompactionLog,
                 min_size: object = DEFAULT_MIN_SIZE,
                 percentage: int | str = DEFAULT_PERCENTAGE) -> None:
        self.engine = engine
        self.fs = fs
        self.directory = directory
        self.journal = journal
        self.min_size = parse_size(min_size)
        self.percentage = int(percentage)
        if self.min_size < 0 or self.percentage < 0:
            raise ValueError("auto-aof-rewrite-min-size and -percentage must be >= 0")
        snap = journal.manifest.snapshot
        self.snapshot_size = snap.total_size if snap is not None else 0
        self.job: Job | None = None
        self.runs = 0
        self.last_status = "ok"
        self.last_error: str | None = None
        # INFO's figures of the last compaction: how long it took (whole seconds, -1 before
        # the first ends), failures in a row, and how long starting it held the engine lock
        # (Redis's latest_fork_usec: the pause a client sees).
        self.last_seconds = -1
        self.failures_in_row = 0
        self.start_usec = 0
        self._stopping = False
        self.paused = False  # a replica installing its primary's snapshot: start none now
        self.pressure_after = 0.0  # time.monotonic() before which `request` starts nothing
        self._thread: threading.Thread | None = None
        self._child: subprocess.Popen | None = None  # the build child, serving job after job
        # Called with each step's name as it completes (crash tests kill the process there).
        self.on_step: Callable[[str], None] | None = None
        journal.on_rewrite = self._auto
        engine.residency.on_pressure = self.request
        journal.rewrite_at = self.threshold()
        engine.on_config(("auto-aof-rewrite-percentage", "auto-aof-rewrite-min-size"),
                         self._apply_trigger_config)

    def _apply_trigger_config(self) -> None:
        """CONFIG SET of the rewrite trigger (engine lock held)."""
        config = self.engine.config
        self.percentage = int(config["auto-aof-rewrite-percentage"])
        self.min_size = int(config["auto-aof-rewrite-min-size"])
        if self.job is None:  # a running compaction resets the trigger when it ends
            self.journal.rewrite_at = self.threshold()

    def threshold(self) -> float:
        """AOF bytes since the snapshot at which the auto trigger fires (inf: never)."""
        if self.percentage <= 0:
            return float("inf")
        return max(self.min_size, self.snapshot_size * self.percentage / 100, 1)

    # --- starting (engine lock held) -----------------------------------------------------------

    def _auto(self) -> None:
        """The journal's `on_rewrite`, on the thread that wrote (a caller's, the group-commit
        thread): a compaction that cannot start is recorded as failed, never raised there."""
        self.journal.rewrite_at = float("inf")
        if self._stopping:
            return
        try:
            job = self.start_locked()
        except CompactionError:  # (recorded: INFO's last status; the trigger re-armed)
            return
        if job is None and self.job is None:
            self.journal.rewrite_at = self.threshold()

    def request(self) -> None:
        """The stream nodes in memory are over their budget and some changed since the
        snapshot: compact now rather than at the AOF size trigger (engine lock held, on the
        thread that wrote: a start that fails is recorded, not raised there)."""
        if (self.job is None and not self._stopping and not self.paused
                and time.monotonic() >= self.pressure_after):
            with contextlib.suppress(CompactionError):
                self.start_locked()

    def start_locked(self) -> Job | None:
        """Rotate and launch a compaction; None when there is nothing to compact.
        CompactionError, recorded as a failed compaction, if it cannot be launched (no thread
        can be started): nothing runs, and the next trigger tries again."""
        if self.job is not None:
            return self.job
        if self._stopping:
            raise CompactionError("the data directory is closed")
        if self.paused:
            return None
        began = time.perf_counter_ns()
        rotated = self.journal.rotate_for_snapshot()
        if rotated is None:
            self._failed(None, "the AOF refuses writes; not compacting")
            return None
        lsn, closed = rotated
        if not closed:
            return None
        try:
            return self._launch(lsn, closed, began)
        except Exception as err:  # (RuntimeError: can't start new thread; or a bug)
            log.exception("cannot start a compaction")
            self.job = None
            self._failed(None, f"cannot start: {err!r}")
            self.journal.rewrite_at = self.journal.aof_bytes + self.threshold()
            raise CompactionError(self.last_error or "cannot start a compaction") from err

    def _launch(self, lsn: int, closed: list[SegmentEntry], began: int) -> Job:
        """start_locked's second half, the segments closed: the job noted, its thread started."""
        engine = self.engine
        job = self.job = Job(lsn, closed, self.journal.manifest.snapshot, engine.clock())
        job.tick = engine.residency.rotated()
        job.numbering = [(s, number) for number, _db, _key, s in stream_numbers(engine.dbs)]
        # The node limits shape the nodes the child's replay makes: the parent's, so that its
        # snapshot holds the nodes the parent holds (value nodes go cold by their bytes).
        job.config = {name: engine.config[name]
                      for name in ("stream-node-max-entries", "stream-node-max-bytes",
                                   *(name for vt in TYPES if vt.nodes is not None
                                     for name in vt.nodes.shaped_by))}
        self.journal.rewrite_at = float("inf")
        self.start_usec = (time.perf_counter_ns() - began) // 1000
        engine.monitoring.started_compaction(self.start_usec)
        thread = threading.Thread(target=self._run, args=(job,), name="compactor", daemon=True)
        thread.start()
        self._thread = thread  # (stop() joins it: only once it started)
        return job

    def compact(self, wait: bool = True) -> SnapshotEntry | None:
        """Start a compaction now (after the running one, if any, when waiting). With wait,
        returns the new snapshot's entry (None if there was nothing to compact) or raises
        CompactionError."""
        with self.engine.lock:
            job = self.job
        if job is not None:
            if not wait:
                return None
            job.done.wait()
        with self.engine.lock:
            job = self.start_locked()
            # Not started because the AOF refuses writes (a failed fsync, or a failed write
            # awaiting its retry): that is a failure, not "nothing to compact".
            refused = job is None and not self._stopping and self.journal.refusing_writes
        if refused:
            raise CompactionError(self.last_error or "the AOF refuses writes; not compacting")
        if job is None:
            return None
        if not wait:
            return None
        job.done.wait()
        if job.error is not None:
            raise CompactionError(job.error)
        return job.result

    # --- the background steps ------------------------------------------------------------------

    def _step(self, name: str) -> None:
        log.debug("compaction step %s", name)
        job = self.job
        if job is not None:
            job.phase = _PHASE_AFTER.get(name, job.phase)
        if self.on_step is not None:
            self.on_step(name)

    @staticmethod
    def _progress(job: Job, line: bytes) -> bool:
        """A build child's progress line, noted in `job`; False for any other line."""
        if not line.startswith(b'{"progress"'):
            return False
        with contextlib.suppress(ValueError, KeyError, TypeError):
            said = json.loads(line)["progress"]
            job.phase = str(said["phase"])
            job.records, job.nodes = int(said["records"]), int(said["nodes"])
        return True

    def _run(self, job: Job) -> None:
        tmp = os.path.join(self.directory, manifest_mod.snapshot_file(job.lsn) + ".tmp")
        part_tmp = os.path.join(self.directory, manifest_mod.part_file(job.lsn) + ".tmp")
        try:
            self._step("rotated")
            entry = self._build(job, tmp, part_tmp)
            if entry is not None:
                self._switch(job, entry)
                job.result = entry
                self.last_status, self.last_error = "ok", None
                self.runs += 1
                self.failures_in_row = 0
        except (OSError, CompactionError) as err:
            with self.engine.lock:
                self._failed(job, str(err))
            self._discard(tmp, part_tmp)
        except Exception as err:  # a bug: report it, keep the engine and directory as they are
            log.exception("compaction crashed")
            with self.engine.lock:
                self._failed(job, f"internal error: {err!r}")
            self._discard(tmp, part_tmp)
        finally:
            with self.engine.lock:
                self.job = None
                self.last_seconds = max(self.engine.clock() - job.created_ms, 0) // 1000
                if job.error is None:
                    self.journal.rewrite_at = self.threshold()
            job.done.set()

    def _build(self, job: Job, tmp: str, part_tmp: str) -> SnapshotEntry | None:
        """Steps 2 and 3: the child writes the files; we make them durable under their final
        names."""
        self._discard(tmp, part_tmp)
        spec = {
            "dir": self.directory, "base": job.base.file if job.base else None,
            "segments": [[s.file, s.segment, s.first_lsn] for s in job.closed],
            "lsn": job.lsn, "out": os.path.basename(tmp),
            "part_out": os.path.basename(part_tmp), "repl_id":
            self.journal.manifest.repl_id, "created_ms": job.created_ms,
            "parent": os.getpid(),  # the child checks it is still ours once it can die with us
            "config": job.config,
            # (the tables it makes by replay are placed as ours are: their runs can go cold)
            "table_seed": process_seed().hex(),
            "progress": True,  # lines before the result: INFO persistence's phase and counts
        }
        proc = job.proc = self._builder()
        if self._stopping:  # close() ran before the child existed to be killed
            proc.kill()
        self._step("spawned")
        line = b""
        with contextlib.suppress(OSError, ValueError):  # (a killed child: a broken pipe)
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            while self._progress(job, line):
                line = proc.stdout.readline()
        if self._stopping:
            self._discard(tmp, part_tmp)
            raise CompactionError("stopped: the data directory is closing")
        if not line:
            self._child = None
            raise CompactionError(f"snapshot build exited with status {proc.wait()}")
        try:
            result = json.loads(line)
            if not result["ok"]:
                raise CompactionError(f"snapshot build failed: {result['error']}")
            names, new_part = list(result["parts"]), bool(result["new_part"])
        except (ValueError, KeyError, TypeError) as bad:
            raise CompactionError(f"snapshot build: an unreadable result ({bad})") from None
        self._step("built")
        # The parts the new snapshot keeps, then (last in its list) the one it wrote.
        parts = [self._kept_part(job, name) for name in (names[:-1] if new_part else names)]
        if new_part:
            size, crc32 = self._sync(part_tmp)
            parts.append(PartEntry(manifest_mod.part_file(job.lsn), size, crc32))
            self.fs.rename(part_tmp, os.path.join(self.directory, parts[-1].file))
        size, crc32 = self._sync(tmp)
        final = os.path.join(self.directory, manifest_mod.snapshot_file(job.lsn))
        self.fs.rename(tmp, final)
        self.fs.fsync_dir(self.directory)
        self._step("published")
        return SnapshotEntry(manifest_mod.snapshot_file(job.lsn), job.lsn, size, job.created_ms,
                             crc32, tuple(parts))

    def _builder(self) -> subprocess.Popen:
        """The build child, started when there is none (or it died)."""
        child = self._child
        if child is None or child.poll() is not None:
            child = self._child = _spawn_builder()
        return child

    def _sync(self, path: str) -> tuple[int, int]:
        """fdatasync a written file; its size and whole-file checksum (the manifest's crc32,
        read from the page cache while the fdatasync writes the file out: the one costs about
        what the other hides)."""
        fd = self.fs.open_append(path, create=False)
        summing = _Checksum(path)
        try:
            self.fs.fdatasync(fd)
        finally:
            self.fs.close(fd)
            summing.thread.join()
        return self.fs.size(path), summing.result()

    def _kept_part(self, job: Job, name: str) -> PartEntry:
        """The manifest's entry for a part file the new snapshot keeps: the previous
        snapshot's entry for it (the previous snapshot's own file, when that was a
        self-contained one)."""
        base = job.base
        if base is not None:
            for part in base.parts:
                if part.file == name:
                    return part
            if name == base.file:
                crc32 = base.crc32
                if crc32 is None:  # recorded by a version before checksums
                    crc32 = file_checksum(file_chunks(os.path.join(self.directory, name)))
                return PartEntry(name, base.size, crc32)
        raise CompactionError(f"snapshot build: refers to {name}, not a part of "
                              f"{base.file if base else 'an empty directory'}")

    def _switch(self, job: Job, entry: SnapshotEntry) -> None:
        """Steps 4 and 5."""
        journal = self.journal
        with journal.manifest_lock:
            old = journal.manifest
            later = [s for s in old.segments if s.first_lsn > job.lsn]
            new = Manifest(later, entry, old.repl_id, old.repl_id2, old.repl_offset2)
            # If this fails the durable manifest may be either one; both name files that
            # exist, and nothing is deleted, so either opens to the same state.
            manifest_mod.store(self.fs, self.directory, new)
            journal.manifest = new
        self._bind(job, os.path.join(self.directory, entry.file))
        self._step("switched")
        # Switched: the compaction has succeeded. A file that cannot be removed now is named by
        # nobody and the next open removes it; its segments are not AOF since the snapshot any
        # more either way (counting them would fire the auto trigger on every write).
        obsolete = [s.file for s in job.closed]
        if job.base is not None:
            obsolete += [name for name in job.base.files if name not in entry.files]
        freed = 0
        for name in obsolete:
            path = os.path.join(self.directory, name)
            try:
                if name.endswith(".aof"):
                    freed += self.fs.size(path)
                self.fs.unlink(path)
            except OSError as err:
                log.warning("cannot remove %s (the next open will): %s", name, err)
        try:
            self.fs.fsync_dir(self.directory)
        except OSError as err:  # the removals may come back after a crash: the open removes them
            log.warning("cannot fsync %s after removing compacted files: %s", self.directory,
                        err)
        with self.engine.lock:
            journal.aof_bytes -= freed
            self.snapshot_size = entry.total_size
        log.info("compacted LSNs up to %d into %s (%d bytes); removed %s", job.lsn, entry.file,
                 entry.size, ", ".join(obsolete))
        self._step("removed")

    def _bind(self, job: Job, path: str) -> None:
        """Point the streams the new snapshot holds at it (see step 4). A file that cannot be
        opened leaves them on the previous one: still correct, only nothing new goes cold."""
        try:
            store = SnapshotNodes(path, job.tick)
        except (OSError, SnapshotError) as err:
            log.warning("cannot open %s for cold stream nodes: %s", path, err)
            return
        engine = self.engine
        with engine.lock:
            budget = engine.residency.budget > 0
            found = noded_values(engine.keyspaces) if budget else []
            tables = tabled_values(engine.keyspaces) if budget else []
        indexed = node_indexes(store, found)  # (read outside the lock: the store is ours)
        runs = table_indexes(store, tables)
        with engine.lock:
            residency = engine.residency
            for stream, number in job.numbering:
                residency.bind(stream, store, number)
            bind_node_indexes(residency, indexed, store.clean_before, engine.keyspaces)
            bind_table_indexes(residency, runs, engine.keyspaces)
            residency.switched(store)
        job.numbering = []

    def _failed(self, job: Job | None, error: str) -> None:
        """Record a failure (engine lock held). Abandoning a build because the directory is
        closing is not one: nothing went wrong, the next open has the same state."""
        if self._stopping:
            log.info("compaction abandoned: the data directory is closing")
            if job is not None:
                job.error = error
            return
        log.error("compaction failed: %s", error)
        self.last_status, self.last_error = "err", error
        self.failures_in_row += 1
        self.pressure_after = time.monotonic() + PRESSURE_RETRY_S
        if job is not None:
            job.error = error
            # Do not retry at once: wait until as much again has been written.
            self.journal.rewrite_at = self.journal.aof_bytes + self.threshold()

    def _discard(self, *paths: str) -> None:
        for path in paths:
            try:
                if self.fs.exists(path):
                    self.fs.unlink(path)
            except OSError as err:
                log.warning("cannot remove %s: %s", path, err)

    def stop(self) -> None:
        """Abandon a running compaction (the directory is closing): kill the child, wait."""
        with self.engine.lock:
            self._stopping = True
            job, thread, child = self.job, self._thread, self._child
        for proc in {id(p): p for p in (child, job.proc if job else None) if p}.values():
            if proc.poll() is None:
                proc.kill()
        if thread is not None:
            thread.join()
        if child is not None:
            child.wait()
            for pipe in (child.stdin, child.stdout):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
