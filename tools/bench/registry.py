"""The bench's registry: what ``streamkeep bench`` runs, in which order.

Owns the run order: :data:`SECTIONS` (each a section of rows with its figures, declared by what
it measures in :mod:`.sections`), :data:`FIGURES` (every section's, in the same order),
:data:`RATIOS` between sections, :data:`REPORTS` (extra tables, e.g. the server section's
summary), :data:`NATIVE_TARGETS` (``--compare-pure``'s) and :func:`select_sections`. A new
section is declared beside those that measure the same thing and listed here, rather than
added as a new command. The declarations' classes (:mod:`.declarations`) are re-exported.
Must not touch: how a workload measures (its own module: .aof, .server, ...), the rows, targets
and figures (:mod:`.sections`), running (the runner), printing (the report), the command line.

The registry is read through this module's attributes when a run starts, so a test may
replace :data:`SECTIONS` or :data:`FIGURES` here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from streamkeep.tools.bench.declarations import Benchmark, Figure, Ratio, Section
from streamkeep.tools.bench.sections import (
    durability,
    hardening,
    offline,
    replication,
    security,
    speed,
    storage,
)
from streamkeep.tools.bench.tables import Table

__all__ = ["FIGURES", "NATIVE_TARGETS", "RATIOS", "REPORTS", "SECTIONS", "Benchmark", "Figure",
           "Ratio", "Section", "select_sections"]

# The order the sections run and print in (the cheap, in-process ones first).
SECTIONS: tuple[Section, ...] = (
    speed.EMBEDDED,
    durability.AOF,
    speed.REDIS_PY,
    storage.SNAPSHOT,
    speed.SERVER,
    speed.STRINGS,
    speed.TYPES,
    speed.LISTS,
    hardening.HARDENING,
    security.SECURITY,
    replication.REPLICATION,
    offline.INSPECT,
    offline.EXPORT,
    speed.QUEUE,
    speed.ASYNCIO,
    replication.SHARED,
    storage.MEMORY,
    replication.INTEROP,
    speed.NODES,
    speed.CONSUME,
    durability.CRASHBENCH,
    storage.BACKLOG,
)

# Each section's figures, section by section in run order.
FIGURES: tuple[Figure, ...] = tuple(f for section in SECTIONS for f in section.figures)

RATIOS: tuple[Ratio, ...] = speed.RATIOS

# `bench --compare-pure`: compiled over pure-Python rate per row, the compiled core's targets
# (each round's ratio must reach it).
NATIVE_TARGETS: dict[str, float] = {**speed.NATIVE_TARGETS, **durability.NATIVE_TARGETS,
                                    **replication.NATIVE_TARGETS}

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None, the
# runner's Result and FigureResult lists.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = speed.REPORTS


def select_sections(names: str | Sequence[str] | None) -> tuple[Section, ...]:
    """The :data:`SECTIONS` named (comma-separated or a list; a section's name or option), in
    registry order; all of them for None/empty. ValueError names unknown ones."""
    if names is None:
        return SECTIONS
    wanted = [w.strip() for w in (names.split(",") if isinstance(names, str) else names)]
    wanted = [w for w in wanted if w]
    if not wanted:
        return SECTIONS
    known = {name for section in SECTIONS for name in section.names}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"unknown bench section(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(s.option or s.name for s in SECTIONS)}")
    return tuple(s for s in SECTIONS if any(name in wanted for name in s.names))
