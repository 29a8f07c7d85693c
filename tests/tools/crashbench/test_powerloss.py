"""The power-loss mode's crash points: a write and the fdatasync right after it are one crash
(the same disk under every model), so the exhaustive and random modes try it once."""

from __future__ import annotations

from pathlib import Path

from streamkeep.tools.crashbench import powerloss


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
