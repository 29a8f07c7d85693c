"""engine.exec.eviction through an embedded engine: maxmemory's policies choose the keys Redis
would (allkeys-* any key, volatile-* only keys with a TTL, LRU the idle ones, LFU the rarely
read ones, volatile-ttl the nearest expiry), noeviction refuses denyoom commands with Redis's
OOM line while reads and deletions run, MULTI refuses to queue, OBJECT IDLETIME and FREQ read
the access clocks, and every eviction is a logged DEL that a replay reproduces."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.context import Session
from streamkeep.engine.exec.eviction import (
    LFU_INIT_VAL,
    OOM,
    WALK_GROWTH_MIN,
    Eviction,
    lfu_minutes,
    lru_clock,
)
from streamkeep.engine.model.heap import meter
from streamkeep.engine.wire.errors import ReplyError

pytestmark = pytest.mark.skipif(not meter().counting, reason="needs the allocator hooks")

BUDGET = 600_000  # bytes over the memory at the limit's setting (a dict table's steps fit)


def _engine(policy: str, **config: Any) -> tuple[Engine, list[int]]:
    clock = [1_000_000_000]
    engine = Engine(clock=lambda: clock[0], **config)
    engine.execute("CONFIG", "SET", "maxmemory-policy", policy)
    return engine, clock


def _limit_now(engine: Engine, over: int = BUDGET) -> None:
    engine.execute("CONFIG", "SET", "maxmemory", str(engine.eviction.used() + over))


def _fill(engine: Engine, prefix: str, count: int, ttl: bool = False) -> None:
    for i in range(count):
        if ttl:
            engine.execute("SET", f"{prefix}{i}", "v" * 20, "EX", "10000")
        else:
            engine.execute("SET", f"{prefix}{i}", "v" * 20)


def _evicted(engine: Engine) -> int:
    """INFO's evicted_keys, read without running a command (a command may evict first)."""
    return engine.stats.evicted_keys


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random"])
def test_allkeys_policies_keep_memory_under_the_limit(policy):
    engine, _clock = _engine(policy)
    _limit_now(engine)
    _fill(engine, "k", 20_000)
    assert _evicted(engine) > 0
    assert len(engine.strings[0]) + _evicted(engine) == 20_000
    # (between exact counts the level is estimated: it may pass the limit by a walk's worth)
    assert engine.eviction.used() <= engine.eviction.limit + WALK_GROWTH_MIN


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-lfu", "volatile-random",
                                    "volatile-ttl"])
def test_volatile_policies_evict_only_keys_with_a_ttl(policy):
    engine, _clock = _engine(policy)
    _fill(engine, "keep", 200)
    _limit_now(engine)
    _fill(engine, "v", 20_000, ttl=True)
    assert _evicted(engine) > 0
    assert all(engine.execute("EXISTS", f"keep{i}") == 1 for i in range(200))
    # no key with a TTL left to evict: a write is refused, a read still served
    for key in list(engine.expires[0]):
        engine.execute("PERSIST", key)
    with pytest.raises(ReplyError) as info:
        _fill(engine, "more", 20_000)
    assert info.value.line == OOM
    assert engine.execute("GET", "keep0") == b"v" * 20


def test_lru_evicts_the_idle_keys():
    engine, clock = _engine("allkeys-lru")
    _fill(engine, "k", 2_000)
    clock[0] += 100_000  # 100 s later, half the keys are read
    for i in range(0, 2_000, 2):
        engine.execute("GET", f"k{i}")
    assert engine.execute("OBJECT", "IDLETIME", "k1") == 100
    assert engine.execute("OBJECT", "IDLETIME", "k0") == 0
    _limit_now(engine, -40_000)
    engine.execute("SET", "trigger", "x")
    gone = [i for i in range(2_000) if not engine.execute("EXISTS", f"k{i}")]
    assert len(gone) > 50
    assert sum(i % 2 for i in gone) >= 0.9 * len(gone)  # the unread ones


def test_lru_samples_past_the_holes_its_evictions_leave_at_the_front():
    """The keys evicted first are the oldest: their holes at the front of the keyspace's table
    do not make the later samples pile onto the few keys after them. With half the keys read
    since (the even ones, all over the table), the keys that go next are the unread ones, from
    everywhere in the table, not the first ones after the holes."""
    engine, clock = _engine("allkeys-lru")
    _fill(engine, "old", 3_000)
    clock[0] += 200_000
    _fill(engine, "k", 3_000)
    clock[0] += 100_000
    for i in range(0, 3_000, 2):
        engine.execute("GET", f"k{i}")
    _limit_now(engine, -600_000)  # the old keys' room and about half as much again
    engine.execute("SET", "trigger", "x")
    old = sum(not engine.execute("EXISTS", f"old{i}") for i in range(3_000))
    assert old >= 0.7 * 3_000  # the oldest go first (as sampled): holes at the front
    _limit_now(engine, -200_000)  # then some of the others
    engine.execute("SET", "trigger", "y")
    gone = [i for i in range(3_000) if not engine.execute("EXISTS", f"k{i}")]
    assert len(gone) > 100
    assert sum(i % 2 for i in gone) >= 0.9 * len(gone)  # the unread ones
    assert max(gone) > 2_000 and min(gone) < 1_000  # from all over the table


