"""Redis Functions on the engine compared with a real redis-server: FUNCTION LOAD (the library's
metadata, the load-time sandbox, redis.register_function's two forms and their errors), FCALL
and FCALL_RO (arguments, flags, errors placed in the function's code), FUNCTION LIST, DELETE,
FLUSH, STATS, DUMP and RESTORE (a payload from each side restored into the other), HELP,
COMMAND INFO, and a busy function: the BUSY line other clients get, FUNCTION KILL against
SCRIPT KILL, FUNCTION STATS while it runs. Replies and error lines byte for byte."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock
from tests.support.resp_client import RespClient, RespError, encode_command, read_raw_reply

pytest.importorskip("lupa")


def lib(name: str, body: str) -> str:
    return f"#!lua name={name}\n{body}"


ECHO = lib("echo", "redis.register_function('echo', function(keys, args) "
                   "return {keys, args} end)")


@pytest.fixture
def both(redis_raw: RespClient) -> Iterator[Both]:
    redis_raw.execute("FUNCTION", "FLUSH")
    yield Both(Engine(clock=WallClock()), redis_raw)
    redis_raw.execute("FUNCTION", "FLUSH")


# FUNCTION LOAD's refusals: every line must be the same on both sides.
LOAD_ERRORS = [
    "return 1",
    "#!lua",
    "#!lua name=x",
    "#!foo name=x\n",
    "#! name=x\n",
    "#!lua name=x\nreturn 1",
    "#!lua name=x foo=1\n",
    "#!lua name=x name=y\n",
    "#!lua name=x NAME=y\n",
    "#!lua name=a-b\n",
    "#!lua name=\n",
    "#!lua name=x \"unbalanced\n",
    lib("x", "redis.call('ping')"),
    lib("x", "redis.pcall('ping')"),
    lib("x", "local s = string.format('a')"),
    lib("x", "local k = KEYS"),
    lib("x", "x = 1"),
    lib("x", "redis.register_function('f', function() end"),
    lib("x", "error('boom')"),
    lib("x", "error({err='MY boom'})"),
    lib("x", "redis.register_function()"),
    lib("x", "redis.register_function('a', function() end, 3)"),
    lib("x", "redis.register_function('f')"),
    lib("x", "redis.register_function({}, function() end)"),
    lib("x", "redis.register_function('f', 'g')"),
    lib("x", "redis.register_function('f-1', function() end)"),
    lib("x", "redis.register_function('', function() end)"),
    lib("x", "redis.register_function('f', function() end) "
             "redis.register_function('f', function() end)"),
    lib("x", "redis.register_function{function_name='f', callback=function() end, "
             "flags={'bad'}}"),
    lib("x", "redis.register_function{function_name='f', callback=function() end, flags=1}"),
    lib("x", "redis.register_function{function_name='f', callback=1}"),
    lib("x", "redis.register_function{function_name={}, callback=function() end}"),
    lib("x", "redis.register_function{function_name='f', callback=function() end, "
             "description={}}"),
    lib("x", "redis.register_function{function_name='f', callback=function() end, what=1}"),
    lib("x", "redis.register_function{function_name='f'}"),
    lib("x", "redis.register_function{callback=function() end}"),
    lib("x", "redis.register_function{[1]='f'}"),
    lib("x", "local a = 1"),
    lib("x", "redis.setresp(3)"),
    lib("x", "while true do end"),
]


def test_load_errors(both: Both) -> None:
    for code in LOAD_ERRORS:
        both.err("FUNCTION", "LOAD", code)
    both.err("FUNCTION", "LOAD")
    both.err("FUNCTION", "LOAD", "REPLACE")
    both.err("FUNCTION", "LOAD", "FOO", ECHO)
    both.err("FUNCTION", "LOAD", "REPLACE", "FOO", ECHO)


def test_load_list_delete_flush(both: Both) -> None:
    assert both("FUNCTION", "LOAD", ECHO) == b"echo"
    both.err("FUNCTION", "LOAD", ECHO)  # exists
    assert both("FUNCTION", "LOAD", "replace", ECHO) == b"echo"
    assert both("FUNCTION", "LOAD", "REPLACE", "REPLACE", ECHO) == b"echo"
    both.err("FUNCTION", "LOAD", lib("other", "redis.register_function('ECHO', function() "
                                              "end)"))  # a function's name is case-blind
    both("FUNCTION", "LIST")
    both("FUNCTION", "LIST", "WITHCODE")
    both("FUNCTION", "LIST", "LIBRARYNAME", "ec*")
    both("FUNCTION", "LIST", "libraryname", "EC*", "withcode")
    both("FUNCTION", "LIST", "LIBRARYNAME", "nope*")
    both.err("FUNCTION", "LIST", "LIBRARYNAME")
    both.err("FUNCTION", "LIST", "WITHCODE", "WITHCODE")
    both.err("FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b")
    both.err("FUNCTION", "LIST", "bad")
    both("FUNCTION", "STATS")
    both.err("FUNCTION", "STATS", "x")
    both.err("FUNCTION", "DELETE", "nope")
    both.err("FUNCTION", "DELETE", "ECHO")  # a library's name is not
    assert both("FUNCTION", "DELETE", "echo") == "OK"
    both.err("FCALL", "echo", "0")
    both("FUNCTION", "LIST")
    both("FUNCTION", "LOAD", ECHO)
    assert both("FUNCTION", "FLUSH") == "OK"
    assert both("FUNCTION", "FLUSH", "async") == "OK"
    assert both("FUNCTION", "FLUSH", "SYNC") == "OK"
    both.err("FUNCTION", "FLUSH", "now")
    both.err("FUNCTION", "FLUSH", "SYNC", "x")
    both("FUNCTION", "STATS")
    both.err("FUNCTION")
    both.err("FUNCTION", "NOSUCH")
    both.err("FUNCTION", "KILL")
    both.err("FUNCTION", "KILL", "x")
    both.err("FUNCTION", "DUMP", "x")
    both("FUNCTION", "HELP", normalise=help_8x)


def help_8x(lines: list[str]) -> list[str]:
    """FUNCTION HELP as Redis 8 words it: 7.0 also lists "* Library description" (libraries
    have none) and ends "Prints this help."."""
    return [line for line in lines[:-1] if line != "    * Library description"]


def test_register_function_forms_and_flags(both: Both) -> None:
    code = lib("forms", """
