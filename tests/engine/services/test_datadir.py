"""The data directory (engine.services.datadir.DataDir) on an in-memory core, without Engine.open.

Checked here: a new directory gets its first files and its journal is wired into the engine
(the appendfsync hook, INFO persistence); a reopened directory replays its segments, after its
snapshot, into a fresh engine (the same state, the LSN continuing); a directory locked by an
open DataDir is refused, untouched; a torn tail past the synced watermark is saved beside its
segment and cut; bad options are refused before the directory is made; a snapshot that is not
the manifest's refuses to open. What damage means segment by segment is aof.recovery's
(tests/crash/test_aof_damage.py drives every kind through Engine.open).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from streamkeep.aof.fs import LockedError
from streamkeep.aof.recovery import AOFCorruptError
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.engine.services.datadir import DataDir
from tests.support.aof_workload import FakeClock
from tests.support.datadir import assert_tidy, fingerprint, listing, manifest_doc


@contextmanager
def opened(path: Path, clock: FakeClock | None = None, **options: Any) -> Iterator[EngineCore]:
    """An in-memory core with the directory at `path` opened for it, as Engine.open does it
    (without replication); closed on the way out."""
    engine = EngineCore(clock=clock or FakeClock())
    options.setdefault("auto_aof_rewrite_percentage", 0)
    engine.datadir = DataDir.open(engine, str(path), **options)
    try:
        yield engine
    finally:
        engine.close()


def write(engine: EngineCore, n: int, key: str = "s") -> None:
    for i in range(n):
        engine.execute("XADD", key, "*", "i", str(i))


def test_a_new_directory_gets_its_first_files(tmp_path: Path) -> None:
    d = tmp_path / "new"
    with opened(d, appendfsync="always") as engine:
        datadir = engine.datadir
        assert isinstance(datadir, DataDir)
        assert listing(d) == ["LOCK", "manifest.json", "segment-000001.aof", "watermark"]
        assert engine.journal is datadir.journal and datadir.journal.lsn == 0
        write(engine, 3)
        assert datadir.journal.lsn == 3 and datadir.status().changes_since_save == 3
        engine.set_config("appendfsync", "no")  # the journal's hook, registered on the engine
        assert not datadir.journal.sync_on_commit
        assert "aof_enabled:1" in engine.execute("INFO", "persistence").decode()
    doc = assert_tidy(d)
    assert [s["file"] for s in doc["segments"]] == ["segment-000001.aof"]


def test_reopening_replays_after_the_snapshot(tmp_path: Path) -> None:
    d = tmp_path / "db"
    clock = FakeClock()
    with opened(d, clock) as engine:
        write(engine, 50)
        engine.execute("XGROUP", "CREATE", "s", "g", "0")
        engine.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "7", "STREAMS", "s", ">")
        assert engine.datadir is not None
        snapshot = engine.datadir.compact(wait=True)
        write(engine, 20, key="t")
        digest, lsn = engine.digest(), engine.journal.lsn  # type: ignore[union-attr]
    assert snapshot is not None and manifest_doc(d)["snapshot"]["file"] == snapshot.file
    with opened(d, clock) as again:
        assert again.digest() == digest
        assert again.journal.lsn == lsn  # type: ignore[union-attr]
        again.execute("XADD", "t", "*", "after", "reopen")
        assert again.journal.lsn == lsn + 1  # type: ignore[union-attr]


def test_a_locked_directory_is_refused_untouched(tmp_path: Path) -> None:
    d = tmp_path / "db"
    with opened(d) as engine:
        write(engine, 5)
        before = fingerprint(d)
        other = EngineCore()
        with pytest.raises(LockedError, match="data directory is in use"):
            DataDir.open(other, str(d))
        assert fingerprint(d) == before and other.digest() == EngineCore().digest()
        write(engine, 1)  # the holder goes on
    with opened(d) as again:  # the refused open released nothing it did not take
        assert again.execute("XLEN", "s") == 6


def test_a_torn_tail_is_saved_and_cut(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "db"
    with opened(d) as engine:
        write(engine, 10)
        digest = engine.digest()
    segment = d / "segment-000001.aof"
    good = segment.stat().st_size
    torn = b"\x00\x01partial record" * 7
    with segment.open("ab") as f:  # bytes past what the watermark says was fsynced
        f.write(torn)
    with opened(d) as again:
        assert again.digest() == digest
        again.execute("XADD", "s", "*", "after", "cut")
    assert Path(f"{segment}.cut-{good}").read_bytes() == torn
    assert any(f"cut-{good}" in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING")
    with opened(d) as third:
        assert third.execute("XLEN", "s") == 11


def test_bad_options_are_refused_before_the_directory_is_made(tmp_path: Path) -> None:
    for options in ({"appendfsync": "sometimes"}, {"aof_segment_max_bytes": 8},
                    {"auto_aof_rewrite_percentage": -1}, {"aof_load_truncated": "maybe"}):
        with pytest.raises(ValueError):
            DataDir.open(EngineCore(), str(tmp_path / "d"), **options)  # type: ignore[arg-type]
        assert not (tmp_path / "d").exists(), options


def test_a_snapshot_of_another_size_refuses_to_open(tmp_path: Path) -> None:
    d = tmp_path / "db"
    with opened(d) as engine:
        write(engine, 20)
        assert engine.datadir is not None
        snapshot = engine.datadir.compact(wait=True)
    assert snapshot is not None
    with (d / snapshot.file).open("ab") as f:
        f.write(b"\x00" * 4096)
    with pytest.raises(AOFCorruptError, match="the manifest says"):
        DataDir.open(EngineCore(), str(d))
    with pytest.raises(AOFCorruptError):  # and the refusal released the lock
        DataDir.open(EngineCore(), str(d))


def test_strings_and_ttls_survive_replay_and_compaction(tmp_path: Path) -> None:
    """Expiring keys through the AOF, then through a snapshot: a reopened directory holds the
    same strings and TTLs, and keys that expired while it was closed go at their first touch
    (the clock moved; the records did not change)."""
    d = tmp_path / "d"
    clock = FakeClock()
    with opened(d, clock) as engine:
        engine.execute("SET", "lock", "token", "NX", "PX", "30000")
        engine.execute("SET", "counter", "5")
        engine.execute("INCRBY", "counter", "2")
        engine.execute("XADD", "s", "1-1", "f", "v")
        engine.execute("EXPIRE", "s", "60")
        engine.execute("SET", "gone", "x", "PX", "1")
        clock.now += 2
        assert engine.execute("GET", "gone") is None  # logged as a DEL
        digest = engine.digest()
    with opened(d, clock) as again:  # replayed from the AOF
        assert again.digest() == digest
        assert again.datadir is not None
        assert again.datadir.compact(wait=True) is not None
    with opened(d, clock) as again:  # loaded from the snapshot
        assert again.digest() == digest
        assert again.execute("PTTL", "lock") == 30000 - 2
        clock.now += 30000
        assert again.execute("GET", "lock") is None
        assert again.execute("GET", "counter") == b"7"
