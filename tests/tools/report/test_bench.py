"""`streamkeep bench --html FILE` as a user runs it, the page opened in a real browser
(Debian's chromium): it loads from the file with no console error and fetches nothing, each
chart draws a mark per row, per repeat spread, target and reference of the run's JSON, the
tables hold the JSON's numbers, the screenshot is not blank and the page prints. Also the
--compare-pure page, and the refusals (an existing FILE, matplotlib missing) made before the
run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.tools.report import bench as bench_report
from streamkeep.tools.report.bench import references
from tests.support.browser import group_members, open_browser

ROOT = Path(__file__).resolve().parents[3]
# A full run's document, as the manual renders it: every section, long figure names.
RESULTS = ROOT / "docs" / "src" / "benchmarks" / "results.json"


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep", "bench", *args],
                          capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """One small real run, two repeats (a spread), with redis-py against a redis-server."""
    page = tmp_path_factory.mktemp("bench") / "bench.html"
    proc = bench("embedded", "redis-py", "--quick", "--repeat", "2", "--quiet", "--json",
                 "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), page


def test_the_page_draws_the_runs_rows_spreads_targets_and_references(run: tuple) -> None:
    doc, page = run
    refs = references(doc)
    by_key = {r["key"]: r for r in doc["rows"]}
    with open_browser() as browser:
        browser.open(page)
        assert browser.console_errors() == []
        assert browser.resources() == []  # self-contained: nothing fetched
        charts = {c["id"]: c for c in browser.charts()}
        for section in ("embedded", "redis-py"):
            rows = [r for r in doc["rows"] if r["section"] == section and r["rate"]]
            chart = charts[f"rates-{section}"]
            assert chart["drawn"] == chart["series"]  # what the page says it drew is there
            assert chart["drawn"]["rate"] == len(rows)
            assert chart["drawn"].get("spread", 0) == sum(len(r["runs"]) == 2 for r in rows)
            assert chart["drawn"].get("target", 0) == sum(bool(r["target"]) for r in rows)
            assert chart["drawn"].get("reference", 0) == sum(
                refs.get(r["key"]) in by_key for r in rows)
            assert chart["width"] > 300 and chart["height"] > 100
            assert any("operations per second" in t for t in chart["texts"])  # axis label
            assert any(section in t for t in chart["texts"])  # title
        assert charts["figures-embedded"]["drawn"]["margin"] == sum(
            1 for f in doc["figures"] if f["section"] == "embedded" and f["value"] is not None
            and f["target"] is not None)
        tables = browser.tables()
        for section in ("embedded", "redis-py"):
            rows = [r for r in doc["rows"] if r["section"] == section]
            cells = tables[f"rows-{section}"]
            assert [c[0]["text"] for c in cells] == [r["key"] for r in rows]
            for row, cell in zip(rows, cells, strict=True):
                assert cell[2]["value"] == pytest.approx(row["rate"], rel=1e-12)
                assert cell[5]["value"] == row["target"]
                assert cell[6]["text"] == (row["result"] or "")
        shown = {c[0]["text"]: c[1]["value"] for c in tables["figures-embedded"]}
        for figure in doc["figures"]:
            if figure["section"] == "embedded" and figure["value"] is not None:
                assert shown[figure["label"]] == pytest.approx(figure["value"], rel=1e-12)
        assert browser.screenshot_colours() > 20  # not blank: text, bars, colours
        assert len(browser.driver.print_page()) > 10_000  # a PDF (base64) of the page
        group = browser.driver.service.process.pid
    assert group_members(group) == []  # no browser process outlives the test


def test_each_derived_figure_divides_what_the_page_shows(run: tuple) -> None:
    """A figure of two rows divides their rates as the rows' table shows them. The IDMP cost
    divides times its own row's run took, IDMP and plain XADD in turns (not that row's rate by
    the `embedded.xadd` row's, which gave another quotient beside it unexplained): both are
    shown beside it, the IDMP one matching its row, and the quotient is theirs."""
    doc, page = run
    with open_browser() as browser:
        browser.open(page)
        tables = browser.tables()
    rates = {c[0]["text"]: c[2]["value"] for name, cells in tables.items()
             if name.startswith("rows-") for c in cells}
    shown = {c[0]["text"]: c for name, cells in tables.items()
             if name.startswith("figures-") for c in cells}
    for figure in doc["figures"]:
        cell = shown[figure["label"]]
        if figure["denominator"] and figure["value"] is not None:
            assert cell[1]["value"] == pytest.approx(
                rates[figure["numerator"]] / rates[figure["denominator"]], rel=1e-9)
            assert cell[5]["text"] == (f"rate of {figure['numerator']} / rate of "
                                       f"{figure['denominator']}")
    by_extra = {(f["numerator"], f["extra"]): shown[f["label"]] for f in doc["figures"]}
    for key in ("embedded.xadd_idmp", "embedded.xadd_idmpauto"):
        idmp, plain = by_extra[(key, "idmp_us")], by_extra[(key, "plain_us")]
        cost = by_extra[(key, "idmp_cost")]
        assert idmp[1]["value"] == pytest.approx(1e6 / rates[key], rel=1e-9)  # its row's rate
        assert cost[1]["value"] == pytest.approx(idmp[1]["value"] / plain[1]["value"], rel=1e-9)
        assert idmp[2]["text"] == plain[2]["text"] == "us"  # per XADD
        assert "the two above" in cost[0]["text"]
        assert all(c[5]["text"].endswith(f"reported by {key}'s best run")
                   for c in (idmp, plain, cost))


def test_compare_pure_is_its_own_chart(tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    proc = bench("embedded", "--quick", "--no-redis", "--compare-pure", "--json", "--quiet",
                 "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    with open_browser() as browser:
        browser.open(page)
        assert browser.console_errors() == []
        (chart,) = browser.charts()
        assert chart["id"] == "compiled-vs-pure" and chart["drawn"] == chart["series"]
        assert chart["drawn"]["ratio"] == chart["drawn"]["compiled"] == len(doc["rows"]) > 0
        assert chart["drawn"].get("target", 0) == sum(bool(r["target"]) for r in doc["rows"])
        cells = browser.tables()["compare"]
        for row, cell in zip(doc["rows"], cells, strict=True):
            assert cell[0]["text"] == row["key"]
            assert cell[4]["value"] == pytest.approx(min(row["ratios"]), rel=1e-12)
        assert browser.screenshot_colours() > 20


def test_html_refused_before_the_run(tmp_path: Path) -> None:
    existing = tmp_path / "bench.html"
    existing.write_text("yesterday's")
    proc = bench("embedded", "--quick", "--html", str(existing))
    assert proc.returncode == 3 and proc.stdout == ""
    assert "exists (--force overwrites it)" in proc.stderr and "Traceback" not in proc.stderr
    assert existing.read_text() == "yesterday's"
    # without matplotlib: one line, before anything runs
    blocker = tmp_path / "no-matplotlib" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed here')\n")
    proc = bench("embedded", "--quick", "--html", str(tmp_path / "new.html"),
                 env={"PYTHONPATH": os.pathsep.join(
                     [str(blocker.parent), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.strip().endswith("--html needs matplotlib (pip install "
                                        "'streamkeep[report]')"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "new.html").exists()


def test_the_cli_imports_no_plotting_without_html(tmp_path: Path) -> None:
    code = ("import sys; from streamkeep.tools.main import build_parser; build_parser(); "
            "print('matplotlib' in sys.modules, 'streamkeep.tools.report.charts' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["False", "False"]


def test_every_chart_label_lies_inside_its_chart(tmp_path: Path) -> None:
    """No text of a chart is cut off by the SVG's edge: the derived figures' x-axis label,
    centred under axes that long figure names push right, used to run past the figure."""
    page = tmp_path / "results.html"
    assert bench_report.write(str(page), json.loads(RESULTS.read_text()), force=False) is None
    with open_browser() as browser:
        browser.open(page)
        outside = browser.texts_outside()
        assert any(name.startswith("figures-") for name in outside)  # the charts are there
        assert {name: texts for name, texts in outside.items() if texts} == {}
