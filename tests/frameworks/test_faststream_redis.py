"""FastStream's `RedisBroker` against `streamkeep serve` and redis-server: request/reply over a
stream (the request is XADDed with a reply channel the client SUBSCRIBEs to; the stream
subscriber's answer is PUBLISHed there) and publish/consume through a consumer group (XGROUP
CREATE, XREADGROUP, XACK). One broker serves, another is the client, both in the test's loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from faststream.redis import RedisBroker, StreamSub

from tests.support.frameworks import Target

pytestmark = pytest.mark.timeout(120)

WAIT = 60.0  # the most a step waits for its condition
POLL_MS = 50  # the subscribers' XREAD/XREADGROUP block


def run(target: Target, scenario: Callable[[RedisBroker, RedisBroker], Awaitable[None]],
        setup: Callable[[RedisBroker], None]) -> None:
    """Runs `scenario(server, client)` with `setup(server)`'s subscribers started."""

    async def main() -> None:
        server = RedisBroker(target.url, log_level=0)
        setup(server)
        client = RedisBroker(target.url, log_level=0)
        async with server, client:
            await server.start()
            await client.connect()
            await asyncio.wait_for(scenario(server, client), WAIT)

    asyncio.run(main())


def test_request_reply_over_a_stream(target: Target) -> None:
    def setup(server: RedisBroker) -> None:
        @server.subscriber(stream=StreamSub("fw:rpc", polling_interval=POLL_MS))
        async def add(body: dict[str, int]) -> dict[str, int]:
            return {"sum": body["a"] + body["b"]}

    async def scenario(server: RedisBroker, client: RedisBroker) -> None:
        for n in range(3):
            reply = await client.request({"a": n, "b": 10}, stream="fw:rpc",
                                         correlation_id=f"call-{n}", timeout=WAIT)
            assert await reply.decode() == {"sum": n + 10}
            assert reply.correlation_id == f"call-{n}"
        redis = client.config.connection.client
        assert await redis.xlen("fw:rpc") == 3
        # Every reply channel is unsubscribed once its reply came (the client's UNSUBSCRIBE is
        # not waited for: poll until the server has seen it).
        while await redis.pubsub_channels("*"):
            await asyncio.sleep(0.02)
        assert await redis.pubsub_numpat() == 0

    run(target, scenario, setup)


def test_publish_consume_with_a_consumer_group(target: Target) -> None:
    got: list[Any] = []
    done = asyncio.Event()
    bodies = [f"m{n}" for n in range(5)]

    def setup(server: RedisBroker) -> None:
        @server.subscriber(stream=StreamSub("fw:jobs", group="fw-g", consumer="c1",
                                            polling_interval=POLL_MS))
        async def consume(body: str) -> None:
            got.append(body)
            if len(got) == len(bodies):
                done.set()

    async def scenario(server: RedisBroker, client: RedisBroker) -> None:
        ids = [await client.publish(body, stream="fw:jobs") for body in bodies]
        await done.wait()
        assert got == bodies
        redis = client.config.connection.client
        while (await redis.xpending("fw:jobs", "fw-g"))["pending"]:  # acked after the handler
            await asyncio.sleep(0.02)
        [group] = await redis.xinfo_groups("fw:jobs")
        assert group["name"] == b"fw-g" and group["consumers"] == 1
        assert group["last-delivered-id"] == ids[-1]
        assert group["pending"] == 0 and group["lag"] == 0

    run(target, scenario, setup)


def test_a_dead_consumers_message_is_claimed_by_min_idle_time(target: Target) -> None:
    """A consumer read a message and died without acking it; a subscriber with `min_idle_time`
    (FastStream's XAUTOCLAIM loop) takes it over once it has been idle that long, and acks it."""
    got: list[Any] = []
    done = asyncio.Event()

    def setup(server: RedisBroker) -> None:
        @server.subscriber(stream=StreamSub("fw:orphans", group="fw-g", consumer="rescuer",
                                            min_idle_time=100, polling_interval=POLL_MS))
        async def rescue(body: str) -> None:
            got.append(body)
            done.set()

    with target.client() as client:
        client.xgroup_create("fw:orphans", "fw-g", id="0", mkstream=True)

    async def scenario(server: RedisBroker, client: RedisBroker) -> None:
        redis = client.config.connection.client
        await client.publish("orphan", stream="fw:orphans")
        read = await redis.xreadgroup("fw-g", "dead", {"fw:orphans": ">"}, count=1)
        [[_stream, [(entry_id, _fields)]]] = read
        await done.wait()
        assert got == ["orphan"]
        while (await redis.xpending("fw:orphans", "fw-g"))["pending"]:
            await asyncio.sleep(0.02)
        consumers = {c["name"]: c for c in await redis.xinfo_consumers("fw:orphans", "fw-g")}
        assert set(consumers) == {b"dead", b"rescuer"}
        assert consumers[b"dead"]["pending"] == consumers[b"rescuer"]["pending"] == 0
        assert [e[0] for e in await redis.xrange("fw:orphans")] == [entry_id]

    run(target, scenario, setup)
