"""The replica's follower against a real primary (a server thread over an Engine) and against a
fake primary that misbehaves: an embedded replica follows, refuses writes and wakes blocked
reads; a wrong password, a damaged record, a snapshot cut in the middle each give a log line and
a retry, never a half-applied record or a diverged replica; a replica's server starting while
its follower writes cuts nothing off the replica's AOF; an asyncio reader on the replica whose
loop closed does not stop the follower that serves it."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep import Engine, Record, ReplyError
from streamkeep.aof.codec import crc32c, encode
from streamkeep.aof.fs import MappedTail
from streamkeep.engine.model.strings import value_digest
from streamkeep.engine.runtime.async_engine import EngineAsyncBackend
from streamkeep.engine.server.network import Server, run_server
from streamkeep.replication import link
from tests.support.replication_util import info
from tests.support.server_util import ServerHandle, start_server


def wait_for(predicate, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[ServerHandle]:
    engine = Engine.open(str(tmp_path / "primary"))
    handle = start_server(engine)
    try:
        yield handle
    finally:
        handle.stop()


def synced(primary: ServerHandle, replica: Engine) -> bool:
    return replica.replication.follower.link_up and \
        replica.journal.lsn == primary.engine.journal.lsn and \
        replica.digest() == primary.engine.digest()


def test_an_embedded_replica_follows_refuses_writes_and_wakes_blocked_reads(
        primary: ServerHandle, tmp_path: Path) -> None:
    p = primary.engine
    p.execute("XADD", "s", "1-1", "f", "v")
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: synced(primary, r))
        with pytest.raises(ReplyError, match="^READONLY You can't write against a read only"):
            r.execute("XADD", "s", "*", "f", "v")
        with pytest.raises(ReplyError, match="^READONLY"):
            r.execute("XGROUP", "CREATE", "s", "g", "0")
        got: list = []
        reader = threading.Thread(
            target=lambda: got.append(r.execute("XREAD", "BLOCK", "5000", "STREAMS", "s", "$")))
        reader.start()
        time.sleep(0.2)
        p.execute("XADD", "s", "2-1", "f", "w")
        reader.join(5)
        assert got == [[[b"s", [[b"2-1", [b"f", b"w"]]]]]]
        assert r.execute("ROLE")[:4] == [b"slave", b"127.0.0.1", primary.port, b"connected"]
        # Promoted, it takes writes; the old history is its replid2.
        old = r.datadir.history()[0]
        assert r.execute("REPLICAOF", "NO", "ONE") == "OK"
        assert r.execute("XADD", "s", "3-1", "f", "x") == b"3-1"
        assert r.datadir.history()[1:] == (old, 3)
    # It reopens as a primary with the new history (persisted in the manifest).
    with Engine.open(str(tmp_path / "replica")) as again:
        assert again.execute("ROLE")[0] == b"master"
        assert again.datadir.history()[1] == old and again.execute("XLEN", "s") == 3


def test_a_reader_whose_event_loop_closed_does_not_stop_the_follower(
        primary: ServerHandle, tmp_path: Path) -> None:
    """A program read the replica from an event loop (a blocked XREAD, a Pub/Sub channel)
    and closed the loop with both still open. The follower's thread applies the write that
    serves the read and delivers the message the primary published: it finds the loop closed,
    drops what it would have handed it, and goes on following."""
    p = primary.engine
    p.execute("XADD", "s", "1-1", "f", "v")
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: synced(primary, r))

        async def abandon() -> Any:
            backend = EngineAsyncBackend(r)
            wait = backend.start(("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
            channel = backend.pubsub_channel()
            await channel.run((b"SUBSCRIBE", b"news"))
            return wait

        loop = asyncio.new_event_loop()
        loop.run_until_complete(abandon())
        loop.close()
        check = r.subscribe("news")  # (a reader that is still there)
        assert check.get_message(timeout=1)["type"] == "subscribe"  # type: ignore[index]
        assert p.execute("PUBLISH", "news", "m1") == 0  # (no subscriber on the primary)
        p.execute("XADD", "s", "2-1", "f", "v")
        assert wait_for(lambda: check.get_message(timeout=0.1))["data"] == b"m1"
        p.execute("XADD", "s", "3-1", "f", "v")  # after both were delivered
        wait_for(lambda: synced(primary, r))
        assert r.execute("XLEN", "s") == 3
        check.close()


def test_a_wrong_masterauth_is_logged_and_retried(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    engine = Engine.open(str(tmp_path / "primary"), requirepass="right")
    handle = start_server(engine)
    try:
        engine.execute("XADD", "s", "1-1", "f", "v")
        with caplog.at_level(logging.WARNING, "streamkeep.replication"), \
                Engine.open(str(tmp_path / "replica"), masterauth="wrong",
                            replicaof=("127.0.0.1", handle.port)) as r:
            wait_for(lambda: "refused the handshake" in caplog.text)
            assert "WRONGPASS" in caplog.text or "invalid" in caplog.text
            assert r.execute("XLEN", "s") == 0
            r.set_config("masterauth", "right")
            wait_for(lambda: synced(handle, r))
    finally:
        handle.stop()


def listed_replicas(client: redis.Redis) -> tuple[list[str], list[list[bytes]]]:
    """The primary's INFO slaveN lines' ip and port, and ROLE's replicas."""
    lines = [value for name, value in info(client).items()
             if name[:5] == "slave" and name[5:].isdigit()]
    found = [",".join(field for field in line.split(",") if field[:3] in ("ip=", "por"))
             for line in lines]
    return found, [entry[:2] for entry in client.execute_command("ROLE")[2]]


