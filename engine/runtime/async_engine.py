"""The engine in this process as an asyncio backend: commands run at once, only waits await.

Owns `EngineAsyncBackend` (what `Engine.aredis()` and the in-process AsyncStreamQueue run
over) and its sessions: a command runs through the engine's one command path (`submit`, under
the engine lock, in the calling task: no thread hop) and its reply comes back in the same
call, unless it must wait. Then the caller gets a `Wait` whose future is completed without a
thread parked for it:
- a blocked read (XREAD/XREADGROUP BLOCK, the blocking pops) becomes a future completed by
  the write that serves it (the waiter's `notify`, called under the engine lock from whatever
  thread wrote), timed out by a loop timer, re-polled by a timer at its `wake_at`; a task
  cancelled while it waits ends the wait, and if the write had served it already its result
  is kept as the Wait's `orphan` (the queue hands such messages back);
- under `appendfsync always`, a write's reply waits for the group commit that covers its
  record (`Journal.when_durable`: the group-commit thread calls back, no thread waits);
- a reply that must wait outside the lock (SAVE: a `Later`) starts without a thread when it
  can, in the loop's default executor otherwise.
What another thread hands a loop (a served read, a durable record, a Later's value, a Pub/Sub
wake-up) is dropped once that loop has closed (its tasks are gone), never raised into the
thread that delivers it: the group-commit thread, a writer, the follower, the expiry timer.
Also owns the in-process Pub/Sub channel (a Subscription whose wake-up sets a loop event).
Must not touch: command semantics, the waiter registry's or the journal's internals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Later, Session
from streamkeep.engine.exec.pubsub import Subscription
from streamkeep.engine.runtime.async_steps import EngineSteps, Wait
from streamkeep.engine.runtime.core import argv_of
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY, to_plain

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore

__all__ = ["EngineAsyncBackend", "EngineSession"]


class EngineSession:
    """One session of the engine, driven from an event loop (see the module docstring)."""

    def __init__(self, core: EngineCore, session: Session | None = None) -> None:
        self.core = core
        self.session = session or Session()
        self._served = self._on_served  # (bound once: handed to every command)
        self._futures: dict[Waiter, tuple[asyncio.Future[Any], Wait]] = {}

    # --- one command --------------------------------------------------------------------------

    def start(self, args: tuple[Any, ...]) -> Any:
        """Run a command now: its plain reply, or a Wait. An error reply raises ReplyError."""
        reply, lsn = self.core.submit(self.session, argv_of(args), None, self._served)
        return self.finish(reply, lsn)

    def finish(self, reply: Any, lsn: int) -> Any:
        """A submitted command's reply as the caller gets it: plain, or a Wait (a blocked
        read, a Later, a record to be fsynced under `always`)."""
        t = type(reply)
        if t is Waiter:
            return self._blocked(reply)
        if t is Later:
            return self._later(reply)
        if lsn:
            journal = self.core.journal
            if journal is not None and journal.sync_on_commit:
                wait = self._durable(lsn, reply)
                if wait is not None:
                    return wait
        if t is bytes or t is int:
            return reply
        return to_plain(reply)

    def make_steps(self, convert: Callable[[ReplyError], ReplyError]) -> EngineSteps:
        """The facade's executor over this session: commands submitted by the compiled steps
        themselves, waits handed back to `finish`."""
        return EngineSteps(self.core, self.session, self._served, self.finish, convert)

    def submit_quiet(self, argv: tuple[bytes, ...]) -> tuple[Any, int]:
        """Run a command now, its record not waited for: (reply, LSN); a Waiter is ended
        (a command run this way must not block)."""
        reply, lsn = self.core.submit(self.session, argv)
        if type(reply) is Waiter:
            self.core.waiting.cancel(reply, NULL_ARRAY)
            reply = NULL_ARRAY
        return reply, lsn

    async def run_many(self, argvs: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Commands in order (none of them blocks here), then one wait for the last record:
        the replies, a failed one's ReplyError in its place."""
        replies: list[Any] = []
        last = 0
        for args in argvs:
            try:
                reply, lsn = self.submit_quiet(argv_of(args))
            except ReplyError as err:
                replies.append(err)
                continue
            if type(reply) is Later:
                reply = await _awaited(self._later(reply))
            replies.append(reply if type(reply) is bytes or type(reply) is int
                           else to_plain(reply))
            last = max(last, lsn)
        await self.durable(last)
        return replies

    async def durable(self, lsn: int) -> None:
        """Return once the record `lsn` is as durable as the policy promises (under `always`:
        fsynced); MISCONF if it cannot be."""
        if not lsn:
            return
        journal = self.core.journal
        if journal is None or not journal.sync_on_commit:
            return
        wait = self._durable(lsn, None)
        if wait is not None:
            await wait.awaitable

    def close(self) -> None:
        for waiter in list(self._futures):
            self.core.waiting.cancel(waiter, None)
        self._futures.clear()

    # --- waits ---------------------------------------------------------------------------------

    def _durable(self, lsn: int, reply: Any) -> Wait | None:
        journal = self.core.journal
        assert journal is not None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def synced() -> None:  # on the group-commit thread: never raises into it
            _call_from_thread(loop, _settle_durable, future, journal, lsn, reply)

        if journal.when_durable(lsn, synced):
            journal.check_durable(lsn)  # (raises MISCONF when it can never be)
            return None
        return Wait(future)

    def _blocked(self, waiter: Waiter) -> Wait:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        wait = Wait(future)
        core = self.core
        with core.lock:  # a write on another thread may serve it before it is registered
            self._futures[waiter] = (future, wait)
            done = waiter.done
        if done:
            self._deliver(waiter)
        else:
            self._schedule(waiter, loop)
        future.add_done_callback(lambda f: self._ended(waiter, f))
        return wait

    def _schedule(self, waiter: Waiter, loop: asyncio.AbstractEventLoop) -> None:
        """Its timeout and its next timed re-run (`wake_at`) as loop timers."""
        entry = self._futures.get(waiter)
        if entry is None:
            return
        if waiter.timeout_ms:
            handle = loop.call_later(waiter.timeout_ms / 1000, self._timed_out, waiter)
            entry[0].add_done_callback(lambda _f: handle.cancel())
        if waiter.wake_at is not None:
            self._schedule_poll(waiter, loop)

    def _on_served(self, waiter: Waiter) -> None:
        """The waiter's `notify` (engine lock held, on the writer's thread)."""
        entry = self._futures.get(waiter)
        if entry is None:
            return
        loop = entry[0].get_loop()
        if _in_loop(loop):
            loop.call_soon(self._deliver, waiter)
        elif not _call_from_thread(loop, self._deliver, waiter):
            self._futures.pop(waiter, None)  # its loop has closed: nobody awaits the reply

    def _deliver(self, waiter: Waiter) -> None:
        entry = self._futures.pop(waiter, None)
        if entry is None:
            return
        future, wait = entry
        wait.served = True
        if future.done():  # cancelled after it was served: nobody will read it
            wait.orphan = _plain_result(waiter.result)
            return
        result = waiter.result
        if isinstance(result, ReplyError):
            future.set_exception(result)
            return
        journal = self.core.journal
        if waiter.lsn and journal is not None and journal.sync_on_commit:
            inner = self._durable(waiter.lsn, result)
            if inner is not None:
                inner.awaitable.add_done_callback(  # type: ignore[attr-defined]
                    lambda f: _pass_on(f, future, wait))
                return
        future.set_result(to_plain(result))

    def _timed_out(self, waiter: Waiter) -> None:
        entry = self._futures.get(waiter)
        if entry is not None and self.core.waiting.cancel(waiter, NULL_ARRAY):
            self._futures.pop(waiter, None)
            if not entry[0].done():
                entry[0].set_result(None)

    def _poll(self, waiter: Waiter) -> None:
        if self.core.waiting.poll(waiter):  # served by the re-run: its notify delivers it
            return
        entry = self._futures.get(waiter)
        if entry is not None and waiter.wake_at is not None:
            self._schedule_poll(waiter, entry[0].get_loop())

    def _schedule_poll(self, waiter: Waiter, loop: asyncio.AbstractEventLoop) -> None:
        assert waiter.wake_at is not None
        delay = max(waiter.wake_at - self.core.now(), 0) / 1000 + 0.001
        handle = loop.call_later(delay, self._poll, waiter)
        entry = self._futures.get(waiter)
        if entry is not None:
            entry[0].add_done_callback(lambda _f: handle.cancel())

    def _ended(self, waiter: Waiter, future: asyncio.Future[Any]) -> None:
        """The caller's task was cancelled: end the wait; if a write had served it already,
        keep what it got as the Wait's orphan."""
        if not future.cancelled():
            return
        entry = self._futures.pop(waiter, None)
        if not self.core.waiting.cancel(waiter, None) and entry is not None:
            entry[1].served = True
            entry[1].orphan = _plain_result(waiter.result)

    def _later(self, later: Later) -> Wait:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        start = later.start
        if start is None:
            return Wait(loop.run_in_executor(None, later.wait))

        def done(value: Any) -> None:
            _call_from_thread(loop, _set, future, value)

        start(done)
        return Wait(future)


