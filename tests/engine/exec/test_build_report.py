"""The compiled-core report (engine.exec.build_report): which implementation every kernel facade runs,
`native()` and the one-line `summary()` behind INFO's streamkeep_native and `streamkeep
--version`: in this process (compiled unless STREAMKEEP_NO_EXTENSIONS is set), in a child
process with STREAMKEEP_NO_EXTENSIONS=1, and for mixed reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.engine.exec import build_report
from streamkeep.engine.wire import kernel_switches
from tests.support.kernels import PURE_ONLY

ROOT = Path(__file__).resolve().parents[3]
FACADE_NAMES = sorted(build_report.kernels())
REPORT = ("import json; from streamkeep.engine.exec import build_report; "
          "print(json.dumps([build_report.kernels(), build_report.native(), build_report.summary()]))")


def report_in_child(**env: str) -> tuple[dict[str, str], bool, str]:
    """native's report in a fresh interpreter with these environment variables."""
    environ = {k: v for k, v in os.environ.items()
               if k not in (kernel_switches.NO_EXTENSIONS_VAR, kernel_switches.REQUIRE_EXTENSIONS_VAR)}
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                          env={**environ, **env}, cwd=ROOT.parent, timeout=60)
    assert done.returncode == 0, done.stderr
    kernels, is_native, summary = json.loads(done.stdout)
    return kernels, is_native, summary


def test_the_report_covers_every_facade() -> None:
    report = build_report.kernels()
    assert sorted(report) == FACADE_NAMES  # imported or not yet used, all are named
    assert set(report.values()) <= {"compiled", "pure"}


def test_in_this_process() -> None:
    report = build_report.kernels()
    if PURE_ONLY:
        assert set(report.values()) == {"pure"}
        assert not build_report.native()
        assert build_report.kernels_summary() == "pure Python (STREAMKEEP_NO_EXTENSIONS is set)"
    elif set(report.values()) == {"compiled"}:
        assert build_report.native()
        assert build_report.kernels_summary() == f"compiled core ({len(FACADE_NAMES)} kernels)"
    else:  # some kernel was not built
        assert not build_report.native()
        assert build_report.kernels_summary().endswith("(not built)")
    assert build_report.summary() == (f"{build_report.kernels_summary()}; command path "
                                f"{build_report.command_path_summary()}")


def test_without_extensions_in_a_child_process() -> None:
    kernels, is_native, summary = report_in_child(**{kernel_switches.NO_EXTENSIONS_VAR: "1"})
    assert sorted(kernels) == FACADE_NAMES
    assert set(kernels.values()) == {"pure"}
    assert is_native is False
    assert summary.startswith("pure Python (STREAMKEEP_NO_EXTENSIONS is set); command path "
                              "pure Python (")


@pytest.mark.skipif(PURE_ONLY, reason="the kernels are not wanted in this run")
def test_with_extensions_in_a_child_process() -> None:
    kernels, is_native, summary = report_in_child()
    assert kernels == build_report.kernels()  # the child loads what this process loaded
    assert is_native == build_report.native()
    assert summary == build_report.summary()


@pytest.mark.parametrize(("report", "wanted", "line"), [
    ({name: "compiled" for name in FACADE_NAMES}, True,
     f"compiled core ({len(FACADE_NAMES)} kernels)"),
    ({FACADE_NAMES[0]: "compiled"}, True, "compiled core (1 kernel)"),
    ({**{name: "compiled" for name in FACADE_NAMES}, "streamkeep.aof.codec": "pure",
      "streamkeep.snapshot.rdb": "pure"}, True,
     "compiled core, but pure Python for codec, rdb (not built)"),
    ({name: "pure" for name in FACADE_NAMES}, True, "pure Python (not built)"),
    ({name: "pure" for name in FACADE_NAMES}, False,
     "pure Python (STREAMKEEP_NO_EXTENSIONS is set)"),
])
def test_summary_lines(monkeypatch: pytest.MonkeyPatch, report: dict[str, str], wanted: bool,
                       line: str) -> None:
    monkeypatch.setattr(kernel_switches, "kernels", lambda: dict(report))
    monkeypatch.setattr(kernel_switches, "compiled_wanted", lambda: wanted)
    assert build_report.kernels_summary() == line
    assert build_report.native() == all(kind == "compiled" for kind in report.values())


def test_every_recorded_facade_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report is every facade imported (each records itself): the value types' kernels
    come with their models, not from a list of names here."""
    report = {**{name: "compiled" for name in FACADE_NAMES}, "some.other.kernel": "pure"}
    monkeypatch.setattr(kernel_switches, "kernels", lambda: report)
    assert build_report.kernels()["some.other.kernel"] == "pure"
    assert not build_report.native()
    assert {"streamkeep.engine.model.list_node", "streamkeep.engine.model.score_search"} \
        <= set(FACADE_NAMES)  # (a list's and a sorted set's own kernels)
