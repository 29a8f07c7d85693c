"""The bench's report: the header, the blocks that follow it (the rows, ratios, extra tables,
figures, notes: a row's own and its figures no Figure declares, the targets line, skip
reasons), as plain text (the stable format tests parse), rich tables on a terminal, or JSON. Must not touch: running, progress, the registry's contents.
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
from collections.abc import Sequence
from typing import Any

from streamkeep.tools.bench import registry
from streamkeep.tools.bench.registry import Figure, Section
from streamkeep.tools.bench.runner import FigureResult, Result, derive_figures
from streamkeep.tools.bench.workload import BATCH, warmup_size
from streamkeep.tools.text_width import Table

Block = Table | str  # a table, or text printed as it is (notes, the targets line)


def format_rate(rate: float) -> str:
    """A rate with at least three significant digits: ``147,858``, ``13.4`` (a slow row, e.g.
    MB/s of a big value, would round to a number its us/op visibly disagrees with)."""
    if rate >= 100 or rate <= 0 or not math.isfinite(rate):
        return f"{rate:,.0f}"
    return f"{rate:,.{2 - math.floor(math.log10(rate))}f}"


def format_target(target: float, unit: str = "", at_most: bool = False) -> str:
    """A target cell: ``>= 250,000``, ``<= 2x``, ``<= 2,000 us``."""
    number = format_rate(target) if target >= 1000 else f"{target:g}"
    suffix = "x" if unit == "x" else f" {unit}" if unit in Figure.UNITS else ""
    return f"{'<=' if at_most else '>='} {number}{suffix}"


def machine() -> dict[str, Any]:
    """The machine the figures come from; the load average too, as other work skews them."""
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return {"cores": cores, "usable": usable, "arch": platform.machine(),
            "system": platform.system(), "release": platform.release(),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None}


def header(n: int, repeat: int, sections: Sequence[Section]) -> str:
    """The two lines a run starts with: what it runs, and on what."""
    m = machine()
    load = "" if m["loadavg"] is None else "; load avg " + " ".join(
        f"{x:.2f}" for x in m["loadavg"])
    return "\n".join([
        f"streamkeep bench: {n:,} messages per workload, warm-up {warmup_size(n):,}, "
        f"best of {repeat}; consume batch {BATCH}; sections "
        f"{', '.join(s.name for s in sections)}",
        f"machine: {m['cores']} cores ({m['usable']} usable), {m['arch']} {m['system']} "
        f"{m['release']}; Python {m['python']} ({m['implementation']}){load}",
    ])


def _rows_table(results: Sequence[Result], n: int) -> Table:
    """One row per benchmark; ops is its timed count (messages, fsyncs or records)."""
    rows = []
    for r in results:
        target = format_target(r.bench.target) if r.bench.target is not None else ""
        count = f"{r.count if r.count is not None else n:,}"
        if r.rate is None:
            rows.append([r.section, r.bench.workload, count, "skipped", "", target, r.verdict])
            continue
        rows.append([r.section, r.bench.workload, count, format_rate(r.rate),
                     f"{1e6 / r.rate:.2f}", target, r.verdict])
    return Table(["section", "workload", "ops", "ops/s", "us/op", "target", "result"], rows,
                 right={2, 3, 4}, verdict=6)


def _ratios(results: Sequence[Result]) -> list[tuple[registry.Ratio, float]]:
    """The RATIOS whose two rows were both measured (not skipped, not absent)."""
    by_key = {r.bench.key: r.rate for r in results}
    out = []
    for ratio in registry.RATIOS:
        num, den = by_key.get(ratio.numerator), by_key.get(ratio.denominator)
        if num and den:
            out.append((ratio, num / den))
    return out


def _ratios_table(results: Sequence[Result]) -> Table | None:
    rows = [[ratio.workload, ratio.reference, f"{value:.2f}x"]
            for ratio, value in _ratios(results)]
    return Table(["embedded", "/ reference", "ratio"], rows, right={2}) if rows else None


def _figures_table(figures: Sequence[FigureResult]) -> Table:
    rows = []
    for fr in figures:
        f = fr.figure
        value = f.format(fr.value) if fr.value is not None else f"n/a ({fr.missing})"
        target = format_target(f.target, f.unit, f.at_most) if f.target is not None else ""
        rows.append([f.section, f.label, value, target, fr.verdict])
    return Table(["section", "figure", "value", "target", "result"], rows, right={2},
                 verdict=4)


def _verdicts(results: Sequence[Result], figures: Sequence[FigureResult]) -> list[str]:
    verdicts = [r.verdict for r in results if r.bench.target is not None]
    return verdicts + [fr.verdict for fr in figures if fr.figure.target is not None]


def targets_line(results: Sequence[Result], figures: Sequence[FigureResult]) -> str | None:
    """``targets: P/T PASS`` (``, N not measured``), None when no row or figure has one."""
    verdicts = _verdicts(results, figures)
    if not verdicts:
        return None
    line = f"targets: {verdicts.count('PASS')}/{len(verdicts)} PASS"
    if "n/a" in verdicts:
        line += f", {verdicts.count('n/a')} not measured"
    return line


def _figures_note(r: Result) -> list[str]:
    """A row's figures that no Figure declares (those are in the figures table), as a note."""
    shown = {f.extra for f in registry.FIGURES if f.numerator == r.bench.key}
    rest = [f"{name} {value:,.0f}" if abs(value) >= 100 else f"{name} {value:.3g}"
            for name, value in r.figures.items() if name not in shown]
    return [f"{r.bench.key}: " + ", ".join(rest)] if rest else []


