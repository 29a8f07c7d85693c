"""Pinning what an export reads (tools/export/pin.py), without Spark: a data directory named
by a relative path (`d`, `./d`, `../x/d`) is pinned in place, the pins are absolute paths
(Spark's tasks open them from other processes), and releasing them leaves the directory as it
was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools.export.pin import LogPin, pin, pin_log


@pytest.fixture
def compacted(tmp_path: Path) -> Path:
    path = tmp_path / "x" / "d"
    with Engine.open(str(path), aof_segment_max_bytes=2048) as engine:
        for i in range(100):
            engine.execute("XADD", "s", "*", "n", str(i))
        engine.compact(wait=True)
        engine.execute("XADD", "s", "*", "n", "after")
    (tmp_path / "y").mkdir()
    return path


@pytest.mark.parametrize(("cwd", "name"), [("x", "d"), ("x", "./d"), ("y", "../x/d")])
def test_a_relative_directory_is_pinned_in_place(compacted: Path, cwd: str, name: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    before = sorted(os.listdir(compacted))
    monkeypatch.chdir(compacted.parent.parent / cwd)
    with pin_log(name) as log:
        assert isinstance(log, LogPin) and log.snapshot is not None and log.segments
        for path in log.paths():
            assert os.path.isabs(path) and os.path.dirname(os.path.dirname(path)) in (
                str(compacted.parent), str(compacted)) and os.path.exists(path)
        assert os.path.samefile(log.snapshot, compacted / os.path.basename(log.snapshot))
    with pin(name) as held:
        assert os.path.isabs(held.path) and os.path.exists(held.path)
    assert sorted(os.listdir(compacted)) == before
