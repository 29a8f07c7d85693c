"""The crash bench's SIGKILL mode: a real server process killed at chosen moments, restarted,
and judged after each kill, round after round on the same data directory.

Owns the rounds. A driver thread runs the workload over a `RespTarget` (each acknowledged
reply goes to the `invariants.Checker`; the command in flight when the connection drops is the
unknown one), while a kill moment (`moments`) SIGKILLs the server: at a random point of the
workload, during a compaction (BGREWRITEAOF), the moment a segment rotates (streamkeep, tiny
segments), during recovery itself (killed again while it replays, then started), or during a
replica's sync (a streamkeep replica, the replica or the primary killed; the replica must then
hold a prefix of the primary's history), or a primary that lost its tail (restarted from an
older copy of its directory and written to: its replica, ahead on another history, must sync
in full). The server is started again and the state it
recovered is judged; the workload goes on from it. The same rounds run against redis-server
(`--target redis-server`, its own AOF with the same policy), so the report puts both side by
side. A process crash keeps the page cache: what a server wrote before it replied survives.
Must not touch: the checks (invariants), how servers start (tools.servers), the workload.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any

from streamkeep.tools.crashbench import moments
from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker, Violation
from streamkeep.tools.crashbench.model import read_state
from streamkeep.tools.crashbench.report import Found, Row, timeline
from streamkeep.tools.crashbench.target import ConnectionLost
from streamkeep.tools.crashbench.workloads import AnyWorkload, new_workload
from streamkeep.tools.servers import (
    RedisServer,
    ServerFailed,
    ServerProcess,
    StreamkeepServer,
    kill_all,
)

STREAMKEEP_MOMENTS = ("workload", "compaction", "rotation", "recovery", "replica",
                      "primary-rollback")
REDIS_MOMENTS = ("workload", "compaction", "recovery")
SEGMENT_MAX_BYTES = 32 << 10
DEFAULT_ROUNDS = 10

Progress = Callable[[str, int, int], None]


class Driver(threading.Thread):
    """Runs the workload on one connection until the connection drops or `stop` is set."""

    def __init__(self, server: ServerProcess, workload: AnyWorkload, checker: Checker,
                 started: float) -> None:
        super().__init__(daemon=True)
        self.target = server.target()
        self.workload = workload
        self.checker = checker
        self.started = started
        self.stop = threading.Event()
        self.in_flight: list[bytes] | None = None
        self.acked = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                step(self.target, self.workload, self.checker, time.monotonic() - self.started)
            except ConnectionLost as lost:
                self.in_flight = lost.in_flight
                return
            self.acked += 1
        self.target.close()


def rows(policy: str, target: str, seed: int, points: int | None, seconds: float | None,
         progress: Progress | None = None, workload: str = "streams") -> list[Row]:
    """The rounds of one policy against one target (see the module docstring), running the
    workload named `workload` (WORKLOADS; redis-server 7.0 has no hash field expiry, so it
    runs the streams and lists ones only)."""
    from streamkeep.tools import temporaries
    from streamkeep.tools.crashbench.runs import mode_label, scratch_root

    if target == "redis-server" and workload == "types":
        raise ValueError(f"--workload {workload}: --target redis-server runs the lists or the "
                         f"streams workload only (its hash fields have no TTLs)")
    root = scratch_root(None)
    row = Row(policy, mode_label("sigkill", workload), "process crash", target=target)
    rounds = points or (None if seconds else DEFAULT_ROUNDS)
    try:
        _rounds(row, policy, target, seed, rounds, seconds, root, progress, workload)
    finally:
        kill_all()  # a replica a moment was starting when an exception (Ctrl-C) came, too
        temporaries.remove(root)
    return [row]


def _server(target: str, directory: str, policy: str) -> ServerProcess:
    if target == "redis-server":
        return RedisServer(directory, appendfsync=policy)
    # Small segments and a low compaction threshold: rotations and compactions happen within
    # a round, besides the ones the moments ask for.
    return StreamkeepServer(directory, appendfsync=policy, segment_max_bytes=SEGMENT_MAX_BYTES,
                            config=("auto-aof-rewrite-min-size 256kb",
                                    "auto-aof-rewrite-percentage 100"))


def _rounds(row: Row, policy: str, target: str, seed: int, rounds: int | None,
            seconds: float | None, root: str, progress: Progress | None,
            workload_name: str = "streams") -> None:
    directory = os.path.join(root, "data")
    os.makedirs(directory)
    server = _server(target, directory, policy)
    checker = Checker(policy, workload=workload_name)
    workload = new_workload(workload_name, seed)
    rng = random.Random(f"crashbench-sigkill:{seed}:{policy}:{target}")
    kinds = REDIS_MOMENTS if target == "redis-server" else STREAMKEEP_MOMENTS
    started = time.monotonic()
    server.start()
    replica: ServerProcess | None = None
    n = 0
    try:
        while (rounds is None or row.covered < rounds) and row.reached < 3 * (rounds or 10**9):
            if seconds is not None and time.monotonic() - started > seconds:
                break
            moment = kinds[n % len(kinds)]
            n += 1
            row.reached += 1
            if moment == "primary-rollback":
                replica = _rollback_round(row, server, checker, workload, rng, started, seed, n,
                                          root, replica)
            else:
                replica = _round(row, server, checker, workload, rng, moment, started, seed, n,
                                 root, replica)
            if progress is not None:
                progress(f"{target} {policy} sigkill", row.covered, rounds or row.covered)
    finally:
        server.kill()
        if replica is not None:
            replica.kill()
        row.seconds = time.monotonic() - started


def _round(row: Row, server: ServerProcess, checker: Checker, workload: AnyWorkload,
           rng: random.Random, moment: str, started: float, seed: int, n: int, root: str,
           replica: ServerProcess | None) -> ServerProcess | None:
    driver = Driver(server, workload, checker, started)
    driver.start()
    what = ""
    try:
        if moment == "workload" or moment == "recovery":
            what = moments.kill_during_workload(server, driver, rng, max_delay=1.0)
        elif moment == "compaction":
            driver.join(rng.uniform(0.1, 0.5))  # some data first
            what = moments.kill_during_compaction(server, rng)
        elif moment == "rotation":
            assert isinstance(server, StreamkeepServer)
            what = moments.kill_during_rotation(server, driver, rng)
        elif moment == "replica":
            assert isinstance(server, StreamkeepServer)
            if replica is not None:
                replica.kill()
            victim = rng.choice(("replica", "primary"))
            replica_dir = os.path.join(root, f"replica-{n}")
            replica, what = moments.kill_during_replica_sync(server, replica_dir, rng,
                                                            victim=victim)
    except moments.MomentMissed as missed:
        driver.stop.set()
        driver.join()
        row.acked += driver.acked
        row.recoveries["moment missed"] += 1  # no crash happened: not a point
        del missed
        if not server.alive:
            server.start()
        return replica
    crash_at = time.monotonic() - started
    row.acked += driver.acked
    if server.alive:  # the replica was the victim: the primary's workload stops here
        driver.stop.set()
    driver.join()
    in_flight = driver.in_flight if not server.alive else None
    recovery_s = 0.0
    try:
        if not server.alive:
            if moment == "recovery":
                what += "; " + kill_during_recovery(server, rng)
            else:
                began = time.monotonic()
                server.start()
                recovery_s = time.monotonic() - began
    except ServerFailed as err:
        _violation(row, checker.violation("recovery", f"the server did not come back: {err}"),
                   moment, what, n, seed)
        return replica
    acked_before = len(checker.lineage)
    with server.target() as target:
        state = read_state(target, checker.workload)
    verdict = checker.recovered(state, crash_at, in_flight)
    for v in verdict.violations:
        _violation(row, v, moment, what, n, seed, add=False, in_flight=in_flight,
                   expected=_expected(checker.policy, acked_before),
                   recovered=_recovered(verdict))
    row.add("restarted", driver.acked, verdict.lost_acked, verdict.loss_window_s,
            verdict.violations, recovery_s, dir_bytes(server.data_dir), at_s=crash_at,
            where=f"round {n} ({moment}: {what})", seed=seed, op=acked_before)
    _sample(row, checker, seed)
    if moment == "replica" and replica is not None:
        _check_replica(row, server, replica, checker, moment, what, n, seed)
        row.link_late(since=len(row.points) - 1)
    return replica


def _expected(policy: str, acked: int) -> str:
    from streamkeep.tools.crashbench.runs import expected

    return expected(policy, acked)


def _recovered(verdict: Any) -> str:
    if verdict.prefix is None:
        return "a state that is no prefix of the history (the violation says how it differs)"
    return (f"the state after {verdict.prefix} operations"
            + (f", {verdict.lost_acked} acknowledged one(s) lost" if verdict.lost_acked
               else ""))


def _sample(row: Row, checker: Checker, seed: int) -> None:
    """The rounds' timeline so far (one run: the operations acknowledged, over time)."""
    row.timelines[str(seed)] = timeline([op.acked_at or 0.0 for op in checker.lineage])


