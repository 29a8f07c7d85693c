"""Which entry runs a command: the dispatch table, the command table's refusals, MULTI's
queueing; and a cluster node's routing of a client's command by its keys' slots (`route`).

Owns `Entry` (a command as this engine runs it) and `Dispatch`, the engine core's part that
finds it: the table that maps each common spelling of a plain command to its entry (the core
reads it first for every command), the entries made as other commands are looked up (each
with this engine's counters for its command), and the general dispatch (`general`): the
command table with Redis's exact refusals, a restricted user's check before a command is
queued in MULTI, and MULTI's queueing. Must not touch: running a command (the core's one
command path does), command semantics, MULTI's rules (engine.exec.transactions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.cluster import FIRST_KEY, NO_KEYS, slot_plan
from streamkeep.engine.exec.stats import CommandCounters
from streamkeep.engine.exec.table import FAST_DISPATCH, Flag, lookup, resolve
from streamkeep.engine.exec.transactions import RUN_IN_MULTI, end_transaction, queue_in_multi
from streamkeep.engine.runtime.acl_gate import refusal as acl_refusal
from streamkeep.engine.runtime.acl_gate import unrestricted
from streamkeep.engine.runtime.refusals import refuse
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.table import Argv, CommandSpec, Handler


# Commands that look a key up without touching its access clock (Redis's LOOKUP_NOTOUCH), and
# EXEC (its commands touch theirs).
NO_TOUCH: Final = frozenset({
    "exec", "type", "ttl", "pttl", "expiretime", "pexpiretime", "exists", "object|encoding",
    "object|refcount", "object|idletime", "object|freq", "memory|usage"})


class Entry:
    """A command as this engine runs it: its handler, the argument counts its arity allows,
    whether it writes, its name (its statistics and CLIENT LIST's cmd= are kept under it)
    and this engine's counters for it. The dispatch table maps each common spelling of a
    plain command to its entry; any other command gets one when it is looked up."""

    __slots__ = ("handler", "min_args", "max_args", "is_write", "name", "counters", "spec",
                 "slot_plan", "denyoom", "touches")

    def __init__(self, spec: CommandSpec, counters: CommandCounters) -> None:
        assert spec.handler is not None  # (lookup never returns a container without one)
        self.spec = spec  # (the ACL gate reads its key specs)
        self.handler: Handler = spec.handler
        self.min_args = spec.arity if spec.arity > 0 else -spec.arity
        self.max_args = spec.arity if spec.arity > 0 else 1 << 30
        self.is_write = spec.is_write
        self.name = spec.name
        self.counters = counters
        self.slot_plan = slot_plan(spec)  # how a cluster node finds its keys' slot
        self.denyoom = Flag.DENYOOM in spec.flags  # refused while memory is over maxmemory
        # Which keys it touches (their access clocks, for an LRU or LFU policy): as the slot
        # plan finds them, none for a command that looks its key up without touching it.
        self.touches = NO_KEYS if spec.name in NO_TOUCH else self.slot_plan


class Dispatch:
    """The engine core's command entries (see the module's docstring). Every method runs with
    the engine lock held."""

    def __init__(self, state: EngineState) -> None:
        self.state = state
        self.entries: dict[str, Entry] = {}  # by full name, made as commands are looked up
        # Each plain command's entry under its common spellings, with its counters.
        self.table: dict[bytes, Entry] = {
            spelling: self.entry_of(spec) for spelling, spec in FAST_DISPATCH.items()}

    def entry_of(self, spec: CommandSpec) -> Entry:
        """The entry that runs `spec` (a command of the effects' own vocabulary counts in
        counters of its own, which no statistic reports)."""
        entry = self.entries.get(spec.name)
        if entry is None:
            counters = (CommandCounters() if spec.internal
                        else self.state.stats.counters(spec.name))
            entry = self.entries[spec.name] = Entry(spec, counters)
        return entry

    def entry_for(self, argv: Argv) -> Entry:
        """The entry that runs argv: the dispatch table's when its arity fits, else the command
        table's (ReplyError, as Redis refuses an unknown command or a wrong arity)."""
        entry = self.table.get(argv[0])
        if entry is not None and entry.min_args <= len(argv) <= entry.max_args:
            return entry
        return self.entry_of(lookup(argv))

    def effect_entry(self, argv: Argv) -> Entry:
        """The entry that applies an effect: its command's, the effects' own vocabulary
        included (a record holds only what the engine logged: no refusal to count)."""
        entry = self.table.get(argv[0])
        if entry is not None:
            return entry
        return self.entry_of(lookup(argv, allow_internal=True))

    def general(self, session: Session, argv: Argv) -> tuple[Entry | None, Any]:
        """The general dispatch: the command table with Redis's exact refusals, and MULTI's
        queueing. Returns (entry, None), or (None, reply) for a command queued in MULTI (then
        nothing runs now)."""
        state = self.state
        try:
            spec = lookup(argv)
        except ReplyError as err:
            raise refuse(state, session, resolve(argv), err) from None
        session.lastcmd = spec.name
        if session.multi is not None:
            if session.user is not None and spec.name not in RUN_IN_MULTI \
                    and not unrestricted(session.user):  # (checked before it is queued)
                refused = acl_refusal(state, session, spec, argv, "multi")
                if refused is not None:
                    session.multi_failed = True
                    raise refuse(state, session, spec, refused) from None
            if state.cluster is not None and spec.name not in RUN_IN_MULTI:
                self.route(session, self.entry_of(spec), argv)  # (judged as it is queued)
            try:
                queued = queue_in_multi(state, session, spec, argv)
            except ReplyError as err:
                raise refuse(state, session, spec, err) from None
            if queued is not None:
                return None, queued
        return self.entry_of(spec), None

    def route(self, session: Session, entry: Entry, argv: Argv) -> None:
        """A cluster node's judgement of a client's command (Redis's processCommand): nothing
        when its keys are served here, else the redirection or refusal raised, counted as a
        rejected call. Inside MULTI the transaction then fails at EXEC; a refused EXEC (its
        transaction's keys judged together) discards the transaction and says why plainly."""
        state = self.state
        cluster = state.cluster
        if cluster is None or session.from_primary:
            return
        if session.asking and session.multi is None and entry.spec.name != "asking":
            # ASKING holds for the next command only (in MULTI, until EXEC): this one
            try:
                self._judge(session, entry, argv, cluster)
            finally:
                session.asking = False
            return
        self._judge(session, entry, argv, cluster)

    def _judge(self, session: Session, entry: Entry, argv: Argv, cluster: Topology) -> None:
        plan = entry.slot_plan
        if plan == NO_KEYS:
            return
        if plan == FIRST_KEY and cluster.whole:  # a node alone: any one key is its own
            return
        state = self.state
        spec = entry.spec
        queued = None
        if spec.name == "exec":
            queued = session.multi
            if queued is None:  # (EXEC without MULTI: its own error)
                return
        line = cluster.refusal(session, spec, argv, queued)
        if line is None:
            return
        err = ReplyError(line)
        if queued is not None:
            end_transaction(state, session)
            state.stats.rejected(state.stats.counters(spec.name), line)
            raise err
        raise refuse(state, session, spec, err)


__all__ = ["Dispatch", "Entry"]
