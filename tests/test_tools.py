"""The `streamkeep demo` and `streamkeep bench` tools (tools.demo, tools.bench), run in process.

Checks the demo's story is self-consistent (pending = delivered - acked, in every view) and that
`bench --quick` prints every registered row with positive figures. Speed targets are reported by
the bench, never asserted here.
"""

from __future__ import annotations

import re
import shutil

import pytest

from tools import bench, cli, demo

NUMBER = r"[\d,]+(?:\.\d+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_demo_pending_is_delivered_minus_acked(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "b'" not in out  # bytes are decoded for printing

    delivered, acked, pending = map(
        int, re.search(r"delivered (\d+), acked (\d+), pending (\d+)", out).groups()
    )
    assert delivered == demo.N_ORDERS  # the stream was drained
    assert 0 < pending == delivered - acked < delivered  # some acked, a few left

    reads = re.findall(r"^  (\w+) +read (\d+) .*XACK (\d+), left (\d+) pending$", out, re.M)
    assert {name for name, *_ in reads} == set(demo.CONSUMERS)
    assert sum(int(n) for _, n, _, _ in reads) == delivered
    assert sum(int(a) for _, _, a, _ in reads) == acked
    assert "read nothing: the stream is drained" in out

    # XPENDING summary: total and per-consumer counts
    assert int(re.search(r"total pending: (\d+)", out).group(1)) == pending
    per_consumer = {
        name: int(n) for name, n in re.findall(r"^  consumer (\w+) +(\d+) pending$", out, re.M)
    }
    left = {}
    for name, _n, _a, left_n in reads:
        left[name] = left.get(name, 0) + int(left_n)
    assert per_consumer == left
    assert sum(per_consumer.values()) == pending

    # XPENDING extended: one line per pending entry, each delivered once
    extended = out.split("(extended)")[1].split("== XINFO STREAM")[0]
    rows = re.findall(r"^  (\d+-\d+) +(\w+) +(\d+) +(\d+)$", extended, re.M)
    assert len(rows) == pending
    assert all(deliveries == "1" for *_, deliveries in rows)

    # XINFO views agree
    assert re.search(rf"^  length +{demo.N_ORDERS}$", out, re.M)
    assert re.search(rf"^    consumers +{len(demo.CONSUMERS)}$", out, re.M)
    assert re.search(rf"^    pending +{pending}$", out, re.M)  # group line
    assert re.search(r"^    lag +0$", out, re.M)
    for name in demo.CONSUMERS:
        assert re.search(rf"^  consumer {name}$", out, re.M)


def test_cli_dispatches_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo"]) == 0
    assert "XINFO CONSUMERS" in capsys.readouterr().out


@pytest.mark.redis
def test_bench_quick_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server not on PATH: the bench's reference rows need it")
    assert bench.main(["--quick"]) == 0  # targets never fail the run without --strict
    out = capsys.readouterr().out
    lines = out.splitlines()

    assert re.search(r"machine: \d+ cores", out)
    assert "Python 3." in out
    assert re.search(r"reference: redis-server \d+\.\d+\.\d+ on 127\.0\.0\.1:\d+", out)

    for section in bench.SECTIONS:
        for b in section.benchmarks:
            row = [ln for ln in lines if ln.startswith(section.name) and f"  {b.workload}  " in ln]
            assert len(row) == 1, (b.key, out)
            m = re.search(rf"  ({NUMBER})  +({NUMBER})  +({NUMBER})(?:  |$)", row[0])
            assert m, row[0]
            msgs, rate, us = map(_num, m.groups())
            assert msgs == bench.QUICK_N
            assert rate > 0 and us > 0
            assert us == pytest.approx(1e6 / rate, rel=0.01, abs=0.01)
            if b.target is not None:
                assert f">= {b.target:,}" in row[0]
                assert re.search(r"  (PASS|FAIL)$", row[0])

    for ratio in bench.RATIOS:
        row = [ln for ln in lines if ln.startswith(ratio.workload) and ratio.reference in ln]
        assert len(row) == 1, (ratio, out)
        assert _num(re.search(rf"({NUMBER})x$", row[0]).group(1)) > 0
    assert re.search(r"^targets: \d+/2 PASS$", out, re.M)
    assert "skipped" not in out


def test_bench_without_redis_skips_reference_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--n", "500", "--no-redis"]) == 0
    out = capsys.readouterr().out
    assert "reference: none (disabled (--no-redis))" in out
    assert re.search(r"^embedded +XADD, 1 thread +500 +[\d,]+ ", out, re.M)
    assert re.search(r"^redis-py +XADD, one at a time +500 +skipped", out, re.M)
    assert "embedded  / reference" not in out  # no ratios without the reference


def test_strict_fails_on_a_missed_target(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = bench.Section("embedded", (bench.Benchmark("embedded.x", "x", lambda env: 1.0,
                                                      target=2.0),))
    monkeypatch.setattr(bench, "SECTIONS", (slow,))
    assert bench.main(["--n", "10", "--no-redis"]) == 0
    assert bench.main(["--n", "10", "--no-redis", "--strict"]) == 1
    assert "targets: 0/1 PASS" in capsys.readouterr().out
