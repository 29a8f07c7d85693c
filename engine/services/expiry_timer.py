"""The embedded engine's cron: a daemon thread that runs the engine's expiry cycle and takes the
sample behind INFO's instantaneous rates ten times a second, as the server's event loop does.

Without it an embedding program that sets TTLs and never reads those keys again would hold them
(and their snapshot rows) forever: lazy expiry only deletes a key a command names. The cycle
itself (sampling, DEL effects, nothing on a replica) is engine.runtime.expiry_cycle; a
served engine skips it here because the server's loop runs it. A cycle runs callers' code: the
record sinks, the subscribers of keyspace events, the readers its deletions serve. What that
raises ends the cycle (logged), never the thread: the next cycle runs. Must not touch: what
expires or how it is logged (engine.commands.expiry), files.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.engine")

# Redis's default hz: ten cycles a second.
INTERVAL_SECONDS = 0.1


class ExpiryTimer:
    """Runs `engine.expiry_cycle.run()` every INTERVAL_SECONDS until `stop()`."""

    def __init__(self, engine: EngineCore, interval: float = INTERVAL_SECONDS) -> None:
        self.engine = engine
        self.interval = interval
        self.stopped = threading.Event()
        self.cycles = 0  # how many cycles ran (tests count them)
        self.thread = threading.Thread(target=self._run, name="streamkeep-expiry", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        engine = self.engine
        failed = ""
        while not self.stopped.wait(self.interval):
            if engine.closed:
                return
            if engine.server is None:  # (a served engine's cron is the server's loop)
                try:
                    self._cycle(engine)
                except Exception as exc:  # a caller's sink, subscriber or reader raised
                    if repr(exc) != failed:  # one traceback per kind, not ten a second
                        log.exception("an active expiry cycle failed; the next one runs")
                    failed = repr(exc)
                else:
                    failed = ""

    def _cycle(self, engine: EngineCore) -> None:
        if any(engine.expires):
            deleted = -1  # (a cycle that raised: what it deleted is made durable all the same)
            try:
                deleted = engine.expiry_cycle.run()
            finally:
                if deleted:
                    self._sync(engine)
                self.cycles += 1
        engine.monitoring.sample_stats()

    @staticmethod
    def _sync(engine: EngineCore) -> None:
        """Under `always` the cycle's DEL records wait in the journal's buffer for a commit
        round that no caller asks for: this thread asks, so they are written, fsynced and
        sent to replicas now rather than with the next write."""
        journal = engine.journal
        if journal is not None and journal.sync_on_commit:
            # (A failed fsync: the journal refuses writes and says so; nothing to add.)
            with contextlib.suppress(ReplyError):
                journal.wait_durable(journal.lsn)

    def stop(self) -> None:
        """Stop and wait for a running cycle to end (the engine is about to close)."""
        self.stopped.set()
        if self.thread is not threading.current_thread():
            self.thread.join()
