"""What a command handler reaches of the engine that runs it: `EngineState`, the type of
`ctx.engine`.

Owns `EngineState`: the databases (a dict per value type, the TTLs), the settings and the values hot
paths copy out of them, the registries that run around commands (blocked clients, WATCHed
keys, Pub/Sub, statistics, the slow log and the latency monitor), and the services attached
to the engine (the AOF, the data directory, replication, the server), each as the interface
this layer declares. The engine core (engine.runtime.core.EngineCore) subclasses it and adds
what runs commands: dispatch, the engine lock's hold, sessions, effects out and in. A handler
sees this class, not the core: it cannot submit a command, apply a record or take the lock
around another command. What a handler asks of the core's parts is declared here, as fields
the core sets to those parts' methods: `run_queued` (EXEC's commands), `run_script_command` (a
script's) and `cancel_wait` (CLIENT UNBLOCK's). The state answers two questions itself, from
its fields: the engine clock's time (`now`) and whether a write may run now (`write_gate`);
the core's parts read them as handlers do.

A native class in the compiled build: the fields declared here are read as fields of a C
struct, whichever subclass the engine is. Must not touch: command semantics, I/O.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.settings import config_set

if TYPE_CHECKING:
    from streamkeep.engine.exec.blocking import WaiterRegistry
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.engine.exec.context import Ctx, Session
    from streamkeep.engine.exec.eviction import Eviction
    from streamkeep.engine.exec.interfaces import (
        ConfigHook,
        InfoSection,
        Log,
        Persistence,
        Replication,
    )
    from streamkeep.engine.exec.latency import LatencyMonitor
    from streamkeep.engine.exec.pubsub import PubSub
    from streamkeep.engine.exec.slowlog import SlowLog
    from streamkeep.engine.exec.stats import ServerStats
    from streamkeep.engine.exec.table import Argv, CommandSpec
    from streamkeep.engine.exec.transactions import WatchRegistry
    from streamkeep.engine.model.residency import Residency
    from streamkeep.engine.model.stream import Stream

Clock = Callable[[], int]
_time_ns: Final = time.time_ns


class EngineState:
    """The engine as its command handlers see it (see the module's docstring). Every field is
    set by the engine core's constructor."""

    # The keyspace, per type and database (engine.model.value_types): keyspaces[slot][db].
    # Streams (slot 0) and strings (slot 1) are also `dbs` and `strings`, the same lists.
    keyspaces: list[list[dict[bytes, Any]]]
    dbs: list[dict[bytes, Stream]]
    strings: list[dict[bytes, bytes]]
    expires: list[dict[bytes, int]]
    # Each type's encoding limits, by slot (engine.model.limits: the values of a type read them
    # at their writes; CONFIG SET changes them in place), None for a type without.
    limits: list[Any]
    # Per database, the keys whose values have sub-keys with TTLs (a hash's fields), by their
    # earliest such expiry (engine.exec.keys' SubexpiryIndex; None until first needed).
    subexpires: list[Any]
    residency: Residency  # which stream nodes are in memory (backlog-memory)
    # maxmemory (engine.exec.eviction): the limit, the policy, the keys' access clocks; `oom`
    # is whether the command now starting found memory over the limit with nothing to evict
    # (Redis's pre_command_oom_state: MULTI refuses to queue, a script's first write refuses).
    eviction: Eviction
    oom: bool
    # Settings (Redis's names, canonical values) and the ones hot paths read as fields.
    config: dict[str, Any]
    config_file: str | None  # the file CONFIG REWRITE rewrites (the server's)
    config_hooks: dict[str, list[ConfigHook]]  # run after CONFIG SET changed a setting
    node_max_entries: int
    node_max_bytes: int
    notify_flags: int  # keyspace notifications' classes (engine.exec.notify)
    clock: Clock  # the command time, engine-clock ms
    wall_clock: bool  # the clock is the wall clock's (then `now` reads it inline)
    # What runs around commands.
    lock: threading.Lock  # held while any command runs; a handler never takes it
    waiters: WaiterRegistry
    watches: WatchRegistry
    pubsub: PubSub
    stats: ServerStats
    slowlog: SlowLog
    latency: LatencyMonitor
    scripting: Any  # engine.exec.scripting.Scripting, made by the first script
    # The services attached, through the interfaces this layer declares.
    journal: Log | None
    datadir: Persistence | None
    replication: Replication | None
    read_only: str | None  # a replica refuses clients' writes with this line
    server: Any  # the network server serving this engine, if any
    # The ACL users (engine.exec.acl.Users; made by engine.commands.acl when first needed, the
    # server's): None while the engine has none, as an embedded one never does.
    acl: Any
    acl_generation: int  # bumped at every change of the users (sessions re-check theirs)
    # A cluster node's topology (engine.exec.cluster; set by the server in cluster mode): its
    # clients' commands are routed by their keys' slots. None: not a cluster node.
    cluster: Topology | None
    info_sections: dict[str, InfoSection]  # INFO sections a service serves
    # What INFO reports of the engine itself.
    started_ms: int
    startup_memory: int
    latest_fork_usec: int
    memory_repl_id: str

    # What a handler asks of the engine core's parts (engine.runtime), each set by the core to
    # the method of the part that owns it. `run_queued(ctx, queued)`: EXEC's body, the queued
    # commands run one after another in `ctx`, their effects one record.
    # `run_script_command(ctx, spec, argv)`: a script's command in `ctx`, the MultiCtx its run
    # keeps for them (its effects that run's, its database the session's now): its reply, or the
    # ReplyError it failed with; the script puts a SELECT in front of its effects itself.
    # `cancel_wait(waiter, result)`: end a blocked client's wait with `result` (CLIENT UNBLOCK):
    # True if it was still waiting. `import_records(records)`: another node's (time, effects)
    # records applied and logged as this node's own (a slot imported): the last one's LSN.
    run_queued: Callable[[Ctx, list[tuple[CommandSpec, Argv]]], list[Any]]
    run_script_command: Callable[[Ctx, CommandSpec, Argv], Any]
    cancel_wait: Callable[[Any, Any], bool]
    import_records: Callable[[list[tuple[int, list[Any]]]], int]

    def now(self) -> int:
        """The engine clock's time (ms): a command's time is read once, when it starts."""
        return _time_ns() // 1_000_000 if self.wall_clock else self.clock()

    def write_gate(self, session: Session) -> str | None:
        """The one write gate: why a write from `session` is refused now (its error line), or
        None. The AOF cannot be written (MISCONF, or writes stopped after storage damage), or
        this engine is a replica and the session is not its primary's."""
        journal = self.journal
        if journal is not None and journal.error:
            return journal.error
        if self.read_only is not None and not session.from_primary:
            return self.read_only
        return None

    def apply_config(self) -> None:
        """Copy hot settings out of the config dict (XADD reads them on every call)."""
        self.node_max_entries = int(self.config["stream-node-max-entries"])
        self.node_max_bytes = int(self.config["stream-node-max-bytes"])
        # Keyspace notifications' classes (engine.exec.notify): 0, the default, publishes none.
        self.notify_flags = self.config["notify-keyspace-events"]

    def apply_monitoring(self) -> None:
        """Copy the monitoring settings where every command's path reads them (its counters,
        engine.exec.stats): the one time from which a call is slow (the lower of
        slowlog-log-slower-than, in µs, and latency-monitor-threshold, in ms, of those on),
        and latency-tracking."""
        from streamkeep.engine.exec.stats import NEVER_SLOW

        config = self.config
        slower_us = int(config["slowlog-log-slower-than"])
        threshold_ms = int(config["latency-monitor-threshold"])
        limits = []
        if slower_us >= 0 and int(config["slowlog-max-len"]) > 0:
            limits.append(slower_us * 1000)
        if threshold_ms > 0:
            limits.append(threshold_ms * 1_000_000)
        self.stats.set_monitoring(min(limits, default=NEVER_SLOW),
                                  bool(config["latency-tracking"]))

    def on_config(self, names: Iterable[str], hook: ConfigHook) -> None:
        """Run `hook` (engine lock held) after CONFIG SET changes any of these settings: the
        owner of the behaviour registers it (the journal appendfsync, the compactor the
        rewrite trigger, replication replicaof)."""
        for name in names:
            self.config_hooks.setdefault(name, []).append(hook)

    def add_info_section(self, name: str, section: InfoSection) -> None:
        """Serve INFO's section `name` from `section` (its owner's fields) instead of the
        built-in one."""
        self.info_sections[name] = section

    def set_config(self, name: str, value: Any) -> None:
        """Change one setting (Redis's name, e.g. "stream-node-max-entries")."""
        with self.lock:
            config_set(self, [(name.replace("_", "-"), value)])  # as CONFIG SET does


__all__ = ["Clock", "EngineState"]
