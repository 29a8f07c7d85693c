"""`streamkeep crashbench --html FILE` as a user runs it, opened in a real browser: a run with
violations (a planted durability bug: `always` acknowledging before its fsync) and a clean
`everysec` run. Each chart draws every crash point of the run's JSON in its outcome's colour,
on the timeline and in its fault model's lane, every recovery time, the points per policy and
model; the tables hold the JSON's numbers; every violation's marks and table rows link to its
details, which show the point, the operation in flight, what was expected and what recovery
gave; no console error, nothing fetched, a screenshot that is not blank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from streamkeep.tools.report import charts
from tests.support.browser import open_browser

# Two outcomes' colours differ by at least this much in CIELAB (CIE76; about 2.3 is the least a
# reader notices side by side, a dense timeline of small marks needs far more).
MIN_OUTCOME_DISTANCE = 30


def crashbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep", "crashbench", *args],
                          capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, **(env or {})})


def run(tmp: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict, Path, int]:
    report, page = tmp / "report.json", tmp / "report.html"
    proc = crashbench(*args, "--json", str(report), "--html", str(page), env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return json.loads(report.read_text()), page, proc.returncode


@pytest.fixture(scope="module")
def violated(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, int]:
    return run(tmp_path_factory.mktemp("violated"), "--policy", "always", "--ops", "60",
               "--model", "none", "--model", "zeros",
               env={"STREAMKEEP_PLANTED_BUGS": "ack-before-fsync"})


def check_charts(browser: object, doc: dict) -> None:
    charts = {c["id"]: c for c in browser.charts()}  # type: ignore[attr-defined]
    for chart in charts.values():
        assert chart["drawn"] == chart["series"], chart["id"]
        assert chart["width"] > 300 and chart["height"] > 100
    everything = Counter(p["outcome"] for r in doc["rows"] for p in r["points"])
    assert {k.removeprefix("outcome-"): v for k, v in charts["outcomes"]["drawn"].items()} \
        == {o.replace(" ", "-"): len({(r["policy"], r["model"]) for r in doc["rows"]
                                      if any(p["outcome"] == o for p in r["points"])})
            for o in everything}  # one bar segment per row that has the outcome
    for row in doc["rows"]:
        key = f"{row['target']}-{row['policy']}-{row['mode']}"
        mine = [p for r in doc["rows"] if (r["target"], r["policy"], r["mode"]) ==
                (row["target"], row["policy"], row["mode"]) for p in r["points"]]
        by_outcome = Counter(p["outcome"].replace(" ", "-") for p in mine)
        timeline = charts[f"timeline-{key}"]["drawn"]
        assert {k.removeprefix("points-"): v for k, v in timeline.items()
                if k.startswith("points-")} == by_outcome
        assert {k.removeprefix("lanes-"): v for k, v in timeline.items()
                if k.startswith("lanes-")} == by_outcome
        assert sum(v for k, v in timeline.items() if k.startswith("workload-")) == 1
        recovery = charts[f"recovery-{key}"]["drawn"]
        assert recovery[f"over-{row['model']}"] == sum(
            p["recovery_ms"] is not None for p in row["points"])
        assert recovery["histogram"] > 0
        texts = " ".join(charts[f"timeline-{key}"]["texts"])
        assert "seconds into the run (s)" in texts and "operations acknowledged" in texts


def check_tables(browser: object, doc: dict) -> None:
    tables = browser.tables()  # type: ignore[attr-defined]
    for row, cells in zip(doc["rows"], tables["rows"], strict=True):
        assert [c["text"] for c in cells[:4]] == [row["target"], row["policy"], row["mode"],
                                                  row["model"]]
        assert [c["value"] for c in cells[4:9]] == [row["covered"], row["reached"],
                                                     row["acked"], row["lost"],
                                                     sum(row["violations"].values())]
        assert cells[9]["value"] == pytest.approx(row["recovery_ms_mean"], rel=1e-12)
        assert cells[11]["text"] == row["result"]


def test_a_run_with_violations(violated: tuple) -> None:
    doc, page, code = violated
    assert code == 1 and not doc["ok"]
    found = [(row, f) for row in doc["rows"] for f in row["found"]]
    assert found
    with open_browser() as browser:
        browser.open(page)
        assert browser.console_errors() == [] and browser.resources() == []
        check_charts(browser, doc)
        check_tables(browser, doc)
        # every violation: a table row and a detail section, linked
        links = browser.tables()["violations"]
        assert [c[0]["href"] for c in links] == [f"#violation-{n}"
                                                  for n in range(1, len(found) + 1)]
        for n, (row, f) in enumerate(found, 1):
            text = browser.script(
                f"return document.getElementById('violation-{n}').textContent")
            point = row["points"][f["point"]]
            assert point["outcome"] == "violation"
            for shown in (f["invariant"], point["where"], f["in_flight"], f["expected"],
                          f["recovered"], f["replay"]):
                assert shown and shown in text
        # the violation marks on the timelines link to the details
        hrefs = browser.script(
            "return Array.from(document.querySelectorAll('svg a')).map(a => "
            "a.getAttribute('href') || a.getAttribute('xlink:href'))")
        assert hrefs and set(hrefs) <= {f"#violation-{n}" for n in range(1, len(found) + 1)}
        assert all(browser.script(f"return !!document.getElementById('{h[1:]}')")
                   for h in set(hrefs))
        assert browser.screenshot_colours() > 20


def test_a_clean_run(tmp_path: Path) -> None:
    doc, page, code = run(tmp_path, "--policy", "everysec", "--ops", "50", "--model", "none")
    assert code == 0 and doc["ok"]
    assert {p["outcome"] for p in doc["rows"][0]["points"]} >= {"clean"}
    with open_browser() as browser:
        browser.open(page)
        assert browser.console_errors() == []
        check_charts(browser, doc)
        check_tables(browser, doc)
        assert "every invariant held" in browser.script("return document.body.textContent")
        assert browser.screenshot_colours() > 20


def lab(colour: str | tuple[int, int, int]) -> tuple[float, float, float]:
    """An sRGB colour (``#rrggbb`` or 0-255 components) in CIELAB (D65)."""
    if isinstance(colour, str):
        colour = (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4
              for c in colour]
    xyz = [sum(w * c for w, c in zip(row, linear, strict=True)) / white for row, white in (
        ((0.4124, 0.3576, 0.1805), 0.95047), ((0.2126, 0.7152, 0.0722), 1.0),
        ((0.0193, 0.1192, 0.9505), 1.08883))]
    f = [t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def distance(a: str | tuple[int, int, int], b: str | tuple[int, int, int]) -> float:
    return sum((p - q) ** 2 for p, q in zip(lab(a), lab(b), strict=True)) ** 0.5


def test_the_outcomes_are_told_apart_by_colour_and_by_shape() -> None:
    """"clean" and "truncated" were two greens (and "restarted" the same green as "clean"):
    every two outcomes now differ clearly in colour, and the ones drawn side by side on a
    timeline in shape too."""
    names = list(charts.OUTCOMES)
    close = [(a, b, round(distance(charts.OUTCOMES[a], charts.OUTCOMES[b]), 1))
             for i, a in enumerate(names) for b in names[i + 1:]
             if distance(charts.OUTCOMES[a], charts.OUTCOMES[b]) < MIN_OUTCOME_DISTANCE]
    assert close == []
    shapes = charts.OUTCOME_MARKERS
    assert len({shapes["clean"], shapes["truncated"], shapes["lost within bound"],
                shapes["refused"], shapes["violation"]}) == 5  # a power-loss row's outcomes


# Per timeline: the colour each outcome's crash points are drawn in, as the browser paints them.
POINT_FILLS = """
return Array.from(document.querySelectorAll('svg g[id*="-points-"]')).map(g => ({
  id: g.id, fills: Array.from(new Set(Array.from(g.querySelectorAll('use, path'))
    .filter(e => !e.closest('defs')).map(e => getComputedStyle(e).fill)))}));
"""


def test_clean_and_truncated_points_are_drawn_apart(tmp_path: Path) -> None:
    doc, page, code = run(tmp_path, "--policy", "everysec", "--ops", "60", "--model",
                          "prefix-torn")
    assert code == 0
    drawn = {p["outcome"] for p in doc["rows"][0]["points"]}
    assert {"clean", "truncated"} <= drawn
    with open_browser() as browser:
        browser.open(page)
        groups = browser.script(POINT_FILLS)
    fills: dict[str, tuple[int, int, int]] = {}
    for group in groups:
        (fill,) = group["fills"]  # one colour per outcome
        outcome = group["id"].split("-points-", 1)[1].replace("-", " ")
        fills[outcome] = tuple(int(v) for v in fill.removeprefix("rgb(").rstrip(")").split(","))
    assert set(fills) == drawn
    for outcome, fill in fills.items():
        assert distance(fill, charts.OUTCOMES[outcome]) < 1  # its colour, as drawn
    assert distance(fills["clean"], fills["truncated"]) >= MIN_OUTCOME_DISTANCE
    outcomes = sorted(fills)
    assert all(distance(fills[a], fills[b]) >= MIN_OUTCOME_DISTANCE
               for i, a in enumerate(outcomes) for b in outcomes[i + 1:])
