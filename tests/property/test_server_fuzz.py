"""Hypothesis-generated garbage sent to a live streamkeep server over a socket: random bytes and
mutations of valid RESP requests (truncations, wrong bulk lengths, huge or bad counts, bad
markers, flipped bytes, broken line ends, valid commands in between, inline requests), with and
without a password (the unauthenticated parser limits).

After every example: the server still answers a fresh connection, everything it sent the
garbage client is well-formed RESP, nothing went wrong inside the event loop (no exception
logged), a write another client sent in the middle was applied exactly once, and the data is
intact (XLEN, and DEBUG DIGEST equal to a shadow engine that ran only the legitimate writes).
The valid pieces in the garbage are reads (and failing AUTHs), so any other change is a bug.

The same garbage also goes to a real redis-server holding the same data: the bytes it answers
until it closes the connection must be the same (the parser's protocol errors, which commands
run before one, unknown-command lines, NOAUTH ordering).
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streamkeep import Engine
from streamkeep.engine.wire.reply_parser import NEED_MORE, ProtocolError, ReplyParser
from streamkeep.engine.wire.request_parser import RequestParser
from tests.support.resp_client import RespClient, encode_command
from tests.support.server_util import read_until_closed, start_server

PASSWORD = "fuzz pw"
CLOCK_MS = 1_700_000_000_000
KEEP = 50

READS = [
    ("PING",), ("PING", "x"), ("ECHO", "hello world"), ("XLEN", "keep"),
    ("XRANGE", "keep", "-", "+", "COUNT", "2"), ("XREVRANGE", "keep", "+", "-", "COUNT", "1"),
    # XINFO GROUPS, not STREAM: 8.6 added fields to XINFO STREAM that the 7.0 oracle lacks.
    ("XINFO", "GROUPS", "keep"), ("XPENDING", "keep", "g"), ("XREAD", "COUNT", "1", "STREAMS",
                                                              "keep", "0"),
    ("EXISTS", "keep"), ("TYPE", "keep"), ("DBSIZE",), ("XLEN", "nokey"), ("AUTH", "wrong"),
    ("AUTH", PASSWORD), ("HELLO", "2"),
]
VALID = [encode_command(*argv) for argv in READS]
INLINE = [b"PING\r\n", b"XLEN keep\n", b'ECHO "a b\\x00c"\r\n', b"ECHO 'it''s'\r\n",
          b"\r\n", b"\n", b"   \r\n", b'PING "unclosed\r\n', b"AUTH wrong\r\n"]
# For the comparison with redis-server: no HELLO (its reply names the version and client id),
# no DBSIZE (the other test's writes count here), no XREAD (its mutations reach 8.x-only
# behaviour: the unbalanced-streams text, the `+` ID; the local oracle is 7.0), and no NUL byte
# in inline lines (tests/engine/server/test_network.py's test_unknown_command_line_cuts_at_nul and
# test_nul_bytes_in_framing_like_redis compare those).
DIFF_VALID = [encode_command(*argv) for argv in READS
              if argv[0] not in ("HELLO", "DBSIZE", "XREAD")]
DIFF_INLINE = [line.replace(b"\\x00", b"\\x41") for line in INLINE]
HUGE = [2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, (512 << 20) + 1, 16385, 1 << 20]
SETUP = [("XADD", "keep", f"{i}-1", "f", f"value {i}") for i in range(1, KEEP + 1)] + [
    ("XGROUP", "CREATE", "keep", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "keep", ">"),
]


@st.composite
def piece(draw: st.DrawFn, valid: list[bytes], inline: list[bytes]) -> bytes:
    kind = draw(st.sampled_from(["random", "valid", "inline", "truncate", "length", "count",
                                 "marker", "flip", "crlf"]))
    if kind == "random":
        return draw(st.binary(max_size=80))
    if kind == "inline":
        return draw(st.sampled_from(inline))
    cmd = draw(st.sampled_from(valid))
    if kind == "valid":
        return cmd
    if kind == "truncate":
        return cmd[: draw(st.integers(0, len(cmd) - 1))]
    if kind == "length":  # one bulk header's length changed
        headers = list(re.finditer(rb"\$(\d+)\r\n", cmd))
        m = draw(st.sampled_from(headers))
        n = draw(st.one_of(st.integers(-3, 40), st.sampled_from(HUGE)))
        return cmd[: m.start(1)] + str(n).encode() + cmd[m.end(1):]
    if kind == "count":  # the multibulk count changed
        end = cmd.index(b"\r\n")
        count = draw(st.one_of(st.integers(-3, 20).map(str), st.sampled_from(HUGE).map(str),
                               st.sampled_from(["", "x", "1x", " 3", "+3", "03", "-0"])))
        return b"*" + count.encode() + cmd[end:]
    if kind == "marker":  # a '$' or '*' replaced
        spots = [i for i, c in enumerate(cmd) if c in b"$*"]
        i = draw(st.sampled_from(spots))
        return cmd[:i] + bytes([draw(st.integers(0, 255))]) + cmd[i + 1:]
    if kind == "flip":
        i = draw(st.integers(0, len(cmd) - 1))
        return cmd[:i] + bytes([draw(st.integers(0, 255))]) + cmd[i + 1:]
    # "crlf": a line end dropped or replaced
    spots = [i for i, c in enumerate(cmd) if c in b"\r\n"]
    i = draw(st.sampled_from(spots))
    return cmd[:i] + draw(st.sampled_from([b"", b"\n", b"\r", b"\r\r", b" "])) + cmd[i + 1:]


garbage = st.lists(piece(VALID, INLINE), min_size=1, max_size=6).map(b"".join)
diff_garbage = st.lists(piece(DIFF_VALID, DIFF_INLINE), min_size=1, max_size=6).map(
    lambda pieces: b"".join(pieces).replace(b"\x00", b"\x01"))


class ErrorLog(logging.Handler):
    """ERROR records of asyncio (an exception escaping a protocol callback) and the server."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Target:
    def __init__(self, password: str) -> None:
        def clock() -> int:
            return CLOCK_MS

        self.password = password
        self.engine = Engine(clock=clock, requirepass=password)
        self.shadow = Engine(clock=clock)  # only the legitimate writes
        for argv in SETUP:
            self.engine.execute(*argv)
            self.shadow.execute(*argv)
        self.handle = start_server(self.engine)
        self.control = self.connect()
        self.writes = 0

    def connect(self) -> RespClient:
        client = RespClient(self.handle.host, self.handle.port, timeout=10)
        if self.password:
            assert client.execute("AUTH", self.password) == "OK"
        return client

    def close(self) -> None:
        self.control.close()
        self.handle.stop()


