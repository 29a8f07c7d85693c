"""Security: what TLS and ACL users cost a served client, streamkeep serve beside redis-server
in one run (redis-benchmark --tls -P 16 XADD; -P 16 XADD as a restricted user; a thousand
handshakes stalled beside a TLS client's PINGs).

Owns the ``security`` section's rows, targets and figures; :mod:`..security` owns how each
row measures. Must not touch: the run order, running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import security
from streamkeep.tools.bench.declarations import Benchmark, Section, both, extra, ratio

TLS_XADD_TARGET = 0.5  # redis-benchmark --tls -P 16 XADD: streamkeep / redis-server, at least
STALLED_P99_TARGET = 5.0  # ms: a served client's p99 delay beside 1,000 stalled handshakes
ACL_USER_TARGET = 0.95  # XADD -P 16 as +xadd ~orders:* / as the default user, at least
ACL_RATIO_TARGET = 0.9  # (streamkeep / redis-server) as that user / as default, at least
STALLED = f"PING over TLS beside {security.STALLED:,} stalled handshakes"
PING_P99 = "PING p99 beside 1,000 stalled handshakes"

SECURITY = Section("security", (
    *both("tls_xadd", f"XADD over TLS, 50 clients, -P {security.PIPELINE}", security.tls_xadd,
          servers=security.TLS_SERVERS),
    Benchmark("acl_xadd", f"XADD -P {security.PIPELINE} as a user allowed +xadd ~orders:* "
                          "(default user, redis-server alike): streamkeep", security.acl_xadd),
    Benchmark("pings_alone", "PING over TLS, one client: streamkeep", lambda env: (
        security.stalled_handshakes(env, security.TLS_SERVERS[0](env), stalled=0))),
    *both("pings_stalled", STALLED, security.stalled_handshakes, servers=security.TLS_SERVERS),
), figures=(
    ratio("XADD over TLS -P 16: streamkeep / redis-server", "tls_xadd", "redis_tls_xadd",
          TLS_XADD_TARGET),
    extra("XADD -P 16 as +xadd ~orders:* / as default, streamkeep", "acl_xadd",
          "user_over_default", target=ACL_USER_TARGET),
    extra("(streamkeep / redis-server) as that user / as default", "acl_xadd",
          "ratio_of_ratios", target=ACL_RATIO_TARGET),
    extra(f"{PING_P99}, streamkeep", "pings_stalled", "p99_ms", "ms", STALLED_P99_TARGET,
          at_most=True),
    extra("PING p99 alone, streamkeep", "pings_alone", "p99_ms", "ms"),
    extra(f"{PING_P99}, redis-server", "redis_pings_stalled", "p99_ms", "ms"),
))
