"""The ``embedded`` section: the in-memory engine through ``Engine.execute``, one thread.

Owns its workloads: XADD (:func:`bench_embedded_xadd`) and consume, XREADGROUP COUNT + XACK
until drained (:func:`bench_embedded_consume`), each on a fresh ``Engine.open()``.
Must not touch: engine internals (only ``Engine.open``/``execute``), other sections, the
registry (which names these rows and their targets).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamkeep.tools.bench.workload import BATCH, CONSUMER, GROUP, KEY, fill, warmup_size


def _new_engine() -> Any:
    from streamkeep import Engine

    return Engine.open()


def _consume_loop(execute: Callable[..., Any], key: str, batch: int) -> int:
    """XREADGROUP COUNT batch ``>`` then XACK of the returned IDs until drained; messages seen."""
    count = str(batch)
    consumed = 0
    while True:
        reply = execute("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", count,
                        "STREAMS", key, ">")
        if not reply:
            return consumed
        ids = [entry[0] for entry in reply[0][1]]
        execute("XACK", key, GROUP, *ids)
        consumed += len(ids)


def bench_embedded_xadd(n: int) -> float:
    """XADD bench * f v, n times on one thread through ``Engine.execute``; adds per second."""
    execute = _new_engine().execute
    fill(execute, "warmup", warmup_size(n))
    start = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "f", "v")
    return n / (time.perf_counter() - start)


def bench_embedded_consume(n: int, batch: int = BATCH) -> float:
    """n pre-filled entries, one group, XREADGROUP COUNT batch + XACK until drained; msgs/s."""
    execute = _new_engine().execute
    warm = warmup_size(n)
    fill(execute, "warmup", warm)
    execute("XGROUP", "CREATE", "warmup", GROUP, "0")
    if _consume_loop(execute, "warmup", batch) != warm:
        raise AssertionError("embedded warm-up consumed the wrong number of messages")
    fill(execute, KEY, n)
    execute("XGROUP", "CREATE", KEY, GROUP, "0")
    start = time.perf_counter()
    consumed = _consume_loop(execute, KEY, batch)
    elapsed = time.perf_counter() - start
    if consumed != n:
        raise AssertionError(f"embedded consume saw {consumed} messages, expected {n}")
    return consumed / elapsed