def test_keys_without_a_clock_are_drawn_and_deleted_keys_clocks_are_not_evicted():
    """Keys made before an LRU policy began keep no clock: the samples still draw them (idle
    since the clocks began, so before the keys written since), and a key deleted by a command
    leaves its clock behind without that clock ever being 'evicted'."""
    engine, clock = _engine("noeviction")
    _fill(engine, "old", 3_000)
    engine.execute("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    engine.execute("GET", "old0")  # (the clocks begin at the first command's tick)
    clock[0] += 100_000
    _fill(engine, "new", 3_000)
    for i in range(0, 3_000, 2):  # deleted by a command: their clocks stay until a sweep
        engine.execute("DEL", f"new{i}")
    clock[0] += 100_000
    _limit_now(engine, -200_000)
    before = _evicted(engine)
    engine.execute("SET", "trigger", "x")
    engine.execute("CONFIG", "SET", "maxmemory", "0")  # (then KEYS neither evicts nor touches)
    evicted = _evicted(engine) - before
    kept = set(engine.execute("KEYS", "*"))
    old = sum(b"old%d" % i not in kept for i in range(3_000))
    new = sum(b"new%d" % i not in kept for i in range(1, 3_000, 2))
    assert evicted == old + new > 20
    assert old >= 0.9 * evicted  # (old0, read, is as idle as the new keys)


def test_a_round_of_evictions_makes_room_for_the_writes_after_it():
    """A round evicts a little past the excess (a share of the limit), so at the limit most
    writes find room without a round of their own: fewer DEL records than keys evicted."""
    engine, _clock = _engine("allkeys-lru")
    _limit_now(engine, 2_000_000)
    filled = 0
    while not _evicted(engine):  # (to the limit)
        _fill(engine, f"k{filled}-", 1_000)
        filled += 1
    rounds = [0]  # (counted, not kept: records held would be memory no eviction frees)

    def count(record: Any) -> None:
        rounds[0] += sum(1 for effect in record.effects if effect[0] == b"DEL")
    engine.add_sink(count)
    before = _evicted(engine)
    _fill(engine, "more", 20_000)  # (about 2.5 MB of new keys: past the whole budget)
    evicted = _evicted(engine) - before
    assert evicted > 1_000
    assert rounds[0] * 8 <= evicted


def test_lfu_counts_reads_and_evicts_the_rare_keys():
    engine, _clock = _engine("allkeys-lfu", **{"lfu-log-factor": 0})
    _fill(engine, "k", 2_000)
    assert engine.execute("OBJECT", "FREQ", "k0") == LFU_INIT_VAL
    for i in range(0, 2_000, 2):
        for _ in range(5):
            engine.execute("GET", f"k{i}")
    assert engine.execute("OBJECT", "FREQ", "k0") == LFU_INIT_VAL + 5  # factor 0: each read
    with pytest.raises(ReplyError):
        engine.execute("OBJECT", "IDLETIME", "k0")
    _limit_now(engine, -40_000)
    engine.execute("SET", "trigger", "x")
    gone = [i for i in range(2_000) if not engine.execute("EXISTS", f"k{i}")]
    assert len(gone) > 50 and sum(i % 2 for i in gone) >= 0.9 * len(gone)


def test_lfu_counters_decay_by_the_minute():
    engine, clock = _engine("allkeys-lfu", **{"lfu-log-factor": 0, "lfu-decay-time": 2})
    engine.execute("SET", "k", "v")
    for _ in range(10):
        engine.execute("GET", "k")
    assert engine.execute("OBJECT", "FREQ", "k") == LFU_INIT_VAL + 10
    clock[0] += 6 * 60_000  # 3 decay periods
    engine.eviction.tick(clock[0])
    assert engine.execute("OBJECT", "FREQ", "k") == LFU_INIT_VAL + 7


def test_volatile_ttl_evicts_the_nearest_expiry_first():
    engine, _clock = _engine("volatile-ttl")
    for i in range(2_000):
        engine.execute("SET", f"k{i}", "v" * 20, "EX", str(1_000 + i))
    _limit_now(engine, -40_000)
    engine.execute("SET", "trigger", "x")
    gone = [i for i in range(2_000) if not engine.execute("EXISTS", f"k{i}")]
    assert len(gone) > 50 and sum(gone) / len(gone) < 700  # mostly the first to expire


def test_noeviction_refuses_what_may_grow_and_serves_the_rest():
    engine, _clock = _engine("noeviction")
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    engine.execute("RPUSH", "l", "a", "b")
    engine.execute("SET", "s2", "x")
    engine.execute("CONFIG", "SET", "maxmemory", "1")
    for argv in (("SET", "a", "b"), ("XADD", "s", "*", "f", "v"), ("APPEND", "s2", "y"),
                 ("RPUSH", "l", "c"), ("SUNIONSTORE", "u", "x", "y")):
        with pytest.raises(ReplyError) as info:
            engine.execute(*argv)
        assert info.value.line == OOM
    assert engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") is not None
    assert engine.execute("XACK", "s", "g", "1-1") == 1
    assert engine.execute("XDEL", "s", "1-1") == 1
    assert engine.execute("LPOP", "l") == b"a"
    assert engine.execute("EXPIRE", "s2", "100") == 1
    assert engine.execute("DEL", "s2") == 1
    assert _evicted(engine) == 0


def test_multi_refuses_to_queue_past_the_limit():
    engine, _clock = _engine("noeviction")
    session = Session()
    engine.execute_raw(session, (b"SET", b"a", b"1"))
    engine.execute("CONFIG", "SET", "maxmemory", "1")
    engine.execute_raw(session, (b"MULTI",))
    with pytest.raises(ReplyError) as info:
        engine.execute_raw(session, (b"GET", b"a"))  # even a read: queueing grows memory
    assert info.value.line == OOM
    with pytest.raises(ReplyError) as info:
        engine.execute_raw(session, (b"EXEC",))
    assert info.value.line.startswith("EXECABORT")


def test_exec_of_a_denyoom_command_queued_before_the_limit_is_refused():
    engine, _clock = _engine("noeviction")
    session = Session()
    engine.execute_raw(session, (b"MULTI",))
    engine.execute_raw(session, (b"SET", b"a", b"1"))
    engine.execute("CONFIG", "SET", "maxmemory", "1")
    with pytest.raises(ReplyError) as info:
        engine.execute_raw(session, (b"EXEC",))
    assert info.value.line == ("EXECABORT Transaction discarded because of: " + OOM)


def test_evictions_are_logged_dels_a_replay_reproduces():
    engine, _clock = _engine("allkeys-random")
    records: list[Any] = []
    engine.add_sink(lambda record: records.append(copy.deepcopy(record)))  # (not the keys')
    _fill(engine, "k", 3_000)
    _limit_now(engine, -60_000)
    _fill(engine, "more", 10)
    deleted = [e for r in records for e in r.effects if e[0] == b"DEL"]
    assert sum(len(e) - 1 for e in deleted) == _evicted(engine) > 0
    replica = Engine()
    replica.replay.apply_many(records)
    assert replica.digest() == engine.digest()


def test_settings_are_redis_s():
    engine = Engine()
    assert engine.execute("CONFIG", "GET", "maxmemory-policy") == [
        b"maxmemory-policy", b"noeviction"]
    for name, default in (("maxmemory-samples", b"5"), ("lfu-log-factor", b"10"),
                          ("lfu-decay-time", b"1"), ("maxmemory-eviction-tenacity", b"10"),
                          ("maxmemory-clients", b"0"), ("maxmemory", b"0")):
        assert engine.execute("CONFIG", "GET", name) == [name.encode(), default]
    with pytest.raises(ReplyError) as info:
        engine.execute("CONFIG", "SET", "maxmemory-policy", "lru")
    assert "volatile-lru, volatile-lfu" in info.value.line
    with pytest.raises(ReplyError):
        engine.execute("CONFIG", "SET", "maxmemory-samples", "0")
    assert engine.execute("CONFIG", "SET", "maxmemory-clients", "10%") == "OK"
    with pytest.raises(ReplyError):
        engine.execute("CONFIG", "SET", "replica-ignore-maxmemory", "no")


def test_clocks_are_redis_s():
    assert lru_clock(1_000 * ((1 << 24) + 5)) == 5
    assert lfu_minutes(60_000 * (65536 + 3)) == 3
    engine = Engine()
    eviction: Eviction = engine.eviction
    assert eviction.choose() is None  # noeviction chooses nothing
    info = engine.redis().info("memory")
    assert info["used_memory"] <= info["used_memory_peak"]
    assert info["maxmemory_policy"] == "noeviction"
