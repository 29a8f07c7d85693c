"""Lua scripting: the Lua runtime, its sandbox, the script cache, and the conversions between
Lua values and replies, as Redis 7+ does them (script_lua.c, eval.c, script.c).

Owns `Scripting` (one per engine, made on the first script: the lupa runtime with Redis's
`redis.*` API, the sandboxed globals, the cache of compiled scripts by SHA1, the run in progress
with its kill and busy state), `eval_script` (EVAL's body: one time for the whole script, every
command through `EngineCore.run_queued` so the script's effects are one record), `busy_reply`
(what other clients are answered while a script is busy), the shebang flags, the `bit` library,
Redis's `math.random` (redisLrand48), and the exact error lines Redis gives. Replay never runs Lua: what a script changed is
logged as the effects of the commands it called (Redis 7's effects replication).

lupa (the Lua 5.1 that Redis embeds) is imported on the first script only, so nothing that does
not run a script pays for it. The Lua heap is capped (`LUA_MAX_MEMORY`): a script that needs
more fails with Lua's "not enough memory" error instead of exhausting the server.

Must not touch: command semantics (the command table's handlers run the commands), the wire
format, I/O (the network server services other clients while a script is busy, through
`engine.server.serve_while_busy`).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Block, Later
from streamkeep.engine.exec.settings import REDIS_VERSION
from streamkeep.engine.exec.table import Argv, Flag, resolve
from streamkeep.engine.model.effects import select_effect
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import NO_REPLY, NULL_ARRAY, RespMap, RespSet, Verbatim

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Ctx
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.scripting")

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
NOTBUSY = "NOTBUSY No scripts in execution right now."
UNKILLABLE = ("UNKILLABLE Sorry the script already executed write commands against the dataset. "
              "You can either wait the script termination or kill the server in a hard way "
              "using the SHUTDOWN NOSAVE command.")
BUSY = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
KILLED = "ERR Script killed by user with SCRIPT KILL..."
RO_WRITE = "ERR Write commands are not allowed from read-only scripts."
RO_SCRIPT = "ERR Can not execute a script with write flag using *_ro command."

# The Lua heap's cap: enough for any reasonable script, far below what would hurt the server.
LUA_MAX_MEMORY = 256 << 20
# What the heap keeps free for the tables and strings made from Python (see Scripting._room).
MEMORY_MARGIN = 1 << 20
# Lua instructions between two looks at the clock and the kill flag (Redis's count hook).
HOOK_INSTRUCTIONS = 100_000
# EVAL's scripts kept at most (SCRIPT LOAD's are never evicted), least recently used out first.
EVAL_SCRIPTS_MAX = 500
LRAND48_MAX = 2147483647  # math.random's divisor (Redis's REDIS_LRAND48_MAX)

FLAG_NO_WRITES, FLAG_ALLOW_OOM, FLAG_ALLOW_STALE, FLAG_NO_CLUSTER, FLAG_CROSS_SLOT = 1, 2, 4, 8, 16
FLAG_COMPAT = 32  # no shebang: Redis's "eval compat mode"
SHEBANG_FLAGS = {b"no-writes": FLAG_NO_WRITES, b"allow-oom": FLAG_ALLOW_OOM,
                 b"allow-stale": FLAG_ALLOW_STALE, b"no-cluster": FLAG_NO_CLUSTER,
                 b"allow-cross-slot-keys": FLAG_CROSS_SLOT}

_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)  # LL_DEBUG..WARNING
_VERBOSITY = {"debug": 0, "verbose": 1, "notice": 2, "warning": 3}


def sha1hex(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


def version_num(version: str = REDIS_VERSION) -> int:
    major, minor, patch = (int(x) for x in version.split(".")[:3])
    return (major << 16) | (minor << 8) | patch


def parse_shebang(body: bytes) -> tuple[int, int]:
    """evalExtractShebangFlags: (flags, length of the shebang line without its newline), or
    ReplyError with Redis's line."""
    if not body.startswith(b"#!"):
        return FLAG_COMPAT, 0
    end = body.find(b"\n")
    if end < 0:
        raise ReplyError("ERR Invalid script shebang")
    parts = body[:end].split()
    if not parts:
        raise ReplyError("ERR Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise ReplyError(f"ERR Unexpected engine in script shebang: {_text(parts[0])}")
    flags = 0
    for part in parts[1:]:
        if not part.startswith(b"flags="):
            raise ReplyError(f"ERR Unknown lua shebang option: {_text(part)}")
        for word in part[6:].split(b","):
            flag = SHEBANG_FLAGS.get(word)
            if flag is None:
                raise ReplyError(f"ERR Unexpected flag in script shebang: {_text(word)}")
            flags |= flag
    return flags, end


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class Lrand48:
    """redisLrand48 (rand.c): the PRNG behind math.random, the same sequence on every
    platform. Its state persists across scripts, as Redis's does."""

    def __init__(self) -> None:
        self.x = 0x1234ABCD330E

    def seed(self, value: int) -> None:
        value &= 0xFFFFFFFF
        self.x = ((value & 0xFFFF) << 16 | (value >> 16) << 32 | 0x330E) & ((1 << 48) - 1)

    def next(self) -> int:
        self.x = (0x5DEECE66D * self.x + 0xB) & ((1 << 48) - 1)
        return self.x >> 17


def _tobit(x: Any) -> int:
    """LuaBitOp's tobit: the number rounded, its low 32 bits as a signed integer."""
    if isinstance(x, bytes):
        x = _lua_number(x)
    if not isinstance(x, (int, float)) or isinstance(x, bool) or x != x:
        raise ScriptError(b"bad argument to a bit function (number expected)")
    n = round(x) & 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def _bit_library() -> dict[bytes, Callable[..., Any]]:
    """The `bit` library (LuaBitOp's API, which Redis bundles), on 32-bit signed integers."""
    def fold(op: Callable[[int, int], int]) -> Callable[..., int]:
        def f(x: Any, *more: Any) -> int:
            acc = _tobit(x)
            for y in more:
                acc = _tobit(op(acc, _tobit(y)))
            return acc
        return f

    def tohex(x: Any, n: Any = 8) -> bytes:
        width = int(_tobit(n))
        size = min(abs(width), 8)
        digits = f"{_tobit(x) & ((1 << (4 * size)) - 1):0{size}x}"
        return (digits.upper() if width < 0 else digits).encode()

    def rol(x: Any, n: Any) -> int:
        v, k = _tobit(x) & 0xFFFFFFFF, _tobit(n) & 31
        return _tobit((v << k | v >> (32 - k)) & 0xFFFFFFFF)

    def ror(x: Any, n: Any) -> int:
        v, k = _tobit(x) & 0xFFFFFFFF, _tobit(n) & 31
        return _tobit((v >> k | v << (32 - k)) & 0xFFFFFFFF)

    return {
        b"tobit": _tobit,
        b"tohex": tohex,
        b"bnot": lambda x: _tobit(~_tobit(x)),
        b"band": fold(lambda a, b: a & b),
        b"bor": fold(lambda a, b: a | b),
        b"bxor": fold(lambda a, b: a ^ b),
        b"lshift": lambda x, n: _tobit((_tobit(x) & 0xFFFFFFFF) << (_tobit(n) & 31)),
        b"rshift": lambda x, n: _tobit((_tobit(x) & 0xFFFFFFFF) >> (_tobit(n) & 31)),
        b"arshift": lambda x, n: _tobit(_tobit(x) >> (_tobit(n) & 31)),
        b"rol": rol,
        b"ror": ror,
        b"bswap": lambda x: _tobit(int.from_bytes(
            (_tobit(x) & 0xFFFFFFFF).to_bytes(4, "little"), "big")),
    }


class Script:
    __slots__ = ("sha", "body", "flags", "function", "from_eval")

    def __init__(self, sha: str, body: bytes, flags: int, function: Any, from_eval: bool) -> None:
        self.sha = sha
        self.body = body
        self.flags = flags
        self.function = function
        self.from_eval = from_eval


class Run:
    """The script in progress: whom it runs for, since when, what it did, and whether it was
    asked to stop."""

    __slots__ = ("session", "sha", "started", "read_only", "dirty", "killed", "timed_out",
                 "shutdown", "resp", "record_db", "ctx", "out_of_memory")

    def __init__(self, ctx: Ctx, sha: str, read_only: bool) -> None:
        self.ctx = ctx
        self.session = ctx.session
        self.sha = sha
        self.started = time.monotonic()
        self.read_only = read_only
        self.dirty = False  # a write command ran: SCRIPT KILL can no longer stop it
        self.killed = False
        self.timed_out = False  # past busy-reply-threshold: others are being told BUSY
        self.shutdown = False  # SHUTDOWN NOSAVE while busy: its effects are not logged
        self.resp = 2
        self.record_db = ctx.session.db  # the database its last logged effect ran in
        self.out_of_memory = False  # a reply did not fit in the Lua heap: the script fails


# The Lua side: Redis's `redis` table and the sandbox, made once per runtime. Python hands
# in the functions that reach the engine and those that raise errors: a Python function is a C
# function to Lua, so the error handler finds the script's line right above it, as above
# Redis's C functions (a Lua wrapper would be tail-called and take the script's frame away).
_PRELUDE = r"""
local py_call, py_pcall, py_unwrap, py_interrupt, py_log, py_setresp, py_set_repl,
      py_random, py_seed, py_sha1hex, py_acl_check_cmd, py_bit, REDIS_VERSION,
      REDIS_VERSION_NUM = ...
local dbg = debug
local type, error, select, unpack, tostring, rawget, setmetatable, setfenv, loadstring, xpcall =
      type, error, select, unpack, tostring, rawget, setmetatable, setfenv, loadstring, xpcall
local real_pcall, floor = pcall, math.floor
local PRELUDE = dbg.getinfo(1, 'S').source
local proxies = setmetatable({}, {__mode = 'k'})  -- the userdata scripts made (newproxy)

local function err_table(msg)
  return {err = msg}
end

local redis = {}
redis.call, redis.pcall, redis.sha1hex = py_call, py_pcall, py_sha1hex
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  if e:sub(1, 1) ~= '-' then e = '-' .. e end
  local space = e:find(' ', 1, true)
  local code, msg
  if space then code, msg = e:sub(2, space - 1), e:sub(space + 1)
  else code, msg = 'ERR', e:sub(2) end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return err_table(code .. ' ' .. msg)
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return err_table('ERR wrong number or type of arguments')
  end
  return {ok = s}
end
redis.log, redis.setresp, redis.set_repl = py_log, py_setresp, py_set_repl
redis.acl_check_cmd = py_acl_check_cmd
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION_NUM, redis.REDIS_VERSION = REDIS_VERSION_NUM, REDIS_VERSION

-- Redis's pcall: an error raised as {err=...} comes back as its message.
-- (No table is made on the way: after a memory error, the heap is still full.)
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type(e) == 'userdata' and not proxies[e] then e = py_unwrap(e) end
  if type(e) == 'table' and type(e.err) == 'string' then return false, e.err end
  return false, e
end
local function redis_pcall(f, ...)
  return pcall_result(real_pcall(f, ...))
end

-- xpcall's handler gets what Redis's would: the {err=...} table of an API error.
local function redis_xpcall(f, h)
  return xpcall(f, function(e)
    if type(e) == 'userdata' and not proxies[e] then e = py_unwrap(e) end
    return h(e)
  end)
end

-- math.random over redisLrand48 (the same sequence everywhere).
local real_math = math
local sandbox_math = {}
for k, v in pairs(real_math) do sandbox_math[k] = v end
sandbox_math.random, sandbox_math.randomseed = py_random, py_seed

-- Read-only views of the libraries: `string.x = 1` fails as on Redis's read-only tables (and
-- so does rawset on them: nothing a script does may outlive it).
local protected = setmetatable({}, {__mode = 'k'})
local function readonly(t)
  local view = setmetatable({}, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
  protected[view] = true
  return view
end
local real_rawset = rawset
local function guarded_rawset(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return real_rawset(t, k, v)
end
local function guarded_setmetatable(t, mt)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return setmetatable(t, mt)
end
-- Strings' methods come from the same read-only view; their metatable cannot be changed.
local string_view = readonly(string)
local string_meta = getmetatable('')
string_meta.__index = string_view
string_meta.__metatable = readonly({__index = string_view})

local allowed = {
  assert = assert, collectgarbage = collectgarbage, error = error, gcinfo = gcinfo,
  getmetatable = getmetatable, ipairs = ipairs, next = next, pairs = pairs,
  pcall = redis_pcall, xpcall = redis_xpcall, rawequal = rawequal, rawget = rawget, rawset = guarded_rawset,
  select = select,
  setmetatable = guarded_setmetatable, tonumber = tonumber, tostring = tostring, type = type,
  unpack = unpack, _VERSION = _VERSION,
  string = string_view, table = readonly(table), math = readonly(sandbox_math),
  coroutine = readonly(coroutine), redis = readonly(redis),
}
if py_bit then allowed.bit = readonly(py_bit) end
local env = setmetatable({}, {
  __index = function(_, name)
    local v = allowed[name]
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
protected[env] = true
allowed._G = env
-- Chunks are always read as text (a leading space makes Lua's loader parse them): precompiled
-- bytecode would escape the sandbox, and Redis's Lua refuses it the same way.
local function text_loadstring(s, name)
  if type(s) == 'string' or type(s) == 'number' then return loadstring(' ' .. s, name or s) end
  return loadstring(s, name)
end
allowed.loadstring = function(s, name)
  local f, e = text_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
local real_load, real_getfenv, real_G = load, getfenv, _G
allowed.load = function(chunk, name)
  if type(chunk) ~= 'function' then
    error("bad argument #1 to 'load' (function expected, got " .. type(chunk) .. ")", 2)
  end
  local first = true
  local f, e = real_load(function()
    if first then first = false return ' ' end
    return chunk()
  end, name)
  if f then setfenv(f, env) end
  return f, e
end
-- getfenv/setfenv (Redis 8 allows them): the globals a script can reach are the sandbox's, and
-- only the script's own functions may change environment.
local function level(f) if type(f) == 'number' and f > 0 then return f + 1 end return f end
allowed.getfenv = function(f)
  if type(f) == 'userdata' then return env end  -- the API's functions (C functions to Redis)
  local e = real_getfenv(level(f == nil and 1 or f))
  if e == real_G then return env end
  return e
end
allowed.setfenv = function(f, t)
  local target = level(f)
  if type(target) == 'number' then
    local i = target > 0 and dbg.getinfo(target, 'f')
    target = i and i.func or 0
  end
  local i = type(target) == 'function' and dbg.getinfo(target, 'S')
  if not i or i.what == 'C' or i.source == PRELUDE or target == 0 then
    error('Attempt to modify a readonly table', 0)
  end
  return setfenv(target, t)
end
-- The API's functions are userdata whose metatable is lupa's: a script never gets it (changing
-- it would break every later script); newproxy's userdata keep theirs reachable.
allowed.newproxy = function(...)
  local p = newproxy(...)
  proxies[p] = true
  return p
end
allowed.getmetatable = function(o)
  if type(o) == 'userdata' and not proxies[o] then return nil end
  return getmetatable(o)
end
allowed.os = readonly({clock = os.clock})

-- Redis's __redis__err__handler: the error as {err=..., source=..., line=...}, the place being
-- the script's line (never this prelude's, which stands where Redis has C functions).
local function handler(e)
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  if i and i.what == 'C' then level = level + 1; i = dbg.getinfo(level, 'nSl') end
  while i and i.source == PRELUDE do level = level + 1; i = dbg.getinfo(level, 'nSl') end
  if type(e) == 'userdata' and not proxies[e] then e = py_unwrap(e) end
  if type(e) ~= 'table' then e = {err = 'ERR ' .. tostring(e)} end
  if i then e.source = i.source; e.line = i.currentline end
  return e
end

local killing
local function hook()
  -- Only the script's own code is interrupted: never this prelude's (run() once the script
  -- has ended, the sandbox's metamethods).
  local where = dbg.getinfo(2, 'S')
  if where and where.source == PRELUDE then return end
  if py_interrupt() then
    -- From now on every line raises it again: a pcall cannot swallow the kill.
    if not killing then killing = true; dbg.sethook(hook, 'l') end
    error({err = 'ERR Script killed by user with SCRIPT KILL...'})
  end
end

local function compile(body)
  local f, e = text_loadstring(body, '@user_script')
  if not f then return nil, e end
  setfenv(f, env)
  return f, false
end

local function run(f, count, collect_kb, nkeys, ...)
  local all, keys, argv = {...}, {}, {}
  for i = 1, nkeys do keys[i] = all[i] end
  for i = nkeys + 1, select('#', ...) do argv[i - nkeys] = all[i] end
  all = nil
  allowed.KEYS, allowed.ARGV = keys, argv
  killing = false
  if count > 0 then dbg.sethook(hook, '', count) end
  local ok, r = xpcall(f, handler) dbg.sethook()  -- (one line: no line event in between)
  allowed.KEYS, allowed.ARGV = nil, nil
  -- A script's garbage goes before the next one starts, not whenever Lua gets to it: nothing
  -- outside a protected call may ever meet a full heap.
  collectgarbage('restart')  -- a script's collectgarbage('stop') ends with it
  if collectgarbage('count') > collect_kb then collectgarbage() end
  return ok, r
end

local function collect() collectgarbage() end

-- luaL_where(1) for a Python function: the script line that called it ("user_script:3: ").
local function where()
  local i = dbg.getinfo(3, 'Sl')
  if i and i.currentline > 0 then return i.short_src .. ':' .. i.currentline .. ': ' end
  return ''
end

-- Nothing else is reachable from a script: the real globals lose what a leak could use.
io, os, package, require, dofile, loadfile, module, python, print, debug = nil
return compile, run, rawget, collect, where
"""


def _out_of_memory(sha: str) -> ReplyError:
    return ReplyError(f"ERR Error running script {sha}, not enough memory")


class Scripting:
    """One engine's Lua: the runtime (made on first use), the script cache, the run in
    progress."""

    def __init__(self, engine: EngineCore) -> None:
        self.engine = engine
        self.scripts: dict[str, Script] = {}
        self.eval_lru: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.running: Run | None = None
        self.rand = Lrand48()
        self.lua: Any = None
        self._compile: Any = None
        self._run: Any = None
        self._rawget: Any = None
        self._collect: Any = None
        self._where: Any = None
        self._lupa: Any = None
        self._oom_error: Any = None
        self.max_memory = LUA_MAX_MEMORY

    # --- the runtime ----------------------------------------------------------------------

    def _runtime(self) -> None:
        if self.lua is not None:
            return
        try:
            from lupa import lua51 as lupa
        except ImportError:  # a lupa without its bundled Lua 5.1: its default Lua
            import lupa  # type: ignore[no-redef]
        self._lupa = lupa
        lua = lupa.LuaRuntime(encoding=None, unpack_returned_tuples=True, register_eval=False,
                              register_builtins=False, max_memory=LUA_MAX_MEMORY,
                              attribute_filter=_no_attributes)
        self.max_memory = LUA_MAX_MEMORY
        self._compile, self._run, self._rawget, self._collect, self._where = lua.execute(
            _PRELUDE, self._raising_call, self._call, self._unwrap, self._interrupt, self._log,
            self._setresp, self._set_repl, self._random, self._randomseed, self._sha1hex,
            self._acl_check_cmd, lua.table_from(_bit_library()), REDIS_VERSION.encode(), version_num())
        self.lua = lua
        self._oom_error = self._error_table("ERR not enough memory")

    def memory(self) -> int:
        """Bytes the Lua heap holds (INFO's used_memory_lua)."""
        if self.lua is None:
            return 0
        used = self.lua.get_memory_used()
        return int(used) if used is not None else 0

    # --- the cache ------------------------------------------------------------------------

    def load(self, body: bytes, from_eval: bool) -> Script:
        """luaCreateFunction: the cached script for this body, compiled and cached if new."""
        sha = sha1hex(body)
        script = self.scripts.get(sha)
        if script is not None:
            if not from_eval and script.from_eval:  # SCRIPT LOAD pins an EVAL'd script
                script.from_eval = False
                self.eval_lru.pop(sha, None)
            return script
        flags, shebang_len = parse_shebang(body)
        self._runtime()
        if not self._room(4 * len(body)):
            raise ReplyError("ERR Error compiling script (new function): not enough memory")
        try:
            function, error = self._compile(body[shebang_len:])
        except self._lupa.LuaMemoryError:
            raise ReplyError("ERR Error compiling script (new function): not enough memory") \
                from None
        if function is None:
            raise ReplyError(f"ERR Error compiling script (new function): {_text(error)}")
        script = self.scripts[sha] = Script(sha, body, flags, function, from_eval)
        if from_eval:
            while len(self.eval_lru) >= EVAL_SCRIPTS_MAX:
                oldest, _ = self.eval_lru.popitem(last=False)
                self.scripts.pop(oldest, None)
            self.eval_lru[sha] = None
        return script

    def flush(self) -> None:
        """SCRIPT FLUSH: forget every script (and the Lua heap they held)."""
        self.scripts.clear()
        self.eval_lru.clear()
        self.lua = self._compile = self._run = self._rawget = self._collect = None

    def kill(self) -> str:
        """SCRIPT KILL."""
        run = self.running
        if run is None:
            raise ReplyError(NOTBUSY)
        if run.dirty:
            raise ReplyError(UNKILLABLE)
        run.killed = True
        return "OK"

    def shutdown_nosave(self) -> None:
        """SHUTDOWN NOSAVE while a script is busy: stop it whatever it wrote; its effects are
        not logged (the server goes down without them, as Redis never propagated them)."""
        run = self.running
        if run is not None:
            run.killed = run.shutdown = True

    # --- running a script -----------------------------------------------------------------

    def run(self, ctx: Ctx, script: Script, keys: Argv, args: Argv, read_only: bool) -> Any:
        """Run a cached script for ctx's session: its reply, or ReplyError."""
        if self.running is not None:  # pragma: no cover - the engine runs one command at a time
            raise ReplyError(BUSY)
        flags = script.flags
        if not flags & FLAG_COMPAT and not flags & FLAG_NO_WRITES:
            engine = ctx.engine
            if engine.read_only is not None and not ctx.session.from_primary:
                raise ReplyError("READONLY Can not run script with write flag on readonly replica")
            if read_only:
                raise ReplyError(RO_SCRIPT)
        ro = read_only or (not flags & FLAG_COMPAT and bool(flags & FLAG_NO_WRITES))
        run = self.running = Run(ctx, script.sha, ro)
        try:
            return self._execute(run, script, keys, args)
        except ReplyError:
            if run.shutdown:  # the server goes down: the script's client gets no reply
                return NO_REPLY
            raise

    def _execute(self, run: Run, script: Script, keys: Argv, args: Argv) -> Any:
        ctx = run.ctx
        session = ctx.session
        db = session.db
        threshold = int(ctx.engine.config["busy-reply-threshold"])
        count = HOOK_INSTRUCTIONS if threshold > 0 else 0
        try:
            if not self._room(sum(len(a) + 64 for a in keys + args)):
                raise _out_of_memory(script.sha)
            ok, result = self._run(script.function, count, self.max_memory // 2048, len(keys),
                                   *keys, *args)
            if run.out_of_memory:
                raise _out_of_memory(script.sha)
            if ok:
                reply = self._to_reply(result, run)
                if isinstance(reply, ReplyError):
                    raise reply
                return reply
            raise self._script_error(result, script.sha)
        except self._lupa.LuaMemoryError:
            raise _out_of_memory(script.sha) from None
        except self._lupa.LuaError as err:
            raise ReplyError(f"ERR Error running script {script.sha}, {str(err)[:100]}") \
                from None
        finally:
            self.running = None
            session.db = db  # a SELECT inside a script does not change its caller's database
            ctx.db = ctx.engine.dbs[db]
            if run.shutdown:
                ctx.effects.clear()
                server = ctx.engine.server
                if server is not None:
                    server.request_shutdown(False)

    def _script_error(self, err: Any, sha: str) -> ReplyError:
        """luaCallFunction's failure: the error table's message, and where it happened."""
        lupa = self._lupa
        if lupa.lua_type(err) != "table":
            msg = _text(err) if isinstance(err, bytes) else "execution failure"
            return ReplyError(f"ERR Error running script {sha}, {msg[:100]}")
        rawget = self._rawget
        msg = rawget(err, b"err")
        source, line = rawget(err, b"source"), rawget(err, b"line")
        text = _lua_string(msg) or ""
        if source is not None and line is not None:
            text += f" script: {sha}, on {_lua_string(source)}:{_lua_string(line)}."
        return ReplyError(text)

    # --- Lua to reply (luaReplyToRedisReply) ----------------------------------------------

    def _to_reply(self, value: Any, run: Run) -> Any:
        t = type(value)
        if t is bytes:
            return value
        if t is bool:
            if run.resp == 2:
                return 1 if value else None
            return value
        if t is int:
            return value
        if t is float:
            return _truncate(value)
        if value is None:
            return None
        if self._lupa.lua_type(value) != "table":
            return None
        rawget = self._rawget
        err = rawget(value, b"err")
        if type(err) is bytes:
            return ReplyError(_text(err).replace("\r", " ").replace("\n", " "))
        ok = rawget(value, b"ok")
        if type(ok) is bytes:
            return _text(ok.replace(b"\r", b" ").replace(b"\n", b" "))
        double = rawget(value, b"double")
        if type(double) in (int, float):
            return float(double)
        big = rawget(value, b"big_number")
        if type(big) is bytes:
            return int(big)  # pragma: no cover - RESP3 only
        verbatim = rawget(value, b"verbatim_string")
        if self._lupa.lua_type(verbatim) == "table":
            fmt, text = rawget(verbatim, b"format"), rawget(verbatim, b"string")
            if type(fmt) is bytes and type(text) is bytes:
                return Verbatim(_text(text), _text(fmt))
        mapping = rawget(value, b"map")
        if self._lupa.lua_type(mapping) == "table":
            return RespMap([(self._to_reply(k, run), self._to_reply(v, run))
                            for k, v in mapping.items()])
        members = rawget(value, b"set")
        if self._lupa.lua_type(members) == "table":
            return RespSet([self._to_reply(k, run) for k in members])
        out = []
        i = 1
        while True:
            item = rawget(value, i)
            if item is None:
                break
            out.append(self._to_reply(item, run))
            i += 1
        return out

    # --- reply to Lua (redisProtocolToLuaType) --------------------------------------------

    def _to_lua(self, value: Any, run: Run) -> Any:
        t = type(value)
        if t is bytes or t is int:
            return value
        if t is str:
            return self.lua.table_from({b"ok": value.encode("utf-8", "surrogateescape")})
        if value is None or value is NULL_ARRAY:
            return False if run.resp == 2 or value is NULL_ARRAY else None
        if t is bool:
            return value if run.resp == 3 else int(value)
        if t is float:
            if run.resp == 3:
                return self.lua.table_from({b"double": value})
            return _double_bulk(value)
        if isinstance(value, ReplyError):
            return self._error_table(value.line)
        if t is RespMap:
            if run.resp == 3:
                inner = self.lua.table_from()
                for k, v in value.items:
                    inner[self._to_lua(k, run)] = self._to_lua(v, run)
                return self.lua.table_from({b"map": inner})
            items: list[Any] = []
            for k, v in value.items:
                if value.as_pairs:
                    items.append([k, v])
                else:
                    items.extend((k, v))
            return self._array(items, run)
        if t is RespSet:
            if run.resp == 3:
                inner = self.lua.table_from()
                for k in value.items:
                    inner[self._to_lua(k, run)] = True
                return self.lua.table_from({b"set": inner})
            return self._array(value.items, run)
        if t is Verbatim:
            text = value.text.encode("utf-8", "surrogateescape")
            if run.resp == 3:
                inner = self.lua.table_from({b"format": value.fmt.encode(), b"string": text})
                return self.lua.table_from({b"verbatim_string": inner})
            return text
        if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
            return self._array(list(value), run)
        return value  # pragma: no cover - every reply shape is above

    def _array(self, items: list, run: Run) -> Any:
        table = self.lua.table_from()
        for i, item in enumerate(items, 1):
            converted = self._to_lua(item, run)
            if converted is not None:
                table[i] = converted
        return table

    def _error_table(self, line: str) -> Any:
        """luaPushErrorBuff of "-<line>": {err="CODE msg"} (a code-less line gets ERR)."""
        code, sep, msg = line.partition(" ")
        if not sep:
            code, msg = "ERR", line
        msg = msg.strip("\r\n")
        return self.lua.table_from({b"err": f"{code} {msg}".encode("utf-8", "surrogateescape")})

    # --- redis.call / redis.pcall ---------------------------------------------------------

    def _raising_call(self, *args: Any) -> Any:
        """redis.call: the reply, or the command's error raised into the script."""
        reply, failed = self._call_command(args)
        if failed:
            raise ScriptError(reply)
        return reply

    def _call(self, *args: Any) -> Any:
        """redis.pcall: the reply, or the command's error as an {err=...} table."""
        return self._call_command(args)[0]

    def _unwrap(self, error: Any) -> Any:
        """A Python exception raised into the script, as the Lua error Redis raises."""
        if isinstance(error, ScriptError):
            return error.table
        return self._error_table(f"ERR {error}")

    def _call_command(self, args: tuple) -> tuple[Any, bool]:
        """One command from the script: (its reply as Lua sees it, whether it failed)."""
        run = self.running
        assert run is not None
        if not args:
            return self._error_table(
                "ERR Please specify at least one argument for this redis lib call"), True
        argv = []
        for arg in args:
            t = type(arg)
            if t is bytes:
                argv.append(arg)
            elif t is int or t is float:
                argv.append(_number_arg(arg))
            else:
                return self._error_table(
                    "ERR Lua redis lib command arguments must be strings or integers"), True
        try:
            reply = self._command(run, tuple(argv))
        except ReplyError as err:
            return self._error_table(err.line), True
        if isinstance(reply, ReplyError):
            return self._error_table(reply.line), True
        if self.lua.get_memory_used() > self.max_memory // 2 and not self._room(_size(reply)):
            # Building it could meet a full heap outside Lua's protection: the script fails
            # instead, as if Lua had run out of memory (a pcall cannot keep it going).
            run.out_of_memory = True
            raise ScriptError(self._oom_error)
        return self._to_lua(reply, run), False

    def _room(self, need: int) -> bool:
        """Whether `need` more bytes fit in the Lua heap with a margin (after a collection if
        they do not at first): lupa's own allocations (arguments, tables made from Python) are
        not protected, and a full heap there would abort the process."""
        if self.lua.get_memory_used() + need + MEMORY_MARGIN <= self.max_memory:
            return True
        self._collect()
        return self.lua.get_memory_used() + need + MEMORY_MARGIN <= self.max_memory

    def _command(self, run: Run, argv: Argv) -> Any:
        """scriptCall's checks, then the command as EXEC runs it."""
        spec = resolve(argv)
        if spec is None:
            raise ReplyError("ERR Unknown Redis command called from script")
        n, arity = len(argv), spec.arity
        if spec.handler is None or (arity > 0 and n != arity) or n < -arity:
            raise ReplyError("ERR Wrong number of args calling Redis command from script")
        flags = spec.flags
        if Flag.NOSCRIPT in flags:
            raise ReplyError("ERR This Redis command is not allowed from script")
        if run.read_only and (spec.is_write or Flag.MAY_REPLICATE in flags):
            raise ReplyError(RO_WRITE)
        ctx = run.ctx
        engine = ctx.engine
        session = run.session
        effects = ctx.effects
        mark = len(effects)
        db = session.db
        if spec.is_write:  # from now on SCRIPT KILL cannot stop it (Redis: even if it fails)
            run.dirty = True
        reply = engine.run_queued(ctx, [(spec, argv)])[0]
        if len(effects) > mark:
            if db != run.record_db:
                effects.insert(mark, select_effect(db))
            run.record_db = db
        t = type(reply)
        if t is Block:  # pragma: no cover - a blocking command does not block in a script
            return None
        if t is Later:
            raise ReplyError("ERR This Redis command is not allowed from script")
        return reply

    # --- the rest of the redis.* API ------------------------------------------------------

    def _raise(self, line: str) -> ScriptError:
        return ScriptError(self._error_table(line))

    def _sha1hex(self, *args: Any) -> bytes:
        if len(args) != 1:
            raise self._raise("ERR wrong number of arguments")
        value = args[0]
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, (int, float)):
            data = _number_text(value)
        else:
            data = b""
        return sha1hex(data).encode()

    def _log(self, *args: Any) -> None:
        if len(args) < 2:
            raise self._raise("ERR redis.log() requires two arguments or more.")
        level = _lua_number(args[0])
        if level is None:
            raise self._raise("ERR First argument must be a number (log level).")
        level = int(level)
        if not 0 <= level <= 3:
            raise self._raise("ERR Invalid log level.")
        configured = _VERBOSITY.get(str(self.engine.config.get("loglevel", "notice")), 2)
        if level < configured:
            return
        words = [a if isinstance(a, bytes) else _number_text(a) for a in args[1:]
                 if isinstance(a, (bytes, int, float)) and not isinstance(a, bool)]
        log.log(_LOG_LEVELS[level], "%s", _text(b" ".join(words)))

    def _setresp(self, *args: Any) -> None:
        if len(args) != 1:
            raise self._raise("ERR redis.setresp() requires one argument.")
        resp = _lua_number(args[0])
        if resp not in (2, 3):
            raise self._raise("ERR RESP version must be 2 or 3.")
        run = self.running
        if run is not None:
            run.resp = int(resp)  # type: ignore[arg-type]

    def _acl_check_cmd(self, *args: Any) -> bool:
        """redis.acl_check_cmd: there are no ACL users, so any command that exists may run."""
        if not args:
            raise self._raise("ERR Please specify at least one argument for this redis lib call")
        if not all(isinstance(a, bytes | int | float) and not isinstance(a, bool) for a in args):
            raise self._raise("ERR Lua redis lib command arguments must be strings or integers")
        argv = [a if isinstance(a, bytes) else _number_arg(a) for a in args]
        if resolve(argv) is None:
            raise self._raise("ERR Invalid command passed to redis.acl_check_cmd()")
        return True

    def _set_repl(self, *args: Any) -> None:
        """Accepted and ignored: effects replication is the only mode (Redis 7)."""
        if len(args) != 1:
            raise self._raise("ERR redis.set_repl() requires one argument.")
        flags = _lua_number(args[0]) or 0
        if int(flags) & ~3:
            raise self._raise("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, "
                              "REPL_ALL or REPL_NONE.")

    def _lua_error(self, message: str) -> ScriptError:
        """luaL_error from a library function: the message with the script's line in front."""
        where = _text(self._where())
        return ScriptError(self.lua.table_from({b"err": f"ERR {where}{message}".encode()}))

    def _checkint(self, args: tuple, n: int) -> int:
        value = _lua_number(args[n - 1]) if n <= len(args) else None
        if value is None:
            got = _lua_type_name(args[n - 1]) if n <= len(args) else "no value"
            raise self._lua_error(f"bad argument #{n} to 'random' (number expected, got {got})")
        return int(value)

    def _random(self, *args: Any) -> Any:
        """math.random over redisLrand48, argument checks as Lua's (the number drawn first)."""
        r = (self.rand.next() % LRAND48_MAX) / LRAND48_MAX
        if not args:
            return r
        if len(args) == 1:
            upper = self._checkint(args, 1)
            if upper < 1:
                raise self._lua_error("bad argument #1 to 'random' (interval is empty)")
            return math.floor(r * upper) + 1
        if len(args) == 2:
            lower, upper = self._checkint(args, 1), self._checkint(args, 2)
            if lower > upper:
                raise self._lua_error("bad argument #2 to 'random' (interval is empty)")
            return math.floor(r * (upper - lower + 1)) + lower
        raise self._lua_error("wrong number of arguments")

    def _randomseed(self, *args: Any) -> None:
        self.rand.seed(self._checkint(args, 1))

    def _interrupt(self) -> bool:
        """The count hook: past busy-reply-threshold, let the server answer other clients
        (BUSY, SCRIPT KILL); True once the script must stop."""
        run = self.running
        if run is None:
            return False
        if not run.timed_out:
            threshold = int(self.engine.config["busy-reply-threshold"])
            elapsed = (time.monotonic() - run.started) * 1000
            if run.killed or elapsed < threshold:
                return run.killed
            run.timed_out = True
            log.warning("Slow script detected: still in execution after %d milliseconds. You "
                        "can try killing the script using the SCRIPT KILL command. Script name "
                        "is: %s.", elapsed, run.sha)
        server = self.engine.server
        if server is not None:
            server.serve_while_busy(self)
        if run.killed:
            log.info("Lua script killed by user with SCRIPT KILL.")
        return run.killed


