"""String keys and TTLs through `streamkeep import` and `streamkeep export-rdb`, against a real
redis-server (7.0, RDB 10): every string encoding Redis writes (raw, 8/16/32-bit integers, LZF
for values and key names), TTLs on strings and streams (EXPIRETIME_MS), keys already expired
(skipped from a dump.rdb, loaded from an AOF's preamble, as Redis's rdbLoad does), and the way
back: what export-rdb writes, redis-server loads with the same values and expiry times."""

from __future__ import annotations

import json
import os
import time

import redis

from streamkeep import Engine
from streamkeep.tools.main import main
from tests.support.redis_state import keys_state, raw_client
from tests.support.replication_util import wait_for

HOUR_MS = 3_600_000

# Values in every encoding Redis's rdbSaveRawString and rdbSaveStringObject pick.
STRINGS = {
    b"int8": b"-7", b"int16": b"1234", b"int32": b"-2000000000", b"int64": b"12345678901",
    b"not-int": b"007", b"plus": b"+1", b"empty": b"", b"binary": bytes(range(256)),
    b"compressible": b"streamkeep " * 500,  # LZF-compressed by Redis (over 20 bytes, shrinks)
    b"incompressible": os.urandom(4000),  # stored raw: LZF would not save space
    b"k" * 100: b"a key name LZF-compressed too",
}


def _fill_redis(client: redis.Redis) -> None:
    client.flushall()
    for key, value in STRINGS.items():
        client.set(key, value)
    client.set("counter", 10)
    client.incrby("counter", 5)  # an integer-encoded object (OBJ_ENCODING_INT)
    client.set("ttl-string", "v", px=HOUR_MS)
    client.set("ttl-big", "x" * 3000, px=2 * HOUR_MS)
    client.xadd("ttl-stream", {"f": "v"})
    client.pexpire("ttl-stream", 3 * HOUR_MS)
    client.xadd("stream", {"f": "v"})
    client.execute_command("SELECT", "5")
    client.execute_command("SET", "in-db5", "v", "PX", str(HOUR_MS))
    client.execute_command("SELECT", "0")


def _expired_in_redis(client: redis.Redis) -> None:
    """Keys whose TTL has passed, still in redis-server's keyspace (its active expiry off, and
    none of them named since): SAVE writes them."""
    client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    client.set("expired-string", "v", px=1)
    client.xadd("expired-stream", {"f": "v"})
    client.pexpire("expired-stream", 1)
    time.sleep(0.01)


def _state(run_in) -> dict:  # type: ignore[no-untyped-def]
    return {db: state for db in range(16) if (state := keys_state(run_in(db)))}


def _engine_state(engine: Engine) -> dict:
    def run_in(db: int):  # type: ignore[no-untyped-def]
        engine.execute("SELECT", str(db))
        return engine.execute
    try:
        return _state(run_in)
    finally:
        engine.execute("SELECT", "0")


def _redis_state(client: redis.Redis) -> dict:
    return _state(lambda db: raw_client(client, db))


def _saved(client: redis.Redis) -> str:
    client.save()
    directory = client.config_get("dir")["dir"]
    return os.path.join(directory, client.config_get("dbfilename")["dbfilename"])


