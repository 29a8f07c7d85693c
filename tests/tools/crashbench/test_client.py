"""`RespTarget` against real `streamkeep serve` and redis-server processes: replies as plain
values, error replies as CommandFailed, and ConnectionLost (then a dead object) when the server
is killed mid-command, times out, or is not there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep.tools.crashbench.client import RespTarget
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost, Target
from streamkeep.tools.servers import RedisServer, ServerProcess, StreamkeepServer, free_port


@pytest.fixture(scope="module", params=["streamkeep", "redis"])
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    d = tmp_path_factory.mktemp(f"client-{request.param}")
    proc: ServerProcess = StreamkeepServer(str(d / "data")) if request.param == "streamkeep" \
        else RedisServer(str(d / "data"))
    proc.start()
    yield proc
    proc.kill()


def test_replies_are_plain_values(server: ServerProcess) -> None:
    t: Target
    with server.target() as t:
        assert t.execute([b"PING"]) == "PONG"
        entry_id = t.execute([b"XADD", b"values", b"1-1", b"f", b"v"])
        assert entry_id == b"1-1"
        assert t.execute([b"XLEN", b"values"]) == 1
        assert t.execute([b"XRANGE", b"values", b"-", b"+"]) == [[b"1-1", [b"f", b"v"]]]
        assert t.execute([b"XADD", b"missing", b"NOMKSTREAM", b"*", b"f", b"v"]) is None
        assert t.execute([b"XRANGE", b"values", b"2", b"+"]) == []


def test_an_error_reply_is_command_failed_and_the_connection_goes_on(
        server: ServerProcess) -> None:
    with server.target() as t:
        t.execute([b"XADD", b"errs", b"5-1", b"f", b"v"])
        with pytest.raises(CommandFailed) as err:
            t.execute([b"XADD", b"errs", b"1-1", b"f", b"v"])
        assert str(err.value).startswith("ERR The ID specified in XADD is equal or smaller")
        with pytest.raises(CommandFailed, match="^WRONGTYPE|^ERR"):
            t.execute([b"LPUSH", b"errs", b"x"])
        assert t.execute([b"XLEN", b"errs"]) == 1


def test_a_timeout_is_connection_lost_and_the_object_stays_dead(server: ServerProcess) -> None:
    t = server.target(timeout=0.2)
    with pytest.raises(ConnectionLost):
        t.execute([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"never", b"$"])
    assert t.dead
    with pytest.raises(ConnectionLost):
        t.execute([b"PING"])


def test_nothing_listening_is_connection_lost() -> None:
    with pytest.raises(ConnectionLost):
        RespTarget("127.0.0.1", free_port(), connect_timeout=0.5)


@pytest.mark.parametrize("kind", ["streamkeep", "redis"])
def test_killing_the_server_mid_command_is_connection_lost(kind: str, tmp_path: Path) -> None:
    proc: ServerProcess = StreamkeepServer(str(tmp_path / "d")) if kind == "streamkeep" \
        else RedisServer(str(tmp_path / "d"))
    with proc:
        proc.start()
        t = proc.target()
        outcome: list[BaseException] = []

        def blocked() -> None:
            try:
                t.execute([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"])
            except ConnectionLost as err:
                outcome.append(err)

        reader = threading.Thread(target=blocked)
        reader.start()
        reader.join(0.3)
        assert reader.is_alive()  # in flight: the server holds the reply back
        proc.kill()
        reader.join(5)
        assert outcome and t.dead
        assert not proc.alive


def test_a_pipeline_returns_every_reply_in_order(server: ServerProcess) -> None:
    with server.target() as t:
        replies = t.pipeline([[b"XADD", b"pipe", b"1-1", b"f", b"v"],
                              [b"XADD", b"pipe", b"1-1", b"f", b"v"],
                              [b"XLEN", b"pipe"]])
        assert replies[0] == b"1-1"
        assert isinstance(replies[1], CommandFailed)
        assert replies[2] == 1
