"""The asyncio client side of RESP2: one connection to a server, and a pool of them.

Owns `AsyncConnection` (one connection on asyncio streams: a command, a pipelined batch, a
request sent unanswered and the replies a server sends unasked, Pub/Sub's) and `AsyncPool`
(connections made on demand and reused, at most so many open), which the asyncio facades
(`AsyncRedis`, `AsyncStreamQueue`) use to talk to `streamkeep serve` over TCP or to a shared
directory's server over its Unix socket (`open_tcp`, `open_unix`, or a socket connected
elsewhere: `from_socket`).
Also owns `ConnectionLost` (the peer closed the connection, or it broke, before its reply).

Replies are the reply parser's values as they are, as engine.services.shared_client's
`Connection` returns them: bytes, int, str for a status, None, lists; an error reply is a
ReplyError object (raised by `execute`, a value in `execute_many`'s list and `read_reply`).

Must not touch: command semantics (everything is a command, sent as its argv), finding or
starting a server (engine.services.shared's: a caller hands over the socket), the RESP codecs
(engine.wire.reply_parser's: encoding and parsing are only called here); never imports
redis-py (a dev-only dependency).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Final, NoReturn

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command

Argv = tuple[bytes, ...]
# One read's most: the parser buffers only what a reply needs beyond it (the server's reply,
# trusted: no bound on a reply's size here).
READ_BYTES: Final = 1 << 16


class _TimedOut:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TIMED_OUT"


TIMED_OUT: Final = _TimedOut()
"""`read_reply(timeout)`'s "nothing came in time" (None is a valid reply)."""


class ConnectionLost(StreamkeepError, ConnectionError):
    """The connection ended (the peer closed it, or it failed) before the reply came, or it
    was broken earlier and is not used again: a command in flight has an unknown outcome.
    Also a ConnectionError, so a caller's `except OSError` around network calls sees it."""


def _peer_name(sock: socket.socket | None) -> str:
    """The peer as a message names it: host:port, or a Unix socket's path."""
    if sock is None:
        return "the server"
    try:
        peer = sock.getpeername()
    except OSError:
        return "the server"
    if isinstance(peer, tuple):
        return f"{peer[0]}:{peer[1]}"
    if isinstance(peer, bytes):  # (an abstract Unix socket's name)
        peer = peer.decode("utf-8", "backslashreplace")
    return str(peer) or "the server"


