"""A durable work queue on a stream and a consumer group: at-least-once delivery (issue 17).

Owns the pattern: a producer appends with XADD (IDMP: a retried put adds nothing), a worker
takes messages with one XREADGROUP ... CLAIM (entries another worker has held longer than the
visibility timeout first, then new ones), acknowledges (XACK) or releases them (XNACK), keeps a
long task's claim (XCLAIM IDLE JUSTID), and a message about to be delivered more than
`max_deliveries` times is moved to the dead-letter stream and acknowledged in one transaction
(MULTI/EXEC: one AOF record, so a crash leaves it in exactly one of the two places).

`client` is an Engine (a session of the queue's own per thread; batches through
`Engine.execute_atomic`), a shared directory's engine (`Engine.open(path, shared=True)`: the
backend it gives) or a synchronous redis-py client of a `streamkeep serve` or of a Redis 8.8+
(an older one is refused, naming what it lacks; an asyncio client is a TypeError). Must not
touch: command semantics (everything goes through commands), the engine's internals beyond
`Session`, `execute_raw` and `execute_atomic`; never imports redis at module level (an
embedded user may not have it).
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, Protocol

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore, Session

# Final: the compiled build calls them without a globals lookup
_get_ident: Final = get_ident
_monotonic: Final = time.monotonic
_INFINITY: Final = float("inf")
PRODUCER = b"streamkeep-queue"  # the IDMP producer id of every put with an idempotency key
SWEEP_BATCH = 100  # pending entries a sweep for deleted messages looks at, oldest first
DEAD_LETTER_ATTEMPTS = 100  # WATCHed tries before giving up (the queue kept changing)

# A read's entries: (id, flat fields f1 v1 f2 v2..., idle ms before this read, deliveries before)
# (a list from the engine, a tuple or a list from a client: any sequence of the four)
Entry = Sequence[Any]
# What the engine's entry points take (a tuple: mypyc checks it when the engine is compiled).
Argv = tuple[bytes, ...]


class QueueError(StreamkeepError):
    """A queue that cannot work as asked (a name holding another type, a missing group...)."""


def _b(value: Any) -> bytes:
    t = type(value)  # the exact types first: a put converts every field and value
    if t is bytes:
        return value  # type: ignore[no-any-return]
    if t is str:
        return value.encode()  # type: ignore[no-any-return]
    if t is int:
        return b"%d" % value
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return str.encode(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value).encode()
    raise QueueError(f"cannot send {type(value).__name__} as a field or value")


class _EngineBackend:
    """An Engine, through a session of its own per thread (a MULTI of one thread must not
    queue another thread's commands). Replies come in RESP2's shape (`to_plain`)."""

    def __init__(self, engine: EngineCore) -> None:
        from streamkeep.engine.runtime.core import Session
        from streamkeep.engine.wire.reply import NULL_ARRAY, to_plain

        # (typed: the compiled build calls the engine's entry points directly)
        self._engine = engine
        self._atomic = engine.execute_atomic
        self._session_type = Session
        self._plain = to_plain
        self._null_array = NULL_ARRAY  # (not `_null`: a compiled class would name its field `__null`, a C keyword of gcc)
        self._local = threading.local()
        # The thread that made the queue keeps its session here: a thread-local lookup costs
        # more than the ident compare. (An ident is reused only once its thread has ended, and
        # a session holds nothing between calls: each call's MULTI or WATCH ends in it.)
        self._owner = threading.get_ident()
        self._owned: Session = self._session_type()

    def _session(self) -> Session:
        if _get_ident() == self._owner:
            return self._owned
        try:
            return self._local.session
        except AttributeError:
            session: Session = self._session_type()
            self._local.session = session
            return session

    def call(self, argv: Argv) -> Any:
        reply = self._engine.execute_raw(self._session(), argv)
        t = type(reply)  # (a put's ID, an ack's count: nothing to flatten, no call for it)
        return reply if t is bytes or t is int else self._plain(reply)

    def read(self, argv: Argv) -> list[Entry]:
        return self._entries(self._engine.execute_raw(self._session(), argv))

    def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        """The replies of one transaction (a failed command's ReplyError in its place); with
        `read_last` the last command is a read and its reply comes as its entries."""
        replies = self._atomic(self._session(), commands)
        if not isinstance(replies, list):  # EXEC's null array: cannot happen without WATCH
            raise QueueError(f"the transaction was not run: {replies!r}")
        plain = self._plain
        if read_last:
            return [*(plain(r) for r in replies[:-1]), self._entries(replies[-1])]
        return [r if type(r) is bytes else plain(r) for r in replies]  # (XADD's IDs as they are)

    def guarded(self, key: bytes, check: Argv,
                decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        """WATCH key, run `check`, and if `decide(its reply)` gives commands, run them as one
        transaction: their replies; [] if it decided not to; None if the key changed between
        the check and EXEC (the caller tries again)."""
        session, raw = self._session(), self._engine.execute_raw
        raw(session, (b"WATCH", key))
        try:
            commands = decide(self._plain(raw(session, check)))
        except BaseException:
            raw(session, (b"UNWATCH",))  # a WATCH left behind would abort the next EXEC
            raise
        if commands is None:
            raw(session, (b"UNWATCH",))
            return []
        replies = self._atomic(session, commands)
        if replies is self._null_array:
            return None
        return [self._plain(r) for r in replies]

    def _entries(self, reply: Any) -> list[Entry]:
        if reply is self._null_array or reply is None:
            return []
        if isinstance(reply, ReplyError):
            raise reply
        # XREADGROUP's RespMap of (stream, entries): one stream here; its entries are lists
        # [id, fields (the stream's tuple), idle, deliveries before]
        return reply.items[0][1]  # type: ignore[no-any-return]


class _RedisBackend:
    """A redis-py client (a `streamkeep serve` or a Redis 8.8+): replies as the server sent
    them (a connection of the client's pool per call, none of redis-py's reply callbacks),
    RESP3 maps flattened, so both backends hand the queue the same shapes. Error replies
    become ReplyError with the server's line."""

    def __init__(self, client: Any) -> None:
        from redis.exceptions import ResponseError

        # The client is kept: redis-py closes its pool when the client object is collected
        # (a queue built as StreamQueue(redis.Redis(...), ...) would lose its connections).
        self._client = client
        self._pool = client.connection_pool
        self._response_error = ResponseError

    def _run(self, commands: Sequence[Argv]) -> list[Any]:
        conn = self._pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(commands))
            replies = []
            for _ in commands:
                try:
                    replies.append(conn.read_response())
                except self._response_error as err:
                    replies.append(ReplyError(error_line(err)))
            return replies
        finally:
            self._pool.release(conn)

    def call(self, argv: Argv) -> Any:
        reply = self._run([argv])[0]
        if isinstance(reply, ReplyError):
            raise reply
        return _resp2(reply)

    def read(self, argv: Argv) -> list[Entry]:
        return self._entries(self._run([argv])[0])

    def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        replies = self._run([(b"MULTI",), *commands, (b"EXEC",)])
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise reply
        results = [_exec_item(r) for r in replies[-1]]
        if read_last:
            return [*(_resp2(r) for r in results[:-1]), self._entries(results[-1])]
        return [_resp2(r) for r in results]

    def guarded(self, key: bytes, check: Argv,
                decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        """As the Engine backend's, on one connection of the pool. A connection that failed
        midway (its WATCH still set, or replies left unread after an error) is closed, not
        handed back to the pool as it is."""
        conn = self._pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands([(b"WATCH", key), check]))
            conn.read_response()
            commands = decide(_resp2(conn.read_response()))
            if commands is None:
                conn.send_command(b"UNWATCH")
                conn.read_response()
                return []
            conn.send_packed_command(conn.pack_commands([(b"MULTI",), *commands, (b"EXEC",)]))
            for _ in range(len(commands) + 1):
                conn.read_response()  # OK, QUEUED...
            replies = conn.read_response()
        except BaseException as exc:
            conn.disconnect()
            if isinstance(exc, self._response_error):
                raise ReplyError(error_line(exc)) from None
            raise
        finally:
            self._pool.release(conn)
        if replies is None:
            return None
        return [_resp2(_exec_item(r)) for r in replies]

    @staticmethod
    def _entries(reply: Any) -> list[Entry]:
        return plain_entries(reply)


def plain_entries(reply: Any) -> list[Entry]:
    """XREADGROUP's entries of its one stream, from a reply as a client parsed it (RESP2
    [[stream, entries]] or RESP3 {stream: entries}; nil: none)."""
    if reply is None:
        return []
    if isinstance(reply, ReplyError):
        raise reply
    if isinstance(reply, dict):  # RESP3: {stream: entries}
        return next(iter(reply.values()))  # type: ignore[no-any-return]
    return reply[0][1]  # type: ignore[no-any-return]  # RESP2: [[stream, entries]]


def _exec_item(reply: Any) -> Any:
    """An EXEC array element: redis-py leaves a failed command's error as an exception."""
    if isinstance(reply, Exception) and not isinstance(reply, ReplyError):
        return ReplyError(error_line(reply))
    return reply


def _resp2(value: Any) -> Any:
    """A RESP3 reply in RESP2's shape (a client may speak either): maps as flat key/value
    lists, sets as lists, recursively; what the Engine backend's to_plain does."""
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in (_resp2(k), _resp2(v))]
    if isinstance(value, list | set | tuple):
        return [_resp2(x) for x in value]
    return value


