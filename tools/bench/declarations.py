"""What the bench's registry is made of: a row (:class:`Benchmark`), a figure derived from a
run's rows (:class:`Figure`), a section of rows with its figures (:class:`Section`) and a ratio
printed between two sections' rows (:class:`Ratio`).

Owns the declarations' shapes and how a figure's value is formatted. The sections themselves
are declared in :mod:`.sections`, assembled in run order by :mod:`.registry`.
Must not touch: any section's rows or targets, running, printing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv
    from streamkeep.tools.bench.workload import Measurement


@dataclass(frozen=True)
class Benchmark:
    key: str  # stable id, "section.name"; ratios and figures refer to it
    workload: str  # the row label
    run: Callable[[BenchEnv], float | Measurement]  # ops per second (messages, fsyncs, records)
    target: float | None = None  # the row's minimum rate, printed with PASS/FAIL
    rank: Callable[[Measurement], float] | None = None  # which repeat is best (highest); rate


@dataclass(frozen=True)
class Figure:
    """A number derived from benchmarks of the same run: the ratio of two rates (``denominator``
    set) or a figure the numerator's best run reported (``extra``), with an optional target:
    a minimum, or a maximum with ``at_most``."""

    section: str
    label: str
    numerator: str  # Benchmark.key
    denominator: str | None = None  # Benchmark.key
    extra: str | None = None  # a Measurement.figures name
    unit: str = "x"  # "x" (a ratio), "" (a mean count), "count", "/s" (a rate), or one of UNITS
    target: float | None = None
    at_most: bool = False  # the target is a maximum

    UNITS = {"s": "{:.3f} s", "ms": "{:.1f} ms", "us": "{:,.1f} us", "MB": "{:.2f} MB"}

    def format(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "/s":
            return f"{value:,.0f}/s"
        if self.unit == "count":
            return f"{value:,.0f}"
        if self.unit in self.UNITS:
            return self.UNITS[self.unit].format(value)
        return f"{value:.1f}"


@dataclass(frozen=True)
class Section:
    name: str  # the rows' first column
    benchmarks: tuple[Benchmark, ...]
    option: str = ""  # another name ``--sections`` accepts for it
    describe: Callable[[BenchEnv], list[str]] | None = None  # its header lines, after the run
    # The figures derived from its rows (each Figure.section is this name), in print order.
    figures: tuple[Figure, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.option) if self.option else (self.name,)


@dataclass(frozen=True)
class Ratio:
    workload: str
    reference: str  # what it is compared with
    numerator: str  # Benchmark.key
    denominator: str
