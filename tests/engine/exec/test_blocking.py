"""Blocking XREAD / XREADGROUP across threads: wake-ups, timeouts, first-come first-served,
NOGROUP when the group or key goes away, and effects of served waiters."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from streamkeep import Engine, Record, ReplyError


class Call:
    """Run engine.execute in a thread; remember the reply or the error."""

    def __init__(self, engine: Engine, *argv: Any) -> None:
        self.result: Any = None
        self.error: ReplyError | None = None
        self.thread = threading.Thread(target=self._run, args=(engine, argv), daemon=True)
        self.thread.start()

    def _run(self, engine: Engine, argv: tuple) -> None:
        try:
            self.result = engine.execute(*argv)
        except ReplyError as err:
            self.error = err

    def join(self, timeout: float = 5.0) -> Call:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "still blocked"
        return self


def wait_blocked(engine: Engine, n: int) -> None:
    deadline = time.monotonic() + 5
    while engine.waiting.blocked_clients() < n:
        assert time.monotonic() < deadline, "client never blocked"
        time.sleep(0.002)


@pytest.fixture
def engine() -> Engine:
    e = Engine()
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "$")
    return e


def test_block_zero_waits_until_an_entry_arrives(engine: Engine) -> None:
    call = Call(engine, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(engine, 1)
    time.sleep(0.05)
    assert call.thread.is_alive()
    engine.execute("XADD", "s", "2-1", "k", "x")
    assert call.join().result == [[b"s", [[b"2-1", [b"k", b"x"]]]]]
    assert engine.waiting.blocked_clients() == 0


def test_timeout_returns_nil(engine: Engine) -> None:
    start = time.monotonic()
    assert engine.execute("XREAD", "BLOCK", "80", "STREAMS", "s", "$") is None
    assert engine.execute("XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s",
                          ">") is None
    assert time.monotonic() - start >= 0.12
    assert engine.waiting.blocked_clients() == 0


def test_group_waiters_are_served_first_come_first_served(engine: Engine) -> None:
    calls = []
    for name in ("c1", "c2", "c3"):
        calls.append(Call(engine, "XREADGROUP", "GROUP", "g", name, "BLOCK", "0", "STREAMS",
                          "s", ">"))
        wait_blocked(engine, len(calls))
    for i, call in enumerate(calls):
        engine.execute("XADD", "s", f"{10 + i}-1", "n", str(i))
        call.join()
        assert call.result == [[b"s", [[f"{10 + i}-1".encode(), [b"n", str(i).encode()]]]]]
        for later in calls[i + 1:]:
            assert later.thread.is_alive()
    pending = engine.execute("XPENDING", "s", "g", "-", "+", "10")
    assert [(p[0], p[1]) for p in pending] == [(b"10-1", b"c1"), (b"11-1", b"c2"),
                                               (b"12-1", b"c3")]


def test_all_xread_waiters_get_the_same_entry(engine: Engine) -> None:
    calls = [Call(engine, "XREAD", "BLOCK", "0", "STREAMS", "s", "$") for _ in range(3)]
    wait_blocked(engine, 3)
    engine.execute("XADD", "s", "5-1", "a", "b")
    assert all(c.join().result == [[b"s", [[b"5-1", [b"a", b"b"]]]]] for c in calls)


@pytest.mark.parametrize("removal", [["XGROUP", "DESTROY", "s", "g"], ["DEL", "s"],
                                     ["FLUSHALL"]])
def test_waiting_xreadgroup_gets_nogroup(engine: Engine, removal: list[str]) -> None:
    call = Call(engine, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(engine, 1)
    engine.execute(*removal)
    assert str(call.join().error) == (
        "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"
    )


def test_xread_dollar_is_pinned_when_blocking(engine: Engine) -> None:
    """Redis rewrites '$' to the last ID at block time: after DEL + XADD the waiter is served."""
    call = Call(engine, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(engine, 1)
    engine.execute("DEL", "s")
    time.sleep(0.02)
    assert call.thread.is_alive()
    engine.execute("XADD", "s", "9-9", "x", "y")
    assert call.join().result == [[b"s", [[b"9-9", [b"x", b"y"]]]]]


def test_xread_plus_serves_the_last_entry(engine: Engine) -> None:
    engine.execute("XADD", "s", "2-1", "last", "1")
    assert engine.execute("XREAD", "BLOCK", "0", "STREAMS", "s", "+") == [
        [b"s", [[b"2-1", [b"last", b"1"]]]]
    ]


def test_served_waiter_effects_are_recorded_and_replay() -> None:
    primary = Engine()
    records: list[Record] = []
    primary.add_sink(records.append)
    primary.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    call = Call(primary, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(primary, 1)
    primary.execute("XADD", "s", "3-1", "f", "v")
    call.join()
    assert any(e[0] == b"XCLAIM" for r in records for e in r.effects)
    replica = Engine()
    for r in records:
        replica.replay.apply(r)
    assert replica.digest() == primary.digest()


def test_block_inside_wrong_args_errors_immediately(engine: Engine) -> None:
    with pytest.raises(ReplyError, match="ERR timeout is negative"):
        engine.execute("XREAD", "BLOCK", "-1", "STREAMS", "s", "$")
    with pytest.raises(ReplyError, match="timeout is not an integer"):
        engine.execute("XREAD", "BLOCK", "x", "STREAMS", "s", "$")


def test_blocked_claim_wakes_when_a_pending_entry_becomes_idle(engine: Engine) -> None:
    engine.execute("XADD", "s", "2-1", "f", "v")
    engine.execute("XREADGROUP", "GROUP", "g", "first", "STREAMS", "s", ">")
    start = time.monotonic()
    reply = engine.execute("XREADGROUP", "GROUP", "g", "second", "BLOCK", "2000", "CLAIM",
                           "150", "STREAMS", "s", ">")
    waited = time.monotonic() - start
    assert 0.1 <= waited < 1.5
    assert reply[0][0] == b"s"
    entry_id, fields, idle, count = reply[0][1][0]
    assert (entry_id, fields, count) == (b"2-1", [b"f", b"v"], 1)
    assert idle >= 150
    assert engine.execute("XPENDING", "s", "g", "-", "+", "10")[0][1] == b"second"
