"""aof.journal: a rotation that runs out of descriptors (EMFILE/ENFILE) is postponed and
retried, never turned into the permanent MISCONF refusal (issue 11, defect C): the current
segment is still good and nothing was lost. So is one whose new segment cannot be written or
synced (EIO, ENOSPC: found by crashbench's ioerror mode, where the OSError escaped the
command).

Mapped appends (aof-mapped-appends): records written one at a time (everysec and no, outside
the server's deferred mode) are copied into a mapping of the segment's allocated tail instead of
one write(2) each, and the file runs on in zeros past the written end while it is open. Every way
back to write(2) (a big record, `always`, the server's deferred mode, the setting turned off, a
rotation, close) cuts the file back to its written end first; a closed segment ends at its last
record; a directory left with a zero tail reopens with every record and appends after the last.

Callers' and services' code run by the journal's threads: a durable write's callback that
raises (an event loop that has closed) is logged, the callbacks and waiting callers after it in
its round are still called and woken, even thousands of them; a hook that raises on the
group-commit thread (replication's `on_written`) or in the once-a-second tick (the retry) is
logged; in each case the thread goes on and the journal keeps taking writes.
"""

from __future__ import annotations

import errno
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.aof import journal as journal_mod
from streamkeep.aof.codec import BIG_ARG, HEADER_SIZE
from streamkeep.aof.fs import MAPPABLE_FILE_SYSTEMS, RealFS, file_system_type
from streamkeep.aof.segment_reader import SegmentReader
from tests.support.faultfs import FaultyFS


class OutOfDescriptorsFS(FaultyFS):
    """Creating a new segment fails with `err` while `failing` is set (the process is at its
    descriptor limit); everything else works."""

    def __init__(self, err: int, match: str = "segment-") -> None:
        super().__init__()
        self.err = err
        self.match = match
        self.failing = False
        self.refused = 0

    def open_write_new(self, path: str) -> int:
        if self.failing and self.match in path:
            self.refused += 1
            raise OSError(self.err, "injected")
        return super().open_write_new(path)


@pytest.mark.parametrize("match", ["segment-", "manifest.json.tmp"])  # the new segment, the manifest's
@pytest.mark.parametrize("err", [errno.EMFILE, errno.ENFILE])  # temporary file
def test_rotation_out_of_descriptors_is_retried(tmp_path: Path, err: int, match: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_mod, "ROTATE_RETRY_SECONDS", 0.0, raising=False)
    fs = OutOfDescriptorsFS(err, match)
    directory = str(tmp_path / "db")
    with Engine.open(directory, fs=fs, aof_segment_max_bytes=600) as engine:
        fs.failing = True
        for i in range(30):  # every write past 600 bytes tries to rotate, and cannot
            engine.execute("XADD", "s", "*", "n", f"starved-{i}")
        assert fs.refused >= 2, "no rotation was attempted"
        assert engine.journal.error is None
        fs.failing = False
        time.sleep(0.01)
        for i in range(30):  # descriptors are back: the rotation happens, writes go on
            engine.execute("XADD", "s", "*", "n", f"after-{i}")
        assert len(engine.journal.manifest.segments) >= 2
    with Engine.open(directory) as engine:
        assert engine.execute("XLEN", "s") == 60


class FailingNewSegmentFS(FaultyFS):
    """The new segment's header write or fdatasync fails with `err` while `failing` is set;
    the current segment's writes and fsyncs work."""

    def __init__(self, err: int, call: str) -> None:
        super().__init__()
        self.err, self.call = err, call
        self.failing = False
        self.fresh: set[int] = set()  # descriptors of segments opened by open_write_new

    def open_write_new(self, path: str) -> int:
        fd = super().open_write_new(path)
        if "segment-" in path:
            self.fresh.add(fd)
        return fd

    def close(self, fd: int) -> None:
        self.fresh.discard(fd)
        super().close(fd)

    def write(self, fd: int, data: bytes) -> None:
        if self.failing and self.call == "write" and fd in self.fresh:
            raise OSError(self.err, "injected")
        super().write(fd, data)

    def fdatasync(self, fd: int) -> None:
        if self.failing and self.call == "fsync" and fd in self.fresh:
            raise OSError(self.err, "injected")
        super().fdatasync(fd)


