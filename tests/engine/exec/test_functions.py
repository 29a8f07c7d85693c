"""Redis Functions (engine.exec.functions) as durable server state: a library survives a
restart by AOF replay and by the snapshot after a compaction, reaches a replica by the stream
and by a full sync, and what a function changed is logged as effects, never the FCALL.
streaq's own library (tests/data/streaq) loads and its stream functions run as its worker
calls them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, Record, ReplyError
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import load as load_manifest
from streamkeep.engine.exec.functions import Functions, functions_of, library_metadata
from streamkeep.snapshot.integrity import check_whole
from streamkeep.snapshot.rdb_functions import load_functions_payload
from streamkeep.snapshot.reader import Snapshot
from tests.support.server_util import ServerHandle, start_server

pytest.importorskip("lupa")

STREAQ = Path(__file__).parents[2] / "data" / "streaq" / "streaq.lua"

COUNTER = """#!lua name=counter
redis.register_function('bump', function(keys, args)
  return redis.call('incrby', keys[1], args[1])
end)
redis.register_function{function_name='peek', callback=function(keys)
  return redis.call('get', keys[1])
end, flags={'no-writes'}, description='reads the counter'}
"""
OTHER = "#!lua name=other\nredis.register_function('hello', function() return 'hi' end)\n"


def listing(engine: Engine) -> Any:
    return engine.execute("FUNCTION", "LIST", "WITHCODE")


def wait_for(predicate, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


# --- the registry ----------------------------------------------------------------------------


def test_library_metadata_is_read_as_redis_reads_it() -> None:
    assert library_metadata(b"#!lua name=x\nbody") == (b"lua", b"x", b"\nbody")
    assert library_metadata(b"#!LUA  NAME=y \n") == (b"LUA", b"y", b"\n")
    for code, line in [(b"x", "ERR Missing library metadata"),
                       (b"#!lua name=x", "ERR Invalid library metadata"),
                       (b"#!lua name='x\n", "ERR Invalid library metadata"),
                       (b"#!lua\n", "ERR Library name was not given")]:
        with pytest.raises(ReplyError) as err:
            library_metadata(code)
        assert err.value.line == line


def test_a_failed_load_or_restore_changes_nothing() -> None:
    engine = Engine()
    engine.execute("FUNCTION", "LOAD", COUNTER)
    before = listing(engine)
    broken = COUNTER.replace("end)\nredis", "end)\nerror('no')\nredis")
    with pytest.raises(ReplyError):
        engine.execute("FUNCTION", "LOAD", "REPLACE", broken)
    payload = engine.execute("FUNCTION", "DUMP")
    engine.execute("FUNCTION", "DELETE", "counter")
    engine.execute("FUNCTION", "LOAD", COUNTER.replace("counter", "clash"))
    with pytest.raises(ReplyError, match="^ERR Function bump already exists$"):
        engine.execute("FUNCTION", "RESTORE", payload)
    engine.execute("FUNCTION", "FLUSH")
    engine.execute("FUNCTION", "RESTORE", payload)
    assert listing(engine) == before
    assert engine.execute("FCALL", "bump", "1", "n", "5") == 5


def test_script_flush_leaves_the_functions_and_their_runtime() -> None:
    engine = Engine()
    engine.execute("FUNCTION", "LOAD", COUNTER)
    engine.execute("EVAL", "return 1", "0")
    engine.execute("SCRIPT", "FLUSH")
    assert engine.execute("FCALL", "bump", "1", "n", "2") == 2
    functions = functions_of(engine)
    assert isinstance(functions, Functions) and functions.runtime is not engine.scripting


def test_an_fcall_is_logged_as_its_effects() -> None:
    engine = Engine()
    records: list[Record] = []
    engine.add_sink(records.append)
    engine.execute("FUNCTION", "LOAD", COUNTER)
    engine.execute("FUNCTION", "LOAD", "REPLACE", COUNTER)
    engine.execute("FCALL", "bump", "1", "n", "3")
    engine.execute("FCALL_RO", "peek", "1", "n")  # reads: nothing logged
    engine.execute("FUNCTION", "DELETE", "counter")
    engine.execute("FUNCTION", "FLUSH")
    logged = [[bytes(a) for a in e] for r in records for e in r.effects]
    code = COUNTER.encode()
    assert logged == [[b"FUNCTION", b"LOAD", b"REPLACE", code],
                      [b"FUNCTION", b"LOAD", b"REPLACE", code],
                      [b"SET", b"n", b"3"],  # what the function changed, not the FCALL
                      [b"FUNCTION", b"DELETE", b"counter"],
                      [b"FUNCTION", b"FLUSH"]]


# --- durable -----------------------------------------------------------------------------------


def test_libraries_survive_a_restart_by_replay(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        engine.execute("FUNCTION", "LOAD", COUNTER)
        engine.execute("FUNCTION", "LOAD", OTHER)
        engine.execute("FCALL", "bump", "1", "n", "4")
        engine.execute("FUNCTION", "DELETE", "other")
        payload = engine.execute("FUNCTION", "DUMP")
        engine.execute("FUNCTION", "FLUSH")
        engine.execute("FUNCTION", "RESTORE", payload, "APPEND")
        before = listing(engine)
    with Engine.open(path) as engine:
        assert listing(engine) == before
        assert engine.execute("FCALL", "bump", "1", "n", "1") == 5
        with pytest.raises(ReplyError, match="^ERR Function not found$"):
            engine.execute("FCALL", "hello", "0")


def test_libraries_survive_a_compaction_in_the_snapshot(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    with Engine.open(path) as engine:
        engine.execute("FUNCTION", "LOAD", COUNTER)
        engine.execute("FUNCTION", "LOAD", OTHER)
        engine.execute("FCALL", "bump", "1", "n", "4")
        before = listing(engine)
        engine.compact()
        engine.execute("FUNCTION", "DELETE", "other")  # after the snapshot: in the AOF
        after = listing(engine)
    manifest = load_manifest(RealFS(), path)
    assert manifest.snapshot is not None and manifest.snapshot.crc32 is not None
    snapshot_path = str(tmp_path / "data" / manifest.snapshot.file)
    check_whole(snapshot_path, manifest.snapshot.crc32)  # the record is inside the checksum
    with Snapshot(snapshot_path) as snap:
        assert snap.functions is not None
        codes = load_functions_payload(snap.functions)
    assert sorted(codes) == sorted(lib[b"library_code"] for lib in map(as_dict, before))
    with Engine.open(path) as engine:
        assert listing(engine) == after
        assert engine.execute("FCALL", "bump", "1", "n", "1") == 5
        engine.execute("FUNCTION", "FLUSH")
        engine.compact()  # a snapshot with no library
    with Engine.open(path) as engine:
        assert listing(engine) == []


def as_dict(flat: list[Any]) -> dict[bytes, Any]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def canonical(libraries: list[Any]) -> list[dict[bytes, Any]]:
    """FUNCTION LIST in name order, each library's functions too (Redis's order is its hash
    tables')."""
    out = []
    for library in libraries:
        fields = as_dict(library)
        fields[b"functions"] = sorted(fields[b"functions"], key=lambda f: f[1])
        out.append(fields)
    return sorted(out, key=lambda f: f[b"library_name"])


