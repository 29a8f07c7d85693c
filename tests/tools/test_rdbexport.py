"""`streamkeep export-rdb`: a data directory's streams loaded by a real redis-server (7.0, RDB
10), while a server may be running on the directory; and its refusals."""

from __future__ import annotations

import json

import pytest
import redis

from streamkeep import Engine
from streamkeep.tools.main import main
from tests.support.redis_state import databases_state, raw_client


def _fill(engine: Engine) -> None:
    for i in range(1, 701):  # several nodes, a field set change, binary values
        fields = ["temp", str(i)] if i % 9 else ["bin\x00", "\xff" * (i % 5), "n", str(-i)]
        engine.execute("XADD", "big", f"{1700000000000 + i}-{i % 3}", *fields)
    engine.execute("XDEL", "big", "1700000000010-1", "1700000000500-2")
    engine.execute("XGROUP", "CREATE", "big", "g1", "0")
    engine.execute("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "7", "STREAMS", "big", ">")
    engine.execute("XACK", "big", "g1", "1700000000002-2")
    engine.execute("XGROUP", "CREATECONSUMER", "big", "g1", "idle")
    engine.execute("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    engine.execute("XADD", "gone", "5-5", "f", "v")
    engine.execute("XDEL", "gone", "5-5")
    engine.execute("SELECT", "4")
    engine.execute("XADD", "in-db4", "1-1", "f", "v")
    engine.execute("SELECT", "0")


def _state_of(engine: Engine) -> dict:
    def run_in(db: int):  # type: ignore[no-untyped-def]
        engine.execute("SELECT", str(db))
        return engine.execute
    try:
        return databases_state(run_in)
    finally:
        engine.execute("SELECT", "0")


def test_an_export_loads_in_redis_server_while_the_directory_is_served(
        start_redis, tmp_path, capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:  # holds the directory, as a server does
        _fill(engine)
        expected = _state_of(engine)
        out = tmp_path / "redis" / "moved.rdb"
        out.parent.mkdir()
        assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version", "10",
                     "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["streams"] == 4 and report["entries"] == 698 + 1
        assert report["lsn"] == engine.datadir.journal.lsn
    assert [p.name for p in out.parent.iterdir()] == ["moved.rdb"]  # no temporary left
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port)
    assert databases_state(lambda db: raw_client(client, db)) == expected
    assert expected[4]  # the other database came too


def test_refusals(tmp_path, capsys) -> None:
    assert main(["export-rdb", str(tmp_path / "missing"), "--out", str(tmp_path / "x.rdb")]) == 3
    assert "missing: not a directory" in capsys.readouterr().err
    (tmp_path / "notdata").mkdir()
    (tmp_path / "notdata" / "junk").write_text("x")
    code = main(["export-rdb", str(tmp_path / "notdata"), "--out", str(tmp_path / "x.rdb")])
    err = capsys.readouterr().err
    assert code == 2 and "notdata" in err and "Traceback" not in err
    assert main(["export-rdb", str(tmp_path), "--out", str(tmp_path / "no" / "x.rdb")]) == 3
    with pytest.raises(SystemExit) as done:
        main(["export-rdb", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "exit status:" in text and "--rdb-version" in text


def test_an_existing_file_is_replaced_only_with_force(tmp_path, capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
    out = tmp_path / "dump.rdb"
    out.write_bytes(b"someone else's")
    assert main(["export-rdb", str(data), "--out", str(out)]) == 3
    assert "dump.rdb exists (--force overwrites it)" in capsys.readouterr().err
    assert out.read_bytes() == b"someone else's"
    assert main(["export-rdb", str(data), "--out", str(out), "--force"]) == 0
    assert out.read_bytes().startswith(b"REDIS0013")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "dump.rdb"]  # no temporary
    for inside in (data / "manifest.json", data / "dump.rdb"):  # even with --force
        assert main(["export-rdb", str(data), "--out", str(inside), "--force"]) == 3
        assert "inside the streamkeep data directory" in capsys.readouterr().err
    assert not (data / "dump.rdb").exists()
