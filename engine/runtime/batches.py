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

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Ctx, MultiCtx
from streamkeep.engine.exec.table import lookup, resolve
from streamkeep.engine.exec.transactions import NOT_IN_MULTI, queue_in_multi
from streamkeep.engine.model.effects import select_effect
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.table import Argv, CommandSpec
    from streamkeep.engine.runtime.core import EngineCore, Entry


def plain_xadd(argv: Argv) -> bool:
    """`XADD key * field value ...` as StreamQueue sends it: no option, the arity right (a
    transaction refuses a wrong one before running anything; a batch would run the rest)."""
    return len(argv) >= 5 and len(argv) & 1 == 1 and argv[0] == b"XADD" and argv[2] == b"*"


class Batches:
    """The engine core's groups of commands (see the module's docstring)."""

    def __init__(self, core: EngineCore) -> None:
        self.core = core

    def execute_atomic(self, session: Session, argvs: Iterable[Argv]) -> Any:
        """MULTI, `argvs`, EXEC in one call (the embedded work queue's batches): queued under
        one lock round instead of one per command, then EXEC's reply (a failed command's
        ReplyError in its place) and one record. A command refused while queueing aborts the
        transaction as over the wire (EXECABORT). A transaction of plain `XADD key * field
        value ...` (StreamQueue.put_many), with nothing that could make EXEC differ (no MULTI,
        no WATCH, no key with a TTL, the write gate open), runs as `execute_batch` runs it:
        the same replies and one record, without queueing each command."""
        core = self.core
        argvs = argvs if isinstance(argvs, list) else list(argvs)
        with core.lock:
            if (session.multi is None and not session.watched and not core.expires[session.db]
                    and core.write_gate(session) is None and all(map(plain_xadd, argvs))):
                core.stats.counters("exec").calls += 1
                replies: list[Any] | None = self.run_batch(session, argvs)
            else:
                replies = None
                self._queue_transaction(session, argvs)
        if replies is None:
            return core.run_and_wait(session, (b"EXEC",))
        core.commands_done()
        return replies

    def _queue_transaction(self, session: Session, argvs: list[Argv]) -> None:
        """MULTI and `argvs` queued (lock held), as over the wire: a refused command makes the
        EXEC abort."""
        core = self.core
        if session.multi is not None:
            raise ReplyError("ERR MULTI calls can not be nested")
        session.multi, session.multi_failed = [], False
        for argv in argvs:
            try:
                spec = lookup(argv)
            except ReplyError as err:
                core.refusals.refuse(session, resolve(argv), err)
                continue
            try:
                if queue_in_multi(core, session, spec, argv) is None:
                    raise ReplyError(NOT_IN_MULTI)  # MULTI, EXEC, WATCH... in a batch
            except ReplyError as err:
                core.refusals.refuse(session, spec, err)

    def execute_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """Commands run in order under one lock hold and logged as one record, as EXEC runs
        them (a failed command's ReplyError in its place), without a transaction around them:
        a redis-server primary's stream between its transactions (replication.redis_commands).
        The write gate's error (MISCONF: raised, nothing run) when the AOF cannot be
        written."""
        core = self.core
        with core.lock:
            gate = core.write_gate(session)
            if gate is not None:
                raise ReplyError(gate)
            replies = self.run_batch(session, argvs)
        core.commands_done()
        return replies

    def run_batch(self, session: Session, argvs: Iterable[Argv]) -> list[Any]:
        """execute_batch's body (lock held): each command as EXEC runs it (an unknown one or
        a wrong arity is its reply), then one record, the clients it made ready, the memory
        budget."""
        core = self.core
        ctx = MultiCtx(core, session, core.now())
        first_db = session.db
        record_db = [first_db]  # the database the record has selected so far
        replies: list[Any] = []
        for argv in argvs:
            try:
                entry = core.entry_for(argv)
            except ReplyError as err:  # unknown command, wrong arity
                replies.append(err)
                continue
            replies.append(self.run_queued_one(ctx, entry, argv, record_db))
        if ctx.effects:
            session.write_lsn = core.commit(ctx, first_db)
        core.settle()
        return replies

    def run_queued(self, ctx: Ctx, queued: list[tuple[CommandSpec, Argv]]) -> list[Any]:
        """EXEC's body (lock held): run the queued commands one after another with one time,
        collecting every effect into `ctx.effects` (one record, so replay applies the whole
        transaction or none of it). A command that switches databases gets a SELECT effect in
        front of its own effects. Errors become the command's reply, as in Redis."""
        core = self.core
        mctx = MultiCtx(core, ctx.session, ctx.now)
        mctx.effects = ctx.effects
        record_db = [ctx.session.db]
        return [self.run_queued_one(mctx, core.entry_of(spec), argv, record_db)
                for spec, argv in queued]

    def run_script_command(self, ctx: Ctx, spec: CommandSpec, argv: Argv) -> Any:
        """One of a script's commands (lock held) in `ctx`, the MultiCtx its run keeps: as
        `run_queued_one` runs a queued command, its effects joining the run's; the script
        puts their SELECT itself (engine.exec.scripting)."""
        return self._run_in(ctx, self.core.entry_of(spec), argv)

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
        core = self.core
        ctx.db = core.dbs[ctx.session.db]
        try:
            return core.run_command(ctx, entry, argv)
        except ReplyError as err:
            return err


__all__ = ["Batches", "plain_xadd"]
