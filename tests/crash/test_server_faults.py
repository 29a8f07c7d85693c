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
        # Both writes are applied in memory (the records wait for the retry, in LSN order) but
        # neither is acknowledged; the read between them is answered.
        assert [str(r) for r in replies] == [ENOSPC_LINE, "2", ENOSPC_LINE]
        assert isinstance(replies[0], RespError)
        with pytest.raises(RespError, match="^MISCONF"):
            c.execute("XADD", "s", "4-1", "f", "v")
        assert c.execute("XLEN", "s") == 3  # reads go on
        faulty.clear()
        deadline = time.monotonic() + 5
        while True:  # the once-a-second retry writes the kept records, then writes resume
            try:
                c.execute("XADD", "s", "5-1", "f", "v")
                break
            except RespError:
                assert time.monotonic() < deadline, "writes were not accepted again"
                time.sleep(0.1)
        digest = c.execute("DEBUG", "DIGEST")
    directory = Path(everysec.engine.datadir.path)
    everysec.stop()
    with Engine.open(str(directory)) as reopened:
        assert reopened.execute("XLEN", "s") == 4
        assert reopened.digest() == digest


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
            assert c.execute("XLEN", "s") == 2
    finally:
        handle.stop()
