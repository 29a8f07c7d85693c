"""The embedded engine's active expiry timer (engine.services.expiry_timer). A cycle runs
callers' code (record sinks, subscribers, served readers): one that raises ends its cycle,
logged, and the next cycle runs."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from streamkeep import Engine, Record
from tests.support.aof_inspect_data import records


def wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_an_unread_key_expires_and_its_del_is_logged(tmp_path: Path) -> None:
    now = [1_000]
    with Engine.open(str(tmp_path), clock=lambda: now[0]) as db:
        db.execute("SET", "lock", "token", "PX", "50")
        db.execute("SET", "keep", "v")
        assert db.execute("DBSIZE") == 2
        now[0] += 51  # nothing names `lock` again: only the timer can delete it
        assert wait_for(lambda: db.execute("DBSIZE") == 1)
        assert db.expiry_timer is not None and db.expiry_timer.cycles >= 1
    effects = [e for *_, record_effects in records(str(tmp_path)) for e in record_effects]
    assert [b"DEL", b"lock"] in effects


def test_under_always_the_timers_del_is_fsynced_without_a_write_after_it(tmp_path: Path) -> None:
    """Under `always` records wait in the journal's buffer for a commit round: the timer asks
    for one, so its DEL is on disk (and sent to replicas) with no later write to carry it."""
    now = [1_000]
    with Engine.open(str(tmp_path), clock=lambda: now[0], appendfsync="always") as db:
        db.execute("SET", "lock", "token", "PX", "50")
        journal = db.journal
        assert journal is not None and journal.synced_lsn == journal.lsn
        now[0] += 51
        assert wait_for(lambda: db.execute("DBSIZE") == 0)
        assert wait_for(lambda: journal.synced_lsn == journal.lsn), "the DEL waits for a write"
        effects = [e for *_, record_effects in records(str(tmp_path)) for e in record_effects]
        assert [b"DEL", b"lock"] in effects, "on disk while the engine is open"


def test_close_stops_the_timer(tmp_path: Path) -> None:
    db = Engine.open(str(tmp_path))
    timer = db.expiry_timer
    assert timer is not None and timer.thread.is_alive()
    db.close()
    assert not timer.thread.is_alive()


def test_a_replica_timer_deletes_nothing(tmp_path: Path) -> None:
    now = [1_000]
    with Engine.open(clock=lambda: now[0]) as db:
        db.execute("SET", "k", "v", "PX", "10")
        db.read_only = "READONLY You can't write against a read only replica."
        now[0] += 11
        timer = db.expiry_timer
        assert timer is not None
        start = timer.cycles
        assert wait_for(lambda: timer.cycles >= start + 3)
        db.read_only = None
        assert db.strings[0] == {b"k": b"v"}  # still held: a replica waits for its primary's DEL


def test_a_sink_that_raises_ends_its_cycle_not_the_timer(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """A record sink (a caller's) raises on the first DEL the timer commits: that cycle ends
    there, logged, and a later cycle deletes the key that expires after it."""
    now = [1_000]
    failed: list[Record] = []

    def sink(record: Record) -> None:
        if record.effects[0][0] == b"DEL" and not failed:
            failed.append(record)
            raise RuntimeError("the caller's sink")

    with Engine.open(str(tmp_path), clock=lambda: now[0]) as db:
        db.add_sink(sink)
        db.execute("SET", "first", "v", "PX", "50")
        db.execute("SET", "later", "v", "PX", "100")
        timer = db.expiry_timer
        assert timer is not None
        with caplog.at_level(logging.ERROR, logger="streamkeep.engine"):
            now[0] += 51  # nothing names the keys again: only the timer deletes them
            assert wait_for(lambda: db.execute("DBSIZE") == 1)
            assert len(failed) == 1
            now[0] += 50
            assert wait_for(lambda: db.execute("DBSIZE") == 0), "the timer stopped"
        assert timer.thread.is_alive()
        assert any("expiry cycle failed" in r.getMessage() for r in caplog.records)
    deleted = [e[1:] for *_, effects in records(str(tmp_path)) for e in effects if e[0] == b"DEL"]
    assert deleted == [[b"first"], [b"later"]]
