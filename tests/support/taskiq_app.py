"""A taskiq application on taskiq-redis's stream broker, for tests/frameworks: `make_broker(url,
consumer)` builds a `RedisStreamBroker` with the two tasks the tests send and taskiq-redis's
result backend (results under their own keys, SET EX, read back by GETDEL), and running this module
(`python -m tests.support.taskiq_app URL CONSUMER`) is a worker: the broker's listen loop under
taskiq's receiver, in a real child process a test can SIGKILL.

The tasks leave their traces in the server itself (string keys), so a test reads what happened
from the server, not from the worker's output. A worker whose consumer name starts with "stall"
signals that it started a `remember` task and then never finishes it: that is the worker a test
kills mid-task. It must not touch anything but the server it is given.
"""

from __future__ import annotations

import asyncio
import sys

import redis.asyncio
from taskiq.api import run_receiver_task
from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

QUEUE = "fw:taskiq"
GROUP = "fw-workers"
# XAUTOCLAIM's min-idle-time: a killed worker's message is reclaimed once it has been pending
# this long (taskiq-redis's default is ten minutes).
IDLE_TIMEOUT_MS = 500
# The lock taskiq-redis takes around XAUTOCLAIM expires by itself after this (seconds): a worker
# killed while holding it does not block its successors for ever.
AUTOCLAIM_LOCK_TIMEOUT = 10.0
STALL_PREFIX = "stall"
RESULT_PREFIX = "fw:result"
RESULT_TTL = 600  # seconds (SET EX); a result is read once and deleted (GETDEL)

_worker: dict[str, str] = {}  # the worker's "url" and "consumer", set by main()


def started_key(token: str) -> str:
    return f"fw:started:{token}"


def done_key(token: str) -> str:
    return f"fw:done:{token}"


async def remember(token: str) -> str:
    """Writes who started it, stalls for ever in a "stall" worker, then writes who finished it."""
    consumer = _worker["consumer"]
    async with redis.asyncio.Redis.from_url(_worker["url"]) as conn:
        await conn.set(started_key(token), consumer)
        if consumer.startswith(STALL_PREFIX):
            await asyncio.Event().wait()  # until the test SIGKILLs this process
        await conn.set(done_key(token), consumer)
    return consumer


async def nudge() -> None:
    """Nothing: a message that wakes a worker's XREADGROUP (taskiq-redis only runs XAUTOCLAIM
    after a read that returned messages)."""


def make_broker(url: str, consumer: str) -> RedisStreamBroker:
    broker = RedisStreamBroker(
        url,
        queue_name=QUEUE,
        consumer_group_name=GROUP,
        consumer_name=consumer,
        consumer_id="0",  # a group created after the first XADD still sees it
        xread_block=200,
        idle_timeout=IDLE_TIMEOUT_MS,
        unacknowledged_lock_timeout=AUTOCLAIM_LOCK_TIMEOUT,
    )
    broker = broker.with_result_backend(RedisAsyncResultBackend(
        url, result_ex_time=RESULT_TTL, keep_results=False, prefix_str=RESULT_PREFIX))
    broker.task(task_name="remember")(remember)
    broker.task(task_name="nudge")(nudge)
    return broker


async def _serve(url: str, consumer: str) -> None:
    _worker.update(url=url, consumer=consumer)
    await run_receiver_task(make_broker(url, consumer), run_startup=True)


def main(argv: list[str]) -> None:
    url, consumer = argv
    asyncio.run(_serve(url, consumer))


if __name__ == "__main__":
    main(sys.argv[1:])
