"""CONFIG, INFO, COMMAND and CLIENT, and the settings registry behind CONFIG (engine.config).

Most tests run twice through the `backend` fixture: on the embedded engine and through an
in-process streamkeep server (RESP2, the same plain values). Reply shapes and error lines are
compared with the real redis-server where Redis has the behaviour; the RESP3 shapes are checked
with redis-py (`protocol=3`) against the in-process server.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec.config import (
    DEFAULT_CONFIG,
    PARAMS,
    ConfigError,
    parse_config_text,
    parse_size,
    read_config_file,
)
from streamkeep.engine.exec.table import COMMANDS
from streamkeep.engine.wire.reply import RespMap, RespSet, Verbatim
from tests.resp_client import RespClient, RespError
from tests.server_util import ServerHandle


def outcome(target: Any, *argv: Any) -> tuple[str, Any]:
    """("ok", reply) or ("err", line), whatever runs the command."""
    try:
        return "ok", target.execute(*argv)
    except (ReplyError, RespError) as err:
        return "err", str(err)


def pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    """A RESP2 map reply (k1 v1 k2 v2 ...) as sorted pairs: Redis's order is its dict's."""
    return sorted(zip(flat[0::2], flat[1::2], strict=True))


def err(target: Any, *argv: Any) -> str:
    kind, value = outcome(target, *argv)
    assert kind == "err", f"{argv!r} did not fail: {value!r}"
    return value



@pytest.fixture
def sk(served: ServerHandle) -> Iterator[RespClient]:
    """A RESP2 connection to a fresh in-process streamkeep server."""
    client = RespClient(served.host, served.port, timeout=10)
    try:
        yield client
    finally:
        client.close()


def connect(handle: ServerHandle, **kwargs: Any) -> RespClient:
    return RespClient(handle.host, handle.port, timeout=kwargs.pop("timeout", 10))


def closed_by_server(client: RespClient, timeout: float = 5.0) -> bool:
    """True once the server has closed the connection (EOF on a read)."""
    client.settimeout(timeout)
    try:
        client.read()
    except TimeoutError:
        return False
    except ConnectionError:  # EOF ("connection closed by server") or a reset
        return True
    return False


# --- the registry -----------------------------------------------------------------------------


def test_defaults_come_from_the_registry() -> None:
    engine = Engine()
    assert engine.config == DEFAULT_CONFIG
    assert set(DEFAULT_CONFIG) == set(PARAMS)
    assert engine.config["stream-node-max-entries"] == 100
    assert engine.config["client-output-buffer-limit"]["normal"] == (256 << 20, 64 << 20, 60)


def test_engine_settings_are_validated_and_canonical() -> None:
    engine = Engine(stream_node_max_entries="50", **{"stream-node-max-bytes": "4kb",
                                                     "protected_mode": "no",
                                                     "loglevel": "WARNING"})
    assert engine.config["stream-node-max-entries"] == 50
    assert engine.node_max_entries == 50
    assert engine.config["stream-node-max-bytes"] == 4096
    assert engine.config["protected-mode"] is False
    assert engine.config["loglevel"] == "warning"
    with pytest.raises(ValueError, match="no_such_setting|no-such-setting"):
        Engine(no_such_setting=1)
    with pytest.raises(ValueError, match="couldn't be parsed into an integer"):
        Engine(maxclients="many")
    with pytest.raises(ValueError, match="between 1 and 4294967295"):
        Engine(maxclients=0)
    with pytest.raises(ValueError, match="'yes' or 'no'"):
        Engine(protected_mode="maybe")
    with pytest.raises(ValueError, match="16 databases"):
        Engine(databases=4)


def test_engine_open_validates_the_aof_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="everysec, always, no"):
        Engine.open(str(tmp_path / "a"), appendfsync="sometimes")
    assert not (tmp_path / "a").exists()  # refused before touching the directory
    with Engine.open(str(tmp_path / "b"), appendfsync="ALWAYS",
                     auto_aof_rewrite_min_size="1mb", aof_load_truncated="no") as engine:
        assert engine.config["appendfsync"] == "always"
        assert engine.journal is not None and engine.journal.policy == "always"
        assert engine.config["auto-aof-rewrite-min-size"] == 1 << 20
        assert engine.datadir is not None and engine.datadir.compactor.min_size == 1 << 20
        assert engine.config["aof-load-truncated"] is False
        assert engine.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"always"]


def test_parse_size_moved_to_the_registry() -> None:
    from streamkeep.snapshot import compactor

    assert compactor.parse_size is parse_size
    assert parse_size("64mb") == 64 << 20
    assert parse_size("1GB") == 1 << 30
    assert parse_size("512k") == 512_000
    assert parse_size("512kb") == 512 << 10
    assert parse_size(100) == 100
    assert parse_size("mb") == 0  # Redis's memtoull reads no digits as 0
    for bad in ("1.5mb", "-1", "+5", " 1mb", "1x", "0x10"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_output_buffer_limits_are_replaced_never_mutated() -> None:
    default = DEFAULT_CONFIG["client-output-buffer-limit"]
    a, b = Engine(), Engine()
    a.execute("CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 2mb 3")
    assert a.config["client-output-buffer-limit"]["normal"] == (1 << 20, 2 << 20, 3)
    assert a.config["client-output-buffer-limit"]["pubsub"] == default["pubsub"]
    assert b.config["client-output-buffer-limit"] is default
    assert default["normal"] == (256 << 20, 64 << 20, 60)
    engine = Engine(client_output_buffer_limit={"normal": (0, 0, 0)})
    assert engine.execute("CONFIG", "GET", "client-output-buffer-limit") == [
        b"client-output-buffer-limit",
        b"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"]


# --- CONFIG GET / SET ---------------------------------------------------------------------------


def test_config_get_patterns(backend: Any) -> None:
    db = backend(Engine())
    assert db.execute("CONFIG", "GET", "stream-node-max-entries") == [
        b"stream-node-max-entries", b"100"]
    reply = db.execute("CONFIG", "GET", "stream*", "maxclients", "STREAM-NODE-MAX-ENTRIES")
    assert reply == [b"stream-node-max-entries", b"100", b"stream-node-max-bytes", b"4096",
                     b"maxclients", b"10000"]
    # A name without glob characters is shown as typed, as Redis does.
    assert db.execute("CONFIG", "GET", "MaxClients") == [b"MaxClients", b"10000"]
    assert db.execute("CONFIG", "GET", "no-such-thing", "zz*") == []
    assert db.execute("CONFIG", "GET", "protected-mode") == [b"protected-mode", b"yes"]
    assert db.execute("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]  # in memory
    assert db.execute("CONFIG", "GET", "save", "databases") == [b"save", b"", b"databases",
                                                                  b"16"]
    everything = db.execute("CONFIG", "GET", "*")
    assert everything[0::2] == [name.encode() for name in PARAMS]
    assert err(db, "CONFIG", "GET") == "ERR wrong number of arguments for 'config|get' command"


def test_config_set_applies_and_is_atomic(backend: Any) -> None:
    engine = Engine()
    db = backend(engine)
    assert db.execute("CONFIG", "SET", "stream-node-max-entries", "7",
                      "stream-node-max-bytes", "1kb") == "OK"
    assert engine.node_max_entries == 7 and engine.node_max_bytes == 1024
    assert db.execute("CONFIG", "GET", "stream-node-max-bytes") == [
        b"stream-node-max-bytes", b"1024"]
    # One bad value: nothing changes.
    line = err(db, "CONFIG", "SET", "stream-node-max-entries", "9", "maxclients", "x")
    assert line == ("ERR CONFIG SET failed (possibly related to argument 'maxclients') - "
                    "argument couldn't be parsed into an integer")
    assert engine.config["stream-node-max-entries"] == 7 and engine.node_max_entries == 7
    assert err(db, "CONFIG", "SET", "stream-node-max-entries", "9", "nope", "1") == (
        "ERR Unknown option or number of arguments for CONFIG SET - 'nope'")
    assert engine.config["stream-node-max-entries"] == 7
    assert db.execute("CONFIG", "SET", "LOGLEVEL", "Warning") == "OK"
    assert db.execute("CONFIG", "GET", "loglevel") == [b"loglevel", b"warning"]
    db.execute("CONFIG", "SET", "loglevel", "notice")


CONFIG_SET_ERRORS = [
    ("maxclients", "abc"),
    ("maxclients", "0"),
    ("maxclients", "1.5"),
    ("stream-node-max-entries", "-1"),
    ("stream-node-max-entries", "+5"),
    ("stream-node-max-entries", "007"),
    ("stream-node-max-bytes", "1.5mb"),
    ("stream-node-max-bytes", "-1"),
    ("protected-mode", "maybe"),
    ("aof-load-truncated", "1"),
    ("appendfsync", "sometimes"),
    ("loglevel", "loud"),
    ("proto-max-bulk-len", "10"),
    ("auto-aof-rewrite-percentage", "-1"),
    ("auto-aof-rewrite-min-size", "1x"),
    ("client-output-buffer-limit", "normal 1 2"),
    ("client-output-buffer-limit", "foo 1 2 3"),
    ("client-output-buffer-limit", "normal 1mb 2x 3"),
    ("client-output-buffer-limit", "master 0 0 0"),
    ("databases", "2"),
    ("DATABASES", "16"),
    ("no-such-option", "1"),
]


@pytest.mark.parametrize(("name", "value"), CONFIG_SET_ERRORS)
def test_config_set_errors_match_redis(redis_raw: RespClient, sk: RespClient, name: str,
                                       value: str) -> None:
    theirs = err(redis_raw, "CONFIG", "SET", name, value)
    assert err(sk, "CONFIG", "SET", name, value) == theirs
    assert err(Engine(), "CONFIG", "SET", name, value) == theirs


@pytest.mark.parametrize("argv", [
    ("CONFIG", "SET", "maxclients", "10", "maxclients", "11"),
    ("CONFIG", "SET", "maxclients", "10", "stream-node-max-entries"),
    ("CONFIG", "SET", "maxclients"),
    ("CONFIG", "SET", "databases", "2", "nosuch", "1"),
    ("CONFIG", "SET", "maxclients", "10", "nosuch", "1", "databases", "2"),
    ("CONFIG",),
    ("CONFIG", "NOPE"),
    ("CONFIG", "GET"),
    ("CONFIG", "RESETSTAT", "x"),
    ("CONFIG", "REWRITE"),
])
def test_config_argument_errors_match_redis(redis_raw: RespClient, sk: RespClient,
                                            argv: tuple[str, ...]) -> None:
    assert err(sk, *argv) == err(redis_raw, *argv)


def test_config_get_matches_redis(redis_raw: RespClient, sk: RespClient) -> None:
    for argv in (("CONFIG", "GET", "stream-node-max-entries"),
                 ("CONFIG", "GET", "stream-node-max-bytes"),
                 ("CONFIG", "GET", "STREAM-node-max-entries"),
                 ("CONFIG", "GET", "nosuch"),
                 ("CONFIG", "GET", "maxclients", "timeout", "save", "databases")):
        ours, theirs = sk.execute(*argv), redis_raw.execute(*argv)
        assert pairs(ours) == pairs(theirs), argv
    assert sk.execute("CONFIG", "RESETSTAT") == redis_raw.execute("CONFIG", "RESETSTAT") == "OK"


def test_config_help(backend: Any) -> None:
    lines = backend(Engine()).execute("CONFIG", "HELP")
    assert lines[0].startswith("CONFIG <subcommand>")
    assert "GET <pattern>" in lines and "REWRITE" in lines and lines[-2] == "HELP"


def test_config_set_appendfsync_changes_the_journal(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as engine:
        journal = engine.journal
        assert journal is not None and journal.policy == "everysec"
        assert engine.execute("CONFIG", "SET", "appendfsync", "always") == "OK"
        assert journal.policy == "always" and journal.sync_on_commit
        engine.execute("XADD", "s", "*", "f", "v")
        assert journal.synced_lsn == journal.lsn  # the reply waited for the fsync
        assert engine.execute("CONFIG", "SET", "appendfsync", "no") == "OK"
        assert journal.policy == "no" and not journal.sync_on_commit
        assert engine.execute("CONFIG", "GET", "appendfsync") == [b"appendfsync", b"no"]


def test_config_set_rewrite_trigger_changes_the_compactor(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path)) as engine:
        assert engine.datadir is not None and engine.journal is not None
        compactor = engine.datadir.compactor
        assert engine.execute("CONFIG", "SET", "auto-aof-rewrite-min-size", "1mb",
                              "auto-aof-rewrite-percentage", "50") == "OK"
        assert compactor.min_size == 1 << 20 and compactor.percentage == 50
        assert engine.journal.rewrite_at == compactor.threshold()
        engine.execute("CONFIG", "SET", "auto-aof-rewrite-percentage", "0")
        assert engine.journal.rewrite_at == float("inf")  # automatic compaction off


def test_set_config_goes_through_the_registry() -> None:
    engine = Engine()
    engine.set_config("stream_node_max_entries", "12")
    assert engine.node_max_entries == 12 and engine.config["stream-node-max-entries"] == 12
    with pytest.raises(ConfigError, match="immutable"):
        engine.set_config("port", 1)
    with pytest.raises(ValueError, match="unknown config"):
        engine.set_config("nope", 1)


def test_config_set_requirepass_gates_new_connections(served: ServerHandle) -> None:
    first = connect(served)
    assert first.execute("CONFIG", "SET", "requirepass", "s3cret") == "OK"
    assert first.execute("PING") == "PONG"  # already connected: stays authenticated
    second = connect(served)
    with pytest.raises(RespError, match="^NOAUTH Authentication required.$"):
        second.execute("PING")
    with pytest.raises(RespError, match="^WRONGPASS"):
        second.execute("AUTH", "nope")
    assert second.execute("AUTH", "s3cret") == "OK"
    assert second.execute("PING") == "PONG"
    r = redis.Redis(host=served.host, port=served.port, protocol=3, password="s3cret")
    assert r.ping() is True
    r.close()
    assert second.execute("CONFIG", "SET", "requirepass", "") == "OK"
    third = connect(served)
    assert third.execute("PING") == "PONG"
    for c in (first, second, third):
        c.close()


def test_config_set_parser_limits_reach_connected_clients(served: ServerHandle) -> None:
    client = connect(served)
    client.execute("CONFIG", "SET", "proto-max-bulk-len", "2mb",
                   "client-query-buffer-limit", "3mb")
    parsers = [c.parser for c in list(served.server.clients.values())]
    assert parsers and all(p.proto_max_bulk_len == 2 << 20 for p in parsers)
    assert all(p.query_buffer_limit == 3 << 20 for p in parsers)
    client.close()


# --- the config file --------------------------------------------------------------------------


def test_read_config_file(tmp_path: Path) -> None:
    path = tmp_path / "streamkeep.conf"
    path.write_text(
        "# a comment\n"
        "\n"
        "   port 7001   \n"
        'requirepass "pa ss\\x41\\n"\n'
        "requirepass 'it\\'s'\n"
        "appendfsync ALWAYS\n"
        "stream-node-max-bytes 8kb\n"
        "client-output-buffer-limit normal 0 0 0\n"
        "client-output-buffer-limit pubsub 1mb 512kb 30\n"
        "bind 127.0.0.1 ::1\n"
        'save ""\n'
        "protected-mode no\n"
    )
    settings = read_config_file(path)
    assert settings == {
        "port": 7001,
        "requirepass": "it's",
        "appendfsync": "always",
        "stream-node-max-bytes": 8192,
        "client-output-buffer-limit": {"normal": (0, 0, 0),
                                       "replica": (256 << 20, 64 << 20, 60),
                                       "pubsub": (1 << 20, 512 << 10, 30)},
        "bind": "127.0.0.1 ::1",
        "save": "",
        "protected-mode": False,
    }
    assert parse_config_text('requirepass "pa ss\\x41\\n"\n')["requirepass"] == "pa ssA\n"
    del settings["port"], settings["bind"]
    engine = Engine(**settings)  # what `streamkeep serve` does with them
    assert engine.config["client-output-buffer-limit"]["pubsub"] == (1 << 20, 512 << 10, 30)


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("port 1\nfoo bar\n", 2, "Bad directive or wrong number of arguments"),
    ("include other.conf\n", 1, "Bad directive or wrong number of arguments"),
    ("maxclients abc\n", 1, "argument couldn't be parsed into an integer"),
    ("# x\nmaxclients 1 2\n", 2, "wrong number of arguments"),
    ('requirepass "a b\n', 1, "Unbalanced quotes in configuration line"),
    ("appendfsync sometimes\n", 1,
     "argument(s) must be one of the following: everysec, always, no"),
    ("protected-mode maybe\n", 1, "argument must be 'yes' or 'no'"),
    ("client-output-buffer-limit normal 1 2\n", 1,
     "Wrong number of arguments in buffer limit configuration."),
])
def test_config_file_errors_name_the_line(tmp_path: Path, text: str, line: int,
                                          reason: str) -> None:
    path = tmp_path / "bad.conf"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        read_config_file(path)
    message = str(info.value)
    assert "*** FATAL CONFIG FILE ERROR" in message
    assert f"Reading the configuration file, at line {line}\n" in message
    assert message.endswith("\n" + reason)


def test_redis_reports_the_same_config_file_errors(tmp_path: Path) -> None:
    """The reasons above are Redis's: the real redis-server refuses these files the same way."""
    import shutil
    import subprocess

    binary = shutil.which("redis-server")
    assert binary is not None
    for text, reason in (("maxclients abc\n", "argument couldn't be parsed into an integer"),
                         ("foo bar\n", "Bad directive or wrong number of arguments"),
                         ('requirepass "a b\n', "Unbalanced quotes in configuration line")):
        path = tmp_path / "r.conf"
        path.write_text(text)
        done = subprocess.run([binary, str(path)], capture_output=True, text=True, timeout=10)
        assert done.returncode != 0
        assert "Reading the configuration file, at line 1" in done.stderr
        assert reason in done.stderr
        with pytest.raises(ValueError, match="at line 1"):
            read_config_file(path)