def kill_during_recovery(server: ServerProcess, rng: random.Random,
                         recovery_seconds: float | None = None) -> str:
    """The second kill of a recovery round, while the server recovers from the first
    (moments.kill_during_recovery). When the recovery ends before the kill can land (how long it
    takes depends on the machine's load), the server is up all the same: the round is judged as
    a plain restart, and says so."""
    try:
        return moments.kill_during_recovery(server, rng, recovery_seconds)
    except moments.MomentMissed as missed:
        if not server.alive:
            server.start()
        return f"restarted; the kill during its recovery missed ({missed})"


def _rollback_round(row: Row, primary: ServerProcess, checker: Checker, workload: AnyWorkload,
                    rng: random.Random, started: float, seed: int, n: int, root: str,
                    replica: ServerProcess | None) -> ServerProcess | None:
    """A primary that lost its tail (a power loss that took more than the policy allows, or a
    restore from a backup): its directory is copied while it is idle, the workload runs on (a
    caught-up replica receives it), the primary is killed and restarted from the copy, and new
    writes take the lost LSNs over. The replica, ahead of the primary on another history, must
    sync in full and end equal to it: a prefix of the new history, never a mix."""
    assert isinstance(primary, StreamkeepServer)
    what = "the primary restarted from an older copy of its directory, then written to"
    points_before = len(row.points)
    try:
        if replica is None or not replica.alive:
            if replica is not None:
                replica.kill()
            replica = StreamkeepServer(os.path.join(root, f"replica-{n}"),
                                       replicaof=primary.port, appendfsync=primary.appendfsync)
            replica.start()
        moments.wait_caught_up(primary, replica)
        backup = os.path.join(root, f"backup-{n}")
        shutil.copytree(primary.data_dir, backup, ignore=shutil.ignore_patterns("LOCK"))
        driver = Driver(primary, workload, checker, started)
        driver.start()
        driver.join(rng.uniform(0.1, 0.4))
        driver.stop.set()
        driver.join()
        row.acked += driver.acked
        moments.wait_caught_up(primary, replica)  # the replica holds the tail about to go
        primary.kill()
        shutil.rmtree(primary.data_dir)
        shutil.move(backup, primary.data_dir)
        primary.start()
        with primary.target() as target:
            state = read_state(target, checker.workload)
        # The tail is gone by construction, whatever the policy: judged as `no` (any prefix),
        # and the lineage goes on from the older state.
        policy, checker.policy = checker.policy, "no"
        try:
            verdict = checker.recovered(state, time.monotonic() - started)
        finally:
            checker.policy = policy
        row.add("restarted", driver.acked, 0, 0.0, verdict.violations, 0.0,
                dir_bytes(primary.data_dir), at_s=time.monotonic() - started,
                where=f"round {n} (primary-rollback: {what})", seed=seed,
                op=len(checker.lineage))
        driver = Driver(primary, workload, checker, started)
        driver.start()
        driver.join(rng.uniform(0.05, 0.2))  # other records under the lost LSNs
        driver.stop.set()
        driver.join()
        row.acked += driver.acked
        moments.wait_caught_up(primary, replica)
        with replica.target() as target:
            v = checker.replica_state(read_state(target, checker.workload), "the replica after the primary's "
                                                          "rollback")
        if v is not None:
            _violation(row, v, "primary-rollback", what, n, seed, add=False)
            row.violations[v.invariant] += 1
        # The restarted primary counts from 0: the replica's full sync is its only one.
        if int(primary.info("stats").get("sync_full", "0")) < 1:
            _violation(row, checker.violation(
                "replica", "the replica ahead of the rolled-back primary did not sync in "
                           "full"), "primary-rollback", what, n, seed)
    except (ServerFailed, moments.ReplicaBehind, ConnectionLost) as err:
        _violation(row, checker.violation("replica", f"{what}: {err}"), "primary-rollback",
                   what, n, seed)
    row.link_late(since=points_before)
    return replica


