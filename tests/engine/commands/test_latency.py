"""engine.commands.latency and what feeds it: the latency monitor's "command" and
"fast-command" events (a command at or above latency-monitor-threshold, by its FAST flag),
"expire-cycle" and "fork" (a compaction's start); the per-command histograms (latency-tracking,
INFO latencystats with latency-tracking-info-percentiles, LATENCY HISTOGRAM, CONFIG RESETSTAT);
LATENCY's replies and errors (src/latency.c). Commands are timed by a fake clock
(tests.support.command_clock)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from tests.support.command_clock import command_clock


def info(engine: Engine, section: str) -> dict[str, str]:
    text = engine.execute("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n")
                if line and not line.startswith("#"))


def test_the_monitor_is_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    command_clock(monkeypatch, step=500_000_000)
    engine = Engine()
    assert engine.execute("CONFIG", "GET", "latency-monitor-threshold") == [
        b"latency-monitor-threshold", b"0"]
    engine.execute("XADD", "s", "1-1", "f", "v")
    assert engine.execute("LATENCY", "LATEST") == []
    assert b"off" in engine.execute("LATENCY", "DOCTOR")


def test_command_and_fast_command_events(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = command_clock(monkeypatch, step=1_000)
    engine = Engine()
    engine.execute("CONFIG", "SET", "latency-monitor-threshold", "5")
    engine.execute("XADD", "s", "1-1", "f", "v")
    assert engine.execute("LATENCY", "LATEST") == []  # 1 µs: under 5 ms
    clock.step = 7_000_000
    engine.execute("XADD", "s", "1-2", "f", "v")  # write denyoom fast
    engine.execute("XRANGE", "s", "-", "+")  # readonly
    clock.step = 1_000
    latest = engine.execute("LATENCY", "LATEST")
    now = int(time.time())
    assert [(e[0], e[2], e[3]) for e in latest] == [(b"fast-command", 7, 7), (b"command", 7, 7)]
    assert all(abs(e[1] - now) <= 5 for e in latest)
    [[when, ms]] = engine.execute("LATENCY", "HISTORY", "command")
    assert ms == 7 and abs(when - now) <= 5
    assert engine.execute("LATENCY", "HISTORY", "nosuch") == []
    graph = engine.execute("LATENCY", "GRAPH", "command")
    assert graph.startswith(b"command - high 7 ms, low 7 ms (all time high 7 ms)\n")
    assert b"1. fast-command: 1 latency spikes" in engine.execute("LATENCY", "DOCTOR")
    assert engine.execute("LATENCY", "RESET", "Command", "nosuch") == 1
    assert engine.execute("LATENCY", "RESET") == 1
    assert engine.execute("LATENCY", "LATEST") == []
    with pytest.raises(ReplyError, match="^ERR No samples available for event 'command'$"):
        engine.execute("LATENCY", "GRAPH", "command")


def test_errors_and_help() -> None:
    engine = Engine()
    for argv, line in [
        (("LATENCY", "HISTORY"), "ERR wrong number of arguments for 'latency|history' command"),
        (("LATENCY", "LATEST", "x"), "ERR wrong number of arguments for 'latency|latest' "
                                     "command"),
        (("LATENCY", "nosuch"), "ERR unknown subcommand 'nosuch'. Try LATENCY HELP."),
        (("CONFIG", "SET", "latency-tracking-info-percentiles", "50 x"),
         "ERR CONFIG SET failed (possibly related to argument "
         "'latency-tracking-info-percentiles') - Invalid latency-tracking-info-percentiles "
         "parameters"),
        (("CONFIG", "SET", "latency-tracking-info-percentiles", "101"),
         "ERR CONFIG SET failed (possibly related to argument "
         "'latency-tracking-info-percentiles') - latency-tracking-info-percentiles "
         "parameters should sit between [0.0,100.0]"),
    ]:
        with pytest.raises(ReplyError) as err:
            engine.execute(*argv)
        assert str(err.value) == line, argv
    assert engine.execute("LATENCY", "HELP")[1] == "DOCTOR"


def test_histograms_and_latencystats(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = command_clock(monkeypatch, step=1_500)
    engine = Engine()
    for i in range(3):
        engine.execute("XADD", "s", f"1-{i + 1}", "f", "v")
    clock.step = 3_000
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    assert engine.execute("LATENCY", "HISTOGRAM", "xadd", "nosuch", "xgroup") == [
        b"xadd", [b"calls", 3, b"histogram_usec", [2, 3]],  # 1.5 µs: the bucket of 2
        b"xgroup|create", [b"calls", 1, b"histogram_usec", [4, 1]],
    ]
    assert engine.execute("LATENCY", "HISTOGRAM", "XGROUP|CREATE")[0] == b"xgroup|create"
    stats = info(engine, "latencystats")
    assert stats["latency_percentiles_usec_xadd"] == "p50=1.503,p99=1.503,p99.9=1.503"
    assert stats["latency_percentiles_usec_xgroup|create"] == "p50=3.007,p99=3.007,p99.9=3.007"
    engine.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "0 100")
    assert info(engine, "latencystats")["latency_percentiles_usec_xadd"] == "p0=1.496,p100=1.503"
    assert "latencystats" not in [s.lower() for s in
                                  engine.execute("INFO").decode().split("# ")[1:]]
    # Off: no histogram grows and INFO shows none; RESETSTAT drops them.
    engine.execute("CONFIG", "SET", "latency-tracking", "no")
    engine.execute("XADD", "s", "1-9", "f", "v")
    assert info(engine, "latencystats") == {}
    engine.execute("CONFIG", "SET", "latency-tracking", "yes")
    assert engine.execute("LATENCY", "HISTOGRAM", "xadd")[1][1] == 3
    engine.execute("CONFIG", "RESETSTAT")
    assert engine.execute("LATENCY", "HISTOGRAM", "xadd") == []
    assert list(info(engine, "latencystats")) == [
        "latency_percentiles_usec_config|resetstat", "latency_percentiles_usec_latency|histogram"]


def test_expire_cycle_and_fork_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = command_clock(monkeypatch, step=1_000)
    with Engine.open(str(tmp_path)) as engine:
        engine.execute("CONFIG", "SET", "latency-monitor-threshold", "1")
        engine.execute("SET", "k", "v", "PX", "1")
        time.sleep(0.01)
        clock.step = 3_000_000  # the cycle reads the clock twice: 3 ms
        engine.expiry_cycle.run()
        assert info(engine, "stats")["expired_keys"] == "1"
        assert int(info(engine, "stats")["expire_cycle_cpu_milliseconds"]) >= 3
        engine.execute("XADD", "s", "1-1", "f", "v")
        engine.execute("SAVE")
        assert int(info(engine, "stats")["latest_fork_usec"]) > 0
        events = [e[0] for e in engine.execute("LATENCY", "LATEST")]
        assert events[0] == b"expire-cycle"
        persistence = info(engine, "persistence")  # (whole seconds: -1 before any)
        assert int(persistence["aof_last_rewrite_time_sec"]) >= 0
        assert persistence["rdb_last_bgsave_time_sec"] == persistence["aof_last_rewrite_time_sec"]
