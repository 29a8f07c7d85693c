"""Replication commands (engine.commands.replication): the replies of an in-memory engine (a
primary with no replicas and no AOF), Redis's error lines and their order, and what the
handlers hand to the `Replication` interface when one is attached (a stand-in here). None of
these commands log anything."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from streamkeep import Session
from streamkeep.engine.commands import replication
from streamkeep.engine.wire.errors import ReplyError
from tests.support.effects_util import Recorded

NOT_INTEGER = "ERR value is not an integer or out of range"


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


class StandInReplication:
    """Records what the handlers ask of replication.service (engine.exec.interfaces)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def replicaof(self, host: str | None, port: int) -> str:
        self.calls.append(("replicaof", host, port))
        return "OK"

    def role(self) -> list[Any]:
        return [b"slave", b"127.0.0.1", 6380, b"connected", 7]

    def replconf(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        self.calls.append(("replconf", argv))
        return "OK"

    def psync(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        self.calls.append(("psync", argv))
        return "FULLRESYNC"

    def wait(self, session: Any, numreplicas: int, timeout_ms: int, block: bool = True) -> Any:
        self.calls.append(("wait", numreplicas, timeout_ms))
        return 2

    def waitaof(self, session: Any, numlocal: int, numreplicas: int, timeout_ms: int,
                block: bool = True) -> Any:
        self.calls.append(("waitaof", numlocal, numreplicas, timeout_ms))
        return [1, 2]


def ctx_with(repl: StandInReplication | None, read_only: str | None = None) -> Any:
    return SimpleNamespace(engine=SimpleNamespace(replication=repl, read_only=read_only,
                                                   cluster=None),
                           session=Session(), now=1_000, in_multi=False)


def test_an_in_memory_engine_is_a_primary_alone(rec: Recorded) -> None:
    assert rec.effects("ROLE") == ([b"master", 0, []], [])
    assert rec.effects("WAIT", "0", "0") == (0, [])
    assert rec("WAIT", "3", "100") == 0  # no replica to wait for: at once
    assert rec.effects("WAITAOF", "0", "0", "0") == ([0, 0], [])
    assert rec.records == []


def test_replicaof_no_one_is_accepted_without_replication(rec: Recorded) -> None:
    assert rec.effects("REPLICAOF", "NO", "ONE") == ("OK", [])
    assert rec("slaveof", "no", "one") == "OK"


@pytest.mark.parametrize("argv", [
    ("REPLICAOF", "localhost", "6379"), ("SLAVEOF", "localhost", "0"),
    ("REPLCONF", "listening-port", "1"), ("REPLCONF",), ("PSYNC", "?", "-1"), ("SYNC",),
])
def test_the_link_commands_need_a_data_directory(rec: Recorded, argv: tuple[str, ...]) -> None:
    assert rec.err(*argv) == replication.NEEDS_DATADIR


@pytest.mark.parametrize(("argv", "line"), [
    (("REPLICAOF", "localhost", "port"), NOT_INTEGER),  # the port parses before anything else
    (("WAIT", "x", "0"), NOT_INTEGER),
    (("WAIT", "0", "x"), "ERR timeout is not an integer or out of range"),
    (("WAIT", "0", "-1"), "ERR timeout is negative"),
    (("WAITAOF", "-1", "0", "0"), "ERR value is out of range, must be positive"),
    (("WAITAOF", "0", "-1", "0"), "ERR value is out of range, must be positive"),
    (("WAITAOF", "0", "0", "-1"), "ERR timeout is negative"),
    (("WAITAOF", "1", "0", "0"), replication.WAITAOF_NO_AOF),
    (("ROLE", "x"), "ERR wrong number of arguments for 'role' command"),
    (("WAIT", "0"), "ERR wrong number of arguments for 'wait' command"),
    (("REPLICAOF", "NO"), "ERR wrong number of arguments for 'replicaof' command"),
])
def test_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    assert rec.err(*argv) == line


def test_psync_and_sync_are_refused_inside_multi(rec: Recorded) -> None:
    rec("MULTI")
    assert rec.err("PSYNC", "?", "-1") == "ERR Command not allowed inside a transaction"
    assert rec.err("SYNC") == "ERR Command not allowed inside a transaction"
    assert rec.err("EXEC") == "EXECABORT Transaction discarded because of previous errors."


def test_replicaof_hands_host_and_port_over() -> None:
    repl = StandInReplication()
    ctx = ctx_with(repl)
    assert replication.replicaof(ctx, (b"REPLICAOF", b"primary.local", b"6380")) == "OK"
    assert replication.slaveof(ctx, (b"SLAVEOF", b"No", b"One")) == "OK"
    assert repl.calls == [("replicaof", "primary.local", 6380), ("replicaof", None, 0)]
    for port in (b"0", b"65536", b"-1"):
        with pytest.raises(ReplyError, match="^ERR Invalid master port$"):
            replication.replicaof(ctx, (b"REPLICAOF", b"h", port))
    assert len(repl.calls) == 2


def test_role_replconf_psync_go_to_replication() -> None:
    repl = StandInReplication()
    ctx = ctx_with(repl)
    assert replication.role(ctx, (b"ROLE",)) == repl.role()
    argv = (b"REPLCONF", b"listening-port", b"6380")
    assert replication.replconf(ctx, argv) == "OK"
    with pytest.raises(ReplyError, match="^ERR syntax error$"):  # options come in pairs
        replication.replconf(ctx, (b"REPLCONF", b"ack"))
    assert replication.psync(ctx, (b"PSYNC", b"?", b"-1")) == "FULLRESYNC"
    assert replication.sync(ctx, (b"SYNC",)) == "FULLRESYNC"
    assert repl.calls == [("replconf", argv), ("psync", (b"PSYNC", b"?", b"-1")),
                          ("psync", (b"SYNC",))]


def test_wait_and_waitaof_go_to_replication() -> None:
    repl = StandInReplication()
    ctx = ctx_with(repl)
    assert replication.wait(ctx, (b"WAIT", b"2", b"500")) == 2
    assert replication.waitaof(ctx, (b"WAITAOF", b"1", b"2", b"0")) == [1, 2]
    assert repl.calls == [("wait", 2, 500), ("waitaof", 1, 2, 0)]


def test_a_replica_refuses_wait_and_waitaof() -> None:
    ctx = ctx_with(StandInReplication(), read_only="READONLY You can't write against a replica.")
    with pytest.raises(ReplyError) as wait_error:
        replication.wait(ctx, (b"WAIT", b"1", b"0"))
    assert wait_error.value.line == replication.WAIT_ON_REPLICA
    with pytest.raises(ReplyError) as waitaof_error:
        replication.waitaof(ctx, (b"WAITAOF", b"0", b"1", b"0"))
    assert waitaof_error.value.line == replication.WAITAOF_ON_REPLICA
    # WAITAOF parses its arguments first, WAIT checks the role first.
    with pytest.raises(ReplyError, match="^ERR value is out of range, must be positive$"):
        replication.waitaof(ctx, (b"WAITAOF", b"-1", b"1", b"0"))
    with pytest.raises(ReplyError) as first:
        replication.wait(ctx, (b"WAIT", b"x", b"0"))
    assert first.value.line == replication.WAIT_ON_REPLICA
