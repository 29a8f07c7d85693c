"""The ``types`` section: sorted sets, hashes, sets and Redis Functions over the network, and a
task framework on top, streamkeep against redis-server with the same load in one run.

Owns the section's workloads: ``redis-benchmark -P 16`` of one command of each type
(:data:`COMMANDS`, each with the data it needs prepared before every run and checked after,
in database :data:`DB`; :func:`command`), FUNCTION LOAD of a one-``redis.call`` library for
FCALL's row (skipped with "FCALL unsupported" on a server that refuses it); arq's no-op tasks
through one worker (:func:`arq`: ``arq_child.py`` under arq's own venv, built as the framework
suites build it, :mod:`.frameworks`; the row is skipped with "arq not available" when it
cannot be installed); and the section's summary (:func:`summary`: both servers' rates, their
ratio and its range over the repeats, against the targets). The servers (an everysec AOF
each) and the redis-benchmark runs are the server section's (:mod:`.server`), shared by the
run. The ``lists`` section (:mod:`.lists`) runs its commands through the same
:class:`TypeCommand` and :func:`command` (at its own ``-P``), its framework through
:class:`FrameworkVenv`, and prints its summary with :func:`section_summary`.
Must not touch: the section declarations (rows, figures and targets: .sections), the processes'
start and stop (:mod:`.processes`), engine internals (the servers are driven over RESP only),
keys outside its two databases.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from streamkeep.tools import temporaries
from streamkeep.tools.bench import frameworks
from streamkeep.tools.bench.server import (
    SERVER_CLIENTS,
    benchmark_measurement,
    benchmark_tool,
    run_redis_benchmark,
    server_requests,
)
from streamkeep.tools.bench.tables import Table
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

PIPELINE = 16  # redis-benchmark -P
KEYSPACE = 100_000  # redis-benchmark -r: element:000000000000 .. element:000000099999
# Databases of its own (redis-benchmark --dbnum; arq's): the strings section uses 9, and the
# other sections' rows on the same servers never see these keys.
DB = 10
ARQ_DB = 11
PREPARED = 10_000  # members of the sorted set ZRANGEBYSCORE reads
HASH_FIELDS = 10  # fields of the hash HGETALL reads
CHUNK = 1_000  # members per command while preparing
LIBRARY = "streamkeep_bench"
FUNCTION = "bench_hget"
# One redis.call: HGET of a field of the prepared hash.
LIBRARY_CODE = (f"#!lua name={LIBRARY}\n"
                f"redis.register_function('{FUNCTION}', function(keys, args) "
                f"return redis.call('HGET', keys[1], args[1]) end)")
ARQ_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arq_child.py")
ARQ_POLL_DELAY = 0.01  # seconds between the worker's polls of its queue (arq's default: 0.5)
ARQ_TIMEOUT = 600.0  # seconds one arq run may take


def member(i: int) -> str:
    """redis-benchmark's ``element:__rand_int__`` for ``i`` (twelve digits)."""
    return f"element:{i:012d}"


# --- the data each command runs on ---------------------------------------------------------------


def _sorted_set(client: Any, key: str, size: int) -> None:
    client.delete(key)
    pipe = client.pipeline(transaction=False)
    for start in range(0, size, CHUNK):
        pipe.zadd(key, {member(i): i for i in range(start, min(size, start + CHUNK))})
    pipe.execute()


def _hash(client: Any, key: str) -> None:
    client.delete(key)
    client.hset(key, mapping={f"field{i}": f"value{i}" for i in range(HASH_FIELDS)})


def _even_set(client: Any, key: str) -> None:
    """The even half of the keyspace: SISMEMBER finds half of its members."""
    client.delete(key)
    pipe = client.pipeline(transaction=False)
    for start in range(0, KEYSPACE, 2 * CHUNK):
        pipe.sadd(key, *(member(i) for i in range(start, min(KEYSPACE, start + 2 * CHUNK), 2)))
    pipe.execute()


