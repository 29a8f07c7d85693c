"""CONFIG: GET, SET, RESETSTAT, REWRITE and HELP over the settings registry.

Owns these subcommands' argument handling and replies, shaped as Redis's (src/config.c). Must not
touch: the registry's parsing rules and hooks (engine.exec.settings), stream state.
"""

from __future__ import annotations

import os

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.settings import (
    PARAMS,
    ConfigError,
    config_set,
    format_setting,
    lookup_param,
)
from streamkeep.engine.exec.settings import rewrite_config_file as _rewrite_config_file
from streamkeep.engine.exec.table import (
    ADMIN,
    Argv,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.errors import SYNTAX, ReplyError
from streamkeep.engine.wire.reply import RespMap

# --- CONFIG ------------------------------------------------------------------------------------

CONFIG = container("config", "A container for server configuration commands.", group="server",
                   since="2.0.0")


@subcommand(CONFIG, "get", -3, ADMIN, since="2.0.0",
            keys="",
            summary="Returns the effective values of configuration parameters.",
            syntax="parameter...")
def config_get(ctx: Ctx, argv: Argv) -> RespMap:
    """Each pattern a name (shown as typed) or a glob (case-insensitive); every setting once."""
    shown: dict[str, str] = {}  # setting -> the name the reply shows it under
    for arg in argv[2:]:
        if not any(c in arg for c in b"[*?"):
            param = lookup_param(arg)
            if param is not None and param.name not in shown:
                shown[param.name] = arg.decode("utf-8", "surrogateescape")
            continue
        for name in PARAMS:
            if name not in shown and stringmatchlen(arg, name.encode(), nocase=True):
                shown[name] = name
    engine = ctx.engine
    return RespMap([(label.encode("utf-8", "surrogateescape"),
                     format_setting(engine, name).encode("utf-8", "surrogateescape"))
                    for name, label in shown.items()])


@subcommand(CONFIG, "set", -4, ADMIN, since="2.0.0",
            keys="",
            summary="Sets configuration parameters in-flight.", syntax="<parameter value>...")
def config_set_cmd(ctx: Ctx, argv: Argv) -> str:
    if len(argv) % 2:
        raise ReplyError(SYNTAX)
    pairs = [(argv[i], argv[i + 1]) for i in range(2, len(argv), 2)]
    try:
        config_set(ctx.engine, pairs)
    except ConfigError as err:
        raise ReplyError(err.reply_line().replace("\r", " ").replace("\n", " ")) from None
    return "OK"


@subcommand(CONFIG, "resetstat", 2, ADMIN, since="2.0.0",
            keys="",
            summary="Resets the server's statistics.")
def config_resetstat(ctx: Ctx, argv: Argv) -> str:
    """Redis's resetServerStats, resetCommandTableStats and resetErrorTableStats: the server's
    counters, INFO commandstats and errorstats, total_error_replies. This command itself is
    then counted, as in Redis (its call is recorded after it ran)."""
    server = ctx.engine.server
    if server is not None:
        server.reset_stats()
    ctx.engine.stats.reset()
    return "OK"


@subcommand(CONFIG, "rewrite", 2, ADMIN, since="2.8.0",
            keys="",
            summary="Persists the effective configuration to file.")
def config_rewrite(ctx: Ctx, argv: Argv) -> str:
    path = ctx.engine.config_file
    if not path:
        raise ReplyError("ERR The server is running without a config file")
    try:
        _rewrite_config_file(ctx.engine, path)
    except OSError as err:
        raise ReplyError(f"ERR Rewriting config file: {os.strerror(err.errno or 5)}") from None
    return "OK"


help_subcommand(CONFIG, [
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
])