@pytest.mark.parametrize("call", ["write", "fsync"])
@pytest.mark.parametrize("err", [errno.EIO, errno.ENOSPC])
def test_rotation_io_error_on_the_new_segment_is_postponed(tmp_path: Path, err: int, call: str,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(journal_mod, "ROTATE_RETRY_SECONDS_IO", 0.0)
    fs = FailingNewSegmentFS(err, call)
    directory = str(tmp_path / "db")
    with Engine.open(directory, fs=fs, aof_segment_max_bytes=600) as engine:
        fs.failing = True
        for i in range(30):  # every write past 600 bytes tries to rotate, and fails
            engine.execute("XADD", "s", "*", "n", f"failing-{i}")
        assert engine.journal.error is None
        assert len(engine.journal.manifest.segments) == 1
        fs.failing = False
        time.sleep(0.01)
        for i in range(30):
            engine.execute("XADD", "s", "*", "n", f"after-{i}")
        assert len(engine.journal.manifest.segments) >= 2
    with Engine.open(directory) as engine:
        assert engine.execute("XLEN", "s") == 60


MAPPED = pytest.mark.skipif(
    file_system_type(tempfile.gettempdir()) not in MAPPABLE_FILE_SYSTEMS,
    reason="the temporary directory's file system does not take mapped appends")


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("segment-*.aof"))


def records_end(path: Path) -> tuple[int, int, int]:
    """(records, where they end, zeros after them) of a segment file."""
    reader = SegmentReader(RealFS(), str(path))
    count = sum(len(batch) for batch in reader.batches())
    assert reader.damage is None, reader.damage
    return count, reader.end, reader.zero_tail


# --- mapped appends ---------------------------------------------------------------------------------

@MAPPED
def test_everysec_appends_through_the_tail_and_close_cuts_it(tmp_path: Path) -> None:
    engine = Engine.open(str(tmp_path), appendfsync="everysec")
    journal = engine.journal
    assert journal is not None and journal.tail is not None
    for i in range(500):
        engine.execute("XADD", "s", "*", "n", str(i))
    (seg,) = segments(tmp_path)
    count, end, zeros = records_end(seg)
    assert (count, end) == (500, journal.size) and zeros > 0, "the records, then zeros"
    assert journal.records_written == 500
    engine.close()
    assert seg.stat().st_size == end, "close cuts the file back to its last record"
    with Engine.open(str(tmp_path)) as again:
        assert again.execute("XLEN", "s") == 500


@MAPPED
@pytest.mark.parametrize("leave", ["always", "deferred", "setting off", "big record"])
def test_every_way_back_to_write_cuts_the_tail_first(tmp_path: Path, leave: str) -> None:
    engine = Engine.open(str(tmp_path), appendfsync="everysec")
    journal = engine.journal
    assert journal is not None
    try:
        engine.execute("XADD", "s", "*", "n", "before")
        assert journal.tail is not None
        if leave == "always":
            engine.execute("CONFIG", "SET", "appendfsync", "always")
        elif leave == "deferred":
            with engine.lock:
                journal.set_deferred(True)
        elif leave == "setting off":
            engine.execute("CONFIG", "SET", "aof-mapped-appends", "no")
        if leave == "big record":
            engine.execute("XADD", "s", "*", "n", b"v" * BIG_ARG)  # written in parts, write(2)
            assert journal.tail is None
        else:
            assert journal.tail is None
            (seg,) = segments(tmp_path)
            assert seg.stat().st_size == journal.size, "cut back to the written end"
            engine.execute("XADD", "s", "*", "n", "after")
            assert seg.stat().st_size == journal.size, "appended with write(2) at the end"
        if leave == "deferred":
            with engine.lock:
                journal.flush_pending()
                journal.set_deferred(False)
        elif leave != "big record":
            engine.execute("CONFIG", "SET", "appendfsync", "everysec")
            engine.execute("CONFIG", "SET", "aof-mapped-appends", "yes")
        engine.execute("XADD", "s", "*", "n", "mapped again")
        assert journal.tail is not None, "back to the mapped tail"
    finally:
        engine.close()
    (seg,) = segments(tmp_path)
    count, end, zeros = records_end(seg)
    assert zeros == 0 and end == seg.stat().st_size
    with Engine.open(str(tmp_path)) as again:
        assert again.execute("XLEN", "s") == 3


