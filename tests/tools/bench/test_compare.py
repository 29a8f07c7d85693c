"""bench --compare-pure: the child runs' environments, the options they repeat, and the
table built from their JSON (synthetic documents here; a real quick run in one test)."""

from __future__ import annotations

import json
import subprocess
import sys

from streamkeep.tools.bench import compare, options, registry
from streamkeep.tools.bench.cli import _child_args


def _doc(rates: dict[str, float | None]) -> dict:
    return {"rows": [{"key": k, "workload": f"w {k}", "rate": r} for k, r in rates.items()]}


def test_child_environments() -> None:
    assert compare.child_env("pure")["STREAMKEEP_NO_EXTENSIONS"] == "1"
    env = compare.child_env("compiled")
    assert "STREAMKEEP_NO_EXTENSIONS" not in env
    assert env["STREAMKEEP_REQUIRE_EXTENSIONS"] == "1"  # a missing kernel fails the run


def test_child_args_repeat_the_selection_only() -> None:
    opts = options.build_parser().parse_args(
        ["embedded", "--quick", "--no-redis", "--compare-pure", "--repeat", "3", "--json"])
    assert options.settings(opts).compare_pure
    assert _child_args(opts) == ["embedded", "--quick", "--no-redis"]
    opts = options.build_parser().parse_args(["--sections", "aof", "--n", "900"])
    assert _child_args(opts) == ["--n", "900", "--sections", "aof"]


def test_ratios_per_round_and_verdicts() -> None:
    key = next(iter(registry.NATIVE_TARGETS))
    target = registry.NATIVE_TARGETS[key]
    runs = [
        {"compiled": _doc({key: 300.0, "x": 10.0, "skipped": None}),
         "pure": _doc({key: 100.0, "x": 10.0, "skipped": 5.0})},
        {"compiled": _doc({key: 200.0, "x": 30.0}), "pure": _doc({key: 100.0, "x": 10.0})},
    ]
    rows = {r["key"]: r for r in compare.compare(runs)}
    assert set(rows) == {key, "x"}  # a row skipped in either mode is left out
    assert rows[key]["ratios"] == [3.0, 2.0]
    assert rows[key]["result"] == ("PASS" if target <= 2.0 else "FAIL")  # the worst round
    assert rows["x"]["result"] is None and rows["x"]["ratios"] == [1.0, 3.0]
    text = compare.table(list(rows.values())).plain()
    assert "1.00-3.00x" in text and "300" in text


def test_a_quick_run_prints_both(tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = subprocess.run(
        [sys.executable, "-m", "streamkeep", "bench", "embedded", "--quick", "--no-redis",
         "--compare-pure", "--json", "--quiet", "--n", "2000"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    keys = {row["key"] for row in document["rows"]}
    assert "embedded.xadd" in keys
    assert all(len(row["ratios"]) == 1 for row in document["rows"])