class EngineAsyncBackend(EngineSession):
    """The in-process engine for AsyncRedis: commands in a session of its own, sessions for
    pipelines, subscribers for Pub/Sub."""

    def new_session(self) -> EngineSession:
        return EngineSession(self.core)

    def pubsub_channel(self) -> EnginePubSubChannel:
        return EnginePubSubChannel(self.core)

    async def aclose(self) -> None:
        self.close()


class EnginePubSubChannel:
    """An in-process subscriber read from an event loop: its Subscription wakes the loop."""

    def __init__(self, core: EngineCore) -> None:
        self.core = core
        self.subscription = Subscription(core, Session(), core.execute_raw)
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()
        self.subscription.wake = self._wake

    def _wake(self) -> None:
        if _in_loop(self.loop):
            self.event.set()
        else:
            _call_from_thread(self.loop, self.event.set)

    async def run(self, argv: tuple[Any, ...]) -> None:
        self.core.execute_raw(self.subscription.session, argv_of(argv))

    async def next_message(self, timeout: float | None) -> list[Any] | None:
        """The next push as its items (None if none comes within `timeout`)."""
        while True:
            self.event.clear()
            message = self.subscription.get_message(0)
            if message is not None:
                return _items(message)
            if timeout is not None and timeout <= 0:
                return None
            try:
                await asyncio.wait_for(self.event.wait(), timeout)
            except TimeoutError:
                return None

    async def aclose(self) -> None:
        self.subscription.close()