@pytest.fixture(scope="module", params=["open", "password"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    errors = ErrorLog()
    loggers = [logging.getLogger("asyncio"), logging.getLogger("streamkeep")]
    for logger in loggers:
        logger.addHandler(errors)
    t = Target(PASSWORD if request.param == "password" else "")
    t.errors = errors  # type: ignore[attr-defined]
    try:
        yield t
    finally:
        t.close()
        for logger in loggers:
            logger.removeHandler(errors)


@pytest.fixture(scope="module")
def redis_like(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A private redis-server (the port) with the target's password and the same data."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server not found on PATH", pytrace=False)
    port = _free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
            "no", "--dir", str(tmp_path_factory.mktemp("redis-fuzz"))]
    if t_password := target.password:
        argv += ["--requirepass", t_password]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = _connect_when_up(port, proc)
        if t_password:
            assert client.execute("AUTH", t_password) == "OK"
        for argv in SETUP:
            client.execute(*argv)
        client.close()
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _connect_when_up(port: int, proc: subprocess.Popen) -> RespClient:
    deadline = time.monotonic() + 10
    while True:
        try:
            return RespClient("127.0.0.1", port, timeout=10)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def exchange(port: int, data: bytes) -> bytes:
    """Send `data` then EOF; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        return read_until_closed(sock)


def check_example(t: Target, data: bytes, cut: int) -> None:
    cut %= len(data) + 1
    sock = socket.create_connection((t.handle.host, t.handle.port), timeout=10)
    try:
        with contextlib.suppress(OSError):
            sock.sendall(data[:cut])
        # Another client's write in the middle of the garbage.
        t.writes += 1
        argv = ("XADD", "ctl", f"{t.writes}-1", "n", str(t.writes))
        assert t.control.execute(*argv) == f"{t.writes}-1".encode()
        t.shadow.execute(*argv)
        with contextlib.suppress(OSError):  # the server may have closed it already
            sock.sendall(data[cut:])
            sock.shutdown(socket.SHUT_WR)  # the server closes on EOF: read everything it sent
        received = read_until_closed(sock)  # a hang here (timeout) fails the example
    finally:
        sock.close()
    parser = ReplyParser()  # whatever the server sent is well-formed RESP
    parser.feed(received)
    while parser.next() is not NEED_MORE:
        pass
    assert parser.pending_bytes() == 0, received[-200:]
    assert t.handle.thread.is_alive()
    with t.connect() as fresh:
        assert fresh.execute("PING") == "PONG"
    assert not t.errors.records, [r.getMessage() for r in t.errors.records]  # type: ignore
    assert t.control.execute("XLEN", "ctl") == t.writes  # applied exactly once
    assert t.control.execute("XLEN", "keep") == KEEP
    assert t.control.execute("DEBUG", "DIGEST") == t.shadow.digest()


@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=garbage, cut=st.integers(0, 1 << 16))
def test_garbage_never_hurts_the_server(target, data, cut):
    check_example(target, data, cut)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=garbage, cut=st.integers(0, 1 << 16))
def test_garbage_never_hurts_the_server_long(target, data, cut):
    check_example(target, data, cut)


# Commands whose replies describe the server itself (version, clients, clock, config): a
# mutation can turn a valid piece into one of them (XINFO loses its X), and then the two
# servers answer differently by design.
SERVER_SPECIFIC = {b"info", b"hello", b"client", b"command", b"config", b"debug", b"time",
                   b"lastsave", b"dbsize", b"save", b"bgsave", b"bgrewriteaof", b"shutdown",
                   b"wait", b"role", b"memory", b"latency", b"slowlog", b"acl", b"lolwut"}


def command_names(data: bytes) -> set[bytes]:
    parser = RequestParser()
    parser.feed(data)
    names: set[bytes] = set()
    with contextlib.suppress(ProtocolError):
        while (argv := parser.next()) is not None:
            names.add(argv[0].lower())
    return names


def same_as_redis(target: Target, redis_port: int, data: bytes) -> None:
    assume(not command_names(data) & SERVER_SPECIFIC)
    assert exchange(target.handle.port, data) == exchange(redis_port, data)


@pytest.mark.redis
@settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=diff_garbage)
def test_garbage_gets_the_same_answer_as_redis(target, redis_like, data):
    same_as_redis(target, redis_like, data)


@pytest.mark.slow
@pytest.mark.redis
@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=diff_garbage)
def test_garbage_gets_the_same_answer_as_redis_long(target, redis_like, data):
    same_as_redis(target, redis_like, data)