def _check_replica(row: Row, primary: ServerProcess, replica: ServerProcess, checker: Checker,
                   moment: str, what: str, n: int, seed: int) -> None:
    """After the kill: the replica (started again if it was the victim) must hold a prefix of
    the primary's history, and catch up with it."""
    try:
        if not replica.alive:
            replica.start()
        with replica.target() as target:
            early = read_state(target, checker.workload)
        v = checker.replica_state(early, "the replica after the kill")
        if v is not None:
            _violation(row, v, moment, what, n, seed)
        moments.wait_caught_up(primary, replica)
        with replica.target() as target:
            v = checker.replica_state(read_state(target, checker.workload), "the replica once caught up")
        if v is not None:
            _violation(row, v, moment, what, n, seed)
    except (ServerFailed, moments.ReplicaBehind, ConnectionLost) as err:
        _violation(row, checker.violation("replica", f"the replica: {err}"), moment, what, n,
                   seed)


def _violation(row: Row, v: Violation, moment: str, what: str, n: int, seed: int,
               add: bool = True, in_flight: list[bytes] | None = None, expected: str = "",
               recovered: str = "") -> None:
    from streamkeep.tools.crashbench.runs import token_suffix, workload_of

    if add:
        row.violations[v.invariant] += 1
    shown = " ".join(a.decode(errors="replace") for a in in_flight) if in_flight else ""
    row.found.append(Found(v.invariant, f"round {n} ({moment}: {what}): {v.detail}",
                           f"sigkill:{row.target}:{row.policy}:{seed}:{n}"
                           f"{token_suffix(workload_of(row.mode))}",
                           in_flight=shown[:200], expected=expected, recovered=recovered))


def dir_bytes(directory: str) -> int:
    """The bytes of the files under `directory` (the data a restart recovers from)."""
    total = 0
    for base, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):  # removed by a compaction meanwhile
                total += os.path.getsize(os.path.join(base, name))
    return total
