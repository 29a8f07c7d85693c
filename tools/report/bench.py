"""The bench's report as charts: `streamkeep bench --html FILE`, and the manual's results page.

Owns turning a `streamkeep bench --json` document into charts and tables, per section: every
measured row's rate as a bar coloured by its verdict (green met, red missed, grey no target),
the spread of its repeats (lowest to highest) as a whisker, its target as a blue tick and its
reference (the redis-server, redis-py or persist-queue row it is compared with, by the run's
ratios and figures) as a grey diamond on the same line; then the section's derived figures
against their targets as margins (value over a minimum, or a maximum over the value: at least
1 passes), and the table of every figure with what it is computed from (two rows' rates, or a
figure a row's run reported). `--compare-pure`'s document gets its own chart: per row the
compiled/pure ratio of every round (lowest to highest) against its target, beside both best
rates.
Everything shown is read from the document, so the page and the run's JSON agree.
Must not touch: running the bench or its registry (the document is all it reads), the page's
markup (page), matplotlib (charts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from streamkeep.tools.report import charts
from streamkeep.tools.report.page import Cell, Page, num, summary, verdict

LABEL_CHARS = 58  # a row's label on a chart's axis; the table has it whole


def short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def rate_text(rate: float) -> str:
    if rate >= 100 or rate <= 0 or not math.isfinite(rate):
        return f"{rate:,.0f}"
    return f"{rate:,.{2 - math.floor(math.log10(rate))}f}"


def references(doc: dict[str, Any]) -> dict[str, str]:
    """Row key -> the key of the row it is compared with: a ratio's denominator, else a
    derived figure's (the first one found)."""
    out: dict[str, str] = {}
    for pair in [*doc.get("ratios", []), *doc.get("figures", [])]:
        num_key, den = pair.get("numerator"), pair.get("denominator")
        if num_key and den and num_key != den:
            out.setdefault(num_key, den)
    return out


def sections(doc: dict[str, Any]) -> list[str]:
    """The sections in the order the run had them (rows of none listed come after)."""
    order = list(doc.get("bench", {}).get("sections", []))
    for row in doc.get("rows", []):
        if row["section"] not in order:
            order.append(row["section"])
    return [s for s in order if any(r["section"] == s for r in doc.get("rows", []))]


def margin(figure: dict[str, Any]) -> float | None:
    """How far a figure is on the passing side of its target: value / minimum, or maximum /
    value; at least 1 passes. None without a value or a target."""
    value, target = figure.get("value"), figure.get("target")
    if value is None or target is None or value <= 0 or target <= 0:
        return None
    return target / value if figure.get("at_most") else value / target


def figure_result(figure: dict[str, Any]) -> str | None:
    """The figure's verdict as the run printed it; derived again for documents that did not
    keep it (the committed results of older runs)."""
    if figure.get("result"):
        return str(figure["result"])
    if figure.get("target") is None:
        return None
    m = margin(figure)
    return "n/a" if m is None else "PASS" if m >= 1 else "FAIL"


# --- charts --------------------------------------------------------------------------------------


def rows_chart(doc: dict[str, Any], section: str) -> charts.Chart | None:
    """The section's measured rows: rate, spread, target, reference, verdict."""
    by_key = {r["key"]: r for r in doc["rows"]}
    refs = references(doc)
    rows = [r for r in doc["rows"] if r["section"] == section and r.get("rate")]
    if not rows:
        return None
    chart = charts.Chart(f"rates-{section}", f"{section}: rate of each row, best of "
                         f"{doc['bench'].get('repeat', 1)}", height=1.3 + 0.38 * len(rows))
    ax = chart.ax
    ys = list(range(len(rows)))[::-1]  # the first row on top
    bars = ax.barh(ys, [r["rate"] for r in rows], height=0.6,
                   color=[charts.verdict_colour(r.get("result")) for r in rows])
    chart.mark("rate", bars)
    _spread_and_targets(chart, ax, ys, rows, [r.get("runs") or [] for r in rows],
                        "spread of the runs (lowest to highest)")
    refd = [(y, by_key[refs[r["key"]]]) for y, r in zip(ys, rows, strict=True)
            if refs.get(r["key"]) in by_key and by_key[refs[r["key"]]].get("rate")]
    if refd:
        diamonds = ax.scatter([ref["rate"] for _y, ref in refd], [y for y, _ref in refd],
                              marker="D", s=28, color=charts.REFERENCE, edgecolors="#1d232a",
                              linewidths=0.5, zorder=5, label="its reference (the row it is "
                              "compared with)")
        chart.mark("reference", diamonds)
    ax.set_xscale("log")
    charts.plain_log_axis(ax.xaxis)
    ax.set_yticks(ys, [short(f"{r['workload']}") for r in rows])
    ax.set_xlabel("operations per second (log scale)")
    ax.grid(axis="y", visible=False)
    _verdict_legend(chart, [r.get("result") for r in rows])
    return chart


