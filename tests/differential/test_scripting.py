"""EVAL, EVALSHA, EVAL_RO and SCRIPT on the engine compared with a real redis-server: replies
and error lines byte for byte (Lua to reply and reply to Lua conversions, call vs pcall,
error_reply / status_reply, sha1hex, KEYS/ARGV, the sandbox, read-only scripts, shebang flags,
the script cache), and redis-py's `register_script` (its Lock scripts) against both servers."""

from __future__ import annotations

import pytest

from streamkeep import Engine
from tests.support.diffutil import Both, WallClock

pytest.importorskip("lupa")

# (script, keys, args): every reply or error line must be the same on both sides.
CASES: list[tuple[str, list[str], list[str]]] = [
    # Lua -> reply
    ("return 1", [], []),
    ("return -7", [], []),
    ("return 3.99", [], []),
    ("return -3.99", [], []),
    ("return 'hello'", [], []),
    ("return true", [], []),
    ("return false", [], []),
    ("return nil", [], []),
    ("return {}", [], []),
    ("return {1, 2, 3.9, -3.9, 'x', true, false, nil, 5}", [], []),
    ("return {1, {2, {3, 'deep'}}, 'x'}", [], []),
    ("return {ok='fine'}", [], []),
    ("return {ok='a\\r\\nb'}", [], []),
    ("return {err='bad\\r\\nthing'}", [], []),
    ("return {err='MYCODE my message'}", [], []),
    ("return {err='nocode'}", [], []),
    ("return {1, {err='E inner'}, {ok='S'}}", [], []),
    ("return redis.error_reply('MY err')", [], []),
    ("return redis.error_reply('-MY err')", [], []),
    ("return redis.error_reply('noerr')", [], []),
    ("return redis.error_reply(1)", [], []),
    ("return redis.error_reply()", [], []),
    ("return redis.status_reply('FINE')", [], []),
    ("return redis.status_reply()", [], []),
    ("return {redis.status_reply('A'), redis.error_reply('B c')}", [], []),
    ("return redis.sha1hex('')", [], []),
    ("return redis.sha1hex('abc')", [], []),
    ("return redis.sha1hex(12)", [], []),
    ("return redis.sha1hex(1e15)", [], []),
    ("return redis.sha1hex(0.5)", [], []),
    ("return redis.sha1hex()", [], []),
    ("return redis.sha1hex(1, 2)", [], []),
    # KEYS / ARGV
    ("return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", ["k1", "k2"], ["a1", "a2"]),
    ("return KEYS", ["a", "b", "c"], []),
    ("return ARGV", [], ["x", "y"]),
    ("return #ARGV", [], []),
    # reply -> Lua
    ("return redis.call('set', KEYS[1], ARGV[1])", ["k"], ["v"]),
    ("return redis.call('set', KEYS[1], ARGV[1])['ok']", ["k"], ["v"]),
    ("return redis.call('get', KEYS[1])", ["k"], []),
    ("return type(redis.call('get', 'missing'))", [], []),
    ("return tostring(redis.call('get', 'missing'))", [], []),
    ("return redis.call('incr', 'n')", [], []),
    ("return type(redis.call('incr', 'n'))", [], []),
    ("return redis.call('set', 'f', 1.5)", [], []),
    ("return redis.call('get', 'f')", [], []),
    ("return redis.call('set', 'i', 10)", [], []),
    ("return redis.call('incrbyfloat', 'i', 0.25)", [], []),
    ("return redis.call('mget', 'k', 'missing', 'i')", [], []),
    ("local r = redis.call('mget', 'missing', 'k') return {type(r[1]), r[2]}", [], []),
    ("return redis.call('exists', 'k', 'missing')", [], []),
    ("return redis.call('type', 'k')", [], []),
    ("return redis.call('type', 'k')['ok']", [], []),
    ("return redis.call('ping')", [], []),
    ("return redis.call('echo', 'hi')", [], []),
    # call vs pcall errors
    ("return redis.call('nosuch')", [], []),
    ("return redis.pcall('nosuch')", [], []),
    ("return redis.pcall('nosuch')['err']", [], []),
    ("return redis.call('get')", [], []),
    ("return redis.pcall('get')", [], []),
    ("return redis.call('set', 'a')", [], []),
    ("return redis.call()", [], []),
    ("return redis.pcall()", [], []),
    ("return redis.call({})", [], []),
    ("return redis.call('get', nil)", [], []),
    ("return redis.call('get', true)", [], []),
    ("return redis.call('incr', 'k')", [], []),
    ("return redis.pcall('incr', 'k')", [], []),
    ("local r = redis.pcall('incr', 'k') return r['err']", [], []),
    ("local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), type(e), e}", [], []),
    ("local ok, e = pcall(error, 'x') return {tostring(ok), type(e), e}", [], []),
    ("local ok, e = pcall(error, {err='x'}) return {tostring(ok), type(e)}", [], []),
    ("local ok, e = pcall(function() return redis.call('xadd', 'k', '*', 'f', 1) end) return e", [], []),
    ("return redis.call('xadd', 'k', '*', 'f', 1)", [], []),
    ("redis.call('incr', 'k')\nreturn 1", [], []),
    ("local x = 1\nlocal y = 2\nreturn redis.call('nosuch')", [], []),
    # Lua errors
    ("error('boom')", [], []),
    ("error({err='X boom'})", [], []),
    ("error(12)", [], []),
    ("local t = nil\nreturn t.x", [], []),
    ("return 1 +", [], []),
    ("return nosuch()", [], []),
    ("local function f() error('deep') end\nf()", [], []),
    # the sandbox
    ("return x", [], []),
    ("x = 1", [], []),
    ("local t = {} t.x = 1 return t.x", [], []),
    ("redis.call = nil", [], []),
    ("string.x = 1", [], []),
    ("rawset(_G, 'x', 1)", [], []),
    ("getmetatable('').__index.upper = nil", [], []),
    ("setmetatable(string, {})", [], []),
    ("return type(getmetatable(''))", [], []),
    ("return ('abc'):upper()", [], []),
    ("local t = {} rawset(t, 'a', 1) return t.a", [], []),
    ("return io", [], []),
    ("return loadfile", [], []),
    ("return dofile", [], []),
    ("return require", [], []),
    ("return print", [], []),
    ("return debug", [], []),
    ("return package", [], []),
    ("return {type(loadstring), type(pcall), type(unpack), type(coroutine), type(_G)}", [], []),
    ("return {type(string), type(table), type(math), type(tonumber), type(rawget)}", [], []),
    ("return loadstring('return 1 + 1')()", [], []),
    ("return loadstring('return nosuchvar')()", [], []),
    ("return {loadstring(string.dump(function() return 1 end))}", [], []),
    ("return {loadstring(string.char(27) .. 'Lua')}", [], []),
    ("return {loadstring('return +')}", [], []),
    ("return {loadstring('return 1', 'named')}", [], []),
    ("\x1bLua", [], []),
    ("return string.format('%d-%s', 7, 'x')", [], []),
    ("return table.concat({'a', 'b'}, ',')", [], []),
    ("return math.floor(7.9)", [], []),
    ("return _VERSION", [], []),
    ("return {bit.band(12, 10), bit.bor(1, 2, 4), bit.tohex(255, -4), bit.bnot(0), "
     "bit.lshift(1, 31), bit.rshift(-1, 28), bit.tobit(2^32+5), bit.rol(1, 33), bit.bswap(1), "
     "bit.bxor(5, 3), bit.arshift(-256, 4), bit.tohex(-1)}", [], []),
    ("return redis.REDIS_VERSION_NUM ~= nil", [], []),
    ("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", [], []),
    ("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_ALL}", [], []),
    ("redis.log(redis.LOG_WARNING, 'from a script') return 1", [], []),
    ("redis.log()", [], []),
    ("redis.log('x', 'y')", [], []),
    ("redis.set_repl(redis.REPL_ALL) return 1", [], []),
    ("redis.set_repl(99)", [], []),
    ("return redis.replicate_commands()", [], []),
    ("return redis.acl_check_cmd('get', 'k')", [], []),
    ("return redis.acl_check_cmd('xinfo', 'stream', 's')", [], []),
    ("return redis.acl_check_cmd('nosuch')", [], []),
    ("return redis.acl_check_cmd()", [], []),
    ("redis.setresp(4)", [], []),
    ("redis.setresp()", [], []),
    # commands refused inside scripts
    ("return redis.call('multi')", [], []),
    ("return redis.call('exec')", [], []),
    ("return redis.call('eval', 'return 1', 0)", [], []),
    ("return redis.call('watch', 'k')", [], []),
    ("return redis.call('subscribe', 'c')", [], []),
    ("return redis.call('script', 'load', 'return 1')", [], []),
    ("return redis.pcall('multi')", [], []),
    # shebang flags
    ("#!lua\nreturn 1", [], []),
    ("#!lua flags=no-writes\nreturn redis.call('get', 'k')", [], []),
    ("#!lua flags=no-writes\nreturn redis.call('set', 'k', 'v')", [], []),
    ("#!lua flags=no-writes,allow-oom\nreturn 2", [], []),
    ("#!lua flags=allow-stale,no-cluster,allow-cross-slot-keys\nreturn 3", [], []),
    ("#!lua flags=nosuchflag\nreturn 1", [], []),
    ("#!lua nosuchoption\nreturn 1", [], []),
    ("#!python\nreturn 1", [], []),
    ("#!lua", [], []),
    ("#!lua\nerror('line two')", [], []),
    # Lua values handed to Python as the Lua host converts them: a coroutine not yet started is
    # a thread, an API function a function, and a table that holds one reads whole
    ("return bit.band(coroutine.create(function() end))", [], []),
    ("return bit.band(redis.call)", [], []),
    ("return redis.sha1hex(redis.call)", [], []),
    ("return {map={a=redis.call, b=1, c=2, d=3}}", [], []),
    ("return {map={[redis.call]=1, b=2}}", [], []),
]


