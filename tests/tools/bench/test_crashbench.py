"""bench crashbench: the crash bench's own command run as a child under this checkout's
interpreter and another's (--before), its points judged per second read from the run's JSON
report; at a tiny size, in process."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from streamkeep.tools.bench import checkouts, registry
from streamkeep.tools.bench.env import BenchEnv


def _checkout(tmp_path: Path) -> Path:
    """A checkout whose .venv/bin/python is this interpreter (a wrapper script)."""
    python = tmp_path / "checkout" / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return tmp_path / "checkout"


def test_the_row_and_its_figures_are_registered() -> None:
    (section,) = registry.select_sections("crashbench")
    assert [b.key for b in section.benchmarks] == ["crashbench.exhaustive"]
    extras = {f.extra for f in registry.FIGURES if f.numerator == "crashbench.exhaustive"}
    assert extras == {"ratio_min", "seconds_ratio_min", "cpu_s_ratio_min", "cpu_ms_per_point",
                      "wall_s"}


def test_points_per_second_against_the_other_checkout(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkouts, "QUICK_CRASH_OPS", 12)
    monkeypatch.setattr(checkouts, "RUNS", 1)
    with BenchEnv(300, use_redis=False, quick=True,
                  others={"before": str(_checkout(tmp_path))}) as env:
        m = checkouts.crash_exhaustive(env)
        root = env.tmp_root
    assert m.count is not None and m.count > 12 * 9  # every model at every crash point
    assert m.rate > 0 and m.figures["wall_s"] > 0 and m.figures["cpu_ms_per_point"] > 0
    assert 0 < m.figures["ratio_min"] == m.figures["ratio_max"]
    assert m.figures["seconds_ratio_min"] > 0 and m.figures["cpu_s_ratio_min"] > 0
    assert "this / before per run" in m.notes[0]
    assert "the run's time, before / this" in m.notes[1]
    assert "the run's CPU, before / this" in m.notes[2]
    assert root is not None and not Path(root).exists()  # each run's report removed
