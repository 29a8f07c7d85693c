"""An in-process streamkeep server for tests: `start_server(engine)` runs `engine.server.Server`
on a free loopback port in a daemon thread (asyncio.run, through `run_server`) and returns a
handle with `.host`, `.port`, `.server`, `.engine` and `.stop()` (stops the server, which closes
the engine); `connect(handle)` opens a RespClient to it; `read_until_closed(sock)` reads a raw
connection to its end."""

from __future__ import annotations

import socket
import threading
from typing import Any

from streamkeep.engine.server.network import Server, run_server
from tests.support.resp_client import RespClient

START_TIMEOUT = 10.0


class ServerHandle:
    def __init__(self, server: Server, thread: threading.Thread) -> None:
        self.server = server
        self.engine = server.engine
        self.host = server.host
        self.port = server.port
        self.thread = thread

    def stop(self, timeout: float = 10.0) -> None:
        """SHUTDOWN's path: stop accepting, close the clients, close the engine. Idempotent."""
        if self.thread.is_alive():
            self.server.loop.call_soon_threadsafe(self.server.request_shutdown)
            self.thread.join(timeout)
            assert not self.thread.is_alive(), "server thread did not stop"


def start_server(engine: Any, host: str = "127.0.0.1", port: int = 0) -> ServerHandle:
    server = Server(engine, host, port)
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            run_server(server, lambda _srv: ready.set())
        except BaseException as err:  # noqa: BLE001 - reported to the starting thread
            failure.append(err)
            ready.set()

    thread = threading.Thread(target=run, name=f"streamkeep-server-{id(server):x}", daemon=True)
    thread.start()
    if not ready.wait(START_TIMEOUT) or failure:
        raise RuntimeError(f"the server did not start: {failure!r}")
    return ServerHandle(server, thread)


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
