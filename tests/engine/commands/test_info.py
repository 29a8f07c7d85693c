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

import pytest
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


# --- INFO memory: the scripts' and the connections' figures ---------------------------------

SCRIPT_FIELDS = ["used_memory_lua", "used_memory_vm_eval", "used_memory_lua_human",
                 "used_memory_scripts_eval", "number_of_cached_scripts", "number_of_functions",
                 "number_of_libraries", "used_memory_vm_functions", "used_memory_vm_total",
                 "used_memory_vm_total_human", "used_memory_functions", "used_memory_scripts",
                 "used_memory_scripts_human"]


def _script_fields(engine: Engine) -> dict[str, str]:
    memory = parse_info(engine.execute("INFO", "memory"))["memory"]
    return {name: memory[name] for name in memory if name in SCRIPT_FIELDS}


def test_info_script_fields_are_the_lua_heap_and_the_cache() -> None:
    from streamkeep.engine.commands.info import bytes_to_human

    engine = Engine()
    fields = _script_fields(engine)
    assert list(fields) == SCRIPT_FIELDS  # Redis 8's order
    assert fields == {name: "0B" if name.endswith("_human") else "0" for name in SCRIPT_FIELDS}
    bodies = [b"return 1", b"return redis.call('ping')"]
    for body in bodies:
        engine.execute("EVAL", body, "0")
    scripting = engine.scripting
    lua, cache = scripting.memory(), scripting.cache_memory()
    # what the Lua host's allocator counts: the runtime with its sandbox and libraries
    assert lua > 32 * 1024
    # each body and SHA1 (40 characters) at least, and the cache's own dicts
    assert cache > sum(len(b) + 40 for b in bodies)
    assert _script_fields(engine) == {
        "used_memory_lua": str(lua), "used_memory_vm_eval": str(lua),
        "used_memory_lua_human": bytes_to_human(lua), "used_memory_scripts_eval": str(cache),
        "number_of_cached_scripts": "2", "number_of_functions": "0",
        "number_of_libraries": "0", "used_memory_vm_functions": "0",
        "used_memory_vm_total": str(lua), "used_memory_vm_total_human": bytes_to_human(lua),
        "used_memory_functions": "0", "used_memory_scripts": str(cache),
        "used_memory_scripts_human": bytes_to_human(cache)}
    engine.execute("EVAL", b"return 'a longer body: ' .. string.rep('x', 10)", "0")
    assert scripting.cache_memory() > cache
    engine.execute("SCRIPT", "FLUSH")
    assert _script_fields(engine)["number_of_cached_scripts"] == "0"
    assert _script_fields(engine)["used_memory_lua"] == "0"  # the runtime goes with the cache
    assert _script_fields(engine)["used_memory_scripts"] == "0"


LIBRARY = (b"#!lua name=infolib\n"
           b"redis.register_function('f1', function(keys, args) return 1 end)\n"
           b"redis.register_function('f2', function(keys, args) return 2 end)")


def test_info_function_fields_are_the_libraries_heap_and_code() -> None:
    """FUNCTION's libraries run in a Lua runtime of their own: used_memory_vm_functions is its
    heap, used_memory_functions what the libraries hold besides (their names, code and
    functions' entries); the totals add EVAL's figures."""
    import sys

    pytest.importorskip("streamkeep.engine.exec.functions")
    from streamkeep.engine.commands.info import bytes_to_human

    engine = Engine()
    assert engine.execute("FUNCTION", "LOAD", LIBRARY) == b"infolib"
    engine.execute("EVAL", "return 1", "0")
    functions = engine.scripting.functions
    vm, lua = functions.memory(), engine.scripting.memory()
    cache = engine.scripting.cache_memory()
    fields = _script_fields(engine)
    assert fields["number_of_functions"] == "2" and fields["number_of_libraries"] == "1"
    assert fields["used_memory_vm_functions"] == str(vm) and vm > 32 * 1024
    assert fields["used_memory_vm_total"] == str(vm + lua)
    assert fields["used_memory_vm_total_human"] == bytes_to_human(vm + lua)
    overhead = int(fields["used_memory_functions"])
    assert overhead > sys.getsizeof(LIBRARY) + 2 * sys.getsizeof(b"f1")
    assert fields["used_memory_scripts"] == str(cache + overhead)
    engine.execute("SCRIPT", "FLUSH")  # EVAL's cache only
    assert _script_fields(engine)["number_of_libraries"] == "1"
    engine.execute("FUNCTION", "FLUSH")
    fields = _script_fields(engine)
    assert [fields["number_of_functions"], fields["number_of_libraries"],
            fields["used_memory_functions"]] == ["0", "0", "0"]


def _mem_clients_normal(client: RespClient) -> int:
    return int(parse_info(client.execute("INFO", "memory"))["memory"]["mem_clients_normal"])


def _until(check: Any, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def c_sizes(client: Any) -> int:
    """A connection's own objects, as client_memory counts them."""
    import sys

    return sys.getsizeof(client) + sys.getsizeof(client.session) + sys.getsizeof(client.out)


def test_mem_clients_normal_counts_each_connections_buffers(served: ServerHandle) -> None:
    """The sum of every normal connection's `client_memory`: a partly sent command's bytes
    (the query buffer), the commands MULTI queued, the connection's own objects."""
    from streamkeep.engine.commands.info import client_memory

    watcher = connect(served)
    idle = _mem_clients_normal(watcher)
    assert idle > 0  # the watcher itself: its session, its output buffer
    with socket.create_connection((served.host, served.port), timeout=10) as partial:
        partial.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$200000\r\n" + b"x" * 150_000)
        _until(lambda: _mem_clients_normal(watcher) >= idle + 150_000)
        sender = next(c for c in list(served.server.clients.values())
                      if c.parser.pending_bytes() >= 150_000)
        assert client_memory(sender) >= 150_000 + c_sizes(sender)
    _until(lambda: _mem_clients_normal(watcher) < idle + 150_000)
    queued = connect(served)
    assert queued.execute("MULTI") == "OK"
    before = _mem_clients_normal(watcher)
    assert queued.execute("SET", "k", b"v" * 50_000) == "QUEUED"
    assert _mem_clients_normal(watcher) >= before + 50_000 + len("SETk") + 3 * 8
    queued.close()
    watcher.close()
