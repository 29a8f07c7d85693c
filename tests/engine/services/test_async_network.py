"""engine.services.async_network: AsyncRedis over a socket. `aredis_from_url` reaches a spawned
`streamkeep serve` (a password in the URL when it has --requirepass; a wrong one raises, none
gets NOAUTH; /db selects a database) and a shared directory's server by its Unix socket
(`unix://`); commands, pipelines (a transaction, WATCH's conflict as WatchError), Pub/Sub on a
dedicated connection outside the pool's bound, a blocking XREAD served by another client, and
a cancelled blocked call after which the pool (bound to one connection) still works. The same
async function gives the same results on the embedded engine's `aredis()`, a shared
directory's `aredis()` and a served engine's URL."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.exceptions

from streamkeep import Engine, aredis_from_url
from streamkeep.aof.manifest import SHARED_SOCKET
from streamkeep.engine.runtime.async_redis import AsyncRedis, WatchError
from streamkeep.engine.wire.errors import ReplyError

PASSWORD = "secret"
ITERATIONS = 20_000  # short sleeps a wait for a state may take: a bound on iterations, not time


def url(server: Any, auth: str = "", db: str = "") -> str:
    return f"redis://{auth}{server.host}:{server.port}{db}"


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(ITERATIONS):
        if await check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never: {what}")


async def blocked_clients(r: AsyncRedis) -> int:
    return int((await r.info("clients"))["blocked_clients"])


async def message(pubsub: Any) -> dict[str, Any]:
    """The next message of a subscriber (each wait is bounded, and so is their number)."""
    for _ in range(100):
        got = await pubsub.get_message(timeout=1.0)
        if got is not None:
            return got  # type: ignore[no-any-return]
    raise AssertionError("no message came")


def test_a_password_in_the_url(tmp_path: Path, spawn: Callable[..., Any]) -> None:
    server = spawn(tmp_path / "data", "--requirepass", PASSWORD)

    async def body() -> None:
        with pytest.raises(ReplyError, match="WRONGPASS"):
            await aredis_from_url(url(server, ":wrong@"))  # (its first connection: made now)
        async with await aredis_from_url(url(server)) as anonymous:
            with pytest.raises(ReplyError, match="NOAUTH"):
                await anonymous.ping()
        async with await aredis_from_url(url(server, f":{PASSWORD}@")) as r, \
                await aredis_from_url(url(server, f"default:{PASSWORD}@", "/1")) as one:
            assert await r.ping() is True
            assert await r.set("k", "zero") is True and await one.set("k", "one") is True
            assert (await r.get("k"), await one.get("k")) == (b"zero", b"one")  # /1: SELECT 1
        with pytest.raises(ValueError, match="a redis:// or unix:// URL"):
            await aredis_from_url(f"rediss://{server.host}:{server.port}")

    asyncio.run(body())


def test_commands_and_decoded_replies(tmp_path: Path, spawn: Callable[..., Any]) -> None:
    server = spawn(tmp_path / "data")

    async def body() -> None:
        async with await aredis_from_url(url(server)) as r, \
                await aredis_from_url(url(server), decode_responses=True) as text:
            assert await r.set("k", "v", ex=100) is True
            assert await r.get("k") == b"v" and await text.get("k") == "v"
            assert 0 < await r.ttl("k") <= 100
            assert await r.incrby("n", 3) == 3 and await r.get("missing") is None
            sid = await r.xadd("s", {"f": "v"})
            assert await r.xrange("s") == [(sid, {b"f": b"v"})]
            assert await text.xrange("s") == [(sid.decode(), {"f": "v"})]
            assert await r.xgroup_create("s", "g", id="0") is True
            assert await r.xreadgroup("g", "c", {"s": ">"}) == [[b"s", [(sid, {b"f": b"v"})]]]
            assert await r.xack("s", "g", sid) == 1
            assert await r.hset("h", mapping={"a": "1"}) == 1
            assert await text.hgetall("h") == {"a": "1"}
            with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE") as raised:
                await r.lpush("k", "x")
            assert isinstance(raised.value, ReplyError)
            assert [k async for k in r.scan_iter(match="s*")] == [b"s"]

    asyncio.run(body())


def test_pipelines_and_a_watch_conflict(tmp_path: Path, spawn: Callable[..., Any]) -> None:
    server = spawn(tmp_path / "data")

    async def body() -> None:
        async with await aredis_from_url(url(server)) as r, \
                await aredis_from_url(url(server)) as other:
            async with r.pipeline() as pipe:
                pipe.set("k", "1").incr("k").get("k")
                assert await pipe.execute() == [True, 2, b"2"]
            async with r.pipeline(transaction=False) as pipe:
                pipe.incr("k").lpush("k", "x")
                replies = await pipe.execute(raise_on_error=False)
                assert replies[0] == 3 and isinstance(replies[1], ReplyError)
            async with r.pipeline() as pipe:
                await pipe.watch("k")
                assert await pipe.get("k") == b"3"  # (watching: run at once)
                pipe.multi()
                pipe.set("k", "mine")
                assert await pipe.execute() == [True]  # nothing changed it
            async with r.pipeline() as pipe:
                await pipe.watch("k")
                await other.set("k", "theirs")  # another client's write
                pipe.multi()
                pipe.set("k", "mine again")
                with pytest.raises(WatchError) as raised:
                    await pipe.execute()
                assert isinstance(raised.value, redis.exceptions.WatchError)
            assert await r.get("k") == b"theirs"

    asyncio.run(body())


def test_pubsub_has_a_dedicated_connection(tmp_path: Path, spawn: Callable[..., Any]) -> None:
    """A pool bound to one connection: the subscriber's is outside it, so commands still run
    while it is subscribed."""
    server = spawn(tmp_path / "data")

    async def body() -> None:
        async with await aredis_from_url(url(server), max_connections=1) as r:
            async with r.pubsub() as pubsub:
                await pubsub.subscribe("news")
                await pubsub.psubscribe("log.*")
                assert (await message(pubsub))["type"] == "subscribe"
                assert (await message(pubsub))["type"] == "psubscribe"
                assert await r.publish("news", "hello") == 1  # (the pool's one connection)
                assert await r.publish("log.db", "up") == 1
                got = await message(pubsub)
                assert (got["type"], got["channel"], got["data"]) == ("message", b"news",
                                                                     b"hello")
                got = await message(pubsub)
                assert (got["type"], got["pattern"], got["channel"], got["data"]) == (
                    "pmessage", b"log.*", b"log.db", b"up")
                await pubsub.unsubscribe("news")
                assert (await message(pubsub))["type"] == "unsubscribe"
                assert await r.publish("news", "gone") == 0
                assert await pubsub.get_message(timeout=0.01) is None
            assert await r.ping() is True

    asyncio.run(body())


def test_a_blocking_xread_served_by_another_client(tmp_path: Path,
                                                  spawn: Callable[..., Any]) -> None:
    server = spawn(tmp_path / "data")

    async def body() -> None:
        async with await aredis_from_url(url(server)) as r, \
                await aredis_from_url(url(server)) as writer:
            reading = asyncio.create_task(r.xread({"s": "$"}, block=0))
            await until(lambda: _blocked(writer, 1), "the XREAD blocks")
            sid = await writer.xadd("s", {"n": "1"})
            assert await reading == [[b"s", [(sid, {b"n": b"1"})]]]
            assert await r.ping() is True  # (its connection back in the pool)

    asyncio.run(body())


async def _blocked(r: AsyncRedis, n: int) -> bool:
    return await blocked_clients(r) == n


def test_a_cancelled_blocked_call_leaves_the_pool_usable(tmp_path: Path,
                                                        spawn: Callable[..., Any]) -> None:
    """A pool of one connection: the cancelled call's connection (its reply still due) is
    dropped, and its place goes to the next command, which gets its own reply."""
    server = spawn(tmp_path / "data")

    async def body() -> None:
        async with await aredis_from_url(url(server), max_connections=1) as r, \
                await aredis_from_url(url(server)) as watcher:
            reading = asyncio.create_task(r.xread({"s": "$"}, block=0))
            await until(lambda: _blocked(watcher, 1), "the XREAD blocks")
            reading.cancel()
            with pytest.raises(asyncio.CancelledError):
                await reading
            await until(lambda: _blocked(watcher, 0), "the server ends the wait")
            assert await r.ping() is True
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(r.blpop(["list"], timeout=0), 0.05)
            await until(lambda: _blocked(watcher, 0), "the server ends the BLPOP")
            sid = await watcher.xadd("s", {"n": "after"})
            assert await r.xrange("s") == [(sid, {b"n": b"after"})]
            assert await r.lpush("list", "a") == 1  # not taken by the cancelled BLPOP
            assert await r.lrange("list", 0, -1) == [b"a"]

    asyncio.run(body())


def test_a_unix_url_reaches_a_shared_directory(shared_dir: Path) -> None:
    engine = Engine.open(str(shared_dir), shared=True)
    try:
        engine.execute("SET", "k", "from sync")  # (its first command starts the server)
        socket_path = shared_dir / SHARED_SOCKET
        assert socket_path.exists()

        async def body() -> None:
            async with await aredis_from_url(f"unix://{socket_path}") as r, \
                    await aredis_from_url(f"unix://{socket_path}?db=2") as two, \
                    engine.aredis() as own:
                assert await r.get("k") == b"from sync" and await two.get("k") is None
                sid = await r.xadd("s", {"n": "1"})
                assert await own.xrange("s") == [(sid, {b"n": b"1"})]
                reading = asyncio.create_task(own.xread({"s": sid}, block=0))
                await until(lambda: _blocked(r, 1), "the shared XREAD blocks")
                later = await r.xadd("s", {"n": "2"})
                assert await reading == [[b"s", [(later, {b"n": b"2"})]]]

        asyncio.run(body())
        assert engine.execute("XLEN", "s") == 2
    finally:
        engine.close()


async def workload(r: AsyncRedis) -> list[Any]:
    """One client's code, whichever engine is behind `r`: every reply it had."""
    out: list[Any] = []
    out.append(await r.xadd("s", {"f": "v"}, id="1-1"))
    out.append(await r.xgroup_create("s", "g", id="0"))
    out.append(await r.xreadgroup("g", "c", {"s": ">"}, count=10))
    out.append(await r.xpending("s", "g"))
    out.append(await r.xack("s", "g", "1-1"))
    out.append(await r.hset("h", mapping={"a": "1", "b": "2"}))
    out.append(await r.hgetall("h"))
    out.append(await r.incrby("n", 5))
    out.append(await r.zadd("z", {"x": 1.5, "y": 2}))
    out.append(await r.zrange("z", 0, -1, withscores=True))
    async with r.pipeline() as pipe:
        pipe.set("k", "v").get("k").rpush("l", "a", "b").lrange("l", 0, -1)
        out.append(await pipe.execute())
    reading = asyncio.create_task(r.xread({"s": "5-0"}, block=0))  # (served whenever it runs)
    await asyncio.sleep(0)
    out.append(await r.xadd("s", {"g": "w"}, id="6-0"))
    out.append(await reading)
    try:
        await r.xadd("s", {"f": "v"}, id="1-0")
    except redis.exceptions.ResponseError as err:
        out.append(str(err))
    out.append(await r.eval("return redis.call('GET', KEYS[1])", 1, "k"))
    async with r.pubsub() as pubsub:
        await pubsub.subscribe("ch")
        out.append(await message(pubsub))
        out.append(await r.publish("ch", "hi"))
        out.append(await message(pubsub))
    return out


def test_the_same_code_runs_on_embedded_shared_and_served(tmp_path: Path, shared_dir: Path,
                                                          spawn: Callable[..., Any]) -> None:
    embedded = Engine.open()
    shared = Engine.open(str(shared_dir), shared=True)
    server = spawn(tmp_path / "data")

    async def body() -> list[list[Any]]:
        results = []
        for make in (embedded.aredis, shared.aredis, lambda: aredis_from_url(url(server))):
            async with await make() as r:
                results.append(await workload(r))
        return results

    try:
        in_process, in_shared, served = asyncio.run(body())
    finally:
        shared.close()
        embedded.close()
    assert in_process == in_shared == served
    assert in_process[0] == b"1-1" and in_process[-1]["data"] == b"hi"
