"""snapshot.integrity: the whole-file check against the checksum a manifest recorded, and where
the damage is when it fails (found by a forked child process, so that a damaged LMDB page
cannot crash this one): a damaged value by table and key, nothing damaged in the values, a child
that crashed, failed, hung or could not be forked, none of them left behind. `open_checked` as
the tools use it, and `child_env`."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import zlib
from pathlib import Path

import pytest

from streamkeep.snapshot import integrity
from streamkeep.snapshot.integrity import check_whole, child_env, locate, open_checked
from streamkeep.snapshot.reader import SnapshotError, current_snapshot
from streamkeep.snapshot.writer import write_snapshot
from tests.support.datadir import open_dir
from tests.support.snapshot_util import value_offset, varied_engine


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("integrity") / "snapshot.mdb"
    write_snapshot(varied_engine().dbs, str(path), 9, 1, "ab" * 20)
    return path


def copy_of(pristine: Path, where: Path) -> Path:
    return Path(shutil.copy(pristine, where / pristine.name))


def crc_of(path: Path) -> int:
    return zlib.crc32(path.read_bytes())


def damage_a_value(path: Path, table: str = "groups") -> None:
    _key, at, length = value_offset(str(path), table)
    data = bytearray(path.read_bytes())
    data[at + length // 2] ^= 0x20
    path.write_bytes(bytes(data))


def refusal(path: Path, crc32: int) -> str:
    with pytest.raises(SnapshotError) as caught:
        check_whole(str(path), crc32)
    return str(caught.value)


def test_nothing_recorded_nothing_checked(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.mdb"
    garbage.write_bytes(b"not a snapshot at all")
    check_whole(str(garbage), None)


def test_a_matching_file_passes(pristine: Path) -> None:
    check_whole(str(pristine), crc_of(pristine))


def test_a_mismatch_with_sound_values_blames_lmdb_pages_or_unused_space(pristine: Path) -> None:
    crc = crc_of(pristine)
    assert refusal(pristine, crc ^ 0xFF) == (
        f"{pristine}: damaged: its checksum is {crc:08x}, the manifest recorded "
        f"{crc ^ 0xFF:08x} when the snapshot was written; no value is damaged: the damage is "
        f"in LMDB's own pages or in unused space")


def test_a_damaged_value_is_named_by_table_and_key(pristine: Path, tmp_path: Path) -> None:
    recorded = crc_of(pristine)
    path = copy_of(pristine, tmp_path)
    damage_a_value(path, "groups")
    message = refusal(path, recorded)
    assert message.startswith(f"{path}: damaged: its checksum is {crc_of(path):08x}, the "
                              f"manifest recorded {recorded:08x}")
    assert message.endswith("; first damaged value: table groups, stream 'orders' (db 0) (#2), "
                            "group 'audit': checksum mismatch: the stored value is damaged")


def test_the_chunks_given_are_what_is_checked(pristine: Path, tmp_path: Path) -> None:
    good = pristine.read_bytes()
    path = copy_of(pristine, tmp_path)
    damage_a_value(path)
    check_whole(str(path), zlib.crc32(good), lambda: iter([good[:100], good[100:]]))
    with pytest.raises(SnapshotError):
        check_whole(str(pristine), zlib.crc32(good), lambda: iter([good[1:]]))


def test_locate_in_a_child(pristine: Path, tmp_path: Path) -> None:
    assert locate(str(pristine)) == \
        "no value is damaged: the damage is in LMDB's own pages or in unused space"
    path = copy_of(pristine, tmp_path)
    damage_a_value(path, "pel")
    assert locate(str(path)).startswith("first damaged value: table pel, ")
    garbage = tmp_path / "garbage.mdb"
    garbage.write_bytes(os.urandom(8192))
    assert locate(str(garbage)).startswith("not a readable LMDB snapshot (")  # the child's word


def _children() -> set[int]:
    """This process's children now (Linux /proc)."""
    me = os.getpid()
    found = set()
    with os.scandir(f"/proc/{me}/task") as tasks:
        for task in tasks:
            with open(f"/proc/{me}/task/{task.name}/children") as f:
                found.update(int(pid) for pid in f.read().split())
    return found


