"""Simulated power loss with a reliable queue on lists.

The crash bench's `lists` workload (tools/crashbench/lists_workload.py: LPUSH of unique jobs,
BLMOVE / LMOVE / RPOPLPUSH to a processing list, LREM to acknowledge, LPOP / RPOP COUNT, and a
log of finished jobs under LTRIM, LSET and LINSERT) runs in process on a TrackingFS
(tools/crashbench/faultfs.py, as tests/crash/test_types_powerloss.py uses it) that cuts the power
at its N-th mutating file operation, after a compaction (a snapshot of the lists) has run:
recovery loads the snapshot and replays the AOF after it (a power cut inside a compaction is the
bench's exhaustive mode's, run bounded below). The disk a power loss leaves is then materialised
under each tail kind (the unsynced bytes gone, all there, a part, zeros, garbage) and reopened
on the real file system. The bench's checker judges what came back: under `always` every
acknowledged write is there and the lists are the model's after the acknowledged prefix, or
that plus the command in flight applied whole (a push of several jobs, a move); under
`everysec` and `no`, some prefix, nothing half-applied; and under every policy the jobs'
accounting kept from the replies holds (no job in a queue and in processing at once, none
stored twice, none in neither unless acknowledged done). The checker is also shown to catch a
job in two lists, a job gone and an acknowledged write lost, and the bench's exhaustive mode
runs a bounded lists workload with its replay token.
"""

from __future__ import annotations

import math
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.tools.crashbench import powerloss, runs
from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.lists_workload import (
    PROCESSING,
    QUEUES,
    ListsWorkload,
    job,
    job_of,
)
from streamkeep.tools.crashbench.model import (
    LISTS,
    EngineTarget,
    Reference,
    lists_part,
    read_state,
)
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost
from tests.support.faultfs import TAILS, PowerCut, TrackingFS, stop_threads

BASE_TIME = 1_700_000_000_000
COMPACT_AT = 15  # operations before the one compaction


class CutTarget(EngineTarget):
    """The engine as a Target: a power cut during a command (in it, or in the journal's sync
    thread meanwhile) is a reply that never left the machine."""

    def __init__(self, engine: Engine, fs: TrackingFS) -> None:
        super().__init__(engine)
        self.fs = fs

    def execute(self, argv: Sequence[bytes]) -> Any:
        try:
            reply = super().execute(argv)
        except PowerCut as cut:
            raise ConnectionLost("the power went") from cut
        except CommandFailed:
            if self.fs.dead:
                raise ConnectionLost("the power went") from None
            raise
        if self.fs.dead:
            raise ConnectionLost("the power went")
        return reply


@dataclass
class Crash:
    directory: Path
    fs: TrackingFS
    checker: Checker  # every acknowledged operation
    in_flight: list[bytes] | None  # the command the power cut
    cut: bool
    compacted: int  # file operations done when the compaction ended


def crash_run(directory: Path, seed: int, n: int, cut_at: int | None, policy: str) -> Crash:
    fs = TrackingFS(cut_at=cut_at)
    now = [BASE_TIME]
    # No loss window: everysec's one-second bound is a matter of time, and the test judges what
    # comes back, not when (the bench measures the window).
    checker = Checker(policy, window_s=math.inf, workload="lists")
    workload = ListsWorkload(seed)
    engine: Engine | None = None
    in_flight, cut, compacted = None, False, 0
    try:
        engine = Engine.open(str(directory), appendfsync=policy, aof_segment_max_bytes=2000,
                             auto_aof_rewrite_percentage=0, clock=lambda: now[0], fs=fs)
        target = CutTarget(engine, fs)
        for i in range(n):
            now[0] = BASE_TIME + i
            step(target, workload, checker, float(i))
            if i + 1 == COMPACT_AT:
                engine.compact(wait=True)
                compacted = fs.stats.ops
    except ConnectionLost as lost:
        in_flight, cut = lost.in_flight, True
    fs.abandon()  # the process is gone: no close(), no more I/O
    stop_threads(engine)
    return Crash(directory, fs, checker, in_flight, cut, compacted)


def op_range(tmp: Path, seed: int, n: int, policy: str) -> range:
    """The file operations a cut may land on: those after the compaction."""
    crash = crash_run(tmp / f"count-{seed}-{policy}", seed, n, None, policy)
    assert not crash.cut and crash.compacted
    crash.fs.release()
    shutil.rmtree(crash.directory)
    return range(crash.compacted + 1, crash.fs.stats.ops + 1)


def check(crash: Crash, tail: str, rng: random.Random) -> int:
    """Materialise the crashed disk with `tail`, reopen it twice, judge it; the prefix."""
    dst = crash.directory.with_name(f"{crash.directory.name}-{tail}")
    crash.fs.materialise(str(crash.directory), str(dst), rng, tail)
    try:
        with Engine.open(str(dst)) as engine:
            state = read_state(EngineTarget(engine), "lists")
        with Engine.open(str(dst)) as engine:
            assert read_state(EngineTarget(engine), "lists") == state, "two opens, two states"
    finally:
        shutil.rmtree(dst, ignore_errors=True)
    acked = len(crash.checker.lineage)
    verdict = crash.checker.judge(state, float(acked), in_flight=crash.in_flight)
    where = f"tail {tail}, {acked} acknowledged, in flight {crash.in_flight!r:.80}"
    assert not verdict.violations, f"{where}: {verdict.violations}"
    assert verdict.prefix is not None, where
    if crash.checker.policy == "always":
        assert verdict.prefix >= acked, where
    return verdict.prefix


