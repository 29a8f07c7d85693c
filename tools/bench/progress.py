"""Progress on stderr while a run goes: the section and benchmark running, benchmark i/N,
repeat r/R, and the time elapsed, so a run of several minutes is never silent.

Owns the reporters :func:`reporter` picks from stderr: :class:`RichProgress` on a terminal (a
live line with a spinner for the running benchmark, a bar over the run, each finished row
printed above them; refreshed twice a second from a rich thread), :class:`LineProgress`
otherwise (one plain line per finished benchmark and one at the end; no ANSI codes, no
thread), or none with ``--quiet``. Each implements the runner's ``Progress``.
Must not touch: stdout (the report's), what runs or how it is measured.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from streamkeep.tools.bench.registry import Benchmark
    from streamkeep.tools.bench.runner import Progress, Result

REFRESH_PER_SECOND = 2  # the live display's redraws: few, the bench shares the GIL with them


def format_seconds(seconds: float) -> str:
    """``4.2 s`` under a minute, ``3m 07s`` above."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s"


def finished_line(done: int, seconds: float) -> str:
    """The last progress line: ``bench: 22 benchmarks in 1m 12s``."""
    return f"bench: {done} benchmark{'' if done == 1 else 's'} in {format_seconds(seconds)}"


def outcome(result: Result, repeats: int) -> str:
    """What a finished row came to: its rate (and verdict), or why it was skipped."""
    if result.rate is None:
        return f"skipped: {result.skipped}"
    text = f"{result.rate:,.0f} ops/s"
    if repeats > 1:
        text += f", best of {repeats}"
    if result.verdict:
        text += f", {result.verdict}"
    return text


class LineProgress:
    """One plain line per finished benchmark on a file or a pipe:
    ``bench 3/22 aof: XADD, ... 1 thread: 147,858 ops/s (0.1 s; 2.3 s elapsed)``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.start = time.monotonic()
        self.repeats = 1
        self.done = 0

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def benchmark_started(self, section: str, bench: Benchmark, index: int, total: int,
                          repeats: int) -> None:
        self.repeats = repeats

    def repeat_started(self, repeat: int, repeats: int) -> None:
        pass

    def benchmark_finished(self, result: Result, index: int, total: int,
                           seconds: float) -> None:
        self.done += 1
        elapsed = format_seconds(time.monotonic() - self.start)
        self._print(f"bench {index}/{total} {result.section}: {result.bench.workload}: "
                    f"{outcome(result, self.repeats)} ({format_seconds(seconds)}; "
                    f"{elapsed} elapsed)")

    def close(self) -> None:
        if self.done:
            self._print(finished_line(self.done, time.monotonic() - self.start))


def _mark(result: Result) -> tuple[str, str]:
    """A finished row's mark and style on a terminal: skipped, a missed target, or done."""
    if result.rate is None:
        return "-", "yellow"
    if result.verdict == "FAIL":
        return "x", "red"
    return "+", "green"


class RichProgress:
    """A live display on a terminal: a bar over the run (benchmarks done of N, time elapsed)
    and a spinner line for the running benchmark (section: workload, repeat r/R, its time);
    each finished benchmark printed above them, the live lines gone at the end."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = Console(file=stream, highlight=False)
        self.live = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                             TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                             console=self.console, transient=True, redirect_stdout=False,
                             refresh_per_second=REFRESH_PER_SECOND)
        self.start = time.monotonic()
        self.overall: Any = None
        self.current: Any = None
        self.repeats = 1
        self.index = ""  # "i/N" of the running benchmark
        self.done = 0
        self.live.start()

    def benchmark_started(self, section: str, bench: Benchmark, index: int, total: int,
                          repeats: int) -> None:
        self.repeats = repeats
        if self.overall is None:
            self.overall = self.live.add_task("run", total=total, detail=f"0/{total} done")
        if self.current is not None:
            self.live.remove_task(self.current)
        self.current = self.live.add_task(f"{section}: {bench.workload}", total=None,
                                          detail=f"{index}/{total}, repeat 1/{repeats}")
        self.index = f"{index}/{total}"

    def repeat_started(self, repeat: int, repeats: int) -> None:
        if self.current is not None:
            self.live.update(self.current, detail=f"{self.index}, repeat {repeat}/{repeats}")

    def benchmark_finished(self, result: Result, index: int, total: int,
                           seconds: float) -> None:
        from rich.text import Text

        self.done += 1
        mark, style = _mark(result)
        line = Text.assemble((f"{mark} ", style), f"{result.section}: {result.bench.workload}: ",
                             (outcome(result, self.repeats), style),
                             (f" ({format_seconds(seconds)})", "dim"))
        self.live.console.print(line)
        self.live.update(self.overall, advance=1, detail=f"{index}/{total} done")

    def close(self) -> None:
        self.live.stop()
        if self.done:
            self.console.print(finished_line(self.done, time.monotonic() - self.start),
                               style="dim")


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def reporter(stream: TextIO, quiet: bool = False) -> Iterator[Progress | None]:
    """The progress reporter for ``stream`` (stderr): rich on a terminal, plain lines
    otherwise, None with ``quiet``; closed (the live display stopped) when the block ends."""
    if quiet:
        yield None
        return
    shown: RichProgress | LineProgress = (RichProgress(stream) if _is_terminal(stream)
                                          else LineProgress(stream))
    try:
        yield shown
    finally:
        shown.close()
