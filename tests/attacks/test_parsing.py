"""Issue #11 A: a pipelined request with CRLF inside a bulk once made every request after it
re-split the whole buffered input (quadratic). Against a real `streamkeep serve` child with a
password: an unauthenticated flood of such requests is answered in time linear in its size,
and an authenticated client is served meanwhile, mid-flood; an unauthenticated client
that never reads its replies is cut off at a bound."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser
from tests.support.resp_client import RespClient
from tests.support.scaling import growth

PROBE = b"*1\r\n$2\r\n\r\n\r\n"  # an unknown command named CRLF
COPIES = 40_000  # 480 KB: within the 1 MiB an unauthenticated client may have buffered
# Linear parsing: a flood 4x as long takes about 4x as long (quadratic: 16x).
LINEAR_RATIO = 8.0


@pytest.fixture
def server(tmp_path, spawn):
    return spawn(tmp_path / "data", "--requirepass", "secret")


class _Flood:
    """One unauthenticated connection sending `copies` probes and counting the replies."""

    def __init__(self, server, copies: int) -> None:
        self.copies = copies
        self.started = False
        self.received = 0
        self.sock = socket.create_connection((server.host, server.port))

    def run(self) -> float:
        start = time.perf_counter()
        self.started = True
        sender = threading.Thread(target=self.sock.sendall, args=(PROBE * self.copies,), daemon=True)
        sender.start()
        replies = self._read(timeout=60)
        elapsed = time.perf_counter() - start
        sender.join(10)
        self.sock.close()
        assert len(replies) == self.copies
        assert all(str(r).startswith("NOAUTH") or str(r).startswith("ERR") for r in replies)
        return elapsed

    def _read(self, timeout: float) -> list:
        parser, replies = ReplyParser(), []
        self.sock.settimeout(timeout)
        while len(replies) < self.copies:
            data = self.sock.recv(1 << 16)
            if not data:
                break
            parser.feed(data)
            while (reply := parser.next()) is not NEED_MORE:
                replies.append(reply)
            self.received = len(replies)
        return replies


def test_a_flood_of_crlf_bulks_is_parsed_in_linear_time(server):
    # The server's CPU time, not the wall clock: the flood is the server's work, and a busy
    # machine stretched the wall time of one run of the pair (10x once, beside a compile).
    ratio = growth(lambda: _Flood(server, COPIES // 4).run(), lambda: _Flood(server, COPIES).run(),
                   rounds=3, clock=server.cpu_seconds)
    assert ratio < LINEAR_RATIO, f"4x the requests took {ratio:.1f}x the server's CPU time"


def _errors_answered(client: RespClient) -> int:
    """The server's count of error replies so far (every flood request is answered NOAUTH)."""
    info = client.execute("INFO", "stats")
    text = info.decode() if isinstance(info, bytes) else str(info)
    return int(text.split("total_error_replies:", 1)[1].split()[0])


def test_a_bystander_is_served_while_a_flood_is_parsed(server):
    """Counted on the server's side, not timed: the bystander's commands read the server's
    count of flood requests answered so far, and one of them is served mid-flood (strictly
    between none and all of it). A server that parsed a client's whole buffer before serving
    anyone else would show only 0 and the whole flood. (The flood client's own count of replies
    read would not do: on a busy machine its reader lags, and replies the server sent long
    before a PING are read during it.)"""
    bystander = RespClient(server.host, server.port, timeout=30)
    bystander.execute("AUTH", "secret")
    base = _errors_answered(bystander)
    flood = _Flood(server, COPIES)
    seen: list[int] = []  # flood requests answered, as each bystander command saw it
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.append(_errors_answered(bystander) - base)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    flood.run()
    done.set()
    poller.join(30)
    assert any(0 < n < COPIES for n in seen), sorted(set(seen))


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
