"""The RESP codec (engine/resp.py): exact bytes for every reply type in RESP2 and RESP3, Redis's
request-parsing rules and error lines (checked against a real redis-server), round trips and fuzz.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire import resp
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import (
    NULL_ARRAY,
    EntryArray,
    Push,
    RespMap,
    RespSet,
    Verbatim,
    to_plain,
)
from streamkeep.engine.wire.resp import (
    BIG_BULK,
    NEED_MORE,
    PROTO_INLINE_MAX_SIZE,
    OutputLimitReached,
    ProtocolError,
    QueryBufferLimit,
    ReplyBuffer,
    ReplyParser,
    RequestParser,
    encode_command,
    encode_reply,
    format_double,
    split_inline_args,
    write_reply,
)
from tests.support.kernels import kernel_fixture

resp_twin = kernel_fixture("streamkeep.engine.wire", "resp")


@pytest.fixture(scope="module")
def twin(resp_twin: Any) -> Iterator[Any]:
    """Runs a test against each twin of the codec's hot half (`_resp_py`, `_resp_c`): while it
    runs, this module's `RequestParser`, `encode_reply` and `write_reply` are the twin's."""
    names = ("RequestParser", "encode_reply", "write_reply")
    saved = {name: globals()[name] for name in names}
    globals().update({name: getattr(resp_twin, name) for name in names})
    yield resp_twin
    globals().update(saved)


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MBULK_LEN = "ERR Protocol error: invalid multibulk length"
MBULK_BIG = "ERR Protocol error: too big mbulk count string"
BULK_LEN = "ERR Protocol error: invalid bulk length"
BULK_BIG = "ERR Protocol error: too big bulk count string"
INLINE_BIG = "ERR Protocol error: too big inline request"
QUOTES = "ERR Protocol error: unbalanced quotes in request"
UNAUTH_MBULK = "ERR Protocol error: unauthenticated multibulk length"
UNAUTH_BULK = "ERR Protocol error: unauthenticated bulk length"

# Exactly one byte past PROTO_INLINE_MAX_SIZE pending without a terminator.
OVER = PROTO_INLINE_MAX_SIZE + 1


def parse_all(data: bytes, parser: RequestParser | None = None) -> list[list[bytes]]:
    parser = parser or RequestParser()
    parser.feed(data)
    out = []
    while (cmd := parser.next()) is not None:
        out.append(cmd)
    return out


def parse_error(data: bytes, parser: RequestParser | None = None) -> str:
    parser = parser or RequestParser()
    with pytest.raises(ProtocolError) as info:
        parse_all(data, parser)
    return str(info.value)


def decode_all(data: bytes) -> list[Any]:
    parser = ReplyParser()
    parser.feed(data)
    out = []
    while (value := parser.next()) is not NEED_MORE:
        out.append(value)
    return out


# ---------------------------------------------------------------------------------------------
# Encoding replies: exact bytes
# ---------------------------------------------------------------------------------------------

BOTH = [
    ("OK", b"+OK\r\n", b"+OK\r\n"),
    ("h\xe9\udcff", b"+h\xc3\xa9\xff\r\n", b"+h\xc3\xa9\xff\r\n"),
    (b"", b"$0\r\n\r\n", b"$0\r\n\r\n"),
    (b"a\r\nb", b"$4\r\na\r\nb\r\n", b"$4\r\na\r\nb\r\n"),
    (bytearray(b"xy"), b"$2\r\nxy\r\n", b"$2\r\nxy\r\n"),
    (memoryview(b"xyz"), b"$3\r\nxyz\r\n", b"$3\r\nxyz\r\n"),
    (None, b"$-1\r\n", b"_\r\n"),
    (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
    (0, b":0\r\n", b":0\r\n"),
    (1023, b":1023\r\n", b":1023\r\n"),
    (1024, b":1024\r\n", b":1024\r\n"),
    (-7, b":-7\r\n", b":-7\r\n"),
    (2**63 - 1, b":9223372036854775807\r\n", b":9223372036854775807\r\n"),
    (-(2**63), b":-9223372036854775808\r\n", b":-9223372036854775808\r\n"),
    (2**64, b"$20\r\n18446744073709551616\r\n", b"(18446744073709551616\r\n"),
    (True, b":1\r\n", b"#t\r\n"),
    (False, b":0\r\n", b"#f\r\n"),
    (1.5, b"$3\r\n1.5\r\n", b",1.5\r\n"),
    (3.0, b"$1\r\n3\r\n", b",3\r\n"),
    (0.1, b"$19\r\n0.10000000000000001\r\n", b",0.10000000000000001\r\n"),
    (1e300, b"$23\r\n1.0000000000000001e+300\r\n", b",1.0000000000000001e+300\r\n"),
    (-0.0, b"$2\r\n-0\r\n", b",-0\r\n"),
    (math.inf, b"$3\r\ninf\r\n", b",inf\r\n"),
    (-math.inf, b"$4\r\n-inf\r\n", b",-inf\r\n"),
    (math.nan, b"$3\r\nnan\r\n", b",nan\r\n"),
    ([], b"*0\r\n", b"*0\r\n"),
    ((), b"*0\r\n", b"*0\r\n"),
    (
        [b"a", 1, [b"b", (b"c", None)], "s"],
        b"*4\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n*2\r\n$1\r\nc\r\n$-1\r\n+s\r\n",
        b"*4\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n*2\r\n$1\r\nc\r\n_\r\n+s\r\n",
    ),
    (
        [[[[b"deep", True]]]],
        b"*1\r\n*1\r\n*1\r\n*2\r\n$4\r\ndeep\r\n:1\r\n",
        b"*1\r\n*1\r\n*1\r\n*2\r\n$4\r\ndeep\r\n#t\r\n",
    ),
    (
        RespMap([(b"k", 1), ("s", [b"v"])]),
        b"*4\r\n$1\r\nk\r\n:1\r\n+s\r\n*1\r\n$1\r\nv\r\n",
        b"%2\r\n$1\r\nk\r\n:1\r\n+s\r\n*1\r\n$1\r\nv\r\n",
    ),
    (
        RespMap([(b"stream", [[b"1-1", (b"f", b"v")]])], as_pairs=True),
        b"*1\r\n*2\r\n$6\r\nstream\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"%1\r\n$6\r\nstream\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    ),
    (RespMap([]), b"*0\r\n", b"%0\r\n"),
    (RespSet([b"a", 2]), b"*2\r\n$1\r\na\r\n:2\r\n", b"~2\r\n$1\r\na\r\n:2\r\n"),
    (Verbatim("hé"), b"$3\r\nh\xc3\xa9\r\n", b"=7\r\ntxt:h\xc3\xa9\r\n"),
    (Verbatim("# x\r\n", "mkd"), b"$5\r\n# x\r\n\r\n", b"=9\r\nmkd:# x\r\n\r\n"),
    (
        Push([b"message", b"ch", b"hi"]),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
    ),
    (ReplyError("ERR syntax error"), b"-ERR syntax error\r\n", b"-ERR syntax error\r\n"),
    (ReplyError("ERR a\r\nb\nc"), b"-ERR a  b c\r\n", b"-ERR a  b c\r\n"),
    (
        ProtocolError(MBULK_LEN),
        b"-" + MBULK_LEN.encode() + b"\r\n",
        b"-" + MBULK_LEN.encode() + b"\r\n",
    ),
    (
        [ReplyError("ERR x"), b"ok"],
        b"*2\r\n-ERR x\r\n$2\r\nok\r\n",
        b"*2\r\n-ERR x\r\n$2\r\nok\r\n",
    ),
    ([NULL_ARRAY, False, 2.5], b"*3\r\n*-1\r\n:0\r\n$3\r\n2.5\r\n", b"*3\r\n_\r\n#f\r\n,2.5\r\n"),
]


@pytest.mark.parametrize(
    ("value", "resp2", "resp3"),
    BOTH,
    ids=[f"{i}-{type(c[0]).__name__}" for i, c in enumerate(BOTH)],
)
@pytest.mark.usefixtures("twin")
def test_encode_exact_bytes(value: Any, resp2: bytes, resp3: bytes) -> None:
    assert encode_reply(value) == resp2
    assert encode_reply(value, 2) == resp2
    assert encode_reply(value, 3) == resp3


@pytest.mark.usefixtures("twin")
def test_encode_large_headers_not_from_cache() -> None:
    big = b"x" * 5000
    assert encode_reply(big) == b"$5000\r\n" + big + b"\r\n"
    items = [1] * 1500
    assert encode_reply(items) == b"*1500\r\n" + b":1\r\n" * 1500
    nested = [[b"y" * 2000], (b"z" * 1024,)]
    assert encode_reply(nested) == (
        b"*2\r\n*1\r\n$2000\r\n" + b"y" * 2000 + b"\r\n*1\r\n$1024\r\n" + b"z" * 1024 + b"\r\n"
    )


@pytest.mark.usefixtures("twin")
def test_write_reply_appends_in_place() -> None:
    out = bytearray(b"+PREVIOUS\r\n")
    write_reply(out, [b"a", 1], 2)
    write_reply(out, None, 3)
    assert out == b"+PREVIOUS\r\n*2\r\n$1\r\na\r\n:1\r\n_\r\n"


@pytest.mark.usefixtures("twin")
def test_encode_subclasses_and_errors() -> None:
    import enum

    class Code(enum.IntEnum):
        SEVEN = 7

    assert encode_reply(Code.SEVEN) == b":7\r\n"
    assert encode_reply([Code.SEVEN]) == b"*1\r\n:7\r\n"
    with pytest.raises(TypeError):
        encode_reply(object())
    with pytest.raises(ValueError):
        encode_reply(b"x", 4)
    with pytest.raises(ValueError):
        encode_reply(Verbatim("x", "text"), 3)


def test_format_double_is_percent_17g() -> None:
    assert format_double(1 / 3) == b"0.33333333333333331"
    assert format_double(1e-5) == b"1.0000000000000001e-05"
    assert format_double(123456789.0) == b"123456789"
    assert format_double(2.0**70) == b"1.1805916207174113e+21"


def test_to_plain_resp3_types() -> None:
    assert to_plain(Verbatim("hé")) == "hé".encode()
    assert to_plain(RespSet([b"a", RespMap([(b"k", 1)])])) == [b"a", [b"k", 1]]
    assert to_plain(Push([b"x", NULL_ARRAY])) == [b"x", None]
    assert to_plain([Verbatim("t"), RespSet([(b"f", b"v")]), 1.5, True]) == [
        b"t",
        [[b"f", b"v"]],
        1.5,
        True,
    ]
    assert RespSet([1]) == RespSet([1]) and RespSet([1]) != [1]
    assert Verbatim("a") == Verbatim("a", "txt") != Verbatim("a", "mkd")
    assert Push([1]) == Push([1]) != RespSet([1])


def reference_encode(value: Any) -> bytes:
    """A naive RESP2 encoder for the shapes an XRANGE reply has."""
    if isinstance(value, bytes):
        return b"$" + str(len(value)).encode() + b"\r\n" + value + b"\r\n"
    return b"*" + str(len(value)).encode() + b"\r\n" + b"".join(map(reference_encode, value))


@pytest.mark.usefixtures("twin")
def test_xrange_sized_reply_sanity() -> None:
    """The micro benchmark's workload, without timing: 1000 entries encode and decode back."""
    entries = [
        [b"1700000000000-%d" % i, (b"item", b"book %d" % i, b"qty", b"%d" % i, b"x" * (i % 40))]
        for i in range(1000)
    ]
    wire = encode_reply(entries, 2)
    assert wire == reference_encode(entries)
    assert encode_reply(entries, 3) == wire
    assert decode_all(wire) == [[[e[0], list(e[1])] for e in entries]]


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
# RequestParser
# ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("twin")
def test_multibulk_and_inline_pipeline() -> None:
    data = (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
        b"PING\r\n"
        b"\r\n"
        b"\n"
        b"   \t  \r\n"
        b"*0\r\n"
        b"*-1\r\n"
        b"*-5\r\n"
        b"ECHO hello\n"
        b"*1\r\n$4\r\nPING\r\n"
    )
    assert parse_all(data) == [
        [b"SET", b"k", b""],
        [b"PING"],
        [b"ECHO", b"hello"],
        [b"PING"],
    ]


