"""The servers a bench run starts: tools.servers' redis-server and ``streamkeep serve``, each
with its files in a temp dir of the bench's, removed at stop.

Owns what a bench adds to a server process: the temp dir (named as the bench's: one a
SIGKILLed bench left is swept by a later run), a redis-py client once the server answers,
Skip (with the server's last lines) when it cannot start, and the header lines describing it.
:class:`RedisServer` is the redis-py section's reference, without persistence;
:class:`RedisAofServer` the server section's, with an everysec AOF; :class:`StreamkeepServer`
``python -m streamkeep serve`` (a replica with ``replicaof``, another checkout's with
``python``), its data directory in the temp dir or an existing one, left in place.
Must not touch: the workloads run against them, the command line (a server is started as
``[python, "-m", "streamkeep", "serve", ...]``, never through the CLI's parser) or any data
outside their temp dirs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any, Self

from streamkeep.tools import servers, temporaries
from streamkeep.tools.bench.workload import Skip
from streamkeep.tools.servers import HOST, ServerFailed, ServerProcess

REDIS_AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")


def _redis_py() -> Any:
    """The redis-py module; Skip when it is not installed."""
    try:
        import redis
    except ImportError as exc:
        raise Skip("redis-py not installed") from exc
    return redis


class _BenchServer(ServerProcess):
    """A server in the temp dir `dir`; `client` (redis-py) once started."""

    dir: str | None = None
    client: Any = None

    def start(self) -> Self:
        """Start it and connect `client`; Skip (its temp dir removed) if it cannot start."""
        redis = _redis_py()
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
    """The reference for the server section: redis-server with ``--save "" --appendonly yes
    --appendfsync everysec`` (the AOF in its temp dir), so both servers persist alike; with
    another ``appendfsync`` (``always``: the lists section's durable-broker row) the same under
    that policy."""

    def __init__(self, appendfsync: str = "everysec") -> None:
        super().__init__(appendfsync=appendfsync)

    def describe(self) -> list[str]:
        args = REDIS_AOF_ARGS[:-1] + (str(self.appendfsync),)
        return [f"server: redis-server {self.version()} on {HOST}:{self.port} (started by this "
                f"bench: --save \"\" {' '.join(args)}, AOF in its temp dir)"]


class StreamkeepServer(_BenchServer, servers.StreamkeepServer):
    """``python -m streamkeep serve`` with a data directory in its temp dir (its working
    directory too), or the directory ``data`` (an existing one, e.g. a loaded snapshot; left in
    place); with ``replicaof`` (a primary's port on 127.0.0.1) a read-only replica of that
    primary. Started, it answers PING (a replica may still be syncing); stopped, its final
    fsync is given 15 s; :meth:`stop_process` stops the process alone, keeping its files."""

    name = "streamkeep"

    def __init__(self, appendfsync: str = "everysec", replicaof: int | None = None,
                 data: str | None = None, python: str = sys.executable) -> None:
        self.dir = temporaries.temp_directory_path(f"bench-serve-{appendfsync}")
        super().__init__(data or os.path.join(self.dir, "data"), appendfsync,
                         replicaof=replicaof, loglevel="warning", python=python, cwd=self.dir,
                         log_path=os.path.join(self.dir, "serve.log"))
        if replicaof is not None:
            self.name = "streamkeep replica"

    def version(self) -> str:
        words = self.banner().split()
        return words[1] if len(words) > 1 and words[0] == "streamkeep" else "?"

    def describe(self) -> list[str]:
        banner = self.banner()
        loop = "uvloop" if "(uvloop)" in banner else "asyncio" if banner else "?"
        replica = "" if self.replicaof is None else f" --replicaof {HOST} {self.replicaof}"
        return [f"server: streamkeep {self.version()} on {HOST}:{self.port}, a child process "
                f"({os.path.basename(self.python)} -m streamkeep serve --appendfsync "
                f"{self.appendfsync}{replica}; {loop}), data dir under {self.dir}, removed "
                f"after the run"]
