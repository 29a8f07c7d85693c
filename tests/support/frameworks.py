"""The servers and child processes of tests/frameworks: a `Target` is one server the same
framework scenario runs against (a `streamkeep serve` child process or a real redis-server), and
`Children` starts the scenario's own Python child processes (workers, lock holders) so a test can
SIGKILL them and reaps whatever is left at teardown.

Running this module (`python -m tests.support.frameworks URL KEY TTL`) is a lock holder: it takes
redis-py's `Lock` on KEY with a TTL of TTL seconds, prints its token, and keeps the lock alive by
re-acquiring it (a heartbeat, as a real holder does) until it is killed. It touches nothing but the
server it is given.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import redis

from tests.support.serve_process import ROOT

# A heartbeat many times shorter than the TTL: a busy machine may pause the holder for a while
# without its lock lapsing.
HEARTBEATS_PER_TTL = 30
CHILD_START_TIMEOUT = 30.0


@dataclass
class Target:
    """One server: `name` is "streamkeep" or "redis-server"."""

    name: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, socket_timeout=30)


@dataclass
class Children:
    """The scenario's child processes (`python -m <module> <args>`, run from the project's root
    so `tests.support` imports); `read=True` gives one a stdout pipe the test reads (a pipe
    nobody reads would stall a chatty child once full)."""

    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self, module: str, *args: str, read: bool = False) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if read else subprocess.DEVNULL, text=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def sigkill(proc: subprocess.Popen[str]) -> None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(CHILD_START_TIMEOUT)

    def reap(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self.sigkill(proc)
            if proc.stdout is not None:
                proc.stdout.close()


def hold_lock(url: str, key: str, ttl: float) -> None:
    client = redis.Redis.from_url(url)
    lock = client.lock(key, timeout=ttl)
    if not lock.acquire(blocking=True, blocking_timeout=CHILD_START_TIMEOUT):
        raise SystemExit(f"could not take {key}")
    token = lock.local.token
    print(token.decode() if isinstance(token, bytes) else token, flush=True)
    while True:
        time.sleep(ttl / HEARTBEATS_PER_TTL)
        lock.reacquire()


if __name__ == "__main__":
    hold_lock(sys.argv[1], sys.argv[2], float(sys.argv[3]))
