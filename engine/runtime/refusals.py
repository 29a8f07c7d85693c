"""Commands refused before they run, and the commands a busy script lets through.

Owns `refuse`, Redis's rejectCommand: a refusal's reply, its counting (a rejected call of its
command, an error reply), what it does to an open transaction (EXECABORT, or a failed MULTI);
and `Refusals`, the engine core's part for the server's gates (NOAUTH, a RESP2 subscriber's
commands), which check a command's existence and arity first as Redis does; error replies the
engine did not produce; and Redis's processCommand while a script is past
busy-reply-threshold (`run_while_busy`, whose allowed commands are dispatched
(engine.runtime.dispatch) and run through the one command path in a `BusyCtx`). Must not
touch: command semantics, the write gate (EngineState.write_gate decides; this part only
counts and phrases).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.context import BusyCtx
from streamkeep.engine.exec.pubsub import subscribed_context_error
from streamkeep.engine.exec.table import Flag, lookup, resolve
from streamkeep.engine.exec.transactions import end_transaction
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.stats import CommandCounters
    from streamkeep.engine.exec.table import Argv, CommandSpec
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.runtime.dispatch import Dispatch

NOAUTH: Final = "NOAUTH Authentication required."


def _noauth(name: str) -> str:
    return NOAUTH


def refuse(state: EngineState, session: Session, spec: CommandSpec | None, err: ReplyError,
           counters: CommandCounters | None = None) -> ReplyError:
    """A command refused before it ran (lock held), as Redis's rejectCommand: a refused EXEC
    discards the transaction and says why in an EXECABORT line, any other refusal inside MULTI
    makes the EXEC abort; counted as a rejected call of `spec` (or of `counters`; neither: an
    unknown command) and an error reply. Returns the error to raise."""
    if spec is not None:
        session.lastcmd = spec.name
        counters = state.stats.counters(spec.name)
        if spec.name == "exec":
            end_transaction(state, session)
            err = ReplyError("EXECABORT Transaction discarded because of: "
                             + err.line.removeprefix("ERR "))
    elif counters is None:
        session.lastcmd = None  # Redis's lastcmd of an unknown command: NULL
    if session.multi is not None:
        session.multi_failed = True
    state.stats.rejected(counters, err.line)
    return err


class Refusals:
    """The engine core's refusals (see the module's docstring): it reads the engine's `state`,
    dispatches through `dispatch`, and calls nothing of the `core` but its one command path."""

    def __init__(self, state: EngineState, core: EngineCore, dispatch: Dispatch) -> None:
        self.state = state
        self.core = core
        self.dispatch = dispatch

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
        from streamkeep.engine.exec.scripting import busy_line

        state = self.state
        try:
            spec = lookup(argv)
        except ReplyError as err:
            return refuse(state, session, resolve(argv), err)
        if gate is not None:
            return refuse(state, session, spec, ReplyError(gate(spec.name)))
        if Flag.ALLOW_BUSY not in spec.flags:
            return refuse(state, session, spec, ReplyError(busy_line(state.scripting)))
        try:
            entry, queued = self.dispatch.general(session, argv)
        except ReplyError as err:
            return err
        if entry is None:
            return queued
        try:
            return self.core.run_command(BusyCtx(state, session, state.now()), entry, argv)
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
        state = self.state
        with state.lock:
            try:
                spec = lookup(argv)
            except ReplyError as err:
                return refuse(state, session, resolve(argv), err)
            return refuse(state, session, spec, ReplyError(line(spec.name)))

    def error_replied(self, line: str) -> None:
        """An error reply the engine did not produce (the server's protocol errors)."""
        state = self.state
        with state.lock:
            state.stats.error_reply(line)

    def late_error(self, session: Session, err: ReplyError) -> None:
        """A command counted as a call replied an error after it returned (SAVE's wait):
        count the failure and the error reply."""
        state = self.state
        with state.lock:
            counters = state.stats.counters(session.lastcmd) if session.lastcmd else None
            state.stats.late_failure(counters, err.line)


__all__ = ["NOAUTH", "Refusals", "refuse"]