def test_a_dump_rdb_imports_every_string_encoding_and_ttl(start_redis, tmp_path,
                                                         capsys) -> None:
    server = start_redis("--enable-debug-command", "yes", "--dir", str(tmp_path))
    client = redis.Redis(host=server.host, port=server.port)
    _fill_redis(client)
    expected = _redis_state(client)  # before the expired keys: Redis skips them at load too
    _expired_in_redis(client)
    path = _saved(client)
    with open(path, "rb") as f:
        assert b"streamkeep " * 3 not in f.read()  # the value went in LZF-compressed
    out = tmp_path / "data"
    assert main(["import", path, "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["expired_skipped"] == 2  # rdbLoad as a primary: `expiretime < now` skipped
    assert report["strings"] == len(STRINGS) + 4 and report["streams"] == 2
    assert report["expiries"] == 4 and report["skipped"] == {}
    with Engine.open(str(out)) as engine:
        assert _engine_state(engine) == expected
        assert engine.execute("PTTL", "ttl-string") > HOUR_MS - 60_000
    # The same file loaded by redis-server itself: the same keys, values and expiry times.
    client.execute_command("DEBUG", "RELOAD", "NOSAVE")
    assert _redis_state(client) == expected


def test_an_aof_preamble_loads_keys_already_expired(tmp_path, capsys) -> None:
    from streamkeep.snapshot.rdb import write_rdb

    engine = Engine()
    engine.execute("XADD", "s", "1-1", "f", "v")
    past = int(time.time() * 1000) - 60_000
    items = [(b"expired", b"v", past), (b"s", engine.dbs[0][b"s"], past),
             (b"live", b"42", past + 2 * HOUR_MS), (b"forever", b"x" * 30, None)]
    base = b"".join(write_rdb(10, [], [(0, len(items), 3, items)]))
    source = tmp_path / "appendonlydir"
    source.mkdir()
    (source / "appendonly.aof.manifest").write_text(
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 "
        "type i\n")
    (source / "appendonly.aof.1.base.rdb").write_bytes(base)
    # The AOF's commands assume the exact keyspace of its base, expired keys included.
    (source / "appendonly.aof.1.incr.aof").write_bytes(
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$6\r\nAPPEND\r\n$7\r\nexpired\r\n$1\r\n!\r\n")
    out = tmp_path / "data"
    assert main(["import", str(source), "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["expired_skipped"] == 0 and report["strings"] == 3
    with Engine.open(str(out)) as served:
        assert served.strings[0][b"expired"] == b"v!"  # APPENDed, then KEEPTTL: still past
        assert served.expires[0][b"expired"] == past and b"s" in served.dbs[0]
        # Served, the engine expires what is past (and logs the DELs), as Redis would.
        assert served.execute("GET", "expired") is None and served.execute("EXISTS", "s") == 0
        assert served.execute("PEXPIRETIME", "live") == past + 2 * HOUR_MS
        assert served.execute("TTL", "forever") == -1
    # A dump.rdb on its own is a primary's load: its expired keys are skipped.
    dump = tmp_path / "dump.rdb"
    dump.write_bytes(base)
    assert main(["import", str(dump), "--out", str(tmp_path / "d2"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["expired_skipped"] == 2 and report["strings"] == 2


def _fill_engine(engine: Engine) -> None:
    for key, value in STRINGS.items():
        engine.execute("SET", key, value)
    engine.execute("SET", "counter", "10")
    engine.execute("INCRBYFLOAT", "counter", "0.5")
    engine.execute("SET", "ttl-string", "v", "PX", str(HOUR_MS))
    engine.execute("SET", "ttl-int", "99", "PX", str(2 * HOUR_MS))
    engine.execute("XADD", "ttl-stream", "1-1", "f", "v")
    engine.execute("PEXPIRE", "ttl-stream", str(3 * HOUR_MS))
    engine.execute("XADD", "stream", "1-1", "f", "v")
    engine.execute("SELECT", "5")
    engine.execute("SET", "in-db5", "v", "PX", str(HOUR_MS))
    engine.execute("SELECT", "0")


def test_export_rdb_loads_in_redis_server_with_values_and_ttls(start_redis, tmp_path,
                                                              capsys) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        _fill_engine(engine)
        engine.execute("SET", "brief", "v", "PX", "1")  # expired by the time redis loads it
        wait_for(lambda: int(time.time() * 1000) > engine.expires[0][b"brief"] + 1)
        expected = _engine_state(engine)  # the engine's reads skip `brief`, as redis's load
        assert b"brief" not in expected[0]
    out = tmp_path / "redis" / "dump.rdb"
    out.parent.mkdir()
    assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version", "10",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["strings"] == len(STRINGS) + 5 and report["streams"] == 2
    from streamkeep.snapshot.rdb import read_rdb

    written = {k.key: k.expire_ms for k in read_rdb(out.read_bytes())[2]}
    assert b"brief" in written and written[b"stream"] is None  # every key, expired or not
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port)
    assert _redis_state(client) == expected
    assert client.object("encoding", "int32") == b"int"  # integer-encoded, as Redis writes it
    # And back again: the file imports to the same state.
    assert main(["import", str(out), "--out", str(tmp_path / "again"), "--json"]) == 0
    capsys.readouterr()
    with Engine.open(str(tmp_path / "again")) as engine:
        assert _engine_state(engine) == expected
