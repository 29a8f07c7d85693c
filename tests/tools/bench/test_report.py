"""tools/bench/report.py: --json carries the same rows, figures and verdicts as the tables."""

from __future__ import annotations

import json

import pytest

from streamkeep.tools import bench
from streamkeep.tools.bench import registry
from tests.support.bench_cells import assert_same_rate


def test_json_output(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    section = registry.Section("aof", (
        registry.Benchmark("aof.a", "a", lambda env: bench.Measurement(10.0, 3, {"k": 1.0},
                                                                        ["a note"])),
        registry.Benchmark("aof.b", "b", lambda env: 40.0, target=50.0),
    ))
    figures = (registry.Figure("aof", "a per b", "aof.a", denominator="aof.b", target=0.5),
               registry.Figure("aof", "k of a", "aof.a", extra="k", unit="", target=1))
    monkeypatch.setattr(registry, "SECTIONS", (section,))
    monkeypatch.setattr(registry, "FIGURES", figures)
    assert bench.main(["--n", "10", "--no-redis", "--json", "--quiet", "--strict"]) == 1
    doc = json.loads(capsys.readouterr().out)  # stdout holds the document only
    assert doc["bench"]["n"] == 10 and doc["bench"]["sections"] == ["aof"]
    assert doc["machine"]["cores"] >= 1
    assert "reference: none (disabled (--no-redis))" in doc["resources"]
    a, b = doc["rows"]
    assert (a["key"], a["ops"], a["rate"], a["figures"], a["notes"]) == (
        "aof.a", 3, 10.0, {"k": 1.0}, ["a note"])
    assert a["result"] is None and a["us_per_op"] == pytest.approx(1e5)
    assert (b["ops"], b["target"], b["result"]) == (10, 50.0, "FAIL")
    ratio, k = doc["figures"]
    assert (ratio["value"], ratio["result"]) == (0.25, "FAIL")
    assert (k["value"], k["unit"], k["result"]) == (1.0, "", "PASS")
    assert doc["targets"] == {"pass": 1, "fail": 2, "not_measured": 0, "total": 3}
    assert doc["skipped"] == []


def test_format_target() -> None:
    assert bench.format_target(250_000) == ">= 250,000"
    assert bench.format_target(2.0, "x", at_most=True) == "<= 2x"
    assert bench.format_target(2000, "us", at_most=True) == "<= 2,000 us"


def test_a_rate_prints_three_significant_digits_at_least() -> None:
    """A slow row's rate keeps its digits (13.44 MB/s is not printed as 13), and a row's two
    cells are checked as one number rounded twice: 13 is what 13.44 rounds to, 14 is not."""
    from streamkeep.tools.bench.report import format_rate

    assert [format_rate(r) for r in (147_858.2, 999.6, 100.0, 99.96, 13.44, 1.2345, 0.0123)] \
        == ["147,858", "1,000", "100", "100.0", "13.4", "1.23", "0.0123"]
    us = f"{1e6 / 13.44:.2f}"
    assert_same_rate(format_rate(13.44), us)
    assert_same_rate("13", us)
    with pytest.raises(AssertionError):
        assert_same_rate("14", us)
