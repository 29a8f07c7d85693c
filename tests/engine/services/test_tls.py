"""TLS on the server (engine.server.network's TLS port, engine.services.tls's contexts): real
certificates made by the openssl command (tools.tls_certs), real sockets, redis-py with
`ssl=True`, redis-cli --tls, and redis-server over TLS as the oracle for error lines and as a
primary and a replica.

Covers: client certificates per tls-auth-clients (yes, optional, no; another CA's and an
expired one refused), TLS only (port 0), a plaintext client on the TLS port, handshakes that
stall or stop reading (timed out, never holding up a served client), CONFIG SET reloading
the certificate (open connections keep theirs, a bad file refused with Redis's line),
tls-protocols, session resumption per tls-session-caching, and a replica following a
streamkeep and a redis-server primary over TLS.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from streamkeep import Engine
from streamkeep.engine.exec.settings import normalize_settings
from streamkeep.engine.server.listeners import bind_all
from streamkeep.engine.server.network import Server, run_server
from streamkeep.tools.tls_certs import PASSPHRASE, Certs, make_certs
from tests.support.server_util import read_until_closed

TIMEOUT = 10.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed (make test installs it)", pytrace=False)
    return make_certs(tmp_path_factory.mktemp("certs"))


class Served:
    """A server with a TLS port (and a plain one unless `tls_only`), in a thread."""

    def __init__(self, engine: Engine, tls_only: bool = False) -> None:
        self.engine = engine
        self.tls_sockets = bind_all("127.0.0.1", 0)
        self.tls_port = self.tls_sockets[0].getsockname()[1]
        engine.config["tls-port"] = self.tls_port
        self.server = Server(engine, "127.0.0.1", 0, sockets=[] if tls_only else None,
                             tls_sockets=self.tls_sockets)
        self.server.tls_handshake_seconds = 0.5  # (the stalled handshakes' tests wait for it)
        ready = threading.Event()
        self.failure: list[BaseException] = []

        def run() -> None:
            try:
                run_server(self.server, lambda _srv: ready.set())
            except BaseException as err:  # noqa: BLE001 - reported to the starting thread
                self.failure.append(err)
                ready.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(TIMEOUT) and not self.failure, self.failure

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.loop.call_soon_threadsafe(self.server.request_shutdown)
            self.thread.join(TIMEOUT)
            assert not self.thread.is_alive()


def _settings(certs: Certs, **more: Any) -> dict[str, Any]:
    given = {**certs.server_settings(), **{k.replace("_", "-"): v for k, v in more.items()}}
    return normalize_settings(given)


@pytest.fixture
def serve(certs: Certs) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(tls_only: bool = False, path: str | None = None, **settings: Any) -> Served:
        engine = Engine.open(path) if path else Engine.open()
        engine.config.update(_settings(certs, **settings))
        served = Served(engine, tls_only)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


def _client(certs: Certs, port: int, cert: str | None = "client", **kwargs: Any) -> redis.Redis:
    extra = {} if cert is None else {"ssl_certfile": certs.path(f"{cert}.crt"),
                                     "ssl_keyfile": certs.path(f"{cert}.key")}
    return redis.Redis(port=port, ssl=True, ssl_ca_certs=certs.ca, socket_timeout=TIMEOUT,
                       retry=Retry(NoBackoff(), 0), **extra, **kwargs)  # (a refusal: at once)


def _refused(client: redis.Redis) -> bool:
    try:
        client.ping()
    except (redis.ConnectionError, ssl.SSLError, OSError):
        return True
    finally:
        client.close()
    return False


# --- clients ------------------------------------------------------------------------------------


def test_a_client_with_a_certificate_runs_commands_and_checks_the_servers(serve, certs) -> None:
    served = serve()
    r = _client(certs, served.tls_port)
    sid = r.xadd("orders", {"n": "1"})
    assert r.xrange("orders") == [(sid, {b"n": b"1"})]
    assert b"tls" not in r.client_info().get("flags", "").encode()
    r.close()
    # The server's certificate names localhost: a client checking the name against it passes.
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    with socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        subject = dict(item[0] for item in tls.getpeercert()["subject"])
        assert subject["commonName"] == "localhost"
        tls.sendall(b"PING\r\n")
        assert tls.recv(100) == b"+PONG\r\n"


@pytest.mark.parametrize("auth_clients,without,stranger,expired", [
    ("yes", False, False, False),
    ("optional", True, False, False),
    ("no", True, True, True),
])
def test_client_certificates_as_tls_auth_clients_says(serve, certs, auth_clients: str,
                                                       without: bool, stranger: bool,
                                                       expired: bool) -> None:
    """yes: a certificate from the CA is required; optional: none is fine, but one given must
    be good; no: none is asked for (so none is checked)."""
    served = serve(tls_auth_clients=auth_clients)
    port = served.tls_port
    assert not _refused(_client(certs, port))
    assert _refused(_client(certs, port, cert=None)) is not without
    assert _refused(_client(certs, port, cert="stranger")) is not stranger
    assert _refused(_client(certs, port, cert="expired")) is not expired


def test_tls_only_with_port_0_and_redis_cli(serve, certs) -> None:
    served = serve(tls_only=True)
    assert served.server.servers == []  # no plain listener
    out = subprocess.run(["redis-cli", "-p", str(served.tls_port), "--tls", "--cacert", certs.ca,
                          "--cert", certs.path("client.crt"), "--key", certs.path("client.key"),
                          "XADD", "s", "1-1", "f", "v"], capture_output=True, text=True,
                         timeout=TIMEOUT, check=True)
    assert out.stdout == "1-1\n"


def test_an_encrypted_key_is_opened_with_its_passphrase(serve, certs) -> None:
    served = serve(tls_key_file=certs.path("server-enc.key"), tls_key_file_pass=PASSPHRASE)
    assert not _refused(_client(certs, served.tls_port))


def test_a_plaintext_client_on_the_tls_port_is_dropped_and_others_are_served(serve,
                                                                             certs) -> None:
    served = serve()
    r = _client(certs, served.tls_port)
    r.set("k", "v")
    with socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT) as plain:
        plain.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert b"PONG" not in read_until_closed(plain)
    assert r.get("k") == b"v"
    r.close()


def test_stalled_handshakes_are_timed_out_without_holding_up_a_served_client(serve,
                                                                            certs) -> None:
    """Connections that never start the handshake, and clients that send their hello but
    never read the answer: each is dropped after the handshake time; meanwhile a TLS client
    runs its commands (counted, not timed)."""
    served = serve()
    silent = [socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT)
              for _ in range(50)]
    hello_only = []
    for _ in range(20):
        sock = socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        obj = ssl.create_default_context(cafile=certs.ca).wrap_bio(
            ssl.MemoryBIO(), outgoing := ssl.MemoryBIO(), server_hostname="localhost")
        with contextlib.suppress(ssl.SSLWantReadError):
            obj.do_handshake()
        sock.sendall(outgoing.read())  # the ClientHello; the ServerHello is never read
        hello_only.append(sock)
    r = _client(certs, served.tls_port)
    for i in range(200):
        assert r.incr("served") == i + 1
    r.close()
    for sock in silent + hello_only:
        read_until_closed(sock)  # (the server closes each: a timeout here fails the test)
        sock.close()


def test_tls_protocols_refuses_an_older_client(serve, certs) -> None:
    served = serve(tls_protocols="TLSv1.3")
    assert not _refused(_client(certs, served.tls_port))
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT) as raw, \
            pytest.raises(ssl.SSLError):
        ctx.wrap_socket(raw, server_hostname="localhost")


@pytest.mark.parametrize("caching", ["yes", "no"])
def test_sessions_resume_as_tls_session_caching_says(serve, certs, caching: str) -> None:
    served = serve(tls_session_caching=caching, tls_protocols="TLSv1.2")
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    session = None
    reused = []
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT) as raw, \
                ctx.wrap_socket(raw, server_hostname="localhost", session=session) as tls:
            tls.sendall(b"PING\r\n")
            assert tls.recv(100) == b"+PONG\r\n"
            session = tls.session
            reused.append(tls.session_reused)
    assert reused == [False, caching == "yes"]


# --- CONFIG SET reloads ------------------------------------------------------------------------


def _peer_serial(certs: Certs, port: int) -> int:
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.check_hostname = False
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    with socket.create_connection(("127.0.0.1", port), TIMEOUT) as raw, \
            ctx.wrap_socket(raw) as tls:
        return int(tls.getpeercert()["serialNumber"], 16)


def test_config_set_reloads_the_certificate_for_new_connections(serve, certs,
                                                                tmp_path: Path) -> None:
    served = serve()
    port = served.tls_port
    before = _peer_serial(certs, port)
    kept = _client(certs, port)
    kept.set("k", "1")
    # Another certificate for the same name: a copy of the CA's stranger would not verify,
    # so the server's own pair is re-issued (a new serial) under the same CA.
    fresh = make_certs(tmp_path / "fresh")
    shutil.copy(fresh.path("server.crt"), tmp_path / "new.crt")
    shutil.copy(fresh.path("server.key"), tmp_path / "new.key")
    admin = _client(certs, port)
    with pytest.raises(redis.ResponseError) as refused:
        admin.config_set("tls-cert-file", str(tmp_path / "missing.crt"))
    assert str(refused.value) == ("CONFIG SET failed (possibly related to argument "
                                  "'tls-cert-file') - Unable to update TLS configuration. "
                                  "Check server logs.")
    assert admin.config_get("tls-cert-file")["tls-cert-file"] == certs.path("server.crt")
    # The new pair is signed by another CA: the CA file follows in the same CONFIG SET.
    admin.execute_command("CONFIG", "SET", "tls-cert-file", str(tmp_path / "new.crt"),
                          "tls-key-file", str(tmp_path / "new.key"),
                          "tls-ca-cert-file", fresh.ca)
    ctx_new = ssl.create_default_context(cafile=fresh.ca)
    ctx_new.check_hostname = False
    ctx_new.load_cert_chain(fresh.path("client.crt"), fresh.path("client.key"))
    deadline = time.monotonic() + TIMEOUT
    while True:  # (the new listener takes over within a loop pass)
        try:
            with socket.create_connection(("127.0.0.1", port), TIMEOUT) as raw, \
                    ctx_new.wrap_socket(raw) as tls:
                after = int(tls.getpeercert()["serialNumber"], 16)
                break
        except ssl.SSLError:
            assert time.monotonic() < deadline
    assert after != before
    assert kept.get("k") == b"1"  # the connection made before keeps its session
    kept.close()
    admin.close()


def test_config_set_error_line_is_redis_own(start_redis, certs, tmp_path: Path) -> None:
    """The line above, from redis-server itself."""
    free = bind_all("127.0.0.1", 0)[0]
    tls_port = str(free.getsockname()[1])
    free.close()
    server = start_redis("--tls-port", tls_port, "--tls-cert-file", certs.path("server.crt"),
                         "--tls-key-file", certs.path("server.key"), "--tls-ca-cert-file",
                         certs.ca)
    r = redis.Redis(port=server.port)
    with pytest.raises(redis.ResponseError) as refused:
        r.config_set("tls-cert-file", str(tmp_path / "missing.crt"))
    assert str(refused.value) == ("CONFIG SET failed (possibly related to argument "
                                  "'tls-cert-file') - Unable to update TLS configuration. "
                                  "Check server logs.")
    r.close()


def test_the_key_passphrase_is_redacted_where_commands_are_shown(serve, certs) -> None:
    served = serve()
    r = _client(certs, served.tls_port)
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("tls-key-file-pass", "")
    logged = [entry["command"] for entry in r.slowlog_get(10)]
    assert any(b"tls-key-file-pass (redacted)" in line for line in logged), logged
    r.close()


# --- replication over TLS -----------------------------------------------------------------------


def _wait_for(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, "not replicated in time"
        time.sleep(0.05)


def test_a_streamkeep_replica_follows_a_streamkeep_primary_over_tls(serve, certs,
                                                                    tmp_path: Path) -> None:
    primary = serve(tls_only=True, path=str(tmp_path / "primary"))
    p = _client(certs, primary.tls_port)
    p.xadd("s", {"f": "1"})
    replica = Engine.open(str(tmp_path / "replica"), **_settings(
        certs, tls_replication="yes"), replicaof=("127.0.0.1", primary.tls_port))
    try:
        r = replica.redis()
        _wait_for(lambda: r.xlen("s") == 1)
        p.xadd("s", {"f": "2"})
        _wait_for(lambda: r.xlen("s") == 2)
    finally:
        replica.close()
        p.close()


def test_a_streamkeep_replica_follows_a_redis_server_primary_over_tls(start_redis, certs,
                                                                      tmp_path: Path) -> None:
    tls_args = ("--tls-cert-file", certs.path("server.crt"), "--tls-key-file",
                certs.path("server.key"), "--tls-ca-cert-file", certs.ca,
                "--tls-replication", "yes")
    # (the primary's TLS port beside its plain one: the fixture's PING uses that)
    tls_port = bind_all("127.0.0.1", 0)[0]
    port = tls_port.getsockname()[1]
    tls_port.close()
    primary = start_redis("--tls-port", str(port), "--repl-diskless-sync-delay", "0",
                          *tls_args)
    source = redis.Redis(port=primary.port)
    source.xadd("s", {"f": "1"})
    replica = Engine.open(str(tmp_path / "replica"), **_settings(
        certs, tls_replication="yes"), replicaof=("127.0.0.1", port))
    try:
        _wait_for(lambda: replica.redis().xlen("s") == 1)
    finally:
        replica.close()
        source.close()


# --- the Prometheus exporter over TLS -----------------------------------------------------------


def test_the_prometheus_exporter_scrapes_over_tls(serve, certs, tmp_path: Path) -> None:
    from tests.support.exporter import Exporters

    served = serve()
    r = _client(certs, served.tls_port)
    r.xadd("orders", {"n": "1"})
    exporters = Exporters(tmp_path)
    try:
        exporters.start(served.tls_port, scheme="rediss", extra=(
            "-tls-ca-cert-file", certs.ca, "-tls-client-cert-file", certs.path("client.crt"),
            "-tls-client-key-file", certs.path("client.key")))
        metrics = exporters.scrape(served.tls_port)
    finally:
        exporters.close()
        r.close()
    assert metrics["redis_up"][()] == 1.0
    lengths = metrics["redis_stream_length"]
    assert any(dict(labels).get("stream") == "orders" and value == 1.0
               for labels, value in lengths.items()), lengths


@pytest.mark.parametrize("settings,cap,expected", [
    ({"tls_ciphersuites": "TLS_AES_256_GCM_SHA384"}, None, "TLS_AES_256_GCM_SHA384"),
    ({"tls_ciphersuites": "TLS_CHACHA20_POLY1305_SHA256"}, None, "TLS_CHACHA20_POLY1305_SHA256"),
    ({"tls_ciphers": "ECDHE-ECDSA-AES256-GCM-SHA384", "tls_protocols": "TLSv1.2"},
     ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ({"tls_ciphers": "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
      "tls_protocols": "TLSv1.2", "tls_prefer_server_ciphers": "yes"},
     ssl.TLSVersion.TLSv1_2, "ECDHE-ECDSA-CHACHA20-POLY1305"),
])
def test_ciphers_and_suites_are_the_servers(serve, certs, settings: dict[str, str],
                                            cap: ssl.TLSVersion | None, expected: str) -> None:
    """tls-ciphersuites (TLSv1.3, set on OpenSSL's context directly), tls-ciphers (TLSv1.2)
    and tls-prefer-server-ciphers decide what a client that offers everything gets."""
    served = serve(**settings)
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.load_cert_chain(certs.path("client.crt"), certs.path("client.key"))
    if cap is not None:
        ctx.maximum_version = cap
        ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                        "ECDHE-ECDSA-CHACHA20-POLY1305")  # (the client's order: AES first)
    with socket.create_connection(("127.0.0.1", served.tls_port), TIMEOUT) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.cipher()[0] == expected


def test_a_ca_directory_verifies_clients(serve, certs, tmp_path: Path) -> None:
    """tls-ca-cert-dir: the CA found by its hashed name (openssl rehash makes the links)."""
    cadir = tmp_path / "cas"
    cadir.mkdir()
    shutil.copy(certs.ca, cadir / "ca.pem")
    subprocess.run(["openssl", "rehash", str(cadir)], check=True, capture_output=True)
    served = serve(tls_ca_cert_file="", tls_ca_cert_dir=str(cadir))
    assert not _refused(_client(certs, served.tls_port))
    assert _refused(_client(certs, served.tls_port, cert="stranger"))
