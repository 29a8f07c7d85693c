"""Shared fixtures: a real redis-server per test session (per xdist worker).

* ``redis_server``       session-scoped; object with ``.host`` and ``.port``.
* ``redis_client``       redis-py client (RESP2, bytes replies) after FLUSHALL.
* ``start_redis``        starts redis-servers of the test's own, with extra options.
* ``redis_raw``          :class:`tests.support.resp_client.RespClient` after FLUSHALL;
                         replies keep their exact RESP type.
* ``redis_raw_factory``  callable opening extra RespClient connections (for
                         blocking tests); all are closed at teardown.
* ``backend``            parametrized "embedded" / "server": ``backend(engine)`` returns
                         the engine itself, or a ``tests.support.diffutil.ServedEngine``
                         (the engine behind an in-process streamkeep server, driven over a
                         socket). Differential suites take it so every test runs both ways.
* ``served``             a fresh in-process streamkeep server on a fresh engine
                         (``tests.support.server_util.ServerHandle``).
* ``sk``                 a RESP2 RespClient connected to ``served``.
* ``shared_dir``         a directory for ``Engine.open(path, shared=True)``; the shared
                         servers it started are stopped at teardown.

A missing redis-server is a hard failure, not a skip: the comparison tests
are the point of the suite.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamkeep.tools.servers import RedisServer as RedisProcess
from streamkeep.tools.servers import ServerFailed
from tests.support.resp_client import RespClient, client_factory
from tests.support.serve_process import ServeProcess, spawner

# Every Spark JVM the suite starts (sessions here, export commands in child processes, which
# inherit it) runs small exports: the JIT's first tier compiles enough, and its second tier's
# compiler threads cost more CPU than they save (a 25-entry export: 17 s of CPU against 30).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

if TYPE_CHECKING:
    from streamkeep import Engine

REDIS_HOST = "127.0.0.1"
STARTUP_TIMEOUT = 10.0
_LOGS = itertools.count()

REDIS_FIXTURES = {"redis_server", "redis_client", "redis_raw", "redis_raw_factory",
                  "start_redis"}


def pytest_configure(config: pytest.Config) -> None:
    # Every in-process command run checks that the effects its handler logs are declared.
    from tests.support import declared_effects

    declared_effects.install()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--cold-nodes", action="store_true",
                     help="run every engine with its stream nodes cold: read back from a "
                          "snapshot after every command (tests.support.cold_nodes)")


@pytest.fixture(autouse=True, scope="session")
def _cold_nodes(request: pytest.FixtureRequest) -> None:
    """--cold-nodes: every engine of the run settles after each command (before any is made:
    session-scoped, so a module's engine fixture is one of them)."""
    if request.config.getoption("--cold-nodes"):
        from tests.support.cold_nodes import install

        install()


@dataclass
class RedisServer:
    host: str
    port: int
    process: subprocess.Popen
    dir: Path
    log_path: Path
    owner: RedisProcess  # (tools.servers: it stops it)

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "<no log>"
        return "\n".join(lines[-n:])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a real-redis fixture get the ``redis`` marker automatically."""
    for item in items:
        if REDIS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.redis)


def _stop(server: RedisServer) -> None:
    server.owner.stop(5.0)


def _start_redis(binary: str, workdir: Path, extra: tuple[str, ...] = (),
                 port: int | None = None) -> RedisServer:
    """A redis-server (tools.servers: a free port, another if that one was taken before it
    bound it; ready once PING answers) with no persistence unless `extra` says so, in
    `workdir`; the test's own (untracked: a command run in process does not end it)."""
    log = workdir / f"redis-{next(_LOGS)}.log"  # (servers of one test share its workdir)
    owner = RedisProcess(str(workdir), None, port, binary=binary, extra=extra,
                         log_path=str(log), start_timeout=STARTUP_TIMEOUT, stop_timeout=5.0,
                         track=False)
    try:
        owner.start()
    except ServerFailed as err:
        pytest.fail(f"{err}\n{owner.log_tail(40)}", pytrace=False)
    assert owner.proc is not None and owner.log_path is not None
    return RedisServer(REDIS_HOST, owner.port, owner.proc, workdir, Path(owner.log_path),
                       owner)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail(
            "redis-server not found on PATH; install it (make dev does: "
            "apt-get install redis-server redis-tools)",
            pytrace=False,
        )
    # tmp_path_factory is per xdist worker, so each worker gets its own dir and server.
    workdir = tmp_path_factory.mktemp("redis-server")
    server = _start_redis(binary, workdir)
    try:
        yield server
    finally:
        _stop(server)


@pytest.fixture
def start_redis(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Starts redis-servers of this test's own: `start_redis("--repl-diskless-sync", "no")`
    (its options after the defaults), `port=` to start one again on the port of one the
    test stopped. All are stopped at teardown."""
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server not found on PATH (make test installs it)"
    started: list[RedisServer] = []

    def start(*extra: str, port: int | None = None) -> RedisServer:
        server = _start_redis(binary, tmp_path, extra, port)
        started.append(server)
        return server

    yield start
    for server in started:
        _stop(server)


@pytest.fixture
def redis_client(redis_server: RedisServer):
    import redis

    client = redis.Redis(
        host=redis_server.host,
        port=redis_server.port,
        protocol=2,
        decode_responses=False,
    )
    client.flushall()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def redis_raw(redis_server: RedisServer) -> Iterator[RespClient]:
    client = RespClient(redis_server.host, redis_server.port)
    try:
        client.execute("FLUSHALL")
        yield client
    finally:
        client.close()


@pytest.fixture
def redis_raw_factory(redis_server: RedisServer) -> Iterator[Callable[..., RespClient]]:
    """``factory(timeout=DEFAULT_TIMEOUT) -> RespClient``; closed at teardown.

    The database is flushed once when the fixture is set up (like ``redis_raw``);
    connections opened later by the test are not flushed.
    """
    with RespClient(redis_server.host, redis_server.port) as c:
        c.execute("FLUSHALL")
    with client_factory(redis_server) as factory:
        yield factory


@pytest.fixture(params=["embedded", "server"])
def backend(request: pytest.FixtureRequest) -> Iterator[Callable[[Engine], Any]]:
    """``backend(engine)``: the engine as the test drives it (see the module docstring)."""
    from tests.support.diffutil import ServedEngine

    served: list[ServedEngine] = []

    def wrap(engine: Engine) -> Any:
        if request.param == "embedded":
            return engine
        target = ServedEngine(engine)
        served.append(target)
        return target

    try:
        yield wrap
    finally:
        for target in served:
            target.close()


@pytest.fixture
def served() -> Iterator[Any]:
    """A fresh in-memory engine behind a fresh streamkeep server on a loopback port (stopped,
    and its engine closed, at teardown): tests.support.server_util.ServerHandle."""
    from streamkeep import Engine
    from tests.support.server_util import start_server

    handle = start_server(Engine())
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def sk(served: Any) -> Iterator[RespClient]:
    """A RESP2 connection to ``served`` (a fresh in-process streamkeep server)."""
    client = RespClient(served.host, served.port, timeout=10)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., ServeProcess]]:
    """`spawn(datadir, *serve_args, port=None, limits=None)`: a `streamkeep serve` child
    process (tests/support/serve_process.py), killed at the end of the test."""
    start, cleanup = spawner()
    try:
        yield start
    finally:
        cleanup()


@pytest.fixture
def shared_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh data directory's path for Engine.open(path, shared=True): every shared server
    of it still running at the end of the test is stopped (tests/support/shared_dirs.py)."""
    from tests.support.shared_dirs import stop_servers

    path = tmp_path / "shared-data"
    try:
        yield path
    finally:
        stop_servers(path)
