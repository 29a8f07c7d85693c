"""taskiq on taskiq-redis's `RedisStreamBroker` against `streamkeep serve` and redis-server:
tasks sent and run by a worker (XADD, XGROUP CREATE, XREADGROUP, XACK), and a worker SIGKILLed
mid-task whose message the next worker reclaims (taskiq-redis's XAUTOCLAIM, run inside a
MULTI/EXEC with a redis-py Lock after each XREADGROUP batch) and completes, nothing left pending.
Results come back through taskiq-redis's result backend (SET EX, GETDEL).
The workers are real child processes (tests/support/taskiq_app.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from taskiq import AsyncBroker, AsyncTaskiqTask

from tests.support import taskiq_app as app
from tests.support.frameworks import Children, Target
from tests.support.replication_util import wait_for

pytestmark = pytest.mark.timeout(120)

WAIT = 60.0  # the most a step waits for its condition


def scenario(target: Target, body: Callable[[AsyncBroker, redis.Redis], Awaitable[None]]) -> None:
    """Runs `body(client broker, redis-py client)`; the client broker's startup creates the
    group, as a worker's does."""

    async def main() -> None:
        broker = app.make_broker(target.url, "client")
        await broker.startup()
        try:
            with target.client() as client:
                await body(broker, client)
        finally:
            await broker.shutdown()

    asyncio.run(main())


async def send(broker: AsyncBroker, name: str, *args: Any) -> AsyncTaskiqTask[Any]:
    task = broker.find_task(name)
    assert task is not None, name
    return await task.kiq(*args)


async def result(handle: AsyncTaskiqTask[Any]) -> Any:
    got = await handle.wait_result(check_interval=0.02, timeout=WAIT)
    assert not got.is_err, got.error
    return got.return_value


def pending(client: redis.Redis) -> list[dict[str, Any]]:
    return client.xpending_range(app.QUEUE, app.GROUP, "-", "+", 100)


def test_worker_runs_tasks(target: Target, children: Children) -> None:
    async def body(broker: AsyncBroker, client: redis.Redis) -> None:
        children.start("tests.support.taskiq_app", target.url, "worker")
        tokens = [f"job-{n}" for n in range(5)]
        handles = [await send(broker, "remember", token) for token in tokens]
        assert [await result(handle) for handle in handles] == ["worker"] * len(tokens)
        for token, handle in zip(tokens, handles, strict=True):
            assert client.get(app.started_key(token)) == b"worker"
            assert client.get(app.done_key(token)) == b"worker"
            # The result was read once (GETDEL): its key is gone.
            assert client.exists(f"{app.RESULT_PREFIX}:{handle.task_id}") == 0
        wait_for(lambda: not pending(client), WAIT, "every message acknowledged")
        assert client.xlen(app.QUEUE) == len(tokens)

    scenario(target, body)


def test_killed_workers_message_is_reclaimed(target: Target, children: Children) -> None:
    async def body(broker: AsyncBroker, client: redis.Redis) -> None:
        stalled = children.start("tests.support.taskiq_app", target.url, "stall-a")
        crash = await send(broker, "remember", "crash")
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
        nudge = await send(broker, "nudge")
        assert await result(crash) == "worker-b"
        assert await result(nudge) is None
        assert client.get(app.started_key("crash")) == b"worker-b"
        assert client.get(app.done_key("crash")) == b"worker-b"
        wait_for(lambda: not pending(client), WAIT, "nothing left pending")
        assert client.xpending(app.QUEUE, app.GROUP)["pending"] == 0
        consumers = {c["name"]: c for c in client.xinfo_consumers(app.QUEUE, app.GROUP)}
        assert set(consumers) == {b"stall-a", b"worker-b"}
        assert consumers[b"stall-a"]["pending"] == consumers[b"worker-b"]["pending"] == 0

    scenario(target, body)
