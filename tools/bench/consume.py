"""The ``consume`` section: the path a message travels through a consumer group, measured
against an older checkout (``--before DIR``).

Owns its rows and how they compare; the workloads are ``nodes_child.py``'s, run in child
processes under this checkout's interpreter and the other's alternately (``nodes.versus``):
- ``consume.embedded``: XREADGROUP COUNT 100 + XACK until drained, in memory;
- ``consume.queue_batch``: StreamQueue put_many(100) + get(100) + ack, appendfsync everysec,
  on a fresh data dir each run;
- ``consume.catchup``: the backlog section's data set (a group three quarters behind, each
  checkout's own build, made once per run) copied afresh for each run, opened with
  backlog-memory 128mb, and the group's catch-up (XREADGROUP COUNT 100 + XACK) timed.
Must not touch: the engine (it only runs it), the registry, other checkouts' files (their data
dirs live in this run's temp dirs).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from streamkeep.tools import temporaries
from streamkeep.tools.bench.nodes import Built, bytecode, child, versus
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

BACKLOG_PER_N = 100  # entries of the catch-up's backlog: 20M at the default N
CATCHUP_PER_N = 5  # entries the group catches up on per run: 1M at the default N


def backlog_entries(env: BenchEnv) -> int:
    return max(env.n * (4 if env.quick else BACKLOG_PER_N), 10_000)


def catchup_entries(env: BenchEnv) -> int:
    return min(env.n * CATCHUP_PER_N, backlog_entries(env) * 3 // 4)


def describe(env: BenchEnv) -> list[str]:
    other = env.others.get("before", "none given (no ratios)")
    return [f"consume: each row in child processes, this checkout and --before ({other}) "
            f"alternately, 3 runs each, ratio this/before per run; catch-up of "
            f"{catchup_entries(env):,} entries over a {backlog_entries(env):,}-entry backlog "
            f"(backlog-memory 128mb)"]


def embedded(env: BenchEnv) -> Measurement:
    return versus(env, "consume.embedded", "before",
                  lambda python: child(python, "consume", env.n, cache=bytecode(env)))


def queue_batch(env: BenchEnv) -> Measurement:
    def run(python: str) -> dict:
        with env.data_dir("consume-queue") as path:
            return child(python, "queue_batch", env.n, path, cache=bytecode(env))
    return versus(env, "consume.queue_batch", "before", run)


class _Scratch:
    """A run's directory for the catch-up's copies of the data sets."""

    def __init__(self) -> None:
        self.root = temporaries.temp_directory_path("bench-consume")

    def describe(self) -> list[str]:
        return []

    def stop(self) -> None:
        temporaries.remove(self.root)


def catchup(env: BenchEnv) -> Measurement:
    built: Built = env.shared("consume backlogs",
                              lambda: Built(backlog_entries(env), workload="build_backlog"))
    scratch: _Scratch = env.shared("consume scratch", _Scratch)

    def run(python: str) -> dict:
        copy = os.path.join(scratch.root, "data")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(built.path(python), copy)
        try:
            return child(python, "catchup", catchup_entries(env), copy, cache=bytecode(env))
        finally:
            shutil.rmtree(copy, ignore_errors=True)
    return versus(env, "consume.catchup", "before", run)
