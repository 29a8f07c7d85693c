"""The ``lists`` section: lists over the network and a durable job queue on them, streamkeep
against redis-server with the same load in one run.

Owns the section's workloads: ``redis-benchmark`` of LPUSH, RPOP and LRANGE_100 (LRANGE 0 99)
at ``-P 16`` and of LPUSH and RPOP at ``-P 1`` (:data:`COMMANDS`, :data:`ROWS`), each with the
list it needs prepared before every run and checked after, through the types section's
machinery (:class:`.datatypes.TypeCommand`, :func:`.datatypes.command`, its database and its
keyspace); RQ's no-op jobs through one worker against a ``streamkeep serve`` and a
redis-server that both fsync every write (``appendfsync always``: a durable broker;
:func:`rq`: ``rq_child.py`` under RQ's own venv, built as the framework suites build it, the
row skipped with "rq not available" when it cannot be installed); and the section's summary
(:func:`summary`: both servers' rates, their ratio and its range over the repeats, against the
targets). The servers and the redis-benchmark runs are the server section's (:mod:`.server`),
shared by the run: the everysec pair for the commands, the ``always`` pair for RQ.
Must not touch: the section declarations (rows, figures and targets: .sections), the processes'
start and stop (:mod:`.processes`), engine internals (the servers are driven over RESP only),
keys outside its databases.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench import datatypes
from streamkeep.tools.bench.datatypes import CHUNK, DB, KEYSPACE, TypeCommand
from streamkeep.tools.bench.server import SERVER_CLIENTS, server_requests
from streamkeep.tools.bench.tables import Table
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

PIPELINES = (16, 1)  # redis-benchmark -P of the rows
ELEMENT = "xxx"  # redis-benchmark's own payload (-d 3) for its list tests
LRANGE_MIN = 600  # LRANGE_100's list: at least this, as for redis-benchmark's LRANGE_600
# RQ's database (the strings section's is 9, the types section's, which the list commands
# share under keys of their own, 10 and 11): the other rows never see these keys.
RQ_DB = 12
# rq.worker's class the row runs: Worker, what `rq worker` runs (a work horse forked per job).
RQ_WORKER = "Worker"
RQ_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rq_child.py")
RQ_TIMEOUT = 600.0  # seconds one RQ run may take


# --- the data each command runs on ---------------------------------------------------------------


def _list(client: Any, key: str, size: int) -> None:
    """``key`` made again as a list of ``size`` copies of ELEMENT (RPUSHed a chunk at a time)."""
    client.delete(key)
    pipe = client.pipeline(transaction=False)
    for start in range(0, size, CHUNK):
        pipe.rpush(key, *([ELEMENT] * (min(size, start + CHUNK) - start)))
    pipe.execute()


def _pop_margin(requests: int) -> int:
    """RPOP's list: more elements than the pops (-P may send a pipeline more per client)."""
    return requests + 2 * SERVER_CLIENTS * max(PIPELINES)


def _left_elements(client: Any, key: str) -> None:
    if int(client.llen(key)) == 0:
        raise AssertionError(f"{key} ran out: the last RPOPs popped nothing")


def _pushed(client: Any, key: str) -> None:
    if int(client.llen(key)) == 0:
        raise AssertionError(f"{key} is empty after the LPUSHes")


COMMANDS: dict[str, TypeCommand] = {c.name: c for c in (
    TypeCommand("lpush", f"LPUSH of {ELEMENT}", ("LPUSH", "KEY", ELEMENT), "lists:lpush",
                lambda c, k, _n: c.delete(k), check=_pushed),
    TypeCommand("rpop", "RPOP (a list longer than the pops)", ("RPOP", "KEY"), "lists:rpop",
                lambda c, k, n: _list(c, k, _pop_margin(n)), check=_left_elements),
    # redis-benchmark's LRANGE tests read a list it LPUSHes -n elements of its payload into.
    TypeCommand("lrange_100", f"LRANGE 0 99 (a list of -n elements, at least {LRANGE_MIN})",
                ("LRANGE", "KEY", "0", "99"), "lists:lrange",
                lambda c, k, n: _list(c, k, max(LRANGE_MIN, n))),
)}

# The rows' (command, -P), in row order.
ROWS: tuple[tuple[TypeCommand, int], ...] = (
    (COMMANDS["lpush"], 16), (COMMANDS["rpop"], 16), (COMMANDS["lrange_100"], 16),
    (COMMANDS["lpush"], 1), (COMMANDS["rpop"], 1),
)


# --- a durable job queue: RQ ---------------------------------------------------------------------


def rq_jobs(n: int) -> int:
    """No-op jobs of an RQ row for a run of N: a twentieth, between 100 and 500 (every job
    waits for several fsyncs, and RQ's Worker forks for each)."""
    return max(100, min(n // 20, 500))


def _rq_how() -> str:
    return (f"one rq.worker.{RQ_WORKER} (a work horse forked per job, as `rq worker` runs) in "
            f"burst mode, RQ's defaults otherwise; database {RQ_DB}, emptied before each run")


def rq(env: BenchEnv, server: Any) -> Measurement:
    """RQ no-op jobs against ``server``: enqueued one at a time, then drained by one worker;
    the worker's jobs/s (figure ``enqueue_per_s``: the enqueueing's rate)."""
    venv: datatypes.FrameworkVenv = env.shared(
        "rq venv", lambda: datatypes.FrameworkVenv("rq", _rq_how(), section="lists"))
    tasks = rq_jobs(env.n)
    rate, enqueue = datatypes.run_framework_child("rq", venv.python, RQ_CHILD, [RQ_WORKER],
                                                  server, RQ_DB, tasks, RQ_TIMEOUT)
    return Measurement(rate, count=tasks, figures={"enqueue_per_s": enqueue},
                       notes=[f"rq, {server.name} (appendfsync {server.appendfsync}): {tasks:,} "
                              f"no-op jobs enqueued at {enqueue:,.0f}/s (one at a time), "
                              f"drained by one {RQ_WORKER} at {rate:,.0f}/s"])


# --- the section's summary -----------------------------------------------------------------------


def summary(results: Sequence[Any], figures: Sequence[Any]) -> Table | None:
    """streamkeep against redis-server, row by row (:func:`.datatypes.section_summary`)."""
    return datatypes.section_summary(results, figures, "lists")


def describe(env: BenchEnv) -> list[str]:
    """How the section runs redis-benchmark (the servers are described by the server section's
    processes, RQ's venv by its own line)."""
    requests = ", ".join(f"{server_requests(env.n, p):,} (-P {p})" for p in PIPELINES)
    return [f"lists: redis-benchmark -c {SERVER_CLIENTS} -n {requests} -r {KEYSPACE:,} "
            f"--dbnum {DB}: " + "; ".join(" ".join(c.argv()) for c in COMMANDS.values())
            + " (RPOP's list prepared with more elements than the pops and checked not empty "
            "after, LRANGE's with -n (at least "
            f"{LRANGE_MIN}) elements, as redis-benchmark's own LRANGE tests prepare it; each "
            "before every run), the same against streamkeep serve and redis-server (AOF "
            "everysec both); requests/s as redis-benchmark reports them; rq: "
            f"{rq_jobs(env.n):,} no-op jobs per run against another streamkeep serve "
            "and redis-server, appendfsync always both"]
