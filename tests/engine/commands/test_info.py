"""INFO (engine.commands.info): sections, persistence and replication fields, through the server
and against the real redis-server's shape.

Most tests run twice through the `backend` fixture: on the embedded engine and through an
in-process streamkeep server (RESP2, the same plain values). Reply shapes and error lines are
compared with the real redis-server where Redis has the behaviour; the RESP3 shapes are checked
with redis-py (`protocol=3`) against the in-process server.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import redis

from streamkeep import Engine
from streamkeep.engine.wire.reply import Verbatim
from tests.support.resp_client import RespClient
from tests.support.server_util import ServerHandle, connect

# --- INFO --------------------------------------------------------------------------------------


def parse_info(text: bytes | str) -> dict[str, dict[str, str]]:
    if isinstance(text, bytes):
        text = text.decode()
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.split("\r\n"):
        if line.startswith("# "):
            current = sections.setdefault(line[2:].lower(), {})
        elif line:
            key, _, value = line.partition(":")
            current[key] = value
    return sections


def test_info_sections(backend: Any) -> None:
    engine = Engine()
    db = backend(engine)
    db.execute("XADD", "s", "*", "f", "v")
    db.execute("SELECT", "3")
    db.execute("XADD", "t", "*", "f", "v")
    db.execute("XADD", "u", "*", "f", "v")
    text = db.execute("INFO")
    assert isinstance(text, bytes)
    assert text.endswith(b"\r\n") and b"\n" not in text.replace(b"\r\n", b"")
    info = parse_info(text)
    # Redis's default sections: errorstats is one, commandstats only in "all"/"everything".
    assert list(info) == ["server", "clients", "memory", "persistence", "stats",
                          "replication", "cpu", "modules", "errorstats", "cluster", "keyspace"]
    assert info["server"]["redis_version"] == "8.10.2"
    assert info["server"]["streamkeep_version"]
    from streamkeep.engine.exec import build_report

    assert info["server"]["streamkeep_native"] == ("yes" if build_report.native() else "no")
    if os.environ.get("STREAMKEEP_REQUIRE_EXTENSIONS") and not os.environ.get(
            "STREAMKEEP_NO_EXTENSIONS"):
        assert info["server"]["streamkeep_native"] == "yes"
    assert info["keyspace"] == {"db0": "keys=1,expires=0,avg_ttl=0,subexpiry=0",
                                "db3": "keys=2,expires=0,avg_ttl=0,subexpiry=0"}
    assert info["replication"]["role"] == "master"
    assert int(info["memory"]["used_memory"]) > 0
    assert info["persistence"]["loading"] == "0"
    assert list(parse_info(db.execute("INFO", "keyspace", "SERVER"))) == ["server", "keyspace"]
    everything = ["server", "clients", "memory", "persistence", "stats", "replication", "cpu",
                  "modules", "commandstats", "errorstats", "latencystats", "cluster",
                  "keyspace"]
    assert list(parse_info(db.execute("INFO", "all"))) == everything
    assert list(parse_info(db.execute("INFO", "everything"))) == everything
    assert list(parse_info(db.execute("INFO", "default"))) == list(info)
    assert db.execute("INFO", "nosuch") == b""


def test_info_on_an_embedded_engine() -> None:
    engine = Engine()
    reply = engine.execute_raw(engine.session, (b"INFO", b"clients", b"stats"))
    assert type(reply) is Verbatim and reply.fmt == "txt"
    info = parse_info(reply.text)
    assert info["clients"]["connected_clients"] == "0"  # no network connection
    assert info["clients"]["maxclients"] == "10000"
    assert info["stats"]["total_connections_received"] == "0"


def test_info_persistence_and_replication(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as engine:
        for i in range(3):
            engine.execute("XADD", "s", "*", "n", str(i))
        info = parse_info(engine.execute("INFO", "persistence", "replication"))
        persistence, replication = info["persistence"], info["replication"]
        assert persistence["aof_enabled"] == "1"
        assert persistence["aof_rewrite_in_progress"] == "0"
        assert persistence["aof_last_bgrewrite_status"] == "ok"
        assert persistence["aof_last_write_status"] == "ok"
        assert int(persistence["aof_current_size"]) > 0
        assert persistence["aof_base_size"] == "0"
        assert persistence["rdb_changes_since_last_save"] == "3"
        from streamkeep.engine.commands.connection import last_save_time

        assert persistence["rdb_last_save_time"] == str(last_save_time(engine))
        assert engine.journal is not None
        assert replication["master_replid"] == engine.journal.manifest.repl_id
        assert replication["master_repl_offset"] == str(engine.journal.lsn) == "3"
        assert engine.compact(wait=True) is not None
        info = parse_info(engine.execute("INFO", "persistence"))["persistence"]
        assert int(info["aof_base_size"]) > 0 and info["rdb_changes_since_last_save"] == "0"


def test_info_through_the_server(served: ServerHandle) -> None:
    r3 = redis.Redis(host=served.host, port=served.port, protocol=3)
    r3.xadd("s", {"f": "v"})
    info = r3.info()
    assert info["redis_version"] == "8.10.2" and info["role"] == "master"
    assert info["db0"]["keys"] == 1
    assert info["connected_clients"] == 1
    assert info["tcp_port"] == served.port
    # RESP3: a verbatim string; RESP2: a bulk string.
    with socket.create_connection((served.host, served.port), timeout=5) as s:
        s.sendall(b"HELLO 3\r\nINFO server\r\n")
        data = b""
        while b"\r\nredis_version:" not in data:
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
        assert b"\r\n=" in data and b"\r\ntxt:# Server\r\nredis_version:8.10.2\r\n" in data
    raw = connect(served)
    stats = parse_info(raw.execute("INFO", "stats"))["stats"]
    assert int(stats["total_connections_received"]) >= 2
    assert int(stats["total_commands_processed"]) >= 3
    assert raw.execute("CONFIG", "RESETSTAT") == "OK"
    stats = parse_info(raw.execute("INFO", "stats"))["stats"]
    assert stats["total_connections_received"] == "0"
    assert stats["total_commands_processed"] == "1"  # this INFO
    raw.close()
    r3.close()


def test_info_matches_redis_shape(redis_raw: RespClient, sk: RespClient) -> None:
    for argv in (("INFO", "nosuch"), ("INFO", "keyspace")):
        assert sk.execute(*argv) == redis_raw.execute(*argv)
    theirs, ours = redis_raw.execute("INFO"), sk.execute("INFO")
    assert type(theirs) is type(ours) is bytes
    redis_fields, our_fields = parse_info(theirs), parse_info(ours)
    for section in ("server", "clients", "persistence", "stats", "replication"):
        assert section in our_fields
    for section, field in (("server", "redis_mode"), ("server", "process_id"),
                           ("clients", "connected_clients"), ("clients", "blocked_clients"),
                           ("memory", "used_memory"), ("persistence", "aof_enabled"),
                           ("stats", "total_commands_processed"), ("replication", "role"),
                           ("replication", "master_replid"), ("cpu", "used_cpu_sys")):
        assert field in redis_fields[section] and field in our_fields[section], field


def test_info_keyspace_counts_strings_and_ttls() -> None:
    e = Engine()
    e.execute("SET", "a", "1", "EX", "10")
    e.execute("XADD", "s", "*", "f", "v")
    e.execute("SELECT", "3")
    e.execute("SET", "b", "1")
    lines = bytes(e.execute("INFO", "keyspace")).decode().split("\r\n")
    assert "db0:keys=2,expires=1,avg_ttl=0,subexpiry=0" in lines
    assert "db3:keys=1,expires=0,avg_ttl=0,subexpiry=0" in lines
