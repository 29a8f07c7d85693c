"""How the primary answers PSYNC (over a real socket to a server thread): a partial sync when the
replica's history and LSN are in the segments and its last record's CRC matches ours, a full
sync otherwise; a fresh snapshot built first when the log after the current one is big."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.backlog import open_after
from streamkeep.replication import sender
from tests.support import v3_snapshot as v3
from tests.support.server_util import ServerHandle, connect, start_server


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[ServerHandle]:
    engine = Engine.open(str(tmp_path / "p"), auto_aof_rewrite_percentage=0)
    handle = start_server(engine)
    try:
        yield handle
    finally:
        handle.stop()


def psync_reply(port: int, *argv: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), 5) as sock:
        sock.sendall(b"REPLCONF capa sk-records\r\n")
        assert sock.recv(5) == b"+OK\r\n"
        sock.sendall(("PSYNC " + " ".join(argv) + "\r\n").encode())
        sock.settimeout(5)
        data = b""
        while b"\r\n" not in data:
            data += sock.recv(4096)
        return data.split(b"\r\n", 1)[0]


def last_crc(engine: Engine, lsn: int) -> str:
    datadir = engine.datadir
    with engine.lock:
        position = open_after(datadir.fs, datadir.path, datadir.journal, lsn)
    assert position is not None and position.crc is not None
    position.cursor.close()
    return f"{position.crc:08x}"


def test_psync_continues_only_the_same_history(primary: ServerHandle) -> None:
    engine = primary.engine
    for i in range(20):
        engine.execute("XADD", "s", "*", "i", str(i))
    replid = engine.datadir.history()[0]
    port = primary.port
    assert psync_reply(port, replid, "12") == f"+CONTINUE {replid}".encode()
    assert psync_reply(port, replid, "12", last_crc(engine, 12)) == \
        f"+CONTINUE {replid}".encode()
    assert psync_reply(port, replid, "20") == f"+CONTINUE {replid}".encode()
    # Another history, a diverged record, a replica ahead of us, no history at all: full.
    full = f"+FULLRESYNC {replid} 0".encode()
    assert psync_reply(port, "cd" * 20, "12") == full
    assert psync_reply(port, replid, "12", "deadbeef") == full
    assert psync_reply(port, replid, "21") == full
    assert psync_reply(port, "?", "-1") == full
    stats = engine.execute("INFO", "stats").decode()
    assert "sync_full:4" in stats and "sync_partial_ok:3" in stats
    assert "sync_partial_err:3" in stats


def test_a_full_sync_builds_a_fresh_snapshot_when_the_log_after_it_is_big(
        primary: ServerHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sender, "FRESH_SNAPSHOT_MIN_BYTES", 1000)
    engine = primary.engine
    for i in range(500):
        engine.execute("XADD", "s", "*", "i", str(i))
    assert engine.datadir.journal.manifest.snapshot is None
    with Engine.open(str(tmp_path / "r"), replicaof=("127.0.0.1", primary.port)) as replica:
        deadline = time.monotonic() + 20
        while replica.digest() != engine.digest() or replica.journal.lsn != 500:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        snap = engine.datadir.journal.manifest.snapshot
        assert snap is not None and snap.lsn == 500  # built for the sync, by the child
        assert replica.datadir.journal.manifest.snapshot == \
            type(snap)(snap.file, 500, snap.size, replica.datadir.journal.manifest.snapshot
                       .created_ms, snap.crc32, snap.parts)  # the same files, checksums and all
        assert snap.parts  # (a segmented snapshot: sent as a bundle of its files)


def test_a_snapshot_damaged_on_disk_is_not_sent(primary: ServerHandle, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """The file's bytes differ from the checksum its manifest recorded: the primary drops the
    replica before the snapshot's trailer (an error names the file), and the replica loads
    nothing of it, retrying."""
    import logging

    engine = primary.engine
    for i in range(300):
        engine.execute("XADD", "s", "*", "i", str(i))
    entry = engine.datadir.compact()
    assert entry is not None and entry.crc32 is not None
    path = Path(engine.datadir.path) / entry.file
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="streamkeep"), \
            Engine.open(str(tmp_path / "r"), replicaof=("127.0.0.1", primary.port)) as replica:
        deadline = time.monotonic() + 20
        while not any("not sending" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.02)
        assert replica.execute("XLEN", "s") == 0  # nothing of the damaged file was loaded
    sent = next(r.getMessage() for r in caplog.records if "not sending" in r.getMessage())
    assert str(path) in sent and "damaged" in sent


def test_a_full_sync_sends_a_format_3_snapshot_as_it_is(tmp_path: Path) -> None:
    """A primary whose snapshot an older version wrote sends that file; the replica loads it
    (its nodes packed as they load) to the primary's state."""
    want = v3.want()
    clock = want["clock_ms"]
    d = v3.v3_datadir(tmp_path / "p")
    handle = start_server(v3.opened(d, want))
    try:
        with Engine.open(str(tmp_path / "r"), replicaof=("127.0.0.1", handle.port),
                         clock=lambda: clock) as replica:
            deadline = time.monotonic() + 30
            while replica.digest() != want["digest"]:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            v3.same(replica, want)
            assert replica.datadir.journal.manifest.snapshot.crc32 == \
                handle.engine.datadir.journal.manifest.snapshot.crc32  # the same file
    finally:
        handle.stop()


