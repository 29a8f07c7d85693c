"""tools/bench/server.py's parsing of redis-benchmark's CSV output. (The server section itself
runs in tests/tools/test_bench.py.)"""

from __future__ import annotations

import pytest

from streamkeep.tools.bench import server


def test_redis_benchmark_csv() -> None:
    out = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
           '"p99_latency_ms","max_latency_ms"\n'
           '"XADD mystream * myfield myvalue","340136.06","2.116","0.360","1.975","3.711",'
           '"4.799","6.151"\n')
    row = server.parse_benchmark_csv("WARNING: Could not fetch server CONFIG\n" + out)
    assert row["rps"] == 340136.06 and row["p99_latency_ms"] == 4.799
    with pytest.raises(ValueError):
        server.parse_benchmark_csv("")
