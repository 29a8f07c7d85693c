"""The `streamkeep demo` tool (tools.demo), run in process: the demo's story is self-consistent
(pending = delivered - acked, in every view), and `streamkeep demo` runs it."""

from __future__ import annotations

import re

import pytest

from streamkeep.tools import demo
from streamkeep.tools import main as cli


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
