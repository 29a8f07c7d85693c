"""Stream IDs: parsing, formatting and arithmetic.

Owns the one representation of a stream ID inside streamkeep: a Python int `ms << 64 | seq`, so IDs
compare, sort and hash as integers. Parsing follows Redis's rules (strtoull fallbacks included) and
raises the exact Redis error lines. Must not touch: streams, groups or any engine state.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.wire import kernel_switches
from streamkeep.engine.wire.errors import INVALID_STREAM_ID, ReplyError

# Formatting and the common `ms-seq` parse: a compiled kernel, or its pure-Python reference.
try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._ids_c import (
        format_id,
        format_ids,
        next_auto_id,
        plain_id,
        plain_ids,
        split_ids,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._ids_py import (
        format_id,
        format_ids,
        next_auto_id,
        plain_id,
        plain_ids,
        split_ids,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["MAX_ID", "MIN_ID", "SEQ_BITS", "SEQ_MASK", "U64_MAX", "ParsedID", "decr_id",
           "format_id", "format_ids", "id_ms", "id_seq", "incr_id", "make_id", "next_auto_id",
           "parse_id",
           "parse_range", "parse_range_bound", "parse_strict", "parse_u64", "plain_id", "plain_ids",
           "split_ids", "try_parse_strict"]

SEQ_BITS: Final = 64
SEQ_MASK: Final = (1 << 64) - 1
U64_MAX: Final = SEQ_MASK
MIN_ID: Final = 0
MAX_ID: Final = (1 << 128) - 1


def make_id(ms: int, seq: int) -> int:
    return (ms << SEQ_BITS) | seq


def id_ms(sid: int) -> int:
    return sid >> SEQ_BITS


def id_seq(sid: int) -> int:
    return sid & SEQ_MASK


def incr_id(sid: int) -> int | None:
    """The next ID, or None when `sid` is the maximum (Redis's streamIncrID failing)."""
    return None if sid == MAX_ID else sid + 1


def decr_id(sid: int) -> int | None:
    return None if sid == MIN_ID else sid - 1


_SPACES: Final = b" \t\n\v\f\r"


def _string2ll(text: bytes) -> int | None:
    """Redis's strict integer syntax: optional '-', no leading zeros, no '+', no spaces."""
    if not text or len(text) > 20:
        return None
    body = text[1:] if text[:1] == b"-" else text
    if not body.isdigit() or not body.isascii():
        return None
    if body[:1] == b"0" and (len(body) > 1 or text[:1] == b"-"):
        return None
    value = int(text)
    if value < -(1 << 63) or value >= (1 << 63):
        return None
    return value


def parse_u64(text: bytes) -> int | None:
    """Redis's string2ull: strict int64 first, then a strtoull-like fallback (spaces, '+', wrap)."""
    strict = _string2ll(text)
    if strict is not None:
        return strict if strict >= 0 else None
    body = text.lstrip(_SPACES)
    negative = False
    if body[:1] in (b"+", b"-"):
        negative = body[:1] == b"-"
        body = body[1:]
    if not body or not body.isdigit() or not body.isascii():
        return None
    value = int(body)
    if value > U64_MAX:
        return None
    return (-value) & U64_MAX if negative else value


class ParsedID:
    """An ID as written by a client: value plus whether the sequence was given (XADD's ms-*)."""

    __slots__ = ("value", "seq_given")

    def __init__(self, value: int, seq_given: bool) -> None:
        self.value = value
        self.seq_given = seq_given


def parse_id(
    arg: bytes,
    missing_seq: int = 0,
    strict: bool = False,
    allow_seq_star: bool = False,
) -> ParsedID:
    """Parse `ms-seq`, `ms`, `-`, `+` (not when strict) and `ms-*` (only with allow_seq_star)."""
    if len(arg) > 127:
        raise ReplyError(INVALID_STREAM_ID)
    nul = arg.find(b"\0")
    if nul >= 0:  # Redis parses a C string: anything after a NUL byte is invisible to it.
        arg = arg[:nul]
    if arg == b"-" or arg == b"+":
        if strict:
            raise ReplyError(INVALID_STREAM_ID)
        return ParsedID(MIN_ID if arg == b"-" else MAX_ID, True)
    ms_part, dash, seq_part = arg.partition(b"-")
    ms = parse_u64(ms_part)
    if ms is None:
        raise ReplyError(INVALID_STREAM_ID)
    if not dash:
        return ParsedID(make_id(ms, missing_seq), True)
    if allow_seq_star and seq_part == b"*":
        return ParsedID(make_id(ms, 0), False)
    seq = parse_u64(seq_part)
    if seq is None:
        raise ReplyError(INVALID_STREAM_ID)
    return ParsedID(make_id(ms, seq), True)


def try_parse_strict(arg: bytes) -> int | None:
    """parse_strict, but None instead of an error (XCLAIM finds where its IDs end this way)."""
    plain = plain_id(arg)
    if plain is not None:
        return plain
    if arg[:1].isalpha():  # an option word: no ID starts with a letter
        return None
    try:
        return parse_id(arg, 0, strict=True).value
    except ReplyError:
        return None


def parse_strict(arg: bytes, missing_seq: int = 0) -> int:
    """A concrete ID (no `-`/`+`), as XDEL, XACK, XCLAIM and XSETID take them."""
    # The common `digits-digits` first: strtoull accepts leading zeros, so plain ASCII digits
    # that fit in 64 bits parse exactly as Redis parses them.
    plain = plain_id(arg)
    if plain is not None:
        return plain
    return parse_id(arg, missing_seq, strict=True).value


def parse_range_bound(arg: bytes, missing_seq: int) -> tuple[int, bool]:
    """An XRANGE/XPENDING bound: `(`-prefixed means exclusive (then `-`/`+` are invalid)."""
    if len(arg) > 1 and arg[:1] == b"(":
        return parse_id(arg[1:], missing_seq, strict=True).value, True
    plain = plain_id(arg)  # the common `digits-digits` (parse_strict's fast path: the same ID)
    if plain is not None:
        return plain, False
    return parse_id(arg, missing_seq).value, False


def parse_range(start_arg: bytes, end_arg: bytes) -> tuple[int, int]:
    """Both bounds of XRANGE-like commands, exclusivity resolved, with Redis's error lines."""
    start, start_ex = parse_range_bound(start_arg, 0)
    if start_ex:
        nxt = incr_id(start)
        if nxt is None:
            raise ReplyError("ERR invalid start ID for the interval")
        start = nxt
    end, end_ex = parse_range_bound(end_arg, U64_MAX)
    if end_ex:
        prev = decr_id(end)
        if prev is None:
            raise ReplyError("ERR invalid end ID for the interval")
        end = prev
    return start, end
