"""The public Engine: the in-memory core, with a data directory and replication when opened on one.

Owns `Engine` (what `from streamkeep import Engine` gives): `Engine()` is the core
(engine.runtime.core.EngineCore) in memory; `Engine.open(path, replicaof=..., **config)` sorts
the settings that belong to the data directory from the engine's, opens the directory
(engine.services.datadir: the snapshot loaded and the AOF replayed into the engine, the journal
wired in) and attaches replication to it (replication.service); `compact()` runs the
directory's compaction. The composition lives here, above the core, the AOF, the snapshots and
replication, so that none of them imports upward. Must not touch: command execution (the
core's), files (the data directory's), replication's protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, overload

from streamkeep.engine.exec.settings import normalize_settings
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.engine.services.expiry_timer import ExpiryTimer

if TYPE_CHECKING:
    from streamkeep.engine.services.shared_client import SharedEngine

Replicaof = tuple[str, int] | tuple[str, ...] | list[str] | str | None

# The settings that configure the data directory, not the engine (`_` or `-` spelled).
AOF_OPTIONS = ("appendfsync", "aof_load_truncated", "aof_segment_max_bytes",
               "auto_aof_rewrite_min_size", "auto_aof_rewrite_percentage", "aof_preallocate",
               "aof_mapped_appends", "fs")


def _replica_address(
    replicaof: tuple[str, int] | tuple[str, ...] | list[str] | str | None,
) -> tuple[str, int] | None:
    """`replicaof` as (host, port): given as a pair, or as the setting's "host port" form."""
    if isinstance(replicaof, str):  # the setting's form (config file): "host port"
        replicaof = tuple(replicaof.split()) or None
    if replicaof is None:
        return None
    if len(replicaof) != 2:
        raise ValueError(f"replicaof takes a host and a port, not {replicaof!r}")
    return str(replicaof[0]), int(replicaof[1])


def _open_shared(path: str | None, primary: tuple[str, int] | None,
                 config: dict[str, Any]) -> Any:
    if path is None:
        raise ValueError("shared=True needs a data directory path")
    from streamkeep.engine.services.shared import open_shared

    if primary is not None:
        config["replicaof"] = f"{primary[0]} {primary[1]}"
    return open_shared(path, config)


class Engine(EngineCore):
    """Redis Streams semantics in process. Thread-safe; commands run one at a time. In memory
    as built (`Engine()`); durable, and a replica if asked, through `Engine.open(path)`."""

    @overload
    @classmethod
    def open(cls, path: str | None = None, replicaof: Replicaof = None, *,
             shared: Literal[False] = False, **config: Any) -> Engine: ...

    @overload
    @classmethod
    def open(cls, path: str, replicaof: Replicaof = None, *, shared: Literal[True],
             **config: Any) -> SharedEngine: ...

    @classmethod
    def open(cls, path: str | None = None, replicaof: Replicaof = None, *,
             shared: bool = False, **config: Any) -> Any:
        """Open an engine. `path=None` keeps everything in memory; a path is a data directory
        whose snapshot is loaded and AOF replayed now, and appended to from now on. Settings use
        Redis's names: appendfsync ("always" | "everysec" | "no"), aof-load-truncated (yes/no),
        auto-aof-rewrite-min-size (64mb) and auto-aof-rewrite-percentage (100; 0 turns
        automatic compaction off), aof-preallocate (4mb of disk allocated ahead of the log's
        end), aof-mapped-appends (yes: records written through a mapping of that space), plus aof-segment-max-bytes (rotation size); `fs` swaps the
        file layer (tests, crash bench). `replicaof=(host, port)` makes it a read replica of
        that streamkeep server (replication.follower; the `replicaof` setting says the same).
        `shared=True`: any number of processes open the directory at once, through a server
        the directory runs for them (engine.services.shared): a SharedEngine, the same API."""
        primary = _replica_address(replicaof)
        if shared:
            return _open_shared(path, primary, config)
        aof_options = {}
        for name in list(config):
            key = name.replace("-", "_")
            if key in AOF_OPTIONS:
                aof_options[key] = config.pop(name)
        # The AOF settings that are Redis settings: validated, canonical, kept in engine.config.
        aof_settings = normalize_settings(
            {k: v for k, v in aof_options.items() if k not in ("aof_segment_max_bytes", "fs")})
        aof_options.update((k.replace("-", "_"), v) for k, v in aof_settings.items())
        engine = cls(**config)
        engine.config.update(aof_settings)
        if path is None:
            if aof_options:
                raise ValueError(f"{', '.join(aof_options)} need a data directory path")
            if primary is not None:
                raise ValueError("replicaof needs a data directory path")
            return engine.start_expiry()
        # (imported here: an engine in memory, and a tool that only builds one, never pays for
        # the persistence and replication services)
        from streamkeep.engine.services.datadir import DataDir
        from streamkeep.replication.service import attach

        engine.datadir = DataDir.open(engine, path, **aof_options)
        try:
            attach(engine, primary)  # the role, REPLICAOF, WAIT
        except BaseException:
            engine.close()
            raise
        return engine.start_expiry()

    def aredis(self, decode_responses: bool = False) -> Any:
        """redis.asyncio's client over this engine (engine.runtime.async_redis.AsyncRedis):
        `await r.xadd(...)` runs in this process at once; only a blocked read, a write waiting
        for its fsync under `always`, and a SAVE await."""
        from streamkeep.engine.runtime.async_engine import EngineAsyncBackend
        from streamkeep.engine.runtime.async_redis import AsyncRedis

        return AsyncRedis(EngineAsyncBackend(self), decode_responses)

    def start_expiry(self) -> Engine:
        """Keys with a TTL expire even if nothing names them again: a timer runs the active
        expiry cycle (the server's loop runs it for a served engine; the timer then leaves it)."""
        self.expiry_timer = ExpiryTimer(self)
        return self

    expiry_timer: ExpiryTimer | None = None

    def close(self) -> None:
        if self.expiry_timer is not None:
            self.expiry_timer.stop()
        super().close()

    def compact(self, wait: bool = True) -> Any:
        """Compact the AOF into a new snapshot now (see snapshot.services.compactor). With wait, returns
        the manifest's new snapshot entry (None if nothing was written since the last one) or
        raises StorageError (snapshot.services.compactor.CompactionError); writes go on meanwhile."""
        if self.datadir is None:
            raise ValueError("compact() needs a data directory (Engine.open(path))")
        return self.datadir.compact(wait)


__all__ = ["AOF_OPTIONS", "Engine"]
