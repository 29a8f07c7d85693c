"""The active expiry cycle: Redis's activeExpireCycle over every database with TTLs.

Owns `ExpiryCycle`, the engine core's part whose `run` the expiry timer
(engine.services.expiry_timer) and the server's cron call: a sample of keys looked at
(engine.commands.expiry decides which and deletes them), then the keys whose sub-keys are
due, the DELs logged as one record per database, the clients their deletion made ready woken,
and the cycle's time counted (INFO's expire_cycle_cpu_milliseconds, the latency monitor's
"expire-cycle" event), and INFO keyspace's `avg_ttl`, the running estimate of each database's
TTLs Redis's cycle keeps from the keys it samples. Must not touch: which keys expire
(engine.commands.expiry), files.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING

from streamkeep.engine.commands.expiry import (
    ACTIVE_EXPIRE_SAMPLE,
    active_expire,
    active_expire_subkeys,
)
from streamkeep.engine.exec.context import Ctx, Session
from streamkeep.engine.exec.keys import subexpiry_dbs
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.runtime.records import Records
    from streamkeep.engine.runtime.waiting import WaitingReaders


class ExpiryCycle:
    """The engine core's active expiry (see the module's docstring). It reads the engine's
    `state`, asks the write gate as `own_session` (the session of the engine's own writes),
    logs the deletions through `records`, re-runs the clients they made ready through
    `waiting`, and times itself with `timer` (the core's command timer, ns)."""

    def __init__(self, state: EngineState, records: Records, waiting: WaitingReaders,
                 own_session: Session, timer: Callable[[], int]) -> None:
        self.state = state
        self.records = records
        self.waiting = waiting
        self.own_session = own_session
        self.timer = timer

    def run(self) -> int:
        """One pass over every database with TTLs. Nothing while the write gate is closed to
        the engine's own writes (a read-only replica, whose primary's DELs arrive as effects;
        an AOF that cannot be written: a deletion must never go unlogged). Returns how many
        keys were deleted."""
        state = self.state
        removed = 0
        began = self.timer()
        with state.lock:
            state.eviction.maintain(state.now())  # (the cron's: the access clocks' upkeep)
            if state.write_gate(self.own_session) is not None:
                return 0
            session, now = Session(), state.now()
            avg_ttl = state.stats.avg_ttl
            for index, expires in enumerate(state.expires):
                if not expires:
                    avg_ttl.pop(index, None)  # (Redis: 0 for a database with no TTL)
                    continue
                estimate_avg_ttl(avg_ttl, index, expires, now)
                session.db = index
                ctx = Ctx(state, session, now)
                removed += active_expire(ctx)
                if not self._logged(ctx, index):
                    break
            removed += self._expire_subkeys(session, now)
            if state.waiters.ready:
                self.waiting.serve_ready()
            self._cycle_ran(self.timer() - began)
        return removed

    def _expire_subkeys(self, session: Session, now: int) -> int:
        """The sub-keys' pass (a hash's fields: engine.commands.expiry's
        `active_expire_subkeys`): every database with values whose sub-keys have TTLs, a
        bounded number of due sub-keys each, each database's deletions committed."""
        state = self.state
        removed = 0
        for index in subexpiry_dbs(state):
            session.db = index
            ctx = Ctx(state, session, now)
            removed += active_expire_subkeys(ctx)
            if not self._logged(ctx, index):
                break
        return removed

    def _logged(self, ctx: Ctx, index: int) -> bool:
        """A database's deletions (if any) logged as one record; False when they could not be
        (MISCONF: rolled back with the state, and the pass stops)."""
        if not ctx.effects:
            return True
        try:
            self.records.commit(ctx, index)
        except ReplyError:
            return False
        return True

    def _cycle_ran(self, nanos: int) -> None:
        """The cycle's time (lock held): INFO's expire_cycle_cpu_milliseconds and the latency
        monitor's "expire-cycle" event."""
        state = self.state
        state.stats.expire_cycle_nanos += nanos
        threshold = state.config["latency-monitor-threshold"]
        if threshold and nanos // 1_000_000 >= threshold:
            state.latency.add("expire-cycle", nanos // 1_000_000)


# The weight of the previous estimate against one cycle's sample (Redis's activeExpireCycle:
# 98% and 2%, the 2% cut from the estimate again for each further sampling pass it made).
AVG_TTL_KEEP = 0.98


def estimate_avg_ttl(avg_ttl: dict[int, int], index: int, expires: dict[bytes, int],
                     now: int) -> None:
    """Fold this cycle's sample of database `index` into its TTL estimate (ms; `avg_ttl` is
    `stats.avg_ttl`): the mean TTL of the keys the cycle's first pass looks at (the first
    ACTIVE_EXPIRE_SAMPLE of `expires`, as active_expire takes them) that have not expired.
    Redis starts from that mean, then keeps 98% of the estimate each time. It folds once per
    sampling pass, and a cycle here folds once, however many passes active_expire makes:
    passes after the first run only while a quarter or more of a sample had expired. Costs a
    look at 20 TTLs."""
    ttls = [when - now for when in islice(expires.values(), ACTIVE_EXPIRE_SAMPLE) if when > now]
    if not ttls:
        return
    sample = sum(ttls) // len(ttls)
    previous = avg_ttl.get(index, 0)
    # (the C double's truncation toward zero on assignment, as in Redis)
    avg_ttl[index] = sample if previous == 0 else int(sample + (previous - sample) * AVG_TTL_KEEP)


__all__ = ["AVG_TTL_KEEP", "ExpiryCycle", "estimate_avg_ttl"]
