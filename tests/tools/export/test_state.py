"""tools.export.state without Spark: a data directory's current state as one snapshot (its own
when nothing follows it, else one built from a point-in-time copy), read back through the data
source's reader equal to what the engine holds; the directory untouched, the scratch removed;
how far a snapshot is behind; damage refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools.export import state
from streamkeep.tools.export.datasource import StreamkeepReader
from streamkeep.tools.export.pin import ExportError
from tests.support.datadir import fingerprint
from tests.support.inspect_util import flip_byte, record_offsets, segments


def read(path: str, table: str) -> list[tuple]:
    reader = StreamkeepReader({"path": path, "table": table, "arrow": "false"})
    return [row for part in reader.partitions() for row in reader.read(part)]


def entries_of(engine: Engine) -> set[tuple]:
    out = set()
    for key in engine.execute("KEYS", "*"):
        for sid, fields in engine.execute("XRANGE", key, "-", "+"):
            out.add((bytes(key), sid.decode(), tuple(fields)))
    return out


def consumers_of(engine: Engine, key: str, group: str) -> set[bytes]:
    return {c[1] for c in engine.execute("XINFO", "CONSUMERS", key, group)}


def fill(engine: Engine, start: int, count: int) -> None:
    for i in range(start, start + count):
        engine.execute("XADD", f"s{i % 3}", f"{i + 1}-0", "n", str(i), "b", b"\xff")


def test_before_the_first_compaction_the_state_is_built(tmp_path: Path) -> None:
    data, near = tmp_path / "data", tmp_path / "out"
    with Engine.open(str(data)) as engine:
        fill(engine, 0, 40)
        engine.execute("XGROUP", "CREATE", "s1", "g", "0")
        engine.execute("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s1", ">")
        expected, lsn = entries_of(engine), engine.datadir.journal.lsn  # type: ignore[union-attr]
        before = fingerprint(data)
        with state.current(str(data), str(near)) as now:
            assert (now.lsn, now.base_lsn, now.records) == (lsn, 0, lsn)
            assert now.seconds is not None
            assert Path(now.pin.path).parent.parent.parent == tmp_path  # the scratch: beside OUT
            rows = read(now.pin.path, "entries")
            assert {(r[1], r[3], tuple(x for p in r[7] for x in p)) for r in rows} == expected
            assert {r[-1] for r in rows} == {lsn}  # the rows say what they are as of
            assert {r[5] for r in read(now.pin.path, "consumers")} == {b"alice"}
        assert fingerprint(data) == before  # not locked, not written (no pin left either)
    assert sorted(os.listdir(tmp_path)) == ["data"]  # the scratch is gone


def test_after_a_compaction_later_writes_are_in(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        fill(engine, 0, 30)
        engine.execute("XGROUP", "CREATE", "s1", "g", "0")
        snap = engine.compact(wait=True)
        assert snap is not None
        fill(engine, 30, 12)
        engine.execute("XGROUP", "CREATECONSUMER", "s1", "g", "late")  # after the snapshot
        expected, lsn = entries_of(engine), engine.datadir.journal.lsn  # type: ignore[union-attr]
        consumers = consumers_of(engine, "s1", "g")
        with state.current(str(data), str(tmp_path / "out")) as now:
            assert (now.base_lsn, now.lsn, now.records) == (snap.lsn, lsn, lsn - snap.lsn)
            rows = read(now.pin.path, "entries")
            assert {(r[1], r[3], tuple(x for p in r[7] for x in p)) for r in rows} == expected
            assert {r[5] for r in read(now.pin.path, "consumers")} == consumers == {b"late"}
        # What the snapshot alone is behind by, as --snapshot-only reports it.
        lag = state.lag(str(data), snap.lsn, 0)
        assert (lag.records, lag.log_lsn) == (lsn - snap.lsn, lsn)
        assert lag.last_record_ms is not None and lag.to_json()["records"] == lag.records


def test_a_snapshot_nothing_follows_is_read_as_it_is(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        fill(engine, 0, 10)
        snap = engine.compact(wait=True)
        assert snap is not None
        with state.current(str(data), str(tmp_path / "out")) as now:
            assert now.seconds is None and now.lsn == now.base_lsn == snap.lsn
            assert Path(now.pin.path).parent.parent == data  # DIR's own snapshot, pinned there
        assert not [n for n in os.listdir(data) if n.startswith("export-pin-")]
        assert state.lag(str(data), snap.lsn, 0).records == 0
    assert sorted(os.listdir(tmp_path)) == ["data"]  # no scratch made


def test_what_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="not a streamkeep data directory"), \
            state.current(str(tmp_path), str(tmp_path / "out")):
        pass
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        fill(engine, 0, 20)
    segment = segments(data)[0]
    flip_byte(segment, record_offsets(segment)[3] + 10)  # damage before the log's end
    with pytest.raises(state.Unreadable, match=f"{segment}:.*before the log's end"), \
            state.current(str(data), str(tmp_path / "out")):
        pass
    assert sorted(os.listdir(tmp_path)) == ["data"]
