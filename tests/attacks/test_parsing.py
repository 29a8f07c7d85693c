"""Issue #11 A: a pipelined request with CRLF inside a bulk once made every request after it
re-split the whole buffered input (quadratic). Against a real `streamkeep serve` child with a
password: an unauthenticated flood of such requests is answered in time linear in its size,
and an authenticated client's PING meanwhile is not held up by it; an unauthenticated client
that never reads its replies is cut off at a bound."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser
from tests.support.resp_client import RespClient

PROBE = b"*1\r\n$2\r\n\r\n\r\n"  # an unknown command named CRLF
COPIES = 40_000  # 480 KB: within the 1 MiB an unauthenticated client may have buffered
FLOOD_SECONDS = 3.0  # fixed: ~0.3 s; quadratic: tens of seconds
PING_SECONDS = 0.5  # the bystander's worst PING while the flood is parsed (quadratic: seconds)


@pytest.fixture
def server(tmp_path, spawn):
    return spawn(tmp_path / "data", "--requirepass", "secret")


def _read_replies(sock: socket.socket, count: int, timeout: float) -> list:
    parser, replies = ReplyParser(), []
    sock.settimeout(timeout)
    while len(replies) < count:
        data = sock.recv(1 << 16)
        if not data:
            break
        parser.feed(data)
        while (reply := parser.next()) is not NEED_MORE:
            replies.append(reply)
    return replies


def test_a_flood_of_crlf_bulks_is_parsed_in_linear_time(server):
    bystander = RespClient(server.host, server.port, timeout=10)
    bystander.execute("AUTH", "secret")
    worst = 0.0
    done = threading.Event()

    def ping() -> None:
        nonlocal worst
        while not done.is_set():
            start = time.perf_counter()
            bystander.execute("PING")
            worst = max(worst, time.perf_counter() - start)
            time.sleep(0.005)

    pinger = threading.Thread(target=ping, daemon=True)
    with socket.create_connection((server.host, server.port)) as sock:
        pinger.start()
        start = time.perf_counter()
        sender = threading.Thread(target=sock.sendall, args=(PROBE * COPIES,), daemon=True)
        sender.start()
        replies = _read_replies(sock, COPIES, timeout=60)
        elapsed = time.perf_counter() - start
        sender.join(10)
    done.set()
    pinger.join(10)
    assert len(replies) == COPIES
    assert all(str(r).startswith("NOAUTH") or str(r).startswith("ERR") for r in replies)
    assert elapsed < FLOOD_SECONDS, f"{COPIES} requests answered in {elapsed:.1f} s"
    assert worst < PING_SECONDS, f"a PING waited {worst * 1000:.0f} ms"


def test_an_unauthenticated_client_that_never_reads_is_cut_off(server):
    with socket.create_connection((server.host, server.port)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        request = b"*1\r\n$4\r\nPING\r\n" * 10_000  # 140 KB in, 350 KB of NOAUTH out
        try:
            for _ in range(200):  # 28 MB in, 70 MB of replies no one reads
                sock.sendall(request)
        except OSError:  # the server closed the connection: what we want
            pass
        else:
            pytest.fail("the server kept buffering replies to a client that never reads")
    assert server.client(password="secret").ping()
