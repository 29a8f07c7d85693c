"""tools.progress.Ticker: a line every few seconds on a pipe, naming the step, its latest
detail and the time elapsed, also while the step blocks; nothing when quiet."""

from __future__ import annotations

import io
import re
import time

from streamkeep.tools.progress import Ticker, elapsed


def test_lines_come_while_a_step_blocks() -> None:
    out = io.StringIO()
    with Ticker("streamkeep export", "starting Spark (local[2])", stream=out,
                every=0.01) as tick:
        while tick.lines < 2:  # the step blocks; the thread keeps printing
            time.sleep(0.005)
        tick.update("12/48 tasks")
        seen = tick.lines
        while tick.lines < seen + 2:
            time.sleep(0.005)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4
    assert all(re.fullmatch(r"streamkeep export: starting Spark \(local\[2\]\)(: 12/48 tasks)?, "
                            r"\d+ s elapsed", line) for line in lines), lines
    assert lines[-1].startswith("streamkeep export: starting Spark (local[2]): 12/48 tasks")


def test_quiet_prints_nothing() -> None:
    out = io.StringIO()
    with Ticker("p", "w", stream=out, every=0.001, quiet=True) as tick:
        tick.update("x")
    assert out.getvalue() == "" and tick.lines == 0


def test_elapsed() -> None:
    assert [elapsed(s) for s in (0.4, 59, 61, 3600)] == ["0 s", "59 s", "1m 01s", "60m 00s"]


def test_long_commands_print_lines_when_piped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """aof stats, aof verify and restore over a real data directory, stderr a pipe: progress
    lines (made to come every millisecond), each naming the command and the time elapsed."""
    import os
    import subprocess
    import sys

    from streamkeep import Engine

    data = tmp_path / "data"
    with Engine.open(str(data), appendfsync="no") as engine:
        for i in range(30_000):
            engine.execute("XADD", f"s{i % 4}", "*", "f", "v" * 40)
    env = {**os.environ, "STREAMKEEP_PROGRESS_EVERY": "0.001"}
    for argv, prog in ((["aof", "stats", str(data), "--json"], "streamkeep aof stats"),
                       (["aof", "verify", str(data)], "streamkeep aof verify"),
                       (["restore", str(data), "--out", str(tmp_path / "r"), "--to-lsn",
                         "20000"], "streamkeep restore")):
        done = subprocess.run([sys.executable, "-m", "streamkeep", *argv], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert lines, prog
        assert all(re.fullmatch(rf"{prog}: .+, \d+ s elapsed", line) for line in lines), lines
