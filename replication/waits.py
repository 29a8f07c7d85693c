"""WAIT and WAITAOF: a caller waits until enough replicas (and the local AOF) have its write.

Owns the pending waits and deciding when each is satisfied: WAIT counts the replicas whose
acknowledged LSN reached the caller's last write; WAITAOF counts the local fsync (the journal's
synced LSN) and the replicas whose fsynced LSN (FACK) reached it. A wait ends when satisfied or
at its timeout (0: never) with the counts as they are then, as Redis's do. On the server a wait
holds no thread (`Later.start`); embedded, the caller's thread blocks on an event. Must not
touch: the link, the senders' sockets.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

Counter = Callable[[], Any]  # the reply as things stand now
Done = Callable[[], bool]  # is the wait satisfied?


class Wait:
    """One WAIT/WAITAOF call."""

    def __init__(self, waits: Waits, count: Counter, done: Done, timeout_ms: int,
                 polled: bool) -> None:
        self.waits = waits
        self.count = count
        self.done = done
        self.timeout_ms = timeout_ms
        self.polled = polled  # the local fsync is not announced: look every POLL seconds
        self.event = threading.Event()
        self.callback: Callable[[Any], None] | None = None
        self.result: Any = None
        self.finished = False
        self.lock = threading.Lock()

    def finish(self) -> None:
        """Reply with the counts as they are now (once)."""
        with self.lock:
            if self.finished:
                return
            self.finished = True
            self.result = self.count()
        self.waits.discard(self)
        self.event.set()
        if self.callback is not None:
            self.callback(self.result)

    # --- Later's two ways ---------------------------------------------------------------------

    def wait(self) -> Any:
        """Block this thread (the embedded API)."""
        deadline = None if not self.timeout_ms else time.monotonic() + self.timeout_ms / 1000
        self.waits.pending.add(self)  # an ACK on the server's loop sets the event
        while not self.finished and not self.done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            step = Waits.POLL if self.polled else left
            if step is not None and left is not None:
                step = min(step, left)
            self.event.wait(step)
            if self.done():
                break
        self.finish()
        return self.result

    def start(self, callback: Callable[[Any], None]) -> None:
        """Call `callback(result)` when it ends (the server; no thread held)."""
        self.callback = callback
        self.waits.add(self)
        if self.done():
            self.finish()


class Waits:
    """The waits in progress, checked when an ACK arrives and, for local fsyncs, every POLL."""

    POLL = 0.005

    def __init__(self, call_later: Callable[[float, Callable[[], None]], Any]) -> None:
        self.call_later = call_later  # the server loop's (timeouts and polling)
        self.pending: set[Wait] = set()
        self.polling = False

    def add(self, wait: Wait) -> None:
        self.pending.add(wait)
        if wait.timeout_ms:
            self.call_later(wait.timeout_ms / 1000, wait.finish)
        if wait.polled and not self.polling:
            self.polling = True
            self.call_later(self.POLL, self._poll)

    def discard(self, wait: Wait) -> None:
        self.pending.discard(wait)

    def check(self) -> None:
        """An ACK arrived: end the waits it satisfies."""
        for wait in list(self.pending):
            if wait.done():
                wait.finish()

    def _poll(self) -> None:
        self.check()
        if any(w.polled for w in self.pending):
            self.call_later(self.POLL, self._poll)
        else:
            self.polling = False

    def cancel_all(self) -> None:
        for wait in list(self.pending):
            wait.finish()
