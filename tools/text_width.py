"""Fitting what the tools print to the width they print at, without cutting anything.

Owns `width` (COLUMNS when set, else the terminal's width, else 80: a pipe gets 80 too), text
wrapped at that width (`wrap`: between words only, so an ID or a number is never split) and
tables that do not fit: printed one row per block instead, each column's header beside its
value (`vertical`), rather than squeezed until rich cuts cells to "179548…". For rich tables
(`print_table`) and the plain ones the bench module's Table holds (`plain`).
Must not touch: what the tables hold (each command fills its own).
"""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Sequence
from typing import IO, Any

DEFAULT_WIDTH = 80
MIN_ROOM = 20  # a wrapped value gets at least this many columns beside its label


def width(stream: IO[str] | Any) -> int:
    """The columns output to `stream` may take: COLUMNS, else the terminal's, else 80."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def wrap(text: str, columns: int, indent: str = "") -> str:
    """Each line of `text` wrapped at `columns` between words (a word longer than the line
    stays whole); continuation lines start with `indent`."""
    out: list[str] = []
    for line in text.splitlines() or [""]:
        if len(line) <= columns:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        out.extend(textwrap.wrap(line, columns, initial_indent="", subsequent_indent=lead + indent,
                                 break_long_words=False, break_on_hyphens=False) or [line])
    return "\n".join(out)


def vertical(headers: Sequence[str], rows: Sequence[Sequence[str]], columns: int,
             title: str | None = None) -> str:
    """The table one row per block: `header  value` lines (values wrapped at `columns`),
    blocks a blank line apart; an empty header (a label column) is left out."""
    label = max((len(h) for h in headers), default=0)
    room = max(columns - label - 2, MIN_ROOM)
    lines = [title] if title else []
    for i, row in enumerate(rows):
        if i or title:
            lines.append("")
        for header, cell in zip(headers, row, strict=False):
            chunks = textwrap.wrap(cell, room, break_long_words=False,
                                   break_on_hyphens=False) or [""]
            lines.append(f"{header:<{label}}  {chunks[0]}".rstrip())
            lines.extend(" " * (label + 2) + chunk for chunk in chunks[1:])
    return "\n".join(lines)


def plain(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int],
          columns: int) -> str:
    """A plain-text table (tools.bench.tables' layout) when it fits in `columns`, else the
    same rows `vertical`."""
    from streamkeep.tools.bench.tables import format_table

    text = format_table(headers, rows, right)
    if max(len(line) for line in text.splitlines()) <= columns:
        return text
    return vertical(headers, rows, columns)


def print_table(console: Any, table: Any, columns: int) -> None:
    """A rich Table on `console` as it is when it fits in `columns`, else its rows
    `vertical` (its title first). A table without a header row is two-column `label value`
    lines already: it keeps its labels."""
    from rich.measure import Measurement
    from rich.text import Text

    natural = Measurement.get(console, console.options.update_width(1 << 20), table).maximum
    if natural <= columns:
        console.print(table)
        return
    headers = [str(c.header) for c in table.columns]
    cells = [[str(cell) for cell in c.cells] for c in table.columns]
    rows = [list(row) for row in zip(*cells, strict=True)]
    title = str(table.title) if table.title else None
    if not table.show_header and len(headers) == 2:
        label = max((len(r[0]) for r in rows), default=0)
        text = "\n".join([*([title] if title else []),
                          *(f"{r[0]:<{label}}  {r[1]}".rstrip() for r in rows)])
    else:
        text = vertical(headers, rows, columns, title)
    console.print(Text(wrap(text, columns, "  ")), soft_wrap=True)
    console.print()  # (the blocks end where the next table or text begins)
