"""Every page of the manual, as a reader would try it: its ```python blocks run in order in a
fresh working directory (those after a `<!-- no-test: REASON -->` line excepted, and that
marker stays rare), the read-only commands it shows then run on the ./data they made, every
`streamkeep ...` line it shows parses with the real parser, every command it names exists, its
```conf blocks are config files `streamkeep serve --config` accepts, and it tells no story of
how it was written. (The getting-started pages are run, with their promised results, by
test_getting_started.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamkeep.engine.exec.settings import parse_config_text
from streamkeep.tools.main import build_parser
from tests.support.careless import run
from tests.support.doc_examples import (
    PAGES,
    READ_ONLY,
    README,
    blocks,
    command_lines,
    mentioned_commands,
    pages,
    python_blocks,
    run_python_blocks,
    unknown_code_commands,
)

ALL = pages()
# Pages followed as a whole by a walkthrough of their own (their servers started by their own
# shell lines): the getting-started pages (test_getting_started.py, test_walkthrough.py) and
# the security guide (test_security_guide.py).
WALKED = {PAGES / "guides" / "security.md"}
RUN_HERE = [p for p in ALL if p.parent.name != "getting-started" and p not in WALKED
            and python_blocks(p.read_text())]
# What a page's blocks print that shows they did what the page says: page -> (block, regex).
PROMISES = {
    "guides/durability.md": (0, r"is locked by process \d+"),
    "guides/snapshots.md": (0, r"^\d+ 250$"),
    "guides/spark-export.md": (1, r"^1000$"),
    "reference/effects.md": (0, r"^XCLAIM orders shipping alice 0 1-1 TIME \d+ RETRYCOUNT 1"),
}
# Phrases of a story about how the project was written, not of what it does.
NARRATIVE = re.compile(r"\bissue #?\d|this session|this VM|design card|milestone", re.I)


def _id(page: Path) -> str:
    return str(page.relative_to(PAGES))


def test_the_manual_has_its_pages() -> None:
    names = {_id(p) for p in ALL}
    assert {"index.md", "getting-started/embedded.md", "getting-started/server.md",
            "getting-started/queue.md", "guides/durability.md", "guides/snapshots.md",
            "guides/work-queue.md", "guides/replication.md", "guides/inspection.md",
            "guides/crashbench.md", "guides/spark-export.md", "guides/redis.md",
            "guides/production.md", "reference/commands.md", "reference/config.md",
            "reference/cli.md", "reference/formats.md", "reference/exit-codes.md",
            "architecture.md", "benchmarks/index.md", "compiled-core.md"} <= names
    assert RUN_HERE, "no page beyond getting started has an example to run"


# A page's examples may start Spark's JVM (the export guide): on a machine shared with other jobs
# that alone can take most of the suite's default two minutes. (A safety net against a hang.)
@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", RUN_HERE, ids=_id)
def test_the_python_blocks_run_and_the_commands_shown_run_on_what_they_made(
        page: Path, tmp_path: Path) -> None:
    text = page.read_text()
    printed = run_python_blocks(python_blocks(text), tmp_path, _id(page))
    promise = PROMISES.get(_id(page))
    if promise is not None:
        block, pattern = promise
        assert re.search(pattern, printed[block], re.M), (pattern, printed[block])
    if not (tmp_path / "data" / "manifest.json").exists():
        return
    for argv in command_lines(text):
        if tuple(argv[:2]) in READ_ONLY and any(a in ("./data", "data/") for a in argv):
            result = run(*argv, cwd=tmp_path)
            assert result.code == 0, (argv, result.err)
            assert "Traceback" not in result.err


def test_the_inspection_guide_runs_the_commands_it_shows(tmp_path: Path) -> None:
    """The guide's read-only commands are many; they must keep running (above), not vanish."""
    text = (PAGES / "guides" / "inspection.md").read_text()
    read_only = [a for a in command_lines(text) if tuple(a[:2]) in READ_ONLY]
    assert {tuple(a[:2]) for a in read_only} == READ_ONLY
    assert len(read_only) >= 7


@pytest.mark.parametrize("page", ALL, ids=_id)
def test_every_command_line_parses_and_every_command_named_exists(
        page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = page.read_text()
    for argv in command_lines(text):
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # a usage error in the page itself
            pytest.fail(f"{_id(page)}: streamkeep {' '.join(argv)}: exit {exit_.code}: "
                        f"{capsys.readouterr().err}")
        assert callable(args.func)
    for words in sorted(mentioned_commands(text)):
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([*words, "--help"])
        assert done.value.code == 0, words
        capsys.readouterr()
    assert not unknown_code_commands(text)


def test_the_guides_show_real_command_lines() -> None:
    shown = sum(len(command_lines(p.read_text())) for p in ALL)
    assert shown >= 40, shown


@pytest.mark.parametrize("page", [p for p in ALL if any(b.lang == "conf" for b in
                                                         blocks(p.read_text()))], ids=_id)
def test_config_file_examples_are_accepted(page: Path) -> None:
    for block in blocks(page.read_text()):
        if block.lang == "conf":
            assert parse_config_text(block.body, _id(page)), block.body


def test_the_no_test_marker_is_rare_and_always_says_why() -> None:
    python = [(p, b) for p in ALL for b in blocks(p.read_text()) if b.lang == "python"]
    skipped = [(p, b) for p, b in python if b.skip is not None]
    assert len(skipped) <= 3 and len(skipped) * 5 <= len(python), [
        f"{_id(p)}:{b.line}" for p, b in skipped]
    assert all(len(b.skip or "") >= 15 for _p, b in skipped), "a no-test marker says why"
    # A marker that is not right before a block the tests run (python; sh, which
    # tests/docs/test_walkthrough.py runs) skips nothing: a mistake.
    shell = [b for p in ALL for b in blocks(p.read_text()) if b.lang == "sh" and b.skip]
    markers = sum(len(re.findall(r"^<!-- no-test: ", p.read_text(), re.M)) for p in ALL)
    assert markers == len(skipped) + len(shell)


@pytest.mark.parametrize("path", [README, *ALL], ids=lambda p: p.name if p == README else _id(p))
def test_no_story_of_how_it_was_written(path: Path) -> None:
    found = NARRATIVE.findall(path.read_text())
    assert not found, f"{path.name}: {found}"
