"""tools/bench/latency.py's histogram buckets. (The latency rows run in
tests/tools/test_bench.py's server section test.)"""

from __future__ import annotations

from streamkeep.tools.bench import latency


def test_latency_buckets() -> None:
    ms = 1_000_000
    buckets = latency.latency_histogram([0, ms - 1, ms, 2 * ms, 4 * ms, 9 * ms, 10 * ms])
    assert buckets == [("0-1 ms", 2), ("1-2 ms", 1), ("2-3 ms", 1), ("3-5 ms", 1),
                       ("5-10 ms", 1), ("10+ ms", 1)]
