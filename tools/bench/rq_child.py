"""The lists section's RQ row, as a script RQ's own venv runs: one worker draining no-op jobs.

Owns what the row does and times: ``<rq venv python> -I rq_child.py HOST PORT DB TASKS
WORKER`` enqueues TASKS no-op jobs on one queue (``Queue.enqueue``, one at a time, as an
application does), then runs one worker of the class WORKER of ``rq.worker`` (``Worker``, what
``rq worker`` runs: a work horse forked per job; or ``SimpleWorker``: the jobs in the worker's
own process) in burst mode (RQ's defaults otherwise: results kept) until the queue is empty,
and prints one JSON line: ``{"tasks": ..., "enqueue_seconds": ..., "seconds": ...,
"complete": ..., "failed": ...}`` (``seconds`` the worker's, from its start to its return;
``complete`` and ``failed`` the queue's finished and failed job registries afterwards). It
imports RQ and the standard library alone: it runs under the framework's venv (its pinned
redis-py), never the project's. (``-I`` keeps this directory off ``sys.path``: its modules
would shadow the standard library's. The job names its function as ``__main__.noop``, a
string: RQ refuses a function object of ``__main__``, and the worker, this script or a fork of
it, finds it there.)
Must not touch: anything of streamkeep (the server is reached over TCP), keys outside the
database it is given (the caller empties that database first).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import redis  # type: ignore[import-not-found]
import rq.worker  # type: ignore[import-not-found]
from rq import Queue  # type: ignore[import-not-found]

QUEUE = "bench"


def noop() -> None:
    """The task: nothing, so that what is timed is the framework and its server."""


def _run(host: str, port: int, db: int, tasks: int, worker_class: str) -> dict[str, Any]:
    connection = redis.Redis(host=host, port=port, db=db)
    queue = Queue(QUEUE, connection=connection)
    started = time.perf_counter()
    for _ in range(tasks):
        queue.enqueue("__main__.noop")
    enqueued = time.perf_counter() - started
    worker = getattr(rq.worker, worker_class)([queue], connection=connection)
    started = time.perf_counter()
    worker.work(burst=True, logging_level="WARNING")
    seconds = time.perf_counter() - started
    complete, failed = queue.finished_job_registry.count, queue.failed_job_registry.count
    connection.close()
    return {"tasks": tasks, "enqueue_seconds": enqueued, "seconds": seconds,
            "complete": complete, "failed": failed}


def main(argv: list[str]) -> int:
    host, port, db, tasks, worker_class = argv
    result = _run(host, int(port), int(db), int(tasks), worker_class)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
