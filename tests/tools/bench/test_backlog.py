"""The backlog section's hash workload (tools.bench.backlog): the same data set opened cold
under the budget and resident, each reporting what it measured."""

from __future__ import annotations

from pathlib import Path

from streamkeep.tools.bench import backlog


def test_the_hash_modes_open_the_same_hash_cold_and_resident(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    backlog.build_hash(path, 20_000)
    cold = backlog.hash_child("hash_cold", path)
    resident = backlog.hash_child("hash_resident", path)
    assert cold["fields"] == resident["fields"] == 20_000
    assert cold["cold_fields"] == 20_000 and resident["cold_fields"] == 0
    for got in (cold, resident):
        assert got["restart_s"] > 0 and got["hget_per_s"] > 0 and got["open_rss"] > 0
