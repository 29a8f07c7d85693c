"""The segments as the replication backlog: a cursor reads the exact bytes of the records after
an LSN, across rotations, up to what is written; a compaction does not pull the files from under
it; the LSN of a compacted record is not in the backlog."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.backlog import BacklogGone, open_after, open_snapshot
from streamkeep.aof.codec import HEADER_SIZE, decode_stream

SEGMENT_MAX = 4096


def opened(d: Path) -> Engine:
    return Engine.open(str(d), aof_segment_max_bytes=SEGMENT_MAX,
                       auto_aof_rewrite_percentage=0)


def read_all(engine: Engine, cursor) -> bytes:  # type: ignore[no-untyped-def]
    journal = engine.journal
    out = b""
    while True:
        with engine.lock:
            segment, written = journal.manifest.segments[-1].segment, journal.size
        data = cursor.read(1000, segment, written)
        if not data:
            return out
        out += data


def lsns(data: bytes, first: int) -> list[int]:
    chunk = decode_stream(data, 0, first)
    assert chunk.end == len(data)
    return [r[0] for r in chunk.records]


def test_a_cursor_reads_the_records_after_an_lsn_across_segments(tmp_path: Path) -> None:
    with opened(tmp_path) as db:
        for i in range(300):
            db.execute("XADD", "s", "*", "f", "x" * 30, "i", str(i))
        datadir = db.datadir
        assert len(datadir.journal.manifest.segments) > 3
        for after in (0, 1, 57, 150, 299, 300):
            last = db.journal.lsn
            with db.lock:
                position = open_after(datadir.fs, datadir.path, datadir.journal, after)
            assert position is not None
            assert (position.crc is None) == (after == 0)
            data = read_all(db, position.cursor)
            assert lsns(data, after + 1) == list(range(after + 1, last + 1))
            # ... and goes on with what is written later.
            db.execute("XADD", "s", "*", "f", "later")
            assert lsns(read_all(db, position.cursor), last + 1) == [last + 1]
            position.cursor.close()
        with db.lock:
            assert open_after(datadir.fs, datadir.path, datadir.journal, 10**6) is None


def test_compacted_records_are_not_in_the_backlog_and_open_files_stay_readable(
        tmp_path: Path) -> None:
    with opened(tmp_path) as db:
        for i in range(200):
            db.execute("XADD", "s", "*", "i", str(i) * 20)
        datadir = db.datadir
        with db.lock:
            early = open_after(datadir.fs, datadir.path, datadir.journal, 5)
        assert early is not None
        entry = db.compact()
        assert entry is not None and entry.lsn == 200
        # The segments it holds were removed by the compaction: still readable through it.
        assert lsns(read_all(db, early.cursor), 6) == list(range(6, 201))
        early.cursor.close()
        with db.lock:
            assert open_after(datadir.fs, datadir.path, datadir.journal, 5) is None
            snap, fds, position = open_snapshot(datadir.fs, datadir.path, datadir.journal)
        assert snap is not None and snap.lsn == 200
        assert len(fds) == len(snap.files) == 2 and min(fds) >= 0  # its file and its part
        for fd in fds:
            os.close(fd)
        db.execute("XADD", "s", "*", "i", "after")
        assert lsns(read_all(db, position.cursor), 201) == [201]
        position.cursor.close()


def test_a_cursor_too_far_behind_a_compaction_says_so(tmp_path: Path) -> None:
    with opened(tmp_path) as db:
        datadir = db.datadir
        db.execute("XADD", "s", "*", "i", "0")
        with db.lock:
            position = open_after(datadir.fs, datadir.path, datadir.journal, 0)
        assert position is not None
        for i in range(300):  # several rotations the cursor has not opened ...
            db.execute("XADD", "s", "*", "f", "x" * 30, "i", str(i))
        db.compact()  # ... are compacted away
        with pytest.raises(BacklogGone):
            read_all(db, position.cursor)
        position.cursor.close()
        assert HEADER_SIZE == 32
