"""``streamkeep bench``: throughput of the engine, with real Redis measured in the same run.

The package, bottom to top (a module imports only those above it in this list, never this
``__init__``, and none imports tools/main.py):

    workload   Measurement, Skip, the warm-up rule, shared names and loops
    tables     the plain-text table layout
    datasets   the example data sets and data directories the sections run on
    processes  the servers a run starts (tools.servers' redis-server, ``streamkeep serve``)
    env        BenchEnv: what the benchmarks of a run share
    embedded, aof, redis_py, snapshot, latency, server
               one module per section (latency: the server section's harness)
    declarations  Benchmark/Section/Ratio/Figure: what a row, a section, a figure declare
    sections   each section's rows, targets and figures, by what they measure (speed,
               durability, storage, replication, offline, hardening)
    registry   the run order: SECTIONS, FIGURES, RATIOS, REPORTS, NATIVE_TARGETS
    runner     running the registry (best of R, progress hooks), the derived figures
    report     the header and the results: plain text, rich tables, JSON
    options    the command line, its help and exit codes (cheap: the CLI builds it always)
    compare    --compare-pure: child runs compiled and pure, interleaved, side by side
    cli        main(): `streamkeep bench`, and its progress lines (drawn by tools.progress)

The names below are re-exported lazily (PEP 562), so that building the CLI's parser, which
imports :mod:`.options`, loads no workload.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkeep.tools.bench.aof import REPLAY_STREAMS, bench_aof_replay, bench_aof_threads
    from streamkeep.tools.bench.cli import main
    from streamkeep.tools.bench.env import BenchEnv
    from streamkeep.tools.bench.options import (
        FULL_N,
        QUICK_N,
        add_parser,
        build_parser,
        section_names,
    )
    from streamkeep.tools.bench.registry import (
        FIGURES,
        RATIOS,
        SECTIONS,
        Benchmark,
        Figure,
        Ratio,
        Section,
        select_sections,
    )
    from streamkeep.tools.bench.report import format_results, format_target
    from streamkeep.tools.bench.runner import FigureResult, Result, derive_figures, run_benchmarks
    from streamkeep.tools.bench.snapshot import DISK_OPS_QUICK_FACTOR, SNAPSHOT_ENTRIES_PER_N
    from streamkeep.tools.bench.workload import Measurement, Skip

_EXPORTS = {
    "main": "cli",
    "FULL_N": "options", "QUICK_N": "options", "add_parser": "options",
    "build_parser": "options", "section_names": "options",
    "SECTIONS": "registry", "RATIOS": "registry", "FIGURES": "registry",
    "Benchmark": "registry", "Section": "registry", "Ratio": "registry", "Figure": "registry",
    "select_sections": "registry",
    "Result": "runner", "FigureResult": "runner", "run_benchmarks": "runner",
    "derive_figures": "runner",
    "format_results": "report", "format_target": "report",
    "Measurement": "workload", "Skip": "workload",
    "BenchEnv": "env",
    "bench_aof_threads": "aof", "bench_aof_replay": "aof", "REPLAY_STREAMS": "aof",
    "SNAPSHOT_ENTRIES_PER_N": "snapshot", "DISK_OPS_QUICK_FACTOR": "snapshot",
}

__all__ = [
    "BenchEnv", "Benchmark", "DISK_OPS_QUICK_FACTOR", "FIGURES", "FULL_N", "Figure",
    "FigureResult", "Measurement", "QUICK_N", "RATIOS", "REPLAY_STREAMS", "Ratio", "Result",
    "SECTIONS", "SNAPSHOT_ENTRIES_PER_N", "Section", "Skip", "add_parser", "bench_aof_replay",
    "bench_aof_threads", "build_parser", "derive_figures", "format_results", "format_target",
    "main", "run_benchmarks", "section_names", "select_sections",
]


def __getattr__(name: str) -> Any:
    # Read from the defining module each time (not cached here): a test that replaces
    # registry.SECTIONS sees it through bench.SECTIONS too. A submodule's name is not found
    # here, so `from streamkeep.tools.bench import registry` imports the submodule.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
