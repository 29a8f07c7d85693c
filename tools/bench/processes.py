"""The child processes a bench run starts and stops: redis-server and ``streamkeep serve``.

Owns :func:`free_port` (a free 127.0.0.1 port), :func:`cpu_seconds` (a process's CPU time so
far, from /proc), :class:`RedisServer` (a throw-away redis-server: the redis-py section's
reference without persistence, :class:`RedisAofServer` the server section's with an everysec
AOF) and :class:`StreamkeepServer` (``python -m streamkeep serve`` as a child process), each on
a free loopback port with its files in a temp dir removed at stop. Each is in a session of its
own and dies with the bench (tools.temporaries: even a bench SIGKILLed leaves none running; its
temp dir, named as the bench's, is swept by a later run).
Must not touch: the workloads run against them, the command line (a server is started as
``[sys.executable, "-m", "streamkeep", "serve", ...]``, never through the CLI's parser) or any
data outside their temp dirs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.workload import Skip

HOST = "127.0.0.1"
REDIS_AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now (it may be taken before it is bound:
    the servers below retry on another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds a process's threads have run so far (Linux: the nanosecond schedstat of
    each thread, else the tick-granular user + system time), None if unknown."""
    if pid is None:
        return None
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def log_tail(path: str, lines: int = 5) -> str:
    """The last lines of a child's log file, "" if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


class RedisServer:
    """A throw-away ``redis-server`` on a free 127.0.0.1 port: no RDB, no AOF (unless
    ``persistence`` says otherwise), temp dir."""

    STARTUP_TIMEOUT = 10.0
    STOP_TIMEOUT = 5.0  # after SIGTERM, before SIGKILL
    ATTEMPTS = 5
    name = "redis-server"

    def __init__(self, binary: str = "redis-server",
                 persistence: Sequence[str] = ("--appendonly", "no")) -> None:
        self.binary = binary
        self.persistence = tuple(persistence)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None
        self.client: Any = None

    def start(self) -> Any:
        """Start the server and return a connected redis-py client; raises Skip if impossible."""
        redis = _redis_py()
        path = shutil.which(self.binary)
        if path is None:
            raise Skip(f"{self.binary} not found on PATH")
        self.dir = temporaries.temp_directory_path("bench-redis")
        log = os.path.join(self.dir, "redis.log")
        for _ in range(self.ATTEMPTS):  # a free port can be taken before redis binds it
            self.port = free_port()
            self.proc = subprocess.Popen(
                [path, "--port", str(self.port), "--bind", HOST, "--save", "",
                 *self.persistence, "--dir", self.dir, "--logfile", log],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                **temporaries.child_options())
            temporaries.track(self.proc)
            client = redis.Redis(host=HOST, port=self.port, socket_connect_timeout=1)
            if self._wait(client):
                self.client = client
                return client
            client.close()
            self._stop_process()
        tail = log_tail(log)
        self.stop()
        raise Skip(f"redis-server did not start: {tail or 'no log'}")

    def _wait(self, client: Any) -> bool:
        import redis

        deadline = time.monotonic() + self.STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False  # exited, e.g. the port was taken
            try:
                if client.ping():
                    return True
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.02)
        return False

    def version(self) -> str:
        return str(self.client.info("server").get("redis_version", "?")) if self.client else "?"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _stop_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        # SIGTERM: a clean shutdown; SIGKILL if it lingers (what it forked too)
        temporaries.end_child(proc, self.STOP_TIMEOUT, signal.SIGTERM)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self._stop_process()
        if self.dir is not None:
            temporaries.remove(self.dir)
            self.dir = None


def _redis_py() -> Any:
    """The redis-py module; Skip when it is not installed."""
    try:
        import redis
    except ImportError as exc:
        raise Skip("redis-py not installed") from exc
    return redis


class RedisAofServer(RedisServer):
    """The reference for the server section: redis-server with ``--save "" --appendonly yes
    --appendfsync everysec`` (the AOF in its temp dir), so both servers persist alike."""

    def __init__(self) -> None:
        super().__init__(persistence=REDIS_AOF_ARGS)

    def start(self) -> RedisAofServer:  # type: ignore[override]
        super().start()
        return self

    def describe(self) -> list[str]:
        return [f"server: redis-server {self.version()} on {HOST}:{self.port} (started by this "
                f"bench: --save \"\" {' '.join(REDIS_AOF_ARGS)}, AOF in its temp dir)"]


class StreamkeepServer(RedisServer):
    """``python -m streamkeep serve`` as a child process on a free 127.0.0.1 port, with a data
    directory in a temp dir (its working directory too; removed at stop), or the directory
    ``data`` (an existing one, e.g. a loaded snapshot; left in place); with ``replicaof`` (a
    primary's port on 127.0.0.1) it starts as a read-only replica of that primary
    (``--replicaof``). Started, it answers PING (a replica may still be syncing). Stopping it is
    RedisServer's (SIGTERM, then its final fsync is given longer); :meth:`stop_process` stops
    the process alone, keeping its files."""

    STARTUP_TIMEOUT = 30.0
    STOP_TIMEOUT = 15.0
    ATTEMPTS = 3
    name = "streamkeep"

    def __init__(self, appendfsync: str = "everysec", replicaof: int | None = None,
                 data: str | None = None) -> None:
        super().__init__()
        self.appendfsync = appendfsync
        self.replicaof = replicaof
        self.given_data = data
        self.data = ""  # its data directory, once started
        self.banner = ""  # its "listening on" line
        if replicaof is not None:
            self.name = "streamkeep replica"

    def command(self, data: str) -> list[str]:
        replica = [] if self.replicaof is None else ["--replicaof", HOST, str(self.replicaof)]
        return [sys.executable, "-m", "streamkeep", "serve", "--dir", data, "--port",
                str(self.port), "--bind", HOST, "--appendfsync", self.appendfsync,
                *replica, "--loglevel", "warning"]

    def start(self) -> StreamkeepServer:
        redis = _redis_py()
        self.dir = temporaries.temp_directory_path(f"bench-serve-{self.appendfsync}")
        log = os.path.join(self.dir, "serve.log")
        for attempt in range(self.ATTEMPTS):  # a free port can be taken before it binds
            self.port = free_port()
            data = self.data = self.given_data or os.path.join(self.dir, f"data{attempt}")
            with open(log, "ab") as out:
                self.proc = subprocess.Popen(self.command(data), cwd=self.dir,
                                             stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                             **temporaries.child_options())
            temporaries.track(self.proc)
            client = redis.Redis(host=HOST, port=self.port, socket_connect_timeout=1)
            if self._wait(client):
                self.client = client
                self.banner = next((ln for ln in log_tail(log, 50).splitlines()
                                    if " listening on " in ln), "")
                return self
            client.close()
            self._stop_process()
        tail = log_tail(log)
        self.stop()
        raise Skip(f"streamkeep serve did not start: {tail or 'no log'}")

    def version(self) -> str:
        words = self.banner.split()
        return words[1] if len(words) > 1 and words[0] == "streamkeep" else "?"

    def stop_process(self) -> None:
        """Stop the process (SIGTERM: a clean shutdown), keeping its data directory."""
        if self.client is not None:
            self.client.close()
            self.client = None
        self._stop_process()

    def describe(self) -> list[str]:
        loop = "uvloop" if "(uvloop)" in self.banner else "asyncio" if self.banner else "?"
        replica = "" if self.replicaof is None else f" --replicaof {HOST} {self.replicaof}"
        return [f"server: streamkeep {self.version()} on {HOST}:{self.port}, a child process "
                f"({os.path.basename(sys.executable)} -m streamkeep serve --appendfsync "
                f"{self.appendfsync}{replica}; {loop}), data dir under {self.dir}, removed "
                f"after the run"]
