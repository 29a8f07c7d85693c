"""The ``nodes`` and ``consume`` workloads as a script any checkout's interpreter runs
(``-I nodes_child.py WORKLOAD N PATH SEED``: one JSON line), on the public API alone so that
it measures whichever streamkeep that interpreter has; but ``build_backlog``, which writes the
backlog data set with the checkout's own builder (``streamkeep.tools.bench.backlog.build``).
Must not touch: anything of streamkeep but its public API.
"""

from __future__ import annotations

import gc
import itertools
import json
import random
import resource
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

KEY, GROUP = "bench", "g"
BATCH = 100  # COUNT of the reads and claims
TRIM_EVERY = 10  # XADDs between two trims as the stream grows
TRIM_SHARE = 10  # the trims keep a tenth of the entries
COLD_BUDGET = 1 << 20  # backlog-memory of the cold reads: 1 MB, most nodes cold
BACKLOG_BUDGET = 128 << 20  # of the catch-up over a cold backlog (the backlog section's cold
# mode), whose data set names its stream, group and consumer so:
BACKLOG_KEY, BACKLOG_GROUP, BACKLOG_CONSUMER = "backlog", "g", "c"
SENSOR = ("sensor-id", "1234", "temperature", "19.8")
HASH_KEY, HASH_BATCH = "bighash", 2000  # the big hash's key; fields an HSET of its build sets
Result = dict[str, Any]


def _engine(path: str = "-", **config: Any) -> Any:
    from streamkeep import Engine

    if path == "-":
        return Engine.open()
    return Engine.open(path, appendfsync="no", auto_aof_rewrite_percentage=0, **config)


def _numbered(n: int, fields: tuple[str, ...] = ("f", "v")) -> list[tuple[str, ...]]:
    """n x XADD with IDs 1-1 .. n-1 (untimed set-up): a random start is a random number."""
    return [("XADD", KEY, f"{i}-1", *fields) for i in range(1, n + 1)]


def _xadds(key: str, n: int, fields: tuple[str, ...] = ("f", "v")) -> Iterable[tuple[str, ...]]:
    """n x ``XADD key * fields``."""
    return itertools.repeat(("XADD", key, "*", *fields), n)


def _timed(run: Callable[[], int]) -> Result:
    """``run()`` timed: its ops (what it returned) and seconds."""
    began = time.perf_counter()
    ops = run()
    return {"ops": ops, "seconds": time.perf_counter() - began}


def _loop(execute: Callable[..., Any], timed: Iterable[tuple[str, ...]],
          setup: Iterable[tuple[str, ...]] = (), ops: int | None = None) -> Result:
    """A declared loop: the ``setup`` commands untimed, then the ``timed`` ones timed; its ops
    ``ops``, else the entries their replies hold (the range reads)."""
    for argv in setup:
        execute(*argv)
    if ops is None:
        return _timed(lambda: sum(len(execute(*argv)) for argv in timed))

    def run() -> int:
        for argv in timed:
            execute(*argv)
        return ops

    return _timed(run)


def _consume(execute: Callable[..., Any], key: str, group: str, consumer: str,
             limit: float = float("inf")) -> int:
    """XREADGROUP COUNT BATCH ``>`` + XACK of the IDs read until drained (or ``limit``)."""
    done = 0
    while done < limit:
        reply = execute("XREADGROUP", "GROUP", group, consumer, "COUNT", str(BATCH), "STREAMS",
                        key, ">")
        if not reply or not reply[0][1]:
            break
        execute("XACK", key, group, *[e[0] for e in reply[0][1]])
        done += len(reply[0][1])
    return done


def xadd(n: int, path: str, rng: random.Random) -> Result:
    return _loop(_engine().execute, _xadds(KEY, n), _xadds("warm", min(n, 20_000)), n)


def consume(n: int, path: str, rng: random.Random) -> Result:
    execute = _engine().execute
    _loop(execute, [*_numbered(n), ("XGROUP", "CREATE", KEY, GROUP, "0")], ops=0)
    return _timed(lambda: _consume(execute, KEY, GROUP, "c"))


