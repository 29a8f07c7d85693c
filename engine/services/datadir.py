"""A durable data directory: the engine, its AOF and its snapshots composed.

Owns opening a directory for an engine (the exclusive lock; loading the manifest's snapshot
into the engine, then replaying the segments after it, in manifest order, through the engine's
apply path; wiring the journal into the engine and the compactor beside it), and what the
directory does for the engine afterwards: the `Persistence` interface (compaction, SAVE and
BGSAVE, INFO persistence, the appendfsync hook) and replication's hooks (the history's names, a
replica's full sync installing its primary's snapshot). What the log's files mean when the
directory opens (new, orphans, damage) is aof.recovery's; a snapshot that is not the
manifest's (its size, or not a snapshot of the manifest's LSN) refuses to open here.
Must not touch: command semantics, the record format, the snapshot format.

Directory layout: `LOCK`, `manifest.json`, `watermark`, `snapshot-NNNNNNNNNNNN.mdb` (at most one
named by the manifest), `segment-NNNNNN.aof`... Opening loads the manifest's snapshot, then
replays only the segments after it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import TYPE_CHECKING

from streamkeep.aof import manifest as manifest_mod
from streamkeep.aof import watermark as watermark_mod
from streamkeep.aof.codec import HEADER_SIZE
from streamkeep.aof.fs import FileSystem, LockedError, RealFS
from streamkeep.aof.journal import DEFAULT_PREALLOCATE, POLICIES, Journal, create_segment
from streamkeep.aof.manifest import Manifest, PartEntry, SegmentEntry, SnapshotEntry
from streamkeep.aof.recovery import (
    LOCK_FILE,
    AOFCorruptError,
    initialise,
    judge_segment,
    open_segment,
    remove_orphans,
)
from streamkeep.aof.watermark import Watermark, WatermarkLog
from streamkeep.engine.commands.connection import last_save_time
from streamkeep.engine.exec.functions import adopt_functions
from streamkeep.engine.exec.interfaces import Fields, PersistenceStatus, persistence_fields
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot.reader import SnapshotError
from streamkeep.snapshot.services.compactor import (
    DEFAULT_MIN_SIZE,
    DEFAULT_PERCENTAGE,
    Compactor,
    parse_size,
)
from streamkeep.snapshot.services.load import load_snapshot

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.aof")

DEFAULT_SEGMENT_MAX_BYTES = 64 << 20


@dataclass(slots=True)
class Recovered:
    manifest: Manifest
    fd: int
    size: int
    last_lsn: int
    records: int
    aof_bytes: int  # the segments' total size: the AOF written since the snapshot
    watermark: WatermarkLog  # at (last segment, size, last_lsn): all of it is durable now


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("yes", "no", "true", "false", "1", "0"):
            raise ValueError(f"expected yes or no, not {value!r}")
        return value.lower() in ("yes", "true", "1")
    return bool(value)


class DataDir:
    """An open data directory: its lock, journal and compactor. Implements the engine's
    `Persistence` interface (streamkeep.engine.exec.interfaces) and registers, on the engine
    it serves, the hooks of what it owns: appendfsync (the journal) and INFO persistence."""

    def __init__(self, engine: EngineCore, fs: FileSystem, path: str, lock_fd: int,
                 journal: Journal, compactor: Compactor) -> None:
        self.engine = engine
        self.fs = fs
        self.path = path
        self.lock_fd = lock_fd
        self.journal = journal
        self.compactor = compactor
        engine.on_config(("appendfsync",),
                         lambda: journal.set_policy(engine.config["appendfsync"]))
        engine.on_config(("aof-preallocate",),
                         lambda: journal.set_preallocate(int(engine.config["aof-preallocate"])))
        engine.on_config(("aof-mapped-appends",),
                         lambda: journal.set_mapped(bool(engine.config["aof-mapped-appends"])))
        engine.add_info_section("persistence", self._info_persistence)
        journal.on_rollback = self._rollback_locked

    def _rollback_locked(self, lsn: int) -> None:
        """The journal dropped records the engine had applied (they could not be written, or
        under `always` an fsync failed under them): make the engine's state the log's again,
        which ends at `lsn` (engine lock held). The state is reloaded as a restart would load
        it (the snapshot, then the segments up to `lsn`) and swapped in whole, so that the
        commands answered MISCONF leave nothing in memory either. If the log cannot be read
        back, writes stop until the directory is reopened (its state is then the log's)."""
        engine = self.engine
        started = time.perf_counter()
        try:
            fresh = type(engine)(clock=engine.clock)
            fresh.config.update(engine.config)
            fresh.apply_config()
            load_state(self.fs, self.path, self.journal.manifest, fresh, lsn)
        except (OSError, StorageError) as err:
            log.error("cannot reload the state after dropping records past LSN %d: %s", lsn, err)
            self.journal.stop_writes(
                f"ERR records the AOF could not take were dropped, but the state could not be "
                f"reloaded without them ({err}); writes are refused until the data directory "
                f"is reopened")
            return
        engine.replay.roll_back(fresh.keyspaces, fresh.expires)
        adopt_functions(engine, fresh)  # the log's function libraries
        log.warning("the AOF could not take the last records: they were dropped and the state "
                    "rolled back to LSN %d (reloaded in %.3f s)", lsn,
                    time.perf_counter() - started)

    # --- the Persistence interface --------------------------------------------------------------

    @property
    def repl_id(self) -> str:
        return self.journal.manifest.repl_id

    def compact(self, wait: bool = True) -> SnapshotEntry | None:
        return self.compactor.compact(wait)

    def start_background_save(self) -> bool:
        if self.compactor.job is not None:
            return False
        self.compactor.start_locked()
        return True

    def last_save_ms(self) -> int | None:
        snap = self.journal.manifest.snapshot
        return snap.created_ms if snap is not None else None

    def status(self) -> PersistenceStatus:
        journal, compactor = self.journal, self.compactor
        snap = journal.manifest.snapshot
        base = snap.size if snap is not None else 0
        job = compactor.job
        return PersistenceStatus(
            changes_since_save=journal.lsn - (snap.lsn if snap is not None else 0),
            saving_since_ms=job.created_ms if job is not None else None,
            last_status=compactor.last_status,
            saves=compactor.runs,
            aof_ok=journal.error is None,
            aof_current_size=base + journal.aof_bytes,
            aof_base_size=base,
            fsync_pending=journal.synced_lsn < journal.written_lsn,
            last_seconds=compactor.last_seconds,
            failures_in_row=compactor.failures_in_row,
            aof_buffer=len(journal.pending),
            compaction_phase=job.phase if job is not None else "",
            compaction_records=job.records if job is not None else 0,
            compaction_nodes=job.nodes if job is not None else 0,
        )

    def _info_persistence(self) -> Fields:
        engine = self.engine
        return persistence_fields(self.status(), engine.clock(), last_save_time(engine))

    @classmethod
    def open(
        cls,
        engine: EngineCore,
        path: str,
        appendfsync: str = "everysec",
        aof_load_truncated: object = True,
        aof_segment_max_bytes: int = DEFAULT_SEGMENT_MAX_BYTES,
        auto_aof_rewrite_min_size: object = DEFAULT_MIN_SIZE,
        auto_aof_rewrite_percentage: int | str = DEFAULT_PERCENTAGE,
        aof_preallocate: object = DEFAULT_PREALLOCATE,
        aof_mapped_appends: object = True,
        fs: FileSystem | None = None,
    ) -> DataDir:
        # Validate every option before touching the directory.
        if appendfsync not in POLICIES:
            raise ValueError(
                f"appendfsync must be one of {', '.join(POLICIES)}, not {appendfsync!r}")
        load_truncated = _truthy(aof_load_truncated)
        segment_max = int(aof_segment_max_bytes)
        if segment_max <= HEADER_SIZE:
            raise ValueError(f"aof-segment-max-bytes must exceed {HEADER_SIZE}")
        rewrite_min = parse_size(auto_aof_rewrite_min_size)
        rewrite_pct = int(auto_aof_rewrite_percentage)
        if rewrite_min < 0 or rewrite_pct < 0:
            raise ValueError("auto-aof-rewrite-min-size and -percentage must be >= 0")
        preallocate = parse_size(aof_preallocate)
        if preallocate < 0:
            raise ValueError("aof-preallocate must be >= 0")
        mapped = _truthy(aof_mapped_appends)
        fs = fs or RealFS()
        fs.makedirs(path)
        try:
            lock_fd = fs.lock(os.path.join(path, LOCK_FILE))
        except LockedError as err:
            from streamkeep.engine.services.shared import holder_hint  # (a refusal's words)

            raise LockedError(f"{err}{holder_hint(path)}") from None
        try:
            rec = recover(fs, path, engine, load_truncated)
        except BaseException:
            fs.unlock(lock_fd)
            raise
        try:
            journal = Journal(fs, path, rec.manifest, rec.fd, rec.size, rec.last_lsn,
                              appendfsync, segment_max, rec.watermark, preallocate, mapped)
        except BaseException:
            rec.watermark.close()
            fs.close(rec.fd)
            fs.unlock(lock_fd)
            raise
        journal.aof_bytes = rec.aof_bytes
        journal.on_retry = lambda: engine.locked(journal.retry_writes)
        journal.flush_lock = engine.lock
        compactor = Compactor(engine, fs, path, journal, rewrite_min, rewrite_pct)
        engine.attach_journal(journal)
        return cls(engine, fs, path, lock_fd, journal, compactor)

    def close(self) -> None:
        self.compactor.stop()
        self.journal.close()
        self.fs.unlock(self.lock_fd)

    # --- replication's hooks -------------------------------------------------------------------

    def history(self) -> tuple[str, str, int]:
        """(repl_id, repl_id2, repl_offset2): the names of the history this directory holds."""
        manifest = self.journal.manifest
        return manifest.repl_id, manifest.repl_id2, manifest.repl_offset2

    def set_history(self, repl_id: str, repl_id2: str, repl_offset2: int) -> None:
        """Rename the history durably (a promotion, a replica following a promoted primary).
        Engine lock held."""
        journal = self.journal
        with journal.manifest_lock:
            old = journal.manifest
            new = Manifest(list(old.segments), old.snapshot, repl_id, repl_id2, repl_offset2)
            manifest_mod.store(self.fs, self.path, new)
            journal.manifest = new

    def wait_no_compaction(self) -> None:
        """Wait for a running compaction (engine lock NOT held) and keep new ones from
        starting until `install_snapshot` or `allow_compaction`."""
        self.compactor.paused = True
        job = self.compactor.job
        if job is not None:
            job.done.wait()

    def allow_compaction(self) -> None:
        self.compactor.paused = False

    def install_snapshot(self, tmp: str | None, lsn: int, repl_id: str, keyspaces: list,
                         crc32: int | None, expires: list | None = None,
                         parts: Sequence[tuple[str, str, int, int]] = ()) -> None:
        """A replica's full sync (engine lock held; `wait_no_compaction` called before): make
        the directory hold the received snapshot `tmp` (None: the empty state at LSN 0), whose
        checksum is `crc32`, and nothing else, under the primary's history `repl_id`, and the
        engine hold `keyspaces` (per type slot, then database) and `expires` (loaded from that
        file). `parts`: a
        segmented snapshot's part files as (temp path, name, size, CRC-32), renamed to their
        names before the snapshot's own file. Every step leaves a directory that opens:
        to the old state, to the empty one (a replica that then syncs again), or to the new
        one."""
        fs, path, journal = self.fs, self.path, self.journal
        number = journal.manifest.segments[-1].segment
        # 1. An empty history first: the old files can then go, and the snapshot's name is free
        #    (the old snapshot may have the same LSN, so the same name).
        empty = SegmentEntry(manifest_mod.segment_file(number + 1), number + 1, 1)
        fs.close(create_segment(fs, path, empty))
        with journal.manifest_lock:
            manifest_mod.store(fs, path, Manifest([empty]))
        keep = {empty.file, LOCK_FILE, manifest_mod.MANIFEST}
        if tmp is not None:
            keep.add(os.path.basename(tmp))
        keep.update(os.path.basename(part_tmp) for part_tmp, _name, _size, _crc in parts)
        for name in fs.listdir(path):
            if name not in keep and (manifest_mod.is_segment_file(name)
                                     or manifest_mod.is_snapshot_file(name)):
                fs.unlink(os.path.join(path, name))
        # 2. The snapshot under its name, then the history that starts after it.
        snap = None
        if tmp is not None:
            for part_tmp, part_name, _size, _crc in parts:
                fs.rename(part_tmp, os.path.join(path, part_name))
            name = manifest_mod.snapshot_file(lsn)
            final = os.path.join(path, name)
            fs.rename(tmp, final)
            snap = SnapshotEntry(name, lsn, fs.size(final), int(time.time() * 1000), crc32,
                                 tuple(PartEntry(n, size, crc) for _t, n, size, crc in parts))
        entry = SegmentEntry(manifest_mod.segment_file(number + 2), number + 2, lsn + 1)
        fd = create_segment(fs, path, entry)
        manifest = Manifest([entry], snap, repl_id)
        try:
            with journal.manifest_lock:
                manifest_mod.store(fs, path, manifest)
        except BaseException:
            fs.close(fd)
            raise
        with contextlib.suppress(OSError):
            fs.unlink(os.path.join(path, empty.file))
        journal.reset(manifest, fd, HEADER_SIZE, lsn, HEADER_SIZE)
        self.compactor.snapshot_size = snap.total_size if snap is not None else 0
        journal.rewrite_at = self.compactor.threshold()
        self.compactor.paused = False
        self.engine.replay.replace_state(keyspaces, expires)
        log.info("installed the primary's snapshot at LSN %d (%s)", lsn,
                 snap.file if snap is not None else "empty")


def recover(fs: FileSystem, path: str, engine: EngineCore, load_truncated: bool) -> Recovered:
    """Load the directory's state into `engine`; returns where appending continues."""
    manifest_path = os.path.join(path, manifest_mod.MANIFEST)
    if not fs.exists(manifest_path):
        return _initialise(fs, path)
    manifest = manifest_mod.load(fs, path)
    remove_orphans(fs, path, manifest)
    durable = watermark_mod.durable_part(fs, path, manifest.segments[-1].segment)
    started = time.perf_counter()
    if manifest.snapshot is not None:
        _load_snapshot(fs, path, manifest.snapshot, engine)
    expected = manifest.segments[0].first_lsn
    total = 0
    fd = size = -1
    aof_bytes = 0
    for index, entry in enumerate(manifest.segments):
        last = index == len(manifest.segments) - 1
        reader = open_segment(fs, path, entry, expected)
        # Records are applied as they are decoded (CRC-checked batch by batch): the decoded
        # records of a whole segment are never held at once. Damage stops the scan; what
        # precedes it is applied, then judge_segment decides whether the directory may open.
        engine.replay.apply_many(reader.records())
        judge_segment(fs, path, entry, reader, durable if last else None, load_truncated)
        log.info("replayed %s: %d records", entry.file, reader.count)
        expected += reader.count
        total += reader.count
        aof_bytes += reader.end
        if last:
            size = reader.end
            fd = fs.open_append(os.path.join(path, entry.file), create=False)
    elapsed = time.perf_counter() - started
    log.info("AOF loaded: %d records from %d segment(s) in %.3f s (%.0f records/s)", total,
             len(manifest.segments), elapsed, total / elapsed if elapsed else 0)
    try:
        # What was replayed may have been in the page cache only (a killed process's unsynced
        # writes): make it durable before the watermark says it is, and before anything is
        # acknowledged on top of it.
        fs.fdatasync(fd)
        mark = WatermarkLog(fs, path, Watermark(manifest.segments[-1].segment, size,
                                                expected - 1))
    except BaseException:
        fs.close(fd)
        raise
    return Recovered(manifest, fd, size, expected - 1, total, aof_bytes, mark)


def load_state(fs: FileSystem, path: str, manifest: Manifest, engine: EngineCore,
               last_lsn: int) -> None:
    """Load the state the directory's log holds up to `last_lsn` into `engine` (the manifest's
    snapshot, then its segments' records through the apply path), as recover() does at open,
    with nothing opened for appending. StorageError if a file does not read back whole."""
    if manifest.snapshot is not None:
        _load_snapshot(fs, path, manifest.snapshot, engine)
    for entry in manifest.segments:
        if entry.first_lsn > last_lsn:
            break
        reader = open_segment(fs, path, entry, entry.first_lsn)
        engine.replay.apply_many(takewhile(lambda record: record[0] <= last_lsn, reader.records()))
        if reader.damage is not None and entry.first_lsn + reader.count <= last_lsn:
            raise StorageError(str(reader.damage))


def _initialise(fs: FileSystem, path: str) -> Recovered:
    """A new directory: its first files (aof.recovery), and the watermark at its start."""
    manifest, fd = initialise(fs, path)
    try:
        mark = WatermarkLog(fs, path, Watermark(1, HEADER_SIZE, 0))
    except BaseException:
        fs.close(fd)
        raise
    log.info("created a new data directory at %s", path)
    return Recovered(manifest, fd, HEADER_SIZE, 0, 0, HEADER_SIZE, mark)


def _load_snapshot(fs: FileSystem, path: str, entry: SnapshotEntry, engine: EngineCore) -> None:
    name, lsn = entry.file, entry.lsn
    file = os.path.join(path, name)
    # LMDB maps the file: a page past a truncated end is a SIGBUS, not an error. The manifest
    # recorded the size the compaction made durable; anything else is not that file.
    size = fs.size(file)
    if size != entry.size:
        raise AOFCorruptError(f"{file}: {size} bytes, the manifest says {entry.size} "
                              f"(truncated or replaced); refusing to load")
    started = time.perf_counter()
    try:
        meta = load_snapshot(engine, file, crc32=entry.crc32, entry=entry)
    except SnapshotError as err:
        # The log starts after this snapshot: nothing in the directory rebuilds its state.
        raise AOFCorruptError(
            f"{err}; refusing to load. The state up to LSN {lsn} is only in this snapshot: "
            f"rebuild it from a replica (a full sync) or from a backup taken at LSN {lsn} or "
            f"later (see the manual: Durability, a damaged snapshot)") from None
    if meta.lsn != lsn:
        raise AOFCorruptError(f"{file}: covers LSN {meta.lsn}, the manifest says {lsn}")
    elapsed = time.perf_counter() - started
    log.info("snapshot %s loaded: %d streams, %d entries, up to LSN %d, in %.3f s", name,
             meta.streams, meta.entries, lsn, elapsed)
