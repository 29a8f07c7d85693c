"""engine.runtime.async_engine: the in-process asyncio backend and its sessions, on their own.

Checked here: `start` answers an immediate command with its plain reply in the same call and
a blocked read with a Wait; a blocking pop's timeout is a loop timer (the Wait gives None and
the waiter is gone); a waiting task cancelled after a write served it (the write's delivery
queued with call_soon, the cancel before the loop ran it) leaves the served reply as the
Wait's `orphan`, the entry in the PEL; a cancel before any write ends the wait; `close` ends
every wait; `run_many` puts a failed command's ReplyError in its place and runs the others;
`durable(lsn)` under `appendfsync always` returns once the group commit fsynced the record
(the loop ticking meanwhile); the Pub/Sub channel gets a message published from another
thread. A write whose event loop closed before the group commit fsynced its record is dropped
without touching that thread (which goes on serving every other caller), as are a served read
and a published message whose loop has closed.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.async_engine import EngineAsyncBackend, EngineSession
from streamkeep.engine.runtime.async_redis import Wait
from tests.support.loop_ticker import Ticker

GUARD = 60.0  # (seconds: only so that a broken wake-up fails instead of hanging)


@pytest.fixture
def engine() -> Iterator[Engine]:
    with Engine.open() as e:
        yield e


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _blocked_clients(engine: Engine) -> int:
    return int(engine.redis().info("clients")["blocked_clients"])


def test_start_answers_at_once_or_gives_a_wait(engine: Engine) -> None:
    async def main() -> None:
        backend = EngineAsyncBackend(engine)
        assert backend.start((b"SET", b"k", b"v")) == "OK"  # (a status: str)
        assert backend.start(("GET", "k")) == b"v"
        assert backend.start(("RPUSH", "l", "a", "b")) == 2
        assert backend.start(("LRANGE", "l", "0", "-1")) == [b"a", b"b"]
        with pytest.raises(ReplyError, match="^WRONGTYPE"):
            backend.start(("LPUSH", "k", "x"))
        wait = backend.start(("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
        assert type(wait) is Wait and not wait.served
        assert _blocked_clients(engine) == 1
        assert backend.start(("XADD", "s", "1-1", "f", "v")) == b"1-1"  # serves it
        got = await asyncio.wait_for(_awaited(wait.awaitable), GUARD)
        assert got == [[b"s", [[b"1-1", [b"f", b"v"]]]]]
        assert wait.served and wait.orphan is None
        assert _blocked_clients(engine) == 0
        await backend.aclose()

    run(main())


def test_a_blocking_pop_times_out_on_a_loop_timer(engine: Engine) -> None:
    async def main() -> None:
        backend = EngineAsyncBackend(engine)
        async with Ticker() as ticker:
            wait = backend.start(("BLPOP", "nolist", "0.05"))
            assert type(wait) is Wait
            before = ticker.ticks
            assert await asyncio.wait_for(_awaited(wait.awaitable), GUARD) is None
            assert ticker.ticks > before  # the loop ran while the pop waited
        assert _blocked_clients(engine) == 0
        # A push after the timeout is not taken by the timed-out pop.
        assert backend.start(("RPUSH", "nolist", "x")) == 1
        assert backend.start(("LLEN", "nolist")) == 1

    run(main())


def _group(engine: Engine) -> None:
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")


def test_a_cancel_after_the_serving_write_leaves_the_orphan(engine: Engine) -> None:
    _group(engine)

    async def main() -> None:
        reader, writer = EngineAsyncBackend(engine), EngineAsyncBackend(engine)
        wait = reader.start(("XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0",
                             "STREAMS", "s", ">"))
        assert type(wait) is Wait
        task = asyncio.create_task(_awaited(wait.awaitable))
        await asyncio.sleep(0)  # the task now awaits the Wait's future
        # Served synchronously under the engine lock; its delivery is queued (call_soon)...
        assert writer.start(("XADD", "s", "5-1", "f", "v")) == b"5-1"
        assert wait.orphan is None
        task.cancel()  # ...and the waiting task is cancelled before the loop runs it.
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):
            await asyncio.sleep(0)
        assert wait.served
        assert wait.orphan == [[b"s", [[b"5-1", [b"f", b"v"]]]]]
        assert type(wait.orphan[0][0]) is bytes  # plain: what the reply would have been

    run(main())
    pending = engine.execute("XPENDING", "s", "g")
    assert pending[0] == 1 and pending[3] == [[b"alice", b"1"]]
    assert _blocked_clients(engine) == 0


def test_a_cancel_before_any_write_ends_the_wait(engine: Engine) -> None:
    _group(engine)

    async def main() -> None:
        backend = EngineAsyncBackend(engine)
        wait = backend.start(("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "0",
                              "STREAMS", "s", ">"))
        task = asyncio.create_task(_awaited(wait.awaitable))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert _blocked_clients(engine) == 0
        assert backend.start(("XADD", "s", "6-1", "f", "v")) == b"6-1"
        await asyncio.sleep(0)
        assert not wait.served and wait.orphan is None

    run(main())
    assert engine.execute("XPENDING", "s", "g")[0] == 0


def test_close_ends_every_wait(engine: Engine) -> None:
    async def main() -> None:
        session = EngineAsyncBackend(engine).new_session()
        assert isinstance(session, EngineSession)
        waits = [session.start(("BLPOP", f"l{i}", "0")) for i in range(3)]
        assert all(type(w) is Wait for w in waits)
        assert _blocked_clients(engine) == 3
        session.close()
        assert _blocked_clients(engine) == 0
        assert engine.execute("RPUSH", "l0", "x") == 1  # nobody takes it
        assert engine.execute("LLEN", "l0") == 1

    run(main())


def test_run_many_puts_errors_in_place(engine: Engine) -> None:
    async def main() -> list[Any]:
        session = EngineAsyncBackend(engine).new_session()
        return await session.run_many([("SET", "a", "1"), ("INCR", "a"), ("LPUSH", "a", "x"),
                                       ("NOSUCH",), ("GET", "a"),
                                       ("BLPOP", "empty", "0")])  # (never blocks here)

    replies = run(main())
    assert replies[0] == "OK" and replies[1] == 2
    assert isinstance(replies[2], ReplyError) and str(replies[2]).startswith("WRONGTYPE")
    assert isinstance(replies[3], ReplyError) and "unknown command" in str(replies[3])
    assert replies[4] == b"2"
    assert replies[5] is None
    assert _blocked_clients(engine) == 0


def test_durable_waits_for_the_group_commit(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        journal = engine.journal
        assert journal is not None and journal.sync_on_commit

        async def main() -> None:
            session = EngineAsyncBackend(engine)
            async with Ticker() as ticker:
                reply, lsn = session.submit_quiet((b"XADD", b"s", b"*", b"f", b"v"))
                assert lsn == journal.lsn and lsn > 0
                before = ticker.ticks
                await session.durable(lsn)
                assert journal.synced_lsn >= lsn
                if ticker.ticks == before:  # (not suspended: fsynced already)
                    assert journal.fsyncs >= 1
                await session.durable(lsn)  # durable already: at once
                await session.durable(0)  # no record: at once
                # start() of a write returns a Wait that gives the reply once fsynced.
                wait = session.start(("SET", "k", "v"))
                lsn = journal.lsn
                reply = wait if type(wait) is not Wait else await wait.awaitable
                assert reply == "OK" and journal.synced_lsn >= lsn

        run(main())


def test_a_write_whose_loop_closed_before_its_fsync_leaves_the_group_commit_running(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """getting-started/asyncio.md's queue example, made certain: under `always` a write's
    reply waits for the group commit's callback, and the program's loop closed first (a task
    cancelled at the end of asyncio.run). The callback finds the loop closed and drops the
    reply: the group-commit thread is not touched, and a plain write afterwards is fsynced
    and answered, not refused with MISCONF."""
    before = set(threading.enumerate())
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        journal = engine.journal
        assert journal is not None
        (commit,) = [t for t in threading.enumerate()
                     if t not in before and t.name == "aof-group-commit"]

        async def write() -> Any:
            return EngineAsyncBackend(engine).start(("XADD", "s", "*", "f", "v"))

        loop = asyncio.new_event_loop()
        with caplog.at_level(logging.ERROR, logger="streamkeep.aof"):
            with engine.lock:  # the group commit writes the record under it: not before...
                wait = loop.run_until_complete(write())
                assert type(wait) is Wait and not wait.awaitable.done()
                loop.close()  # ...the loop is gone
            for n in range(3):  # rounds after the callback into the closed loop
                assert engine.execute("XADD", "s", "*", "n", str(n))
        assert commit.is_alive()
        assert journal.error is None and journal.synced_lsn == journal.lsn
        assert engine.execute("XLEN", "s") == 4
        assert not caplog.records, "the closed loop's write reached the commit thread"


def test_a_read_and_a_message_for_a_closed_loop_are_dropped_not_raised(engine: Engine) -> None:
    """A blocked read and a Pub/Sub channel left in a loop that closed: the write that serves
    the read and the PUBLISH that reaches the channel (from any thread) find the loop closed,
    drop what they would have handed it, and go on."""
    async def abandon() -> Any:
        backend = EngineAsyncBackend(engine)
        wait = backend.start(("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
        channel = backend.pubsub_channel()
        await channel.run((b"SUBSCRIBE", b"news"))
        return wait

    loop = asyncio.new_event_loop()
    wait = loop.run_until_complete(abandon())
    loop.close()  # (the program stopped its loop with the read and the channel open)
    assert type(wait) is Wait
    replies: list[Any] = []

    def writer() -> None:
        replies.append(engine.execute("XADD", "s", "1-1", "f", "v"))
        replies.append(engine.execute("PUBLISH", "news", "m"))

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(GUARD)
    assert replies == [b"1-1", 1]
    assert _blocked_clients(engine) == 0 and engine.execute("XLEN", "s") == 1


def test_pubsub_channel_gets_a_message_published_from_another_thread(engine: Engine) -> None:
    async def main() -> None:
        backend = EngineAsyncBackend(engine)
        channel = backend.pubsub_channel()
        await channel.run((b"SUBSCRIBE", b"news"))
        assert await channel.next_message(0) == [b"subscribe", b"news", 1]
        assert await channel.next_message(0) is None  # nothing yet, at once

        published: list[int] = []
        thread = threading.Thread(
            target=lambda: published.append(engine.execute("PUBLISH", "news", "hello")))
        thread.start()
        try:
            message = await channel.next_message(GUARD)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
        assert published == [1]
        assert message == [b"message", b"news", b"hello"]
        await channel.run((b"PSUBSCRIBE", b"n*"))
        assert await channel.next_message(0) == [b"psubscribe", b"n*", 2]
        thread = threading.Thread(target=engine.execute, args=("PUBLISH", "nx", "p"))
        thread.start()
        try:
            message = await channel.next_message(GUARD)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, thread.join)
        assert message == [b"pmessage", b"n*", b"nx", b"p"]
        await channel.aclose()
        assert engine.execute("PUBLISH", "news", "late") == 0

    run(main())
