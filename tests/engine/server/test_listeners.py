"""engine.server.listeners: the sockets `streamkeep serve` and the TLS port bind ahead of the
server's start."""

from __future__ import annotations

import socket

import pytest

from streamkeep.engine.server.listeners import BindError, bind_all


def test_port_0_picks_one_port_for_every_address() -> None:
    sockets = bind_all("127.0.0.1 localhost", 0)
    try:
        ports = {sock.getsockname()[1] for sock in sockets}
        assert len(ports) == 1 and ports != {0}
        assert all(not sock.getblocking() for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def test_a_busy_port_and_a_bad_address_are_told_apart() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BindError) as busy:
            bind_all("127.0.0.1", port)
        assert not busy.value.usage and f"port {port}" in str(busy.value)
    with pytest.raises(BindError) as bad:
        bind_all("no-such-host.invalid", 0)
    assert bad.value.usage
