"""Running the registry: each benchmark best of R, and the figures derived from the rows.

Owns :class:`Result` (a row: the best repeat's rate, count, figures and notes, every repeat's
rate (the spread a report shows), or why it was skipped), :class:`FigureResult`, :func:`run_benchmarks` (which tells a :class:`Progress` what
runs: section, benchmark i/N, repeat r/R) and :func:`derive_figures`.
Must not touch: what a workload measures, how progress is shown (tools.bench.cli's
BenchProgress implements :class:`Progress`) or how results print (the report).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streamkeep.tools.bench import registry
from streamkeep.tools.bench.env import BenchEnv
from streamkeep.tools.bench.registry import Benchmark, Figure, Section
from streamkeep.tools.bench.workload import Measurement, Skip


@dataclass
class Result:
    section: str
    bench: Benchmark
    rate: float | None = None  # best ops/s over the repeats
    skipped: str | None = None
    count: int | None = None  # ops the best run timed, when not the run's N
    figures: dict[str, float] = field(default_factory=dict)  # the best run's
    notes: list[str] = field(default_factory=list)  # the best run's
    runs: list[float] = field(default_factory=list)  # every repeat's rate, in run order

    @property
    def verdict(self) -> str:
        if self.bench.target is None:
            return ""
        if self.rate is None:
            return "n/a"
        return "PASS" if self.rate >= self.bench.target else "FAIL"


@dataclass
class FigureResult:
    figure: Figure
    value: float | None = None
    missing: str | None = None  # why there is no value

    @property
    def verdict(self) -> str:
        if self.figure.target is None:
            return ""
        if self.value is None:
            return "n/a"
        if self.figure.at_most:
            return "PASS" if self.value <= self.figure.target else "FAIL"
        return "PASS" if self.value >= self.figure.target else "FAIL"


class Progress(Protocol):
    """What :func:`run_benchmarks` reports while it runs (numbers from 1)."""

    def benchmark_started(self, section: str, bench: Benchmark, index: int, total: int,
                          repeats: int) -> None: ...

    def repeat_started(self, repeat: int, repeats: int) -> None: ...

    def benchmark_finished(self, result: Result, index: int, total: int,
                           seconds: float) -> None: ...


def _run_one(env: BenchEnv, section: str, bench: Benchmark, repeat: int,
             progress: Progress | None) -> Result:
    """One row: ``bench`` run ``repeat`` times, the best run kept (by ``bench.rank``, else the
    rate); a Skip on any run skips the row with its reason."""
    result = Result(section, bench)
    runs: list[float | Measurement] = []
    try:
        for r in range(1, repeat + 1):
            if progress:
                progress.repeat_started(r, repeat)
            # Each run starts from a collected heap: what earlier rows left for the collector
            # (their engines) must not be swept inside this row's timing.
            gc.collect()
            runs.append(bench.run(env))
    except Skip as exc:
        result.skipped = str(exc)
        return result
    measured = [r if isinstance(r, Measurement) else Measurement(r) for r in runs]
    best = max(measured, key=bench.rank or (lambda m: m.rate))
    result.runs = [m.rate for m in measured]
    result.rate, result.count, result.figures = best.rate, best.count, best.figures
    result.notes = best.notes
    return result


def run_benchmarks(env: BenchEnv, sections: Sequence[Section] | None = None, repeat: int = 1,
                   progress: Progress | None = None) -> list[Result]:
    """Run every benchmark of ``sections`` (default :data:`registry.SECTIONS`), best of
    ``repeat``; skipped ones carry the reason."""
    chosen = registry.SECTIONS if sections is None else sections
    repeat = max(1, repeat)
    total = sum(len(section.benchmarks) for section in chosen)
    results = []
    index = 0
    for section in chosen:
        for bench in section.benchmarks:
            index += 1
            if progress:
                progress.benchmark_started(section.name, bench, index, total, repeat)
            start = time.monotonic()
            result = _run_one(env, section.name, bench, repeat, progress)
            if progress:
                progress.benchmark_finished(result, index, total, time.monotonic() - start)
            results.append(result)
    return results


def _derive(figure: Figure, by_key: dict[str, Result]) -> FigureResult | None:
    num = by_key.get(figure.numerator)
    if num is None:
        return None
    fr = FigureResult(figure)
    if num.rate is None:
        fr.missing = f"{figure.numerator} skipped"
    elif figure.denominator is not None:
        den = by_key.get(figure.denominator)
        if den is None or not den.rate:
            fr.missing = f"{figure.denominator} " + ("not run" if den is None else "skipped")
        else:
            fr.value = num.rate / den.rate
    elif figure.extra is not None:
        fr.value = num.figures.get(figure.extra)
        if fr.value is None:
            fr.missing = f"{figure.numerator} reported no {figure.extra}"
    return fr


def derive_figures(results: Sequence[Result]) -> list[FigureResult]:
    """The :data:`registry.FIGURES` whose numerator benchmark ran (measured or skipped)."""
    by_key = {r.bench.key: r for r in results}
    derived = (_derive(figure, by_key) for figure in registry.FIGURES)
    return [fr for fr in derived if fr is not None]


def failed(results: Sequence[Result], figures: Sequence[FigureResult]) -> bool:
    """Whether a row or a derived figure missed its target (FAIL; not measured is no FAIL)."""
    return any(r.verdict == "FAIL" for r in results) or any(
        fr.verdict == "FAIL" for fr in figures)
