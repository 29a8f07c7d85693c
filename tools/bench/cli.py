"""``streamkeep bench``'s main: the header (flushed), the rows with progress on stderr
(:class:`BenchProgress`, drawn by tools.progress: a live display on a terminal, a line per
finished row elsewhere, none with ``--quiet``), the resources' lines, the results (text, rich,
JSON), the --html page, and the exit code. Must not touch: the registry, the CLI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

from streamkeep.tools.bench import options, registry, report
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.runner import (
    FigureResult,
    Result,
    derive_figures,
    failed,
    run_benchmarks,
)
from streamkeep.tools.exits import EXIT_USAGE
from streamkeep.tools.progress import Bar, format_seconds
from streamkeep.tools.text_width import print_blocks


def finished_line(done: int, seconds: float) -> str:
    """The last progress line: ``bench: 22 benchmarks in 1m 12s``."""
    return f"bench: {done} benchmark{'' if done == 1 else 's'} in {format_seconds(seconds)}"


def outcome(result: Result, repeats: int) -> str:
    """What a finished row came to: its rate (and verdict), or why it was skipped."""
    if result.rate is None:
        return f"skipped: {result.skipped}"
    best = f", best of {repeats}" if repeats > 1 else ""
    return f"{result.rate:,.0f} ops/s{best}" + (f", {result.verdict}" if result.verdict else "")


class BenchProgress:
    """The run's progress (runner.Progress) on a `Bar`. On a pipe, per finished row:
    ``bench 3/22 aof: XADD, ... 1 thread: 147,858 ops/s (0.1 s; 2.3 s elapsed)``; on a
    terminal its mark and outcome in colour above the running row."""

    def __init__(self, bar: Bar) -> None:
        self.bar = bar
        self.start = time.monotonic()
        self.repeats = 1
        self.current = ""  # the running row
        self.done = 0

    def started(self, result: Result, repeat: int, repeats: int, done: int,
                total: int) -> None:
        self.repeats = repeats
        if not self.current:
            self.bar.update("run", total=total, detail=f"{done}/{total} done")
        row = f"{result.section}: {result.bench.workload}"
        if row != self.current and self.current:
            self.bar.remove(self.current)
        self.current = row
        self.bar.update(row, detail=f"{done + 1}/{total}, repeat {repeat}/{repeats}")

    def finished(self, result: Result, done: int, total: int) -> None:
        self.done = done
        what = f"{result.section}: {result.bench.workload}: "
        took = format_seconds(result.seconds)
        if not self.bar.terminal:
            self.bar.print(f"bench {done}/{total} {what}{outcome(result, self.repeats)} "
                           f"({took}; {format_seconds(time.monotonic() - self.start)} elapsed)")
            return
        mark, style = (("-", "yellow") if result.rate is None else ("x", "red")
                       if result.verdict == "FAIL" else ("+", "green"))
        self.bar.print((f"{mark} ", style), what, (outcome(result, self.repeats), style),
                       (f" ({took})", "dim"))
        self.bar.update("run", advance=1, detail=f"{done}/{total} done")

    def close(self) -> None:
        if self.done:
            self.bar.print((finished_line(self.done, time.monotonic() - self.start), "dim"))


@contextlib.contextmanager
def reporter(stream: TextIO, quiet: bool = False) -> Iterator[BenchProgress | None]:
    """The run's progress on ``stream`` (stderr), None with ``quiet``; its rows gone and its
    last line printed when the block ends."""
    if quiet:
        yield None
        return
    shown = BenchProgress(Bar("bench", stream=stream, ticking=False))
    try:
        with shown.bar:
            yield shown
    finally:
        shown.close()


def _parse(args: argparse.Namespace | Sequence[str] | None) -> argparse.Namespace:
    if isinstance(args, argparse.Namespace):
        return args
    return options.build_parser().parse_args(list(args or []))


def _describe(env: BenchEnv, sections: Sequence[registry.Section]) -> list[str]:
    """The resource lines under the header: each section's own, then the shared ones."""
    lines = [line for s in sections for line in s.describe(env)]
    return lines + env.describe()


def _print_results(results: Sequence[Result], figures: Sequence[FigureResult], n: int,
                   resources: Sequence[str]) -> None:
    for line in resources:
        print(line)
    print()
    if sys.stdout.isatty():
        sys.stdout.flush()
        print_blocks(report.result_blocks(results, n, figures), sys.stdout)
    else:
        print(report.format_results(results, n, figures))


def _child_args(opts: argparse.Namespace) -> list[str]:
    """The options a --compare-pure child run repeats (not --repeat, --json, --quiet,
    --html)."""
    out = [*(opts.only or [])]
    for flag, value in (("--quick", opts.quick), ("--no-redis", opts.no_redis)):
        if value:
            out.append(flag)
    if opts.n:
        out += ["--n", str(opts.n)]
    if opts.sections:
        out += ["--sections", opts.sections]
    return out


def _html_refused(run: options.Settings) -> str | None:
    """Why --html FILE cannot be written (said before the run, not after it), or None."""
    if not run.html:
        return None
    from streamkeep.tools.report.charts import ReportUnavailable, require
    from streamkeep.tools.safe_output import OutputRefused, check_output

    try:
        require()
        check_output(run.html, directory=False, force=run.force)
    except (ReportUnavailable, OutputRefused) as err:
        return f"argument --html: {err}"
    return None


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run the suite and print the tables (or JSON). Exit code: 0, or 1 with ``--strict`` and
    a FAILed target; a usage error exits 3 (tools.exits.Parser)."""
    opts = _parse(args)
    run = options.settings(opts)
    problem = options.missing_checkout(run.others) or _html_refused(run)
    if problem is not None:
        print(f"streamkeep bench: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if run.compare_pure:
        from streamkeep.tools.bench import compare

        return compare.main(_child_args(opts), run.repeat, run.json, run.quiet,
                            html=run.html, force=run.force)
    sections = registry.select_sections(run.sections)
    if not run.json:
        print(report.header(run.n, run.repeat, sections), flush=True)

    with reporter(sys.stderr, quiet=run.quiet) as shown, \
            BenchEnv(run.n, use_redis=run.use_redis, quick=run.short,
                     others=run.others) as env:
        results = run_benchmarks(env, sections, repeat=run.repeat, progress=shown)
        resources = _describe(env, sections)
    figures = derive_figures(results)
    document = report.to_json(results, run.n, run.repeat, sections, resources, figures)
    if run.json:
        print(json.dumps(document, indent=2))
    else:
        _print_results(results, figures, run.n, resources)
    if run.html:
        from streamkeep.tools.report.bench import write

        problem = write(run.html, document, run.force)
        if problem is not None:
            print(f"streamkeep bench: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    if run.strict and failed(results, figures):
        return options.EXIT_TARGET_MISSED
    return options.EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
