"""The crash bench's server processes and kill moments, with real processes and sockets: under
appendfsync always every acknowledged write survives SIGKILL and restart (both servers); start()
waits out -LOADING; each kill moment interrupts what it says it does."""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamkeep.tools.crashbench import sigkill
from streamkeep.tools.crashbench.moments import (
    MomentMissed,
    kill_during_compaction,
    kill_during_recovery,
    kill_during_replica_sync,
    kill_during_rotation,
    kill_during_workload,
    measure_recovery,
    replica_state,
    wait_caught_up,
)
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost
from streamkeep.tools.servers import (
    RedisServer,
    ServerFailed,
    ServerProcess,
    StreamkeepServer,
)

FIELDS = [b"payload", b"x" * 200]


class Writer(threading.Thread):
    """XADDs to one stream until stopped or the connection is lost; `acked` the IDs the server
    acknowledged."""

    def __init__(self, server: ServerProcess, stream: bytes = b"s", limit: int = 10**9) -> None:
        super().__init__(daemon=True)
        self.target = server.target()
        self.stream = stream
        self.limit = limit
        self.acked: list[bytes] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopping.is_set() and len(self.acked) < self.limit:
                self.acked.append(self.target.execute([b"XADD", self.stream, b"*", *FIELDS]))
        except ConnectionLost:
            pass
        finally:
            self.target.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)


def ids(server: ServerProcess, stream: bytes = b"s") -> list[bytes]:
    with server.target() as t:
        return [entry[0] for entry in t.execute([b"XRANGE", stream, b"-", b"+"])]


def fill(server: ServerProcess, n: int, stream: bytes = b"fill") -> None:
    """n entries, pipelined 500 at a time (they share fsyncs)."""
    with server.target() as t:
        for start in range(0, n, 500):
            t.pipeline([[b"XADD", stream, b"*", *FIELDS]] * min(500, n - start))


def retry(moment: Callable[[], str], attempts: int = 5) -> str:
    for _ in range(attempts - 1):
        try:
            return moment()
        except MomentMissed:
            continue
    return moment()


KINDS = ["streamkeep", "redis"]


def make(kind: str, d: Path, **options: int | str) -> ServerProcess:
    if kind == "streamkeep":
        return StreamkeepServer(str(d / "data"), **options)  # type: ignore[arg-type]
    return RedisServer(str(d / "data"))


@pytest.fixture
def started() -> Iterator[list[ServerProcess]]:
    servers: list[ServerProcess] = []
    yield servers
    for server in servers:
        server.kill()


@pytest.mark.parametrize("kind", KINDS)
def test_acknowledged_writes_survive_kill_and_restart(kind: str, tmp_path: Path,
                                                      started: list[ServerProcess]) -> None:
    server = make(kind, tmp_path)
    started.append(server)
    server.start()
    port = server.port
    writer = Writer(server)
    writer.start()
    # The kill's random delay counts from the first acknowledged write: on a busy machine the
    # writer's connection alone can take longer than the delay drawn.
    deadline = time.monotonic() + 10
    while not writer.acked and writer.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    description = kill_during_workload(server, writer, random.Random(1), max_delay=0.4)
    writer.join(5)
    assert "SIGKILL" in description and not server.alive
    assert writer.acked
    server.restart()
    assert server.port == port  # the same address after a restart
    survived = ids(server)
    # Everything acknowledged is there, in order; at most the one write in flight is extra.
    assert survived[:len(writer.acked)] == writer.acked
    assert len(survived) - len(writer.acked) <= 1
    server.kill()
    server.start()
    assert ids(server) == survived


LOADING_SERVER = r"""
import os, socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
until = time.monotonic() + 0.6
info = b"process_id:%d\r\n" % os.getpid()
while True:
    c, _ = s.accept()
    if time.monotonic() < until:
        c.recv(1024)
        c.sendall(b"-LOADING Redis is loading the dataset in memory\r\n")
    else:  # PING, then INFO server (whose process_id says the answer is this process's)
        c.recv(1024)
        c.sendall(b"+PONG\r\n")
        c.recv(1024)
        c.sendall(b"$%d\r\n%s\r\n" % (len(info), info))
    c.close()
"""