# --- replicas ------------------------------------------------------------------------------------


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[ServerHandle]:
    engine = Engine.open(str(tmp_path / "primary"))
    handle = start_server(engine)
    try:
        yield handle
    finally:
        handle.stop()


def test_a_replica_gets_libraries_by_full_sync_and_by_the_stream(primary: ServerHandle,
                                                                 tmp_path: Path) -> None:
    p = primary.engine
    p.execute("FUNCTION", "LOAD", COUNTER)
    p.compact()  # the full sync's snapshot holds the library
    p.execute("FCALL", "bump", "1", "n", "2")
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: r.replication.follower.link_up and r.journal.lsn == p.journal.lsn)
        assert listing(r) == listing(p)
        assert r.execute("FCALL_RO", "peek", "1", "n") == b"2"
        with pytest.raises(ReplyError, match="^READONLY Can not run script with write flag on "
                                             "readonly replica$"):
            r.execute("FCALL", "bump", "1", "n", "1")
        with pytest.raises(ReplyError, match="^READONLY You can't write"):
            r.execute("FUNCTION", "FLUSH")
        p.execute("FUNCTION", "LOAD", OTHER)  # by the stream
        p.execute("FCALL", "bump", "1", "n", "3")
        wait_for(lambda: r.journal.lsn == p.journal.lsn)
        assert listing(r) == listing(p)
        assert r.execute("GET", "n") == b"5"
        with pytest.raises(ReplyError, match="^READONLY"):  # not flagged no-writes
            r.execute("FCALL", "hello", "0")
        p.execute("FUNCTION", "FLUSH")
        wait_for(lambda: r.journal.lsn == p.journal.lsn)
        assert listing(r) == []
    with Engine.open(str(tmp_path / "replica")) as again:  # and the replica's own AOF has it
        assert listing(again) == []
        assert again.execute("GET", "n") == b"5"


