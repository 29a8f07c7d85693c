"""A fake nanosecond clock for the engine's command timing: `command_clock(monkeypatch)`
replaces the clock engine.runtime.core times commands with (`_now_ns`, which an engine takes
as its `timer` when it is made: patch before making one) by one that advances
`step` nanoseconds at each reading, so every command "takes" exactly `step` (a command's time is
two readings apart) whatever the machine's load. Tests of the slow log, the latency monitor and
the histograms set `step` to the duration they want."""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime import core


class CommandClock:
    def __init__(self, step: int) -> None:
        self.now = 1_000_000_000
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


def command_clock(monkeypatch: pytest.MonkeyPatch, step: int = 1_000) -> CommandClock:
    clock = CommandClock(step)
    monkeypatch.setattr(core, "_now_ns", clock)
    return clock