def _items(message: dict[str, Any]) -> list[Any]:
    kind = message["type"].encode()
    if kind == b"pmessage":
        return [kind, message["pattern"], message["channel"], message["data"]]
    return [kind, message["channel"], message["data"]]


def _in_loop(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread runs `loop` (call_soon then; call_soon_threadsafe otherwise)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _call_from_thread(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any
                      ) -> bool:
    """Hand `fn(*args)` to `loop` from another thread: the group-commit thread, a writer's,
    the follower's, the expiry timer's. False, and nothing done, if the loop has closed: the
    tasks that would have awaited it are gone, so the reply is dropped here rather than
    raised into a thread that serves every caller (the write itself is done, and durable as
    the policy says)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # "Event loop is closed" (its only error)
        return False
    return True


def _settle_durable(future: asyncio.Future[Any], journal: Any, lsn: int, reply: Any) -> None:
    if future.done():
        return
    try:
        journal.check_durable(lsn)
    except ReplyError as err:
        future.set_exception(err)
        return
    except BaseException as exc:  # a broken round (not an I/O error): its callers see why
        future.set_exception(exc)
        return
    t = type(reply)
    future.set_result(reply if t is bytes or t is int or reply is None else to_plain(reply))


def _pass_on(inner: asyncio.Future[Any], outer: asyncio.Future[Any], wait: Wait) -> None:
    if outer.done():
        if not inner.cancelled() and inner.exception() is None:
            wait.orphan = inner.result()
        return
    if inner.cancelled():
        outer.cancel()
    elif inner.exception() is not None:
        outer.set_exception(inner.exception())  # type: ignore[arg-type]
    else:
        outer.set_result(inner.result())


def _plain_result(result: Any) -> Any:
    return None if isinstance(result, ReplyError) else to_plain(result)


def _set(future: asyncio.Future[Any], value: Any) -> None:
    if future.done():
        return
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(to_plain(value))


async def _awaited(wait: Wait) -> Any:
    return await wait.awaitable
