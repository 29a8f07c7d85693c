"""engine.services.shared: a data directory opened in shared mode, with real processes. The first
opener starts a detached server (its own session, not this process's child once started) on
the directory's socket, mode 0700 in a directory of mode 0700; later openers reach the same
server; its settings are the directory's (recorded, checked, never silently changed); an
in-process opener and a shared one name each other's pid; a stale socket is replaced, a file
that is not this user's socket never connected to; the server exits once idle, not before."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import LockedError, lock_holder
from streamkeep.aof.manifest import LOCK_FILE
from streamkeep.engine.exec.settings import ConfigError, read_config_file
from streamkeep.engine.services import shared
from streamkeep.engine.services.shared import (
    MAX_SOCKET_PATH,
    SharedDirectory,
    open_shared,
    serving,
)
from streamkeep.engine.services.shared_client import SharedError
from tests.support.pids import alive, wait_gone
from tests.support.serve_process import ROOT
from tests.support.shared_dirs import assert_no_server, servers_of

ROOT_ONLY = pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")


def test_the_first_opener_starts_a_detached_server_the_others_reach(shared_dir: Path) -> None:
    engine = Engine.open(str(shared_dir), shared=True)
    try:
        pid = engine.server_pid
        assert servers_of(shared_dir) == [pid]
        # Detached: a session of its own, and no longer this process's child.
        assert os.getsid(pid) == pid and os.getsid(pid) != os.getsid(0)
        with open(f"/proc/{pid}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) != os.getpid()
        assert stat.S_IMODE(os.stat(shared_dir).st_mode) == 0o700
        sock = shared_dir / "shared.sock"
        assert stat.S_ISSOCK(os.lstat(sock).st_mode)
        assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o700
        assert engine.execute("CONFIG", "GET", "unixsocket") == [b"unixsocket", bytes(sock)]
        assert engine.execute("CONFIG", "GET", "port") == [b"port", b"0"]
        engine.execute("XADD", "s", "1-1", "a", "b")
        with Engine.open(str(shared_dir), shared=True) as other:
            assert other.server_pid == pid
            assert other.execute("XRANGE", "s", "-", "+") == [[b"1-1", [b"a", b"b"]]]
        assert servers_of(shared_dir) == [pid]
    finally:
        engine.close()


def test_a_new_directorys_settings_are_the_first_openers_and_are_recorded(
        shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True, appendfsync="always",
                     stream_node_max_entries=7) as engine:
        assert engine.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]
        recorded = read_config_file(shared_dir / "shared.conf")
        assert recorded["appendfsync"] == "always"
        assert recorded["stream-node-max-entries"] == 7
        # The same settings again (spelled either way): the same server.
        with Engine.open(str(shared_dir), shared=True, appendfsync="always",
                         **{"stream-node-max-entries": "7"}) as same:
            assert same.server_pid == engine.server_pid
        # Nothing asked: the directory's.
        with Engine.open(str(shared_dir), shared=True) as plain:
            assert plain.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]


def test_a_different_fsync_policy_is_an_error_not_a_downgrade(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True, appendfsync="always") as engine:
        with pytest.raises(SharedError) as refused:
            Engine.open(str(shared_dir), shared=True, appendfsync="everysec")
        text = str(refused.value)
        assert f"process {engine.server_pid}" in text
        assert "appendfsync always, not everysec" in text
        assert str(shared_dir / "shared.conf") in text
        assert engine.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]
    # With no server running the directory's record still decides: the new server runs with
    # it, and the opener asking otherwise is refused the same way.
    wait_gone(engine_pid_after_stop(shared_dir), 30)
    with pytest.raises(SharedError, match="appendfsync always, not no"):
        Engine.open(str(shared_dir), shared=True, appendfsync="no")


def engine_pid_after_stop(path: Path) -> int:
    """Stop the directory's server (SHUTDOWN); its pid."""
    with Engine.open(str(path), shared=True) as engine:
        pid = engine.server_pid
        engine.shutdown_server()
    return pid


