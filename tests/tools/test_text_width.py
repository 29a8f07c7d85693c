"""tools/text_width.py: the width output fits (COLUMNS, the terminal's, 80 when piped), text
wrapped between words only, and tables too wide printed a row per block, never cut."""

from __future__ import annotations

import io

import pytest

from streamkeep.tools.text_width import plain, print_table, vertical, width, wrap

ID = "18446744073709551614-18446744073709551614"


def test_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "132")
    assert width(io.StringIO()) == 132
    monkeypatch.delenv("COLUMNS")
    assert width(io.StringIO()) == 80  # piped
    monkeypatch.setenv("COLUMNS", "wide")
    assert width(io.StringIO()) == 80


def test_wrap_never_splits_a_word() -> None:
    text = "a line with an ID " + ID + " and more words after it than fit in forty columns"
    wrapped = wrap(text, 40, "  ")
    assert ID in wrapped.splitlines()[1] or ID in wrapped.splitlines()[0]
    assert all(len(line) <= 44 for line in wrapped.splitlines())  # the ID is 41 long
    assert wrap("short", 40) == "short"


def test_vertical_and_plain() -> None:
    headers = ["stream", "first id", "last id", "note"]
    rows = [["orders", ID, ID, "a note long enough to need wrapping at this narrow width"],
            ["b", "1-1", "1-2", ""]]
    text = vertical(headers, rows, 60, title="streams")
    lines = text.splitlines()
    assert lines[0] == "streams" and lines[1] == ""
    assert f"first id  {ID}" in lines and "" in lines[2:]  # a blank line between rows
    assert all(len(line) <= 60 for line in lines)
    assert plain(headers, rows, set(), 60) == vertical(headers, rows, 60)
    narrow = [["a", "1-1", "1-2", "x"]]
    assert plain(headers, narrow, set(), 80).splitlines()[0].split() == [
        "stream", "first", "id", "last", "id", "note"]


def test_print_table() -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("db", "stream", "first id", "last id", "max deleted", title="streams")
    table.add_row("0", "orders", ID, ID, "0-0")
    out = io.StringIO()
    print_table(Console(file=out, width=80), table, 80)
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert f"last id      {ID}" in text and "…" not in text
    out = io.StringIO()
    print_table(Console(file=out, width=200), table, 200)
    assert "┃ db ┃" in out.getvalue()  # fits: a table
