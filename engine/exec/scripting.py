"""Lua scripting: the Lua runtime, its sandbox, the script cache, and the conversions between
Lua values and replies, as Redis 8 does them (script_lua.c, eval.c, script.c).

Owns `Scripting` (one per engine, made on the first script: the Lua runtime with Redis's
`redis.*` API, the sandboxed globals and the libraries Redis bundles, the cache of compiled
scripts by SHA1, the run in progress with its kill and busy state), `eval_script` (EVAL's body:
one time for the whole script, every command through the engine's `run_script_command`
(engine.runtime.batches) so the script's effects are one record), the shebang flags, Redis's `math.random` (redisLrand48), and the exact
error lines Redis gives. For Redis Functions (engine.exec.functions owns the libraries) a second
Scripting is the functions' runtime: a library's load with only the library API as its globals,
a function called with KEYS and ARGV as its arguments, FUNCTION KILL against SCRIPT KILL.
Replay never runs a script: what a script changed is logged as the effects of the commands it
called (Redis 7's effects replication); only a logged FUNCTION LOAD runs its library's code again,
which registers functions and changes no data.

The Lua side lives in engine/exec/lua/: sandbox.lua (the globals, the read-only tables, pcall,
the error handler, the busy-script hook), cjson.lua and cmsgpack.lua; bit, struct and the float
codecs are Python (engine.exec.script_libs). Python's functions reach Lua as C functions
(the host's `python.as_function`), so `type(redis.call)` is 'function' as in Redis.

The Lua (5.1, the one Redis embeds) is engine.exec.lua_host's: the compiled host over the
system's liblua5.1, or lupa's in the pure build. It is imported on the first script only, so
nothing that does not run a script pays for it. The Lua heap is capped (`LUA_MAX_MEMORY`): a
script that needs more fails with Lua's "not enough memory" error instead of exhausting the
server.

Must not touch: command semantics (the command table's handlers run the commands), the wire
format, I/O (the network server services other clients while a script is busy, through
`engine.server.serve_while_busy`).
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import sys
import time
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, NoReturn

from streamkeep.engine.exec.cluster import CROSSSLOT, DOWN, DOWN_READ_ONLY, UNBOUND
from streamkeep.engine.exec.context import Block, Later, MultiCtx, ScriptCtx
from streamkeep.engine.exec.eviction import OOM
from streamkeep.engine.exec.script_libs import (
    MAXCSTACK,
    bit_library,
    lua_tonumber,
    lua_typename,
    number_text,
    pack_float,
    struct_library,
    unpack_double,
    unpack_float,
)
from streamkeep.engine.exec.settings import REDIS_VERSION
from streamkeep.engine.exec.table import Argv, Flag, resolve
from streamkeep.engine.model.effects import select_effect
from streamkeep.engine.model.keyslot import key_slot
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import (
    NO_REPLY,
    NULL_ARRAY,
    HumanDouble,
    RespMap,
    RespSet,
    Verbatim,
)

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.engine.exec.context import Ctx
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.table import CommandSpec

log: Final = logging.getLogger("streamkeep.scripting")

NOSCRIPT: Final = "NOSCRIPT No matching script. Please use EVAL."
NOTBUSY: Final = "NOTBUSY No scripts in execution right now."
UNKILLABLE = ("UNKILLABLE Sorry the script already executed write commands against the dataset. "
              "You can either wait the script termination or kill the server in a hard way "
              "using the SHUTDOWN NOSAVE command.")
BUSY: Final = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
BUSY_FUNCTION: Final = ("BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
                        "SHUTDOWN NOSAVE.")
KILLED: Final = "ERR Script killed by user with SCRIPT KILL..."
STACK_LIMIT = "ERR reached lua stack limit"
REPLY_TOO_BIG = "ERR the script's reply is too big: more than 8388608 values"
REPLY_REPEATS = ("ERR the script's reply repeats a table more than 8000 times (a table that holds "
                 "itself twice?)")
RO_WRITE: Final = "ERR Write commands are not allowed from read-only scripts."
RO_SCRIPT: Final = "ERR Can not execute a script with write flag using *_ro command."
NO_CLUSTER: Final = "ERR Can not run script on cluster, 'no-cluster' flag is set."

# The Lua heap's cap: enough for any reasonable script, far below what would hurt the server.
LUA_MAX_MEMORY = 256 << 20
# What the heap keeps free for the tables and strings made from Python (see Scripting._room).
MEMORY_MARGIN: Final = 1 << 20
# Lua instructions between two looks at the clock and the kill flag (Redis's count hook).
HOOK_INSTRUCTIONS: Final = 100_000
# A script busy in redis.call runs few Lua instructions: the look is also taken this often from
# the calls themselves.
CALL_CHECK_SECONDS: Final = 0.01
_monotonic: Final = time.monotonic  # (every redis.call reads it: bound once)
# A script's reply: a table that holds itself twice would make 2^7995 values (Redis never
# finishes), and so would tables that share tables. Past REPLY_REPEATS_AFTER values, a table
# met more than MAXCSTACK times (the most a chain of tables holding themselves reaches) ends
# the conversion with an error; past REPLY_VALUES_MAX values, any reply does. Every
# REPLY_CHECK_VALUES values the busy-script check runs: the server keeps answering, and SCRIPT
# KILL stops a long conversion.
REPLY_REPEATS_AFTER = 1 << 20
REPLY_VALUES_MAX = 1 << 23
REPLY_CHECK_VALUES = 4096
# EVAL's scripts kept at most (SCRIPT LOAD's are never evicted), least recently used out first.
EVAL_SCRIPTS_MAX = 500
LRAND48_MAX = 2147483647  # math.random's divisor (Redis's REDIS_LRAND48_MAX)

FLAG_NO_WRITES: Final = 1
FLAG_ALLOW_OOM: Final = 2
FLAG_ALLOW_STALE: Final = 4
FLAG_NO_CLUSTER: Final = 8
FLAG_CROSS_SLOT: Final = 16
FLAG_COMPAT: Final = 32  # no shebang: Redis's "eval compat mode"
SHEBANG_FLAGS = {b"no-writes": FLAG_NO_WRITES, b"allow-oom": FLAG_ALLOW_OOM,
                 b"allow-stale": FLAG_ALLOW_STALE, b"no-cluster": FLAG_NO_CLUSTER,
                 b"allow-cross-slot-keys": FLAG_CROSS_SLOT}

_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.INFO, logging.WARNING)  # LL_DEBUG..WARNING
_VERBOSITY = {"debug": 0, "verbose": 1, "notice": 2, "warning": 3}


def _refuse_oom_run(ctx: Ctx, flags: int) -> None:
    """A script with flags but neither allow-oom nor no-writes is a denyoom command: refused
    while memory is over maxmemory (Redis's scriptFlagsToCmdFlags)."""
    if ctx.engine.oom and not flags & FLAG_COMPAT \
            and not flags & (FLAG_ALLOW_OOM | FLAG_NO_WRITES) and not ctx.session.from_primary:
        raise ReplyError(OOM)


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
                 "shutdown", "resp", "record_db", "ctx", "out_of_memory", "next_check",
                 "is_function", "calls", "slot", "cross_slot", "allow_oom")

    def __init__(self, ctx: Ctx, sha: str, read_only: bool) -> None:
        self.ctx = ctx
        self.session = ctx.session
        self.sha = sha
        self.started = _monotonic()
        self.read_only = read_only
        self.dirty = False  # a write command ran: SCRIPT KILL can no longer stop it
        self.killed = False
        self.timed_out = False  # past busy-reply-threshold: others are being told BUSY
        self.shutdown = False  # SHUTDOWN NOSAVE while busy: its effects are not logged
        self.resp = 2
        self.record_db = ctx.session.db  # the database its last logged effect ran in
        self.out_of_memory = False  # a reply did not fit in the Lua heap: the script fails
        # When redis.call next looks at the clock (_check): a run that just started is far
        # from busy-reply-threshold, and a kill or a shutdown signal cannot predate it.
        self.next_check = self.started + CALL_CHECK_SECONDS
        self.is_function = False  # FCALL's (FUNCTION KILL stops it), not EVAL's
        self.allow_oom = False  # its shebang's allow-oom: writes even over maxmemory
        # The context its redis.calls run in, as EXEC's commands do (made on the first one,
        # reset by each: see EngineState.run_script_command).
        self.calls: MultiCtx | None = None
        # On a cluster node: the slot its commands' keys must share (its declared keys' when
        # it has some; else its first command's), unless it may cross slots (a script without
        # a shebang, or flagged allow-cross-slot-keys).
        self.slot = -1
        self.cross_slot = True


