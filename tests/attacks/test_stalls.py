"""Issue #11 E: a pathological KEYS pattern and a long pipeline must not stall the server for
everyone else (a real `streamkeep serve` child, real sockets)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

from tests.support.resp_client import RespClient
from tests.support.scaling import growth
from tests.support.serve_process import ServeProcess

KEY_BYTES = 20_000  # the old backtracking matcher needed ~3 s here, Redis ~0.08 s
PIPELINED_PINGS = 100_000


def test_pathological_keys_pattern_answers_quickly(
    spawn: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    """Timed against the same commands with a pattern as long that matches at once: a
    backtracking matcher took seconds (thousands of times as long), Redis's own ~0.08 s."""
    server = spawn(tmp_path / "data")
    with RespClient(server.host, server.port) as client:
        client.execute("XADD", "a" * KEY_BYTES, "1-1", "f", "v")

        def match_all(tail: bytes, found: int) -> None:
            for pattern in (b"*" + b"a" * 1000 + tail, b"*" + b"a" * 1000 + tail + b"*"):
                assert len(client.execute("KEYS", pattern)) == found
                assert len(client.execute("SCAN", "0", "MATCH", pattern)[1]) == found

        ratio = growth(lambda: match_all(b"", 1), lambda: match_all(b"b", 0), rounds=3)
    assert ratio < 20, f"the pathological patterns took {ratio:.1f}x as long"


def test_bystander_ping_is_not_delayed_by_a_long_pipeline(
    spawn: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    server = spawn(tmp_path / "data")
    with RespClient(server.host, server.port) as bystander, \
            socket.create_connection((server.host, server.port)) as flooder:
        bystander.execute("PING")
        received = [0]
        reader = threading.Thread(target=_drain, args=(flooder, PIPELINED_PINGS * 7, received))
        reader.start()
        flooder.sendall(b"*1\r\n$4\r\nPING\r\n" * PIPELINED_PINGS)
        overlaps = []  # the pipeline's replies that arrived while one bystander PING waited
        while (before := received[0]) < PIPELINED_PINGS * 7:
            bystander.execute("PING")
            overlaps.append(received[0] - before)
        reader.join(30)
    # Counted, not timed: a bystander's PING waits for a slice of the pipeline, not all of it.
    # The median, so that one scheduling hiccup does not decide the verdict.
    overlaps.sort()
    assert len(overlaps) >= 3, overlaps
    assert overlaps[len(overlaps) // 2] < PIPELINED_PINGS * 7 // 4, overlaps


def _drain(sock: socket.socket, expected: int, received: list[int]) -> None:
    while received[0] < expected:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        received[0] += len(chunk)
