"""The server's request parser (engine/wire/request_parser.py), run against each twin: Redis's
request-parsing rules and error lines (checked against a real redis-server), its limits, pipelines
in any chunking, big bulks, linear parsing whatever the payload, and fuzz.
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

from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply_encoder import encode_reply
from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.engine.wire.request_parser import (
    COMPACT_AT,
    PROTO_INLINE_MAX_SIZE,
    ProtocolError,
    QueryBufferLimit,
    RequestParser,
    drop_parsed,
)
from tests.support.kernels import kernel_fixture
from tests.support.resp_cases import chunked, fragments, garbage

parser_twin = kernel_fixture("streamkeep.engine.wire", "request_parser")


@pytest.fixture(scope="module")
def twin(parser_twin: Any) -> Iterator[Any]:
    """Runs a test against each twin of the request parser (`_request_parser_py`,
    `_request_parser_c`): while it runs, this module's `RequestParser` is the twin's."""
    names = ("RequestParser",)
    saved = {name: globals()[name] for name in names}
    globals().update({name: getattr(parser_twin, name) for name in names})
    yield parser_twin
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
    """A corrupt stream from a peer is not a refusal: `except ReplyError` must not catch it,
    yet both are streamkeep's errors and a protocol error still encodes as the error line Redis
    sends before closing."""
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


def test_drop_parsed_compacts_when_all_is_parsed_or_past_the_threshold() -> None:
    """The rule both parsers compact their buffer by, before new bytes are appended."""
    buf = bytearray(b"abc")
    assert drop_parsed(buf, 3) and buf == b""
    buf = bytearray(b"x" * (COMPACT_AT + 10))
    assert not drop_parsed(buf, COMPACT_AT - 1) and len(buf) == COMPACT_AT + 10
    assert drop_parsed(buf, COMPACT_AT) and buf == b"x" * 10


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

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


# --- big values --------------------------------------------------------------------------


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


# --- linear parsing whatever the payload ----------------------------------------------------


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
