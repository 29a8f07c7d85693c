"""aof.journal: a rotation that runs out of descriptors (EMFILE/ENFILE) is postponed and
retried, never turned into the permanent MISCONF refusal (issue 11, defect C): the current
segment is still good and nothing was lost. So is one whose new segment cannot be written or
synced (EIO, ENOSPC: found by crashbench's ioerror mode, where the OSError escaped the
command)."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof import journal as journal_mod
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
