"""`RespTarget`: the crash bench's `Target` over one blocking TCP connection, RESP2, for both
`streamkeep serve` and redis-server.

Owns the socket and the mapping of what happens on it to the bench's outcomes: a reply is a
value, an error reply `CommandFailed`, and no reply (EOF, a reset, a timeout, any socket error)
`ConnectionLost`, after which the object is dead (a half-read reply would desynchronise it).
Must not touch: the servers' processes (tools/servers.py) or what the commands mean.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.reply_parser import (
    ErrorReply,
    ProtocolError,
    decode_reply,
    encode_command,
)
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost

CONNECT_TIMEOUT = 2.0
COMMAND_TIMEOUT = 10.0
RECV_SIZE = 64 * 1024


def _pending(sock: socket.socket) -> bool:
    """Bytes (or an EOF) are waiting to be read now. poll, not select: a process with more
    than 1024 descriptors open (a test worker, a busy bench) makes select() refuse."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class RespTarget:
    """One connection to host:port. `execute(argv)` sends one command and waits for its reply
    (at most `timeout` seconds: a server stopped with SIGSTOP or wedged counts as lost)."""

    def __init__(self, host: str, port: int, connect_timeout: float = CONNECT_TIMEOUT,
                 timeout: float = COMMAND_TIMEOUT) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._buf = bytearray()
        self._sock: socket.socket | None = None
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout)
        except OSError as err:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {err}") from err
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout)
        self._sock = sock

    @property
    def dead(self) -> bool:
        return self._sock is None

    def execute(self, argv: Sequence[bytes]) -> Any:
        """The command's reply; CommandFailed(line) for an error reply; ConnectionLost when no
        complete reply came (the command may or may not have been applied)."""
        sock = self._live()
        try:
            sock.sendall(encode_command(argv))
            value = self._read_reply(sock)
        except (OSError, ProtocolError) as err:  # socket.timeout is an OSError
            self._die()
            raise ConnectionLost(f"{self.host}:{self.port}: {err or type(err).__name__}") \
                from err
        if isinstance(value, ErrorReply):
            raise CommandFailed(str(value))
        return value

    def pipeline(self, argvs: Sequence[Sequence[bytes]]) -> list[Any]:
        """Send every command at once, then read their replies in order: the values, with a
        CommandFailed instance (not raised) for each error reply; ConnectionLost if any reply
        is missing (which of the commands were applied is then unknown)."""
        sock = self._live()
        try:
            sock.sendall(b"".join(encode_command(argv) for argv in argvs))
            replies = [self._read_reply(sock) for _ in argvs]
        except (OSError, ProtocolError) as err:
            self._die()
            raise ConnectionLost(f"{self.host}:{self.port}: {err or type(err).__name__}") \
                from err
        return [CommandFailed(str(r)) if isinstance(r, ErrorReply) else r for r in replies]

    def _live(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionLost(f"{self.host}:{self.port}: connection already lost")
        return self._sock

    def _read_reply(self, sock: socket.socket) -> Any:
        # decode_reply starts over on an incomplete reply, so a big reply arriving in many
        # reads is decoded again only once the buffer has doubled, or when nothing more is
        # waiting in the socket (the reply may be whole): linear overall, not quadratic.
        tried = 0
        while True:
            if len(self._buf) >= 2 * tried or not _pending(sock):
                tried = len(self._buf)
                got = decode_reply(self._buf, 0)
                if got is not None:
                    value, end = got
                    del self._buf[:end]
                    return value
            chunk = sock.recv(RECV_SIZE)
            if not chunk:
                raise ConnectionResetError("EOF: the server closed the connection")
            self._buf += chunk

    def _die(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def close(self) -> None:
        self._die()

    def abort(self) -> None:
        """Close with a reset: what is still in the socket's send buffer is dropped, never
        delivered later (a controller's lease must not arrive after it gave the node up)."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # (closed anyway)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._die()

    def set_timeout(self, seconds: float) -> None:
        """How long a reply may take from now on."""
        self.timeout = seconds
        if self._sock is not None:
            self._sock.settimeout(seconds)

    def __enter__(self) -> RespTarget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
