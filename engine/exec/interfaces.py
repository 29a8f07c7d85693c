"""The interfaces through which the engine reaches persistence and replication, and what they
report.

Owns `Log` (what the engine needs of the append-only file: aof.journal.Journal implements it),
`Persistence` (what commands need of a data directory: engine.services.datadir.DataDir
implements it), `Replication` (what the replication commands need: replication.service
implements it), `PersistenceStatus` and the INFO persistence section built from it, and the
types of the hooks services register on an engine (CONFIG hooks, INFO sections). The engine and its
commands talk to persistence only through these; the services register their hooks when they
attach to an engine (the journal its `appendfsync` hook, the compactor the rewrite trigger, the
data directory its INFO section, replication its INFO replication section). Must not touch:
files, engine state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from streamkeep.aof.fs import FileSystem

Fields = list[tuple[str, Any]]
InfoSection = Callable[[], Fields]  # an INFO section's fields, computed when asked
ConfigHook = Callable[[], None]  # run after CONFIG SET stored a new value (engine lock held)


class Log(Protocol):
    """The append-only record log, as the engine's write path and the server use it."""

    policy: str  # appendfsync: always, everysec or no
    lsn: int  # the last LSN assigned
    written_lsn: int  # records up to here reached the OS
    synced_lsn: int  # records up to here are fsynced
    error: str | None  # the MISCONF line while writes are refused, else None
    sync_on_commit: bool  # appendfsync always: a caller waits for the fsync covering it
    deferred: bool  # the server buffers records and writes them once per batch
    buffered: bool  # some record is buffered and not yet written or synced
    pending: Any  # records buffered in deferred mode, not yet handed to the OS; falsy if none

    def append(self, time_ms: int, db: int, effects: list) -> int:
        """Log one record; its LSN. Raises ReplyError (MISCONF) if it cannot be written."""
        ...

    def wait_durable(self, lsn: int) -> None:
        """Return once the record at `lsn` is fsynced (or raise if it never will be)."""
        ...

    def commit_now(self, lsn: int) -> None:
        """`wait_durable`, its fsync run by the caller's own thread."""
        ...

    def when_durable(self, lsn: int, done: Callable[[], None]) -> bool:
        """`wait_durable` without a waiting thread: True if there is nothing to wait for
        (then `check_durable`), else False and `done()` is called from the group-commit thread
        once the round covering `lsn` ended."""
        ...

    def check_durable(self, lsn: int) -> None:
        """Raise what ended a wait for `lsn` without it being durable (MISCONF)."""
        ...

    def flush_pending(self) -> bool:
        """Write every buffered record with one write(); False if the write failed."""
        ...

    def set_deferred(self, deferred: bool) -> None:
        ...

    def stop_writes(self, line: str) -> None:
        """Refuse every write with error `line` until the directory is reopened."""
        ...


@dataclass(frozen=True, slots=True)
class PersistenceStatus:
    """What INFO persistence reports of a data directory."""

    changes_since_save: int
    saving_since_ms: int | None  # a compaction's start, while one runs
    last_status: str  # "ok" or "err": the last compaction's outcome
    saves: int  # compactions completed (Redis's rdb_saves, aof_rewrites, total_forks)
    aof_ok: bool
    aof_current_size: int
    aof_base_size: int
    fsync_pending: bool
    last_seconds: int = -1  # the last compaction's duration, whole seconds (-1: none yet)
    failures_in_row: int = 0  # compactions that failed since the last that succeeded
    aof_buffer: int = 0  # bytes of records buffered, not yet handed to the OS
    # the running compaction: its phase (rotate, replay, write, publish, switch, remove; "" when
    # none runs), the records its build replayed and the nodes it wrote so far
    compaction_phase: str = ""
    compaction_records: int = 0
    compaction_nodes: int = 0


class Persistence(Protocol):
    """A data directory as the engine's commands use it (SAVE, BGSAVE, LASTSAVE, INFO, CONFIG),
    and its file layer for the other files a server keeps there (a cluster node's topology)."""

    path: str
    fs: FileSystem

    @property
    def repl_id(self) -> str:
        """The name of this history (a replica's offset is this id and an LSN)."""
        ...

    def compact(self, wait: bool = True) -> Any:
        """Compact the log into a new snapshot; with wait, the new snapshot's entry. Raises
        StorageError when it fails."""
        ...

    def start_background_save(self) -> bool:
        """Start a compaction in the background (engine lock held); False if one already
        runs. Raises StorageError when it cannot start."""
        ...

    def status(self) -> PersistenceStatus:
        ...

    def last_save_ms(self) -> int | None:
        """When the current snapshot was made; None if there is none yet."""
        ...

    def close(self) -> None:
        ...


