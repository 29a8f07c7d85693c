"""The ``memory`` section's workloads (:data:`WORKLOADS`): each built in a fresh child process
holding an in-memory Engine (``python -m streamkeep.tools.bench.memory WORKLOAD N PENDING``:
RSS growth after gc.collect(), the collector's time) and in the run's redis-server
(``used_memory`` growth). Must not touch: the engine's storage.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.workload import Measurement, clocked, module_child, pipelined
from streamkeep.tools.servers import proc_status

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

KEY = "mem"
GROUP = "g"
PENDING_SHARE = 10  # sensor: one entry in ten delivered and not acknowledged
SENSOR_PER_N = 5  # entries per N (but the 1 KB workload): 1,000,000 at the default N
PIPELINE = 1_000  # redis-server fill: commands per round trip
DELETE_PAGE = 1_000  # deletions: entries read per XRANGE (even: see _delete_every_other)


def _xadd(fields: Callable[[int], list[bytes]]) -> Callable[[int], list[bytes]]:
    return lambda i: [b"XADD", KEY.encode(), b"*", *fields(i)]


def _sensor(i: int) -> list[bytes]:
    return [b"sensor-id", b"1234", b"temperature", b"19.8"]


# name -> (what it builds, the command that adds its n-th item)
WORKLOADS: dict[str, tuple[str, Callable[[int], list[bytes]]]] = {
    "sensor": ("sensor-id 1234 temperature 19.8, a tenth pending", _xadd(_sensor)),
    "one_field": ("one field, an 8-byte value",
                  _xadd(lambda i: [b"payload", b"%08d" % i])),
    "ten_fields": ("ten fields, short values", _xadd(
        lambda i: [x for k in range(10) for x in (b"field-%d" % k, b"v%d" % (i % 97))])),
    "kilobyte": ("one field, a 1 KB value", _xadd(lambda i: [b"payload", (b"%08d" % i) * 128])),
    # Three field sets taking turns: entries whose names differ from their node's first.
    "varied_fields": ("three field sets in turn", _xadd(
        lambda i: [b"kind-%d" % (i % 3), b"a", b"value-%d" % (i % 3), b"%d" % (i % 1000)])),
    "deletions": ("sensor entries, every other one XDELed", _xadd(_sensor)),
    # A score spread over the range: insertions land all over the order.
    "zset": ("one sorted set, a member per item (ZADD)",
             lambda i: [b"ZADD", KEY.encode(), b"%d" % ((i * 7919) % 1_000_003),
                        b"member:%d" % i]),
    "hash": ("one hash, a field per item (HSET)",
             lambda i: [b"HSET", KEY.encode(), b"field:%d" % i, b"value%05d" % (i % 100_000)]),
    "set": ("one set, a member per item (SADD)",
            lambda i: [b"SADD", KEY.encode(), b"member:%d" % i]),
    # A key of its own per item: ten fields, values 8 to 20 bytes.
    "small_hashes": ("a hash of ten fields per item (HSET)", lambda i: [
        b"HSET", b"h:%d" % i,
        *[x for k in range(10) for x in (b"f%d" % k, b"v%d-" % k + b"x" * (i % 13) + b"!")]]),
    # A small element (9 to 12 bytes) at the list's tail.
    "list": ("one list, a small element per item (RPUSH)",
             lambda i: [b"RPUSH", KEY.encode(), b"element:%d" % (i % 10_000)]),
    # A key of its own per item: ten elements, 4 to 16 bytes (a job queue's short backlog).
    "small_lists": ("a list of ten elements per item (RPUSH)", lambda i: [
        b"RPUSH", b"l:%d" % i, *[b"j%d-" % k + b"x" * (i % 13) for k in range(10)]]),
}
TYPE_WORKLOADS = frozenset({"zset", "hash", "set", "small_hashes", "list", "small_lists"})
SMALL_KEYS = frozenset({"small_hashes", "small_lists"})  # a key per item: N / 2 items


def entries(env: BenchEnv, workload: str) -> int:
    """SENSOR_PER_N x N items (1M at the default N): the 1 KB workload N, the small hashes
    and the small lists N / 2 (100k keys of ten fields or elements). RSS growth over fewer
    entries is mostly the allocator's arenas, not the entries."""
    if workload in SMALL_KEYS:
        n = env.n // 2
    else:
        n = env.n if workload == "kilobyte" else env.n * SENSOR_PER_N
    return max(n, 1_000)


