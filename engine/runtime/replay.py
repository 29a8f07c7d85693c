"""Records applied: the AOF's replay, a replica's stream of records, a snapshot's build, and a
whole state installed at once (a replica's full sync, the AOF's rollback).

Owns `Replay`, the engine core's part that applies records' effects through the command table
(each effect through the engine's one command path, EngineCore.run_command, in a `ReplayCtx`:
the handler only runs, no gate, no expiry, no statistics, no record) and swaps in a state
loaded elsewhere. Must not touch: reading files (aof/ and snapshot/ hand it records), command
semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import ReplayCtx, Session
from streamkeep.engine.exec.table import lookup
from streamkeep.engine.model.effects import Record
from streamkeep.engine.model.value_types import STREAM

if TYPE_CHECKING:
    from streamkeep.engine.exec.table import Argv
    from streamkeep.engine.runtime.core import EngineCore, Entry


class Replay:
    """The engine core's way in for records (see the module's docstring)."""

    def __init__(self, core: EngineCore) -> None:
        self.core = core

    def apply_many(self, records: Iterable[Record | tuple],
                   before: Callable[[], None] | None = None) -> None:
        """Apply records in order under one lock acquisition: the replay loop. Records may be
        plain `(lsn, time_ms, db, effects)` tuples, as the AOF decoder yields them. Each
        effect runs its command's handler through the one command path, the internal
        vocabulary of effects included.

        `before` runs under the same lock first: a replica logs the records it applies there,
        so nobody sees them applied and not logged."""
        core = self.core
        with core.lock:
            if before is not None:
                before()
            session = Session()
            ctx = ReplayCtx(core, session, 0)
            dbs = core.dbs
            residency = core.residency
            run_command = core.run_command
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
                    run_command(ctx, self._effect_entry(argv), argv)
            if core.waiters.ready:
                core.waiting.serve_ready()
        core.commands_done()

    def _effect_entry(self, argv: Argv) -> Entry:
        """The entry that applies an effect: its command's, the effects' own vocabulary
        included (a record holds only what the engine logged: no refusal to count)."""
        core = self.core
        entry = core.dispatch.get(argv[0])
        if entry is not None:
            return entry
        return core.entry_of(lookup(argv, allow_internal=True))

    def replace_state(self, keyspaces: list[list[dict[bytes, Any]]],
                      expires: list[dict[bytes, int]] | None = None,
                      wake: bool = True) -> None:
        """Replace every database at once (engine lock held): a replica's full sync installs
        its primary's snapshot. `keyspaces` is per type slot then database (engine.model.
        value_types; a slot left out, or no `expires`, is empty). With `wake`, clients blocked
        on a key are re-run against the new data."""
        core = self.core
        count = len(core.dbs)
        streams = keyspaces[STREAM.slot]
        core.residency.adopt(streams)  # loaded by another engine: they count here from now on
        for slot, space in enumerate(core.keyspaces):  # (in place: the lists are shared)
            space[:] = keyspaces[slot] if slot < len(keyspaces) else [{} for _ in range(count)]
        core.expires[:] = expires if expires is not None else [{} for _ in range(count)]
        core.subexpires[:] = [None] * count  # (engine.exec.keys: rebuilt when next needed)
        if not wake:
            return
        for db, values in enumerate(streams):
            for key in values:
                core.waiters.signal(db, key)
        if core.waiters.ready:
            core.waiting.serve_ready()

    def roll_back(self, keyspaces: list[list[dict[bytes, Any]]],
                  expires: list[dict[bytes, int]]) -> None:
        """The AOF dropped records this state had applied (engine lock held): install the
        state the log holds (the data directory reloaded it), then tell the server, whose
        replies still waiting for those records become MISCONF. Blocked clients are not
        re-run: nothing in the log's state is newer than what they found when they blocked."""
        self.replace_state(keyspaces, expires, wake=False)
        for hook in self.core.rollback_hooks:
            hook()


__all__ = ["Replay"]
