"""A pydocket worker pool on a controller-managed streamkeep cluster loses no task while the
cluster changes under it: a real etcd, `streamkeep cluster controller`, three primaries with a
replica each; six dockets (two on each primary's slots: pydocket's cluster mode keeps a docket
under one hash tag), a few hundred tasks, three worker processes each serving every docket;
meanwhile a primary SIGKILLed (the controller fails it over; restarted on its directory it
comes back a replica), a replica replaced (`remove-node`, then a fresh node `add-node
--replica-of`), and a new empty primary added and `rebalance` run, its slots moving while the
workers use them. Every task runs at least once (pydocket is at-least-once: a run whose
acknowledgement a change cut off runs again once its redelivery timeout has passed), and no
worker process ends.

redis-py's cluster client cannot follow ASK to a node its slot map does not name, the new
primary while its first slots move (CLUSTER SLOTS lists no empty primary, on Redis as here):
it raises AttributeError, which pydocket's worker does not take for Redis trouble. The
program's worker would start over then with a new client; a controller's moves are atomic
(the source serves the slots until the switch, then MOVED), so the test asserts none did.

pydocket runs in the `pydocket-cluster` framework suite's venv (tools/frameworks.py), as
child processes of tests/support/docket_pool_app.py; each run appends a line to a file, so the
count does not depend on what the cluster kept."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.tools import temporaries
from tests.support.controlled_cluster import (
    Controllers,
    address,
    pydocket_python,
    role,
    wait_until,
)
from tests.support.etcd import etcd  # noqa: F401  (the fixture)
from tests.support.serve_process import spawner

pytestmark = [pytest.mark.redis, pytest.mark.timeout(240)]

TIMEOUT_MS = "1000"  # cluster-node-timeout: a failover within a few seconds
TASKS = 300
WORKERS = 3
EDGE = 300  # a docket's slot is this near one end of its primary's range: one end moves
PROGRAM = str(Path(__file__).resolve().parents[1] / "support" / "docket_pool_app.py")
STOP_SECONDS = 10.0  # a worker told to stop (SIGTERM) has this long, then SIGKILL
NODE_ARGS = ("--cluster-enabled", "yes", "--cluster-node-timeout", TIMEOUT_MS,
             "--appendfsync", "always")


def slot_owners(server: Any) -> dict[int, int]:
    """slot -> the port of the primary serving it, as `server`'s CLUSTER SLOTS says."""
    owners = {}
    for start, end, primary, *_ in server.client().execute_command("CLUSTER", "SLOTS"):
        for slot in range(int(start), int(end) + 1):
            owners[slot] = int(primary[1])
    return owners


def docket_names(ranges: list[tuple[int, int]]) -> list[str]:
    """Two docket names per primary: one whose slot is near the start of its range, one near
    its end (rebalance takes a primary's slots from one end)."""
    names: list[str] = []
    for start, end in ranges:
        for low, high in ((start, start + EDGE), (end - EDGE, end)):
            names.append(next(f"pool-{i}" for i in range(100_000)
                              if low <= key_slot(f"pool-{i}".encode()) <= high
                              and f"pool-{i}" not in names))
    return names


def ranges_of(owners: dict[int, int]) -> list[tuple[int, int]]:
    by_port: dict[int, list[int]] = {}
    for slot, port in owners.items():
        by_port.setdefault(port, []).append(slot)
    return [(min(slots), max(slots)) for slots in by_port.values()]


def replicas_caught_up(primary: Any) -> Any:
    """A predicate: every replica of `primary` has what it had when this was called."""
    target = int(primary.client().execute_command("ROLE")[1])

    def caught_up() -> bool:
        _, _, replicas = primary.client().execute_command("ROLE")
        return bool(replicas) and all(int(r[2]) >= target for r in replicas)
    return caught_up


def run_times(directory: Path) -> dict[tuple[str, int], list[float]]:
    """(docket, n) -> when each of its runs ended (time.time())."""
    times: dict[tuple[str, int], list[float]] = {}
    for log in directory.glob("runs-*.log"):
        for line in log.read_text().splitlines():
            docket, n, _worker, at = line.split()
            times.setdefault((docket, int(n)), []).append(float(at))
    return times


def runs(directory: Path) -> Counter[tuple[str, int]]:
    return Counter({task: len(at) for task, at in run_times(directory).items()})


def restarts(directory: Path, why: str) -> Counter[str]:
    """docket -> how many times one of its workers started over for `why` ("ask" or
    "connect": docket_pool_app.py)."""
    log = directory / "restarts.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(docket for _worker, docket, kind, _at in map(str.split, lines)
                   if kind == why)


def test_a_docket_pool_loses_no_task_while_the_cluster_changes(etcd: Any) -> None:  # noqa: F811
    python = pydocket_python()
    start, stop_servers = spawner()
    controllers = Controllers(etcd.url, "docket-pool")
    workers: list[subprocess.Popen[bytes]] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sk-docket-pool-") as tmp:
        root = Path(tmp)
        try:
            scenario(python, start, controllers, workers, root)
        finally:
            for worker in workers:  # (SIGTERM: pydocket's own shutdown, then SIGKILL)
                temporaries.end_child(worker, STOP_SECONDS, signal.SIGTERM)
            controllers.close()
            stop_servers()
    print(f"  {time.monotonic() - began:.0f} s in all")


