"""One report page: a self-contained HTML document of headings, text, tables and charts.

Owns the document (inline CSS for the screen and for print, no script, no external resource:
it opens from a file, offline, and prints), escaping, the table markup (each number cell keeps
its exact value in ``data-value``, so a test can hold the page against the JSON it was made
from), anchors between sections, and writing the page whole (tools.safe_output: beside the final
name, then renamed; never into a data directory).
Must not touch: what a report shows (the report modules), how a chart is drawn (charts).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: #1d232a; margin: 0 auto; max-width: 1100px; padding: 24px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 20px 0 6px; }
p.meta { color: #57606a; margin: 0 0 12px; }
figure.chart { margin: 12px 0 20px; break-inside: avoid; page-break-inside: avoid; }
figure.chart svg { max-width: 100%; height: auto; }
figure.chart figcaption { color: #57606a; font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.PASS, span.PASS { color: #1a7f37; font-weight: 600; }
td.FAIL, span.FAIL { color: #cf222e; font-weight: 600; }
td.na, span.na { color: #9a6700; }
.summary span { margin-right: 14px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; font-size: 12px; }
section.detail { border-left: 3px solid #cf222e; padding-left: 12px; margin: 12px 0; }
section.detail:target { background: #fff8c5; }
nav a { margin-right: 12px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  table, section.detail { break-inside: avoid; page-break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def anchor(text: str) -> str:
    """An id for `text`: lower case, runs of other characters as one dash."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"


@dataclass
class Cell:
    """A table cell: its text, and for a number its exact value (``data-value``)."""

    text: str
    value: float | int | None = None
    css: str = ""
    link: str | None = None  # an anchor on the page ("#violation-3")


def num(value: float | int | None, text: str | None = None, css: str = "") -> Cell:
    """A number cell: `text` shown (default: the value as is), the value kept exactly."""
    if value is None:
        return Cell(text or "", None, css)
    return Cell(text if text is not None else f"{value:,}", value, css)


def verdict(result: str | None) -> Cell:
    """A PASS / FAIL / n/a cell, coloured."""
    text = result or ""
    return Cell(text, None, {"PASS": "PASS", "FAIL": "FAIL", "n/a": "na"}.get(text, ""))


@dataclass
class Page:
    """The document, built in order: `heading`, `text`, `table`, `chart`, `raw`."""

    title: str
    subtitle: str = ""
    parts: list[str] = field(default_factory=list)
    sections: list[tuple[str, str]] = field(default_factory=list)  # (anchor, heading) of h2s

    def heading(self, text: str, level: int = 2, ident: str | None = None) -> str:
        ident = ident or anchor(text)
        if level == 2:
            self.sections.append((ident, text))
        self.parts.append(f'<h{level} id="{esc(ident)}">{esc(text)}</h{level}>')
        return ident

    def text(self, text: str, css: str = "") -> None:
        klass = f' class="{esc(css)}"' if css else ""
        self.parts.append(f"<p{klass}>{esc(text)}</p>")

    def raw(self, markup: str) -> None:
        """Markup the caller built (with `esc` for every text in it)."""
        self.parts.append(markup)

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[Cell | str]],
              ident: str | None = None) -> None:
        self.parts.append(table_html(headers, rows, ident))

    def chart(self, svg: str, ident: str, title: str, series: dict[str, int],
              caption: str = "") -> None:
        """An inline SVG chart; `series` (name -> marks drawn) is kept in ``data-series``
        for whoever checks what the chart holds."""
        import json

        cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
        self.parts.append(
            f'<figure class="chart" id="{esc(ident)}" data-title="{esc(title)}" '
            f"data-series='{esc(json.dumps(series, sort_keys=True))}'>{svg}{cap}</figure>")

    def render(self) -> str:
        nav = "".join(f'<a href="#{esc(a)}">{esc(h)}</a>' for a, h in self.sections)
        sub = f'<p class="meta">{esc(self.subtitle)}</p>' if self.subtitle else ""
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{esc(self.title)}</title><style>{CSS}</style></head><body>"
                f"<h1>{esc(self.title)}</h1>{sub}"
                + (f"<nav>{nav}</nav>" if len(self.sections) > 1 else "")
                + "\n".join(self.parts) + "</body></html>\n")


def table_html(headers: Sequence[str], rows: Iterable[Sequence[Cell | str]],
               ident: str | None = None) -> str:
    out = [f'<table{f" id={chr(34)}{esc(ident)}{chr(34)}" if ident else ""}><thead><tr>']
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>")
        for cell in row:
            out.append(_cell_html(cell if isinstance(cell, Cell) else Cell(cell)))
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _cell_html(cell: Cell) -> str:
    classes = [c for c in (cell.css, "num" if cell.value is not None else "") if c]
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    if cell.value is not None:
        attrs += f' data-value="{cell.value!r}"'
    text = esc(cell.text)
    if cell.link:
        text = f'<a href="{esc(cell.link)}">{text}</a>'
    return f"<td{attrs}>{text}</td>"


def write(path: str, page: Page, force: bool = False) -> None:
    """The page at `path`, whole or not at all (tools.safe_output)."""
    from streamkeep.tools.safe_output import write_file

    write_file(path, [page.render().encode()], force=force)


def summary(items: Sequence[tuple[str, Any]]) -> str:
    """A line of labelled figures (``<p class="summary">``)."""
    return '<p class="summary">' + "".join(
        f"<span>{esc(label)}: <b>{esc(value)}</b></span>" for label, value in items) + "</p>"
