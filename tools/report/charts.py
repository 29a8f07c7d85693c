"""Charts for the reports: matplotlib figures rendered as inline SVG.

Owns importing matplotlib (on first use, its Agg backend, never a display; `ReportUnavailable`,
one line, when it is not installed), the reports' look (sizes, colours of verdicts and
outcomes), and `Chart`: a figure whose series are tagged as they are drawn. Each mark of
series NAME in chart C carries the SVG id ``C-NAME.<i>``, or a collection of marks (a scatter)
the one id ``C-NAME`` with a ``<use>`` or ``<path>`` per mark; ``Chart.series`` counts the
marks per series, which the page keeps beside the SVG (``data-series``). Text stays text
(``svg.fonttype none``: small, selectable, searchable); the SVG carries no date and its ids
are salted with the chart's id, so the same data always gives the same bytes and two charts on
a page never share an id.
Must not touch: the page around a chart (page), what a report shows (its module).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError

INSTALL = "pip install 'streamkeep[report]'"

PASS = "#1a7f37"
FAIL = "#cf222e"
NEUTRAL = "#57606a"  # measured, no target
REFERENCE = "#8c959f"  # what a row is compared with
TARGET = "#0969da"
# Crash-bench outcomes, worst last: a hue each (green, teal, blue, amber, purple, red: apart by
# at least 30 in CIELAB, where two greens of one hue were hard to tell apart on a dense
# timeline), and a marker shape each on the timeline, a hatch on the bars, so that they
# also differ without colour (print, colour blindness).
OUTCOMES = {
    "clean": "#1a7f37",
    "restarted": "#1b7c83",
    "truncated": "#0969da",
    "lost within bound": "#bf8700",
    "refused": "#8250df",
    "violation": "#cf222e",
}
OUTCOME_MARKERS = {"clean": "o", "restarted": "o", "truncated": "s", "lost within bound": "D",
                   "refused": "^", "violation": "X"}
OUTCOME_HATCHES = {"truncated": "///", "lost within bound": "..", "refused": "\\\\"}
PALETTE = ("#0969da", "#bf3989", "#1a7f37", "#bc4c00", "#8250df", "#1b7c83", "#9a6700",
           "#cf222e", "#57606a", "#4d2d00", "#6639ba", "#0550ae")


class ReportUnavailable(StreamkeepError):
    """matplotlib is not installed: the one line a command prints before it runs."""


_PYPLOT: Any = None


def require() -> Any:
    """matplotlib.pyplot, on its Agg backend; ReportUnavailable when it is not installed."""
    global _PYPLOT
    if _PYPLOT is None:
        try:
            import matplotlib
        except ImportError:
            raise ReportUnavailable(f"--html needs matplotlib ({INSTALL})") from None
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot

        pyplot.rcParams.update({
            "svg.fonttype": "none", "font.size": 9, "axes.titlesize": 11,
            "axes.titleweight": "bold", "axes.spines.top": False, "axes.spines.right": False,
            "axes.grid": True, "grid.color": "#d0d7de", "grid.linewidth": 0.6,
            "axes.axisbelow": True, "legend.fontsize": 8, "legend.frameon": False,
            "font.family": ["DejaVu Sans", "sans-serif"]})
        _PYPLOT = pyplot
    return _PYPLOT


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


class Chart:
    """One figure of `rows` x `cols` axes; `mark` tags what is drawn; `svg` renders it."""

    def __init__(self, ident: str, title: str, width: float = 9.0, height: float = 4.0,
                 rows: int = 1, cols: int = 1, **subplots: Any) -> None:
        pyplot = require()
        self.ident = slug(ident)
        self.title = title
        self.fig, axes = pyplot.subplots(rows, cols, figsize=(width, height), squeeze=False,
                                         **subplots)
        self.axes = [ax for row in axes for ax in row]
        self.ax = self.axes[0]
        self.series: dict[str, int] = {}
        self.height = height
        self.legend_items: list[Any] = []
        if rows * cols > 1:
            self.fig.suptitle(title, fontweight="bold", fontsize=11)
        else:
            self.ax.set_title(title)

    def mark(self, name: str, drawn: Any, count: int | None = None) -> None:
        """Tag series `name`: `drawn` is a collection (one artist, `count` marks in it) or an
        iterable of artists (one mark each)."""
        key = f"{self.ident}-{slug(name)}"
        if hasattr(drawn, "set_gid"):
            drawn.set_gid(key)
            n = count if count is not None else len(drawn.get_offsets())
        else:
            artists = list(drawn)
            for i, artist in enumerate(artists):
                artist.set_gid(f"{key}.{self.series.get(slug(name), 0) + i}")
            n = len(artists)
        self.series[slug(name)] = self.series.get(slug(name), 0) + n

    def legend(self, *extra: tuple[str, str]) -> None:
        """One legend for the figure, under its axes: what every axes labelled, then `extra`
        (label, colour) swatches (verdict colours)."""
        from matplotlib.patches import Patch

        seen: dict[str, Any] = {}
        for ax in self.axes:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
        for label, colour in extra:
            seen.setdefault(label, Patch(color=colour, label=label))
        self.legend_items = list(seen.items())

    def svg(self) -> str:
        """The figure as an `<svg>` element (no XML declaration), and closed."""
        pyplot = require()
        buf = io.StringIO()
        with pyplot.rc_context({"svg.hashsalt": self.ident}):
            bottom = 0.0
            if self.legend_items:
                ncol = min(3, len(self.legend_items))
                lines = -(-len(self.legend_items) // ncol)
                self.fig.legend([h for _l, h in self.legend_items],
                                [label for label, _h in self.legend_items], loc="lower center",
                                ncol=ncol)
                bottom = min(0.5, (0.1 + 0.17 * lines) / self.height)
            self.fig.tight_layout(rect=(0, bottom, 1, 1))
            _keep_inside(self.fig, self.axes)
            self.fig.savefig(buf, format="svg", metadata={"Date": None})
        pyplot.close(self.fig)
        text = buf.getvalue()
        start = text.find("<svg")
        svg = text[start:]
        # an accessible name, and the id the page's checks find the chart by
        return svg.replace("<svg ", f'<svg role="img" aria-label="{_attr(self.title)}" '
                                    f'data-chart="{self.ident}" ', 1)


def _keep_inside(fig: Any, axes: list[Any]) -> None:
    """Each axes' title and x label moved sideways into the figure where it would run past an
    edge: centred on its axes, a long label under axes pushed right by wide tick labels (the
    bench's figure names) would reach beyond the figure, and the SVG's viewBox cuts it. One
    wider than the figure is wrapped at its edges as well."""
    renderer = fig.canvas.get_renderer()
    pad = 2 * fig.dpi / 72  # points
    left, right = fig.bbox.x0 + pad, fig.bbox.x1 - pad
    for ax in axes:
        for text in (ax.xaxis.label, ax.title):
            if not text.get_text() or not ax.bbox.width:
                continue
            box = text.get_window_extent(renderer)
            if box.width > right - left:
                text.set_wrap(True)
                continue
            shift = right - box.x1 if box.x1 > right else left - box.x0 if box.x0 < left else 0
            if shift:  # (their x is a fraction of the axes' width)
                text.set_x(text.get_position()[0] + shift / ax.bbox.width)


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def human(value: float) -> str:
    """An axis number: 950, 12k, 1.5M, 0.25."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def plain_log_axis(axis: Any) -> None:
    """A log axis labelled with plain numbers (12k, not 1.2 x 10^4), no minor labels."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: human(v)))
    axis.set_minor_formatter(NullFormatter())


def colours(names: Iterable[str]) -> dict[str, str]:
    """A stable colour per name, in order."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def verdict_colour(result: str | None) -> str:
    return PASS if result == "PASS" else FAIL if result == "FAIL" else NEUTRAL
