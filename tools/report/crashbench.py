"""The crash bench's report as charts: `streamkeep crashbench --html FILE`.

Owns turning a `streamkeep crashbench --json` document into a page: per configuration (target,
policy and mode), the workload's timeline (operations acknowledged over the run's seconds)
with every crash point placed on it, coloured by what its recovery gave (clean, truncated,
acknowledged writes lost within the policy's bound, refused, a violation), and below it one
lane per fault model; each point's recovery time, as a distribution and over the run; for the
whole run, per fault model and fsync policy, the points judged by outcome and the violations;
then every violation with its details (the crash point, the operation in flight, what was
expected, what recovery gave, the history before it, the token that replays it), which the
violation's marks on the timeline link to.
Everything shown is read from the document, so the page and the run's JSON agree.
Must not touch: running the bench (the document is all it reads), the page's markup (page),
matplotlib (charts).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from streamkeep.tools.report import charts
from streamkeep.tools.report.page import Cell, Page, esc, num, summary, verdict

# Outcomes from the mildest to the worst: a point is drawn in its worst outcome's colour, and
# the worst are drawn last (on top).
SEVERITY = ("clean", "restarted", "truncated", "lost within bound", "refused", "violation")
MAX_HISTOGRAM_BINS = 40
MAX_DETAILS = 500  # violations shown in full; the JSON has every one


def groups(doc: dict[str, Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """The rows by (target, policy, mode), in the document's order."""
    out: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in doc["rows"]:
        out.setdefault((row["target"], row["policy"], row["mode"]), []).append(row)
    return out


def violation_ids(doc: dict[str, Any]) -> dict[tuple[int, int], int]:
    """(row index, point index) -> the number of its first violation on the page."""
    out: dict[tuple[int, int], int] = {}
    n = 0
    for r, row in enumerate(doc["rows"]):
        for found in row.get("found", []):
            n += 1
            if found.get("point") is not None:
                out.setdefault((r, found["point"]), n)
    return out


def _label(key: tuple[str, str, str]) -> str:
    target, policy, mode = key
    return f"{target}, appendfsync {policy}, {mode}"


# --- charts --------------------------------------------------------------------------------------


def timeline_chart(doc: dict[str, Any], key: tuple[str, str, str],
                   links: dict[tuple[int, int], int]) -> charts.Chart | None:
    rows = groups(doc)[key]
    index = {id(row): i for i, row in enumerate(doc["rows"])}
    if not any(row.get("points") for row in rows):
        return None
    models = [row["model"] for row in rows]
    chart = charts.Chart(f"timeline-{'-'.join(key)}", f"{_label(key)}: the workload and its "
                         "crash points", height=3.4 + 0.32 * len(models), rows=2,
                         sharex=True, gridspec_kw={"height_ratios": [3, max(1, len(models))]})
    top, lanes = chart.axes
    timelines: dict[str, list[list[float]]] = {}
    for row in rows:
        timelines.update(row.get("timelines") or {})
    for seed, samples in sorted(timelines.items()):
        if samples:
            (line,) = top.plot([s[0] for s in samples], [s[1] for s in samples],
                               color="#8c959f", linewidth=1.2,
                               label="the workload: operations acknowledged")
            chart.mark(f"workload-{seed}", [line])
    by_outcome: dict[str, list[tuple[float, float, float, str | None]]] = {}
    for lane, row in enumerate(rows):
        r = index[id(row)]
        for p, point in enumerate(row.get("points", [])):
            link = links.get((r, p))
            by_outcome.setdefault(point["outcome"], []).append(
                (point["at_s"], point["op"], len(models) - 1 - lane,
                 f"#violation-{link}" if link else None))
    for outcome in sorted(by_outcome, key=_severity):
        marks = by_outcome[outcome]
        colour = charts.OUTCOMES.get(outcome, charts.NEUTRAL)
        size = 30 if outcome == "violation" else 12
        on_line = top.scatter([m[0] for m in marks], [m[1] for m in marks], s=size,
                              color=colour, label=outcome, zorder=3, linewidths=0,
                              marker=charts.OUTCOME_MARKERS.get(outcome, "o"))
        in_lane = lanes.scatter([m[0] for m in marks], [m[2] for m in marks], s=size,
                                color=colour, marker="|" if outcome != "violation" else "o",
                                zorder=3)
        if outcome == "violation":
            on_line.set_urls([m[3] for m in marks])
            in_lane.set_urls([m[3] for m in marks])
        chart.mark(f"points-{outcome}", on_line)
        chart.mark(f"lanes-{outcome}", in_lane)
    top.set_ylabel("operations acknowledged")
    lanes.set_yticks(range(len(models)), models[::-1])
    lanes.set_ylim(-0.6, len(models) - 0.4)
    lanes.set_ylabel("fault model")
    lanes.set_xlabel("seconds into the run (s)")
    lanes.grid(axis="y", visible=False)
    chart.legend()
    return chart


