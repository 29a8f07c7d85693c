"""A reader that closes the pipe early (`streamkeep ... | head -3`, or a reader gone before the
first line): every command that writes to stdout ends quietly with exit status 0. A usage
mistake inside a subcommand (an unknown option or argument, a bad value) prints that
subcommand's usage, wrapped to the terminal's width (80 columns at most, and when stderr is not
a terminal), then the error line, and exits 3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import ROOT, TIMEOUT, assert_usage, run, tree_state

# --- a reader that closes the pipe --------------------------------------------------------------


@pytest.fixture(scope="module")
def many_keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory of 3,000 streams (keys) and a snapshot: `aof stats --top 3000` and the
    dumps print far more than a pipe holds."""
    data = tmp_path_factory.mktemp("many-keys") / "data"
    with Engine.open(str(data), auto_aof_rewrite_percentage=0) as db:
        for i in range(3000):
            db.execute("XADD", f"stream-{i:05d}", "1-0", "field", f"value {i}")
        db.execute("XGROUP", "CREATE", "stream-00000", "workers", "0")
        db.compact(wait=True)
        for i in range(3000):
            db.execute("XADD", f"stream-{i:05d}", "2-0", "field", f"value {i}")
    return data


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}


def _head(argv: list[str], lines: int) -> tuple[int, str]:
    """`streamkeep *argv | head -<lines>`: stdout a real pipe whose reader takes `lines`
    lines (0: none) and closes it; the exit status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "streamkeep", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert proc.stdout is not None and proc.stderr is not None
    seen = b""
    while seen.count(b"\n") < lines:  # read what `head` reads, no more than it needs
        chunk = os.read(proc.stdout.fileno(), 256)
        if not chunk:
            break
        seen += chunk
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=TIMEOUT), err


HEADS = [
    ["aof", "stats", "--top", "3000", "DATA"],
    ["aof", "stats", "--top", "3000", "--json", "DATA"],
    ["aof", "dump", "DATA"],
    ["aof", "verify", "DATA"],
    ["snapshot", "dump", "DATA"],
    ["snapshot", "info", "DATA"],
    ["queue", "stats", "DATA", "stream-00000"],
    ["commands"],
    ["--help"],
    ["aof", "stats", "--help"],
    ["--version"],
]


@pytest.mark.parametrize("lines", [3, 0], ids=["head-3", "closed-at-once"])
@pytest.mark.parametrize("argv", HEADS, ids=[" ".join(a) for a in HEADS])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly_with_0(
        many_keys: Path, argv: list[str], lines: int) -> None:
    before = tree_state(many_keys, ignore=("LOCK",))
    code, err = _head([str(many_keys) if a == "DATA" else a for a in argv], lines)
    assert (code, err) == (0, "")
    assert tree_state(many_keys, ignore=("LOCK",)) == before


# --- usage mistakes inside a subcommand -------------------------------------------------------


def _usage(argv: list[str], columns: int | None = None) -> tuple[list[str], str]:
    """The usage lines and the error line of a usage mistake (exit 3), stderr not a terminal,
    with COLUMNS=`columns` (None: unset)."""
    env = _env() if columns is None else {**_env(), "COLUMNS": str(columns)}
    done = subprocess.run([sys.executable, "-m", "streamkeep", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    *usage, error = [line for line in done.stderr.splitlines() if line.strip()]
    return usage, error


@pytest.mark.parametrize(("argv", "command", "wrong"), [
    (["aof", "stats", "--bogus", "DATA"], "aof stats", "unrecognized arguments: --bogus"),
    (["aof", "stats", "DATA", "extra"], "aof stats", "unrecognized arguments: extra"),
    (["aof", "dump", "DATA", "--limit", "abc"], "aof dump", "--limit abc"),
    (["queue", "stats", "DATA", "jobs", "--bogus"], "queue stats", "--bogus"),
    (["snapshot", "info", "--bogus", "DATA"], "snapshot info", "--bogus"),
    (["serve", "--bogus"], "serve", "--bogus"),
], ids=["aof-stats-option", "aof-stats-extra", "aof-dump-option", "queue-stats",
        "snapshot-info", "serve"])
def test_an_unknown_argument_prints_the_subcommands_usage(
        tmp_path: Path, argv: list[str], command: str, wrong: str) -> None:
    usage, error = _usage([str(tmp_path) if a == "DATA" else a for a in argv])
    assert usage[0].startswith(f"usage: streamkeep {command} "), usage
    assert error == f"streamkeep {command}: error: {wrong}" or \
        error.startswith(f"streamkeep {command}: error: ") and wrong in error, error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("columns", [None, 60, 250], ids=["not-a-terminal", "60", "250"])
def test_a_bad_value_prints_the_subcommands_usage_wrapped(tmp_path: Path,
                                                          columns: int | None) -> None:
    usage, error = _usage(["aof", "dump", str(tmp_path), "--to-lsn", "abc"], columns)
    width = min(80, columns or 80)
    assert usage[0].startswith("usage: streamkeep aof dump "), usage
    assert len(usage) > 1 and all(len(line) <= width for line in usage), usage
    assert all(line.startswith(" ") for line in usage[1:]), usage  # continuation lines
    words = " ".join(" ".join(usage).split())
    for option in ("--format {text,json,resp}", "--to-lsn N", "PATH"):
        assert option in words, words
    assert error == "streamkeep aof dump: error: argument --to-lsn: invalid int value: 'abc'"
    # the careless suite's own check of a usage mistake reads it the same way
    done = run("aof", "dump", tmp_path, "--to-lsn", "abc")
    assert_usage(done, "'abc'")
