"""tools.servers with real processes: a command's server (tracked) is ended by the command's
cleanup, a test's own server (untracked) outlives a command run in the same process; kill takes
the server's process group, stop asks first and kills what is left; restart keeps the port.
etcd too: its ports kept across a kill and a start, and an impostor on its port not taken for
it."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import threading
from pathlib import Path

import pytest

from streamkeep.tools import servers, temporaries
from streamkeep.tools.main import main
from streamkeep.tools.servers import EtcdServer, RedisServer, StreamkeepServer, kill_all
from tests.support.serve_process import ServeProcess


def test_a_command_run_in_process_leaves_a_tests_server_running(tmp_path: Path) -> None:
    """tools.main ends every command with tools.temporaries' cleanup, which SIGKILLs the
    children a command tracked: a test's server is not one of them."""
    server = ServeProcess(tmp_path / "data")
    try:
        main(["aof", "verify", str(tmp_path / "data")])  # (its exit status aside)
        kill_all()  # (the crash bench's way out: its own servers only)
        assert server.proc.poll() is None
        assert server.client().ping()
    finally:
        server.kill()


def test_a_commands_server_ends_with_the_commands_cleanup(tmp_path: Path) -> None:
    server = StreamkeepServer(str(tmp_path / "data")).start()
    try:
        temporaries.cleanup()
        assert server.proc is not None and server.proc.wait(10) == -signal.SIGKILL
    finally:
        server.kill()


def test_kill_takes_the_group_stop_asks_first_restart_keeps_the_port(tmp_path: Path) -> None:
    with StreamkeepServer(str(tmp_path / "data"), appendfsync="everysec") as server:
        server.start()
        port, pid = server.port, server.pid
        assert pid is not None and os.getpgid(pid) == pid  # a process group of its own
        assert (server.cpu_seconds() or 0) > 0 and server.rss_bytes() > 0
        server.stop()
        assert server.proc is not None and server.proc.returncode == 0  # a clean shutdown
        server.restart()
        assert server.port == port and server.pid != pid
        assert server.info("server")["tcp_port"] == str(port)
        server.kill()
        assert not server.alive
        assert "listening on" in server.banner()


def _impostor() -> tuple[socket.socket, int]:
    """A listener that answers any command like a ready server of another process: PONG,
    and an INFO whose process_id is not ours."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    info = b"process_id:1\r\n"
                    conn.sendall(b"+PONG\r\n" if b"PING" in data.upper()
                                 else b"$%d\r\n%s\r\n" % (len(info), info))

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


@pytest.mark.parametrize("kind", [RedisServer, StreamkeepServer])
def test_a_server_another_process_beat_to_its_port_is_not_taken_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type) -> None:
    """The port a server was given is taken by another process before it binds it: the
    process answering PING there is not this server, which exits ("Address already in use")
    and is started again on another port."""
    listener, taken = _impostor()
    ports = iter([taken])
    free = servers.free_port
    monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or free())
    try:
        with kind(str(tmp_path / "data")) as server:
            server.start()
            assert server.port != taken
            assert int(server.info("server")["process_id"]) == server.pid
    finally:
        listener.close()


def test_etcd_stop_asks_first_kill_keeps_the_ports_and_data(tmp_path: Path) -> None:
    with EtcdServer(str(tmp_path / "member")) as server:
        server.start()
        ports, pid = (server.port, server.peer_port), server.pid
        assert pid is not None and os.getpgid(pid) == pid  # a process group of its own
        assert server.url == f"http://127.0.0.1:{server.port}"
        revision = server.client().put("k", b"v")
        server.stop()
        assert server.proc is not None and server.proc.returncode == -signal.SIGTERM
        server.start()
        server.kill()
        assert server.proc is not None and server.proc.returncode == -signal.SIGKILL
        server.restart()
        assert (server.port, server.peer_port) == ports and server.pid not in (None, pid)
        with server.client() as client:
            assert client.get("k") == (b"v", revision)
            assert [m.name for m in client.members()] == [server.member_name]
    assert not server.alive
    server.remove_files()
    assert not os.path.exists(server.data_dir) and not os.path.exists(str(server.log_path))


class _EtcdImpostor(http.server.BaseHTTPRequestHandler):
    """Answers any request as an etcd member of another name would."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"header": {"revision": "1"},
                           "members": [{"name": "another", "clientURLs": []}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_etcd_another_process_beat_to_its_port_is_not_taken_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    impostor = http.server.HTTPServer(("127.0.0.1", 0), _EtcdImpostor)
    thread = threading.Thread(target=impostor.serve_forever, daemon=True)
    thread.start()
    taken = impostor.server_address[1]
    ports = iter([taken])
    free = servers.free_port
    monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or free())
    try:
        with EtcdServer(str(tmp_path / "member")) as server:
            server.start()
            assert server.port != taken
            with server.client() as client:
                assert [m.name for m in client.members()] == [server.member_name]
    finally:
        impostor.shutdown()
        impostor.server_close()
        thread.join()