def sweep(tmp: Path, seed: int, n: int, cuts: int, policy: str, tails: tuple[str, ...]) -> int:
    rng = random.Random(f"lists-powerloss:{seed}:{policy}")
    checks = 0
    for cut_at in [*sorted(rng.sample(op_range(tmp, seed, n, policy), cuts)), None]:
        crash = crash_run(tmp / f"run-{seed}-{cut_at}", seed, n, cut_at, policy)
        if policy != "everysec":  # (its sync thread's operations depend on timing)
            assert crash.cut == (cut_at is not None)
        for tail in tails:
            check(crash, tail, rng)
            checks += 1
        crash.fs.release()
        shutil.rmtree(crash.directory)
    return checks


@pytest.mark.parametrize("seed", range(2))
def test_power_loss_keeps_every_acknowledged_job(tmp_path: Path, seed: int) -> None:
    assert sweep(tmp_path, seed, 40, 3, "always", TAILS) == 4 * len(TAILS)


def test_power_loss_under_no_leaves_a_whole_prefix(tmp_path: Path) -> None:
    assert sweep(tmp_path, 7, 40, 3, "no", ("none", "partial", "garbage")) == 4 * 3


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 16))
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_power_loss_lists_soak(tmp_path: Path, seed: int, policy: str) -> None:
    sweep(tmp_path, seed, 200, 25, policy, TAILS)


def _replayed(checker: Checker, *extra: list[bytes]) -> Reference:
    return Reference.replayed([(op.argv, None) for op in checker.lineage]
                              + [(argv, None) for argv in extra], "lists")


def _with_lists(state: tuple, change: dict[bytes, tuple[bytes, ...]]) -> tuple:
    """`state` with some lists replaced."""
    return ((LISTS, tuple((key, change.get(key, elements))
                          for key, elements in lists_part(state)[1])),)


def test_the_checker_catches_a_job_in_two_lists_a_lost_job_and_a_lost_write() -> None:
    """The check above is not vacuous: a job both in a queue and in processing (a move applied
    half), a job in neither list that nothing acknowledged, a push of three jobs of which one
    came back, and an acknowledged write missing are each reported; the push whole is the
    in-flight one applied, and a move in flight applied whole is too."""
    checker = Checker("always", workload="lists")
    workload = ListsWorkload(3)
    target = EngineTarget(Engine())
    for i in range(80):
        step(target, workload, checker, float(i))
    n = len(checker.lineage)
    now = checker.reference.state()
    queue = dict(lists_part(now)[1])[QUEUES[0]]
    assert queue, "the queue holds jobs"

    push = [b"LPUSH", QUEUES[0], *(job(900, k, b"ab") for k in range(3))]
    assert checker.judge(_replayed(checker, push).state(), 1.0, in_flight=push).prefix == n + 1
    half = _replayed(checker, push[:3]).state()
    verdict = checker.judge(half, 1.0, in_flight=push)
    assert "prefix" in [v.invariant for v in verdict.violations]

    move = [b"LMOVE", QUEUES[0], PROCESSING, b"RIGHT", b"LEFT"]
    assert checker.judge(_replayed(checker, move).state(), 1.0, in_flight=move).prefix == n + 1
    processing = dict(lists_part(now)[1])[PROCESSING]
    both = _with_lists(now, {PROCESSING: (queue[-1], *processing)})  # copied, not moved
    verdict = checker.judge(both, 1.0, in_flight=move)
    assert [v.invariant for v in verdict.violations] == ["prefix", "jobs"]
    assert "in two lists at once" in verdict.violations[1].detail
    assert job_of(queue[-1]).decode() in verdict.violations[1].detail

    gone = _with_lists(now, {QUEUES[0]: queue[:-1]})  # a job in neither list
    verdict = checker.judge(gone, 1.0, in_flight=move)
    assert [v.invariant for v in verdict.violations] == ["prefix", "jobs"]
    assert "in neither a queue nor processing" in verdict.violations[1].detail

    twice = _with_lists(now, {QUEUES[0]: (*queue, queue[0])})
    verdict = checker.judge(twice, 1.0)
    assert "stored twice in one list" in verdict.violations[-1].detail
    phantom = _with_lists(now, {QUEUES[1]: (job(999, 0, b"zz"),)})
    assert "no acknowledged or in-flight push" in checker.judge(phantom, 1.0).violations[-1].detail

    lost = Reference.replayed([(op.argv, None) for op in checker.lineage[:-1]], "lists").state()
    verdict = checker.judge(lost, 1.0)
    assert [v.invariant for v in verdict.violations] == ["acked-lost"]

    # After a violation the run goes on from what came back, rebuilt by commands, its jobs
    # in the ledger.
    assert checker.recovered(both, 1.0).violations
    assert checker.reference.state() == both
    assert checker.live[-1] == len(queue) + len(processing) + len(
        dict(lists_part(now)[1])[QUEUES[1]])


def test_the_bench_runs_the_lists_workload_and_replays_its_tokens(tmp_path: Path) -> None:
    # Every crash point of a short run with two compactions: a cut inside one included.
    config = runs.Config("always", "exhaustive", ("none", "partial"), ops=20, jobs=1,
                         compact_every=8, workload="lists")
    rows = runs.powerloss_rows(config)
    assert [row.mode for row in rows] == ["exhaustive (lists)"] * 2
    assert all(row.covered > 0 and not row.violations for row in rows), [
        (row.model, row.found) for row in rows]
    assert rows[0].acked == 20
    run = powerloss.record(str(tmp_path / "run"), 1, 20, "always", 8, workload="lists")
    crash_points = powerloss.distinct_points(run)
    index = crash_points[len(crash_points) // 2].index
    row, lines = runs.replay_one(f"powerloss:always:1:20:8:{index}:zeros:lists")
    assert row.mode == "replay (lists)" and row.covered == 1 and not row.violations, lines
