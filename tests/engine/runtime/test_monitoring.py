"""What the engine reports of its own running (engine.runtime.monitoring: Monitoring).

A call handed over as slow goes to the slow log when over slowlog-log-slower-than (never
EXEC, whose commands are logged one by one) and to the latency monitor when over
latency-monitor-threshold, as a "fast-command" or "command" sample by the command's flags; a
compaction's start is INFO's latest_fork_usec and, over the threshold, a "fork" event; the
cron's sample feeds the instantaneous rates. The path that finds a call slow (its counters)
is tested in tests/engine/commands/test_slowlog.py and test_latency.py.
"""

from __future__ import annotations

from streamkeep import Engine, Session

XLEN = (b"XLEN", b"s")  # readonly fast
XRANGE = (b"XRANGE", b"s", b"-", b"+")  # readonly: not fast


def test_a_slow_call_goes_to_the_slow_log_each_over_its_own_threshold() -> None:
    engine = Engine(slowlog_log_slower_than=1000, latency_monitor_threshold=0)
    session = Session()
    session.name = b"worker"
    with engine.lock:
        engine.monitoring.slow_call(session, XLEN, 999_000)  # 999 µs: under
        engine.monitoring.slow_call(session, XLEN, 2_000_000)
        engine.monitoring.slow_call(session, (b"EXEC",), 5_000_000)  # never logged
    assert engine.execute("SLOWLOG", "LEN") == 1
    entry = engine.execute("SLOWLOG", "GET")[0]
    assert entry[2:4] == [2000, [b"XLEN", b"s"]] and entry[5] == b"worker"
    assert engine.latency.events == {}  # the monitor is off


def test_a_slow_call_is_a_latency_sample_by_its_flags() -> None:
    engine = Engine(slowlog_log_slower_than=-1, latency_monitor_threshold=5)
    session = Session()
    with engine.lock:
        engine.monitoring.slow_call(session, XLEN, 4_000_000)  # 4 ms: under
        engine.monitoring.slow_call(session, XLEN, 6_000_000)
        engine.monitoring.slow_call(session, XRANGE, 7_000_000)
    assert {event: s.max for event, s in engine.latency.events.items()} == {
        "fast-command": 6, "command": 7}
    assert engine.execute("SLOWLOG", "LEN") == 0  # the slow log is off


def test_a_compaction_start_is_latest_fork_usec_and_a_fork_event() -> None:
    engine = Engine(latency_monitor_threshold=10)
    engine.monitoring.started_compaction(3_000)
    assert engine.latest_fork_usec == 3_000 and "fork" not in engine.latency.events
    assert b"latest_fork_usec:3000" in engine.execute("INFO", "stats")
    engine.monitoring.started_compaction(12_000)
    assert engine.latest_fork_usec == 12_000 and "fork" in engine.latency.events


def test_the_crons_sample_feeds_the_rates() -> None:
    engine = Engine()
    engine.monitoring.sample_stats({"net_input_bytes": 10})
    assert set(engine.stats.rates) == {"ops", "net_input_bytes"}
    assert engine.stats.last_sample_ms > 0
