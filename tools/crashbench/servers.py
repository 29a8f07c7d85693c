"""The crash bench's server processes: `StreamkeepServe` (``python -m streamkeep serve``) and
`RedisServe` (redis-server with an AOF), each on a fixed loopback port and a data directory that
outlives the process, so the bench can SIGKILL one and restart it on the same files.

Owns starting a server (ready once PING answers +PONG: Redis answers -LOADING while it replays
its AOF, streamkeep does not listen until it has replayed), SIGKILLing it with everything it
forked (each server leads its own process group: a compaction or rewrite child dies with it,
as in a power loss, instead of writing on into the directory), reaping it, and reading INFO.
Must not touch: the data directory's files (only the server does), the workload and the checks.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import HOST, free_port, log_tail
from streamkeep.tools.crashbench.client import RespTarget
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost

START_TIMEOUT = 30.0
POLL = 0.01
# Every server in its own session outlives a bench that dies with an exception (or a signal):
# these are killed when the bench's mode ends and at exit (a bench itself SIGKILLed takes them
# with it: tools.temporaries.child_options). Held strongly: a server whose object an exception
# dropped is still killed.
_RUNNING: set[ServerProcess] = set()


@atexit.register
def kill_all() -> None:
    """SIGKILL every server this process started and has not killed yet."""
    for server in list(_RUNNING):
        server.kill()


# A PING left unanswered this long is "not ready": a streamkeep serve still replaying at
# start-up holds the connection (it listens first) without reading it, and a probe that
# waited for the replay's end would find it ready when the moment to kill it has passed. A
# busy server that answers later is simply probed again.
PROBE_TIMEOUT = 0.1


class ServerFailed(StreamkeepError):
    """A server would not start (it exited, or did not answer in time): the log's tail."""


