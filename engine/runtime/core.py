"""The engine's core, in memory: running commands, effects out, effects in, blocking, the
digest.

Owns `EngineCore` (the public `Engine` of engine.runtime.engine without its data directory
and replication): one-at-a-time command execution under the engine lock (argv -> command ->
reply + effects), the record sinks that later carry effects to the AOF and replicas, the apply
path that replays records through the same command table, blocked-client wake-ups, the state
digest, and counting each command into the server statistics (engine.exec.stats: calls, time,
refusals, failures, errors, latency histograms) and handing a slow one to the slow log and
the latency monitor (engine.exec.slowlog, engine.exec.latency).

Every handler runs through one method, `_run`: a client's command (`submit`, and the server's
batches through `run_locked`), EXEC's, a script's and a primary's batch of commands
(`run_queued`), a blocked read's re-run, a command answered while a script is busy, and the
effects of a record being applied (`apply_many`). Handlers see the engine as
engine.exec.host.EngineState, which this class extends. Must not touch: command semantics
(engine.commands), the data structures' internals, files (aof/ owns those), opening a data
directory or attaching replication (engine.runtime.engine composes those; they reach the core
through engine.exec.interfaces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Self

from streamkeep.engine import commands as _commands  # noqa: F401  (registers every command)
from streamkeep.engine.commands.expiry import (
    active_expire,
    expire_named_keys,
    hide_expired,
    unhide,
)
from streamkeep.engine.commands.info import resident_bytes
from streamkeep.engine.commands.pubsub import glob_match
from streamkeep.engine.exec.blocking import Waiter, WaiterRegistry
from streamkeep.engine.exec.context import (
    Block,
    BusyCtx,
    Ctx,
    Later,
    MultiCtx,
    ReplayCtx,
    RerunCtx,
    Session,
)
from streamkeep.engine.exec.host import EngineState
from streamkeep.engine.exec.latency import LatencyMonitor
from streamkeep.engine.exec.pubsub import (
    PubSub,
    Subscription,
    subscribed_context_error,
)
from streamkeep.engine.exec.settings import DEFAULT_CONFIG, normalize_settings
from streamkeep.engine.exec.slowlog import SlowLog
from streamkeep.engine.exec.stats import CommandCounters, ServerStats
from streamkeep.engine.exec.table import (
    FAST_DISPATCH,
    Argv,
    CommandSpec,
    Flag,
    Handler,
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
from streamkeep.engine.model.effects import Record, select_effect
from streamkeep.engine.model.residency import Residency
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.argv import encode_args
from streamkeep.engine.wire.errors import ReplyError, StorageError, storage_reply
from streamkeep.engine.wire.reply import NULL_ARRAY, RespMap, to_plain

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import Log
    from streamkeep.engine.runtime.redis_api import RedisAPI

Clock = Callable[[], int]
RecordSink = Callable[[Record], None]
NUM_DATABASES: Final = 16
NOAUTH: Final = "NOAUTH Authentication required."
# A command's timer (ns): read when an engine is made, so a test's stand-in is the engine's own.
_now_ns = time.perf_counter_ns
# What runs after each command or applied batch of records, once the engine lock is released
# (None: nothing), given the engine; read when an engine is made. The cold-node test mode
# (tests/support/cold_nodes.py) settles every engine's stream nodes through it.
after_commands: Callable[[EngineCore], None] | None = None
_time_ns: Final = time.time_ns


def _plain_xadd(argv: Argv) -> bool:
    """`XADD key * field value ...` as StreamQueue sends it: no option, the arity right (a
    transaction refuses a wrong one before running anything; a batch would run the rest)."""
    return len(argv) >= 5 and len(argv) & 1 == 1 and argv[0] == b"XADD" and argv[2] == b"*"


def wall_clock_ms() -> int:
    return _time_ns() // 1_000_000


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


class Entry:
    """A command as this engine runs it: its handler, the argument counts its arity allows,
    whether it writes, its name (its statistics and CLIENT LIST's cmd= are kept under it)
    and this engine's counters for it. The dispatch table maps each common spelling of a
    plain command to its entry; any other command gets one when it is looked up."""

    __slots__ = ("handler", "min_args", "max_args", "is_write", "name", "counters")

    def __init__(self, spec: CommandSpec, counters: CommandCounters) -> None:
        assert spec.handler is not None  # (lookup never returns a container without one)
        self.handler: Handler = spec.handler
        self.min_args = spec.arity if spec.arity > 0 else -spec.arity
        self.max_args = spec.arity if spec.arity > 0 else 1 << 30
        self.is_write = spec.is_write
        self.name = spec.name
        self.counters = counters


class EngineCore(EngineState):
    """Redis Streams semantics in process, in memory. Thread-safe; commands run one at a
    time. `Engine` (engine.runtime.engine) adds the data directory and replication."""

    def __init__(
        self,
        clock: Clock | None = None,
        config_file: str | None = None,
        **config: Any,
    ) -> None:
        self.clock = clock or wall_clock_ms
        self.wall_clock = self.clock is wall_clock_ms  # (then `now()` reads it inline)
        # Settings (engine.config's registry): Redis's names, validated, canonical values.
        self.config = {**DEFAULT_CONFIG, **normalize_settings(config)}
        self.config_file = config_file  # the file CONFIG REWRITE rewrites (the server's)
        # Which stream nodes are in memory (the backlog-memory budget; engine.model.residency).
        self.residency = Residency(int(self.config["backlog-memory"]))
        self.apply_config()
        self.dbs = [{} for _ in range(NUM_DATABASES)]
        # Beside each database's streams: its string values and the TTLs of keys of either
        # type (engine.commands.expiry says how they expire).
        self.strings = [{} for _ in range(NUM_DATABASES)]
        self.expires = [{} for _ in range(NUM_DATABASES)]
        # Held while a command runs. Re-entrant for the server, which holds it over a batch of
        # a connection's commands and calls back into the engine from its glue; handlers
        # never take it.
        self.lock = threading.RLock()  # type: ignore[assignment]
        self.waiters = WaiterRegistry()
        self.watches = WatchRegistry()
        self.pubsub = PubSub(glob_match)  # channels and patterns: not persisted, not logged
        self.server = None  # the network server serving this engine, if any
        # Lua scripting (engine.exec.scripting.Scripting), made by the first script: not
        # persisted, not logged (a script's effects are).
        self.scripting = None
        self.started_ms = wall_clock_ms()
        self.sinks: list[RecordSink] = []
        self.session = Session()
        self.journal = None  # the AOF, when opened on a data directory
        self.datadir = None
        # INFO's master_replid without a data directory: a history of its own, named by the
        # first INFO ("" until then).
        self.memory_repl_id = ""
        # Replication (replication.service), when attached: the role, REPLICAOF, WAIT. A
        # replica's write commands are refused with this line (None: writes are accepted).
        self.replication = None
        self.read_only = None
        # Hooks the services register when they attach (engine.exec.interfaces): CONFIG SET
        # runs config_hooks[name] after storing a new value; INFO asks info_sections first.
        self.config_hooks = {}
        self.info_sections = {}
        # Run after the AOF dropped records and the state was rolled back (the server's: its
        # replies awaiting them are refused). Engine lock held, any thread.
        self.rollback_hooks: list[Callable[[], None]] = []
        # INFO commandstats/errorstats (engine.exec.stats), and the dispatch table: each
        # plain command's entry under its common spellings, with its counters.
        self.stats = ServerStats(command_names())
        self.entries: dict[str, Entry] = {}  # by full name, made as commands are looked up
        self.dispatch: dict[bytes, Entry] = {
            spelling: self._entry(spec) for spelling, spec in FAST_DISPATCH.items()}
        # SLOWLOG and LATENCY (engine.exec.slowlog, engine.exec.latency): a call its counters
        # find slow goes to `_slow_call`, which applies each one's own threshold.
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.apply_monitoring()
        self.timer: Callable[[], int] = _now_ns  # times each command (INFO commandstats...)
        self.after_command = after_commands
        self.latest_fork_usec = 0  # how long starting the last compaction held the lock
        self.startup_memory = resident_bytes()  # INFO's used_memory_startup
        self.closed = False

    def now(self) -> int:
        """The engine clock's time (ms): a command's time is read once, when it starts."""
        return _time_ns() // 1_000_000 if self.wall_clock else self.clock()

    def _entry(self, spec: CommandSpec) -> Entry:
        """The entry that runs `spec` (a command of the effects' own vocabulary counts in
        counters of its own, which no statistic reports)."""
        entry = self.entries.get(spec.name)
        if entry is None:
            counters = CommandCounters() if spec.internal else self.stats.counters(spec.name)
            entry = self.entries[spec.name] = Entry(spec, counters)
        return entry

    def attach_journal(self, journal: Log) -> None:
        with self.lock:
            self.journal = journal

    def locked(self, fn: Callable[[], Any]) -> Any:
        """Run fn under the engine lock (the journal's write retry needs it)."""
        with self.lock:
            return fn()

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
        reply, lsn = self.submit(self.session, argv)
        t = type(reply)
        if (t is bytes or t is int) and not (lsn and self._needs_finish()):
            return reply
        return to_plain(self._finish(reply, lsn))

    def _needs_finish(self) -> bool:
        """A write's record is still to be written or fsynced before its reply is final."""
        journal = self.journal
        return journal is not None and journal.buffered

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
        subscription = Subscription(self, Session(), self.execute_raw, limit_bytes)
        if channels:
            subscription.subscribe(*channels)
        return subscription

    def psubscribe(self, *patterns: bytes | str, limit_bytes: int | None = None
                   ) -> Subscription:
        """Like subscribe, to glob patterns (PSUBSCRIBE)."""
        subscription = Subscription(self, Session(), self.execute_raw, limit_bytes)
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
                self.stats.counters("exec").calls += 1
                replies: list[Any] | None = self._run_batch(session, argvs)
            else:
                replies = None
                self._queue_transaction(session, argvs)
        if replies is None:
            return self._execute(session, (b"EXEC",))
        self.commands_done()
        return replies

    def _queue_transaction(self, session: Session, argvs: list[Argv]) -> None:
        """MULTI and `argvs` queued (lock held), as over the wire: a refused command makes the
        EXEC abort."""
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

    def execute_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """Commands run in order under one lock hold and logged as one record, as EXEC runs
        them (a failed command's ReplyError in its place), without a transaction around them:
        a redis-server primary's stream between its transactions (replication.redis_commands).
        MISCONF (raised, nothing run) when the AOF cannot be written."""
        with self.lock:
            journal = self.journal
            if journal is not None and journal.error:
                raise ReplyError(journal.error)
            replies = self._run_batch(session, argvs)
        self.commands_done()
        return replies

    def _run_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """execute_batch's body (lock held): each command as EXEC runs it (an unknown one or
        a wrong arity is its reply), then one record."""
        ctx = MultiCtx(self, session, self.now())
        first_db = session.db
        record_db = [first_db]  # the database the record has selected so far
        replies: list[Any] = []
        for argv in argvs:
            try:
                entry = self._entry_for(argv)
            except ReplyError as err:  # unknown command, wrong arity
                replies.append(err)
                continue
            replies.append(self._run_queued_one(ctx, entry, argv, record_db))
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
        its `wait()` outside the lock for the reply). `_execute` is the embedded API's waiting
        wrapper; the server holds the lock over a batch of commands and calls `run_locked`."""
        lock = self.lock
        lock.acquire()
        try:
            return self.run_locked(session, argv, effects_out, notify)
        finally:
            lock.release()
            if self.after_command is not None:
                self.after_command(self)

    def commands_done(self) -> None:
        """A caller that ran commands under the lock (the server's batch) released it."""
        if self.after_command is not None:
            self.after_command(self)

    def run_locked(
        self, session: Session, argv: Argv, effects_out: list | None = None,
        notify: Callable[[Waiter], None] | None = None,
    ) -> tuple[Any, int]:
        """submit's body, for a caller that holds the engine lock: dispatch, the write gates,
        the command (`_run`), its effects logged, the clients it made ready woken, a blocked
        read parked, the stream nodes kept within their memory budget."""
        if not argv:
            raise ReplyError("ERR empty command")
        # Dispatch: the table of plain commands when the arity fits, outside MULTI.
        entry = self.dispatch.get(argv[0])
        if (entry is None or not entry.min_args <= len(argv) <= entry.max_args
                or session.multi is not None):
            entry, queued = self._dispatch(session, argv)
            if entry is None:
                return queued, 0
        session.lastcmd = entry.name
        if entry.is_write:
            self._check_write_gates(session, entry)
        # One context per session, reset per command: commands run one at a time under the
        # lock and no handler keeps its context.
        ctx = session.ctx
        if ctx is None:
            ctx = session.ctx = Ctx(self, session, 0)
        db = session.db
        ctx.db = self.dbs[db]
        ctx.now = self.now()
        ctx.effects = []
        try:
            reply = self._run(ctx, entry, argv)
        except ReplyError:
            if ctx.effects:  # keys expired before it failed: their DELs are logged still
                session.write_lsn = self._commit(ctx, db)
            raise
        lsn = 0
        if ctx.effects:
            lsn = self._commit_command(ctx, db, entry)
            if effects_out is not None:
                effects_out.extend(ctx.effects)
        if self.waiters.ready:
            self._serve_ready()
        if type(reply) is Block:
            return self._park(session, argv, reply, entry.counters, notify), lsn
        residency = self.residency
        if residency.resident > residency.limit:
            residency.evict()
        return reply, lsn

    def _check_write_gates(self, session: Session, entry: Entry) -> None:
        """A write command is refused while the AOF cannot be written or this engine is a
        replica (one test while both are open)."""
        journal = self.journal
        if (journal is not None and journal.error) or self.read_only is not None:
            gate = self._write_gate(session)
            if gate is not None:
                raise self._refuse(session, None, ReplyError(gate), entry.counters)

    def _commit_command(self, ctx: Ctx, db: int, entry: Entry) -> int:
        """A client command's effects logged: its record's LSN, which WAIT and WAITAOF on its
        connection wait for. MISCONF when the record could not be written: the command ran,
        so its call counts as failed (it was counted as a call already)."""
        try:
            lsn = ctx.session.write_lsn = self._commit(ctx, db)
        except ReplyError as err:
            entry.counters.failed += 1
            self.stats.error_reply(err.line)
            raise
        return lsn

    def _run(self, ctx: Ctx, entry: Entry, argv: Argv) -> Any:
        """Run one command's handler in `ctx`: the step every way of running a command takes.

        A record's effects being applied (`ctx.replaying`) only run. A client's command first
        has the keys it names expired (engine.commands.expiry: deleted, their DELs among its
        effects, or only hidden where a deletion could not be logged: on a replica, or while
        the AOF refuses writes), then runs timed; the call is counted, a slow one handed to the
        slow log and the latency monitor (a blocked read is counted once served). A handler's
        ReplyError is counted as a failed call and raised; storage damage met while reading a
        cold node becomes its error reply (and stops writes after a write command)."""
        if ctx.replaying:
            return entry.handler(ctx, argv)
        session = ctx.session
        hidden = None
        if ctx.lazy_expiry and self.expires[session.db]:
            journal = self.journal
            if self.read_only is None and (journal is None or journal.error is None):
                expire_named_keys(ctx, argv)
            elif not session.from_primary:
                hidden = hide_expired(ctx, argv)
        began = self.timer()
        try:
            reply = entry.handler(ctx, argv)
        except ReplyError as err:
            nanos = self.timer() - began
            if self.stats.failed(entry.counters, nanos, err.line):
                self._slow_call(session, argv, nanos)
            raise
        except StorageError as err:
            failed = self._storage_failed(err, entry.is_write)
            self.stats.failed(entry.counters, self.timer() - began, failed.line)
            raise failed from None
        finally:
            if hidden is not None:
                unhide(hidden)
        nanos = self.timer() - began
        if type(reply) is Block:
            reply.nanos = nanos  # (counted with its re-runs' time once it is served)
        elif entry.counters.count(nanos):
            self._slow_call(session, argv, nanos)
        return reply

    def _slow_call(self, session: Session, argv: Argv, nanos: int) -> None:
        """A call its counters found slow (lock held): the slow log's entry and the latency
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

    def _dispatch(self, session: Session, argv: Argv) -> tuple[Entry | None, Any]:
        """The general dispatch (lock held): the command table with Redis's exact refusals,
        and MULTI's queueing. Returns (entry, None), or (None, reply) for a command queued in
        MULTI (then nothing runs now)."""
        try:
            spec = lookup(argv)
        except ReplyError as err:
            raise self._refuse(session, resolve(argv), err) from None
        session.lastcmd = spec.name
        if session.multi is not None:
            if spec.is_write and self.read_only is not None and not session.from_primary:
                raise self._refuse(session, spec, ReplyError(self.read_only)) from None
            try:
                queued = queue_in_multi(self, session, spec, argv)
            except ReplyError as err:
                raise self._refuse(session, spec, err) from None
            if queued is not None:
                return None, queued
        return self._entry(spec), None

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

    def _park(self, session: Session, argv: Argv, block: Block, counters: CommandCounters,
              notify: Callable[[Waiter], None] | None) -> Waiter:
        """A command that blocks (lock held): register its waiter on the keys it waits for. Its
        call is counted when it is served or times out, with all its runs' time."""
        waiter = Waiter(session, block.argv, [(session.db, k) for k in block.keys])
        waiter.wake_at = block.wake_at
        waiter.ready = block.ready
        waiter.rerun = block.rerun
        waiter.timeout_ms = block.timeout_ms
        waiter.notify = notify
        waiter.counters = counters
        waiter.nanos = block.nanos
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
        counters: CommandCounters | None = None,
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
        changing, and no key they name is expired meanwhile (BusyCtx)."""
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
            entry, queued = self._dispatch(session, argv)
        except ReplyError as err:
            return err
        if entry is None:
            return queued
        try:
            return self._run(BusyCtx(self, session, self.now()), entry, argv)
        except ReplyError as err:
            return err

    def refuse_unauthenticated(self, session: Session, argv: Argv) -> ReplyError:
        """The reply to a command from a client that has not authenticated (the server's
        gate; AUTH, HELLO, QUIT and RESET pass it): Redis checks the command's existence and
        arity first, then refuses it with NOAUTH; counted as a rejected call either way."""
        return self._refuse_before_run(session, argv, _noauth)

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
        mctx = MultiCtx(self, ctx.session, ctx.now)
        mctx.effects = ctx.effects
        record_db = [ctx.session.db]
        return [self._run_queued_one(mctx, self._entry(spec), argv, record_db)
                for spec, argv in queued]

    def _run_queued_one(self, ctx: Ctx, entry: Entry, argv: Argv, record_db: list[int]) -> Any:
        """One command of a transaction, a script or a batch (lock held): its reply, or the
        ReplyError it failed with. Its effects go to `ctx.effects`, behind a SELECT when it
        ran in another database than the record's last one (`record_db[0]`)."""
        session = ctx.session
        db = session.db
        ctx.db = self.dbs[db]
        effects = ctx.effects
        mark = len(effects)
        gate = None
        if entry.is_write and (self.read_only is not None or self._writes_refused()):
            gate = self._write_gate(session)
        if gate is not None:  # (the write gates closed during the transaction: a failed call)
            reply: Any = ReplyError(gate)
            self.stats.failed(entry.counters, 0, gate)
        else:
            try:
                reply = self._run(ctx, entry, argv)
            except ReplyError as err:
                reply = err
        if len(effects) > mark and db != record_db[0]:
            effects.insert(mark, select_effect(db))
            record_db[0] = db
        return reply

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
                until_wake = max((waiter.wake_at - self.now()) / 1000, 0) + 0.001
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
            if result is not None and counters is not None and counters.count(waiter.nanos):
                self._slow_call(waiter.session, waiter.sent, waiter.nanos)
            return True

    def poll_waiter(self, waiter: Waiter) -> bool:
        """Re-run a waiter whose `wake_at` has come (XREADGROUP CLAIM waiting for an entry to
        become idle enough). True once it is done."""
        with self.lock:
            if not waiter.done and waiter.wake_at is not None \
                    and self.now() >= waiter.wake_at:
                self._rerun(waiter)
            return waiter.done

    def _rerun(self, waiter: Waiter) -> None:
        """Re-run a waiter's command (lock held); if it no longer blocks, hand it the result.
        A write (XREADGROUP) while the AOF refuses writes is not run: its reply is MISCONF, as
        Redis's re-processing of an unblocked command refuses it."""
        session = waiter.session
        ctx = RerunCtx(self, session, self.now())
        rerun = waiter.rerun
        began = self.timer()
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
        waiter.nanos += self.timer() - began
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
            slow = counters.count(waiter.nanos)
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
        self.apply_many((record,))

    def apply_many(self, records: Iterable[Record | tuple],
                   before: Callable[[], None] | None = None) -> None:
        """Apply records in order under one lock acquisition: the replay loop. Records may be
        plain `(lsn, time_ms, db, effects)` tuples, as the AOF decoder yields them. Each
        effect runs its command's handler (`_run`, replaying: no expiry, no statistics), the
        internal vocabulary of effects included.

        `before` runs under the same lock first: a replica logs the records it applies there,
        so nobody sees them applied and not logged."""
        with self.lock:
            if before is not None:
                before()
            session = Session()
            ctx = ReplayCtx(self, session, 0)
            dbs = self.dbs
            residency = self.residency
            for _lsn, time_ms, db, effects in records:
                if residency.resident > residency.limit:  # a long replay stays in budget too
                    residency.evict()
                session.db = db
                ctx.now = time_ms
                for effect in effects:
                    argv = effect if type(effect) is tuple else tuple(effect)
                    ctx.db = dbs[session.db]  # (an effect may have SELECTed another one)
                    if ctx.effects:  # what handlers emit while replaying is not needed
                        ctx.effects = []
                    self._run(ctx, self._effect_entry(argv), argv)
            if self.waiters.ready:
                self._serve_ready()
        self.commands_done()

    def _entry_for(self, argv: Argv) -> Entry:
        """The entry that runs argv: the dispatch table's when its arity fits, else the command
        table's (ReplyError, as Redis refuses an unknown command or a wrong arity)."""
        entry = self.dispatch.get(argv[0])
        if entry is not None and entry.min_args <= len(argv) <= entry.max_args:
            return entry
        return self._entry(lookup(argv))

    def _effect_entry(self, argv: Argv) -> Entry:
        """The entry that applies an effect: its command's, the effects' own vocabulary
        included (a record holds only what the engine logged: no refusal to count)."""
        entry = self.dispatch.get(argv[0])
        if entry is not None:
            return entry
        return self._entry(lookup(argv, allow_internal=True))

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
        began = self.timer()
        with self.lock:
            journal = self.journal
            if self.read_only is not None or (journal is not None and journal.error):
                return 0
            session, now = Session(), self.now()
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
            self._expire_cycle_ran(self.timer() - began)
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


def _noauth(name: str) -> str:
    return NOAUTH


__all__ = ["EngineCore", "Entry", "RespMap", "Session"]
