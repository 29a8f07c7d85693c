"""Hardening: what one client can cost the others, streamkeep serve beside redis-server in one
run. Big replies and big values (:mod:`..bigvalues`: an XRANGE reply of a million entries, an
XADD of one big value), request parsing (:mod:`..parsing`: a pipeline whose values hold CRLF)
and stalls (:mod:`..stalls`: a slow KEYS pattern, a long pipeline beside a bystander's PINGs).

Owns the ``hardening`` section's rows, targets and figures; the three modules above own how
each row measures.
Must not touch: the run order (the registry), running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import bigvalues, parsing, server, stalls
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section

RANGE_REPLY_TARGET = 1_000_000  # XRANGE reply entries/s
BIG_XADD_TIME_TARGET = 3.0  # a big XADD's time / redis-server's, at most
CRLF_PIPELINE_TARGET = 1.5  # pipelined XADDs, CRLF in values: time / without, at most
BIG_XADD_PEAK_TARGET = 2.5  # its peak RSS above the baseline / the value's size, at most

HARDENING = Section("hardening", (
    Benchmark("hardening.xrange", f"XRANGE COUNT {bigvalues.RANGE_ENTRIES:,} reply, "
                                  "entries/s: streamkeep",
              lambda env: bigvalues.bench_xrange(server.streamkeep(env),
                                                 bigvalues.range_entries(env)),
              target=RANGE_REPLY_TARGET),
    Benchmark("hardening.redis_xrange", f"XRANGE COUNT {bigvalues.RANGE_ENTRIES:,} reply, "
                                        "entries/s: redis-server",
              lambda env: bigvalues.bench_xrange(server.redis_aof(env),
                                                 bigvalues.range_entries(env))),
    Benchmark("hardening.big_xadd", "XADD of one big value (STREAMKEEP_BENCH_BIG_VALUE_MB), "
                                    "MB/s: streamkeep",
              lambda env: bigvalues.bench_big_xadd(bigvalues.streamkeep_server,
                                                   bigvalues.big_value_bytes(env))),
    Benchmark("hardening.redis_big_xadd", "XADD of one big value (STREAMKEEP_BENCH_BIG_VALUE"
                                          "_MB), MB/s: redis-server",
              lambda env: bigvalues.bench_big_xadd(bigvalues.redis_server_for(env),
                                                   bigvalues.big_value_bytes(env))),
    Benchmark("hardening.pipeline_plain", f"{parsing.PIPELINE_REQUESTS:,} pipelined XADDs, "
                                          "values without CRLF: streamkeep",
              lambda env: parsing.bench_pipeline(server.streamkeep(env), crlf=False)),
    Benchmark("hardening.pipeline_crlf", f"{parsing.PIPELINE_REQUESTS:,} pipelined XADDs, "
                                         "values with CRLF: streamkeep",
              lambda env: parsing.bench_pipeline(server.streamkeep(env), crlf=True)),
    Benchmark("hardening.keys_pattern", "KEYS *a{1000}b over one 100 KB key, KB: streamkeep",
              lambda env: stalls.keys_pattern(server.streamkeep(env))),
    Benchmark("hardening.redis_keys_pattern", "KEYS *a{1000}b over one 100 KB key, KB: "
                                              "redis-server",
              lambda env: stalls.keys_pattern(server.redis_aof(env))),
    Benchmark("hardening.pipeline_bystander", f"{stalls.PIPELINED_PINGS:,} pipelined PINGs "
                                              "beside a PINGing client: streamkeep",
              lambda env: stalls.bystander_ping(server.streamkeep(env))),
    Benchmark("hardening.redis_pipeline_bystander", f"{stalls.PIPELINED_PINGS:,} pipelined "
                                                    "PINGs beside a PINGing client: "
                                                    "redis-server",
              lambda env: stalls.bystander_ping(server.redis_aof(env))),
), figures=(
    Figure("hardening", "XRANGE reply: streamkeep entries/s / redis-server",
           "hardening.xrange", denominator="hardening.redis_xrange"),
    Figure("hardening", "big XADD: streamkeep time / redis-server time",
           "hardening.redis_big_xadd", denominator="hardening.big_xadd",
           target=BIG_XADD_TIME_TARGET, at_most=True),
    Figure("hardening", "big XADD: streamkeep seconds", "hardening.big_xadd", extra="seconds",
           unit="s"),
    Figure("hardening", "big XADD: streamkeep peak RSS above baseline / value size",
           "hardening.big_xadd", extra="peak_over_value", target=BIG_XADD_PEAK_TARGET,
           at_most=True),
    Figure("hardening", "big XADD: redis-server peak RSS above baseline / value size",
           "hardening.redis_big_xadd", extra="peak_over_value"),
    Figure("hardening", "pipeline: time with CRLF in values / time without",
           "hardening.pipeline_plain", denominator="hardening.pipeline_crlf",
           target=CRLF_PIPELINE_TARGET, at_most=True),
    Figure("hardening", "KEYS *a{1000}b over 100 KB, streamkeep", "hardening.keys_pattern",
           extra="us", unit="us"),
    Figure("hardening", "KEYS *a{1000}b over 100 KB, redis-server",
           "hardening.redis_keys_pattern", extra="us", unit="us"),
    Figure("hardening", "bystander PING during a 100k pipeline, max, streamkeep",
           "hardening.pipeline_bystander", extra="max_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, p99, streamkeep",
           "hardening.pipeline_bystander", extra="p99_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, max, redis-server",
           "hardening.redis_pipeline_bystander", extra="max_ms", unit="ms"),
    Figure("hardening", "bystander PING during a 100k pipeline, p99, redis-server",
           "hardening.redis_pipeline_bystander", extra="p99_ms", unit="ms"),
))
