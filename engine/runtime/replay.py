"""Records applied: the AOF's replay, a replica's stream of records, a snapshot's build, and a
whole state installed at once (a replica's full sync, the AOF's rollback).

Owns `Replay`, the engine core's part that applies records' effects through the command table
(and another node's, logged as this node's own: a slot imported)
(each effect through the engine's one command path, EngineCore.run_command, in a `ReplayCtx`:
the handler only runs, no gate, no expiry, no statistics, no record) and swaps in a state
loaded elsewhere. Must not touch: reading files (aof/ and snapshot/ hand it records), command
semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import ReplayCtx, Session
from streamkeep.engine.model.effects import Record
from streamkeep.engine.model.value_types import STREAM, TYPES

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.runtime.dispatch import Dispatch
    from streamkeep.engine.runtime.records import Records
    from streamkeep.engine.runtime.waiting import WaitingReaders


class Replay:
    """The engine core's way in for records (see the module's docstring). It reads and
    replaces the engine's `state`, finds an effect's entry through `dispatch`, re-runs the
    clients the records made ready through `waiting`, runs `after_commands` (the core's hook,
    if any) once it released the lock, and calls nothing of the `core` but its one command
    path."""

    def __init__(self, state: EngineState, core: EngineCore, dispatch: Dispatch,
                 records: Records, waiting: WaitingReaders,
                 after_commands: Callable[[], None] | None) -> None:
        self.state = state
        self.core = core
        self.dispatch = dispatch
        self.records = records
        self.waiting = waiting
        self.after_commands = after_commands
        # Run after the AOF dropped records and the state was rolled back (the server's: its
        # replies awaiting them are refused). Engine lock held, any thread.
        self.rollback_hooks: list[Callable[[], None]] = []

    def apply(self, record: Record) -> None:
        """Apply one record's effects (`apply_many` of one record)."""
        self.apply_many((record,))

    def apply_many(self, records: Iterable[Record | tuple],
                   before: Callable[[], None] | None = None) -> None:
        """Apply records in order under one lock acquisition: the replay loop. Records may be
        plain `(lsn, time_ms, db, effects)` tuples, as the AOF decoder yields them. Each
        effect runs its command's handler through the one command path, the internal
        vocabulary of effects included.

        `before` runs under the same lock first: a replica logs the records it applies there,
        so nobody sees them applied and not logged."""
        state = self.state
        with state.lock:
            if before is not None:
                before()
            session = Session()
            ctx = ReplayCtx(state, session, 0)
            dbs = state.dbs
            residency = state.residency
            core = self.core
            dispatch = self.dispatch
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
                    core.run_command(ctx, dispatch.effect_entry(argv), argv)
                if state.cluster is not None:  # a cluster node's keys by slot
                    state.cluster.slot_keys.note(
                        state.keyspaces, db, effects if type(effects) is list else list(effects))
            if state.waiters.ready:
                self.waiting.serve_ready()
        if self.after_commands is not None:
            self.after_commands()

    def import_records(self, records: list[tuple[int, list[Any]]]) -> int:
        """Another node's records applied here and logged as this node's own, each with its
        own time, in database 0 (a slot imported: engine.commands.slot_moves checks them
        first). The engine lock is held: a command's handler calls it. Returns the last
        one's LSN (0 without an AOF)."""
        state = self.state
        ctx = ReplayCtx(state, Session(), 0)
        ctx.db = state.dbs[0]
        run, entry_of, commit = self.core.run_command, self.dispatch.effect_entry, self.records.commit
        lsn = 0
        for time_ms, effects in records:
            ctx.now = time_ms
            ran = 0
            try:
                for effect in effects:
                    argv = tuple(effect)
                    ctx.effects = []
                    run(ctx, entry_of(argv), argv)
                    ran += 1
            finally:  # (what ran is logged, even when an effect failed: memory = the log)
                ctx.effects = effects if ran == len(effects) else effects[:ran]
                if ctx.effects:
                    lsn = commit(ctx, 0) or lsn
        return lsn

    def replace_state(self, keyspaces: list[list[dict[bytes, Any]]],
                      expires: list[dict[bytes, int]] | None = None,
                      wake: bool = True) -> None:
        """Replace every database at once (engine lock held): a replica's full sync installs
        its primary's snapshot. `keyspaces` is per type slot then database (engine.model.
        value_types; a slot left out, or no `expires`, is empty). With `wake`, clients blocked
        on a key are re-run against the new data."""
        state = self.state
        count = len(state.dbs)
        streams = keyspaces[STREAM.slot]
        state.residency.adopt(streams)  # loaded by another engine: they count here from now on
        state.residency.adopt_tables(
            table_of(value) for vt in TYPES if (table_of := vt.table_of) is not None
            and vt.slot < len(keyspaces) for space in keyspaces[vt.slot] for value in space.values())
        for slot, space in enumerate(state.keyspaces):  # (in place: the lists are shared)
            space[:] = keyspaces[slot] if slot < len(keyspaces) else [{} for _ in range(count)]
        state.expires[:] = expires if expires is not None else [{} for _ in range(count)]
        state.subexpires[:] = [None] * count  # (engine.exec.keys: rebuilt when next needed)
        if state.cluster is not None:
            state.cluster.slot_keys.rebuild(state.keyspaces)
        if not wake:
            return
        waiters = state.waiters
        for db, values in enumerate(streams):
            for key in values:
                waiters.signal(db, key)
        if waiters.ready:
            self.waiting.serve_ready()

    def roll_back(self, keyspaces: list[list[dict[bytes, Any]]],
                  expires: list[dict[bytes, int]]) -> None:
        """The AOF dropped records this state had applied (engine lock held): install the
        state the log holds (the data directory reloaded it), then tell the server, whose
        replies still waiting for those records become MISCONF. Blocked clients are not
        re-run: nothing in the log's state is newer than what they found when they blocked."""
        self.replace_state(keyspaces, expires, wake=False)
        for hook in self.rollback_hooks:
            hook()


__all__ = ["Replay"]
