"""The servers a bench run starts and stops, all through this module: tools.servers' redis-server
and ``streamkeep serve``, each in a temp dir of the bench's, with a redis-py ``client``, Skip
when it cannot start; the run's shared pair (:func:`streamkeep`, :func:`redis_aof`) and a row's
own (:func:`running`). Must not touch: the workloads, data outside their dirs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self

from streamkeep.tools import servers, temporaries
from streamkeep.tools.bench.workload import Skip
from streamkeep.tools.servers import HOST, ServerFailed, ServerProcess

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

REDIS_AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")


class _BenchServer(ServerProcess):
    """A server in the temp dir `dir`; `client` (redis-py) once started."""

    dir: str | None = None
    client: Any = None

    def start(self) -> Self:
        """Start it and connect `client`; Skip (its temp dir removed) if it cannot start."""
        try:
            import redis
        except ImportError as exc:
            raise Skip("redis-py not installed") from exc
        try:
            super().start()
        except ServerFailed as err:
            self.stop()
            raise Skip(str(err)) from None
        self.client = redis.Redis(host=HOST, port=self.port, socket_connect_timeout=1)
        return self

    def stop_process(self) -> None:
        """Stop the process (SIGTERM: a clean shutdown), keeping its files."""
        if self.client is not None:
            self.client.close()
            self.client = None
        super().stop()

    def stop(self, timeout: float | None = None) -> None:
        self.stop_process()
        if self.dir is not None:
            temporaries.remove(self.dir)
            self.dir = None


class RedisServer(_BenchServer, servers.RedisServer):
    """A throw-away ``redis-server``: no RDB, no AOF unless `appendfsync` (or `persistence`,
    more arguments) says otherwise."""

    def __init__(self, binary: str = "redis-server", persistence: Sequence[str] = (),
                 appendfsync: str | None = None) -> None:
        self.dir = temporaries.temp_directory_path("bench-redis")
        try:
            super().__init__(self.dir, appendfsync, binary=binary, extra=persistence,
                             log_path=os.path.join(self.dir, "redis.log"), start_timeout=10.0,
                             stop_timeout=5.0)
        except ServerFailed as err:  # not installed
            self.stop()
            raise Skip(str(err)) from None


class RedisAofServer(RedisServer):
    """The server sections' reference: redis-server ``--save "" --appendonly yes
    --appendfsync everysec`` (or another policy), so both servers persist alike."""

    def __init__(self, appendfsync: str = "everysec") -> None:
        super().__init__(appendfsync=appendfsync)

    def describe(self) -> list[str]:
        args = REDIS_AOF_ARGS[:-1] + (str(self.appendfsync),)
        return [f"server: redis-server {self.version()} on {HOST}:{self.port} (started by this "
                f"bench: --save \"\" {' '.join(args)}, AOF in its temp dir)"]


class StreamkeepServer(_BenchServer, servers.StreamkeepServer):
    """``python -m streamkeep serve`` with a data directory in its temp dir, or the existing
    directory ``data`` (left in place); with ``replicaof`` (a primary's port) a replica; under
    ``python`` another checkout's. Stopped, its final fsync is given 15 s."""

    name = "streamkeep"

    def __init__(self, appendfsync: str = "everysec", replicaof: int | None = None,
                 data: str | None = None, python: str = sys.executable,
                 extra: Sequence[str] = ()) -> None:
        self.dir = temporaries.temp_directory_path(f"bench-serve-{appendfsync}")
        super().__init__(data or os.path.join(self.dir, "data"), appendfsync,
                         replicaof=replicaof, loglevel="warning", python=python, cwd=self.dir,
                         log_path=os.path.join(self.dir, "serve.log"), extra=extra)
        if replicaof is not None:
            self.name = "streamkeep replica"

    def version(self) -> str:
        words = self.banner().split()
        return words[1] if len(words) > 1 and words[0] == "streamkeep" else "?"

    def describe(self) -> list[str]:
        banner = self.banner()
        loop = "uvloop" if "(uvloop)" in banner else "asyncio" if banner else "?"
        replica = "" if self.replicaof is None else f" --replicaof {HOST} {self.replicaof}"
        replica += "".join(f" {arg}" for arg in self.extra)
        return [f"server: streamkeep {self.version()} on {HOST}:{self.port}, a child process "
                f"({os.path.basename(self.python)} -m streamkeep serve --appendfsync "
                f"{self.appendfsync}{replica}; {loop}), data dir under {self.dir}, removed "
                f"after the run"]


def streamkeep(env: BenchEnv, appendfsync: str = "everysec") -> StreamkeepServer:
    """The run's ``streamkeep serve`` child under that policy (started on first use)."""
    return env.shared(f"streamkeep serve --appendfsync {appendfsync}",  # type: ignore[no-any-return]
                      lambda: StreamkeepServer(appendfsync).start())


def cluster_node(env: BenchEnv) -> StreamkeepServer:
    """The run's ``streamkeep serve --cluster-enabled yes``: a cluster node alone (every slot
    its own), its settings otherwise the shared server's."""
    return env.shared("streamkeep serve --cluster-enabled yes",  # type: ignore[no-any-return]
                      lambda: StreamkeepServer(extra=("--cluster-enabled", "yes")).start())


def redis_aof(env: BenchEnv, appendfsync: str = "everysec") -> RedisAofServer:
    """The run's reference for the server sections: redis-server with an AOF under that
    policy (Skip with --no-redis)."""
    if not env.use_redis:
        raise Skip("disabled (--no-redis)")
    name = "redis-server --appendonly yes" + (
        "" if appendfsync == "everysec" else f" --appendfsync {appendfsync}")
    return env.shared(name, lambda: RedisAofServer(appendfsync).start())  # type: ignore[no-any-return]


@contextlib.contextmanager
def running(*made: _BenchServer) -> Iterator[Any]:
    """Servers of one row: each started in turn, all stopped (last first, their temp dirs
    removed) when the block ends, however it ends. Yields the first, or the tuple of them."""
    try:
        for server in made:
            server.start()
        yield made[0] if len(made) == 1 else made
    finally:
        for server in reversed(made):
            server.stop()
