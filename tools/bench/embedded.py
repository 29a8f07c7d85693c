"""The ``embedded`` and ``redis-py`` sections' workloads: the in-memory engine through
``Engine.execute`` (and redis-py's API over it), one thread, each run on a fresh engine; pairs
taking turns on one engine (IDMP against plain XADD, MAXCOUNT against COUNT); and the same
calls through redis-py to the run's redis-server. Must not touch: engine internals.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.workload import (
    BATCH,
    CONSUMER,
    GROUP,
    KEY,
    Loop,
    Measurement,
    chunks,
    clocked,
    consume,
    fill,
    read_entries,
    run_loop,
    take_turns,
    timed,
    warmup_size,
    xadds,
)

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

XREAD_PASSES = 10  # times the XREAD capped-read row reads its data (XREAD changes nothing)
LIST_BACKLOG = 1_000  # elements the LPUSH + RPOP row's list holds throughout
IDMP_CHUNK = 200  # XADDs per timed turn of the IDMP rows
PIPELINE = 100  # commands per redis-py pipeline round trip


def _execute() -> Any:
    from streamkeep import Engine

    return Engine.open().execute


def xadd(env: BenchEnv) -> float:
    """XADD bench * f v, N times through ``Engine.execute`` (a warm-up first, on another key);
    adds per second."""
    return run_loop(_execute(), Loop(xadds(KEY, env.n), xadds("warmup", warmup_size(env.n))))


def redis_xadd_in_process(env: BenchEnv) -> float:
    """`r.xadd(KEY, {"f": "v"})` through redis-py's API over the engine (`Engine.redis()`):
    what an application written for redis-py pays; adds per second."""
    from streamkeep import Engine

    r = Engine.open().redis()

    def loop(key: str, n: int) -> None:
        for _ in range(n):
            r.xadd(key, {"f": "v"})

    return env.n / timed(loop, env.n)


def _check(got: int, expected: int) -> None:
    if got != expected:
        raise AssertionError(f"consumed {got} messages, expected {expected}")


def consume_rate(env: BenchEnv) -> float:
    """N entries, one group, XREADGROUP COUNT 100 + XACK until drained (a warm-up first, on
    another key); messages/s."""
    execute, seconds = _execute(), 0.0
    for key, size in (("warmup", warmup_size(env.n)), (KEY, env.n)):
        fill(execute, key, size)
        execute("XGROUP", "CREATE", key, GROUP, "0")
        got, seconds = clocked(consume, execute, key)
        _check(got, size)
    return env.n / seconds


# A new member (field) of a sorted set, a hash, a set: (key, i) -> argv.
TYPE_WRITES: dict[str, Callable[[str, int], tuple[Any, ...]]] = {
    "ZADD": lambda key, i: ("ZADD", key, i, b"member:%d" % i),
    "HSET": lambda key, i: ("HSET", key, b"field:%d" % i, b"value"),
    "SADD": lambda key, i: ("SADD", key, b"member:%d" % i),
}


def type_write(env: BenchEnv, command: str) -> float:
    """ZADD, HSET or SADD of a new member/field each time into one key (a value growing to N
    members: its big encoding is what is measured); writes per second."""
    key = "types:" + command.lower()
    return run_loop(_execute(), Loop([TYPE_WRITES[command](key, i) for i in range(env.n)]))


def list_pairs(env: BenchEnv) -> float:
    """LPUSH of a new element then RPOP of the oldest, N pairs, on a list that holds
    LIST_BACKLOG elements throughout (checked after); pairs per second."""
    key = "lists:queue"
    return run_loop(_execute(), Loop(
        [argv for i in range(env.n) for argv in (("LPUSH", key, b"job:%d" % i), ("RPOP", key))],
        setup=[("RPUSH", key, *(b"job:%d" % -i for i in range(first, first + BATCH)))
               for first in range(0, LIST_BACKLOG, BATCH)],
        ops=env.n, check=(("LLEN", key), LIST_BACKLOG)))


def capped_read(env: BenchEnv, delivering: bool) -> Measurement:
    """COUNT 100 against MAXCOUNT 100 over the same N entries: two readers (two groups for
    XREADGROUP) take turns reply by reply on one engine (:func:`take_turns`). The rate is
    MAXCOUNT's entries/s, figure ``maxcount_over_count`` MAXCOUNT's / COUNT's; XREAD (it
    changes nothing) reads the data XREAD_PASSES times."""
    execute, n, size = _execute(), env.n, str(BATCH)
    fill(execute, "warmup", warmup_size(n))
    fill(execute, KEY, n)
    served = {"COUNT": 0, "MAXCOUNT": 0}
    spent = dict.fromkeys(served, 0.0)

    def reader(key: str, cap: str, timed_pass: bool) -> Callable[[], bool]:
        group, last = f"{GROUP}-{cap}", ["0"]
        if delivering:
            execute("XGROUP", "CREATE", key, group, "0")

        def read_once() -> bool:
            if delivering:
                reply = execute("XREADGROUP", "GROUP", group, CONSUMER, cap, size, "STREAMS",
                                key, ">")
            else:
                reply = execute("XREAD", cap, size, "STREAMS", key, last[0])
            entries = reply[0][1] if reply else []
            if entries:
                last[0] = entries[-1][0]
            served[cap] += len(entries) * timed_pass
            return bool(entries)

        return read_once

    for key in ("warmup", KEY):
        for _ in range(1 if delivering or key == "warmup" else XREAD_PASSES):
            took = take_turns({cap: reader(key, cap, key == KEY) for cap in served})
            for cap in spent:
                spent[cap] += took[cap] * (key == KEY)
    expected = n * (1 if delivering else XREAD_PASSES)
    if set(served.values()) != {expected}:
        raise AssertionError(f"capped reads saw {served}, expected {expected} each")
    rates = {cap: served[cap] / spent[cap] for cap in spent}
    return Measurement(rates["MAXCOUNT"], count=expected,
                       figures={"maxcount_over_count": rates["MAXCOUNT"] / rates["COUNT"],
                                "count_rate": rates["COUNT"]})


def xadd_idmp(env: BenchEnv, auto: bool = False) -> Measurement:
    """XADD with `IDMP producer <new iid>` (every one adds an entry and records its iid), or
    `IDMPAUTO producer` over distinct contents, against plain `XADD key * f v` on the same
    engine, in turns of IDMP_CHUNK (:func:`take_turns`), str arguments on both sides. The rate
    is IDMP's adds/s; figures `idmp_us`, `plain_us` (one XADD of each in these turns) and
    `idmp_cost` their quotient."""
    execute, n = _execute(), env.n
    fill(execute, "warmup", warmup_size(n))
    values = [f"v{i}" for i in range(n)]
    idmp_key = f"{KEY}-idmp"

    def plain(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            execute("XADD", KEY, "*", "f", values[i])

    def idmp(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            if auto:
                execute("XADD", idmp_key, "IDMPAUTO", "producer-1", "*", "f", values[i])
            else:
                execute("XADD", idmp_key, "IDMP", "producer-1", values[i], "*", "f", "v")

    spent = take_turns({"plain": chunks(plain, n, IDMP_CHUNK), "idmp": chunks(idmp, n, IDMP_CHUNK)})
    if execute("XLEN", idmp_key) != n:
        raise AssertionError("XADD IDMP with new iids added fewer entries than sent")
    return Measurement(n / spent["idmp"], figures={
        "idmp_us": spent["idmp"] / n * 1e6, "plain_us": spent["plain"] / n * 1e6,
        "idmp_cost": spent["idmp"] / spent["plain"]})


def _xadds(client: Any, key: str, n: int, pipeline: int) -> None:
    if pipeline <= 1:
        for _ in range(n):
            client.xadd(key, {"f": "v"})
        return
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, pipeline):
        for _ in range(min(pipeline, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def redis_xadd(env: BenchEnv, pipeline: int = 1) -> float:
    """XADD bench * f v, N times via redis-py (one per round trip, or ``pipeline`` a trip)."""
    client = env.redis
    client.flushall()
    seconds = timed(lambda key, n: _xadds(client, key, n, pipeline), env.n)
    client.flushall()
    return env.n / seconds


def _redis_consume(client: Any, key: str, pipelined: bool) -> int:
    """The consume loop over redis-py; ``pipelined`` sends each XACK with the next
    XREADGROUP in one round trip (the reads still wait for the IDs to ack)."""
    consumed = 0
    reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=BATCH)
    pipe = client.pipeline(transaction=False)
    while entries := read_entries(reply):
        ids = [entry[0] for entry in entries]
        consumed += len(ids)
        if pipelined:
            pipe.xack(key, GROUP, *ids)
            pipe.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=BATCH)
            _acked, reply = pipe.execute()
        else:
            client.xack(key, GROUP, *ids)
            reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=BATCH)
    return consumed


def redis_consume(env: BenchEnv, pipelined: bool = False) -> float:
    """The embedded consume workload against redis-server via redis-py; msgs/s."""
    client, seconds = env.redis, 0.0
    client.flushall()
    for key, size in (("warmup", warmup_size(env.n)), (KEY, env.n)):
        _xadds(client, key, size, 1000)
        client.xgroup_create(key, GROUP, id="0")
        got, seconds = clocked(_redis_consume, client, key, pipelined)
        _check(got, size)
    client.flushall()
    return env.n / seconds