def test_config_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "streamkeep.conf"
    path.write_text(
        "# keep this comment\n"
        "maxclients 50\n"
        "stream-node-max-entries 10\n"
        "stream-node-max-entries 20\n"
        "requirepass old\n"
    )
    engine = Engine(config_file=str(path), **read_config_file(path))
    assert engine.config["stream-node-max-entries"] == 20
    assert engine.execute("CONFIG", "SET", "maxclients", "60", "requirepass", "",
                          "stream-node-max-bytes", "8kb", "appendfsync", "no") == "OK"
    assert engine.execute("CONFIG", "REWRITE") == "OK"
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == "# keep this comment"
    assert lines[1] == "maxclients 60"  # rewritten in place
    assert lines[2] == "stream-node-max-entries 20"
    assert "requirepass" not in text  # set to nothing: its lines go
    assert "# Generated by CONFIG REWRITE" in lines
    assert "stream-node-max-bytes 8kb" in lines and "appendfsync no" in lines
    assert text.count("stream-node-max-entries") == 1
    reread = read_config_file(path)
    for name in ("maxclients", "stream-node-max-entries", "stream-node-max-bytes",
                 "appendfsync"):
        assert reread[name] == engine.config[name]
    # A second rewrite changes nothing.
    engine.execute("CONFIG", "REWRITE")
    assert path.read_text() == text


