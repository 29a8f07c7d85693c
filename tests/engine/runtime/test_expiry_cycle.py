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
    assert engine.active_expire_cycle() == 4
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
        assert engine.active_expire_cycle() == 0
        assert b"a" in engine.strings[0]
    finally:
        engine.read_only = None
    assert engine.active_expire_cycle() == 1
