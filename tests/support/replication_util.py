"""Helpers for the replication tests: drive a seeded workload into a primary over the network,
wait for replicas to catch up, read INFO fields, talk to a node with raw RESP.

`drive(client, seed, start, stop)` sends commands [start, stop) of tests/support/aof_workload's
seeded mix (XADD with trims, XREADGROUP, XACK, XCLAIM, XAUTOCLAIM, XDEL, XTRIM, group changes)
through a redis-py client in pipelines, ignoring error replies (they are deterministic replies
too). `caught_up(primary, replica)` waits until the replica's offset is the primary's and their
`DEBUG DIGEST`s are equal, and returns the digest.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import redis

from tests.support.aof_workload import commands
from tests.support.resp_client import RespClient

CATCH_UP_TIMEOUT = 30.0


def drive(client: redis.Redis, seed: int, start: int, stop: int, chunk: int = 50) -> None:
    kwargs = client.connection_pool.connection_kwargs
    with RespClient(kwargs["host"], kwargs["port"]) as raw:
        if kwargs.get("password"):
            raw.execute("AUTH", kwargs["password"])
        _drive(raw, seed, start, stop, chunk)


def drive_until_killed(client: redis.Redis, seed: int, start: int, stop: int) -> None:
    """`drive` in a writer thread whose server the test kills: the connection it loses then
    is the expected end, not an error (a thread's exception would only be a warning)."""
    with contextlib.suppress(ConnectionError, OSError):
        drive(client, seed, start, stop)


def _drive(client: RespClient, seed: int, start: int, stop: int, chunk: int) -> None:
    gen = commands(seed)
    for _ in range(start):
        next(gen)
    pending = []
    for _i in range(start, stop):
        _time_ms, argv = next(gen)
        pending.append(argv)
        if len(pending) >= chunk:
            _send(client, pending)
            pending = []
    if pending:
        _send(client, pending)


def _send(client: RespClient, batch: list[list[str]]) -> None:
    client.pipeline(*(tuple(argv) for argv in batch))


def info(client: redis.Redis, section: str = "replication") -> dict[str, str]:
    """INFO's fields as the server wrote them (redis-py would parse slave0's into a dict)."""
    kwargs = client.connection_pool.connection_kwargs
    with RespClient(kwargs["host"], kwargs["port"]) as raw:
        if kwargs.get("password"):
            raw.execute("AUTH", kwargs["password"])
        text = raw.execute("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def wait_for(predicate: Callable[[], Any], timeout: float = CATCH_UP_TIMEOUT,
             what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except (redis.ConnectionError, redis.TimeoutError, ConnectionError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def caught_up(primary: redis.Redis, replica: redis.Redis,
              timeout: float = CATCH_UP_TIMEOUT) -> bytes:
    """Wait until `replica` has everything `primary` wrote and holds the same state."""
    def same() -> bytes | None:
        mine = info(primary)["master_repl_offset"]
        theirs = info(replica)
        if theirs.get("master_link_status") != "up" or theirs["master_repl_offset"] != mine:
            return None
        digest = primary.execute_command("DEBUG", "DIGEST")
        return digest if digest == replica.execute_command("DEBUG", "DIGEST") else None

    return wait_for(same, timeout, "the replica to catch up")
