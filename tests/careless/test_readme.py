"""Every README example, as a careless user would try it: the ```python blocks run in order
in one fresh working directory (each in a namespace of its own; the only setup is what the
blocks themselves make: ./embedded-data by the embedded example), and the shell examples: each
`streamkeep ...` command line parses, each subcommand named anywhere in the README exists with a
working --help, and the read-only ones run on the directory the blocks made. (The manual's
pages get the same treatment in tests/docs/; tests/docs/test_walkthrough.py follows the README
and the getting-started pages top to bottom on a fresh copy, make run's server included.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep.tools.main import build_parser
from tests.support.careless import run
from tests.support.doc_examples import (
    READ_ONLY,
    README,
    command_lines,
    mentioned_commands,
    python_blocks,
    run_python_blocks,
    unknown_code_commands,
)

TEXT = README.read_text()


def test_the_readme_names_real_commands_and_their_help_works(
        capsys: pytest.CaptureFixture[str]) -> None:
    named = mentioned_commands(TEXT)
    assert {("serve",), ("aof", "verify"), ("snapshot", "info"), ("queue", "stats"),
            ("export-rdb",), ("crashbench",)} <= named
    for words in sorted(named):
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([*words, "--help"])
        assert done.value.code == 0, words
        assert "usage: streamkeep " + " ".join(words) in capsys.readouterr().out
    assert not unknown_code_commands(TEXT)


def test_every_command_line_in_the_readme_parses(capsys: pytest.CaptureFixture[str]) -> None:
    lines = command_lines(TEXT)
    assert len(lines) >= 6
    for argv in lines:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # a usage error in the README itself
            pytest.fail(f"streamkeep {' '.join(argv)}: exit {exit_.code}: "
                        f"{capsys.readouterr().err}")
        assert callable(args.func)


def test_every_python_block_runs_in_order_and_the_examples_then_run(tmp_path: Path) -> None:
    code = python_blocks(TEXT)
    assert len(code) >= 1
    printed = run_python_blocks(code, tmp_path, "README.md")
    # the embedded example: two consumers, one ack, then a refused read
    assert "'pending': 1" in printed[0]
    assert "NOGROUP No such key 'orders' or consumer group 'nope'" in printed[0]
    made = tmp_path / "embedded-data"
    assert (made / "manifest.json").exists()
    ran = 0
    for argv in command_lines(TEXT):
        if tuple(argv[:2]) in READ_ONLY and any((tmp_path / a).resolve() == made.resolve()
                                                for a in argv[2:]):
            result = run(*argv, cwd=tmp_path)
            assert result.code == 0, (argv, result.err)
            assert "Traceback" not in result.err
            ran += 1
    assert ran >= 1
