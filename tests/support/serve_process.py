"""`streamkeep serve` as a real child process for tests: `ServeProcess(datadir, *args)` starts
it (tools.servers.StreamkeepServer, with the serve defaults: no --bind, --appendfsync or
--loglevel of its own) on a free loopback port and waits for its "listening" line; `limits`
applies resource limits (`ulimit`) to the child only; `cwd` is its working directory (default
the checkout); `rss_bytes()` reads its resident set from /proc; `output()` is everything it
printed (stdout and stderr). The `spawn` fixture in tests that use it kills every child at the
end."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from streamkeep.tools.servers import (
    EXIT_TIMEOUT,
    LISTENING,
    Limits,
    ServerFailed,
    StreamkeepServer,
    free_port,
)

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 15.0


class ServeProcess(StreamkeepServer):
    """One `streamkeep serve` child, started; its output (stdout and stderr) is collected in
    `lines`. `port` given: the arguments (a config file) say it, and no --port is added."""

    proc: Any  # started in __init__: never None

    def __init__(self, datadir: Path | str | None, *args: str, port: int | None = None,
                 limits: Limits | None = None, host: str = "127.0.0.1",
                 cwd: Path | None = None) -> None:
        super().__init__("" if datadir is None else str(datadir), appendfsync=None,
                         port=port, bind=None, loglevel=None, extra=args, capture=True,
                         ready_line=LISTENING, cwd=str(cwd or ROOT), host=host, limits=limits,
                         start_timeout=START_TIMEOUT, track=False)
        try:
            self.start()
        except ServerFailed:
            raise AssertionError(f"streamkeep serve did not start:\n{self.output()}") from None

    def command(self) -> list[str]:
        argv = super().command()
        if self.fixed_port:  # (the config file's)
            at = argv.index("--port")
            del argv[at:at + 2]
        return argv

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

    def cpu_seconds(self) -> float:
        """The CPU time the child's threads have used so far: what a growth check compares,
        since a busy machine delays a process but hardly adds to it."""
        seconds = super().cpu_seconds()
        assert seconds is not None, f"no CPU time for pid {self.pid}"
        return seconds


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
