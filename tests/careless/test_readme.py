"""Every README example, as a careless user would try it: the ```python blocks run in order
in one fresh working directory (each in a namespace of its own; the only setup is what the
blocks themselves make: ./data by the durability example, compacted by the snapshot
reader's, read by the Spark one), and the shell examples: each `streamkeep ...` command line
parses, each subcommand named anywhere in the README exists with a working --help, and the
read-only ones run on the ./data the blocks made."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from streamkeep.tools.main import build_parser
from tests.support.careless import ROOT, run

README = (ROOT / "README.md").read_text()
# (indent, language, body) of every fenced block
BLOCKS = re.findall(r"^( *)```(\w*)\n(.*?)^\1```", README, re.S | re.M)
PYTHON = [body for _indent, lang, body in BLOCKS if lang == "python"]
# Placeholders and shell syntax that make a line a synopsis rather than a command to run.
SYNOPSIS = re.compile(r"[\[\]<>]|\$\(|\.\.\.|…|\bDIR\b|\bOUT\b|\bPATH\b")
# Commands that only read ./data (run for real on the directory the python blocks made).
READ_ONLY = {("aof", "verify"), ("aof", "stats"), ("aof", "dump"), ("snapshot", "info"),
             ("snapshot", "dump")}


def command_lines() -> list[list[str]]:
    """The argv (after `streamkeep`) of every command line in the README's code blocks: the
    `$ `-prompted lines of a session, else every line that starts with `streamkeep `; cut at
    a pipe, a redirection or a comment; synopses (placeholders, alternatives) left out."""
    found = []
    for _indent, lang, body in BLOCKS:
        if lang in ("python", "json"):
            continue
        lines = body.splitlines()
        prompted = any(line.lstrip().startswith("$ ") for line in lines)
        for line in lines:
            line = line.strip()
            if prompted:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = re.sub(r"^(\w+=\S+ )+", "", line)  # COLUMNS=120 streamkeep ...
            if not line.startswith("streamkeep "):
                continue
            line = re.split(r" \| | > |\s+#", line)[0].rstrip(" \\")
            if SYNOPSIS.search(line):
                continue
            found.append(shlex.split(line)[1:])
    return found


def mentioned_commands() -> set[tuple[str, ...]]:
    """Every `streamkeep <command>` (and `<group> <command>`) the README names anywhere."""
    parser = build_parser()
    top = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    found: set[tuple[str, ...]] = set()
    for first, second in re.findall(r"streamkeep ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", README):
        if first not in top:
            continue
        groups = top[first]._subparsers
        if groups is not None and second in groups._group_actions[0].choices:
            found.add((first, second))
        elif groups is None:
            found.add((first,))
    return found


def test_the_readme_names_real_commands_and_their_help_works(
        capsys: pytest.CaptureFixture[str]) -> None:
    named = mentioned_commands()
    assert {("serve",), ("aof", "verify"), ("snapshot", "info"), ("queue", "stats"),
            ("export-rdb",), ("crashbench",)} <= named
    for words in sorted(named):
        with pytest.raises(SystemExit) as done:
            build_parser().parse_args([*words, "--help"])
        assert done.value.code == 0, words
        assert "usage: streamkeep " + " ".join(words) in capsys.readouterr().out
    # A word after `streamkeep` that is not a command is prose ("streamkeep stores ..."),
    # unless it is written as one in a code span.
    for code in re.findall(r"`streamkeep ([a-z][a-z-]*)[ `]", README):
        assert (code,) in named or any(w[0] == code for w in named), code


def test_every_command_line_in_the_readme_parses(capsys: pytest.CaptureFixture[str]) -> None:
    lines = command_lines()
    assert len(lines) >= 15
    for argv in lines:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exit_:  # a usage error in the README itself
            pytest.fail(f"streamkeep {' '.join(argv)}: exit {exit_.code}: "
                        f"{capsys.readouterr().err}")
        assert callable(args.func)


# Runs the blocks in a fresh interpreter whose working directory is the test's (a JVM an
# earlier test started in this process would read the Spark example's ./data elsewhere).
DRIVER = """
import contextlib, io, json, sys
for number, block in enumerate(json.loads(sys.argv[1]), 1):
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(block, f"README.md python block {number}", "exec"), {})
    print(f"block {number} ran", flush=True)
"""


def test_every_python_block_runs_in_order_and_the_examples_then_run(tmp_path: Path) -> None:
    import json
    import os
    import subprocess

    assert len(PYTHON) >= 5
    # The Spark example's workers import streamkeep: this interpreter (the README says so).
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(PYTHON)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"block {n} ran" for n in range(1, len(PYTHON) + 1)]
    assert (tmp_path / "data" / "manifest.json").exists()
    ran = 0
    for argv in command_lines():
        if tuple(argv[:2]) in READ_ONLY and any(a in ("./data", "data/") for a in argv):
            result = run(*argv, cwd=tmp_path)
            assert result.code == 0, (argv, result.err)
            assert "Traceback" not in result.err
            ran += 1
    assert ran >= 4
