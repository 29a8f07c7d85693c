"""The Lua runtime (engine.exec.scripting): shebang flags, conversions both ways (RESP2 and
RESP3), the sandbox, the Lua heap's cap, a script's effects as one record that replays without
Lua, and busy-reply-threshold on the server: BUSY for other clients, SCRIPT KILL, UNKILLABLE
and SHUTDOWN NOSAVE."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.exec import scripting
from streamkeep.engine.exec.scripting import (
    BUSY,
    FLAG_ALLOW_OOM,
    FLAG_COMPAT,
    FLAG_NO_WRITES,
    NOSCRIPT,
    UNKILLABLE,
    Lrand48,
    parse_shebang,
    sha1hex,
)
from streamkeep.engine.wire.reply import NO_REPLY
from tests.support.diffutil import err
from tests.support.effects_util import Recorded
from tests.support.resp_client import RespClient, RespError, read_raw_reply
from tests.support.server_util import connect, read_until_closed, start_server

pytest.importorskip("lupa")


# --- shebang, sha1, the PRNG ------------------------------------------------------------------


def test_shebang_flags_and_errors() -> None:
    assert parse_shebang(b"return 1") == (FLAG_COMPAT, 0)
    assert parse_shebang(b"#!lua\nreturn 1") == (0, 5)
    assert parse_shebang(b"#!lua flags=no-writes,allow-oom\nx") == (
        FLAG_NO_WRITES | FLAG_ALLOW_OOM, 31)
    for body, line in [(b"#!lua", "ERR Invalid script shebang"),
                       (b"#!py\n", "ERR Unexpected engine in script shebang: #!py"),
                       (b"#!lua x=1\n", "ERR Unknown lua shebang option: x=1"),
                       (b"#!lua flags=nope\n", "ERR Unexpected flag in script shebang: nope")]:
        with pytest.raises(ReplyError) as caught:
            parse_shebang(body)
        assert caught.value.line == line


def test_sha1_and_lrand48() -> None:
    assert sha1hex(b"") == "da39a3ee5e6b4b0d3255bfef95601890afd80709"
    rand = Lrand48()
    # lrand48()'s sequence from its default state (POSIX): Redis's redisLrand48 is the same.
    assert [rand.next() for _ in range(3)] == [851401618, 1804928587, 758783491]
    rand.seed(1)
    assert rand.next() == 89400484


# --- conversions ------------------------------------------------------------------------------


def test_lua_to_reply() -> None:
    e = Engine()
    assert e.execute("EVAL", "return {1, 2.7, -2.7, 'x', true, false, nil, 'after'}", "0") == \
        [1, 2, -2, b"x", 1, None]
    assert e.execute("EVAL", "return {ok='fine'}", "0") == "fine"
    with pytest.raises(ReplyError, match="^MY error$"):
        e.execute("EVAL", "return {err='MY error'}", "0")
    assert e.execute("EVAL", "return {1, {err='E inner'}}", "0")[1].line == "E inner"


def test_resp3_conversions_through_setresp() -> None:
    e = Engine()
    e.execute("SET", "k", "v")
    script = """redis.setresp(3)
        local t = {}
        t[1] = type(redis.call('get', 'missing'))
        t[2] = redis.call('set', 'k2', 'v')['ok']
        local m = redis.call('xinfo', 'help')
        t[3] = type(m)
        return t"""
    assert e.execute("EVAL", script, "0") == [b"nil", b"OK", b"table"]
    assert e.execute("EVAL", "redis.setresp(3) return {double=3.5}", "0") == 3.5
    assert e.execute("EVAL", "redis.setresp(3) return {map={a=1}}", "0") == [b"a", 1]
    assert e.execute("EVAL", "redis.setresp(3) return {set={a=true}}", "0") == [b"a"]
    assert e.execute("EVAL", "redis.setresp(3) return true", "0") is True
    assert e.execute("EVAL", "redis.setresp(3) return false", "0") is False


def test_redis_8_wording_and_blocking_reads() -> None:
    e = Engine()
    assert err(e, "EVAL", "redis.log(9, 'x')", "0").startswith("ERR Invalid log level. script:")
    assert err(e, "EVAL", "redis.set_repl()", "0").startswith(
        "ERR redis.set_repl() requires one argument. script:")
    # Numbers passed to redis.call: integers when double2ll takes them, else the shortest form
    # (Redis 7.0 wrote every number with %.17g).
    numbers = ("local t = {} for i, n in ipairs({0.1, -0.0, 2^61, 1e20, 3}) do "
               "redis.call('SET', 'n', n) t[i] = redis.call('GET', 'n') end return t")
    assert e.execute("EVAL", numbers, "0") == [b"0.1", b"0", b"2305843009213693952", b"1e+20",
                                                b"3"]
    # A blocking read never blocks in a script (Redis 8: a null reply, like inside MULTI).
    assert e.execute("EVAL", "return redis.call('XREAD', 'BLOCK', 0, 'STREAMS', 's', '$')",
                     "0") is None


# --- the sandbox ------------------------------------------------------------------------------


def test_the_sandbox_keeps_the_real_globals_out_of_reach() -> None:
    e = Engine()
    for name in ("python", "io", "debug", "require", "dofile", "loadfile", "package", "print"):
        line = err(e, "EVAL", f"return {name}", "0")
        assert f"nonexistent global variable '{name}'" in line
    # A chunk made by loadstring runs in the sandbox too.
    assert "nonexistent global variable 'io'" in err(e, "EVAL", "return loadstring('return io')()",
                                                      "0")
    assert "readonly table" in err(e, "EVAL", "math.random = nil", "0")
    # Redis 8's os: os.clock alone. getfenv, setfenv and newproxy are gone since Redis 8.2.2
    # (CVE-2025-46818: lua-enable-deprecated-api, off by default).
    assert e.execute("EVAL", "return {type(os.clock()), type(os.time)}", "0") == \
        [b"number", b"nil"]
    for name in ("getfenv", "setfenv", "newproxy"):
        assert f"nonexistent global variable '{name}'" in err(e, "EVAL", f"return {name}", "0")
    assert "readonly table" in err(e, "EVAL", "os.clock = nil", "0")
    assert e.execute("EVAL", "return string.format('%d', 3)", "0") == b"3"  # still intact
    # The API's functions are C functions to Lua: nothing of the Python behind them shows.
    assert e.execute("EVAL", "return {type(redis.call), type(bit.band), type(math.random)}",
                     "0") == [b"function"] * 3
    for script, field in (("return tostring(redis.call.__self__)", "call"),
                          ("redis.call.x = 1", "call"), ("return bit.band.__globals__", "band")):
        assert err(e, "EVAL", script, "0").startswith(
            f"ERR user_script:1: attempt to index field '{field}' (a function value)")
    handler = ("local ok, e = xpcall(function() redis.call('nosuch') end, function(e) return e end)"
               " return {type(e), e.err}")
    assert e.execute("EVAL", handler, "0") == [b"table",
                                                b"ERR Unknown Redis command called from script"]
    assert "readonly table" in err(e, "EVAL", "_G.x = 1", "0")
    assert e.execute("EVAL", "return {bit.band(12, 10), bit.bor(1, 2, 4), bit.tohex(255, -4), "
                     "bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28)}", "0") == \
        [8, 7, b"00FF", -1, -2147483648, 15]


def test_the_lua_heap_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripting, "LUA_MAX_MEMORY", 8 << 20)
    e = Engine()
    hog = "local t = {} for i = 1, 1e7 do t[i] = string.rep('x', 100) .. i end return #t"
    # A pcall in the script catches Lua's memory error like any other.
    guarded = f"local ok, e = pcall(function() {hog} end) return e"
    assert e.execute("EVAL", guarded, "0") == b"not enough memory"
    line = err(e, "EVAL", hog, "0")
    assert line == f"ERR Error running script {sha1hex(hog.encode())}, not enough memory"
    assert e.execute("EVAL", "return 1 + 1", "0") == 2  # the runtime goes on
    assert e.execute("INFO", "memory").count(b"used_memory_lua:") == 1


# --- effects: one record, replayed without Lua ------------------------------------------------


MIXED = """
    redis.call('XADD', KEYS[1], '5-1', 'f', ARGV[1])
    redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')
    redis.call('SET', KEYS[2], ARGV[1], 'PX', 500)
    redis.call('EXPIRE', KEYS[1], 100)
    redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')
    return redis.call('TIME')