@pytest.mark.parametrize("primary_kind", ["streamkeep", "redis-server"])
def test_a_replica_is_listed_under_the_address_and_port_it_announces(
        primary_kind: str, tmp_path: Path, start_redis: Any) -> None:
    """replica-announce-ip/-port (what Sentinel connects to behind NAT): the primary lists the
    replica under them in INFO and ROLE; a redis-server primary understands the handshake."""
    handle = None
    if primary_kind == "streamkeep":
        handle = start_server(Engine.open(str(tmp_path / "primary")))
        port = handle.port
    else:
        port = start_redis().port
    client = redis.Redis(port=port)
    try:
        with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", port),
                         replica_announce_ip="10.9.8.7", replica_announce_port=7777) as r:
            wait_for(lambda: r.replication.follower.link_up)
            wait_for(lambda: listed_replicas(client) == (["ip=10.9.8.7,port=7777"],
                                                         [[b"10.9.8.7", b"7777"]]))
        if handle is not None:  # unset: the connection's address and the listening port
            with Engine.open(str(tmp_path / "other"), replicaof=("127.0.0.1", port)):
                wait_for(lambda: listed_replicas(client)[0] == ["ip=127.0.0.1,port=0"])
    finally:
        client.close()
        if handle is not None:
            handle.stop()


class FakePrimary:
    """A socket server answering the handshake, then sending `stream` (bytes, to the first
    connection only) and closing."""

    def __init__(self, stream: bytes) -> None:
        self.stream = stream
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                buf = b""
                while b"PSYNC" not in buf:
                    data = conn.recv(4096)
                    if not data:
                        break
                    buf += data
                    conn.sendall(b"+OK\r\n" * (buf.count(b"REPLCONF") - buf[:-len(data)]
                                               .count(b"REPLCONF")))
                if b"PSYNC" in buf and self.connections == 1:  # later ones get nothing
                    time.sleep(0.05)
                    conn.sendall(self.stream)
                time.sleep(0.2)

    def close(self) -> None:
        self.sock.close()


def _records(first: int, count: int) -> bytes:
    return b"".join(encode(lsn, 1000, 0, [[b"XADD", b"s", b"%d-1" % lsn, b"f", b"v"]])
                    for lsn in range(first, first + count))


