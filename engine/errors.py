"""The single error type of streamkeep and the Redis error lines shared by many commands.

Owns: `ReplyError` (its str() is the exact Redis error line, without the leading '-') and the
constructors for error lines that more than one command emits. Must not touch: engine state.
"""

from __future__ import annotations

from collections.abc import Sequence


class ReplyError(Exception):
    """A Redis error reply. `str(err)` is the exact error line Redis would send."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def __str__(self) -> str:
        return self.line


SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
INVALID_STREAM_ID = "ERR Invalid stream ID specified as stream command argument"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NO_SUCH_KEY = "ERR no such key"


def printable(arg: bytes, limit: int = 128) -> str:
    """Render an argument inside an error line as Redis does: truncated, no line breaks."""
    # surrogateescape: arbitrary bytes survive into the line and back out on the wire.
    text = arg[:limit].decode("utf-8", "surrogateescape")
    return text.replace("\r", " ").replace("\n", " ")


def wrong_arity(fullname: str) -> ReplyError:
    return ReplyError(f"ERR wrong number of arguments for '{fullname}' command")


def unknown_command(argv: Sequence[bytes]) -> ReplyError:
    args = ""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += "'" + arg[: 128 - len(args)].decode("utf-8", "surrogateescape") + "' "
    line = f"ERR unknown command '{argv[0][:128].decode('utf-8', 'surrogateescape')}', "
    line += f"with args beginning with: {args}"
    return ReplyError(line.replace("\r", " ").replace("\n", " "))


def unknown_subcommand(argv: Sequence[bytes]) -> ReplyError:
    return ReplyError(
        f"ERR unknown subcommand '{printable(argv[1])}'. "
        f"Try {argv[0].decode('utf-8', 'replace').upper()} HELP."
    )


def nogroup(key: bytes, group: bytes, suffix: str = "") -> ReplyError:
    """The NOGROUP line of XREADGROUP/XCLAIM/XAUTOCLAIM/XPENDING/XACK... (suffix varies)."""
    return ReplyError(
        f"NOGROUP No such key '{printable(key, 1 << 30)}' or consumer group "
        f"'{printable(group, 1 << 30)}'{suffix}"
    )