def scenario(python: str, start: Any, controllers: Controllers,
             workers: list[subprocess.Popen[bytes]], root: Path) -> None:
    servers = [start(root / f"n{i}", *NODE_ARGS) for i in range(8)]
    initial, spare_replica, spare_primary = servers[:6], servers[6], servers[7]
    controllers.start("c1")
    controllers.run("create", "--replicas", "1", *map(address, initial))
    primaries = [s for s in initial if role(s) == b"master"]
    assert len(primaries) == 3
    owners = slot_owners(primaries[0])
    names = docket_names(ranges_of(owners))
    # The clients' one startup node is a primary that is never killed: a client made again
    # while the victim is down (a worker's Docket after an error) must reach the cluster.
    steady = next(p for p in primaries if p.port != owners[key_slot(names[0].encode())])
    url = f"redis+cluster://127.0.0.1:{steady.port}"
    run_dir = root / "runs"
    run_dir.mkdir()

    produced = subprocess.run([python, "-I", PROGRAM, "produce", url, str(run_dir),
                               ",".join(names), str(TASKS)],
                              capture_output=True, text=True, timeout=120, check=False)
    assert produced.returncode == 0, produced.stderr
    assert int(produced.stdout) == TASKS
    # What the producer was told was written is on every replica before a primary is killed
    # (without WAIT, a write a primary acknowledged alone may die with it, as on Redis).
    for primary in primaries:
        wait_until(replicas_caught_up(primary), what="the replicas catching up")

    logs = [root / f"worker-{i}.log" for i in range(WORKERS)]
    for i, log in enumerate(logs):
        with open(log, "wb") as out:  # (the child holds its own descriptor)
            workers.append(subprocess.Popen(
                [python, "-I", PROGRAM, "work", url, str(run_dir), ",".join(names),
                 f"worker-{i}"], stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                **temporaries.child_options()))
    wait_until(lambda: len(runs(run_dir)) >= TASKS // 10, what="the first runs")

    # 1. A primary SIGKILLed: its replica promoted; the node, back, follows it.
    victim = next(p for p in primaries if p.port == owners[key_slot(names[0].encode())])
    promoted = next(s for s in initial if s not in primaries
                    and int(s.client().execute_command("ROLE")[2]) == victim.port)
    victim_dockets = [n for n in names if owners[key_slot(n.encode())] == victim.port]
    killed_at = time.time()
    victim.kill()
    wait_until(lambda: role(promoted) == b"master", what="the failover")
    ran_at_failover = len(runs(run_dir))
    victim.start()
    wait_until(lambda: role(victim) == b"slave", what="the old primary following")

    # 2. A replica replaced: removed, stopped, a fresh node in its place.
    other = next(p for p in primaries if p is not victim)
    leaving = next(s for s in initial if s is not victim and role(s) == b"slave"
                   and int(s.client().execute_command("ROLE")[2]) == other.port)
    controllers.run("remove-node", address(leaving))
    leaving.kill()
    controllers.run("add-node", address(spare_replica), "--replica-of", address(other))
    wait_until(lambda: spare_replica.client().execute_command("ROLE")[3] == b"connected",
               what="the new replica connected")

    # 3. A new primary, and slots moved to it while the workers use them.
    controllers.run("add-node", address(spare_primary))
    ran_before_moves = len(runs(run_dir))
    moves_began = time.time()
    controllers.run("rebalance")
    moves_ended = time.time()
    after = slot_owners(spare_primary)
    moved = sum(1 for port in after.values() if port == spare_primary.port)
    moved_dockets = sorted(n for n in names if after[key_slot(n.encode())] == spare_primary.port)
    assert moved_dockets  # (a docket's slot moved under the workers)

    wait_until(lambda: len(runs(run_dir)) == TASKS, attempts=1200,
               what=f"every one of the {TASKS} tasks running")
    counted = runs(run_dir)
    assert set(counted) == {(names[n % len(names)], n) for n in range(TASKS)}  # none lost
    ended = [log.read_text()[-3000:] for w, log in zip(workers, logs, strict=True)
             if w.poll() is not None]
    assert not ended, ended
    # No worker met an ASK (redis-py cannot follow one to the new primary): the moves are atomic.
    restarted = restarts(run_dir, "ask")
    assert not restarted, restarted
    reconnected = restarts(run_dir, "connect")
    # A task run twice, with when its runs ended, from the kill and from the moves' start.
    twice = [(task, [f"{at - killed_at:+.1f}/{at - moves_began:+.1f}" for at in sorted(ats)])
             for task, ats in sorted(run_times(run_dir).items()) if len(ats) > 1]
    reconnections = sum(log.read_text().count("Redis is unavailable") for log in logs)
    print(f"\n  {TASKS} tasks on {len(names)} dockets, {WORKERS} worker processes: "
          f"{sum(counted.values())} runs, {len(twice)} tasks ran more than once "
          f"(s from the kill/from the moves) {twice[:10]}; 1 failover ({ran_at_failover} tasks "
          f"had run; dockets {victim_dockets}), 1 replica replaced, {moved} slots moved in "
          f"{moves_ended - moves_began:.1f} s ({ran_before_moves} tasks had run; dockets "
          f"{moved_dockets}); "
          f"{sum(restarted.values())} worker restarts after redis-py's ASK failure "
          f"{dict(restarted)}, {sum(reconnected.values())} restarts after a failed connection, "
          f"{reconnections} pydocket reconnections")