def test_settings_only_an_in_process_engine_takes_are_refused(tmp_path: Path) -> None:
    for bad in ({"fs": object()}, {"aof_segment_max_bytes": 1 << 20}, {"clock": time.time}):
        with pytest.raises(SharedError, match="not a setting of a shared directory"):
            Engine.open(str(tmp_path / "d"), shared=True, **bad)
    with pytest.raises(ConfigError, match="unknown config 'no-such-setting'"):
        Engine.open(str(tmp_path / "d"), shared=True, no_such_setting=1)
    with pytest.raises(ValueError, match="shared=True needs a data directory path"):
        Engine.open(None, shared=True)
    assert not (tmp_path / "d").exists()  # refused before anything was made


def test_an_in_process_holder_and_a_shared_opener_name_each_other(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir)) as engine:
        with pytest.raises(LockedError) as refused:
            Engine.open(str(shared_dir), shared=True)
        assert f"open in process {os.getpid()} without shared mode" in str(refused.value)
        assert engine.execute("PING") == "PONG"
    assert_no_server(shared_dir)  # the server that could not open it is gone
    with Engine.open(str(shared_dir), shared=True) as shared:
        with pytest.raises(LockedError) as refused:
            Engine.open(str(shared_dir))
        text = str(refused.value)
        assert f"locked by process {shared.server_pid}" in text
        assert "shared server: open it with shared=True" in text


def test_a_killed_server_is_replaced_by_the_next_call(shared_dir: Path) -> None:
    engine = Engine.open(str(shared_dir), shared=True, appendfsync="always")
    try:
        ids = [engine.execute("XADD", "s", "*", "n", i) for i in range(50)]
        old = engine.server_pid
        os.kill(old, signal.SIGKILL)
        wait_gone(old, 30)
        assert stat.S_ISSOCK(os.lstat(shared_dir / "shared.sock").st_mode)  # left behind
        assert serving(shared_dir) is None  # stale: nothing answers on it
        # The next call finds its connection gone before it sent anything: it reconnects,
        # which starts a new server that recovers the directory as any restart does.
        assert engine.execute("XLEN", "s") == 50
        assert engine.server_pid != old
        assert [e[0] for e in engine.execute("XRANGE", "s", "-", "+")] == ids
        assert servers_of(shared_dir) == [engine.server_pid]
    finally:
        engine.close()


def test_a_file_that_is_not_a_socket_is_never_connected_to(shared_dir: Path) -> None:
    shared_dir.mkdir(mode=0o700)
    (shared_dir / "shared.sock").write_text("not a socket")
    with pytest.raises(SharedError, match="not a socket; refusing to connect"):
        Engine.open(str(shared_dir), shared=True)
    assert servers_of(shared_dir) == []  # none was started


@ROOT_ONLY
def test_another_users_socket_or_directory_is_refused(shared_dir: Path, tmp_path: Path) -> None:
    shared_dir.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(shared_dir / "shared.sock"))
    listener.listen()
    try:
        os.chown(shared_dir / "shared.sock", 65534, 65534)
        with pytest.raises(SharedError, match="owned by uid 65534, not by this user"):
            Engine.open(str(shared_dir), shared=True)
    finally:
        listener.close()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(SharedError, match="a shared directory is its owner's only"):
        Engine.open(str(theirs), shared=True)


def test_an_existing_directory_is_made_its_owners_only(shared_dir: Path) -> None:
    shared_dir.mkdir(mode=0o755)
    os.chmod(shared_dir, 0o755)
    with Engine.open(str(shared_dir), shared=True) as engine:
        assert engine.execute("PING") == "PONG"
    assert stat.S_IMODE(os.stat(shared_dir).st_mode) == 0o700


def test_a_path_too_long_for_a_socket_address_works(tmp_path: Path) -> None:
    from tests.support.shared_dirs import stop_servers

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(str(deep / "shared.sock")) > MAX_SOCKET_PATH
    try:
        with Engine.open(str(deep), shared=True) as engine:
            engine.execute("SET", "k", "v")
            with Engine.open(str(deep), shared=True) as other:
                assert other.execute("GET", "k") == b"v"
    finally:
        stop_servers(deep)


