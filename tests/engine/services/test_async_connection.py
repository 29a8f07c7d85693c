"""engine.services.async_connection: an asyncio RESP2 connection and pool against a real
`streamkeep serve` child (with a password) and a shared directory's server (its Unix socket).
Replies have the parser's shapes (an error reply raised by execute, a value in a pipeline); a
pool reuses its connections, stays within its bound (a caller waits for a release), serves
a command while another connection blocks in XREAD; a command cancelled mid-flight breaks and
closes its connection, so the next command on a fresh one gets its own reply; a peer closing
the connection (CLIENT KILL, a killed server) gives ConnectionLost and the pool recovers; a
subscriber sends SUBSCRIBE and reads confirmations and messages, or TIMED_OUT."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.services.async_connection import (
    TIMED_OUT,
    AsyncConnection,
    AsyncPool,
    ConnectionLost,
)
from streamkeep.engine.services.shared import SharedDirectory
from streamkeep.engine.wire.errors import ProtocolError, ReplyError

PASSWORD = "secret"


@pytest.fixture
def server(tmp_path, spawn):
    return spawn(tmp_path / "data", "--requirepass", PASSWORD)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def opener(server: Any, made: list[AsyncConnection] | None = None
           ) -> Callable[[], Awaitable[AsyncConnection]]:
    """A pool's `connect`: authenticated connections to `server`, each noted in `made`."""
    async def connect() -> AsyncConnection:
        conn = await AsyncConnection.open_tcp(server.host, server.port, password=PASSWORD)
        if made is not None:
            made.append(conn)
        return conn
    return connect


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait until `check()` holds (bounded, so a failure ends the test instead of hanging)."""
    deadline = time.monotonic() + 30
    while not await check():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


async def blocked_clients(pool: AsyncPool) -> int:
    info = (await pool.execute((b"INFO", b"clients"))).decode()
    return int(info.split("blocked_clients:")[1].split()[0])


async def close_all(made: list[AsyncConnection]) -> None:
    for conn in made:
        await conn.aclose()


def test_replies_have_the_parsers_shapes(server) -> None:
    async def main() -> None:
        async with await AsyncConnection.open_tcp(server.host, server.port,
                                                  password=PASSWORD) as conn:
            assert await conn.execute((b"PING",)) == "PONG"
            assert await conn.execute((b"SET", b"k", b"v")) == "OK"
            assert await conn.execute((b"GET", b"k")) == b"v"
            assert await conn.execute((b"GET", b"missing")) is None
            assert await conn.execute((b"INCR", b"n")) == 1
            assert await conn.execute((b"ECHO", b"\x00\xff\r\n")) == b"\x00\xff\r\n"
            assert await conn.execute((b"XADD", b"s", b"1-1", b"a", b"1")) == b"1-1"
            assert await conn.execute((b"XRANGE", b"s", b"-", b"+")) == [[b"1-1", [b"a", b"1"]]]
            assert await conn.execute((b"XREAD", b"STREAMS", b"s", b"$")) is None
            with pytest.raises(ReplyError) as err:
                await conn.execute((b"INCR", b"k"))
            assert str(err.value) == "ERR value is not an integer or out of range"
            with pytest.raises(ReplyError, match="unknown command"):
                await conn.execute((b"NOSUCHCOMMAND",))
            # A reply many reads long, and the connection still in step after it.
            big = bytes(range(256)) * 4096
            assert await conn.execute((b"SET", b"big", big)) == "OK"
            assert await conn.execute((b"GET", b"big")) == big
            assert await conn.execute((b"MULTI",)) == "OK"
            assert await conn.execute((b"INCR", b"n")) == "QUEUED"
            assert await conn.execute((b"INCR", b"k")) == "QUEUED"
            reply = await conn.execute((b"EXEC",))
            assert reply[0] == 2 and type(reply[1]) is ReplyError  # (not raised: nested)
            with pytest.raises(TypeError):  # refused before anything is sent
                await conn.execute((b"SET", object()))  # type: ignore[arg-type]
            assert not conn.broken
            assert await conn.execute((b"DBSIZE",)) == 4
        assert conn.broken and conn.closed
        with pytest.raises(ConnectionLost, match="broken or closed"):
            await conn.execute((b"PING",))

    run(main())


def test_execute_many_keeps_error_replies_in_place(server) -> None:
    async def main() -> None:
        async with await AsyncConnection.open_tcp(server.host, server.port,
                                                  password=PASSWORD) as conn:
            replies = await conn.execute_many([(b"SET", b"k", b"v"), (b"INCR", b"k"),
                                               (b"GET", b"k"), (b"NOSUCH",), (b"PING",)])
            assert replies[0] == "OK" and replies[2] == b"v" and replies[4] == "PONG"
            assert type(replies[1]) is ReplyError
            assert str(replies[1]) == "ERR value is not an integer or out of range"
            assert type(replies[3]) is ReplyError
            assert await conn.execute_many([]) == []
            # A batch larger than the transport's buffer: drained, replies in order.
            many = [(b"XADD", b"s", b"*", b"i", b"%d" % i) for i in range(5000)]
            ids = await conn.execute_many(many)
            assert len(ids) == 5000 and len(set(ids)) == 5000
            assert await conn.execute((b"XLEN", b"s")) == 5000

    run(main())


def test_auth_and_select(server) -> None:
    async def main() -> None:
        async with await AsyncConnection.open_tcp(server.host, server.port) as conn:
            with pytest.raises(ReplyError, match="NOAUTH"):
                await conn.execute((b"PING",))
            assert not conn.broken
        with pytest.raises(ReplyError, match="WRONGPASS|invalid password"):
            await AsyncConnection.open_tcp(server.host, server.port, password="wrong")
        with pytest.raises(ValueError):
            await AsyncConnection.open_tcp(server.host, server.port, username="default")
        async with await AsyncConnection.open_tcp(server.host, server.port, password=PASSWORD,
                                                  username="default", db=3) as conn:
            assert await conn.execute((b"SET", b"in3", b"x")) == "OK"
        async with await AsyncConnection.open_tcp(server.host, server.port,
                                                  password=PASSWORD) as conn:
            assert await conn.execute((b"EXISTS", b"in3")) == 0
            assert await conn.execute((b"SELECT", b"3")) == "OK"
            assert await conn.execute((b"GET", b"in3")) == b"x"

    run(main())


def test_pool_serves_a_command_beside_a_blocked_read(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=2)
        await pool.execute((b"XADD", b"s", b"1-1", b"a", b"1"))

        async def blocked_read() -> Any:
            conn = await pool.acquire()
            try:
                return await conn.execute((b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"))
            finally:
                pool.release(conn)

        reader = asyncio.create_task(blocked_read())
        await until(lambda: _ready(pool), "the XREAD blocked")
        assert not reader.done()
        assert await pool.execute((b"XADD", b"s", b"2-1", b"b", b"2")) == b"2-1"
        assert await reader == [[b"s", [[b"2-1", [b"b", b"2"]]]]]
        assert len(made) == 2  # the read's connection and the one that served meanwhile
        assert await pool.execute((b"XLEN", b"s")) == 2
        assert len(made) == 2  # reused
        await pool.aclose()
        assert all(conn.closed for conn in made)

    run(main())


async def _ready(pool: AsyncPool) -> bool:
    return await blocked_clients(pool) == 1


def test_pool_bound_makes_a_caller_wait_for_a_release(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=2, max_idle=1)
        first, second = await pool.acquire(), await pool.acquire()
        assert first is not second
        third = asyncio.create_task(pool.acquire())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not third.done() and len(made) == 2
        pool.release(second)
        assert await third is second  # handed over, not a new connection
        assert len(made) == 2

        # A waiter cancelled before a release takes no place; a broken connection released
        # while one waits gives the waiter its place: it makes a new connection.
        cancelled = asyncio.create_task(pool.acquire())
        waiting = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        first.close()
        pool.release(first)
        fresh = await waiting
        assert fresh not in (first, second) and len(made) == 3
        assert await fresh.execute((b"PING",)) == "PONG"

        # Released beyond max_idle: closed. Released within it: kept and reused.
        pool.release(fresh)
        pool.release(second)
        assert second.closed and not fresh.closed
        assert await pool.execute((b"PING",)) == "PONG"
        assert len(made) == 3
        await pool.aclose()
        assert fresh.closed
        with pytest.raises(ValueError, match="closed"):
            await pool.acquire()

    run(main())


def test_pool_close_waits_on_nothing_and_closes_in_use_on_release(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=1)
        held = await pool.acquire()
        waiter = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0)
        await pool.aclose()
        with pytest.raises(ValueError, match="closed"):
            await waiter
        assert not held.closed
        assert await held.execute((b"PING",)) == "PONG"
        pool.release(held)
        assert held.closed

    run(main())


def test_cancelled_command_breaks_its_connection_and_the_pool_opens_a_fresh_one(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=2)
        await pool.execute((b"SET", b"k", b"v"))
        read = asyncio.create_task(
            pool.execute((b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$")))
        await until(lambda: _ready(pool), "the XREAD blocked")
        read.cancel()
        with pytest.raises(asyncio.CancelledError):
            await read
        [victim] = [conn for conn in made if conn.broken]  # the XREAD's, and only it
        assert victim.closed and len(made) == 2
        # The cancelled read's reply would be this entry: no later command may get it.
        assert await pool.execute((b"XADD", b"s", b"5-1", b"f", b"v")) == b"5-1"
        assert await pool.execute((b"GET", b"k")) == b"v"
        assert await pool.execute((b"PING",)) == "PONG"
        await until(lambda: _count_blocked(pool, 0), "the server dropped the old client")
        # The bound still lets two run: the broken one's place was given back.
        one, two = await pool.acquire(), await pool.acquire()
        assert victim not in (one, two)
        assert await one.execute((b"ECHO", b"one")) == b"one"
        assert await two.execute((b"ECHO", b"two")) == b"two"
        pool.release(one)
        pool.release(two)
        with pytest.raises(ConnectionLost, match="broken or closed"):
            await victim.execute((b"PING",))
        await pool.aclose()

    run(main())


async def _count_blocked(pool: AsyncPool, n: int) -> bool:
    return await blocked_clients(pool) == n


def test_cancelled_read_on_a_lone_connection(server) -> None:
    async def main() -> None:
        conn = await AsyncConnection.open_tcp(server.host, server.port, password=PASSWORD)
        task = asyncio.create_task(conn.execute((b"BLPOP", b"list", b"0")))
        for _ in range(5):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert conn.broken and conn.closed
        await conn.aclose()  # (idempotent)

    run(main())


def test_cancelled_write_malformed_reply_and_close_from_a_fake_peer() -> None:
    """A peer that never reads (the request waits in drain), one that answers garbage, one
    that closes the connection at once: each breaks the connection."""
    async def main() -> None:
        seen: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer)  # (never reads: the client's writes pile up)

        async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(100)
            writer.write(b"?what\r\n")
            seen.append(writer)

        async def hangup(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        for handler in (silent, garbage, hangup):
            fake = await asyncio.start_server(handler, "127.0.0.1", 0)
            port = fake.sockets[0].getsockname()[1]
            conn = await AsyncConnection.open_tcp("127.0.0.1", port)
            try:
                if handler is silent:
                    task = asyncio.create_task(conn.execute((b"SET", b"k", b"x" * (64 << 20))))
                    for _ in range(20):
                        await asyncio.sleep(0)
                    assert not task.done()
                    task.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await task
                elif handler is garbage:
                    with pytest.raises(ProtocolError):
                        await conn.execute((b"PING",))
                else:
                    with pytest.raises(ConnectionLost, match=f"127.0.0.1:{port}"):
                        await conn.execute((b"PING",))
                assert conn.broken and conn.closed
            finally:
                await conn.aclose()
                for writer in seen:
                    writer.close()
                seen.clear()
                fake.close()
                await fake.wait_closed()

    run(main())


def test_one_reader_at_a_time(server) -> None:
    async def main() -> None:
        async with await AsyncConnection.open_tcp(server.host, server.port,
                                                  password=PASSWORD) as conn:
            blocked = asyncio.create_task(conn.execute((b"BLPOP", b"list", b"0")))
            await asyncio.sleep(0)
            with pytest.raises(RuntimeError, match="another task"):
                await conn.execute((b"PING",))
            async with await AsyncConnection.open_tcp(server.host, server.port,
                                                      password=PASSWORD) as other:
                await other.execute((b"RPUSH", b"list", b"x"))
            assert await blocked == [b"list", b"x"]
            assert not conn.broken
            assert await conn.execute((b"PING",)) == "PONG"

    run(main())


def test_client_kill_gives_connection_lost_and_the_pool_recovers(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=2)
        killer = await opener(server)()
        victim = await pool.acquire()
        victim_id = await victim.execute((b"CLIENT", b"ID"))
        assert await killer.execute((b"CLIENT", b"KILL", b"ID", b"%d" % victim_id)) == 1
        with pytest.raises(ConnectionLost) as err:
            await victim.execute((b"PING",))
        assert f"{server.host}:{server.port}" in str(err.value)
        assert isinstance(err.value, ConnectionError)
        assert victim.broken
        pool.release(victim)
        assert victim.closed
        # An idle connection killed while in the pool: the pool drops it (the loop saw the
        # close) or the command on it says ConnectionLost; either way the next one works.
        idle_id = await pool.execute((b"CLIENT", b"ID"))
        idle = made[-1]
        assert await killer.execute((b"CLIENT", b"KILL", b"ID", b"%d" % idle_id)) == 1
        await asyncio.sleep(0.05)  # (lets the loop see the close: not asserted on)
        with contextlib.suppress(ConnectionLost):
            assert await pool.execute((b"PING",)) == "PONG"
        assert idle.closed
        assert await pool.execute((b"PING",)) == "PONG"
        assert await pool.execute((b"CLIENT", b"ID")) not in (victim_id, idle_id)
        await pool.aclose()
        await killer.aclose()
        await close_all(made)

    run(main())


def test_killed_server_gives_connection_lost_and_the_pool_reconnects(tmp_path, spawn) -> None:
    first = spawn(tmp_path / "one", "--requirepass", PASSWORD)
    target = [first]

    async def connect() -> AsyncConnection:
        return await AsyncConnection.open_tcp(target[0].host, target[0].port, password=PASSWORD)

    async def main() -> None:
        pool = AsyncPool(connect, max_connections=1)
        assert await pool.execute((b"SET", b"k", b"1")) == "OK"
        first.kill()
        with pytest.raises(ConnectionLost, match=f"{first.host}:{first.port}"):
            await pool.execute((b"GET", b"k"))
        target[0] = spawn(tmp_path / "two", "--requirepass", PASSWORD)
        assert await pool.execute((b"GET", b"k")) is None  # a new server, a new connection
        assert await pool.execute((b"PING",)) == "PONG"
        await pool.aclose()

    run(main())


def test_pubsub_on_a_dedicated_connection(server) -> None:
    async def main() -> None:
        made: list[AsyncConnection] = []
        pool = AsyncPool(opener(server, made), max_connections=1)
        sub = await pool.dedicated()
        await sub.send((b"SUBSCRIBE", b"news"))
        assert await sub.read_reply() == [b"subscribe", b"news", 1]
        assert await sub.read_reply(timeout=0.05) is TIMED_OUT
        assert await pool.execute((b"PUBLISH", b"news", b"hello")) == 1
        assert await sub.read_reply() == [b"message", b"news", b"hello"]
        # A wait cancelled loses nothing: the connection stays in step.
        waiting = asyncio.create_task(sub.read_reply())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not sub.broken
        # SUBSCRIBE more while a reader waits; both confirmations and messages arrive.
        reader = asyncio.create_task(sub.read_reply(timeout=30))
        await asyncio.sleep(0)
        await sub.send((b"PSUBSCRIBE", b"n*"))
        assert await reader == [b"psubscribe", b"n*", 2]
        assert await pool.execute((b"PUBLISH", b"news", b"again")) == 2
        got = [await sub.read_reply(), await sub.read_reply()]
        assert [b"message", b"news", b"again"] in got
        assert [b"pmessage", b"n*", b"news", b"again"] in got
        assert await sub.read_reply(timeout=0) is TIMED_OUT
        assert len(made) == 2  # the subscriber's was not the pool's
        await sub.aclose()
        await pool.aclose()

    run(main())


def test_shared_directory_socket(shared_dir) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        engine.execute("SET", "k", "v")
        directory = SharedDirectory(str(shared_dir), {})

        async def connect() -> AsyncConnection:
            return await AsyncConnection.from_socket(directory.connect().sock)

        async def main() -> None:
            async with await connect() as conn:
                assert conn.peer.endswith("shared.sock")
                assert await conn.execute((b"GET", b"k")) == b"v"
                assert await conn.execute((b"XADD", b"s", b"1-1", b"a", b"1")) == b"1-1"
                with pytest.raises(ReplyError):
                    await conn.execute((b"XADD", b"s", b"1-1", b"a", b"1"))
            async with await AsyncConnection.open_unix(directory.socket) as conn:
                assert conn.peer == directory.socket
                assert await conn.execute((b"XLEN", b"s")) == 1
            pool = AsyncPool(connect, max_connections=2)
            replies = await pool.execute_many([(b"XLEN", b"s"), (b"INCR", b"k")])
            assert replies[0] == 1 and type(replies[1]) is ReplyError
            read = asyncio.create_task(
                pool.execute((b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$")))
            await until(lambda: _ready(pool), "the XREAD blocked")
            await pool.execute((b"XADD", b"s", b"2-1", b"b", b"2"))
            assert await read == [[b"s", [[b"2-1", [b"b", b"2"]]]]]
            await pool.aclose()

        run(main())
        assert engine.execute("XLEN", "s") == 2
