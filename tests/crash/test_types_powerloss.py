"""Simulated power loss with sorted sets, hashes (with field TTLs), sets and Redis Functions.

The crash bench's `types` workload (tools/crashbench/types_workload.py) runs in process on a
TrackingFS (tools/crashbench/faultfs.py, as tests/crash/test_aof_powerloss.py uses it) that cuts
the power at its N-th mutating file operation, after a compaction (a snapshot of every type and
of the function library) has run: recovery loads the snapshot and replays the AOF after it (a
power cut inside a compaction is the bench's exhaustive mode's, run bounded below). The disk a power loss leaves is then
materialised under each tail kind (the unsynced bytes gone, all there, a part, zeros, garbage)
and reopened on the real file system. The bench's checker judges what came back: under
`always` every acknowledged write is there and the state is the model's after the
acknowledged prefix, or that plus the command in flight applied whole (a multi-member write,
an SPOP, a function's writes to three keys); under `everysec` and `no`, some prefix, nothing
half-applied (how old a lost write may be is the bench's loss-window measure, not a test's).
The checker is also shown to catch a half-applied function call and a lost write, and the
bench's exhaustive mode runs a bounded types workload with its replay token.
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
from streamkeep.tools.crashbench import powerloss, runs, sigkill
from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.model import (
    EngineTarget,
    Reference,
    read_state,
    types_part,
)
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost
from streamkeep.tools.crashbench.types_workload import TypesWorkload
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
    checker = Checker(policy, window_s=math.inf, workload="types")
    workload = TypesWorkload(seed)
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
            state = read_state(EngineTarget(engine), "types")
        with Engine.open(str(dst)) as engine:
            assert read_state(EngineTarget(engine), "types") == state, "two opens, two states"
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
    rng = random.Random(f"types-powerloss:{seed}:{policy}")
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
def test_power_loss_keeps_every_acknowledged_type_write(tmp_path: Path, seed: int) -> None:
    assert sweep(tmp_path, seed, 40, 3, "always", TAILS) == 4 * len(TAILS)


def test_power_loss_under_no_leaves_a_whole_prefix(tmp_path: Path) -> None:
    assert sweep(tmp_path, 7, 40, 3, "no", ("none", "partial", "garbage")) == 4 * 3


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 16))
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_power_loss_types_soak(tmp_path: Path, seed: int, policy: str) -> None:
    sweep(tmp_path, seed, 200, 25, policy, TAILS)


def test_the_checker_catches_half_a_function_call_and_a_lost_write() -> None:
    """The check above is not vacuous: a function call of which one write came back, an SPOP
    that took fewer members than it popped, and an acknowledged write missing are each
    reported; the same call whole is the in-flight one applied."""
    checker = Checker("always", workload="types")
    workload = TypesWorkload(3)
    target = EngineTarget(Engine())
    for i in range(60):
        step(target, workload, checker, float(i))
    transfer = [b"FCALL", b"cb_transfer", b"3", b"cb:z0", b"cb:h0", b"cb:t0", b"m1", b"4", b"n0"]
    whole = Reference.replayed([(op.argv, None) for op in checker.lineage] + [(transfer, None)],
                               "types").state()
    assert checker.judge(whole, 1.0, in_flight=transfer).prefix == 61
    half = Reference.replayed([(op.argv, None) for op in checker.lineage]
                              + [([b"ZINCRBY", b"cb:z0", b"4", b"m1"], None)], "types").state()
    verdict = checker.judge(half, 1.0, in_flight=transfer)
    assert [v.invariant for v in verdict.violations] == ["prefix"]
    assert "sorted set cb:z0" in verdict.violations[0].detail

    ref = Reference.replayed([(op.argv, None) for op in checker.lineage], "types")
    ref.apply([b"SADD", b"cb:t1", b"m1", b"m2", b"m3"], None)
    spop = [b"SPOP", b"cb:t1", b"2"]
    both = Reference.replayed([(op.argv, None) for op in checker.lineage]
                              + [([b"SADD", b"cb:t1", b"m1", b"m2", b"m3"], None)], "types")
    checker.acked(60, [b"SADD", b"cb:t1", b"m1", b"m2", b"m3"], 3, 1.0)
    ref.apply([b"SREM", b"cb:t1", b"m1", b"m2"], None)
    assert checker.judge(ref.state(), 1.0, in_flight=spop).prefix == 62
    both.apply([b"SREM", b"cb:t1", b"m1"], None)  # one member of the two popped
    assert [v.invariant for v in checker.judge(both.state(), 1.0, in_flight=spop).violations
            ] == ["prefix"]

    lost = Reference.replayed([(op.argv, None) for op in checker.lineage[:-1]], "types").state()
    verdict = checker.judge(lost, 1.0)
    assert [v.invariant for v in verdict.violations] == ["acked-lost"]
    assert types_part(lost) != types_part(checker.reference.state())

    # After a violation the run goes on from what came back, rebuilt by commands.
    assert checker.recovered(half, 1.0).violations
    assert checker.reference.state() == half


def test_the_bench_runs_the_types_workload_and_replays_its_tokens(tmp_path: Path) -> None:
    # Every crash point of a short run with two compactions: a cut inside one included.
    config = runs.Config("always", "exhaustive", ("none", "partial"), ops=20, jobs=1,
                         compact_every=8, workload="types")
    rows = runs.powerloss_rows(config)
    assert [row.mode for row in rows] == ["exhaustive (types)"] * 2
    assert all(row.covered > 0 and not row.violations for row in rows), [
        (row.model, row.found) for row in rows]
    assert rows[0].acked == 20
    run = powerloss.record(str(tmp_path / "run"), 1, 20, "always", 8, workload="types")
    crash_points = powerloss.distinct_points(run)
    index = crash_points[len(crash_points) // 2].index
    row, lines = runs.replay_one(f"powerloss:always:1:20:8:{index}:zeros:types")
    assert row.mode == "replay (types)" and row.covered == 1 and not row.violations, lines


def test_the_types_workload_is_refused_where_it_cannot_run() -> None:
    """redis-server 7.0 has no hash field TTLs: the sigkill mode refuses it before starting
    anything."""
    with pytest.raises(ValueError, match="streams workload only"):
        sigkill.rows("always", "redis-server", 1, 1, None, workload="types")
