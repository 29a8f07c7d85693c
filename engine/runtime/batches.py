"""Commands run as one: EXEC's queued commands, a script's `redis.call`s, a batch of a
redis-server primary's stream, and the embedded work queue's transactions.

Owns `Batches`, the engine core's part for a group of commands that makes one record: each
command runs through the engine's one command path (EngineCore.run_command) in a `MultiCtx`
(blocking commands do not block, a refused write is a failed call, the effects are collected
rather than logged one by one), behind a SELECT where it ran in another database than the
record's last one; the group's one record is logged at its end, so replay applies all of it
or none. Must not touch: command semantics, MULTI's queueing rules (engine.exec.transactions),
files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Ctx, MultiCtx
from streamkeep.engine.exec.table import lookup, resolve
from streamkeep.engine.exec.transactions import NOT_IN_MULTI, queue_in_multi
from streamkeep.engine.model.effects import select_effect
from streamkeep.engine.runtime.refusals import refuse
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.table import Argv, CommandSpec
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.runtime.dispatch import Dispatch, Entry
    from streamkeep.engine.runtime.records import Records
    from streamkeep.engine.runtime.waiting import WaitingReaders


def plain_xadd(argv: Argv) -> bool:
    """`XADD key * field value ...` as StreamQueue sends it: no option, the arity right (a
    transaction refuses a wrong one before running anything; a batch would run the rest)."""
    return len(argv) >= 5 and len(argv) & 1 == 1 and argv[0] == b"XADD" and argv[2] == b"*"


class Batches:
    """The engine core's groups of commands (see the module's docstring). It reads the
    engine's `state`, finds entries through `dispatch`, logs a group's record through
    `records`, re-runs the clients a group made ready through `waiting`, runs `after_commands`
    (the core's hook, if any) once it released the lock, and calls nothing of the `core` but
    its one command path."""

    def __init__(self, state: EngineState, core: EngineCore, dispatch: Dispatch,
                 records: Records, waiting: WaitingReaders,
                 after_commands: Callable[[], None] | None) -> None:
        self.state = state
        self.core = core
        self.dispatch = dispatch
        self.records = records
        self.waiting = waiting
        self.after_commands = after_commands

    def atomic(self, session: Session, argvs: Iterable[Argv]) -> list[Any] | None:
        """MULTI, `argvs`, EXEC in one call, up to EXEC (lock held; EngineCore.execute_atomic
        runs the EXEC): queued under one lock round instead of one per command; a command
        refused while queueing aborts the transaction as over the wire (EXECABORT). Returns
        None, EXEC to run; or, for a transaction of plain `XADD key * field value ...`
        (StreamQueue.put_many) with nothing that could make EXEC differ (no MULTI, no WATCH,
        no key with a TTL, the write gate open), EXEC's replies already: run as
        `execute_batch` runs them, the same replies and one record, without queueing each
        command."""
        state = self.state
        argvs = argvs if isinstance(argvs, list) else list(argvs)
        if (session.multi is None and not session.watched and not state.expires[session.db]
                and state.write_gate(session) is None and all(map(plain_xadd, argvs))):
            state.stats.counters("exec").calls += 1
            return self.run_batch(session, argvs)
        self._queue_transaction(session, argvs)
        return None

    def _queue_transaction(self, session: Session, argvs: list[Argv]) -> None:
        """MULTI and `argvs` queued (lock held), as over the wire: a refused command makes the
        EXEC abort."""
        state = self.state
        if session.multi is not None:
            raise ReplyError("ERR MULTI calls can not be nested")
        session.multi, session.multi_failed = [], False
        for argv in argvs:
            try:
                spec = lookup(argv)
            except ReplyError as err:
                refuse(state, session, resolve(argv), err)
                continue
            try:
                if queue_in_multi(state, session, spec, argv) is None:
                    raise ReplyError(NOT_IN_MULTI)  # MULTI, EXEC, WATCH... in a batch
            except ReplyError as err:
                refuse(state, session, spec, err)

    def execute_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """Commands run in order under one lock hold and logged as one record, as EXEC runs
        them (a failed command's ReplyError in its place), without a transaction around them:
        a redis-server primary's stream between its transactions (replication.redis_commands).
        The write gate's error (MISCONF: raised, nothing run) when the AOF cannot be
        written."""
        state = self.state
        with state.lock:
            gate = state.write_gate(session)
            if gate is not None:
                raise ReplyError(gate)
            replies = self.run_batch(session, argvs)
        if self.after_commands is not None:
            self.after_commands()
        return replies

    def run_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """execute_batch's body (lock held): each command as EXEC runs it (an unknown one or
        a wrong arity is its reply), then one record, the clients it made ready, the memory
        budget."""
        state = self.state
        ctx = MultiCtx(state, session, state.now())
        first_db = session.db
        record_db = [first_db]  # the database the record has selected so far
        replies: list[Any] = []
        for argv in argvs:
            try:
                entry = self.dispatch.entry_for(argv)
            except ReplyError as err:  # unknown command, wrong arity
                replies.append(err)
                continue
            replies.append(self.run_queued_one(ctx, entry, argv, record_db))
        if ctx.effects:
            session.write_lsn = self.records.commit(ctx, first_db)
        if state.waiters.ready:
            self.waiting.serve_ready()
        residency = state.residency
        if residency.resident > residency.limit:
            residency.evict()
        return replies

    def run_queued(self, ctx: Ctx, queued: list[tuple[CommandSpec, Argv]]) -> list[Any]:
        """EXEC's body (lock held): run the queued commands one after another with one time,
        collecting every effect into `ctx.effects` (one record, so replay applies the whole
        transaction or none of it). A command that switches databases gets a SELECT effect in
        front of its own effects. Errors become the command's reply, as in Redis."""
        mctx = MultiCtx(self.state, ctx.session, ctx.now)
        mctx.effects = ctx.effects
        record_db = [ctx.session.db]
        dispatch = self.dispatch
        return [self.run_queued_one(mctx, dispatch.entry_of(spec), argv, record_db)
                for spec, argv in queued]

    def run_script_command(self, ctx: Ctx, spec: CommandSpec, argv: Argv) -> Any:
        """One of a script's commands (lock held) in `ctx`, the MultiCtx its run keeps: as
        `run_queued_one` runs a queued command, its effects joining the run's; the script
        puts their SELECT itself (engine.exec.scripting)."""
        return self._run_in(ctx, self.dispatch.entry_of(spec), argv)

    def run_queued_one(self, ctx: Ctx, entry: Entry, argv: Argv, record_db: list[int]) -> Any:
        """One command of a transaction, a script or a batch (lock held), through the one
        command path: its reply, or the ReplyError it failed with. Its effects go to
        `ctx.effects`, behind a SELECT when it ran in another database than the record's last
        one (`record_db[0]`)."""
        db = ctx.session.db
        effects = ctx.effects
        mark = len(effects)
        reply = self._run_in(ctx, entry, argv)
        if len(effects) > mark and db != record_db[0]:
            effects.insert(mark, select_effect(db))
            record_db[0] = db
        return reply

    def _run_in(self, ctx: Ctx, entry: Entry, argv: Argv) -> Any:
        """The command in `ctx`, in the session's database now, through the one command path:
        its reply, or the ReplyError it failed with."""
        ctx.db = self.state.dbs[ctx.session.db]
        try:
            return self.core.run_command(ctx, entry, argv)
        except ReplyError as err:
            return err


__all__ = ["Batches", "plain_xadd"]