def error_line(err: Exception) -> str:
    """The error line as the server sent it (redis-py strips a leading `ERR `)."""
    text = str(err)
    first = text.split(" ", 1)[0]
    return text if first.isupper() and first.isalpha() else f"ERR {text}"


# Redis features the queue uses, with the version that brought each.
NEEDS = (("XREADGROUP ... CLAIM", (8, 4)), ("XADD IDMP", (8, 6)), ("XNACK", (8, 8)),
         ("XADD ACKED", (8, 2)))


def missing_features(version: str) -> list[str]:
    """What a server of `version` lacks of NEEDS, as 'NAME (8.x)'."""
    try:
        have = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        return []  # not a version we can read: let the commands speak
    return [f"{name} ({v[0]}.{v[1]})" for name, v in NEEDS if have < v]


class Backend(Protocol):
    """How the queue runs its commands: an Engine's (_EngineBackend), a redis-py client's
    (_RedisBackend), a shared directory's engine's (engine.services.shared_client)."""

    def call(self, argv: Argv) -> Any: ...

    def read(self, argv: Argv) -> list[Entry]: ...

    def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]: ...

    def guarded(self, key: bytes, check: Argv,
                decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None: ...


class AwaitableBackend(Protocol):
    """Backend's operations as awaitables: the queue's flows run over one. StreamQueue's is
    its Backend's (`_Awaiting`: they never suspend); AsyncStreamQueue's suspend where a
    command must be awaited (engine.services.async_queue)."""

    async def call(self, argv: Argv) -> Any: ...

    async def read(self, argv: Argv) -> list[Entry]: ...

    async def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]: ...

    async def guarded(self, key: bytes, check: Argv,
                      decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None: ...


class _Awaiting:
    """A synchronous backend's operations as awaitables that never suspend: StreamQueue runs
    the queue's flows over it and takes each result at once (`_now`)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def call(self, argv: Argv) -> Any:
        return self.backend.call(argv)

    async def read(self, argv: Argv) -> list[Entry]:
        return self.backend.read(argv)

    async def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        return self.backend.atomic(commands, read_last)

    async def guarded(self, key: bytes, check: Argv,
                      decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        return self.backend.guarded(key, check, decide)


class _AsyncOnly:
    """The synchronous backend of a queue whose flows are awaited (AsyncStreamQueue's inner
    StreamQueue): nothing may run through it."""

    def _refuse(self) -> Any:
        raise QueueError("this queue is asynchronous: await the AsyncStreamQueue's methods")

    def call(self, argv: Argv) -> Any:
        return self._refuse()

    def read(self, argv: Argv) -> list[Entry]:
        return self._refuse()  # type: ignore[no-any-return]

    def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        return self._refuse()  # type: ignore[no-any-return]

    def guarded(self, key: bytes, check: Argv,
                decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        return self._refuse()  # type: ignore[no-any-return]


def _now(flow: Coroutine[Any, Any, Any]) -> Any:
    """A flow's result, run to its end in this call: over `_Awaiting` nothing suspends."""
    try:
        flow.send(None)
    except StopIteration as finished:
        return finished.value
    flow.close()
    raise QueueError("this queue's client is asynchronous: use AsyncStreamQueue")


def _backend(client: Any) -> Backend:
    if hasattr(client, "queue_backend"):  # Engine.open(path, shared=True)'s: its own
        return client.queue_backend()  # type: ignore[no-any-return]
    if hasattr(client, "execute_atomic"):
        return _EngineBackend(client)
    if _is_async_client(client):
        raise TypeError(
            f"{type(client).__module__}.{type(client).__qualname__} is an asyncio client: "
            "StreamQueue does not support async clients (its calls block); give it a "
            "synchronous redis.Redis (run it in a thread from async code, e.g. "
            "asyncio.to_thread) or an Engine")
    if not hasattr(client, "connection_pool"):
        raise QueueError(f"{type(client).__name__} is neither an Engine nor a redis-py client")
    backend = _RedisBackend(client)
    info = backend.call((b"INFO", b"server"))
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    version = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                    if line.startswith("redis_version:")), "")
    lacking = missing_features(version)
    if lacking:
        raise QueueError(f"the server (Redis {version}) lacks what the queue needs: "
                         f"{', '.join(lacking)}; use Redis 8.8 or later, or streamkeep")
    return backend