@MAPPED
def test_a_closed_segment_ends_at_its_last_record(tmp_path: Path) -> None:
    """Replication reads a closed segment to its size: a rotation cuts the tail off first."""
    with Engine.open(str(tmp_path), appendfsync="no", aof_segment_max_bytes=4096) as engine:
        for i in range(400):
            engine.execute("XADD", "s", "*", "n", str(i))
        segs = segments(tmp_path)
        assert len(segs) > 3
        total = 0
        for seg in segs[:-1]:
            count, end, zeros = records_end(seg)
            assert zeros == 0 and end == seg.stat().st_size, seg
            total += count
        assert records_end(segs[-1])[2] > 0, "the segment being written has its tail"
    assert total + records_end(segments(tmp_path)[-1])[0] == 400


@MAPPED
def test_the_setting_off_reserves_space_without_growing_the_file(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path), aof_mapped_appends="no") as engine:
        assert engine.journal is not None and engine.journal.tail is None
        engine.execute("XADD", "s", "*", "n", "1")
        (seg,) = segments(tmp_path)
        assert seg.stat().st_size == engine.journal.size
        assert engine.execute("CONFIG", "GET", "aof-mapped-appends") == [
            b"aof-mapped-appends", b"no"]


@MAPPED
def test_a_directory_left_with_a_mapped_tail_reopens_and_appends_after_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What a killed process leaves (its files as they are while it runs, zeros and all,
    copied aside): the next open cuts the zeros, keeps every record, and the next record
    follows the last one. (tests/crash/test_aof_crash.py kills real processes.)"""
    live, left = tmp_path / "live", tmp_path / "left"
    with Engine.open(str(live), appendfsync="everysec") as engine:
        for i in range(100):
            engine.execute("XADD", "s", "*", "n", str(i))
        shutil.copytree(live, left, ignore=shutil.ignore_patterns("LOCK"))
    (seg,) = segments(left)
    count, end, zeros = records_end(seg)
    assert count == 100 and zeros > 0
    caplog.set_level(logging.INFO, logger="streamkeep.aof")
    with Engine.open(str(left), appendfsync="always") as again:
        assert again.execute("XLEN", "s") == 100
        assert seg.stat().st_size == end, "the zeros were cut before anything was appended"
        again.execute("XADD", "s", "*", "n", "after")
    assert any("bytes of zeros" in r.getMessage() for r in caplog.records)
    assert not list(left.glob("*.cut-*"))
    count, end_after, zeros = records_end(seg)
    assert (count, zeros) == (101, 0) and end_after > end
    with Engine.open(str(left)) as third:
        assert third.execute("XLEN", "s") == 101


@MAPPED
def test_a_tail_that_cannot_be_opened_leaves_the_writes_to_write2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of descriptors when the tail's own is opened: appends go on with write(2), no
    refusal, and a later top-up maps again."""
    real = journal_mod.MappedTail
    refusing = [True]

    def tail(path: str, written: int) -> object:
        if refusing[0]:
            raise OSError(errno.EMFILE, "injected")
        return real(path, written)

    monkeypatch.setattr(journal_mod, "MappedTail", tail)
    with Engine.open(str(tmp_path), aof_preallocate="64kb") as engine:
        journal = engine.journal
        assert journal is not None and journal.tail is None and journal.error is None
        engine.execute("XADD", "s", "*", "f", "v")
        (seg,) = segments(tmp_path)
        assert seg.stat().st_size == journal.size, "written with write(2), nothing ahead"
        refusing[0] = False
        for _i in range(1000):  # past the 64 KB allocated ahead: the next top-up maps
            engine.execute("XADD", "s", "*", "f", "v" * 100)
        assert journal.tail is not None
    with Engine.open(str(tmp_path)) as again:
        assert again.execute("XLEN", "s") == 1001