def test_a_damaged_record_stops_the_link_before_it_is_applied(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    bad = bytearray(_records(4, 1))
    bad[-1] ^= 1
    stream = (link.fullresync_line("ab" * 20, 0) + link.snapshot_header(0)
              + link.snapshot_trailer(crc32c(b"")) + _records(1, 3) + bytes(bad) + _records(5, 2))
    fake = FakePrimary(stream)
    try:
        with caplog.at_level(logging.WARNING, "streamkeep.replication"), \
                Engine.open(str(tmp_path / "r"), replicaof=("127.0.0.1", fake.port)) as r:
            wait_for(lambda: "CRC mismatch" in caplog.text)
            wait_for(lambda: fake.connections >= 2)  # it retries
            assert r.execute("XLEN", "s") == 3 and r.journal.lsn == 3
        with Engine.open(str(tmp_path / "r")) as again:  # its own AOF holds the same three
            assert again.execute("XLEN", "s") == 3
    finally:
        fake.close()


def test_a_snapshot_cut_in_the_middle_changes_nothing(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    with Engine.open(str(tmp_path / "r")) as before:
        before.execute("XADD", "mine", "1-1", "f", "v")
        digest = before.digest()
    stream = link.fullresync_line("ab" * 20, 9) + link.snapshot_header(1000) + b"x" * 500
    fake = FakePrimary(stream)
    try:
        with caplog.at_level(logging.INFO, "streamkeep.replication"), \
                Engine.open(str(tmp_path / "r"), replicaof=("127.0.0.1", fake.port)) as r:
            wait_for(lambda: fake.connections >= 2)
            assert r.digest() == digest
            assert not [p for p in (tmp_path / "r").iterdir() if p.name.endswith(".tmp")]
            info = r.execute("INFO", "replication").decode()
            assert "master_link_status:down" in info
    finally:
        fake.close()


def test_a_replica_with_a_budget_keeps_its_backlog_cold(primary: ServerHandle,
                                                         tmp_path: Path) -> None:
    """A full sync installs the primary's snapshot: the replica's streams are bound to that
    file and count against the replica's own backlog-memory, so its old nodes go cold."""
    p = primary.engine
    for i in range(1, 3001):
        p.execute("XADD", "s", f"{i}-1", "f", f"value {i}")
    p.compact()
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port),
                     backlog_memory="10kb") as r:
        wait_for(lambda: synced(primary, r))
        r.execute("PING")  # evictions run between commands
        s = r.dbs[0][b"s"]
        assert s.cold_counts()[1] > 2000, s.cold_counts()
        assert r.execute("XRANGE", "s", "1500", "1500") == [[b"1500-1", [b"f", b"value 1500"]]]
        p.execute("XADD", "s", "3001-1", "f", "last")
        wait_for(lambda: synced(primary, r))
        assert r.digest() == p.digest()


def test_a_replica_gets_strings_ttls_and_the_primarys_expiries(primary: ServerHandle,
                                                                tmp_path: Path) -> None:
    """Strings and TTLs through a full sync (the snapshot's keys table) and then the stream of
    records; a key expired by the primary's active cycle goes on the replica by the DEL it
    logged, never by the replica's own clock."""
    p = primary.engine
    set_at = time.monotonic()
    p.execute("SET", "before-sync", "v", "EX", "1000")
    p.execute("XADD", "s", "1-1", "f", "v")
    p.execute("PEXPIRE", "s", "100000")
    assert p.datadir is not None and p.datadir.compact(wait=True) is not None
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: synced(primary, r))
        ttl = r.execute("TTL", "before-sync")
        # The TTL the primary set, counted down by the time the sync took (however busy the
        # machine): the deadline came through the snapshot, not restarted by the replica.
        assert 1000 - int(time.monotonic() - set_at) - 1 <= ttl <= 1000, ttl
        p.execute("SET", "brief", "v", "PX", "50")
        p.execute("INCRBYFLOAT", "n", "0.1")
        wait_for(lambda: r.execute("GET", "n") == b"0.1")
        # The replica still has it unless the primary has already expired it and sent the
        # DEL (a busy machine): never gone on the replica alone.
        assert r.execute("GET", "brief") == b"v" or p.execute("EXISTS", "brief") == 0
        wait_for(lambda: p.execute("EXISTS", "brief") == 0)  # expired on the primary: a DEL
        wait_for(lambda: synced(primary, r))
        assert r.execute("EXISTS", "brief") == 0


@pytest.mark.parametrize("last", ["expiry", "reply off"])
def test_under_always_a_write_no_reply_waits_for_reaches_the_replica(tmp_path: Path,
                                                                     last: str) -> None:
    """Under `always` replicas are sent only what an fsync covered, and a round runs for the
    replies that wait for it. A write no reply waits for gets a round of its own: the active
    expiry cycle's DEL (the server's own write), a write under CLIENT REPLY OFF (or of a
    client gone before its reply). Without it the replica stayed one record behind until some
    other write (crashbench's primary-rollback round found it)."""
    engine = Engine.open(str(tmp_path / "primary"), appendfsync="always")
    handle = start_server(engine)
    try:
        client = redis.Redis(host=handle.host, port=handle.port)
        client.set("kept", "v")
        with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", handle.port)) as r:
            wait_for(lambda: synced(handle, r))
            if last == "expiry":
                client.set("brief", "v", px=50)  # the last write any client makes
                wait_for(lambda: r.execute("EXISTS", "brief") == 1)
                # Expired by the primary's active cycle (INFO names no key: no lazy expiry
                # here, whose DEL a client would wait for).
                wait_for(lambda: client.info("stats")["expired_keys"] >= 1)
            else:
                with socket.create_connection((handle.host, handle.port)) as raw:
                    raw.sendall(b"CLIENT REPLY OFF\r\nSET muted v\r\nCLIENT REPLY ON\r\n")
                    assert raw.recv(16) == b"+OK\r\n"  # (ON's: the others said nothing)
            wait_for(lambda: synced(handle, r))
            assert r.execute("GET", "kept") == b"v"
            assert r.execute("EXISTS", "brief") == 0
            assert r.execute("GET", "muted") == (None if last == "expiry" else b"v")
            assert engine.journal is not None
            assert engine.journal.synced_lsn == engine.journal.lsn, "the last record fsynced"
        client.close()
    finally:
        handle.stop()


