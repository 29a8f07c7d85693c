"""Redis Functions: the engine's libraries, their load, and FCALL's run, as Redis 7/8 does them
(functions.c, function_lua.c).

Owns `Functions` (one per engine: the libraries by name, the functions by name as FCALL finds
them, case-insensitively, and the Lua runtime they run in, separate from EVAL's so that SCRIPT
FLUSH leaves them alone), a library's metadata (`#!lua name=<lib>`), `redis.register_function`'s
two forms and its checks, FUNCTION LOAD's checks in Redis's order, RESTORE's policies, and the
exact error lines. The Lua side (the load-time globals, the call with KEYS and ARGV as
arguments, the busy-script hook) is engine.exec.scripting's; the RDB records of FUNCTION DUMP
are snapshot.rdb_functions'.

A library is server state, not a key: the commands that change it (engine.commands.functions)
log it as effects, replayed through the same handlers. A run never logs itself: what a function
changed is logged as the effects of the commands it called, as a script's are.

Must not touch: command semantics of the commands a function calls, the wire format, I/O.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.script_libs import number_text
from streamkeep.engine.exec.scripting import SHEBANG_FLAGS, Script, Scripting, scripting_of
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.inline import split_inline_args
from streamkeep.snapshot import rdb_functions

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Ctx
    from streamkeep.engine.exec.engine_state import EngineState

ENGINE_NAME: Final = b"LUA"
# A library's code runs at most this long at FUNCTION LOAD (Redis's LOAD_TIMEOUT_MS); a load
# replayed or sent by a primary has no limit.
LOAD_TIMEOUT_MS: Final = 500
BAD_NAME: Final = ("ERR Library names can only contain letters, numbers, or underscores(_) and "
                   "must be at least one character long")
_NAME_CHARS: Final = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               b"0123456789_")
FLAG_NAMES: Final = tuple(SHEBANG_FLAGS.items())  # (name, bit) in Redis's scripts_flags_def order


class Function:
    __slots__ = ("name", "library", "script", "flags", "description")

    def __init__(self, name: bytes, library: Library, script: Script, flags: int,
                 description: bytes | None) -> None:
        self.name = name
        self.library = library
        self.script = script
        self.flags = flags
        self.description = description

    def flag_names(self) -> list[str]:
        return [name.decode() for name, bit in FLAG_NAMES if self.flags & bit]


class Library:
    __slots__ = ("name", "code", "functions")

    def __init__(self, name: bytes, code: bytes) -> None:
        self.name = name
        self.code = code  # the whole FUNCTION LOAD argument, shebang included
        self.functions: dict[bytes, Function] = {}


def valid_name(name: bytes) -> bool:
    """functionsVerifyName: letters, digits and underscores, at least one."""
    return bool(name) and all(c in _NAME_CHARS for c in name)


def library_metadata(code: bytes) -> tuple[bytes, bytes, bytes]:
    """functionExtractLibMetaData: (engine, library name, the code from the shebang's newline
    on), or ReplyError with Redis's line."""
    if not code.startswith(b"#!"):
        raise ReplyError("ERR Missing library metadata")
    end = code.find(b"\n")
    if end < 0 or b"\x00" in code[:end]:  # (Redis's strchr stops at a NUL: no newline then)
        raise ReplyError("ERR Invalid library metadata")
    try:
        parts = split_inline_args(code[:end])
    except ProtocolError:
        parts = []
    if not parts:
        raise ReplyError("ERR Invalid library metadata")
    name: bytes | None = None
    for part in parts[1:]:
        if part[:5].lower() == b"name=":
            if name is not None:
                raise ReplyError("ERR Invalid metadata value, name argument was given multiple "
                                 "times")
            name = part[5:]
            continue
        raise ReplyError(f"ERR Invalid metadata value given: {_text(part)}")
    if name is None:
        raise ReplyError("ERR Library name was not given")
    return parts[0][2:], name, code[end:]


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class _Registrar:
    """What redis.register_function adds to while one library loads (luaRegisterFunction)."""

    def __init__(self, library: Library, runtime: Scripting, timeout_ms: int) -> None:
        self.library = library
        self.runtime = runtime
        self.deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else 0.0

    def timed_out(self) -> bool:
        return self.deadline > 0 and time.monotonic() > self.deadline

    def register(self, runtime: Scripting, args: tuple) -> None:
        if not 1 <= len(args) <= 2:
            raise runtime.api_error("ERR wrong number of arguments to redis.register_function")
        if len(args) == 1:
            name, callback, flags, description = self._named(runtime, args[0])
        else:
            name, callback, flags, description = self._positional(runtime, args)
        if not valid_name(name):
            raise runtime.api_error(BAD_NAME)
        functions = self.library.functions
        if name in functions:
            raise runtime.api_error("ERR Function already exists in the library")
        script = runtime.function_script(name, callback, flags)
        functions[name] = Function(name, self.library, script, flags, description)

    def _positional(self, runtime: Scripting, args: tuple
                    ) -> tuple[bytes, Any, int, bytes | None]:
        """luaRegisterFunctionReadPositionalArgs: (name, callback)."""
        name = _lua_string(args[0])
        if name is None:
            raise runtime.api_error("ERR first argument to redis.register_function must be a "
                                    "string")
        if not _is_function(runtime, args[1]):
            raise runtime.api_error("ERR second argument to redis.register_function must be a "
                                    "function")
        return name, args[1], 0, None

    def _named(self, runtime: Scripting, table: Any) -> tuple[bytes, Any, int, bytes | None]:
        """luaRegisterFunctionReadNamedArgs: the table form, read in Lua's iteration order."""
        if runtime.lua_type(table) != "table":
            raise runtime.api_error("ERR calling redis.register_function with a single argument is "
                                    "only applicable to Lua table (representing named arguments).")
        name = description = callback = None
        flags = 0
        for key, value in table.items():
            k = _lua_string(key)
            if k is None:
                raise runtime.api_error("ERR named argument key given to redis.register_function "
                                        "is not a string")
            word = k.lower()
            if word == b"function_name":
                name = _lua_string(value)
                if name is None:
                    raise runtime.api_error("ERR function_name argument given to "
                                            "redis.register_function must be a string")
            elif word == b"description":
                description = _lua_string(value)
                if description is None:
                    raise runtime.api_error("ERR description argument given to "
                                            "redis.register_function must be a string")
            elif word == b"callback":
                if not _is_function(runtime, value):
                    raise runtime.api_error("ERR callback argument given to "
                                            "redis.register_function must be a function")
                callback = value
            elif word == b"flags":
                if runtime.lua_type(value) != "table":
                    raise runtime.api_error("ERR flags argument to redis.register_function must be "
                                            "a table representing function flags")
                flags = _read_flags(runtime, value)
            else:
                raise runtime.api_error("ERR unknown argument given to redis.register_function")
        if name is None:
            raise runtime.api_error("ERR redis.register_function must get a function name argument")
        if callback is None:
            raise runtime.api_error("ERR redis.register_function must get a callback argument")
        return name, callback, flags, description


