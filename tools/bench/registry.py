"""The bench's registry, read when a run starts (a test may replace :data:`SECTIONS` or
:data:`FIGURES`): the run order of the sections (declared in :mod:`.sections`), their figures,
the ratios between sections, the extra tables, ``--compare-pure``'s targets.
Must not touch: workloads, running, printing, the command line.
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
from streamkeep.tools.text_width import Table

__all__ = ["FIGURES", "NATIVE_TARGETS", "RATIOS", "REPORTS", "SECTIONS", "Benchmark", "Figure",
           "Ratio", "Section", "select_sections"]

# The order the sections run and print in (the cheap, in-process ones first).
SECTIONS: tuple[Section, ...] = (
    speed.EMBEDDED, durability.AOF, speed.REDIS_PY, storage.SNAPSHOT, speed.SERVER,
    speed.STRINGS, speed.TYPES, speed.LISTS, speed.CLUSTER, hardening.HARDENING, security.SECURITY,
    replication.REPLICATION, offline.INSPECT, offline.EXPORT, speed.QUEUE, speed.ASYNCIO,
    replication.SHARED, storage.MEMORY, storage.EVICTION, replication.INTEROP, speed.NODES, speed.CONSUME,
    durability.CRASHBENCH, storage.BACKLOG,
)

FIGURES: tuple[Figure, ...] = tuple(f for section in SECTIONS for f in section.figures)

RATIOS: tuple[Ratio, ...] = speed.RATIOS

# `bench --compare-pure`: compiled over pure-Python rate per row, each round at least.
NATIVE_TARGETS: dict[str, float] = {**speed.NATIVE_TARGETS, **durability.NATIVE_TARGETS,
                                    **replication.NATIVE_TARGETS}

# Extra tables the report prints after the ratios: fn(results, figures) -> a Table or None.
REPORTS: tuple[Callable[[Sequence[Any], Sequence[Any]], Table | None], ...] = (
    *speed.REPORTS, *storage.REPORTS)


def select_sections(names: str | Sequence[str] | None) -> tuple[Section, ...]:
    """The :data:`SECTIONS` named (comma-separated or a list; a section's name or option), in
    registry order; all of them for None/empty. ValueError names unknown ones."""
    wanted = [w.strip() for w in (names.split(",") if isinstance(names, str) else names or ())]
    wanted = [w for w in wanted if w]
    if not wanted:
        return SECTIONS
    known = {name for section in SECTIONS for name in section.names}
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise ValueError(f"unknown bench section(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(s.option or s.name for s in SECTIONS)}")
    return tuple(s for s in SECTIONS if any(name in wanted for name in s.names))