def _library(client: Any, key: str) -> None:
    _hash(client, key)
    try:
        client.function_load(LIBRARY_CODE, replace=True)
    except redis.ResponseError as err:
        raise Skip(f"FCALL unsupported: FUNCTION LOAD answered {err}") from None


def _pop_margin(requests: int) -> int:
    """ZPOPMIN's set: more members than the pops (-P may send a pipeline more per client)."""
    return requests + 2 * SERVER_CLIENTS * PIPELINE


def _left_members(client: Any, key: str) -> None:
    if int(client.zcard(key)) == 0:
        raise AssertionError(f"{key} ran out: the last ZPOPMINs popped nothing")


@dataclass(frozen=True)
class TypeCommand:
    """One row's command: its redis-benchmark arguments, the data it needs (made before each
    run: ``prepare(client, key, requests)``) and a check of what is left after."""

    name: str  # the row key's last part
    label: str  # the row's workload, before the servers'
    args: tuple[str, ...]  # KEY stands for the key
    key: str
    prepare: Callable[[Any, str, int], None]
    check: Callable[[Any, str], None] | None = None

    @property
    def verb(self) -> str:
        return self.args[0]

    def argv(self) -> tuple[str, ...]:
        return tuple(self.key if a == "KEY" else a for a in self.args)


COMMANDS: tuple[TypeCommand, ...] = (
    TypeCommand("zadd", "ZADD of a random member and score", ("ZADD", "KEY", "__rand_int__",
                                                              "element:__rand_int__"),
                "types:zadd", lambda c, k, _n: c.delete(k)),
    TypeCommand("zrangebyscore", f"ZRANGEBYSCORE -inf +inf LIMIT 0 10 ({PREPARED:,} members)",
                ("ZRANGEBYSCORE", "KEY", "-inf", "+inf", "LIMIT", "0", "10"), "types:zset",
                lambda c, k, _n: _sorted_set(c, k, PREPARED)),
    TypeCommand("zpopmin", "ZPOPMIN (a set bigger than the pops)", ("ZPOPMIN", "KEY"),
                "types:zpop", lambda c, k, n: _sorted_set(c, k, _pop_margin(n)),
                check=_left_members),
    TypeCommand("hset", "HSET of a random field", ("HSET", "KEY", "element:__rand_int__", "xxx"),
                "types:hset", lambda c, k, _n: c.delete(k)),
    TypeCommand("hgetall", f"HGETALL ({HASH_FIELDS} fields)", ("HGETALL", "KEY"), "types:hash",
                lambda c, k, _n: _hash(c, k)),
    TypeCommand("sadd", "SADD of a random member", ("SADD", "KEY", "element:__rand_int__"),
                "types:sadd", lambda c, k, _n: c.delete(k)),
    TypeCommand("sismember", f"SISMEMBER (half of {KEYSPACE:,} random members in)",
                ("SISMEMBER", "KEY", "element:__rand_int__"), "types:set",
                lambda c, k, _n: _even_set(c, k)),
    TypeCommand("fcall", "FCALL of a one-redis.call function (HGET)",
                ("FCALL", FUNCTION, "1", "KEY", "field3"), "types:fcall",
                lambda c, k, _n: _library(c, k)),
)


@contextmanager
def db_client(server: Any, db: int) -> Iterator[Any]:
    """A redis-py client of ``server``'s database ``db`` (the server's own client stays on 0)."""
    client = redis.Redis(host=HOST, port=server.port, db=db, socket_connect_timeout=5)
    try:
        yield client
    finally:
        client.close()


