"""The engine's core, in memory: the one path every command runs on, and the parts around it.

Owns `EngineCore` (the public `Engine` of engine.services.engine without its data directory
and replication): one-at-a-time command execution under the engine lock (argv -> command ->
reply + effects), the one write gate, the record sinks that carry effects to the AOF and
replicas, the state digest, and counting each command into the server statistics
(engine.exec.stats) and handing a slow one to the slow log and the latency monitor.

Every handler runs through one method, `run_command`, which gates, expires the keys the
command names, times it, runs the handler, maps storage errors and logs its record. Its
callers differ only in the context they hand it (engine.exec.context: the kinds differ in
data): a client's command (`submit`, and the server's batches through `run_locked`), EXEC's,
a script's and a batch's commands (engine.runtime.batches), a blocked read's re-run
(engine.runtime.waiting), a command answered while a script is busy
(engine.runtime.refusals), and the effects of a record being applied (engine.runtime.replay).
The active expiry cycle is engine.runtime.expiry_cycle. Handlers see the engine as
engine.exec.engine_state.EngineState, which this class extends. Must not touch: command semantics
(engine.commands), the data structures' internals, files (aof/ owns those), opening a data
directory or attaching replication (engine.services.engine composes those; they reach the core
through engine.exec.interfaces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, Self

from streamkeep.engine import commands as _commands  # noqa: F401  (registers every command)
from streamkeep.engine.commands.info import resident_bytes
from streamkeep.engine.commands.pubsub import glob_match
from streamkeep.engine.exec.blocking import Waiter, WaiterRegistry
from streamkeep.engine.exec.context import Block, Ctx, Later, Session
from streamkeep.engine.exec.engine_state import EngineState
from streamkeep.engine.exec.keys import expire_named_keys, hide_expired, unhide
from streamkeep.engine.exec.latency import LatencyMonitor
from streamkeep.engine.exec.pubsub import PubSub, Subscription
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
from streamkeep.engine.exec.transactions import RUN_IN_MULTI, WatchRegistry, queue_in_multi
from streamkeep.engine.model.digest import state_digest
from streamkeep.engine.model.effects import Record
from streamkeep.engine.model.residency import Residency
from streamkeep.engine.model.value_types import STREAM, STRING, TYPES
from streamkeep.engine.runtime.acl_gate import plan_for, unrestricted
from streamkeep.engine.runtime.acl_gate import refusal as acl_refusal
from streamkeep.engine.runtime.batches import Batches
from streamkeep.engine.runtime.expiry_cycle import active_expire_cycle
from streamkeep.engine.runtime.refusals import Refusals
from streamkeep.engine.runtime.replay import Replay
from streamkeep.engine.runtime.waiting import WaitingReaders
from streamkeep.engine.wire.argv import encode_args
from streamkeep.engine.wire.errors import ReplyError, StorageError, storage_reply
from streamkeep.engine.wire.reply import RespMap, to_plain

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import Log
    from streamkeep.engine.runtime.redis_api import RedisAPI

Clock = Callable[[], int]
RecordSink = Callable[[Record], None]
NUM_DATABASES: Final = 16
# A command's timer (ns): read when an engine is made, so a test's stand-in is the engine's own.
_now_ns = time.perf_counter_ns
# What runs after each command or applied batch of records, once the engine lock is released
# (None: nothing), given the engine; read when an engine is made. The cold-node test mode
# (tests/support/cold_nodes.py) settles every engine's stream nodes through it.
after_commands: Callable[[EngineCore], None] | None = None
_time_ns: Final = time.time_ns


def wall_clock_ms() -> int:
    return _time_ns() // 1_000_000


def argv_of(args: tuple[Any, ...]) -> Argv:
    """An embedded caller's arguments as a command's argv: str (UTF-8), bytes, int and float
    as a connection would send them; TypeError for what is not an argument (a bool too)."""
    argv = encode_args(args)  # str, bytes and int, the common case, in one kernel call
    return argv if argv is not None else tuple(map(_to_bytes, args))


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

    __slots__ = ("handler", "min_args", "max_args", "is_write", "name", "counters", "spec")

    def __init__(self, spec: CommandSpec, counters: CommandCounters) -> None:
        assert spec.handler is not None  # (lookup never returns a container without one)
        self.spec = spec  # (the ACL gate reads its key specs)
        self.handler: Handler = spec.handler
        self.min_args = spec.arity if spec.arity > 0 else -spec.arity
        self.max_args = spec.arity if spec.arity > 0 else 1 << 30
        self.is_write = spec.is_write
        self.name = spec.name
        self.counters = counters


class EngineCore(EngineState):
    """Redis Streams semantics in process, in memory. Thread-safe; commands run one at a
    time. `Engine` (engine.services.engine) adds the data directory and replication."""

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
        # A dict per value type and database (engine.model.value_types), streams and strings
        # also by name; and the TTLs of keys of any type (engine.exec.keys and
        # engine.commands.expiry say how they expire).
        self.keyspaces = [[{} for _ in range(NUM_DATABASES)] for _ in TYPES]
        self.dbs = self.keyspaces[STREAM.slot]
        self.strings = self.keyspaces[STRING.slot]
        self.expires = [{} for _ in range(NUM_DATABASES)]
        self.subexpires = [None] * NUM_DATABASES  # (engine.exec.keys: built when first needed)
        # Each type's encoding limits, from the config (CONFIG SET changes them in place).
        self.limits = [None if vt.limits is None else vt.limits.from_config(self.config)
                       for vt in TYPES]
        # Held while a command runs. Re-entrant for the server, which holds it over a batch of
        # a connection's commands and calls back into the engine from its glue; handlers
        # never take it.
        self.lock = threading.RLock()  # type: ignore[assignment]
        self.waiters = WaiterRegistry()
        self.watches = WatchRegistry()
        self.pubsub = PubSub(glob_match)  # channels and patterns: not persisted, not logged
        self.server = None  # the network server serving this engine, if any
        self.acl = None  # ACL users (engine.commands.acl): the server's; an embedded engine's none
        # Bumped by every change of the users (engine.commands.acl): a session's note of
        # whether its user is unrestricted is kept until it changes.
        self.acl_generation = 0
        # Lua scripting (engine.exec.scripting.Scripting), made by the first script: not
        # persisted, not logged (a script's effects are).
        self.scripting = None
        self.started_ms = wall_clock_ms()
        self.sinks: list[RecordSink] = []
        self.session = Session()
        # The engine's own writes (the deletions of expiry) ask the write gate as a client's
        # would: refused on a replica (its primary's DELs arrive as effects) and while the AOF
        # cannot be written (a deletion must never go unlogged).
        self.own_session = Session()
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
            spelling: self.entry_of(spec) for spelling, spec in FAST_DISPATCH.items()}
        # SLOWLOG and LATENCY (engine.exec.slowlog, engine.exec.latency): a call its counters
        # find slow goes to `slow_call`, which applies each one's own threshold.
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.apply_monitoring()
        self.timer: Callable[[], int] = _now_ns  # times each command (INFO commandstats...)
        self.after_command = after_commands
        self.latest_fork_usec = 0  # how long starting the last compaction held the lock
        self.startup_memory = resident_bytes()  # INFO's used_memory_startup
        self.closed = False
        # The parts around the command path, each named for what it owns.
        self.waiting = WaitingReaders(self)  # blocked reads: parked, re-run, timed out
        self.batches = Batches(self)  # EXEC's, a script's and a batch's commands
        self.replay = Replay(self)  # records applied, states installed
        self.refusals = Refusals(self)  # commands refused before they run

    def now(self) -> int:
        """The engine clock's time (ms): a command's time is read once, when it starts."""
        return _time_ns() // 1_000_000 if self.wall_clock else self.clock()

    def entry_of(self, spec: CommandSpec) -> Entry:
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

    # --- executing commands ---------------------------------------------------------------

    def execute(self, *args: Any) -> Any:
        """Run one command; plain reply values, errors raised as ReplyError."""
        argv = encode_args(args)  # str, bytes and int, the common case, in one kernel call
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
        reply = self.run_and_wait(self.session, tuple(map(_to_bytes, args)), effects)
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
        return self.run_and_wait(session, argv)

    def execute_atomic(self, session: Session, argvs: Iterable[Argv]) -> Any:
        """MULTI, `argvs`, EXEC in one call (engine.runtime.batches: the embedded work
        queue's batches)."""
        return self.batches.execute_atomic(session, argvs)

    def execute_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """Commands run in order under one lock hold and logged as one record, as EXEC runs
        them, without a transaction around them (engine.runtime.batches)."""
        return self.batches.execute_batch(session, argvs)

    def run_queued(self, ctx: Ctx, queued: list[tuple[CommandSpec, Argv]]) -> list[Any]:
        """EXEC's body (lock held; engine.runtime.batches)."""
        return self.batches.run_queued(ctx, queued)

    def run_script_command(self, ctx: Ctx, spec: CommandSpec, argv: Argv) -> Any:
        """A script's command in its run's MultiCtx (lock held; engine.runtime.batches)."""
        return self.batches.run_script_command(ctx, spec, argv)

    def run_and_wait(
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
            return self.waiting.wait(reply)
        if t is Later:
            try:
                return reply.wait()
            except ReplyError as err:
                self.refusals.late_error(session or self.session, err)
                raise
        return reply

    def submit(
        self, session: Session, argv: Argv, effects_out: list | None = None,
        notify: Callable[[Waiter], None] | None = None,
    ) -> tuple[Any, int]:
        """Run argv under the lock without waiting: (reply, LSN of its record or 0).

        The reply may be a `Waiter` (a blocked XREAD/XREADGROUP: `notify(waiter)` is called,
        under the engine lock, once `waiter.result` is set; the caller times it out with
        `waiting.cancel` and re-runs it at `waiter.wake_at` with `waiting.poll`) or a `Later`
        (call its `wait()` outside the lock for the reply). `_execute` is the embedded API's
        waiting wrapper; the server holds the lock over a batch of commands and calls
        `run_locked`."""
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
        """submit's body, for a caller that holds the engine lock: dispatch, the command on
        the one path (`run_command`: gated, run, logged), the clients it made ready woken, a
        blocked read parked, the stream nodes kept within their memory budget."""
        if not argv:
            raise ReplyError("ERR empty command")
        # Dispatch: the table of plain commands when the arity fits, outside MULTI.
        entry = self.dispatch.get(argv[0])
        if (entry is None or not entry.min_args <= len(argv) <= entry.max_args
                or session.multi is not None):
            entry, queued = self.dispatch_command(session, argv)
            if entry is None:
                return queued, 0
        session.lastcmd = entry.name
        # One context per session, reset per command: commands run one at a time under the
        # lock and no handler keeps its context.
        ctx = session.ctx
        if ctx is None:
            ctx = session.ctx = Ctx(self, session, 0)
        ctx.db = self.dbs[session.db]
        ctx.now = self.now()
        ctx.effects = []
        ctx.lsn = 0
        reply = self.run_command(ctx, entry, argv)
        if effects_out is not None:
            effects_out.extend(ctx.effects)
        if self.waiters.ready:
            self.waiting.serve_ready()
        if type(reply) is Block:
            return self.waiting.park(session, argv, reply, entry, ctx.nanos, notify), ctx.lsn
        residency = self.residency
        if residency.resident > residency.limit:
            residency.evict()
        return reply, ctx.lsn

    def settle(self) -> None:
        """After a command or a group of them (lock held): the clients they made ready
        re-run, the stream nodes kept within their memory budget."""
        if self.waiters.ready:
            self.waiting.serve_ready()
        residency = self.residency
        if residency.resident > residency.limit:
            residency.evict()

    def run_command(self, ctx: Ctx, entry: Entry, argv: Argv,
                    handler: Handler | None = None) -> Any:
        """Run one command in `ctx`: the one path every command takes, wherever it comes
        from. Its callers differ only in the context they hand it (engine.exec.context):

        1. A record's effects being applied (`ctx.replaying`) only run.
        2. The write gate: a write the gate refuses (`write_gate`) is not run; its error is
           raised, counted as a rejected call, as a failed one inside EXEC, a script or a
           batch (`ctx.in_multi`), and not yet for a re-run (counted when its wait ends).
        3. The keys it names are expired (`ctx.lazy_expiry`; engine.exec.keys): deleted,
           their DELs among its effects, or only hidden where a deletion could not be logged
           (on a replica, or while the AOF refuses writes).
        4. The handler runs timed (`handler`: a blocked read's re-run runs its command with
           the arguments parsed when it blocked); `ctx.nanos` gets its time. The call is
           counted and a slow one handed to the slow log and the latency monitor, but for a
           blocked read (counted once served) and a re-run. A handler's ReplyError is counted
           as a failed call and raised; storage damage met while reading a cold node becomes
           its error reply (and stops writes after a write command).
        5. Its effects are logged as its own record (`ctx.commits`; an error's too: the DELs
           of keys it expired), `ctx.lsn` the record's LSN; MISCONF when the record cannot be
           written."""
        if handler is None:
            handler = entry.handler
        if ctx.replaying:
            return handler(ctx, argv)
        session = ctx.session
        if session.user is not None:  # a server's client: its user's permissions
            if session.acl_generation != self.acl_generation:
                session.acl_unrestricted = unrestricted(session.user)
                session.acl_plans = {}
                session.acl_generation = self.acl_generation
            if not session.acl_unrestricted:
                self._check_acl(ctx, entry, argv)
        db = session.db
        if entry.is_write:
            gate = self.write_gate(session)
            if gate is not None:
                raise self._gate_refused(ctx, entry, gate)
        hidden = None
        if ctx.lazy_expiry and self.expires[db]:
            if self.write_gate(self.own_session) is None:  # the deletion can be logged
                expire_named_keys(ctx, argv)
            elif not session.from_primary:
                hidden = hide_expired(ctx, argv)
        began = self.timer()
        try:
            reply = handler(ctx, argv)
        except (ReplyError, StorageError) as err:
            nanos = ctx.nanos = self.timer() - began
            failed = (self._storage_failed(err, entry.is_write)
                      if isinstance(err, StorageError) else err)
            if not ctx.rerun and self.stats.failed(entry.counters, nanos, failed.line):
                self.slow_call(session, argv, nanos)
            if ctx.commits and ctx.effects:  # keys expired before it failed: logged still
                session.write_lsn = self.commit(ctx, db)
            if failed is err:
                raise
            raise failed from None
        finally:
            if hidden is not None:
                unhide(hidden)
        nanos = ctx.nanos = self.timer() - began
        if type(reply) is not Block and not ctx.rerun and entry.counters.count(nanos):
            self.slow_call(session, argv, nanos)
        if ctx.commits and ctx.effects:
            ctx.lsn = self._commit_command(ctx, db, entry)
        return reply

    def cancel_wait(self, waiter: Any, result: Any) -> bool:
        return self.waiting.cancel(waiter, result)

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

    def _check_acl(self, ctx: Ctx, entry: Entry, argv: Argv) -> None:
        """A restricted user's command: its quick plan (engine.runtime.acl_fast) allows it,
        or the full check does, or its refusal is raised."""
        session = ctx.session
        plan = session.acl_plans.get(entry.name)
        if plan is None:
            plan = session.acl_plans[entry.name] = plan_for(session.user, entry.spec)
        if plan.allows(argv):
            return
        refused = acl_refusal(self, session, entry.spec, argv, ctx.acl_context
                              if ctx.in_multi else "multi" if session.multi is not None
                              else "toplevel")
        if refused is not None:
            raise self._acl_refused(ctx, entry, refused)

    def _acl_refused(self, ctx: Ctx, entry: Entry, err: ReplyError) -> ReplyError:
        """The ACL gate's error, counted as Redis counts it: a rejected call at top level, a
        failed one in EXEC or a script."""
        if ctx.in_multi:
            self.stats.failed(entry.counters, 0, err.line)
        elif not ctx.rerun:
            self.refusals.refuse(ctx.session, None, err, entry.counters)
        return err

    def _gate_refused(self, ctx: Ctx, entry: Entry, gate: str) -> ReplyError:
        """The write gate's error for a command in `ctx`, counted as its kind of context
        counts it (run_command's step 2)."""
        err = ReplyError(gate)
        if ctx.in_multi:
            self.stats.failed(entry.counters, 0, gate)
        elif not ctx.rerun:
            self.refusals.refuse(ctx.session, None, err, entry.counters)
        return err

    def _commit_command(self, ctx: Ctx, db: int, entry: Entry) -> int:
        """A command's effects logged: its record's LSN, which WAIT and WAITAOF on its
        connection wait for. MISCONF when the record could not be written: the command ran,
        so its call counts as failed (it was counted as a call already; a re-run's is counted
        when its wait ends)."""
        try:
            lsn = ctx.session.write_lsn = self.commit(ctx, db)
        except ReplyError as err:
            if not ctx.rerun:
                entry.counters.failed += 1
                self.stats.error_reply(err.line)
            raise
        return lsn

    def commit(self, ctx: Ctx, db: int) -> int:
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

    def slow_call(self, session: Session, argv: Argv, nanos: int) -> None:
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

    def dispatch_command(self, session: Session, argv: Argv) -> tuple[Entry | None, Any]:
        """The general dispatch (lock held): the command table with Redis's exact refusals,
        and MULTI's queueing. Returns (entry, None), or (None, reply) for a command queued in
        MULTI (then nothing runs now). (The refusal's method is looked up where a refusal
        happens: taken as a value up front, a compiled module binds a method object per call.)"""
        try:
            spec = lookup(argv)
        except ReplyError as err:
            raise self.refusals.refuse(session, resolve(argv), err) from None
        session.lastcmd = spec.name
        if session.multi is not None:
            if session.user is not None and spec.name not in RUN_IN_MULTI \
                    and not unrestricted(session.user):  # (checked before it is queued)
                refused = acl_refusal(self, session, spec, argv, "multi")
                if refused is not None:
                    session.multi_failed = True
                    raise self.refusals.refuse(session, spec, refused) from None
            try:
                queued = queue_in_multi(self, session, spec, argv)
            except ReplyError as err:
                raise self.refusals.refuse(session, spec, err) from None
            if queued is not None:
                return None, queued
        return self.entry_of(spec), None

    def entry_for(self, argv: Argv) -> Entry:
        """The entry that runs argv: the dispatch table's when its arity fits, else the command
        table's (ReplyError, as Redis refuses an unknown command or a wrong arity)."""
        entry = self.dispatch.get(argv[0])
        if entry is not None and entry.min_args <= len(argv) <= entry.max_args:
            return entry
        return self.entry_of(lookup(argv))

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

    # --- the parts' entry points that other layers call -----------------------------------

    def blocked_clients(self) -> int:
        return self.waiting.blocked_clients()

    def apply(self, record: Record) -> None:
        """Apply one record's effects through the command table (replay, replicas, snapshots)."""
        self.replay.apply_many((record,))

    def apply_many(self, records: Iterable[Record | tuple],
                   before: Callable[[], None] | None = None) -> None:
        """Apply records in order under one lock acquisition (engine.runtime.replay)."""
        self.replay.apply_many(records, before)

    def apply_effects(self, effects: list[list[bytes]], time_ms: int, db: int = 0) -> None:
        self.replay.apply_many((Record(0, time_ms, db, effects),))

    def active_expire_cycle(self) -> int:
        """One pass of the active expiry cycle (engine.runtime.expiry_cycle): how many keys
        were deleted."""
        return active_expire_cycle(self)

    # --- state ----------------------------------------------------------------------------

    def digest(self) -> str:
        """Hex digest of the whole logical state (see engine.digest)."""
        with self.lock:
            return state_digest(self.dbs, self.strings, self.expires, self.keyspaces)

    def add_sink(self, sink: RecordSink) -> None:
        self.sinks.append(sink)


__all__ = ["EngineCore", "Entry", "RespMap", "Session", "argv_of"]