def errors_as_text(reply: object) -> object:
    """Error replies nested in an array as their lines (the two clients' error types differ)."""
    if isinstance(reply, Exception):
        return ("error", str(reply))
    if isinstance(reply, list):
        return [errors_as_text(x) for x in reply]
    return reply


@pytest.fixture
def both(redis_raw) -> Both:
    return Both(Engine(clock=WallClock()), redis_raw)


def test_script_table_matches_redis(both: Both) -> None:
    for script, keys, args in CASES:
        both("EVAL", script, str(len(keys)), *keys, *args, normalise=errors_as_text)


def test_numkeys_errors(both: Both) -> None:
    both.err("EVAL", "return 1", "2", "only-one")
    both.err("EVAL", "return 1", "-1")
    both.err("EVAL", "return 1", "x")
    both.err("EVAL", "return 1")
    both.err("EVALSHA", "0" * 40, "2", "k")


def test_evalsha_script_load_exists_flush(both: Both) -> None:
    assert both("SCRIPT", "FLUSH") == "OK"
    sha = both("SCRIPT", "LOAD", "return ARGV[1]")
    assert sha == b"e1e7e1ba15ed4ee1e5e5f17a0e2b5bd0ef0c9a0a" or len(sha) == 40
    assert both("EVALSHA", sha, "0", "x") == b"x"
    assert both("EVALSHA", sha.upper(), "0", "y") == b"y"
    both.err("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0")
    both.err("EVALSHA", "short", "0")
    assert both("SCRIPT", "EXISTS", sha, "ffffffffffffffffffffffffffffffffffffffff") == [1, 0]
    both("EVAL", "return 'cached by eval'", "0")
    evalsha = both("SCRIPT", "LOAD", "return 'cached by eval'")
    assert both("EVALSHA", evalsha, "0") == b"cached by eval"
    assert both("SCRIPT", "FLUSH", "ASYNC") == "OK"
    assert both("SCRIPT", "EXISTS", sha) == [0]
    both.err("EVALSHA", sha, "0")
    assert both("SCRIPT", "FLUSH", "SYNC") == "OK"
    both.err("SCRIPT", "FLUSH", "NOW")
    both.err("SCRIPT", "LOAD", "return +")
    both.err("SCRIPT", "LOAD", "#!lua flags=bad\nreturn 1")
    both.err("SCRIPT", "LOAD")
    both.err("SCRIPT", "NOSUCH")
    both.err("SCRIPT", "EXISTS")
    both("SCRIPT", "HELP", normalise=lambda lines: lines[:-1])  # 7.0: "Prints this help."
    both.err("SCRIPT", "KILL")


