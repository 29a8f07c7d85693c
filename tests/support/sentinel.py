"""Redis Sentinel around `streamkeep serve` nodes, for tests/ha: real `redis-sentinel` processes
(Debian's; `make test` installs it) and a writer that follows the primary through redis-py's
`Sentinel.master_for`.

* `Sentinels(workdir)`: `start(n, name, host, port, quorum, down_after_ms, failover_timeout_ms,
  auth_pass)` starts n sentinels monitoring that primary (each on a free loopback port, its own
  config file and log), `client(i)`, `each(*argv)` (one command on every sentinel), `logs()`; `kill_all()`
  SIGKILLs them (the test's fixture calls it, whatever happened). Sentinel's own periods
  (INFO every 10 s, hello every 2 s) are shortened through `SENTINEL DEBUG`, and its TILT
  trigger raised: on a busy machine a late timer must not pause a sentinel for 30 s.
* `Writer(sentinel_addresses, name, password)`: a thread that, until `stop()`, XADDs to a stream, reads
  some entries into a consumer group (deliveries) and every few writes asks `WAIT 1`; it
  records what each write's reply acknowledged (`acked`), which writes and deliveries a `WAIT`
  that returned 1 or more confirmed (`confirmed`, `confirmed_deliveries`), and after `mark()`
  how many confirmations came (`confirmed_after_mark`). A connection error ends nothing: the
  writer reconnects through the sentinels (to the promoted node after a failover) and what the
  lost connection's next WAIT would have covered stays unconfirmed. Any other error is kept in
  `failure`.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from streamkeep.tools.servers import free_port

HOST = "127.0.0.1"
START_TIMEOUT = 15.0
KEY, GROUP = "orders", "shipping"
# SENTINEL DEBUG: INFO and hello every second (a rejoining node is converted after 4 hello
# periods), TILT only after a 10 s stall.
DEBUG_PERIODS = ("info-period", "1000", "publish-period", "1000", "tilt-trigger", "10000")


@dataclass
class SentinelProcess:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, decode_responses=True,
                           socket_timeout=5, retry=Retry(NoBackoff(), 0))


class Sentinels:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[SentinelProcess] = []
        binary = shutil.which("redis-sentinel")
        assert binary is not None, "redis-sentinel not found on PATH (make test installs it)"
        self.binary = binary

    def start(self, n: int, name: str, host: str, port: int, quorum: int,
              down_after_ms: int, failover_timeout_ms: int, auth_pass: str = "",
              tls_settings: tuple[str, ...] = ()) -> None:
        """`tls_settings`: certificate files and tls-replication yes: every sentinel reaches
        the nodes and the other sentinels over TLS, and listens on a TLS port of its own (the
        one it announces) beside its plain one."""
        for i in range(n):
            tls = [*tls_settings, f"tls-port {free_port()}"] if tls_settings else []
            conf = [*tls, f"sentinel monitor {name} {host} {port} {quorum}",
                    *([f"sentinel auth-pass {name} {auth_pass}"] if auth_pass else []),
                    f"sentinel down-after-milliseconds {name} {down_after_ms}",
                    f"sentinel failover-timeout {name} {failover_timeout_ms}",
                    f"sentinel parallel-syncs {name} 1"]
            self.started.append(self._start_one(i, conf))
        for i in range(n):
            assert self.client(i).execute_command("SENTINEL", "DEBUG", *DEBUG_PERIODS) == "OK"

    def _start_one(self, i: int, monitor: list[str]) -> SentinelProcess:
        for _attempt in range(5):
            port = free_port()
            path = self.workdir / f"sentinel-{i}.conf"
            # Sentinel rewrites its config file as it learns: one of its own for each.
            path.write_text("\n".join([f"port {port}", f"bind {HOST}", "daemonize no",
                                       f"dir {self.workdir}", *monitor]) + "\n")
            log = self.workdir / f"sentinel-{i}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen([self.binary, str(path)], stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=subprocess.STDOUT)
            sentinel = SentinelProcess(port, proc, log)
            if self._answers(sentinel):
                return sentinel
            self._kill(sentinel)  # the port was taken meanwhile: another one
        raise AssertionError(f"redis-sentinel did not start:\n{log.read_text()}")

    @staticmethod
    def _answers(sentinel: SentinelProcess) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and sentinel.proc.poll() is None:
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                if sentinel.client().ping():
                    return True
            time.sleep(0.05)
        return False

    def client(self, i: int) -> redis.Redis:
        return self.started[i].client()

    def addresses(self) -> list[tuple[str, int]]:
        return [(HOST, s.port) for s in self.started]

    def each(self, *argv: str) -> list[Any]:
        """One command's reply from every sentinel (a connection error: None)."""
        replies = []
        for sentinel in self.started:
            client = sentinel.client()
            try:
                replies.append(client.execute_command(*argv))
            except (redis.ConnectionError, redis.TimeoutError):
                replies.append(None)
            finally:
                client.close()
        return replies

    def logs(self) -> str:
        return "\n".join(f"--- {s.log.name}\n{s.log.read_text(errors='replace')}"
                         for s in self.started if s.log.exists())

    @staticmethod
    def _kill(sentinel: SentinelProcess) -> None:
        if sentinel.proc.poll() is None:
            sentinel.proc.kill()
        sentinel.proc.wait(10)

    def kill_all(self) -> None:
        for sentinel in self.started:
            self._kill(sentinel)


