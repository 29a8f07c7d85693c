"""Durability: the append-only file's cost (``aof``: appendfsync everysec, always, no, group
commit, replay at open) and the crash bench's speed against an older checkout (``crashbench``).

Owns those sections' rows, targets and figures, and the compiled-over-pure target of the AOF
replay row (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (:mod:`..aof`, :mod:`..checkouts`), the run order,
running, printing.
"""

from __future__ import annotations

from functools import partial

from streamkeep.tools.bench import aof, checkouts
from streamkeep.tools.bench.declarations import Benchmark, Section, extra, ratio

# --- aof: the append-only file -----------------------------------------------------------------

AOF_EVERYSEC_TARGET = 150_000  # XADD/s, appendfsync everysec, one thread
AOF_EVERYSEC_RATIO_TARGET = 0.6  # ... as a fraction of the in-memory XADD/s of the same run
AOF_ALWAYS_TARGET = 20_000  # XADD/s, appendfsync always, AOF_THREADS threads
RECORDS_PER_FSYNC_TARGET = 5  # group commit under those threads

AOF = Section("aof", (
    Benchmark("everysec", "XADD, appendfsync everysec, 1 thread",
              partial(aof.xadd, policy="everysec"), AOF_EVERYSEC_TARGET),
    Benchmark("always_threads", f"XADD, appendfsync always, {aof.AOF_THREADS} threads",
              lambda env: env.in_dir("always", aof.bench_aof_threads, aof.AOF_THREADS, env.n,
                                     aof.ALWAYS_SECONDS.seconds(env)), AOF_ALWAYS_TARGET),
    Benchmark("fsync", f"fsyncs: os.write {aof.FSYNC_RECORD} B + fdatasync, serial",
              lambda env: env.in_dir("fsync", aof.serial_fsync, aof.FSYNC_N(env))),
    Benchmark("always", "XADD, appendfsync always, 1 thread",
              lambda env: env.in_dir("always1", aof.bench_aof_threads, 1, env.n,
                                     aof.ALWAYS_SECONDS.seconds(env))),
    Benchmark("no", "XADD, appendfsync no, 1 thread", partial(aof.xadd, policy="no")),
    # The replay target applies to a log of XADD records, which dominate real logs. The mixed
    # workload (each XREADGROUP record holding an XCLAIM per entry delivered) is printed
    # beside it, with its effects/s, and compared with it in the figures.
    Benchmark("replay_xadd", "replay at Engine.open: XADD records (the target's row)",
              lambda env: env.in_dir("replay-xadd", aof.bench_aof_replay, env.n, False),
              aof.REPLAY_TARGET),
    Benchmark("replay", f"replay at Engine.open: mixed, XADDs + XREADGROUP COUNT "
                        f"{aof.REPLAY_CHUNK} + XACK",
              lambda env: env.in_dir("replay", aof.bench_aof_replay, env.n)),
), sizes=(
    ("appendfsync always loop seconds", aof.ALWAYS_SECONDS.seconds), ("serial fsyncs", aof.FSYNC_N),
    ("replay streams", aof.REPLAY_STREAMS)), figures=(
    ratio("everysec XADD/s / in-memory XADD/s (embedded row)", "everysec", "embedded.xadd",
          AOF_EVERYSEC_RATIO_TARGET),
    extra(f"always, {aof.AOF_THREADS} threads: records per fsync", "always_threads",
          "records_per_fsync", "", RECORDS_PER_FSYNC_TARGET),
    ratio(f"always, {aof.AOF_THREADS} threads XADD/s / serial fsyncs/s", "always_threads", "fsync"),
    extra("always, 1 thread: records per fsync", "always", "records_per_fsync", ""),
    extra(f"replay, XADD records: records/s / the {aof.REPLAY_TARGET:,} target", "replay_xadd",
          "of_target"),
    extra("replay, mixed: effects applied per second", "replay", "effects_per_s", "/s"),
    ratio("replay, mixed records/s / XADD records/s", "replay", "replay_xadd"),
))

# --- crashbench: the crash bench against an older checkout -------------------------------------

CRASHBENCH = Section("crashbench", (
    checkouts.row("exhaustive", f"crash points judged/s: exhaustive power loss, "
                                f"{checkouts.POLICY}, every fault model: this checkout (vs "
                                "--before)", checkouts.crash_run, "before",
                  ("seconds", "the run's time"), ("cpu_s", "the run's CPU")),
), sizes=(
    ("--before", lambda env: env.others.get("before", "none given (no ratio)")),
    ("crashbench --ops", checkouts.CRASH_OPS)), figures=(
    extra("crash points judged/s: this / before, worst run", "exhaustive", "ratio_min"),
    extra("the same run's time: before / this, worst run", "exhaustive", "seconds_ratio_min"),
    extra("the same run's CPU: before / this, worst run", "exhaustive", "cpu_s_ratio_min"),
    extra("CPU per point judged, this checkout", "exhaustive", "cpu_ms_per_point", "ms"),
    extra("the run's wall time, start to exit, this checkout", "exhaustive", "wall_s", "s"),
))

# `bench --compare-pure`: compiled over pure-Python rate per row, each round at least.
NATIVE_TARGETS: dict[str, float] = {"aof.replay_xadd": 2.5}