def test_config_rewrite_without_a_file(backend: Any) -> None:
    assert err(backend(Engine()), "CONFIG", "REWRITE") == (
        "ERR The server is running without a config file")


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
    assert list(info) == ["server", "clients", "memory", "persistence", "stats",
                          "replication", "cpu", "modules", "cluster", "keyspace"]
    assert info["server"]["redis_version"] == "8.4.0"
    assert info["server"]["streamkeep_version"]
    assert info["keyspace"] == {"db0": "keys=1,expires=0,avg_ttl=0,subexpiry=0",
                                "db3": "keys=2,expires=0,avg_ttl=0,subexpiry=0"}
    assert info["replication"]["role"] == "master"
    assert int(info["memory"]["used_memory"]) > 0
    assert info["persistence"]["loading"] == "0"
    assert list(parse_info(db.execute("INFO", "keyspace", "SERVER"))) == ["server", "keyspace"]
    assert list(parse_info(db.execute("INFO", "all"))) == list(info)
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
    assert info["redis_version"] == "8.4.0" and info["role"] == "master"
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
        assert b"\r\n=" in data and b"\r\ntxt:# Server\r\nredis_version:8.4.0\r\n" in data
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


# --- COMMAND ---------------------------------------------------------------------------------


def visible_names() -> list[bytes]:
    return [name for name, spec in COMMANDS.items() if not spec.internal]


