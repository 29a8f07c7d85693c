"""One step of a run: a reply and an error reply are acknowledged to the checker and fed back
to the workload; a lost connection carries the command whose outcome is unknown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.model import EngineTarget
from streamkeep.tools.crashbench.target import ConnectionLost
from streamkeep.tools.crashbench.workload import Workload


def test_replies_and_error_replies_are_acknowledged() -> None:
    checker, workload = Checker("always"), Workload(2)
    target = EngineTarget(Engine())
    for i in range(200):
        step(target, workload, checker, float(i))
    assert workload.index == 200 and len(checker.lineage) == 200
    assert workload.added  # XADD replies were fed back
    assert not checker.judge(checker.reference.state(), 300.0).violations


class Dropping:
    """A target whose connection is gone."""

    def execute(self, argv: Sequence[bytes]) -> Any:
        raise ConnectionLost("gone")


def test_a_lost_connection_names_the_command_in_flight() -> None:
    checker, workload = Checker("always"), Workload(2)
    expected = workload.next_argv()
    with pytest.raises(ConnectionLost) as lost:
        step(Dropping(), workload, checker, 0.0)
    assert lost.value.in_flight == expected
    assert workload.index == 1 and not checker.lineage
