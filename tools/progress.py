"""Progress of long work on stderr, the same way for every command: a transient rich display on a
terminal, else plain lines (a line every few seconds, no ANSI codes); stdout stays the
command's output.

Owns:
- `Ticker`: `with Ticker("streamkeep export", "starting Spark (local[2])") as tick:` shows what
  runs while it runs, even through a step that blocks for a minute and reports nothing (a
  thread keeps the time going): on a terminal a spinner with the time elapsed, otherwise a line
  at most every `every` seconds (``streamkeep export: starting Spark (local[2]): 15 s
  elapsed``), with whatever `tick.update(detail)` last said (``... 12/48 tasks``). A step over
  in less than `every` prints nothing when piped. `Steps` is a command's run of named steps on
  one Ticker (each step's name as it starts on a terminal).
- `Bar`: counted work (the bench's benchmarks, the crash bench's points, export's Spark
  tasks): on a terminal one row per part (a spinner, its name, a bar of done out of total,
  its detail, the time elapsed) with finished items' lines printed above the rows; otherwise
  those lines, and a Ticker line every few seconds naming the latest detail. A `poll`
  function, called every POLL_S seconds from a thread, feeds it from work that reports
  nothing by itself (Spark's status tracker).
- `RateLines`: a count's plain lines with its rate and the time left (``crashbench: always
  exhaustive seed 1: 4,210/51,876 (8%), 71.3/s, 1m 02s elapsed, about 11m 09s left of it``),
  at most one every few seconds as updates come, and the total at the end. A part's rate is
  what it counted since its first update over the time since (what came before that update
  took an unknown time), shown with the time left once that is at least RATE_MIN_S long.
- `elapsed` and `format_seconds`, the times they print.
The byte bars of `aof verify`/`aof stats` (tools.inspect) keep a display of their own.
Must not touch: stdout (a command's output), what runs.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

# A line this often when stderr is not a terminal (STREAMKEEP_PROGRESS_EVERY: seconds, for a
# test that wants lines from a short run).
EVERY_S = float(os.environ.get("STREAMKEEP_PROGRESS_EVERY", "") or 5.0)
POLL_S = 0.5  # a Bar's `poll` this often
RATE_MIN_S = 1.0  # a part's rate (and the time left) only once measured over this long
REFRESH_PER_SECOND = 2  # a terminal display's redraws: few (the work shares the GIL with them)


def elapsed(seconds: float) -> str:
    """``15 s`` under a minute, ``3m 07s`` above."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s"