@pytest.mark.usefixtures("twin")
def test_incomplete_input_waits() -> None:
    parser = RequestParser()
    for piece in (b"*2\r", b"\n$4\r\nEC", b"HO\r\n$", b"2\r\nhi", b"\r"):
        parser.feed(piece)
        assert parser.next() is None
    parser.feed(b"\nPI")
    assert parser.next() == [b"ECHO", b"hi"]
    assert parser.next() is None
    assert parser.pending_bytes() == 2
    parser.feed(b"NG\r\n")
    assert parser.next() == [b"PING"]
    assert parser.pending_bytes() == 0


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b"*abc\r\n", MBULK_LEN),
        (b"*\r\n", MBULK_LEN),
        (b"*+1\r\n", MBULK_LEN),
        (b"*01\r\n", MBULK_LEN),
        (b"* 1\r\n", MBULK_LEN),
        (b"*1 \r\n", MBULK_LEN),
        (b"*-0\r\n", MBULK_LEN),
        (b"*2147483648\r\n", MBULK_LEN),  # > INT_MAX
        (b"*9223372036854775808\r\n", MBULK_LEN),
        (b"*" + b"1" * 30 + b"\r\n", MBULK_LEN),
        (b"*" + b"1" * (OVER - 1), MBULK_BIG),
        (b"*1\x00\r\n" + b"x" * (OVER - 5), MBULK_BIG),  # strchr() stops at the NUL
        (b"*1\r\nx\r\n", "ERR Protocol error: expected '$', got 'x'"),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "ERR Protocol error: expected '$', got 'f'"),
        (b"*1\r\n*1\r\n", "ERR Protocol error: expected '$', got '*'"),
        (b"*1\r\n\r\n", "ERR Protocol error: expected '$', got ' '"),
        (b"*1\r\n\n\r\n", "ERR Protocol error: expected '$', got ' '"),
        (b"*1\r\n\xff\r\n", "ERR Protocol error: expected '$', got '\udcff'"),
        (b"*1\r\n$-1\r\n", BULK_LEN),
        (b"*1\r\n$-0\r\n", BULK_LEN),
        (b"*1\r\n$\r\n", BULK_LEN),
        (b"*1\r\n$abc\r\n", BULK_LEN),
        (b"*1\r\n$04\r\nPING\r\n", BULK_LEN),
        (b"*1\r\n$+4\r\nPING\r\n", BULK_LEN),
        (b"*1\r\n$ 4\r\nPING\r\n", BULK_LEN),
        (b"*1\r\n$536870913\r\n", BULK_LEN),  # > proto-max-bulk-len
        (b"*1\r\n$9223372036854775807\r\n", BULK_LEN),
        (b"*1\r\n$99999999999999999999\r\n", BULK_LEN),
        (b"*1\r\n$" + b"1" * (OVER - 1), BULK_BIG),
        (b"*1\r\n$4\x00\r\n" + b"A" * (OVER - 4), BULK_BIG),
        (b"*1\r\n" + b"X" * OVER, BULK_BIG),  # the size cap comes before the '$' check
        (b"x" * OVER, INLINE_BIG),
        (b"PING\x00\n" + b"x" * (OVER - 6), INLINE_BIG),
        (b'ECHO "a\r\n', QUOTES),
        (b"ECHO 'a\r\n", QUOTES),
        (b'ECHO "a"b\r\n', QUOTES),
        (b"ECHO 'a'b\r\n", QUOTES),
        (b'ECHO "a\\"\r\n', QUOTES),
        (b'ECHO "a\\\r\n', QUOTES),
        (b'"\n', QUOTES),
    ],
)
@pytest.mark.usefixtures("twin")
def test_request_errors(data: bytes, line: str) -> None:
    assert parse_error(data) == line


