"""maxmemory: the memory the engine may hold, and which keys go when it holds more (Redis's
evict.c).

Owns `Eviction` (the engine's `eviction`): the limit and the policy (copied from the settings by
`configure`), the memory's level (`level`: engine.model.heap's meter, walked only when its O(1)
bound passes the limit, then at a pace that keeps the walks to about 5% of the time, estimated
in between), the keys' access clocks (`touch`, for an LRU or an LFU policy only: a
per-database dict beside the keyspace, the key's LRU clock or its LFU word as Redis packs
them), and the choice of the keys to evict (`choose`: Redis's sampled approximation, a sample
of `maxmemory-samples` keys per database into the eviction pool of 16, the best candidate
taken; a random key for the random policies). The caller deletes and logs what `evict` hands
it (engine.runtime.evictions). Must not touch: the log, replies, a value's contents.
"""

from __future__ import annotations

import random
import sys
import time
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.model.dict_sample import sample_keys
from streamkeep.engine.model.heap import HeapMeter, counted_bound, meter

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState

OOM: Final = "OOM command not allowed when used memory > 'maxmemory'."
POLICIES: Final = ("volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
                   "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction")
POOL_SIZE: Final = 16  # Redis's EVPOOL_SIZE
LRU_CLOCK_MAX: Final = (1 << 24) - 1  # Redis's robj lru field: 24 bits
LRU_RESOLUTION_MS: Final = 1000
LFU_INIT_VAL: Final = 5
WALK_MIN_NS: Final = 1_000_000  # walks at most every millisecond...
WALK_COST_SHARE: Final = 20  # ... and at most 1/20 of the time, but sooner once the bound
WALK_GROWTH_MIN: Final = 256 << 10  # grew by 256 KiB or 1/64 of the memory (a new arena is
WALK_GROWTH_SHARE: Final = 64  # room, not use: only a walk tells)
# The growth per write the estimate learns between walks: each walk's sample (clamped: a dict
# table's doubling is one step, seen by the bound, not a rate) weighs a quarter.
GROWTH_MAX: Final = 1024.0
GROWTH_WEIGHT: Final = 0.25
# An aggregate's bytes per element (its member's object and its share of the tables): the
# estimate of what evicting it frees, until the next walk.
ELEMENT_BYTES: Final = 64

# A round of evictions frees this share of the limit more than the excess (at most SLACK_MAX):
# the next writes find room without a round of their own, whose fixed costs (the databases
# looked over, a context, one logged DEL) a round of one key would pay per key.
SLACK_SHARE: Final = 1024
SLACK_MAX: Final = 1 << 20
COMPACT_SHARE: Final = 8  # a database's dicts compacted once evictions took 1/8 of its keys
_BYTES_HEADER: Final = sys.getsizeof(b"")  # a bytes object's size less its length
_COUNTED_BOUND: Final = counted_bound  # (bound once: a static to mypyc, not a global lookup)
_LRU, _LFU, _RANDOM, _TTL, _NONE = 0, 1, 2, 3, 4
_KINDS: Final = {"lru": _LRU, "lfu": _LFU, "random": _RANDOM, "ttl": _TTL}


