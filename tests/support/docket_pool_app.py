"""A pydocket program for tests/frameworks/test_docket_under_controller.py, run by the pydocket
venv's Python (tools/frameworks.py's `pydocket-cluster` suite) as child processes, never
imported by the project's tests (the project's venv has no pydocket).

`produce URL RUNS DOCKETS N`: adds N `record` tasks over the dockets named (comma-separated),
task n to docket n % len(DOCKETS), each under its own key (`<docket>-<n>`: adding one again is
a no-op); the first third due at once, the rest spread over the next SPREAD seconds, so that
tasks come due while the cluster changes. Prints how many it added.

`work URL RUNS DOCKETS NAME`: one process of the pool, a pydocket Worker per docket (the same
process serving them all), until SIGTERM or SIGKILL. Redis trouble is pydocket's to wait out
(its worker logs and retries); a worker that redis-py's cluster client fails with the
AttributeError of an ASK it cannot follow starts over, as one whose Docket fails to connect
(a line in RUNS/restarts.log each, "<worker> <docket> ask|connect <time>"); the process ends
only if a worker raises anything else.

`record(docket, n)` appends one line, "<docket> <n> <worker> <time>", to RUNS/runs-<pid>.log
(one write with O_APPEND: whole lines), so the test counts every run of every task whatever
the cluster kept. It touches nothing but the cluster it is given and those files.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from datetime import UTC, datetime, timedelta

from docket import Docket, Worker  # type: ignore[import-not-found]
from redis.exceptions import RedisError

SPREAD = 12.0  # seconds over which the later tasks come due
TASK_SECONDS = 0.02  # each run's own work
CONCURRENCY = 4
# A task's message idle this long is given to another worker: well above a run's length, so a
# run still under way is not given out again while its worker is merely slow.
REDELIVERY = timedelta(seconds=5)
RECONNECT = timedelta(milliseconds=250)

# What redis-py's asyncio cluster client raises when ASK names a node it does not know.
ASK_FAILURE = "'NoneType' object has no attribute"

_runs_path = ""
_worker_name = ""


async def record(docket: str, n: int) -> None:
    await asyncio.sleep(TASK_SECONDS)
    fd = os.open(_runs_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{docket} {n} {_worker_name} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)


async def produce(url: str, names: list[str], count: int) -> int:
    now = datetime.now(UTC)
    added = 0
    dockets = [Docket(name=name, url=url) for name in names]
    for docket in dockets:
        await docket.__aenter__()
    try:
        for n in range(count):
            docket = dockets[n % len(dockets)]
            later = 0.0 if n < count // 3 else SPREAD * n / count
            await docket.add(record, when=now + timedelta(seconds=later),
                             key=f"{docket.name}-{n}")(docket.name, n)
            added += 1
    finally:
        for docket in dockets:
            await docket.__aexit__(None, None, None)
    return added


async def work(url: str, names: list[str]) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def one(name: str) -> None:
        while True:
            try:
                async with Docket(name=name, url=url) as docket:
                    docket.register(record)
                    async with Worker(docket, name=_worker_name, concurrency=CONCURRENCY,
                                      redelivery_timeout=REDELIVERY,
                                      reconnection_delay=RECONNECT) as worker:
                        await worker.run_forever()
            except* AttributeError as group:
                # redis-py's cluster client cannot follow ASK to a node its slot map does not
                # name (a primary added empty, before its first slot is committed: CLUSTER
                # SLOTS leaves it out, on a real Redis cluster too): it fails with
                # AttributeError on None, which pydocket's worker does not take for Redis
                # trouble, so the worker ends. A new client reads the map again: the worker
                # starts over. Any other AttributeError is a bug, and ends the process.
                if not all(ASK_FAILURE in str(error) for error in _leaves(group)):
                    raise
                _note_restart(name, "ask", group)
            except* RedisError as group:
                # Redis trouble outside the worker's loop, which pydocket does not retry: a
                # new Docket's client connecting (its first CLUSTER SLOTS) to a node just
                # killed, after an ASK restart. As any client's start-up: wait, try again.
                _note_restart(name, "connect", group)
                await asyncio.sleep(RECONNECT.total_seconds())

    tasks = [asyncio.create_task(one(name)) for name in names]
    stopping = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*tasks, stopping], return_when=asyncio.FIRST_COMPLETED)
    for task in [*tasks, stopping]:
        task.cancel()
    for task in done:
        if task is not stopping and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    if stopping not in done:
        raise SystemExit("a worker returned while not told to stop")


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    leaves: list[BaseException] = []
    for error in group.exceptions:
        leaves.extend(_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return leaves


def _note_restart(name: str, why: str, group: BaseExceptionGroup) -> None:
    logging.getLogger(__name__).warning("worker of %s restarted (%s) after %r", name, why,
                                        group.exceptions[0])
    fd = os.open(os.path.join(os.path.dirname(_runs_path), "restarts.log"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{_worker_name} {name} {why} {time.time():.3f}\n".encode())
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    global _runs_path, _worker_name
    mode, url, runs, dockets = argv[:4]
    names = dockets.split(",")
    if mode == "produce":
        print(asyncio.run(produce(url, names, int(argv[4]))), flush=True)
        return 0
    _worker_name = argv[4]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        force=True)
    _runs_path = os.path.join(runs, f"runs-{os.getpid()}.log")
    asyncio.run(work(url, names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
