"""A command's effects logged as one record: to the AOF and to the record sinks.

Owns `Records`, the engine core's part that logs the effects of a command, or of a group of
them that makes one record (EXEC's, a script's, a batch's, a database's expired keys): the
record appended to the AOF (the journal writes it before the reply; MISCONF when it cannot be
written), handed to every record sink (`Engine.add_sink`: tools, tests), the WATCHed keys
its effects change touched, and on a cluster node its keys' slots indexed and a slot's move
told (engine.exec.slot_export). Must not touch: what the effects are (the handlers emit them),
the counting of a command whose record failed (the core's one command path), files (aof/
writes the record).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streamkeep.engine.model.effects import Record

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Ctx
    from streamkeep.engine.exec.engine_state import EngineState

RecordSink = Callable[[Record], None]


class Records:
    """The engine core's records (see the module's docstring): it reads the AOF and the
    WATCHed keys from the engine's `state`, and hands records to `sinks` (the core's list,
    which `add_sink` extends)."""

    def __init__(self, state: EngineState, sinks: list[RecordSink]) -> None:
        self.state = state
        self.sinks = sinks

    def commit(self, ctx: Ctx, db: int) -> int:
        """Hand a command's effects to the AOF (which writes them before we reply) and to the
        sinks. `db` is the database selected when the command started (an EXEC's effects
        SELECT others themselves). Returns the record's LSN (0 without an AOF). MISCONF if it
        cannot be written."""
        state = self.state
        journal, sinks = state.journal, self.sinks
        lsn = 0
        if journal is not None:
            lsn = journal.append(ctx.now, db, ctx.effects)
        if sinks:
            record = Record(lsn, ctx.now, db, ctx.effects)
            for sink in sinks:
                sink(record)
        watches = state.watches
        if watches.by_key:  # (not `if watches`: a Python __bool__ call per command)
            watches.touch_effects(db, ctx.effects)
        cluster = state.cluster
        if cluster is not None:  # a cluster node: its keys by slot, a slot's move
            cluster.slot_keys.note(state.keyspaces, db, ctx.effects)
            if cluster.export is not None:
                cluster.export.note(db, ctx.now, ctx.effects)
        return lsn


__all__ = ["RecordSink", "Records"]