def _spread_and_targets(chart: charts.Chart, ax: Any, ys: list[int], rows: list[dict[str, Any]],
                        samples: list[list[float]], spread_label: str) -> None:
    """On a chart of one bar a row (at `ys`): a whisker from the lowest to the highest of each
    row's samples (the rows with more than one), and a tick at each row's target."""
    spread = [(y, got) for y, got in zip(ys, samples, strict=True) if len(got) > 1]
    if spread:
        whiskers = ax.hlines([y for y, _ in spread], [min(got) for _, got in spread],
                             [max(got) for _, got in spread], color="#1d232a", linewidth=1.4,
                             label=spread_label)
        chart.mark("spread", whiskers, len(spread))
    targets = [(y, r["target"]) for y, r in zip(ys, rows, strict=True) if r.get("target")]
    if targets:
        ticks = ax.scatter([t for _y, t in targets], [y for y, _t in targets], marker="|",
                           s=260, linewidths=2.2, color=charts.TARGET, zorder=4,
                           label="target (at least)")
        chart.mark("target", ticks)


def _verdict_legend(chart: charts.Chart, results: Sequence[str | None]) -> None:
    chart.legend(*((label, charts.verdict_colour(result)) for result, label in (
        ("PASS", "target met"), ("FAIL", "target missed"), (None, "no target"))
        if any((r or None) == result for r in results)))


def figures_chart(doc: dict[str, Any], section: str) -> charts.Chart | None:
    """The section's derived figures that have a target and a value: their margins."""
    figs = [f for f in doc.get("figures", []) if f["section"] == section
            and margin(f) is not None]
    if not figs:
        return None
    chart = charts.Chart(f"figures-{section}", f"{section}: derived figures against their "
                         "targets", height=1.4 + 0.38 * len(figs))
    ax = chart.ax
    ys = list(range(len(figs)))[::-1]
    margins = [margin(f) or 0.0 for f in figs]
    bars = ax.barh(ys, margins, height=0.6,
                   color=[charts.verdict_colour(figure_result(f)) for f in figs])
    chart.mark("margin", bars)
    ax.axvline(1.0, color=charts.TARGET, linewidth=1.5, label="the target")
    wide = max(margins) / max(min(margins), 1e-9) >= 10
    if wide:  # decades apart: a log scale
        ax.set_xscale("log")
        charts.plain_log_axis(ax.xaxis)
    ax.set_yticks(ys, [short(f"{f['label']} ({'≤' if f.get('at_most') else '≥'} "
                             f"{f['target']:g}{_unit(f)})") for f in figs])
    ax.set_xlabel("margin over the target: value / minimum, maximum / value (x; 1 and above "
                  f"passes{'; log scale' if wide else ''})")
    ax.grid(axis="y", visible=False)
    _verdict_legend(chart, [figure_result(f) for f in figs])
    return chart


def _unit(figure: dict[str, Any]) -> str:
    unit = figure.get("unit") or ""
    return "x" if unit == "x" else f" {unit}" if unit else ""


# --- the page ------------------------------------------------------------------------------------


