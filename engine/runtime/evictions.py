"""maxmemory's evictions, run before a client's command (Redis's performEvictions).

Owns `Evictions`, the engine core's part that makes room: when the memory is over the limit
(engine.exec.eviction's level), the keys the policy chooses are deleted, each notified
`evicted`, counted (INFO's evicted_keys) and logged as a DEL, one record per database, so the
AOF, a replay and the replicas see exactly what went (a replica never evicts: its primary's DELs
arrive as effects). It stops once the estimate of what it freed covers the excess plus a
round's slack (`Eviction.slack`: a thousandth of maxmemory, at most 1 MB, so that the writes
after a round find room without a round of their own), when the policy finds no key
(`noeviction` finds none), or at the time `maxmemory-eviction-tenacity` allows (then the
command runs and the next one evicts more, as Redis's eviction continues in its timer). Before
any key goes, the stream nodes deleted since the backlog's queue took them (`backlog-memory`
keeps them queued until its own eviction reaches them) are let go. `make_room` answers whether
memory is still over the limit: the caller refuses a
`denyoom` command then (`refuses`). It also stamps the access clocks of the keys a command
looked up (`touch`, under an LRU or LFU policy). Must not touch: which keys go
(engine.exec.eviction), the reply.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from streamkeep.engine.exec.cluster import FIRST_KEY
from streamkeep.engine.exec.context import Ctx, Session
from streamkeep.engine.exec.eviction import freed_estimate
from streamkeep.engine.exec.key_specs import key_positions
from streamkeep.engine.exec.keys import delete_key
from streamkeep.engine.exec.notify import EVICTED
from streamkeep.engine.exec.table import Argv, Flag
from streamkeep.engine.model.effects import del_effect
from streamkeep.engine.model.heap import counted_bound
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.runtime.dispatch import Entry
    from streamkeep.engine.runtime.records import Records

_COUNTED_BOUND: Final = counted_bound
CHECK_EVERY = 16  # keys evicted between looks at the clock
PURGE_EVERY_NS = 10_000_000  # the backlog queue's dead nodes looked for at most every 10 ms


def time_limit_ns(tenacity: int) -> int | None:
    """Redis's evictionTimeLimitUs, in ns: 50 us per step up to 10, then 15% more per step,
    none from 100."""
    if tenacity <= 10:
        return 50_000 * tenacity
    if tenacity < 100:
        return int(500_000 * 1.15 ** (tenacity - 10))
    return None


class Evictions:
    """The engine core's evictions (see the module's docstring): it reads the engine's
    `state`, asks the write gate as `own_session` (a deletion must never go unlogged) and
    logs through `records`."""

    def __init__(self, state: EngineState, records: Records, own_session: Session) -> None:
        self.state = state
        self.records = records
        self.own_session = own_session
        self.purge_due = 0

    def before(self, session: Session, entry: Entry | None) -> bool:
        """Room made before a client's command (Redis's processCommand), but on a replica and
        for its primary's link (the primary evicts for it): whether memory is still over the
        limit (the command's `oom` state). `entry`: the command's, if the fast table knew it
        (else it may write)."""
        state = self.state
        eviction = state.eviction
        if eviction.room and _COUNTED_BOUND() <= eviction.room:  # far from full: one call
            return False
        if not eviction.limit or session.from_primary or state.read_only is not None:
            return False
        return self.make_room(entry is None or entry.is_write)

    def make_room(self, grows: bool) -> bool:
        """Evict until the memory is within the limit (lock held) before a command (`grows`:
        one that may write): True when it is still over it (nothing to evict, or the
        deletions cannot be logged), False when within it or evicting goes on at the next
        command."""
        state = self.state
        eviction = state.eviction
        excess = eviction.over(grows)
        if not excess:
            return False
        if state.residency.queue and self._purged():
            excess = eviction.over(False)
            if not excess:
                return False
        if state.write_gate(self.own_session) is not None:
            return True
        eviction.tick(state.now())
        eviction.begin()
        limit = time_limit_ns(eviction.tenacity)
        began = time.monotonic_ns()
        contexts: dict[int, tuple[Ctx, list[bytes]]] = {}
        freed = evicted = 0
        out = False
        goal = excess + eviction.slack()
        while freed < goal:
            chosen = eviction.choose()
            if chosen is None:
                out = True
                break
            db, key = chosen
            freed += self._evict(contexts, db, key)
            evicted += 1
            if evicted % CHECK_EVERY == 0:
                if limit is not None and time.monotonic_ns() - began > limit:
                    break
                eviction.compact_evicted()  # (a long round: its holes are walked over)
        eviction.freed_bytes(freed)
        state.stats.evicted_keys += evicted
        self._log(contexts)
        eviction.compact_evicted()
        return out

    def _purged(self) -> bool:
        """The deleted stream nodes the backlog's queue still held, let go (at most every
        PURGE_EVERY_NS: a pass over the queue): True when some were, the level then walked
        again."""
        now = time.monotonic_ns()
        if now < self.purge_due:
            return False
        self.purge_due = now + PURGE_EVERY_NS
        if not self.state.residency.purge_dead():
            return False
        self.state.eviction.walk_due = 0
        return True

    def refuses(self, session: Session, entry: Entry) -> bool:
        """Over the limit, the command is refused with OOM: it may grow memory (`denyoom`), or
        it is an EXEC whose transaction holds one (Redis's mstate.cmd_flags)."""
        if entry.denyoom:
            return True
        queued = session.multi
        return entry.name == "exec" and queued is not None and any(
            Flag.DENYOOM in spec.flags for spec, _argv in queued)

    def touch(self, ctx: Ctx, entry: Entry, argv: Argv) -> None:
        """The keys a command looked up, touched (Redis's lookupKey): their access clocks."""
        eviction = self.state.eviction
        db, now = ctx.session.db, ctx.now
        if entry.touches == FIRST_KEY:
            eviction.touch(db, argv[1], now)
            return
        for found in key_positions(entry.spec, argv):
            eviction.touch(db, argv[found[0]], now)

    def _evict(self, contexts: dict[int, tuple[Ctx, list[bytes]]], db: int, key: bytes) -> int:
        """Delete one key of database `db` in that database's context: about what it freed."""
        state = self.state
        found = contexts.get(db)
        if found is None:
            ctx = Ctx(state, Session(db), state.now())
            found = contexts[db] = (ctx, [])
        ctx, keys = found
        size = 0
        for space in state.keyspaces:
            value = space[db].get(key)
            if value is not None:
                size = freed_estimate(key, value)
                break
        delete_key(ctx, key)
        state.eviction.evicted(db, key)
        ctx.notify(EVICTED, b"evicted", key)
        keys.append(key)
        return size

    def _log(self, contexts: dict[int, tuple[Ctx, list[bytes]]]) -> None:
        """Each database's evictions logged as one record of one DEL."""
        for db, (ctx, keys) in contexts.items():
            ctx.emit(del_effect(keys))
            try:
                self.records.commit(ctx, db)
            except ReplyError:
                return  # MISCONF: the log refuses writes, and the write gate with it


__all__ = ["CHECK_EVERY", "PURGE_EVERY_NS", "Evictions", "time_limit_ns"]