"""


def test_a_scripts_stopped_collector_runs_again_for_the_next_one() -> None:
    """collectgarbage('stop') lasts as long as the script that called it: the next script's
    garbage is collected (its heap stays small while it makes 64 MB of strings)."""
    engine = Engine()
    churn = "for i = 1, 4096 do local s = string.rep('x', 16384) .. i end " \
            "return math.floor(collectgarbage('count'))"
    assert engine.execute("EVAL", "collectgarbage('stop') return 1", 0) == 1
    assert engine.execute("EVAL", churn, 0) < 16 * 1024  # KB: not the 64 MB it made
    engine.close()


def test_a_scripts_effects_are_one_record_without_the_script() -> None:
    r = Recorded(now=1_000_000)
    before = len(r.records)
    reply = r("EVAL", MIXED, "2", "s", "str", "v")
    assert reply == [b"1000", b"0"]  # one time for the whole script
    assert len(r.records) == before + 1
    record = r.records[-1]
    names = [bytes(effect[0]).upper() for effect in record.effects]
    assert b"EVAL" not in names and b"EVALSHA" not in names
    assert names[0] == b"XADD" and b"SET" in names
    set_effect = next(e for e in record.effects if bytes(e[0]).upper() == b"SET")
    assert list(set_effect[-2:]) == [b"PXAT", b"1000500"]  # the script's time, fixed
    # Replay never runs Lua: the replica's engine never makes a runtime.
    replica = r.replay()
    assert replica.scripting is None
    assert replica.execute("DEBUG", "DIGEST") == r.digest()


def test_a_failed_script_keeps_and_logs_what_it_did() -> None:
    r = Recorded()
    with pytest.raises(ReplyError, match="Unknown Redis command"):
        r("EVAL", "redis.call('SET', 'a', '1') redis.call('nosuch')", "0")
    assert r("GET", "a") == b"1"
    assert [list(e) for e in r.records[-1].effects] == [[b"SET", b"a", b"1"]]
    r.assert_replays()


def test_select_in_a_script_logs_select_and_leaves_the_caller_alone() -> None:
    r = Recorded()
    r("EVAL", "redis.call('SET', 'a', '0') redis.call('SELECT', 2) redis.call('SET', 'b', '2')"
      " redis.call('SELECT', 0) redis.call('SET', 'c', '0')", "0")
    effects = [list(e) for e in r.records[-1].effects]
    assert effects[0] == [b"SET", b"a", b"0"]
    assert [b"SELECT", b"2"] in effects
    assert r("EXISTS", "b") == 0
    r.assert_replays()


def test_a_script_touches_watched_keys() -> None:
    e = Engine()
    alice = Session()
    e.execute_raw(alice, (b"WATCH", b"k"))
    e.execute("EVAL", "return redis.call('SET', KEYS[1], 'x')", "1", "k")
    e.execute_raw(alice, (b"MULTI",))
    e.execute_raw(alice, (b"SET", b"k", b"mine"))
    assert e.execute_raw(alice, (b"EXEC",)) is not None
    assert e.execute("GET", "k") == b"x"


def test_scripts_are_not_persisted_and_the_aof_replays(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "d")) as e:
        sha = e.execute("SCRIPT", "LOAD", "return redis.call('INCR', KEYS[1])")
        assert e.execute("EVALSHA", sha, "1", "n") == 1
        e.execute("EVAL", MIXED, "2", "s", "str", "v")
        digest = e.digest()
    with Engine.open(str(tmp_path / "d")) as again:
        assert again.digest() == digest
        assert again.scripting is None  # the AOF's replay ran no Lua
        assert err(again, "EVALSHA", sha, "1", "n") == NOSCRIPT


def test_script_kill_without_a_script() -> None:
    assert err(Engine(), "SCRIPT", "KILL") == "NOTBUSY No scripts in execution right now."


def test_busy_reply_threshold_setting() -> None:
    e = Engine()
    assert e.execute("CONFIG", "GET", "lua-time-limit") == [b"lua-time-limit", b"5000"]
    e.execute("CONFIG", "SET", "lua-time-limit", "100")
    assert e.execute("CONFIG", "GET", "busy-reply-threshold") == [b"busy-reply-threshold", b"100"]


# --- busy scripts on the server ---------------------------------------------------------------


def _send(sock: socket.socket, *argv: str) -> None:
    out = b"*%d\r\n" % len(argv)
    for arg in argv:
        data = arg.encode()
        out += b"$%d\r\n%b\r\n" % (len(data), data)
    sock.sendall(out)


def _until_busy(client: RespClient) -> None:
    """PING until the server answers BUSY (the script has passed the threshold)."""
    while True:
        try:
            client.execute("PING")
        except RespError as error:
            assert str(error) == BUSY
            return


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    handle = start_server(Engine())
    yield handle
    handle.stop()


def test_a_runaway_script_is_killed_and_the_server_serves_again(server) -> None:  # type: ignore[no-untyped-def]
    b = connect(server)
    b.execute("CONFIG", "SET", "busy-reply-threshold", "100")
    a = socket.create_connection((server.host, server.port), timeout=60)
    script = "while true do end"
    af = a.makefile("rb")
    _send(a, "EVAL", script, "0")
    _until_busy(b)
    with pytest.raises(RespError, match="^BUSY"):
        b.execute("GET", "k")
    assert b.execute("SCRIPT", "KILL") == "OK"
    reply = read_raw_reply(af)
    assert reply == (b"-ERR Script killed by user with SCRIPT KILL... script: "
                     + sha1hex(script.encode()).encode() + b", on @user_script:1.\r\n")
    assert b.execute("PING") == "PONG"
    assert b"errorstat_BUSY:count=" in b.execute("INFO", "errorstats")
    _send(a, "PING")
    assert read_raw_reply(af) == b"+PONG\r\n"
    with pytest.raises(RespError, match="^NOTBUSY"):
        b.execute("SCRIPT", "KILL")
    a.close()
    b.close()


def test_a_script_that_wrote_is_unkillable_until_shutdown_nosave(tmp_path: Path) -> None:
    handle = start_server(Engine.open(str(tmp_path / "d")))
    try:
        b = connect(handle)
        b.execute("SET", "before", "1")
        b.execute("CONFIG", "SET", "busy-reply-threshold", "100")
        a = socket.create_connection((handle.host, handle.port), timeout=60)
        _send(a, "EVAL", "redis.call('SET', 'during', '1') while true do end", "0")
        _until_busy(b)
        with pytest.raises(RespError) as caught:
            b.execute("SCRIPT", "KILL")
        assert str(caught.value) == UNKILLABLE
        b.send("SHUTDOWN", "NOSAVE")
        assert read_until_closed(a) == b""
        handle.thread.join(30)
        assert not handle.thread.is_alive()
    finally:
        handle.stop()
    # The script's write was never logged: the server went down without it.
    with Engine.open(str(tmp_path / "d")) as again:
        assert again.execute("GET", "before") == b"1"
        assert again.execute("EXISTS", "during") == 0


def test_pcall_cannot_swallow_script_kill(server) -> None:  # type: ignore[no-untyped-def]
    b = connect(server)
    b.execute("CONFIG", "SET", "busy-reply-threshold", "50")
    a = connect(server)
    script = "while true do pcall(function() while true do end end) end"
    a.send("EVAL", script, "0")
    _until_busy(b)
    assert b.execute("SCRIPT", "KILL") == "OK"
    with pytest.raises(RespError, match="^ERR Script killed by user with SCRIPT KILL"):
        a.read()
    assert a.execute("EVAL", "return 'after'", "0") == b"after"
    a.close()
    b.close()


class ServerStandIn:
    """What a script's busy check reaches of the network server."""

    def __init__(self) -> None:
        self.stop_signalled = False
        self.served = 0

    def serve_while_busy(self, scripting: object) -> None:
        self.served += 1


