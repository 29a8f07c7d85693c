"""Durability: the append-only file's cost (``aof``: appendfsync everysec, always, no, group
commit, replay at open) and the crash bench's speed against an older checkout
(``crashbench``).

Owns those sections' rows, targets and figures, and the compiled-over-pure target of the AOF
replay row (:data:`NATIVE_TARGETS`).
Must not touch: how a workload measures (:mod:`..aof`, :mod:`..crashbench`), the run order (the
registry), running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import aof, crashbench
from streamkeep.tools.bench.aof import (
    AOF_THREADS,
    FSYNC_RECORD,
    REPLAY_CHUNK,
    REPLAY_TARGET,
    bench_aof_replay,
    bench_aof_threads,
    bench_aof_xadd,
    bench_serial_fsync,
)
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section

# --- aof: the append-only file -----------------------------------------------------------------

AOF_EVERYSEC_TARGET = 150_000  # XADD/s, appendfsync everysec, one thread
AOF_EVERYSEC_RATIO_TARGET = 0.6  # ... as a fraction of the in-memory XADD/s of the same run
AOF_ALWAYS_TARGET = 20_000  # XADD/s, appendfsync always, AOF_THREADS threads
RECORDS_PER_FSYNC_TARGET = 5  # group commit under those threads

AOF = Section("aof", (
    Benchmark("aof.everysec", "XADD, appendfsync everysec, 1 thread",
              lambda env: env.in_dir("everysec", bench_aof_xadd, env.n, "everysec"),
              target=AOF_EVERYSEC_TARGET),
    Benchmark("aof.always_threads", f"XADD, appendfsync always, {AOF_THREADS} threads",
              lambda env: env.in_dir("always", bench_aof_threads, AOF_THREADS, env.n,
                                     aof.always_seconds(env)),
              target=AOF_ALWAYS_TARGET),
    Benchmark("aof.fsync", f"fsyncs: os.write {FSYNC_RECORD} B + fdatasync, serial",
              lambda env: env.in_dir("fsync", bench_serial_fsync, aof.fsync_n(env))),
    Benchmark("aof.always", "XADD, appendfsync always, 1 thread",
              lambda env: env.in_dir("always1", bench_aof_threads, 1, env.n,
                                     aof.always_seconds(env))),
    Benchmark("aof.no", "XADD, appendfsync no, 1 thread",
              lambda env: env.in_dir("no", bench_aof_xadd, env.n, "no")),
    # The replay target applies to a log of XADD records, which dominate real logs. The
    # mixed workload (each XREADGROUP record holding an XCLAIM per entry delivered) is
    # printed beside it, with its effects/s, and compared with it in the figures.
    Benchmark("aof.replay_xadd", "replay at Engine.open: XADD records (the target's row)",
              lambda env: env.in_dir("replay-xadd", bench_aof_replay, env.n, False),
              target=REPLAY_TARGET),
    Benchmark("aof.replay", f"replay at Engine.open: mixed, XADDs + XREADGROUP COUNT "
                            f"{REPLAY_CHUNK} + XACK",
              lambda env: env.in_dir("replay", bench_aof_replay, env.n)),
), describe=aof.describe, figures=(
    Figure("aof", "everysec XADD/s / in-memory XADD/s (embedded row)", "aof.everysec",
           denominator="embedded.xadd", target=AOF_EVERYSEC_RATIO_TARGET),
    Figure("aof", f"always, {AOF_THREADS} threads: records per fsync", "aof.always_threads",
           extra="records_per_fsync", unit="", target=RECORDS_PER_FSYNC_TARGET),
    Figure("aof", f"always, {AOF_THREADS} threads XADD/s / serial fsyncs/s",
           "aof.always_threads", denominator="aof.fsync"),
    Figure("aof", "always, 1 thread: records per fsync", "aof.always",
           extra="records_per_fsync", unit=""),
    Figure("aof", f"replay, XADD records: records/s / the {REPLAY_TARGET:,} target",
           "aof.replay_xadd", extra="of_target"),
    Figure("aof", "replay, mixed: effects applied per second", "aof.replay",
           extra="effects_per_s", unit="/s"),
    Figure("aof", "replay, mixed records/s / XADD records/s", "aof.replay",
           denominator="aof.replay_xadd"),
))

# --- crashbench: the crash bench against an older checkout -------------------------------------

CRASHBENCH = Section("crashbench", (
    Benchmark("crashbench.exhaustive", f"crash points judged/s: exhaustive power loss, "
                                       f"{crashbench.POLICY}, every fault model: this "
                                       f"checkout (vs --before)", crashbench.exhaustive),
), describe=crashbench.describe, figures=(
    Figure("crashbench", "crash points judged/s: this / before, worst run",
           "crashbench.exhaustive", extra="ratio_min"),
    Figure("crashbench", "the same run's time: before / this, worst run",
           "crashbench.exhaustive", extra="seconds_ratio_min"),
    Figure("crashbench", "the same run's CPU: before / this, worst run",
           "crashbench.exhaustive", extra="cpu_s_ratio_min"),
    Figure("crashbench", "CPU per point judged, this checkout", "crashbench.exhaustive",
           extra="cpu_ms_per_point", unit="ms"),
    Figure("crashbench", "the run's wall time, start to exit, this checkout",
           "crashbench.exhaustive", extra="wall_s", unit="s"),
))

# `bench --compare-pure`: compiled over pure-Python rate per row, the compiled core's targets
# (each round's ratio must reach it).
NATIVE_TARGETS: dict[str, float] = {"aof.replay_xadd": 2.5}