def test_command_count_and_list(backend: Any) -> None:
    db = backend(Engine())
    assert db.execute("COMMAND", "COUNT") == len(visible_names())
    listed = db.execute("COMMAND", "LIST")
    assert b"xadd" in listed and b"xinfo|stream" in listed and b"config|set" in listed
    assert not any(name.startswith(b"sk.") for name in listed)
    internal = [name for name, spec in COMMANDS.items() if spec.internal]
    assert internal and not set(internal) & set(listed)
    assert db.execute("COMMAND", "LIST", "FILTERBY", "PATTERN", "xinfo*") == [
        b"xinfo", b"xinfo|stream", b"xinfo|groups", b"xinfo|consumers", b"xinfo|help"]
    stream_cmds = db.execute("COMMAND", "LIST", "FILTERBY", "ACLCAT", "stream")
    assert b"xadd" in stream_cmds and b"ping" not in stream_cmds
    assert db.execute("COMMAND", "LIST", "FILTERBY", "MODULE", "x") == []
    assert err(db, "COMMAND", "LIST", "FILTERBY", "bogus", "x") == "ERR syntax error"
    assert err(db, "COMMAND", "LIST", "nope") == "ERR syntax error"
    everything = db.execute("COMMAND")
    assert len(everything) == len(visible_names())
    assert sorted(entry[0] for entry in everything) == sorted(visible_names())