def test_the_string_family_and_its_keyspace_events_replicate(primary: ServerHandle,
                                                             tmp_path: Path) -> None:
    """Redis 8.4's string writes and the others reach a replica as their records (SETRANGE as
    itself), which publishes its own keyspace events as it applies them."""
    p = primary.engine
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port),
                     notify_keyspace_events="K$g") as r:
        wait_for(lambda: synced(primary, r))
        sub = r.psubscribe("__keyspace@0__:*")
        for argv in (("SET", "k", "v1"), ("SET", "k", "v2", "IFEQ", "v1"),
                     ("SET", "k", "v3", "IFDNE", value_digest(b"v2")),  # not set
                     ("MSETEX", "2", "a", "1", "b", "2", "PX", "100000"),
                     ("SETRANGE", "a", str(200_000), "x"), ("GETSET", "b", "3"),
                     ("MSETNX", "c", "4"), ("DELEX", "c", "IFEQ", "4"), ("DELEX", "k")):
            p.execute(*argv)
        wait_for(lambda: synced(primary, r))
        assert r.digest() == p.digest()
        assert r.execute("STRLEN", "a") == 200_001 and 0 < r.execute("PTTL", "a") <= 100_000
        events = []
        while (message := sub.get_message()) is not None:
            if message["type"] == "pmessage":
                events.append((message["channel"], message["data"]))
        assert events == [
            (b"__keyspace@0__:k", b"set"), (b"__keyspace@0__:k", b"set"),
            (b"__keyspace@0__:a", b"set"), (b"__keyspace@0__:a", b"expire"),  # SET ... PXAT
            (b"__keyspace@0__:b", b"set"), (b"__keyspace@0__:b", b"expire"),
            (b"__keyspace@0__:a", b"setrange"), (b"__keyspace@0__:b", b"set"),
            (b"__keyspace@0__:c", b"set"), (b"__keyspace@0__:c", b"del"),
            (b"__keyspace@0__:k", b"del")]


def test_a_replica_hides_a_key_past_its_ttl_until_the_primarys_del(tmp_path: Path) -> None:
    """As a Redis replica since 3.2: a key whose TTL has passed reads as missing on the replica
    (GET, EXISTS, TTL, TYPE, XLEN, XRANGE, KEYS, SCAN) while the primary, whose clock is behind
    here, has not expired it yet; the replica deletes nothing itself, and the primary's DEL is
    what removes it."""
    now = [int(time.time() * 1000)]
    engine = Engine.open(str(tmp_path / "primary"), clock=lambda: now[0])
    primary = start_server(engine)
    try:
        p = primary.engine
        p.execute("SET", "k", "v", "PX", "100")
        p.execute("XADD", "s", "1-1", "f", "v")
        p.execute("PEXPIRE", "s", "100")
        p.execute("SET", "live", "v")
        with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
            wait_for(lambda: synced(primary, r))
            # The replica's own clock passes the TTLs; the primary's (frozen) does not.
            wait_for(lambda: r.execute("EXISTS", "k", "s", "live") == 1)
            assert r.execute("GET", "k") is None and r.execute("TTL", "k") == -2
            assert r.execute("TYPE", "s") == "none" and r.execute("XLEN", "s") == 0
            assert r.execute("XRANGE", "s", "-", "+") == []
            assert r.execute("KEYS", "*") == [b"live"]
            assert r.execute("SCAN", "0")[1] == [b"live"]
            assert r.execute("DBSIZE") == 3  # counted until deleted, as Redis's dictSize
            assert r.strings[0][b"k"] == b"v" and r.dbs[0][b"s"].length == 1
            assert p.execute("GET", "k") == b"v" and p.execute("PTTL", "k") == 100  # live there
            assert r.journal.lsn == p.journal.lsn  # the replica wrote nothing of its own
            now[0] += 1000  # the primary's time passes: its lazy expiry logs the DELs
            assert p.execute("EXISTS", "k", "s") == 0
            wait_for(lambda: synced(primary, r))
            assert b"k" not in r.strings[0] and b"s" not in r.dbs[0]
    finally:
        primary.stop()


