"""CONFIG GET / SET / RESETSTAT / HELP (engine.commands.config) over the settings registry
(engine.exec.settings, tested in tests/engine/exec/test_config.py with the config file).

Most tests run twice through the `backend` fixture: on the embedded engine and through an
in-process streamkeep server (RESP2, the same plain values). Reply shapes and error lines are
compared with the real redis-server where Redis has the behaviour; the RESP3 shapes are checked
with redis-py (`protocol=3`) against the in-process server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep import Engine
from streamkeep.engine.exec.settings import PARAMS, ConfigError
from tests.support.diffutil import err, outcome
from tests.support.resp_client import RespClient, RespError
from tests.support.server_util import ServerHandle, connect


def pairs(flat: list[Any]) -> list[tuple[Any, Any]]:
    """A RESP2 map reply (k1 v1 k2 v2 ...) as sorted pairs: Redis's order is its dict's."""
    return sorted(zip(flat[0::2], flat[1::2], strict=True))


# --- CONFIG GET / SET ---------------------------------------------------------------------------


def test_config_get_patterns(backend: Any) -> None:
    db = backend(Engine())
    assert db.execute("CONFIG", "GET", "stream-node-max-entries") == [
        b"stream-node-max-entries", b"100"]
    reply = db.execute("CONFIG", "GET", "stream*", "maxclients", "STREAM-NODE-MAX-ENTRIES")
    assert reply == [b"stream-node-max-entries", b"100", b"stream-node-max-bytes", b"4096",
                     b"stream-idmp-duration", b"100", b"stream-idmp-maxsize", b"100",
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
    ("replica-priority", "-1"),
    ("slave-priority", "x"),
    ("SLAVE-Priority", "x"),
    ("lua-time-limit", "x"),
    ("replica-announce-port", "65536"),
    ("replica-announced", "maybe"),
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


SAVE_VALUES = ["", "3600 1 300 100 60 10000", "1 0", "3600 ", "+5 +3", "\t5 3", "007 08",
               "1 99999999999", "1 4294967295", "99999999999999999999 1", "1 -0",
               # refused: an odd count, an empty or blank word where a number must be, a
               # number out of range, anything strtoll leaves unread
               "3600", "3600 1 ", "3600  1", " 1 1", " ", "0 1", "-0 1", "1 -1", "-1 1", "abc",
               "5 3\t", "0x10 1", "1e3 1"]


@pytest.mark.parametrize("value", SAVE_VALUES)
def test_config_set_save_matches_redis(redis_raw: RespClient, sk: RespClient,
                                       value: str) -> None:
    """Tools and test harnesses set `save` on start (`CONFIG SET save ""`): accepted with
    Redis's syntax, its save points checked, kept and shown as Redis does (no snapshot is
    taken at one: tests/engine/exec/test_settings.py)."""
    engine = Engine()
    try:
        for target in (redis_raw, sk, engine):
            target.execute("CONFIG", "SET", "save", "10 1")
        theirs = outcome(redis_raw, "CONFIG", "SET", "save", value)
        assert outcome(sk, "CONFIG", "SET", "save", value) == theirs
        assert outcome(engine, "CONFIG", "SET", "save", value) == theirs
        shown = redis_raw.execute("CONFIG", "GET", "save")
        assert sk.execute("CONFIG", "GET", "save") == shown
        assert engine.execute("CONFIG", "GET", "save") == shown
    finally:
        redis_raw.execute("CONFIG", "SET", "save", "")  # as the session's server started


def test_config_get_matches_redis(redis_raw: RespClient, sk: RespClient) -> None:
    for argv in (("CONFIG", "GET", "stream-node-max-entries"),
                 ("CONFIG", "GET", "stream-node-max-bytes"),
                 ("CONFIG", "GET", "STREAM-node-max-entries"),
                 ("CONFIG", "GET", "nosuch"),
                 ("CONFIG", "GET", "maxclients", "timeout", "save", "databases"),
                 # what a Sentinel deployment's replicas set (their old names too)
                 ("CONFIG", "GET", "replica-priority", "replica-announced",
                  "replica-announce-ip", "replica-announce-port", "replica-read-only"),
                 ("CONFIG", "GET", "slave-priority", "slave-announce-port",
                  "slave-read-only")):
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
