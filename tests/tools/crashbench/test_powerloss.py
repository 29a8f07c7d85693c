"""The power-loss mode's crash points: a write and the fdatasync right after it are one crash
(the same disk under every model), so the exhaustive and random modes try it once; a replay
token may name any call of the log, a crash just before it judged like any other point."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep.tools.crashbench import powerloss, runs


def test_a_write_and_the_fsync_right_after_it_are_one_crash_point(tmp_path: Path) -> None:
    run = powerloss.record(str(tmp_path / "run"), 1, 40, "always", 20)
    every = powerloss.points(run)
    distinct = powerloss.distinct_points(run)
    kept = {p.index: p for p in distinct}
    dropped = [p for p in every if p.index not in kept]
    assert dropped and len(distinct) + len(dropped) == len(every)
    assert {p.kind for p in dropped} == {"fsync"}  # under always: each record's fdatasync
    for p in dropped:
        write = max(i for i in kept if i < p.index)
        assert kept[write].kind == "write"
        assert all(c.method in powerloss.UNCHANGING for c in run.calls[write + 1:p.index])
    # Judged at both, the fsync point's disk is the write point's: found in the disk cache.
    for p in dropped[:5]:
        write = max(i for i in kept if i < p.index)
        outcomes = list(powerloss.replay(run, str(tmp_path / f"replay-{p.index}"),
                                         ("none", "all"), {write, p.index}, 1))
        assert [o.point.index for o in outcomes] == [write, write, p.index, p.index]
        assert not outcomes[0].cached and outcomes[2].cached and outcomes[3].cached


def test_a_crash_point_may_be_any_call_of_the_log(tmp_path: Path) -> None:
    """A replay token's <call> indexes the whole log, and a recording made again may shift it
    onto a call that is no write, fsync, rename or directory fsync (the engine's once-a-second
    thread adds its fsyncs when the wall clock says): a crash just before such a call (lock,
    open, close, unlink, a file another process wrote...) is judged like any other point."""
    run = powerloss.record(str(tmp_path / "run"), 1, 20, "always", 8, workload="lists")
    others = {i for i, call in enumerate(run.calls) if call.kind == "other"}
    assert {run.calls[i].method for i in others} >= {"lock", "open_append", "close", "adopt"}
    outcomes = list(powerloss.replay(run, str(tmp_path / "replay"), ("zeros",), others, 1))
    assert [o.point.index for o in outcomes] == sorted(others)
    for outcome in outcomes:
        assert outcome.point.kind == run.calls[outcome.point.index].method
        assert not outcome.violations, (outcome.point, outcome.violations)
    first = outcomes[0]
    assert (first.point.index, first.point.kind, first.point.ordinal) == (0, "lock", 1)


@pytest.mark.parametrize("workload", ["streams", "lists"])
def test_the_replay_of_a_token_on_another_call_judges_it(workload: str) -> None:
    """`streamkeep crashbench --replay powerloss:always:1:20:8:0:zeros` (call 0: the data
    directory's lock) replays that crash point instead of failing on its kind."""
    suffix = "" if workload == "streams" else f":{workload}"
    row, lines = runs.replay_one(f"powerloss:always:1:20:8:0:zeros{suffix}")
    assert row.covered == 1 and not row.violations, lines
    assert lines[0].startswith("crash point: lock #1 (call 0 of "), lines
