"""tools/bench/datatypes.py, the ``strings``, ``types`` and ``lists`` sections: every row (a
command of each type, arq's and RQ's no-op tasks, against streamkeep serve and redis-server) and
its ratio printed by a tiny run, the summaries' rows and ratio ranges over repeats, a framework
that cannot be installed reported as not available rather than failing the run, and the
release script's SHA1 and its rows' skip on a server without scripting."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from streamkeep.tools import bench
from streamkeep.tools import main as cli
from streamkeep.tools.bench import datatypes, server
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.processes import RedisServer
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
        assert ops == (datatypes.ARQ_TASKS(BenchEnv(500)) if b.key.endswith("arq") else 5_000)
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
    assert re.search(r"^types: redis-benchmark -n: 5,000; --dbnum: 10; arq no-op tasks: ", out,
                     re.M)
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


NUMBER = r"[\d,]+(?:\.\d+)?"
RATIO = r"\d+\.\d\dx"


@pytest.mark.timeout(300)
@pytest.mark.redis
def test_bench_lists_section_tiny(capsys: pytest.CaptureFixture[str]) -> None:
    for tool in ("redis-server", "redis-benchmark"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not on PATH: the lists section needs it")
    assert cli.main(["bench", "lists", "--n", "500"]) == 0
    out = capsys.readouterr().out
    assert [s.name for s in bench.select_sections("lists")] == ["lists"]
    assert not re.search(r"^(server|strings|types|embedded) ", out, re.M)

    # every row once; RQ's measured, or skipped as not available where it cannot be installed
    rq_skipped = "rq not available" in out
    for b in speed.LISTS.benchmarks:
        row = [ln for ln in out.splitlines() if ln.startswith("lists") and
               f"  {b.workload}  " in ln]
        assert len(row) == 1, (b.key, out)
        if rq_skipped and b.key.endswith("rq"):
            assert "skipped" in row[0]
            continue
        m = re.search(rf"  ({NUMBER})  +({NUMBER})  +({NUMBER})", row[0])
        assert m, row[0]
        ops, rate = (float(g.replace(",", "")) for g in m.groups()[:2])
        expected = (datatypes.RQ_JOBS(BenchEnv(500)) if b.key.endswith("rq")
                    else server.server_requests(500, 1 if b.key.endswith("_p1") else 16))
        assert ops == expected, (b.key, row[0])
        assert rate > 0

    # each command's ratio against its target, then RQ's
    for c, p in datatypes.LIST_ROWS:
        target = r"0\.5x" if p == 16 else r"0\.7x"
        assert re.search(rf"^lists +{c.name.upper()} -P {p}: streamkeep / redis-server +{RATIO} +"
                         rf">= {target} +(PASS|FAIL)$", out, re.M), (c.name, p, out)
    rq_cell = r"n/a \(.*\) +>= 1x +n/a" if rq_skipped else rf"{RATIO} +>= 1x +(PASS|FAIL)"
    assert re.search(rf"^lists +RQ no-op jobs/s, appendfsync always: streamkeep / redis-server "
                     rf"+{rq_cell}$", out, re.M), out
    assert re.search(r"^targets: \d+/6 PASS(, 1 not measured)?$", out, re.M), out

    # the summary: both rates, the ratio and its range over the (one) repeat
    for c, p in datatypes.LIST_ROWS:
        m = re.search(rf"^{re.escape(c.label)}, redis-benchmark -c 50 -P {p} +({NUMBER})/s +"
                      rf"({NUMBER})/s +({RATIO}) +({RATIO[:-1]})-({RATIO}) +>= 0\.[57]x +"
                      r"(met|not met)$", out, re.M)
        assert m, (c.label, p, out)
        assert m.group(3) == m.group(4) + "x" == m.group(5)  # one repeat: one ratio

    # what ran, on which servers (the everysec pair, the always pair); their data dirs removed
    assert re.search(r"^lists: redis-benchmark -n \(-P 16\): 5,000; redis-benchmark -n \(-P 1\): "
                     r"5,000; --dbnum: 10; rq no-op jobs: ", out, re.M), out
    for policy in ("everysec", "always"):
        assert re.search(rf"^server: redis-server .*--appendonly yes --appendfsync {policy}",
                         out, re.M), out
        assert re.search(rf"^server: streamkeep .*--appendfsync {policy}", out, re.M), out
    assert rq_skipped or re.search(r"^lists: rq \S+ in its own venv .*rq\.worker\.Worker", out,
                                   re.M)
    for data_dir in re.findall(r"data dir under (\S+),", out):
        assert not os.path.exists(data_dir)


def test_the_summary_pairs_the_lists_rows() -> None:
    by_key = {b.key: b for b in speed.LISTS.benchmarks}
    results = [Result("lists", by_key["lists.rq"], rate=12.0, runs=[12.0, 9.0]),
               Result("lists", by_key["lists.redis_rq"], rate=10.0, runs=[10.0, 10.0]),
               Result("lists", by_key["lists.lpush_p1"], rate=5.0, runs=[5.0])]
    figure = next(f for f in speed.LISTS.figures if f.numerator == "lists.rq")
    table = server.section_summary(results, [FigureResult(figure, value=1.2)], "lists")
    assert table is not None
    assert table.headers[0] == "lists: workload"
    (row,) = table.rows  # (LPUSH -P 1 without its redis-server row: nothing to compare)
    assert row == ["RQ no-op jobs, one worker, appendfsync always", "12/s", "10/s", "1.20x",
                   "0.90-1.20x", ">= 1x", "met"]
    assert server.section_summary(results[:1], [], "lists") is None


@pytest.mark.redis
def test_the_rq_rows_are_skipped_when_rq_is_not_available(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # An empty framework cache and a pip that may not look anything up, as offline.
    monkeypatch.setenv("STREAMKEEP_SUITES_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    rows = tuple(b for b in speed.LISTS.benchmarks if b.key.endswith("rq"))
    with BenchEnv(500) as env:
        results = run_benchmarks(env, [Section("lists", rows)])
        assert [r.rate for r in results] == [None, None]
        assert all(re.match(r"rq not available: fetching or installing it failed \(\S+ "
                            r"exited 1\)$", r.skipped or "") for r in results), results
    out = bench.format_results(results, 500)
    assert re.search(r"^skipped: rq not available", out, re.M)


@contextmanager
def redis_server(*args: str) -> Iterator[RedisServer]:
    server = RedisServer(persistence=("--appendonly", "no", *args))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.redis
def test_the_release_script_loads_as_its_sha1() -> None:
    with redis_server() as server:
        sha = datatypes.load_release_script(server)
    assert sha == hashlib.sha1(datatypes.RELEASE_SCRIPT.encode()).hexdigest()
    assert "redis.call('del', KEYS[1])" in datatypes.RELEASE_SCRIPT  # redis-py's Lock release


@pytest.mark.redis
def test_a_server_refusing_script_load_skips_the_evalsha_rows() -> None:
    with redis_server("--rename-command", "SCRIPT", "") as server, pytest.raises(Skip) as skip:
        datatypes.load_release_script(server)
    # The reason, not the script's text Redis's error line quotes.
    assert str(skip.value) == "EVALSHA unsupported: SCRIPT LOAD answered unknown command 'SCRIPT'"
