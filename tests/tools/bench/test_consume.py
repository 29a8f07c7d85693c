"""bench consume: its rows run in process at a tiny size against this checkout given as
--before (the child workloads under both interpreters, ratios per run, each checkout's backlog
built once), and without --before (a rate, no ratio)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from streamkeep.tools.bench import checkouts, registry
from streamkeep.tools.bench.env import BenchEnv


def _checkout(tmp_path: Path) -> Path:
    """A checkout whose .venv/bin/python is this interpreter (a wrapper script)."""
    python = tmp_path / "checkout" / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return tmp_path / "checkout"


def test_every_row_has_a_figure_with_a_target() -> None:
    section = registry.select_sections("consume")[0]
    figures = {f.numerator: f for f in registry.FIGURES if f.section == "consume"}
    assert {b.key for b in section.benchmarks} == set(figures)
    assert all(f.target is not None and f.extra == "ratio_min" for f in figures.values())


def test_rows_run_against_the_other_checkout(tmp_path: Path) -> None:
    co = str(_checkout(tmp_path))
    with BenchEnv(300, use_redis=False, quick=True, others={"before": co}) as env:
        for m in (checkouts.consume_embedded(env), checkouts.consume_queue_batch(env),
                  checkouts.consume_catchup(env)):
            assert m.rate > 0
            assert 0 < m.figures["ratio_min"] <= m.figures["ratio_max"]
            assert m.notes[0].count("x,") == checkouts.RUNS - 1, m.notes  # one ratio per run
        built = env.resources["consume backlogs"]
        assert len(built) == 2  # one backlog per interpreter, built once
        assert built.entries == checkouts.backlog_entries(env)


def test_without_the_other_checkout_a_row_has_no_ratio() -> None:
    with BenchEnv(300, use_redis=False, quick=True) as env:
        m = checkouts.consume_embedded(env)
    assert m.rate > 0 and "ratio_min" not in m.figures
    assert "no --before checkout given" in m.notes[0]


def test_the_catchup_reads_what_it_was_asked_for(tmp_path: Path) -> None:
    """The child workloads themselves: a backlog built, then caught up on."""
    path = str(tmp_path / "data")
    checkouts.child(sys.executable, "build_backlog", 10_000, path)
    got = checkouts.child(sys.executable, "catchup", 2_000, path)
    assert got["ops"] == 2_000 and "seconds" in got
    batch = checkouts.child(sys.executable, "queue_batch", 1_000, str(tmp_path / "q"))
    assert batch["ops"] == 1_000