def test_read_only_scripts(both: Both) -> None:
    both("SET", "k", "v")
    assert both("EVAL_RO", "return redis.call('get', KEYS[1])", "1", "k") == b"v"
    both.err("EVAL_RO", "return redis.call('set', KEYS[1], 'x')", "1", "k")
    both("EVAL_RO", "return redis.pcall('set', KEYS[1], 'x')", "1", "k")
    both.err("EVAL_RO", "return redis.call('publish', 'c', 'm')", "0")
    both.err("EVAL_RO", "#!lua\nreturn 1", "0")
    assert both("EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0") == 1
    sha = both("SCRIPT", "LOAD", "return redis.call('get', KEYS[1])")
    assert both("EVALSHA_RO", sha, "1", "k") == b"v"
    both.err("EVALSHA_RO", "0" * 40, "0")
    assert both("GET", "k") == b"v"


def test_scripts_mixing_streams_and_strings(both: Both) -> None:
    script = """
        redis.call('XADD', KEYS[1], '1-1', 'f', ARGV[1])
        redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')
        redis.call('SET', KEYS[2], ARGV[1])
        redis.call('EXPIRE', KEYS[2], 100)
        local read = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', 10,
                                'STREAMS', KEYS[1], '>')
        return {read, redis.call('GET', KEYS[2]), redis.call('TTL', KEYS[2]),
                redis.call('XLEN', KEYS[1]), redis.call('XPENDING', KEYS[1], 'g')}
    """
    both("EVAL", script, "2", "s", "str", "value")
    both("EVAL", "return redis.call('XINFO', 'GROUPS', KEYS[1])", "1", "s")
    both("EVAL", "return redis.call('XRANGE', KEYS[1], '-', '+')", "1", "s")
    both("EVAL", "return redis.call('XADD', KEYS[1], '1-1', 'f', 'v')", "1", "s")
    both("EVAL", "return redis.call('GET', KEYS[1])", "1", "s")
    both("EVAL", "return redis.pcall('GET', KEYS[1])", "1", "s")
    assert both("XLEN", "s") == 1
    assert both("GET", "str") == b"value"


