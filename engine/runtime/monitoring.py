"""What the engine reports of its own running: the slow log's and the latency monitor's
samples, and INFO's instantaneous rates.

Owns `Monitoring`, the engine core's part that hands a call its counters found slow to the
slow log and the latency monitor (each applies its own threshold), records a compaction's
start (INFO's latest_fork_usec, the "fork" latency event) and takes the cron's sample behind
INFO's instantaneous rates. Must not touch: the counting of calls (engine.exec.stats decides
which call is slow), the slow log's and the latency monitor's entries (engine.exec.slowlog,
engine.exec.latency).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from streamkeep.engine.exec.table import Flag, resolve

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.table import Argv


class Monitoring:
    """The engine core's monitoring (see the module's docstring): it reads and records in the
    engine's `state` (its settings, its statistics, its slow log and latency monitor)."""

    def __init__(self, state: EngineState) -> None:
        self.state = state

    def slow_call(self, session: Session, argv: Argv, nanos: int) -> None:
        """A call its counters found slow (lock held): the slow log's entry and the latency
        monitor's "command" or "fast-command" sample, each if over its own threshold (Redis's
        call(): slowlogPushCurrentCommand, latencyAddSampleIfNeeded). EXEC is never in the
        slow log (its commands are, one by one); a script's commands are, as run by Redis's
        script client (no address: "?:0", no name)."""
        state = self.state
        config = state.config
        spec = resolve(argv)
        usec = nanos // 1000
        slower = config["slowlog-log-slower-than"]
        if 0 <= slower <= usec and (spec is None or Flag.SKIP_SLOWLOG not in spec.flags):
            client = session.client
            addr, name = (client.addr if client is not None else ""), session.name
            if state.scripting is not None and state.scripting.running is not None:
                addr, name = "?:0", b""
            state.slowlog.log(argv, usec, addr, name, config["slowlog-max-len"])
        threshold = config["latency-monitor-threshold"]
        if threshold and usec // 1000 >= threshold:
            fast = spec is not None and Flag.FAST in spec.flags
            state.latency.add("fast-command" if fast else "command", usec // 1000)

    def started_compaction(self, usec: int) -> None:
        """A compaction started, holding the engine lock `usec` (lock held): INFO's
        latest_fork_usec and the latency monitor's "fork" event (the pause Redis's fork is)."""
        state = self.state
        state.latest_fork_usec = usec
        threshold = state.config["latency-monitor-threshold"]
        if threshold and usec // 1000 >= threshold:
            state.latency.add("fork", usec // 1000)

    def sample_stats(self, counters: dict[str, int] | None = None) -> None:
        """The cron's sample behind INFO's instantaneous rates (engine.exec.stats.sample):
        commands processed, and the server's `counters` (network bytes)."""
        state = self.state
        with state.lock:
            state.stats.sample(time.time_ns() // 1_000_000, counters or {})


__all__ = ["Monitoring"]
