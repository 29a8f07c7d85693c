"""`streamkeep serve` as a real child process for tests: `ServeProcess(datadir, *args)` starts
it on a free loopback port and waits for its "listening" line; `limits` applies resource limits
(`ulimit`) to the child only; `cwd` is its working directory (default the checkout);
`rss_bytes()` reads its resident set from /proc; `output()` is
everything it printed (stdout and stderr). The `spawn` fixture in tests that use it kills every
child at the end."""

from __future__ import annotations

import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from streamkeep.tools.bench.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 15.0
EXIT_TIMEOUT = 10.0

Limits = dict[int, tuple[int, int]]  # resource.RLIMIT_* -> (soft, hard)


def _apply(limits: Limits) -> Callable[[], None]:
    def preexec() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, value)

    return preexec


class ServeProcess:
    """One `streamkeep serve` child; its output (stdout and stderr) is collected in `lines`."""

    def __init__(self, datadir: Path | str | None, *args: str, port: int | None = None,
                 limits: Limits | None = None, host: str = "127.0.0.1",
                 cwd: Path | None = None) -> None:
        self.host = host  # where it listens (`--bind` or its config file says so)
        self.port = free_port() if port is None else port
        where = [] if datadir is None else ["--dir", str(datadir)]  # None: --config's
        argv = [sys.executable, "-m", "streamkeep", "serve", *where, *args]
        if port is None:
            argv += ["--port", str(self.port)]
        self.proc = subprocess.Popen(argv, cwd=cwd or ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_apply(limits) if limits else None)
        self.lines: list[str] = []
        self.listening = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.listening.wait(START_TIMEOUT):
            self.kill()
            raise AssertionError(f"streamkeep serve did not start:\n{self.output()}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if " listening on " in line:
                self.listening.set()
        self.listening.set()  # exited: wake the starter, which then sees no port

    def output(self) -> str:
        return "".join(self.lines)

    def wait_output(self, text: str, timeout: float = 10.0) -> str:
        """The output once it holds `text`: the reader thread may not have read a line the
        server has already written (a busy machine), so a test waits for it, bounded."""
        deadline = time.monotonic() + timeout
        while text not in self.output() and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.output()

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, retry=Retry(NoBackoff(), 0),
                           **kwargs)

    def rss_bytes(self) -> int:
        """The child's resident set size now (VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS line")

    def cpu_seconds(self) -> float:
        """The CPU time the child's threads have used so far: what a growth check compares,
        since a busy machine delays a process but hardly adds to it."""
        from streamkeep.tools.bench.processes import cpu_seconds

        seconds = cpu_seconds(self.proc.pid)
        assert seconds is not None, f"no CPU time for pid {self.proc.pid}"
        return seconds

    def wait(self, timeout: float = EXIT_TIMEOUT) -> int:
        rc = self.proc.wait(timeout)
        self.reader.join(5)
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.reader.join(5)


def spawner() -> tuple[Callable[..., ServeProcess], Callable[[], None]]:
    """A `start(datadir, *args, port=None, limits=None, host=...)` that starts a ServeProcess,
    and a `cleanup()` that kills every process it started (the `spawn` fixture in
    tests/conftest)."""
    started: list[ServeProcess] = []

    def start(datadir: Path, *args: str, port: int | None = None,
              limits: Limits | None = None, host: str = "127.0.0.1") -> ServeProcess:
        proc = ServeProcess(datadir, *args, port=port, limits=limits, host=host)
        started.append(proc)
        assert proc.proc.poll() is None, proc.output()
        return proc

    def cleanup() -> None:
        for proc in started:
            proc.kill()

    return start, cleanup


__all__ = ["EXIT_TIMEOUT", "ROOT", "START_TIMEOUT", "ServeProcess", "free_port", "spawner"]
