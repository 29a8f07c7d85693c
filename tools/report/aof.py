"""An AOF's report as charts: `streamkeep aof stats PATH --html FILE`.

Owns turning an `aof stats --json` document into a page: records and their bytes (framed, as
in the segments) over time by command (each record counted under its first effect's
command), with the log's size growing below on the same time axis and its segments (the span
of their records' times) and the snapshot (when it was made) marked there; the effects per
record; the commands' effects and their bytes; the record sizes; and the fsync rounds where a
document records them (a data directory's files do not: the page says so). Each byte count
is named for what it counts (RECORD_BYTES, FILE_BYTES, the effects' msgpack size).
Everything shown is read from the document, so the page and the JSON agree.
Must not touch: reading the AOF (tools.inspect.stats), the page's markup (page), matplotlib
(charts).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from streamkeep.aof.codec import HEADER_SIZE
from streamkeep.tools.report import charts
from streamkeep.tools.report.page import Cell, Page, num, summary

TOP_COMMANDS = 7  # drawn apart over time; the others together
# The page's three byte counts, each named for what it counts: the records as framed in the
# segments (header and table agree: a segment's good records end where its file's header
# and records end), the segment files (their headers too, and any damaged tail), and per
# command its effects' msgpack size (the commands table).
RECORD_BYTES = "records' bytes (framed)"
FILE_BYTES = "segment files' bytes"


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def leading(doc: dict[str, Any]) -> list[str]:
    """The commands drawn apart: the most records over the whole log."""
    totals: dict[str, int] = {}
    for bucket in doc["timeline"]["buckets"]:
        for name, row in bucket["commands"].items():
            totals[name] = totals.get(name, 0) + row["records"]
    return sorted(totals, key=lambda n: (-totals[n], n))[:TOP_COMMANDS]


def timeline_chart(doc: dict[str, Any]) -> charts.Chart | None:
    buckets = doc["timeline"]["buckets"]
    if not buckets:
        return None
    width = timedelta(milliseconds=doc["timeline"]["width_ms"])
    names = leading(doc)
    others = any(n not in names for b in buckets for n in b["commands"])
    shown = [*names, *(["other commands"] if others else [])]
    colour = charts.colours(shown)
    chart = charts.Chart("aof-timeline", "records and bytes over time, by command", width=10,
                         height=7.5, rows=3, sharex=True,
                         gridspec_kw={"height_ratios": [3, 3, 2.4]})
    records_ax, bytes_ax, size_ax = chart.axes
    xs = [_when(b["start_ms"]) for b in buckets]
    below_r = [0] * len(buckets)
    below_b = [0] * len(buckets)
    for name in shown:
        def value(b: dict[str, Any], field: str, name: str = name) -> int:
            if name == "other commands":
                return sum(r[field] for n, r in b["commands"].items() if n not in names)
            return int(b["commands"].get(name, {}).get(field, 0))

        recs = [value(b, "records") for b in buckets]
        sizes = [value(b, "bytes") for b in buckets]
        bars = records_ax.bar(xs, recs, width=width, bottom=below_r, align="edge",
                              color=colour[name], label=name)
        chart.mark(f"records-{name}", [b for b, v in zip(bars, recs, strict=True) if v])
        bars = bytes_ax.bar(xs, [s / 1024 for s in sizes], width=width,
                            bottom=[v / 1024 for v in below_b], align="edge", color=colour[name])
        chart.mark(f"bytes-{name}", [b for b, v in zip(bars, sizes, strict=True) if v])
        below_r = [a + v for a, v in zip(below_r, recs, strict=True)]
        below_b = [a + v for a, v in zip(below_b, sizes, strict=True)]
    per = _width_text(doc["timeline"]["width_ms"])
    records_ax.set_ylabel(f"records per {per}")
    bytes_ax.set_ylabel(f"records' KiB per {per}")
    total = 0
    grown = []
    for size in below_b:
        total += size
        grown.append(total / 1024 / 1024)
    (line,) = size_ax.step([xs[0], *(_when(b["start_ms"]) + width for b in buckets)],
                           [0.0, *grown], where="pre",
                           color="#1d232a", linewidth=1.4, label="log size (framed records)")
    chart.mark("log-size", [line])
    spans: list[Any] = []
    for i, seg in enumerate(doc["segments"]):
        if seg.get("first_time_ms") is None:
            continue
        start, end = _when(seg["first_time_ms"]), _when(seg["last_time_ms"])
        if end - start < width / 4:
            end = start + width / 4  # a segment written in an instant: still visible
        spans.append(size_ax.axvspan(start, end, color=charts.PALETTE[i % 2 + 4], alpha=0.18,
                                     label="segments (their records' times)" if not spans
                                     else None))
        size_ax.annotate(f"#{seg['segment']}", (start, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(2, -10), textcoords="offset points", fontsize=7)
    chart.mark("segments", spans)
    if doc.get("snapshot_created_ms") is not None:
        snap = size_ax.axvline(_when(doc["snapshot_created_ms"]), color=charts.FAIL,
                               linewidth=1.6, linestyle="--",
                               label=f"snapshot made (up to LSN {doc['snapshot_lsn']:,})")
        chart.mark("snapshot", [snap])
    size_ax.set_ylabel("log size (MiB)")
    size_ax.set_xlabel("time (UTC)")
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    size_ax.xaxis.set_major_locator(locator)
    size_ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    chart.legend()
    return chart


def _width_text(ms: int) -> str:
    for size, unit in ((86_400_000, "day"), (3_600_000, "h"), (60_000, "min"), (1000, "s")):
        if ms >= size:
            value = ms / size
            return f"{value:g} {unit}" if value != 1 else unit
    return f"{ms} ms"


def effects_chart(doc: dict[str, Any]) -> charts.Chart | None:
    per = doc.get("effects_per_record") or {}
    if not per:
        return None
    chart = charts.Chart("aof-effects", "effects per record, and per command", width=10,
                         height=3.2 + 0.22 * min(len(doc["commands"]), 20), cols=2)
    left, right = chart.axes
    counts = sorted((int(n), c) for n, c in per.items())
    bars = left.bar([str(n) for n, _c in counts], [c for _n, c in counts],
                    color=charts.PALETTE[0])
    chart.mark("records-by-effects", bars)
    left.set_xlabel("effects in a record")
    left.set_ylabel("records")
    left.set_title("effects per record")
    if max(c for _n, c in counts) > 50 * max(1, min(c for _n, c in counts)):
        left.set_yscale("log")
    left.grid(axis="x", visible=False)
    commands = list(doc["commands"].items())[:20]
    ys = list(range(len(commands)))[::-1]
    bars = right.barh(ys, [row["effects"] for _n, row in commands], color=charts.PALETTE[1])
    chart.mark("effects-by-command", bars)
    right.set_yticks(ys, [n for n, _row in commands])
    right.set_xlabel("effects")
    right.set_title("effects per command")
    right.grid(axis="y", visible=False)
    return chart


def page(doc: dict[str, Any]) -> Page:
    out = Page(f"streamkeep aof stats {doc['path']}",
               f"LSNs {doc['first_lsn']} .. {doc['last_lsn']}; "
               f"{doc['first_time'] or '-'} .. {doc['last_time'] or '-'}")
    out.raw(summary([("records", f"{doc['records']:,}"), ("effects", f"{doc['effects']:,}"),
                     (RECORD_BYTES, f"{doc['bytes']:,}"),
                     (FILE_BYTES, f"{sum(s['size'] for s in doc['segments']):,}"),
                     ("segments", len(doc["segments"])),
                     ("snapshot up to LSN", doc["snapshot_lsn"] if doc["snapshot_lsn"]
                      is not None else "none")]))
    if doc.get("damage"):
        out.text(f"Damaged: {doc['damage']}; the figures cover the records before it.")
    out.heading("Over time")
    for chart in (timeline_chart(doc),):
        if chart is not None:
            out.chart(chart.svg(), chart.ident, chart.title, chart.series)
    out.table(["file", "segment", "first LSN", "last LSN", "records", RECORD_BYTES,
               "file size (bytes)", "first record", "last record", "damage"],
              [_segment_cells(s) for s in doc["segments"]], ident="segments")
    out.heading("Commands and effects")
    chart = effects_chart(doc)
    if chart is not None:
        out.chart(chart.svg(), chart.ident, chart.title, chart.series)
    out.table(["command", "effects", "records", "effects' bytes (msgpack)"],
              [[Cell(name), num(row["effects"]), num(row["records"]), num(row["bytes"])]
               for name, row in doc["commands"].items()], ident="commands")
    out.table(["effects in a record", "records"],
              [[num(int(n)), num(c)] for n, c in (doc.get("effects_per_record") or {}).items()],
              ident="effects-per-record")
    sizes = doc["record_sizes"]
    out.heading("Record sizes")
    out.table(["", "bytes (framed)"], [[label, num(sizes[label])] for label in
                                       ("min", "mean", "max")] +
              [[label, num(value)] for label, value in sizes["percentiles"].items()],
              ident="record-sizes")
    out.heading("Fsync rounds")
    if doc.get("fsync"):
        rounds = sorted(doc["fsync"], key=lambda r: -r["ms"])[:20]
        out.table(["when", "duration (ms)", "records"],
                  [[r.get("time", ""), num(r["ms"]), num(r.get("records"))] for r in rounds],
                  ident="fsync")
    else:
        out.text("Not recorded: a data directory's files hold no fsync times (the segments, "
                 "the manifest and the synced watermark say what was written and made durable, "
                 "not how long it took).")
    return out


def _segment_cells(seg: dict[str, Any]) -> list[Cell | str]:
    from streamkeep.tools.inspect.aof_records import format_time

    def when(ms: int | None) -> str:
        return "" if ms is None else format_time(ms)

    return [seg["file"], num(seg["segment"]), num(seg["first_lsn"]), num(seg["last_lsn"]),
            num(seg["records"]), num(max(0, seg["end"] - HEADER_SIZE)), num(seg["size"]),
            when(seg.get("first_time_ms")),
            when(seg.get("last_time_ms")), seg.get("damage") or ""]


def write(path: str, document: dict[str, Any], force: bool) -> None:
    """The page of an `aof stats` document at `path`, whole (tools.safe_output: OutputRefused)."""
    from streamkeep.tools.report.page import write as write_page

    write_page(path, page(document), force=force)
