"""The durable work queue inside an event loop: `AsyncStreamQueue`.

Owns the asyncio face of engine.services.queue: `await q.put(...)`, `get`, `ack`, `nack`,
`extend`, `async with q.process()`, `async for msg in q.consume()`, `dead()`,
`requeue_dead()`, `stats()`. The rules (what a read returns, when a message is dead-lettered,
how a batch is settled) are StreamQueue's, written once as awaitable flows (`aget`,
`anack_message`, `asettle`, Consumer's `anext`...): StreamQueue runs them to their end in the
calling thread, this module awaits them over an AsyncRedis backend, in this process
(`Engine.aredis()`: a command runs at once, only a blocked read or an `always` fsync awaits)
or over a socket (a shared directory's server, `streamkeep serve`).

Cancellation (a task cancelled, a `wait_for` timing out) never acknowledges a message:
- a `get` cancelled while it waited returns nothing; if a write had already served it (the
  messages were delivered to this consumer in the same instant), it hands them back at once,
  uncounted (XNACK SILENT); over a socket the reply may be lost with the connection, and those
  messages come back after the visibility timeout, as after a crash;
- a task cancelled inside `process()` releases its message uncounted; `consume()` left by a
  cancellation settles its batch as a `break` does, but releases the message in hand
  uncounted.
Must not touch: the queue's rules (engine.services.queue's), command semantics.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from streamkeep.engine.runtime.async_redis import AsyncBackend, AsyncRedis
from streamkeep.engine.runtime.async_steps import Wait
from streamkeep.engine.services.queue import (
    Argv,
    Consumer,
    DeadLetter,
    DeadLetterRef,
    Entry,
    Message,
    MessageRef,
    QueueError,
    StreamQueue,
    group_error,
    mark_done,
    message_id,
    named_messages,
    plain_entries,
)
from streamkeep.engine.wire.errors import ReplyError

__all__ = ["AsyncMessage", "AsyncStreamQueue"]


class _Backend:
    """The queue's awaitable backend (engine.services.queue.AwaitableBackend) over an
    AsyncRedis backend: replies in RESP2's plain shapes, as the synchronous backends give."""

    def __init__(self, backend: AsyncBackend) -> None:
        self.backend = backend
        # In process, the compiled steps' submit path (what start does, without its frames)
        make_steps = getattr(backend, "make_steps", None)
        self.start: Callable[[Argv], Any] = (
            make_steps(_as_is).run if make_steps is not None else backend.start)

    async def call(self, argv: Argv) -> Any:
        reply = self.start(argv)
        return await reply.awaitable if type(reply) is Wait else reply

    async def read(self, argv: Argv) -> list[Entry]:
        reply = self.start(argv)
        if type(reply) is Wait:
            try:
                reply = await reply.awaitable
            except asyncio.CancelledError:
                await self._hand_back(reply, argv)
                raise
        return plain_entries(reply)

    async def _hand_back(self, wait: Wait, argv: Argv) -> None:
        """A read cancelled after a write served it: its messages back, uncounted."""
        if wait.orphan is None:
            return
        entries = plain_entries(wait.orphan)
        if not entries:
            return
        at = argv.index(b"GROUP")
        stream = argv[argv.index(b"STREAMS") + 1]
        ids = [entry[0] for entry in entries]
        await self.call((b"XNACK", stream, argv[at + 1], b"SILENT", b"IDS",
                         b"%d" % len(ids), *ids))

    async def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        replies = await self.backend.run_many([(b"MULTI",), *commands, (b"EXEC",)])
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise reply
        results: list[Any] = replies[-1]
        if read_last:
            return [*results[:-1], plain_entries(results[-1])]
        return results

    async def guarded(self, key: bytes, check: Argv,
                      decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        """WATCH key, run `check`, and if `decide(its reply)` gives commands, run them as one
        transaction on a session of its own: their replies; [] if it decided not to; None if
        the key changed between the check and EXEC."""
        session = self.backend.new_session()
        try:
            await _reply(session.start((b"WATCH", key)))
            commands = decide(await _reply(session.start(check)))
            if commands is None:
                await _reply(session.start((b"UNWATCH",)))
                return []
            replies = await session.run_many([(b"MULTI",), *commands, (b"EXEC",)])
        finally:
            session.close()
        for reply in replies[:-1]:
            if isinstance(reply, ReplyError):
                raise reply
        result = replies[-1]
        if isinstance(result, ReplyError):
            raise result
        return None if result is None else list(result)


def _as_is(err: ReplyError) -> ReplyError:
    return err


async def _reply(reply: Any) -> Any:
    return await reply.awaitable if type(reply) is Wait else reply


class _Client:
    """What StreamQueue is made over for this queue: its flows' awaitable backend."""

    def __init__(self, backend: _Backend) -> None:
        self.backend = backend

    def awaitable_queue_backend(self) -> _Backend:
        return self.backend


class AsyncMessage:
    """One delivery of a message, in an event loop: `await msg.ack()` when done, `await
    msg.nack()` to release it at once (see Message)."""

    __slots__ = ("message", "queue")

    def __init__(self, message: Message, queue: AsyncStreamQueue) -> None:
        self.message = message
        self.queue = queue

    @property
    def id(self) -> bytes:
        return self.message.id

    @property
    def fields(self) -> dict[bytes, bytes]:
        return self.message.fields

    @property
    def flat(self) -> Sequence[bytes]:
        return self.message.flat

    @property
    def deliveries(self) -> int:
        return self.message.deliveries

    @property
    def done(self) -> bool:
        return self.message.done

    def __repr__(self) -> str:
        return repr(self.message)

    def __eq__(self, other: object) -> bool:
        return type(other) is AsyncMessage and self.message == other.message

    __hash__ = None  # type: ignore[assignment]

    async def ack(self) -> None:
        queue = self.queue  # (queue.ack, inlined: the group exists, this message came from it)
        reply = queue._begin(queue.inner.ack_argv((self.message.id,)))
        if type(reply) is Wait:
            await queue._finish(reply)
        self.message.done = True

    async def nack(self, counted: bool = True, error: str | None = None) -> None:
        """Deliverable again at once; `counted=False` (a graceful shutdown) does not count
        this delivery; a counted failure of the last delivery allowed dead-letters it now."""
        await self.queue.inner.anack_message(self.message, counted, error)

    async def extend(self, seconds: float | None = None) -> None:
        await self.queue.extend(self.id, seconds)


# What names a message to AsyncStreamQueue's ack(), nack() and extend().
AsyncMessageRef = AsyncMessage | MessageRef


class AsyncStreamQueue:
    """StreamQueue's work queue with awaitable methods (same arguments, same guarantees, same
    dead-letter rules). `client`: an Engine (in this process), an AsyncRedis (`Engine.aredis()`,
    a shared directory's `aredis()`, `aredis_from_url(...)`). The stream and its group
    are made by the first call that needs them (`create=False`: never)."""

    def __init__(self, client: Any, name: str | bytes, group: str | bytes = "workers",
                 consumer: str | bytes | None = None, visibility_timeout: float = 30.0,
                 max_deliveries: int = 5, dead_letter: str | bytes | None = None,
                 maxlen: int | None = None, max_age: float | None = None,
                 create: bool = True) -> None:
        redis = client if isinstance(client, AsyncRedis) else _aredis(client)
        self.redis = redis
        backend = _Backend(redis.backend)
        self._start = backend.start
        self.inner = StreamQueue(_Client(backend), name, group, consumer,
                                 visibility_timeout, max_deliveries, dead_letter, maxlen,
                                 max_age, create=False)
        self._to_create = create
        self.name, self.group, self.consumer = self.inner.name, self.inner.group, \
            self.inner.consumer

    async def _ready(self) -> StreamQueue:
        inner = self.inner
        if self._to_create:
            await inner.acreate_group()
            self._to_create = False
        return inner

    def _messages(self, got: list[Message]) -> list[AsyncMessage]:
        return [AsyncMessage(m, self) for m in got]

    # One command as the inner queue's `acall` runs it, without its two coroutines (put and
    # ack, the hot path): the reply at once, or a Wait for `_finish`; errors as the queue's.

    def _begin(self, argv: Argv) -> Any:
        try:
            return self._start(argv)
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None

    async def _finish(self, wait: Wait) -> Any:
        try:
            return await wait.awaitable
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None

    async def put(self, fields: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
                  idempotency_key: Any = None) -> bytes:
        inner = self.inner if not self._to_create else await self._ready()
        reply = self._begin(inner.put_argv(fields, idempotency_key))
        return reply if type(reply) is not Wait else await self._finish(reply)  # type: ignore[no-any-return]

    async def put_many(self, messages: Iterable[Mapping[Any, Any] | Iterable[tuple[Any, Any]]],
                       idempotency_keys: Sequence[Any] | None = None) -> list[bytes]:
        return await (await self._ready()).aput_many(messages, idempotency_keys)

    async def get(self, count: int = 1, block: float | None = None) -> list[AsyncMessage]:
        """As StreamQueue.get: `block` None or 0 returns at once, a number of seconds waits up
        to that long, float('inf') for ever. A cancelled get hands back what it was served."""
        inner = self.inner if not self._to_create else await self._ready()
        return self._messages(await inner.aget(count, block))

    async def ack(self, *messages: AsyncMessageRef | Sequence[AsyncMessageRef]) -> int:
        """As StreamQueue.ack: each argument a message (from get()) or its ID, or a list of
        those (`await q.ack(msg)`, `await q.ack(batch)`); how many were pending."""
        refs = [_plain(r) for r in named_messages(messages)]
        if not refs:
            return 0
        inner = self.inner if not self._to_create else await self._ready()
        reply = self._begin(inner.ack_argv([message_id(r) for r in refs]))
        count = reply if type(reply) is not Wait else await self._finish(reply)
        mark_done(refs)
        return count  # type: ignore[no-any-return]

    async def nack(self, message: AsyncMessageRef, counted: bool = True) -> int:
        """As StreamQueue.nack: a message or its ID released (never dead-lettered now)."""
        inner = await self._ready()
        ref = _plain(message)
        count = await inner.acall(inner.nack_argv(message_id(ref), counted))
        mark_done((ref,))
        return count  # type: ignore[no-any-return]

    async def extend(self, message: AsyncMessageRef, seconds: float | None = None) -> None:
        """As StreamQueue.extend: a message or its ID."""
        inner = await self._ready()
        await inner.acall(inner.extend_argv(message_id(_plain(message)), seconds))

    @asynccontextmanager
    async def process(self, block: float | None = None) -> AsyncIterator[AsyncMessage | None]:
        """`async with q.process() as msg:` acks on success, nacks (counted) on an exception,
        releases uncounted when its task is cancelled; `block` as get()'s."""
        inner = await self._ready()
        got = await inner.aget(1, block)
        msg = got[0] if got else None
        try:
            yield AsyncMessage(msg, self) if msg is not None else None
        except asyncio.CancelledError as exc:
            await inner.asettle(msg, exc, cancelled=True)
            raise
        except BaseException as exc:
            await inner.asettle(msg, exc)
            raise
        await inner.asettle(msg, None)

    async def consume(self, count: int = 1,
                      block: float | None = 1.0) -> AsyncIterator[AsyncMessage]:
        """`async for msg in q.consume():` StreamQueue.consume's loop (the same settling of
        each batch); left by a cancellation, the message in hand is released uncounted. Use
        it under `contextlib.aclosing(q.consume())`: a loop left by an exception or a
        cancellation settles its batch at once (otherwise when the generator is collected)."""
        inner = await self._ready()
        consumer = Consumer(inner, count, block, settle_when_dropped=False)
        cancelled = False
        try:
            while True:
                yield AsyncMessage(await consumer.anext(), self)
        except asyncio.CancelledError:
            cancelled = True
            raise
        except GeneratorExit:  # closed: by a `break`, or by its task's cancellation
            task = asyncio.current_task()
            cancelled = task is not None and task.cancelling() > 0
            raise
        finally:
            await consumer.aclose(in_hand_counted=not cancelled)

    async def dead(self, count: int | None = None) -> list[DeadLetter]:
        inner = await self._ready()
        return StreamQueue.letters(await inner.acall(inner.dead_argv(count)))

    async def requeue_dead(self, letters: Sequence[DeadLetterRef]) -> list[bytes]:
        """As StreamQueue.requeue_dead: DeadLetters from dead(), or their IDs."""
        return await (await self._ready()).arequeue_dead(letters)

    async def sweep(self) -> int:
        return await (await self._ready()).asweep()

    async def stats(self) -> dict[str, Any]:
        return await self.inner.astats()


def _plain(ref: Any) -> Any:
    """An AsyncMessage as the Message it holds; anything else as it is."""
    return ref.message if type(ref) is AsyncMessage else ref


def _aredis(client: Any) -> AsyncRedis:
    aredis = getattr(client, "aredis", None)
    if aredis is None:
        raise QueueError(f"{type(client).__name__} is neither an Engine nor an AsyncRedis "
                         "(Engine.aredis(), a shared directory's aredis(), "
                         "aredis_from_url)")
    return aredis()  # type: ignore[no-any-return]
