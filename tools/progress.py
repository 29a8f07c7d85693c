"""Progress of long work on stderr, the same way for every command: a transient rich display on a
terminal, else a plain line every few seconds.

Owns `Ticker`: `with Ticker("streamkeep export", "starting Spark (local[2])") as tick:` shows
what runs while it runs, even through a step that blocks for a minute and reports nothing (a
thread keeps the time going): on a terminal a spinner with the time elapsed, otherwise a line
at most every `every` seconds (``streamkeep export: starting Spark (local[2]): 15 s
elapsed``), with whatever `tick.update(detail)` last said (``... 12/48 tasks``). A step over
in less than `every` prints nothing when piped. `Steps` is a command's run of named steps on
one Ticker (each step's name as it starts on a terminal). Commands with progress of their own
shape (the bench's, the crash bench's, the byte bars of `aof`) keep it; this is the one for the
others.
Must not touch: stdout (a command's output), what runs.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

# A line this often when stderr is not a terminal (STREAMKEEP_PROGRESS_EVERY: seconds, for a
# test that wants lines from a short run).
EVERY_S = float(os.environ.get("STREAMKEEP_PROGRESS_EVERY", "") or 5.0)


def elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s"


class Ticker:
    """See the module docstring. `quiet`: nothing at all."""

    def __init__(self, prog: str, what: str, stream: IO[str] | None = None,
                 every: float | None = None, quiet: bool = False) -> None:
        self.prog, self.what = prog, what
        self.stream = stream if stream is not None else sys.stderr
        self.every = EVERY_S if every is None else every
        self.quiet = quiet
        self.detail = ""
        self.started = time.monotonic()
        self.lines = 0  # printed so far (piped)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._status: Any = None

    def update(self, detail: str) -> None:
        self.detail = detail
        if self._status is not None:
            self._status.update(self._text())

    def _text(self) -> str:
        return f"{self.what}: {self.detail}" if self.detail else self.what

    def line(self) -> str:
        return f"{self.prog}: {self._text()}, {elapsed(time.monotonic() - self.started)} elapsed"

    def __enter__(self) -> Ticker:
        if self.quiet:
            return self
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console

            self._status = Console(file=self.stream).status(self._text())
            self._status.start()
            return self
        self._thread = threading.Thread(target=self._lines, name="progress", daemon=True)
        self._thread.start()
        return self

    def _lines(self) -> None:
        while not self._stop.wait(self.every):
            print(self.line(), file=self.stream, flush=True)
            self.lines += 1

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._status is not None:
            self._status.stop()


class Steps:
    """A command's steps on stderr: on a terminal each step's name as it starts; otherwise a
    `Ticker` line every few seconds naming the step in progress. `with steps:` around the
    command, `steps.start(message)` as each step begins (outside the `with`: the terminal's
    line only)."""

    def __init__(self, prog: str, what: str) -> None:
        self.prog, self.what = prog, what
        self._ticker: Ticker | None = None

    def __enter__(self) -> Steps:
        self._ticker = Ticker(self.prog, self.what, quiet=sys.stderr.isatty()).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.__exit__(*exc)

    def start(self, message: str) -> None:
        if sys.stderr.isatty():
            print(f"{self.prog}: {message}...", file=sys.stderr, flush=True)
        if self._ticker is not None:
            self._ticker.update(message)