def test_the_server_exits_once_idle_and_not_while_a_client_remains(shared_dir: Path) -> None:
    first = Engine.open(str(shared_dir), shared=True, idle_shutdown=1)
    pid = first.server_pid
    second = Engine.open(str(shared_dir), shared=True)
    first.close()
    time.sleep(2.5)  # more than idle-shutdown: `second` still holds a connection
    assert alive(pid)
    assert second.execute("PING") == "PONG"
    second.close()
    wait_gone(pid, 30)
    assert not (shared_dir / "shared.sock").exists()  # removed on the way out
    assert lock_holder(str(shared_dir / "LOCK")) is None
    with open(shared_dir / "shared.log") as log:
        assert "shut down cleanly (idle)" in log.read()
    # The next opener starts a new one on the directory as it was left.
    with Engine.open(str(shared_dir), shared=True) as again:
        assert again.server_pid != pid
        assert again.execute("CONFIG", "GET", "idle-shutdown") == [b"idle-shutdown", b"1"]


def test_a_server_that_cannot_start_says_why(shared_dir: Path) -> None:
    shared_dir.mkdir(mode=0o700)
    (shared_dir / "segment-000001.aof").write_bytes(b"x" * 100)  # data, but no manifest
    with pytest.raises(SharedError) as refused:
        Engine.open(str(shared_dir), shared=True)
    text = str(refused.value)
    assert "its shared server could not start" in text and "manifest is missing" in text
    assert str(shared_dir / "shared.log") in text
    assert_no_server(shared_dir)


HOLD_LOCK = ("import sys; from streamkeep.aof.fs import RealFS; RealFS().lock(sys.argv[1]); "
             "print('held', flush=True); sys.stdin.read()")


def test_a_lock_holder_that_lets_go_while_the_server_starts_is_waited_out(
        shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race of a killed server's successor: the directory's lock is still held when the
    new server tries it (the kernel is tearing the killed one down), and free when the starter
    looks for its holder. The starter tries again instead of reporting the refusal."""
    shared_dir.mkdir(mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(shared_dir / LOCK_FILE)],
                              cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        looks = []

        def look(path: str) -> int | None:  # the holder goes just before the first look
            if not looks:
                assert holder.stdin is not None
                holder.stdin.close()
                holder.wait(30)
            looks.append(lock_holder(path))
            return looks[-1]

        monkeypatch.setattr(shared, "lock_holder", look)
        with Engine.open(str(shared_dir), shared=True) as engine:
            assert engine.execute("PING") == "PONG"
            assert servers_of(shared_dir) == [engine.server_pid]
        assert looks == [None]  # one refused start (the lock was held), then one that served
        assert "data directory is in use" in (shared_dir / "shared.log").read_text()
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_lets_go_by_itself_only_if_it_is_exiting_or_a_shared_server() -> None:
    assert not shared._letting_go(os.getpid())  # a live process, not a server
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        assert not shared._letting_go(sleeper.pid)
        sleeper.kill()
        wait_zombie(sleeper.pid)  # not reaped yet: a zombie has released what it held
        assert shared._letting_go(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert shared._letting_go(sleeper.pid)  # gone
    server = subprocess.Popen([sys.executable, "-c", "print('up', flush=True); input()",
                               "serve", "--shared"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline() == b"up\n"
        assert shared._letting_go(server.pid)  # its command line says it is a shared server
    finally:
        server.kill()
        server.wait()


def wait_zombie(pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return
        time.sleep(0.01)
    pytest.fail(f"process {pid} did not exit")


def test_a_shared_engine_pickles_as_its_path(shared_dir: Path) -> None:
    import pickle

    with open_shared(str(shared_dir), {"appendfsync": "everysec"}) as engine:
        copy = pickle.loads(pickle.dumps(engine))
        try:
            assert copy.path == engine.path and copy.server_pid == engine.server_pid
        finally:
            copy.close()


def test_the_directory_object_refuses_before_making_anything(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        SharedDirectory(str(tmp_path / "x"), {"appendfsync": "sometimes"})
    assert not (tmp_path / "x").exists()