@MAPPED
def test_the_header_only_segment_of_a_new_directory_is_mapped(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as engine:
        assert engine.journal is not None and engine.journal.tail is not None
        assert engine.journal.size == HEADER_SIZE


# --- callers' and services' code on the journal's threads ---------------------------------------

GUARD = 30.0  # seconds: only so that a thread that died fails the test instead of hanging it


def started_thread(before: set[threading.Thread], name: str) -> threading.Thread:
    """The thread called `name` started since `before` was taken (one engine's)."""
    (thread,) = [t for t in threading.enumerate() if t not in before and t.name == name]
    return thread


def wait_until(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + GUARD
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_durable_writes_callback_that_raises_is_its_callers_loss(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`when_durable`'s callback runs on the group-commit thread. One that raises (what
    call_soon_threadsafe does once its event loop has closed) is logged; the callback after it
    in the round is still called, the thread serves the next rounds and nothing refuses
    writes."""
    before = set(threading.enumerate())
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        journal = engine.journal
        assert journal is not None
        commit = started_thread(before, "aof-group-commit")
        called: list[str] = []

        def fails() -> None:
            called.append("fails")
            raise RuntimeError("Event loop is closed")

        session = Session()
        with caplog.at_level(logging.ERROR, logger="streamkeep.aof"):
            with engine.lock:  # (the round writes the buffer under it: both callbacks queued)
                _reply, first = engine.submit(session, (b"XADD", b"s", b"*", b"n", b"1"))
                _reply, second = engine.submit(session, (b"XADD", b"s", b"*", b"n", b"2"))
                assert not journal.when_durable(first, fails)
                assert not journal.when_durable(second, partial(called.append, "after"))
            journal.wait_durable(second)  # queued after both: woken once they were called
            assert called == ["fails", "after"]
            assert engine.execute("XADD", "s", "*", "n", "3")  # a round after the failure
        assert commit.is_alive()
        assert journal.error is None and not journal.fsync_failed
        assert sum("callback failed" in r.getMessage() for r in caplog.records) == 1
        assert engine.execute("XLEN", "s") == 3


def test_a_round_calls_back_every_one_of_thousands_of_writes(tmp_path: Path) -> None:
    """A round may cover thousands of callbacks (an event loop's many writers): every one is
    called, in order, and the caller waiting after them is woken."""
    before = set(threading.enumerate())
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        journal = engine.journal
        assert journal is not None
        commit = started_thread(before, "aof-group-commit")
        called: list[int] = []
        with engine.lock:
            _reply, lsn = engine.submit(Session(), (b"XADD", b"s", b"*", b"n", b"1"))
            for i in range(5000):
                assert not journal.when_durable(lsn, partial(called.append, i))
        journal.wait_durable(lsn)
        assert called == list(range(5000))
        assert engine.execute("XADD", "s", "*", "n", "2")
        assert commit.is_alive()


def test_a_hook_that_raises_on_the_group_commit_thread_fails_no_write(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Under `always` the group-commit thread calls `on_written` (replication's pump) after
    each fsync. One that raises is logged: the writes of its round are durable and answered,
    and the journal takes the next ones; only the log's own failures refuse writes."""
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        journal = engine.journal
        assert journal is not None
        calls: list[int] = []

        def pump() -> None:
            calls.append(journal.synced_lsn)
            raise RuntimeError("a hook's own bug")

        with caplog.at_level(logging.ERROR, logger="streamkeep.aof"):
            journal.on_written = pump
            for i in range(3):
                engine.execute("XADD", "s", "*", "n", str(i))
            journal.on_written = None
        assert len(calls) >= 1  # (the three writes may share rounds)
        assert journal.error is None and not journal.fsync_failed
        assert engine.execute("XADD", "s", "*", "n", "after")
        assert engine.execute("XLEN", "s") == 4
        assert any("on_written hook failed" in r.getMessage() for r in caplog.records)


def test_the_once_a_second_thread_outlives_a_tick_that_raises(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The once-a-second thread is everysec's fsync, and the retry that reopens the gate
    after a failed write. A tick whose retry raises is logged and the next tick runs: the gate
    reopens, and the writes after it are fsynced."""
    before = set(threading.enumerate())
    fs = FaultyFS()
    with Engine.open(str(tmp_path / "d"), appendfsync="everysec", fs=fs,
                     aof_preallocate=0) as engine:
        journal = engine.journal
        assert journal is not None and journal.on_retry is not None
        ticker = started_thread(before, "aof-every-second")
        retry, failed = journal.on_retry, [0]

        def flaky_retry() -> None:  # the retry, failing once (as a hook it runs may)
            if not failed[0]:
                failed[0] += 1
                raise RuntimeError("a hook's own bug")
            retry()

        journal.on_retry = flaky_retry
        fs.fail_writes(errno.EIO)
        with caplog.at_level(logging.ERROR, logger="streamkeep.aof"):
            with pytest.raises(ReplyError, match="^MISCONF"):
                engine.execute("XADD", "s", "*", "n", "refused")
            fs.clear()
            assert wait_until(lambda: journal.error is None), "the gate never reopened"
        assert failed == [1] and ticker.is_alive()
        assert any("tick failed" in r.getMessage() for r in caplog.records)
        engine.execute("XADD", "s", "*", "n", "after")
        assert wait_until(lambda: journal.synced_lsn == journal.lsn), "no fsync after it"
        assert engine.execute("XLEN", "s") == 1
