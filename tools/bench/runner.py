"""The bench's one runner (:func:`run_benchmarks`): a section declares its rows and figures, the
runner runs every row ``--repeat`` times, keeps its best repeat (its ``rank``, else the rate)
and every repeat's rate, and interleaves the repeats of the rows a ratio of their section
compares (:func:`groups`: A B A B ...), and a row's with its reference's (:func:`compared`), so
that a machine whose speed drifts affects both sides alike; a Skip skips the row with its
reason. Must not touch: workloads, progress, printing.
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
    rate: float | None = None  # the best repeat's ops/s
    skipped: str | None = None
    count: int | None = None  # ops the best run timed, when not the run's N
    figures: dict[str, float] = field(default_factory=dict)  # the best run's
    notes: list[str] = field(default_factory=list)  # the best run's
    runs: list[float] = field(default_factory=list)  # every repeat's rate, in run order
    figure_runs: list[dict[str, float]] = field(default_factory=list)  # every repeat's figures
    seconds: float = 0.0  # the time its repeats took

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
        f = self.figure
        if f.target is None:
            return ""
        if self.value is None:
            return "n/a"
        return "PASS" if (self.value <= f.target if f.at_most else self.value >= f.target) \
            else "FAIL"


class Progress(Protocol):
    """What :func:`run_benchmarks` reports while it runs (numbers from 1)."""

    def started(self, result: Result, repeat: int, repeats: int, done: int,
                total: int) -> None: ...

    def finished(self, result: Result, done: int, total: int) -> None: ...


def groups(sections: Sequence[Section]) -> list[list[tuple[str, Benchmark]]]:
    """The rows of ``sections`` in run groups: rows a ratio of their section compares are run
    together (repeats interleaved); groups in the order of their first row, rows in theirs."""
    rows = [(s.name, b) for s in sections for b in s.benchmarks]
    owner = {b.key: b.key for _s, b in rows}

    def root(key: str) -> str:
        while owner[key] != key:
            key = owner[key]
        return key

    for section in sections:
        for f in section.figures:
            if f.denominator in owner and f.numerator in owner \
                    and f.denominator.split(".")[0] == f.numerator.split(".")[0]:
                owner[root(f.denominator)] = root(f.numerator)
    out: dict[str, list[tuple[str, Benchmark]]] = {}
    for row in rows:
        out.setdefault(root(row[1].key), []).append(row)
    return list(out.values())


def _keep(result: Result, runs: list[Measurement], theirs: list[Measurement]) -> None:
    best = max(runs, key=result.bench.rank or (lambda m: m.rate))
    result.runs = [m.rate for m in runs]
    result.figure_runs = [dict(m.figures) for m in runs]
    result.rate, result.count, result.figures, result.notes = (
        best.rate, best.count, dict(best.figures), best.notes)
    if result.bench.reference is not None and theirs:
        result.notes = [*compared(result, runs, theirs), *best.notes]


def _ratios(key: str, what: str, ratios: list[float]) -> tuple[dict[str, float], str]:
    return ({f"{key}_min": min(ratios), f"{key}_max": max(ratios)},
            f"{what} per run {', '.join(f'{r:.2f}x' for r in ratios)} (range {min(ratios):.2f}-"
            f"{max(ratios):.2f}x)")


def compared(result: Result, mine: list[Measurement], theirs: list[Measurement]) -> list[str]:
    """The row's runs against its reference's, repeat by repeat (each pair in turns): figures
    ``ratio_min``/``_max`` (this / the reference), ``other_rate`` (the reference's best) and
    per cost ``<cost>_ratio_min``/``_max`` (the reference's / this); the notes saying so."""
    ref, key = result.bench.reference, result.bench.key
    assert ref is not None
    figures, note = _ratios("ratio", f"{key}: this / {ref.name}",
                            [a.rate / max(b.rate, 1e-9) for a, b in zip(mine, theirs, strict=True)])
    result.figures |= {**figures, "other_rate": max(b.rate for b in theirs)}
    notes = [f"{note}; best {max(a.rate for a in mine):,.0f}/s vs "
             f"{max(b.rate for b in theirs):,.0f}/s"]
    for name, what in ref.costs:
        if all(name in m.figures for m in (*mine, *theirs)):
            figures, note = _ratios(f"{name}_ratio", f"{key}: {what}, {ref.name} / this", [
                b.figures[name] / max(a.figures[name], 1e-12) for a, b in zip(mine, theirs, strict=True)])
            result.figures |= figures
            notes.append(note)
    return notes


def _measured(got: float | Measurement) -> Measurement:
    return got if isinstance(got, Measurement) else Measurement(got)


def _against(env: BenchEnv, bench: Benchmark, mine: Measurement,
             theirs: list[Measurement]) -> None:
    """A run of ``bench``'s reference after the row's own (``mine``), or a note on ``mine``
    saying why there is none."""
    assert bench.reference is not None
    run = bench.reference.run(env)
    if isinstance(run, str):
        mine.notes.insert(0, f"{bench.key}: {run}, no ratio")
    else:
        theirs.append(_measured(run(env)))


def run_benchmarks(env: BenchEnv, sections: Sequence[Section] | None = None, repeat: int = 1,
                   progress: Progress | None = None) -> list[Result]:
    """Run the rows of ``sections`` (default :data:`registry.SECTIONS`) ``repeat`` times each,
    a group's rows interleaved; the results in the sections' row order."""
    chosen = registry.SECTIONS if sections is None else sections
    repeat = max(1, repeat)
    planned = groups(chosen)
    results = {b.key: Result(name, b) for group in planned for name, b in group}
    total, done = len(results), 0
    for group in planned:
        runs: dict[str, list[Measurement]] = {b.key: [] for _name, b in group}
        theirs: dict[str, list[Measurement]] = {b.key: [] for _name, b in group}
        for r in range(1, repeat + 1):
            for _name, bench in group:
                result = results[bench.key]
                if result.skipped is not None:
                    continue
                if progress:
                    progress.started(result, r, repeat, done, total)
                # Each run starts from a collected heap: what earlier rows left for the
                # collector (their engines) must not be swept inside this row's timing.
                gc.collect()
                began = time.monotonic()
                try:
                    runs[bench.key].append(_measured(bench.run(env)))
                    if bench.reference is not None:
                        _against(env, bench, runs[bench.key][-1], theirs[bench.key])
                except Skip as exc:
                    result.skipped = str(exc)
                result.seconds += time.monotonic() - began
                if result.skipped is None and r < repeat:
                    continue
                if result.skipped is None:
                    _keep(result, runs[bench.key], theirs[bench.key])
                env.results[bench.key] = result
                done += 1
                if progress:
                    progress.finished(result, done, total)
    return [results[b.key] for s in chosen for b in s.benchmarks]


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
    """The :data:`registry.FIGURES` whose numerator row ran (measured or skipped)."""
    by_key = {r.bench.key: r for r in results}
    return [fr for f in registry.FIGURES if (fr := _derive(f, by_key)) is not None]


def failed(results: Sequence[Result], figures: Sequence[FigureResult]) -> bool:
    """Whether a row or a derived figure missed its target (FAIL; not measured is no FAIL)."""
    return "FAIL" in {r.verdict for r in results} | {fr.verdict for fr in figures}