def test_command_info_and_docs(backend: Any) -> None:
    db = backend(Engine())
    xadd, missing, xinfo = db.execute("COMMAND", "INFO", "xadd", "nosuch", "XINFO")
    assert xadd[:6] == [b"xadd", -5, ["write", "denyoom", "fast"], 1, 1, 1]
    assert xadd[6] == ["@write", "@stream", "@fast"]
    assert len(xadd) == 10 and xadd[9] == []
    assert missing is None
    assert xinfo[:6] == [b"xinfo", -2, [], 0, 0, 0]
    assert [sub[0] for sub in xinfo[9]] == [b"xinfo|stream", b"xinfo|groups",
                                             b"xinfo|consumers", b"xinfo|help"]
    assert db.execute("COMMAND", "INFO", "xinfo|groups")[0][:6] == [
        b"xinfo|groups", 3, ["readonly"], 2, 2, 1]
    xread = db.execute("COMMAND", "INFO", "xread")[0]
    assert xread[2] == ["readonly", "blocking", "movablekeys"] and xread[3:6] == [0, 0, 0]
    internal = next(name for name, spec in COMMANDS.items() if spec.internal)
    assert db.execute("COMMAND", "INFO", internal) == [None]
    docs = db.execute("COMMAND", "DOCS", "xadd", "nosuch", "xinfo")
    assert docs[0] == b"xadd" and docs[2] == b"xinfo"
    fields = dict(zip(docs[1][0::2], docs[1][1::2], strict=True))
    assert fields[b"group"] == b"stream" and fields[b"since"] == b"5.0.0"
    assert fields[b"summary"]
    xinfo_docs = dict(zip(docs[3][0::2], docs[3][1::2], strict=True))
    assert xinfo_docs[b"subcommands"][0] == b"xinfo|stream"


