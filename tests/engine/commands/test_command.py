"""COMMAND (engine.commands.command): COUNT, LIST, INFO, DOCS and GETKEYS from the command table.

Most tests run twice through the `backend` fixture: on the embedded engine and through an
in-process streamkeep server (RESP2, the same plain values). Reply shapes and error lines are
compared with the real redis-server where Redis has the behaviour; the RESP3 shapes are checked
with redis-py (`protocol=3`) against the in-process server.
"""

from __future__ import annotations

from typing import Any

import redis

from streamkeep import Engine
from streamkeep.engine.exec.table import COMMANDS
from streamkeep.engine.wire.reply import RespMap, RespSet
from tests.support.diffutil import err
from tests.support.resp_client import RespClient
from tests.support.server_util import ServerHandle

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
