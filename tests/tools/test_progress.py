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
