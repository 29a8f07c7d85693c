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


def test_a_checkout_compared_with_itself_keeps_each_runs_side(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--before` naming this very checkout (the same interpreter): each pair's runs still
    count as this checkout's and the other's by their turn, and the pairs' ratios are given."""
    monkeypatch.setattr(checkouts, "python_of", lambda _checkout: sys.executable)
    runs = iter(range(1, 2 * checkouts.RUNS + 1))

    def crash_run(env: object, python: str) -> dict[str, float]:
        i = next(runs)  # this checkout's runs take 1 s, the other's 2 s
        return {"ops": 100, "seconds": 1.0 + (i % 2 == 0), "wall_s": 3.0, "cpu_s": 2.0,
                "violations": 0}

    monkeypatch.setattr(checkouts, "crash_run", crash_run)
    with BenchEnv(300, use_redis=False, quick=True, others={"before": "."}) as env:
        m = checkouts.crash_exhaustive(env)
    assert m.rate == 100.0 and m.figures["ratio_min"] == 2.0
    assert m.figures["seconds_ratio_min"] == 2.0 and m.figures["cpu_s_ratio_min"] == 1.0
