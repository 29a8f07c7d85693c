"""Argument parsing shared by commands: integers as Redis reads them, option-word matching.

Owns Redis's integer syntax (string2ll: no spaces, no '+', no leading zeros) and the error lines
for bad numbers. Must not touch: engine state.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.wire.errors import NOT_INTEGER, ReplyError

LLONG_MAX: Final = (1 << 63) - 1
LLONG_MIN: Final = -(1 << 63)


def parse_int(arg: bytes, msg: str | None = None) -> int:
    """getLongLongFromObjectOrReply: the strict int64 syntax (an optional '-', then ASCII
    digits without a leading zero; "0" itself, never "-0"); `msg` replaces the default line.
    The digits are read one by one (compiled: a loop over bytes, no int() of a copy)."""
    n = len(arg)
    if 0 < n <= 20:
        start = 1 if arg[0] == 45 else 0  # '-'
        if start < n and (arg[start] != 48 or (n == 1 and not start)):  # leading '0': "0" only
            value = 0
            for i in range(start, n):
                digit = arg[i] - 48
                if digit < 0 or digit > 9:
                    break
                value = value * 10 + digit
            else:
                if start:
                    value = -value
                # (18 digits cannot leave int64: the compares of big ints skipped)
                if n - start < 19 or LLONG_MIN <= value <= LLONG_MAX:
                    return value
    raise ReplyError(("ERR " + msg) if msg else NOT_INTEGER)


def parse_int_range(arg: bytes, lo: int, hi: int, msg: str | None = None) -> int:
    """getRangeLongFromObjectOrReply."""
    value = parse_int(arg, msg)
    if value < lo or value > hi:
        raise ReplyError(
            ("ERR " + msg) if msg else f"ERR value is out of range, value must between {lo} and {hi}"
        )
    return value


def parse_timeout_ms(arg: bytes, now: int) -> int:
    """A BLOCK timeout in ms (0 = forever), validated as Redis's getTimeoutFromObjectOrReply."""
    value = parse_int(arg, "timeout is not an integer or out of range")
    if value < 0:
        raise ReplyError("ERR timeout is negative")
    if value > 0 and value > LLONG_MAX - now:
        raise ReplyError("ERR timeout is out of range")
    return value


# The option words of the hottest parsers, as clients spell them (upper or lower case).
_OPTION_WORDS: Final = {spelling: word.lower() for word in (
    b"BLOCK", b"CLAIM", b"COUNT", b"GROUP", b"MAXCOUNT", b"MAXSIZE", b"NOACK", b"STREAMS",
) for spelling in (word, word.lower())}


def option_word(arg: bytes) -> bytes:
    """`arg.lower()`, the usual spellings of the hot options looked up (no method call)."""
    word = _OPTION_WORDS.get(arg)
    return word if word is not None else arg.lower()


def is_word(arg: bytes, word: bytes) -> bool:
    """Case-insensitive option match; `word` is given lowercase."""
    return len(arg) == len(word) and arg.lower() == word


NOT_POSITIVE: Final = "ERR value is out of range, must be positive"


def parse_positive(arg: bytes) -> int:
    """getPositiveLongFromObjectOrReply with Redis's default line (for a non-number too)."""
    value = parse_int(arg, NOT_POSITIVE[4:])
    if value < 0:
        raise ReplyError(NOT_POSITIVE)
    return value