def persistence_fields(status: PersistenceStatus | None, now_ms: int, last_save: int) -> Fields:
    """INFO persistence, Redis's fields: `status` None for an engine without a data directory
    (no AOF). `last_save` is LASTSAVE's value (seconds)."""
    saving = status is not None and status.saving_since_ms is not None
    job_secs = int((now_ms - status.saving_since_ms) // 1000) \
        if status is not None and status.saving_since_ms is not None else -1
    last = status.last_status if status is not None else "ok"
    saves = status.saves if status is not None else 0
    fields: Fields = [
        ("loading", 0),
        ("async_loading", 0),
        ("rdb_changes_since_last_save", status.changes_since_save if status else 0),
        ("rdb_bgsave_in_progress", int(saving)),
        ("rdb_last_save_time", last_save),
        ("rdb_last_bgsave_status", last),
        ("rdb_last_bgsave_time_sec", status.last_seconds if status is not None else -1),
        ("rdb_current_bgsave_time_sec", job_secs),
        ("rdb_saves", saves),
        ("aof_enabled", int(status is not None)),
        ("aof_rewrite_in_progress", int(saving)),
        ("aof_rewrite_scheduled", 0),
        ("aof_last_rewrite_time_sec", status.last_seconds if status is not None else -1),
        ("aof_current_rewrite_time_sec", job_secs),
        ("aof_last_bgrewrite_status", last),
        ("aof_rewrites", saves),
        ("aof_rewrites_consecutive_failures", status.failures_in_row if status else 0),
        ("aof_last_write_status", "ok" if status is None or status.aof_ok else "err"),
    ]
    if status is not None:
        fields += [
            ("aof_current_size", status.aof_current_size),
            ("aof_base_size", status.aof_base_size),
            ("aof_pending_rewrite", 0),
            ("aof_buffer_length", status.aof_buffer),
            ("aof_pending_bio_fsync", int(status.fsync_pending)),
            ("aof_delayed_fsync", 0),
            # streamkeep's own: a compaction's progress (long on a big backlog)
            ("compaction_phase", status.compaction_phase or "none"),
            ("compaction_records_replayed", status.compaction_records),
            ("compaction_nodes_written", status.compaction_nodes),
        ]
    return fields


class Replication(Protocol):
    """Replication as the engine's commands use it (replication.service implements it): the
    role, REPLICAOF, the link commands a replica sends (REPLCONF, PSYNC), WAIT and WAITAOF."""

    def role(self) -> list[Any]:
        """ROLE's reply."""
        ...

    def serve(self, server: Any) -> None:
        """The network server started (on its loop thread)."""
        ...

    def primary_address(self) -> str:
        """"host port" of the primary followed ("" on a primary): CONFIG GET replicaof."""
        ...

    def replicaof(self, host: str | None, port: int) -> str:
        """REPLICAOF host port (host None: NO ONE); the status reply. ReplyError if refused."""
        ...

    def replconf(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        """REPLCONF from a connection (a replica's handshake and ACKs)."""
        ...

    def psync(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        """PSYNC (or SYNC): hands the connection to a sender; the reply to send now."""
        ...

    def wait(self, session: Any, numreplicas: int, timeout_ms: int, block: bool = True) -> Any:
        """WAIT: a Later whose value is the number of replicas that acknowledged (the number
        now if it is reached already, or if `block` is false: in MULTI or a script)."""
        ...

    def waitaof(self, session: Any, numlocal: int, numreplicas: int, timeout_ms: int,
                block: bool = True) -> Any:
        """WAITAOF: a Later whose value is [local fsynced (0/1), replicas fsynced] (the counts
        now if they are reached already, or if `block` is false)."""
        ...

    def vouched_until(self, needed: int, seconds: float) -> float:
        """Until when (a monotonic time) `needed` replicas are known to follow this primary:
        the `needed`-th latest ACK of a replica online, plus `seconds`; 0 with fewer."""
        ...

    def info_fields(self) -> Fields:
        """INFO replication."""
        ...

    def stats_fields(self) -> Fields:
        """INFO stats' sync_full, sync_partial_ok, sync_partial_err."""
        ...

    def primary_link_up(self) -> bool:
        """A replica whose link to its primary is up (synced and streaming): that link is a
        connected client, as Redis counts its primary's."""
        ...

    def traffic(self) -> tuple[int, int]:
        """Replication bytes since start: (received from a primary, sent to replicas)."""
        ...

    def close(self) -> None:
        ...