def result_blocks(results: Sequence[Result], n: int,
                  figures: Sequence[FigureResult] | None = None) -> list[Block]:
    """What follows the header and the resource lines, in print order."""
    figures = derive_figures(results) if figures is None else figures
    blocks: list[Block] = [_rows_table(results, n)]
    ratios = _ratios_table(results)
    if ratios is not None:
        blocks.append(ratios)
    for report in registry.REPORTS:
        table = report(results, figures)
        if table is not None:
            blocks.append(table)
    if figures:
        blocks.append(_figures_table(figures))
    lines: list[str] = []  # one-line notes, together; tables (several lines) apart
    for r in results:
        blocks.extend(note for note in r.notes if "\n" in note)
        lines.extend(f"{r.section}: {note}" for note in [*r.notes, *_figures_note(r)]
                     if "\n" not in note)
    if lines:
        blocks.append("\n".join(lines))
    line = targets_line(results, figures)
    if line:
        blocks.append(line)
    skipped = sorted({r.skipped for r in results if r.skipped})
    if skipped:
        blocks.append("skipped: " + "; ".join(skipped))
    return blocks


def format_results(results: Sequence[Result], n: int,
                   figures: Sequence[FigureResult] | None = None) -> str:
    """The blocks as plain text, a blank line between them."""
    return "\n\n".join(b.plain() if isinstance(b, Table) else b
                       for b in result_blocks(results, n, figures))


def _row_json(r: Result, n: int) -> dict[str, Any]:
    return {"key": r.bench.key, "section": r.section, "workload": r.bench.workload,
            "ops": r.count if r.count is not None else n, "rate": r.rate,
            "us_per_op": 1e6 / r.rate if r.rate else None, "target": r.bench.target,
            "result": r.verdict or None, "skipped": r.skipped, "figures": r.figures,
            "notes": r.notes, "runs": r.runs, "figure_runs": r.figure_runs}


def _figure_json(fr: FigureResult) -> dict[str, Any]:
    """The figure's declaration, its value (or why it has none) and its verdict."""
    return {**dataclasses.asdict(fr.figure), "value": fr.value, "missing": fr.missing,
            "result": fr.verdict or None}


def to_json(results: Sequence[Result], n: int, repeat: int, sections: Sequence[Section],
            resources: Sequence[str],
            figures: Sequence[FigureResult] | None = None) -> dict[str, Any]:
    """The run as one JSON-able document: the same rows, ratios, figures and verdicts as the
    text (rates in ops/s, figures in their unit), the machine and the resources' lines."""
    figures = derive_figures(results) if figures is None else figures
    verdicts = _verdicts(results, figures)
    return {
        "bench": {"n": n, "warmup": warmup_size(n), "repeat": repeat, "batch": BATCH,
                  "sections": [s.name for s in sections]},
        "machine": machine(),
        "resources": list(resources),
        "rows": [_row_json(r, n) for r in results],
        "ratios": [{"workload": ratio.workload, "reference": ratio.reference,
                    "numerator": ratio.numerator, "denominator": ratio.denominator,
                    "value": value} for ratio, value in _ratios(results)],
        "figures": [_figure_json(fr) for fr in figures],
        "targets": {"pass": verdicts.count("PASS"), "fail": verdicts.count("FAIL"),
                    "not_measured": verdicts.count("n/a"), "total": len(verdicts)},
        "skipped": sorted({r.skipped for r in results if r.skipped}),
    }
