"""What a whole export of a data directory reads: the directory's current state, as one snapshot.

Owns turning "DIR now" (its snapshot and every record after it, what `export-rdb` exports) into
one snapshot file for the Spark data source, which reads snapshots only (snapshot.reader stays
its source of truth):

- no record follows DIR's snapshot: that snapshot, pinned (tools.export.pin), read as it is;
- otherwise a new snapshot of the state after DIR's last record: DIR is copied as of that
  record (tools.inspect.restore.current_state, the point-in-time copy `export-rdb` reads; a
  server may be running on DIR), the copy is opened with its snapshot loaded lazily (nodes stay
  in the file and are written out as stored: the cost follows the records after the snapshot
  and the metadata, not the backlog), and snapshot.writer writes the engine's state as of that
  LSN into a scratch directory made where the caller says (beside OUT, or in --work-dir:
  somewhere every Spark executor can read), removed when the export ends. The copy itself is
  removed as soon as the snapshot is written.

Also how far DIR's own snapshot is behind its log (`lag`), which `--snapshot-only` reports.
Must not touch: DIR (read only, pins aside), the snapshot and AOF formats, Spark.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from streamkeep.aof.manifest import snapshot_file
from streamkeep.tools.export import since as since_mod
from streamkeep.tools.export.pin import ExportError, Pin, pin, pin_log

# The copy's snapshot loads lazily under a backlog-memory budget (any budget does): its nodes
# stay in the file and the writer copies them as stored instead of decoding and re-encoding.
LOAD_BUDGET = 64 << 20


class Unreadable(ExportError):
    """DIR's files cannot be read into a state (damage before the log's end, a bad snapshot)."""


@dataclass(frozen=True, slots=True)
class State:
    """The snapshot a whole export reads, and what it is."""

    pin: Pin  # the snapshot file (a pin of it): what the data source loads
    lsn: int  # the LSN the state is as of
    base_lsn: int  # DIR's snapshot under it (0: none yet)
    seconds: float | None  # the time the copy and the new snapshot took; None: none built

    @property
    def records(self) -> int:
        """Records after DIR's snapshot that the state includes."""
        return self.lsn - self.base_lsn


@contextlib.contextmanager
def current(directory: str, near: str) -> Iterator[State]:
    """DIR's current state as one pinned snapshot, for as long as the block runs. A snapshot
    that has to be built is built in a scratch directory made beside `near` (the same file
    system and the same readers as it), removed with everything in it when the block ends."""
    with pin_log(directory) as log:  # ExportError: not a data directory
        try:
            end = since_mod.log_end(log)
        except ExportError as err:
            raise Unreadable(str(err)) from None
        held = pin(log.snapshot) if log.snapshot is not None and end == log.snapshot_lsn \
            else None
    if held is not None:  # nothing after DIR's snapshot: it is the current state
        with held:
            checked(held.path, os.path.join(directory, snapshot_file(end)))
            yield State(held, end, end, None)
        return
    from streamkeep.tools.safe_output import scratch_directory

    with scratch_directory(near, "state") as scratch:
        started = time.monotonic()
        built, lsn, base = _build(directory, scratch)
        with pin(built) as pinned:
            yield State(pinned, lsn, base, round(time.monotonic() - started, 3))


def checked(pinned: str, original: str) -> None:
    """A snapshot the export reads as it is (`pinned`, a pin of `original`) matches the
    checksum its manifest recorded for the whole file, before Spark reads a byte of it (a
    damaged page could crash its workers): Unreadable, naming `original`, if not."""
    from streamkeep.snapshot.integrity import check_whole
    from streamkeep.snapshot.reader import SnapshotError, recorded_entry

    entry = recorded_entry(original)
    try:
        check_whole(pinned, None if entry is None else entry.crc32)
        for part in () if entry is None else entry.parts:  # pinned beside it, as named
            check_whole(os.path.join(os.path.dirname(pinned), part.file), part.crc32)
    except SnapshotError as err:  # named as the user knows it, not as pinned
        raise Unreadable(str(err).replace(os.path.dirname(pinned),
                                          os.path.dirname(original))) from None


def _build(directory: str, scratch: str) -> tuple[str, int, int]:
    """A snapshot of DIR's state after its last record, written in `scratch`: (its path, its
    LSN, the LSN of DIR's snapshot it was built on)."""
    from streamkeep.engine.wire.errors import StorageError
    from streamkeep.snapshot.writer import write_snapshot
    from streamkeep.tools.inspect.restore import Impossible, Usage, current_state

    copy = os.path.join(scratch, "state")
    try:
        with current_state(directory, scratch, backlog_memory=LOAD_BUDGET) as (engine, lsn):
            datadir: Any = engine.datadir  # an engine.services.datadir.DataDir: Engine.open made one
            snap = datadir.journal.manifest.snapshot
            base = 0 if snap is None else snap.lsn
            path = os.path.join(scratch, f"current-{lsn:012d}.mdb")
            with engine.lock:
                write_snapshot(engine.dbs, path, lsn, int(time.time() * 1000),
                               datadir.history()[0], values=engine.keyspaces,
                               expires=engine.expires)
    except Usage as err:
        raise ExportError(str(err)) from None
    except Impossible as err:
        raise Unreadable(f"{directory}: {err}") from None
    except StorageError as err:  # damage the copy's load (or the write's checks) found
        own = os.path.abspath(directory).rstrip(os.sep)
        raise Unreadable(str(err).replace(copy, own)) from None
    shutil.rmtree(copy, ignore_errors=True)  # the copy: done with
    return path, lsn, base


@dataclass(frozen=True, slots=True)
class Lag:
    """How far a data directory's snapshot is behind its log."""

    snapshot_lsn: int
    log_lsn: int  # the log's last record (the snapshot's LSN if none follows it)
    snapshot_created_ms: int
    last_record_ms: int | None  # None: no record after the snapshot

    @property
    def records(self) -> int:
        return max(self.log_lsn - self.snapshot_lsn, 0)

    @property
    def seconds(self) -> float:
        """From the snapshot's creation to the last record written after it."""
        if self.last_record_ms is None:
            return 0.0
        return max(self.last_record_ms - self.snapshot_created_ms, 0) / 1000

    def to_json(self) -> dict:
        return {"records": self.records, "log_lsn": self.log_lsn,
                "snapshot_created_ms": self.snapshot_created_ms,
                "last_record_ms": self.last_record_ms, "seconds": self.seconds}


def lag(directory: str, snapshot_lsn: int, created_ms: int) -> Lag:
    """How far the snapshot at `snapshot_lsn` (created at `created_ms`) is behind
    `directory`'s log now."""
    with pin_log(directory) as log:
        end, last_ms = since_mod.log_tail(log)
    return Lag(snapshot_lsn, max(end, snapshot_lsn), created_ms, last_ms)