def _severity(outcome: str) -> int:
    return SEVERITY.index(outcome) if outcome in SEVERITY else len(SEVERITY)


def recovery_chart(doc: dict[str, Any], key: tuple[str, str, str]) -> charts.Chart | None:
    rows = groups(doc)[key]
    timed = [(row["model"], p) for row in rows for p in row.get("points", [])
             if p.get("recovery_ms") is not None]
    if not timed:
        return None
    chart = charts.Chart(f"recovery-{'-'.join(key)}", f"{_label(key)}: recovery time per "
                         "crash point", width=10, height=3.6, cols=2)
    dist, over = chart.axes
    models = list(dict.fromkeys(m for m, _p in timed))
    colour = charts.colours(models)
    values = [p["recovery_ms"] for _m, p in timed]
    bins = min(MAX_HISTOGRAM_BINS, max(5, len(values) // 5))
    _counts, _edges, patches = dist.hist(values, bins=bins, color=charts.PALETTE[0])
    chart.mark("histogram", patches)
    dist.set_xlabel("recovery time (ms)")
    dist.set_ylabel("crash points")
    dist.set_title("distribution")
    for model in models:
        mine = [p for m, p in timed if m == model]
        dots = over.scatter([p["at_s"] for p in mine], [p["recovery_ms"] for p in mine], s=10,
                            color=colour[model], label=f"model {model}", linewidths=0)
        chart.mark(f"over-{model}", dots)
    over.set_xlabel("seconds into the run (s)")
    over.set_ylabel("recovery time (ms)")
    over.set_title("over the run")
    chart.legend()
    return chart


def outcomes_chart(doc: dict[str, Any]) -> charts.Chart | None:
    """Per fault model and policy (and target, mode): points judged by outcome."""
    rows = [row for row in doc["rows"] if row.get("points")]
    if not rows:
        return None
    many = len({(r["target"], r["mode"]) for r in rows}) > 1
    labels = [(f"{r['target']} {r['mode']}: " if many else "") + f"{r['policy']} · {r['model']}"
              for r in rows]
    chart = charts.Chart("outcomes", "crash points judged per fsync policy and fault model, by "
                         "outcome", height=1.6 + 0.34 * len(rows))
    ax = chart.ax
    ys = list(range(len(rows)))[::-1]
    counts = [Counter(p["outcome"] for p in r["points"]) for r in rows]
    left = [0] * len(rows)
    for outcome in SEVERITY:
        widths = [c.get(outcome, 0) for c in counts]
        if not any(widths):
            continue
        bars = ax.barh(ys, widths, left=left, height=0.6, label=outcome,
                       color=charts.OUTCOMES[outcome], edgecolor="white", linewidth=0,
                       hatch=charts.OUTCOME_HATCHES.get(outcome))
        chart.mark(f"outcome-{outcome}", [b for b, w in zip(bars, widths, strict=True) if w])
        left = [a + w for a, w in zip(left, widths, strict=True)]
    for y, row, total in zip(ys, rows, left, strict=True):
        violations = sum(row.get("violations", {}).values())
        ax.annotate(f"{total:,} points, {violations} violation(s)", (total, y),
                    xytext=(4, 0), textcoords="offset points", va="center", fontsize=8,
                    color=charts.FAIL if violations else "#1d232a")
    ax.set_yticks(ys, labels)
    ax.set_xlabel("crash points judged")
    ax.set_xlim(0, max(left) * 1.3 if max(left) else 1)
    ax.grid(axis="y", visible=False)
    chart.legend()
    return chart


# --- the page ------------------------------------------------------------------------------------


def page(doc: dict[str, Any]) -> Page:
    rows = doc["rows"]
    found = [f for row in rows for f in row.get("found", [])]
    out = Page("streamkeep crashbench", "; ".join(doc.get("notes", [])))
    out.raw(summary([("result", "every invariant held" if doc.get("ok") else "VIOLATED"),
                     ("crash points judged", f"{sum(r['covered'] for r in rows):,}"),
                     ("violations", len(found)),
                     ("operations acknowledged", f"{sum(r['acked'] for r in rows):,}")]))
    links = violation_ids(doc)
    out.heading("Points and violations")
    chart = outcomes_chart(doc)
    if chart is not None:
        out.chart(chart.svg(), chart.ident, chart.title, chart.series)
    out.table(["target", "policy", "mode", "fault model", "points", "reached", "acked",
               "most lost", "violations", "recovery mean (ms)", "points/s", "result"],
              [_row_cells(row) for row in rows], ident="rows")
    out.table(["invariant", "violations", "result"], _invariant_cells(doc), ident="invariants")
    for key in groups(doc):
        out.heading(_label(key))
        for made in (timeline_chart(doc, key, links), recovery_chart(doc, key)):
            if made is not None:
                out.chart(made.svg(), made.ident, made.title, made.series)
    out.heading("Violations")
    if not found:
        out.text("None: every invariant held at every crash point.")
    else:
        out.table(["#", "invariant", "configuration", "crash point"],
                  _violation_cells(doc)[:MAX_DETAILS], ident="violations")
    n = 0
    for row in rows:
        for f in row.get("found", []):
            n += 1
            if n <= MAX_DETAILS:
                out.raw(_detail(n, row, f))
    if n > MAX_DETAILS:
        out.text(f"The first {MAX_DETAILS} of {n} violations are shown; the --json report "
                 "has every one.")
    return out


def _violation_cells(doc: dict[str, Any]) -> list[list[Cell | str]]:
    out: list[list[Cell | str]] = []
    for row in doc["rows"]:
        for f in row.get("found", []):
            n = len(out) + 1
            point = _point_of(row, f)
            out.append([Cell(str(n), link=f"#violation-{n}"), f["invariant"],
                        f"{row['target']} {row['policy']} {row['mode']} {row['model']}",
                        point["where"] if point else ""])
    return out


def _point_of(row: dict[str, Any], f: dict[str, Any]) -> dict[str, Any] | None:
    index = f.get("point")
    points = row.get("points", [])
    return points[index] if index is not None and index < len(points) else None


def _row_cells(row: dict[str, Any]) -> list[Cell | str]:
    mean = row.get("recovery_ms_mean")
    rate = row.get("points_per_second")
    return [row["target"], row["policy"], row["mode"], row["model"], num(row["covered"]),
            num(row["reached"]), num(row["acked"]), num(row["lost"]),
            num(sum(row.get("violations", {}).values())),
            num(mean, f"{mean:.1f}") if mean is not None else "",
            num(rate, f"{rate:.1f}") if rate else "", verdict(row.get("result"))]


def _invariant_cells(doc: dict[str, Any]) -> list[list[Cell | str]]:
    from streamkeep.tools.crashbench.invariants import INVARIANTS

    total: Counter[str] = Counter()
    for row in doc["rows"]:
        total.update(row.get("violations", {}))
    return [[inv, num(total[inv]), verdict("FAIL" if total[inv] else "PASS")]
            for inv in INVARIANTS]


def _detail(n: int, row: dict[str, Any], f: dict[str, Any]) -> str:
    point = _point_of(row, f)
    items: list[tuple[str, str]] = [
        ("configuration", f"{row['target']}, appendfsync {row['policy']}, {row['mode']}, "
                          f"fault model {row['model']}")]
    if point is not None:
        items.append(("crash point", f"{point['where']}, {point['at_s']:.3f} s into the run, "
                                     f"after {point['op']:,} acknowledged operations"))
    for label, field in (("operation in flight", "in_flight"), ("expected", "expected"),
                         ("recovery gave", "recovered")):
        if f.get(field):
            items.append((label, f[field]))
    items.append(("what broke", f["detail"]))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in items)
    history = ""
    if f.get("history"):
        history = (f"<p>The last {len(f['history'])} of {f.get('history_length', 0)} "
                   f"operations:</p><pre>{esc(chr(10).join(f['history']))}</pre>")
    return (f'<section class="detail" id="violation-{n}"><h3>Violation {n}: '
            f"{esc(f['invariant'])}</h3><dl>{dl}</dl>{history}<p>Replay it: "
            f"<code>streamkeep crashbench --replay {esc(f['replay'])}</code></p></section>")


def write(path: str, document: dict[str, Any], force: bool) -> None:
    """The page of a crashbench document at `path`, whole (tools.safe_output: OutputRefused)."""
    from streamkeep.tools.report.page import write as write_page

    write_page(path, page(document), force=force)

