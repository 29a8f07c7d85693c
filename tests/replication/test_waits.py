"""replication.waits: the WAIT/WAITAOF bookkeeping, with counters the test controls and a
recorded `call_later` in place of the server's loop (its calls are run by hand). A wait ends
once, with the counts as they are then: when an ACK satisfies it, at its timeout, when polling
finds the local fsync, or when everything is cancelled; embedded, the caller's thread blocks
until one of those."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from streamkeep.replication.waits import Wait, Waits


class Loop:
    """A stand-in for the server loop's call_later: records (delay, callback)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, Callable[[], None]]] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        self.calls.append((delay, fn))

    def run_due(self) -> None:
        calls, self.calls = self.calls, []
        for _delay, fn in calls:
            fn()


class Acks:
    """What the replicas have acknowledged: `count` is the reply, `done` compares it."""

    def __init__(self, needed: int) -> None:
        self.acked = 0
        self.needed = needed

    def count(self) -> int:
        return self.acked

    def done(self) -> bool:
        return self.acked >= self.needed


def a_wait(waits: Waits, acks: Acks, timeout_ms: int = 0, polled: bool = False) -> Wait:
    return Wait(waits, acks.count, acks.done, timeout_ms, polled)


@pytest.fixture
def loop() -> Loop:
    return Loop()


@pytest.fixture
def waits(loop: Loop) -> Waits:
    return Waits(loop.call_later)


def started(wait: Wait) -> list[Any]:
    replies: list[Any] = []
    wait.start(replies.append)
    return replies


def test_a_wait_satisfied_by_an_ack_replies_the_count_then(waits: Waits, loop: Loop) -> None:
    acks = Acks(needed=2)
    wait = a_wait(waits, acks)
    replies = started(wait)
    assert waits.pending == {wait} and replies == []
    assert loop.calls == []  # no timeout (0: never), not polled
    acks.acked = 1
    waits.check()
    assert replies == [] and waits.pending == {wait}
    acks.acked = 3
    waits.check()
    assert replies == [3] and not waits.pending
    assert wait.finished and wait.result == 3 and wait.event.is_set()


def test_check_ends_only_the_waits_it_satisfies(waits: Waits) -> None:
    few, many = Acks(needed=1), Acks(needed=5)
    first, second = a_wait(waits, few), a_wait(waits, many)
    replies_first, replies_second = started(first), started(second)
    few.acked = many.acked = 2
    waits.check()
    assert replies_first == [2] and replies_second == []
    assert waits.pending == {second}


def test_already_satisfied_when_started_replies_at_once(waits: Waits) -> None:
    acks = Acks(needed=0)
    wait = a_wait(waits, acks, timeout_ms=1000)
    assert started(wait) == [0]
    assert not waits.pending


def test_the_timeout_replies_the_counts_as_they_are(waits: Waits, loop: Loop) -> None:
    acks = Acks(needed=3)
    wait = a_wait(waits, acks, timeout_ms=250)
    replies = started(wait)
    assert [delay for delay, _fn in loop.calls] == [0.25]
    acks.acked = 1
    loop.run_due()  # the timeout fires
    assert replies == [1] and not waits.pending


def test_a_wait_ends_once(waits: Waits, loop: Loop) -> None:
    acks = Acks(needed=1)
    wait = a_wait(waits, acks, timeout_ms=100)
    replies = started(wait)
    acks.acked = 1
    waits.check()
    acks.acked = 7
    loop.run_due()  # the timeout after the ACK: nothing more
    wait.finish()
    waits.cancel_all()
    assert replies == [1] and wait.result == 1


def test_polling_runs_while_a_polled_wait_is_pending(waits: Waits, loop: Loop) -> None:
    synced = Acks(needed=1)  # the local fsync: nobody announces it
    first = a_wait(waits, synced, polled=True)
    second = a_wait(waits, synced, polled=True)
    first_replies, second_replies = started(first), started(second)
    assert [delay for delay, _fn in loop.calls] == [Waits.POLL]  # one poller for both
    assert waits.polling
    loop.run_due()
    assert [delay for delay, _fn in loop.calls] == [Waits.POLL]  # nothing yet: again
    synced.acked = 1
    loop.run_due()
    assert not waits.pending and not waits.polling and loop.calls == []
    assert first_replies == second_replies == [1]


def test_polling_stops_when_only_unpolled_waits_remain(waits: Waits, loop: Loop) -> None:
    local, replicas = Acks(needed=1), Acks(needed=1)
    polled, acked = a_wait(waits, local, polled=True), a_wait(waits, replicas)
    started(polled)
    started(acked)
    local.acked = 1
    loop.run_due()
    assert waits.pending == {acked}
    assert not waits.polling and loop.calls == []


def test_cancel_all_replies_to_every_wait(waits: Waits) -> None:
    acks = [Acks(needed=5) for _ in range(3)]
    replies = [started(a_wait(waits, a)) for a in acks]
    acks[1].acked = 2
    waits.cancel_all()
    assert replies == [[0], [2], [0]]
    assert not waits.pending


def blocked(wait: Wait) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(wait.wait()), daemon=True)
    thread.start()
    return thread, out


def registered(wait: Wait, thread: threading.Thread) -> None:
    """Until the blocked thread has registered its wait (from then on a check wakes it)."""
    while wait not in wait.waits.pending and thread.is_alive():
        thread.join(0.001)


def test_embedded_the_caller_blocks_until_an_ack(waits: Waits) -> None:
    acks = Acks(needed=1)
    wait = a_wait(waits, acks)  # no timeout: only the ACK ends it
    thread, out = blocked(wait)
    registered(wait, thread)
    assert out == []
    acks.acked = 2
    waits.check()
    thread.join(10)
    assert out == [2] and not thread.is_alive()
    assert not waits.pending


def test_embedded_a_satisfied_wait_returns_at_once(waits: Waits) -> None:
    assert a_wait(waits, Acks(needed=0)).wait() == 0
    assert not waits.pending


def test_embedded_the_timeout_returns_the_counts(waits: Waits) -> None:
    acks = Acks(needed=2)
    acks.acked = 1
    assert a_wait(waits, acks, timeout_ms=20).wait() == 1
    assert not waits.pending


def test_embedded_polling_finds_what_nobody_announces(waits: Waits) -> None:
    synced = Acks(needed=1)
    wait = a_wait(waits, synced, polled=True)
    thread, out = blocked(wait)
    registered(wait, thread)
    synced.acked = 1  # no check(): the waiting thread looks every POLL seconds
    thread.join(10)
    assert out == [1]


def test_waitaof_counts_as_a_pair(waits: Waits) -> None:
    """The counter may reply anything: WAITAOF's [local, replicas]."""
    state = {"local": 0, "replicas": 0}
    wait = Wait(waits, lambda: [state["local"], state["replicas"]],
                lambda: state["local"] >= 1 and state["replicas"] >= 1, 0, polled=True)
    replies = started(wait)
    state["local"] = 1
    waits.check()
    assert replies == []
    state["replicas"] = 1
    waits.check()
    assert replies == [[1, 1]]
