"""Issue #11 E: a pathological KEYS pattern and a long pipeline must not stall the server for
everyone else (a real `streamkeep serve` child, real sockets)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from streamkeep.tools.bench.stalls import drain_replies
from tests.support.resp_client import RespClient
from tests.support.serve_process import ServeProcess

KEY_BYTES = 20_000  # the old backtracking matcher needed ~3 s here, Redis ~0.08 s
PIPELINED_PINGS = 100_000


def test_pathological_keys_pattern_answers_quickly(
    spawn: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    server = spawn(tmp_path / "data")
    with RespClient(server.host, server.port) as client:
        client.execute("XADD", "a" * KEY_BYTES, "1-1", "f", "v")
        began = time.perf_counter()
        for pattern in (b"*" + b"a" * 1000 + b"b", b"*" + b"a" * 1000 + b"b*"):
            assert client.execute("KEYS", pattern) == []
            assert client.execute("SCAN", "0", "MATCH", pattern) == [b"0", []]
        assert time.perf_counter() - began < 0.5


def test_bystander_ping_is_not_delayed_by_a_long_pipeline(
    spawn: Callable[..., ServeProcess], tmp_path: Path
) -> None:
    server = spawn(tmp_path / "data")
    with RespClient(server.host, server.port) as bystander, \
            socket.create_connection((server.host, server.port)) as flooder:
        bystander.execute("PING")
        done = threading.Event()
        reader = threading.Thread(target=drain_replies, args=(flooder, PIPELINED_PINGS * 7, done))
        reader.start()
        began = time.perf_counter()
        flooder.sendall(b"*1\r\n$4\r\nPING\r\n" * PIPELINED_PINGS)
        delays = []
        while not done.is_set():
            sent = time.perf_counter()
            bystander.execute("PING")
            delays.append(time.perf_counter() - sent)
        pipeline_seconds = time.perf_counter() - began
        reader.join(30)
    delays.sort()
    # The pipeline takes a good fraction of a second; the bystander waits a few ms at most (the
    # median, so that a scheduling hiccup on a loaded machine does not decide the verdict).
    assert len(delays) >= 3, (pipeline_seconds, delays)
    assert delays[len(delays) // 2] < 0.05, (pipeline_seconds, delays)