def lru_clock(now_ms: int) -> int:
    """Redis's LRU_CLOCK: seconds, 24 bits."""
    return (now_ms // LRU_RESOLUTION_MS) & LRU_CLOCK_MAX


def lfu_minutes(now_ms: int) -> int:
    """Redis's LFUGetTimeInMinutes: minutes, 16 bits."""
    return (now_ms // 60_000) & 0xFFFF


class Eviction:
    """The engine's memory limit and its evictions (see the module's docstring)."""

    def __init__(self, state: EngineState, heap: HeapMeter | None = None) -> None:
        self.state = state
        self.heap = heap if heap is not None else meter()
        self.counting = self.heap.counting  # (then the bound is one kernel call)
        self.base = self.heap.base
        # `limit` less `base`: the kernel's bound at or below it is within the limit (0: no
        # limit, or no hooks to count with).
        self.room = 0
        self.limit = 0  # maxmemory (0: none)
        self.policy = ""  # (the first `configure` sets it)
        self.kind = _NONE
        self.volatile = False
        self.samples = 5
        self.tenacity = 10
        self.log_factor = 10
        self.decay_time = 1
        self.tracking = False  # access clocks kept (an LRU or LFU policy)
        self.access: list[dict[bytes, int]] = []
        self.since_ms = 0  # when the clocks began: a key without one was last touched then
        # The eviction pool: its candidates' scores in ascending order (best last), the
        # candidates (db, key) in the same order, and the same as a set (one look to dedupe).
        self.pool_scores: list[int] = []
        self.pool: list[tuple[int, bytes]] = []
        self.pooled: set[tuple[int, bytes]] = set()
        # The level's estimate between walks: the last walk's reading, the bound then, what
        # the evictions since are thought to have freed.
        self.walked = 0
        self.walked_bound = 0
        self.freed = 0
        self.walk_due = 0
        self.walk_growth = WALK_GROWTH_MIN  # the bound's growth that asks for a walk
        self.walked_malloced = 0
        self.walked_before = False
        self.checks = 0  # writes checked since the last walk
        self.growth = 0.0  # bytes a write adds unseen by the bound (learned)
        self.clock = 0  # the LRU clock or the LFU minutes, per `tick`
        self.ticked_ms = 0
        self.next_db = 0  # the random policies' database in turn
        self.dbs: list[int] = []  # the databases this round of evictions samples (`begin`)
        self.since_compact: list[int] = []  # per database: keys evicted since its compaction
        self.peak = 0  # the highest reading yet (INFO's used_memory_peak)

    # --- settings --------------------------------------------------------------------------

    def configure(self, config: dict[str, Any], now_ms: int) -> None:
        """Copy the settings (CONFIG SET's hook and the engine's start)."""
        self.limit = int(config["maxmemory"])
        self.room = self.limit - self.base if self.counting and self.limit else 0
        policy = str(config["maxmemory-policy"])
        self.samples = int(config["maxmemory-samples"])
        self.tenacity = int(config["maxmemory-eviction-tenacity"])
        self.log_factor = int(config["lfu-log-factor"])
        self.decay_time = int(config["lfu-decay-time"])
        if policy != self.policy:
            self.policy = policy
            self.kind = _KINDS.get(policy.rpartition("-")[2], _NONE)
            self.volatile = policy.startswith("volatile-")
            self._empty_pool()
            tracking = self.kind in (_LRU, _LFU)
            # A change between LRU and LFU changes what a clock means: they start again.
            self.access = [{} for _ in self.state.expires] if tracking else []
            self.tracking = tracking
            self.since_ms = now_ms
        if now_ms:
            self.tick(now_ms)
        self.walk_due = 0

    def tick(self, now_ms: int) -> None:
        """The clock the touches stamp (one int object per second, shared by every stamp).
        The first tick after a change of policy is when its clocks began."""
        self.ticked_ms = now_ms
        if not self.since_ms:
            self.since_ms = now_ms
        clock = lfu_minutes(now_ms) if self.kind == _LFU else lru_clock(now_ms)
        if clock != self.clock:
            self.clock = clock

    # --- the level -------------------------------------------------------------------------

    def level(self, grows: bool = True) -> int:
        """The memory held now, as well as its cost allows: the meter's O(1) bound while it
        is under the limit; else a walk when one is due (by time, or by the bound's growth
        since the last); else the last walk's reading, plus the malloc'd bytes' change since
        (exact), plus the small objects' growth per write the walks have seen (`grows`: the
        command about to run writes), less what evictions have freed of small objects."""
        heap = self.heap
        bound = self.base + _COUNTED_BOUND() if self.counting else heap.bound()
        if bound <= self.limit:
            return bound
        if grows:
            self.checks += 1
        now = time.monotonic_ns()
        if now < self.walk_due and bound - self.walked_bound < self.walk_growth:
            return (self.walked + heap.malloced() - self.walked_malloced - self.freed
                    + int(self.checks * self.growth))
        known = self.walked + heap.malloced() - self.walked_malloced - self.freed
        used = self._walk(bound)
        cost = time.monotonic_ns() - now
        if self.walked_before and self.checks:  # learn what a write adds unseen
            sample = min(max(0.0, (used - known) / self.checks), GROWTH_MAX)
            self.growth += (sample - self.growth) * GROWTH_WEIGHT
        self.checks = 0
        self.walk_due = now + max(WALK_MIN_NS, cost * WALK_COST_SHARE)
        self.walk_growth = max(WALK_GROWTH_MIN, used // WALK_GROWTH_SHARE)
        return used

    def _walk(self, bound: int) -> int:
        """An exact reading: the estimate starts again from it."""
        heap = self.heap
        malloced = heap.malloced()
        used = heap.used()
        self.walked, self.walked_bound, self.walked_malloced = used, bound, malloced
        self.freed = 0
        self.walked_before = True
        if used > self.peak:
            self.peak = used
        return used

    def used(self) -> int:
        """The memory held now, walked (INFO's used_memory): the level's estimate starts again
        from it."""
        self.checks = 0
        return self._walk(self.heap.bound())

    def over(self, grows: bool = True) -> int:
        """Bytes over the limit (0: within it, or no limit), the AOF's buffer not counted (as
        Redis's freeMemoryGetNotCountedMemory: it drains by itself)."""
        if not self.limit:
            return 0
        excess = self.level(grows) - self.limit
        if excess > 0:
            journal = self.state.journal
            if journal is not None:
                excess -= len(journal.pending)
        return excess if excess > 0 else 0

    def slack(self) -> int:
        """What a round of evictions frees beyond the excess (see SLACK_SHARE)."""
        slack = self.limit // SLACK_SHARE
        return slack if slack < SLACK_MAX else SLACK_MAX

    def freed_bytes(self, nbytes: int) -> None:
        """An eviction freed about `nbytes` (the level's estimate until the next walk)."""
        self.freed += nbytes

    # --- access clocks ---------------------------------------------------------------------

    def touch(self, db: int, key: bytes, now_ms: int) -> None:
        """A command looked the key up at `now_ms` (Redis's lookupKey): its clock stamped
        (LRU) or its counter decayed and counted (LFU), if the key exists."""
        if not 0 <= now_ms - self.ticked_ms < LRU_RESOLUTION_MS:
            self.tick(now_ms)
        state = self.state
        for space in state.keyspaces:
            if key in space[db]:
                break
        else:
            return
        access = self.access[db]
        if self.kind == _LRU:
            access[key] = self.clock
            return
        word = access.get(key)
        if word is None:  # a key made by this command (or before the clocks began)
            access[key] = (self.clock << 8) | LFU_INIT_VAL
            return
        counter = self._log_incr(self._decayed(word))
        access[key] = (self.clock << 8) | counter

    def _decayed(self, word: int) -> int:
        """Redis's LFUDecrAndReturn: the counter less one per `lfu-decay-time` minutes since
        the word's time."""
        counter = word & 0xFF
        if not self.decay_time:
            return counter
        then, now = word >> 8, self.clock
        elapsed = now - then if now >= then else 0xFFFF - then + now
        periods = elapsed // self.decay_time
        return 0 if periods > counter else counter - periods

    def _log_incr(self, counter: int) -> int:
        """Redis's LFULogIncr: one more with probability 1 / ((counter - 5) * factor + 1)."""
        if counter == 255:
            return 255
        base = counter - LFU_INIT_VAL
        if base < 0:
            base = 0
        return counter + 1 if random.random() < 1.0 / (base * self.log_factor + 1) else counter

    def idle_ms(self, db: int, key: bytes, now_ms: int) -> int:
        """Redis's estimateObjectIdleTime (OBJECT IDLETIME * 1000): from the key's clock, or
        from when the clocks began for a key without one (and under a policy that keeps
        none)."""
        if not self.since_ms:
            self.since_ms = now_ms
        if not self.tracking or self.kind != _LRU:
            return max(0, now_ms - self.since_ms)
        stamp = self.access[db].get(key)
        if stamp is None:
            return max(0, now_ms - self.since_ms)
        now = lru_clock(now_ms)
        ticks = now - stamp if now >= stamp else now + (LRU_CLOCK_MAX - stamp)
        return ticks * LRU_RESOLUTION_MS

    def frequency(self, db: int, key: bytes) -> int:
        """OBJECT FREQ: the key's decayed LFU counter (LFU_INIT_VAL for a key without one)."""
        word = self.access[db].get(key) if self.kind == _LFU and self.access else None
        return LFU_INIT_VAL if word is None else self._decayed(word)

    def forget(self, db: int | None = None) -> None:
        """The clocks of a flushed database (None: every one) go."""
        for index, access in enumerate(self.access):
            if db is None or index == db:
                access.clear()
        self._empty_pool()

    def evicted(self, db: int, key: bytes) -> None:
        """An evicted key's clock goes with it; once a database lost an eighth of its keys to
        evictions, its dicts are compacted (a sample walks over the holes of deleted keys, and
        an LRU policy's leave one long run of them at the front)."""
        if self.tracking:
            self.access[db].pop(key, None)
        since = self.since_compact
        if len(since) <= db:
            since.extend([0] * (db + 1 - len(since)))
        since[db] += 1

    def compact_evicted(self) -> None:
        """Compact the dicts of each database that lost an eighth of its keys to evictions
        since its last compaction (O(keys) per eighth of them: O(1) per eviction), after a
        command's evictions."""
        state = self.state
        for db, count in enumerate(self.since_compact):
            if not count:
                continue
            keys = sum(len(space[db]) for space in state.keyspaces)
            if count * COMPACT_SHARE < keys:
                continue
            self.since_compact[db] = 0
            dicts: list[dict[bytes, Any]] = [space[db] for space in state.keyspaces]
            dicts.append(state.expires[db])
            if self.tracking:
                dicts.append(self.access[db])
            for d in dicts:
                if d:
                    live = d.copy()
                    d.clear()
                    d.update(live)

    def maintain(self, now_ms: int) -> None:
        """The cron's turn (the active expiry's): the clock advanced, and each database's
        clocks of deleted keys dropped once they outnumber its live keys (a key's clock
        outlives a deletion by another command until then: O(1) per deletion, O(keys) per
        sweep)."""
        self.tick(now_ms)
        live = self.state.keyspaces
        for db, access in enumerate(self.access):
            keys = sum(len(space[db]) for space in live)
            if len(access) > 2 * keys + 1024:
                self.access[db] = {k: v for k, v in access.items()
                                   if any(k in space[db] for space in live)}

    # --- choosing ----------------------------------------------------------------------------

    def begin(self) -> None:
        """A round of evictions starts: the databases that hold keys (with a TTL, under a
        volatile policy) are the ones `choose` samples during it."""
        state = self.state
        if self.volatile:
            self.dbs = [db for db, expires in enumerate(state.expires) if expires]
        else:
            self.dbs = [db for db in range(len(state.expires))
                        if any(space[db] for space in state.keyspaces)]

    def choose(self) -> tuple[int, bytes] | None:
        """The next key to evict, (db, key), or None when the policy finds none (`begin`
        first)."""
        if self.kind == _RANDOM:
            return self._random_key()
        if self.kind == _NONE:
            return None
        pool = self.pool
        for _attempt in range(POOL_SIZE):
            found = False
            for db in self.dbs:
                if self._populate(db):
                    found = True
            if not found and not pool:
                return None
            while pool:
                self.pool_scores.pop()
                candidate = pool.pop()
                self.pooled.discard(candidate)
                db, key = candidate
                if self._still_candidate(db, key):
                    return candidate
        return None

    def _still_candidate(self, db: int, key: bytes) -> bool:
        state = self.state
        if self.volatile:
            return key in state.expires[db]
        for space in state.keyspaces:  # noqa: SIM110  (a loop: no generator object a call)
            if key in space[db]:
                return True
        return False

    def _sample(self, db: int) -> list[bytes]:
        """`maxmemory-samples` keys of database `db` as the policy sees it (the keys with a
        TTL, or all of them: one type's dict, chosen by its share of the keys), from a random
        place in the dict. (A dict keeps the holes of deleted keys until it is resized, and a
        sample walks over those after its place: `evicted` compacts the dicts before they
        hold many.)"""
        state = self.state
        samples = self.samples
        if self.volatile:
            expires = state.expires[db]
            if not expires:
                return []
            return sample_keys(expires, int(random.random() * len(expires)), samples)
        spaces = state.keyspaces
        total = 0
        for space in spaces:
            total += len(space[db])
        if not total:
            return []
        pick = int(random.random() * total)
        slot = 0
        while pick >= len(spaces[slot][db]):
            pick -= len(spaces[slot][db])
            slot += 1
        chosen = spaces[slot][db]
        return sample_keys(chosen, int(random.random() * len(chosen)), samples)

    def _populate(self, db: int) -> bool:
        """Redis's evictionPoolPopulate: the sample's keys scored (the larger, the better to
        evict) and kept in the pool while they beat its worst. False when `db` has no key."""
        keys = self._sample(db)
        if not keys:
            return False
        pool = self.pool
        kind = self.kind
        access = self.access[db] if self.tracking else None
        expires = self.state.expires[db]
        since = self.since_ms // LRU_RESOLUTION_MS & LRU_CLOCK_MAX
        clock = self.clock
        for key in keys:
            if kind == _LRU:
                assert access is not None
                stamp = access.get(key, since)
                score = clock - stamp if clock >= stamp else clock + (LRU_CLOCK_MAX - stamp)
            elif kind == _LFU:
                assert access is not None
                word = access.get(key)
                score = 255 - (LFU_INIT_VAL if word is None else self._decayed(word))
            else:  # volatile-ttl: the sooner it expires, the better
                score = -expires.get(key, 0)
            scores = self.pool_scores
            if len(scores) >= POOL_SIZE and score <= scores[0]:
                continue
            candidate = (db, key)
            if candidate in self.pooled:
                continue
            index = bisect_right(scores, score)
            scores.insert(index, score)
            pool.insert(index, candidate)
            self.pooled.add(candidate)
            if len(scores) > POOL_SIZE:
                del scores[0]
                self.pooled.discard(pool.pop(0))
        return True

    def _random_key(self) -> tuple[int, bytes] | None:
        """allkeys-random and volatile-random: a random key of each database in turn."""
        dbs = self.dbs
        for _step in range(len(dbs)):
            self.next_db += 1
            db = dbs[self.next_db % len(dbs)]
            keys = self._sample(db)
            if keys:
                return db, keys[0]
        return None

    def _empty_pool(self) -> None:
        self.pool_scores = []
        self.pool = []
        self.pooled = set()


def _pymalloc_block(size: int) -> int:
    """The bytes of the pymalloc block an object of `size` bytes takes (16-byte size classes up
    to 512 bytes); 0 for a larger one, whose malloc'd block the meter counts exactly as it
    goes."""
    return (size + 15) & ~15 if size <= 512 else 0


def _small(obj: object) -> int:
    """`_pymalloc_block` of an object."""
    return _pymalloc_block(sys.getsizeof(obj))


def _small_bytes(length: int) -> int:
    """`_small` of a bytes object of `length` bytes, without asking the object."""
    return _pymalloc_block(_BYTES_HEADER + length)


def freed_estimate(key: bytes, value: Any) -> int:
    """About what deleting this key frees of small objects: its key object and its value's
    (the tables' slots stay until a resize; malloc'd blocks are counted exactly). A bytes
    value of one byte or none is the interpreter's shared object. Exact enough for the
    estimate between walks, which the next walk replaces."""
    size = _small_bytes(len(key))
    if type(value) is bytes:
        return size + (_small_bytes(len(value)) if len(value) > 1 else 0)
    try:
        return size + max(_small(value), ELEMENT_BYTES * len(value))
    except TypeError:
        return size + _small(value)


__all__ = ["LFU_INIT_VAL", "OOM", "POLICIES", "POOL_SIZE", "Eviction", "freed_estimate",
           "lfu_minutes", "lru_clock"]
