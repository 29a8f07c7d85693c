"""The workloads of the sections that compare checkouts (``nodes``, ``consume``), as a script
any checkout's interpreter can run.

Owns what each of those sections' embedded rows does and times: ``<python> -I nodes_child.py
WORKLOAD N PATH SEED`` runs one workload in that process and prints one JSON line
(``{"ops": ..., "seconds": ..., ...}``). It imports the public API alone (``from streamkeep
import Engine``: ``Engine.open()``, ``.execute(...)``, ``.compact()``, ``.close()``), so the
same code measures whichever streamkeep the interpreter has installed: run with another
checkout's ``.venv/bin/python``, it exercises that checkout's engine. (``-I`` keeps this
directory off ``sys.path``: its modules would shadow the standard library's.)
The one exception: ``build_backlog`` writes the backlog section's data set with that
checkout's own builder (``streamkeep.tools.bench.backlog.build``: its snapshot format is that
checkout's; building it through XADD would take an older checkout many minutes and gigabytes).
Must not touch: anything of streamkeep but its public API (no other ``streamkeep.tools``
import), the registry, how rows are compared (the section modules, tools/bench/nodes.py and
tools/bench/consume.py).
"""

from __future__ import annotations

import gc
import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

KEY = "bench"
GROUP = "g"
BATCH = 100  # COUNT of the reads and claims
TRIM_EVERY = 10  # XADDs between two trims as the stream grows
TRIM_SHARE = 10  # the trims keep a tenth of the entries
COLD_BUDGET = 1 << 20  # backlog-memory of the cold reads: 1 MB, most nodes cold
BACKLOG_BUDGET = 128 << 20  # backlog-memory of the catch-up over a cold backlog (the backlog
# section's cold mode), whose data set names its stream, group and consumer so:
BACKLOG_KEY, BACKLOG_GROUP, BACKLOG_CONSUMER = "backlog", "g", "c"


def _engine(path: str | None = None, **config: Any) -> Any:
    from streamkeep import Engine

    if path is None:
        return Engine.open()
    return Engine.open(path, appendfsync="no", auto_aof_rewrite_percentage=0, **config)


def _numbered(execute: Callable[..., Any], key: str, n: int, fields: tuple[str, ...]) -> None:
    """n entries with IDs 1-1 .. n-1 (untimed set-up): a random start is a random number."""
    for i in range(1, n + 1):
        execute("XADD", key, f"{i}-1", *fields)


def _timed(ops: int, began: float, **extra: Any) -> dict[str, Any]:
    return {"ops": ops, "seconds": time.perf_counter() - began, **extra}


def xadd(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    execute = _engine().execute
    for _ in range(min(n, 20_000)):  # warm-up, on another key
        execute("XADD", "warm", "*", "f", "v")
    began = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "f", "v")
    return _timed(n, began)