def test_a_child_that_crashes_points_at_lmdb_pages(pristine: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = _children()
    monkeypatch.setattr(integrity, "first_problem",
                        lambda path: os.kill(os.getpid(), signal.SIGBUS))
    assert locate(str(pristine)) == ("the damage is in LMDB's own pages (reading them crashed "
                                     f"a child process with signal {int(signal.SIGBUS)})")
    assert _children() == before


def test_a_child_that_fails_or_hangs_is_said_so_and_reaped(
        pristine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _children()

    def fail(path: str) -> str:
        raise RuntimeError("the check itself failed")

    monkeypatch.setattr(integrity, "first_problem", fail)
    assert locate(str(pristine)) == \
        "the damage could not be located (the check failed in the child process)"
    monkeypatch.setattr(integrity, "first_problem", lambda path: signal.pause() or "")
    monkeypatch.setattr(integrity, "LOCATE_TIMEOUT", 0.5)
    assert locate(str(pristine)) == "the damage could not be located (no answer in 0.5 s)"
    assert _children() == before  # the hung child killed and reaped


def test_a_child_that_cannot_be_forked_is_said_so(pristine: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(integrity.os, "fork", no_fork)
    assert locate(str(pristine)).startswith("the damage could not be located (")


def test_the_child_finds_what_the_reader_finds(pristine: Path, tmp_path: Path) -> None:
    assert integrity.first_problem(str(pristine)) == ""
    path = copy_of(pristine, tmp_path)
    damage_a_value(path, "consumers")
    assert integrity.first_problem(str(path)).startswith(f"{path}: table consumers, ")
    garbage = tmp_path / "garbage.mdb"
    garbage.write_bytes(b"\0" * 100)
    assert integrity.first_problem(str(garbage)).startswith(f"{garbage}: ")


def test_child_env_imports_streamkeep_from_where_this_process_did(
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["streamkeep"].__file__
                                                           or "")))
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("STREAMKEEP_TEST_MARK", "kept")
    env = child_env()
    assert env["PYTHONPATH"] == f"{root}{os.pathsep}/elsewhere"
    assert env["STREAMKEEP_TEST_MARK"] == "kept"
    monkeypatch.delenv("PYTHONPATH")
    assert child_env()["PYTHONPATH"] == root


def test_a_compaction_child_ignores_a_streamkeep_in_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose working directory holds another streamkeep (a checkout beside it) runs
    its compaction child on its own package, not on that one."""
    decoy = tmp_path / "cwd" / "streamkeep"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise SystemExit('the working directory was imported')\n")
    monkeypatch.chdir(decoy.parent)
    with open_dir(tmp_path / "data") as engine:
        engine.execute("SET", "k", "v")
        engine.compact()
    with open_dir(tmp_path / "data") as engine:
        assert engine.execute("GET", "k") == b"v"


@pytest.fixture(scope="module")
def datadir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("integrity-dir") / "data"
    with open_dir(path) as engine:
        for i in range(50):
            engine.execute("XADD", "s", f"{i + 1}-0", "f", f"v{i}")
        engine.execute("XGROUP", "CREATE", "s", "g", "0")
        engine.compact(wait=True)
    return path


def test_open_checked_uses_the_checksum_the_manifest_beside_it_recorded(
        datadir: Path, tmp_path: Path) -> None:
    snapshot = current_snapshot(str(datadir))
    assert snapshot is not None
    with open_checked(snapshot) as snap:
        assert snap.meta.lsn == 51
    damaged_dir = Path(shutil.copytree(datadir, tmp_path / "damaged"))
    damaged = damaged_dir / os.path.basename(snapshot)
    damage_a_value(damaged, "groups")
    with pytest.raises(SnapshotError, match=r"first damaged value: table groups, ") as caught:
        open_checked(str(damaged))
    assert str(caught.value).startswith(f"{damaged}: damaged: its checksum is ")
    alone = Path(shutil.copy(damaged, tmp_path / os.path.basename(snapshot)))  # no manifest
    for part in damaged_dir.glob("part-*.mdb"):  # (its part files beside it)
        shutil.copy(part, tmp_path / part.name)
    with open_checked(str(alone)) as snap:  # nothing recorded: the per-value checks remain
        assert snap.check(limit=1)[0].startswith(f"{alone}: table groups, ")
