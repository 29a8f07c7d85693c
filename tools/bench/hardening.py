"""The ``hardening`` section's workloads, over raw sockets (the client's parsing is not timed): a
big XRANGE reply, one XADD of a big value with the server's peak RSS, pipelined XADDs whose
values hold CRLF, a slow KEYS pattern, a bystander's PINGs beside a long pipeline.
Must not touch: the servers' start and stop (:mod:`.processes`), engine internals.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.tools.bench import processes
from streamkeep.tools.bench.workload import Measurement, Size, Skip, clocked, connect, delays_ms
from streamkeep.tools.servers import PeakRss, proc_status

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

RANGE_ENTRIES = Size(1_000_000, 100_000)  # XRANGE ... COUNT (the target's: the full size)
RANGE_KEY = "hardening:range"
REPEATS = 3  # of the XRANGE and the pipeline: the best is the row's time
FILL_BATCH = 10_000  # XADDs per pipelined write while filling
BIG_VALUE_MB = Size(100, 16)
PIPELINE_REQUESTS = 20_000  # the size the CRLF target is set at
CRLF_VALUE = b"line one\r\nline two\r\nline three\r\n"
PLAIN_VALUE = b"line one__line two__line three__"
assert len(CRLF_VALUE) == len(PLAIN_VALUE)
KEY_BYTES = 100_000
PATTERN = b"*" + b"a" * 1000 + b"b"
PIPELINED_PINGS = 100_000
PING, PONG = encode_command(["PING"]), b"+PONG\r\n"


def big_value_bytes(env: BenchEnv) -> int:
    """The big XADD's value size: STREAMKEEP_BENCH_BIG_VALUE_MB, else 100 MB (16 quick)."""
    return int(os.environ.get("STREAMKEEP_BENCH_BIG_VALUE_MB") or BIG_VALUE_MB(env)) << 20


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


def _best_of(sock: socket.socket, request: bytes) -> tuple[float, int]:
    """``request`` and a PING behind it, REPEATS times: the best time to the +PONG, the bytes."""
    best, size = float("inf"), 0
    for _ in range(REPEATS):
        began = time.perf_counter()
        sock.sendall(request + PING)
        size = read_until_pong(sock)
        best = min(best, time.perf_counter() - began)
    return best, size


def xrange(env: BenchEnv, server: Any) -> Measurement:
    """``XRANGE key - + COUNT n`` over n entries (explicit IDs: the same reply bytes from
    either server): entries per second of the best repeat, the reply read whole."""
    n = RANGE_ENTRIES(env)
    with connect(server.port) as sock:
        sock.sendall(encode_command(["DEL", RANGE_KEY]))
        for start in range(0, n, FILL_BATCH):
            sock.sendall(b"".join(encode_command(["XADD", RANGE_KEY, f"{i + 1}-1", "field",
                                                  "value", "n", str(i)])
                                  for i in range(start, min(n, start + FILL_BATCH))) + PING)
            read_until_pong(sock)
        best, size = _best_of(sock, encode_command(["XRANGE", RANGE_KEY, "-", "+", "COUNT",
                                                    str(n)]))
    return Measurement(n / best, count=n, figures={"reply_s": best, "reply_mb": size / 1e6})


def pipeline(env: BenchEnv, crlf: bool) -> Measurement:
    """PIPELINE_REQUESTS pipelined ``XADD key * f <value>`` (values with or without CRLF, of
    one length) to the run's streamkeep serve, with a PING behind them, timed to the +PONG."""
    key = f"hardening:pipeline:{'crlf' if crlf else 'plain'}"
    value, n = CRLF_VALUE if crlf else PLAIN_VALUE, PIPELINE_REQUESTS
    request = b"".join(encode_command(["XADD", key, "MAXLEN", "~", "1000", "*", "f", value])
                       for _ in range(n))
    with connect(processes.streamkeep(env).port) as sock:
        best, _size = _best_of(sock, request)
    return Measurement(n / best, count=n, figures={"seconds": best})


