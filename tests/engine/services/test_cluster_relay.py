"""The links that carry a cluster node's published messages to the other nodes: a node that
reads nothing never grows the sender's memory past a link's outbox (what does not fit is
dropped and counted), and a link to a node that is down drops what waits for it."""

from __future__ import annotations

import socket

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.cluster import ClusterNode
from streamkeep.engine.services import cluster_relay
from streamkeep.engine.services.cluster_relay import Link, Relay


@pytest.fixture
def relay():
    engine = Engine()
    relay = Relay(engine)
    yield relay
    relay.close()
    engine.close()


def test_a_node_that_reads_nothing_gets_a_bounded_outbox(relay, monkeypatch):
    monkeypatch.setattr(cluster_relay, "OUTBOX_BYTES", 64 * 1024)
    with socket.socket() as deaf:  # listens, never accepts, never reads
        deaf.bind(("127.0.0.1", 0))
        deaf.listen(1)
        node = ClusterNode("a" * 40, "127.0.0.1", deaf.getsockname()[1], 0, "s" * 40)
        link = Link(relay, node)
        frame = b"x" * 4096
        for _ in range(20_000):  # 80 MB offered: more than any socket buffer takes
            link.put(frame)
            assert link.queued <= 64 * 1024
        assert link.dropped > 0
        link.close(join=True)
        assert not link.thread.is_alive()


def test_a_node_that_is_down_drops_what_waits(relay):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    node = ClusterNode("b" * 40, "127.0.0.1", port, 0, "s" * 40)
    link = Link(relay, node)
    link.put(b"x" * 100)
    for _ in range(500):
        if link.dropped:
            break
        link.thread.join(0.01)
    assert link.dropped == 1 and link.queued == 0
    link.close(join=True)
    assert not link.thread.is_alive()
