"""Security: what TLS and ACL users cost a served client, streamkeep serve beside redis-server
in one run (:mod:`..security`: redis-benchmark --tls -P 16 XADD; -P 16 XADD as a restricted
user; a thousand handshakes stalled beside a TLS client's PINGs).

Owns the ``security`` section's rows, targets and figures; :mod:`..security` owns how each
row measures. Must not touch: the run order (the registry), running, printing.
"""

from __future__ import annotations

from streamkeep.tools.bench import security
from streamkeep.tools.bench.declarations import Benchmark, Figure, Section

TLS_XADD_TARGET = 0.5  # redis-benchmark --tls -P 16 XADD: streamkeep / redis-server, at least
STALLED_P99_TARGET = 5.0  # ms: a served client's p99 delay beside 1,000 stalled handshakes
ACL_USER_TARGET = 0.95  # XADD -P 16 as +xadd ~orders:* / as the default user, at least
ACL_RATIO_TARGET = 0.9  # (streamkeep / redis-server) as that user / as default, at least

SECURITY = Section("security", (
    Benchmark("security.tls_xadd", f"XADD over TLS, 50 clients, -P {security.PIPELINE}: "
                                   "streamkeep",
              lambda env: security.tls_xadd(env, security.tls_streamkeep(env))),
    Benchmark("security.redis_tls_xadd", f"XADD over TLS, 50 clients, -P {security.PIPELINE}: "
                                         "redis-server",
              lambda env: security.tls_xadd(env, security.tls_redis(env))),
    Benchmark("security.acl_xadd", f"XADD -P {security.PIPELINE} as a user allowed "
                                   "+xadd ~orders:* (default user, redis-server alike): "
                                   "streamkeep",
              security.acl_xadd),
    Benchmark("security.pings_alone", "PING over TLS, one client: streamkeep",
              lambda env: security.stalled_handshakes(env, security.tls_streamkeep(env), 0)),
    Benchmark("security.pings_stalled", f"PING over TLS beside {security.STALLED:,} stalled "
                                        "handshakes: streamkeep",
              lambda env: security.stalled_handshakes(env, security.tls_streamkeep(env))),
    Benchmark("security.redis_pings_stalled", f"PING over TLS beside {security.STALLED:,} "
                                              "stalled handshakes: redis-server",
              lambda env: security.stalled_handshakes(env, security.tls_redis(env))),
), figures=(
    Figure("security", "XADD over TLS -P 16: streamkeep / redis-server", "security.tls_xadd",
           denominator="security.redis_tls_xadd", target=TLS_XADD_TARGET),
    Figure("security", "XADD -P 16 as +xadd ~orders:* / as default, streamkeep",
           "security.acl_xadd", extra="user_over_default", target=ACL_USER_TARGET),
    Figure("security", "(streamkeep / redis-server) as that user / as default",
           "security.acl_xadd", extra="ratio_of_ratios", target=ACL_RATIO_TARGET),
    Figure("security", "PING p99 beside 1,000 stalled handshakes, streamkeep",
           "security.pings_stalled", extra="p99_ms", unit="ms", target=STALLED_P99_TARGET,
           at_most=True),
    Figure("security", "PING p99 alone, streamkeep", "security.pings_alone", extra="p99_ms",
           unit="ms"),
    Figure("security", "PING p99 beside 1,000 stalled handshakes, redis-server",
           "security.redis_pings_stalled", extra="p99_ms", unit="ms"),
))
