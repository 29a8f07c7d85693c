"""The client side of RESP: encoding requests and parsing a server's replies.

Owns encoding a client request (`encode_command`), the client's incremental reply parser for
RESP2 and RESP3 (`ReplyParser`, `NEED_MORE`: the replica link, the benches and tests) and the
one-shot RESP2 reply decoder (`decode_reply`, `ErrorReply`, `MAX_REPLY_DEPTH`: the crash
bench's client). Malformed replies raise `ProtocolError` (engine.wire.errors', re-exported
here); the buffer is compacted by the request parser's rule (`drop_parsed`).

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks). Callers move the
bytes; this module only turns them into values and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.reply import Push, RespMap, RespSet, Verbatim
from streamkeep.engine.wire.request_parser import drop_parsed

__all__ = [
    "MAX_REPLY_DEPTH",
    "NEED_MORE",
    "ErrorReply",
    "ProtocolError",
    "ReplyParser",
    "decode_reply",
    "encode_command",
]

# The request encoder's own header tables (the reply encoder has the same, for replies).
_CRLF: Final = b"\r\n"
_SMALL: Final = 1024
_BULK_HDR: Final = tuple(b"$%d\r\n" % n for n in range(_SMALL))
_ARRAY_HDR: Final = tuple(b"*%d\r\n" % n for n in range(_SMALL))


class _NeedMore:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_MORE"


NEED_MORE: Final = _NeedMore()
"""`ReplyParser.next()`'s "no complete reply buffered yet" (None is a valid reply)."""


# --------------------------------------------------------------------------------------------
# Encoding requests
# --------------------------------------------------------------------------------------------


def encode_command(argv: Sequence[bytes | str | int]) -> bytes:
    """A client request: a RESP array of bulk strings (str as UTF-8, int in decimal)."""
    n = len(argv)
    out = bytearray(_ARRAY_HDR[n] if n < _SMALL else b"*%d\r\n" % n)
    for arg in argv:
        b = arg if type(arg) is bytes else _arg_bytes(arg)
        n = len(b)
        out += _BULK_HDR[n] if n < _SMALL else b"$%d\r\n" % n
        out += b
        out += _CRLF
    return bytes(out)


def _arg_bytes(arg: Any) -> bytes:
    if isinstance(arg, str):
        return arg.encode("utf-8", "surrogateescape")
    if isinstance(arg, bool):
        raise TypeError("bool is not a valid command argument")
    if isinstance(arg, int):
        return b"%d" % arg
    if isinstance(arg, bytes | bytearray | memoryview):
        return bytes(arg)
    raise TypeError(f"unsupported command argument type {type(arg).__name__}: {arg!r}")


# --------------------------------------------------------------------------------------------
# Parsing replies (client side)
# --------------------------------------------------------------------------------------------

_AGGREGATES: Final = frozenset(b"*%~>")
_BLOBS: Final = frozenset(b"$!=")


class ReplyParser:
    """Incremental parser of server replies, RESP2 and RESP3.

    `feed(data)` buffers bytes; `next()` returns the next complete reply or `NEED_MORE`.
    `+` str, `-`/`!` ReplyError (returned, not raised), `:`/`(` int, `$` bytes, `*` list,
    `$-1`/`*-1`/`_` None, `,` float, `#` bool, `%` RespMap, `~` RespSet, `=` Verbatim, `>` Push.
    Partially received aggregates are kept between calls, so a large reply arriving in many
    pieces is parsed in linear time. Malformed input raises ProtocolError.
    """

    __slots__ = ("_buf", "_pos", "_stack")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        # Open aggregates, innermost last: [type byte, items expected, items so far].
        self._stack: list[list[Any]] = []

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        buf = self._buf
        pos = self._pos
        if pos and drop_parsed(buf, pos):
            self._pos = 0
        buf += data

    def pending_bytes(self) -> int:
        return len(self._buf) - self._pos

    def next(self) -> Any:
        """The next complete reply, or NEED_MORE."""
        buf = self._buf
        stack = self._stack
        while True:
            value = self._element(buf)
            if value is NEED_MORE:
                return NEED_MORE
            if type(value) is _Open:
                stack.append([value.kind, value.count, []])
                continue
            while stack:
                frame = stack[-1]
                items = frame[2]
                items.append(value)
                if len(items) < frame[1]:
                    break
                stack.pop()
                value = _close(frame[0], items)
            else:
                return value

    def _element(self, buf: bytearray) -> Any:
        """One element at the parse position: a value, an `_Open` aggregate header, NEED_MORE."""
        pos = self._pos
        idx = buf.find(b"\r\n", pos)
        if idx < 0:
            return NEED_MORE
        kind = buf[pos]
        line = bytes(buf[pos + 1 : idx])
        if kind in _BLOBS:
            n = _reply_int(line)
            if n < 0:
                if n == -1 and kind == 0x24:
                    self._pos = idx + 2
                    return None
                raise ProtocolError(f"ERR Protocol error: invalid bulk length {line!r}")
            start = idx + 2
            if len(buf) < start + n + 2:
                return NEED_MORE
            if buf[start + n : start + n + 2] != b"\r\n":
                raise ProtocolError("ERR Protocol error: bulk string not terminated by CRLF")
            self._pos = start + n + 2
            return _blob(kind, bytes(buf[start : start + n]))
        self._pos = idx + 2
        if kind in _AGGREGATES:
            n = _reply_int(line)
            if n < 0:
                if n == -1:
                    return None
                raise ProtocolError(f"ERR Protocol error: invalid aggregate length {line!r}")
            if n == 0:
                return _close(kind, [])
            return _Open(kind, 2 * n if kind == 0x25 else n)
        return _simple(kind, line)