def test_eval_inside_multi_is_queued(both: Both) -> None:
    assert both("MULTI") == "OK"
    assert both("EVAL", "return redis.call('incr', KEYS[1])", "1", "n") == "QUEUED"
    assert both("EVAL", "return redis.call('nosuch')", "0") == "QUEUED"
    replies = both("EXEC", normalise=errors_as_text)
    assert replies[0] == 1


def test_failed_script_keeps_earlier_writes(both: Both) -> None:
    both.err("EVAL", "redis.call('set', KEYS[1], 'kept')\nredis.call('nosuch')", "1", "k")
    assert both("GET", "k") == b"kept"


def test_select_inside_a_script_does_not_change_the_caller(both: Both) -> None:
    both("EVAL", "redis.call('select', 3)\nredis.call('set', 'in3', 'x')\nreturn 1", "0")
    assert both("EXISTS", "in3") == 0
    both("SELECT", "3")
    assert both("GET", "in3") == b"x"
    both("FLUSHDB")
    both("SELECT", "0")


def test_redis_py_lock_scripts_over_both(redis_server) -> None:
    """redis-py's Lock (its release, extend and reacquire scripts, run by register_script:
    EVALSHA, then SCRIPT LOAD on NOSCRIPT) behaves the same on streamkeep and on redis-server."""
    import redis

    from tests.support.server_util import start_server

    handle = start_server(Engine(clock=WallClock()))
    try:
        ours = redis.Redis(port=handle.port)
        theirs = redis.Redis(port=redis_server.port)
        theirs.script_flush()
        results = []
        for client in (ours, theirs):
            client.delete("lock:a")
            lock = client.lock("lock:a", timeout=100)
            steps = [lock.acquire(blocking=False), lock.extend(50), client.pttl("lock:a") > 100_000,
                     lock.reacquire(), lock.owned(), lock.locked()]
            lock.release()
            steps += [lock.locked(), client.exists("lock:a")]
            other = client.lock("lock:a", timeout=10)
            other.acquire(blocking=False)
            client.set("lock:a", "stolen")
            try:
                other.release()
            except redis.exceptions.LockNotOwnedError as err:
                steps.append(str(err))
            for name in ("LUA_RELEASE_SCRIPT", "LUA_EXTEND_SCRIPT", "LUA_REACQUIRE_SCRIPT"):
                body = getattr(redis.lock.Lock, name)
                script = client.register_script(body)
                steps.append(script.sha)
            results.append(steps)
        assert results[0] == results[1]
    finally:
        handle.stop()


