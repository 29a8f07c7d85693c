"""Inline commands: splitting a request line into its arguments as Redis's sdssplitargs does.

Owns `split_inline_args` and its quoting rules (blanks separate arguments; "double quotes"
take \\xHH and \\n \\r \\t \\b \\a escapes; 'single quotes' take \\'; a closing quote must be
followed by a blank or the end) and their one error line, `ERR_QUOTES`. Both request parser
twins split a quoted inline command here (the compiled one splits plain lines itself), and
CONFIG's value parser reads sdssplitargs lists through it.

Must not touch: engine state or any I/O; anything but the one line it is given.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.wire.errors import ProtocolError

__all__ = ["ERR_QUOTES", "split_inline_args"]

# Redis's error line for an inline request whose quotes do not close (addReplyError adds "ERR ").
ERR_QUOTES: Final = "ERR Protocol error: unbalanced quotes in request"

_BLANKS: Final = frozenset(b" \t\n\r\x0b\x0c")  # C isspace()
_TOKEN_ENDS: Final = frozenset(b" \t\n\r")
_ESCAPES: Final = {ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("b"): 0x08, ord("a"): 0x07}
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")


def split_inline_args(line: bytes) -> list[bytes]:
    """An inline request's arguments, split like Redis's sdssplitargs: blanks separate, "double
    quotes" take \\xHH and \\n \\r \\t \\b \\a escapes, 'single quotes' take \\', and a closing
    quote must be followed by a blank or the end. Raises ProtocolError on unbalanced quotes."""
    if b'"' not in line and b"'" not in line and b"\x0b" not in line and b"\x0c" not in line:
        return line.split()  # same result when no quotes and no \v/\f are involved
    return _split_quoted(line)


def _split_quoted(line: bytes) -> list[bytes]:
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _BLANKS:
            i += 1
        if i >= n:
            return args
        token = bytearray()
        quote = 0  # the open quote character, 0 outside quotes
        while True:
            c = line[i] if i < n else 0
            if quote:
                # "double quotes" take \xHH and the C escapes, 'single quotes' only \'.
                if quote == 0x22 and c == 0x5C and i + 3 < n and line[i + 1] == 0x78 \
                        and _is_hex(line, i + 2):
                    token.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif quote == 0x22 and c == 0x5C and i + 1 < n:
                    i += 1
                    token.append(_ESCAPES.get(line[i], line[i]))
                elif quote == 0x27 and c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    token.append(0x27)
                elif c == quote:
                    _check_after_quote(line, i + 1)
                    break
                elif i >= n:
                    raise ProtocolError(ERR_QUOTES)
                else:
                    token.append(c)
            elif i >= n or c in _TOKEN_ENDS:
                break
            elif c == 0x22 or c == 0x27:
                quote = c
            else:
                token.append(c)
            i += 1
        args.append(bytes(token))
        i += 1  # past the delimiter or the closing quote


def _is_hex(line: bytes, i: int) -> bool:
    return line[i] in _HEX and line[i + 1] in _HEX


def _check_after_quote(line: bytes, i: int) -> None:
    """A closing quote must be followed by a blank or by the end of the line."""
    if i < len(line) and line[i] not in _BLANKS:
        raise ProtocolError(ERR_QUOTES)
