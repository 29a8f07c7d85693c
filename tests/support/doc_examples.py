"""Documentation examples as tests (tests/careless/test_readme.py, tests/docs/): the fenced
blocks of a markdown page (README.md, the manual's pages under docs/src), the ```python ones to
run in order in one fresh working directory (`run_python_blocks`), the `streamkeep ...` command
lines of the others (`command_lines`), and every `streamkeep <command>` a page names
(`mentioned_commands`). A block right after a `<!-- no-test: REASON -->` line is not run
(`Block.skip`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from streamkeep.tools.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = DOCS / "src"

# (indent, language, body) of every fenced block, a fence inside a list item included
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)
NO_TEST = re.compile(r"^<!-- no-test: (\S.*?) -->$")
# Placeholders and shell syntax that make a line a synopsis rather than a command to run.
SYNOPSIS = re.compile(r"[\[\]<>]|\$\(|\.\.\.|…|\bDIR\b|\bOUT\b|\bPATH\b")
# Commands that only read ./data (run for real on the directory a page's python blocks made).
READ_ONLY = {("aof", "verify"), ("aof", "stats"), ("aof", "dump"), ("snapshot", "info"),
             ("snapshot", "dump")}


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int  # of the opening fence, 1-based
    skip: str | None  # the no-test marker's reason, if the line before the fence has one


def pages() -> list[Path]:
    """Every page of the manual, in a stable order."""
    return sorted(PAGES.rglob("*.md"))


def blocks(text: str) -> list[Block]:
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = NO_TEST.match(before)
        found.append(Block(match.group(2), textwrap.dedent(match.group(3)),
                           text.count("\n", 0, match.start()) + 1,
                           marker.group(1) if marker else None))
    return found


def python_blocks(text: str) -> list[str]:
    """The ```python blocks to run, in order (those marked no-test left out)."""
    return [b.body for b in blocks(text) if b.lang == "python" and b.skip is None]


def command_lines(text: str) -> list[list[str]]:
    """The argv (after `streamkeep`) of every command line in the page's code blocks: the
    `$ `-prompted lines of a session, else every line that starts with `streamkeep `; cut at
    a pipe, a redirection or a comment; synopses (placeholders, alternatives) left out."""
    found = []
    for block in blocks(text):
        if block.lang in ("python", "json", "conf"):
            continue
        lines = block.body.splitlines()
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
            argv = shlex.split(line)[1:]
            if argv and argv[0].startswith("-"):
                continue  # `streamkeep --version`: no command to parse (the walkthrough runs it)
            found.append(argv)
    return found


def mentioned_commands(text: str) -> set[tuple[str, ...]]:
    """Every `streamkeep <command>` (and `<group> <command>`) the page names anywhere."""
    parser = build_parser()
    top = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    found: set[tuple[str, ...]] = set()
    for first, second in re.findall(r"streamkeep ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?", text):
        if first not in top:
            continue
        groups = top[first]._subparsers
        if groups is not None and second in groups._group_actions[0].choices:
            found.add((first, second))
        elif groups is None:
            found.add((first,))
    return found


def unknown_code_commands(text: str) -> list[str]:
    """Words written as a command in a code span (`streamkeep WORD ...`) that are none: a
    word after `streamkeep` in prose may be anything ("streamkeep stores ..."), not in code."""
    named = mentioned_commands(text)
    return [code for code in re.findall(r"`streamkeep ([a-z][a-z-]*)[ `]", text)
            if (code,) not in named and not any(w[0] == code for w in named)]


# Runs the blocks in a fresh interpreter whose working directory is the caller's (a JVM an
# earlier test started in the test process would read a Spark example's ./data elsewhere);
# prints one JSON line per block with what it printed.
DRIVER = """
import contextlib, io, json, sys
label = sys.argv[2]
for number, block in enumerate(json.loads(sys.argv[1]), 1):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"{label} python block {number}", "exec"), {})
    print(json.dumps({"block": number, "out": out.getvalue()}), flush=True)
"""


def run_python_blocks(code: list[str], cwd: Path, label: str,
                      timeout: float = 540) -> list[str]:
    """Run the blocks in order, each in a namespace of its own, in one fresh interpreter
    working in `cwd`; what each printed. AssertionError with the traceback if one fails."""
    # A Spark example's workers import streamkeep: this interpreter (the manual says so).
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(code), label], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{label}: {done.stderr}"
    printed = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [p["block"] for p in printed] == list(range(1, len(code) + 1)), done.stdout
    return [p["out"] for p in printed]