def child(workload: str, n: int, pending: int) -> dict[str, float]:
    """Build the workload in this process; its figures."""
    from streamkeep import Engine

    make = WORKLOADS[workload][1]
    engine = Engine.open()
    execute = engine.execute
    gc_seconds = [0.0]
    started = [0.0]

    def timing(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            gc_seconds[0] += time.perf_counter() - started[0]

    gc.collect()
    before = proc_status("VmRSS")
    gc.callbacks.append(timing)
    began = time.perf_counter()
    for i in range(n):  # str arguments: fresh bytes per entry, as a parsed request has
        execute(*[x.decode("latin-1") for x in make(i)])
    fill = time.perf_counter() - began
    gc.callbacks.remove(timing)
    if workload == "deletions":
        _delete_every_other(execute)
    gc.collect()
    filled = proc_status("VmRSS")
    _found, full_gc = clocked(gc.collect)
    out = {"entries_bytes": filled - before, "fill_s": fill, "gc_fill_s": gc_seconds[0],
           "full_gc_s": full_gc}
    if pending:
        execute("XGROUP", "CREATE", KEY, GROUP, "0")
        for _ in range(0, pending, 1000):
            execute("XREADGROUP", "GROUP", GROUP, "c", "COUNT", str(min(1000, pending)),
                    "STREAMS", KEY, ">")
        gc.collect()
        out["pending_bytes"] = proc_status("VmRSS") - filled
    return out


def _delete_every_other(execute: Any) -> None:
    """XDEL of every other entry, read a page at a time: a 1M-entry reply built at once would
    leave the allocator's arenas fragmented by the IDs kept from it, and the RSS growth would
    count the harness's garbage as the stream's."""
    start = "-"
    while page := execute("XRANGE", KEY, start, "+", "COUNT", str(DELETE_PAGE)):
        for entry in page[1::2]:  # (an even page size: every other entry of the stream)
            execute("XDEL", KEY, entry[0])
        start = "(" + page[-1][0].decode()


def _redis_bytes(client: Any, workload: str, n: int, pending: int) -> dict[str, float]:
    make = WORKLOADS[workload][1]
    client.flushall()
    before = int(client.info("memory")["used_memory"])
    pipelined(client, (make(i) for i in range(n)), PIPELINE)
    if workload == "deletions":
        ids = [e[0] for e in client.xrange(KEY, "-", "+")]
        for start in range(1, len(ids), 2 * PIPELINE):
            client.xdel(KEY, *ids[start:start + 2 * PIPELINE:2])
    filled = int(client.info("memory")["used_memory"])
    out = {"entries_bytes": float(filled - before)}
    if pending:
        client.xgroup_create(KEY, GROUP, "0")
        for _ in range(0, pending, 1000):
            client.execute_command("XREADGROUP", "GROUP", GROUP, "c", "COUNT",
                                   str(min(1000, pending)), "STREAMS", KEY, ">")
        out["pending_bytes"] = float(int(client.info("memory")["used_memory"]) - filled)
    client.flushall()
    return out


def bench(env: BenchEnv, workload: str) -> Measurement:
    n = entries(env, workload)
    pending = n // PENDING_SHARE if workload == "sensor" else 0
    mine = module_child(__name__, workload, n, pending)
    figures = {"bytes_per_entry": mine["entries_bytes"] / n,
               "gc_fill_us": mine["gc_fill_s"] * 1e6, "full_gc_us": mine["full_gc_s"] * 1e6}
    if pending:
        figures["bytes_per_pending"] = mine["pending_bytes"] / pending
    if env.use_redis:
        theirs = _redis_bytes(env.redis, workload, n, pending)
        figures["redis_bytes_per_entry"] = theirs["entries_bytes"] / n
        figures["over_redis"] = mine["entries_bytes"] / max(theirs["entries_bytes"], 1.0)
        if pending:
            figures["redis_bytes_per_pending"] = theirs["pending_bytes"] / pending
    return Measurement(n / mine["fill_s"], count=n, figures=figures)


if __name__ == "__main__":  # the child
    name, count, held = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(json.dumps(child(name, count, held)))
