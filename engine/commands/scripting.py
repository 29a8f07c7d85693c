"""Scripting commands: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, and SCRIPT LOAD, EXISTS, FLUSH,
KILL, HELP.

Owns these commands' declarations, argument checks and replies. The Lua runtime, the script
cache and the conversions are engine.exec.scripting's; a script's commands run as EXEC runs
them, so what a script changed is logged as one record of effects (never the script). SCRIPT
LOAD and SCRIPT FLUSH change no data and log nothing: scripts are not persisted (after a
restart EVALSHA answers NOSCRIPT, as Redis 7 does). Must not touch: the runtime's internals,
command semantics of the commands a script calls, I/O.
"""

from __future__ import annotations

from typing import Any

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
from streamkeep.engine.wire.errors import ReplyError


# The Lua runtime (engine.exec.scripting, a large module) is imported by the first script
# command, not with the command table: every engine start and CLI command would pay for it.
def eval_script(ctx: Ctx, argv: Argv, by_sha: bool, read_only: bool) -> Any:
    from streamkeep.engine.exec import scripting

    return scripting.eval_script(ctx, argv, by_sha=by_sha, read_only=read_only)


def scripting_of(engine: Any) -> Any:
    from streamkeep.engine.exec import scripting

    return scripting.scripting_of(engine)


_EVAL_FLAGS = "noscript skip_monitor may_replicate no_mandatory_keys stale"
_EVAL_RO_FLAGS = "noscript skip_monitor no_mandatory_keys stale readonly"


@command("eval", -3, _EVAL_FLAGS, group="scripting", since="2.6.0",
         acl="scripting", keys="RW ACCESS UPDATE @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         key_notes="We cannot tell how the keys will be used so we assume the worst, RW and UPDATE",
         logs=ANY_EFFECTS,
         summary="Executes a server-side Lua script.",
         syntax="script numkeys [key [key ...]] [arg [arg ...]]")
def eval_(ctx: Ctx, argv: Argv) -> Any:
    return eval_script(ctx, argv, by_sha=False, read_only=False)


@command("evalsha", -3, _EVAL_FLAGS, group="scripting", since="2.6.0",
         acl="scripting", keys="RW ACCESS UPDATE @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         logs=ANY_EFFECTS,
         summary="Executes a server-side Lua script by SHA1 digest.",
         syntax="sha1 numkeys [key [key ...]] [arg [arg ...]]")
def evalsha(ctx: Ctx, argv: Argv) -> Any:
    return eval_script(ctx, argv, by_sha=True, read_only=False)


@command("eval_ro", -3, _EVAL_RO_FLAGS, group="scripting", since="7.0.0",
         acl="scripting", keys="RO ACCESS @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         key_notes="We cannot tell how the keys will be used so we assume the worst, RO and ACCESS",
         logs=ANY_EFFECTS,
         summary="Executes a read-only server-side Lua script.",
         syntax="script numkeys [key [key ...]] [arg [arg ...]]")
def eval_ro(ctx: Ctx, argv: Argv) -> Any:
    return eval_script(ctx, argv, by_sha=False, read_only=True)


@command("evalsha_ro", -3, _EVAL_RO_FLAGS, group="scripting", since="7.0.0",
         acl="scripting", keys="RO ACCESS @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         logs=ANY_EFFECTS,
         summary="Executes a read-only server-side Lua script by SHA1 digest.",
         syntax="sha1 numkeys [key [key ...]] [arg [arg ...]]")
def evalsha_ro(ctx: Ctx, argv: Argv) -> Any:
    return eval_script(ctx, argv, by_sha=True, read_only=True)


SCRIPT = container("script", "A container for Lua scripts management commands.",
                   group="scripting", since="2.6.0")


@subcommand(SCRIPT, "load", 3, "noscript stale", since="2.6.0",
            acl="scripting", keys="",
            summary="Loads a server-side Lua script to the script cache.", syntax="script")
def script_load(ctx: Ctx, argv: Argv) -> bytes:
    return scripting_of(ctx.engine).load(argv[2], from_eval=False).sha.encode()


@subcommand(SCRIPT, "exists", -3, "noscript", since="2.6.0",
            acl="scripting", keys="",
            summary="Determines whether server-side Lua scripts exist in the script cache.",
            syntax="sha1 [sha1 ...]")
def script_exists(ctx: Ctx, argv: Argv) -> list[int]:
    scripts = scripting_of(ctx.engine).scripts
    return [1 if sha.decode("latin-1") in scripts else 0 for sha in argv[2:]]


@subcommand(SCRIPT, "flush", -2, "noscript may_replicate", since="2.6.0",
            acl="scripting", keys="",
            summary="Removes all server-side Lua scripts from the script cache.",
            syntax="[ASYNC | SYNC]")
def script_flush(ctx: Ctx, argv: Argv) -> str:
    if len(argv) > 3 or (len(argv) == 3 and argv[2].lower() not in (b"sync", b"async")):
        raise ReplyError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    scripting_of(ctx.engine).flush()
    return "OK"


@subcommand(SCRIPT, "kill", 2, "noscript allow_busy", since="2.6.0",
            acl="scripting", keys="",
            summary="Terminates a server-side Lua script during execution.")
def script_kill(ctx: Ctx, argv: Argv) -> str:
    # While a script is busy the server runs this from the script's hook (allow_busy); a
    # function is FUNCTION KILL's (engine.commands.functions).
    killed: str = scripting_of(ctx.engine).kill_run(is_eval=True)
    return killed


help_subcommand(SCRIPT, [
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
], since="5.0.0", acl="scripting")
