"""Plain-text tables, the layout every table of the bench prints in (tests parse it: two
spaces between columns, a dashed rule under the headers, no trailing blanks): :class:`Table`
and :func:`format_table`. Must not touch: what the tables hold, colours (the report's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Aligned plain-text table; columns listed in ``right`` are right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w)
               for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


@dataclass
class Table:
    """A table before it is rendered: plain text (:meth:`plain`) or, on a terminal, rich."""

    headers: list[str]
    rows: list[list[str]]
    right: set[int] = field(default_factory=set)
    verdict: int | None = None  # the column holding PASS/FAIL (or met/not met), if any

    def plain(self) -> str:
        return format_table(self.headers, self.rows, self.right)
