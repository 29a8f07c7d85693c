"""tools/bench/datatypes.py, the ``types`` section: every row (a command of each new type and
arq's no-op tasks, against streamkeep serve and redis-server) and its ratio printed by a tiny
run, the summary's ratio range over repeats, and a framework that cannot be installed
reported as not available rather than failing the run."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from streamkeep.tools import bench
from streamkeep.tools import main as cli
from streamkeep.tools.bench import datatypes, server
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.registry import Section
from streamkeep.tools.bench.runner import FigureResult, Result, run_benchmarks
from streamkeep.tools.bench.sections import speed
from streamkeep.tools.bench.workload import Skip

NUMBER = r"[\d,]+(?:\.\d+)?"
RATIO = r"\d+\.\d\dx"


def _no_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An empty framework cache and a pip that may not look anything up: arq cannot be
    installed, as on a machine without network access."""
    monkeypatch.setenv("STREAMKEEP_SUITES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")


@pytest.mark.timeout(300)
@pytest.mark.redis
def test_bench_types_section_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH: the types section needs it")
    assert cli.main(["bench", "types", "--n", "500"]) == 0
    out = capsys.readouterr().out
    assert [s.name for s in bench.select_sections("types")] == ["types"]
    assert not re.search(r"^(server|strings|embedded) ", out, re.M)

    # every row once; arq's measured, or skipped as not available where it cannot be installed
    arq_skipped = "arq not available" in out
    for b in speed.TYPES.benchmarks:
        row = [ln for ln in out.splitlines() if ln.startswith("types") and
               f"  {b.workload}  " in ln]
        assert len(row) == 1, (b.key, out)
        if arq_skipped and b.key.endswith("arq"):
            assert "skipped" in row[0]
            continue
        m = re.search(rf"  ({NUMBER})  +({NUMBER})  +({NUMBER})", row[0])
        assert m, row[0]
        ops, rate = (float(g.replace(",", "")) for g in m.groups()[:2])
        assert ops == (datatypes.framework_tasks(500) if b.key.endswith("arq") else 5_000)
        assert rate > 0

    # each command's ratio against its target, then arq's
    for c in datatypes.COMMANDS:
        assert re.search(rf"^types +{c.verb} -P 16: streamkeep / redis-server +{RATIO} +"
                         rf">= 0\.5x +(PASS|FAIL)$", out, re.M), (c.verb, out)
    arq_cell = r"n/a \(.*\) +>= 0\.7x +n/a" if arq_skipped else rf"{RATIO} +>= 0\.7x +(PASS|FAIL)"
    assert re.search(rf"^types +arq no-op tasks/s: streamkeep / redis-server +{arq_cell}$",
                     out, re.M), out
    assert re.search(r"^targets: \d+/9 PASS(, 1 not measured)?$", out, re.M), out

    # the summary: both rates, the ratio and its range over the (one) repeat
    for c in datatypes.COMMANDS:
        m = re.search(rf"^{re.escape(c.label)}, redis-benchmark -c 50 -P 16 +({NUMBER})/s +"
                      rf"({NUMBER})/s +({RATIO}) +({RATIO[:-1]})-({RATIO}) +>= 0\.5x +"
                      r"(met|not met)$", out, re.M)
        assert m, (c.label, out)
        assert m.group(3) == m.group(4) + "x" == m.group(5)  # one repeat: one ratio

    # what ran, on which servers; their data dirs removed
    assert re.search(r"^types: redis-benchmark -c 50 -P 16 -n 5,000 -r 100,000 --dbnum 10: "
                     r"ZADD types:zadd ", out, re.M)
    assert re.search(r"^server: redis-server .*--appendonly yes --appendfsync everysec", out,
                     re.M)
    assert arq_skipped or re.search(r"^types: arq 0\.28\.0 in its own venv ", out, re.M)
    for data_dir in re.findall(r"data dir under (\S+),", out):
        assert not os.path.exists(data_dir)


def test_the_summary_gives_the_ratio_range_over_repeats() -> None:
    by_key = {b.key: b for b in speed.TYPES.benchmarks}
    results = [Result("types", by_key["types.hset"], rate=60.0, runs=[50.0, 60.0, 40.0]),
               Result("types", by_key["types.redis_hset"], rate=100.0, runs=[100.0, 80.0, 100.0])]
    figure = next(f for f in speed.TYPES.figures if f.numerator == "types.hset")
    table = server.section_summary(results, [FigureResult(figure, value=0.6)], "types")
    assert table is not None
    (row,) = table.rows
    assert row[1:] == ["60/s", "100/s", "0.60x", "0.40-0.75x", ">= 0.5x", "met"]
    assert server.section_summary(results[:1], [], "types") is None  # no redis-server row: nothing to compare
    assert server.ratio_range([], []) is None


def test_a_framework_that_cannot_be_installed_is_not_available(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_install(monkeypatch, tmp_path)
    with pytest.raises(Skip, match=r"^arq not available: fetching or installing it failed"):
        datatypes.FrameworkVenv("arq", datatypes.ARQ_HOW, "types")
    assert not (tmp_path / "cache" / "venvs").exists()


@pytest.mark.redis
def test_the_arq_rows_are_skipped_when_arq_is_not_available(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_install(monkeypatch, tmp_path)
    rows = tuple(b for b in speed.TYPES.benchmarks if b.key.endswith("arq"))
    with BenchEnv(500) as env:
        results = run_benchmarks(env, [Section("types", rows)])
        assert [r.rate for r in results] == [None, None]
        assert all(re.match(r"arq not available: fetching or installing it failed \(\S+ "
                            r"exited 1\)$", r.skipped or "") for r in results), results
    out = bench.format_results(results, 500)
    assert re.search(r"^skipped: arq not available", out, re.M)
