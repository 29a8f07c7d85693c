"""`streamkeep serve` as a real child process (`python -m streamkeep serve`, tests/support/serve_process.py): clean shutdown on
SIGTERM/SIGINT and SHUTDOWN, restart on the same data directory with every acknowledged write,
SIGKILL under `appendfsync always`, --requirepass and --config FILE."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import redis

from tests.support.resp_client import RespClient, RespError, encode_command
from tests.support.serve_process import EXIT_TIMEOUT, ROOT, START_TIMEOUT, free_port


def write_workload(r: redis.Redis) -> list[bytes]:
    ids = [r.xadd("s", {"n": str(i), "pad": "x" * (i % 50)}) for i in range(100)]
    pipe = r.pipeline(transaction=False)
    for i in range(300):
        pipe.xadd("p", {"i": str(i)}, id=f"{i + 1}-0")
    ids += pipe.execute()
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "alice", {"s": ">"}, count=30)
    r.xreadgroup("g", "bob", {"s": ">"}, count=10)
    r.xack("s", "g", ids[0], ids[5])
    tx = r.pipeline(transaction=True)
    tx.xadd("t", {"a": "1"}, id="1-1").xadd("t", {"b": "2"}, id="1-2")
    ids += tx.execute()
    return ids


def state(r: redis.Redis) -> tuple[Any, ...]:
    return (r.execute_command("DEBUG", "DIGEST"), r.xlen("s"), r.xlen("p"), r.xlen("t"),
            r.xpending("s", "g"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_shuts_down_cleanly_and_restart_keeps_everything(tmp_path, spawn, sig):
    datadir = tmp_path / "data"
    server = spawn(datadir)
    r = server.client()
    ids = write_workload(r)
    before = state(r)
    assert before[1:4] == (100, 300, 2)
    server.proc.send_signal(sig)
    assert server.wait() == 0, server.output()
    assert "shut down cleanly" in server.output()
    with pytest.raises(redis.ConnectionError):
        r.ping()
    r.close()

    again = spawn(datadir)
    r = again.client()
    assert state(r) == before
    found = {e[0] for key in ("s", "p", "t") for e in r.xrange(key)}
    assert set(ids) <= found
    r.close()


def test_shutdown_command_closes_and_exits(tmp_path, spawn):
    datadir = tmp_path / "data"
    server = spawn(datadir)
    r = server.client()
    write_workload(r)
    before = state(r)
    bystander = RespClient(server.host, server.port, timeout=EXIT_TIMEOUT)
    assert bystander.execute("PING") == "PONG"
    with socket.create_connection((server.host, server.port), timeout=EXIT_TIMEOUT) as sock:
        sock.sendall(encode_command("SHUTDOWN"))
        assert sock.recv(100) == b""  # no reply: the connection just closes
    assert server.wait() == 0, server.output()
    assert "shut down cleanly" in server.output()
    with pytest.raises(ConnectionError):
        bystander.read()
    bystander.close()
    r.close()

    again = spawn(datadir)
    r = again.client()
    assert state(r) == before
    r.shutdown()  # redis-py's SHUTDOWN: it expects the connection to close
    assert again.wait() == 0, again.output()
    assert "shut down cleanly" in again.output()


def test_shutdown_save_writes_a_snapshot(tmp_path, spawn):
    datadir = tmp_path / "data"
    server = spawn(datadir)
    r = server.client()
    write_workload(r)
    before = state(r)
    assert not list(datadir.glob("snapshot-*.mdb"))
    r.shutdown(save=True)
    assert server.wait() == 0, server.output()
    assert list(datadir.glob("snapshot-*.mdb"))
    r.close()
    again = spawn(datadir)
    r = again.client()
    assert state(r) == before
    r.close()


def test_sigkill_under_appendfsync_always_loses_no_acknowledged_write(tmp_path, spawn):
    datadir = tmp_path / "data"
    server = spawn(datadir, "--appendfsync", "always")
    assert "(appendfsync always)" in server.output()
    acked: list[list[bytes]] = [[] for _ in range(4)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        r = server.client()
        try:
            i = 0
            while not stop.is_set():
                i += 1
                if i % 5:
                    acked[n].append(r.xadd(f"w{n}", {"i": str(i)}))
                else:
                    pipe = r.pipeline(transaction=False)
                    for j in range(10):
                        pipe.xadd(f"w{n}", {"i": f"{i}.{j}"})
                    acked[n].extend(pipe.execute())
        except (redis.ConnectionError, OSError):
            pass  # killed mid-write: only what was acknowledged counts
        except BaseException as err:  # noqa: BLE001 - an error reply (MISCONF...) fails the test
            errors.append(err)
        finally:
            r.close()

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while sum(map(len, acked)) < 400 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.proc.send_signal(signal.SIGKILL)  # while the writers are going
    server.wait()
    stop.set()
    for t in threads:
        t.join(10)
    assert not errors, [str(e) for e in errors]
    assert sum(map(len, acked)) >= 400

    again = spawn(datadir)
    r = again.client()
    for n in range(4):
        found = [e[0] for e in r.xrange(f"w{n}")]
        assert found[: len(acked[n])] == acked[n]  # every acknowledged entry, in order
        assert len(found) - len(acked[n]) <= 10  # at most one unacknowledged batch more
    r.close()


def test_requirepass_option(tmp_path, spawn):
    server = spawn(tmp_path / "data", "--requirepass", "open sesame")
    with pytest.raises(redis.AuthenticationError):
        server.client().xadd("s", {"f": "v"})
    with pytest.raises(redis.AuthenticationError):
        server.client(password="sesame").ping()
    for protocol in (2, 3):
        r = server.client(password="open sesame", protocol=protocol)
        assert r.xadd("s", {"f": "v"}, id=f"{protocol}-1") == f"{protocol}-1".encode()
        r.close()
    cli = subprocess.run(
        ["redis-cli", "-p", str(server.port), "-a", "open sesame", "--no-auth-warning",
         "XLEN", "s"], capture_output=True, text=True, timeout=EXIT_TIMEOUT, check=False)
    assert cli.stdout == "2\n", cli
    with RespClient(server.host, server.port) as c, \
            pytest.raises(RespError, match="NOAUTH Authentication required."):
        c.execute("XLEN", "s")


def test_config_file(tmp_path, spawn):
    port = free_port()
    conf = tmp_path / "streamkeep.conf"
    conf.write_text(
        "# a redis.conf-style file\n"
        f"port {port}\n"
        "appendfsync always\n"
        'requirepass "from the file"\n'
        "stream-node-max-entries 7\n"
        "\n"
        "   # indented comment\n")
    server = spawn(tmp_path / "data", "--config", str(conf), port=port)
    assert f"port {port} " in server.output() and "(appendfsync always)" in server.output()
    r = server.client(password="from the file")
    for i in range(1, 21):
        r.xadd("s", {"f": "v"}, id=f"{i}-0")
    assert r.xinfo_stream("s")["radix-tree-keys"] == 3  # 20 entries, 7 per node
    assert r.config_get("appendfsync") == {"appendfsync": "always"}
    r.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait() == 0

    # The command line wins over the file.
    server = spawn(tmp_path / "data", "--config", str(conf), "--requirepass", "cli",
                   "--appendfsync", "no", port=port)
    assert "(appendfsync no)" in server.output()
    with pytest.raises(redis.AuthenticationError):
        server.client(password="from the file").ping()
    r = server.client(password="cli")
    assert r.xlen("s") == 20
    r.close()


def test_bad_config_file_refuses_to_start(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("port 1\nno-such-directive yes\n")
    proc = subprocess.run(
        [sys.executable, "-m", "streamkeep", "serve", "--dir", str(tmp_path / "data"),
         "--config", str(conf)], cwd=ROOT, capture_output=True, text=True,
        timeout=START_TIMEOUT, check=False)
    assert proc.returncode != 0
    assert "no-such-directive" in proc.stderr and "Bad directive" in proc.stderr
    assert not (tmp_path / "data").exists()


def test_replicaof_from_the_config_file_and_the_command_line(tmp_path, spawn):
    primary = spawn(tmp_path / "p", "--requirepass", "pw")
    p = primary.client(password="pw")
    p.xadd("s", {"f": "v"})
    conf = tmp_path / "replica.conf"
    conf.write_text(f"slaveof 127.0.0.1 {primary.port}\nmasterauth pw\n")
    by_file = spawn(tmp_path / "r1", "--config", str(conf))
    by_flag = spawn(tmp_path / "r2", "--replicaof", "127.0.0.1", str(primary.port),
                    "--masterauth", "pw")
    for replica in (by_file, by_flag):
        r = replica.client()
        deadline = time.monotonic() + 15
        while r.xlen("s") != 1:
            assert time.monotonic() < deadline, replica.output()
            time.sleep(0.02)
        assert r.config_get("replicaof")["replicaof"] == f"127.0.0.1 {primary.port}"
    # REPLICAOF NO ONE, then CONFIG REWRITE: the file no longer makes it a replica.
    r = by_file.client()
    assert r.execute_command("SLAVEOF", "NO", "ONE") is True
    r.config_rewrite()
    lines = conf.read_text().splitlines()
    assert not [line for line in lines if line.startswith(("slaveof", "replicaof"))], lines
    assert 'masterauth "pw"' in lines