@pytest.mark.usefixtures("twin")
def test_error_after_complete_commands_and_sticky() -> None:
    parser = RequestParser()
    parser.feed(b"*1\r\n$4\r\nPING\r\nPING\r\n*x\r\n*1\r\n$4\r\nPING\r\n")
    assert parser.next() == [b"PING"]
    assert parser.next() == [b"PING"]
    with pytest.raises(ProtocolError) as first:
        parser.next()
    parser.feed(b"*1\r\n$4\r\nPING\r\n")
    with pytest.raises(ProtocolError) as again:
        parser.next()
    assert again.value is first.value


def test_protocol_error_is_not_a_reply_error() -> None:
    """A corrupt stream from a peer is not a refusal: `except ReplyError` must not catch it
    (issue #10), yet both are streamkeep's errors and a protocol error still encodes as the
    error line Redis sends before closing."""
    assert not issubclass(ProtocolError, ReplyError)
    assert issubclass(ProtocolError, StreamkeepError)
    assert issubclass(ReplyError, StreamkeepError)
    assert issubclass(QueryBufferLimit, ProtocolError)
    err = ProtocolError("ERR Protocol error: invalid bulk length")
    assert str(err) == err.reply().line == "ERR Protocol error: invalid bulk length"


@pytest.mark.parametrize(
    "data",
    [
        b"*2147483647\r\n",  # INT_MAX arguments: accepted, waits for them
        b"*2000000\r\n$1\r\na\r\n",
        b"*1\x00\r\n",  # strchr() stops at the NUL: no line yet
        b"*1\r\n$4\x00\r\nPING\r\n",
        b"PING\x00\r\n",
        b"*1\r",  # '\r' needs one more byte after it
        b"*1\r\n$4\r",
        b"*1\r\n$4\r\nPING\r",
        b"*" + b"1" * (OVER - 2),  # exactly at the limit: still waiting
        b"x" * (OVER - 1),
    ],
)
@pytest.mark.usefixtures("twin")
def test_waits_for_more(data: bytes) -> None:
    parser = RequestParser()
    parser.feed(data)
    assert parser.next() is None
    assert parser.next() is None