@dataclass
class Writer:
    sentinels: list[tuple[str, int]]
    name: str
    password: str | None = None
    wait_every: int = 3
    acked: dict[int, str] = field(default_factory=dict)  # sequence number -> entry ID
    confirmed: set[str] = field(default_factory=set)
    confirmed_deliveries: set[str] = field(default_factory=set)
    confirmed_after_mark: int = 0
    errors: list[str] = field(default_factory=list)
    failure: BaseException | None = None
    sent: int = 0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._marked = False
        self._thread = threading.Thread(target=self._run, name="sentinel-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def mark(self) -> None:
        """From now on, confirmations also count in `confirmed_after_mark`."""
        self._marked = True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the writer did not stop"

    def _client(self) -> redis.Redis:
        # One connection, no retries: a command is sent once, and what a WAIT covers is this
        # connection's writes since the previous WAIT (a reconnect starts a new list).
        return Sentinel(self.sentinels, socket_timeout=5).master_for(
            self.name, socket_timeout=5, socket_connect_timeout=5, password=self.password,
            retry=Retry(NoBackoff(), 0)).client()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as err:  # noqa: BLE001 - reported by the test
            self.failure = err

    def _loop(self) -> None:
        client: redis.Redis | None = None
        covered: list[str] = []
        deliveries: list[str] = []
        while not self._stop.is_set():
            after_mark = self._marked
            try:
                if client is None:  # (it connects at once: to the primary the sentinels name)
                    client = self._client()
                self.sent += 1
                seq = self.sent
                entry = client.xadd(KEY, {"n": str(seq)}).decode()
                self.acked[seq] = entry
                covered.append(entry)
                if seq % 4 == 0:
                    got = client.xreadgroup(GROUP, "c", {KEY: ">"}, count=2)
                    deliveries += [e[0].decode() for _k, entries in got for e in entries]
                if seq % self.wait_every == 0 and \
                        int(client.execute_command("WAIT", 1, 2000)) >= 1:
                    self.confirmed.update(covered)
                    self.confirmed_deliveries.update(deliveries)
                    if after_mark:
                        self.confirmed_after_mark += len(covered)
                    covered, deliveries = [], []
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError) as err:
                # Lost, refused (a demoted node) or no primary known yet: the outcome of the
                # command in flight is unknown; a new connection covers none of these.
                self.errors.append(f"{type(err).__name__}: {err}")
                covered, deliveries = [], []
                if client is not None:
                    client.close()
                    client = None
                time.sleep(0.05)
        if client is not None:
            client.close()
