"""The active expiry cycle (engine.runtime.expiry_cycle).

One pass deletes the expired keys it samples and logs their DELs as one record per database;
nothing runs while the write gate is closed to the engine's own writes (a replica, whose
primary's DELs arrive as effects).
"""

from __future__ import annotations

from streamkeep import Engine, Record


def test_a_pass_deletes_expired_keys_and_logs_one_record_per_database() -> None:
    now = [1_000]
    engine = Engine(clock=lambda: now[0])
    records: list[Record] = []
    for db in (0, 3):
        engine.execute("SELECT", str(db))
        engine.execute("SET", "a", "1", "PX", "10")
        engine.execute("SET", "b", "1", "PX", "10")
        engine.execute("SET", "kept", "1")
    engine.add_sink(records.append)
    now[0] += 100
    assert engine.expiry_cycle.run() == 4
    assert [(r.db, sorted(key for e in r.effects for key in e[1:])) for r in records] == [
        (0, [b"a", b"b"]), (3, [b"a", b"b"])]
    assert engine.stats.expire_cycle_nanos > 0
    assert not engine.expires[0] and engine.strings[3] == {b"kept": b"1"}


def test_nothing_expires_while_the_write_gate_is_closed() -> None:
    now = [1_000]
    engine = Engine(clock=lambda: now[0])
    engine.execute("SET", "a", "1", "PX", "10")
    now[0] += 100
    engine.read_only = "READONLY You can't write against a read only replica."
    try:
        assert engine.expiry_cycle.run() == 0
        assert b"a" in engine.strings[0]
    finally:
        engine.read_only = None
    assert engine.expiry_cycle.run() == 1


# --- avg_ttl: the running estimate of the TTLs the cycle samples ---------------------------


def _keyspace_line(engine: Engine, db: int = 0) -> str:
    text = bytes(engine.execute("INFO", "keyspace")).decode()
    return next(line for line in text.split("\r\n") if line.startswith(f"db{db}:"))


def test_avg_ttl_starts_from_a_sample_then_keeps_98_percent() -> None:
    from streamkeep.engine.runtime.expiry_cycle import AVG_TTL_KEEP, estimate_avg_ttl

    avg: dict[int, int] = {}
    now = 1_000
    # 25 TTLs: the first 20 are the sample (the keys a pass looks at first); an expired one
    # is not counted.
    expires = {b"gone": 900, **{b"k%d" % i: now + 1_000 * (i + 1) for i in range(19)},
               **{b"late%d" % i: now + 10**9 for i in range(5)}}
    estimate_avg_ttl(avg, 0, expires, now)
    first = sum(1_000 * (i + 1) for i in range(19)) // 19
    assert avg == {0: first}
    estimate_avg_ttl(avg, 0, {b"x": now + 50_000}, now)
    # Redis: avg + (previous - avg) * 0.98, truncated to an integer
    assert avg == {0: int(50_000 + (first - 50_000) * AVG_TTL_KEEP)}
    estimate_avg_ttl(avg, 0, {b"x": now}, now)  # nothing live in the sample: unchanged
    assert avg[0] == int(50_000 + (first - 50_000) * AVG_TTL_KEEP)


def test_info_keyspace_reports_the_cycles_avg_ttl() -> None:
    now = [1_000_000]
    engine = Engine(clock=lambda: now[0])  # (in memory: no timer runs cycles of its own)
    assert engine.stats.avg_ttl == {}
    for i in range(30):
        engine.execute("SET", f"k{i}", "v", "PX", str(100_000 + i))
    engine.execute("SET", "plain", "v")
    assert _keyspace_line(engine) == "db0:keys=31,expires=30,avg_ttl=0,subexpiry=0"
    now[0] += 1_000
    engine.expiry_cycle.run()
    # the first 20 TTLs, one second later: (99_000 + ... + 99_019) // 20
    assert _keyspace_line(engine) == "db0:keys=31,expires=30,avg_ttl=99009,subexpiry=0"
    engine.execute("FLUSHALL")
    assert engine.stats.avg_ttl == {0: 99009}  # (kept until the next cycle: Redis drops it at once)
    engine.expiry_cycle.run()
    assert engine.stats.avg_ttl == {}
    engine.execute("SET", "k", "v", "PX", "5000")
    assert _keyspace_line(engine) == "db0:keys=1,expires=1,avg_ttl=0,subexpiry=0"