class ServerProcess:
    """One server kind's process on `data_dir` and `port` (chosen once: a replica and the bench's
    clients find the same server again after a restart). Subclasses give `command()`."""

    name = "server"

    def __init__(self, data_dir: str, port: int | None = None, log_path: str | None = None,
                 start_timeout: float = START_TIMEOUT) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.port = free_port() if port is None else port
        self.fixed_port = port is not None
        # Beside the data directory, never in it (the server owns that), and a file, never a
        # pipe: a pipe nobody drains blocks the server once it fills.
        self.log_path = log_path or self.data_dir + ".log"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the process and return at once (it may still be replaying: `wait_ready`)."""
        if self.alive:
            raise ServerFailed(f"{self.name} on port {self.port} is already running")
        os.makedirs(self.data_dir, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # (a session of its own, and killed with the bench even when that is SIGKILLed)
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log, **temporaries.child_options())
        self.starts += 1
        _RUNNING.add(self)

    def start(self) -> ServerProcess:
        """Start the server; return once it answers PING (not -LOADING). A first start whose
        port was taken meanwhile retries on another free port."""
        for _attempt in range(3):
            self.spawn()
            if self.wait_ready():
                return self
            if self.alive or self.fixed_port or self.starts > 1:
                break
            self.port = free_port()  # most likely the port was taken before it was bound
        self.kill()
        raise ServerFailed(f"{self.name} did not start on port {self.port}: "
                           f"{log_tail(self.log_path, 10) or 'no log'}")

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Poll PING until +PONG; False if the process exits or `timeout` passes first."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            if not self.alive:
                return False
            if self.ready():
                return True
            time.sleep(POLL)
        return False

    def ready(self) -> bool:
        """One probe: does it answer PING with PONG now (not refused, not -LOADING, not left
        unanswered: `streamkeep serve` listens before it replays, and answers once it has)?"""
        try:
            with RespTarget(HOST, self.port, connect_timeout=0.5, timeout=PROBE_TIMEOUT) as t:
                return bool(t.execute([b"PING"]) == "PONG")
        except (ConnectionLost, CommandFailed):  # not listening yet, replaying, or -LOADING
            return False

    def kill(self) -> None:
        """SIGKILL the server and everything it forked, and reap it."""
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        _RUNNING.discard(self)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), SIGKILL if it takes over 15 s."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self) -> ServerProcess:
        if self.alive:
            self.kill()
        return self.start()

    def target(self, timeout: float = 10.0) -> RespTarget:
        """A fresh connection (ConnectionLost if the server is not there)."""
        return RespTarget(HOST, self.port, timeout=timeout)

    def info(self, section: str) -> dict[str, str]:
        """INFO `section`'s fields as written ("name" -> "value")."""
        with self.target() as t:
            text = t.execute([b"INFO", section.encode()])
        return dict(line.split(":", 1) for line in bytes(text).decode().split("\r\n")
                    if ":" in line and not line.startswith("#"))

    def log_tail(self, lines: int = 10) -> str:
        return log_tail(self.log_path, lines)

    def remove_files(self) -> None:
        """Delete the data directory and the log (the process must be gone)."""
        if self.alive:
            raise ServerFailed("remove_files on a running server")
        shutil.rmtree(self.data_dir, ignore_errors=True)
        for path in (self.log_path, self.data_dir + ".conf"):
            if os.path.exists(path):
                os.remove(path)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class StreamkeepServe(ServerProcess):
    """``python -m streamkeep serve`` on `data_dir`. `segment_max_bytes` small makes the AOF
    rotate every few commands; `rewrite_min_size`/`rewrite_percentage` are the automatic
    compaction thresholds (Redis's auto-aof-rewrite-*; percentage 0 turns it off), written to a
    config file beside the data directory; `replicaof` a primary's port on 127.0.0.1."""

    name = "streamkeep serve"

    def __init__(self, data_dir: str, appendfsync: str = "always", port: int | None = None,
                 segment_max_bytes: int | None = None, rewrite_min_size: str | None = None,
                 rewrite_percentage: int | None = None, replicaof: int | None = None,
                 extra: Sequence[str] = (), log_path: str | None = None,
                 start_timeout: float = START_TIMEOUT) -> None:
        super().__init__(data_dir, port, log_path, start_timeout)
        self.appendfsync = appendfsync
        self.segment_max_bytes = segment_max_bytes
        self.rewrite_min_size = rewrite_min_size
        self.rewrite_percentage = rewrite_percentage
        self.replicaof = replicaof
        self.extra = tuple(extra)

    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "streamkeep", "serve", "--dir", self.data_dir,
                "--port", str(self.port), "--bind", HOST, "--appendfsync", self.appendfsync,
                "--loglevel", "notice"]
        if self.segment_max_bytes is not None:
            argv += ["--aof-segment-max-bytes", str(self.segment_max_bytes)]
        conf = self._config_lines()
        if conf:
            path = self.data_dir + ".conf"
            with open(path, "w") as f:
                f.write("".join(line + "\n" for line in conf))
            argv += ["--config", path]
        if self.replicaof is not None:
            argv += ["--replicaof", HOST, str(self.replicaof)]
        return argv + list(self.extra)

    def _config_lines(self) -> list[str]:
        lines = []
        if self.rewrite_min_size is not None:
            lines.append(f"auto-aof-rewrite-min-size {self.rewrite_min_size}")
        if self.rewrite_percentage is not None:
            lines.append(f"auto-aof-rewrite-percentage {self.rewrite_percentage}")
        return lines

    def segment_files(self) -> list[str]:
        """The AOF segment files in the data directory now, in name order."""
        try:
            names = os.listdir(self.data_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.startswith("segment-") and n.endswith(".aof"))


class RedisServe(ServerProcess):
    """redis-server with ``--appendonly yes --appendfsync <policy> --save ''`` on `data_dir`
    (its AOF, appendonlydir/, survives restarts), logging to a file."""

    name = "redis-server"

    def __init__(self, data_dir: str, appendfsync: str = "always", port: int | None = None,
                 binary: str = "redis-server", extra: Sequence[str] = (),
                 log_path: str | None = None, start_timeout: float = START_TIMEOUT) -> None:
        super().__init__(data_dir, port, log_path, start_timeout)
        path = shutil.which(binary)
        if path is None:
            raise ServerFailed(f"{binary} not found on PATH")
        self.binary = path
        self.appendfsync = appendfsync
        self.extra = tuple(extra)

    def command(self) -> list[str]:
        return [self.binary, "--port", str(self.port), "--bind", HOST, "--dir", self.data_dir,
                "--appendonly", "yes", "--appendfsync", self.appendfsync, "--save", "",
                "--logfile", self.log_path, "--daemonize", "no", *self.extra]