def _block_ms(block: float) -> bytes:
    """XREADGROUP's BLOCK argument for a wait of `block` seconds (more than 0): milliseconds,
    rounded up (a wait under a millisecond rounded down would be BLOCK 0, which waits for
    ever); float('inf') is BLOCK 0."""
    if block == _INFINITY:
        return b"0"
    if not 0 < block < _INFINITY:  # (negative, or NaN)
        raise QueueError(f"block must be None or a number of seconds >= 0 (float('inf'): "
                         f"wait for ever), not {block!r}")
    return b"%d" % max(math.ceil(block * 1000), 1)


def _is_async_client(client: Any) -> bool:
    """redis.asyncio's clients (and any client whose execute_command is a coroutine function):
    their connections' methods return coroutines, which the queue's blocking calls cannot
    run."""
    import inspect  # (only when a queue is made, not at every engine import)

    if type(client).__module__.split(".")[:2] == ["redis", "asyncio"]:
        return True
    return inspect.iscoroutinefunction(getattr(client, "execute_command", None))


def group_error(name: bytes, group: bytes, err: ReplyError) -> QueueError | None:
    """The queue's error for a server error that means the queue cannot work (its key holds
    another type, its group is gone), or None."""
    text = str(err)
    if text.startswith("WRONGTYPE"):
        return QueueError(f"{name.decode(errors='replace')}: the key holds something other "
                          "than a stream")
    if text.startswith("NOGROUP"):
        return QueueError(f"the group {group.decode(errors='replace')} of "
                          f"{name.decode(errors='replace')} is gone (destroyed under the "
                          "queue?)")
    return None