def queue_batch(n: int, path: str, rng: random.Random | None) -> Result:
    """The durable queue in batches: put_many(BATCH) + get(BATCH) + one ack of their IDs, on
    a data dir (appendfsync everysec), n messages."""
    from streamkeep import Engine, StreamQueue

    engine = Engine.open(path, appendfsync="everysec", auto_aof_rewrite_percentage=0)
    q, batch = StreamQueue(engine, "jobs", consumer="bench"), [{"n": i} for i in range(BATCH)]

    def run(rounds: int) -> int:
        for _ in range(rounds):
            q.put_many(batch)
            q.ack(*[m.id for m in q.get(BATCH)])
        return rounds * BATCH

    run(max(n // BATCH // 10, 1))  # warm-up
    out = _timed(lambda: run(max(n // BATCH, 1)))
    pending = engine.execute("XPENDING", "jobs", "workers")[0]
    engine.close()
    if pending:
        raise AssertionError(f"queue_batch left {pending} messages pending")
    return out


def build_backlog(n: int, path: str, rng: random.Random) -> Result:
    """The backlog section's data set of n entries at path (untimed), by the checkout's own
    builder: one stream, a group three quarters behind."""
    from streamkeep.tools.bench.backlog import build as build_data_set

    build_data_set(path, n)
    return {"ops": n, "seconds": 0.0}


def catchup(n: int, path: str, rng: random.Random) -> Result:
    """The lagging group's catch-up over a data set of build_backlog's, backlog-memory 128mb
    (its nodes cold): XREADGROUP COUNT BATCH + XACK of n entries (appendfsync everysec)."""
    from streamkeep import Engine

    engine = Engine.open(path, backlog_memory=BACKLOG_BUDGET)
    out = _timed(lambda: _consume(engine.execute, BACKLOG_KEY, BACKLOG_GROUP, BACKLOG_CONSUMER,
                                  n))
    engine.close()
    return out


def xrange(n: int, path: str, rng: random.Random, command: str = "XRANGE") -> Result:
    """XRANGE (or XREVRANGE) COUNT BATCH from random starts over 2.5 x n entries: entries."""
    size, end = n * 5 // 2, "-" if command == "XREVRANGE" else "+"
    starts = [rng.randint(1, size) for _ in range(max(n // 20, 10))]
    return _loop(_engine().execute, [(command, KEY, f"{s}-1", end, "COUNT", str(BATCH))
                                     for s in starts], _numbered(size))


def xdel(n: int, path: str, rng: random.Random) -> Result:
    """Every other entry of the stream's middle half deleted, one XDEL each."""
    victims = [("XDEL", KEY, f"{i}-1") for i in range(n // 4, n * 3 // 4, 2)]
    rng.shuffle(victims)
    return _loop(_engine().execute, victims, _numbered(n), len(victims))


def _trims(n: int, how: str) -> Result:
    """XADD as the stream grows, an XTRIM every TRIM_EVERY of them (MAXLEN =, MAXLEN ~ or
    MINID: ``how``) keeping a TRIM_SHARE-th."""
    keep = max(n // TRIM_SHARE, BATCH)
    trim = (lambda i: ("XTRIM", KEY, "MINID", f"{max(i - keep, 0)}-0")) if how == "minid" else (
        lambda i: ("XTRIM", KEY, "MAXLEN", how, str(keep)))
    return _loop(_engine().execute, [argv for i in range(1, n + 1) for argv in (
        ("XADD", KEY, f"{i}-1", "f", "v"), *([trim(i)] if i % TRIM_EVERY == 0 else []))], ops=n)


def xautoclaim(n: int, path: str, rng: random.Random) -> Result:
    """A PEL of n/2 entries, walked by XAUTOCLAIM ... 0 cursor COUNT 100 (min-idle 0)."""
    execute, pending = _engine().execute, max(n // 2, BATCH)
    _loop(execute, [*_numbered(pending), ("XGROUP", "CREATE", KEY, GROUP, "0")], ops=0)
    for _ in range(0, pending, 1000):
        execute("XREADGROUP", "GROUP", GROUP, "c", "COUNT", "1000", "STREAMS", KEY, ">")

    def run() -> int:
        cursor, claimed = "0-0", 0
        while True:
            reply = execute("XAUTOCLAIM", KEY, GROUP, "c2", "0", cursor, "COUNT", str(BATCH))
            claimed += len(reply[1])
            cursor = reply[0] if isinstance(reply[0], str) else reply[0].decode()
            if cursor == "0-0":
                return claimed

    return _timed(run)


def build(n: int, path: str, rng: random.Random) -> Result:
    """n numbered entries in the data dir at path, compacted into a snapshot (untimed)."""
    engine = _engine(path)
    _loop(engine.execute, _numbered(n, SENSOR), ops=n)
    engine.compact()
    engine.close()
    return {"ops": n, "seconds": 0.0}


def _opened(path: str) -> tuple[Any, Result]:
    """Engine.open of a data dir, timed whole: the engine and {"seconds"}."""
    began = time.perf_counter()
    engine = _engine(path)
    return engine, {"seconds": time.perf_counter() - began}


def _closed(engine: Any, out: Result) -> Result:
    """``out`` with the stream's length as its ops (unless it has them), the engine closed."""
    out.setdefault("ops", int(engine.execute("XLEN", KEY)))
    engine.close()
    return out


def load(n: int, path: str, rng: random.Random) -> Result:
    """Engine.open of a data dir holding a snapshot: an eager load, timed whole."""
    return _closed(*_opened(path))


def cold_read(n: int, path: str, rng: random.Random) -> Result:
    """XRANGE COUNT 100 at random positions, the engine's backlog-memory 1 MB: cold nodes."""
    engine = _engine(path, backlog_memory=COLD_BUDGET)
    starts = [rng.randint(1, int(engine.execute("XLEN", KEY))) for _ in range(max(n // 20, 10))]
    out = _loop(engine.execute, [("XRANGE", KEY, f"{s}-1", "+", "COUNT", str(BATCH))
                                 for s in starts], ops=len(starts))
    engine.close()
    return out


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)


def _grown(build: Callable[[], tuple[Any, Result]]) -> Result:
    """``build()`` (an engine and its result), with the RSS growth over it (``rss_bytes``);
    the engine closed after."""
    from streamkeep import Engine  # noqa: F401  (the baseline holds the package)

    gc.collect()
    before = _rss()
    engine, out = build()
    gc.collect()
    out["rss_bytes"] = _rss() - before
    return _closed(engine, out)


def footprint_live(n: int, path: str, rng: random.Random) -> Result:
    """n sensor entries built live in a data dir (AOF only): RSS growth over the import."""
    def build() -> tuple[Any, Result]:
        engine = _engine(path)
        return engine, _loop(engine.execute, _xadds(KEY, n, SENSOR), ops=n)

    return _grown(build)


def footprint_restart(n: int, path: str, rng: random.Random) -> Result:
    """Engine.open of a data dir (snapshot load or AOF replay): RSS growth over the import."""
    return _grown(lambda: _opened(path))


def compact(n: int, path: str, rng: random.Random) -> Result:
    engine = _engine(path)
    engine.compact()
    engine.close()
    return {"ops": 0, "seconds": 0.0}


def _field(i: int) -> str:
    return f"field:{i:010d}"


def build_hash(n: int, path: str, rng: random.Random) -> Result:
    """A hash of n fields (``field:%010d`` -> ``value-N``) in the data dir at path, HSET
    HASH_BATCH fields a command, compacted into a snapshot (untimed)."""
    engine = _engine(path)
    for start in range(0, n, HASH_BATCH):
        engine.execute("HSET", HASH_KEY, *(x for i in range(start, min(n, start + HASH_BATCH))
                                          for x in (_field(i), f"value-{i}")))
    engine.compact()
    engine.close()
    return {"ops": n, "seconds": 0.0}


def hash_load(n: int, path: str, rng: random.Random) -> Result:
    """Engine.open of build_hash's data dir to its first HGET served, timed whole: the fields
    loaded, and the process's peak RSS (``peak_rss_mb``)."""
    began = time.perf_counter()
    engine = _engine(path)
    found = engine.execute("HGET", HASH_KEY, _field(rng.randrange(n)))
    seconds = time.perf_counter() - began
    fields = int(engine.execute("HLEN", HASH_KEY))
    engine.close()
    if found is None:
        raise SystemExit("hash_load: a field of the hash is missing")
    return {"ops": fields, "seconds": seconds,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


WORKLOADS: dict[str, Callable[[int, str, random.Random], Result]] = {
    **{f.__name__: f for f in (xadd, consume, xrange, xdel, xautoclaim, build, load, cold_read,
                               footprint_live, footprint_restart, compact, queue_batch,
                               build_backlog, catchup, build_hash, hash_load)},
    "xrevrange": lambda n, path, rng: xrange(n, path, rng, "XREVRANGE"),
    "trim_exact": lambda n, _path, _rng: _trims(n, "="),
    "trim_approx": lambda n, _path, _rng: _trims(n, "~"),
    "trim_minid": lambda n, _path, _rng: _trims(n, "minid")}


def main(argv: list[str]) -> int:
    workload, n, path, seed = argv[0], int(argv[1]), argv[2], int(argv[3])
    print(json.dumps(WORKLOADS[workload](n, path, random.Random(seed))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
