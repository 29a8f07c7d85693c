"""The ``embedded`` section: the in-memory engine through ``Engine.execute``, one thread.

Owns its workloads: XADD (:func:`bench_embedded_xadd`; through redis-py's API,
:func:`bench_embedded_redis_xadd`), consume, XREADGROUP COUNT + XACK
until drained (:func:`bench_embedded_consume`), and reads capped by COUNT against Redis 8.10's
MAXCOUNT over the same data (:func:`bench_embedded_capped_read`), XADD with IDMP against plain
XADD (:func:`bench_embedded_xadd_idmp`), ZADD, HSET and SADD into one growing value
(:func:`bench_embedded_type_write`), and a list used as a queue, LPUSH + RPOP pairs
(:func:`bench_embedded_list_pairs`), each on a fresh ``Engine.open()``.
Must not touch: engine internals (only ``Engine.open``/``execute``/``redis``), other sections, the
registry (which names these rows and their targets).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from streamkeep.tools.bench.workload import (
    BATCH,
    CONSUMER,
    GROUP,
    KEY,
    Measurement,
    fill,
    warmup_size,
)

XREAD_PASSES = 10  # times the XREAD capped-read row reads its data (XREAD changes nothing)
LIST_BACKLOG = 1_000  # elements the LPUSH + RPOP row's list holds throughout


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


def bench_embedded_type_write(n: int, command: str) -> float:
    """ZADD, HSET or SADD of a new member/field each time into one key (a value growing to n
    members, so its big encoding is what is measured) on one thread; writes per second."""
    execute = _new_engine().execute
    key = "types:" + command.lower()
    argv: Callable[[int], tuple[Any, ...]] = {
        "ZADD": lambda i: ("ZADD", key, i, b"member:%d" % i),
        "HSET": lambda i: ("HSET", key, b"field:%d" % i, b"value"),
        "SADD": lambda i: ("SADD", key, b"member:%d" % i),
    }[command]
    calls = [argv(i) for i in range(n)]  # (the arguments made before the clock starts)
    start = time.perf_counter()
    for call in calls:
        execute(*call)
    return n / (time.perf_counter() - start)


def bench_embedded_list_pairs(n: int) -> float:
    """LPUSH of a new element then RPOP of the oldest, n pairs on one thread, into a list that
    holds LIST_BACKLOG elements throughout (a queue with a backlog: every RPOP finds one and
    the key is never deleted; checked after); pairs per second."""
    execute = _new_engine().execute
    key = "lists:queue"
    for first in range(0, LIST_BACKLOG, BATCH):
        last = min(first + BATCH, LIST_BACKLOG)
        execute("RPUSH", key, *(b"job:%d" % -i for i in range(first, last)))
    jobs = [b"job:%d" % i for i in range(n)]  # (made before the clock starts)
    start = time.perf_counter()
    for job in jobs:
        execute("LPUSH", key, job)
        execute("RPOP", key)
    elapsed = time.perf_counter() - start
    if execute("LLEN", key) != LIST_BACKLOG:
        raise AssertionError("the LPUSH + RPOP pairs changed the list's length")
    return n / elapsed


def bench_embedded_xadd(n: int) -> float:
    """XADD bench * f v, n times on one thread through ``Engine.execute``; adds per second."""
    execute = _new_engine().execute
    fill(execute, "warmup", warmup_size(n))
    start = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "f", "v")
    return n / (time.perf_counter() - start)


def bench_embedded_redis_xadd(n: int) -> float:
    """`r.xadd(KEY, {"f": "v"})` through redis-py's API over the engine (`Engine.redis()`), n
    times on one thread: what an application written for redis-py pays; adds per second."""
    r = _new_engine().redis()
    for _ in range(warmup_size(n)):
        r.xadd("warmup", {"f": "v"})
    start = time.perf_counter()
    for _ in range(n):
        r.xadd(KEY, {"f": "v"})
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



def _capped_reader(execute: Callable[..., Any], key: str, group: str, cap: str, size: str,
                   delivering: bool) -> Callable[[], int]:
    """One reply's worth of reading `key` capped by `cap` (COUNT or MAXCOUNT) `size`: XREADGROUP
    `>` for `group` (delivering) or XREAD from the last ID this reader saw; entries served."""
    last = ["0"]

    def read_once() -> int:
        if delivering:
            reply = execute("XREADGROUP", "GROUP", group, CONSUMER, cap, size, "STREAMS", key,
                            ">")
        else:
            reply = execute("XREAD", cap, size, "STREAMS", key, last[0])
        if not reply:
            return 0
        entries = reply[0][1]
        last[0] = entries[-1][0]
        return len(entries)

    return read_once


def bench_embedded_capped_read(n: int, delivering: bool, batch: int = BATCH) -> Measurement:
    """COUNT `batch` against Redis 8.10's MAXCOUNT `batch` over the same n entries: two readers
    (two groups for XREADGROUP) take turns reply by reply, alternating which goes first, on
    one engine, each reply timed, so the machine's noise falls on both alike. The rate is
    MAXCOUNT's entries/s; figure `maxcount_over_count` is MAXCOUNT's rate / COUNT's; XREAD (it
    changes nothing) reads the data XREAD_PASSES times."""
    execute = _new_engine().execute
    fill(execute, "warmup", warmup_size(n))
    fill(execute, KEY, n)
    size = str(batch)
    spent = {"COUNT": 0.0, "MAXCOUNT": 0.0}
    served = {"COUNT": 0, "MAXCOUNT": 0}
    clock = time.perf_counter
    for key in ("warmup", KEY):
        passes = 1 if delivering or key == "warmup" else XREAD_PASSES
        for _ in range(passes):
            readers = {}
            for cap in spent:
                group = f"{GROUP}-{cap}"
                if delivering:
                    execute("XGROUP", "CREATE", key, group, "0")
                readers[cap] = _capped_reader(execute, key, group, cap, size, delivering)
            done: set[str] = set()
            order = list(readers.items())
            while len(done) < len(readers):
                # The second reader of a range finds it in the CPU caches: alternate who is
                # first, or that advantage would always go to the same cap.
                order.reverse()
                for cap, read_once in order:
                    if cap in done:
                        continue
                    start = clock()
                    got = read_once()
                    if key == KEY:
                        spent[cap] += clock() - start
                        served[cap] += got
                    if not got:
                        done.add(cap)
    expected = n * (1 if delivering else XREAD_PASSES)
    if served["COUNT"] != expected or served["MAXCOUNT"] != expected:
        raise AssertionError(f"capped reads saw {served}, expected {expected} each")
    rates = {cap: served[cap] / spent[cap] for cap in spent}
    return Measurement(rates["MAXCOUNT"], count=expected,
                       figures={"maxcount_over_count": rates["MAXCOUNT"] / rates["COUNT"],
                                "count_rate": rates["COUNT"]})


IDMP_CHUNK = 200  # XADDs per timed turn in bench_embedded_xadd_idmp


def bench_embedded_xadd_idmp(n: int, auto: bool = False) -> Measurement:
    """XADD with Redis 8.6's `IDMP producer iid` (a new iid each time: every one adds an entry
    and records its iid, the cost a producer pays on every send; not a duplicate's early
    reply), or `IDMPAUTO producer` over distinct contents, against the plain `XADD key * f v`
    on the same engine: turns of IDMP_CHUNK XADDs each, alternating which goes first, each
    turn timed, so the machine's noise falls on both alike. Arguments are str on both sides
    (the embedded API's fast conversion). The rate is IDMP's adds/s; figures `idmp_us` and
    `plain_us` are the time of one IDMP XADD and of one plain XADD in these turns, and
    `idmp_cost` their quotient (the plain XADDs timed here, on the same engine as the IDMP
    ones, not the `embedded.xadd` row's fresh engine)."""
    execute = _new_engine().execute
    fill(execute, "warmup", warmup_size(n))
    values = [f"v{i}" for i in range(n)]
    idmp_key = f"{KEY}-idmp"

    def plain(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            execute("XADD", KEY, "*", "f", values[i])

    def idmp(lo: int, hi: int) -> None:
        if auto:
            for i in range(lo, hi):
                execute("XADD", idmp_key, "IDMPAUTO", "producer-1", "*", "f", values[i])
        else:
            for i in range(lo, hi):
                execute("XADD", idmp_key, "IDMP", "producer-1", values[i], "*", "f", "v")

    spent = {"plain": 0.0, "idmp": 0.0}
    clock = time.perf_counter
    turns = [("plain", plain), ("idmp", idmp)]
    for lo in range(0, n, IDMP_CHUNK):
        hi = min(n, lo + IDMP_CHUNK)
        turns.reverse()
        for name, run in turns:
            start = clock()
            run(lo, hi)
            spent[name] += clock() - start
    if execute("XLEN", idmp_key) != n:
        raise AssertionError("XADD IDMP with new iids added fewer entries than sent")
    return Measurement(n / spent["idmp"], figures={
        "idmp_us": spent["idmp"] / n * 1e6, "plain_us": spent["plain"] / n * 1e6,
        "idmp_cost": spent["idmp"] / spent["plain"]})
