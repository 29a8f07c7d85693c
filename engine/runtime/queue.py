"""A durable work queue on a stream and a consumer group: at-least-once delivery (issue 17).

Owns the pattern: a producer appends with XADD (IDMP: a retried put adds nothing), a worker
takes messages with one XREADGROUP ... CLAIM (entries another worker has held longer than the
visibility timeout first, then new ones), acknowledges (XACK) or releases them (XNACK), keeps a
long task's claim (XCLAIM JUSTID), and a message about to be delivered more than
`max_deliveries` times is moved to the dead-letter stream and acknowledged in one transaction.

`client` is an Engine (a session of the queue's own per thread) or a redis-py client of a
`streamkeep serve` or a Redis 8.8+ (an older one is refused, naming what it lacks). Groundwork
(branch work-queue). Must not touch: command semantics (everything goes through commands), the
engine's internals beyond `Session` and `execute_raw`; never imports redis at module level.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError

PRODUCER = b"streamkeep-queue"  # the IDMP producer id of every put with an idempotency key
_DEAD_FIELDS = {b"source-id", b"deliveries", b"error"}  # what dead-lettering adds


class QueueError(StreamkeepError):
    """A queue that cannot work as asked (a name holding another type, a missing group...)."""


def _b(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int | float):
        return repr(value).encode()
    raise QueueError(f"cannot send {type(value).__name__} as a field or value")


class _EngineBackend:
    """An Engine, through a session of its own per thread (a MULTI of one thread must not
    queue another thread's commands)."""

    def __init__(self, engine: Any) -> None:
        from streamkeep.engine.runtime.core import Session
        from streamkeep.engine.wire.reply import to_plain

        self._engine = engine
        self._session_type = Session
        self._plain = to_plain
        self._local = threading.local()

    def _session(self) -> Any:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = self._session_type()
        return session

    def call(self, *argv: Any) -> Any:
        return self._plain(self._engine.execute_raw(self._session(),
                                                    tuple(_b(a) for a in argv)))

    def atomic(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        session = self._session()
        run = self._engine.execute_raw
        run(session, (b"MULTI",))
        for argv in commands:
            run(session, tuple(_b(a) for a in argv))
        return list(self._plain(run(session, (b"EXEC",))))


class _RedisBackend:
    """A redis-py client (a `streamkeep serve` or a Redis 8.8+): replies as the server sent
    them (a connection of the client's pool per call, none of redis-py's reply callbacks), so
    both backends hand the queue the same shapes. Error replies become ReplyError."""

    def __init__(self, client: Any) -> None:
        self._pool = client.connection_pool
        from redis.exceptions import ResponseError

        self._response_error = ResponseError

    def _run(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        conn = self._pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands(
                [tuple(_b(a) for a in argv) for argv in commands]))
            replies = []
            for _ in commands:
                try:
                    replies.append(_resp2(conn.read_response()))
                except self._response_error as err:
                    replies.append(ReplyError(_error_line(err)))
            return replies
        finally:
            self._pool.release(conn)

    def call(self, *argv: Any) -> Any:
        reply = self._run([argv])[0]
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def atomic(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        replies = self._run([[b"MULTI"], *commands, [b"EXEC"]])
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise reply
        return list(replies[-1])


def _resp2(value: Any) -> Any:
    """A RESP3 reply in RESP2's shape (a client may speak either): maps as flat key/value
    lists, sets as lists, recursively; what the Engine backend's to_plain does."""
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in (_resp2(k), _resp2(v))]
    if isinstance(value, list | set | tuple):
        return [_resp2(x) for x in value]
    return value


def _error_line(err: Exception) -> str:
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


@dataclass
class Message:
    """One delivery of a message: ack() when done, nack() to release it at once."""

    id: bytes
    fields: dict[bytes, bytes]
    deliveries: int
    queue: StreamQueue = field(repr=False)
    pairs: list[tuple[bytes, bytes]] = field(default_factory=list, repr=False)

    done: bool = field(default=False, repr=False)  # acknowledged or released

    def ack(self) -> None:
        self.queue.ack(self.id)
        self.done = True

    def nack(self, counted: bool = True) -> None:
        """Deliverable again at once; `counted=False` (a graceful shutdown): this delivery
        does not count toward max_deliveries."""
        self.queue.nack(self.id, counted)
        self.done = True

    def extend(self, seconds: float | None = None) -> None:
        """Keep the claim for `seconds` more (default: a whole visibility timeout), at most
        a visibility timeout from now (the server clamps a delivery time to the present)."""
        self.queue.extend(self.id, seconds)


def _backend(client: Any) -> _EngineBackend | _RedisBackend:
    if hasattr(client, "execute_raw"):
        return _EngineBackend(client)
    if not hasattr(client, "connection_pool"):
        raise QueueError(f"{type(client).__name__} is neither an Engine nor a redis-py client")
    backend = _RedisBackend(client)
    info = backend.call(b"INFO", b"server")
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    version = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                    if line.startswith("redis_version:")), "")
    lacking = missing_features(version)
    if lacking:
        raise QueueError(f"the server (Redis {version}) lacks what the queue needs: "
                         f"{', '.join(lacking)}; use Redis 8.8 or later, or streamkeep")
    return backend


