"""Attack C (issue 11): running the server out of file descriptors, and idle connections.

A `streamkeep serve` child under `ulimit -n 256`:
* at start it lowers maxclients to 256 - 32 (the reserve for its own files) and says so, as
  Redis does; CONFIG GET and INFO show the lowered value, CONFIG SET above it is refused;
* 300 idle unauthenticated connections: those beyond maxclients get
  `-ERR max number of clients reached`, and writes that force AOF rotation and a compaction
  still succeed while they are open and after they leave (today: MISCONF Too many open files,
  for good); the server's own descriptors stay within the reserve;
* `CONFIG SET timeout 1` closes an idle client after 1-2 s, not an active or a blocked one;
* `tcp-keepalive` puts keepalive timers on accepted sockets (read with `ss -o`).
"""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from streamkeep.engine.server.limits import RESERVED_FDS
from tests.support.serve_process import ROOT, START_TIMEOUT, ServeProcess

NOFILE = 256
LIMITS = {resource.RLIMIT_NOFILE: (NOFILE, NOFILE)}
REFUSED = b"-ERR max number of clients reached\r\n"


def serve(spawn: Callable[..., ServeProcess], tmp_path: Path, *conf: str,
          limited: bool = True) -> ServeProcess:
    config = tmp_path / "streamkeep.conf"
    config.write_text("".join(line + "\n" for line in conf))
    return spawn(tmp_path / "data", "--config", str(config),
                 limits=LIMITS if limited else None)