@pytest.mark.parametrize(("threshold", "serves"), [(0, False), (100, True)])
def test_the_busy_check_runs_from_redis_call_unless_the_threshold_is_zero(
        threshold: int, serves: bool) -> None:
    """A script busy in redis.call is served for (it runs little Lua); with
    busy-reply-threshold 0 nothing ever is, as in Redis."""
    e = Engine()
    e.server = stand_in = ServerStandIn()  # type: ignore[attr-defined]
    e.execute("CONFIG", "SET", "busy-reply-threshold", str(threshold))
    assert e.execute("EVAL", "local t = os.clock() while os.clock() - t < 0.3 do "
                             "redis.call('ping') end return 1", "0") == 1
    assert (stand_in.served > 0) is serves


def test_a_shutdown_signal_stops_a_script_as_shutdown_nosave() -> None:
    r = Recorded()
    r.engine.server = stand_in = ServerStandIn()  # type: ignore[attr-defined]
    stand_in.stop_signalled = True
    stand_in.request_shutdown = lambda save: None  # type: ignore[attr-defined]
    before = len(r.records)
    assert r.engine.execute("EVAL", "redis.call('SET', 'k', 'v') while true do end",
                            "0") is NO_REPLY
    assert len(r.records) == before  # its write is not logged: the server goes down


def test_redis_call_in_a_loop_is_answered_busy_and_killed(server) -> None:  # type: ignore[no-untyped-def]
    """A script that spends its time in redis.call runs little Lua: the busy check runs from
    redis.call too, and wherever the count hook lands (the sandbox's own code included)."""
    b = connect(server)
    b.execute("CONFIG", "SET", "busy-reply-threshold", "50")
    a = connect(server)
    a.send("EVAL", "while true do redis.call('ping') end", "0")
    _until_busy(b)
    assert b.execute("SCRIPT", "KILL") == "OK"
    with pytest.raises(RespError, match="^ERR Script killed by user with SCRIPT KILL"):
        a.read()
    assert b.execute("PING") == "PONG"
    a.close()
    b.close()