@pytest.mark.usefixtures("twin")
def test_redis_quirks_cr_and_trailing_bytes_unchecked() -> None:
    # processMultibulkBuffer takes '\r' plus any byte as a line end, and skips the two bytes after
    # a bulk without looking at them.
    assert parse_all(b"*1\rx$4\ryPINGab*1\r\n$4\r\nPINGxxECHO x\r\n") == [
        [b"PING"],
        [b"PING"],
        [b"ECHO", b"x"],
    ]


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"SET k v", [b"SET", b"k", b"v"]),
        (b"  SET \t k   v  ", [b"SET", b"k", b"v"]),
        (b'ECHO "hello world"', [b"ECHO", b"hello world"]),
        (b"ECHO 'hello world'", [b"ECHO", b"hello world"]),
        (b'ECHO ""', [b"ECHO", b""]),
        (b"ECHO ''", [b"ECHO", b""]),
        (b'""', [b""]),
        (b'ECHO "\\x41\\x4g\\n\\r\\t\\b\\a\\q\\\\\\""', [b"ECHO", b'Ax4g\n\r\t\b\aq\\"']),
        (b'ECHO "\\xfF\\x00"', [b"ECHO", b"\xff\x00"]),
        (b"ECHO 'it\\'s' '\\n'", [b"ECHO", b"it's", b"\\n"]),
        (b'ECHO a"b c"d', None),  # closing quote followed by 'd'
        (b'ECHO a"b c"', [b"ECHO", b"ab c"]),
        (b"ECHO 'a' \"b\"", [b"ECHO", b"a", b"b"]),
        (b'ECHO "a"\x0bb', [b"ECHO", b"a", b"b"]),  # \v is a blank after a quote ...
        (b"ECHO a\x0bb", [b"ECHO", b"a\x0bb"]),  # ... but not inside a bare token
        (b"ECHO \x0b\x0c a", [b"ECHO", b"a"]),  # ... and skipped between tokens
        (b"ECHO\ra", [b"ECHO", b"a"]),
        (b"ECHO a\r", [b"ECHO", b"a"]),
        (b"ECHO \xff\xfe", [b"ECHO", b"\xff\xfe"]),
        (b'ECHO "\xff"', [b"ECHO", b"\xff"]),
        (b"", []),
        (b" \t ", []),
    ],
)
def test_split_inline_args(line: bytes, args: list[bytes] | None) -> None:
    if args is None:
        with pytest.raises(ProtocolError, match="unbalanced quotes"):
            split_inline_args(line)
    else:
        assert split_inline_args(line) == args


@pytest.mark.usefixtures("twin")
def test_inline_line_endings() -> None:
    # '\n' alone ends an inline line; one '\r' before it is dropped, a second one is a blank.
    assert parse_all(b"PING\nECHO a\r\r\nECHO b\n\r\nECHO 'c'\r\n") == [
        [b"PING"],
        [b"ECHO", b"a"],
        [b"ECHO", b"b"],
        [b"ECHO", b"c"],
    ]


PIPELINE = (
    b"*3\r\n$4\r\nXADD\r\n$1\r\ns\r\n$12\r\n0123456789ab\r\n"
    b"PING\r\n"
    b"\r\n"
    b"*0\r\n"
    b"ECHO \"q \\x41\" 's'\n"
    b"*-1\r\n"
    b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"
    b"*1\r\n$1000\r\n" + b"z" * 1000 + b"\r\n"
    b"ECHO tail\r\n"
)
PIPELINE_COMMANDS = [
    [b"XADD", b"s", b"0123456789ab"],
    [b"PING"],
    [b"ECHO", b"q A", b"s"],
    [b"ECHO", b""],
    [b"z" * 1000],
    [b"ECHO", b"tail"],
]


@pytest.mark.usefixtures("twin")
def test_pipeline_one_byte_at_a_time() -> None:
    assert parse_all(PIPELINE) == PIPELINE_COMMANDS
    parser = RequestParser()
    got = []
    for i in range(len(PIPELINE)):
        parser.feed(PIPELINE[i : i + 1])
        while (cmd := parser.next()) is not None:
            got.append(cmd)
    assert got == PIPELINE_COMMANDS
    assert parser.pending_bytes() == 0


@pytest.mark.usefixtures("twin")
def test_pipeline_split_at_every_boundary() -> None:
    for cut in range(len(PIPELINE) + 1):
        parser = RequestParser()
        got = []
        for piece in (PIPELINE[:cut], PIPELINE[cut:]):
            parser.feed(piece)
            while (cmd := parser.next()) is not None:
                got.append(cmd)
        assert got == PIPELINE_COMMANDS, cut


@pytest.mark.usefixtures("twin")
def test_many_commands_one_buffer_and_compaction() -> None:
    cmd = encode_command([b"XADD", b"stream", b"*", b"field", b"value"])
    parser = RequestParser()
    count = 0
    chunk = cmd * 1000
    for _ in range(20):  # 20 reads of 1000 commands: the parsed prefix is compacted away
        parser.feed(chunk[:-7])
        parser.feed(chunk[-7:])
        while (got := parser.next()) is not None:
            assert got == [b"XADD", b"stream", b"*", b"field", b"value"]
            count += 1
        assert parser.pending_bytes() == 0
    assert count == 20000


@pytest.mark.usefixtures("twin")
def test_large_bulk_in_pieces() -> None:
    payload = bytes(range(256)) * (8 * 1024)  # 2 MiB
    data = encode_command([b"SET", b"k", payload]) + b"PING\r\n"
    parser = RequestParser()
    got = []
    for i in range(0, len(data), 4096):
        parser.feed(data[i : i + 4096])
        while (cmd := parser.next()) is not None:
            got.append(cmd)
        assert parser.pending_bytes() <= len(payload) + 2 + 4096
    assert got == [[b"SET", b"k", payload], [b"PING"]]


@pytest.mark.usefixtures("twin")
def test_proto_max_bulk_len() -> None:
    assert parse_all(b"*1\r\n$10\r\n0123456789\r\n", RequestParser(proto_max_bulk_len=10)) == [
        [b"0123456789"]
    ]
    assert parse_error(b"*1\r\n$11\r\n", RequestParser(proto_max_bulk_len=10)) == BULK_LEN
    assert parse_error(b"*1\r\n$5\r\n", RequestParser(proto_max_bulk_len=4)) == BULK_LEN


@pytest.mark.usefixtures("twin")
def test_unauthenticated_limits() -> None:
    def unauth() -> RequestParser:
        parser = RequestParser()
        parser.authenticated = False
        return parser

    ten = encode_command([b"a"] * 10)
    assert parse_all(ten, unauth()) == [[b"a"] * 10]
    assert parse_error(b"*11\r\n", unauth()) == UNAUTH_MBULK
    assert parse_error(b"*2147483647\r\n", unauth()) == UNAUTH_MBULK
    assert parse_error(b"*2147483648\r\n", unauth()) == MBULK_LEN  # invalid is checked first
    assert parse_all(encode_command([b"x" * 16384]), unauth()) == [[b"x" * 16384]]
    assert parse_error(b"*1\r\n$16385\r\n", unauth()) == UNAUTH_BULK
    assert parse_error(b"*1\r\n$-1\r\n", unauth()) == BULK_LEN
    assert parse_error(b"*1\r\n$1\r\nx\r\n*12\r\n", unauth()) == UNAUTH_MBULK
    inline = b" ".join([b"a"] * 50) + b"\r\n"  # inline requests have no such cap
    assert parse_all(inline, unauth()) == [[b"a"] * 50]
    # Authenticating lifts the limits for the next request.
    parser = unauth()
    parser.feed(encode_command([b"AUTH", b"pw"]))
    assert parser.next() == [b"AUTH", b"pw"]
    parser.authenticated = True
    assert parse_all(encode_command([b"y"] * 11) + encode_command([b"z" * 20000]), parser) == [
        [b"y"] * 11,
        [b"z" * 20000],
    ]