def test_a_primarys_published_messages_reach_its_replicas_subscribers(
        primary: ServerHandle, tmp_path: Path) -> None:
    """PUBLISH and SPUBLISH on a streamkeep primary reach the subscribers of its replica, and
    of that replica's own replica, after the writes made before them, as on Redis's replicas;
    they are no records: the LSNs and the partial sync after a lost link are the same."""
    p = primary.engine
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        middle = start_server(r)
        try:
            with Engine.open(str(tmp_path / "chained"),
                             replicaof=("127.0.0.1", middle.port)) as c:
                wait_for(lambda: synced(primary, r) and c.replication.follower.link_up)
                subs = [e.subscribe("news") for e in (r, c)]
                patterns = c.psubscribe("n*")
                for s in (*subs, patterns):
                    wait_for(lambda s=s: s.get_message(timeout=0.1))  # the confirmation
                import redis

                shard = redis.Redis(host="127.0.0.1", port=middle.port).pubsub()
                shard.ssubscribe("orders")  # a network subscriber, to a shard channel
                wait_for(lambda: shard.get_message(timeout=0.1))
                lsn = p.journal.lsn
                p.execute("XADD", "s", "1-1", "f", "v")
                assert p.execute("PUBLISH", "news", "m1") == 0  # no subscriber on the primary
                assert p.execute("SPUBLISH", "orders", "o1") == 0
                assert p.journal.lsn == lsn + 1  # the XADD's record only
                for s in subs:
                    message = wait_for(lambda s=s: s.get_message(timeout=0.1))
                    assert (message["channel"], message["data"]) == (b"news", b"m1")
                message = wait_for(lambda: shard.get_message(timeout=0.1))
                assert (message["type"], message["data"]) == ("smessage", b"o1")
                message = wait_for(lambda: patterns.get_message(timeout=0.1))
                assert (message["pattern"], message["data"]) == (b"n*", b"m1")
                # The write before the message was applied before it was delivered.
                assert r.execute("XLEN", "s") == 1
                # A replica's own client's message stays there, as on Redis.
                assert r.execute("PUBLISH", "news", "local") == 1
                assert subs[0].get_message(timeout=1)["data"] == b"local"
                assert subs[1].get_message(timeout=0.3) is None
                wait_for(lambda: synced(primary, r) and c.journal.lsn == p.journal.lsn)
                assert r.digest() == c.digest() == p.digest()
                # A lost link: a partial sync, the LSNs untouched by the messages.
                partial = _stat(p, "sync_partial_ok")
                p.execute("CLIENT", "KILL", "TYPE", "replica")
                wait_for(lambda: _stat(p, "sync_partial_ok") > partial)
                p.execute("XADD", "s", "2-1", "f", "v")
                p.execute("PUBLISH", "news", "m2")
                message = wait_for(lambda: subs[0].get_message(timeout=0.1))
                assert message["data"] == b"m2"
                wait_for(lambda: synced(primary, r))
                assert _stat(p, "sync_full") == 1  # the first sync only
                shard.close()
        finally:
            middle.stop()


def _stat(engine: Engine, name: str) -> int:
    text = engine.execute("INFO", "stats").decode()
    return int(next(line.split(":")[1] for line in text.split("\r\n")
                    if line.startswith(name + ":")))


# A script's writes reach a replica as the effects its commands logged, one record: the record
# shipped holds XADD/SET... and no EVAL, and the replica applies it without running Lua.

LUA_SCRIPT = """
    redis.call('XADD', KEYS[1], '*', 'f', ARGV[1])
    redis.call('SET', KEYS[2], ARGV[1], 'PX', 600000)
    redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')
    redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')
    return redis.call('TIME')
"""