def page(doc: dict[str, Any], title: str = "streamkeep bench") -> Page:
    """The report of one `streamkeep bench --json` document."""
    bench, machine = doc["bench"], doc.get("machine", {})
    targets = doc.get("targets", {})
    out = Page(title, f"{bench['n']:,} messages per workload, best of {bench.get('repeat', 1)}; "
                      f"sections {', '.join(bench['sections'])}. Machine: "
                      f"{machine.get('cores', '?')} cores ({machine.get('usable', '?')} usable), "
                      f"{machine.get('arch', '')} {machine.get('system', '')}, Python "
                      f"{machine.get('python', '')}.")
    out.raw(summary([("targets met", targets.get("pass", 0)),
                     ("missed", targets.get("fail", 0)),
                     ("not measured", targets.get("not_measured", 0)),
                     ("rows", len(doc["rows"])), ("derived figures", len(doc.get("figures", [])))]))
    for section in sections(doc):
        out.heading(section)
        for chart in (rows_chart(doc, section), figures_chart(doc, section)):
            if chart is not None:
                out.chart(chart.svg(), chart.ident, chart.title, chart.series)
        out.table(["row", "workload", "rate (ops/s)", "runs (lowest – highest)",
                   "reference", "target", "result"], _row_cells(doc, section),
                  ident=f"rows-{section}")
        figs = [f for f in doc.get("figures", []) if f["section"] == section]
        if figs:
            out.table(["figure", "value", "unit", "target", "result", "computed from"],
                      [_figure_cells(f) for f in figs], ident=f"figures-{section}")
    if doc.get("skipped"):
        out.heading("Skipped")
        for reason in doc["skipped"]:
            out.text(reason)
    if doc.get("resources"):
        out.heading("Resources")
        for line in doc["resources"]:
            out.text(line)
    return out


def _row_cells(doc: dict[str, Any], section: str) -> list[list[Cell | str]]:
    by_key = {r["key"]: r for r in doc["rows"]}
    refs = references(doc)
    out: list[list[Cell | str]] = []
    for r in doc["rows"]:
        if r["section"] != section:
            continue
        runs = r.get("runs") or []
        spread = (Cell(f"{rate_text(min(runs))} – {rate_text(max(runs))}") if len(runs) > 1
                  else Cell(""))
        ref = by_key.get(refs.get(r["key"], ""))
        ref_cell = (Cell(f"{rate_text(ref['rate'])} ({ref['key']})")
                    if ref is not None and ref.get("rate") else Cell(""))
        rate = (num(r["rate"], rate_text(r["rate"])) if r.get("rate")
                else Cell(f"skipped: {r['skipped']}" if r.get("skipped") else ""))
        target = num(r["target"], f"≥ {rate_text(r['target'])}") if r.get("target") else ""
        out.append([Cell(r["key"]), Cell(r["workload"]), rate, spread, ref_cell, target,
                    verdict(r.get("result"))])
    return out


def _figure_cells(f: dict[str, Any]) -> list[Cell | str]:
    value = f.get("value")
    shown = num(value, f"{value:,.4g}") if value is not None else Cell(
        f"n/a ({f['missing']})" if f.get("missing") else "")
    target = (num(f["target"], f"{'≤' if f.get('at_most') else '≥'} {f['target']:g}")
              if f.get("target") is not None else "")
    return [Cell(f["label"]), shown, Cell(f.get("unit") or ""), target,
            verdict(figure_result(f)), Cell(source(f))]


def source(figure: dict[str, Any]) -> str:
    """What a derived figure is computed from, in words: the two rows whose rates it divides,
    or the figure a row's best run reported (which may divide times that run took of its
    own, not the rates of the rows above: the label then names them)."""
    if figure.get("denominator"):
        return f"rate of {figure['numerator']} / rate of {figure['denominator']}"
    if figure.get("extra"):
        return f"{figure['extra']}, reported by {figure['numerator']}'s best run"
    return ""


# --- --compare-pure ------------------------------------------------------------------------------