# A command's argv as a script's run takes it (its KEYS and ARGV are a range of it).
ScriptArgv = tuple[bytes, ...] | list[bytes]

_MAP_END = object()  # _to_reply's marker: a RESP3 map's values are all converted
_NEGATIVE_ZERO = object()  # a -0 a Lua library function returns (the host would make it 0)
_MANY = object()  # a Lua library function's results come in a table


def _cluster_run(run: Run, flags: int, argv: ScriptArgv, first: int, nkeys: int) -> None:
    """A cluster node's rules for the run (scriptPrepareForRun): whether its commands may
    cross slots, and the slot its declared keys chose (processCommand has checked they share
    it)."""
    if run.ctx.engine.cluster is None:
        return
    run.cross_slot = bool(flags & FLAG_COMPAT or flags & FLAG_CROSS_SLOT)
    if nkeys > 0:
        run.slot = key_slot(argv[first])


# scriptVerifyClusterState's lines, by the refusal a client's command would have met.
_CLUSTER_LINES: Final = {
    DOWN_READ_ONLY: "ERR Script attempted to execute a write command while the cluster is "
                    "down and readonly",
    DOWN: "ERR Script attempted to execute a command while the cluster is down",
    UNBOUND: "ERR Script attempted to access a slot not served",
}


def _cluster_check(run: Run, cluster: Topology, spec: CommandSpec, argv: Argv) -> None:
    """A script's command on a cluster node (scriptVerifyClusterState): refused when a
    client's would be (its keys elsewhere, across slots, the cluster down), or when it uses
    another slot than the script's so far and the script may not cross slots."""
    line, slot = cluster.judge(run.session, spec, argv)
    if line is not None:
        if line == CROSSSLOT:
            raise ReplyError(f"ERR Command '{spec.name}' in script attempted to access keys "
                             "that don't hash to the same slot")
        raise ReplyError(_CLUSTER_LINES.get(
            line, "ERR Script attempted to access a non local key in a cluster node"))
    if slot != -1 and not run.cross_slot:
        if run.slot == -1:
            run.slot = slot
        elif run.slot != slot:
            raise ReplyError("ERR Script attempted to access keys that do not hash to the same "
                             "slot")