def test_a_replica_applies_a_scripts_effects_without_lua(primary: ServerHandle,
                                                         tmp_path: Path) -> None:
    pytest.importorskip("lupa")
    p = primary.engine
    p.execute("SET", "warm", "up")
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: r.replication.follower.link_up and r.digest() == p.digest())
        shipped: list[Record] = []  # what the primary logs, hence what its replicas get
        p.add_sink(shipped.append)
        p.execute("EVAL", LUA_SCRIPT, "2", "s", "str", "v")
        wait_for(lambda: r.journal.lsn == p.journal.lsn and r.digest() == p.digest())
        assert r.scripting is None  # no Lua ran on the replica
        assert r.execute("GET", "str") == b"v" and r.execute("XLEN", "s") == 1
        script_records = [rec for rec in shipped if any(
            bytes(e[0]).upper() == b"XADD" for e in rec.effects)]
        assert len(script_records) == 1  # the whole script: one record
        names = {bytes(e[0]).upper() for e in script_records[0].effects}
        assert b"XADD" in names and b"SET" in names
        assert not names & {b"EVAL", b"EVALSHA"}


def test_under_always_a_replica_gets_only_what_an_fsync_covered(tmp_path: Path) -> None:
    """Under `always` a write is acknowledged once an fsync covers it, and only then sent on:
    a write whose fsync failed is answered MISCONF and reaches no replica."""
    import errno

    from tests.support.faultfs import FaultyFS

    fs = FaultyFS()
    engine = Engine.open(str(tmp_path / "primary"), appendfsync="always", fs=fs)
    handle = start_server(engine)
    try:
        engine.execute("XADD", "s", "1-1", "f", "v")
        with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", handle.port)) as r:
            wait_for(lambda: synced(handle, r))
            fs.fail_fsyncs(errno.EIO)
            with pytest.raises(ReplyError, match="^MISCONF"):
                engine.execute("XADD", "s", "2-1", "f", "refused")
            assert engine.execute("XLEN", "s") == 1  # rolled back on the primary
            engine.execute("PING")
            time.sleep(0.5)  # what the replica would have been sent, it has had time to get
            assert r.execute("XLEN", "s") == 1
            assert r.journal.lsn == engine.journal.lsn == 1
    finally:
        handle.stop()


def test_a_replicas_server_starting_while_its_follower_writes_cuts_no_record(
        primary: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`streamkeep serve --replicaof`: Engine.open starts the follower, which logs its first
    records through the AOF's mapped tail (no server yet: records are written one at a time),
    then the server starts and switches the journal to buffered writes, which closes that tail.
    The switch waits for the engine lock: a write parked after its bytes were copied into the
    tail, before the journal counted them, would otherwise have them cut off the file by the
    close, and the next records appended after the hole (a directory that no longer opens:
    "record LSN 51 where 1 was expected ... followed by valid records")."""
    p = primary.engine
    for i in range(1, 51):
        p.execute("XADD", "s", f"{i}-1", "f", "v")
    parked, go = threading.Event(), threading.Event()
    copy = MappedTail.write

    def parking_copy(tail: MappedTail, offset: int, data: bytes) -> bool:
        copied = copy(tail, offset, data)
        if copied and threading.current_thread().name == "replica-follower" \
                and not parked.is_set():
            parked.set()  # the bytes are in the tail; the journal has not counted them yet
            go.wait()
        return copied

    monkeypatch.setattr(MappedTail, "write", parking_copy)
    r = Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port))
    if not r.journal.mappable:
        go.set()
        r.close()
        pytest.skip("no mapped appends on this file system")
    server = Server(r, "127.0.0.1", 0)
    ready = threading.Event()
    thread = threading.Thread(target=run_server, args=(server, lambda _srv: ready.set()),
                              daemon=True)
    try:
        wait_for(parked.is_set)
        thread.start()
        # The server's start reaches its switch at once, unless it waits for the lock the
        # parked write holds (it must): this wait only gives a wrong switch the time to show.
        ready.wait(1.0)
        go.set()
        wait_for(ready.is_set)
        for i in range(51, 61):
            p.execute("XADD", "s", f"{i}-1", "f", "v")
        wait_for(lambda: synced(primary, r))
    finally:
        go.set()
        if thread.is_alive():
            ready.wait(10.0)
            ServerHandle(server, thread).stop()  # closes the replica's engine
        else:
            r.close()
    with Engine.open(str(tmp_path / "replica")) as again:  # its AOF holds every record
        assert again.journal.lsn == p.journal.lsn == 60
        assert again.digest() == p.digest()
