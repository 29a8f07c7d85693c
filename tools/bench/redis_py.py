"""The ``redis-py`` section (``--sections redis``): the embedded workloads against a real
redis-server through redis-py, the reference the embedded rows are compared with.

Owns its workloads: XADD one per round trip or pipelined (:func:`bench_redis_xadd`), and
consume, XREADGROUP COUNT + XACK until drained, optionally with each XACK pipelined with the
next read (:func:`bench_redis_consume`).
Must not touch: the server's lifetime (``BenchEnv.redis`` starts and stops it), other sections.
"""

from __future__ import annotations

import time
from typing import Any

from streamkeep.tools.bench.workload import BATCH, CONSUMER, GROUP, KEY, warmup_size

PIPELINE = 100  # commands per redis-py pipeline round trip


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply, RESP2 (list) or RESP3 (dict) shaped."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return next(iter(reply.values()))[0]
    return reply[0][1]


def _redis_fill(client: Any, key: str, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        for _ in range(min(1000, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_xadd_loop(client: Any, key: str, n: int, pipeline: int) -> None:
    if pipeline <= 1:
        for _ in range(n):
            client.xadd(key, {"f": "v"})
        return
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, pipeline):
        for _ in range(min(pipeline, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_consume_loop(client: Any, key: str, batch: int, pipelined: bool) -> int:
    """Like the embedded loop. ``pipelined`` sends each XACK with the next XREADGROUP in one
    round trip (the reads still wait for the previous reply: the IDs to ack come from it)."""
    consumed = 0
    reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    pipe = client.pipeline(transaction=False)
    while entries := _entries(reply):
        ids = [entry[0] for entry in entries]
        consumed += len(ids)
        if pipelined:
            pipe.xack(key, GROUP, *ids)
            pipe.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
            _acked, reply = pipe.execute()
        else:
            client.xack(key, GROUP, *ids)
            reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    return consumed


def bench_redis_xadd(client: Any, n: int, pipeline: int = 1) -> float:
    """XADD bench * f v, n times via redis-py (one per round trip, or ``pipeline`` per trip)."""
    client.flushall()
    _redis_xadd_loop(client, "warmup", warmup_size(n), pipeline)
    start = time.perf_counter()
    _redis_xadd_loop(client, KEY, n, pipeline)
    elapsed = time.perf_counter() - start
    client.flushall()
    return n / elapsed


def bench_redis_consume(client: Any, n: int, batch: int = BATCH, pipelined: bool = False) -> float:
    """The embedded consume workload against redis-server via redis-py; msgs/s."""
    client.flushall()
    warm = warmup_size(n)
    _redis_fill(client, "warmup", warm)
    client.xgroup_create("warmup", GROUP, id="0")
    if _redis_consume_loop(client, "warmup", batch, pipelined) != warm:
        raise AssertionError("redis warm-up consumed the wrong number of messages")
    _redis_fill(client, KEY, n)
    client.xgroup_create(KEY, GROUP, id="0")
    start = time.perf_counter()
    consumed = _redis_consume_loop(client, KEY, batch, pipelined)
    elapsed = time.perf_counter() - start
    client.flushall()
    if consumed != n:
        raise AssertionError(f"redis consume saw {consumed} messages, expected {n}")
    return consumed / elapsed