def _synced(replica: Engine, engine: Engine) -> None:
    deadline = time.monotonic() + 20
    while replica.digest() != engine.digest() or replica.journal.lsn != engine.journal.lsn:
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.02)


def test_a_full_sync_sends_only_the_part_files_the_replica_lacks(
        primary: ServerHandle, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A segmented snapshot's part files are never changed: a replica that holds some (from
    an earlier full sync, or one cut short) announces them, and the primary sends their names
    only. Its state is the primary's either way."""
    import logging

    caplog.set_level(logging.INFO, logger="streamkeep.replication")
    engine = primary.engine
    for i in range(3000):
        engine.execute("XADD", "s", f"{i + 1}-1", "f", "x" * 60)
    engine.compact()  # the backlog's part
    options = {"replicaof": ("127.0.0.1", primary.port), "auto_aof_rewrite_percentage": 0}
    with Engine.open(str(tmp_path / "r"), **options) as replica:
        _synced(replica, engine)
        first = replica.replication.follower.sync_size  # type: ignore[union-attr]
        held = replica.datadir.journal.manifest.snapshot
        assert held is not None and len(held.parts) == 1
    # Offline, the replica falls behind a compaction: its LSN is compacted away.
    for i in range(200):
        engine.execute("XADD", "s", f"{i + 5000}-1", "f", "y")
    engine.compact()
    snap = engine.datadir.journal.manifest.snapshot
    assert snap is not None and held.parts[0] in snap.parts and len(snap.parts) == 2
    caplog.clear()
    with Engine.open(str(tmp_path / "r"), **options) as replica:
        _synced(replica, engine)
        second = replica.replication.follower.sync_size  # type: ignore[union-attr]
        assert replica.datadir.journal.manifest.snapshot.parts == snap.parts  # type: ignore[union-attr]
    # Its own file and the new part: not the backlog's part again.
    assert second < held.parts[0].size < first, (first, second)
    assert any("holds 1 of the snapshot's part files" in r.getMessage() for r in caplog.records)
    with Engine.open(str(tmp_path / "r")) as reopened:
        assert reopened.digest() == engine.digest()


def _until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_the_journal_calls_the_senders_only_while_a_replica_is_connected(
        primary: ServerHandle) -> None:
    engine = primary.engine
    journal = engine.datadir.journal
    assert journal.on_written is None  # no replica: no call a record
    engine.execute("XADD", "s", "*", "f", "v")
    replid = engine.datadir.history()[0]
    with socket.create_connection(("127.0.0.1", primary.port), 5) as sock:
        sock.sendall(b"REPLCONF capa sk-records\r\n")
        assert sock.recv(5) == b"+OK\r\n"
        sock.sendall(f"PSYNC {replid} 1\r\n".encode())
        _until(lambda: journal.on_written is not None, "a replica hooks the journal")
        engine.execute("XADD", "s", "*", "f", "v")  # (pumped to it)
    _until(lambda: journal.on_written is None, "its disconnection unhooks it")


def _frames_until_getack(sock: socket.socket, data: bytes) -> int:
    """Records (AOF frames) on a replica's stream before the next GETACK frame."""
    from streamkeep.aof.codec import FRAME, FRAME_SIZE

    records = 0
    while True:
        while len(data) < FRAME_SIZE:
            chunk = sock.recv(1 << 16)
            assert chunk, "the primary closed the link"
            data += chunk
        length, _crc = FRAME.unpack_from(data)
        if length == 0:
            return records
        while len(data) < FRAME_SIZE + length:
            chunk = sock.recv(1 << 16)
            assert chunk, "the primary closed the link"
            data += chunk
        data = data[FRAME_SIZE + length:]
        records += 1


