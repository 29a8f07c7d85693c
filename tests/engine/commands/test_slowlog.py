"""engine.commands.slowlog and the engine's slow path: which commands enter the slow log (at
or above slowlog-log-slower-than; the commands EXEC and a script ran, each on its own, EXEC
itself never; a blocked command once served, with all its time), SLOWLOG's replies and errors
(src/slowlog.c), and that a command under the threshold costs no entry. Commands are timed by
a fake clock (tests.support.command_clock): each takes exactly the step it sets."""

from __future__ import annotations

import sys
import threading

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.monitoring import Monitoring
from streamkeep.engine.wire.compiled import running
from tests.support.command_clock import command_clock
from tests.support.resp_client import RespError
from tests.support.server_util import connect, start_server


def argvs(engine: Engine) -> list[list[bytes]]:
    return [entry[3] for entry in engine.execute("SLOWLOG", "GET", "-1")]


def test_defaults_log_commands_of_10_ms_or_more(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = command_clock(monkeypatch, step=9_999_999)
    engine = Engine()
    assert engine.execute("CONFIG", "GET", "slowlog-*") == [
        b"slowlog-log-slower-than", b"10000", b"slowlog-max-len", b"128"]
    engine.execute("XADD", "s", "1-1", "f", "v")
    assert engine.execute("SLOWLOG", "LEN") == 0
    clock.step = 10_000_000  # exactly the threshold: logged
    engine.execute("XADD", "s", "1-2", "f", "v")
    [entry] = engine.execute("SLOWLOG", "GET")
    entry_id, when, usec, argv, addr, name = entry
    assert (entry_id, usec, argv, addr, name) == (
        0, 10_000, [b"XADD", b"s", b"1-2", b"f", b"v"], b"", b"")
    assert abs(when - int(__import__("time").time())) <= 5


def test_off_everything_and_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    command_clock(monkeypatch, step=50_000_000)
    engine = Engine()
    engine.execute("CONFIG", "SET", "slowlog-log-slower-than", "-1")
    engine.execute("PING")
    assert engine.execute("SLOWLOG", "LEN") == 0
    engine.execute("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "3")
    for i in range(5):
        engine.execute("SET", f"k{i}", "v")
    assert argvs(engine) == [[b"SET", b"k4", b"v"], [b"SET", b"k3", b"v"],
                             [b"SET", b"k2", b"v"]]
    assert [e[0] for e in engine.execute("SLOWLOG", "GET", "2")] == [6, 5]
    assert engine.execute("SLOWLOG", "RESET") == "OK"
    assert engine.execute("SLOWLOG", "LEN") == 1  # RESET itself, logged once it ran
    engine.execute("CONFIG", "SET", "slowlog-max-len", "0")
    engine.execute("PING")
    assert engine.execute("SLOWLOG", "LEN") == 2  # the LEN above; max-len 0: no more


def test_exec_and_scripts_log_their_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    command_clock(monkeypatch, step=1_000)
    engine = Engine()
    engine.execute("CONFIG", "SET", "slowlog-log-slower-than", "0")
    engine.execute("SLOWLOG", "RESET")
    engine.execute("MULTI")
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("XLEN", "s")
    engine.execute("EXEC")
    engine.execute("EVAL", "return redis.call('XLEN', KEYS[1])", "1", "s")
    assert argvs(engine)[:5] == [
        [b"EVAL", b"return redis.call('XLEN', KEYS[1])", b"1", b"s"],
        [b"XLEN", b"s"],  # the script's command
        [b"XLEN", b"s"], [b"XADD", b"s", b"1-1", b"f", b"v"],  # EXEC's, not EXEC
        [b"MULTI"],
    ]


def test_a_blocked_command_is_logged_once_served(monkeypatch: pytest.MonkeyPatch) -> None:
    command_clock(monkeypatch, step=6_000_000)
    engine = Engine()
    engine.execute("XADD", "s", "1-1", "f", "v")
    done = threading.Event()
    threading.Thread(target=lambda: (engine.execute("XREAD", "BLOCK", "0", "STREAMS", "s",
                                                    "$"), done.set()), daemon=True).start()
    while not engine.waiting.blocked_clients():
        done.wait(0.01)
    assert engine.execute("SLOWLOG", "LEN") == 0  # blocked: not yet
    engine.execute("XADD", "s", "1-2", "f", "v")
    assert done.wait(10)
    # Its first run and its re-run: 12 ms over the threshold of 10; the XADDs took 6 ms.
    [entry] = engine.execute("SLOWLOG", "GET")
    assert entry[2] == 12_000 and entry[3] == [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]


def test_errors() -> None:
    engine = Engine()
    for argv, line in [
        (("SLOWLOG", "GET", "-2"), "ERR count should be greater than or equal to -1"),
        (("SLOWLOG", "GET", "x"), "ERR count should be greater than or equal to -1"),
        (("SLOWLOG", "GET", "1", "2"), "ERR unknown subcommand or wrong number of arguments "
                                       "for 'GET'. Try SLOWLOG HELP."),
        (("SLOWLOG", "nosuch"), "ERR unknown subcommand 'nosuch'. Try SLOWLOG HELP."),
        (("SLOWLOG", "LEN", "x"), "ERR wrong number of arguments for 'slowlog|len' command"),
        (("SLOWLOG",), "ERR wrong number of arguments for 'slowlog' command"),
        (("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
         "ERR CONFIG SET failed (possibly related to argument 'slowlog-log-slower-than') - "
         "argument must be between -1 and 9223372036854775807 inclusive"),
    ]:
        with pytest.raises(ReplyError) as err:
            engine.execute(*argv)
        assert str(err.value) == line, argv
    assert engine.execute("SLOWLOG", "HELP")[1] == "GET [<count>]"


def test_a_fast_command_builds_no_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the thresholds the slow path is never entered: one comparison per command (the
    count of entries is checked on the interpreted engine: a compiled method is not patched)."""
    calls: list[tuple] = []
    interpreted = not running(sys.modules[Monitoring.__module__])
    if interpreted:
        original = Monitoring.slow_call
        monkeypatch.setattr(Monitoring, "slow_call",
                            lambda self, *a: (calls.append(a), original(self, *a)))
    clock = command_clock(monkeypatch, step=1_000)
    engine = Engine()
    for i in range(1000):
        engine.execute("XADD", "s", "*", "f", str(i))
    assert calls == [] and engine.execute("SLOWLOG", "LEN") == 0
    clock.step = 20_000_000
    engine.execute("XLEN", "s")
    assert len(calls) == (1 if interpreted else 0)
    assert engine.execute("SLOWLOG", "LEN") == 1


def test_over_the_wire_the_client_address_and_name() -> None:
    handle = start_server(Engine())
    try:
        client = connect(handle)
        client.execute("CONFIG", "SET", "slowlog-log-slower-than", "0")
        client.execute("CLIENT", "SETNAME", "loader")
        with pytest.raises(RespError):
            client.execute("AUTH", "not-a-password")
        client.execute("XADD", "s", "*", "f", "v")
        entries = client.execute("SLOWLOG", "GET", "3")
        [addr] = {e[4] for e in entries}
        assert addr.startswith(b"127.0.0.1:") and int(addr.split(b":")[1]) > 0
        assert [e[5] for e in entries] == [b"loader"] * 3
        assert [c.addr.encode() for c in handle.server.clients.values()] == [addr]
        assert entries[1][3] == [b"AUTH", b"(redacted)"]  # a failed AUTH too
        client.close()
    finally:
        handle.stop()