@pytest.mark.usefixtures("twin")
def test_query_buffer_limit() -> None:
    parser = RequestParser(query_buffer_limit=1000)
    parser.feed(encode_command([b"a" * 900]))  # within the limit
    assert parser.next() == [b"a" * 900]
    parser.feed(b"*2\r\n$3\r\nSET\r\n$2000\r\n" + b"v" * 900)
    assert parser.next() is None
    assert parser.pending_bytes() == 900  # the bulk so far (parsed headers are not counted)
    parser.feed(b"v" * 100)  # 1000: still at the limit
    assert parser.next() is None
    parser.feed(b"v")  # feed() never raises ...
    with pytest.raises(QueryBufferLimit) as info:  # ... next() does, and keeps doing so
        parser.next()
    assert isinstance(info.value, ProtocolError)
    with pytest.raises(QueryBufferLimit):
        parser.next()


@pytest.mark.usefixtures("twin")
def test_query_buffer_limit_is_checked_per_read_like_redis() -> None:
    # Redis checks the query buffer after each read, before parsing it: one read holding more
    # than the limit closes the client even when it is made of complete commands.
    pipeline = encode_command([b"PING"]) * 100  # 1400 bytes
    parser = RequestParser(query_buffer_limit=1000)
    parser.feed(pipeline)
    with pytest.raises(QueryBufferLimit):
        parser.next()
    parser = RequestParser(query_buffer_limit=1000)
    for i in range(0, len(pipeline), 700):
        parser.feed(pipeline[i : i + 700])
        while parser.next() is not None:
            pass


@pytest.mark.usefixtures("twin")
def test_unauthenticated_query_buffer_limit_is_one_mib() -> None:
    pipeline = encode_command([b"PING"]) * (1024 * 1024 // 14 + 1)  # just over 1 MiB
    assert len(parse_all(pipeline)) == 1024 * 1024 // 14 + 1
    parser = RequestParser()
    parser.authenticated = False
    parser.feed(pipeline)
    with pytest.raises(QueryBufferLimit):
        parser.next()


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


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------


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


def resp2_shape(value: Any) -> Any:
    """What a RESP2 client decodes a value to."""
    t = type(value)
    if t is bool:
        return int(value)
    if t is float:
        return format_double(value)
    if t in (list, tuple):
        return [resp2_shape(x) for x in value]
    if t is RespMap:
        if value.as_pairs:
            return [[resp2_shape(k), resp2_shape(v)] for k, v in value.items]
        return [resp2_shape(x) for kv in value.items for x in kv]
    if t is RespSet or t is Push:
        return [resp2_shape(x) for x in value.items]
    if t is Verbatim:
        return value.text.encode("utf-8", "surrogateescape")
    if value is NULL_ARRAY:
        return None
    return value


line_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
leaves = st.one_of(
    st.binary(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    line_text,
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.just(NULL_ARRAY),
    line_text.map(lambda s: ReplyError("ERR " + s)),
    st.builds(Verbatim, any_text, st.sampled_from(["txt", "mkd"])),
)
reply_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.builds(
            RespMap,
            st.lists(st.tuples(children, children), max_size=4),
            st.booleans(),
        ),
        st.lists(children, max_size=5).map(RespSet),
        st.lists(children, max_size=5).map(Push),
    ),
    max_leaves=25,
)