def format_seconds(seconds: float) -> str:
    """``4.2 s`` under a minute, ``3m 07s`` above (what a run took, to a tenth of a second)."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    return elapsed(seconds)


def is_terminal(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


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
        if is_terminal(self.stream):
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


Part = str | tuple[str, str]  # a line's text, or (text, rich style) for the terminal


class Bar:
    """Counted work on `stream` (stderr; see the module docstring). `update(part, ...)` moves a
    row (made by its first update; `total` None: a pulsing bar), `remove(part)` drops it,
    `print(*parts)` prints a line (styled on a terminal, plain otherwise) that stays. Not on a
    terminal, with `ticking`, a Ticker line every `every` seconds (`prog: what: detail, N s
    elapsed`: the last detail given). `quiet`: nothing at all. A context manager: the rows
    go at the end (lines printed after it, like a run's total, still print)."""

    def __init__(self, prog: str, what: str = "", stream: IO[str] | None = None,
                 every: float | None = None, quiet: bool = False, ticking: bool = True,
                 poll: Callable[[Bar], None] | None = None) -> None:
        self.prog, self.what = prog, what
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.terminal = not quiet and is_terminal(self.stream)
        self.every = every
        self.ticking = ticking
        self.poll = poll
        self.rows: dict[str, Any] = {}
        self._live: Any = None
        self._console: Any = None
        self._ticker: Ticker | None = None
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def __enter__(self) -> Bar:
        if self.quiet:
            return self
        if self.terminal:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            self._console = Console(file=self.stream, highlight=False)
            self._live = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                                  console=self._console, transient=True, redirect_stdout=False,
                                  refresh_per_second=REFRESH_PER_SECOND)
            self._live.start()
        elif self.ticking:
            self._ticker = Ticker(self.prog, self.what, self.stream, self.every).__enter__()
        if self.poll is not None:
            self._poller = threading.Thread(target=self._polling, name="progress-poll",
                                            daemon=True)
            self._poller.start()
        return self

    def _polling(self) -> None:
        assert self.poll is not None
        while not self._stop.wait(POLL_S):
            self.poll(self)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._ticker is not None:
            self._ticker.__exit__(*exc)
            self._ticker = None

    def update(self, part: str, completed: float | None = None, total: float | None = None,
               detail: str | None = None, advance: float = 0) -> None:
        if self._live is not None:
            row = self.rows.get(part)
            if row is None:
                self.rows[part] = self._live.add_task(part, total=total,
                                                      completed=completed or 0,
                                                      detail=detail or "")
                return
            fields: dict[str, Any] = {} if detail is None else {"detail": detail}
            self._live.update(row, completed=completed, total=total, advance=advance or None,
                              **fields)
        elif self._ticker is not None and detail is not None:
            self._ticker.update(detail)

    def remove(self, part: str) -> None:
        row = self.rows.pop(part, None)
        if row is not None and self._live is not None:
            self._live.remove_task(row)

    def print(self, *parts: Part) -> None:
        if self.quiet:
            return
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text.assemble(*parts))
            return
        text = "".join(p if isinstance(p, str) else p[0] for p in parts)
        print(text, file=self.stream, flush=True)


class RateLines:
    """A count's progress as plain lines (see the module docstring): `update(part, done,
    total)` prints at most one line every `every` seconds (a count lower than one seen
    before is ignored: workers report ahead of the results); `finish()` the total, ``prog: N
    noun in T (rate/s)``."""

    def __init__(self, prog: str, noun: str, stream: IO[str] | None = None,
                 every: float | None = None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.prog, self.noun = prog, noun
        self.stream = stream if stream is not None else sys.stderr
        self.every = EVERY_S if every is None else every
        self.clock = clock
        self.started = self.last = clock()
        self.done: dict[str, int] = {}
        # Each part's first update: when it came and its count (the rate is measured from it).
        self.began: dict[str, tuple[float, int]] = {}

    def count(self, part: str, done: int, total: int) -> int:
        """Record an update; the part's count (never lower than before)."""
        self.began.setdefault(part, (self.clock(), done))
        self.done[part] = max(done, self.done.get(part, 0))
        return self.done[part]

    def update(self, part: str, done: int, total: int) -> None:
        done = self.count(part, done, total)
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        line = (f"{self.prog}: {part}: {done:,}/{total:,} ({100 * done // max(total, 1)}%), "
                f"{self.rate(part, now)}{format_seconds(now - self.started)} elapsed")
        first_at, first_done = self.began[part]
        spent, gained = now - first_at, done - first_done
        if 0 < done < total and spent >= RATE_MIN_S and gained > 0:
            line += f", about {format_seconds((total - done) * spent / gained)} left of it"
        print(line, file=self.stream, flush=True)

    def rate(self, part: str, now: float) -> str:
        """``71.3/s, ``: the part's count since its first update over the time since; "" until
        that is RATE_MIN_S long (a rate over a moment says nothing)."""
        first_at, first_done = self.began[part]
        spent = now - first_at
        if spent < RATE_MIN_S:
            return ""
        return f"{(self.done[part] - first_done) / spent:,.1f}/s, "

    def finish(self) -> None:
        spent = self.clock() - self.started
        counted = sum(self.done.values())
        rate = f" ({counted / spent:,.1f}/s)" if spent > 0 and counted else ""
        print(f"{self.prog}: {counted:,} {self.noun} in {format_seconds(spent)}{rate}",
              file=self.stream, flush=True)
