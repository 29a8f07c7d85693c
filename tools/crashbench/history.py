"""One step of a crash bench run: the workload's next command on a target, its outcome
recorded. Owns `step`, which the power-loss recording, the SIGKILL driver and the tests share.
Must not touch: what the command is (workload) or what is checked later (invariants).
"""

from __future__ import annotations

from typing import Any

from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost, Target
from streamkeep.tools.crashbench.workloads import AnyWorkload


def step(target: Target, workload: AnyWorkload, checker: Checker, at: float
         ) -> Any:
    """Run the workload's next command. A reply or an error reply is acknowledged (the
    checker gets it at time `at`); ConnectionLost propagates with the command as its
    `in_flight` (its outcome is unknown), the workload moved past it."""
    argv = workload.next_argv()
    op = workload.index
    reply: Any
    try:
        reply = target.execute(argv)
    except CommandFailed as err:
        reply = err
    except ConnectionLost as lost:
        workload.observe(argv, None)
        lost.in_flight = list(argv)
        raise
    checker.acked(op, argv, reply, at)
    workload.observe(argv, None if isinstance(reply, CommandFailed) else reply)
    return reply