class AsyncConnection:
    """One RESP2 connection on asyncio streams; one command (or one pipelined batch) at a time.

    Not for several tasks at once: a second reader while one waits for its reply raises
    RuntimeError (replies would go to the wrong task). `send` may be called while a task waits
    in `read_reply` (a subscriber adding channels while its reader loop waits)."""

    __slots__ = ("peer", "broken", "closed", "_reader", "_writer", "_transport", "_parser",
                 "_high_water", "_reading")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 peer: str) -> None:
        self.peer = peer
        # Set once a send or read failed or was cancelled mid-command, or the peer closed: its
        # replies are out of step with its requests, so it is never used again.
        self.broken = False
        self.closed = False
        self._reader = reader
        self._writer = writer
        self._transport = writer.transport
        self._parser = ReplyParser()
        # Writes drain only above the transport's high-water mark: a command's request is
        # written without a suspension (the common case), a big batch waits for the socket.
        self._high_water = writer.transport.get_write_buffer_limits()[1]
        self._reading = False

    def __repr__(self) -> str:
        state = " closed" if self.closed else " broken" if self.broken else ""
        return f"<AsyncConnection to {self.peer}{state}>"

    # --- opening --------------------------------------------------------------------------

    @classmethod
    async def open_tcp(cls, host: str, port: int, *, password: str | None = None,
                       username: str | None = None, db: int = 0) -> AsyncConnection:
        """A connection to host:port, authenticated (AUTH [username] password) and on
        database `db` (SELECT) when asked; a refused AUTH or SELECT raises its ReplyError
        (and the connection is closed)."""
        if username is not None and password is None:
            raise ValueError("a username needs a password (AUTH username password)")
        reader, writer = await asyncio.open_connection(host, port)
        return await cls(reader, writer, f"{host}:{port}")._session(password, username, db)

    @classmethod
    async def open_unix(cls, path: str, *, password: str | None = None,
                        username: str | None = None, db: int = 0) -> AsyncConnection:
        """A connection to the Unix socket at `path` (a `unix://` URL's), authenticated and
        on database `db` as `open_tcp`'s."""
        if username is not None and password is None:
            raise ValueError("a username needs a password (AUTH username password)")
        reader, writer = await asyncio.open_unix_connection(path)
        return await cls(reader, writer, path)._session(password, username, db)

    async def _session(self, password: str | None, username: str | None,
                       db: int) -> AsyncConnection:
        """This connection once AUTH and SELECT (when asked) were accepted; closed if not."""
        conn = self
        try:
            if password is not None:
                auth = (password.encode(),) if username is None \
                    else (username.encode(), password.encode())
                await conn.execute((b"AUTH", *auth))
            if db:
                await conn.execute((b"SELECT", b"%d" % db))
        except BaseException:
            conn.close()
            raise
        return conn

    @classmethod
    async def from_socket(cls, sock: socket.socket) -> AsyncConnection:
        """A connection on an already-connected socket (blocking or not: the loop makes it
        non-blocking), e.g. a shared directory's Unix socket a sync connector made. The
        connection owns the socket from here on: closing it closes the socket."""
        peer = _peer_name(sock)
        if sock.family == socket.AF_UNIX:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        else:
            reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer, peer)

    # --- commands -------------------------------------------------------------------------

    async def execute(self, argv: Argv) -> Any:
        """Send one command and read its reply; an error reply is raised as ReplyError."""
        if self._reading or self.broken:
            self._refuse()
        data = encode_command(argv)  # (a bad argument: refused before anything is sent)
        self._reading = True
        try:
            self._writer.write(data)
            if self._transport.get_write_buffer_size() > self._high_water:
                await self._writer.drain()
            reply = await self._read()
        except BaseException:
            # Cancelled or failed mid-command: the reply (or the rest of the request) is
            # still on the wire and would be taken for the next command's.
            self._fail()
            raise
        finally:
            self._reading = False
        if type(reply) is ReplyError:
            raise reply
        return reply

    async def execute_many(self, argvs: Sequence[Argv]) -> list[Any]:
        """Send the commands in one write (a pipeline) and read their replies, in order; error
        replies are ReplyError values in place, not raised."""
        if not argvs:
            return []
        if self._reading or self.broken:
            self._refuse()
        data = b"".join(map(encode_command, argvs))
        self._reading = True
        try:
            self._writer.write(data)
            if self._transport.get_write_buffer_size() > self._high_water:
                await self._writer.drain()
            read = self._read
            return [await read() for _ in argvs]
        except BaseException:
            self._fail()
            raise
        finally:
            self._reading = False

    async def send(self, argv: Argv) -> None:
        """Send one command without reading a reply (SUBSCRIBE and the like: their replies
        come through `read_reply`)."""
        if self.broken:
            self._refuse()
        data = encode_command(argv)
        try:
            self._writer.write(data)
            if self._transport.get_write_buffer_size() > self._high_water:
                await self._writer.drain()
        except BaseException:
            self._fail()  # (cancelled in drain: part of the request may be on the wire)
            raise

    async def read_reply(self, timeout: float | None = None) -> Any:
        """The next reply or push the server sends (a subscriber's confirmations and
        messages): an error reply as a ReplyError value; TIMED_OUT when none is whole within
        `timeout` seconds (None: wait). A timeout or a cancellation loses nothing: bytes read
        stay in the parser, the next call goes on from them."""
        if self._reading or self.broken:
            self._refuse()
        reply = self._parser.next()  # (one already buffered: no wait, whatever the timeout)
        if reply is not NEED_MORE:
            return reply
        self._reading = True
        try:
            if timeout is None:
                return await self._read()
            async with asyncio.timeout(timeout):
                return await self._read()
        except TimeoutError:
            return TIMED_OUT
        except asyncio.CancelledError:
            raise  # (the parser keeps what it has: the connection stays in step)
        except BaseException:
            self._fail()
            raise
        finally:
            self._reading = False

    async def _read(self) -> Any:
        """The next whole reply: buffered, or read until it is. ConnectionLost at the end of
        the connection; the parser's ProtocolError for a malformed reply."""
        parser = self._parser
        reply = parser.next()
        while reply is NEED_MORE:
            try:
                data = await self._reader.read(READ_BYTES)
            except OSError as err:
                raise ConnectionLost(f"the connection to {self.peer} failed before its "
                                     f"reply: {err.strerror or err}") from None
            if not data:
                raise ConnectionLost(f"{self.peer} closed the connection before its reply "
                                     "(a command in flight has an unknown outcome)")
            parser.feed(data)
            reply = parser.next()
        return reply

    def _refuse(self) -> NoReturn:
        if self.broken:
            raise ConnectionLost(f"the connection to {self.peer} is broken or closed: it is "
                                 "not used again")
        raise RuntimeError(f"{self!r} is waiting for a reply in another task: one command at "
                           "a time")

    def _fail(self) -> None:
        """Mark the connection broken and drop it at once (whatever its buffer holds)."""
        self.broken = True
        if not self.closed:
            self.closed = True
            self._transport.abort()

    def alive(self) -> bool:
        """Not broken, and the peer has not closed it as far as the loop has seen (a pool
        checks an idle connection before reusing it)."""
        return not self.broken and not self._reader.at_eof()

    # --- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (a broken one too: idempotent). Never used again after."""
        self.broken = True
        if not self.closed:
            self.closed = True
            self._writer.close()

    async def aclose(self) -> None:
        """Close, and wait until the transport is closed."""
        self.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