def command(env: BenchEnv, server: Any, cmd: TypeCommand,
            pipeline: int = PIPELINE) -> Measurement:
    """``redis-benchmark -c 50 -P <pipeline> -r KEYSPACE --dbnum DB <cmd>`` against ``server``
    (``-P 16`` unless told), its data prepared first and checked after; the prepared key
    deleted at the end."""
    requests = server_requests(env.n, pipeline)
    tool = benchmark_tool(env)
    with db_client(server, DB) as client:
        try:
            cmd.prepare(client, cmd.key, requests)
        except redis.ResponseError as err:
            raise Skip(f"{cmd.verb} unsupported: preparing its data answered {err}") from None
        row, cpu = run_redis_benchmark(server, tool, requests, pipeline,
                                       ("--dbnum", str(DB), "-r", str(KEYSPACE), *cmd.argv()))
        if cmd.check is not None:
            cmd.check(client, cmd.key)
        client.delete(cmd.key)
    return benchmark_measurement(server, cmd.verb, row, cpu, requests, pipeline)


# --- a task framework: arq -----------------------------------------------------------------------


def framework_tasks(n: int) -> int:
    """No-op tasks of a framework row for a run of N: a fifth, between 100 and 2,000."""
    return max(100, min(n // 5, 2_000))


class FrameworkVenv:
    """A framework's own venv, fetched and installed as the framework suites do (the same cache:
    :func:`.frameworks.cache_dir`); Skip ("<name> not available") when that fails. ``how``
    (the header line's end: how the section runs it) is arq's row's unless told."""

    def __init__(self, name: str, how: str | None = None, section: str = "types") -> None:
        self.how = how if how is not None else (
            f"one worker in burst mode, poll_delay {ARQ_POLL_DELAY:g} s, arq's defaults "
            f"otherwise; database {ARQ_DB}, emptied before each run")
        self.section = section
        if name not in frameworks.SUITES:
            raise Skip(f"{name} not available: not one of the framework suites")
        self.suite = frameworks.SUITES[name]
        self.cache = frameworks.cache_dir()
        try:
            self.cache.mkdir(parents=True, exist_ok=True)
            src = frameworks.fetch_source(self.suite, self.cache, None)
            self.venv = frameworks.ensure_venv(self.suite, self.cache, src)
        except subprocess.CalledProcessError as exc:
            tool = os.path.basename(str(exc.cmd[0] if isinstance(exc.cmd, list) else exc.cmd))
            raise Skip(f"{name} not available: fetching or installing it failed ({tool} exited "
                       f"{exc.returncode})") from None
        except (OSError, ValueError) as exc:
            raise Skip(f"{name} not available: {exc}") from None
        self.python = str(self.venv / "bin" / "python")

    def describe(self) -> list[str]:
        return [f"{self.section}: {self.suite.name} {self.suite.version} in its own venv "
                f"({self.venv}), pinned as the framework suites pin it; {self.how}"]

    def stop(self) -> None:
        pass


def run_framework_child(name: str, python: str, child: str, args: Sequence[str], server: Any,
                        db: int, tasks: int, timeout: float) -> tuple[float, float]:
    """Run a framework row's child script (``<python> -I <child> HOST PORT DB TASKS *args``)
    against ``server`` on an emptied database ``db`` (emptied after too) and check what it
    printed: every one of ``tasks`` complete, none failed. (the worker's tasks/s, the
    enqueueing's)."""
    with db_client(server, db) as client:
        client.flushdb()
        done = subprocess.run([python, "-I", child, HOST, str(server.port), str(db), str(tasks),
                               *args], capture_output=True, text=True, timeout=timeout,
                              **temporaries.child_options())
        client.flushdb()
    if done.returncode != 0:
        raise AssertionError(f"{name} against {server.name} exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["complete"] != tasks or result["failed"]:
        raise AssertionError(f"{name} against {server.name}: {result['complete']} of {tasks} "
                             f"tasks complete, {result['failed']} failed")
    return tasks / result["seconds"], tasks / result["enqueue_seconds"]


def arq(env: BenchEnv, server: Any) -> Measurement:
    """arq no-op tasks against ``server``: enqueued one at a time, then drained by one worker;
    the worker's tasks/s (figure ``enqueue_per_s``: the enqueueing's rate)."""
    venv: FrameworkVenv = env.shared("arq venv", lambda: FrameworkVenv("arq"))
    tasks = framework_tasks(env.n)
    rate, enqueue = run_framework_child("arq", venv.python, ARQ_CHILD, [str(ARQ_POLL_DELAY)],
                                        server, ARQ_DB, tasks, ARQ_TIMEOUT)
    return Measurement(rate, count=tasks, figures={"enqueue_per_s": enqueue},
                       notes=[f"arq, {server.name}: {tasks:,} no-op tasks enqueued at "
                              f"{enqueue:,.0f}/s (one at a time), drained by one worker at "
                              f"{rate:,.0f}/s"])


# --- the section's summary -----------------------------------------------------------------------


def _pairs(results: Sequence[Any], section: str) -> list[tuple[Any, Any]]:
    """The section's (streamkeep, redis-server) rows that ran, in row order: a row
    ``<section>.X`` with its reference ``<section>.redis_X``."""
    by_key = {r.bench.key: r for r in results}
    own, reference = f"{section}.", f"{section}.redis_"
    return [(r, by_key[reference + r.bench.key[len(own):]]) for r in results
            if r.bench.key.startswith(own) and not r.bench.key.startswith(reference)
            and reference + r.bench.key[len(own):] in by_key]


def ratio_range(mine: Sequence[float], theirs: Sequence[float]) -> tuple[float, float] | None:
    """The lowest and highest ratio of the repeats, run i against run i; None without runs."""
    ratios = [a / b for a, b in zip(mine, theirs, strict=False) if b]
    return (min(ratios), max(ratios)) if ratios else None


def section_summary(results: Sequence[Any], figures: Sequence[Any],
                    section: str) -> Table | None:
    """streamkeep against redis-server, row by row, for a section whose rows come in pairs
    (``<section>.X`` and ``<section>.redis_X``): the best rates, their ratio, the ratios' range
    over the repeats (run i of one against run i of the other), the target met or not; None
    when the section did not run. ``results`` and ``figures`` are the runner's."""
    pairs = _pairs(results, section)
    if not pairs:
        return None
    rows = []
    for mine, theirs in pairs:
        label = mine.bench.workload.rsplit(": ", 1)[0]
        span = ratio_range(mine.runs, theirs.runs)
        ratio = f"{mine.rate / theirs.rate:.2f}x" if mine.rate and theirs.rate else "-"
        target = verdict = ""
        for fr in figures:
            if fr.figure.numerator == mine.bench.key and fr.figure.target is not None:
                target = f">= {fr.figure.target:g}x"
                verdict = {"PASS": "met", "FAIL": "not met"}.get(fr.verdict, fr.verdict)
        rows.append([label,
                     f"{mine.rate:,.0f}/s" if mine.rate else "-",
                     f"{theirs.rate:,.0f}/s" if theirs.rate else "-", ratio,
                     f"{span[0]:.2f}-{span[1]:.2f}x" if span else "-", target, verdict])
    return Table([f"{section}: workload", "streamkeep", "redis-server", "ratio",
                  "repeats' range", "target", "met"], rows, right={1, 2, 3, 4}, verdict=6)


def summary(results: Sequence[Any], figures: Sequence[Any]) -> Table | None:
    """The types section's summary (:func:`section_summary`)."""
    return section_summary(results, figures, "types")


def describe(env: BenchEnv) -> list[str]:
    """How the section runs redis-benchmark (the servers are described by the server section's
    processes, arq's venv by its own line)."""
    return [f"types: redis-benchmark -c {SERVER_CLIENTS} -P {PIPELINE} -n "
            f"{server_requests(env.n, PIPELINE):,} -r {KEYSPACE:,} --dbnum {DB}: "
            + "; ".join(" ".join(c.argv()) for c in COMMANDS)
            + f" (the read and pop keys prepared before each run; FUNCTION LOAD of library "
            f"{LIBRARY} first), the same against streamkeep serve and redis-server (AOF "
            f"everysec both); requests/s as redis-benchmark reports them; arq: "
            f"{framework_tasks(env.n):,} no-op tasks per run"]
