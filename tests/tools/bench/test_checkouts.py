"""tools/bench/checkouts.py, the sections that compare this checkout with others (nodes,
consume, crashbench): the other checkouts' option, the child script's public-API-only imports,
rows run by the runner in process at a tiny size against this checkout given as --base and
--before (each repeat of either side told apart, ratios per repeat), without it (a rate, no
ratio), and the whole nodes section through the CLI (slow)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.tools.bench import checkouts, options, registry
from streamkeep.tools.bench.declarations import Benchmark, Section
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.runner import Result, run_benchmarks
from streamkeep.tools.bench.workload import Measurement, Size

REPEAT = 3

STDLIB = {"__future__", "gc", "itertools", "json", "random", "resource", "sys", "time",
          "collections.abc", "typing"}


def _checkout(tmp_path: Path) -> Path:
    """A checkout whose .venv/bin/python is this interpreter (a wrapper: a symlink would leave
    the virtualenv behind)."""
    python = tmp_path / "checkout" / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return tmp_path / "checkout"


def _run(env: BenchEnv, *rows: Benchmark | str, repeat: int = REPEAT) -> list[Result]:
    """The rows (registered ones by key) through the runner, ``repeat`` times."""
    every = {b.key: b for s in registry.SECTIONS for b in s.benchmarks}
    chosen = tuple(every[r] if isinstance(r, str) else r for r in rows)
    return run_benchmarks(env, [Section("rows", chosen)], repeat=repeat)


def test_the_other_checkouts_must_have_their_interpreter(tmp_path: Path) -> None:
    parser = options.build_parser()
    bare = options.settings(parser.parse_args(["nodes", "--base", str(tmp_path)]))
    assert "no " in (options.missing_checkout(bare.others) or "")  # refused when the run starts
    co = _checkout(tmp_path)
    run = options.settings(parser.parse_args(["nodes", "--base", str(co)]))
    assert run.others == {"base": str(co)} and options.missing_checkout(run.others) is None
    assert checkouts.python_of(str(co)) == str(co / ".venv" / "bin" / "python")


def test_the_child_script_uses_the_public_api_alone() -> None:
    tree = ast.parse(Path(checkouts.CHILD).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module in STDLIB or (
                node.module == "streamkeep"
                and {a.name for a in node.names} <= {"Engine", "StreamQueue"}) or (
                # the one exception: the backlog data set, by the checkout's own builder
                node.module == "streamkeep.tools.bench.backlog"
                and [a.name for a in node.names] == ["build"]), node.module
        elif isinstance(node, ast.Import):
            assert {a.name for a in node.names} <= STDLIB


def test_every_row_has_a_figure() -> None:
    section = registry.select_sections("nodes")[0]
    figured = {f.numerator for f in registry.FIGURES if f.section == "nodes"}
    assert {b.key for b in section.benchmarks} == figured


def test_rows_alternate_with_the_other_checkout(tmp_path: Path) -> None:
    co = str(_checkout(tmp_path))
    with BenchEnv(300, use_redis=False, quick=True, others={"base": co, "before": co}) as env:
        for m in _run(env, "nodes.xadd", "nodes.snapshot_load"):
            assert m.rate is not None and m.rate > 0
            assert 0 < m.figures["ratio_min"] <= m.figures["ratio_max"]
            assert m.notes[0].count("x,") == REPEAT - 1, m.notes  # one ratio per repeat
        built = env.resources["nodes snapshots"]
        assert len(built) == 2  # one snapshot per interpreter, built once
        footprint = checkouts.footprint(env)
        assert footprint.figures["live_mb"] > 0 and footprint.figures["replay_over_live"] > 0
    assert not os.path.exists(built.root)  # removed with the run
    with BenchEnv(300, use_redis=False, quick=True) as env:
        (alone,) = _run(env, "nodes.xdel")
    assert alone.rate and "ratio_min" not in alone.figures  # no --base: no ratio


def test_each_interpreter_compiles_its_packages_before_its_first_run() -> None:
    import streamkeep.tools.redisimport as redisimport  # not imported by the xadd child

    cached = Path(importlib.util.cache_from_source(redisimport.__file__))
    with BenchEnv(300, use_redis=False, quick=True) as env:
        cache = checkouts.bytecode(env)
        cached.unlink(missing_ok=True)
        assert checkouts.child(sys.executable, "xadd", 50, cache=cache)["ops"] == 50
        assert cached.exists() and cache == {sys.executable}
        cached.unlink()
        checkouts.ready(sys.executable, cache)  # once per interpreter and run
        assert not cached.exists()


def test_served_rows_compare_the_servers_cpu_per_op(tmp_path: Path) -> None:
    """A row whose runs report their server's CPU time gets that ratio (other / this) too."""
    co = str(_checkout(tmp_path))
    cpu = {sys.executable: 1.0, checkouts.python_of(co): 3.0}  # this server: a third of the CPU
    row = checkouts.row("nodes.serve_x", "x", lambda _env, python: Measurement(
        100.0, figures={"cpu": cpu[python]}), "base", ("cpu", "server CPU per op"))
    with BenchEnv(300, use_redis=False, quick=True, others={"base": co}) as env:
        (m,) = _run(env, row)
    assert m.figures["cpu_ratio_min"] == m.figures["cpu_ratio_max"] == 3.0
    assert m.figures["ratio_min"] == 1.0  # the client's rates: equal
    assert any("server CPU per op" in note for note in m.notes)


