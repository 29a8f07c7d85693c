"""A tiny blocking RESP2 client over a raw socket, for exact-reply tests.

Unlike redis-py it applies no response callbacks, so replies keep the exact
RESP type the server sent:

* simple string (``+OK``)   -> ``str``
* bulk string (``$3 foo``)  -> ``bytes``
* null bulk / null array    -> ``None``
* integer (``:1``)          -> ``int``
* array (``*2 ...``)        -> ``list`` (nested as sent)
* error (``-ERR ...``)      -> raised as :class:`RespError` when it is the whole
  reply; an error nested inside an array (e.g. in an ``EXEC`` reply) is
  returned in place as a :class:`RespError` instance instead of being raised.

``str(RespError)`` is the exact error line without the leading ``-``.
``read_raw_reply(f)`` reads one RESP2/RESP3 reply from a socket's file as the exact bytes sent.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator
from typing import Any

try:  # Let tests catch redis.ResponseError too, when redis-py is installed.
    from redis.exceptions import ResponseError as _ErrorBase
except ImportError:  # pragma: no cover - redis-py is a dev dependency
    _ErrorBase = Exception  # type: ignore[assignment,misc]

Arg = str | bytes | bytearray | memoryview | int | float

DEFAULT_TIMEOUT = 60.0


class RespError(_ErrorBase):
    """An error reply. ``str(err)`` is the exact line without the leading '-'."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line

    @property
    def prefix(self) -> str:
        """The error code, i.e. the first word of the line (``ERR``, ``WRONGTYPE``, ...)."""
        return self.line.split(" ", 1)[0]

    def __str__(self) -> str:
        return self.line

    def __repr__(self) -> str:
        return f"RespError({self.line!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RespError):
            return self.line == other.line
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.line)


class RespProtocolError(Exception):
    """The server sent something that is not valid RESP2."""


def _encode_arg(arg: Arg) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, bytearray | memoryview):
        return bytes(arg)
    if isinstance(arg, str):
        return arg.encode("utf-8")
    if isinstance(arg, bool):  # bool is an int subclass; "True" is never what you want
        raise TypeError("bool is not a valid command argument")
    if isinstance(arg, int):
        return str(arg).encode("ascii")
    if isinstance(arg, float):
        return repr(arg).encode("ascii")
    raise TypeError(f"unsupported argument type {type(arg).__name__}: {arg!r}")


def read_raw_reply(f: Any) -> bytes:
    """One complete RESP2/RESP3 reply, as the exact bytes the server sent (read without
    recursion: a script's reply may nest thousands of levels deep)."""
    out = []
    pending = 1  # values still to read
    while pending:
        pending -= 1
        line = f.readline()
        assert line.endswith(b"\r\n"), line
        out.append(line)
        kind = line[:1]
        if kind in (b"$", b"=", b"!"):
            n = int(line[1:-2])
            if n >= 0:
                out.append(f.read(n + 2))
        elif kind in (b"*", b"~", b">", b"%"):
            n = int(line[1:-2])
            pending += max(2 * n if kind == b"%" else n, 0)
    return b"".join(out)


def encode_command(*argv: Arg) -> bytes:
    """Encode argv as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(argv)]
    for arg in argv:
        data = _encode_arg(arg)
        parts.append(b"$%d\r\n" % len(data))
        parts.append(data)
        parts.append(b"\r\n")
    return b"".join(parts)


class RespClient:
    """One blocking connection speaking RESP2.

    ``execute(*argv)`` sends a command and returns its reply. For blocking
    commands driven from several connections, ``send(*argv)`` and ``read()``
    may be used separately. After a socket timeout the connection state is
    unknown; close it rather than reuse it.
    """

    def __init__(self, host: str, port: int, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.host = host
        self.port = port
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._rfile = self._sock.makefile("rb")

    # -- public API ---------------------------------------------------------

    def execute(self, *argv: Arg) -> Any:
        """Send one command and return its reply; raise RespError on an error reply."""
        self.send(*argv)
        return self.read()

    def pipeline(self, *commands: tuple[Arg, ...]) -> list[Any]:
        """Send several commands at once; return their replies (errors returned, not raised)."""
        self._sock.sendall(b"".join(encode_command(*cmd) for cmd in commands))
        return [self._read_reply() for _ in commands]

    def send(self, *argv: Arg) -> None:
        if not argv:
            raise ValueError("empty command")
        self._sock.sendall(encode_command(*argv))

    def send_raw(self, data: bytes) -> None:
        """Write raw bytes (e.g. an inline or deliberately malformed command)."""
        self._sock.sendall(data)

    def read(self) -> Any:
        """Read one reply; raise RespError if it is an error reply."""
        reply = self._read_reply()
        if isinstance(reply, RespError):
            raise reply
        return reply

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def close(self) -> None:
        try:
            self._rfile.close()
        finally:
            self._sock.close()

    def __enter__(self) -> RespClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- parsing ------------------------------------------------------------

    def _readline(self) -> bytes:
        line = self._rfile.readline()
        if not line:
            raise ConnectionError("connection closed by server")
        if not line.endswith(b"\r\n"):
            raise RespProtocolError(f"unterminated line: {line!r}")
        return line[:-2]

    def _read_exact(self, n: int) -> bytes:
        data = self._rfile.read(n)
        if data is None or len(data) != n:
            raise ConnectionError("connection closed by server mid-reply")
        return data

    def _read_reply(self) -> Any:
        line = self._readline()
        if not line:
            raise RespProtocolError("empty reply line")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode("utf-8", "surrogateescape")
        if kind == b"-":
            return RespError(rest.decode("utf-8", "surrogateescape"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n == -1:
                return None
            if n < 0:
                raise RespProtocolError(f"bad bulk length {n}")
            data = self._read_exact(n + 2)
            if data[-2:] != b"\r\n":
                raise RespProtocolError("bulk string not terminated by CRLF")
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n == -1:
                return None
            if n < 0:
                raise RespProtocolError(f"bad array length {n}")
            return [self._read_reply() for _ in range(n)]
        raise RespProtocolError(f"unknown reply type {line!r}")


@contextlib.contextmanager
def client_factory(default: Any, default_timeout: float | None = DEFAULT_TIMEOUT
                   ) -> Iterator[Callable[..., RespClient]]:
    """``factory(timeout=..., handle=None)`` opens a RespClient to ``handle`` (anything with
    ``.host`` and ``.port``; ``default`` when None); all are closed on exit."""
    opened: list[RespClient] = []

    def factory(timeout: float | None = default_timeout, handle: Any = None) -> RespClient:
        target = handle or default
        client = RespClient(target.host, target.port, timeout=timeout)
        opened.append(client)
        return client

    try:
        yield factory
    finally:
        for client in opened:
            with contextlib.suppress(OSError):
                client.close()
