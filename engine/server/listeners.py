"""Listening sockets bound ahead of the server's start: every address of each host of a
`bind` setting, on one port.

Owns `bind_all(bind, port)` and `BindError`. `streamkeep serve` binds its ports with it before
the data directory is opened (a busy port is found first); the server binds its TLS port with
it (it keeps those sockets, and listens on duplicates of them: engine.server.network). Must not
touch: listening itself (asyncio's create_server calls listen), connections.
"""

from __future__ import annotations

import socket

from streamkeep.engine.wire.errors import StreamkeepError

__all__ = ["DEFAULT_BIND", "BindError", "bind_all"]

DEFAULT_BIND = "127.0.0.1"


class BindError(StreamkeepError):
    """An address that cannot be bound; `usage` when it does not even parse (a bad setting
    rather than a busy port)."""

    def __init__(self, message: str, usage: bool) -> None:
        super().__init__(message)
        self.usage = usage


def bind_all(bind: str, port: int) -> list[socket.socket]:
    """Sockets bound on every address of each of `bind`'s hosts (port 0: the first one bound
    picks the port the others take), as asyncio's create_server binds them (SO_REUSEADDR, IPv6
    only on IPv6 addresses), non-blocking, not yet listening. BindError otherwise, nothing
    left open."""
    sockets: list[socket.socket] = []
    try:
        for host in bind.split() or [DEFAULT_BIND]:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                           flags=socket.AI_PASSIVE)
            except socket.gaierror as err:
                raise BindError(f"bind {host}: not an address this host has ({err.strerror})",
                                usage=True) from None
            except (UnicodeError, ValueError):  # (a name the resolver cannot even encode)
                raise BindError(f"bind {host}: not an address", usage=True) from None
            for family, kind, proto, _name, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind((address[0], port, *address[2:]))
                except OSError as err:
                    raise BindError(f"cannot listen on {host} port {port}: "
                                    f"{err.strerror or err}", usage=False) from None
                sock.setblocking(False)
                port = sock.getsockname()[1]
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets
