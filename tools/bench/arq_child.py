"""The types section's arq row, as a script arq's own venv runs: one worker draining no-op tasks.

Owns what the row does and times: ``<arq venv python> -I arq_child.py HOST PORT DB TASKS
POLL_DELAY`` enqueues TASKS no-op jobs (``enqueue_job``, one at a time, as an application
does), then runs one arq ``Worker`` in burst mode (arq's defaults otherwise: ``max_jobs`` 10,
results kept) until the queue is empty, and prints one JSON line: ``{"tasks": ...,
"enqueue_seconds": ..., "seconds": ..., "complete": ..., "failed": ...}`` (``seconds`` the
worker's, from its start to its return). It imports arq and the standard library alone: it
runs under the framework's venv (its pinned redis-py), never the project's. (``-I`` keeps
this directory off ``sys.path``: its modules would shadow the standard library's.)
Must not touch: anything of streamkeep (the server is reached over TCP), keys outside the
database it is given (the caller empties that database first).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from arq import create_pool  # type: ignore[import-not-found]
from arq.connections import RedisSettings  # type: ignore[import-not-found]
from arq.worker import Worker  # type: ignore[import-not-found]


async def noop(ctx: dict[str, Any]) -> None:
    """The task: nothing, so that what is timed is the framework and its server."""


async def _run(host: str, port: int, db: int, tasks: int, poll_delay: float) -> dict[str, Any]:
    settings = RedisSettings(host=host, port=port, database=db)
    pool = await create_pool(settings)
    started = time.perf_counter()
    for _ in range(tasks):
        await pool.enqueue_job("noop")
    enqueued = time.perf_counter() - started
    worker = Worker(functions=[noop], redis_pool=pool, burst=True, handle_signals=False,
                    poll_delay=poll_delay)
    started = time.perf_counter()
    await worker.main()
    seconds = time.perf_counter() - started
    complete, failed = worker.jobs_complete, worker.jobs_failed
    await worker.close()  # (closes the pool too)
    return {"tasks": tasks, "enqueue_seconds": enqueued, "seconds": seconds,
            "complete": complete, "failed": failed}


def main(argv: list[str]) -> int:
    host, port, db, tasks, poll_delay = argv
    result = asyncio.run(_run(host, int(port), int(db), int(tasks), float(poll_delay)))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
