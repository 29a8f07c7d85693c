"""The engine's core, in memory: databases, the execution loop, effects out, effects in,
blocking, the digest.

Owns `EngineCore` (the public `Engine` of engine.runtime.engine without its data directory
and replication; the lower layers' annotations name it) and `Session`: one-at-a-time command
execution under a lock (argv -> command -> reply + effects), the record sinks that later carry
effects to the AOF and replicas, the apply path that replays records through the same command
table, blocked-client wake-ups, the state digest, and counting each command into the server
statistics (engine.exec.stats: calls, time, refusals, failures, errors, latency histograms)
and handing a slow one to the slow log and the latency monitor (engine.exec.slowlog,
engine.exec.latency). Must not touch:
command semantics (engine.commands_*), the data structures' internals, files (aof/ owns
those), opening a data directory or attaching replication (engine.runtime.engine composes
those; they reach the core through engine.exec.interfaces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Self

from streamkeep.engine import commands as _commands  # noqa: F401  (registers every command)
from streamkeep.engine.commands.expiry import (
    active_expire,
    expire_named_keys,
    hide_expired,
    unhide,
)
from streamkeep.engine.commands.info import resident_bytes
from streamkeep.engine.commands.pubsub import glob_match
from streamkeep.engine.commands.streams import add_entry
from streamkeep.engine.exec.blocking import Waiter, WaiterRegistry
from streamkeep.engine.exec.context import Block, Ctx, Later, MultiCtx, ReplayCtx, RerunCtx
from streamkeep.engine.exec.latency import LatencyMonitor
from streamkeep.engine.exec.notify import STREAM, keyspace_event
from streamkeep.engine.exec.pubsub import (
    PubSub,
    Subscriber,
    Subscription,
    subscribed_context_error,
)
from streamkeep.engine.exec.settings import DEFAULT_CONFIG, config_set, normalize_settings
from streamkeep.engine.exec.slowlog import SlowLog
from streamkeep.engine.exec.stats import CALLS, NEVER_SLOW, ServerStats, count_call
from streamkeep.engine.exec.table import (
    FAST_DISPATCH,
    Argv,
    CommandSpec,
    Flag,
    command_names,
    lookup,
    resolve,
)
from streamkeep.engine.exec.transactions import (
    NOT_IN_MULTI,
    WatchRegistry,
    end_transaction,
    queue_in_multi,
)
from streamkeep.engine.model.digest import state_digest
from streamkeep.engine.model.effects import Record, plain_xadd_effect, select_effect
from streamkeep.engine.model.residency import Residency
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.argv import encode_args
from streamkeep.engine.wire.errors import ReplyError, StorageError, storage_reply
from streamkeep.engine.wire.reply import NULL_ARRAY, RespMap, to_plain

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import (
        ConfigHook,
        InfoSection,
        Log,
        Persistence,
        Replication,
    )
    from streamkeep.engine.runtime.redis_api import RedisAPI

Clock = Callable[[], int]
RecordSink = Callable[[Record], None]
NUM_DATABASES = 16
NOAUTH = "NOAUTH Authentication required."
_now_ns = time.perf_counter_ns


def _plain_xadd(argv: Argv) -> bool:
    """`XADD key * field value ...` as StreamQueue sends it: no option, the arity right (a
    transaction refuses a wrong one before running anything; a batch would run the rest)."""
    return len(argv) >= 5 and len(argv) & 1 == 1 and argv[0] == b"XADD" and argv[2] == b"*"


def wall_clock_ms(_ns: Callable[[], int] = time.time_ns) -> int:
    return _ns() // 1_000_000


def _to_bytes(arg: Any) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, bool):
        raise TypeError("bool is not a valid command argument")
    if isinstance(arg, (int, float)):
        return repr(arg).encode()
    if isinstance(arg, (bytearray, memoryview)):
        return bytes(arg)
    raise TypeError(f"invalid command argument type {type(arg).__name__}")


class Session:
    """Per-connection state: the selected database (the server gives each client one), the
    command context reused by each of its commands, its transaction (MULTI queue, WATCHed keys;
    see engine.transactions) and, on the server, the connection it belongs to (`client`)."""

    __slots__ = ("db", "ctx", "multi", "multi_failed", "watched", "dirty", "client", "name",
                 "lastcmd", "write_lsn", "from_primary", "subscriber")

    def __init__(self, db: int = 0) -> None:
        self.db = db
        self.ctx: Ctx | None = None
        self.multi: list[tuple[Any, Argv]] | None = None  # queued (spec, argv) after MULTI
        self.multi_failed = False  # a command was refused while queueing: EXEC aborts
        self.watched: set[tuple[int, bytes]] = set()
        self.dirty = False  # a watched key changed: EXEC fails
        self.client: Any = None  # the server's connection object (None when embedded)
        self.name: bytes = b""  # CLIENT SETNAME
        self.lastcmd: str | None = None  # the last command's name (CLIENT LIST cmd=; None: NULL)
        self.write_lsn = 0  # the LSN of its last write's record (what WAIT and WAITAOF wait for)
        # A redis-server primary's command stream (replication.redis_commands): its writes pass
        # the read-only gate that refuses clients' writes on a replica.
        self.from_primary = False
        # Where its Pub/Sub messages go (engine.exec.pubsub): the server's connection gives
        # one, Engine.subscribe's session has one; None: SUBSCRIBE is refused.
        self.subscriber: Subscriber | None = None


class EngineCore:
    """Redis Streams semantics in process, in memory. Thread-safe; commands run one at a
    time. `Engine` (engine.runtime.engine) adds the data directory and replication."""

    def __init__(
        self,
        clock: Clock | None = None,
        config_file: str | None = None,
        **config: Any,
    ) -> None:
        self.clock: Clock = clock or wall_clock_ms
        # Settings (engine.config's registry): Redis's names, validated, canonical values.
        self.config = {**DEFAULT_CONFIG, **normalize_settings(config)}
        self.config_file = config_file  # the file CONFIG REWRITE rewrites (the server's)
        # Which stream nodes are in memory (the backlog-memory budget; engine.model.residency).
        self.residency = Residency(int(self.config["backlog-memory"]))
        self.apply_config()
        self.dbs: list[dict[bytes, Stream]] = [{} for _ in range(NUM_DATABASES)]
        # Beside each database's streams: its string values and the TTLs of keys of either
        # type (engine.commands.expiry says how they expire).
        self.strings: list[dict[bytes, bytes]] = [{} for _ in range(NUM_DATABASES)]
        self.expires: list[dict[bytes, int]] = [{} for _ in range(NUM_DATABASES)]
        self.lock = threading.Lock()  # never re-entered: handlers do not call the engine
        self.waiters = WaiterRegistry()
        self.watches = WatchRegistry()
        self.pubsub = PubSub(glob_match)  # channels and patterns: not persisted, not logged
        self.server: Any = None  # the network server serving this engine, if any
        # Lua scripting (engine.exec.scripting.Scripting), made by the first script: not
        # persisted, not logged (a script's effects are).
        self.scripting: Any = None
        self.started_ms = wall_clock_ms()
        self.sinks: list[RecordSink] = []
        self.session = Session()
        self.journal: Log | None = None  # the AOF, when opened on a data directory
        self.datadir: Persistence | None = None
        # INFO's master_replid without a data directory: a history of its own, named by the
        # first INFO ("" until then).
        self.memory_repl_id = ""
        # Replication (replication.service), when attached: the role, REPLICAOF, WAIT. A
        # replica's write commands are refused with this line (None: writes are accepted).
        self.replication: Replication | None = None
        self.read_only: str | None = None
        # Hooks the services register when they attach (engine.exec.interfaces): CONFIG SET
        # runs config_hooks[name] after storing a new value; INFO asks info_sections first.
        self.config_hooks: dict[str, list[ConfigHook]] = {}
        self.info_sections: dict[str, InfoSection] = {}
        # Run after the AOF dropped records and the state was rolled back (the server's: its
        # replies awaiting them are refused). Engine lock held, any thread.
        self.rollback_hooks: list[Callable[[], None]] = []
        # INFO commandstats/errorstats (engine.exec.stats), and the dispatch fast path with
        # each command's counter list: submit counts a call without looking anything up.
        self.stats = ServerStats(command_names())
        counters = self.stats.counters
        self.dispatch = {spelling: (*entry, counters(entry[4]))
                         for spelling, entry in FAST_DISPATCH.items()}
        # SLOWLOG and LATENCY (engine.exec.slowlog, engine.exec.latency): a call that
        # count_call finds slow goes to `_slow_call`, which applies each one's own threshold.
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.apply_monitoring()
        self.latest_fork_usec = 0  # how long starting the last compaction held the lock
        self.startup_memory = resident_bytes()  # INFO's used_memory_startup
        self.closed = False

    def attach_journal(self, journal: Log) -> None:
        with self.lock:
            self.journal = journal

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

    def locked(self, fn: Callable[[], Any]) -> Any:
        """Run fn under the engine lock (the journal's write retry needs it)."""
        with self.lock:
            return fn()

    def set_config(self, name: str, value: Any) -> None:
        """Change one setting (Redis's name, e.g. "stream-node-max-entries")."""
        with self.lock:
            config_set(self, [(name.replace("_", "-"), value)])  # as CONFIG SET does

    def apply_config(self) -> None:
        """Copy hot settings out of the config dict (XADD reads them on every call)."""
        self.node_max_entries = int(self.config["stream-node-max-entries"])
        self.node_max_bytes = int(self.config["stream-node-max-bytes"])
        # Keyspace notifications' classes (engine.exec.notify): 0, the default, publishes none.
        self.notify_flags: int = self.config["notify-keyspace-events"]

    def apply_monitoring(self) -> None:
        """Copy the monitoring settings where every command's path reads them (its counter
        list, engine.exec.stats): the one time from which a call is slow (the lower of
        slowlog-log-slower-than, in µs, and latency-monitor-threshold, in ms, of those on),
        and latency-tracking."""
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

    def close(self) -> None:
        """Stop; with a data directory, fsync the AOF and release the directory's lock."""
        if self.closed:
            return
        self.closed = True
        if self.replication is not None:
            self.replication.close()
        if self.datadir is not None:
            self.datadir.close()
        with self.lock:
            self.residency.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- executing commands ------------------------------------------------------------------

    def execute(self, *args: Any) -> Any:
        """Run one command; plain reply values, errors raised as ReplyError."""
        argv = encode_args(args)  # str and bytes, the common case, in one kernel call
        if argv is None:
            argv = tuple(map(_to_bytes, args))
        reply, lsn = self.submit(self.session, argv)  # _execute, inlined: the hot path
        t = type(reply)
        if t is bytes or t is int:
            if lsn:
                journal = self.journal
                if journal.buffered:  # type: ignore[union-attr]  # its record still to write/sync
                    self._finish(reply, lsn)
            return reply
        return to_plain(self._finish(reply, lsn))

    def redis(self, decode_responses: bool = False) -> RedisAPI:
        """redis-py's stream and keyspace methods over this engine (`r.xadd(name, fields)`,
        `r.xreadgroup(...)`, replies as redis-py's RESP2 client gives them). `decode_responses`
        is the client's, as in redis-py: each facade has its own."""
        from streamkeep.engine.runtime.redis_api import RedisAPI  # (only its users pay for it)

        return RedisAPI(self, decode_responses)

    def execute_with_effects(self, *args: Any) -> tuple[Any, list[list[bytes]]]:
        """Like execute, also returning the effects the command emitted (not those of clients
        it woke up, which are records of their own)."""
        effects: list[list[bytes]] = []
        reply = self._execute(self.session, tuple(map(_to_bytes, args)), effects)
        return to_plain(reply), effects

    def subscribe(self, *channels: bytes | str, limit_bytes: int | None = None
                  ) -> Subscription:
        """A Pub/Sub subscriber for a thread of this process, subscribed to `channels` (none:
        call its subscribe/psubscribe later): read with `get_message(timeout)`, end with
        `close()` (or `with`). Messages published over the wire reach it too. Its unread
        messages are bounded by `limit_bytes` (see Subscription)."""
        subscription = Subscription(self, Session(), limit_bytes)
        if channels:
            subscription.subscribe(*channels)
        return subscription

    def psubscribe(self, *patterns: bytes | str, limit_bytes: int | None = None
                   ) -> Subscription:
        """Like subscribe, to glob patterns (PSUBSCRIBE)."""
        subscription = Subscription(self, Session(), limit_bytes)
        if patterns:
            subscription.psubscribe(*patterns)
        return subscription

    def primary_session(self) -> Session:
        """A session for a redis-server primary's commands (replication.redis_commands): its
        writes pass the read-only gate that refuses clients' writes on a replica."""
        session = Session()
        session.from_primary = True
        return session

    def execute_raw(self, session: Session, argv: Argv) -> Any:
        """Reply values before RESP2 flattening (RespMap kept), for the server's RESP3."""
        return self._execute(session, argv)

    def execute_atomic(self, session: Session, argvs: Iterable[Argv]) -> Any:
        """MULTI, `argvs`, EXEC in one call (the embedded work queue's batches): queued under
        one lock round instead of one per command, then EXEC's reply (a failed command's
        ReplyError in its place) and one record. A command refused while queueing aborts the
        transaction as over the wire (EXECABORT). A transaction of plain `XADD key * field
        value ...` (StreamQueue.put_many), with nothing that could make EXEC differ (no MULTI,
        no WATCH, no key with a TTL, every write gate open), runs as `execute_batch` runs it:
        the same replies and one record, without queueing each command."""
        argvs = argvs if isinstance(argvs, list) else list(argvs)
        with self.lock:
            if (session.multi is None and not session.watched and not self.expires[session.db]
                    and self._write_gate(session) is None and all(map(_plain_xadd, argvs))):
                self.stats.counters("exec")[CALLS] += 1
                return self._run_batch(session, argvs)
            if session.multi is not None:
                raise ReplyError("ERR MULTI calls can not be nested")
            session.multi, session.multi_failed = [], False
            for argv in argvs:
                try:
                    spec = lookup(argv)
                except ReplyError as err:
                    self._refuse(session, resolve(argv), err)
                    continue
                try:
                    if queue_in_multi(self, session, spec, argv) is None:
                        raise ReplyError(NOT_IN_MULTI)  # MULTI, EXEC, WATCH... in a batch
                except ReplyError as err:
                    self._refuse(session, spec, err)
        return self._execute(session, (b"EXEC",))

    def execute_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """Commands run in order under one lock hold and logged as one record, as EXEC runs
        them (a failed command's ReplyError in its place), without a transaction around them:
        a redis-server primary's stream between its transactions (replication.redis_commands).
        A plain `XADD key <ms-seq> field value ...`, what Redis propagates for every XADD,
        takes add_entry, the XADD handler's own validated append; its effect is itself.
        MISCONF (raised, nothing run) when the AOF cannot be written."""
        with self.lock:
            journal = self.journal
            if journal is not None and journal.error:
                raise ReplyError(journal.error)
            return self._run_batch(session, argvs)

    def _run_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """execute_batch's body (lock held). A plain XADD (`*` or an explicit ID) takes
        add_entry; its effect is itself, or with `*` the same with the ID it got."""
        ctx = Ctx(self, session, self.clock())
        effects = ctx.effects
        first_db = record_db = session.db
        dbs, waiters = self.dbs, self.waiters
        xadds = self.stats.counters("xadd")
        replies: list[Any] = []
        for argv in argvs:
            db = session.db
            mark = len(effects)
            reply: Any = None
            if argv[0] == b"XADD" and len(argv) >= 5:
                try:
                    reply = add_entry(self, dbs[db], argv, ctx.now)
                except ReplyError as err:  # a call that failed, as EXEC counts it
                    reply = err
                    self.stats.failed(xadds, 0, err.line)
                if type(reply) is bytes:
                    effects.append(plain_xadd_effect(argv, reply) if argv[2] == b"*"
                                   else argv)  # type: ignore[arg-type]
                    xadds[CALLS] += 1
                    if waiters.by_key:
                        waiters.signal(db, argv[1])
                    if self.notify_flags:
                        keyspace_event(self, STREAM, b"xadd", argv[1], db)
            if reply is None:  # not the plain form: the command table, as EXEC runs it
                try:
                    reply = self.run_queued(ctx, [(lookup(argv), argv)])[0]
                except ReplyError as err:  # unknown command, wrong arity
                    reply = err
            replies.append(reply)
            if len(effects) > mark and db != record_db:
                effects.insert(mark, select_effect(db))
                record_db = db
        self._end_batch(ctx, first_db)
        return replies

    def _end_batch(self, ctx: Ctx, db: int) -> None:
        """What a batch does once its commands ran (lock held): its one record (`db`: the
        database selected when it started), the clients it made ready, the memory budget."""
        if ctx.effects:
            ctx.session.write_lsn = self._commit(ctx, db)
        if self.waiters.ready:
            self._serve_ready()
        if self.residency.resident > self.residency.limit:
            self.residency.evict()

    def _execute(
        self, session: Session, argv: Argv, effects_out: list | None = None
    ) -> Any:
        """Run argv and wait for what it needs (a blocked read's wake-up, the fsync covering its
        record under `always`, a SAVE); the reply, or ReplyError. `effects_out` receives the
        command's own effects (tests and tools ask for them)."""
        reply, lsn = self.submit(session, argv, effects_out)
        return self._finish(reply, lsn, session)

    def _finish(self, reply: Any, lsn: int, session: Session | None = None) -> Any:
        """What a caller that waits does after submit: the record written (and fsynced under
        `always`), a blocked read's wait, a SAVE's wait. The reply, or ReplyError."""
        journal = self.journal
        if lsn and journal is not None:
            if journal.sync_on_commit:  # the group-commit thread writes and fsyncs the record
                journal.wait_durable(lsn)
            elif journal.deferred:  # a server buffers records; this caller needs its own written
                with self.lock:
                    journal.flush_pending()
                if journal.written_lsn < lsn:
                    raise ReplyError(journal.error or "MISCONF Errors writing to the AOF file")
        t = type(reply)
        if t is Waiter:
            return self._wait(reply)
        if t is Later:
            try:
                return reply.wait()
            except ReplyError as err:
                self.late_error(session or self.session, err)
                raise
        return reply

    def submit(
        self, session: Session, argv: Argv, effects_out: list | None = None,
        notify: Callable[[Waiter], None] | None = None,
    ) -> tuple[Any, int]:
        """Run argv under the lock without waiting: (reply, LSN of its record or 0).

        The reply may be a `Waiter` (a blocked XREAD/XREADGROUP: `notify(waiter)` is called,
        under the engine lock, once `waiter.result` is set; the caller times it out with
        `cancel_wait` and re-runs it at `waiter.wake_at` with `poll_waiter`) or a `Later` (call
        its `wait()` outside the lock for the reply). The server uses this directly so that
        nothing blocks its event loop; `_execute` is the embedded API's waiting wrapper.

        The steps: dispatch, the write gates, run the handler, log its effects, wake the
        clients it made ready, park a blocked read, count the call. Every command takes this
        path, so the steps a plain XADD takes are written inline (a method call costs more
        than most of them); the methods are what it never reaches: the general dispatch
        (`_dispatch`), a closed gate (`_write_gate`, `_refuse`), a failure
        (`_failed_on_storage`), a blocked read (`_park`)."""
        if not argv:
            raise ReplyError("ERR empty command")
        lock = self.lock
        lock.acquire()
        lsn = 0
        try:
            # Dispatch: the fast table when the arity fits, outside MULTI.
            fast = self.dispatch.get(argv[0])
            if fast is not None and fast[1] <= len(argv) <= fast[2] and session.multi is None:
                handler, is_write, counters = fast[0], fast[3], fast[5]
                session.lastcmd = fast[4]
            else:
                handler, is_write, counters, queued = self._dispatch(session, argv)
                if queued is not None:
                    return queued, 0
            # The write gates: one test while both are open.
            if is_write:
                journal = self.journal
                if (journal is not None and journal.error) or self.read_only is not None:
                    gate = self._write_gate(session)
                    if gate is not None:
                        raise self._refuse(session, None, ReplyError(gate), counters)
            # Run the handler. One context per session, reset per command: commands run one at
            # a time under this lock and no handler keeps its context.
            ctx = session.ctx
            if ctx is None:
                ctx = session.ctx = Ctx(self, session, 0)
            db = session.db
            ctx.db = self.dbs[db]
            ctx.now = self.clock()
            ctx.effects = []
            hidden = None
            if self.expires[db]:
                if self.read_only is None and not self._writes_refused():
                    expire_named_keys(ctx, argv)  # lazy expiry of the keys it names
                elif not session.from_primary:
                    # A replica's read, or any while the AOF refuses writes (a deletion could
                    # not be logged): expired keys look missing.
                    hidden = hide_expired(ctx, argv)
            began = _now_ns()
            try:
                reply = handler(ctx, argv)
            except ReplyError as err:
                nanos = _now_ns() - began
                if self.stats.failed(counters, nanos, err.line):
                    self._slow_call(session, argv, nanos)
                if ctx.effects:  # keys expired before it failed: their DELs are logged still
                    session.write_lsn = self._commit(ctx, db)
                raise
            except StorageError as err:  # a damaged snapshot met while reading a cold node
                raise self._failed_on_storage(err, is_write, counters, began) from None
            finally:
                if hidden is not None:
                    unhide(hidden)
            nanos = _now_ns() - began
            # Log its effects: the AOF record, the sinks, WATCH.
            if ctx.effects:
                try:
                    lsn = session.write_lsn = self._commit(ctx, db)
                except ReplyError as err:  # MISCONF: it ran, but its record was not written
                    self.stats.failed(counters, nanos, err.line)
                    raise
                if effects_out is not None:
                    effects_out.extend(ctx.effects)
            # Wake the clients blocked on keys it changed.
            if self.waiters.ready:
                self._serve_ready()
            if type(reply) is Block:
                return self._park(session, argv, reply, counters, nanos, notify), lsn
            # Count the call (a slow one: the slow log, the latency monitor); keep the stream
            # nodes in memory within their budget.
            if count_call(counters, nanos):
                self._slow_call(session, argv, nanos)
            residency = self.residency
            if residency.resident > residency.limit:
                residency.evict()
        finally:
            lock.release()
        return reply, lsn

    def _slow_call(self, session: Session, argv: Argv, nanos: int) -> None:
        """A call count_call found slow (lock held): the slow log's entry and the latency
        monitor's "command" or "fast-command" sample, each if over its own threshold (Redis's
        call(): slowlogPushCurrentCommand, latencyAddSampleIfNeeded). EXEC is never in the
        slow log (its commands are, one by one); a script's commands are, as run by Redis's
        script client (no address: "?:0", no name)."""
        config = self.config
        spec = resolve(argv)
        usec = nanos // 1000
        slower = config["slowlog-log-slower-than"]
        if 0 <= slower <= usec and (spec is None or Flag.SKIP_SLOWLOG not in spec.flags):
            client = session.client
            addr, name = (client.addr if client is not None else ""), session.name
            if self.scripting is not None and self.scripting.running is not None:
                addr, name = "?:0", b""
            self.slowlog.log(argv, usec, addr, name, config["slowlog-max-len"])
        threshold = config["latency-monitor-threshold"]
        if threshold and usec // 1000 >= threshold:
            fast = spec is not None and Flag.FAST in spec.flags
            self.latency.add("fast-command" if fast else "command", usec // 1000)

    def sample_stats(self, counters: dict[str, int] | None = None) -> None:
        """The cron's sample behind INFO's instantaneous rates (engine.exec.stats.sample):
        commands processed, and the server's `counters` (network bytes)."""
        with self.lock:
            self.stats.sample(wall_clock_ms(), counters or {})

    def started_compaction(self, usec: int) -> None:
        """A compaction started, holding the engine lock `usec` (lock held): INFO's
        latest_fork_usec and the latency monitor's "fork" event (the pause Redis's fork is)."""
        self.latest_fork_usec = usec
        threshold = self.config["latency-monitor-threshold"]
        if threshold and usec // 1000 >= threshold:
            self.latency.add("fork", usec // 1000)

    def _dispatch(
        self, session: Session, argv: Argv,
    ) -> tuple[Callable[[Ctx, Argv], Any], bool, list[int], Any]:
        """The general dispatch (lock held): the command table with Redis's exact refusals,
        and MULTI's queueing. Returns (handler, is_write, counters, queued): `queued` is the
        reply of a command queued in MULTI (then nothing runs now), else None."""
        try:
            spec = lookup(argv)
        except ReplyError as err:
            raise self._refuse(session, resolve(argv), err) from None
        session.lastcmd = spec.name
        counters = self.stats.counters(spec.name)
        queued = None
        if session.multi is not None:
            if spec.is_write and self.read_only is not None and not session.from_primary:
                raise self._refuse(session, spec, ReplyError(self.read_only)) from None
            try:
                queued = queue_in_multi(self, session, spec, argv)
            except ReplyError as err:
                raise self._refuse(session, spec, err) from None
        # (lookup returns a spec with a handler: a container without its subcommand is refused)
        return spec.handler, spec.is_write, counters, queued  # type: ignore[return-value]

    def _writes_refused(self) -> bool:
        journal = self.journal
        return journal is not None and journal.error is not None

    def _write_gate(self, session: Session) -> str | None:
        """Why a write from `session` is refused now (its error line), or None: the AOF cannot
        be written (MISCONF, or writes stopped after storage damage), or this engine is a
        replica and the session is not its primary's."""
        journal = self.journal
        if journal is not None and journal.error:
            return journal.error
        if self.read_only is not None and not session.from_primary:
            return self.read_only
        return None

    def _failed_on_storage(self, err: StorageError, is_write: bool, counters: list[int],
                           began: int) -> ReplyError:
        """A handler that met storage damage: counted as a failed call; the error to raise."""
        failed = self._storage_failed(err, is_write)
        self.stats.failed(counters, _now_ns() - began, failed.line)
        return failed

    def _park(self, session: Session, argv: Argv, block: Block, counters: list[int],
              nanos: int, notify: Callable[[Waiter], None] | None) -> Waiter:
        """A command that blocks (lock held): register its waiter on the keys it waits for. Its
        call is counted when it is served or times out, with all its runs' time."""
        waiter = Waiter(session, block.argv, [(session.db, k) for k in block.keys])
        waiter.wake_at = block.wake_at
        waiter.ready = block.ready
        waiter.rerun = block.rerun
        waiter.timeout_ms = block.timeout_ms
        waiter.notify = notify
        waiter.counters = counters
        waiter.nanos = nanos
        waiter.sent = argv
        self.waiters.add(waiter)
        return waiter

    def _storage_failed(self, err: StorageError, is_write: bool) -> ReplyError:
        """The error reply of a command that met storage damage (lock held). A write command
        may have changed the state half-way with nothing logged: writes stop until the data
        directory is reopened (which loads what the log holds)."""
        reply = storage_reply(err)
        journal = self.journal
        if is_write and journal is not None and not journal.error:
            journal.stop_writes(f"ERR a command failed on storage damage ({err}); writes are "
                                f"refused until the data directory is reopened")
        return reply

    def _refuse(
        self, session: Session, spec: CommandSpec | None, err: ReplyError,
        counters: list[int] | None = None,
    ) -> ReplyError:
        """A command refused before it ran (lock held), as Redis's rejectCommand: a refused
        EXEC discards the transaction and says why in an EXECABORT line, any other refusal
        inside MULTI makes the EXEC abort; counted as a rejected call of `spec` (or of
        `counters`; neither: an unknown command) and an error reply. Returns the error to
        raise."""
        if spec is not None:
            session.lastcmd = spec.name
            counters = self.stats.counters(spec.name)
            if spec.name == "exec":
                end_transaction(self, session)
                err = ReplyError("EXECABORT Transaction discarded because of: "
                                 + err.line.removeprefix("ERR "))
        elif counters is None:
            session.lastcmd = None  # Redis's lastcmd of an unknown command: NULL
        if session.multi is not None:
            session.multi_failed = True
        self.stats.rejected(counters, err.line)
        return err

    def run_while_busy(self, session: Session, argv: Argv,
                       gate: Callable[[str], str] | None = None) -> Any:
        """A command from another client while a script is past busy-reply-threshold: Redis's
        processCommand in that state. The script's thread holds the lock and runs this (the
        server serves clients from the script's hook). An unknown command or a wrong arity is
        refused as always, then the server's gate refuses (`gate(name)`: NOAUTH, a RESP2
        subscriber's), then BUSY for a command without the allow_busy flag (inside MULTI too,
        which then fails); the others run: AUTH, HELLO, MULTI, WATCH, QUIT, RESET, SCRIPT
        KILL, SHUTDOWN (BUSY unless NOSAVE). None of those touches the data the script is
        changing."""
        from streamkeep.engine.exec.scripting import BUSY

        try:
            spec = lookup(argv)
        except ReplyError as err:
            return self._refuse(session, resolve(argv), err)
        if gate is not None:
            return self._refuse(session, spec, ReplyError(gate(spec.name)))
        if Flag.ALLOW_BUSY not in spec.flags:
            return self._refuse(session, spec, ReplyError(BUSY))
        try:
            handler, _, counters, queued = self._dispatch(session, argv)
        except ReplyError as err:
            return err
        if queued is not None:
            return queued
        ctx = Ctx(self, session, self.clock())
        began = _now_ns()
        try:
            reply = handler(ctx, argv)
        except ReplyError as err:
            if self.stats.failed(counters, _now_ns() - began, err.line):
                self._slow_call(session, argv, _now_ns() - began)
            return err
        nanos = _now_ns() - began
        if count_call(counters, nanos):
            self._slow_call(session, argv, nanos)
        return reply

    def refuse_unauthenticated(self, session: Session, argv: Argv) -> ReplyError:
        """The reply to a command from a client that has not authenticated (the server's
        gate; AUTH, HELLO, QUIT and RESET pass it): Redis checks the command's existence and
        arity first, then refuses it with NOAUTH; counted as a rejected call either way."""
        return self._refuse_before_run(session, argv, lambda name: NOAUTH)

    def refuse_subscribed(self, session: Session, argv: Argv) -> ReplyError:
        """The reply to a command a subscribed RESP2 connection may not run (the server's
        gate): the command's existence and arity are checked first, as Redis does."""
        return self._refuse_before_run(session, argv, subscribed_context_error)

    def _refuse_before_run(self, session: Session, argv: Argv,
                           line: Callable[[str], str]) -> ReplyError:
        """The server gates' refusal: an unknown command or a wrong arity as the table says,
        else `line(command's full name)`; counted as a rejected call either way."""
        with self.lock:
            try:
                spec = lookup(argv)
            except ReplyError as err:
                return self._refuse(session, resolve(argv), err)
            return self._refuse(session, spec, ReplyError(line(spec.name)))

    def error_replied(self, line: str) -> None:
        """An error reply the engine did not produce (the server's protocol errors)."""
        with self.lock:
            self.stats.error_reply(line)

    def late_error(self, session: Session, err: ReplyError) -> None:
        """A command counted as a call replied an error after it returned (SAVE's wait):
        count the failure and the error reply."""
        with self.lock:
            counters = self.stats.counters(session.lastcmd) if session.lastcmd else None
            self.stats.late_failure(counters, err.line)

    def run_queued(self, ctx: Ctx, queued: list[tuple[CommandSpec, Argv]]) -> list[Any]:
        """EXEC's body (lock held): run the queued commands one after another with one time,
        collecting every effect into `ctx.effects` (one record, so replay applies the whole
        transaction or none of it). A command that switches databases gets a SELECT effect in
        front of its own effects. Errors become the command's reply, as in Redis."""
        session = ctx.session
        record_db = session.db
        mctx = MultiCtx(self, session, ctx.now)
        effects = mctx.effects = ctx.effects
        replies: list[Any] = []
        stats = self.stats
        for spec, argv in queued:
            db = session.db
            mctx.db = self.dbs[db]
            mark = len(effects)
            counters = stats.counters(spec.name)
            began = _now_ns()
            hidden = None
            if self.expires[db]:
                if self.read_only is None:
                    expire_named_keys(mctx, argv)
                elif not session.from_primary:
                    hidden = hide_expired(mctx, argv)
            try:
                if spec.is_write and (gate := self._write_gate(session)) is not None:
                    raise ReplyError(gate)
                reply = spec.handler(mctx, argv)  # type: ignore[misc]
            except ReplyError as err:
                reply = err
                nanos = _now_ns() - began
                if stats.failed(counters, nanos, err.line):
                    self._slow_call(session, argv, nanos)
            except StorageError as err:
                reply = self._failed_on_storage(err, spec.is_write, counters, began)
            else:
                nanos = _now_ns() - began
                if count_call(counters, nanos):  # (EXEC's and a script's commands, one by one)
                    self._slow_call(session, argv, nanos)
            finally:
                if hidden is not None:
                    unhide(hidden)
            if len(effects) > mark and db != record_db:
                effects.insert(mark, select_effect(db))
                record_db = db
            replies.append(reply)
        return replies

    def _commit(self, ctx: Ctx, db: int) -> int:
        """Hand a command's effects to the AOF (which writes them before we reply) and to the
        sinks. `db` is the database selected when the command started (an EXEC's effects
        SELECT others themselves). Returns the record's LSN (0 without an AOF). MISCONF if it
        cannot be written."""
        journal, sinks = self.journal, self.sinks
        lsn = 0
        if journal is not None:
            lsn = journal.append(ctx.now, db, ctx.effects)
        if sinks:
            record = Record(lsn, ctx.now, db, ctx.effects)
            for sink in sinks:
                sink(record)
        if self.watches.by_key:  # (not `if self.watches`: a Python __bool__ call per command)
            self.watches.touch_effects(db, ctx.effects)
        return lsn

    # --- blocking ------------------------------------------------------------------------------

    def _wait(self, waiter: Waiter) -> Any:
        """Block this thread until the waiter is served, times out or needs a timed re-run."""
        with self.lock:  # a re-run sets the event under the lock: none is missed
            event = waiter.event = threading.Event()
            if waiter.done:
                event.set()
        timeout_ms = waiter.timeout_ms
        deadline = None if timeout_ms == 0 else time.monotonic() + timeout_ms / 1000
        while True:
            wait_s = None if deadline is None else max(deadline - time.monotonic(), 0)
            if waiter.wake_at is not None:
                until_wake = max((waiter.wake_at - self.clock()) / 1000, 0) + 0.001
                wait_s = until_wake if wait_s is None else min(wait_s, until_wake)
            if event.wait(wait_s):
                break
            if deadline is not None and time.monotonic() >= deadline and self.cancel_wait(
                    waiter, NULL_ARRAY):
                break
            if self.poll_waiter(waiter):
                break
        if waiter.lsn and self.journal is not None and self.journal.sync_on_commit:
            self.journal.wait_durable(waiter.lsn)
        if isinstance(waiter.result, ReplyError):
            raise waiter.result
        return waiter.result

    def cancel_wait(self, waiter: Waiter, result: Any = NULL_ARRAY) -> bool:
        """End a wait that was not served (timeout: the null reply; a closed connection): True
        if it was still waiting, False if it had been served meanwhile."""
        with self.lock:
            if waiter.done:
                return False
            self.waiters.remove(waiter)
            waiter.done = True
            waiter.result = result
            counters = waiter.counters
            # A timeout: one call (Redis's updateStatsOnUnblock).
            if result is not None and counters is not None and count_call(counters,
                                                                          waiter.nanos):
                self._slow_call(waiter.session, waiter.sent, waiter.nanos)
            return True

    def poll_waiter(self, waiter: Waiter) -> bool:
        """Re-run a waiter whose `wake_at` has come (XREADGROUP CLAIM waiting for an entry to
        become idle enough). True once it is done."""
        with self.lock:
            if not waiter.done and waiter.wake_at is not None \
                    and self.clock() >= waiter.wake_at:
                self._rerun(waiter)
            return waiter.done

    def _rerun(self, waiter: Waiter) -> None:
        """Re-run a waiter's command (lock held); if it no longer blocks, hand it the result.
        A write (XREADGROUP) while the AOF refuses writes is not run: its reply is MISCONF, as
        Redis's re-processing of an unblocked command refuses it."""
        session = waiter.session
        ctx = RerunCtx(self, session, self.clock())
        rerun = waiter.rerun
        began = _now_ns()
        hidden = None
        if self.read_only is not None and not session.from_primary and \
                self.expires[session.db]:  # a replica's blocked read: as when it first ran
            hidden = hide_expired(ctx, waiter.argv)
        try:
            if self._writes_refused() and lookup(waiter.argv).is_write:
                raise ReplyError(self.journal.error)  # type: ignore[union-attr, arg-type]
            if rerun is not None:
                result = rerun(ctx)
            else:
                result = lookup(waiter.argv).handler(ctx, waiter.argv)  # type: ignore[misc]
        except ReplyError as err:
            result = err
        except StorageError as err:
            result = self._storage_failed(err, lookup(waiter.argv).is_write)
        finally:
            if hidden is not None:
                unhide(hidden)
        waiter.nanos += _now_ns() - began
        if type(result) is Block:
            waiter.wake_at = result.wake_at
            waiter.ready = result.ready
            waiter.rerun = result.rerun
            return
        if ctx.effects:
            try:
                # What WAIT and WAITAOF on its connection wait for: this record, not the one
                # of its first, blocking run.
                waiter.lsn = session.write_lsn = self._commit(ctx, session.db)
            except ReplyError as err:  # MISCONF: the re-run's change could not be logged
                result = err
        self._count_unblocked(waiter, result)
        waiter.result = result
        waiter.done = True
        self.waiters.remove(waiter)
        if waiter.event is not None:
            waiter.event.set()
        if waiter.notify is not None:
            waiter.notify(waiter)

    def _count_unblocked(self, waiter: Waiter, result: Any) -> None:
        """A blocked command finished: one call (a failed one if it replied an error, as a
        blocked XREADGROUP whose group or key went away does), with all its runs' time."""
        counters = waiter.counters
        if counters is None:
            return
        if isinstance(result, ReplyError):
            slow = self.stats.failed(counters, waiter.nanos, result.line)
        else:
            slow = count_call(counters, waiter.nanos)
        if slow:
            self._slow_call(waiter.session, waiter.sent, waiter.nanos)

    def _serve_ready(self) -> None:
        """Re-run the commands of clients waiting on signalled keys, first come first served."""
        while (k := self.waiters.pop_ready()) is not None:
            # Ready checks found false in this pass stay false: a re-run only delivers (or
            # creates a consumer), it never adds entries or removes a key or group. Ten
            # consumers of one group blocked on a key take one check per XADD, not ten.
            not_ready: set | None = None
            for waiter in self.waiters.waiting_on(k):
                if waiter.done:
                    continue
                ready = waiter.ready
                if ready is not None:
                    if not_ready is not None and ready.key in not_ready:  # type: ignore[attr-defined]
                        continue
                    if not ready():
                        if not_ready is None:
                            not_ready = set()
                        not_ready.add(ready.key)  # type: ignore[attr-defined]
                        continue
                self._rerun(waiter)

    def blocked_clients(self) -> int:
        with self.lock:
            return len({id(w) for q in self.waiters.by_key.values() for w in q})

    # --- applying effects ----------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        """Apply one record's effects through the command table (replay, replicas, snapshots)."""
        with self.lock:
            session = Session(record.db)
            for effect in record.effects:
                argv = tuple(effect)
                spec = lookup(argv, allow_internal=True)
                ctx = ReplayCtx(self, session, record.time_ms)
                spec.handler(ctx, argv)  # type: ignore[misc]
            if self.waiters.ready:
                self._serve_ready()
            if self.residency.resident > self.residency.limit:
                self.residency.evict()

    def apply_many(self, records: Iterable[Record | tuple],
                   before: Callable[[], None] | None = None) -> None:
        """Apply records in order under one lock acquisition: the replay loop. Records may be
        plain `(lsn, time_ms, db, effects)` tuples, as the AOF decoder yields them.

        A record made of one `XADD key id field value ...` effect without options (what every
        XADD logs) skips the dispatch and the context set-up: it runs cmd_streams.add_entry,
        the XADD handler's own validated append, with the same checks and errors (an ID not
        greater than the stream's last refuses the record, as through the handler). Any other
        record, and an XADD add_entry declines, goes through the command table.

        `before` runs under the same lock first: a replica logs the records it applies there,
        so nobody sees them applied and not logged."""
        with self.lock:
            if before is not None:
                before()
            session = Session()
            ctx = ReplayCtx(self, session, 0)
            dbs = self.dbs
            fast_dispatch = FAST_DISPATCH
            waiters = self.waiters
            residency = self.residency
            notify = self.notify_flags  # (a replica publishes its keyspace events as it applies)
            for _lsn, time_ms, db, effects in records:
                if residency.resident > residency.limit:  # a long replay stays in budget too
                    residency.evict()
                if len(effects) == 1:
                    argv = effects[0]
                    if type(argv) is not tuple:  # (decoded records hold tuples, Records lists)
                        argv = tuple(argv)
                    if (argv[0] == b"XADD" and len(argv) >= 5
                            and add_entry(self, dbs[db], argv, time_ms) is not None):
                        if waiters.by_key:
                            waiters.signal(db, argv[1])
                        if notify:
                            keyspace_event(self, STREAM, b"xadd", argv[1], db)
                        continue
                session.db = db
                ctx.db = dbs[db]
                ctx.now = time_ms
                if ctx.effects:  # what handlers emit while replaying is not needed
                    ctx.effects = []
                for effect in effects:
                    argv = effect if type(effect) is tuple else tuple(effect)
                    fast = fast_dispatch.get(argv[0])
                    if fast is not None:
                        fast[0](ctx, argv)
                    else:
                        lookup(argv, allow_internal=True).handler(ctx, argv)  # type: ignore[misc]
                    if session.db != db:  # an effect SELECTed another database
                        db = session.db
                        ctx.db = dbs[db]
            if waiters.ready:
                self._serve_ready()

    def apply_effects(self, effects: list[list[bytes]], time_ms: int, db: int = 0) -> None:
        self.apply(Record(0, time_ms, db, effects))

    # --- state ---------------------------------------------------------------------------------

    def digest(self) -> str:
        """Hex digest of the whole logical state (see engine.digest)."""
        with self.lock:
            return state_digest(self.dbs, self.strings, self.expires)

    def active_expire_cycle(self) -> int:
        """One pass of Redis's activeExpireCycle over every database with TTLs: a sample of
        keys looked at, the expired ones deleted, their DELs logged as one record per
        database. Nothing on a read-only replica (its primary's DELs arrive as effects) or
        while the AOF cannot be written (a deletion must never go unlogged). Returns how many
        keys were deleted."""
        removed = 0
        began = _now_ns()
        with self.lock:
            journal = self.journal
            if self.read_only is not None or (journal is not None and journal.error):
                return 0
            session, now = Session(), self.clock()
            for index, expires in enumerate(self.expires):
                if not expires:
                    continue
                session.db = index
                ctx = Ctx(self, session, now)
                removed += active_expire(ctx)
                if ctx.effects:
                    try:
                        self._commit(ctx, index)
                    except ReplyError:  # not logged: rolled back with the state (MISCONF)
                        break
            if self.waiters.ready:
                self._serve_ready()
            self._expire_cycle_ran(_now_ns() - began)
        return removed

    def _expire_cycle_ran(self, nanos: int) -> None:
        """The active expiry cycle's time (lock held): INFO's expire_cycle_cpu_milliseconds
        and the latency monitor's "expire-cycle" event."""
        self.stats.expire_cycle_nanos += nanos
        threshold = self.config["latency-monitor-threshold"]
        if threshold and nanos // 1_000_000 >= threshold:
            self.latency.add("expire-cycle", nanos // 1_000_000)

    def replace_state_locked(self, dbs: list[dict[bytes, Stream]],
                             strings: list[dict[bytes, bytes]] | None = None,
                             expires: list[dict[bytes, int]] | None = None,
                             wake: bool = True) -> None:
        """Replace every database at once (engine lock held): a replica's full sync installs
        its primary's snapshot (None: no strings, no TTLs). With `wake`, clients blocked on a
        key are re-run against the new data."""
        self.residency.adopt(dbs)  # loaded by another engine: they count here from now on
        self.dbs[:] = dbs
        self.strings[:] = strings if strings is not None else [{} for _ in dbs]
        self.expires[:] = expires if expires is not None else [{} for _ in dbs]
        if not wake:
            return
        for db, streams in enumerate(dbs):
            for key in streams:
                self.waiters.signal(db, key)
        if self.waiters.ready:
            self._serve_ready()

    def roll_back_locked(self, dbs: list[dict[bytes, Stream]], strings: list[dict[bytes, bytes]],
                         expires: list[dict[bytes, int]]) -> None:
        """The AOF dropped records this state had applied (engine lock held): install the
        state the log holds (the data directory reloaded it), then tell the server, whose
        replies still waiting for those records become MISCONF. Blocked clients are not
        re-run: nothing in the log's state is newer than what they found when they blocked."""
        self.replace_state_locked(dbs, strings, expires, wake=False)
        for hook in self.rollback_hooks:
            hook()

    def add_sink(self, sink: RecordSink) -> None:
        self.sinks.append(sink)


__all__ = ["EngineCore", "Session", "RespMap"]
