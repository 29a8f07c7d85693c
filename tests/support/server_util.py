"""An in-process streamkeep server for tests: `start_server(engine)` runs `engine.server.Server`
on a free loopback port in a daemon thread (tools.servers.ThreadServer, which the bench uses
too) and returns a handle with `.host`, `.port`, `.server`, `.engine` and `.stop()` (stops the
server, which closes the engine); `connect(handle)` opens a RespClient to it;
`read_until_closed(sock)` reads a raw connection to its end."""

from __future__ import annotations

import socket
from typing import Any

from streamkeep.tools.servers import ThreadServer
from tests.support.resp_client import RespClient

START_TIMEOUT = 10.0


ServerHandle = ThreadServer  # (`ServerHandle(server, thread)`: a server started elsewhere)


def start_server(engine: Any, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
    return ThreadServer.start(engine, host, port, START_TIMEOUT)


def connect(handle: ServerHandle, **kwargs: Any) -> RespClient:
    """A RespClient connected to the server (timeout 10 s unless given)."""
    return RespClient(handle.host, handle.port, timeout=kwargs.pop("timeout", 10))


def read_until_closed(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything a server sends until it closes the connection (a timeout raises)."""
    sock.settimeout(timeout)
    chunks = []
    while True:
        try:
            data = sock.recv(1 << 16)
        except ConnectionResetError:
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


__all__ = ["ServerHandle", "connect", "read_until_closed", "start_server"]
