"""The engine's core, in memory: the one path every command runs on, and the parts around it.

Owns `EngineCore` (the public `Engine` of engine.services.engine without its data directory
and replication), the hub of the runtime layer: the engine's state made, its parts made and
wired, the embedded API's calls, and one-at-a-time command execution under the engine lock
(argv -> command -> reply + effects), each command counted into the server statistics
(engine.exec.stats).

Every handler runs through one method, `run_command`, which gates, expires the keys the
command names, times it, runs the handler, maps storage errors and logs its record. Its
callers differ only in the context they hand it (engine.exec.context: the kinds differ in
data): a client's command (`submit`, and the server's batches through `run_locked`), and the
parts': EXEC's, a script's and a batch's commands (engine.runtime.batches), a blocked read's
re-run (engine.runtime.waiting), a command answered while a script is busy
(engine.runtime.refusals), and the effects of a record being applied (engine.runtime.replay).
The other parts run no command: the command entries and the general dispatch
(engine.runtime.dispatch), the records logged (engine.runtime.records), the slow log's and
the latency monitor's samples (engine.runtime.monitoring), the active expiry cycle
(engine.runtime.expiry_cycle). The core calls its parts; a part is handed what it needs when
it is made (the engine as its EngineState, the parts it uses) and calls nothing of the core but
`run_command` (tests/arch/test_runtime_parts.py holds them to it). Other layers call a part
directly (`engine.replay.apply_many`, `engine.waiting.blocked_clients`, ...). Handlers see the
engine as engine.exec.engine_state.EngineState, which this class extends. Must not touch:
command semantics (engine.commands), the data structures' internals, files (aof/ owns those),
opening a data directory or attaching replication (engine.services.engine composes those; they
reach the core through engine.exec.interfaces).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Self

from streamkeep.engine import commands as _commands  # noqa: F401  (registers every command)
from streamkeep.engine.commands.pubsub import glob_match
from streamkeep.engine.exec.blocking import Waiter, WaiterRegistry
from streamkeep.engine.exec.context import Block, Ctx, Later, Session
from streamkeep.engine.exec.engine_state import EngineState
from streamkeep.engine.exec.eviction import OOM, Eviction
from streamkeep.engine.exec.keys import expire_named_keys, hide_expired, unhide
from streamkeep.engine.exec.latency import LatencyMonitor
from streamkeep.engine.exec.pubsub import PubSub, Subscription
from streamkeep.engine.exec.settings import DEFAULT_CONFIG, normalize_settings
from streamkeep.engine.exec.slowlog import SlowLog
from streamkeep.engine.exec.stats import ServerStats
from streamkeep.engine.exec.table import Argv, Handler, command_names
from streamkeep.engine.exec.transactions import WatchRegistry
from streamkeep.engine.model.digest import state_digest
from streamkeep.engine.model.residency import Residency
from streamkeep.engine.model.value_types import STREAM, STRING, TYPES
from streamkeep.engine.runtime.acl_gate import plan_for, unrestricted
from streamkeep.engine.runtime.acl_gate import refusal as acl_refusal
from streamkeep.engine.runtime.batches import Batches
from streamkeep.engine.runtime.dispatch import Dispatch, Entry
from streamkeep.engine.runtime.evictions import Evictions
from streamkeep.engine.runtime.expiry_cycle import ExpiryCycle
from streamkeep.engine.runtime.monitoring import Monitoring
from streamkeep.engine.runtime.records import Records, RecordSink
from streamkeep.engine.runtime.refusals import Refusals, refuse
from streamkeep.engine.runtime.replay import Replay
from streamkeep.engine.runtime.waiting import WaitingReaders
from streamkeep.engine.wire.argv import encode_args
from streamkeep.engine.wire.errors import ReplyError, StorageError, storage_reply
from streamkeep.engine.wire.reply import RespMap, to_plain

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import Log
    from streamkeep.engine.runtime.redis_api import RedisAPI

Clock = Callable[[], int]
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
        # maxmemory: the limit, the policy, the keys' access clocks (engine.exec.eviction).
        self.eviction = Eviction(self)
        self.eviction.configure(self.config, 0)  # (the clock is first read by a command)
        self.oom = False
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
        self.sinks: list[RecordSink] = []  # handed every record (add_sink)
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
        self.cluster = None  # a cluster node's topology (engine.exec.cluster), set by its server
        # Hooks the services register when they attach (engine.exec.interfaces): CONFIG SET
        # runs config_hooks[name] after storing a new value; INFO asks info_sections first.
        self.config_hooks = {}
        self.info_sections = {}
        # INFO commandstats/errorstats (engine.exec.stats); SLOWLOG and LATENCY
        # (engine.exec.slowlog, engine.exec.latency): a call its counters find slow goes to
        # `monitoring.slow_call`, which applies each one's own threshold.
        self.stats = ServerStats(command_names())
        self.slowlog = SlowLog()
        self.latency = LatencyMonitor()
        self.apply_monitoring()
        self.timer: Callable[[], int] = _now_ns  # times each command (INFO commandstats...)
        # Run after each command or applied batch of records, the lock released (None: nothing).
        hook = after_commands
        self.after_command: Callable[[], None] | None = (
            None if hook is None else partial(hook, self))
        self.latest_fork_usec = 0  # how long starting the last compaction held the lock
        self.startup_memory = self.eviction.used()  # INFO's used_memory_startup
        self.closed = False
        # The parts around the command path, each named for what it owns and handed what it
        # needs: the engine as its state (`self` as EngineState), the parts it uses, and the
        # core itself only where it runs commands (its `run_command`).
        self.dispatch = Dispatch(self)  # the command entries; the general dispatch
        self.records = Records(self, self.sinks)  # effects logged: the AOF, the sinks
        self.monitoring = Monitoring(self)  # slow calls, compactions, the rates' samples
        self.waiting = WaitingReaders(self, self, self.monitoring)  # blocked reads
        self.refusals = Refusals(self, self, self.dispatch)  # commands refused before they run
        # EXEC's, a script's and a batch's commands; records applied, states installed.
        self.batches = Batches(self, self, self.dispatch, self.records, self.waiting,
                               self.after_command)
        self.replay = Replay(self, self, self.dispatch, self.records, self.waiting,
                             self.after_command)
        self.expiry_cycle = ExpiryCycle(self, self.records, self.waiting, self.own_session,
                                        self.timer)  # active expiry
        self.evictions = Evictions(self, self.records, self.own_session)  # maxmemory's
        # What handlers ask of the parts (EngineState declares them).
        self.run_queued = self.batches.run_queued
        self.run_script_command = self.batches.run_script_command
        self.cancel_wait = self.waiting.cancel
        self.import_records = self.replay.import_records

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
        """MULTI, `argvs`, EXEC in one call (the embedded work queue's batches): EXEC's reply
        (a failed command's ReplyError in its place) and one record. Queued under one lock
        round (`Batches.atomic`, which runs a transaction of plain XADDs at once), then EXEC
        runs as a client's would."""
        with self.lock:
            replies = self.batches.atomic(session, argvs)
        if replies is None:
            return self.run_and_wait(session, (b"EXEC",))
        self.commands_done()
        return replies

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
                self.after_command()

    def commands_done(self) -> None:
        """A caller that ran commands under the lock (the server's batch) released it."""
        if self.after_command is not None:
            self.after_command()

    def run_locked(
        self, session: Session, argv: Argv, effects_out: list | None = None,
        notify: Callable[[Waiter], None] | None = None,
    ) -> tuple[Any, int]:
        """submit's body, for a caller that holds the engine lock: dispatch, the command on
        the one path (`run_command`: gated, run, logged), the clients it made ready woken, a
        blocked read parked, the stream nodes kept within their memory budget."""
        if not argv:
            raise ReplyError("ERR empty command")
        entry = self.dispatch.table.get(argv[0])
        if self.eviction.limit or self.oom:  # maxmemory: room made before any command
            self.oom = self.evictions.before(session, entry)
        # Dispatch: the table of plain commands when the arity fits, outside MULTI.
        if (entry is None or not entry.min_args <= len(argv) <= entry.max_args
                or session.multi is not None):
            entry, queued = self.dispatch.general(session, argv)
            if entry is None:
                return queued, 0
        if self.oom and self.evictions.refuses(session, entry):
            raise refuse(self, session, entry.spec, ReplyError(OOM))
        session.lastcmd = entry.name
        if self.cluster is not None:  # a cluster node: the keys' slots decide
            self.dispatch.route(session, entry, argv)
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
                self.monitoring.slow_call(session, argv, nanos)
            if ctx.commits and ctx.effects:  # keys expired before it failed: logged still
                session.write_lsn = self.records.commit(ctx, db)
            if failed is err:
                raise
            raise failed from None
        finally:
            if hidden is not None:
                unhide(hidden)
        nanos = ctx.nanos = self.timer() - began
        if type(reply) is not Block and not ctx.rerun and entry.counters.count(nanos):
            self.monitoring.slow_call(session, argv, nanos)
        if entry.touches and self.eviction.tracking:  # an LRU or LFU policy's access clocks
            self.evictions.touch(ctx, entry, argv)
        if ctx.commits and ctx.effects:
            ctx.lsn = self._commit_command(ctx, db, entry)
        return reply

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
            refuse(self, ctx.session, None, err, entry.counters)
        return err

    def _gate_refused(self, ctx: Ctx, entry: Entry, gate: str) -> ReplyError:
        """The write gate's error for a command in `ctx`, counted as its kind of context
        counts it (run_command's step 2)."""
        err = ReplyError(gate)
        if ctx.in_multi:
            self.stats.failed(entry.counters, 0, gate)
        elif not ctx.rerun:
            refuse(self, ctx.session, None, err, entry.counters)
        return err

    def _commit_command(self, ctx: Ctx, db: int, entry: Entry) -> int:
        """A command's effects logged: its record's LSN, which WAIT and WAITAOF on its
        connection wait for. MISCONF when the record could not be written: the command ran,
        so its call counts as failed (it was counted as a call already; a re-run's is counted
        when its wait ends)."""
        try:
            lsn = ctx.session.write_lsn = self.records.commit(ctx, db)
        except ReplyError as err:
            if not ctx.rerun:
                entry.counters.failed += 1
                self.stats.error_reply(err.line)
            raise
        return lsn

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

    # --- state ----------------------------------------------------------------------------

    def digest(self) -> str:
        """Hex digest of the whole logical state (see engine.digest)."""
        with self.lock:
            return state_digest(self.dbs, self.strings, self.expires, self.keyspaces)

    def add_sink(self, sink: RecordSink) -> None:
        self.sinks.append(sink)


__all__ = ["EngineCore", "RespMap", "Session", "argv_of"]
