"""The ``hardening`` section's big-reply and big-value rows, streamkeep serve beside redis-server.

Owns two workloads driven over raw sockets (so the client's own parsing is not what is timed):
:func:`bench_xrange`, the time of one ``XRANGE key - + COUNT n`` reply read to its last byte
(entries per second), and :func:`bench_big_xadd`, one XADD carrying a value of
:func:`big_value_bytes` (``STREAMKEEP_BENCH_BIG_VALUE_MB``, 100 MB unless set; 16 MB with
``--quick``) against a freshly started server, timed to its reply, with the server's peak RSS
above its baseline sampled from /proc. Must not touch: the section declarations (rows, figures,
targets: .sections), how the processes start and stop (:mod:`.processes`), engine internals.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.tools.bench.processes import RedisAofServer, StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RANGE_ENTRIES = 1_000_000  # XRANGE ... COUNT, the size the reply target is set at
QUICK_RANGE_ENTRIES = 100_000
RANGE_KEY = "hardening:range"
RANGE_REPEATS = 3  # the best of these is the row's time
FILL_BATCH = 10_000  # XADDs per pipelined write while filling
BIG_VALUE_MB = 100
QUICK_BIG_VALUE_MB = 16
RSS_SAMPLE_SECONDS = 0.002
PONG = b"+PONG\r\n"


def range_entries(env: BenchEnv) -> int:
    return QUICK_RANGE_ENTRIES if env.quick else RANGE_ENTRIES


def big_value_bytes(env: BenchEnv) -> int:
    """The big XADD's value size: STREAMKEEP_BENCH_BIG_VALUE_MB, else 100 MB (16 quick)."""
    mb = os.environ.get("STREAMKEEP_BENCH_BIG_VALUE_MB")
    return int(mb if mb else QUICK_BIG_VALUE_MB if env.quick else BIG_VALUE_MB) << 20


def connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_until_pong(sock: socket.socket) -> int:
    """Read the replies sent before a PING, to its +PONG; the bytes read."""
    total, tail = 0, b""
    while True:
        data = sock.recv(1 << 20)
        if not data:
            raise Skip("the server closed the connection")
        total += len(data)
        tail = (tail + data[-len(PONG):])[-len(PONG):]
        if tail == PONG:
            return total


def fill_range(port: int, n: int) -> None:
    """n entries with explicit IDs (the same reply bytes from either server), pipelined."""
    sock = connect(port)
    try:
        sock.sendall(encode_command(["DEL", RANGE_KEY]))
        for start in range(0, n, FILL_BATCH):
            batch = b"".join(encode_command(["XADD", RANGE_KEY, f"{i + 1}-1", "field", "value",
                                             "n", str(i)])
                             for i in range(start, min(n, start + FILL_BATCH)))
            sock.sendall(batch + encode_command(["PING"]))
            read_until_pong(sock)
    finally:
        sock.close()


def bench_xrange(server: Any, n: int) -> Measurement:
    """``XRANGE key - + COUNT n`` over n entries: entries per second of the best repeat, the
    reply read whole (up to the PING sent behind it)."""
    fill_range(server.port, n)
    sock = connect(server.port)
    try:
        request = encode_command(["XRANGE", RANGE_KEY, "-", "+", "COUNT", str(n)]) + \
            encode_command(["PING"])
        best, size = float("inf"), 0
        for _ in range(RANGE_REPEATS):
            t0 = time.perf_counter()
            sock.sendall(request)
            size = read_until_pong(sock)
            best = min(best, time.perf_counter() - t0)
    finally:
        sock.close()
    return Measurement(n / best, count=n, figures={"reply_s": best, "reply_mb": size / 1e6})


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise Skip("no VmRSS in /proc")


class PeakRss:
    """Samples a process's RSS from a thread until stopped; `peak` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            time.sleep(RSS_SAMPLE_SECONDS)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes(self.pid))
        return self.peak


def bench_big_xadd(start: Callable[[], Any], size: int) -> Measurement:
    """One XADD of a `size`-byte value against a server `start()` starts for it alone: rate in
    MB/s, figures: the time and the peak RSS above the baseline as a multiple of `size`."""
    server = start()
    try:
        if server.pid is None:
            raise Skip("no server process")
        value = b"x" * size
        sock = connect(server.port)
        try:
            sock.sendall(encode_command(["PING"]))
            read_until_pong(sock)
            time.sleep(0.2)  # let the start settle before the baseline
            baseline = rss_bytes(server.pid)
            sampler = PeakRss(server.pid)
            head = b"*5\r\n$4\r\nXADD\r\n$3\r\nbig\r\n$3\r\n1-1\r\n$1\r\nv\r\n$%d\r\n" % size
            t0 = time.perf_counter()
            sock.sendall(head)
            sock.sendall(value)
            sock.sendall(b"\r\n" + encode_command(["PING"]))
            read_until_pong(sock)
            seconds = time.perf_counter() - t0
            peak = sampler.stop()
        finally:
            sock.close()
    finally:
        server.stop()
    return Measurement(size / 1e6 / seconds, count=1,
                       figures={"seconds": seconds, "peak_over_value": (peak - baseline) / size})


def streamkeep_server() -> StreamkeepServer:
    return StreamkeepServer().start()


def redis_server_for(env: BenchEnv) -> Callable[[], RedisAofServer]:
    """The reference's starter, or Skip when the run has --no-redis."""
    if not env.use_redis:
        raise Skip("disabled (--no-redis)")
    return lambda: RedisAofServer().start()