Connect = Callable[[], Awaitable[AsyncConnection]]


class AsyncPool:
    """Connections made by `connect` on demand, reused; at most `max_connections` open (None:
    no bound); idle ones kept up to `max_idle`.

    A connection in use by one task is never handed to another; one released broken (failed,
    cancelled mid-command, closed by its peer) is closed, and its place goes to the next
    caller, who makes a new one. When the bound is reached, `acquire` waits, first come first
    served, for a connection to be released."""

    def __init__(self, connect: Connect, max_connections: int | None = None,
                 max_idle: int = 16) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError("max_connections must be at least 1 (or None: no bound)")
        self._connect = connect
        self.max_connections = max_connections
        self.max_idle = max_idle
        self._idle: list[AsyncConnection] = []  # the last released is the first reused
        self._open = 0  # connections of the pool: idle, in use, and being made
        # Tasks waiting for a place: each future gets a released connection, or None (a
        # place is free: make one), or an exception (the pool was closed).
        self._waiters: deque[asyncio.Future[AsyncConnection | None]] = deque()
        self.closed = False

    def __repr__(self) -> str:
        return (f"<AsyncPool {self._open} open, {len(self._idle)} idle, "
                f"{len(self._waiters)} waiting>")

    async def execute(self, argv: Argv) -> Any:
        """One command on an idle or new connection (AsyncConnection.execute), returned to
        the pool after unless it broke."""
        idle = self._idle
        conn = idle.pop() if idle else None
        if conn is None or not conn.alive():
            conn = await self._acquire(conn)
        try:
            return await conn.execute(argv)
        finally:
            self.release(conn)

    async def execute_many(self, argvs: Sequence[Argv]) -> list[Any]:
        """A pipeline on one connection (AsyncConnection.execute_many)."""
        conn = await self.acquire()
        try:
            return await conn.execute_many(argvs)
        finally:
            self.release(conn)

    async def acquire(self) -> AsyncConnection:
        """A connection for several steps (WATCH ... EXEC, a blocking read, a pipeline): the
        caller's until it calls `release`."""
        idle = self._idle
        return await self._acquire(idle.pop() if idle else None)

    async def _acquire(self, conn: AsyncConnection | None) -> AsyncConnection:
        """An idle connection that is alive (`conn` first, popped by the caller), or a new
        one, made once the bound lets it."""
        idle = self._idle
        while conn is not None:
            if conn.alive():
                return conn
            self._discard(conn)
            conn = idle.pop() if idle else None
        if self.closed:
            raise ValueError("the connection pool is closed")
        if self.max_connections is not None and self._open >= self.max_connections:
            handed = await self._wait()
            if handed is not None:
                if handed.alive():
                    return handed
                handed.close()  # (died since its release: its place is this task's now)
        else:
            self._open += 1
        # (a place is this task's from here: given back if the connect fails)
        try:
            return await self._connect()
        except BaseException:
            self._free_place()
            raise

    async def _wait(self) -> AsyncConnection | None:
        """Wait for a released connection (returned) or a free place (None, counted)."""
        fut: asyncio.Future[AsyncConnection | None] = \
            asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                handed = fut.result()  # given just before the cancellation: pass it on
                if handed is None:
                    self._free_place()
                else:
                    self.release(handed)
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    def _next_waiter(self) -> asyncio.Future[AsyncConnection | None] | None:
        waiters = self._waiters
        while waiters:
            fut = waiters.popleft()
            if not fut.done():  # (not cancelled)
                return fut
        return None

    def release(self, conn: AsyncConnection) -> None:
        """Give back a connection `acquire` gave: kept (or handed to a waiting task) when
        alive, else closed and its place freed."""
        if not conn.alive() or self.closed:
            self._discard(conn)
            return
        fut = self._next_waiter() if self._waiters else None
        if fut is not None:
            fut.set_result(conn)
        elif len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            self._discard(conn)

    def _discard(self, conn: AsyncConnection) -> None:
        conn.close()
        self._free_place()

    def _free_place(self) -> None:
        """A connection of the pool is gone: its place goes to a waiting task, if any."""
        fut = self._next_waiter() if self._waiters else None
        if fut is not None:
            fut.set_result(None)  # (it makes the new connection: the count stays)
        else:
            self._open -= 1

    async def dedicated(self) -> AsyncConnection:
        """A new connection outside the pool and its bound (a subscriber's): the caller
        closes it."""
        if self.closed:
            raise ValueError("the connection pool is closed")
        return await self._connect()

    async def aclose(self) -> None:
        """Close the idle connections; ones in use are closed when released. Tasks waiting
        for one get ValueError, as does every later acquire."""
        self.closed = True
        while (fut := self._next_waiter()) is not None:
            fut.set_exception(ValueError("the connection pool is closed"))
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        for conn in idle:
            await conn.aclose()

    async def __aenter__(self) -> AsyncPool:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


__all__ = ["TIMED_OUT", "AsyncConnection", "AsyncPool", "ConnectionLost"]