def test_math_random_matches_a_fresh_redis(start_redis) -> None:  # type: ignore[no-untyped-def]
    """redisLrand48: the same sequence as a redis-server that has run no script yet."""
    from tests.support.resp_client import RespClient

    server = start_redis()
    with RespClient("127.0.0.1", server.port) as fresh:
        b = Both(Engine(clock=WallClock()), fresh)
        script = ("local t = {} for i = 1, 5 do t[i] = math.random(1000) end "
                  "t[6] = math.random(5, 9) t[7] = math.floor(math.random() * 1e6) return t")
        b("EVAL", script, "0")
        b("EVAL", script, "0")  # the state goes on from one script to the next
        b("EVAL", "math.randomseed(7) return {math.random(100), math.random(100)}", "0")
        b("EVAL", "return math.random(0)", "0")


RESP3_CASES = [
    ("EVAL", "redis.setresp(3) return {map={a=1}}", "0"),
    ("EVAL", "redis.setresp(3) return {set={a=true}}", "0"),
    ("EVAL", "redis.setresp(3) return {double=3.5}", "0"),
    ("EVAL", "redis.setresp(3) return true", "0"),
    ("EVAL", "redis.setresp(3) return false", "0"),
    ("EVAL", "return false", "0"),
    ("EVAL", "return true", "0"),
    ("EVAL", "return {double=3.5}", "0"),
    ("EVAL", "redis.setresp(3) return redis.call('get', 'nokey')", "0"),
    ("EVAL", "redis.setresp(3) redis.call('xadd', 's', '1-1', 'f', 'v') "
             "return redis.call('xread', 'streams', 's', '0')", "0"),
    ("EVAL", "return redis.call('xread', 'streams', 's', '0')", "0"),
    ("EVAL", "redis.setresp(3) return redis.call('xinfo', 'stream', 's')['map'] ~= nil", "0"),
    ("EVAL", "redis.setresp(3) return {big_number='123456789012345678901234567890'}", "0"),
    ("EVAL", "redis.setresp(3) return {verbatim_string={format='txt', string='hi'}}", "0"),
    ("DEL", "s"),
]


@pytest.mark.parametrize("protocol", ["2", "3"])
def test_resp3_conversions_byte_for_byte(redis_server, protocol: str) -> None:
    """redis.setresp(3) and a RESP3 client: the exact bytes of each reply, over both servers."""
    import socket

    from tests.support.resp_client import encode_command, read_raw_reply
    from tests.support.server_util import start_server

    def replies(port: int) -> list[bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            f = sock.makefile("rb")
            out = []
            for argv in [("HELLO", protocol), ("DEL", "s"), *RESP3_CASES]:
                sock.sendall(encode_command(*argv))
                out.append(read_raw_reply(f))
            return out[2:]

    handle = start_server(Engine(clock=WallClock()))
    try:
        assert replies(handle.port) == replies(redis_server.port)
    finally:
        handle.stop()