def _out_of_memory(sha: str) -> ReplyError:
    return ReplyError(f"ERR Error running script {sha}, not enough memory")


def _lua_source(name: str) -> bytes:
    """One of the Lua chunks in engine/exec/lua/."""
    return resources.files(__package__).joinpath("lua", f"{name}.lua").read_bytes()


class Scripting:
    """One engine's Lua: the runtime (made on first use), the script cache, the run in
    progress."""

    def __init__(self, engine: EngineState) -> None:
        self.engine = engine
        self.scripts: dict[str, Script] = {}
        self.eval_lru: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.running: Run | None = None
        self.rand = Lrand48()
        self.lua: Any = None
        self._compile: Any = None
        self._run_state: Any = None  # sandbox.lua's RUN table
        self._run_lua: Any = None  # the runtime's `run` (bound once)
        self._rawget: Any = None
        self._collect: Any = None
        self._c_where: Any = None
        self._arm_kill: Any = None
        self._call_library: Any = None
        self._identity: Any = None
        self._host: Any = None
        self._oom_error: Any = None
        self._memory_used: Any = None  # the runtime's get_memory_used (redis.call's look, bound once)
        # Whether what Python hands the runtime (a reply, a library's results) must first be
        # checked against the heap's room: lupa's allocations for it are not protected, and a
        # full heap there would abort the process (the compiled host's cannot fail).
        self._guarded = True
        self.max_memory = LUA_MAX_MEMORY
        # Redis Functions (engine.exec.functions): the engine's libraries, kept on the EVAL
        # runtime's Scripting (SCRIPT FLUSH does not touch them); on the functions' own runtime,
        # the library being loaded (what redis.register_function adds to) and its hooks.
        self.functions: Any = None
        self.registrar: Any = None
        self._load_library: Any = None

    # --- the runtime ----------------------------------------------------------------------

    def _runtime(self) -> None:
        if self.lua is not None:
            return
        from streamkeep.engine.exec import lua_host

        self._host = lua_host
        self._guarded = not lua_host.PUSHES_NEVER_FAIL
        lua = lua_host.Runtime(LUA_MAX_MEMORY)
        self.max_memory = LUA_MAX_MEMORY
        functions = {
            b"unwrap": self._unwrap,
            b"interrupt": self._interrupt, b"log": self._log, b"setresp": self._setresp,
            b"set_repl": self._set_repl, b"sha1hex": self._sha1hex,
            b"acl_check_cmd": self._acl_check_cmd, b"random": self._random,
            b"randomseed": self._randomseed, b"pack_float": pack_float,
            b"unpack_float": unpack_float, b"unpack_double": unpack_double,
            b"register_function": self._register_function,
            b"load_timed_out": self._load_timed_out,
        }
        params = lua.table_from({
            b"functions": lua.table_from(functions),
            # (called with their arguments as one tuple: the hot path's cheaper call)
            b"tuple_functions": lua.table_from({b"call": self._raising_call,
                                                b"pcall": self._call}),
            b"bit": lua.table_from(bit_library(self)),
            b"struct": lua.table_from(struct_library(self)),
            b"sources": lua.table_from({b"cjson": _lua_source("cjson"),
                                        b"cmsgpack": _lua_source("cmsgpack")}),
            b"library_function": self._library_function, b"negzero": _NEGATIVE_ZERO,
            b"many": _MANY,
            b"REDIS_VERSION": REDIS_VERSION.encode(), b"REDIS_VERSION_NUM": version_num(),
            b"HOOK_INSTRUCTIONS": HOOK_INSTRUCTIONS,
        })
        (self._compile, self._run_state, self._rawget, self._collect, self._c_where,
         self._arm_kill, self._call_library, self._identity, self._load_library) = lua.execute(
            _lua_source("sandbox"), params, name="=streamkeep:sandbox")
        self.lua = lua
        lua.prepare(self._run_state, self.max_memory // 2048, MEMORY_MARGIN)
        self._run_lua = lua.run
        self._memory_used = lua.get_memory_used
        self._oom_error = self._error_table("ERR not enough memory")

    def _library_function(self, impl: Any) -> Any:
        """The Python function through which a script calls `impl`, a function of a library
        written in Lua (sandbox.lua makes it a C function of it)."""
        def call(*args: Any) -> Any:
            out = self._call_library(impl, *args)
            if type(out) is not tuple:  # (no result: just pcall's true)
                return () if out is True else self._library_error(out)
            if out[0] is not True:
                return self._library_error(out[1])
            results = out[1:]
            if _MANY in results or _NEGATIVE_ZERO in results:
                results = self._library_results(results)
            if (self._guarded and self.lua.get_memory_used() > self.max_memory // 2
                    and not self._room(sum(len(r) for r in results if type(r) is bytes))):
                self._out_of_memory()
            return results
        return call

    def _library_results(self, results: tuple) -> tuple:
        """A library function's results as sandbox.lua hands them over: a -0 comes as
        _NEGATIVE_ZERO, thousands of results as (_MANY, their table, their count + 1)."""
        if results[0] is _MANY:
            table, rawget = results[1], self._rawget
            results = tuple(rawget(table, i) for i in range(2, results[2] + 1))
        return tuple(-0.0 if r is _NEGATIVE_ZERO else r for r in results)

    def _library_error(self, error: Any) -> NoReturn:
        """A library function's error, raised as the C function Redis has would raise it
        (placed and named by the script's call)."""
        if self._host.lua_type(error) == "table":
            rawget = self._rawget
            message = rawget(error, b"lib")
            if type(message) is bytes:
                self.error(_text(message))
            n = rawget(error, b"arg")
            if type(n) is int:
                self.arg_error(n, _text(rawget(error, b"msg")))
        elif error == b"not enough memory":
            self._out_of_memory()
        raise ScriptError(error)

    def _out_of_memory(self) -> NoReturn:
        """The Lua heap cannot take what a Python function would hand back: the script fails,
        as if Lua had run out of memory (a pcall cannot keep it going)."""
        if self.running is not None:
            self.running.out_of_memory = True
        raise ScriptError(self._oom_error)

    def memory(self) -> int:
        """Bytes the Lua heap holds (INFO's used_memory_lua)."""
        if self.lua is None:
            return 0
        used = self.lua.get_memory_used()
        return int(used) if used is not None else 0

    def cache_memory(self) -> int:
        """Bytes the script cache holds outside the Lua heap (INFO's used_memory_scripts_eval,
        Redis's bodies, SHA1 keys and entries): each script's body, SHA1, entry and the
        dicts that index them, as Python sizes them (sys.getsizeof: the objects themselves,
        not the allocator's rounding). The compiled functions are in the Lua heap (`memory`)."""
        scripts = self.scripts
        if not scripts:
            return 0
        size = sys.getsizeof(scripts) + sys.getsizeof(self.eval_lru)
        for sha, script in scripts.items():
            size += sys.getsizeof(sha) + sys.getsizeof(script.body) + sys.getsizeof(script)
        return size

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
        except self._host.LuaMemoryError:
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
        self.lua = self._compile = self._run_state = self._run_lua = self._rawget = None
        self._collect = None
        self._c_where = self._arm_kill = self._call_library = self._identity = None
        self._memory_used = None

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

    def run(self, ctx: Ctx, script: Script, argv: ScriptArgv, first: int, nkeys: int,
            read_only: bool) -> Any:
        """Run a cached script for ctx's session, KEYS being argv[first:first + nkeys] and ARGV
        the rest: its reply, or ReplyError."""
        if self.running is not None:  # pragma: no cover - the engine runs one command at a time
            raise ReplyError(BUSY)
        flags = script.flags
        if not flags & FLAG_COMPAT and flags & FLAG_NO_CLUSTER and ctx.engine.cluster is not None:
            raise ReplyError(NO_CLUSTER)
        if not flags & FLAG_COMPAT and not flags & FLAG_NO_WRITES:
            engine = ctx.engine
            if engine.read_only is not None and not ctx.session.from_primary:
                raise ReplyError("READONLY Can not run script with write flag on readonly replica")
            if read_only:
                raise ReplyError(RO_SCRIPT)
        _refuse_oom_run(ctx, flags)
        ro = read_only or (not flags & FLAG_COMPAT and bool(flags & FLAG_NO_WRITES))
        run = self.running = Run(ctx, script.sha, ro)
        run.allow_oom = bool(flags & FLAG_ALLOW_OOM)
        _cluster_run(run, flags, argv, first, nkeys)
        try:
            return self._execute(run, script, argv, first, nkeys)
        except ReplyError:
            if run.shutdown:  # the server goes down: the script's client gets no reply
                return NO_REPLY
            raise

    def _execute(self, run: Run, script: Script, argv: ScriptArgv, first: int,
                 nkeys: int) -> Any:
        ctx = run.ctx
        session = ctx.session
        db = session.db
        threshold = int(ctx.engine.config["busy-reply-threshold"])
        count = HOOK_INSTRUCTIONS if threshold > 0 else 0
        try:
            outcome: tuple[Any, Any] = self._run_lua(script.function, argv, first, nkeys,
                                                     run.is_function, count)
            ok, result = outcome
            if ok is None or run.out_of_memory:  # (None: no room for the arguments)
                raise _out_of_memory(script.sha)
            if ok:
                if type(result) is int or type(result) is bytes:  # (the usual: as it is)
                    return result
                reply = self._to_reply(result, run)
                if isinstance(reply, ReplyError):
                    raise reply
                return reply
            raise self._script_error(result, script.sha)
        except self._host.LuaMemoryError:
            raise _out_of_memory(script.sha) from None
        except self._host.LuaError as err:
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
        host = self._host
        if host.lua_type(err) != "table":
            msg = _text(err) if isinstance(err, bytes) else "execution failure"
            return ReplyError(f"ERR Error running script {sha}, {msg[:100]}")
        rawget = self._rawget
        source, line = rawget(err, b"source"), rawget(err, b"line")
        text = _lua_string(rawget(err, b"err")) or ""
        if source is not None and line is not None:
            text += f" script: {sha}, on {_lua_string(source)}:{_lua_string(line)}."
        return ReplyError(text)

    # --- Lua to reply (luaReplyToRedisReply) ----------------------------------------------

    def _to_reply(self, value: Any, run: Run) -> Any:
        """luaReplyToRedisReply, without recursion. Each value is converted where Redis's C code
        would hold it on the Lua stack (`slot`: the slots in use with it on top); where fewer
        than four slots remain under LUAI_MAXCSTACK it becomes Redis's "reached lua stack
        limit" error, so a table holding itself ends 7,995 arrays deep, as in Redis."""
        lua_type = self._host.lua_type
        resp = run.resp
        root: list[Any] = []
        # (value, slot, the list its reply joins) or (_MAP_END, the map, its flat items)
        work: list[tuple[Any, Any, Any]] = [(value, 2, root)]
        budget = REPLY_VALUES_MAX
        repeats: dict[int, int] | None = None  # table -> times met, once the reply is big
        while work:
            v, slot, sink = work.pop()
            if v is _MAP_END:
                slot.items = list(zip(sink[0::2], sink[1::2], strict=True))
                continue
            budget -= 1
            if not budget % REPLY_CHECK_VALUES:
                if budget <= 0:
                    return ReplyError(REPLY_TOO_BIG)
                if self._interrupt():
                    return ReplyError(KILLED)
            if slot + 4 > MAXCSTACK:
                sink.append(ReplyError(STACK_LIMIT))
                continue
            t = type(v)
            if t is bytes or t is int:
                sink.append(v)
            elif t is bool:
                sink.append((1 if v else None) if resp == 2 else v)
            elif t is float:
                sink.append(_truncate(v))
            elif v is None or lua_type(v) != "table":
                sink.append(None)
            else:
                if repeats is not None:
                    key = self._identity(v)
                    seen = repeats[key] = repeats.get(key, 0) + 1
                    if seen > MAXCSTACK:
                        return ReplyError(REPLY_REPEATS)
                elif budget < REPLY_VALUES_MAX - REPLY_REPEATS_AFTER:
                    repeats = {}
                self._table_reply(v, slot, sink, work)
        return root[0]

    def _table_reply(self, table: Any, slot: int, sink: list, work: list) -> None:
        """A table's reply (an error, a status, RESP3's shapes, else an array) into `sink`; the
        values it holds are queued on `work` in their order."""
        rawget, lua_type = self._rawget, self._host.lua_type
        err = rawget(table, b"err")
        if type(err) is bytes:
            sink.append(ReplyError(_text(err).replace("\r", " ").replace("\n", " ")))
            return
        ok = rawget(table, b"ok")
        if type(ok) is bytes:
            sink.append(_text(ok.replace(b"\r", b" ").replace(b"\n", b" ")))
            return
        double = rawget(table, b"double")
        if type(double) in (int, float):
            sink.append(float(double))
            return
        big = rawget(table, b"big_number")
        if type(big) is bytes:
            try:
                sink.append(int(big.replace(b"\r", b" ").replace(b"\n", b" ")))
            except ValueError:  # not a number: the text as it is
                sink.append(big)
            return
        verbatim = rawget(table, b"verbatim_string")
        if lua_type(verbatim) == "table":
            fmt, text = rawget(verbatim, b"format"), rawget(verbatim, b"string")
            if type(fmt) is bytes and type(text) is bytes:
                sink.append(Verbatim(_text(text), _text(fmt)))
                return
        children: list[tuple[Any, int, list]] = []
        reply: Any
        mapping = rawget(table, b"map")
        if lua_type(mapping) == "table":
            reply = RespMap([])
            flat: list[Any] = []
            work.append((_MAP_END, reply, flat))
            for k, v in mapping.items():
                children.append((k, slot + 4, flat))  # (the key is converted from a copy)
                children.append((v, slot + 3, flat))
        elif lua_type(members := rawget(table, b"set")) == "table":
            reply = RespSet([])
            children = [(k, slot + 3, reply.items) for k in members]
        else:
            reply = []
            i = 1
            while (item := rawget(table, i)) is not None:
                children.append((item, slot + 1, reply))
                i += 1
        sink.append(reply)
        work.extend(reversed(children))

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
        if t is HumanDouble:  # (a RESP3 double's text read as a Lua number, as Redis's strtod)
            return self.lua.table_from({b"double": float(value.text)}) if run.resp == 3 \
                else value.text
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

    def _raising_call(self, args: tuple) -> Any:
        """redis.call: the reply, or the command's error raised into the script."""
        reply, failed = self._call_command(args)
        if failed:
            raise ScriptError(reply)
        return reply

    def _call(self, args: tuple) -> Any:
        """redis.pcall: the reply, or the command's error as an {err=...} table."""
        return self._call_command(args)[0]

    def _unwrap(self, error: Any) -> Any:
        """A Python exception raised into the script, as the Lua error Redis raises (any other
        value as it is)."""
        if isinstance(error, ScriptError):
            return error.value
        if isinstance(error, BaseException):
            return self._error_table(f"ERR {error}")
        return error

    def _call_command(self, args: tuple) -> tuple[Any, bool]:
        """One command from the script: (its reply as Lua sees it, whether it failed)."""
        run = self.running
        assert run is not None
        if not args:
            return self._error_table(
                "ERR Please specify at least one argument for this redis lib call"), True
        argv: tuple = args
        for arg in args:
            if type(arg) is not bytes:  # (numbers become their text; anything else fails)
                argv = self._command_args(args)
                if not argv:
                    return self._error_table(
                        "ERR Lua redis lib command arguments must be strings or integers"), True
                break
        try:
            reply = self._command(run, argv)
        except ReplyError as err:
            return self._error_table(err.line), True
        finally:
            self._check(run)
        t = type(reply)
        if (t is bytes or t is int) and not self._guarded:  # (the usual: as it is)
            return reply, False
        if isinstance(reply, ReplyError):
            return self._error_table(reply.line), True
        if (self._guarded and self._memory_used() > self.max_memory // 2
                and not self._room(_size(reply))):
            # Building it could meet a full heap outside Lua's protection.
            self._out_of_memory()
        return self._to_lua(reply, run), False

    @staticmethod
    def _command_args(args: tuple) -> tuple:
        """redis.call's arguments as the command's argv (a number as its text); () when one
        is neither a string nor a number."""
        argv = []
        for arg in args:
            t = type(arg)
            if t is bytes:
                argv.append(arg)
            elif t is int or t is float:
                argv.append(_number_arg(arg))
            else:
                return ()
        return tuple(argv)

    def _check(self, run: Run) -> None:
        """The busy-script check from redis.call's side (every CALL_CHECK_SECONDS): a script
        that spends its time in commands runs few Lua instructions, and the count hook alone
        would look at the clock too seldom. A kill found here stops the script at its next
        line."""
        now = _monotonic()
        if now >= run.next_check:
            run.next_check = now + CALL_CHECK_SECONDS
            if self._interrupt():
                self._arm_kill()

    def _room(self, need: int) -> bool:
        """Whether `need` more bytes fit in the Lua heap with a margin (after a collection if
        they do not at first), for a host whose pushes may fail (lupa: its own allocations,
        arguments and tables made from Python, are not protected, and a full heap there would
        abort the process)."""
        if self._memory_used() + need + MEMORY_MARGIN <= self.max_memory:
            return True
        self._collect()
        return self._memory_used() + need + MEMORY_MARGIN <= self.max_memory

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
        # scriptVerifyOOM: over maxmemory when the script started, its first write that may
        # grow memory is refused (after a write it cannot stop half-way).
        if engine.oom and not run.dirty and not run.allow_oom and Flag.DENYOOM in flags \
                and not session.from_primary:
            raise ReplyError(OOM)
        effects = ctx.effects
        mark = len(effects)
        db = session.db
        if spec.is_write:  # from now on SCRIPT KILL cannot stop it (Redis: even if it fails)
            run.dirty = True
        if engine.cluster is not None and not session.from_primary:
            _cluster_check(run, engine.cluster, spec, argv)
        calls = run.calls
        if calls is None:
            calls = run.calls = ScriptCtx(engine, session, ctx.now)
            calls.effects = effects
        reply = engine.run_script_command(calls, spec, argv)
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

    # LuaErrors (engine.exec.script_libs): how the Python functions raise, as C functions do.

    def error(self, message: str) -> NoReturn:
        """luaL_error: the message after the position of the script line that called."""
        where = self._c_where()[0]
        raise ScriptError(where + message.encode("utf-8", "surrogateescape"))

    def arg_error(self, n: int, message: str) -> NoReturn:
        """luaL_argerror, named as the function was called."""
        where, name, namewhat = self._c_where()
        text = _text(name)
        if namewhat == b"method":
            n -= 1
            if n == 0:
                raise ScriptError(where + f"calling '{text}' on bad self ({message})".encode())
        raise ScriptError(where + f"bad argument #{n} to '{text}' ({message})".encode())

    def _sha1hex(self, *args: Any) -> bytes:
        if len(args) != 1:
            raise self._raise("ERR wrong number of arguments")
        value = args[0]
        if isinstance(value, bytes):
            data = value
        elif isinstance(value, (int, float)) and type(value) is not bool:
            data = number_text(value)
        else:
            data = b""
        return sha1hex(data).encode()

    def _log(self, *args: Any) -> None:
        if len(args) < 2:
            raise self._raise("ERR redis.log() requires two arguments or more.")
        level = lua_tonumber(args[0])
        if level is None:
            raise self._raise("ERR First argument must be a number (log level).")
        level = int(level)
        if not 0 <= level <= 3:
            raise self._raise("ERR Invalid log level.")
        configured = _VERBOSITY.get(str(self.engine.config.get("loglevel", "notice")), 2)
        if level < configured:
            return
        text = b""
        for j, arg in enumerate(args[1:], 1):
            if isinstance(arg, bytes):
                word = arg
            elif isinstance(arg, (int, float)) and type(arg) is not bool:
                word = number_text(arg)
            else:
                continue
            text += (b" " if j != 1 else b"") + word
        log.log(_LOG_LEVELS[level], "%s", _text(text))

    def _setresp(self, *args: Any) -> None:
        if len(args) != 1:
            raise self._raise("ERR redis.setresp() requires one argument.")
        resp = lua_tonumber(args[0])
        if resp is None or int(resp) not in (2, 3):
            raise self._raise("ERR RESP version must be 2 or 3.")
        run = self.running
        if run is not None:
            run.resp = int(resp)

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
        flags = lua_tonumber(args[0]) or 0
        if int(flags) & ~3:
            raise self._raise("ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, "
                              "REPL_ALL or REPL_NONE.")

    def _checkint(self, args: tuple, n: int) -> int:
        """luaL_checkint: a number (or a string that reads as one) as C's int of it."""
        value = lua_tonumber(args[n - 1]) if n <= len(args) else None
        if value is None:
            got = lua_typename(args[n - 1]) if n <= len(args) else "no value"
            self.arg_error(n, f"number expected, got {got}")
        number = _truncate(value) & 0xFFFFFFFF
        return number - (1 << 32) if number & 0x80000000 else number

    def _random(self, *args: Any) -> Any:
        """math.random over redisLrand48, argument checks as Lua's (the number drawn first)."""
        r = (self.rand.next() % LRAND48_MAX) / LRAND48_MAX
        if not args:
            return r
        if len(args) == 1:
            upper = self._checkint(args, 1)
            if upper < 1:
                self.arg_error(1, "interval is empty")
            return math.floor(r * upper) + 1
        if len(args) == 2:
            lower, upper = self._checkint(args, 1), self._checkint(args, 2)
            if lower > upper:
                self.arg_error(2, "interval is empty")
            return math.floor(r * (upper - lower + 1)) + lower
        self.error("wrong number of arguments")

    def _randomseed(self, *args: Any) -> None:
        self.rand.seed(self._checkint(args, 1))

    def _interrupt(self) -> bool:
        """The busy-script check (the count hook's, and redis.call's): past
        busy-reply-threshold, let the server answer other clients (BUSY, SCRIPT KILL,
        SHUTDOWN NOSAVE); True once the script must stop. A shutdown signal stops it as
        SHUTDOWN NOSAVE would (Redis only schedules the shutdown for after the script)."""
        run = self.running
        if run is None:
            return False
        server = self.engine.server
        if server is not None and server.stop_signalled and not run.shutdown:
            log.warning("Shutdown signal received while a script runs: the script stops and "
                        "its writes are discarded, as with SHUTDOWN NOSAVE.")
            self.shutdown_nosave()
        if not run.timed_out:
            threshold = int(self.engine.config["busy-reply-threshold"])
            elapsed = (_monotonic() - run.started) * 1000
            if run.killed or elapsed < threshold or threshold <= 0:  # (0: never interrupted)
                return run.killed
            run.timed_out = True
            log.warning("Slow script detected: still in execution after %d milliseconds. You "
                        "can try killing the script using the %s command. Script name "
                        "is: %s.", elapsed,
                        "FUNCTION KILL" if run.is_function else "SCRIPT KILL", run.sha)
        if server is not None:
            server.serve_while_busy(self)
        if run.killed and not run.shutdown:
            log.info("Lua script killed by user with SCRIPT KILL.")
        return run.killed

    # --- Redis Functions (engine.exec.functions drives these) ------------------------------

    def _register_function(self, *args: Any) -> None:
        """redis.register_function: the library being loaded takes it (engine.exec.functions'
        registrar); outside FUNCTION LOAD there is none."""
        registrar = self.registrar
        if registrar is None:
            raise self._raise("ERR redis.register_function can only be called on FUNCTION LOAD "
                              "command")
        registrar.register(self, args)

    def api_error(self, line: str) -> ScriptError:
        """An error for a Python function of the API to raise into Lua: {err=line}."""
        return self._raise(line)

    def lua_type(self, value: Any) -> str | None:
        """Lua's type name of a value handed over from Lua ('table', 'function', ...)."""
        kind: str | None = self._host.lua_type(value)
        return kind

    def _load_timed_out(self) -> bool:
        registrar = self.registrar
        return registrar is not None and registrar.timed_out()

    def load_library(self, body: bytes, registrar: Any) -> None:
        """luaEngineCreate: compile a library's code (after its shebang line) and run it with
        the library API as its globals, `registrar` taking what it registers. ReplyError with
        Redis's line when it does not compile or its run fails."""
        self._runtime()
        if not self._room(4 * len(body)):
            raise ReplyError("ERR Error compiling function: not enough memory")
        try:
            function, error = self._compile(body, b"@user_function")
        except self._host.LuaMemoryError:
            raise ReplyError("ERR Error compiling function: not enough memory") from None
        if function is None:
            raise ReplyError(f"ERR Error compiling function: {_text(error)}")
        self.registrar = registrar
        try:
            out = self._load_library(function, HOOK_INSTRUCTIONS)
        except self._host.LuaMemoryError:
            raise ReplyError("ERR Error registering functions: not enough memory") from None
        finally:
            self.registrar = None
        if type(out) is tuple and out[0] is not True:
            raise ReplyError(f"ERR Error registering functions: {self._load_error(out[1])}")

    def _load_error(self, error: Any) -> str:
        """luaExtractErrorInformation's message: a table's `err`, a string with ERR before it."""
        if self._host.lua_type(error) == "table":
            return _lua_string(self._rawget(error, b"err")) or ""
        return "ERR " + (_lua_string(error) or "")

    def function_script(self, name: bytes, callback: Any, flags: int) -> Script:
        """A registered function as `run_function` runs it: named as Redis names it in errors
        (`script: <name>`), its callback given KEYS and ARGV as arguments (the Lua host's run
        of a callback)."""
        return Script(_text(name), b"", flags, callback, False)

    def run_function(self, ctx: Ctx, script: Script, argv: ScriptArgv, first: int, nkeys: int,
                     read_only: bool, shared: Scripting) -> Any:
        """FCALL's run (scriptPrepareForRun's flag checks, then as `run`). The run is also
        `shared`'s, the EVAL runtime's, which the server, SCRIPT KILL, SHUTDOWN and the BUSY
        replies consult: one script runs at a time, function or not."""
        if self.running is not None or shared.running is not None:  # pragma: no cover
            raise ReplyError(busy_line(shared))
        if script.flags & FLAG_NO_CLUSTER and ctx.engine.cluster is not None:
            raise ReplyError(NO_CLUSTER)
        if not script.flags & FLAG_NO_WRITES:
            if ctx.engine.read_only is not None and not ctx.session.from_primary:
                raise ReplyError("READONLY Can not run script with write flag on readonly replica")
            if read_only:
                raise ReplyError(RO_SCRIPT)
        _refuse_oom_run(ctx, script.flags)
        run = self.running = shared.running = Run(ctx, script.sha,
                                                  read_only or bool(script.flags & FLAG_NO_WRITES))
        run.is_function = True
        run.allow_oom = bool(script.flags & FLAG_ALLOW_OOM)
        _cluster_run(run, script.flags, argv, first, nkeys)
        try:
            return self._execute(run, script, argv, first, nkeys)
        except ReplyError:
            if run.shutdown:
                return NO_REPLY
            raise
        finally:
            shared.running = None

    def kill_run(self, is_eval: bool) -> str:
        """SCRIPT KILL (`is_eval`) or FUNCTION KILL (scriptKill): each stops only its kind."""
        run = self.running
        if run is None:
            raise ReplyError(NOTBUSY)
        if run.dirty:
            raise ReplyError(UNKILLABLE)
        if is_eval and run.is_function:
            raise ReplyError(BUSY_FUNCTION)
        if not is_eval and not run.is_function:
            raise ReplyError(BUSY)
        run.killed = True
        return "OK"


class ScriptError(StreamkeepError):
    """An error raised into a script by a Python function: Lua receives `value`, as Redis's
    C function would raise it (the {err=...} table of an API error, a library's message)."""

    def __init__(self, value: Any) -> None:
        super().__init__("script error")
        self.value = value


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


def _lua_string(value: Any) -> str | None:
    if isinstance(value, bytes):
        return _text(value)
    if isinstance(value, (int, float)):
        return _text(number_text(value))
    return None


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


def busy_line(scripting: Scripting | None) -> str:
    """The BUSY error while a script runs past busy-reply-threshold: which KILL stops it."""
    run = scripting.running if scripting is not None else None
    return BUSY_FUNCTION if run is not None and run.is_function else BUSY


def scripting_of(engine: EngineState) -> Scripting:
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
    return scripting.run(ctx, script, argv, 3, numkeys, read_only)


__all__ = ["BUSY", "BUSY_FUNCTION", "NOSCRIPT", "Scripting", "busy_line", "eval_script",
           "parse_shebang", "scripting_of", "sha1hex"]
