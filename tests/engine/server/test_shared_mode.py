"""engine.server.shared_mode: the Unix socket listener (a live server's socket refused, a
stale one replaced, the mode set from the start, only its own file removed) and a shared
server's life through `streamkeep serve --shared` as a real process: --daemonize exits 0 once
it serves (1 with the reason if it cannot), a second server on the same directory is refused,
and the idle exit waits for a process that is connecting (it holds the start lock)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.engine.server.shared_mode import UnixSocketError, listen_unix, remove_unix
from streamkeep.engine.services.shared import start_lock
from tests.support.pids import alive, wait_gone
from tests.support.serve_process import ROOT, ServeProcess
from tests.support.shared_dirs import servers_of


def test_a_socket_someone_listens_on_is_refused_a_stale_one_replaced(tmp_path: Path) -> None:
    file = str(tmp_path / "s.sock")
    live, identity = listen_unix(file, 0o700)
    try:
        assert stat.S_IMODE(os.lstat(file).st_mode) == 0o700
        with pytest.raises(UnixSocketError, match=rf"a server \(process {os.getpid()}\) "
                                                  "already listens on it"):
            listen_unix(file)
    finally:
        live.close()  # the file stays: a stale socket, as a killed server leaves it
    assert stat.S_ISSOCK(os.lstat(file).st_mode)
    again, new_identity = listen_unix(file, 0o600)
    try:
        assert new_identity != identity
        assert stat.S_IMODE(os.lstat(file).st_mode) == 0o600
        remove_unix(file, identity)  # not this file any more: left alone
        assert os.path.exists(file)
        remove_unix(file, new_identity)
        assert not os.path.exists(file)
    finally:
        again.close()


def test_a_path_that_is_not_a_socket_is_not_replaced(tmp_path: Path) -> None:
    file = tmp_path / "s.sock"
    file.write_text("data")
    with pytest.raises(UnixSocketError, match="not a socket"):
        listen_unix(str(file))
    assert file.read_text() == "data"


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamkeep", "serve", *args], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, check=False)


def test_daemonize_exits_once_the_detached_server_serves(shared_dir: Path) -> None:
    done = serve("--shared", "--daemonize", "--dir", str(shared_dir))
    assert done.returncode == 0, done.stderr
    (pid,) = servers_of(shared_dir)
    assert f"listening on {shared_dir / 'shared.sock'}" in done.stdout
    assert f"shared, pid {pid}" in done.stdout
    with Engine.open(str(shared_dir), shared=True) as engine:
        assert engine.server_pid == pid
        # A second one is refused while this one answers: one server per directory.
        again = serve("--shared", "--daemonize", "--dir", str(shared_dir))
        assert again.returncode == 1
        assert f"a server (process {pid}) already listens on it" in again.stderr
        for refused in set(servers_of(shared_dir)) - {pid}:  # (said so, then exits)
            wait_gone(refused, 30)
        assert servers_of(shared_dir) == [pid]
        assert engine.execute("PING") == "PONG"


def test_the_ready_line_says_when_the_server_exits_when_idle(shared_dir: Path) -> None:
    shared_dir.mkdir()
    (shared_dir / "shared.conf").write_text("idle-shutdown 0\n")  # (as CONFIG REWRITE leaves it)
    done = serve("--shared", "--daemonize", "--dir", str(shared_dir))
    assert done.returncode == 0, done.stderr
    assert "never exits when idle (idle-shutdown 0)" in done.stdout
    assert "exits 0 s" not in done.stdout
    with Engine.open(str(shared_dir), shared=True) as engine:
        engine.set_config("idle-shutdown", 5)
        assert engine.execute("CONFIG", "REWRITE") == "OK"
        engine.shutdown_server()
    done = serve("--shared", "--daemonize", "--dir", str(shared_dir))
    assert done.returncode == 0, done.stderr
    assert "exits 5 s after its last client" in done.stdout


def test_daemonize_says_why_it_cannot_start(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir)):  # in process: the directory is locked
        for extra in (["--shared", "--daemonize"], ["--port", "0"]):
            done = serve(*extra, "--dir", str(shared_dir))
            assert done.returncode == 4, done.stderr  # (in use: a starter may wait it out)
            assert f"is locked by process {os.getpid()}" in done.stderr
    assert not (shared_dir / "shared.sock").exists()
    (shared_dir / "manifest.json").unlink()  # data, but no manifest: it cannot be opened
    done = serve("--shared", "--daemonize", "--dir", str(shared_dir))
    assert done.returncode == 1, done.stderr  # the detached child's own status
    assert "manifest is missing" in done.stderr


def test_shared_takes_no_tcp_options(shared_dir: Path) -> None:
    for option in (["--port", "7000"], ["--bind", "127.0.0.1"], ["--unixsocket", "/tmp/x"]):
        done = serve("--shared", "--dir", str(shared_dir), *option)
        assert done.returncode == 3
        assert "--shared listens on DIR/shared.sock only" in done.stderr
    assert not shared_dir.exists()


def test_the_idle_exit_waits_for_a_process_that_is_connecting(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True, idle_shutdown=1) as engine:
        pid = engine.server_pid
    # A process between finding the socket and its first reply holds the start lock shared:
    # the server stays idle past its time, and exits only once that lock is free.
    with start_lock(str(shared_dir), exclusive=False):
        time.sleep(2.5)
        assert alive(pid)
    wait_gone(pid, 30)
    assert servers_of(shared_dir) == []


def test_a_server_whose_directory_was_removed_exits_when_idle(shared_dir: Path) -> None:
    """Its idle check used to fail on the start lock's missing file and never run again: the
    server outlived its directory for good."""
    import shutil

    with Engine.open(str(shared_dir), shared=True, idle_shutdown=1) as engine:
        pid = engine.server_pid
    shutil.rmtree(shared_dir)
    wait_gone(pid, 30)


def test_a_config_rewrite_writes_the_directorys_settings(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        engine.set_config("stream-node-max-entries", 50)
        assert engine.execute("CONFIG", "REWRITE") == "OK"
        pid = engine.server_pid
        engine.shutdown_server()
    wait_gone(pid, 30)
    text = (shared_dir / "shared.conf").read_text()
    assert "stream-node-max-entries 50" in text and "appendfsync everysec" in text
    with Engine.open(str(shared_dir), shared=True, stream_node_max_entries=50) as engine:
        assert engine.server_pid != pid


def test_a_plain_server_listens_on_a_unix_socket_too(
        tmp_path: Path, spawn: Callable[..., ServeProcess]) -> None:
    import redis

    file = tmp_path / "sk.sock"
    server = spawn(tmp_path / "data", "--unixsocket", str(file), "--unixsocketperm", "770")
    assert f"and {file}" in server.output()
    assert stat.S_IMODE(os.lstat(file).st_mode) == 0o770
    over_unix = redis.Redis(unix_socket_path=str(file))
    try:
        assert over_unix.xadd("s", {"a": "1"}, id="1-1") == b"1-1"
        assert server.client().xlen("s") == 1
        assert over_unix.config_get("unixsocketperm") == {"unixsocketperm": "770"}
    finally:
        over_unix.close()
    server.client().shutdown()
    assert server.wait() == 0
    assert not file.exists()  # removed on the way out
