"""Sorted sets, hashes (with field TTLs), sets and Redis Functions across SIGKILLs of a real
`streamkeep serve`.

The crash bench's `types` workload (tools/crashbench/types_workload.py: ZADD / ZINCRBY / ZREM /
ZPOPMIN, HSET / HINCRBY / HDEL / HPEXPIRE / HPEXPIREAT, SADD / SREM / SPOP / SMOVE, and FCALL
of a library it loads first, whose functions write a sorted set, a hash and a set in one call)
runs over one connection while the server is SIGKILLed at a seeded random moment, round after
round on one data directory (every other kill during or just after a compaction). After each restart the bench's checker (tools/crashbench/
invariants.py, one model for the bench and these tests) judges the state read in one MULTI:
it must be the model's state after some prefix of the acknowledged history, possibly plus the
command in flight, whole (an SPOP's members, a function's three writes: all or none), and no
acknowledged write may be missing. A process crash keeps the page cache, and the AOF writes a
record before its reply leaves, so that holds under `always`, `everysec` and `no` alike.

A second test kills the server with hash fields whose TTLs pass while it is down: after the
restart they are gone (a hash left with no field is gone too), and the fields whose TTLs have
not passed keep them, at the same absolute time.
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
from streamkeep.tools.crashbench.model import read_state
from streamkeep.tools.crashbench.target import ConnectionLost
from streamkeep.tools.crashbench.types_workload import TypesWorkload
from tests.support.expiry_ledger import now_ms
from tests.support.replication_util import wait_for
from tests.support.serve_process import ServeProcess

Spawn = Callable[..., ServeProcess]


class Driver(threading.Thread):
    """The workload on one connection until the server dies under it (or `stop`)."""

    def __init__(self, server: ServeProcess, workload: TypesWorkload, checker: Checker) -> None:
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


def crash_rounds(spawn: Spawn, datadir: Path, policy: str, seed: int, rounds: int) -> int:
    """`rounds` kills at random moments of the workload (every other one during or just after
    a BGREWRITEAOF), each judged after the restart; the operations acknowledged in all."""
    rng = random.Random(f"types-sigkill:{seed}:{policy}")
    # Small segments: rotations happen within the rounds.
    args = ("--appendfsync", policy, "--aof-segment-max-bytes", "16384")
    checker = Checker(policy, workload="types")
    workload = TypesWorkload(seed)
    server = spawn(datadir, *args)
    acked = 0
    for n in range(rounds):
        driver = Driver(server, workload, checker)
        driver.start()
        driver.join(rng.uniform(0.05, 0.8))
        if n % 2:  # a compaction (a snapshot of every type) under way or just done
            with server.client() as c:
                c.bgrewriteaof()
            time.sleep(rng.uniform(0.0, 0.3))
        server.kill()
        driver.join()
        acked += driver.acked
        before = len(checker.lineage)
        server = spawn(datadir, *args)
        with server.target() as target:
            state = read_state(target, "types")
        verdict = checker.recovered(state, time.monotonic(), driver.in_flight)
        where = f"seed {seed}, {policy}, round {n}, {before} acknowledged"
        assert not verdict.violations, f"{where}: {verdict.violations}"
        assert verdict.prefix is not None and verdict.prefix >= before, where
    server.kill()
    assert acked > 0
    return acked


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_sigkill_keeps_every_acknowledged_type_write(spawn: Spawn, tmp_path: Path,
                                                     policy: str) -> None:
    crash_rounds(spawn, tmp_path / "data", policy, 1, 2)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
@pytest.mark.parametrize("seed", range(2, 5))
def test_sigkill_keeps_every_acknowledged_type_write_soak(spawn: Spawn, tmp_path: Path,
                                                          policy: str, seed: int) -> None:
    crash_rounds(spawn, tmp_path / "data", policy, seed, 8)


def test_hash_fields_whose_ttl_passed_while_down_are_gone_after_restart(
        spawn: Spawn, tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    c.hset("h", mapping={f"f{i}": f"v{i}" for i in range(8)})
    c.hset("gone", mapping={"a": "1", "b": "2"})
    short = ["f0", "f1", "f2"]
    assert c.execute_command("HPEXPIRE", "h", 1200, "FIELDS", 3, *short) == [1, 1, 1]
    assert c.execute_command("HPEXPIREAT", "h", now_ms() + 1300, "FIELDS", 1, "f3") == [1]
    assert c.execute_command("HPEXPIRE", "gone", 1200, "FIELDS", 2, "a", "b") == [1, 1]
    assert c.execute_command("HPEXPIRE", "h", 3_600_000, "FIELDS", 1, "f4") == [1]
    assert c.execute_command("HPEXPIREAT", "h", 4_000_000_000_000, "FIELDS", 1, "f5") == [1]
    fields = [f"f{i}" for i in range(8)]
    expiries = dict(zip(fields, c.execute_command("HPEXPIRETIME", "h", "FIELDS", 8, *fields),
                        strict=True))
    c.close()
    server.kill()
    # None passed before the kill (a machine too slow for that would make the test vacuous).
    soonest = min(expiries[f] for f in [*short, "f3"])
    assert soonest > now_ms(), "the TTLs passed before the kill"
    last = max(expiries[f] for f in [*short, "f3"])
    while now_ms() <= last + 50:  # the short TTLs pass while the server is down
        time.sleep(0.05)

    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    assert c.hgetall("h") == {f"f{i}".encode(): f"v{i}".encode() for i in range(4, 8)}
    for name in [*short, "f3"]:
        assert c.hget("h", name) is None, name
    kept = c.execute_command("HPEXPIRETIME", "h", "FIELDS", 8, *fields)
    assert kept == [-2, -2, -2, -2, expiries["f4"], 4_000_000_000_000, -1, -1]
    assert c.hget("gone", "a") is None
    wait_for(lambda: c.exists("gone") == 0, 30, "the emptied hash deleted")
    wait_for(lambda: c.hlen("h") == 4, 30, "the expired fields deleted")
    c.close()
    server.kill()
    # What the restart deleted stays deleted, and the TTLs stay where they were.
    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    assert c.hlen("h") == 4 and c.exists("gone") == 0
    assert c.execute_command("HPEXPIRETIME", "h", "FIELDS", 2, "f4", "f5") == [
        expiries["f4"], 4_000_000_000_000]
    c.close()
    server.kill()
