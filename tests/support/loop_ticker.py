"""A ticker task for asyncio tests that must show the event loop was never stalled, with no
wall clock: it counts loop iterations (`await asyncio.sleep(0)` in a loop) and, at each tick,
how much work other tasks did since the previous one (`progress`, bumped by the test).

`ticks` says whether the loop ran while something was awaited (an await that parked its
caller in a thread would see none); `max_per_tick` is the most work done between two ticks:
a call that held the loop while doing many operations shows as one big step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["CountingExecutor", "Ticker"]


class Ticker:
    """`async with Ticker() as ticker:` runs the ticker task until the block ends."""

    def __init__(self) -> None:
        self.ticks = 0
        self.progress = 0
        self.max_per_tick = 0
        self._last = 0
        self._task: asyncio.Task[None] | None = None

    def bump(self, n: int = 1) -> None:
        """Note `n` operations done by some task."""
        self.progress += n

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.ticks += 1
            step = self.progress - self._last
            self._last = self.progress
            if step > self.max_per_tick:
                self.max_per_tick = step

    async def __aenter__(self) -> Ticker:
        self._task = asyncio.create_task(self._run())
        await asyncio.sleep(0)  # (started: its first tick is in)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A loop's default executor that counts what it is given: set it to show that awaited
    calls hop to no thread (`submitted` stays 0)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)
