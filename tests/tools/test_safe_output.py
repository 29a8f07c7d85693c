"""tools.safe_output: what counts as a data directory, which outputs are refused, and outputs
written whole or not at all (an exception or Ctrl-C inside leaves nothing under the name)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools import safe_output
from streamkeep.tools.safe_output import (
    OutputRefused,
    check_output,
    data_directory_of,
    is_data_directory,
    scratch_directory,
    staged_directory,
    staged_file,
    write_file,
)


@pytest.fixture
def datadir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    with Engine.open(str(path)) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
    return path


def listing(path: Path) -> list[str]:
    return sorted(os.listdir(path))


def test_what_a_data_directory_is(tmp_path: Path, datadir: Path) -> None:
    assert is_data_directory(str(datadir))
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    assert not is_data_directory(str(other))  # another tool's manifest.json
    (other / "segment-000001.aof").write_bytes(b"x")
    assert is_data_directory(str(other))  # a damaged one: manifest.json beside segments
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "LOCK").write_text("1")
    assert not is_data_directory(str(locked))
    (locked / "segment-000002.aof").write_bytes(b"x")
    assert is_data_directory(str(locked))
    assert not is_data_directory(str(datadir / "manifest.json"))  # a file


def test_inside_a_data_directory_whichever_way(tmp_path: Path, datadir: Path) -> None:
    assert data_directory_of(str(datadir)) == str(datadir)
    assert data_directory_of(str(datadir / "manifest.json")) == str(datadir)
    assert data_directory_of(str(datadir / "no" / "such" / "file")) == str(datadir)
    (tmp_path / "link").symlink_to(datadir / "manifest.json")
    assert data_directory_of(str(tmp_path / "link")) == str(datadir)
    (tmp_path / "dirlink").symlink_to(datadir)
    assert data_directory_of(str(tmp_path / "dirlink" / "x.rdb")) is not None
    assert data_directory_of(str(tmp_path / "elsewhere.rdb")) is None


@pytest.mark.parametrize("force", [False, True, None])
def test_never_inside_a_data_directory_even_with_force(datadir: Path, force: bool | None) -> None:
    for path, directory in [(datadir / "manifest.json", False), (datadir, True),
                            (datadir / "new", True), (datadir / "x.rdb", False)]:
        with pytest.raises(OutputRefused, match="streamkeep data directory"):
            check_output(str(path), directory=directory, force=force)


def test_existing_outputs(tmp_path: Path) -> None:
    file = tmp_path / "x.rdb"
    file.write_bytes(b"old")
    with pytest.raises(OutputRefused, match=r"x\.rdb exists \(--force overwrites it\)"):
        check_output(str(file), directory=False, force=False)
    check_output(str(file), directory=False, force=True)
    with pytest.raises(OutputRefused, match="is a directory"):
        check_output(str(tmp_path), directory=False, force=True)
    with pytest.raises(OutputRefused, match="not a directory"):
        check_output(str(file), directory=True, force=True)
    full = tmp_path / "full"
    full.mkdir()
    (full / "a").write_text("a")
    with pytest.raises(OutputRefused, match=r"full exists \(--force"):
        check_output(str(full), directory=True, force=False)
    with pytest.raises(OutputRefused, match="full exists and is not an empty directory"):
        check_output(str(full), directory=True, force=None)  # a command without --force
    check_output(str(full), directory=True, force=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    check_output(str(empty), directory=True, force=None)  # nothing there to lose
    with pytest.raises(OutputRefused, match="does not exist"):
        check_output(str(tmp_path / "no" / "x.rdb"), directory=False, force=False)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(OutputRefused, match="symlink to nothing"):
        check_output(str(tmp_path / "dangling"), directory=False, force=True)


def test_never_onto_into_or_around_the_source(tmp_path: Path) -> None:
    source = tmp_path / "in" / "dump.rdb"
    source.parent.mkdir()
    source.write_bytes(b"REDIS0011")
    with pytest.raises(OutputRefused, match="is the source"):
        check_output(str(source), directory=False, force=True, sources=[str(source)])
    with pytest.raises(OutputRefused, match="contains the source"):
        check_output(str(tmp_path / "in"), directory=True, force=True, sources=[str(source)])
    with pytest.raises(OutputRefused, match="is inside the source"):
        check_output(str(tmp_path / "in" / "x"), directory=True, force=True,
                     sources=[str(tmp_path / "in")])
    check_output(str(tmp_path / "out"), directory=True, force=False, sources=[str(source)])


def test_a_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "x.rdb"
    assert write_file(str(out), [b"ab", b"cd"], force=False) == 4
    assert out.read_bytes() == b"abcd"
    with pytest.raises(OutputRefused, match="exists"):
        write_file(str(out), [b"new"], force=False)  # made meanwhile: never replaced
    assert out.read_bytes() == b"abcd"
    for failure in (RuntimeError("disk on fire"), KeyboardInterrupt()):
        with pytest.raises(type(failure)), staged_file(str(out), force=True) as f:
            f.write(b"half")
            raise failure
        assert out.read_bytes() == b"abcd"
    assert listing(tmp_path) == ["x.rdb"]  # no temporary left
    write_file(str(out), [b"new"], force=True)
    assert out.read_bytes() == b"new" and listing(tmp_path) == ["x.rdb"]


def test_through_a_symlink_the_file_it_names_is_written(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "x.rdb"
    target.write_bytes(b"old")
    (tmp_path / "link.rdb").symlink_to(target)
    write_file(str(tmp_path / "link.rdb"), [b"new"], force=True)
    assert (tmp_path / "link.rdb").is_symlink() and target.read_bytes() == b"new"


def test_a_directory_is_renamed_into_place_once_complete(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for failure in (RuntimeError("spark died"), KeyboardInterrupt()):
        with pytest.raises(type(failure)), staged_directory(str(out)) as stage:
            Path(stage, "entries").mkdir()
            Path(stage, "entries", "part-0").write_bytes(b"rows")
            assert not out.exists()
            raise failure
        assert listing(tmp_path) == []  # neither OUT nor the temporary
    with staged_directory(str(out)) as stage:
        Path(stage, "entries").mkdir()
        Path(stage, "manifest").write_text("1")
    assert listing(out) == ["entries", "manifest"] and listing(tmp_path) == ["out"]
    with pytest.raises(OutputRefused, match="exists and is not empty: not replaced"), \
            staged_directory(str(out)) as stage:
        Path(stage, "streams").mkdir()  # OUT is not empty: without merge, never into it
    assert listing(out) == ["entries", "manifest"]
    (out / "mine.txt").write_text("keep me")
    with staged_directory(str(out), merge=True) as stage:  # --force: namesakes replaced
        Path(stage, "entries").mkdir()
        Path(stage, "entries", "new").write_text("new")
        Path(stage, "manifest").write_text("2")
    assert listing(out) == ["entries", "manifest", "mine.txt"]
    assert listing(out / "entries") == ["new"] and (out / "manifest").read_text() == "2"
    assert listing(tmp_path) == ["out"]


def test_an_empty_directory_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with staged_directory(str(out)) as stage:
        Path(stage, "a").write_text("a")
    assert listing(out) == ["a"] and listing(tmp_path) == ["out"]


@pytest.mark.parametrize("before", ["absent", "empty"])
def test_an_interrupt_while_publishing_leaves_nothing(tmp_path: Path, before: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal that lands once the output is renamed into place (here: during the parent's
    fsync) is held until the publishing ends, and then takes the fresh output back out before
    it is raised: an interrupted command leaves nothing (an empty directory it replaced is
    there again)."""
    out = tmp_path / "out"
    if before == "empty":
        out.mkdir()
    real = safe_output.fsync_directory

    def interrupted_fsync(path: str) -> None:
        if path == str(tmp_path):  # the parent's, once OUT is in place (not the stage's)
            assert listing(out) == ["a"]
            os.kill(os.getpid(), signal.SIGINT)  # held: the fsync goes on
        real(path)

    monkeypatch.setattr(safe_output, "fsync_directory", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt), staged_directory(str(out)) as stage:
        Path(stage, "a").write_text("a")
    assert listing(tmp_path) == ([] if before == "absent" else ["out"])
    assert before == "absent" or listing(out) == []


def test_scratch_directories_are_removed(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), scratch_directory(str(tmp_path / "out"),
                                                             "state") as scratch:
        Path(scratch, "big").write_bytes(b"x" * 100)
        assert Path(scratch).parent == tmp_path
        raise KeyboardInterrupt
    assert listing(tmp_path) == []
