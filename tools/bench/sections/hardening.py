"""Hardening: what one client can cost the others, streamkeep serve beside redis-server in one
run: big replies and big values, request parsing (a pipeline whose values hold CRLF) and stalls
(a slow KEYS pattern, a long pipeline beside a bystander's PINGs).

Owns the ``hardening`` section's rows, targets and figures; :mod:`..hardening` owns how each
row measures. Must not touch: the run order, running, printing.
"""

from __future__ import annotations

from functools import partial

from streamkeep.tools.bench import hardening
from streamkeep.tools.bench.declarations import Benchmark, Section, both, each_server, extra, ratio

RANGE_REPLY_TARGET = 1_000_000  # XRANGE reply entries/s
BIG_XADD_TIME_TARGET = 3.0  # a big XADD's time / redis-server's, at most
CRLF_PIPELINE_TARGET = 1.5  # pipelined XADDs, CRLF in values: time / without, at most
BIG_XADD_PEAK_TARGET = 2.5  # its peak RSS above the baseline / the value's size, at most
BIG = "XADD of one big value (STREAMKEEP_BENCH_BIG_VALUE_MB), MB/s"
PINGS = f"{hardening.PIPELINED_PINGS:,} pipelined PINGs beside a PINGing client"
KEYS, BYSTANDER = "KEYS *a{1000}b over", "bystander PING during a 100k pipeline"

xrange, redis_xrange = both("xrange", f"XRANGE COUNT {hardening.RANGE_ENTRIES.full:,} reply, "
                                      "entries/s", hardening.xrange)

HARDENING = Section("hardening", (
    Benchmark(xrange.key, xrange.workload, xrange.run, RANGE_REPLY_TARGET), redis_xrange,
    Benchmark("big_xadd", f"{BIG}: streamkeep", partial(hardening.big_xadd, redis_server=False)),
    Benchmark("redis_big_xadd", f"{BIG}: redis-server",
              partial(hardening.big_xadd, redis_server=True)),
    *(Benchmark(f"pipeline_{key}", f"{hardening.PIPELINE_REQUESTS:,} pipelined XADDs, values "
                                   f"{kind} CRLF: streamkeep",
                partial(hardening.pipeline, crlf=crlf))
      for key, kind, crlf in (("plain", "without", False), ("crlf", "with", True))),
    *both("keys_pattern", f"{KEYS} one 100 KB key, KB", hardening.keys_pattern),
    *both("pipeline_bystander", PINGS, hardening.bystander_ping),
), figures=(
    ratio("XRANGE reply: streamkeep entries/s / redis-server", "xrange", "redis_xrange"),
    ratio("big XADD: streamkeep time / redis-server time", "redis_big_xadd", "big_xadd",
          BIG_XADD_TIME_TARGET, at_most=True),
    extra("big XADD: streamkeep seconds", "big_xadd", "seconds", "s"),
    extra("big XADD: streamkeep peak RSS above baseline / value size", "big_xadd",
          "peak_over_value", target=BIG_XADD_PEAK_TARGET, at_most=True),
    extra("big XADD: redis-server peak RSS above baseline / value size", "redis_big_xadd",
          "peak_over_value"),
    ratio("pipeline: time with CRLF in values / time without", "pipeline_plain",
          "pipeline_crlf", CRLF_PIPELINE_TARGET, at_most=True),
    *each_server(KEYS + " 100 KB, {server}", "keys_pattern", "us", "us"),
    *(extra(f"{BYSTANDER}, {stat}, {name}", f"{prefix}pipeline_bystander", f"{stat}_ms", "ms")
      for prefix, name in (("", "streamkeep"), ("redis_", "redis-server"))
      for stat in ("max", "p99")),
))