class Message:
    """One delivery of a message: ack() when done, nack() to release it at once."""

    __slots__ = ("id", "flat", "deliveries", "queue", "done", "_fields")

    def __init__(self, sid: bytes, flat: Sequence[bytes], deliveries: int,
                 queue: StreamQueue) -> None:
        self.id = sid
        self.flat = flat  # f1 v1 f2 v2 ..., as stored
        self.deliveries = deliveries  # this one included
        self.queue = queue
        self.done = False  # acknowledged, released or dead-lettered
        self._fields: dict[bytes, bytes] | None = None

    @property
    def fields(self) -> dict[bytes, bytes]:
        if self._fields is None:
            flat = self.flat
            self._fields = dict(zip(flat[::2], flat[1::2], strict=True))
        return self._fields

    def __repr__(self) -> str:
        return f"Message(id={self.id!r}, fields={self.fields!r}, deliveries={self.deliveries})"

    def __eq__(self, other: object) -> bool:
        return (type(other) is Message and self.id == other.id  # type: ignore[attr-defined]
                and self.deliveries == other.deliveries)  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def ack(self) -> None:
        self.queue.ack(self.id)
        self.done = True

    def nack(self, counted: bool = True, error: str | None = None) -> None:
        """Deliverable again at once. `counted=False` (a graceful shutdown): this delivery
        does not count toward max_deliveries. A counted failure of the last delivery allowed
        dead-letters the message now, with `error` (the handler's exception)."""
        _now(self.queue.anack_message(self, counted, error))

    def extend(self, seconds: float | None = None) -> None:
        """Keep the claim for `seconds` more (default: a whole visibility timeout), at most
        a visibility timeout from now (the server clamps a delivery time to the present)."""
        self.queue.extend(self.id, seconds)


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered message: where it came from, why, and its original fields."""

    id: bytes  # in the dead-letter stream
    source_id: bytes
    deliveries: int
    consumer: bytes  # the last consumer known to hold it (b"" after a visibility timeout)
    error: bytes
    fields: dict[bytes, bytes]
    pairs: tuple[tuple[bytes, bytes], ...]  # the original fields in order (repeats kept)


# What names a message to ack(), nack() and extend(): the message itself, or its ID; a dead
# letter to requeue_dead(): the DeadLetter, or its ID in the dead-letter stream.
MessageRef = Message | bytes | str
DeadLetterRef = DeadLetter | bytes | str

TIMED_OUT = "not acknowledged within the visibility timeout (its consumer stopped or was slow)"


def named_messages(args: Iterable[Any]) -> list[Any]:
    """ack()'s arguments, flattened: each a message or its ID, or a list or tuple of those
    (a batch from get())."""
    out: list[Any] = []
    for arg in args:
        if isinstance(arg, list | tuple):
            out.extend(arg)
        else:
            out.append(arg)
    return out


def message_id(ref: Any) -> bytes:
    """The ID a message reference names: a Message's own, or an ID given as bytes or str.
    QueueError for anything else (a DeadLetter's ID is the dead-letter stream's, not the
    queue's: requeue_dead takes it)."""
    if type(ref) is Message:
        return ref.id  # type: ignore[no-any-return]
    if isinstance(ref, bytes | bytearray | memoryview | str):
        return _b(ref)
    if isinstance(ref, DeadLetter):
        raise QueueError(f"dead letter {ref.id.decode()} is not on the queue: requeue_dead() "
                         "puts it back")
    raise QueueError(f"a message or its ID (bytes or str), not {type(ref).__name__}")


def letter_id(ref: Any) -> bytes:
    """The ID in the dead-letter stream a requeue_dead() argument names: a DeadLetter's, or
    an ID given as bytes or str."""
    if isinstance(ref, DeadLetter):
        return ref.id
    if isinstance(ref, bytes | bytearray | memoryview | str):
        return _b(ref)
    raise QueueError(f"a dead letter or its ID (bytes or str), not {type(ref).__name__}")


def mark_done(refs: Iterable[Any]) -> None:
    """The messages among `refs` settled: process() and consume() leave them alone."""
    for ref in refs:
        if type(ref) is Message:
            ref.done = True


class StreamQueue:
    """A work queue named `name` (a stream) consumed by `group`.

    `maxlen` / `max_age` (seconds): a retention policy applied by each put (XADD ACKED
    MAXLEN ~ / MINID ~), which never trims a message some worker has not acknowledged.
    `create=False` leaves the stream and group as they are (stats of an existing queue)."""

    def __init__(self, client: Any, name: str | bytes, group: str | bytes = "workers",
                 consumer: str | bytes | None = None, visibility_timeout: float = 30.0,
                 max_deliveries: int = 5, dead_letter: str | bytes | None = None,
                 maxlen: int | None = None, max_age: float | None = None,
                 create: bool = True) -> None:
        if max_deliveries < 1:
            raise QueueError("max_deliveries must be at least 1")
        if visibility_timeout < 0:
            raise QueueError("visibility_timeout must not be negative")
        if maxlen is not None and maxlen < 0 or max_age is not None and max_age < 0:
            raise QueueError("maxlen and max_age must not be negative")
        awaitable = getattr(client, "awaitable_queue_backend", None)
        if awaitable is not None:  # AsyncStreamQueue's: its flows are awaited, never run here
            self.abackend: Any = awaitable()
            self.backend: Backend = _AsyncOnly()
        else:
            self.backend = _backend(client)
            self.abackend = _Awaiting(self.backend)
        # The same backend when it is an Engine's: the compiled build calls it directly
        backend = self.backend
        self._engine_backend: _EngineBackend | None = (
            backend if isinstance(backend, _EngineBackend) else None)
        self.name, self.group = _b(name), _b(group)
        self.consumer = _b(consumer) if consumer is not None else (
            f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}".encode())
        self.visibility_ms = int(visibility_timeout * 1000)
        self.max_deliveries = max_deliveries
        self.dead_letter = _b(dead_letter) if dead_letter is not None else self.name + b":dead"
        self.maxlen, self.max_age = maxlen, max_age
        self._read_head = (b"XREADGROUP", b"GROUP", self.group, self.consumer, b"COUNT")
        self._read_tail = (b"CLAIM", b"%d" % self.visibility_ms, b"STREAMS", self.name, b">")
        # get()'s argv, built once rather than every call
        self._read_one = (*self._read_head, b"1", *self._read_tail)
        self._ack_head = (b"XACK", self.name, self.group)
        self.next_sweep = 0.0  # (monotonic) when get() next sweeps for deleted messages
        if create:  # (False: a read-only look, e.g. `streamkeep queue stats`)
            self._create_group()

    # --- set-up ---------------------------------------------------------------------------

    def _create_group(self) -> None:
        _now(self.acreate_group())

    async def acreate_group(self) -> None:
        """The stream and its group, made if missing (the queue's first step)."""
        try:
            await self.abackend.call(
                (b"XGROUP", b"CREATE", self.name, self.group, b"0", b"MKSTREAM"))
        except ReplyError as err:
            if str(err).startswith("BUSYGROUP"):
                return
            raise group_error(self.name, self.group, err) or err from None

    async def acall(self, argv: Argv) -> Any:
        """One command over the awaitable backend, its error as the queue's."""
        try:
            return await self.abackend.call(argv)
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None

    def _call(self, argv: Argv) -> Any:
        try:
            local = self._engine_backend
            return local.call(argv) if local is not None else self.backend.call(argv)
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None

    # --- producing ------------------------------------------------------------------------

    def put_argv(self, fields: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
              idempotency_key: Any = None) -> Argv:
        argv = [b"XADD", self.name]
        if idempotency_key is not None:
            argv += (b"IDMP", PRODUCER, _b(idempotency_key))
        if self.maxlen is not None:  # ACKED: never trims what a worker has not acknowledged
            argv += (b"ACKED", b"MAXLEN", b"~", b"%d" % self.maxlen)
        elif self.max_age is not None:
            argv += (b"ACKED", b"MINID", b"~",
                     b"%d" % max(int((time.time() - self.max_age) * 1000), 0))
        argv.append(b"*")
        start = len(argv)
        pairs = fields.items() if type(fields) is dict or isinstance(fields, Mapping) else fields
        for f, v in pairs:
            argv += (_b(f), _b(v))
        if len(argv) == start:
            raise QueueError("a message needs at least one field")
        return tuple(argv)

    def put(self, fields: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
            idempotency_key: Any = None) -> bytes:
        """Append a message; with `idempotency_key`, a retried put (after a lost reply or a
        producer crash) returns the first ID and adds nothing."""
        return self._call(self.put_argv(fields, idempotency_key))  # type: ignore[no-any-return]

    def put_many(self, messages: Iterable[Mapping[Any, Any] | Iterable[tuple[Any, Any]]],
                 idempotency_keys: Sequence[Any] | None = None) -> list[bytes]:
        """Append several messages as one transaction (one AOF record; one pipeline to a
        server). With `idempotency_keys` (one per message), a retried batch adds nothing
        again."""
        return _now(self.aput_many(messages, idempotency_keys))  # type: ignore[no-any-return]

    async def aput_many(self, messages: Iterable[Mapping[Any, Any] | Iterable[tuple[Any, Any]]],
                        idempotency_keys: Sequence[Any] | None = None) -> list[bytes]:
        batch = list(messages)
        keys = idempotency_keys if idempotency_keys is not None else [None] * len(batch)
        if len(keys) != len(batch):
            raise QueueError(f"{len(keys)} idempotency keys for {len(batch)} messages")
        if not batch:
            return []
        xadd = self.put_argv
        replies = await self._aatomic([xadd(m, k) for m, k in zip(batch, keys, strict=True)])
        for reply in replies:
            if type(reply) is not bytes and isinstance(reply, ReplyError):
                raise reply
        return replies

    async def _aatomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        try:
            return await self.abackend.atomic(commands, read_last)  # type: ignore[no-any-return]
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None

    # --- consuming ------------------------------------------------------------------------

    def _read_argv(self, count: int, block: float | None) -> tuple[bytes, ...]:
        if block is None or block == 0:  # (0 seconds: Redis's BLOCK 0 would wait for ever)
            if count == 1:
                return self._read_one
            return (*self._read_head, b"%d" % count, *self._read_tail)
        return (*self._read_head, b"%d" % count, b"BLOCK", _block_ms(block), *self._read_tail)

    def get(self, count: int = 1, block: float | None = None) -> list[Message]:
        """Up to `count` messages: idle ones other workers held longer than the visibility
        timeout first, then new ones. `block`: how many seconds to wait for one when there
        is none; None or 0 returns at once (an empty list), float('inf') waits for ever. A
        message past max_deliveries is dead-lettered instead of returned."""
        # aget's four steps, run here without a flow object (the hot path of every worker)
        if count < 1:
            raise QueueError("count must be at least 1")
        if _monotonic() >= self.next_sweep:
            _now(self.asweep_if_due())
        try:
            argv = self._read_argv(count, block)
            local = self._engine_backend
            entries = local.read(argv) if local is not None else self.backend.read(argv)
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None
        out, past = self.sorted_entries(entries)
        if past:
            _now(self.adead_all(past))
        return out

    async def aget(self, count: int = 1, block: float | None = None) -> list[Message]:
        if count < 1:
            raise QueueError("count must be at least 1")
        if _monotonic() >= self.next_sweep:
            await self.asweep_if_due()
        try:
            entries = await self.abackend.read(self._read_argv(count, block))
        except ReplyError as err:
            raise group_error(self.name, self.group, err) or err from None
        out, past = self.sorted_entries(entries)
        if past:
            await self.adead_all(past)
        return out

    def sorted_entries(self, entries: Sequence[Entry]) -> tuple[list[Message], list[Entry]]:
        """A read's entries as messages, and apart those past max_deliveries (each would be
        delivery max_deliveries + 1: ours, counted, to dead-letter instead)."""
        out = []
        past: list[Entry] = []
        most = self.max_deliveries
        for entry in entries:
            sid, flat, _idle, before = entry
            if before >= most:
                past.append(entry)
            else:
                out.append(Message(sid, flat, before + 1, self))
        return out, past

    async def adead_all(self, past: Sequence[Entry]) -> None:
        for sid, flat, _idle, before in past:
            await self.adead(sid, flat, before, TIMED_OUT, b"", before + 1)

    async def amessages(self, entries: Sequence[Entry]) -> list[Message]:
        """A read's entries as messages; one past max_deliveries dead-lettered instead."""
        out, past = self.sorted_entries(entries)
        if past:
            await self.adead_all(past)
        return out

    async def aack_then_read(self, ids: Sequence[bytes], count: int) -> list[Message]:
        """Acknowledge `ids` and read the next messages in one transaction (one record)."""
        if _monotonic() >= self.next_sweep:
            await self.asweep_if_due()
        replies = await self._aatomic([self.ack_argv(ids), self._read_argv(count, None)],
                                      read_last=True)
        if isinstance(replies[0], ReplyError):
            raise group_error(self.name, self.group, replies[0]) or replies[0]
        return await self.amessages(replies[1])

    async def anack_message(self, msg: Message, counted: bool = True,
                            error: str | None = None) -> None:
        """Release a delivery (Message.nack's rule): a counted failure of the last delivery
        allowed dead-letters the message now, with `error`; otherwise it is deliverable again
        at once (`counted=False`: this delivery does not count toward max_deliveries)."""
        if counted and msg.deliveries >= self.max_deliveries:
            await self.adead(msg.id, msg.flat, msg.deliveries,
                             error or "failed on its last delivery allowed", self.consumer,
                             msg.deliveries)
        else:
            await self.acall(self.nack_argv(msg.id, counted))
        msg.done = True

    async def adead(self, sid: bytes, flat: Sequence[bytes], deliveries: int, error: str,
                    consumer: bytes, count: int) -> None:
        """Move a message to the dead-letter stream and acknowledge it, atomically, if this
        consumer still holds that delivery (pending for us, delivery count `count`): a worker
        whose last delivery failed after its visibility timeout may find that another worker
        has already claimed it and dead-lettered it. WATCH makes the check and the move one
        step."""
        entry = (b"XADD", self.dead_letter, b"*", b"source-id", sid, b"deliveries",
                 b"%d" % deliveries, b"consumer", consumer, b"error", _b(error), *flat)
        move = [entry, self.ack_argv((sid,))]

        def decide(pending: Any) -> Sequence[Argv] | None:
            held = bool(pending) and pending[0][1] == self.consumer and pending[0][3] == count
            return move if held else None

        check = (b"XPENDING", self.name, self.group, sid, sid, b"1")
        for _ in range(DEAD_LETTER_ATTEMPTS):
            try:
                replies = await self.abackend.guarded(self.name, check, decide)
            except ReplyError as err:
                raise group_error(self.name, self.group, err) or err from None
            if replies is not None:
                for reply in replies:
                    if isinstance(reply, ReplyError):
                        raise reply
                return
        raise QueueError(f"could not dead-letter {sid.decode()}: the queue kept changing; "
                         "it stays pending and is tried again after its visibility timeout")

    def ack(self, *messages: MessageRef | Sequence[MessageRef]) -> int:
        """Acknowledge messages, each given as the message (from get()) or its ID, or as a
        list of those: `q.ack(msg)`, `q.ack(*batch)`, `q.ack(batch)`, `q.ack(b"1-0")`; how
        many were pending (none given: 0). A message given is settled: process() and
        consume() leave it alone."""
        refs = named_messages(messages)
        if not refs:
            return 0
        count = self._call(self.ack_argv([message_id(r) for r in refs]))
        mark_done(refs)
        return count  # type: ignore[no-any-return]

    def nack(self, message: MessageRef, counted: bool = True) -> int:
        """Release a message (or the message with this ID): deliverable again at once (XNACK
        FAIL, or SILENT: uncounted). Unlike `msg.nack()`, never dead-letters it now: a
        message past its last delivery allowed is dead-lettered by the next get()."""
        count = self._call(self.nack_argv(message_id(message), counted))
        mark_done((message,))
        return count  # type: ignore[no-any-return]

    def extend(self, message: MessageRef, seconds: float | None = None) -> None:
        """The message (or the entry with this ID) becomes reclaimable `seconds` from now:
        its idle time is set to the visibility timeout minus that (XCLAIM ... IDLE, JUSTID:
        the count does not move)."""
        self._call(self.extend_argv(message_id(message), seconds))

    def extend_argv(self, sid: bytes, seconds: float | None) -> Argv:
        keep = self.visibility_ms if seconds is None else int(seconds * 1000)
        if not 0 <= keep <= self.visibility_ms:
            raise QueueError(f"extend by 0 to {self.visibility_ms / 1000:g} s (the visibility "
                             f"timeout), not {seconds!r}")
        return (b"XCLAIM", self.name, self.group, self.consumer, b"0", sid,
                b"IDLE", b"%d" % (self.visibility_ms - keep), b"JUSTID")

    def ack_argv(self, ids: Sequence[bytes]) -> Argv:
        return (*self._ack_head, *ids)

    def nack_argv(self, sid: bytes, counted: bool) -> Argv:
        return (b"XNACK", self.name, self.group, b"FAIL" if counted else b"SILENT", b"IDS",
                b"1", sid)

    @contextmanager
    def process(self, block: float | None = None) -> Iterator[Message | None]:
        """`with q.process() as msg:` acks on success, nacks on an exception (re-raised;
        on the last delivery allowed the message is dead-lettered with the error). `block`
        is get()'s: None or 0 gives None at once when there is no message, a number of
        seconds waits up to that long for one, float('inf') for ever."""
        got = self.get(1, block)
        msg = got[0] if got else None
        try:
            yield msg
        except BaseException as exc:
            _now(self.asettle(msg, exc))
            raise
        _now(self.asettle(msg, None))

    async def asettle(self, msg: Message | None, exc: BaseException | None,
                      cancelled: bool = False) -> None:
        """The end of `process()`'s body: acknowledged if it finished; released, counted, if
        it raised (dead-lettered with the error on the last delivery allowed); released
        uncounted if its task was cancelled (`cancelled`: nothing failed). Nothing for a
        message the body already settled."""
        if msg is None or msg.done:
            return
        if cancelled:
            await self.anack_message(msg, counted=False)
        elif exc is not None:
            await self.anack_message(msg, error=_describe(exc))
        else:
            await self.acall(self.ack_argv((msg.id,)))
            msg.done = True

    def consume(self, count: int = 1, block: float | None = 1.0) -> Consumer:
        """Messages one after another, forever (a `Consumer`). Each read waits up to `block`
        seconds for a message (float('inf'): for ever), and one that found none is followed
        by another; a `block` of None or 0 (a read that returns at once) would make that a
        busy loop and is refused (QueueError). Those the body neither acked nor nacked are
        acknowledged once the batch (of up to `count`) is done, in one transaction with the
        next read (one record: a worker killed mid-batch gets the finished ones of that batch
        again, which at-least-once allows). A loop left by an exception or a `break`
        acknowledges the finished ones, releases the message in hand, counted (the loop
        cannot tell the two apart: ack it before a break that means success), and the unread
        rest, uncounted."""
        return Consumer(self, count, block)

    # --- dead letters, upkeep and figures ---------------------------------------------------

    def dead(self, count: int | None = None) -> list[DeadLetter]:
        """The dead-lettered messages, oldest first (at most `count`)."""
        return self.letters(self._call(self.dead_argv(count)))

    def dead_argv(self, count: int | None) -> Argv:
        argv: tuple[bytes, ...] = (b"XRANGE", self.dead_letter, b"-", b"+")
        if count is not None:
            argv += (b"COUNT", b"%d" % count)
        return argv

    @staticmethod
    def letters(reply: Any) -> list[DeadLetter]:
        out = []
        for did, flat in reply:  # source-id, deliveries, consumer, error; the original pairs
            head = dict(zip(flat[0:8:2], flat[1:8:2], strict=True))
            pairs = tuple(zip(flat[8::2], flat[9::2], strict=True))
            out.append(DeadLetter(bytes(did), head.get(b"source-id", b""),
                                  int(head.get(b"deliveries", 0)), head.get(b"consumer", b""),
                                  head.get(b"error", b""), dict(pairs), pairs))
        return out

    def requeue_dead(self, letters: Sequence[DeadLetterRef]) -> list[bytes]:
        """Put dead-lettered messages (DeadLetters from dead(), or their IDs) back on the
        queue (their original fields, as new messages) and remove them from the dead-letter
        stream, in one transaction; WATCHed, so two processes requeuing the same letter
        cannot both put it back (the second finds it gone: QueueError). The new IDs."""
        return _now(self.arequeue_dead(letters))  # type: ignore[no-any-return]

    async def arequeue_dead(self, letters: Sequence[DeadLetterRef]) -> list[bytes]:
        wanted = [letter_id(i) for i in named_messages((letters,))]
        if not wanted:
            return []
        missing: list[bytes] = []

        def decide(reply: Any) -> Sequence[Argv] | None:
            by_id = {letter.id: letter for letter in self.letters(reply)}
            missing[:] = [i for i in wanted if i not in by_id]
            if missing:
                return None
            moves: list[Argv] = []
            for dead_id in wanted:
                moves.append(self.put_argv(by_id[dead_id].pairs))
                moves.append((b"XDEL", self.dead_letter, dead_id))
            return moves

        for _ in range(DEAD_LETTER_ATTEMPTS):
            replies = await self.abackend.guarded(
                self.dead_letter, (b"XRANGE", self.dead_letter, b"-", b"+"), decide)
            if missing:
                raise QueueError(f"no dead-lettered message {missing[0].decode()}")
            if replies is not None:
                for reply in replies:
                    if isinstance(reply, ReplyError):
                        raise reply
                return replies[0::2]
        raise QueueError("could not requeue: the dead-letter stream kept changing")

    async def asweep_if_due(self) -> None:
        now = _monotonic()
        if now >= self.next_sweep:
            self.next_sweep = now + max(self.visibility_ms / 1000, 1.0)
            await self.asweep()

    def sweep(self) -> int:
        """Acknowledge pending entries whose message was deleted (XDEL, a trim) while a
        worker held it: a claim skips them, so they would stay pending for ever. Runs from
        get() at most once per visibility timeout; returns how many it cleaned up."""
        return _now(self.asweep())  # type: ignore[no-any-return]

    async def asweep(self) -> int:
        pending = await self.acall((b"XPENDING", self.name, self.group, b"IDLE",
                                    b"%d" % self.visibility_ms, b"-", b"+", b"%d" % SWEEP_BATCH))
        if not pending:
            return 0
        ids = [p[0] for p in pending]
        found = await self._aatomic([(b"XRANGE", self.name, sid, sid) for sid in ids])
        gone = [sid for sid, hit in zip(ids, found, strict=True) if not hit]
        return int(await self.acall(self.ack_argv(gone))) if gone else 0

    def stats(self) -> dict[str, Any]:
        """length, pending, lag, oldest pending age (ms), consumers (name -> idle ms), dead."""
        return _now(self.astats())  # type: ignore[no-any-return]

    async def astats(self) -> dict[str, Any]:
        length = int(await self.acall((b"XLEN", self.name)))
        try:
            info = await self.acall((b"XINFO", b"GROUPS", self.name))
        except ReplyError as err:
            if str(err) == "ERR no such key":
                raise QueueError(f"no queue {self.name.decode(errors='replace')} (no such "
                                 "stream)") from None
            raise
        groups = [dict(zip(g[0::2], g[1::2], strict=True)) for g in info]
        group = next((g for g in groups if g[b"name"] == self.group), None)
        if group is None:
            raise QueueError(f"the group {self.group.decode(errors='replace')} of "
                             f"{self.name.decode(errors='replace')} is gone")
        oldest = await self.acall((b"XPENDING", self.name, self.group, b"-", b"+", b"1"))
        consumers = {bytes(c[1]): int(c[5]) for c in
                     await self.acall((b"XINFO", b"CONSUMERS", self.name, self.group))}
        lag = group[b"lag"]
        return {"length": length, "pending": int(group[b"pending"]),
                "lag": None if lag is None else int(lag),
                "oldest_pending_ms": int(oldest[0][2]) if oldest else None,
                "consumers": consumers,
                "dead": int(await self.acall((b"XLEN", self.dead_letter)))}


class Consumer:
    """`StreamQueue.consume()`'s iterator: what a generator would be, written out as a class
    so that it behaves alike compiled (a compiled generator is not closed when a `for` loop
    breaks out of it and drops it; this class's `__del__` closes it). `close()` (or the
    last reference going) settles the batch: finished messages acknowledged, the one in hand
    released (counted), the unread rest released (uncounted). `block`: each read's wait, in
    seconds, more than 0 (see `StreamQueue.consume`)."""

    def __init__(self, queue: StreamQueue, count: int, block: float | None,
                 settle_when_dropped: bool = True) -> None:
        self._closed = True  # (until it is made: __del__ runs after a refusal too)
        # False for an async consumer: its loop settles it (nothing can be awaited in __del__)
        self._settle_when_dropped = settle_when_dropped
        if block is None or not block > 0:  # (not >: NaN too)
            raise QueueError(f"consume() reads again whenever a read finds nothing: block must "
                             f"be more than 0 seconds (float('inf') waits for ever), not "
                             f"{block!r}")
        self._queue = queue
        self._count = count
        self._block = block
        self._batch: list[Message] | None = None  # None until the first next()
        self._at = 0  # the index of the next message to hand out
        self._closed = False

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> Message:
        if self._closed:
            raise StopIteration
        try:
            return _now(self.anext())  # type: ignore[no-any-return]
        except BaseException:
            self._closed = True  # as a generator an exception went through: finished
            raise

    async def anext(self) -> Message:
        """The next message: the batch's next, or (all handed out) the finished ones acked
        with the next read in one transaction, then a blocking read if that found none. The
        consumer's state changes only once an await has returned, so a wait that was
        cancelled leaves it as it was."""
        queue = self._queue
        batch = self._batch
        if batch is None:
            batch = self._batch = await queue.aget(self._count, self._block)
        while self._at >= len(batch):  # all handed out: settle them, read the next batch
            unacked = [m.id for m in batch if not m.done]
            fresh = await queue.aack_then_read(unacked, self._count) if unacked else []
            for m in batch:
                m.done = True
            if not fresh:
                self._batch, self._at = fresh, 0
                fresh = await queue.aget(self._count, self._block)
            batch = self._batch = fresh
            self._at = 0
        msg = batch[self._at]
        self._at += 1
        return msg

    def close(self) -> None:
        if not self._closed:
            _now(self.aclose())

    async def aclose(self, in_hand_counted: bool = True) -> None:
        """Settle the batch (see the class docstring). `in_hand_counted=False`: the message
        in hand is released uncounted (its task was cancelled: nothing failed)."""
        if self._closed:
            return
        self._closed = True
        batch, in_hand = self._batch, self._at - 1
        if batch is None or in_hand < 0:  # nothing handed out of this batch
            return
        queue = self._queue
        finished = [m.id for m in batch[:in_hand] if not m.done]
        if finished:
            await queue.acall(queue.ack_argv(finished))
        for i in range(in_hand, len(batch)):
            left = batch[i]
            if not left.done:
                await queue.anack_message(left, counted=in_hand_counted and i == in_hand)

    def __del__(self) -> None:
        if self._settle_when_dropped:
            self.close()


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
