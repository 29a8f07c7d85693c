"""The replaying executor (engine.runtime.async_steps): replies already had are given back in
order (an error raised again), the next command runs through the backend, a Wait suspends the
run, an error reply is converted once; the in-process steps answer a command that needs no
wait themselves and hand the others (a blocked read, a write to fsync under `always`) to the
backend's `finish`. Run against both builds by make test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.runtime.async_steps import (
    EngineSteps,
    Raised,
    Steps,
    Suspend,
    Wait,
)
from streamkeep.engine.runtime.core import Session
from streamkeep.engine.wire.errors import ReplyError


class Converted(ReplyError):
    pass


def test_replies_are_given_back_in_order_then_the_next_command_runs() -> None:
    sent: list[tuple[Any, ...]] = []
    steps = Steps(lambda args: sent.append(args) or b"new")
    error = ReplyError("ERR old")
    steps.reset([b"first", Raised(error)])
    assert steps.execute("A") == b"first"
    with pytest.raises(ReplyError) as caught:
        steps.execute("B")
    assert caught.value is error
    assert steps.execute("C", 1) == b"new"
    assert sent == [("C", 1)]  # only the command past the replies ran
    assert steps.replies[-1] == b"new" and steps.at == 3


def test_a_wait_suspends_the_run_and_an_error_is_converted_and_recorded() -> None:
    wait = Wait(None)
    steps = Steps(lambda _args: wait, lambda err: Converted(err.line))
    steps.reset([])
    with pytest.raises(Suspend):
        steps.execute("BLPOP", "k", 0)
    assert steps.wait is wait and steps.replies == []

    def refuse(_args: tuple[Any, ...]) -> Any:
        raise ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value")

    steps = Steps(refuse, lambda err: Converted(err.line))
    steps.reset([])
    with pytest.raises(Converted):
        steps.execute("LPUSH", "s", "x")
    assert type(steps.replies[0]) is Raised and type(steps.replies[0].error) is Converted


def test_in_process_steps_answer_at_once_and_hand_waits_to_finish(tmp_path: Path) -> None:
    finished: list[tuple[Any, int]] = []

    def finish(reply: Any, lsn: int) -> Any:
        finished.append((reply, lsn))
        return Wait(None)

    with Engine.open() as engine:
        steps = EngineSteps(engine, Session(), lambda _w: None, finish)
        steps.reset([])
        assert steps.execute("SET", "k", "v") == "OK"
        assert steps.execute("LPUSH", "l", "a", "b") == 2
        assert steps.execute("LRANGE", "l", 0, -1) == [b"b", b"a"]  # plain: a list
        assert finished == []
        with pytest.raises(Suspend):
            steps.execute("BLPOP", "empty", 0)
        assert type(finished[0][0]) is Waiter
        engine.waiting.cancel(finished[0][0], None)
    with Engine.open(str(tmp_path / "d"), appendfsync="always") as engine:
        steps = EngineSteps(engine, Session(), lambda _w: None, finish)
        steps.reset([])
        with pytest.raises(Suspend):  # its record is to be fsynced first
            steps.execute("XADD", "s", "*", "f", "v")
        reply, lsn = finished[-1]
        assert isinstance(reply, bytes) and lsn > 0