# --- streaq ------------------------------------------------------------------------------------


def test_streaqs_library_loads_and_its_stream_functions_run() -> None:
    engine = Engine()
    code = STREAQ.read_text()
    assert engine.execute("FUNCTION", "LOAD", "REPLACE", code) == b"streaq"  # as its worker
    assert engine.execute("FUNCTION", "LOAD", "REPLACE", code) == b"streaq"
    names = sorted(f[1] for f in as_dict(engine.execute("FUNCTION", "LIST")[0])[b"functions"])
    assert names == [b"create_groups", b"fail_dependents", b"publish_delayed_tasks",
                     b"publish_task", b"read_streams", b"refresh_timeout", b"schedule_cron_job",
                     b"update_dependents"]
    # create_groups: a group on each priority's stream, once
    for _ in range(2):
        assert engine.execute("FCALL", "create_groups", "1", "q:stream:", "workers", "low",
                              "high") is None
    assert [g[1] for g in engine.execute("XINFO", "GROUPS", "q:stream:low")] == [b"workers"]
    # publish_task without delay or dependencies: the task's data, then the live queue
    entry = engine.execute("FCALL", "publish_task", "6", "q:stream:", "q:queue:", "q:task:1",
                           "q:dependents:", "q:dependencies:", "q:results:", "1", "payload",
                           "high", "0", "60000", "1700000000000")
    assert isinstance(entry, bytes) and b"-" in entry
    assert engine.execute("GET", "q:task:1") == b"payload"
    assert 0 < engine.execute("PTTL", "q:task:1") <= 60000
    assert engine.execute("FCALL", "publish_task", "6", "q:stream:", "q:queue:", "q:task:1",
                          "q:dependents:", "q:dependencies:", "q:results:", "1", "again",
                          "high", "0", "0", "1700000000001") == 0  # already published
    # read_streams: reclaimed idle entries first, then new ones, as XREADGROUP's shape
    got = engine.execute("FCALL", "read_streams", "1", "q:stream:", "workers", "w1", "10",
                         "60000", "high", "low")
    assert got == [[b"q:stream:high", [[entry, [b"task_id", b"1",
                                                 b"enqueue_time", b"1700000000000"]]]]]
    # refresh_timeout: the consumer still owns it
    assert engine.execute("FCALL", "refresh_timeout", "1", "q:stream:high", "workers", "w1",
                          entry) == 1
    assert engine.execute("FCALL", "refresh_timeout", "1", "q:stream:high", "workers", "w2",
                          entry) is None
    # read_streams reclaims what went idle
    time.sleep(0.01)
    again = engine.execute("FCALL", "read_streams", "1", "q:stream:", "workers", "w2", "10",
                           "1", "high")
    assert again[0][1][0][0] == entry


def test_a_redis_server_primarys_function_commands_reach_a_replica(start_redis,  # type: ignore[no-untyped-def]
                                                                    tmp_path: Path) -> None:
    """A redis-server propagates FUNCTION LOAD, DELETE, FLUSH and RESTORE as its client sent
    them, and an FCALL as the writes its function made: a streamkeep replica applies them."""
    from tests.support.resp_client import RespClient

    server = start_redis()
    with RespClient("127.0.0.1", server.port) as r, \
            Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", server.port)) as rep:
        wait_for(lambda: rep.replication.follower.link_up)
        r.execute("FUNCTION", "LOAD", COUNTER)
        r.execute("FCALL", "bump", "1", "n", "7")
        wait_for(lambda: rep.execute("GET", "n") == b"7")
        assert canonical(listing(rep)) == canonical(r.execute("FUNCTION", "LIST", "WITHCODE"))
        assert rep.execute("FCALL_RO", "peek", "1", "n") == b"7"
        payload = r.execute("FUNCTION", "DUMP")
        r.execute("FUNCTION", "FLUSH")
        r.execute("FUNCTION", "RESTORE", payload)
        r.execute("FUNCTION", "LOAD", OTHER)
        r.execute("FUNCTION", "DELETE", "other")
        r.execute("SET", "done", "1")
        wait_for(lambda: rep.execute("GET", "done") == b"1")
        assert [lib[1] for lib in listing(rep)] == [b"counter"]
