"""What a node holds in its streams, comparable between a redis-server and streamkeep: for each
stream key its XRANGE, XINFO STREAM FULL (the consumers' seen-time and active-time taken out:
each node's own clock; 8.x's idempotency fields taken out: 7.0 has none) and XPENDING (idle
times taken out). `run` is a callable taking a command's arguments (`Engine.execute`, or
`raw_client(...)` for a redis-server's replies as they are)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from tests.support.diffutil import without_idmp_fields

Run = Callable[..., Any]


def raw_client(r: redis.Redis, db: int) -> Run:
    """redis-server's replies as they are (no redis-py parsing), in database `db`."""
    kwargs = r.connection_pool.connection_kwargs
    client = redis.Redis(host=kwargs["host"], port=kwargs["port"], db=db, protocol=2)
    client.response_callbacks.clear()
    return client.execute_command


def without_times(reply: Any) -> Any:
    """XINFO STREAM FULL with the consumers' seen-time and active-time taken out."""
    if not isinstance(reply, list):
        return reply
    out: list[Any] = []
    skip = False
    for i, item in enumerate(reply):
        if skip:
            skip = False
        elif i % 2 == 0 and item in (b"seen-time", b"active-time"):
            skip = True
        else:
            out.append(without_times(item))
    return out


def stream_keys(run: Run) -> list[bytes]:
    return sorted(k for k in run("KEYS", "*") if run("TYPE", k) in (b"stream", "stream"))


def stream_state(run: Run, keys: list[bytes]) -> dict[bytes, Any]:
    state: dict[bytes, Any] = {}
    for key in sorted(keys):
        full = run("XINFO", "STREAM", key, "FULL")
        pending = {}
        for group in run("XINFO", "GROUPS", key):
            name = group[1]
            pending[name] = [[p[0], p[1], p[3]] for p in
                             run("XPENDING", key, name, "-", "+", "1000")]
        state[key] = (run("XRANGE", key, "-", "+"),
                      without_times(without_idmp_fields(full)), pending)
    return state


def databases_state(run_in: Callable[[int], Run], dbs: range = range(16)) -> dict[int, Any]:
    """Every database's streams (empty databases left out); `run_in(db)` runs in one."""
    out = {}
    for db in dbs:
        run = run_in(db)
        keys = stream_keys(run)
        if keys:
            out[db] = stream_state(run, keys)
    return out


def keys_state(run: Run) -> dict[bytes, tuple[Any, Any, int]]:
    """Every key of one database: (its type, its value — a string's bytes, a stream's XRANGE —,
    its PEXPIRETIME), comparable between a redis-server and streamkeep."""
    out = {}
    for key in run("KEYS", "*"):
        kind = run("TYPE", key)
        kind = kind.encode() if isinstance(kind, str) else kind
        value = run("GET", key) if kind == b"string" else \
            run("XRANGE", key, "-", "+") if kind == b"stream" else None
        out[key] = (kind, value, run("PEXPIRETIME", key))
    return out
