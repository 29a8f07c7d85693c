"""SLOWLOG: GET, LEN, RESET and HELP over the engine's slow log (engine.exec.slowlog), with
Redis's replies and errors (src/slowlog.c). Which commands enter the log, and when, is the
engine's call path's (engine.runtime.core); the thresholds are the settings
slowlog-log-slower-than and slowlog-max-len. Must not touch: stream state.
"""

from __future__ import annotations

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.slowlog import DEFAULT_GET_COUNT
from streamkeep.engine.exec.table import Argv, container, help_subcommand, subcommand
from streamkeep.engine.wire.args import LLONG_MAX, parse_int_range
from streamkeep.engine.wire.errors import subcommand_syntax

SLOWLOG = container("slowlog", "A container for slow log commands.", group="server",
                    since="2.2.12")
FLAGS = "admin loading stale"  # (not noscript: a script may read the slow log)
COUNT_RANGE = "count should be greater than or equal to -1"


@subcommand(SLOWLOG, "get", -2, FLAGS, since="2.2.12",
            keys="",
            summary="Returns the slow log's entries.", syntax="[count]")
def slowlog_get(ctx: Ctx, argv: Argv) -> list:
    """The newest `count` entries (default 10, -1: all), newest first: [id, Unix time,
    microseconds, arguments, client address, client name]."""
    if len(argv) > 3:
        raise subcommand_syntax(argv)
    count = DEFAULT_GET_COUNT
    if len(argv) == 3:
        count = parse_int_range(argv[2], -1, LLONG_MAX, COUNT_RANGE)
    return ctx.engine.slowlog.get(count)


@subcommand(SLOWLOG, "len", 2, FLAGS, since="2.2.12",
            keys="",
            summary="Returns the number of entries in the slow log.")
def slowlog_len(ctx: Ctx, argv: Argv) -> int:
    return len(ctx.engine.slowlog)


@subcommand(SLOWLOG, "reset", 2, FLAGS, since="2.2.12",
            keys="",
            summary="Clears all entries from the slow log.")
def slowlog_reset(ctx: Ctx, argv: Argv) -> str:
    ctx.engine.slowlog.reset()
    return "OK"


help_subcommand(SLOWLOG, [
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
], since="6.2.0")
