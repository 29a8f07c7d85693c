"""A cluster node's PUBLISH to every other node: what Redis's cluster bus carries, without a bus.

Owns the links to the other nodes of the topology (a thread each, made when a message first
goes to a node and ended when the node leaves the topology or the server stops) and their
outboxes. A link connects to the node's client port (its TLS port with `tls-cluster yes`),
authenticates as a replica does (masteruser/masterauth), turns replies off and sends each
message as CLUSTER RELAY channel message, which delivers it to that node's subscribers and
goes no further. Delivery is Redis's: at most once, in order per link, none after a link
fails until it is back. An outbox holds at most OUTBOX_BYTES: a node that cannot keep up
loses messages (counted), it never grows this one's memory. Must not touch: the topology
(engine.exec.cluster) and Pub/Sub's delivery (engine.exec.pubsub).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import ClusterNode
    from streamkeep.engine.exec.engine_state import EngineState

log = logging.getLogger("streamkeep.cluster")

OUTBOX_BYTES: Final = 32 * 1024 * 1024  # a link's messages waiting to be sent
CONNECT_TIMEOUT: Final = 5.0
BACKOFF_FIRST: Final = 0.1
BACKOFF_MAX: Final = 2.0
MAX_REPLY: Final = 64 * 1024  # a handshake's reply (+OK, or an error line)


class Relay:
    """The node's links, by the other node's id."""

    def __init__(self, engine: EngineState) -> None:
        self.engine = engine
        self.links: dict[str, Link] = {}
        self.lock = threading.Lock()
        self.closed = False

    def publish(self, channel: bytes, message: bytes) -> None:
        """A message a client of this node published: to every other node of the topology
        (engine lock held, any thread; never waits on a network)."""
        topology = self.engine.cluster
        if topology is None or self.closed or len(topology.nodes) == 1:
            return
        frame = encode_command([b"CLUSTER", b"RELAY", channel, message])
        me = topology.myself.id
        with self.lock:
            for node in topology.nodes.values():
                if node.id == me:
                    continue
                link = self.links.get(node.id)
                if link is None or link.address != _address(node, self._tls()):
                    if link is not None:
                        link.close()
                    link = self.links[node.id] = Link(self, node)
                link.put(frame)
            gone = [node_id for node_id in self.links if node_id not in topology.nodes]
            for node_id in gone:
                self.links.pop(node_id).close()

    def dropped(self) -> int:
        """Messages no link could hold."""
        with self.lock:
            return sum(link.dropped for link in self.links.values())

    def close(self) -> None:
        with self.lock:
            self.closed = True
            links, self.links = list(self.links.values()), {}
        for link in links:
            link.close(join=True)

    def _tls(self) -> bool:
        return bool(self.engine.config.get("tls-cluster"))

    def config(self) -> dict[str, Any]:
        return self.engine.config


def _address(node: ClusterNode, tls: bool) -> tuple[str, int, bool]:
    host = node.ip or "127.0.0.1"
    if tls and node.tls_port:
        return host, node.tls_port, True
    return host, node.port, False


class Link:
    """One other node's link: an outbox and the thread that sends it."""

    def __init__(self, relay: Relay, node: ClusterNode) -> None:
        self.relay = relay
        self.node_id = node.id
        self.address = _address(node, relay._tls())
        self.outbox: deque[bytes] = deque()
        self.queued = 0
        self.dropped = 0
        self.wake = threading.Condition()
        self.stopped = False
        self.refused = False
        self.sock: socket.socket | None = None
        self.thread = threading.Thread(target=self._run, name=f"cluster-relay-{node.id[:8]}",
                                       daemon=True)
        self.thread.start()

    def put(self, frame: bytes) -> None:
        with self.wake:
            if self.queued + len(frame) > OUTBOX_BYTES:
                self.dropped += 1
                return
            self.outbox.append(frame)
            self.queued += len(frame)
            self.wake.notify()

    def close(self, join: bool = False) -> None:
        with self.wake:
            self.stopped = True
            self.wake.notify()
        sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if join and self.thread is not threading.current_thread():
            self.thread.join(timeout=CONNECT_TIMEOUT)

    def _run(self) -> None:
        backoff = BACKOFF_FIRST
        while not self.stopped:
            try:
                self._session()
            except ReplyError as err:  # (refused: a password or a user's rights; said once)
                if not self.stopped and not self.refused:
                    log.warning("cluster relay to %s:%d refused: %s (published messages do "
                                "not reach that node; see masteruser/masterauth)",
                                self.address[0], self.address[1], err.line)
                self.refused = True
            except OSError as err:
                if not self.stopped:
                    log.debug("cluster relay to %s:%d: %s", self.address[0], self.address[1],
                              err)
            finally:
                sock, self.sock = self.sock, None
                if sock is not None:
                    sock.close()
            with self.wake:
                # Messages waiting while the link is down are lost, as on Redis's bus.
                self.dropped += len(self.outbox)
                self.outbox.clear()
                self.queued = 0
                self.wake.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _session(self) -> None:
        host, port, tls = self.address
        sock = socket.create_connection((host, port), CONNECT_TIMEOUT)
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        config = self.relay.config()
        if tls:
            from streamkeep.engine.services.tls import TLSConfigError, client_context
            try:
                sock = self.sock = client_context(config).wrap_socket(sock)
            except TLSConfigError as err:
                raise OSError(f"TLS: {err}") from None
        password = str(config.get("masterauth") or "")
        if password:
            user = str(config.get("masteruser") or "")
            _expect_ok(sock, encode_command([b"AUTH", *([user] if user else []), password]))
        _expect_ok(sock, encode_command([b"CLIENT", b"REPLY", b"OFF"]), reply=False)
        sock.settimeout(None)
        while True:
            with self.wake:
                while not self.outbox and not self.stopped:
                    self.wake.wait()
                if self.stopped:
                    return
                batch = b"".join(self.outbox)
                self.outbox.clear()
                self.queued = 0
            sock.sendall(batch)


def _expect_ok(sock: socket.socket, command: bytes, reply: bool = True) -> None:
    """Send a handshake command; with `reply`, read its reply and want +OK."""
    sock.sendall(command)
    if not reply:
        return
    parser = ReplyParser()
    sock.settimeout(CONNECT_TIMEOUT)
    while (value := parser.next()) is NEED_MORE:
        data = sock.recv(4096)
        if not data or parser.pending_bytes() > MAX_REPLY:
            raise OSError("the node closed the link, or sent no reply to a handshake")
        parser.feed(data)
    if isinstance(value, ReplyError):
        raise value


__all__ = ["OUTBOX_BYTES", "Relay"]
