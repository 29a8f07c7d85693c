"""Redis Sentinel over TLS: real `redis-sentinel` processes with tls-replication monitor two
`streamkeep serve` nodes through their TLS ports (the replica following the primary over TLS,
announcing its TLS port), notice the primary's death and promote the replica, all over TLS;
a redis-py client with a client certificate finds the new primary through them and writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.sentinel import Sentinel

from streamkeep.tools.servers import free_port
from streamkeep.tools.tls_certs import Certs, make_certs
from tests.support.replication_util import info, wait_for
from tests.support.sentinel import Sentinels
from tests.support.serve_process import ServeProcess

NAME = "securemaster"
DEADLINE = 90.0
HOST = "127.0.0.1"

pytestmark = pytest.mark.timeout(400)


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    group = Sentinels(tmp_path)
    try:
        yield group
    finally:
        group.kill_all()


def _tls_lines(certs: Certs) -> list[str]:
    return [f"tls-cert-file {certs.path('server.crt')}",
            f"tls-key-file {certs.path('server.key')}", f"tls-ca-cert-file {certs.ca}",
            "tls-replication yes"]


class TLSNode:
    """A `streamkeep serve` with a plain port (the test's checks) and a TLS port (what
    Sentinel and the other node use)."""

    def __init__(self, root: Path, name: str, certs: Certs) -> None:
        self.certs = certs
        self.port, self.tls_port = free_port(), free_port()
        self.dir = root / name
        self.conf = root / f"{name}.conf"
        self.conf.write_text("\n".join([f"bind {HOST}", f"port {self.port}",
                                        f"tls-port {self.tls_port}", "appendfsync always",
                                        *_tls_lines(certs)]) + "\n")
        self.proc = ServeProcess(self.dir, "--config", str(self.conf), port=self.port)

    def client(self) -> redis.Redis:
        return self.proc.client(socket_timeout=10)

    def tls_client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.tls_port, ssl=True,
                           ssl_ca_certs=self.certs.ca,
                           ssl_certfile=self.certs.path("client.crt"),
                           ssl_keyfile=self.certs.path("client.key"), socket_timeout=10)


def test_sentinel_fails_over_a_tls_primary(tmp_path: Path, sentinels: Sentinels) -> None:
    certs = make_certs(tmp_path / "certs")
    primary = TLSNode(tmp_path, "a", certs)
    replica = TLSNode(tmp_path, "b", certs)
    try:
        replica.client().execute_command("REPLICAOF", HOST, str(primary.tls_port))
        writer = primary.tls_client()
        writer.xadd("orders", {"n": "1"})
        wait_for(lambda: info(replica.client()).get("master_link_status") == "up"
                 and replica.client().xlen("orders") == 1, DEADLINE, "the replica over TLS")
        sentinels.start(3, NAME, HOST, primary.tls_port, quorum=2, down_after_ms=2000,
                        failover_timeout_ms=10000, tls_settings=tuple(_tls_lines(certs)))
        seen = f"{HOST}:{replica.tls_port}"

        def replica_known() -> bool:
            views = sentinels.each("SENTINEL", "REPLICAS", NAME)
            return all(view and any(dict(zip(r[::2], r[1::2], strict=True))["name"] == seen
                                    if isinstance(r, list) else r["name"] == seen
                                    for r in view) for view in views)

        wait_for(replica_known, DEADLINE, "every sentinel to list the replica by its TLS port")
        writer.close()
        primary.proc.kill()
        wait_for(lambda: all(reply == [HOST, str(replica.tls_port)]
                             for reply in sentinels.each("SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                                                         NAME)),
                 DEADLINE, f"the sentinels to name the replica\n{sentinels.logs()}\n"
                 f"{sentinels.each('SENTINEL', 'MASTER', NAME)}")
        assert replica.client().execute_command("ROLE")[0] == b"master"
        found = Sentinel(sentinels.addresses(), socket_timeout=5).master_for(
            NAME, ssl=True, ssl_ca_certs=certs.ca, ssl_certfile=certs.path("client.crt"),
            ssl_keyfile=certs.path("client.key"))
        found.xadd("orders", {"n": "2"})
        assert found.xlen("orders") == 2
        found.close()
    finally:
        for node in (primary, replica):
            node.proc.stop()
