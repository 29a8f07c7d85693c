"""Clients blocked in XREAD/XREADGROUP: who waits on which key, in arrival order.

Owns the waiter queues and the set of keys signalled during a command, and the parsing of a
blocking command's timeout (`parse_timeout_s`). The engine re-runs waiters'
commands (under its lock, first come first served) after the command that signalled them. Must
not touch: stream state (it never reads or writes streams itself).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from fractions import Fraction
from math import ceil
from typing import TYPE_CHECKING, Any

from streamkeep.engine.model.strings import is_finite, parse_long_double
from streamkeep.engine.wire.args import LLONG_MAX
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.stats import CommandCounters
    from streamkeep.engine.exec.table import Argv


class Waiter:
    __slots__ = ("session", "argv", "keys", "event", "result", "done", "wake_at", "lsn",
                 "timeout_ms", "notify", "ready", "rerun", "entry", "counters", "nanos", "sent")

    def __init__(self, session: Session, argv: Argv, keys: list[tuple[int, bytes]]) -> None:
        self.session = session
        self.argv = argv
        self.keys = keys
        # Created only by a thread that waits on it (the embedded API); the server is notified.
        self.event: threading.Event | None = None
        self.ready: Callable[[], bool] | None = None
        self.rerun: Callable[[Any, Argv], object] | None = None  # Block.rerun
        # The engine's entry for its command (engine.runtime.core.Entry): what the re-run runs.
        self.entry: Any = None
        self.result: Any = None
        self.done = False
        self.wake_at: int | None = None
        self.lsn = 0  # the record of the re-run that served it (durability wait)
        self.timeout_ms = 0  # 0: wait forever
        # Called (engine lock held) once `result` is set by a re-run: the server's wake-up.
        self.notify: Callable[[Waiter], None] | None = None
        # Its command's statistics (engine.exec.stats): a blocked command counts one call when
        # it finishes, with the time its runs took (`nanos`, summed over the re-runs).
        self.counters: CommandCounters | None = None
        self.nanos = 0
        self.sent: Argv = argv  # the command as the client sent it (the slow log shows it)


class WaiterRegistry:
    def __init__(self) -> None:
        self.by_key: dict[tuple[int, bytes], deque[Waiter]] = {}
        self.ready: OrderedDict[tuple[int, bytes], None] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self.by_key)

    def add(self, waiter: Waiter) -> None:
        for k in waiter.keys:
            self.by_key.setdefault(k, deque()).append(waiter)

    def remove(self, waiter: Waiter) -> None:
        for k in waiter.keys:
            queue = self.by_key.get(k)
            if queue is None:
                continue
            with contextlib.suppress(ValueError):
                queue.remove(waiter)
            if not queue:
                del self.by_key[k]

    def signal(self, db: int, key: bytes) -> None:
        k = (db, key)
        if k in self.by_key:
            self.ready[k] = None

    def pop_ready(self) -> tuple[int, bytes] | None:
        if not self.ready:
            return None
        k, _ = self.ready.popitem(last=False)
        return k

    def waiting_on(self, k: tuple[int, bytes]) -> list[Waiter]:
        return list(self.by_key.get(k, ()))


def parse_timeout_s(arg: bytes, now: int) -> int:
    """getTimeoutFromObjectOrReply(UNIT_SECONDS) as a relative wait in ms (0: forever)."""
    value = parse_long_double(arg)
    if value is None:
        raise ReplyError("ERR timeout is not a float or out of range")
    if not is_finite(value):
        if value > 0:
            raise ReplyError("ERR timeout is out of range")
        raise ReplyError("ERR timeout is negative")
    ms = value * 1000
    if ms > LLONG_MAX:
        raise ReplyError("ERR timeout is out of range")
    wait = ceil(Fraction(ms))
    if wait < 0:
        raise ReplyError("ERR timeout is negative")
    if wait > 0 and wait > LLONG_MAX - now:
        raise ReplyError("ERR timeout is out of range")
    return wait