class StreamQueue:
    """A work queue named `name` (a stream) consumed by `group`."""

    def __init__(self, client: Any, name: str | bytes, group: str | bytes = "workers",
                 consumer: str | bytes | None = None, visibility_timeout: float = 30.0,
                 max_deliveries: int = 5, dead_letter: str | bytes | None = None,
                 maxlen: int | None = None) -> None:
        if max_deliveries < 1:
            raise QueueError("max_deliveries must be at least 1")
        self.backend = _backend(client)
        self.name, self.group = _b(name), _b(group)
        self.consumer = _b(consumer) if consumer is not None else (
            f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}".encode())
        self.visibility_ms = int(visibility_timeout * 1000)
        self.max_deliveries = max_deliveries
        self.dead_letter = _b(dead_letter) if dead_letter is not None else self.name + b":dead"
        self.maxlen = maxlen
        self._ensure_group()

    # --- set-up ---------------------------------------------------------------------------

    def _ensure_group(self) -> None:
        try:
            self.backend.call(b"XGROUP", b"CREATE", self.name, self.group, b"0", b"MKSTREAM")
        except ReplyError as err:
            text = str(err)
            if text.startswith("BUSYGROUP"):
                return
            if text.startswith("WRONGTYPE"):
                raise QueueError(f"{self.name.decode(errors='replace')}: the key holds "
                                 "something other than a stream") from None
            raise

    # --- producing ------------------------------------------------------------------------

    def _xadd(self, fields: Mapping[Any, Any] | Sequence[tuple[Any, Any]],
              idempotency_key: Any = None) -> list[Any]:
        pairs = list(fields.items()) if isinstance(fields, Mapping) else list(fields)
        if not pairs:
            raise QueueError("a message needs at least one field")
        argv: list[Any] = [b"XADD", self.name]
        if idempotency_key is not None:
            argv += [b"IDMP", PRODUCER, _b(idempotency_key)]
        if self.maxlen is not None:  # never trims what a worker has not acknowledged
            argv += [b"ACKED", b"MAXLEN", b"~", self.maxlen]
        argv.append(b"*")
        for f, v in pairs:
            argv += [f, v]
        return argv

    def put(self, fields: Mapping[Any, Any] | Sequence[tuple[Any, Any]],
            idempotency_key: Any = None) -> bytes:
        """Append a message; with `idempotency_key`, a retried put returns the first ID."""
        return bytes(self._call(*self._xadd(fields, idempotency_key)))

    def put_many(self, messages: Sequence[Mapping[Any, Any]]) -> list[bytes]:
        """Append several messages as one transaction (one AOF record)."""
        return [bytes(r) for r in self.backend.atomic([self._xadd(m) for m in messages])]

    # --- consuming ------------------------------------------------------------------------

    def get(self, count: int = 1, block: float | None = None) -> list[Message]:
        """Up to `count` messages: idle ones other workers held longer than the visibility
        timeout first, then new ones. A message past max_deliveries is dead-lettered instead
        of returned."""
        argv: list[Any] = [b"XREADGROUP", b"GROUP", self.group, self.consumer, b"COUNT", count]
        if block is not None:
            argv += [b"BLOCK", int(block * 1000)]
        argv += [b"CLAIM", self.visibility_ms, b"STREAMS", self.name, b">"]
        reply = self._call(*argv)
        out: list[Message] = []
        if not reply:
            return out
        # RESP2: [[stream, entries]]; RESP3's map {stream: entries} arrives as [stream, entries]
        entries = reply[0][1] if isinstance(reply[0], list) else reply[1]
        for sid, flat, _idle, before in entries:
            deliveries = int(before) + 1
            pairs = list(zip(flat[::2], flat[1::2], strict=True))
            if deliveries > self.max_deliveries:
                self._dead(bytes(sid), pairs, int(before), "max deliveries exceeded")
                continue
            out.append(Message(bytes(sid), dict(pairs), deliveries, self, pairs))
        return out

    def _dead(self, sid: bytes, pairs: list[tuple[bytes, bytes]], deliveries: int,
              error: str) -> None:
        entry: list[Any] = [b"XADD", self.dead_letter, b"*", b"source-id", sid,
                            b"deliveries", deliveries, b"error", error]
        for f, v in pairs:
            entry += [f, v]
        self.backend.atomic([entry, [b"XACK", self.name, self.group, sid]])

    def ack(self, *ids: bytes) -> int:
        return int(self._call(b"XACK", self.name, self.group, *ids))

    def nack(self, sid: bytes, counted: bool = True) -> int:
        mode = b"FAIL" if counted else b"SILENT"
        return int(self._call(b"XNACK", self.name, self.group, mode, b"IDS", 1, sid))

    def extend(self, sid: bytes, seconds: float | None = None) -> None:
        """The entry becomes reclaimable `seconds` from now: its idle time is set to the
        visibility timeout minus that (XCLAIM ... IDLE, JUSTID: the count does not move)."""
        keep = self.visibility_ms if seconds is None else int(seconds * 1000)
        if not 0 <= keep <= self.visibility_ms:
            raise QueueError(f"extend by 0 to {self.visibility_ms / 1000:g} s (the visibility "
                             f"timeout), not {seconds!r}")
        self._call(b"XCLAIM", self.name, self.group, self.consumer, 0, sid,
                   b"IDLE", self.visibility_ms - keep, b"JUSTID")

    @contextmanager
    def process(self, block: float | None = None) -> Iterator[Message | None]:
        """`with q.process() as msg:` acks on success, nacks on an exception (re-raised)."""
        got = self.get(1, block)
        msg = got[0] if got else None
        try:
            yield msg
        except BaseException:
            if msg is not None and not msg.done:
                msg.nack()
            raise
        if msg is not None and not msg.done:
            msg.ack()

    def consume(self, count: int = 1, block: float = 1.0) -> Iterator[Message]:
        """Messages one after another, forever: each one acknowledged when the loop asks for
        the next (its body finished), unless the body acked or nacked it itself. A loop left
        by an exception or a `break` releases the message in hand, counted (a generator
        cannot tell the two apart: ack it before a break that means success)."""
        while True:
            batch = self.get(count, block)
            for i, msg in enumerate(batch):
                try:
                    yield msg
                except GeneratorExit:
                    for left in batch[i:]:
                        if not left.done:
                            left.nack(counted=left is msg)  # the unread ones did not count
                    raise
                if not msg.done:
                    msg.ack()

    def requeue_dead(self, ids: Sequence[bytes]) -> list[bytes]:
        """Put dead-lettered messages back on the queue (their original fields, as new
        messages) and remove them from the dead-letter stream, in one transaction."""
        moves: list[list[Any]] = []
        by_id = dict(self.dead())
        for dead_id in ids:
            fields = by_id.get(bytes(dead_id))
            if fields is None:
                raise QueueError(f"no dead-lettered message {bytes(dead_id).decode()}")
            original = [(f, v) for f, v in fields.items() if f not in _DEAD_FIELDS]
            moves.append(self._xadd(original))
            moves.append([b"XDEL", self.dead_letter, dead_id])
        replies = self.backend.atomic(moves) if moves else []
        return [bytes(r) for r in replies[0::2]]

    def stats(self) -> dict[str, Any]:
        """length, pending, lag, oldest pending age (ms), consumers (name -> idle ms), dead."""
        length = int(self._call(b"XLEN", self.name))
        group = next((dict(zip(g[0::2], g[1::2], strict=True))
                      for g in self._call(b"XINFO", b"GROUPS", self.name)
                      if dict(zip(g[0::2], g[1::2], strict=True))[b"name"] == self.group),
                     None)
        if group is None:
            raise QueueError(f"the group {self.group.decode(errors='replace')} of "
                             f"{self.name.decode(errors='replace')} is gone")
        oldest = self._call(b"XPENDING", self.name, self.group, b"-", b"+", 1)
        consumers = {bytes(c[1]): int(c[5]) for c in
                     self._call(b"XINFO", b"CONSUMERS", self.name, self.group)}
        return {"length": length, "pending": int(group[b"pending"]),
                "lag": None if group[b"lag"] is None else int(group[b"lag"]),
                "oldest_pending_ms": int(oldest[0][2]) if oldest else None,
                "consumers": consumers, "dead": int(self._call(b"XLEN", self.dead_letter))}

    def dead(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        reply = self._call(b"XRANGE", self.dead_letter, b"-", b"+")
        return [(bytes(sid), dict(zip(flat[::2], flat[1::2], strict=True)))
                for sid, flat in reply]

    def _call(self, *argv: Any) -> Any:
        try:
            return self.backend.call(*argv)
        except ReplyError as err:
            if str(err).startswith("NOGROUP"):
                raise QueueError(f"the group {self.group.decode(errors='replace')} of "
                                 f"{self.name.decode(errors='replace')} is gone (destroyed "
                                 "under the queue?)") from None
            raise