def consume(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    execute = _engine().execute
    _numbered(execute, KEY, n, ("f", "v"))
    execute("XGROUP", "CREATE", KEY, GROUP, "0")
    done = 0
    began = time.perf_counter()
    while True:
        reply = execute("XREADGROUP", "GROUP", GROUP, "c", "COUNT", str(BATCH), "STREAMS", KEY,
                        ">")
        if not reply or not reply[0][1]:
            break
        entries = reply[0][1]
        execute("XACK", KEY, GROUP, *[e[0] for e in entries])
        done += len(entries)
    return _timed(done, began)


def queue_batch(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """The durable queue in batches: put_many(BATCH) + get(BATCH) + one ack of their IDs, on
    a data dir (appendfsync everysec), n messages."""
    from streamkeep import Engine, StreamQueue

    engine = Engine.open(path, appendfsync="everysec", auto_aof_rewrite_percentage=0)
    q = StreamQueue(engine, "jobs", consumer="bench")
    batch = [{"n": i} for i in range(BATCH)]

    def run(rounds: int) -> None:
        for _ in range(rounds):
            q.put_many(batch)
            q.ack(*[m.id for m in q.get(BATCH)])

    run(max(n // BATCH // 10, 1))  # warm-up
    began = time.perf_counter()
    run(max(n // BATCH, 1))
    out = _timed(max(n // BATCH, 1) * BATCH, began)
    pending = engine.execute("XPENDING", "jobs", "workers")[0]
    engine.close()
    if pending:
        raise AssertionError(f"queue_batch left {pending} messages pending")
    return out


def build_backlog(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """The backlog section's data set of n entries at path (untimed), by the checkout's own
    builder: one stream, a group three quarters behind."""
    from streamkeep.tools.bench.backlog import build as build_data_set

    build_data_set(path, n)
    return {"ops": n, "seconds": 0.0}


def catchup(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """The lagging group's catch-up over a data set of build_backlog's, backlog-memory 128mb
    (its nodes cold): XREADGROUP COUNT BATCH + XACK of n entries, on the default appendfsync
    (everysec)."""
    from streamkeep import Engine

    engine = Engine.open(path, backlog_memory=BACKLOG_BUDGET)
    execute = engine.execute
    done = 0
    began = time.perf_counter()
    while done < n:
        reply = execute("XREADGROUP", "GROUP", BACKLOG_GROUP, BACKLOG_CONSUMER, "COUNT",
                        str(BATCH), "STREAMS", BACKLOG_KEY, ">")
        if not reply or not reply[0][1]:
            break
        ids = [entry[0] for entry in reply[0][1]]
        execute("XACK", BACKLOG_KEY, BACKLOG_GROUP, *ids)
        done += len(ids)
    out = _timed(done, began)
    engine.close()
    return out


def _ranges(n: int, rng: random.Random, reverse: bool) -> dict[str, Any]:
    size = n * 5 // 2
    execute = _engine().execute
    _numbered(execute, KEY, size, ("f", "v"))
    starts = [rng.randint(1, size) for _ in range(max(n // 20, 10))]
    got = 0
    began = time.perf_counter()
    for s in starts:
        if reverse:
            got += len(execute("XREVRANGE", KEY, f"{s}-1", "-", "COUNT", str(BATCH)))
        else:
            got += len(execute("XRANGE", KEY, f"{s}-1", "+", "COUNT", str(BATCH)))
    return _timed(got, began)


def xrange(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    return _ranges(n, rng, reverse=False)


def xrevrange(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    return _ranges(n, rng, reverse=True)


def xdel(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """Every other entry of the stream's middle half deleted, one XDEL each."""
    execute = _engine().execute
    _numbered(execute, KEY, n, ("f", "v"))
    victims = [f"{i}-1" for i in range(n // 4, n * 3 // 4, 2)]
    rng.shuffle(victims)
    began = time.perf_counter()
    for sid in victims:
        execute("XDEL", KEY, sid)
    return _timed(len(victims), began)


def _trims(n: int, how: str) -> dict[str, Any]:
    execute = _engine().execute
    keep = max(n // TRIM_SHARE, BATCH)
    began = time.perf_counter()
    for i in range(1, n + 1):
        execute("XADD", KEY, f"{i}-1", "f", "v")
        if i % TRIM_EVERY == 0:
            if how == "minid":
                execute("XTRIM", KEY, "MINID", f"{max(i - keep, 0)}-0")
            else:
                execute("XTRIM", KEY, "MAXLEN", how, str(keep))
    return _timed(n, began)


def trim_exact(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    return _trims(n, "=")


def trim_approx(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    return _trims(n, "~")


def trim_minid(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    return _trims(n, "minid")


def xautoclaim(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """A PEL of n/2 entries, walked by XAUTOCLAIM ... 0 cursor COUNT 100 (min-idle 0)."""
    execute = _engine().execute
    pending = max(n // 2, BATCH)
    _numbered(execute, KEY, pending, ("f", "v"))
    execute("XGROUP", "CREATE", KEY, GROUP, "0")
    for _ in range(0, pending, 1000):
        execute("XREADGROUP", "GROUP", GROUP, "c", "COUNT", "1000", "STREAMS", KEY, ">")
    cursor, claimed = "0-0", 0
    began = time.perf_counter()
    while True:
        reply = execute("XAUTOCLAIM", KEY, GROUP, "c2", "0", cursor, "COUNT", str(BATCH))
        claimed += len(reply[1])
        cursor = reply[0] if isinstance(reply[0], str) else reply[0].decode()
        if cursor == "0-0":
            break
    return _timed(claimed, began)


def build(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """n numbered entries in the data dir at path, compacted into a snapshot (untimed)."""
    engine = _engine(path)
    _numbered(engine.execute, KEY, n, ("sensor-id", "1234", "temperature", "19.8"))
    engine.compact()
    engine.close()
    return {"ops": n, "seconds": 0.0}


def load(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """Engine.open of a data dir holding a snapshot: an eager load, timed whole."""
    began = time.perf_counter()
    engine = _engine(path)
    seconds = time.perf_counter() - began
    size = int(engine.execute("XLEN", KEY))
    engine.close()
    return {"ops": size, "seconds": seconds}


def cold_read(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """XRANGE COUNT 100 at random positions, the engine's backlog-memory 1 MB: cold nodes."""
    engine = _engine(path, backlog_memory=COLD_BUDGET)
    execute = engine.execute
    size = int(execute("XLEN", KEY))
    starts = [rng.randint(1, size) for _ in range(max(n // 20, 10))]
    began = time.perf_counter()
    for s in starts:
        execute("XRANGE", KEY, f"{s}-1", "+", "COUNT", str(BATCH))
    out = _timed(len(starts), began)
    engine.close()
    return out


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def footprint_live(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """n sensor entries built live in a data dir (AOF only): RSS growth over the import."""
    from streamkeep import Engine  # noqa: F401  (the baseline holds the package)

    gc.collect()
    before = _rss()
    engine = _engine(path)
    execute = engine.execute
    began = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "sensor-id", "1234", "temperature", "19.8")
    seconds = time.perf_counter() - began
    gc.collect()
    grown = _rss() - before
    engine.close()
    return {"ops": n, "seconds": seconds, "rss_bytes": grown}


def footprint_restart(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    """Engine.open of a data dir (snapshot load or AOF replay): RSS growth over the import."""
    from streamkeep import Engine  # noqa: F401

    gc.collect()
    before = _rss()
    began = time.perf_counter()
    engine = _engine(path)
    seconds = time.perf_counter() - began
    gc.collect()
    grown = _rss() - before
    size = int(engine.execute("XLEN", KEY))
    engine.close()
    return {"ops": size, "seconds": seconds, "rss_bytes": grown}


def compact(n: int, path: str, rng: random.Random) -> dict[str, Any]:
    engine = _engine(path)
    engine.compact()
    engine.close()
    return {"ops": 0, "seconds": 0.0}


WORKLOADS: dict[str, Callable[[int, str, random.Random], dict[str, Any]]] = {
    f.__name__: f for f in (xadd, consume, xrange, xrevrange, xdel, trim_exact, trim_approx,
                            trim_minid, xautoclaim, build, load, cold_read, footprint_live,
                            footprint_restart, compact, queue_batch, build_backlog, catchup)}


def main(argv: list[str]) -> int:
    workload, n, path, seed = argv[0], int(argv[1]), argv[2], int(argv[3])
    print(json.dumps(WORKLOADS[workload](n, path, random.Random(seed))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
