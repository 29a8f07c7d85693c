"""engine.exec.interfaces: the hooks services register on the engine they serve, and the INFO
persistence section built from a PersistenceStatus."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec.interfaces import PersistenceStatus, persistence_fields


def _info(db: Engine, section: str) -> dict[str, str]:
    text = db.execute("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def test_services_register_their_hooks_and_section(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as db:
        assert set(db.config_hooks) == {"appendfsync", "aof-preallocate", "aof-mapped-appends",
                                        "auto-aof-rewrite-percentage",
                                        "auto-aof-rewrite-min-size"}
        assert set(db.info_sections) == {"persistence", "replication"}
    with Engine.open() as db:  # in memory: nobody registers anything
        assert db.config_hooks == {} and db.info_sections == {}


def test_config_set_reaches_the_journal_and_compactor(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path), appendfsync="everysec") as db:
        journal = db.datadir.journal  # type: ignore[union-attr]
        compactor = db.datadir.compactor  # type: ignore[union-attr]
        db.execute("CONFIG", "SET", "appendfsync", "always")
        assert journal.policy == "always" and journal.sync_on_commit
        db.execute("CONFIG", "SET", "auto-aof-rewrite-min-size", "2mb",
                   "auto-aof-rewrite-percentage", "0")
        assert compactor.min_size == 2 << 20 and compactor.percentage == 0
        assert journal.rewrite_at == float("inf")  # percentage 0: no automatic compaction
        db.execute("CONFIG", "SET", "auto-aof-rewrite-percentage", "100")
        assert journal.rewrite_at == 2 << 20
        db.execute("CONFIG", "SET", "aof-preallocate", "1mb")
        assert journal.preallocate == 1 << 20 and journal.low_water == 512 << 10
        db.execute("CONFIG", "SET", "aof-preallocate", "0")
        assert journal.preallocate == 0 and journal.tail is None  # nothing to map
        db.execute("XADD", "s", "*", "f", "v")  # nothing allocated ahead: writes go on
        db.execute("CONFIG", "SET", "aof-mapped-appends", "no")
        assert journal.mapped is False


def test_a_hook_runs_once_and_a_failing_hook_restores(tmp_path: Path) -> None:
    with Engine.open() as db:
        calls: list[int] = []
        db.on_config(("stream-node-max-entries", "stream-node-max-bytes"),
                     lambda: calls.append(db.config["stream-node-max-entries"]))
        db.execute("CONFIG", "SET", "stream-node-max-entries", "7",
                   "stream-node-max-bytes", "8192")
        assert calls == [7]

        def refuse() -> None:
            if db.config["stream-node-max-entries"] == 9:
                raise ValueError("nine is refused")

        db.on_config(("stream-node-max-entries",), refuse)
        with pytest.raises(ReplyError, match="nine is refused"):
            db.execute("CONFIG", "SET", "stream-node-max-entries", "9")
        assert db.config["stream-node-max-entries"] == 7  # restored


def test_info_persistence_on_a_data_directory_and_in_memory(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as db:
        db.execute("XADD", "s", "*", "f", "v")
        fields = _info(db, "persistence")
        assert fields["aof_enabled"] == "1" and fields["rdb_changes_since_last_save"] == "1"
        assert int(fields["aof_current_size"]) > 32 and fields["aof_last_write_status"] == "ok"
        db.compact(wait=True)
        fields = _info(db, "persistence")
        assert fields["rdb_changes_since_last_save"] == "0" and fields["rdb_saves"] == "1"
        assert int(fields["aof_base_size"]) > 0
    with Engine.open() as db:
        fields = _info(db, "persistence")
        assert fields["aof_enabled"] == "0" and "aof_current_size" not in fields


def test_persistence_fields_shape() -> None:
    status = PersistenceStatus(changes_since_save=3, saving_since_ms=1_000, last_status="err",
                               saves=2, aof_ok=False, aof_current_size=500, aof_base_size=100,
                               fsync_pending=True)
    fields = dict(persistence_fields(status, now_ms=4_500, last_save=42))
    assert fields["rdb_bgsave_in_progress"] == fields["aof_rewrite_in_progress"] == 1
    assert fields["rdb_current_bgsave_time_sec"] == 3
    assert fields["rdb_last_save_time"] == 42 and fields["aof_rewrites"] == 2
    assert fields["aof_last_write_status"] == "err" and fields["aof_pending_bio_fsync"] == 1
    plain = [name for name, _ in persistence_fields(None, 0, 0)]
    assert plain[0] == "loading" and plain[-1] == "aof_last_write_status"
