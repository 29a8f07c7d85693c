"""The client side of RESP (engine/wire/reply_parser.py): encoding requests, the incremental
RESP2/RESP3 reply parser (every type, any chunking, malformed input, fuzz) and the one-shot RESP2
decoder (round trips against the encoder, every prefix incomplete, malformed input and deep
nesting refused).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire import reply_parser
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import Push, RespMap, RespSet, Verbatim
from streamkeep.engine.wire.reply_encoder import encode_reply
from streamkeep.engine.wire.reply_parser import (
    NEED_MORE,
    ProtocolError,
    ReplyParser,
    encode_command,
)
from tests.support.resp_cases import canon, chunked, decode_all, garbage

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# Encoding requests
# ---------------------------------------------------------------------------------------------


def test_encode_command() -> None:
    assert encode_command([b"XADD", "s", 12, "*", "é"]) == (
        b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$2\r\n12\r\n$1\r\n*\r\n$2\r\n\xc3\xa9\r\n"
    )
    assert encode_command([]) == b"*0\r\n"
    assert encode_command([b"", -3, bytearray(b"b")]) == b"*3\r\n$0\r\n\r\n$2\r\n-3\r\n$1\r\nb\r\n"
    with pytest.raises(TypeError):
        encode_command([True])
    with pytest.raises(TypeError):
        encode_command([1.5])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------
# ReplyParser
# ---------------------------------------------------------------------------------------------


def test_reply_parser_types() -> None:
    data = (
        b"+OK\r\n-ERR bad thing\r\n:42\r\n:-1\r\n$3\r\nabc\r\n$0\r\n\r\n$-1\r\n*-1\r\n"
        b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n*0\r\n_\r\n,1.5\r\n,inf\r\n,-inf\r\n#t\r\n#f\r\n"
        b"%2\r\n$1\r\nk\r\n:1\r\n*1\r\n:2\r\n+v\r\n~2\r\n:1\r\n:2\r\n=7\r\ntxt:h\xc3\xa9\r\n"
        b">2\r\n$7\r\nmessage\r\n$1\r\nx\r\n(123456789012345678901234567890\r\n"
        b"!8\r\nERR a\r\nb\r\n%0\r\n~0\r\n"
    )
    got = decode_all(data)
    assert got[:11] == [
        "OK",
        got[1],
        42,
        -1,
        b"abc",
        b"",
        None,
        None,
        [b"a", [1]],
        [],
        None,
    ]
    assert isinstance(got[1], ReplyError) and str(got[1]) == "ERR bad thing"
    assert got[11:16] == [1.5, math.inf, -math.inf, True, False]
    assert type(got[14]) is bool
    m = got[16]
    assert isinstance(m, RespMap) and m.items == [(b"k", 1), ([2], "v")]
    assert got[17] == RespSet([1, 2])
    assert got[18] == Verbatim("hé", "txt")
    assert got[19] == Push([b"message", b"x"])
    assert got[20] == 123456789012345678901234567890
    assert isinstance(got[21], ReplyError) and str(got[21]) == "ERR a\r\nb"
    assert isinstance(got[22], RespMap) and got[22].items == []
    assert got[23] == RespSet([])
    assert len(got) == 24


def test_reply_parser_need_more_and_none() -> None:
    parser = ReplyParser()
    assert parser.next() is NEED_MORE
    parser.feed(b"$-1\r\n*2\r\n$3\r\nab")
    assert parser.next() is None
    assert parser.next() is NEED_MORE
    parser.feed(b"c\r")
    assert parser.next() is NEED_MORE
    parser.feed(b"\n_\r")
    assert parser.next() is NEED_MORE
    parser.feed(b"\n")
    assert parser.next() == [b"abc", None]
    assert parser.next() is NEED_MORE
    assert parser.pending_bytes() == 0


@pytest.mark.parametrize(
    "data",
    [
        b"?\r\n",
        b":abc\r\n",
        b"$abc\r\n",
        b"$-2\r\n",
        b"$3\r\nabcde\r\n",
        b"*x\r\n",
        b"*-2\r\n",
        b"#x\r\n",
        b",nope\r\n",
        b"=3\r\nabc\r\n",
        b"_x\r\n",
        b"\r\n",
    ],
)
def test_reply_parser_malformed(data: bytes) -> None:
    parser = ReplyParser()
    parser.feed(data)
    with pytest.raises(ProtocolError):
        parser.next()


def test_reply_parser_one_byte_at_a_time() -> None:
    value = [RespMap([(b"k", [b"v", 1, None])]), RespSet([Verbatim("x")]), Push([]), 2.5, "s"]
    wire = encode_reply(value, 3) * 3
    parser = ReplyParser()
    got = []
    for i in range(len(wire)):
        parser.feed(wire[i : i + 1])
        while (v := parser.next()) is not NEED_MORE:
            got.append(v)
    assert [canon(v) for v in got] == [canon(value)] * 3


@PROPERTY
@given(garbage, st.lists(st.integers(min_value=0), max_size=10))
def test_fuzz_reply_parser_only_protocol_errors(data: bytes, cuts: list[int]) -> None:
    parser = ReplyParser()
    calls = 0
    try:
        for piece in chunked(data, cuts):
            parser.feed(piece)
            while parser.next() is not NEED_MORE:
                calls += 1
                assert calls <= len(data)
    except ProtocolError:
        pass


# --------------------------------------------------------------------------------------------
# decode_reply: the one-shot RESP2 reply decoder (round-trips against encode_reply, every
# prefix incomplete, malformed input and deep nesting refused)
# --------------------------------------------------------------------------------------------

_dec_simple = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))
_dec_scalars = st.one_of(
    st.none(), st.binary(max_size=64), st.integers(-(2**63), 2**63 - 1), _dec_simple,
    _dec_simple.map(reply_parser.ErrorReply),
)
_dec_replies = st.recursive(_dec_scalars, lambda inner: st.lists(inner, max_size=6),
                            max_leaves=40)


def _dec_wire(value: Any) -> bytes:
    """RESP2 bytes for a decoded value (reply_parser.ErrorReply back to the encoder's ReplyError)."""
    if isinstance(value, reply_parser.ErrorReply):
        return encode_reply(ReplyError(str(value)))
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(_dec_wire(v) for v in value)
    return encode_reply(value)


def _dec_same(a: Any, b: Any) -> bool:
    """Equal, with reply_parser.ErrorReply and str told apart."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_dec_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@given(_dec_replies)
def test_decode_round_trip(value: Any) -> None:
    data = _dec_wire(value)
    got = reply_parser.decode_reply(data)
    assert got is not None
    assert _dec_same(got[0], value)
    assert got[1] == len(data)


@given(_dec_replies, st.binary(max_size=16))
def test_decode_round_trip_in_a_bytearray_after_other_bytes(value: Any, before: bytes) -> None:
    data = _dec_wire(value)
    buf = bytearray(before + data + b"+next\r\n")
    got = reply_parser.decode_reply(buf, len(before))
    assert got is not None and _dec_same(got[0], value)
    assert reply_parser.decode_reply(buf, got[1]) == ("next", len(buf))


@given(_dec_replies)
def test_decode_every_prefix_is_incomplete(value: Any) -> None:
    data = _dec_wire(value)
    for cut in range(len(data)):
        assert reply_parser.decode_reply(data[:cut]) is None


@given(st.lists(st.binary(max_size=20), max_size=5))
def test_decode_a_request_is_an_array_of_bulks(argv: list[bytes]) -> None:
    assert reply_parser.decode_reply(reply_parser.encode_command(argv)) == (argv, len(reply_parser.encode_command(argv)))


def test_decode_values_and_types() -> None:
    assert reply_parser.decode_reply(b"+OK\r\n") == ("OK", 5)
    err = reply_parser.decode_reply(b"-LOADING Redis is loading\r\n")
    assert err is not None and type(err[0]) is reply_parser.ErrorReply
    assert err[0] == "LOADING Redis is loading"
    assert reply_parser.decode_reply(b"$-1\r\n") == (None, 5)
    assert reply_parser.decode_reply(b"*-1\r\n") == (None, 5)
    assert reply_parser.decode_reply(b"*0\r\n") == ([], 4)
    assert reply_parser.decode_reply(b":-7\r\n") == (-7, 5)
    assert reply_parser.decode_reply(b"*2\r\n*1\r\n$1\r\na\r\n:1\r\n") == ([[b"a"], 1], 19)


@pytest.mark.parametrize("data", [
    b"$3\r\nabcd\r\n", b"$-2\r\n", b"*-5\r\n", b":x\r\n", b"%1\r\n", b"?\r\n", b"_\r\n",
])
def test_decode_refuses_malformed_input_is_refused(data: bytes) -> None:
    with pytest.raises(reply_parser.ProtocolError):
        reply_parser.decode_reply(data)


def test_decode_nesting_is_bounded() -> None:
    ok = b"*1\r\n" * reply_parser.MAX_REPLY_DEPTH + b":1\r\n"
    got = reply_parser.decode_reply(ok)
    assert got is not None and got[1] == len(ok)
    with pytest.raises(reply_parser.ProtocolError):
        reply_parser.decode_reply(b"*1\r\n" * (reply_parser.MAX_REPLY_DEPTH + 1) + b":1\r\n")


def test_decode_a_deep_incomplete_reply_is_incomplete_not_an_error() -> None:
    assert reply_parser.decode_reply(b"*1\r\n" * 10) is None
