"""streamkeep's exception hierarchy and the Redis error lines shared by many commands.

Owns the one base, `StreamkeepError`, and its three families:
- `ReplyError`: a Redis error reply (its str() is the exact error line, without the leading '-');
- `ProtocolError`: malformed RESP from a peer, never a reply error, so a replica's
  `except ReplyError` can tell a refusal from a corrupt stream (defined here, below every RESP
  module that raises it: the request parser, the inline splitter, the reply parser; the reply
  encoder writes it as an error line);
- `StorageError`: a file or data-directory failure (AOF damage, snapshot, manifest, compaction,
  lock), turned into a Redis error line in one place, `storage_reply`.
Plus the constructors for error lines that more than one command emits. Must not touch: engine
state.
"""

from __future__ import annotations

from collections.abc import Sequence


class StreamkeepError(Exception):
    """The base of every exception streamkeep raises on purpose."""


class ReplyError(StreamkeepError):
    """A Redis error reply. `str(err)` is the exact error line Redis would send."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def __str__(self) -> str:
        return self.line


class ProtocolError(StreamkeepError):
    """Malformed RESP from a peer (a client's request, or a reply a peer sent us). Not a
    `ReplyError`: a caller catching error replies never mistakes a corrupt stream for a
    refusal. `str(err)` is the exact line Redis replies with before it closes the connection
    (`reply()` makes it the error reply); the parser stays failed (every later `next()` raises
    the same error)."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    def __str__(self) -> str:
        return self.line

    def reply(self) -> ReplyError:
        """The error reply a server sends before closing the connection."""
        return ReplyError(self.line)


class StorageError(StreamkeepError):
    """A file or data-directory failure; `str(err)` names the file (and offset) and the cause."""


def storage_reply(err: StorageError) -> ReplyError:
    """The error line a client gets for a storage failure (SAVE, BGSAVE, BGREWRITEAOF)."""
    return ReplyError(f"ERR {err}")


SYNTAX = "ERR syntax error"
NOT_INTEGER = "ERR value is not an integer or out of range"
INVALID_STREAM_ID = "ERR Invalid stream ID specified as stream command argument"
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
NO_SUCH_KEY = "ERR no such key"


def printable(arg: bytes, limit: int = 1 << 30) -> str:
    """An argument as Redis's `%s` prints it inside an error line: a C string (up to the first
    NUL byte), at most `limit` bytes, line breaks turned into spaces. surrogateescape keeps any
    byte intact so the line goes back out on the wire exactly."""
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]
    text = arg[:limit].decode("utf-8", "surrogateescape")
    return text.replace("\r", " ").replace("\n", " ")


def wrong_arity(fullname: str) -> ReplyError:
    return ReplyError(f"ERR wrong number of arguments for '{fullname}' command")


def unknown_command(argv: Sequence[bytes]) -> ReplyError:
    # Redis prints them with %.*s into a growing sds: each stops at its first NUL byte and the
    # list stops at 128 *bytes* (quotes and spaces included), which may cut a UTF-8 character.
    args = b""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + arg.partition(b"\0")[0][: 128 - len(args)] + b"' "
    name = printable(argv[0], 128)
    line = f"ERR unknown command '{name}', "
    line += "with args beginning with: " + args.decode("utf-8", "surrogateescape")
    return ReplyError(line.replace("\r", " ").replace("\n", " "))


def unknown_subcommand(argv: Sequence[bytes]) -> ReplyError:
    return ReplyError(
        f"ERR unknown subcommand '{printable(argv[1], 128)}'. Try {printable(argv[0]).upper()} HELP."
    )


def subcommand_syntax(argv: Sequence[bytes]) -> ReplyError:
    """addReplySubcommandSyntaxError: bad options or argument count for a known subcommand."""
    return ReplyError(
        "ERR unknown subcommand or wrong number of arguments for "
        f"'{printable(argv[1], 128)}'. Try {printable(argv[0]).upper()} HELP."
    )


def no_such_group(key: bytes, group: bytes) -> ReplyError:
    """The NOGROUP line of XGROUP and XINFO CONSUMERS."""
    return ReplyError(
        f"NOGROUP No such consumer group '{printable(group)}' for key name '{printable(key)}'"
    )


def nogroup(key: bytes, group: bytes, suffix: str = "") -> ReplyError:
    """The NOGROUP line of XREADGROUP/XCLAIM/XAUTOCLAIM/XPENDING/XACK... (suffix varies)."""
    return ReplyError(
        f"NOGROUP No such key '{printable(key)}' or consumer group '{printable(group)}'{suffix}"
    )