def test_command_getkeys(backend: Any) -> None:
    db = backend(Engine())
    assert db.execute("COMMAND", "GETKEYS", "XADD", "s", "*", "f", "v") == [b"s"]
    assert db.execute("COMMAND", "GETKEYS", "DEL", "a", "b", "c") == [b"a", b"b", b"c"]
    assert db.execute("COMMAND", "GETKEYS", "XREAD", "COUNT", "2", "STREAMS", "a", "b", "0",
                      "0") == [b"a", b"b"]
    assert db.execute("COMMAND", "GETKEYS", "XINFO", "STREAM", "s") == [b"s"]
    assert err(db, "COMMAND", "GETKEYS", "NOPE", "x") == "ERR Invalid command specified"
    assert err(db, "COMMAND", "GETKEYS", "PING", "x") == "ERR The command has no key arguments"
    assert err(db, "COMMAND", "GETKEYS", "XLEN", "a", "b") == (
        "ERR Invalid number of arguments specified for command")
    assert err(db, "COMMAND", "GETKEYS", "XLEN") == (
        "ERR wrong number of arguments for 'command|getkeys' command")


def test_command_matches_redis(redis_raw: RespClient, sk: RespClient) -> None:
    assert type(sk.execute("COMMAND", "COUNT")) is type(redis_raw.execute("COMMAND", "COUNT"))
    ours = sk.execute("COMMAND", "INFO", "xadd", "nosuch", "xlen", "xinfo")
    theirs = redis_raw.execute("COMMAND", "INFO", "xadd", "nosuch", "xlen", "xinfo")
    for a, b in zip(ours, theirs, strict=True):
        if b is None:
            assert a is None
            continue
        assert a[:7] == b[:7]  # name, arity, flags, first, last, step, ACL categories
    assert [s[:6] for s in ours[3][9]] == [s[:6] for s in sorted(
        theirs[3][9], key=lambda s: [b"xinfo|stream", b"xinfo|groups", b"xinfo|consumers",
                                     b"xinfo|help"].index(s[0]))]
    for argv in (("COMMAND", "GETKEYS", "XADD", "s", "*", "f", "v"),
                 ("COMMAND", "GETKEYS", "XREAD", "STREAMS", "a", "b", "0", "0"),
                 ("COMMAND", "LIST", "FILTERBY", "PATTERN", "xgroup|c*")):
        assert sorted(sk.execute(*argv)) == sorted(redis_raw.execute(*argv)), argv
    for argv in (("COMMAND", "GETKEYS", "NOPE"), ("COMMAND", "GETKEYS", "NOPE", "x"),
                 ("COMMAND", "GETKEYS", "PING", "x"), ("COMMAND", "GETKEYS", "XLEN", "a", "b"),
                 ("COMMAND", "GETKEYS", "XREAD", "COUNT", "1"), ("COMMAND", "NOPE"),
                 ("COMMAND", "COUNT", "x"), ("COMMAND", "LIST", "FILTERBY", "x", "y")):
        assert err(sk, *argv) == err(redis_raw, *argv), argv


