"""AsyncRedis over a socket: a `streamkeep serve` (or any Redis) by URL, a shared directory's
server by its Unix socket.

Owns `NetworkBackend` (engine.runtime.async_redis's AsyncBackend over a pool of
engine.services.async_connection's connections): a command is sent on an idle connection of
the pool and awaited (the facade's replaying run does the rest), a batch or a transaction goes
in one write on one connection, a pipeline's WATCH holds a connection of its own until the
pipeline is reset, and a Pub/Sub subscriber has a dedicated connection. Also `aredis_from_url` and `network_backend`
(a URL: redis://[[user]:password@]host[:port][/db], unix:///path[?db=N]) and
`shared_backend` (a shared directory: each new connection is made by the directory's own
connector, which starts its server when none runs). Must not touch: command semantics, reply
shapes (RESP2 as the parser gives them: the embedded engine's plain shapes), the shared
directory's files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from streamkeep.engine.runtime.async_redis import AsyncRedis
from streamkeep.engine.runtime.async_steps import Wait
from streamkeep.engine.runtime.core import argv_of
from streamkeep.engine.services.async_connection import TIMED_OUT, AsyncConnection, AsyncPool
from streamkeep.engine.wire.errors import StreamkeepError

__all__ = ["NetworkBackend", "aredis_from_url", "network_backend", "shared_backend"]

DEFAULT_PORT = 6379


class NetworkSession:
    """A session on one connection of the pool (taken at its first command, given back by
    `close`): a pipeline's WATCH and MULTI, the queue's WATCHed moves."""

    def __init__(self, pool: AsyncPool) -> None:
        self.pool = pool
        self.conn: AsyncConnection | None = None

    async def _conn(self) -> AsyncConnection:
        if self.conn is None:
            self.conn = await self.pool.acquire()
        return self.conn

    async def _execute(self, argv: tuple[bytes, ...]) -> Any:
        return await (await self._conn()).execute(argv)

    def start(self, args: tuple[Any, ...]) -> Any:
        return Wait(self._execute(argv_of(args)))

    async def run_many(self, argvs: Sequence[tuple[Any, ...]]) -> list[Any]:
        return await (await self._conn()).execute_many([argv_of(a) for a in argvs])

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self.pool.release(conn)


class NetworkPubSubChannel:
    """A subscriber on a dedicated connection (made at its first SUBSCRIBE)."""

    def __init__(self, pool: AsyncPool) -> None:
        self.pool = pool
        self.conn: AsyncConnection | None = None

    async def run(self, argv: tuple[Any, ...]) -> None:
        if self.conn is None:
            self.conn = await self.pool.dedicated()
        await self.conn.send(argv_of(argv))

    async def next_message(self, timeout: float | None) -> list[Any] | None:
        if self.conn is None:
            return None
        reply = await self.conn.read_reply(timeout)
        if reply is TIMED_OUT:
            return None
        if not isinstance(reply, list):
            raise StreamkeepError(f"a subscriber's connection got {reply!r}")
        return reply

    async def aclose(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await conn.aclose()


class NetworkBackend(NetworkSession):
    """AsyncRedis's backend over a pool: a command on any idle connection."""

    def start(self, args: tuple[Any, ...]) -> Any:
        return Wait(self.pool.execute(argv_of(args)))

    async def run_many(self, argvs: Sequence[tuple[Any, ...]]) -> list[Any]:
        return await self.pool.execute_many([argv_of(a) for a in argvs])

    def new_session(self) -> NetworkSession:
        return NetworkSession(self.pool)

    def pubsub_channel(self) -> NetworkPubSubChannel:
        return NetworkPubSubChannel(self.pool)

    def close(self) -> None:
        """(The pool's connections close with `aclose`.)"""

    async def aclose(self) -> None:
        await self.pool.aclose()


async def network_backend(url: str, max_connections: int | None = None) -> NetworkBackend:
    """A backend for a server named by `url` (see the module docstring); its first
    connection is made now, so a wrong address or password fails here."""
    parsed = urlparse(url)
    password = unquote(parsed.password) if parsed.password else None
    username = unquote(parsed.username) if parsed.username else None
    if parsed.scheme == "unix":
        db = int(parse_qs(parsed.query).get("db", ["0"])[0])
        path = unquote(parsed.path)

        async def connect() -> AsyncConnection:
            return await AsyncConnection.open_unix(path, password=password,
                                                   username=username, db=db)
    elif parsed.scheme == "redis":
        host = parsed.hostname or "127.0.0.1"
        port = parsed.port or DEFAULT_PORT
        db = int(parsed.path.lstrip("/") or 0)

        async def connect() -> AsyncConnection:
            return await AsyncConnection.open_tcp(host, port, password=password,
                                                  username=username, db=db)
    else:
        raise ValueError(f"{url}: a redis:// or unix:// URL (rediss:// is not supported)")
    pool = AsyncPool(connect, max_connections)
    pool.release(await pool.acquire())
    return NetworkBackend(pool)


def shared_backend(connect_sync: Callable[[], Any],
                   max_connections: int | None = None) -> NetworkBackend:
    """A backend for a shared directory: `connect_sync()` is the directory's connector (a
    connection whose `sock` is connected to its server, started if none ran), run off the
    loop; the socket becomes an AsyncConnection's."""
    async def connect() -> AsyncConnection:
        conn = await asyncio.get_running_loop().run_in_executor(None, connect_sync)
        return await AsyncConnection.from_socket(conn.sock)

    return NetworkBackend(AsyncPool(connect, max_connections))


async def aredis_from_url(url: str, decode_responses: bool = False,
                          max_connections: int | None = None) -> AsyncRedis:
    """An AsyncRedis of the server at `url` (a `streamkeep serve`, or any Redis):
    redis://[[user]:password@]host[:port][/db] or unix:///path/to/socket[?db=N]."""
    return AsyncRedis(await network_backend(url, max_connections), decode_responses)