class LoadingServer(ServerProcess):
    """Answers -LOADING for its first 0.6 s, then +PONG."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", LOADING_SERVER, str(self.port)]


def test_start_waits_while_the_server_answers_loading(tmp_path: Path,
                                                      started: list[ServerProcess]) -> None:
    server = LoadingServer(str(tmp_path / "d"))
    started.append(server)
    server.spawn()
    assert server.wait_ready(timeout=0.3) is False  # listening, but -LOADING
    assert server.alive
    assert server.wait_ready(timeout=5) is True


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    bad = StreamkeepServer(str(tmp_path / "d"), extra=["--no-such-flag"], start_timeout=10)
    with pytest.raises(ServerFailed, match="no-such-flag"):
        bad.start()
    assert not bad.alive


@pytest.mark.parametrize("kind", KINDS)
def test_the_compaction_moment_kills_a_rewrite_in_progress(
        kind: str, tmp_path: Path, started: list[ServerProcess]) -> None:
    server = make(kind, tmp_path)
    started.append(server)
    server.start()
    fill(server, 20000 if kind == "redis" else 5000)
    before = ids(server, b"fill")

    def moment() -> str:
        if not server.alive:
            server.start()
        return kill_during_compaction(server, random.Random(2), max_delay=0.005)

    description = retry(moment)
    assert "aof_rewrite_in_progress:1" in description
    assert not server.alive
    server.start()
    assert ids(server, b"fill") == before


def test_the_rotation_moment_kills_as_a_segment_appears(tmp_path: Path,
                                                        started: list[ServerProcess]) -> None:
    server = StreamkeepServer(str(tmp_path / "data"), segment_max_bytes=4096)
    started.append(server)
    server.start()
    writer = Writer(server)
    writer.start()
    description = kill_during_rotation(server, writer, random.Random(3), max_delay=0.2)
    writer.join(5)
    assert "segment-" in description and "appeared" in description
    assert len(server.segment_files()) >= 2
    server.start()
    survived = ids(server)
    assert survived[:len(writer.acked)] == writer.acked


def test_the_recovery_moment_kills_before_ready_and_the_restart_comes_up(
        tmp_path: Path, started: list[ServerProcess]) -> None:
    server = StreamkeepServer(str(tmp_path / "data"))
    started.append(server)
    server.start()
    fill(server, 3000)
    before = ids(server, b"fill")
    took = measure_recovery(server)
    rng = random.Random(4)
    description = retry(lambda: kill_during_recovery(server, rng, recovery_seconds=took))
    assert "into recovery" in description
    assert server.alive
    assert ids(server, b"fill") == before


def test_a_recovery_round_whose_kill_misses_is_a_restart(tmp_path: Path,
                                                         started: list[ServerProcess]) -> None:
    """The SIGKILL round's second kill, during recovery, cannot land when the recovery is over
    first (a long expected recovery here: the delay drawn is seconds, redis-server is up in
    milliseconds). That depends on the machine's load, not on the server: the server is up,
    its data whole, and the round says the kill missed (never "did not come back")."""
    server = RedisServer(str(tmp_path / "data"))
    started.append(server)
    server.start()
    fill(server, 500)
    before = ids(server, b"fill")
    server.kill()
    assert random.Random(2).uniform(0.0, 0.9 * 30.0) > 20.0  # the delay the call below draws
    description = sigkill.kill_during_recovery(server, random.Random(2), recovery_seconds=30.0)
    assert description.startswith("restarted; the kill during its recovery missed (ready after ")
    assert server.alive
    assert ids(server, b"fill") == before


@pytest.mark.parametrize("victim", ["replica", "primary"])
def test_the_replica_sync_moment_and_the_replica_catches_up(
        victim: str, tmp_path: Path, started: list[ServerProcess]) -> None:
    primary = StreamkeepServer(str(tmp_path / "p"))
    started.append(primary)
    primary.start()
    fill(primary, 3000)
    replica, description = kill_during_replica_sync(primary, str(tmp_path / "r"),
                                                    random.Random(5), victim=victim,
                                                    max_delay=0.3)
    started.append(replica)
    assert f"SIGKILL the {victim}" in description
    assert not (replica if victim == "replica" else primary).alive
    (replica if victim == "replica" else primary).start()
    fill(primary, 500, b"after")
    digest = wait_caught_up(primary, replica)
    assert digest
    assert replica_state(replica)["role"] == "slave"
    assert ids(replica, b"fill") == ids(primary, b"fill")
    with replica.target() as r, pytest.raises(CommandFailed, match="READONLY"):
        r.execute([b"XADD", b"x", b"*", b"f", b"v"])
