"""A reliable queue on lists across SIGKILLs of a real `streamkeep serve`.

The crash bench's `lists` workload (tools/crashbench/lists_workload.py: a producer LPUSHes
unique jobs to two queues, a consumer moves them to a processing list with BLMOVE (a short
timeout), LMOVE and RPOPLPUSH and acknowledges each with an LREM from it, a reaper moves jobs
back, a batch consumer takes some with LPOP / RPOP COUNT, and a log of finished jobs is kept
by LPUSH, LTRIM, LSET and LINSERT) runs over one connection while the server is SIGKILLed at a
seeded random moment, round after round on one data directory (every other kill during or just
after a compaction). The kill's random delay counts from the round's first acknowledged write:
on a busy machine connecting alone can take longer than the delay drawn. After each restart the
bench's checker (tools/crashbench/invariants.py, one model for the bench and these tests)
judges the lists read in one MULTI: they must be the model's after some prefix of the
acknowledged history, possibly plus the command in flight, no acknowledged write may be
missing, and the jobs' own accounting (kept from the replies) must hold: no job in a queue and
in processing at once or stored twice, none in neither unless acknowledged done. A process crash
keeps the page cache, and the AOF writes a record before its reply leaves, so that holds under
`always`, `everysec` and `no` alike.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.lists_workload import JOB_KEYS, ListsWorkload, job_of
from streamkeep.tools.crashbench.model import lists_part, read_state
from streamkeep.tools.crashbench.target import ConnectionLost
from tests.support.serve_process import ServeProcess

Spawn = Callable[..., ServeProcess]


class Driver(threading.Thread):
    """The workload on one connection until the server dies under it (or `stop`)."""

    def __init__(self, server: ServeProcess, workload: ListsWorkload, checker: Checker) -> None:
        super().__init__(daemon=True)
        self.target = server.target()
        self.workload, self.checker = workload, checker
        self.stop = threading.Event()
        self.in_flight: list[bytes] | None = None
        self.acked = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                step(self.target, self.workload, self.checker, time.monotonic())
                self.acked += 1
        except ConnectionLost as lost:
            self.in_flight = lost.in_flight
        finally:
            self.target.close()

    def first_acked(self, timeout: float = 30.0) -> None:
        """Wait for the round's first acknowledged write (or the driver's end)."""
        deadline = time.monotonic() + timeout
        while not self.acked and self.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)


def crash_rounds(spawn: Spawn, datadir: Path, policy: str, seed: int, rounds: int) -> int:
    """`rounds` kills at random moments of the workload (every other one during or just after
    a BGREWRITEAOF), each judged after the restart; the operations acknowledged in all."""
    rng = random.Random(f"lists-sigkill:{seed}:{policy}")
    # Small segments: rotations happen within the rounds.
    args = ("--appendfsync", policy, "--aof-segment-max-bytes", "16384")
    checker = Checker(policy, workload="lists")
    workload = ListsWorkload(seed)
    server = spawn(datadir, *args)
    acked = 0
    for n in range(rounds):
        driver = Driver(server, workload, checker)
        driver.start()
        driver.first_acked()
        driver.join(rng.uniform(0.05, 0.8))
        if n % 2:  # a compaction (a snapshot of the lists) under way or just done
            with server.client() as c:
                c.bgrewriteaof()
            time.sleep(rng.uniform(0.0, 0.3))
        server.kill()
        driver.join()
        acked += driver.acked
        before = len(checker.lineage)
        server = spawn(datadir, *args)
        with server.target() as target:
            state = read_state(target, "lists")
        verdict = checker.recovered(state, time.monotonic(), driver.in_flight)
        where = (f"seed {seed}, {policy}, round {n}, {before} acknowledged, in flight "
                 f"{driver.in_flight!r:.120}")
        assert not verdict.violations, f"{where}: {verdict.violations}"
        assert verdict.prefix is not None and verdict.prefix >= before, where
        # The jobs are where the ledger says: each once, in a queue or in processing.
        jobs = [value for key, elements in lists_part(state)[1] if key in JOB_KEYS
                for value in elements]
        assert len(jobs) == len(set(jobs)) == checker.live[-1], where
        assert all(job_of(value) is not None for value in jobs), where
    server.kill()
    assert acked > 0
    return acked


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_sigkill_keeps_every_acknowledged_job(spawn: Spawn, tmp_path: Path, policy: str) -> None:
    crash_rounds(spawn, tmp_path / "data", policy, 1, 2)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
@pytest.mark.parametrize("seed", range(2, 5))
def test_sigkill_keeps_every_acknowledged_job_soak(spawn: Spawn, tmp_path: Path, policy: str,
                                                    seed: int) -> None:
    crash_rounds(spawn, tmp_path / "data", policy, seed, 8)


def test_a_consumer_blocked_in_blmove_when_killed_loses_no_job(spawn: Spawn,
                                                               tmp_path: Path) -> None:
    """A consumer blocked in BLMOVE on an empty queue (no timeout) when the server dies leaves
    no trace: after the restart the job it moved before is in processing, once, and the
    queue is empty; moves after the restart are kept as well."""
    datadir = tmp_path / "data"
    server = spawn(datadir, "--appendfsync", "always")
    producer = server.client()
    producer.lpush("q", "a")
    consumer = server.client()
    assert consumer.blmove("q", "processing", 0, "RIGHT", "LEFT") == b"a"
    blocked = threading.Thread(target=_blmove_until_dead, args=(server,), daemon=True)
    blocked.start()
    deadline = time.monotonic() + 30
    while int(producer.info("clients")["blocked_clients"]) < 1:
        assert time.monotonic() < deadline, "the consumer never blocked"
        time.sleep(0.01)
    producer.close()
    consumer.close()
    server.kill()
    blocked.join(30)
    assert not blocked.is_alive()
    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    assert c.lrange("q", 0, -1) == [] and c.lrange("processing", 0, -1) == [b"a"]
    c.lpush("q", "b")
    assert c.lmove("q", "processing", "RIGHT", "LEFT") == b"b"
    c.close()
    server.kill()
    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    assert c.exists("q") == 0 and c.lrange("processing", 0, -1) == [b"b", b"a"]
    c.close()
    server.kill()


def _blmove_until_dead(server: ServeProcess) -> None:
    """BLMOVE on an empty queue with no timeout: returns when the server dies under it."""
    c = server.client()
    try:
        c.blmove("q", "processing", 0, "RIGHT", "LEFT")
    except Exception:  # the connection dropped: the kill
        pass
    finally:
        c.close()
