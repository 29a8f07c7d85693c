"""`streamkeep bench`'s main (tools/bench/cli.py) and its progress (drawn by tools/progress.py):
plain lines on a pipe, a live display on a terminal, nothing with --quiet; progress goes to
stderr, the results to stdout."""

from __future__ import annotations

import io
import re

import pytest

from streamkeep.tools import bench
from streamkeep.tools.bench import registry
from streamkeep.tools.bench.cli import reporter
from streamkeep.tools.bench.runner import Result
from streamkeep.tools.progress import format_seconds


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _fake_sections() -> tuple[registry.Section, ...]:
    def skip(env: object) -> float:
        raise bench.Skip("no such thing here")

    return (registry.Section("embedded", (
        registry.Benchmark("embedded.a", "a", lambda env: 1000.0, target=10.0),
        registry.Benchmark("embedded.b", "b", skip),
    )),)


def test_piped_progress_is_one_plain_line_per_benchmark(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "SECTIONS", _fake_sections())
    assert bench.main(["--n", "10", "--no-redis", "--repeat", "2"]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert re.fullmatch(r"bench 1/2 embedded: a: 1,000 ops/s, best of 2, PASS "
                        r"\(\d+\.\d s; \d+\.\d s elapsed\)", lines[0]), lines
    assert re.fullmatch(r"bench 2/2 embedded: b: skipped: no such thing here "
                        r"\(\d+\.\d s; \d+\.\d s elapsed\)", lines[1]), lines
    assert re.fullmatch(r"bench: 2 benchmarks in \d+\.\d s", lines[2]), lines
    assert len(lines) == 3
    assert "\x1b[" not in captured.err  # no ANSI codes on a pipe
    assert "bench 1/2" not in captured.out  # the results stay on stdout, alone
    assert re.search(r"^embedded +a +10 +1,000 ", captured.out, re.M)


def test_quiet_prints_no_progress(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "SECTIONS", _fake_sections())
    assert bench.main(["--n", "10", "--no-redis", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_the_live_display() -> None:
    stream = _Terminal()
    bench_a = _fake_sections()[0].benchmarks[0]
    result = Result("embedded", bench_a, rate=1000.0, seconds=0.5)
    with reporter(stream) as shown:
        assert shown is not None and shown.bar.terminal  # the live display
        shown.started(result, 1, 3, 0, 1)
        shown.started(result, 2, 3, 0, 1)
        shown.finished(result, 1, 1)
    raw = stream.getvalue()
    assert "\x1b[" in raw  # styled, redrawn in place
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
    assert "embedded: a: 1,000 ops/s, best of 3, PASS" in text
    assert "1/1, repeat 2/3" in text
    assert "bench: 1 benchmark in" in text
    with reporter(io.StringIO()) as shown:
        assert shown is not None and not shown.bar.terminal  # plain lines
    with reporter(_Terminal(), quiet=True) as shown:
        assert shown is None


def test_format_seconds() -> None:
    assert format_seconds(4.24) == "4.2 s"
    assert format_seconds(187.9) == "3m 07s"
