"""taskiq on taskiq-redis's `RedisStreamBroker` against `streamkeep serve` and redis-server:
tasks sent and run by a worker (XADD, XGROUP CREATE, XREADGROUP, XACK), and a worker SIGKILLed
mid-task whose message the next worker reclaims (taskiq-redis's XAUTOCLAIM, run inside a
MULTI/EXEC with a redis-py Lock after each XREADGROUP batch) and completes, nothing left pending.
The workers are real child processes (tests/support/taskiq_app.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from tests.support import taskiq_app as app
from tests.support.frameworks import Children, Target
from tests.support.replication_util import wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 60.0  # the most a step waits for its condition


def send(target: Target, *calls: tuple[str, tuple[Any, ...]]) -> None:
    """Sends each (task name, args) through a client broker, which also creates the group."""

    async def kick() -> None:
        broker = app.make_broker(target.url, "client")
        await broker.startup()
        try:
            for name, args in calls:
                task = broker.find_task(name)
                assert task is not None, name
                await task.kiq(*args)
        finally:
            await broker.shutdown()

    asyncio.run(kick())


def pending(client: redis.Redis) -> list[dict[str, Any]]:
    return client.xpending_range(app.QUEUE, app.GROUP, "-", "+", 100)


def test_worker_runs_tasks(target: Target, children: Children) -> None:
    children.start("tests.support.taskiq_app", target.url, "worker")
    tokens = [f"job-{n}" for n in range(5)]
    send(target, *[("remember", (token,)) for token in tokens])
    with target.client() as client:
        for token in tokens:
            wait_for(lambda t=token: client.get(app.done_key(t)), WAIT, f"{token} done")
            assert client.get(app.started_key(token)) == b"worker"
            assert client.get(app.done_key(token)) == b"worker"
        wait_for(lambda: not pending(client), WAIT, "every message acknowledged")
        assert client.xlen(app.QUEUE) == len(tokens)


def test_killed_workers_message_is_reclaimed(target: Target, children: Children) -> None:
    stalled = children.start("tests.support.taskiq_app", target.url, "stall-a")
    send(target, ("remember", ("crash",)))
    with target.client() as client:
        wait_for(lambda: client.get(app.started_key("crash")) == b"stall-a", WAIT,
                 "worker A started the task")
        Children.sigkill(stalled)
        [entry] = pending(client)
        assert entry["consumer"] == b"stall-a" and entry["times_delivered"] == 1
        # XAUTOCLAIM takes it only once it has been idle that long: wait for that, not a time.
        wait_for(lambda: pending(client)[0]["time_since_delivered"] >= app.IDLE_TIMEOUT_MS,
                 WAIT, "the message idle long enough to reclaim")

        children.start("tests.support.taskiq_app", target.url, "worker-b")
        # taskiq-redis runs XAUTOCLAIM after an XREADGROUP that returned messages: give it one.
        send(target, ("nudge", ()))
        wait_for(lambda: client.get(app.done_key("crash")), WAIT, "worker B finished the task")
        assert client.get(app.done_key("crash")) == b"worker-b"
        assert client.get(app.started_key("crash")) == b"worker-b"
        wait_for(lambda: not pending(client), WAIT, "nothing left pending")
        assert client.xpending(app.QUEUE, app.GROUP)["pending"] == 0
        consumers = {c["name"]: c for c in client.xinfo_consumers(app.QUEUE, app.GROUP)}
        assert set(consumers) == {b"stall-a", b"worker-b"}
        assert consumers[b"stall-a"]["pending"] == consumers[b"worker-b"]["pending"] == 0
