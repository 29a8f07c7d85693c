"""`streamkeep crashbench` as a user runs it (a child process, as CI's bounded configuration):
every policy's exhaustive power-loss run over a short workload holds every invariant and
exits 0, its JSON report has a row per policy x model, a --replay token replays one crash
point, and bad input is a usage error (exit 2) without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def crashbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep", "crashbench", *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path_factory.mktemp("crashbench") / "report.json"
    proc = crashbench("--policy", "all", "--ops", "150", "--model", "none", "--model", "zeros",
                      "--json", str(report))
    return proc, json.loads(report.read_text())


def test_every_policy_holds_every_invariant(bounded: tuple) -> None:
    proc, doc = bounded
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""  # piped: no progress, no engine warnings
    assert doc["ok"] is True
    rows = {(r["policy"], r["model"]): r for r in doc["rows"]}
    assert set(rows) == {(p, m) for p in ("always", "everysec", "no") for m in ("none", "zeros")}
    for row in rows.values():
        assert row["covered"] == row["reached"] > 100  # exhaustive: every point tried
        assert row["violations"] == {}
        assert row["recoveries"].get("refused", 0) == 0
    assert rows["always", "none"]["lost"] == 0
    assert rows["everysec", "none"]["loss_points"] > 0  # unsynced writes were lost...
    assert rows["everysec", "none"]["loss_window_s"] <= 2.0  # ...within the bound
    assert "acked-lost" in proc.stdout and "PASS" in proc.stdout


def test_replay_token(bounded: tuple) -> None:
    _proc, doc = bounded
    row = doc["rows"][0]
    token = f"powerloss:{row['policy']}:1:150:50:40:{row['model']}"
    proc = crashbench("--replay", token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "crash point:" in proc.stdout and "1/1" in proc.stdout


@pytest.mark.parametrize("args", [["--replay", "nonsense"], ["--model", "bogus"],
                                  ["--ops", "0"], ["--policy", "sometimes"]])
def test_usage_errors(args: list[str]) -> None:
    proc = crashbench(*args, "--ops", "20") if "--ops" not in args else crashbench(*args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_has_examples_and_exit_codes() -> None:
    proc = crashbench("--help")
    assert proc.returncode == 0
    assert "examples:" in proc.stdout and "exit codes:" in proc.stdout