def compare_chart(doc: dict[str, Any]) -> charts.Chart | None:
    rows = [r for r in doc.get("rows", []) if r.get("ratios")]
    if not rows:
        return None
    chart = charts.Chart("compiled-vs-pure", f"compiled core / pure Python, {doc['rounds']} "
                         "round(s)", width=10, height=1.6 + 0.42 * len(rows), cols=2,
                         sharey=True)
    left, right = chart.axes
    ys = list(range(len(rows)))[::-1]
    lows = [min(r["ratios"]) for r in rows]
    bars = left.barh(ys, lows, height=0.6, color=[charts.verdict_colour(r.get("result"))
                                                   for r in rows])
    chart.mark("ratio", bars)
    _spread_and_targets(chart, left, ys, rows, [r["ratios"] for r in rows],
                        "rounds (lowest to highest)")
    left.set_yticks(ys, [short(r["key"], 40) for r in rows])
    left.set_xlabel("compiled rate / pure rate (x; the bar is the lowest round)")
    left.set_title("ratio per round")
    height = 0.38
    compiled = right.barh([y + height / 2 for y in ys], [max(r["compiled"]) for r in rows],
                          height=height, color=charts.PALETTE[0], label="compiled, best round")
    pure = right.barh([y - height / 2 for y in ys], [max(r["pure"]) for r in rows],
                      height=height, color=charts.REFERENCE, label="pure Python, best round")
    chart.mark("compiled", compiled)
    chart.mark("pure", pure)
    right.set_xscale("log")
    charts.plain_log_axis(right.xaxis)
    right.set_xlabel("operations per second (log scale)")
    right.set_title("best rates")
    for ax in chart.axes:
        ax.grid(axis="y", visible=False)
    _verdict_legend(chart, [r.get("result") for r in rows])
    return chart


def compare_page(doc: dict[str, Any]) -> Page:
    """The report of one `streamkeep bench --compare-pure --json` document."""
    out = Page("streamkeep bench --compare-pure",
               f"{doc['rounds']} round(s), each a compiled run then a pure-Python run "
               "(STREAMKEEP_NO_EXTENSIONS=1), interleaved")
    out.heading("Compiled core against pure Python")
    chart = compare_chart(doc)
    if chart is not None:
        out.chart(chart.svg(), chart.ident, chart.title, chart.series)
    cells: list[list[Cell | str]] = []
    for r in doc.get("rows", []):
        low, high = min(r["ratios"]), max(r["ratios"])
        cells.append([Cell(r["key"]), Cell(r["workload"]),
                      num(max(r["compiled"]), rate_text(max(r["compiled"]))),
                      num(max(r["pure"]), rate_text(max(r["pure"]))),
                      num(low, f"{low:.2f}x"), num(high, f"{high:.2f}x"),
                      num(r["target"], f"≥ {r['target']:g}x") if r.get("target") else "",
                      verdict(r.get("result"))])
    out.table(["row", "workload", "compiled/s", "pure/s", "lowest ratio", "highest ratio",
               "target", "result"], cells, ident="compare")
    for i, pair in enumerate(doc.get("runs", []), 1):
        for mode in ("compiled", "pure"):
            run = pair.get(mode)
            if run and run.get("rows"):
                chart_doc = dict(run, bench=dict(run["bench"]))
                out.heading(f"Round {i}, {mode}", level=3, ident=f"round-{i}-{mode}")
                out.table(["row", "rate (ops/s)"],
                          [[Cell(r["key"]), num(r["rate"], rate_text(r["rate"]))]
                           for r in chart_doc["rows"] if r.get("rate")])
    return out


def write(path: str, document: dict[str, Any], force: bool, compare: bool = False
          ) -> str | None:
    """The report page of a bench document (of a --compare-pure one with `compare`) at
    `path`, whole (tools.safe_output); why it could not be, or None."""
    from streamkeep.tools.report.page import write as write_page
    from streamkeep.tools.safe_output import OutputRefused

    made = compare_page(document) if compare else page(document)
    try:
        write_page(path, made, force=force)
    except OutputRefused as err:  # made meanwhile
        return f"argument --html: {err}"
    return None
