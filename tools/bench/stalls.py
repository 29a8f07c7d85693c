"""The ``hardening`` section's stall rows: how long one client can hold the event loop,
streamkeep beside redis-server.

Owns two workloads, driven over raw RESP sockets against the server section's processes
(:func:`streamkeep.tools.bench.server.streamkeep` / :func:`~streamkeep.tools.bench.server.redis_aof`):
:func:`keys_pattern`, the time of ``KEYS`` with ``*`` + 1,000 x ``a`` + ``b`` against one 100 KB
key (a backtracking glob matcher's worst case); and :func:`bystander_ping`, another client's PING
delay (max, p99) while one client sends 100k pipelined PINGs.
Must not touch: the section declarations (rows and figures: .sections), the processes' start and
stop, engine internals, any key but its own (deleted after use).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from streamkeep.tools.bench.workload import Measurement
from streamkeep.tools.servers import HOST

KEY_BYTES = 100_000
PATTERN = b"*" + b"a" * 1000 + b"b"
PIPELINED_PINGS = 100_000
PING = b"*1\r\n$4\r\nPING\r\n"
PONG_BYTES = len(b"+PONG\r\n")


def _command(*argv: bytes) -> bytes:
    return b"*%d\r\n" % len(argv) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in argv)


def _reply_line(sock: socket.socket, reader: Any, *argv: bytes) -> bytes:
    """Send one command; its reply's first line, having read a bulk's body too (enough for the
    replies used here: simple, integer, bulk, empty array)."""
    sock.sendall(_command(*argv))
    line: bytes = reader.readline()
    if line.startswith(b"$") and line != b"$-1\r\n":
        reader.readline()
    return line


def keys_pattern(server: Any) -> Measurement:
    """``KEYS *a...ab`` against one 100 KB key: the rate is key kilobytes matched per second; the
    figure ``seconds`` the time of the command."""
    key = b"stalls:" + b"a" * KEY_BYTES
    with socket.create_connection((HOST, server.port), timeout=120) as sock:
        reader = sock.makefile("rb")
        _reply_line(sock, reader, b"XADD", key, b"1-1", b"f", b"v")
        began = time.perf_counter()
        reply = _reply_line(sock, reader, b"KEYS", PATTERN)
        seconds = time.perf_counter() - began
        _reply_line(sock, reader, b"DEL", key)
    assert reply == b"*0\r\n", reply
    # As a rate of key kilobytes matched: one KEYS per row, so a rate of commands would round
    # to a few per second (redis-server), and one of bytes to under 0.01 us each (streamkeep):
    # either loses its precision in the table.
    kilobytes = KEY_BYTES // 1000
    return Measurement(kilobytes / seconds, count=kilobytes, figures={"us": seconds * 1e6},
                       notes=[f"KEYS *a{{1000}}b over a 100 KB key, {server.name}: "
                              f"{seconds * 1000:,.1f} ms"])


def drain_replies(sock: socket.socket, expected: int, done: threading.Event) -> None:
    """Read `expected` bytes of replies (or to EOF), then set `done`."""
    received = 0
    while received < expected:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        received += len(chunk)
    done.set()


def bystander_ping(server: Any) -> Measurement:
    """One client pipelines 100k PINGs while another PINGs in a loop: the rate is the
    pipeline's PINGs per second; the figures the bystander's max and p99 delay (ms)."""
    with socket.create_connection((HOST, server.port), timeout=60) as bystander, \
            socket.create_connection((HOST, server.port), timeout=60) as flooder:
        reader = bystander.makefile("rb")
        _reply_line(bystander, reader, b"PING")
        done = threading.Event()
        drain = threading.Thread(target=drain_replies, args=(flooder, PIPELINED_PINGS * PONG_BYTES, done))
        drain.start()
        began = time.perf_counter()
        flooder.sendall(PING * PIPELINED_PINGS)
        delays: list[float] = []
        while not done.is_set():
            sent = time.perf_counter()
            _reply_line(bystander, reader, b"PING")
            delays.append(time.perf_counter() - sent)
        drain.join()
        seconds = time.perf_counter() - began
    delays.sort()
    worst = delays[-1] * 1000 if delays else 0.0
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1000 if delays else 0.0
    return Measurement(PIPELINED_PINGS / seconds, count=PIPELINED_PINGS,
                       figures={"max_ms": worst, "p99_ms": p99},
                       notes=[f"{PIPELINED_PINGS:,} pipelined PINGs, {server.name}: "
                              f"{seconds * 1000:,.0f} ms; a bystander's PING: {len(delays)} "
                              f"sent, max {worst:.1f} ms, p99 {p99:.1f} ms"])
