"""tools/docs.py: the manual's generated content. `streamkeep commands` prints the command table;
`expand` replaces a page's markers and refuses unknown ones; the renderings are well-formed
markdown tables built from the registries. (That the manual's pages hold every row is
tests/docs/test_reference.py's.)"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

from streamkeep.engine.exec.settings import PARAMS
from streamkeep.tools import docs
from streamkeep.tools.main import build_parser, main


def test_streamkeep_commands_prints_the_command_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["commands"]) == 0
    out = capsys.readouterr().out
    assert out == docs.command_table_markdown() + "\n"
    assert out.startswith(docs.BEGIN) and out.rstrip().endswith(docs.END)
    assert "| stream | `XADD` |" in out
    assert "`SK.XCONSUMER`" in out  # the effect-only commands, named apart


def _tables(markdown: str) -> list[list[list[str]]]:
    """Each markdown table's rows (consecutive `|` lines), split on unescaped pipes."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(re.split(r"(?<!\\)\|", line)[1:-1])
        previous = line
    return tables


@pytest.mark.parametrize("render", [docs.command_table_markdown, docs.config_table_markdown,
                                    docs.effect_vocabulary_markdown,
                                    docs.bench_sections_markdown,
                                    docs.bench_native_targets_markdown,
                                    lambda: docs.bench_section_markdown("aof")])
def test_every_table_row_has_its_header_s_cells(render) -> None:  # type: ignore[no-untyped-def]
    tables = _tables(render())
    assert tables
    for rows in tables:
        assert len(rows) > 2 and set("".join(rows[1])) <= {"-"}, rows[:2]
        assert all(len(row) == len(rows[0]) for row in rows), rows[0]


def test_config_defaults_read_as_a_config_file_writes_them() -> None:
    text = docs.config_table_markdown()
    assert "| `auto-aof-rewrite-min-size` | memory | `64mb` |" in text
    assert "| `appendfsync` | enum | `everysec` |" in text
    assert "`normal 256mb 64mb 60`" in text
    assert "`slaveof` is another name for `replicaof`" in text
    assert len([line for line in text.splitlines() if line.startswith("| `")]) == len(PARAMS)


def test_cli_commands_walk_the_whole_tree_groups_first() -> None:
    found = [words for words, _help, _parser in docs.cli_commands(build_parser())]
    assert found.index(("aof",)) < found.index(("aof", "verify"))
    assert ("snapshot", "info") in found and ("queue", "stats") in found


def test_exit_statuses_come_from_the_help_text() -> None:
    text = "usage: x\n\nexamples:\n  x y\n\nexit status:\n  0    ok\n  3    usage\n\nmore\n"
    assert docs.exit_statuses(text) == "exit status:\n  0    ok\n  3    usage"
    assert docs.exit_statuses("usage: x\n") == ""


def test_the_cli_reference_is_rendered_at_a_fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    text = docs.cli_reference_markdown(build_parser())
    assert "## streamkeep serve\n" in text and "### streamkeep aof verify\n" in text
    assert "usage: streamkeep serve [-h] [--dir DIR] [--port PORT]" in text
    assert os.environ["COLUMNS"] == "40"  # put back


def test_expand_replaces_markers_and_refuses_unknown_ones() -> None:
    sources = docs.Sources(parser=build_parser())
    page = "# T\n\n<!-- generate: config -->\n\ntext\n"
    out = docs.expand(page, sources)
    assert "<!-- generate:" not in out and "| `backlog-memory` |" in out and out.endswith(
        "text\n")
    with pytest.raises(ValueError, match="unknown generated content 'nope'"):
        docs.expand("<!-- generate: nope -->\n", sources)
    with pytest.raises(ValueError, match="needs the CLI's parser"):
        docs.expand("<!-- generate: cli -->\n", docs.Sources())
    with pytest.raises(ValueError, match="no bench section"):
        docs.expand("<!-- generate: bench-section nope -->\n", sources)


def test_table_cells_escape_what_markdown_would_read() -> None:
    assert docs.table_cell("KEYS *a{1000}b | x <y>") == "KEYS \\*a{1000}b \\| x &lt;y&gt;"


def test_a_parser_without_subcommands_has_none() -> None:
    assert list(docs.cli_commands(argparse.ArgumentParser(prog="x"))) == []


def test_the_reports_charts_are_drawn_from_the_committed_json() -> None:
    """The manual's bench charts (and the guides' example reports): one raw HTML block per
    chart, no blank line inside (Markdown would end the block there), from committed JSON."""
    import json as json_module

    from streamkeep.tools.report.bench import sections

    src = Path(__file__).resolve().parents[2] / "docs" / "src"
    doc = json_module.loads((src / "benchmarks" / "results.json").read_text())
    out = docs.report_charts_markdown("bench", src / "benchmarks" / "results.json")
    blocks = out.split("\n\n")
    assert all(b.startswith('<div class="report-chart">') and "<svg" in b for b in blocks)
    assert sum('data-chart="rates-' in b for b in blocks) == len(sections(doc))
    for name, kind in (("crashbench.json", "crashbench"), ("aof-stats.json", "aof")):
        out = docs.report_charts_markdown(kind, src / "examples" / name)
        assert out.count("<svg") >= 2 and "\n\n\n" not in out
    assert docs.report_charts_markdown("bench", src / "missing.json") == ""
