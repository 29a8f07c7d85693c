"""The framework rows as a script the framework's own venv runs (``-I``: the standard library and
the framework alone): ``framework_child.py arq|rq HOST PORT DB TASKS ARG`` enqueues TASKS no-op
jobs one at a time, runs one worker in burst mode until the queue is empty (arq's ``Worker``, ARG
its poll delay; RQ's ``rq.worker.ARG``) and prints one JSON line. Must not touch: streamkeep,
keys outside database DB.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any


def noop(*_ctx: Any) -> None:
    """The task: nothing, so that what is timed is the framework and its server."""


async def anoop(ctx: dict[str, Any]) -> None:
    """arq's task: nothing."""


async def run_arq(host: str, port: int, db: int, tasks: int, poll_delay: str) -> list[Any]:
    from arq import create_pool  # type: ignore[import-not-found]
    from arq.connections import RedisSettings  # type: ignore[import-not-found]
    from arq.worker import Worker, func  # type: ignore[import-not-found]

    pool = await create_pool(RedisSettings(host=host, port=port, database=db))
    began = time.perf_counter()
    for _ in range(tasks):
        await pool.enqueue_job("noop")
    enqueued = time.perf_counter() - began
    worker = Worker(functions=[func(anoop, name="noop")], redis_pool=pool, burst=True, handle_signals=False,
                    poll_delay=float(poll_delay))
    began = time.perf_counter()
    await worker.main()
    seconds = time.perf_counter() - began
    complete, failed = worker.jobs_complete, worker.jobs_failed
    await worker.close()  # (closes the pool too)
    return [enqueued, seconds, complete, failed]


def run_rq(host: str, port: int, db: int, tasks: int, worker_class: str) -> list[Any]:
    import redis  # type: ignore[import-not-found]
    import rq.worker  # type: ignore[import-not-found]
    from rq import Queue  # type: ignore[import-not-found]

    connection = redis.Redis(host=host, port=port, db=db)
    queue = Queue("bench", connection=connection)
    began = time.perf_counter()
    for _ in range(tasks):
        queue.enqueue("__main__.noop")
    enqueued = time.perf_counter() - began
    worker = getattr(rq.worker, worker_class)([queue], connection=connection)
    began = time.perf_counter()
    worker.work(burst=True, logging_level="WARNING")
    seconds = time.perf_counter() - began
    complete, failed = queue.finished_job_registry.count, queue.failed_job_registry.count
    connection.close()
    return [enqueued, seconds, complete, failed]


def main(argv: list[str]) -> int:
    which, host, port, db, tasks, arg = argv
    args = (host, int(port), int(db), int(tasks), arg)
    got = asyncio.run(run_arq(*args)) if which == "arq" else run_rq(*args)
    print(json.dumps(dict(zip(("tasks", "enqueue_seconds", "seconds", "complete", "failed"),
                              [int(tasks), *got], strict=True))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