def own_descriptors(pid: int) -> int:
    """The server's descriptors that are not connected client sockets: files, pipes, the event
    loop's, and sockets (the listener among them) less the `clients` connected."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:  # closed meanwhile
            continue
        count += not target.startswith("socket:")
    return count


def test_maxclients_lowered_to_fit_the_descriptor_limit(spawn, tmp_path: Path) -> None:
    server = serve(spawn, tmp_path)
    lowered = NOFILE - RESERVED_FDS
    assert f"maxclients has been reduced to {lowered}" in server.output()
    client = server.client()
    assert client.config_get("maxclients") == {"maxclients": str(lowered)}
    assert client.info("clients")["maxclients"] == lowered
    with pytest.raises(redis.ResponseError) as refused:
        client.config_set("maxclients", 1000)
    assert str(refused.value) == (
        "CONFIG SET failed (possibly related to argument 'maxclients') - The operating system "
        f"is not able to handle the specified number of clients, try with {lowered}")
    assert client.config_get("maxclients") == {"maxclients": str(lowered)}
    client.config_set("maxclients", 100)  # lowering always fits
    assert client.config_get("maxclients") == {"maxclients": "100"}


def test_flood_of_idle_connections_cannot_stop_writes(spawn, tmp_path: Path) -> None:
    server = serve(spawn, tmp_path, "auto-aof-rewrite-min-size 1mb")
    client = server.client()
    client.ping()
    attackers: list[socket.socket] = []
    refused = 0
    try:
        for _ in range(300):
            sock = socket.create_connection((server.host, server.port), timeout=5)
            attackers.append(sock)
        for sock in attackers[NOFILE - RESERVED_FDS:]:  # the ones past maxclients
            sock.settimeout(5)
            data = sock.recv(100)
            refused += data == REFUSED
        assert refused >= 300 - (NOFILE - RESERVED_FDS), refused
        busiest = write_megabytes(client, server.proc.pid, "during")
    finally:
        for sock in attackers:
            sock.close()
    busiest = max(busiest, write_megabytes(client, server.proc.pid, "after"))
    assert busiest < RESERVED_FDS, f"the server used {busiest} descriptors of its own"
    info = client.info("persistence")
    assert info["aof_last_write_status"] == "ok"


def write_megabytes(client: redis.Redis, pid: int, tag: str) -> int:
    """Write 1.5 MB of XADDs (past the compaction trigger: rotation, a snapshot child); every
    write must be acknowledged. Returns the most descriptors of its own the server held."""
    value = "v" * 1000
    busiest = 0
    for i in range(1500):
        client.xadd(f"s-{tag}", {"i": i, "v": value})
        if i % 100 == 0:
            busiest = max(busiest, own_descriptors(pid))
    assert client.xlen(f"s-{tag}") == 1500
    return busiest


def test_idle_timeout(spawn, tmp_path: Path) -> None:
    server = serve(spawn, tmp_path, limited=False)
    admin = server.client()
    admin.config_set("timeout", 1)
    assert admin.config_get("timeout") == {"timeout": "1"}
    idle = socket.create_connection((server.host, server.port), timeout=5)
    active = server.client()
    active.ping()
    blocked = socket.create_connection((server.host, server.port), timeout=5)
    blocked.sendall(b"XREAD BLOCK 0 STREAMS wake $\r\n")
    started = time.monotonic()
    idle.settimeout(4)
    while time.monotonic() - started < 2.6:  # the active client talks; the others do not
        active.ping()
        time.sleep(0.2)
    assert idle.recv(10) == b"", "the idle client was not closed"
    closed_after = time.monotonic() - started
    assert 1.0 <= closed_after <= 3.5, closed_after
    active.ping()
    admin.xadd("wake", {"f": "v"})  # the blocked client was kept: it gets its entry
    assert blocked.recv(100).startswith(b"*1\r\n*2\r\n$4\r\nwake\r\n")
    for sock in (idle, blocked):
        sock.close()


def test_tcp_keepalive_on_accepted_sockets(spawn, tmp_path: Path) -> None:
    server = serve(spawn, tmp_path, limited=False)
    admin = server.client()
    assert admin.config_get("tcp-keepalive") == {"tcp-keepalive": "300"}  # Redis's default
    admin.config_set("tcp-keepalive", 7)
    first = socket.create_connection((server.host, server.port))
    first.sendall(b"PING\r\n")
    assert first.recv(10) == b"+PONG\r\n"
    timer = keepalive_timer(server.port, first.getsockname()[1])
    assert timer is not None and 0 < timer <= 7.0, timer
    admin.config_set("tcp-keepalive", 0)  # applies to new connections, as in Redis
    second = socket.create_connection((server.host, server.port))
    second.sendall(b"PING\r\n")
    assert second.recv(10) == b"+PONG\r\n"
    assert keepalive_timer(server.port, second.getsockname()[1]) is None
    first.close()
    second.close()


def keepalive_timer(server_port: int, client_port: int) -> float | None:
    """Seconds left on the keepalive timer of the server's end of the connection from
    `client_port`, as `ss -o` shows it; None without one."""
    out = subprocess.run(["ss", "-tnoH", "state", "established", "(", "sport", "=",
                          f":{server_port}", "and", "dport", "=", f":{client_port}", ")"],
                         capture_output=True, text=True, check=True).stdout
    match = re.search(r"timer:\(keepalive,(?:(\d+)min)?([\d.]+)(m?s)", out)
    if match is None:
        return None
    minutes = int(match.group(1) or 0)
    value = float(match.group(2)) / (1000 if match.group(3) == "ms" else 1)
    return minutes * 60 + value


def test_a_limit_below_the_reserve_refuses_to_start(tmp_path: Path) -> None:
    """Redis exits when `ulimit -n` leaves no room for a client; `streamkeep serve` exits 1
    with Redis's message (the library raises DescriptorLimitError, it never exits its host)."""
    proc = subprocess.run(
        [sys.executable, "-m", "streamkeep", "serve", "--dir", str(tmp_path / "data"),
         "--port", "0"], cwd=ROOT, capture_output=True, text=True, timeout=START_TIMEOUT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (30, 30)), check=False)
    assert proc.returncode == 1
    assert "is not enough for the server to start" in proc.stderr
    assert "Traceback" not in proc.stderr