def big_xadd(env: BenchEnv, redis_server: bool) -> Measurement:
    """One XADD of a big value against a server started for it alone: MB/s, figures: its
    time and the peak RSS above the baseline as a multiple of the value's size."""
    if redis_server and not env.use_redis:
        raise Skip("disabled (--no-redis)")
    size = big_value_bytes(env)
    fresh = processes.RedisAofServer() if redis_server else processes.StreamkeepServer()
    with processes.running(fresh) as server, connect(server.port) as sock:
        sock.sendall(PING)
        read_until_pong(sock)
        time.sleep(0.2)  # let the start settle before the baseline
        baseline, sampler = proc_status("VmRSS", server.pid), PeakRss(server.pid)
        head = b"*5\r\n$4\r\nXADD\r\n$3\r\nbig\r\n$3\r\n1-1\r\n$1\r\nv\r\n$%d\r\n" % size
        began = time.perf_counter()
        sock.sendall(head)
        sock.sendall(b"x" * size)
        sock.sendall(b"\r\n" + PING)
        read_until_pong(sock)
        seconds = time.perf_counter() - began
        peak = sampler.stop()
    return Measurement(size / 1e6 / seconds, count=1,
                       figures={"seconds": seconds, "peak_over_value": (peak - baseline) / size})


def _reply_line(sock: socket.socket, reader: Any, *argv: bytes) -> bytes:
    """Send one command; its reply's first line, having read a bulk's body too (enough for the
    replies used here: simple, integer, bulk, empty array)."""
    sock.sendall(encode_command(list(argv)))
    line: bytes = reader.readline()
    if line.startswith(b"$") and line != b"$-1\r\n":
        reader.readline()
    return line


def keys_pattern(env: BenchEnv, server: Any) -> Measurement:
    """``KEYS *a...ab`` against one 100 KB key: key kilobytes matched per second (one KEYS per
    row: a rate of commands, or of bytes, would lose its precision in the table); figure
    ``us``, the command's time."""
    key = b"stalls:" + b"a" * KEY_BYTES
    with connect(server.port, 120) as sock:
        reader = sock.makefile("rb")
        _reply_line(sock, reader, b"XADD", key, b"1-1", b"f", b"v")
        reply, seconds = clocked(_reply_line, sock, reader, b"KEYS", PATTERN)
        _reply_line(sock, reader, b"DEL", key)
    assert reply == b"*0\r\n", reply
    kilobytes = KEY_BYTES // 1000
    return Measurement(kilobytes / seconds, count=kilobytes, figures={"us": seconds * 1e6})


def bystander_ping(env: BenchEnv, server: Any) -> Measurement:
    """One client pipelines 100k PINGs while another PINGs in a loop: the pipeline's PINGs per
    second; figures the bystander's max and p99 delay (ms)."""
    with connect(server.port, 60) as bystander, connect(server.port, 60) as flooder:
        reader = bystander.makefile("rb")
        _reply_line(bystander, reader, b"PING")
        done = threading.Event()

        def drain(expected: int = PIPELINED_PINGS * len(PONG)) -> None:
            while expected > 0 and (chunk := flooder.recv(1 << 20)):
                expected -= len(chunk)
            done.set()

        drainer = threading.Thread(target=drain)
        drainer.start()
        began = time.perf_counter()
        flooder.sendall(PING * PIPELINED_PINGS)
        delays: list[float] = []
        while not done.is_set():
            sent = time.perf_counter()
            _reply_line(bystander, reader, b"PING")
            delays.append(time.perf_counter() - sent)
        drainer.join()
        seconds = time.perf_counter() - began
    return Measurement(PIPELINED_PINGS / seconds, count=PIPELINED_PINGS,
                       figures={**delays_ms(delays), "bystander_pings": len(delays)})
