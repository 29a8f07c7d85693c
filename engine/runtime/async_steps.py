"""The replaying executor under AsyncRedis's methods (compiled: every awaited command runs it).

Owns `Steps` (what a facade method's synchronous run calls as its engine: it gives back the
replies the run already had, in order, runs the next command through the backend's `start`,
and suspends the run with `Suspend` when that command must be awaited), `EngineSteps` (the
in-process engine's: the command submitted here, its reply returned here unless it must wait),
`Wait` (what must be awaited) and `Raised` (a recorded error). engine.runtime.async_redis
explains the replay. Must not touch: command semantics, reply shapes, what a wait is (the
backend's `finish` decides).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Later
from streamkeep.engine.runtime.core import EngineCore, Session, argv_of
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import to_plain

__all__ = ["EngineSteps", "Raised", "Steps", "Suspend", "SUSPEND", "Wait"]


class Wait:
    """What a backend gives for a command that must be awaited: `awaitable` gives its reply
    (or raises its ReplyError). `orphan` is set when the wait was cancelled after its command
    was already served (a blocked read's entries the caller will never see)."""

    def __init__(self, awaitable: Awaitable[Any] | None) -> None:
        self.awaitable: Any = awaitable
        self.orphan: Any = None
        self.served = False


class Suspend(BaseException):
    """Raised out of a facade method's synchronous run when a command must be awaited (a
    BaseException: no handler in between may take it for a command's failure)."""


SUSPEND = Suspend()


class Raised:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def _identity(err: ReplyError) -> ReplyError:
    return err


class Steps:
    """The replaying executor over a backend's `start(args)` (a reply, or a Wait)."""

    def __init__(self, start: Callable[[tuple[Any, ...]], Any],
                 convert: Callable[[ReplyError], ReplyError] = _identity) -> None:
        self.replies: list[Any] = []
        self.at = 0
        self.wait: Wait | None = None
        self.start = start
        self.convert = convert  # an error reply as the facade raises it

    def begin(self) -> None:
        """A new run: no replies had (the list is reused: a run that suspends takes its
        replies away first, `suspended`)."""
        self.replies.clear()
        self.at = 0

    def reset(self, replies: list[Any]) -> None:
        """A run again, with the replies it had."""
        self.replies = replies
        self.at = 0

    def suspended(self) -> tuple[list[Any], Wait]:
        """The suspended run's replies and what it waits for, taken away from these steps
        (which get a fresh list for the runs made meanwhile)."""
        replies, wait = self.replies, self.wait
        assert wait is not None
        self.replies, self.wait = [], None
        return replies, wait

    def execute(self, *args: Any) -> Any:
        at = self.at
        replies = self.replies
        if at < len(replies):
            self.at = at + 1
            reply = replies[at]
            if type(reply) is Raised:
                raise reply.error
            return reply
        try:
            reply = self.run(args)
        except ReplyError as err:
            error = self.convert(err)
            replies.append(Raised(error))
            self.at = at + 1
            raise error from None
        if type(reply) is Wait:
            self.wait = reply
            raise SUSPEND
        replies.append(reply)
        self.at = at + 1
        return reply

    def run(self, args: tuple[Any, ...]) -> Any:
        return self.start(args)


class EngineSteps(Steps):
    """Steps over the in-process engine: a command is submitted here, and a reply that needs
    no wait (no blocked read, no SAVE, no fsync to wait for) returns at once; the rest goes to
    the backend's `finish(reply, lsn)` (a plain reply, or a Wait)."""

    def __init__(self, core: EngineCore, session: Session,
                 served: Callable[[Any], None], finish: Callable[[Any, int], Any],
                 convert: Callable[[ReplyError], ReplyError] = _identity) -> None:
        super().__init__(self._unused, convert)
        self.core = core
        self.session = session
        self.served = served
        self.finish = finish

    @staticmethod
    def _unused(args: tuple[Any, ...]) -> Any:
        raise AssertionError("EngineSteps runs commands itself")

    def run(self, args: tuple[Any, ...]) -> Any:
        core = self.core
        reply, lsn = core.submit(self.session, argv_of(args), None, self.served)
        t = type(reply)
        if t is Waiter or t is Later:
            return self.finish(reply, lsn)
        if lsn:
            journal = core.journal
            if journal is not None and journal.sync_on_commit:
                return self.finish(reply, lsn)
        if t is bytes or t is int:
            return reply
        return to_plain(reply)