def _read_flags(runtime: Scripting, table: Any) -> int:
    """luaRegisterFunctionReadFlags: the array part's flag names, case-insensitively."""
    flags, i = 0, 1
    while (value := table[i]) is not None:
        word = _lua_string(value)
        bit = SHEBANG_FLAGS.get(word.lower()) if word is not None else None
        if bit is None:
            raise runtime.api_error("ERR unknown flag given")
        flags |= bit
        i += 1
    return flags


def _lua_string(value: Any) -> bytes | None:
    """luaGetStringSds: a string, or a number as lua_tostring writes it; else None."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number_text(value)
    return None


def _is_function(runtime: Scripting, value: Any) -> bool:
    return value is not None and runtime.lua_type(value) == "function"


class Functions:
    """One engine's libraries and functions, and the Lua runtime they run in (made on the first
    load)."""

    def __init__(self, engine: EngineState, runtime: Scripting | None = None) -> None:
        self.engine = engine
        self.runtime = runtime if runtime is not None else Scripting(engine)
        self.libraries: dict[bytes, Library] = {}
        self.functions: dict[bytes, Function] = {}  # by lower-cased name (FCALL's lookup)
        # the FCALL running (FUNCTION STATS)
        self.caller: tuple[bytes, ...] | list[bytes] | None = None

    # --- FUNCTION LOAD ---------------------------------------------------------------------

    def create(self, code: bytes, replace: bool, timeout_ms: int = LOAD_TIMEOUT_MS) -> bytes:
        """functionsCreateWithLibraryCtx: load a library; its name, or ReplyError."""
        engine_name, name, body = library_metadata(code)
        if not valid_name(name):
            raise ReplyError(BAD_NAME)
        if engine_name.upper() != ENGINE_NAME:
            raise ReplyError(f"ERR Engine '{_text(engine_name)}' not found")
        old = self.libraries.get(name)
        if old is not None and not replace:
            raise ReplyError(f"ERR Library '{_text(name)}' already exists")
        library = Library(name, code)
        self.runtime.load_library(body, _Registrar(library, self.runtime, timeout_ms))
        if not library.functions:
            raise ReplyError("ERR No functions registered")
        for fname in library.functions:
            known = self.functions.get(fname.lower())
            if known is not None and known.library is not old:
                raise ReplyError(f"ERR Function {_text(fname)} already exists")
        if old is not None:
            self._unlink(old)
        self._link(library)
        return name

    def _link(self, library: Library) -> None:
        self.libraries[library.name] = library
        for fname, function in library.functions.items():
            self.functions[fname.lower()] = function

    def _unlink(self, library: Library) -> None:
        del self.libraries[library.name]
        for fname in library.functions:
            self.functions.pop(fname.lower(), None)

    # --- DELETE, FLUSH, DUMP, RESTORE -----------------------------------------------------

    def delete(self, name: bytes) -> None:
        library = self.libraries.get(name)
        if library is None:
            raise ReplyError("ERR Library not found")
        self._unlink(library)

    def flush(self) -> None:
        self.libraries.clear()
        self.functions.clear()

    def codes(self) -> list[bytes]:
        return [library.code for library in self.libraries.values()]

    def dump(self, version: int) -> bytes:
        """FUNCTION DUMP's payload: every library's record, the RDB version, the CRC-64."""
        return rdb_functions.dump_functions_payload(self.codes(), version)

    def restore(self, payload: bytes, policy: bytes) -> None:
        """FUNCTION RESTORE with its policy (FLUSH, APPEND, REPLACE): all or nothing."""
        try:
            codes = rdb_functions.load_functions_payload(payload)
        except rdb_functions.FunctionPayloadError as err:
            raise ReplyError(f"ERR {err}") from None
        staged = Functions(self.engine, self.runtime)
        for code in codes:  # (rdbFunctionLoad: no timeout, a duplicate library an error)
            staged.create(code, replace=False, timeout_ms=0)
        if policy == b"flush":
            self.libraries, self.functions = staged.libraries, staged.functions
            return
        self.join(staged, replace=policy == b"replace")

    def join(self, staged: Functions, replace: bool) -> None:
        """libraryJoin: the staged libraries added; a library already here is an error
        (APPEND) or replaced (REPLACE); a function that collides is an error either way."""
        replaced: list[Library] = []
        for name in staged.libraries:
            old = self.libraries.get(name)
            if old is None:
                continue
            if not replace:
                self._relink(replaced)
                raise ReplyError(f"ERR Library {_text(name)} already exists")
            self._unlink(old)
            replaced.append(old)
        for key, function in staged.functions.items():
            if key in self.functions:
                self._relink(replaced)
                raise ReplyError(f"ERR Function {_text(function.name)} already exists")
        for library in staged.libraries.values():
            self._link(library)

    def _relink(self, libraries: Iterable[Library]) -> None:
        for library in libraries:
            self._link(library)

    def load_all(self, codes: Iterable[bytes]) -> None:
        """Libraries from a snapshot or an RDB file into an empty registry (no timeout)."""
        for code in codes:
            self.create(code, replace=False, timeout_ms=0)

    # --- FCALL ----------------------------------------------------------------------------

    def call(self, ctx: Ctx, argv: tuple[bytes, ...] | list[bytes], read_only: bool) -> Any:
        """FCALL and FCALL_RO (fcallCommandGeneric)."""
        name = argv[1]
        function = self.functions.get(name)  # (names are kept lowered: the usual spelling)
        if function is None:
            function = self.functions.get(name.lower())
            if function is None:
                raise ReplyError("ERR Function not found")
        try:
            numkeys = parse_int(argv[2])
        except ReplyError:
            raise ReplyError("ERR Bad number of keys provided") from None
        if numkeys > len(argv) - 3:
            raise ReplyError("ERR Number of keys can't be greater than number of args")
        if numkeys < 0:
            raise ReplyError("ERR Number of keys can't be negative")
        shared = scripting_of(ctx.engine)
        self.caller = argv  # (FUNCTION STATS shows it while the function runs)
        try:
            return self.runtime.run_function(ctx, function.script, argv, 3, numkeys, read_only,
                                             shared)
        finally:
            self.caller = None

    def memory(self) -> int:
        """Bytes the functions' Lua heap holds (INFO's used_memory_vm_functions)."""
        return self.runtime.memory()


def functions_of(engine: EngineState) -> Functions:
    """The engine's Functions, made on first use (kept on its EVAL Scripting)."""
    scripting = scripting_of(engine)
    functions = scripting.functions
    if functions is None:
        functions = scripting.functions = Functions(engine)
    return functions


