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


def test_a_replica_that_never_reads_costs_neither_memory_nor_speed(spawn, tmp_path: Path
                                                                  ) -> None:  # type: ignore[no-untyped-def]
    server = spawn(tmp_path / "p")
    client = server.client()
    client.config_set("repl-timeout", 3)
    stuck = _stuck_replica(server.port)
    try:
        wait_for(lambda: info(client)["connected_slaves"] == "1", 10, "the replica")
        baseline = server.rss_bytes()
        value = "x" * 1000
        began = time.monotonic()
        for _ in range(40):  # 40 MB of log the replica will never read
            pipe = client.pipeline(transaction=False)
            for _ in range(1000):
                pipe.xadd("s", {"v": value}, maxlen=1000, approximate=False)
            pipe.execute()
        elapsed = time.monotonic() - began
        assert server.rss_bytes() - baseline < 30 << 20  # not 40 MB queued for the replica
        assert elapsed < 30
        # Silent for repl-timeout: dropped, and its files released.
        wait_for(lambda: info(client)["connected_slaves"] == "0", 15, "the drop")
        assert "no ACK" in server.output()
    finally:
        stuck.close()
