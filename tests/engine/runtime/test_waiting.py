"""Blocked reads parked, re-run and ended (engine.runtime.waiting: WaitingReaders).

A blocked XREAD/XREADGROUP is a Waiter: cancelled (timeout, closed connection) only while it
still waits, served first come first served by the write that makes its key ready, re-run
through the one command path, and counted as one call when its wait ends, with all its runs'
time. The blocking semantics themselves (what a served read returns) are in
tests/engine/exec/test_blocking.py and the differential suite. A waiter's `notify` that raises
is logged, never raised into the writer: the write is answered and the other waiters served.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.wire.reply import NULL_ARRAY, to_plain

READ = (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0", b"COUNT", b"1", b"STREAMS", b"s",
        b">")


def _blocked(engine: Engine, argv: tuple[bytes, ...] = READ) -> Waiter:
    waiter, lsn = engine.submit(Session(), argv)
    assert type(waiter) is Waiter and lsn == 0
    return waiter


def test_a_cancelled_wait_is_one_call_and_a_served_one_cannot_be_cancelled() -> None:
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    waiter = _blocked(engine)
    counters = engine.stats.counters("xreadgroup")
    assert counters.calls == 0 and engine.waiting.blocked_clients() == 1
    assert engine.waiting.cancel(waiter, NULL_ARRAY)
    assert waiter.done and waiter.result is NULL_ARRAY and counters.calls == 1
    assert engine.waiting.blocked_clients() == 0
    served = _blocked(engine)
    engine.execute("XADD", "s", "*", "f", "v")
    assert served.done and not engine.waiting.cancel(served, NULL_ARRAY)
    assert counters.calls == 2  # the served one counted once, when it was served


def test_a_notify_that_raises_fails_neither_the_write_nor_the_other_waiters(
        caplog: pytest.LogCaptureFixture) -> None:
    """A waiter's `notify` is its owner's code, run by the thread that wrote (a caller's, a
    replica's follower, the expiry timer). One that raises (its event loop has closed) is
    logged: the write is answered and the waiter after it is served in the same pass."""
    engine = Engine()
    read = (b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$")

    def fails(_waiter: Waiter) -> None:
        raise RuntimeError("Event loop is closed")

    first, _lsn = engine.submit(Session(), read, None, fails)
    second = _blocked(engine, read)
    assert type(first) is Waiter
    with caplog.at_level(logging.ERROR, logger="streamkeep.engine"):
        assert engine.execute("XADD", "s", "1-1", "f", "v") == b"1-1"
    assert first.done and second.done and engine.waiting.blocked_clients() == 0
    assert to_plain(second.result)[0][1][0][0] == b"1-1"
    assert sum("notify failed" in r.getMessage() for r in caplog.records) == 1


def test_waiters_are_served_first_come_first_served_once_each() -> None:
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    waiters = [_blocked(engine) for _ in range(3)]
    engine.execute("XADD", "s", "1-1", "f", "a")
    assert [w.done for w in waiters] == [True, False, False]
    engine.execute("XADD", "s", "1-2", "f", "b")
    assert [w.done for w in waiters] == [True, True, False]
    first, second = (to_plain(w.result) for w in waiters[:2])
    assert first[0][1][0][0] == b"1-1" and second[0][1][0][0] == b"1-2"
    assert engine.waiting.blocked_clients() == 1
    assert engine.stats.counters("xreadgroup").calls == 2


def test_a_served_read_waits_for_its_own_record(tmp_path: Path) -> None:
    """The re-run's record (the delivery it logged) is what WAIT and WAITAOF on its connection
    wait for, not the blocking run's (which logged nothing)."""
    with Engine.open(str(tmp_path / "d")) as engine:
        engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        session = Session()
        waiter, _ = engine.submit(session, READ)
        _, add_lsn = engine.submit(engine.session, (b"XADD", b"s", b"*", b"f", b"v"))
        assert waiter.done and waiter.lsn > add_lsn and session.write_lsn == waiter.lsn


def test_a_timed_rerun_is_polled() -> None:
    """A waiter with `wake_at` (XREADGROUP CLAIM waiting for an entry to become idle enough)
    is re-run by poll once the engine clock reaches it, and not before."""
    now = [1_000]
    engine = Engine(clock=lambda: now[0])
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    waiter = _blocked(engine, (b"XREADGROUP", b"GROUP", b"g", b"b", b"BLOCK", b"0", b"CLAIM",
                               b"500", b"STREAMS", b"s", b">"))
    assert waiter.wake_at is not None
    now[0] = waiter.wake_at - 1
    assert not engine.waiting.poll(waiter)
    now[0] = waiter.wake_at
    assert engine.waiting.poll(waiter) and to_plain(waiter.result)[0][1][0][0] == b"1-1"
