"""Clients waiting in a blocked read (XREAD/XREADGROUP BLOCK): parked, woken, re-run, timed
out.

Owns `WaitingReaders`, the engine core's part that turns a handler's `Block` into a `Waiter`
(registered on its keys in engine.exec.blocking's registry), re-runs waiters first come first
served after the command that made their keys ready, re-runs one whose `wake_at` has come,
ends a wait that timed out or whose connection closed, and blocks an embedded caller's thread
until its waiter is done. A re-run is a command like any other: it goes through the engine's
one command path (EngineCore.run_command) in a `RerunCtx`, which gates, expires, times, maps
storage errors and logs it; only the counting differs (one call when the wait ends, with all
its runs' time). A served waiter's `notify` is its owner's code, run on whatever thread wrote
(a caller's, the replica's follower, the expiry timer): what it raises is logged and goes no
further, so the write that served it, and the other waiters, are unaffected. Must not touch:
command semantics, the waiter registry's internals, files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Block, RerunCtx
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.table import Argv
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.runtime.dispatch import Entry
    from streamkeep.engine.runtime.monitoring import Monitoring

log = logging.getLogger("streamkeep.engine")


class WaitingReaders:
    """The engine core's blocked clients (see the module's docstring). Every method but
    `wait` runs with the engine lock held or takes it. It reads the engine's `state` (the
    waiter registry among it), hands a slow call to `monitoring`, and calls nothing of the
    `core` but its one command path."""

    def __init__(self, state: EngineState, core: EngineCore, monitoring: Monitoring) -> None:
        self.state = state
        self.core = core
        self.monitoring = monitoring

    def park(self, session: Session, argv: Argv, block: Block, entry: Entry, nanos: int,
             notify: Callable[[Waiter], None] | None) -> Waiter:
        """A command that blocked (lock held): register its waiter on the keys it waits for.
        Its call is counted when it is served or times out, with all its runs' time (`nanos`
        so far)."""
        waiter = Waiter(session, block.argv, [(session.db, k) for k in block.keys])
        waiter.wake_at = block.wake_at
        waiter.ready = block.ready
        waiter.rerun = block.rerun
        waiter.timeout_ms = block.timeout_ms
        waiter.notify = notify
        waiter.entry = entry
        waiter.counters = entry.counters
        waiter.nanos = nanos
        waiter.sent = argv
        self.state.waiters.add(waiter)
        return waiter

    def wait(self, waiter: Waiter) -> Any:
        """Block this thread until the waiter is served, times out or needs a timed re-run."""
        state = self.state
        with state.lock:  # a re-run sets the event under the lock: none is missed
            event = waiter.event = threading.Event()
            if waiter.done:
                event.set()
        timeout_ms = waiter.timeout_ms
        deadline = None if timeout_ms == 0 else time.monotonic() + timeout_ms / 1000
        while True:
            wait_s = None if deadline is None else max(deadline - time.monotonic(), 0)
            if waiter.wake_at is not None:
                until_wake = max((waiter.wake_at - state.now()) / 1000, 0) + 0.001
                wait_s = until_wake if wait_s is None else min(wait_s, until_wake)
            if event.wait(wait_s):
                break
            if deadline is not None and time.monotonic() >= deadline and self.cancel(
                    waiter, NULL_ARRAY):
                break
            if self.poll(waiter):
                break
        journal = state.journal
        if waiter.lsn and journal is not None and journal.sync_on_commit:
            journal.wait_durable(waiter.lsn)
        if isinstance(waiter.result, ReplyError):
            raise waiter.result
        return waiter.result

    def cancel(self, waiter: Waiter, result: Any = NULL_ARRAY) -> bool:
        """End a wait that was not served (timeout: the null reply; a closed connection:
        None): True if it was still waiting, False if it had been served meanwhile."""
        state = self.state
        with state.lock:
            if waiter.done:
                return False
            state.waiters.remove(waiter)
            waiter.done = True
            waiter.result = result
            counters = waiter.counters
            # A timeout: one call (Redis's updateStatsOnUnblock).
            if result is not None and counters is not None and counters.count(waiter.nanos):
                self.monitoring.slow_call(waiter.session, waiter.sent, waiter.nanos)
            return True

    def poll(self, waiter: Waiter) -> bool:
        """Re-run a waiter whose `wake_at` has come (XREADGROUP CLAIM waiting for an entry to
        become idle enough). True once it is done."""
        state = self.state
        with state.lock:
            if not waiter.done and waiter.wake_at is not None and state.now() >= waiter.wake_at:
                self.rerun(waiter)
            return waiter.done

    def rerun(self, waiter: Waiter) -> None:
        """Re-run a waiter's command through the one command path (lock held); if it no
        longer blocks, hand it the result. A write (XREADGROUP) the write gate refuses now
        (the AOF cannot be written, or this engine became a replica) replies the gate's
        error, as Redis's re-processing of an unblocked command refuses it."""
        state = self.state
        ctx = RerunCtx(state, waiter.session, state.now())
        try:
            result = self.core.run_command(ctx, waiter.entry, waiter.argv, waiter.rerun)
        except ReplyError as err:
            result = err
        waiter.nanos += ctx.nanos
        if type(result) is Block:
            waiter.wake_at = result.wake_at
            waiter.ready = result.ready
            waiter.rerun = result.rerun
            return
        if ctx.lsn:
            # What WAIT and WAITAOF on its connection wait for: this record, not the one of
            # its first, blocking run (the path set the session's write_lsn too).
            waiter.lsn = ctx.lsn
        self._count_unblocked(waiter, result)
        waiter.result = result
        waiter.done = True
        state.waiters.remove(waiter)
        if waiter.event is not None:
            waiter.event.set()
        if waiter.notify is not None:
            try:  # (costs nothing unless it raises: no per-waiter work is added)
                waiter.notify(waiter)
            except Exception:
                log.exception("a served reader's notify failed; the write that served it "
                              "goes on")

    def _count_unblocked(self, waiter: Waiter, result: Any) -> None:
        """A blocked command finished: one call (a failed one if it replied an error, as a
        blocked XREADGROUP whose group or key went away does), with all its runs' time."""
        counters = waiter.counters
        if counters is None:
            return
        if isinstance(result, ReplyError):
            slow = self.state.stats.failed(counters, waiter.nanos, result.line)
        else:
            slow = counters.count(waiter.nanos)
        if slow:
            self.monitoring.slow_call(waiter.session, waiter.sent, waiter.nanos)

    def serve_ready(self) -> None:
        """Re-run the commands of clients waiting on signalled keys, first come first served
        (lock held)."""
        waiters = self.state.waiters
        while (k := waiters.pop_ready()) is not None:
            # Ready checks found false in this pass stay false: a re-run only delivers (or
            # creates a consumer), it never adds entries or removes a key or group. Ten
            # consumers of one group blocked on a key take one check per XADD, not ten.
            not_ready: set | None = None
            for waiter in waiters.waiting_on(k):
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
                self.rerun(waiter)

    def blocked_clients(self) -> int:
        """How many clients are blocked (INFO's blocked_clients)."""
        state = self.state
        with state.lock:
            return len({id(w) for q in state.waiters.by_key.values() for w in q})


__all__ = ["WaitingReaders"]
