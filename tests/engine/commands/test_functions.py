"""FCALL and FUNCTION's handlers (engine.commands.functions): their replies in both protocols,
their argument checks, the effects each emits (LOAD as `FUNCTION LOAD REPLACE`, none for a
refusal, none for a read), and how they behave inside MULTI and from a script. Redis's lines
themselves are compared with a redis-server in tests/differential/test_functions.py."""

from __future__ import annotations

import contextlib

import pytest

from streamkeep import Engine, Record, ReplyError
from streamkeep.engine.wire.reply import RespMap, RespSet
from streamkeep.engine.wire.reply_encoder import encode_reply

pytest.importorskip("lupa")

LIB = """#!lua name=mylib
redis.register_function{function_name='get', callback=function(keys)
  return redis.call('GET', keys[1]) end, flags={'no-writes', 'allow-stale'},
  description='reads'}
redis.register_function('set', function(keys, args) return redis.call('SET', keys[1], args[1]) end)
"""


def effects_of(engine: Engine, *argv: str | bytes) -> list[list[bytes]]:
    records: list[Record] = []
    engine.add_sink(records.append)
    with contextlib.suppress(ReplyError):
        engine.execute(*argv)
    return [[bytes(a) for a in e] for r in records for e in r.effects]


def test_each_change_emits_its_effect_and_a_refusal_none() -> None:
    engine = Engine()
    code = LIB.encode()
    assert effects_of(engine, "FUNCTION", "LOAD", LIB) == [
        [b"FUNCTION", b"LOAD", b"REPLACE", code]]
    assert effects_of(engine, "FUNCTION", "LOAD", LIB) == []  # exists: refused
    assert effects_of(engine, "FUNCTION", "DELETE", "nope") == []
    payload = engine.execute("FUNCTION", "DUMP")
    assert effects_of(engine, "FUNCTION", "RESTORE", payload, "replace") == [
        [b"FUNCTION", b"RESTORE", payload, b"REPLACE"]]
    assert effects_of(engine, "FUNCTION", "RESTORE", payload) == []  # APPEND: exists
    assert effects_of(engine, "FCALL_RO", "get", "1", "k") == []
    assert effects_of(engine, "FCALL", "set", "1", "k", "v") == [[b"SET", b"k", b"v"]]
    assert effects_of(engine, "FUNCTION", "DELETE", "mylib") == [
        [b"FUNCTION", b"DELETE", b"mylib"]]
    assert effects_of(engine, "FUNCTION", "FLUSH", "ASYNC") == [[b"FUNCTION", b"FLUSH"]]
    assert effects_of(engine, "FUNCTION", "RESTORE", payload) == [
        [b"FUNCTION", b"RESTORE", payload, b"APPEND"]]


def test_list_and_stats_replies_in_both_protocols() -> None:
    engine = Engine()
    engine.execute("FUNCTION", "LOAD", LIB)
    listing = engine.execute("FUNCTION", "LIST", "LIBRARYNAME", "MY*")
    assert listing[0][:4] == [b"library_name", b"mylib", b"engine", b"LUA"]
    functions = listing[0][5]
    assert functions[0] == [b"name", b"get", b"description", b"reads", b"flags",
                            ["no-writes", "allow-stale"]]
    assert functions[1] == [b"name", b"set", b"description", None, b"flags", []]
    assert engine.execute("FUNCTION", "LIST", "LIBRARYNAME", "other") == []
    stats = RespMap([(b"running_script", None), (b"engines", RespMap([(b"LUA", RespMap(
        [(b"libraries_count", 1), (b"functions_count", 2)]))]))])
    assert encode_reply(stats, 3) == (b"%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n"
                                      b"%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:1\r\n"
                                      b"$15\r\nfunctions_count\r\n:2\r\n")
    assert engine.execute("FUNCTION", "STATS") == [
        b"running_script", None, b"engines",
        [b"LUA", [b"libraries_count", 1, b"functions_count", 2]]]
    assert encode_reply(RespSet(["no-writes"]), 3) == b"~1\r\n+no-writes\r\n"


def test_fcall_inside_multi_and_refused_inside_a_script() -> None:
    engine = Engine()
    engine.execute("FUNCTION", "LOAD", LIB)
    assert engine.execute("MULTI") == "OK"
    assert engine.execute("FCALL", "set", "1", "k", "v") == "QUEUED"
    assert engine.execute("FCALL_RO", "get", "1", "k") == "QUEUED"
    assert engine.execute("EXEC") == ["OK", b"v"]
    with pytest.raises(ReplyError, match="This Redis command is not allowed from script"):
        engine.execute("EVAL", "return redis.call('FCALL', 'get', 1, 'k')", "0")
    with pytest.raises(ReplyError, match="This Redis command is not allowed from script"):
        engine.execute("EVAL", "return redis.call('FUNCTION', 'FLUSH')", "0")


def test_arguments() -> None:
    engine = Engine()
    engine.execute("FUNCTION", "LOAD", LIB)
    for argv, line in [
        (("FUNCTION", "LOAD", "REPLACE", "X", LIB), "ERR Unknown option given: X"),
        (("FUNCTION", "LIST", "WITHCODE", "x"), "ERR Unknown argument x"),
        (("FUNCTION", "RESTORE", "p", "FLUSH", "x"),
         "ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION "
         "HELP."),
        (("FCALL", "nope", "0"), "ERR Function not found"),
        (("FCALL", "get", "1.5"), "ERR Bad number of keys provided"),
        (("FUNCTION", "KILL"), "NOTBUSY No scripts in execution right now."),
    ]:
        with pytest.raises(ReplyError) as err:
            engine.execute(*argv)
        assert err.value.line == line, argv
