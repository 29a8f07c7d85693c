"""The public Engine (engine.services.engine): the core, with its data directory and replication.

Checked here: `from streamkeep import Engine` is this class, an EngineCore; `Engine()` and
`Engine.open()` are in memory; `Engine.open(path)` opens the data directory (engine.runtime.
datadir) with the AOF settings sorted from the engine's, and attaches replication to it;
settings that need a directory are refused without one; `replicaof` is read in both its forms;
`compact()` needs a directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import streamkeep
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.engine.services.datadir import DataDir
from streamkeep.engine.services.engine import Engine


def test_the_public_engine_is_this_class() -> None:
    assert streamkeep.Engine is Engine and streamkeep.engine.Engine is Engine
    assert issubclass(Engine, EngineCore)


def test_in_memory_without_a_path() -> None:
    for engine in (Engine(), Engine.open(), Engine.open(None, stream_node_max_entries=5)):
        with engine:
            assert engine.datadir is None and engine.journal is None
            assert engine.replication is None
            assert engine.execute("XADD", "s", "1-1", "f", "v") == b"1-1"
            with pytest.raises(ValueError, match="compact\\(\\) needs a data directory"):
                engine.compact()


def test_open_with_a_path_composes_the_directory_and_replication(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "d"), appendfsync="always",
                     **{"auto-aof-rewrite-percentage": 0, "stream_node_max_entries": 7}) as engine:
        assert isinstance(engine.datadir, DataDir)
        assert engine.journal is engine.datadir.journal and engine.journal.sync_on_commit
        assert engine.config["appendfsync"] == "always"  # a Redis setting: kept in the config
        assert engine.node_max_entries == 7  # the engine's own setting reached it
        assert engine.replication is not None and engine.execute("ROLE")[0] == b"master"
        engine.execute("XADD", "s", "1-1", "f", "v")
        assert engine.compact(wait=True) is not None
    with Engine.open(str(tmp_path / "d")) as again:
        assert again.execute("XLEN", "s") == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"appendfsync": "always"}, "appendfsync need a data directory path"),
    ({"aof_segment_max_bytes": 4096, "fs": None},
     "aof_segment_max_bytes, fs need a data directory path"),
    ({"replicaof": ("127.0.0.1", 6390)}, "replicaof needs a data directory path"),
    ({"replicaof": "127.0.0.1 6390"}, "replicaof needs a data directory path"),
    ({"replicaof": ("127.0.0.1",)}, "replicaof takes a host and a port, not \\('127.0.0.1',\\)"),
    ({"replicaof": "127.0.0.1"}, "replicaof takes a host and a port, not \\('127.0.0.1',\\)"),
])
def test_settings_that_need_a_directory_are_refused_without_one(options: dict,
                                                                message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Engine.open(**options)


def test_a_file_in_the_way_of_the_directory_is_named(tmp_path: Path) -> None:
    """A data directory's path that is a file, or lies under one: a StorageError naming it, in
    the words `streamkeep serve --dir` uses ("a file, not a directory"), not the OS's "File
    exists"; the file untouched."""
    from streamkeep.aof.fs import NotADirectory
    from streamkeep.engine.wire.errors import StorageError

    afile = tmp_path / "afile"
    afile.write_text("notes")
    assert issubclass(NotADirectory, StorageError)
    for path, words in ((afile, f"{afile} is a file, not a directory"),
                        (afile / "data", f"{afile / 'data'}: {afile} is a file, not a "
                                         "directory")):
        for shared in (False, True):
            with pytest.raises(NotADirectory) as err:
                Engine.open(str(path), shared=shared)
            assert str(err.value) == words
    assert afile.read_text() == "notes"
