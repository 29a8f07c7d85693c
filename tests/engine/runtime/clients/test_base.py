"""engine/runtime/clients/base.py: what every mixin shares.

Checked here: `check_encodable` refuses what redis-py's Encoder refuses, with its message;
`execute_command` splits a command name as redis-py's connection does and applies the callbacks
by name (the table holds only names redis-py registers callbacks for), with its NEVER_DECODE
and EMPTY_RESPONSE options; `sends` records the commands on the method and returns the method
itself (nothing added to a call), and refuses a name not spelt as the command table spells it.
(The callbacks' results against redis-py's own are in tests/engine/runtime/test_redis_api.py.)
"""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.clients.base import (
    ClientBase,
    DataError,
    check_encodable,
    commands_sent,
    execute_command_callbacks,
    sends,
)


class Recorder:
    """An engine that records each argv and replies with what it is given."""

    def __init__(self, reply: Any = None) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.reply = reply

    def execute(self, *args: Any) -> Any:
        self.sent.append(args)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, object(), 1, 1.5, "é", b"x",
                                   bytearray(b"y"), memoryview(b"z")],
                         ids=lambda v: type(v).__name__)
def test_check_encodable_refuses_what_redis_pys_encoder_refuses(value: Any) -> None:
    from redis.connection import Encoder

    try:
        Encoder("utf-8", "strict", False).encode(value)
    except Exception as err:  # (redis-py's DataError)
        with pytest.raises(DataError) as ours:
            check_encodable(("ok", value))
        assert str(ours.value) == str(err)
    else:
        check_encodable(("ok", value))


def test_a_refused_argument_is_a_data_error_once_the_engine_refuses_it() -> None:
    """_run checks the arguments only when the engine raised TypeError: no cost otherwise."""
    with Engine() as engine:
        client = ClientBase(engine)
        with pytest.raises(DataError, match="Invalid input of type: 'NoneType'"):
            client.execute_command("SET", "k", None)
        assert client.execute_command("GET", "k") is None


def test_execute_command_splits_the_name_as_redis_pys_connection() -> None:
    engine = Recorder(b"OK")
    client = ClientBase(engine)
    assert client.execute_command("XGROUP CREATE", "s", "g", "$") is True  # (its callback)
    assert client.execute_command(b"CONFIG SET", "hz", 10) == b"OK"  # (bytes: no callback)
    assert client.execute_command(b"SET", "k", "v") == b"OK"
    assert engine.sent == [(b"XGROUP", b"CREATE", "s", "g", "$"), (b"CONFIG", b"SET", "hz", 10),
                           (b"SET", "k", "v")]


def test_execute_command_options() -> None:
    client = ClientBase(Recorder(b"v"), decode_responses=True)
    assert client.execute_command("GET", "k") == "v"
    assert client.execute_command("GET", "k", NEVER_DECODE=[]) == b"v"
    assert client.execute_command("GET", "k", keys=["k"]) == "v"  # (a routing hint: dropped)
    failing = ClientBase(Recorder(ReplyError("ERR no")))
    assert failing.execute_command("MGET", EMPTY_RESPONSE=[]) == []
    with pytest.raises(ReplyError, match="no"):
        failing.execute_command("MGET", "k")


def test_the_callbacks_are_redis_pys_names() -> None:
    from redis._parsers import helpers

    registered = {**helpers._RedisCallbacks, **helpers._RedisCallbacksRESP2}
    assert set(execute_command_callbacks) <= set(registered)


def test_sends_returns_the_method_itself() -> None:
    def method(self: Any) -> int:
        return 1

    assert sends("get", "xgroup|create")(method) is method
    assert commands_sent(method) == ("get", "xgroup|create")
    assert commands_sent(test_sends_returns_the_method_itself) == ()


@pytest.mark.parametrize("name", ["HSET", "xgroup create"])
def test_sends_refuses_a_name_not_spelt_as_the_tables(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        sends(name)