redis.register_function('plain', function(keys, args) return #keys + #args end)
redis.register_function{function_name='described', callback=function() return 'd' end,
  description='what it does'}
redis.register_function{function_name='ro', callback=function(keys)
  return redis.call('get', keys[1]) end, flags={'no-writes', 'ALLOW-OOM', 'allow-stale',
  'no-cluster', 'allow-cross-slot-keys'}}
redis.register_function{function_name='ro_write', callback=function()
  return redis.call('set', 'a', 'b') end, flags={'no-writes'}}
redis.register_function(7, function() return 'seven' end)
redis.register_function{function_name=8.5, callback=function() return 1 end}
redis.log(redis.LOG_NOTICE, 'loading', 1)
local v = redis.REDIS_VERSION_NUM
""")
    both.err("FUNCTION", "LOAD", code)  # '8.5' is no valid name
    code = code.replace("redis.register_function{function_name=8.5, callback=function() "
                        "return 1 end}\n", "")
    assert both("FUNCTION", "LOAD", code) == b"forms"
    both("FUNCTION", "LIST", "WITHCODE", normalise=sorted_functions)
    assert both("FCALL", "plain", "2", "a", "b", "c") == 3
    assert both("FCALL", "PLAIN", "0") == 0  # FCALL's lookup is case-blind
    both("FCALL", "described", "0")
    both("FCALL", "7", "0")
    both("SET", "k", "v")
    assert both("FCALL_RO", "ro", "1", "k") == b"v"
    assert both("FCALL", "ro", "1", "k") == b"v"
    both.err("FCALL", "ro_write", "0")
    both.err("FCALL_RO", "ro_write", "0")
    both.err("FCALL_RO", "plain", "0")  # no no-writes flag
    both.err("FCALL", "nope", "0")
    both.err("FCALL", "plain", "x")
    both.err("FCALL", "plain", "3", "a")
    both.err("FCALL", "plain", "-1")
    both.err("FCALL", "plain")
    both.err("FCALL")


def sorted_functions(reply: Any) -> Any:
    """FUNCTION LIST with each library's functions in name order (Redis's come in its hash
    table's order)."""
    out = []
    for library in reply:
        fields = dict(zip(library[0::2], library[1::2], strict=True))
        fields[b"functions"] = sorted(fields[b"functions"], key=lambda f: f[1])
        out.append(fields)
    return out


def test_function_runtime(both: Both) -> None:
    code = lib("rt", """
local function helper(x) return x * 2 end
redis.register_function('double', function(keys, args) return helper(tonumber(args[1])) end)
redis.register_function('globals', function() return KEYS end)
redis.register_function('register', function() redis.register_function('z', function() end) end)
redis.register_function('fails', function() error('bad thing') end)
redis.register_function('fails_table', function() return redis.error_reply('MY err') end)
redis.register_function('write', function(keys, args)
  redis.call('set', keys[1], args[1]) return redis.call('get', keys[1]) end)
redis.register_function('callerr', function() return redis.call('nosuch') end)
redis.register_function('types', function() return {1, 'two', 3.7, true, false, {ok='fine'}}
  end)
redis.register_function('libs', function() return {cjson.encode({1, 2}), bit.band(7, 3),
  string.format('%d', 5), math.floor(2.5)} end)
redis.register_function('setglobal', function() x = 1 end)
""")
    assert both("FUNCTION", "LOAD", code) == b"rt"
    assert both("FCALL", "double", "0", "21") == 42
    both.err("FCALL", "globals", "0")
    both.err("FCALL", "register", "0")
    both.err("FCALL", "fails", "0")
    both.err("FCALL", "fails_table", "0")
    assert both("FCALL", "write", "1", "key", "value") == b"value"
    both("GET", "key")
    both.err("FCALL", "callerr", "0")
    both("FCALL", "types", "0")
    both("FCALL", "libs", "0")
    both.err("FCALL", "setglobal", "0")
    both("FUNCTION", "STATS")


def test_an_api_function_registered_as_the_callback(both: Both) -> None:
    """A C function of the API (redis.log) is a function to register_function: its run calls
    it with KEYS and ARGV, and its error names no line (no Lua code ran)."""
    assert both("FUNCTION", "LOAD", lib("api", "redis.register_function('f', redis.log)")) \
        == b"api"
    both.err("FCALL", "f", "1", "k", "a")
    assert both("FUNCTION", "LOAD", "REPLACE", lib(
        "api", "redis.register_function{function_name='f', callback=redis.log, "
               "description='d', flags={'no-writes'}}")) == b"api"
    both.err("FCALL_RO", "f", "0")


def test_dump_restore_both_ways(both: Both, redis_raw: RespClient) -> None:
    engine = both.engine
    engine.execute("CONFIG", "SET", "dump-rdb-version", "10")  # what redis-server 7.0 reads
    assert both("FUNCTION", "LOAD", ECHO) == b"echo"
    two = lib("two", "redis.register_function('second', function() return 2 end)")
    assert both("FUNCTION", "LOAD", two) == b"two"
    ours, theirs = engine.execute("FUNCTION", "DUMP"), redis_raw.execute("FUNCTION", "DUMP")
    for payload in (ours, theirs):  # each side's payload restores on both
        assert both("FUNCTION", "DELETE", "echo") == "OK"
        both.err("FUNCTION", "RESTORE", payload)  # APPEND: `two` exists
        both.err("FUNCTION", "RESTORE", payload, "append")
        assert both("FUNCTION", "RESTORE", payload, "REPLACE") == "OK"
        assert both("FUNCTION", "FLUSH") == "OK"
        assert both("FUNCTION", "RESTORE", payload) == "OK"
        both("FUNCTION", "LIST", "WITHCODE", normalise=by_name)
        assert both("FCALL", "second", "0") == 2
        assert both("FUNCTION", "RESTORE", payload, "FLUSH") == "OK"
        assert both("FUNCTION", "DELETE", "two") == "OK"
        clash = lib("clash", "redis.register_function('second', function() end)")
        assert both("FUNCTION", "LOAD", clash) == b"clash"
        both.err("FUNCTION", "RESTORE", payload, "REPLACE")  # `second` is clash's
        both("FUNCTION", "LIST", normalise=by_name)  # all or nothing: echo is still there
        both("FUNCTION", "FLUSH")
        both("FUNCTION", "LOAD", ECHO)
        both("FUNCTION", "LOAD", two)
    both.err("FUNCTION", "RESTORE", ours, "bad")
    both.err("FUNCTION", "RESTORE", ours, "FLUSH", "x")
    both.err("FUNCTION", "RESTORE", b"x")
    both.err("FUNCTION", "RESTORE", ours[:-1] + bytes([ours[-1] ^ 1]))
    both("FUNCTION", "FLUSH")
    empty = engine.execute("FUNCTION", "DUMP")
    assert empty == redis_raw.execute("FUNCTION", "DUMP")  # no library: the footer alone
    assert both("FUNCTION", "RESTORE", empty) == "OK"
    both("SET", "s", "v")
    both.err("FUNCTION", "RESTORE", redis_raw.execute("DUMP", "s"))  # not a function


def by_name(reply: Any) -> Any:
    return sorted(reply, key=lambda library: library[1])


def test_command_info_and_docs(both: Both) -> None:
    for name in ("fcall", "fcall_ro", "function"):
        ours = both.engine.execute("COMMAND", "INFO", name)[0]
        theirs = both.redis.execute("COMMAND", "INFO", name)[0]
        assert ours[:6] == theirs[:6], name
    assert both.engine.execute("COMMAND", "DOCS", "fcall")[1][1] == b"Invokes a function."


# --- a busy function ---------------------------------------------------------------------------

BUSY_LIB = lib("busy", """
redis.register_function('spin', function() while true do end end)
redis.register_function('spinwrite', function() redis.call('set', 'w', '1')
  while true do end end)
""")


def _until_busy(probe: RespClient, seen: list[Any]) -> None:
    """Ping until the server answers BUSY (the script is past busy-reply-threshold)."""
    while True:
        try:
            probe.execute("PING")
        except RespError as err:
            seen.append(str(err))
            return


def _run(probe: RespClient, seen: list[Any], *commands: tuple[str, ...]) -> None:
    for argv in commands:
        try:
            reply = probe.execute(*argv)
        except RespError as err:
            reply = str(err)
        if argv == ("FUNCTION", "STATS") and isinstance(reply, list) and reply[1]:
            reply[1] = reply[1][:4]  # (its duration_ms left out)
        seen.append(reply)


def busy_session(port: int) -> list[Any]:
    """What the other clients see while a function, then a script, then a function that wrote
    are busy on the server at `port`: the BUSY lines, the KILL commands' replies, FUNCTION
    STATS, the killed call's reply. Ends with SHUTDOWN NOSAVE (the one way to stop the last)."""
    seen: list[Any] = []
    with RespClient("127.0.0.1", port, timeout=30) as probe:
        probe.execute("FUNCTION", "FLUSH")
        probe.execute("CONFIG", "SET", "busy-reply-threshold", "50")
        probe.execute("FUNCTION", "LOAD", BUSY_LIB)
        for argv in (("FCALL", "spin", "0"), ("EVAL", "while true do end", "0"),
                     ("FCALL", "spinwrite", "0")):
            runner = socket.create_connection(("127.0.0.1", port), timeout=30)
            runner.sendall(encode_command(*argv))
            _until_busy(probe, seen)
            _run(probe, seen, ("GET", "k"), ("FUNCTION", "STATS"))
            if argv[0] == "EVAL":
                _run(probe, seen, ("FUNCTION", "KILL"), ("SCRIPT", "KILL"))
            else:
                _run(probe, seen, ("SCRIPT", "KILL"), ("FUNCTION", "KILL"))
            if argv[1] == "spinwrite":
                try:
                    probe.execute("SHUTDOWN", "NOSAVE")
                except (RespError, OSError, ConnectionError) as err:
                    seen.append(type(err).__name__)
                runner.close()
                break
            seen.append(read_raw_reply(runner.makefile("rb")))
            runner.close()
    return seen


def test_busy_function_matches_redis(start_redis) -> None:  # type: ignore[no-untyped-def]
    from tests.support.server_util import start_server

    handle = start_server(Engine(clock=WallClock()))
    server = start_redis()
    try:
        ours = busy_session(handle.port)
    finally:
        handle.stop()
    theirs = busy_session(server.port)
    assert ours == theirs


RAW_LIB = lib("raw", """
redis.register_function{function_name='described', callback=function(keys, args)
  return {keys[1], tonumber(args[1]), {ok='fine'}} end, flags={'no-writes', 'no-cluster'},
  description='a description'}
""")
RESP3_LIB = lib("raw3", "redis.register_function('resp3', function() redis.setresp(3) "
                        "return {map={a=1}, set={b=true}, double=1.5} end)")


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_replies_byte_for_byte(redis_server, protocol: str) -> None:  # type: ignore[no-untyped-def]
    """FUNCTION LIST, STATS, LOAD and FCALL replies as bytes, in RESP2 and RESP3, over both
    servers (one library of one function at a time: Redis lists libraries and functions in
    its hash tables' order, which its random hash seed shuffles)."""
    from tests.support.server_util import start_server

    commands = [("HELLO", protocol), ("FUNCTION", "FLUSH"), ("FUNCTION", "LOAD", RAW_LIB),
                ("FUNCTION", "LIST", "WITHCODE"), ("FUNCTION", "STATS"),
                ("FCALL", "described", "1", "k", "7"), ("FCALL_RO", "described", "0", "x"),
                ("FUNCTION", "DELETE", "x"), ("FUNCTION", "DELETE", "raw"),
                ("FUNCTION", "LOAD", RESP3_LIB), ("FCALL", "resp3", "0"),
                ("FCALL_RO", "resp3", "0"), ("FUNCTION", "LIST"), ("FUNCTION", "FLUSH"),
                ("FUNCTION", "LIST")]

    def replies(port: int) -> list[bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            f = sock.makefile("rb")
            out = []
            for argv in commands:
                sock.sendall(encode_command(*argv))
                out.append(read_raw_reply(f))
            return out[1:]

    handle = start_server(Engine(clock=WallClock()))
    try:
        assert replies(handle.port) == replies(redis_server.port)
    finally:
        handle.stop()