@pytest.mark.parametrize("rotation", ["the segment is full", "an automatic compaction"])
def test_under_always_a_record_whose_write_rotated_the_segment_is_sent(
        tmp_path: Path, rotation: str) -> None:
    """appendfsync always: replicas are sent what an fsync covered. The write that fills a
    segment (or that starts a compaction, which rotates too) has its record fsynced by the
    rotation, so no group-commit round follows for it: the replicas must be told anyway, or
    that record waits on the primary until some later write (crashbench's primary-rollback
    round: a replica one record behind, its link up, for good)."""
    if rotation == "the segment is full":
        options = {"aof_segment_max_bytes": 4096, "auto_aof_rewrite_percentage": 0}
    else:
        options = {"auto_aof_rewrite_min_size": 4096, "auto_aof_rewrite_percentage": 100}
    engine = Engine.open(str(tmp_path / "p"), appendfsync="always", **options)
    handle = start_server(engine)
    try:
        client = connect(handle)
        client.execute("XADD", "s", "*", "f", "v")
        journal = engine.datadir.journal
        replid, lsn = engine.datadir.history()[0], journal.lsn
        with socket.create_connection(("127.0.0.1", handle.port), 10) as replica, \
                socket.create_connection(("127.0.0.1", handle.port), 10) as waiter:
            replica.settimeout(10)
            replica.sendall(b"REPLCONF capa sk-records\r\n")
            assert replica.recv(5) == b"+OK\r\n"
            replica.sendall(f"PSYNC {replid} {lsn}\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                data += replica.recv(4096)
            line, data = data.split(b"\r\n", 1)
            assert line == f"+CONTINUE {replid}".encode()
            segment = journal.written_end[0]
            while journal.written_end[0] == segment:  # until a write rotates the segment
                client.execute("XADD", "s", "*", "f", "x" * 100)
            # Acknowledged, so fsynced: every record is on the replica's stream before the
            # GETACK that WAIT asks for (the primary writes it at a record boundary, after
            # everything it has sent).
            waiter.sendall(b"WAIT 1 0\r\n")
            assert lsn + _frames_until_getack(replica, data) == journal.lsn
        client.close()
    finally:
        handle.stop()


def _getack_after(sock: socket.socket, data: bytes) -> tuple[int, bytes]:
    """Records (AOF frames) on a replica's stream before the next GETACK frame, and the bytes
    read past it."""
    from streamkeep.aof.codec import FRAME, FRAME_SIZE

    records = 0
    while True:
        while len(data) < FRAME_SIZE:
            chunk = sock.recv(1 << 16)
            assert chunk, "the primary closed the link"
            data += chunk
        length, _crc = FRAME.unpack_from(data)
        if length == 0:
            return records, data[FRAME_SIZE:]
        while len(data) < FRAME_SIZE + length:
            chunk = sock.recv(1 << 16)
            assert chunk, "the primary closed the link"
            data += chunk
        data = data[FRAME_SIZE + length:]
        records += 1


def test_a_wait_pipelined_behind_its_write_asks_for_the_ack_after_the_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """WAIT in the same pipeline as its write runs before the write's record is pumped: the
    GETACK it asks for at once goes ahead of the record, so the replica must be asked again
    once the record is sent (else WAIT hears of it at the next tick's GETACK, up to a second
    later, where Redis answers at once). The tick's GETACK is switched off here: without the
    second GETACK the replica's stream never asks again, and the read times out."""
    monkeypatch.setattr(sender.Primary, "tick", lambda self, timeout: None)
    engine = Engine.open(str(tmp_path / "p"), auto_aof_rewrite_percentage=0)
    handle = start_server(engine)
    try:
        journal = engine.datadir.journal
        engine.execute("SET", "before", "1")
        replid, lsn = engine.datadir.history()[0], journal.lsn
        with socket.create_connection(("127.0.0.1", handle.port), 10) as replica, \
                socket.create_connection(("127.0.0.1", handle.port), 10) as waiter:
            replica.settimeout(10)
            replica.sendall(b"REPLCONF capa sk-records\r\n")
            assert replica.recv(5) == b"+OK\r\n"
            replica.sendall(f"PSYNC {replid} {lsn}\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                data += replica.recv(4096)
            line, data = data.split(b"\r\n", 1)
            assert line == f"+CONTINUE {replid}".encode()
            _until(lambda: journal.on_written is not None, "the replica hooks the journal")
            waiter.sendall(b"SET k v\r\nWAIT 1 0\r\n")
            records, data = _getack_after(replica, data)
            if records == 0:  # (the GETACK WAIT asked for at once, ahead of the record)
                records, data = _getack_after(replica, data)
            assert records == 1  # the write's record, then a GETACK after it
    finally:
        handle.stop()
