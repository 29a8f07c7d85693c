"""The eviction section's workloads: what maxmemory's accounting costs a write when the limit
is far away (two ``streamkeep serve`` children alike but for ``maxmemory``: 8gb noeviction and
0, under the same ``redis-benchmark -P 16`` load, SET and XADD), and a cache at its limit
(streamkeep and redis-server, each given ``maxmemory`` = its ``used_memory`` at start + the same
room for data, ``allkeys-lru``): ``redis-benchmark -t set -r 1,000,000`` filled to the limit,
then that SET rate there; and a read-through cache's hit rate (:func:`hit_rate`: the same
seeded Zipf sequence of GETs, a SET after each miss, through a pipelined client of our own)
on a fresh pair of servers, with the keys each holds (DBSIZE) and its ``used_memory``.
The section's summary table (:func:`summary`) gives the ranges over the repeats.
Must not touch: the section's declarations, the run's shared servers, engine internals.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyError, ReplyParser
from streamkeep.tools.bench.processes import RedisAofServer, StreamkeepServer
from streamkeep.tools.bench.server import (
    BENCH_TIMEOUT,
    SERVER_CLIENTS,
    bench_xadd,
    benchmark_tool,
    parse_benchmark_csv,
    ratio_range,
    redis_benchmark,
)
from streamkeep.tools.bench.workload import Measurement, Size, connect, info_fields, run_child
from streamkeep.tools.servers import HOST
from streamkeep.tools.text_width import Table

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

PIPELINE = 16
MB = 1 << 20
# The accounting rows: a limit far above what the run holds, and SET's keyspace.
FAR_LIMIT = "8gb"
ACCOUNTING_KEYSPACE = 100_000
# (ten times the section's requests: turns of seconds, a ratio read to a few percent)
ACCOUNTING_SCALE = 10
# The cache rows: the room each server gets for data above its used_memory at start.
DATA_ROOM = Size(64 * MB, quick=2 * MB)
POLICY = "allkeys-lru"
SET_KEYSPACE = 1_000_000  # redis-benchmark -r of the fill and of the SET rows
FILL_CHUNK = Size(200_000, quick=5_000)  # redis-benchmark -n of one fill run
FILL_CHUNKS = 40  # fill runs at most before a server is declared unable to reach its limit
# The read-through cache: Zipf(s) ranks over a keyspace, one value size, a fixed seed.
ZIPF_KEYS = Size(1_000_000, quick=100_000)
ZIPF_S = 1.0
ZIPF_SEED = 1
VALUE_BYTES = 256
ZIPF_REQUESTS = Size(1_000_000, quick=40_000)  # counted, after as many to warm the cache up
ZIPF_BATCH = 256  # GETs a round trip (then one round trip of the batch's misses' SETs)
REPLY_TIMEOUT = 60.0


# --- servers ------------------------------------------------------------------------------------

def info(client: Any, section: str) -> dict[str, str]:
    return info_fields(client.execute_command("INFO", section))


def used_memory(client: Any) -> int:
    return int(info(client, "memory")["used_memory"])


def evicted_keys(client: Any) -> int:
    return int(info(client, "stats").get("evicted_keys", 0))


@dataclass
class Limited:
    """A started server (``server``: the bench's, for redis_benchmark and bench_xadd) with
    its maxmemory settings; ``stop()`` and ``describe()`` for the run's shared resources."""

    server: Any
    label: str  # "streamkeep" or "redis-server"
    maxmemory: int | str
    policy: str
    at_start: int  # used_memory when it was configured
    how: str = ""  # what was done to it (its fill)
    runs: int = 0  # redis-benchmark SET runs against it (:func:`set_args`)

    def describe(self) -> list[str]:
        limit = self.maxmemory if isinstance(self.maxmemory, str) else (
            f"{self.maxmemory:,} B ({self.at_start / MB:.1f} MB used at start + "
            f"{(self.maxmemory - self.at_start) / MB:g} MB)")
        return [f"eviction: {self.label} {self.server.version()} on {HOST}:{self.server.port}, "
                f"maxmemory {limit}, {self.policy}{self.how}"]

    @property
    def limit_mb(self) -> float:
        """maxmemory in MB (a limit given as text, "8gb": not read back, 0)."""
        return self.maxmemory / MB if isinstance(self.maxmemory, int) else 0.0

    def stop(self) -> None:
        self.server.stop()


def limited(server: Any, label: str, maxmemory: int | str, policy: str) -> Limited:
    """``server`` started, then CONFIG SET maxmemory and maxmemory-policy (stopped when that
    fails)."""
    server.start()
    try:
        at_start = used_memory(server.client)
        server.client.config_set("maxmemory-policy", policy)
        server.client.config_set("maxmemory", str(maxmemory))
    except BaseException:
        server.stop()
        raise
    return Limited(server, label, maxmemory, policy, at_start)


def room(env: BenchEnv, server: Any, label: str) -> Limited:
    """``server`` started with maxmemory = its used_memory now + :data:`DATA_ROOM`, LRU."""
    made = limited(server, label, 0, POLICY)
    made.maxmemory = made.at_start + DATA_ROOM(env)
    try:
        made.server.client.config_set("maxmemory", str(made.maxmemory))
    except BaseException:
        made.stop()
        raise
    return made


def accounting_server(env: BenchEnv, limit: str) -> Any:
    """The section's ``streamkeep serve`` with maxmemory ``limit`` ("0" or far above what it
    will hold), noeviction: the two are alike otherwise."""
    return env.shared(f"eviction: streamkeep maxmemory {limit}", lambda: limited(
        StreamkeepServer(), "streamkeep", limit, "noeviction")).server


def accounting_set(env: BenchEnv, limit: str) -> Measurement:
    return redis_benchmark(env, accounting_server(env, limit), PIPELINE,
                           ("-t", "set", "-r", str(ACCOUNTING_KEYSPACE)), scale=ACCOUNTING_SCALE)


def accounting_xadd(env: BenchEnv, limit: str) -> Measurement:
    return bench_xadd(env, accounting_server(env, limit), PIPELINE, scale=ACCOUNTING_SCALE)


# --- a cache at its limit: SET --------------------------------------------------------------------

def set_args(made: Limited) -> tuple[str, ...]:
    """``-t set -r <keyspace>`` for the next SET run against ``made``: SET_KEYSPACE less the
    runs before it. redis-benchmark seeds its keys with time ^ pid, which two runs a second
    apart (pids one apart) share: the same seed would send the same keys again, all
    overwrites; another keyspace length makes other keys of the same seed."""
    made.runs += 1
    return ("-t", "set", "-r", str(SET_KEYSPACE - made.runs + 1))


def _benchmark(env: BenchEnv, server: Any, requests: int, args: Sequence[str]) -> float:
    """One untimed ``redis-benchmark -c 50 -P 16 -n requests`` run: its requests/s."""
    done, _seconds = run_child([benchmark_tool(env).path, "-h", HOST, "-p", str(server.port),
                                "-c", str(SERVER_CLIENTS), "-n", str(requests), "-P",
                                str(PIPELINE), "--csv", *args], timeout=BENCH_TIMEOUT)
    return parse_benchmark_csv(done.stdout)["rps"]


def filled(env: BenchEnv, made: Limited) -> Limited:
    """``made`` filled by ``redis-benchmark -t set`` runs of FILL_CHUNK (:func:`set_args`)
    until it evicted (at its limit); AssertionError when FILL_CHUNKS runs do not get it
    there."""
    client, chunk, sets = made.server.client, FILL_CHUNK(env), 0
    began = time.perf_counter()
    while evicted_keys(client) == 0:
        if sets >= FILL_CHUNKS * chunk:
            raise AssertionError(f"{made.label} did not reach its maxmemory after {sets:,} "
                                 f"SETs: it holds {client.dbsize():,} keys, used_memory "
                                 f"{used_memory(client):,} of {made.maxmemory:,}")
        _benchmark(env, made.server, chunk, set_args(made))
        sets += chunk
    seconds = time.perf_counter() - began
    made.how = (f", filled by {sets // chunk} x redis-benchmark -c {SERVER_CLIENTS} -P "
                f"{PIPELINE} -n {chunk:,} -t set -r {SET_KEYSPACE:,} (less the runs before "
                f"it) until it evicted ({sets:,} SETs in {seconds:.1f} s: "
                f"{client.dbsize():,} keys)")
    return made


def cache_server(env: BenchEnv, kind: str) -> Limited:
    """The section's cache at its limit: ``kind`` "streamkeep" (``streamkeep serve``, AOF
    everysec) or "redis-server" (--appendonly yes --appendfsync everysec), filled."""
    def make() -> Limited:
        server = StreamkeepServer() if kind == "streamkeep" else RedisAofServer()
        made = room(env, server, kind)
        try:
            return filled(env, made)
        except BaseException:
            made.stop()
            raise

    return env.shared(f"eviction: {kind} at its limit", make)  # type: ignore[no-any-return]


def held(client: Any) -> dict[str, float]:
    """The keys a server holds and its used_memory (MB)."""
    return {"keys": float(client.dbsize()), "used_mb": used_memory(client) / MB}


def limit_set(env: BenchEnv, kind: str) -> Measurement:
    """``redis-benchmark -c 50 -P 16 -t set`` (:func:`set_args`) against the filled cache: its
    rate at the limit; figures: the keys evicted and the new keys (not overwrites) per SET,
    the keys held after, used_memory."""
    made = cache_server(env, kind)
    client = made.server.client
    keys, evicted = client.dbsize(), evicted_keys(client)
    m = redis_benchmark(env, made.server, PIPELINE, set_args(made))
    evicted = evicted_keys(client) - evicted
    now = held(client)
    new = now["keys"] - keys + evicted  # each new key adds one, each eviction takes one
    sets = m.count or 1
    m.figures |= {"evicted_per_set": evicted / sets, "new_per_set": new / sets, **now,
                  "maxmemory_mb": made.limit_mb}
    return m


# --- a cache at its limit: the read-through hit rate ----------------------------------------------

@cache
def _cumulative(keys: int, s: float) -> tuple[float, ...]:
    return tuple(itertools.accumulate(1.0 / (rank ** s) for rank in range(1, keys + 1)))


def zipf_sequence(keys: int, count: int, s: float = ZIPF_S, seed: int = ZIPF_SEED) -> list[int]:
    """``count`` key indexes drawn with P(k) proportional to 1 / (k + 1) ** s, seeded."""
    return random.Random(seed).choices(range(keys), cum_weights=_cumulative(keys, s), k=count)


def get_command(i: int) -> bytes:
    return b"*2\r\n$3\r\nGET\r\n$16\r\nkey:%012d\r\n" % i


_VALUE = b"x" * VALUE_BYTES


def set_command(i: int) -> bytes:
    return b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%b\r\n" % (i, VALUE_BYTES, _VALUE)


class Pipelined:
    """One connection; :meth:`round_trip` sends requests at once and reads their replies."""

    def __init__(self, port: int) -> None:
        self.sock = connect(port, REPLY_TIMEOUT)
        self.parser = ReplyParser()

    def round_trip(self, payload: bytes, count: int) -> list[Any]:
        self.sock.sendall(payload)
        replies: list[Any] = []
        parser = self.parser
        while len(replies) < count:
            reply = parser.next()
            if reply is NEED_MORE:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise AssertionError("the server closed the connection")
                parser.feed(chunk)
            else:
                replies.append(reply)
        return replies

    def close(self) -> None:
        self.sock.close()


@dataclass
class ReadThrough:
    """What a read-through pass counted: GETs, their hits, SETs sent, error replies."""

    gets: int = 0
    hits: int = 0
    sets: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def read_through(client: Pipelined, keys: Sequence[int], batch: int = ZIPF_BATCH
                 ) -> ReadThrough:
    """GET each key, ``batch`` a round trip; then SET each key that missed (once per batch)
    in one round trip, as a read-through cache fills itself."""
    out = ReadThrough()
    began = time.perf_counter()
    for lo in range(0, len(keys), batch):
        part = keys[lo:lo + batch]
        replies = client.round_trip(b"".join(map(get_command, part)), len(part))
        missed: dict[int, None] = {}
        for key, reply in zip(part, replies, strict=True):
            if reply is None:
                missed[key] = None
            elif isinstance(reply, ReplyError):
                out.errors.append(f"GET: {reply}")
            else:
                out.hits += 1
        out.gets += len(part)
        if missed:
            replies = client.round_trip(b"".join(map(set_command, missed)), len(missed))
            out.sets += len(missed)
            out.errors += [f"SET: {r}" for r in replies if isinstance(r, ReplyError)]
    out.seconds = time.perf_counter() - began
    return out


@contextlib.contextmanager
def stopping(made: Limited) -> Iterator[Limited]:
    """``made``, stopped (its temp dir removed) when the block ends, however it ends."""
    try:
        yield made
    finally:
        made.stop()


def _one_cache(made: Limited, warm: Sequence[int], counted: Sequence[int]) -> dict[str, Any]:
    """The warm-up (which must leave the server evicting), then the counted pass."""
    client = made.server.client
    pipe = Pipelined(made.server.port)
    try:
        warmed = read_through(pipe, warm)
        if evicted_keys(client) == 0:
            raise AssertionError(
                f"{made.label} was not at its maxmemory after {len(warm):,} warm-up requests "
                f"({client.dbsize():,} keys, used_memory {used_memory(client):,} of "
                f"{made.maxmemory:,}): more requests or a smaller room")
        stats = info(client, "stats")
        before = (int(stats["keyspace_hits"]), int(stats["keyspace_misses"]),
                  int(stats["evicted_keys"]))
        run = read_through(pipe, counted)
        stats = info(client, "stats")
    finally:
        pipe.close()
    errors = warmed.errors + run.errors
    if errors:
        raise AssertionError(f"{made.label} answered {len(errors):,} errors, the first: "
                             f"{errors[0]}")
    return {"run": run, "server_hits": int(stats["keyspace_hits"]) - before[0],
            "server_misses": int(stats["keyspace_misses"]) - before[1],
            "evicted": int(stats["evicted_keys"]) - before[2], **held(client),
            "maxmemory_mb": made.limit_mb}


def hit_rate(env: BenchEnv) -> Measurement:
    """The same seeded Zipf sequence through :func:`read_through`, first against a fresh
    ``streamkeep serve``, then against a fresh redis-server (both AOF everysec, each with
    maxmemory = its used_memory at start + DATA_ROOM, allkeys-lru): warmed by the first half,
    the second half counted. The rate: the counted requests/s against streamkeep; figures:
    each hit rate (%), the points streamkeep's is below redis-server's, the keys each holds
    and its used_memory after, redis-server's rate."""
    keys, requests = ZIPF_KEYS(env), ZIPF_REQUESTS(env)
    sequence = zipf_sequence(keys, 2 * requests)
    warm, counted = sequence[:requests], sequence[requests:]
    got = {}
    for kind, make in (("streamkeep", StreamkeepServer), ("redis-server", RedisAofServer)):
        with stopping(room(env, make(), kind)) as made:
            got[kind] = _one_cache(made, warm, counted)
    mine, theirs = got["streamkeep"], got["redis-server"]
    pct = {kind: 100 * g["run"].hits / g["run"].gets for kind, g in got.items()}
    figures = {"hit_pct": pct["streamkeep"], "redis_hit_pct": pct["redis-server"],
               "points_below": pct["redis-server"] - pct["streamkeep"],
               "keys": mine["keys"], "redis_keys": theirs["keys"],
               "used_mb": mine["used_mb"], "redis_used_mb": theirs["used_mb"],
               "redis_rate": theirs["run"].gets / theirs["run"].seconds}
    notes = [f"{kind}: {g['run'].gets:,} GETs counted, {g['run'].hits:,} hits (the server's "
             f"keyspace_hits {g['server_hits']:,}, keyspace_misses {g['server_misses']:,}), "
             f"{g['run'].sets:,} SETs, {g['evicted']:,} keys evicted; then {g['keys']:,.0f} "
             f"keys, used_memory {g['used_mb']:.1f} MB of maxmemory {g['maxmemory_mb']:.1f} MB"
             for kind, g in got.items()]
    run = mine["run"]
    return Measurement(run.gets / run.seconds, count=run.gets, figures=figures, notes=notes)


# --- the section's summary: the ranges over the repeats ------------------------------------------

def _by_key(results: Sequence[Any]) -> dict[str, Any]:
    return {r.bench.key: r for r in results}


def _verdict(figures: Sequence[Any], found: Callable[[Any], bool]) -> tuple[str, str]:
    for fr in figures:
        if found(fr.figure) and fr.figure.target is not None:
            f = fr.figure
            target = f"{'<=' if f.at_most else '>='} {f.target:g}{'x' if f.unit == 'x' else ''}"
            return target, {"PASS": "met", "FAIL": "not met"}.get(fr.verdict, fr.verdict)
    return "", ""


# (workload, row, the row it is compared with)
RATIO_ROWS = (
    (f"SET -P {PIPELINE}: maxmemory {FAR_LIMIT} / 0", "eviction.set_accounting",
     "eviction.set_unlimited"),
    (f"XADD -P {PIPELINE}: maxmemory {FAR_LIMIT} / 0", "eviction.xadd_accounting",
     "eviction.xadd_unlimited"),
    (f"SET -P {PIPELINE} at the {POLICY} limit: streamkeep / redis-server", "eviction.lru_set",
     "eviction.redis_lru_set"),
)


def summary(results: Sequence[Any], figures: Sequence[Any]) -> Table | None:
    """The eviction section's figures with the range over the repeats (run i of a row against
    run i of the row it is compared with): the ratios, the hit rates and their difference,
    the keys held; None when the section did not run."""
    by_key = _by_key(results)
    rows = []
    for workload, key, other in RATIO_ROWS:
        mine, theirs = by_key.get(key), by_key.get(other)
        if not (mine and theirs and mine.rate and theirs.rate):
            continue
        span = ratio_range(mine.runs, theirs.runs)
        target, met = _verdict(figures, lambda f, key=key, other=other: (  # type: ignore[misc]
            f.numerator == key and f.denominator == other))
        rows.append([workload, f"{mine.rate:,.0f}/s", f"{theirs.rate:,.0f}/s",
                     f"{mine.rate / theirs.rate:.2f}x",
                     f"{span[0]:.2f}-{span[1]:.2f}x" if span else "-", target, met])
    lru = by_key.get("eviction.lru_set"), by_key.get("eviction.redis_lru_set")
    if all(r is not None and r.rate for r in lru):
        for name, what in (("keys", "keys held at the limit (DBSIZE)"),
                           ("evicted_per_set", "keys evicted per SET at the limit"),
                           ("new_per_set", "new keys (not overwrites) per SET")):
            a, b = (r.figures.get(name) for r in lru)  # type: ignore[union-attr]
            spans = [[run.get(name) for run in r.figure_runs] for r in lru]  # type: ignore[union-attr]
            if a is None or b is None:
                continue
            span = ratio_range(*spans)  # type: ignore[arg-type]
            rows.append([f"SET: {what}", _count(a), _count(b), f"{a / b:.2f}x" if b else "-",
                         f"{span[0]:.2f}-{span[1]:.2f}x" if span else "-", "", ""])
    hits = by_key.get("eviction.hit_rate")
    if hits is not None and hits.rate:
        runs = hits.figure_runs
        target, met = _verdict(figures, lambda f: f.numerator == "eviction.hit_rate"
                               and f.extra == "points_below")
        below = [run["points_below"] for run in runs]
        rows.append(["Zipf read-through: hit rate (the repeats' range)",
                     _pct_span([run["hit_pct"] for run in runs]),
                     _pct_span([run["redis_hit_pct"] for run in runs]),
                     f"{hits.figures['points_below']:.2f} points below",
                     f"{min(below):.2f} to {max(below):.2f} points",
                     target and f"{target} points", met])
        for what, name, fmt in (("keys held (DBSIZE)", "keys", _count),
                                ("used_memory after", "used_mb", lambda v: f"{v:.1f} MB")):
            ratios = [run[name] / run[f"redis_{name}"] for run in runs if run[f"redis_{name}"]]
            rows.append([f"Zipf read-through: {what}", fmt(hits.figures[name]),
                         fmt(hits.figures[f"redis_{name}"]),
                         f"{hits.figures[name] / hits.figures[f'redis_{name}']:.2f}x",
                         f"{min(ratios):.2f}-{max(ratios):.2f}x" if ratios else "-", "", ""])
        rows.append(["Zipf read-through: requests/s (one client)", f"{hits.rate:,.0f}/s",
                     f"{hits.figures['redis_rate']:,.0f}/s",
                     f"{hits.rate / hits.figures['redis_rate']:.2f}x", "", "", ""])
    if not rows:
        return None
    return Table(["eviction: workload", "streamkeep", "reference", "ratio", "repeats' range",
                  "target", "met"], rows, right={1, 2, 3, 4}, verdict=6)


def _pct_span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}%" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}%"


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3f}"
