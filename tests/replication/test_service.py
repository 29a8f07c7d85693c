"""replication.service: the replication attached to an engine on a real data directory. What a
primary reports (ROLE, INFO replication, the sync counters), the link's REPLCONF options and
the PSYNC refusals that come before any sync, WAIT and WAITAOF without replicas, becoming a
replica (read-only, ROLE and INFO say whom it follows) and the promotion that starts a new
history continuing the old one, a node refusing to follow itself, and close.

(Syncing with real replicas: tests/replication/test_sender.py, test_follower.py and the
differential replication suite.)"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import NO_REPL_ID, load
from streamkeep.engine.wire.reply import NO_REPLY
from streamkeep.replication import link
from streamkeep.replication.service import MYSELF, READONLY, ReplicationService
from streamkeep.replication.waits import Wait
from tests.support.server_util import start_server


class Client:
    """A network client as the service sees one: its address, its replica link if any, and
    what its REPLCONFs announced until its PSYNC."""

    def __init__(self, addr: str = "10.0.0.7:40000", linked: bool = False) -> None:
        self.addr = addr
        self.link: Any = object() if linked else None
        self.handshake: dict[str, Any] | None = None


class Session:
    def __init__(self, client: Client | None = None, write_lsn: int = 0) -> None:
        self.client = client
        self.write_lsn = write_lsn


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.open(str(tmp_path / "data"), appendfsync="always",
                         auto_aof_rewrite_percentage=0)
    try:
        yield engine
    finally:
        engine.close()


def service_of(engine: Engine) -> ReplicationService:
    service = engine.replication
    assert isinstance(service, ReplicationService)
    return service


def writes(engine: Engine, n: int) -> None:
    for i in range(n):
        engine.execute("XADD", "s", f"{i + 1}-1", "f", "v")


def info(engine: Engine) -> dict[str, str]:
    text = engine.execute("INFO", "replication").decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port bound but not listening: connecting to it is refused, at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_a_primary_reports_its_history_and_offset(engine: Engine, tmp_path: Path) -> None:
    writes(engine, 3)
    manifest = load(RealFS(), str(tmp_path / "data"))
    fields = dict(service_of(engine).info_fields())
    assert fields["role"] == "master"
    assert fields["connected_slaves"] == 0
    assert fields["master_replid"] == manifest.repl_id
    assert (fields["master_replid2"], fields["second_repl_offset"]) == (NO_REPL_ID, -1)
    assert fields["master_repl_offset"] == 3
    assert (fields["repl_backlog_first_byte_offset"], fields["repl_backlog_histlen"]) == (1, 3)
    assert fields["repl_backlog_active"] == 1 and fields["repl_backlog_size"] > 0
    assert info(engine)["master_repl_offset"] == "3"  # INFO replication is this section
    assert service_of(engine).role() == [b"master", 3, []]
    assert engine.execute("ROLE") == [b"master", 3, []]
    assert service_of(engine).stats_fields() == [("sync_full", 0), ("sync_partial_ok", 0),
                                                 ("sync_partial_err", 0)]


def test_replconf_options(engine: Engine) -> None:
    service = service_of(engine)
    client = Client()
    session = Session(client)
    assert service.replconf(session, (b"REPLCONF", b"listening-port", b"6380",
                                      b"capa", b"EOF", b"capa", b"SK-RECORDS")) == "OK"
    assert service.replconf(session, (b"REPLCONF", b"ip-address", b"10.0.0.7",
                                      b"sk-runid", b"0" * 40)) == "OK"
    assert client.handshake == {"port": 6380, "capa": {b"eof", b"sk-records"},
                                          "ip": "10.0.0.7"}
    with pytest.raises(ReplyError) as caught:  # Redis's limit: NET_HOST_STR_LEN
        service.replconf(session, (b"REPLCONF", b"ip-address", b"h" * 256))
    assert str(caught.value) == \
        "ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes"
    assert service.replconf(session, (b"REPLCONF", b"ip-address", b"h" * 255)) == "OK"
    with pytest.raises(ReplyError) as caught:
        service.replconf(session, (b"REPLCONF", b"bogus", b"1"))
    assert str(caught.value) == "ERR Unrecognized REPLCONF option: bogus"
    with pytest.raises(ReplyError) as caught:
        service.replconf(session, (b"REPLCONF", b"listening-port", b"x"))
    assert str(caught.value) == "ERR value is not an integer or out of range"
    # an ACK from a connection that is not a replica's link gets no reply at all
    assert service.replconf(session, (b"REPLCONF", b"ack", b"5")) is NO_REPLY
    assert service.replconf(Session(), (b"REPLCONF", b"ack", b"5")) is NO_REPLY


def test_a_node_told_to_follow_itself_by_its_run_id_refuses(engine: Engine) -> None:
    service = service_of(engine)
    with pytest.raises(ReplyError) as caught:
        service.replconf(Session(Client()), (b"REPLCONF", b"sk-runid",
                                             service.runid.encode()))
    assert str(caught.value) == MYSELF == "ERR REPLICAOF would make this node its own replica"


def psync_refusal(service: ReplicationService, session: Session, *argv: bytes) -> str:
    with pytest.raises(ReplyError) as caught:
        service.psync(session, (b"PSYNC", *argv))
    return str(caught.value)


def test_psync_refusals_before_any_sync(engine: Engine, caplog: pytest.LogCaptureFixture
                                        ) -> None:
    service = service_of(engine)
    assert psync_refusal(service, Session(), b"?", b"-1") == \
        "ERR PSYNC needs a network connection"
    with caplog.at_level(logging.WARNING, logger="streamkeep.replication"):
        for _ in range(3):  # redis-server retries at once: one log line, every time refused
            assert psync_refusal(service, Session(Client()), b"?", b"-1") == \
                link.NOT_STREAMKEEP
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    linked = Client(linked=True)
    service.replconf(Session(linked), (b"REPLCONF", b"capa", b"sk-records"))
    assert psync_refusal(service, Session(linked), b"?", b"-1") == \
        "ERR this connection is already a replica's"
    client = Client()
    service.replconf(Session(client), (b"REPLCONF", b"capa", b"sk-records"))
    assert psync_refusal(service, Session(client), b"?", b"5", b"not-hex") == \
        "ERR PSYNC's record CRC must be hexadecimal"
    assert client.handshake is None  # a PSYNC ends the handshake, refused or not


def test_wait_without_replicas(engine: Engine) -> None:
    writes(engine, 2)
    service = service_of(engine)
    assert service.wait(Session(write_lsn=2), 0, 0) == 0
    assert engine.execute("WAIT", "0", "0") == 0
    assert engine.execute("WAIT", "1", "10") == 0  # times out with none
    assert not service.waits.pending


def test_waitaof_counts_the_local_fsync(engine: Engine) -> None:
    writes(engine, 2)
    assert service_of(engine).waitaof(Session(write_lsn=2), 1, 0, 0) == [1, 0]  # always
    assert engine.execute("WAITAOF", "1", "0", "0") == [1, 0]
    assert engine.execute("WAITAOF", "0", "1", "10") == [1, 0]  # no replica: times out


def test_waitaof_has_the_local_fsync_made_when_not_synced_yet(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "data"), appendfsync="no") as engine:
        writes(engine, 3)
        assert engine.journal is not None and engine.journal.synced_lsn < 3
        assert engine.execute("WAITAOF", "1", "0", "0") == [1, 0]
        assert engine.journal.synced_lsn == 3


def test_following_and_promotion(engine: Engine, tmp_path: Path, refused_port: int) -> None:
    writes(engine, 4)
    service = service_of(engine)
    before = load(RealFS(), str(tmp_path / "data"))
    assert engine.execute("REPLICAOF", "127.0.0.1", str(refused_port)) == "OK"
    with pytest.raises(ReplyError) as caught:
        engine.execute("XADD", "s", "9-9", "f", "v")
    assert str(caught.value) == READONLY == "READONLY You can't write against a read only replica."
    assert service.primary_address() == f"127.0.0.1 {refused_port}"
    role = service.role()
    assert role[:3] == [b"slave", b"127.0.0.1", refused_port]
    assert role[3] in (b"connect", b"connecting") and role[4] == 4
    fields = dict(service.info_fields())
    assert (fields["role"], fields["master_host"], fields["master_port"]) == \
        ("slave", "127.0.0.1", refused_port)
    assert fields["master_link_status"] == "down" and "master_link_down_since_seconds" in fields
    # What Sentinel reads to pick the replica it promotes, from the replica-* settings.
    assert (fields["slave_priority"], fields["slave_read_only"], fields["replica_announced"]) \
        == (100, 1, 1)
    engine.execute("CONFIG", "SET", "replica-priority", "0", "replica-announced", "no")
    fields = dict(service.info_fields())
    assert (fields["slave_priority"], fields["replica_announced"]) == (0, 0)
    assert info(engine)["slave_priority"] == "0"
    assert engine.execute("REPLICAOF", "127.0.0.1", str(refused_port)) == \
        "OK Already connected to specified master"
    assert engine.execute("REPLICAOF", "NO", "ONE") == "OK"
    assert service.follower is None and service.primary_address() == ""
    engine.execute("XADD", "s", "9-9", "f", "v")  # a primary again: writes are accepted
    after = load(RealFS(), str(tmp_path / "data"))
    assert after.repl_id != before.repl_id
    assert (after.repl_id2, after.repl_offset2) == (before.repl_id, 5)  # continues up to LSN 4
    fields = dict(service.info_fields())
    assert (fields["master_replid2"], fields["second_repl_offset"]) == (before.repl_id, 5)


def test_replicaof_no_one_on_a_primary_changes_nothing(engine: Engine, tmp_path: Path) -> None:
    writes(engine, 1)
    before = load(RealFS(), str(tmp_path / "data"))
    assert engine.execute("REPLICAOF", "NO", "ONE") == "OK"
    assert load(RealFS(), str(tmp_path / "data")) == before


def test_opened_as_a_replica(tmp_path: Path, refused_port: int) -> None:
    with Engine.open(str(tmp_path / "data"), replicaof=("127.0.0.1", refused_port)) as engine:
        assert service_of(engine).primary_address() == f"127.0.0.1 {refused_port}"
        with pytest.raises(ReplyError, match="^READONLY "):
            engine.execute("XADD", "s", "*", "f", "v")


def test_a_node_refuses_to_follow_its_own_address(tmp_path: Path) -> None:
    handle = start_server(Engine.open(str(tmp_path / "data")))
    try:
        for host in ("127.0.0.1", "localhost"):
            with pytest.raises(ReplyError) as caught:
                handle.engine.execute("REPLICAOF", host, str(handle.port))
            assert str(caught.value) == MYSELF
        assert service_of(handle.engine).follower is None
    finally:
        handle.stop()


def test_close_answers_pending_waits_and_unhooks_the_journal(engine: Engine) -> None:
    service = service_of(engine)
    replies: list[Any] = []
    Wait(service.waits, lambda: 0, lambda: False, 0, polled=False).start(replies.append)
    journal = service.datadir.journal
    journal.on_written = service.primary.records_written  # (as a connected replica hooks it)
    service.close()
    service.close()  # twice: nothing more
    assert replies == [0]
    assert journal.on_written is None
