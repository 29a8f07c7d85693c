"""tools.controller.etcd against a real etcd (Debian's etcd-server): keys, compare-and-swap
on a key's mod_revision, leases (renewed, revoked, expired), endpoints tried in turn, a dead
or foreign endpoint, a reply over the size bound, and an etcd SIGKILLed and restarted."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep.tools.controller import etcd as etcd_client
from streamkeep.tools.controller.etcd import Etcd, EtcdError
from streamkeep.tools.servers import EtcdServer, free_port
from tests.support.etcd import etcd, key_prefix  # noqa: F401 (fixtures)

POLL = 0.05
EXPIRY_POLLS = 600  # a lease of a second or two expires within a few of etcd's checks


@pytest.fixture
def client(etcd: EtcdServer) -> Iterator[Etcd]:  # noqa: F811
    with Etcd(etcd.url) as c:
        yield c


def test_put_get_delete(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    key = key_prefix + "a"
    assert client.get(key) is None
    revision = client.put(key, b"\x00value\xff")
    assert client.get(key) == (b"\x00value\xff", revision)
    later = client.put(key, b"")
    assert later > revision and client.get(key) == (b"", later)
    client.delete(key)
    assert client.get(key) is None
    client.delete(key)  # (absent: nothing to do)


def test_get_prefix_takes_the_prefix_only(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    revisions = {key_prefix + name: client.put(key_prefix + name, name.encode())
                 for name in ("a", "b/c", "é")}
    client.put(key_prefix[:-1] + "0", b"after the prefix")  # "/" + 1 is "0"
    client.put(key_prefix[:-1], b"the prefix without its slash")
    assert client.get_prefix(key_prefix) == {
        key: (key[len(key_prefix):].encode(), revision) for key, revision in revisions.items()}
    assert client.get_prefix(key_prefix + "nothing/") == {}


def test_compare_and_put_on_the_mod_revision(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    key = key_prefix + "k"
    first = client.put(key, b"one")
    assert client.compare_and_put(key, b"two", first)
    found = client.get(key)
    assert found is not None and found[0] == b"two" and found[1] > first
    assert not client.compare_and_put(key, b"three", first)  # a stale revision
    assert client.get(key) == found
    assert not client.compare_and_put(key, b"four", 0)  # present: no create


def test_compare_and_put_with_zero_creates_only_if_absent(
        client: Etcd, key_prefix: str) -> None:  # noqa: F811
    key = key_prefix + "new"
    assert client.compare_and_put(key, b"mine", 0)
    assert not client.compare_and_put(key, b"theirs", 0)
    found = client.get(key)
    assert found is not None and found[0] == b"mine"


def test_compare_and_delete(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    key = key_prefix + "d"
    revision = client.put(key, b"x")
    assert not client.compare_and_delete(key, revision - 1)
    assert client.get(key) == (b"x", revision)
    assert client.compare_and_delete(key, revision)
    assert client.get(key) is None


def test_a_revoked_lease_takes_its_keys(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    lease = client.grant(30)
    plain, cas = key_prefix + "put", key_prefix + "cas"
    client.put(plain, b"leased", lease=lease)
    assert client.compare_and_put(cas, b"leased too", 0, lease=lease)
    ttl = client.keepalive(lease)
    assert 0 < ttl <= 30
    client.revoke(lease)
    assert client.get(plain) is None and client.get(cas) is None
    assert client.keepalive(lease) == 0
    client.revoke(lease)  # (already gone: no error)


def test_an_expired_lease_takes_its_key(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    lease = client.grant(1)  # (etcd may raise it to its minimum TTL, a second or two)
    key = key_prefix + "ephemeral"
    client.put(key, b"x", lease=lease)
    for _ in range(EXPIRY_POLLS):
        if client.get(key) is None:
            break
        time.sleep(POLL)
    assert client.get(key) is None
    assert client.keepalive(lease) == 0


def test_a_put_on_an_unknown_lease_is_refused(client: Etcd, key_prefix: str) -> None:  # noqa: F811
    with pytest.raises(EtcdError, match="lease not found") as caught:
        client.put(key_prefix + "k", b"x", lease=12345)
    assert caught.value.code == etcd_client.NOT_FOUND and client.url in str(caught.value)


def test_a_dead_first_endpoint_is_passed_over(etcd: EtcdServer, key_prefix: str) -> None:  # noqa: F811
    dead = f"http://127.0.0.1:{free_port()}"
    with Etcd(f"{dead},{etcd.url}") as client:
        revision = client.put(key_prefix + "k", b"v")
        assert client.get(key_prefix + "k") == (b"v", revision)
        assert client.compare_and_put(key_prefix + "k", b"w", revision)


class _NotEtcd(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(404)
        self.send_header("Content-Length", "9")
        self.end_headers()
        self.wfile.write(b"not found")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def not_etcd() -> Iterator[str]:
    """An HTTP server that is not etcd: its URL."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _NotEtcd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_server_that_is_not_etcd_is_no_endpoint(
        etcd: EtcdServer, not_etcd: str, key_prefix: str) -> None:  # noqa: F811
    with Etcd(not_etcd) as client, pytest.raises(EtcdError, match="not etcd's reply") as caught:
        client.get(key_prefix + "k")
    assert not_etcd in str(caught.value)
    with Etcd(f"{not_etcd},{etcd.url}") as client:
        assert client.get(key_prefix + "k") is None


def test_a_dead_server_is_an_error_naming_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Etcd(url, timeout=1.0) as client:
        for call in (lambda: client.get("k"), lambda: client.put("k", b"v"),
                     lambda: client.compare_and_put("k", b"v", 0), lambda: client.grant(5)):
            with pytest.raises(EtcdError, match="no etcd endpoint answered") as caught:
                call()
            assert url in str(caught.value)


def test_a_reply_over_the_bound_is_an_error(client: Etcd, key_prefix: str,  # noqa: F811
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    client.put(key_prefix + "big", b"x" * 4000)
    monkeypatch.setattr(etcd_client, "MAX_REPLY", 1000)
    with pytest.raises(EtcdError, match="more than 1000"):
        client.get(key_prefix + "big")
    monkeypatch.undo()
    found = client.get(key_prefix + "big")  # (a connection of its own again)
    assert found is not None and len(found[0]) == 4000


def test_not_an_endpoint_url() -> None:
    for url in ("", "127.0.0.1:2379", "https://127.0.0.1:2379", "http://127.0.0.1",
                "http://127.0.0.1:2379/v3"):
        with pytest.raises(EtcdError, match="endpoint"):
            Etcd(url)


def test_etcd_killed_and_restarted_keeps_its_data(tmp_path: Path) -> None:
    """SIGKILL, then a start on the same directory and ports: what was acknowledged is there,
    and a client made before the kill reconnects to the restarted server."""
    server = EtcdServer(str(tmp_path / "member"), track=False)
    try:
        server.start()
        client = Etcd(server.url)
        revisions = {f"/k/{i}": client.put(f"/k/{i}", b"%d" % i) for i in range(20)}
        lease = client.grant(600)
        client.put("/leased", b"x", lease=lease)
        port, peer_port, pid = server.port, server.peer_port, server.pid
        server.kill()
        assert server.proc is not None and server.proc.returncode == -9
        with pytest.raises(EtcdError, match=server.url):
            client.get("/k/0")
        server.start()
        assert (server.port, server.peer_port) == (port, peer_port) and server.pid != pid
        assert client.get_prefix("/k/") == {
            key: (key[3:].encode(), revision) for key, revision in revisions.items()}
        assert client.get("/leased") is not None and client.keepalive(lease) > 0
        client.close()
    finally:
        server.kill()
