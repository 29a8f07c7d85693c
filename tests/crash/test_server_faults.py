"""The server's write path under I/O faults (real files through the FaultyFS seam, a real
server on a socket): the AOF records of a batch of commands are written with one write() before
the batch's replies leave, and a reply never acknowledges a record that did not reach the OS
(or, under `always`, the disk)."""

from __future__ import annotations

import errno
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.engine.wire.reply_parser import encode_command
from tests.support.faultfs import FaultyFS
from tests.support.resp_client import RespClient, RespError
from tests.support.server_util import ServerHandle, start_server

ENOSPC_LINE = "MISCONF Errors writing to the AOF file: No space left on device"
EIO_LINE = "MISCONF Errors writing to the AOF file: Input/output error"


@pytest.fixture
def faulty() -> FaultyFS:
    return FaultyFS()


def serve(directory: Path, fs: FaultyFS, policy: str) -> ServerHandle:
    return start_server(Engine.open(str(directory), appendfsync=policy, fs=fs))


@pytest.fixture
def everysec(tmp_path: Path, faulty: FaultyFS) -> Iterator[ServerHandle]:
    handle = serve(tmp_path / "db", faulty, "everysec")
    try:
        yield handle
    finally:
        handle.stop()


def test_a_pipeline_costs_one_aof_write(everysec: ServerHandle, faulty: FaultyFS) -> None:
    with RespClient(everysec.host, everysec.port) as c:
        c.execute("PING")
        before = faulty.writes
        replies = c.pipeline(*[("XADD", "s", f"{i}-1", "f", "v") for i in range(1, 101)])
        assert replies == [f"{i}-1".encode() for i in range(1, 101)]
        # One write() per batch the server reads (a 5 KB pipeline usually arrives in one read;
        # TCP may split it), not one per record.
        assert 1 <= faulty.writes - before <= 5, faulty.writes - before
        assert everysec.engine.journal.written_lsn == everysec.engine.journal.lsn


def test_unwritten_records_are_not_acknowledged(everysec: ServerHandle,
                                                faulty: FaultyFS) -> None:
    with RespClient(everysec.host, everysec.port) as c:
        c.execute("XADD", "s", "1-1", "f", "v")
        faulty.fail_writes(errno.ENOSPC, partial=True)
        replies = c.pipeline(("XADD", "s", "2-1", "f", "v"), ("XLEN", "s"),
                           ("XADD", "s", "3-1", "f", "v"))
        # The batch's record could not be written: both writes are refused and rolled back.
        # (The read between them ran before the batch's write was tried, and saw 2-1.)
        assert [str(r) for r in replies] == [ENOSPC_LINE, "2", ENOSPC_LINE]
        assert isinstance(replies[0], RespError)
        with pytest.raises(RespError, match="^MISCONF"):
            c.execute("XADD", "s", "4-1", "f", "v")
        assert c.execute("XLEN", "s") == 1  # reads go on, on the log's state
        assert c.execute("XRANGE", "s", "-", "+") == [[b"1-1", [b"f", b"v"]]]
        faulty.clear()
        deadline = time.monotonic() + 10
        while True:  # the once-a-second retry reopens the gate
            try:
                c.execute("XADD", "s", "2-1", "f", "v")  # the producer's retry
                break
            except RespError:
                assert time.monotonic() < deadline, "writes were not accepted again"
                time.sleep(0.1)
        c.execute("XADD", "s", "3-1", "f", "v")
        digest = c.execute("DEBUG", "DIGEST")
    directory = Path(everysec.engine.datadir.path)
    everysec.stop()
    with Engine.open(str(directory)) as reopened:
        assert reopened.execute("XLEN", "s") == 3
        assert reopened.digest() == digest


def test_a_blocked_reader_served_by_a_refused_write_gets_misconf(everysec: ServerHandle,
                                                                 faulty: FaultyFS) -> None:
    """A blocked XREADGROUP woken by an XADD whose batch cannot be written: its delivery was
    in that batch, so it is refused and rolled back too (the entry stays undelivered)."""
    with RespClient(everysec.host, everysec.port) as reader, \
            RespClient(everysec.host, everysec.port) as writer:
        writer.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        reader.send_raw(encode_command(["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0",
                                        "STREAMS", "s", ">"]))
        deadline = time.monotonic() + 10
        while b"blocked_clients:1" not in writer.execute("INFO", "clients"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        faulty.fail_writes(errno.EIO)
        with pytest.raises(RespError) as err:
            writer.execute("XADD", "s", "1-1", "f", "v")
        assert str(err.value) == EIO_LINE
        with pytest.raises(RespError) as err:
            reader.read()
        assert str(err.value) == EIO_LINE
        assert writer.execute("XLEN", "s") == 0
        assert writer.execute("XPENDING", "s", "g")[0] == 0


def test_failed_fsync_under_always_answers_misconf(tmp_path: Path, faulty: FaultyFS) -> None:
    handle = serve(tmp_path / "db", faulty, "always")
    try:
        with RespClient(handle.host, handle.port) as c:
            assert c.execute("XADD", "s", "1-1", "f", "v") == b"1-1"
            faulty.fail_fsyncs(errno.EIO)
            # Several clients' writes in one loop pass share the failed fsync: none of them
            # is acknowledged.
            with RespClient(handle.host, handle.port) as d:
                c.send_raw(encode_command(["XADD", "s", "2-1", "f", "v"]))
                d.send_raw(encode_command(["XADD", "t", "1-1", "f", "v"]))
                for client in (c, d):
                    with pytest.raises(RespError) as err:
                        client.read()
                    assert str(err.value) == EIO_LINE
            faulty.clear()
            time.sleep(1.2)
            with pytest.raises(RespError, match="^MISCONF"):  # never retried: refused until
                c.execute("XADD", "s", "3-1", "f", "v")        # the directory is reopened
            # Neither was acknowledged: both rolled back, and cut off the file.
            assert c.execute("XLEN", "s") == 1
            assert c.execute("EXISTS", "t") == 0
    finally:
        handle.stop()
    with Engine.open(str(tmp_path / "db")) as reopened:
        assert reopened.execute("XLEN", "s") == 1
        assert reopened.execute("EXISTS", "t") == 0
