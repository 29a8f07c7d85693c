"""Idempotent producers survive a restart (AOF replay) and a compaction (snapshot + AOF tail):
real data directories, real files. Ports Redis's "XADD IDMP persists in RDB", "XADD IDMP set in
AOF" and "XADD IDMP multiple producers persistence in RDB" (tests/unit/type/stream.tcl): after
reopening, the maps, the settings and the XINFO counters are the same and a retry with the same
pid/iid is still refused as a duplicate (the original ID is the reply, nothing is added)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.aof_workload import FakeClock
from tests.support.datadir import open_dir
from tests.support.diffutil import IDMP_FIELDS


def idmp_info(engine: Engine) -> dict[bytes, Any]:
    flat = engine.execute("XINFO", "STREAM", "s")
    got = dict(zip(flat[0::2], flat[1::2], strict=True))
    return {k: got[k] for k in IDMP_FIELDS}


def populate(engine: Engine) -> dict[str, bytes]:
    ids = {pid: engine.execute("XADD", "s", "IDMP", pid, "req-1", "*", "field", pid) for pid in ("p1", "p2", "p3")}
    assert engine.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "dup") == ids["p1"]
    ids["auto"] = engine.execute("XADD", "s", "IDMPAUTO", "p4", "*", "a", "1")
    return ids


def assert_duplicates_detected(engine: Engine, ids: dict[str, bytes]) -> None:
    length = engine.execute("XLEN", "s")
    for pid in ("p1", "p2", "p3"):
        assert engine.execute("XADD", "s", "IDMP", pid, "req-1", "*", "field", "retry") == ids[pid]
    assert engine.execute("XADD", "s", "IDMPAUTO", "p4", "*", "a", "1") == ids["auto"]
    assert engine.execute("XLEN", "s") == length


@pytest.mark.parametrize("compact", [False, True], ids=["aof-replay", "snapshot+tail"])
def test_duplicates_detected_after_reopen(tmp_path: Path, compact: bool) -> None:
    clock = FakeClock()
    with open_dir(tmp_path, clock) as engine:
        engine.execute("XADD", "s", "IDMP", "p0", "x", "*", "f", "v")
        assert engine.execute("XCFGSET", "s", "IDMP-DURATION", "300", "IDMP-MAXSIZE", "50") == "OK"
        ids = populate(engine)
        if compact:
            engine.compact(wait=True)
            clock.now += 10
            ids["tail"] = engine.execute("XADD", "s", "IDMP", "p5", "tail", "*", "f", "v")
        before, digest = idmp_info(engine), engine.digest()
    assert before[b"idmp-duration"] == 300 and before[b"iids-duplicates"] == 1
    clock.now += 1000
    with open_dir(tmp_path, clock) as engine:
        assert engine.digest() == digest
        assert idmp_info(engine) == before
        assert_duplicates_detected(engine, ids)
        if compact:
            assert engine.execute("XADD", "s", "IDMP", "p5", "tail", "*", "f", "v") == ids["tail"]


def test_expiry_after_reopen_follows_recorded_command_time(tmp_path: Path) -> None:
    clock = FakeClock()
    with open_dir(tmp_path, clock) as engine:
        engine.execute("XADD", "s", "*", "f", "v")
        engine.execute("XCFGSET", "s", "IDMP-DURATION", "2")
        first = engine.execute("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
        engine.compact(wait=True)
    clock.now += 1999
    with open_dir(tmp_path, clock) as engine:
        assert engine.execute("XADD", "s", "IDMP", "p", "i", "*", "f", "v") == first
    clock.now += 1
    with open_dir(tmp_path, clock) as engine:
        assert engine.execute("XADD", "s", "IDMP", "p", "i", "*", "f", "v") != first


def _served_state(r: Any) -> tuple:
    i = r.xinfo_stream("mystream")
    return (r.xlen("mystream"), i["idmp-duration"], i["idmp-maxsize"], i["pids-tracked"],
            i["iids-tracked"], i["iids-added"], i["iids-duplicates"])


def test_served_restart_after_sigkill_and_after_a_snapshot(tmp_path: Path, spawn: Any) -> None:
    """A `streamkeep serve` child SIGKILLed (AOF replay), then shut down with SAVE (a snapshot):
    a producer's retry with redis-py still gets the original ID each time, with the XCFGSET
    settings and the counters kept ("XCFGSET configuration persists in RDB", "XINFO STREAM
    iids-added persists in RDB")."""
    datadir = tmp_path / "data"
    server = spawn(datadir)
    r = server.client()
    first = r.xadd("mystream", {"field": "value1"}, idmp=("p1", b"persist-1"))
    assert r.xadd("mystream", {"field": "x"}, idmp=("p1", b"persist-1")) == first
    r.xcfgset("mystream", idmp_duration=75, idmp_maxsize=7500)  # clears the maps
    first = r.xadd("mystream", {"field": "value1"}, idmp=("p1", b"persist-1"))
    auto = r.xadd("mystream", {"field": "value3"}, idmpauto="p2")
    before = _served_state(r)
    assert before == (3, 75, 7500, 2, 2, 3, 1)
    r.close()
    server.proc.kill()
    server.wait()
    again = spawn(datadir)
    r = again.client()
    assert _served_state(r) == before
    assert r.xadd("mystream", {"field": "new"}, idmp=("p1", b"persist-1")) == first
    r.shutdown(save=True)
    assert again.wait() == 0, again.output()
    assert list(datadir.glob("snapshot-*.mdb"))
    third = spawn(datadir)
    r = third.client()
    assert _served_state(r)[:6] == before[:6]
    assert r.xadd("mystream", {"field": "value3"}, idmpauto="p2") == auto
    assert r.xlen("mystream") == 3
    r.close()
