"""`decode_reply`, the one-shot RESP2 reply decoder: round-trips against `encode_reply`, every
prefix of a reply is "incomplete", malformed input and deep nesting are refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.resp import (
    MAX_REPLY_DEPTH,
    ErrorReply,
    ProtocolError,
    decode_reply,
    encode_command,
    encode_reply,
)

simple = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))
scalars = st.one_of(
    st.none(), st.binary(max_size=64), st.integers(-(2**63), 2**63 - 1), simple,
    simple.map(ErrorReply),
)
replies = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6), max_leaves=40)


def wire(value: Any) -> bytes:
    """RESP2 bytes for a decoded value (ErrorReply back to the encoder's ReplyError)."""
    if isinstance(value, ErrorReply):
        return encode_reply(ReplyError(str(value)))
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(wire(v) for v in value)
    return encode_reply(value)


def same(a: Any, b: Any) -> bool:
    """Equal, with ErrorReply and str told apart."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@given(replies)
def test_round_trip(value: Any) -> None:
    data = wire(value)
    got = decode_reply(data)
    assert got is not None
    assert same(got[0], value)
    assert got[1] == len(data)


@given(replies, st.binary(max_size=16))
def test_round_trip_in_a_bytearray_after_other_bytes(value: Any, before: bytes) -> None:
    data = wire(value)
    buf = bytearray(before + data + b"+next\r\n")
    got = decode_reply(buf, len(before))
    assert got is not None and same(got[0], value)
    assert decode_reply(buf, got[1]) == ("next", len(buf))


@given(replies)
def test_every_prefix_is_incomplete(value: Any) -> None:
    data = wire(value)
    for cut in range(len(data)):
        assert decode_reply(data[:cut]) is None


@given(st.lists(st.binary(max_size=20), max_size=5))
def test_a_request_is_an_array_of_bulks(argv: list[bytes]) -> None:
    assert decode_reply(encode_command(argv)) == (argv, len(encode_command(argv)))


def test_values_and_types() -> None:
    assert decode_reply(b"+OK\r\n") == ("OK", 5)
    err = decode_reply(b"-LOADING Redis is loading\r\n")
    assert err is not None and type(err[0]) is ErrorReply
    assert err[0] == "LOADING Redis is loading"
    assert decode_reply(b"$-1\r\n") == (None, 5)
    assert decode_reply(b"*-1\r\n") == (None, 5)
    assert decode_reply(b"*0\r\n") == ([], 4)
    assert decode_reply(b":-7\r\n") == (-7, 5)
    assert decode_reply(b"*2\r\n*1\r\n$1\r\na\r\n:1\r\n") == ([[b"a"], 1], 19)


@pytest.mark.parametrize("data", [
    b"$3\r\nabcd\r\n", b"$-2\r\n", b"*-5\r\n", b":x\r\n", b"%1\r\n", b"?\r\n", b"_\r\n",
])
def test_malformed_input_is_refused(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_reply(data)


def test_nesting_is_bounded() -> None:
    ok = b"*1\r\n" * MAX_REPLY_DEPTH + b":1\r\n"
    got = decode_reply(ok)
    assert got is not None and got[1] == len(ok)
    with pytest.raises(ProtocolError):
        decode_reply(b"*1\r\n" * (MAX_REPLY_DEPTH + 1) + b":1\r\n")


def test_a_deep_incomplete_reply_is_incomplete_not_an_error() -> None:
    assert decode_reply(b"*1\r\n" * 10) is None
