"""The active expiry cycle: Redis's activeExpireCycle over every database with TTLs.

Owns `active_expire_cycle`, which the expiry timer (engine.services.expiry_timer) and the
server's cron call: a sample of keys looked at (engine.commands.expiry decides which and
deletes them), the DELs logged as one record per database, the clients their deletion made
ready woken, and the cycle's time counted (INFO's expire_cycle_cpu_milliseconds, the latency
monitor's "expire-cycle" event). Must not touch: which keys expire (engine.commands.expiry),
files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamkeep.engine.commands.expiry import active_expire
from streamkeep.engine.exec.context import Ctx, Session
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore


def active_expire_cycle(core: EngineCore) -> int:
    """One pass over every database with TTLs. Nothing while the write gate is closed to the
    engine's own writes (a read-only replica, whose primary's DELs arrive as effects; an AOF
    that cannot be written: a deletion must never go unlogged). Returns how many keys were
    deleted."""
    removed = 0
    began = core.timer()
    with core.lock:
        if core.write_gate(core.own_session) is not None:
            return 0
        session, now = Session(), core.now()
        for index, expires in enumerate(core.expires):
            if not expires:
                continue
            session.db = index
            ctx = Ctx(core, session, now)
            removed += active_expire(ctx)
            if ctx.effects:
                try:
                    core.commit(ctx, index)
                except ReplyError:  # not logged: rolled back with the state (MISCONF)
                    break
        if core.waiters.ready:
            core.waiting.serve_ready()
        _cycle_ran(core, core.timer() - began)
    return removed


def _cycle_ran(core: EngineCore, nanos: int) -> None:
    """The cycle's time (lock held): INFO's expire_cycle_cpu_milliseconds and the latency
    monitor's "expire-cycle" event."""
    core.stats.expire_cycle_nanos += nanos
    threshold = core.config["latency-monitor-threshold"]
    if threshold and nanos // 1_000_000 >= threshold:
        core.latency.add("expire-cycle", nanos // 1_000_000)


__all__ = ["active_expire_cycle"]
