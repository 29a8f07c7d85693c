"""Redis Functions' commands: FCALL, FCALL_RO, and FUNCTION LOAD, DELETE, FLUSH, LIST, DUMP,
RESTORE, STATS, KILL, HELP.

Owns these commands' declarations, argument checks in Redis's order and replies. The libraries,
their load and a function's run are engine.exec.functions'. A library is server state: LOAD,
DELETE, FLUSH and RESTORE log what they changed as effects (engine.model.effects), which replay
applies through these same handlers (a replayed or replicated load has no time limit, as a
primary's has none on a Redis replica); FCALL is never logged itself, the commands its
function called are, as a script's. Must not touch: the Lua runtime's internals, the commands a
function calls, I/O.
"""

from __future__ import annotations

import time
from typing import Any

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.key_specs import numkeys
from streamkeep.engine.exec.table import (
    ANY_EFFECTS,
    Argv,
    command,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.model.effects import (
    function_delete_effect,
    function_flush_effect,
    function_load_effect,
    function_restore_effect,
)
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import RespMap, RespSet

# The Lua runtime is imported by the first function command, not with the command table (as
# engine.commands.scripting does for EVAL); the module is kept once imported (FCALL's path).
_functions_module: Any = None


def functions_of(engine: Any) -> Any:
    global _functions_module
    module = _functions_module
    if module is None:
        from streamkeep.engine.exec import functions

        module = _functions_module = functions
    return module.functions_of(engine)


def _scripting() -> Any:
    from streamkeep.engine.exec import scripting

    return scripting


def _syntax_error(argv: Argv) -> ReplyError:
    """addReplySubcommandSyntaxError."""
    name = argv[1].decode("utf-8", "surrogateescape")
    return ReplyError(f"ERR unknown subcommand or wrong number of arguments for '{name}'. Try "
                      "FUNCTION HELP.")


_FCALL_FLAGS = "noscript skip_monitor may_replicate no_mandatory_keys stale"
_FCALL_RO_FLAGS = "noscript skip_monitor no_mandatory_keys stale readonly"


@command("fcall", -3, _FCALL_FLAGS, group="scripting", since="7.0.0",
         acl="scripting", keys="RW ACCESS UPDATE @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         key_notes="We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
         logs=ANY_EFFECTS,
         summary="Invokes a function.", syntax="function numkeys [key [key ...]] [arg [arg ...]]")
def fcall(ctx: Ctx, argv: Argv) -> Any:
    return _call(ctx, argv, read_only=False)


@command("fcall_ro", -3, _FCALL_RO_FLAGS, group="scripting", since="7.0.0",
         acl="scripting", keys="RO ACCESS @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         key_notes="We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
         logs=ANY_EFFECTS,
         summary="Invokes a read-only function.",
         syntax="function numkeys [key [key ...]] [arg [arg ...]]")
def fcall_ro(ctx: Ctx, argv: Argv) -> Any:
    return _call(ctx, argv, read_only=True)


def _call(ctx: Ctx, argv: Argv, read_only: bool) -> Any:
    scripting = ctx.engine.scripting  # (its functions, once there are any: no import)
    functions = scripting.functions if scripting is not None else None
    if functions is None:
        functions = functions_of(ctx.engine)
    return functions.call(ctx, argv, read_only)


FUNCTION = container("function", "A container for function commands.", group="scripting",
                     since="7.0.0")


@subcommand(FUNCTION, "load", -3, "write denyoom noscript", since="7.0.0",
            acl="scripting", keys="", logs=("FUNCTION LOAD",),
            effect="FUNCTION LOAD REPLACE function-code",
            summary="Creates a library.", syntax="[REPLACE] function-code")
def function_load(ctx: Ctx, argv: Argv) -> bytes:
    replace = False
    for arg in argv[2:-1]:
        if arg.lower() != b"replace":
            raise ReplyError(f"ERR Unknown option given: {arg.decode('utf-8', 'surrogateescape')}")
        replace = True
    code = argv[-1]
    # A load replayed, or sent by a primary, runs to its end (Redis: no timeout when it must
    # obey the client).
    unlimited = ctx.replaying or ctx.session.from_primary
    from streamkeep.engine.exec.functions import LOAD_TIMEOUT_MS

    name: bytes = functions_of(ctx.engine).create(code, replace,
                                                  0 if unlimited else LOAD_TIMEOUT_MS)
    ctx.emit(function_load_effect(code))
    return name


@subcommand(FUNCTION, "delete", 3, "write noscript", since="7.0.0",
            acl="scripting", keys="", logs=("FUNCTION DELETE",),
            effect="FUNCTION DELETE library-name",
            summary="Deletes a library and its functions.", syntax="library-name")
def function_delete(ctx: Ctx, argv: Argv) -> str:
    functions_of(ctx.engine).delete(argv[2])
    ctx.emit(function_delete_effect(argv[2]))
    return "OK"


@subcommand(FUNCTION, "flush", -2, "write noscript", since="7.0.0",
            acl="scripting", keys="", logs=("FUNCTION FLUSH",),
            effect="FUNCTION FLUSH",
            summary="Deletes all libraries and functions.", syntax="[flush-type: ASYNC | SYNC]")
def function_flush(ctx: Ctx, argv: Argv) -> str:
    if len(argv) > 3:
        raise _syntax_error(argv)
    if len(argv) == 3 and argv[2].lower() not in (b"sync", b"async"):
        raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    functions_of(ctx.engine).flush()
    ctx.emit(function_flush_effect())
    return "OK"


@subcommand(FUNCTION, "dump", 2, "noscript", since="7.0.0",
            acl="scripting", keys="",
            summary="Dumps all libraries into a serialized binary payload.")
def function_dump(ctx: Ctx, argv: Argv) -> bytes:
    dumped: bytes = functions_of(ctx.engine).dump(int(ctx.engine.config["dump-rdb-version"]))
    return dumped


@subcommand(FUNCTION, "restore", -3, "write denyoom noscript", since="7.0.0",
            acl="scripting", keys="", logs=("FUNCTION RESTORE",),
            effect="FUNCTION RESTORE serialized-value <APPEND | REPLACE | FLUSH>",
            summary="Restores all libraries from a payload.",
            syntax="serialized-value [FLUSH | APPEND | REPLACE]")
def function_restore(ctx: Ctx, argv: Argv) -> str:
    if len(argv) > 4:
        raise _syntax_error(argv)
    policy = argv[3].lower() if len(argv) == 4 else b"append"
    if policy not in (b"append", b"replace", b"flush"):
        raise ReplyError("ERR Wrong restore policy given, value should be either FLUSH, APPEND or "
                         "REPLACE.")
    functions_of(ctx.engine).restore(argv[2], policy)
    ctx.emit(function_restore_effect(argv[2], policy))
    return "OK"


@subcommand(FUNCTION, "list", -2, "noscript", since="7.0.0",
            acl="scripting", keys="",
            summary="Returns information about all libraries.",
            syntax="[LIBRARYNAME library-name-pattern] [WITHCODE]")
def function_list(ctx: Ctx, argv: Argv) -> list[RespMap]:
    with_code, pattern = False, None
    i = 2
    while i < len(argv):
        arg = argv[i].lower()
        if not with_code and arg == b"withcode":
            with_code = True
        elif pattern is None and arg == b"libraryname":
            if i >= len(argv) - 1:
                raise ReplyError("ERR library name argument was not given")
            i += 1
            pattern = argv[i]
        else:
            raise ReplyError(f"ERR Unknown argument {argv[i].decode('utf-8', 'surrogateescape')}")
        i += 1
    out = []
    for library in functions_of(ctx.engine).libraries.values():
        if pattern is not None and not stringmatchlen(pattern, library.name, nocase=True):
            continue
        items: list[tuple[Any, Any]] = [
            (b"library_name", library.name), (b"engine", b"LUA"),
            (b"functions", [RespMap([(b"name", f.name), (b"description", f.description),
                                     (b"flags", RespSet(f.flag_names()))])
                            for f in library.functions.values()])]
        if with_code:
            items.append((b"library_code", library.code))
        out.append(RespMap(items))
    return out


@subcommand(FUNCTION, "stats", 2, "noscript allow_busy", since="7.0.0",
            acl="scripting", keys="",
            summary="Returns information about a function during execution.")
def function_stats(ctx: Ctx, argv: Argv) -> RespMap:
    scripting = _scripting()
    shared = ctx.engine.scripting
    run = shared.running if shared is not None else None
    if run is not None and not run.is_function:
        raise ReplyError(scripting.BUSY)
    functions = functions_of(ctx.engine)
    running = None
    if run is not None:
        running = RespMap([(b"name", run.sha.encode("utf-8", "surrogateescape")),
                           (b"command", list(functions.caller or ())),
                           (b"duration_ms", int((time.monotonic() - run.started) * 1000))])
    counts = RespMap([(b"libraries_count", len(functions.libraries)),
                      (b"functions_count", len(functions.functions))])
    return RespMap([(b"running_script", running), (b"engines", RespMap([(b"LUA", counts)]))])


@subcommand(FUNCTION, "kill", 2, "noscript allow_busy", since="7.0.0",
            acl="scripting", keys="",
            summary="Terminates a function during execution.")
def function_kill(ctx: Ctx, argv: Argv) -> str:
    # While a function is busy the server runs this from its hook (allow_busy).
    killed: str = _scripting().scripting_of(ctx.engine).kill_run(is_eval=False)
    return killed


help_subcommand(FUNCTION, [
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using "
    "FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a "
    "restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
    "replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance "
    "of failure",
    "      in case of functions name collision with another library).",
], since="7.0.0", acl="scripting")