def test_command_through_redis_py(served: ServerHandle) -> None:
    r = redis.Redis(host=served.host, port=served.port, protocol=3)
    commands = r.command()
    assert commands["xadd"]["arity"] == -5 and commands["xadd"]["flags"] == {
        "write", "denyoom", "fast"}
    assert r.command_count() == len(visible_names())
    assert r.command_getkeys("XREAD", "STREAMS", "a", "0") == [b"a"]
    r.close()


def test_command_reply_types() -> None:
    engine = Engine()
    entry = engine.execute_raw(engine.session, (b"COMMAND", b"INFO", b"xadd"))[0]
    assert type(entry[2]) is RespSet and entry[2].items == ["write", "denyoom", "fast"]
    assert type(entry[6]) is RespSet and type(entry[7]) is RespSet
    assert type(entry[8]) is RespSet and type(entry[8].items[0]) is RespMap
    docs = engine.execute_raw(engine.session, (b"COMMAND", b"DOCS", b"xadd"))
    assert type(docs) is RespMap
    fields = dict(docs.items[0][1].items)
    assert all(type(fields[k]) is bytes for k in (b"summary", b"since", b"group"))  # bulk strings
    first = fields[b"arguments"][0]  # redis-cli asserts these types: bulk, and flags as status
    assert type(first) is RespMap and dict(first.items)[b"name"] == b"key"
    optional = dict(fields[b"arguments"][1].items)[b"flags"]
    assert type(optional) is RespSet and optional.items == ["optional"]


# --- CLIENT ----------------------------------------------------------------------------------


def test_client_on_an_embedded_engine() -> None:
    engine = Engine()
    assert engine.execute("CLIENT", "ID") == 0
    assert engine.execute("CLIENT", "LIST") == b""
    assert engine.execute("CLIENT", "INFO") == b""
    assert engine.execute("CLIENT", "GETNAME") is None
    assert engine.execute("CLIENT", "SETNAME", "worker") == "OK"
    assert engine.execute("CLIENT", "GETNAME") == b"worker"
    assert engine.execute("CLIENT", "SETINFO", "lib-name", "mine") == "OK"
    assert err(engine, "CLIENT", "KILL", "127.0.0.1:1") == "ERR No such client"
    assert engine.execute("CLIENT", "KILL", "ID", "1") == 0
    assert engine.execute("CLIENT", "NO-EVICT", "on") == "OK"


@pytest.mark.parametrize("argv", [
    ("CLIENT", "SETNAME", "a b"),
    ("CLIENT", "SETNAME", "a\nb"),
    ("CLIENT", "KILL", "1.2.3.4:5"),
    ("CLIENT", "KILL", "ID", "abc"),
    ("CLIENT", "KILL", "ID", "0"),
    ("CLIENT", "KILL", "TYPE", "bogus"),
    ("CLIENT", "KILL", "foo", "bar"),
    ("CLIENT", "KILL", "SKIPME", "maybe"),
    ("CLIENT", "KILL", "ID", "1", "SKIPME"),
    ("CLIENT", "KILL"),
    ("CLIENT", "LIST", "TYPE", "bogus"),
    ("CLIENT", "LIST", "ID", "abc"),
    ("CLIENT", "LIST", "ID", "1", "x"),
    ("CLIENT", "LIST", "bogus"),
    ("CLIENT", "NO-EVICT", "maybe"),
    ("CLIENT", "GETNAME", "x"),
    ("CLIENT", "BOGUS"),
    ("CLIENT",),
])
def test_client_errors_match_redis(redis_raw: RespClient, sk: RespClient,
                                   argv: tuple[str, ...]) -> None:
    assert err(sk, *argv) == err(redis_raw, *argv)


def test_client_names_match_redis(redis_raw: RespClient, sk: RespClient) -> None:
    for client in (redis_raw, sk):
        assert client.execute("CLIENT", "GETNAME") is None
        assert client.execute("CLIENT", "SETNAME", "worker-1") == "OK"
        assert client.execute("CLIENT", "GETNAME") == b"worker-1"
        assert client.execute("CLIENT", "SETNAME", "") == "OK"
        assert client.execute("CLIENT", "GETNAME") is None
        assert isinstance(client.execute("CLIENT", "ID"), int)
        assert client.execute("CLIENT", "KILL", "ID", "999999") == 0
        assert client.execute("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes") == 0
        assert client.execute("CLIENT", "NO-EVICT", "off") == "OK"