def chunked(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    start = 0
    for p in points:
        yield data[start:p]
        start = p
    yield data[start:]


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(reply_values, st.lists(st.integers(min_value=0), max_size=8))
def test_roundtrip_resp3(value: Any, cuts: list[int]) -> None:
    wire = encode_reply(value, 3)
    parser = ReplyParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (v := parser.next()) is not NEED_MORE:
            got.append(v)
    assert [canon(v) for v in got] == [canon(value)]


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(reply_values, st.lists(st.integers(min_value=0), max_size=8))
def test_roundtrip_resp2(value: Any, cuts: list[int]) -> None:
    wire = encode_reply(value, 2)
    parser = ReplyParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (v := parser.next()) is not NEED_MORE:
            got.append(v)
    assert [canon(v) for v in got] == [canon(resp2_shape(value))]


argvs = st.lists(
    st.lists(
        st.one_of(st.binary(max_size=30), st.binary(min_size=1000, max_size=1100)),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=5,
)


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(argvs, st.lists(st.integers(min_value=0), max_size=12))
def test_roundtrip_commands_any_chunking(commands: list[list[bytes]], cuts: list[int]) -> None:
    wire = b"".join(encode_command(argv) for argv in commands)
    parser = RequestParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (cmd := parser.next()) is not None:
            got.append(cmd)
    assert got == commands
    assert parser.pending_bytes() == 0


@PROPERTY
@given(
    st.lists(
        st.lists(
            st.binary(max_size=8).filter(lambda b: b and not set(b) & set(b"\r\n\0\"' \t\x0b\x0c")),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.integers(min_value=0), max_size=8),
)
@pytest.mark.usefixtures("twin")
def test_inline_commands_any_chunking(commands: list[list[bytes]], cuts: list[int]) -> None:
    assume(not any(argv[0].startswith(b"*") for argv in commands))  # multibulk requests
    wire = b"".join(b" ".join(argv) + b"\r\n" for argv in commands)
    parser = RequestParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (cmd := parser.next()) is not None:
            got.append(cmd)
    assert got == commands


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


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(garbage, st.lists(st.integers(min_value=0), max_size=10), st.booleans())
def test_fuzz_request_parser_only_protocol_errors(
    data: bytes, cuts: list[int], authenticated: bool
) -> None:
    parser = RequestParser(query_buffer_limit=150)
    parser.authenticated = authenticated
    calls = 0
    try:
        for piece in chunked(data, cuts):
            parser.feed(piece)
            while (cmd := parser.next()) is not None:
                assert isinstance(cmd, list) and cmd
                assert all(type(arg) is bytes for arg in cmd)
                calls += 1
                assert calls <= len(data)  # every command consumes input: no endless loop
    except ProtocolError:
        with pytest.raises(ProtocolError):
            parser.next()


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


# ---------------------------------------------------------------------------------------------
# Differential: the same malformed input to a real redis-server
# ---------------------------------------------------------------------------------------------


def send_raw(host: str, port: int, data: bytes, password: bytes | None = None) -> bytes:
    """Send `data` on a fresh connection and read until the server closes it."""
    with socket.create_connection((host, port), timeout=10) as sock:
        if password is not None:
            sock.sendall(encode_command([b"AUTH", password]))
            assert sock.recv(100) == b"+OK\r\n"
        with contextlib.suppress(OSError):  # the server may close before it read everything
            sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def expected_wire(data: bytes, authenticated: bool = True) -> bytes:
    """What the server sends for `data` that holds only PINGs before its protocol error."""
    parser = RequestParser()
    parser.authenticated = authenticated
    parser.feed(data)
    out = b""
    try:
        while (cmd := parser.next()) is not None:
            assert [arg.upper() for arg in cmd] == [b"PING"]
            out += b"+PONG\r\n" if authenticated else b"-NOAUTH Authentication required.\r\n"
    except ProtocolError as err:
        return out + encode_reply(err)
    raise AssertionError(f"no protocol error for {data[:40]!r}")


DIFFERENTIAL = [
    b"*abc\r\n",  # bad multibulk length
    b"*3000000000\r\n",
    b"*-0\r\n",
    b"*1\r\nx\r\n",  # expected '$'
    b"*1\r\n\r\n",
    b"*1\r\n\xff\r\n",
    b"*1\r\n$-1\r\n",  # bad bulk length
    b"*1\r\n$04\r\nPING\r\n",
    b"*1\r\n$536870913\r\n",
    b'ECHO "a\r\n',  # unbalanced quotes
    b"ECHO 'a'b\r\n",
    b'PING\r\nECHO "\\x41"x\n',
    b"*1\r\n$4\r\nPING\r\n*1\rx$4\ryPINGab*1\r\n$-2\r\n",  # quirks, then an error
    b"*" + b"1" * (OVER - 1),
    b"*1\x00\r\n" + b"x" * (OVER - 5),
    b"*1\r\n$" + b"1" * (OVER - 1),
    b"x" * OVER,
]


@pytest.mark.parametrize("data", DIFFERENTIAL, ids=[repr(d[:24]) for d in DIFFERENTIAL])
def test_differential_error_lines(redis_server: Any, data: bytes) -> None:
    assert send_raw(redis_server.host, redis_server.port, data) == expected_wire(data)


@pytest.fixture(scope="module")
def redis_with_password(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A private redis-server with requirepass (the shared one must stay password-free)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found on PATH", pytrace=False)
    workdir: Path = tmp_path_factory.mktemp("redis-auth")
    for _ in range(5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv = [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            "pw",
            "--dir",
            str(workdir),
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(100).startswith(b"-NOAUTH"):
                        break
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            try:
                yield "127.0.0.1", port
            finally:
                proc.terminate()
                proc.wait(timeout=10)
            return
    pytest.fail("could not start redis-server with requirepass", pytrace=False)


UNAUTH_DIFFERENTIAL = [
    b"*11\r\n",
    b"*2147483647\r\n",
    b"*2147483648\r\n",
    b"*1\r\n$16385\r\n",
    b"*1\r\n$-1\r\n",
    b"PING\r\n*1\r\n$4\r\nPING\r\n*12\r\n",
]


@pytest.mark.usefixtures("twin")
@pytest.mark.redis
@pytest.mark.parametrize("data", UNAUTH_DIFFERENTIAL, ids=[repr(d) for d in UNAUTH_DIFFERENTIAL])
def test_differential_unauthenticated(redis_with_password: tuple[str, int], data: bytes) -> None:
    host, port = redis_with_password
    assert send_raw(host, port, data) == expected_wire(data, authenticated=False)
    # After AUTH only the requests that are invalid for anyone still fail.
    authed = RequestParser()
    authed.feed(data)
    try:
        while authed.next() is not None:
            pass
    except ProtocolError:
        assert send_raw(host, port, data, password=b"pw") == expected_wire(data)


# --- issue 11: big values and range replies ----------------------------------------------------

_bulks = st.one_of(st.binary(max_size=12), st.sampled_from([b"", b"x" * 1023, b"y" * 1024,
                                                            b"z" * BIG_BULK]))
_entry_ids = st.integers(0, 2**64 - 1).map(lambda n: b"%d-%d" % (n, n % 7))


@st.composite
def _entries(draw: st.DrawFn) -> list:
    """XRANGE-shaped replies: mostly uniform [id, [f, v, ...]], sometimes not (other field
    counts, tuples, a non-bytes element), long enough for the fast path and its chunks."""
    k = draw(st.integers(1, 4))
    n = draw(st.sampled_from([8, 9, 40, 2049, 4100]))
    seqs = draw(st.sampled_from([list, tuple]))
    # Field names every entry shares (the usual stream) take the constant-element layout.
    names = draw(st.one_of(st.none(), st.lists(_bulks, min_size=k, max_size=k)))
    entries: list[Any] = []
    for _ in range(n):
        if draw(st.integers(0, 200)) == 0:
            entries.append(draw(st.sampled_from([
                [b"1-1", [b"f"] * (k + 1)], [b"1-1", [7, b"v"]], (b"1-1", (b"f", None)),
                b"not an entry", [b"1-1"], [b"1-1", [b"f"], b"extra"]])))
            continue
        flat = [draw(_bulks) for _ in range(2 * k)]
        if names is not None:
            flat[0::2] = names
        entries.append([draw(_entry_ids), seqs(flat)])
    return entries


@pytest.mark.usefixtures("twin")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries(), st.sampled_from([2, 3]))
def test_range_replies_encode_byte_for_byte_as_the_generic_path(entries: list, protocol: int):
    """The entries fast path, in a bytearray and in a ReplyBuffer (big bulks by reference), is
    byte-identical to the generic encoding: an array is its header and its elements' encodings,
    and one entry alone (2 elements) never takes the fast path."""
    generic = b"*%d\r\n" % len(entries) + b"".join(encode_reply(e, protocol) for e in entries)
    assert encode_reply(entries, protocol) == generic
    buf = ReplyBuffer()
    write_reply(buf, entries, protocol)
    assert b"".join(buf.parts()) == generic
    assert buf.size() == len(generic)
    assert all(value is not None for _, value in buf.big)


@pytest.mark.usefixtures("twin")
def test_reply_buffer_keeps_big_bulks_by_reference() -> None:
    value = b"v" * BIG_BULK
    buf = ReplyBuffer()
    write_reply(buf, [[b"1-1", [b"f", value]], b"tail"], 2)
    assert len(buf) < 100 and buf.size() == len(encode_reply([[b"1-1", [b"f", value]], b"tail"]))
    assert any(part is value for part in buf.parts())
    other = ReplyBuffer()
    other += b"+OK\r\n"
    other.extend_buffer(buf)
    assert b"".join(other.parts()) == b"+OK\r\n" + b"".join(buf.parts())
    assert other.materialized() == b"".join(other.parts())


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("value_size", [2000, BIG_BULK])
def test_reply_buffer_stops_a_reply_over_its_limit_while_encoding(value_size: int) -> None:
    """A 100 MB reply into a buffer limited to 1 MB stops near 1 MB, not after the whole."""
    count = 100 * (1 << 20) // value_size
    entries = [[b"%d-1" % i, [b"f", b"v" * value_size]] for i in range(count)]
    buf = ReplyBuffer(limit=1 << 20)
    with pytest.raises(OutputLimitReached):
        write_reply(buf, entries, 2)
    assert buf.size() < 2 << 20
    small = ReplyBuffer(limit=1 << 20)
    write_reply(small, entries[:10], 2)  # within the limit: no error
    assert b"".join(small.parts()) == encode_reply(entries[:10])


@pytest.mark.usefixtures("twin")
def test_big_bulk_is_copied_once_and_never_into_the_shared_buffer() -> None:
    """An 8 MB argument arriving in 64 KiB reads: the parser's memory peaks near the value's size
    (the bulk accumulated alone, handed over without a final copy), not at 3x (the buffer grown
    to hold it, then a slice, then bytes())."""
    import tracemalloc

    size = 8 << 20
    request = b"*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$%d\r\n" % size + b"v" * size + b"\r\n"
    chunks = [request[i:i + 65536] for i in range(0, len(request), 65536)]
    del request
    parser = RequestParser()
    tracemalloc.start()
    try:
        commands = []
        for chunk in chunks:
            parser.feed(chunk)
            while (argv := parser.next()) is not None:
                commands.append(argv)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(a) for a in commands[0]] == [4, 1, size] and commands[0][2] == b"v" * size
    assert peak < 1.5 * size, f"parsing peaked at {peak / size:.1f}x the value"
    assert parser.pending_bytes() == 0


# --- linear parsing whatever the payload (issue #11 A) --------------------------------------------


def _parse_all(wire: bytes, cuts: list[int]) -> tuple[list[list[bytes]], str | None]:
    parser = RequestParser()
    got: list[list[bytes]] = []
    try:
        for piece in chunked(wire, cuts):
            parser.feed(piece)
            while (cmd := parser.next()) is not None:
                got.append(cmd)
    except ProtocolError as err:
        return got, str(err)
    return got, None


crlf_pipelines = st.lists(
    st.one_of(
        argvs.map(lambda cmds: b"".join(encode_command(argv) for argv in cmds)),
        st.lists(st.sampled_from([b"a\r\nb", b"\r\n", b"\r", b"\n", b"x"]), max_size=6)
        .map(lambda parts: encode_command([b"ECHO", b"".join(parts)])),
        st.sampled_from([b"PING\r\n", b"\r\n", b"*0\r\n", b"*-1\r\n"]),
        fragments,
    ),
    max_size=12,
).map(b"".join)


@PROPERTY
@given(crlf_pipelines, st.lists(st.integers(min_value=0), max_size=10))
def test_batch_and_byte_by_byte_parsers_agree(twin: Any, wire: bytes, cuts: list[int]) -> None:
    """The batch fast path (with its debt rule) parses exactly what the byte-by-byte parser
    does: the same commands, then the same error, whatever the chunking."""
    with_batch = _parse_all(wire, cuts)
    with mock.patch.object(twin, "_BATCH_WINDOW", 0):  # the batch never runs
        assert _parse_all(wire, cuts) == with_batch


def _parse_seconds(wire: bytes) -> float:
    best = math.inf
    for _ in range(3):
        parser = RequestParser()
        start = time.perf_counter()
        for i in range(0, len(wire), 1 << 18):  # reads of up to 256 KiB, as the server's
            parser.feed(wire[i: i + (1 << 18)])
            while parser.next() is not None:
                pass
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("request_bytes", [
    b"*1\r\n$2\r\n\r\n\r\n",  # the probe: a bulk that is CRLF
    b"*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$4\r\na\r\nb\r\n",
    b"PING\r\n*1\r\n$4\r\nPING\r\n",  # inline and multibulk alternating
])
@pytest.mark.usefixtures("twin")
def test_parsing_is_linear_whatever_the_payload(request_bytes: bytes) -> None:
    """Requests the batch fast path cannot take cost what the byte-by-byte parser costs, not
    a re-split of everything buffered behind them each (240 KB of the probe took 4.5 s)."""
    size = 240_000
    plain = b"*1\r\n$4\r\nPING\r\n"
    baseline = _parse_seconds(plain * (size // len(plain)))
    probe = _parse_seconds(request_bytes * (size // len(request_bytes)))
    assert probe < 8 * baseline, f"{probe:.3f} s against {baseline:.3f} s for plain PINGs"


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("protocol", [2, 3])
def test_entries_with_a_deleted_entrys_nil_encode_like_the_generic_path(protocol: int) -> None:
    """XAUTOCLAIM / XINFO STREAM FULL reply [id, nil] for a deleted entry: the entries fast path
    must hand such a chunk to the generic loop (it once raised TypeError, killing the
    connection, on arrays of 8 or more)."""
    entries = [[b"%d-0" % i, NULL_ARRAY if i % 3 == 1 else [b"f", b"v"]] for i in range(20)]
    expected = (b"*%d\r\n" % len(entries)) + b"".join(encode_reply(e, protocol)
                                                      for e in entries)
    assert encode_reply(entries, protocol) == expected


@pytest.mark.usefixtures("twin")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries(), st.sampled_from([2, 3]))
def test_entry_arrays_encode_byte_for_byte_as_plain_lists(entries: list, protocol: int) -> None:
    """The model's EntryArray (two columns, types trusted) encodes exactly as the same entries
    in a plain list through the generic path, in a bytearray and in a ReplyBuffer."""
    valid = [[e[0], tuple(e[1])] for e in entries
             if type(e) is list and len(e) == 2 and type(e[0]) is bytes
             and type(e[1]) in (list, tuple) and all(type(x) is bytes for x in e[1])]
    array = EntryArray([e[0] for e in valid], [e[1] for e in valid])
    generic = b"*%d\r\n" % len(valid) + b"".join(encode_reply(e, protocol) for e in valid)
    assert encode_reply(array, protocol) == generic
    buf = ReplyBuffer()
    write_reply(buf, [b"key", array], protocol)
    assert b"".join(buf.parts()) == b"*2\r\n$3\r\nkey\r\n" + generic


@pytest.mark.usefixtures("twin")
def test_entry_array_reads_as_the_list_of_its_entries() -> None:
    array = EntryArray([b"1-1", b"2-1", b"3-1"], [(b"f", b"a"), (b"f", b"b"), (b"g", b"c", b"h", b"d")])
    plain = [[b"1-1", (b"f", b"a")], [b"2-1", (b"f", b"b")], [b"3-1", (b"g", b"c", b"h", b"d")]]
    assert len(array) == 3 and bool(array) and not EntryArray()
    assert array[0] == plain[0] and array[-1] == plain[-1]
    assert array[1:] == plain[1:] and type(array[1:]) is EntryArray
    assert list(array) == plain and array == plain and array != plain[:2]
    assert array == EntryArray(list(array.ids), list(array.fields))
    assert to_plain(array) == [[i, list(f)] for i, f in plain]
    assert to_plain([b"k", array]) == [b"k", [[i, list(f)] for i, f in plain]]
    # A wrong element (never built by the model) fails the fast path in C, before anything is
    # written, and the chunk goes the generic way.
    bad = EntryArray([b"1-1"] * 9, [(b"f", 7)] * 9)
    assert encode_reply(bad, 2) == encode_reply([[b"1-1", [b"f", 7]]] * 9, 2)


# --------------------------------------------------------------------------------------------
# decode_reply: the one-shot RESP2 reply decoder (round-trips against encode_reply, every
# prefix incomplete, malformed input and deep nesting refused)
# --------------------------------------------------------------------------------------------

_dec_simple = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)))
_dec_scalars = st.one_of(
    st.none(), st.binary(max_size=64), st.integers(-(2**63), 2**63 - 1), _dec_simple,
    _dec_simple.map(resp.ErrorReply),
)
_dec_replies = st.recursive(_dec_scalars, lambda inner: st.lists(inner, max_size=6),
                            max_leaves=40)


def _dec_wire(value: Any) -> bytes:
    """RESP2 bytes for a decoded value (resp.ErrorReply back to the encoder's ReplyError)."""
    if isinstance(value, resp.ErrorReply):
        return resp.encode_reply(ReplyError(str(value)))
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(_dec_wire(v) for v in value)
    return resp.encode_reply(value)


def _dec_same(a: Any, b: Any) -> bool:
    """Equal, with resp.ErrorReply and str told apart."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_dec_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@given(_dec_replies)
def test_decode_round_trip(value: Any) -> None:
    data = _dec_wire(value)
    got = resp.decode_reply(data)
    assert got is not None
    assert _dec_same(got[0], value)
    assert got[1] == len(data)


@given(_dec_replies, st.binary(max_size=16))
def test_decode_round_trip_in_a_bytearray_after_other_bytes(value: Any, before: bytes) -> None:
    data = _dec_wire(value)
    buf = bytearray(before + data + b"+next\r\n")
    got = resp.decode_reply(buf, len(before))
    assert got is not None and _dec_same(got[0], value)
    assert resp.decode_reply(buf, got[1]) == ("next", len(buf))


@given(_dec_replies)
def test_decode_every_prefix_is_incomplete(value: Any) -> None:
    data = _dec_wire(value)
    for cut in range(len(data)):
        assert resp.decode_reply(data[:cut]) is None


@given(st.lists(st.binary(max_size=20), max_size=5))
def test_decode_a_request_is_an_array_of_bulks(argv: list[bytes]) -> None:
    assert resp.decode_reply(resp.encode_command(argv)) == (argv, len(resp.encode_command(argv)))


def test_decode_values_and_types() -> None:
    assert resp.decode_reply(b"+OK\r\n") == ("OK", 5)
    err = resp.decode_reply(b"-LOADING Redis is loading\r\n")
    assert err is not None and type(err[0]) is resp.ErrorReply
    assert err[0] == "LOADING Redis is loading"
    assert resp.decode_reply(b"$-1\r\n") == (None, 5)
    assert resp.decode_reply(b"*-1\r\n") == (None, 5)
    assert resp.decode_reply(b"*0\r\n") == ([], 4)
    assert resp.decode_reply(b":-7\r\n") == (-7, 5)
    assert resp.decode_reply(b"*2\r\n*1\r\n$1\r\na\r\n:1\r\n") == ([[b"a"], 1], 19)


@pytest.mark.parametrize("data", [
    b"$3\r\nabcd\r\n", b"$-2\r\n", b"*-5\r\n", b":x\r\n", b"%1\r\n", b"?\r\n", b"_\r\n",
])
def test_decode_refuses_malformed_input_is_refused(data: bytes) -> None:
    with pytest.raises(resp.ProtocolError):
        resp.decode_reply(data)


def test_decode_nesting_is_bounded() -> None:
    ok = b"*1\r\n" * resp.MAX_REPLY_DEPTH + b":1\r\n"
    got = resp.decode_reply(ok)
    assert got is not None and got[1] == len(ok)
    with pytest.raises(resp.ProtocolError):
        resp.decode_reply(b"*1\r\n" * (resp.MAX_REPLY_DEPTH + 1) + b":1\r\n")


def test_decode_a_deep_incomplete_reply_is_incomplete_not_an_error() -> None:
    assert resp.decode_reply(b"*1\r\n" * 10) is None
