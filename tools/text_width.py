"""Fitting what the tools print to the width they print at, without cutting anything.

Owns `width` (COLUMNS when set, else the terminal's width, else 80: a pipe gets 80 too), text
wrapped at that width (`wrap`: between words only, so an ID or a number is never split) and
tables that do not fit: printed one row per block instead, each column's header beside its
value (`vertical`), rather than squeezed until rich cuts cells to "179548…". For rich tables
(`print_table`) and the plain ones a :class:`Table` holds (`plain`). Also the plain-text layout
the bench and the crash bench print their tables in (:class:`Table`, :func:`format_table`: tests
parse it, two spaces between columns, a dashed rule under the headers, no trailing blanks) and
their blocks on a terminal (:func:`print_blocks`: rich tables, verdicts in colour).
Must not touch: what the tables hold (each command fills its own).
"""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

DEFAULT_WIDTH = 80
MIN_ROOM = 20  # a wrapped value gets at least this many columns beside its label
VERDICT_STYLES = {"PASS": "bold green", "met": "bold green", "FAIL": "bold red",
                  "not met": "bold red", "n/a": "yellow"}


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


def print_blocks(blocks: Sequence[Table | str], file: IO[str]) -> None:
    """Tables as rich tables (the verdict column in colour) and text as it is, a blank line
    apart, on a terminal."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = Console(file=file, highlight=False)
    for i, block in enumerate(blocks):
        if i:
            console.print()
        if isinstance(block, str):
            console.print(Text(block), soft_wrap=True)
            continue
        table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for column, title in enumerate(block.headers):
            table.add_column(title, justify="right" if column in block.right else "left")
        for row in block.rows:
            table.add_row(*(Text(cell, style=VERDICT_STYLES.get(cell, ""))
                            if column == block.verdict else Text(cell)
                            for column, cell in enumerate(row)))
        console.print(table)


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
    """A plain-text table (:func:`format_table`) when it fits in `columns`, else the same rows
    `vertical`."""
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