def test_client_setinfo(sk: RespClient) -> None:
    assert sk.execute("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == "OK"
    assert sk.execute("CLIENT", "SETINFO", "lib-ver", "5.0") == "OK"
    assert b" lib-name=redis-py lib-ver=5.0\n" in sk.execute("CLIENT", "INFO")
    with pytest.raises(RespError, match="^ERR Unrecognized option 'foo'$"):
        sk.execute("CLIENT", "SETINFO", "foo", "bar")
    with pytest.raises(RespError, match="^ERR lib-name cannot contain spaces, newlines or "
                                        "special characters.$"):
        sk.execute("CLIENT", "SETINFO", "lib-name", "a b")
    assert sk.execute("CLIENT", "NO-TOUCH", "on") == "OK"


def test_client_list_and_info(served: ServerHandle) -> None:
    a, b = connect(served), connect(served)
    a.execute("CLIENT", "SETNAME", "alpha")
    a_id, b_id = a.execute("CLIENT", "ID"), b.execute("CLIENT", "ID")
    assert b_id > a_id > 0
    listing = b.execute("CLIENT", "LIST").decode()
    lines = listing.splitlines()
    assert listing.endswith("\n") and len(lines) == 2
    assert lines[0].startswith(f"id={a_id} addr=127.0.0.1:") and " name=alpha " in lines[0]
    me = b.execute("CLIENT", "INFO").decode()
    assert me.startswith(f"id={b_id} ") and me.endswith("\n")
    only_a = b.execute("CLIENT", "LIST", "ID", str(a_id), "999").decode().splitlines()
    assert len(only_a) == 1 and only_a[0].startswith(f"id={a_id} ")
    assert b.execute("CLIENT", "LIST", "TYPE", "pubsub") == b""
    assert len(b.execute("CLIENT", "LIST", "TYPE", "normal").decode().splitlines()) == 2
    r3 = redis.Redis(host=served.host, port=served.port, protocol=3)
    names = {c["name"] for c in r3.client_list()}
    assert "alpha" in names
    assert r3.client_info()["lib-name"] == "redis-py"  # redis-py's CLIENT SETINFO on connect
    r3.close()
    a.close()
    b.close()


def test_client_kill_other_connections(served: ServerHandle) -> None:
    killer, victim, bystander = connect(served), connect(served), connect(served)
    victim_id = victim.execute("CLIENT", "ID")
    victim_addr = next(line.split()[1][5:] for line in
                       killer.execute("CLIENT", "LIST").decode().splitlines()
                       if line.startswith(f"id={victim_id} "))
    assert killer.execute("CLIENT", "KILL", victim_addr) == "OK"
    assert closed_by_server(victim)
    assert err(killer, "CLIENT", "KILL", victim_addr) == "ERR No such client"
    bystander_id = bystander.execute("CLIENT", "ID")
    assert killer.execute("CLIENT", "KILL", "ID", str(bystander_id)) == 1
    assert closed_by_server(bystander)
    assert killer.execute("PING") == "PONG"  # SKIPME yes by default
    deadline = time.monotonic() + 5
    while len(served.server.clients) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(served.server.clients) == [killer.execute("CLIENT", "ID")]
    killer.close()


def test_client_kill_self_replies_first(served: ServerHandle) -> None:
    me, other = connect(served), connect(served)
    my_addr = me.execute("CLIENT", "INFO").decode().split()[1][5:]
    assert me.execute("CLIENT", "KILL", my_addr) == "OK"  # the reply arrives, then EOF
    assert closed_by_server(me)
    assert other.execute("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no") == 1
    assert closed_by_server(other)
    again = connect(served)
    assert again.execute("PING") == "PONG"
    assert again.execute("CLIENT", "KILL", "USER", "default") == 0  # only itself, skipped
    assert err(again, "CLIENT", "KILL", "USER", "bob") == "ERR No such user 'bob'"
    again.close()


def test_client_kill_maxage(served: ServerHandle) -> None:
    old, young = connect(served), connect(served)
    old.execute("PING")
    for client in served.server.clients.values():
        if client.id == 1:
            client.created -= 100  # connected 100 s ago
    assert young.execute("CLIENT", "KILL", "MAXAGE", "50") == 1
    assert closed_by_server(old)
    assert young.execute("PING") == "PONG"
    young.close()


def test_client_kill_a_blocked_client(served: ServerHandle) -> None:
    blocked, killer = connect(served), connect(served)
    blocked_id = blocked.execute("CLIENT", "ID")
    blocked.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    deadline = time.monotonic() + 5
    while "blocked_clients:1" not in killer.execute("INFO", "clients").decode():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert killer.execute("CLIENT", "KILL", "ID", str(blocked_id)) == 1
    assert closed_by_server(blocked)
    assert "blocked_clients:0" in killer.execute("INFO", "clients").decode()
    killer.close()