class ScriptError(StreamkeepError):
    """An error raised into a script by redis.call and the other API functions: Lua receives
    it as the {err=...} table Redis raises."""

    def __init__(self, table: Any) -> None:
        super().__init__("script error")
        self.table = table


def _size(value: Any) -> int:
    """About how many bytes a reply takes as Lua values."""
    if isinstance(value, bytes | str):
        return len(value) + 40
    if isinstance(value, list | tuple):
        return 64 + sum(_size(v) for v in value)
    if isinstance(value, RespMap):
        return 64 + sum(_size(k) + _size(v) for k, v in value.items)
    if hasattr(value, "__iter__"):
        return 64 + sum(_size(v) for v in value)
    return 40


def _no_attributes(obj: Any, name: Any, is_setting: bool) -> Any:
    """lupa's attribute filter: a script reaches no attribute of the Python objects behind the
    API's functions (through them it would reach the whole interpreter)."""
    raise AttributeError("attempt to index a function value")


def _lua_number(value: Any) -> float | None:
    """lua_tonumber: a number, or a string that reads as one; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, bytes):
        try:
            return float(value) if b"." in value or b"e" in value.lower() else int(value, 0)
        except ValueError:
            return None
    return None


def _lua_type_name(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, bytes):
        return "string"
    return "table"


def _lua_string(value: Any) -> str | None:
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, (int, float)):
        return _text(_number_text(value))
    return None


def _number_text(value: float) -> bytes:
    """lua_tostring of a number ("%.14g"; lupa hands integral numbers over as int)."""
    return b"%.14g" % float(value)


_HALF_LLONG = float(((1 << 63) - 1) // 2)


def _number_arg(value: float) -> bytes:
    """A number passed to redis.call: an integer when double2ll takes it, else the shortest
    round-trip form (Redis's fpconv_dtoa)."""
    number = float(value)
    if -_HALF_LLONG <= number <= _HALF_LLONG and number.is_integer():
        return b"%d" % int(number)
    return repr(number).encode()


def _truncate(value: float) -> int:
    """(long long)lua_tonumber: toward zero; what C gives for the unrepresentable."""
    if value != value or value in (float("inf"), float("-inf")):
        return -(1 << 63)
    if value >= 2 ** 63 or value < -(2 ** 63):
        return -(1 << 63)
    return int(value)


def _double_bulk(value: float) -> bytes:
    """A double reply as RESP2 carries it (a bulk string, %.17g)."""
    if value != value:
        return b"nan"
    if value in (float("inf"), float("-inf")):
        return b"inf" if value > 0 else b"-inf"
    return b"%.17g" % value


def busy_reply(scripting: Scripting, argv: list[bytes]) -> Any:
    """What a client is answered while a script is busy (the server calls this from the
    script's hook, the engine lock held): SCRIPT KILL and SHUTDOWN NOSAVE act on the script,
    anything else is refused with BUSY."""
    name = argv[0].lower() if argv else b""
    if name == b"script" and len(argv) == 2 and argv[1].lower() == b"kill":
        try:
            return scripting.kill()
        except ReplyError as err:
            return err
    if name == b"shutdown" and any(arg.lower() == b"nosave" for arg in argv[1:]):
        scripting.shutdown_nosave()
        return NO_REPLY
    # A rejected call of that command and an error reply in INFO's statistics, as Redis counts
    # it (the engine lock is this thread's: the script holds it).
    spec = resolve(argv) if argv else None
    stats = scripting.engine.stats
    stats.rejected(stats.counters(spec.name) if spec is not None else None, BUSY)
    return ReplyError(BUSY)


def scripting_of(engine: EngineCore) -> Scripting:
    """The engine's Scripting, made on first use."""
    scripting = engine.scripting
    if scripting is None:
        scripting = engine.scripting = Scripting(engine)
    return scripting


def eval_script(ctx: Ctx, argv: Argv, by_sha: bool, read_only: bool) -> Any:
    """EVAL, EVALSHA, EVAL_RO, EVALSHA_RO."""
    numkeys = parse_int(argv[2])
    if numkeys > len(argv) - 3:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    if numkeys < 0:
        raise ReplyError("ERR Number of keys can't be negative")
    scripting = scripting_of(ctx.engine)
    if by_sha:
        sha = argv[1]
        script = scripting.scripts.get(_text(sha).lower()) if len(sha) == 40 else None
        if script is None:
            raise ReplyError(NOSCRIPT)
    else:
        script = scripting.load(argv[1], from_eval=True)
    if script.from_eval:
        scripting.eval_lru.move_to_end(script.sha)
    keys, args = argv[3:3 + numkeys], argv[3 + numkeys:]
    return scripting.run(ctx, script, keys, args, read_only)


__all__ = ["BUSY", "NOSCRIPT", "Scripting", "busy_reply", "eval_script", "parse_shebang",
           "scripting_of", "sha1hex"]