def restore_functions(engine: EngineState, payload: bytes | None) -> None:
    """A snapshot's `functions` record (FUNCTION DUMP's payload) into the engine."""
    if payload:
        functions_of(engine).load_all(rdb_functions.load_functions_payload(payload))


def functions_payload(engine: EngineState, version: int = rdb_functions.PAYLOAD_VERSION
                      ) -> bytes | None:
    """The engine's libraries as FUNCTION DUMP's payload for a snapshot; None when there are
    none (nothing is recorded)."""
    scripting = engine.scripting
    functions = scripting.functions if scripting is not None else None
    if functions is None or not functions.libraries:
        return None
    return functions.dump(version)


def adopt_functions(engine: EngineState, source: EngineState) -> None:
    """A state loaded into another engine installed into `engine` (a replica's full sync, the
    reload after a rollback): the libraries become `source`'s, whatever `engine` had."""
    loaded = source.scripting.functions if source.scripting is not None else None
    if loaded is not None:
        loaded.engine = loaded.runtime.engine = engine
    scripting = engine.scripting
    if loaded is not None or (scripting is not None and scripting.functions is not None):
        scripting_of(engine).functions = loaded


__all__ = ["Function", "Functions", "Library", "adopt_functions", "functions_of",
           "functions_payload", "library_metadata", "restore_functions"]
