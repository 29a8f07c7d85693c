"""``streamkeep bench``: throughput of the engine, with real Redis measured in the same run.

The package, bottom to top (a module imports only those above it, never this ``__init__``,
and none imports tools/main.py): workload (Measurement, Skip, the loops' shapes),
datasets, env (BenchEnv: what a run's rows share), processes (every server a run starts),
one module of workloads per kind of section (embedded, aof, snapshot, latency, server,
datatypes, hardening, security, replication, interop, offline, workqueue, asyncio_rows,
shared, memory, eviction, backlog, checkouts), declarations (a row, a figure, a section), sections (each
section's rows, targets and figures, by what they measure), registry (the run order), runner
(the one runner: repeats, interleaving, the derived figures), report, options (the command
line; cheap: the CLI builds it always), compare (--compare-pure) and cli (main, progress).
The names below are re-exported lazily (PEP 562): building the CLI's parser loads no workload.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "cli": ("main",),
    "options": ("FULL_N", "QUICK_N", "add_parser", "build_parser", "section_names"),
    "registry": ("SECTIONS", "RATIOS", "FIGURES", "Benchmark", "Section", "Ratio", "Figure",
                 "select_sections"),
    "runner": ("Result", "FigureResult", "run_benchmarks", "derive_figures"),
    "report": ("format_results", "format_target"),
    "workload": ("Measurement", "Skip"),
    "env": ("BenchEnv",),
    "aof": ("bench_aof_threads", "bench_aof_replay", "REPLAY_STREAMS"),
    "snapshot": ("SNAPSHOT_ENTRIES_PER_N", "DISK_OPS_QUICK_FACTOR"),
}
_MODULE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE)


def __getattr__(name: str) -> Any:
    # Read from the defining module each time (not cached here): a test that replaces
    # registry.SECTIONS sees it through bench.SECTIONS too. A submodule's name is not found
    # here, so `from streamkeep.tools.bench import registry` imports the submodule.
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
