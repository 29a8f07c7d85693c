"""A script's writes reach a streamkeep replica as the effects its commands logged, one record:
the record shipped holds XADD/SET... and no EVAL, and the replica that applies it never runs Lua
(its engine never makes a Lua runtime)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep import Engine, Record
from tests.support.server_util import ServerHandle, start_server

pytest.importorskip("lupa")

SCRIPT = """
    redis.call('XADD', KEYS[1], '*', 'f', ARGV[1])
    redis.call('SET', KEYS[2], ARGV[1], 'PX', 600000)
    redis.call('XGROUP', 'CREATE', KEYS[1], 'g', '0')
    redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')
    return redis.call('TIME')
"""


def wait_for(predicate, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


@pytest.fixture
def primary(tmp_path: Path) -> Iterator[ServerHandle]:
    handle = start_server(Engine.open(str(tmp_path / "primary")))
    try:
        yield handle
    finally:
        handle.stop()


def test_a_replica_applies_a_scripts_effects_without_lua(primary: ServerHandle,
                                                         tmp_path: Path) -> None:
    p = primary.engine
    p.execute("SET", "warm", "up")
    with Engine.open(str(tmp_path / "replica"), replicaof=("127.0.0.1", primary.port)) as r:
        wait_for(lambda: r.replication.follower.link_up and r.digest() == p.digest())
        shipped: list[Record] = []  # what the primary logs, hence what its replicas get
        p.add_sink(shipped.append)
        p.execute("EVAL", SCRIPT, "2", "s", "str", "v")
        wait_for(lambda: r.journal.lsn == p.journal.lsn and r.digest() == p.digest())
        assert r.scripting is None  # no Lua ran on the replica
        assert r.execute("GET", "str") == b"v" and r.execute("XLEN", "s") == 1
        script_records = [rec for rec in shipped if any(
            bytes(e[0]).upper() == b"XADD" for e in rec.effects)]
        assert len(script_records) == 1  # the whole script: one record
        names = {bytes(e[0]).upper() for e in script_records[0].effects}
        assert b"XADD" in names and b"SET" in names
        assert not names & {b"EVAL", b"EVALSHA"}
