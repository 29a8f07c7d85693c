"""A replica that never reads, or goes silent, must not slow the primary's clients or grow its
memory: the primary sends the log from its segments at the replica's pace (nothing queued for
it beyond what its socket holds) and drops a replica that stops acknowledging after
repl-timeout. Against a real `streamkeep serve` child."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.support.replication_util import info, wait_for


def _stuck_replica(port: int) -> socket.socket:
    """Handshake, PSYNC, then never read (and never ACK)."""
    sock = socket.create_connection(("127.0.0.1", port), 5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b"REPLCONF listening-port 1\r\nREPLCONF capa sk-records\r\nPSYNC ? -1\r\n")
    return sock


def _batch(client, value: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds to write 1,000 entries (1 MB) in one pipeline."""
    began = time.monotonic()
    pipe = client.pipeline(transaction=False)
    for _ in range(1000):
        pipe.xadd("s", {"v": value}, maxlen=1000, approximate=False)
    pipe.execute()
    return time.monotonic() - began


def test_a_replica_that_never_reads_costs_neither_memory_nor_speed(spawn, tmp_path: Path
                                                                  ) -> None:  # type: ignore[no-untyped-def]
    server = spawn(tmp_path / "p")
    control = spawn(tmp_path / "q")  # the same writes, no replica: the pace to compare with
    client, unreplicated = server.client(), control.client()
    client.config_set("repl-timeout", 3)
    stuck = _stuck_replica(server.port)
    try:
        wait_for(lambda: info(client)["connected_slaves"] == "1", 10, "the replica")
        baseline = server.rss_bytes()
        value = "x" * 1000
        elapsed = control_elapsed = 0.0
        for _ in range(40):  # 40 MB of log the replica will never read; batches interleaved
            elapsed += _batch(client, value)
            control_elapsed += _batch(unreplicated, value)
        assert server.rss_bytes() - baseline < 30 << 20  # not 40 MB queued for the replica
        assert elapsed < 3 * control_elapsed  # its clients never wait for the replica
        # Silent for repl-timeout: dropped, and its files released.
        wait_for(lambda: info(client)["connected_slaves"] == "0", 15, "the drop")
        assert "no ACK" in server.wait_output("no ACK")  # (its reader may lag the log)
    finally:
        stuck.close()
