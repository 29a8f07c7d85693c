"""The generated reference cannot silently lose rows: the manual's reference pages carry the
generators' markers, and what the generators render names every command of the command table,
every setting of the config registry, every subcommand of the CLI (with its --help), every
effect, and every bench section and row; every marker in the manual names a generator."""

from __future__ import annotations

import argparse
import re

import pytest

from streamkeep.engine.exec.settings import PARAMS
from streamkeep.engine.exec.table import COMMANDS, effect_vocabulary
from streamkeep.tools import docs
from streamkeep.tools.bench import registry
from streamkeep.tools.main import build_parser
from tests.support.doc_examples import PAGES, pages

SOURCES = docs.Sources(parser=build_parser(), docs_dir=PAGES)


def expanded(name: str) -> str:
    text = (PAGES / name).read_text()
    return docs.expand(text, SOURCES)


@pytest.mark.parametrize(("page", "marker"), [
    ("reference/commands.md", "commands"), ("reference/config.md", "config"),
    ("reference/cli.md", "cli"), ("reference/exit-codes.md", "exit-statuses"),
    ("reference/effects.md", "effects"), ("benchmarks/index.md", "bench-sections"),
    ("benchmarks/index.md", "bench-results"), ("compiled-core.md", "bench-native-targets")])
def test_the_reference_pages_carry_their_generators(page: str, marker: str) -> None:
    assert f"<!-- generate: {marker} -->" in (PAGES / page).read_text()


def test_every_marker_in_the_manual_names_a_generator() -> None:
    for page in pages():
        for name, _arg in docs.MARKER.findall(page.read_text()):
            assert name in docs.GENERATORS, f"{page}: {name}"
        docs.expand(page.read_text(), SOURCES)  # renders (a bad bench section raises)


def test_every_command_and_subcommand_is_in_the_commands_page() -> None:
    text = expanded("reference/commands.md")
    rows = re.findall(r"^\| [\w-]+ \| `([A-Z][A-Z_ -]*)` \|", text, re.M)
    expected = []
    for spec in COMMANDS.values():
        if spec.internal:
            continue
        expected += ([f"{spec.name.upper()} {sub.decode().upper()}" for sub in spec.subcommands]
                     if spec.subcommands else [spec.name.upper()])
    assert sorted(rows) == sorted(expected)
    for spec in COMMANDS.values():
        if spec.internal:
            assert f"`{spec.name.upper()}`" in text


def test_every_setting_is_in_the_configuration_page() -> None:
    text = expanded("reference/config.md")
    rows = re.findall(r"^\| `([a-z-]+)` \|", text, re.M)
    assert rows == list(PARAMS)
    for name, param in PARAMS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert ("| yes |" if param.mutable else "| no |") in row, row


def test_every_subcommand_and_its_help_is_in_the_cli_page() -> None:
    text = expanded("reference/cli.md")
    parser = build_parser()
    commands = list(docs.cli_commands(parser))
    words = {w for w, _h, _p in commands}
    assert {("serve",), ("aof", "verify"), ("aof", "fix"), ("restore",), ("snapshot", "dump"),
            ("crashbench",), ("export",), ("import",), ("export-rdb",), ("queue", "stats"),
            ("bench",), ("commands",), ("demo",)} <= words
    for path, _help, sub in commands:
        heading = re.search(rf"^#+ streamkeep {re.escape(' '.join(path))}$", text, re.M)
        assert heading, path
        usage = f"usage: streamkeep {' '.join(path)}"
        assert usage in text, usage
        # every option of the subcommand, as --help lists it (a hidden one, help=SUPPRESS,
        # is another process's: serve's --start-lock-fd, given by a shared opener)
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert option in text, (path, option)


def test_every_leaf_command_states_its_exit_statuses() -> None:
    text = expanded("reference/exit-codes.md")
    parser = build_parser()
    for path, _help, sub in docs.cli_commands(parser):
        if docs.subparsers_of(sub) is None:
            assert f"### streamkeep {' '.join(path)}\n" in text, path
    # the hand table names every leaf command too
    table = (PAGES / "reference/exit-codes.md").read_text()
    for path, _help, sub in docs.cli_commands(parser):
        if docs.subparsers_of(sub) is None:
            assert f"`{' '.join(path)}`" in table, path


def test_every_effect_is_in_the_effects_page() -> None:
    text = expanded("reference/effects.md")
    for name in effect_vocabulary():
        assert f"| `{name}` |" in text, name


def test_every_bench_section_row_and_target_is_on_the_benchmarks_page() -> None:
    text = expanded("benchmarks/index.md")
    for section in registry.SECTIONS:
        assert re.search(rf"^### {re.escape(section.name)}$", text, re.M), section.name
        assert f"<!-- generate: bench-section {section.name} -->" in \
            (PAGES / "benchmarks/index.md").read_text(), section.name
        for bench in section.benchmarks:
            assert f"| `{bench.key}` |" in text, bench.key
    for figure in registry.FIGURES:
        assert docs.table_cell(figure.label) in text, figure.label
    assert "No results committed yet" in text or "| section | row | rate |" in text


def test_the_bench_results_render_from_a_bench_json_document(tmp_path) -> None:
    """A committed `streamkeep bench --json` document becomes the results tables."""
    from streamkeep.tools.bench.report import to_json
    from streamkeep.tools.bench.runner import Result

    section = registry.SECTIONS[0]
    bench = section.benchmarks[0]
    result = Result(bench=bench, section=section.name, rate=123_456.0)
    doc = to_json([result], 200_000, 3, [section], ["resource line"], figures=[])
    (tmp_path / "benchmarks").mkdir()
    import json

    (tmp_path / docs.RESULTS).write_text(json.dumps(doc))
    text = docs.bench_results_markdown(tmp_path / docs.RESULTS)
    assert "best of 3" in text
    assert f"| {section.name} | {docs.table_cell(bench.workload)} | 123,456/s |" in text
    assert "No results committed yet" in docs.bench_results_markdown(tmp_path / "none.json")
