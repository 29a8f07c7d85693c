"""tools.bench_server's parsing: redis-benchmark's CSV output and the latency histogram's
buckets. (The server section itself runs in tests/tools/test_bench.py.)"""

from __future__ import annotations

import pytest

from streamkeep.tools import bench_server


def test_redis_benchmark_csv_and_latency_buckets() -> None:
    out = ('"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",'
           '"p99_latency_ms","max_latency_ms"\n'
           '"XADD mystream * myfield myvalue","340136.06","2.116","0.360","1.975","3.711",'
           '"4.799","6.151"\n')
    row = bench_server.parse_benchmark_csv("WARNING: Could not fetch server CONFIG\n" + out)
    assert row["rps"] == 340136.06 and row["p99_latency_ms"] == 4.799
    with pytest.raises(ValueError):
        bench_server.parse_benchmark_csv("")
    ms = 1_000_000
    buckets = bench_server.latency_histogram([0, ms - 1, ms, 2 * ms, 4 * ms, 9 * ms, 10 * ms])
    assert buckets == [("0-1 ms", 2), ("1-2 ms", 1), ("2-3 ms", 1), ("3-5 ms", 1),
                       ("5-10 ms", 1), ("10+ ms", 1)]
