"""A script past busy-reply-threshold on a real `streamkeep serve` process, as Redis handles
one: other clients, connected before or after, are answered BUSY (or NOAUTH before AUTH, or the
allow_busy commands run), SCRIPT KILL stops a script that wrote nothing and is refused
(UNKILLABLE) once it wrote, SHUTDOWN NOSAVE stops any, a script whose client went away runs on
and stays killable, and SIGTERM or SIGINT stop the server with its usual exit status, the
script's writes discarded. The scripts spend their time in redis.call, pcall and the libraries
as well as in plain Lua: the server must serve in every case.

Every wait is for a reply (BUSY, the kill's error, the connection closing), never a time."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from streamkeep.engine.exec.scripting import BUSY, KILLED, UNKILLABLE, sha1hex
from tests.support.resp_client import RespClient, RespError, encode_command, read_raw_reply
from tests.support.serve_process import ServeProcess

pytest.importorskip("lupa")

Spawn = Callable[..., ServeProcess]

LOOPS = [
    "while true do end",
    "while true do redis.call('ping') end",
    "while true do pcall(redis.call, 'ping') end",
    "while true do redis.pcall('ping') end",
    "local n = 0 while true do n = n + #redis.call('get', 'k') end",
    "while true do cjson.encode({1, 2}) end",
    "while true do bit.band(1, 3) end",
]


def client(server: ServeProcess, password: str | None = None) -> RespClient:
    c = RespClient(server.host, server.port, timeout=60)
    if password is not None:
        assert c.execute("AUTH", password) == "OK"
    return c


def start_script(server: ServeProcess, script: str, password: str | None = None,
                 threshold: int = 100) -> socket.socket:
    """A connection running `script`, once another client (connected before) is answered
    BUSY."""
    probe = client(server, password)
    probe.execute("CONFIG", "SET", "busy-reply-threshold", str(threshold))
    probe.execute("SET", "k", "v")
    sock = socket.create_connection((server.host, server.port), timeout=60)
    if password is not None:
        sock.sendall(encode_command("AUTH", password))
        assert read_raw_reply(sock.makefile("rb")) == b"+OK\r\n"
    sock.sendall(encode_command("EVAL", script, "0"))
    with probe:
        while True:
            try:
                probe.execute("PING")
            except RespError as err:
                assert str(err) == BUSY
                return sock


def killed_line(script: str) -> bytes:
    return (f"-{KILLED} script: {sha1hex(script.encode())}, on @user_script:1.\r\n").encode()


@pytest.mark.parametrize("script", LOOPS)
def test_a_busy_script_is_answered_for_and_killed(spawn: Spawn, tmp_path: Path,
                                                  script: str) -> None:
    server = spawn(tmp_path / "d")
    sock = start_script(server, script)
    with client(server) as other:  # connected while the script is busy
        with pytest.raises(RespError, match="^BUSY"):
            other.execute("GET", "k")
        with pytest.raises(RespError, match="^ERR unknown command"):
            other.execute("NOSUCH")
        assert other.execute("SCRIPT", "KILL") == "OK"
        assert read_raw_reply(sock.makefile("rb")) == killed_line(script)
        assert other.execute("PING") == "PONG"
        assert other.execute("GET", "k") == b"v"
    sock.close()


def test_a_script_that_wrote_is_unkillable_and_shutdown_nosave_stops_it(
        spawn: Spawn, tmp_path: Path) -> None:
    server = spawn(tmp_path / "d")
    with client(server) as c:
        c.execute("SET", "before", "1")
    sock = start_script(server, "redis.call('set', 'during', '1') while true do "
                                "redis.call('ping') end")
    with client(server) as other:
        with pytest.raises(RespError) as caught:
            other.execute("SCRIPT", "KILL")
        assert str(caught.value) == UNKILLABLE
        with pytest.raises(RespError) as caught:
            other.execute("SHUTDOWN")
        assert str(caught.value) == BUSY
        other.send("SHUTDOWN", "NOSAVE")
        assert server.wait() == 0
    sock.close()
    again = spawn(tmp_path / "d")
    with client(again) as c:
        assert c.execute("GET", "before") == b"1"
        assert c.execute("EXISTS", "during") == 0  # the script's write went down with it


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_shutdown_signal_stops_a_busy_script(spawn: Spawn, tmp_path: Path,
                                               sig: signal.Signals) -> None:
    server = spawn(tmp_path / "d")
    sock = start_script(server, "redis.call('set', 'during', '1') "
                                "while true do pcall(redis.call, 'ping') end")
    server.proc.send_signal(sig)
    assert server.wait() == 0
    assert "shut down cleanly" in server.wait_output("shut down cleanly")
    sock.close()
    again = spawn(tmp_path / "d")
    with client(again) as c:
        assert c.execute("EXISTS", "during") == 0


def test_a_script_runs_on_after_its_client_left_and_stays_killable(
        spawn: Spawn, tmp_path: Path) -> None:
    """As in Redis: the client going away does not stop the script."""
    server = spawn(tmp_path / "d")
    start_script(server, "while true do redis.call('ping') end").close()
    with client(server) as other:
        with pytest.raises(RespError, match="^BUSY"):
            other.execute("PING")
        assert other.execute("SCRIPT", "KILL") == "OK"
        while True:  # (the kill lands at the script's next line)
            try:
                assert other.execute("PING") == "PONG"
                break
            except RespError as err:
                assert str(err) == BUSY


def test_while_busy_a_client_must_authenticate(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn(tmp_path / "d", "--requirepass", "s3cret")
    sock = start_script(server, "while true do redis.call('ping') end", password="s3cret")
    with client(server) as other:
        with pytest.raises(RespError, match="^NOAUTH"):
            other.execute("SCRIPT", "KILL")
        assert other.execute("AUTH", "s3cret") == "OK"
        assert other.execute("MULTI") == "OK"  # allow_busy: runs
        with pytest.raises(RespError, match="^BUSY"):
            other.execute("GET", "k")
        with pytest.raises(RespError, match="^EXECABORT"):
            other.execute("EXEC")
        assert other.execute("SCRIPT", "KILL") == "OK"
    assert read_raw_reply(sock.makefile("rb")) == killed_line(
        "while true do redis.call('ping') end")
    sock.close()


def test_wait_in_multi_and_in_a_script_returns_at_once(spawn: Spawn, tmp_path: Path) -> None:
    """Redis 7.2+: WAIT and WAITAOF may run in a script, never blocking (no replica here)."""
    server = spawn(tmp_path / "d", "--appendfsync", "always")
    with client(server) as c:
        assert c.execute("SET", "k", "v") == "OK"
        assert c.execute("EVAL", "return {redis.call('WAIT', 1, 0), "
                                 "redis.call('WAITAOF', 1, 1, 0)}", "0") == [0, [1, 0]]
        c.execute("MULTI")
        c.execute("WAIT", "1", "0")
        assert c.execute("EXEC") == [0]