class _Open:
    """An aggregate header: `count` elements follow."""

    __slots__ = ("kind", "count")

    def __init__(self, kind: int, count: int) -> None:
        self.kind = kind
        self.count = count


def _reply_int(line: bytes) -> int:
    try:
        return int(line)
    except ValueError:
        raise ProtocolError(f"ERR Protocol error: invalid integer {line!r}") from None


def _simple(kind: int, line: bytes) -> Any:
    """A one-line element."""
    if kind == 0x2B:  # '+'
        return line.decode("utf-8", "surrogateescape")
    if kind == 0x3A or kind == 0x28:  # ':' '('
        return _reply_int(line)
    if kind == 0x2D:  # '-'
        return ReplyError(line.decode("utf-8", "surrogateescape"))
    if kind == 0x5F and not line:  # '_'
        return None
    if kind == 0x2C:  # ','
        try:
            return float(line)
        except ValueError:
            raise ProtocolError(f"ERR Protocol error: invalid double {line!r}") from None
    if kind == 0x23 and line in (b"t", b"f"):  # '#'
        return line == b"t"
    raise ProtocolError(f"ERR Protocol error: unexpected reply {bytes([kind]) + line!r}")


def _blob(kind: int, data: bytes) -> Any:
    if kind == 0x24:  # '$'
        return data
    if kind == 0x21:  # '!'
        return ReplyError(data.decode("utf-8", "surrogateescape"))
    if len(data) < 4 or data[3] != 0x3A:  # '=' is <fmt>:<text>
        raise ProtocolError(f"ERR Protocol error: invalid verbatim string {data[:16]!r}")
    return Verbatim(data[4:].decode("utf-8", "surrogateescape"), data[:3].decode("latin-1"))


def _close(kind: int, items: list) -> Any:
    if kind == 0x2A:  # '*'
        return items
    if kind == 0x25:  # '%'
        return RespMap(list(zip(items[0::2], items[1::2], strict=True)))
    if kind == 0x7E:  # '~'
        return RespSet(items)
    return Push(items)


# --------------------------------------------------------------------------------------------
# Decoding one RESP2 reply (the crash bench's client)
# --------------------------------------------------------------------------------------------

MAX_REPLY_DEPTH: Final = 64
"""Arrays nested deeper than this are refused: a hostile or corrupt peer cannot make
`decode_reply` build an unbounded stack of open arrays."""


class ErrorReply(str):
    """An error reply as a value (the line without its '-'): `decode_reply` returns it rather
    than raising, so a caller tells "the server refused" from "the bytes were garbage"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ErrorReply({str.__repr__(self)})"


def decode_reply(buf: bytes | bytearray, pos: int = 0) -> tuple[Any, int] | None:
    """The RESP2 reply starting at `buf[pos]` and the position after it, or None if `buf` does
    not hold all of it yet. `+` str, `-` ErrorReply, `:` int, `$` bytes, `*` list, `$-1`/`*-1`
    None. Linear in the bytes it reads (no re-scan, no recursion); ProtocolError for malformed
    input, a RESP3-only type or arrays nested past MAX_REPLY_DEPTH."""
    # Open arrays, innermost last: [items expected, items so far].
    stack: list[tuple[int, list[Any]]] = []
    end = len(buf)
    while True:
        if pos >= end:
            return None
        idx = buf.find(b"\r\n", pos)
        if idx < 0:
            return None
        kind = buf[pos]
        line = bytes(buf[pos + 1 : idx])
        pos = idx + 2
        value: Any
        if kind == 0x24:  # '$'
            n = _resp2_len(line, "bulk")
            if n < 0:
                value = None
            else:
                if end < pos + n + 2:
                    return None
                if buf[pos + n : pos + n + 2] != b"\r\n":
                    raise ProtocolError("ERR Protocol error: bulk string not terminated by CRLF")
                value = bytes(buf[pos : pos + n])
                pos += n + 2
        elif kind == 0x2A:  # '*'
            n = _resp2_len(line, "aggregate")
            if n > 0:
                if len(stack) >= MAX_REPLY_DEPTH:
                    raise ProtocolError("ERR Protocol error: reply nested too deeply")
                stack.append((n, []))
                continue
            value = None if n < 0 else []
        else:
            value = _resp2_simple(kind, line)
        # Close every array this value completes; stop at the first one still open.
        while stack:
            expected, items = stack[-1]
            items.append(value)
            if len(items) < expected:
                break
            stack.pop()
            value = items
        else:
            return value, pos


def _resp2_len(line: bytes, what: str) -> int:
    """A bulk or array header's length: -1 (null) or more."""
    n = _reply_int(line)
    if n < -1:
        raise ProtocolError(f"ERR Protocol error: invalid {what} length {line!r}")
    return n


def _resp2_simple(kind: int, line: bytes) -> Any:
    if kind == 0x2B:  # '+'
        return line.decode("utf-8", "surrogateescape")
    if kind == 0x2D:  # '-'
        return ErrorReply(line.decode("utf-8", "surrogateescape"))
    if kind == 0x3A:  # ':'
        return _reply_int(line)
    raise ProtocolError(f"ERR Protocol error: unexpected RESP2 reply {bytes([kind]) + line!r}")
