"""`streamkeep export-rdb`: a data directory's streams loaded by a real redis-server (7.0, RDB
10), while a server may be running on the directory; the RDB version written by default (the
oldest that holds the data: ordinary streams and groups load in Debian's redis-server 7.0,
idempotent producers take RDB 13), said on stderr and in the JSON report, and checked by
importing the file back; and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

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
        printed = capsys.readouterr()
        report = json.loads(printed.out)
        assert report["streams"] == 4 and report["entries"] == 698 + 1
        # The consumer XGROUP CREATECONSUMER made has no active time: RDB 11 would hold that.
        assert (report["rdb_version"], report["rdb_version_needed"]) == (10, 11)
        assert "warning: RDB 10 does not hold all of this data" in printed.err
        assert 'consumer "idle"' in printed.err
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
    assert out.read_bytes().startswith(b"REDIS0009")  # one stream, nothing deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "dump.rdb"]  # no temporary
    for inside in (data / "manifest.json", data / "dump.rdb"):  # even with --force
        assert main(["export-rdb", str(data), "--out", str(inside), "--force"]) == 3
        assert "inside the streamkeep data directory" in capsys.readouterr().err
    assert not (data / "dump.rdb").exists()


def _ordinary(engine: Engine) -> None:
    """Streams and groups as an application leaves them: entries added, some deleted or
    trimmed, groups whose consumers read and acknowledged part of them, strings with a TTL."""
    for i in range(1, 301):
        engine.execute("XADD", "orders", "*", "item", str(i))
        engine.execute("XADD", "events", "MAXLEN", "100", "*", "n", str(i))
    first = engine.execute("XRANGE", "orders", "-", "+", "COUNT", "1")[0][0]
    engine.execute("XDEL", "orders", first)
    engine.execute("XGROUP", "CREATE", "orders", "billing", "0")
    engine.execute("XGROUP", "CREATE", "orders", "shipping", "0")
    for group, consumer, count in (("billing", "b1", 40), ("billing", "b2", 25),
                                   ("shipping", "s1", 300)):
        read = engine.execute("XREADGROUP", "GROUP", group, consumer, "COUNT", str(count),
                              "STREAMS", "orders", ">")
        engine.execute("XACK", "orders", group, *[sid for sid, _ in read[0][1][:10]])
    engine.execute("SET", "config", "v1")
    engine.execute("SET", "session", "abc", "PX", "86400000")


def _imported_digest(rdb: Path, tmp_path: Path) -> str:
    back = tmp_path / "back"
    assert main(["import", str(rdb), "--out", str(back)]) == 0
    with Engine.open(str(back)) as engine:
        return engine.digest()


def test_the_default_is_the_oldest_version_that_holds_the_data(
        start_redis, tmp_path, capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        _ordinary(engine)
        expected = _state_of(engine)
        digest = engine.digest()
    out = tmp_path / "redis" / "dump.rdb"
    out.parent.mkdir()
    assert main(["export-rdb", str(data), "--out", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    report = json.loads(printed.out)
    assert out.read_bytes().startswith(b"REDIS0010")
    assert (report["rdb_version"], report["rdb_version_needed"]) == (10, 10)
    assert report["rdb_version_asked"] is None
    assert report["redis_versions"] == "Redis 7.0 and later"
    assert "wrote RDB version 10, which Redis 7.0 and later load (the oldest that holds " \
           "this data: needed for" in printed.err
    # Debian's redis-server (7.0) loads it, with the same streams, groups and PELs.
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port)
    assert databases_state(lambda db: raw_client(client, db)) == expected
    assert client.pttl("session") > 0 and client.get("config") == b"v1"
    # Nothing was lost: imported back, the state is the same to the last counter.
    assert _imported_digest(out, tmp_path) == digest


def test_data_that_needs_rdb_13_gets_it_and_says_so(tmp_path, capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        _ordinary(engine)
        engine.execute("XADD", "payments", "IDMP", "producer-1", "req-1", "*", "amount", "5")
        digest = engine.digest()
    out = tmp_path / "dump.rdb"
    assert main(["export-rdb", str(data), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert out.read_bytes().startswith(b"REDIS0013")
    assert "RDB 13" in printed.out
    assert "wrote RDB version 13, which Redis 8.6 and later load" in printed.err
    assert 'IDMP) of stream "payments" (db 0)' in printed.err
    assert _imported_digest(out, tmp_path) == digest
    # Asked for an older one: written, and the warning says what it loses.
    older = tmp_path / "old.rdb"
    assert main(["export-rdb", str(data), "--out", str(older), "--rdb-version", "10"]) == 0
    err = capsys.readouterr().err
    assert older.read_bytes().startswith(b"REDIS0010")
    assert "(as asked)" in err and "needs RDB 13, and is lost" in err


def _released(engine: Engine) -> None:
    """A stream whose group has an entry XNACK released (Redis 8.8), and a string."""
    for i in range(1, 6):
        engine.execute("XADD", "jobs", f"{i}-0", "n", str(i))
    engine.execute("XGROUP", "CREATE", "jobs", "workers", "0")
    engine.execute("XREADGROUP", "GROUP", "workers", "w1", "COUNT", "3", "STREAMS", "jobs", ">")
    engine.execute("XNACK", "jobs", "workers", "FAIL", "IDS", "1", "2-0")
    engine.execute("SET", "config", "v1", "PX", "3600000")


def test_entries_xnack_released_take_rdb_14(tmp_path, capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        _released(engine)
        digest = engine.digest()
    out = tmp_path / "dump.rdb"
    assert main(["export-rdb", str(data), "--out", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    report = json.loads(printed.out)
    assert out.read_bytes().startswith(b"REDIS0014")
    assert (report["rdb_version"], report["redis_versions"]) == (14, "Redis 8.8 and later")
    assert 'XNACK released' in printed.err and '"workers"' in printed.err
    assert _imported_digest(out, tmp_path) == digest


@pytest.mark.parametrize("version", range(9, 16))
def test_every_rdb_version_asked_is_written_and_read_back(tmp_path, capsys,
                                                          version: int) -> None:
    from streamkeep.snapshot import rdb

    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        _released(engine)
        digest = engine.digest()
        xrange = engine.execute("XRANGE", "jobs", "-", "+")
    out = tmp_path / "dump.rdb"
    assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version",
                 str(version)]) == 0
    err = capsys.readouterr().err
    assert out.read_bytes().startswith(b"REDIS%04d" % version)
    keys = rdb.read_rdb(out.read_bytes())[2]
    assert sorted((k.key, k.rdb_type) for k in keys) == [
        (b"config", 0), (b"jobs", rdb.TYPE_STREAM[version])]
    if version >= 14:
        assert "(as asked)" in err and "warning" not in err
        assert _imported_digest(out, tmp_path) == digest
    else:
        assert "needs RDB 14, and is lost" in err
        back = tmp_path / "back"
        assert main(["import", str(out), "--out", str(back)]) == 0
        with Engine.open(str(back)) as engine:
            assert engine.execute("XRANGE", "jobs", "-", "+") == xrange
            assert engine.execute("GET", "config") == b"v1"


@pytest.mark.parametrize("asked", ["8", "16", "80", "x"])
def test_an_rdb_version_not_written_is_refused_naming_those_that_are(tmp_path, capsys,
                                                                      asked: str) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["export-rdb", str(tmp_path), "--out", str(tmp_path / "x.rdb"), "--rdb-version",
              asked])
    assert refused.value.code == 3  # a usage error
    err = capsys.readouterr().err
    said = "not a number" if asked == "x" else f"RDB version {asked} is not one streamkeep " \
        "writes: 9 to 15"
    assert said in err and "Traceback" not in err
    assert not (tmp_path / "x.rdb").exists()


def test_function_libraries_go_to_redis_server_as_function_records(start_redis, tmp_path,
                                                                   capsys) -> None:
    from streamkeep.snapshot import rdb
    from tests.support.rdb_files import LIBRARY

    data = tmp_path / "data"
    later = b"#!lua name=later\nredis.register_function('two', function() return 2 end)"
    with Engine.open(str(data)) as engine:
        engine.execute("FUNCTION", "LOAD", LIBRARY)
        engine.execute("FUNCTION", "LOAD", later)
        engine.execute("SET", "k", "from streamkeep")
        engine.compact()  # one library from the snapshot, one replayed from its records...
        engine.execute("FUNCTION", "DELETE", "later")
        engine.execute("FUNCTION", "LOAD", later)  # ...after it
    out = tmp_path / "redis" / "dump.rdb"
    out.parent.mkdir()
    assert main(["export-rdb", str(data), "--out", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    report = json.loads(printed.out)
    # Streams and strings alone take RDB 9; libraries are RDB 10's (Redis 7.0)
    assert (report["functions"], report["rdb_version"]) == (2, 10)
    assert report["rdb_version_why"] == "the function libraries (2)"
    assert [lib.code for lib in rdb.read_rdb_contents(out.read_bytes()).libraries] == [
        LIBRARY, later]
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port)
    assert client.execute_command("FCALL", "getk", "1", "k") == b"from streamkeep"
    assert client.execute_command("FCALL_RO", "ro", "0") == b"ro"
    assert client.execute_command("FCALL", "two", "0") == 2
    listed = client.execute_command("FUNCTION", "LIST", "WITHCODE")
    assert sorted(lib[b"library_code"] for lib in listed) == sorted([LIBRARY, later])


def test_function_libraries_need_rdb_10(tmp_path, capsys) -> None:
    from tests.support.rdb_files import LIBRARY

    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        engine.execute("FUNCTION", "LOAD", LIBRARY)
    out = tmp_path / "dump.rdb"
    assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version", "9"]) == 3
    err = capsys.readouterr().err
    assert "RDB 9 cannot hold the 1 function library of this data" in err
    assert "no Redis before 7.0 has functions (RDB 10 or later holds them)" in err
    assert not out.exists()
    assert main(["export-rdb", str(data), "--out", str(out)]) == 0
    assert "needed for the function library (1)" in capsys.readouterr().err