@pytest.mark.slow
@pytest.mark.redis
def test_a_tiny_run_against_this_checkout(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server not on PATH: the import row needs it")
    co = _checkout(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "streamkeep", "bench", "nodes", "--n", "300", "--base", str(co),
         "--before", str(co), "--repeat", "2", "--json", "--quiet"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    rows = {row["key"]: row for row in document["rows"]}
    section = registry.select_sections("nodes")[0]
    assert set(rows) == {b.key for b in section.benchmarks}
    for key, row in rows.items():
        assert row["rate"], (key, row)
        if key != "nodes.footprint":  # each: 2 repeats, one ratio each, in a note
            assert row["figures"]["ratio_min"] <= row["figures"]["ratio_max"], key
            if key.startswith("nodes.serve_"):
                assert 0 < row["figures"]["cpu_ratio_min"] <= row["figures"]["cpu_ratio_max"]
            note = next(n for n in row["notes"] if n.startswith(key))
            assert note.count("x,") == 1, note
    footprint = rows["nodes.footprint"]["figures"]
    assert footprint["live_mb"] > 0 and footprint["load_over_live"] > 0


def test_every_row_has_a_figure_with_a_target() -> None:
    section = registry.select_sections("consume")[0]
    figures = {f.numerator: f for f in registry.FIGURES if f.section == "consume"}
    assert {b.key for b in section.benchmarks} == set(figures)
    assert all(f.target is not None and f.extra == "ratio_min" for f in figures.values())


def test_rows_run_against_the_other_checkout(tmp_path: Path) -> None:
    co = str(_checkout(tmp_path))
    with BenchEnv(300, use_redis=False, quick=True, others={"before": co}) as env:
        for m in _run(env, "consume.embedded", "consume.queue_batch", "consume.catchup"):
            assert m.rate is not None and m.rate > 0
            assert 0 < m.figures["ratio_min"] <= m.figures["ratio_max"]
            assert m.notes[0].count("x,") == REPEAT - 1, m.notes  # one ratio per repeat
        built = env.resources["consume backlogs"]
        assert len(built) == 2  # one backlog per interpreter, built once
        assert built.entries == checkouts.BACKLOG_ENTRIES(env)


def test_without_the_other_checkout_a_row_has_no_ratio() -> None:
    with BenchEnv(300, use_redis=False, quick=True) as env:
        (m,) = _run(env, "consume.embedded")
    assert m.rate and "ratio_min" not in m.figures
    assert "no --before checkout given" in m.notes[0]


def test_the_catchup_reads_what_it_was_asked_for(tmp_path: Path) -> None:
    """The child workloads themselves: a backlog built, then caught up on."""
    path = str(tmp_path / "data")
    checkouts.child(sys.executable, "build_backlog", 10_000, path)
    got = checkouts.child(sys.executable, "catchup", 2_000, path)
    assert got["ops"] == 2_000 and "seconds" in got
    batch = checkouts.child(sys.executable, "queue_batch", 1_000, str(tmp_path / "q"))
    assert batch["ops"] == 1_000


def test_the_big_hash_is_built_then_loaded_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    checkouts.child(sys.executable, "build_hash", 12_000, path)
    got = checkouts.child(sys.executable, "hash_load", 12_000, path)
    assert got["ops"] == 12_000 and got["seconds"] > 0 and got["peak_rss_mb"] > 0


def test_the_row_and_its_figures_are_registered() -> None:
    (section,) = registry.select_sections("crashbench")
    assert [b.key for b in section.benchmarks] == ["crashbench.exhaustive"]
    extras = {f.extra for f in registry.FIGURES if f.numerator == "crashbench.exhaustive"}
    assert extras == {"ratio_min", "seconds_ratio_min", "cpu_s_ratio_min", "cpu_ms_per_point",
                      "wall_s"}


def test_points_per_second_against_the_other_checkout(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkouts, "CRASH_OPS", Size(200, 12))
    with BenchEnv(300, use_redis=False, quick=True,
                  others={"before": str(_checkout(tmp_path))}) as env:
        (m,) = _run(env, "crashbench.exhaustive", repeat=1)
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
    runs = iter(range(1, 2 * REPEAT + 1))

    def crash_run(env: object, python: str) -> Measurement:
        seconds = 1.0 + (next(runs) % 2 == 0)  # this checkout's runs take 1 s, the other's 2 s
        return Measurement(100 / seconds, figures={"seconds": seconds, "cpu_s": 2.0})

    (row,) = registry.select_sections("crashbench")[0].benchmarks
    assert row.reference is not None
    mocked = checkouts.row(row.key, row.workload, crash_run, "before", *row.reference.costs)
    with BenchEnv(300, use_redis=False, quick=True, others={"before": "."}) as env:
        (m,) = _run(env, mocked)
    assert m.rate == 100.0 and m.figures["ratio_min"] == 2.0
    assert m.figures["seconds_ratio_min"] == 2.0 and m.figures["cpu_s_ratio_min"] == 1.0
