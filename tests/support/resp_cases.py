"""Shared pieces of the RESP unit tests (tests/engine/wire): a byte stream cut at any points,
a comparable form of reply values, every reply a byte string decodes to, and the garbage the
parsers are fuzzed with."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY, Push, RespMap, RespSet, Verbatim
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser


def decode_all(data: bytes) -> list[Any]:
    parser = ReplyParser()
    parser.feed(data)
    out = []
    while (value := parser.next()) is not NEED_MORE:
        out.append(value)
    return out


def canon(value: Any) -> Any:
    """A comparable form that tells apart what == does not (True/1, 1/1.0, -0.0/0.0, types)."""
    t = type(value)
    if t is bool:
        return ("bool", value)
    if t is float:
        return ("float", repr(value))
    if t is int:
        return ("int", value)
    if t in (list, tuple):
        return ["array", *map(canon, value)]
    if t is RespMap:
        return ("map", [(canon(k), canon(v)) for k, v in value.items])
    if t is RespSet:
        return ("set", [canon(x) for x in value.items])
    if t is Push:
        return ("push", [canon(x) for x in value.items])
    if t is Verbatim:
        return ("verbatim", value.text, value.fmt)
    if isinstance(value, ReplyError):
        return ("error", str(value))
    if value is NULL_ARRAY:
        return ("NoneType", None)
    return (t.__name__, value)


def chunked(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    start = 0
    for p in points:
        yield data[start:p]
        start = p
    yield data[start:]


fragments = st.sampled_from(
    [
        b"*",
        b"$",
        b"\r\n",
        b"\r",
        b"\n",
        b"1",
        b"3",
        b"-1",
        b"0",
        b"\0",
        b'"',
        b"'",
        b"\\x4",
        b" ",
        b"*2\r\n",
        b"$3\r\nabc\r\n",
        b"PING",
        b'ECHO "',
        b"99999999999",
        b"16385",
        b"x",
    ]
)
garbage = st.one_of(st.binary(max_size=200), st.lists(fragments, max_size=40).map(b"".join))
