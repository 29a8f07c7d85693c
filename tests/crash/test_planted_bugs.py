"""Proof that the crash bench finds bugs: each known durability bug, planted in the engines the
bench opens (streamkeep.tools.crashbench.planted: a wrapper of their file layer, or of a
command's handler), is reported by the power-loss mode as a violation.

The switch is read once, at import, from STREAMKEEP_PLANTED_BUGS, so every bug runs in a child
process of its own (tests/support/planted_run.py), all started at once (the replays are CPU
bound: they share the cores). A control child runs every configuration with nothing planted:
each must judge clean, so a violation in a bug's run is the bug's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 180

# bug -> (the smallest configuration that shows it, the invariants it may be reported as).
CASES: dict[str, tuple[dict[str, Any], set[str]]] = {
    # `always`: every write point after an ack-without-fsync loses it.
    "ack-before-fsync": ({"policy": "always", "ops": 60, "kinds": ["write"], "model": "none",
                          "every": 4}, {"acked-lost"}),
    # 2.5 s idle after op 100, then ops that write: the first crash point after the pause
    # loses ops acknowledged 2.5 s before it.
    "everysec-stops-when-idle": ({"policy": "everysec", "ops": 110, "pause_after": 100,
                                  "pause_s": 2.5, "kinds": ["write"], "model": "none",
                                  "after_s": 2.0}, {"loss-window"}),
    # From op 100 (16 KiB segments: the first rotations are behind it), every 4th point of
    # every kind: a rotation's manifest is not durable until the next directory fsync.
    "manifest-rename-no-dirfsync": ({"policy": "always", "ops": 250, "model": "none",
                                     "from_op": 100, "every": 4}, {"acked-lost", "recovery"}),
    # A write cut in flight leaves a zero-filled tail: it must be truncated, not refused.
    # Under `always` an op is two writes (its record, then the synced watermark): every third
    # write point cuts both kinds.
    "zero-tail-is-damage": ({"policy": "always", "ops": 60, "kinds": ["write"],
                             "model": "zeros", "every": 3}, {"recovery"}),
    # A flipped bit in the last fsynced records, cut as a torn tail: acknowledged writes gone.
    "rot-is-a-torn-tail": ({"policy": "always", "ops": 80, "kinds": ["write"],
                            "model": "bitrot"}, {"acked-lost"}),
    # Any clean recovery after an XCLAIM/XAUTOCLAIM shows the group's ID moved back.
    "ldi-backwards": ({"policy": "always", "ops": 150, "kinds": ["fsync"], "model": "none",
                       "every": 10}, {"groups", "prefix"}),
    # everysec loses its unsynced tail; the next XADD * hands its IDs out again.
    "star-id-reuse": ({"policy": "everysec", "ops": 100, "kinds": ["write"], "model": "none",
                       "every": 5}, {"ids-reused"}),
}
CONTROL = "control"


def _start(bugs: str, configs: list[dict[str, Any]]) -> subprocess.Popen[str]:
    env = dict(os.environ, STREAMKEEP_PLANTED_BUGS=bugs)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.planted_run", *map(json.dumps, configs)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def results() -> dict[str, list[dict[str, Any]]]:
    """Every child's findings, one dict per configuration it ran (children run together)."""
    children = {bug: _start(bug, [config]) for bug, (config, _) in CASES.items()}
    children[CONTROL] = _start("", [config for config, _ in CASES.values()])
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, child in children.items():
            out, err = child.communicate(timeout=TIMEOUT_S)
            assert child.returncode == 0, f"{name}: exit {child.returncode}\n{err[-3000:]}"
            found[name] = [json.loads(line) for line in out.splitlines()]
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    return found


@pytest.mark.parametrize("bug", sorted(CASES))
def test_the_bench_reports_the_planted_bug(bug: str, results: dict[str, list]) -> None:
    (found,) = results[bug]
    expected = CASES[bug][1]
    assert found["judged"] > 0
    assert set(found["invariants"]) & expected, \
        f"{bug}: expected one of {sorted(expected)}, the bench reported {found}"


def test_control_nothing_planted_nothing_reported(results: dict[str, list]) -> None:
    """The same configurations, no bug: no violation (else the bugs' findings prove nothing)."""
    for bug, found in zip(CASES, results[CONTROL], strict=True):
        assert found["judged"] > 0
        assert not found["invariants"], f"control run of {bug}'s configuration: {found}"


def test_an_unknown_bug_name_is_refused() -> None:
    """A typo in the switch would plant nothing and pass the control silently."""
    env = dict(os.environ, STREAMKEEP_PLANTED_BUGS="ack-before-fsnyc")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", "import streamkeep.tools.crashbench.planted"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "UnknownPlantedBug" in done.stderr
