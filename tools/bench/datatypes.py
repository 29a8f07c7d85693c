"""The ``strings``, ``types`` and ``lists`` sections' workloads, on the run's two servers under
the same redis-benchmark load (each in a database of its own): SET, GET, EVALSHA of redis-py's
lock release; a command of each type (:class:`TypeCommand`: the commands preparing its data,
declared as data, and its check after); arq and RQ no-op tasks (:func:`framework`,
framework_child.py under the framework's own venv). Must not touch: engine internals, keys outside its databases.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from redis.lock import Lock

from streamkeep.tools import frameworks
from streamkeep.tools.bench.server import SERVER_CLIENTS, redis_benchmark, server_requests
from streamkeep.tools.bench.workload import Measurement, Size, Skip, child_json, pipelined
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

KEYSPACE = 100_000  # redis-benchmark -r: key:000000000000 .. key:000000099999
# Databases of their own (redis-benchmark --dbnum; the frameworks'): the other sections' rows
# on the same servers (KEYS over database 0, for one) never see these keys.
STRINGS_DB, DB, ARQ_DB, RQ_DB = 9, 10, 11, 12
RELEASE_SCRIPT: str = Lock.LUA_RELEASE_SCRIPT  # redis-py's Lock.release()
# The release of a lock on one of SET's keys, holding SET's value ("xxx", -d 3): the script
# deletes the keys SET wrote and finds the others free (GET, compare, DEL or 0).
EVALSHA_ARGS = ("1", "key:__rand_int__", "xxx")
PIPELINE = 16  # the types rows' redis-benchmark -P
PREPARED = 10_000  # members of the sorted set ZRANGEBYSCORE reads
HASH_FIELDS = 10  # fields of the hash HGETALL reads
CHUNK = 1_000  # members per command while preparing
LIBRARY, FUNCTION = "streamkeep_bench", "bench_hget"
# One redis.call: HGET of a field of the prepared hash.
LIBRARY_CODE = (f"#!lua name={LIBRARY}\n"
                f"redis.register_function('{FUNCTION}', function(keys, args) "
                f"return redis.call('HGET', keys[1], args[1]) end)")
ELEMENT = "xxx"  # redis-benchmark's own payload (-d 3) for its list tests
LRANGE_MIN = 600  # LRANGE_100's list: at least this, as for redis-benchmark's LRANGE_600
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "framework_child.py")
ARQ_POLL_DELAY = 0.01  # seconds between the arq worker's polls of its queue (arq's: 0.5)
RQ_WORKER = "Worker"  # rq.worker's class: what `rq worker` runs (a work horse forked per job)
FRAMEWORK_TIMEOUT = 600.0  # seconds one framework run may take
ARQ_TASKS = Size(0.2, per_n=True, least=100, most=2_000)  # an arq row's no-op tasks: N / 5
# An RQ row's no-op jobs: N / 20 (each waits for fsyncs, and RQ's Worker forks for each).
RQ_JOBS = Size(0.05, per_n=True, least=100, most=500)


def set_get(env: BenchEnv, server: Any, test: str, pipeline: int) -> Measurement:
    """``redis-benchmark -t <test> -r KEYSPACE`` against ``server`` at ``-P pipeline``."""
    return redis_benchmark(env, server, pipeline, ("--dbnum", str(STRINGS_DB), "-t", test, "-r",
                                                   str(KEYSPACE)))


def load_release_script(server: Any) -> str:
    """SCRIPT LOAD the release script on ``server``: its SHA1; Skip when the server refuses."""
    try:
        return str(server.client.script_load(RELEASE_SCRIPT))
    except redis.ResponseError as err:
        # Redis's unknown-command line quotes the arguments: the script's text, not the reason.
        reason = str(err).split(", with args")[0]
        raise Skip(f"EVALSHA unsupported: SCRIPT LOAD answered {reason}") from None


def evalsha(env: BenchEnv, server: Any, pipeline: int) -> Measurement:
    """``redis-benchmark -r KEYSPACE EVALSHA <sha> 1 key:__rand_int__ xxx`` against
    ``server`` at ``-P pipeline``, after SET's rows (whose keys the releases find)."""
    sha = load_release_script(server)
    return redis_benchmark(env, server, pipeline, ("--dbnum", str(STRINGS_DB), "-r",
                                                   str(KEYSPACE), "EVALSHA", sha,
                                                   *EVALSHA_ARGS))


def member(i: int) -> str:
    """redis-benchmark's ``element:__rand_int__`` for ``i`` (twelve digits)."""
    return f"element:{i:012d}"


def _members(key: str, verb: str, size: int, args: Callable[[int], tuple[Any, ...]],
             step: int = 1) -> list[tuple[Any, ...]]:
    """``key`` made again: DEL, then ``verb key`` with ``args(i)`` of CHUNK members a command,
    every ``step``-th of ``range(size)``."""
    return [("DEL", key), *((verb, key, *(a for i in range(lo, min(size, lo + CHUNK * step), step)
                                          for a in args(i)))
                            for lo in range(0, size, CHUNK * step))]


def _pop_margin(requests: int) -> int:
    """A popped key's size: more than the pops (-P may send a pipeline more per client)."""
    return requests + 2 * SERVER_CLIENTS * PIPELINE


@dataclass(frozen=True)
class TypeCommand:
    """One row's command: its redis-benchmark arguments (KEY stands for the key), the commands
    making the data it needs (``setup(key, requests)``, run before each run), and ``check``: a
    command giving the key's size, which must not be 0 after the run."""

    name: str  # the row key's last part
    label: str  # the row's workload, before the servers'
    args: tuple[str, ...]
    key: str
    setup: Callable[[str, int], list[tuple[Any, ...]]] = lambda key, _n: [("DEL", key)]
    check: str | None = None

    @property
    def verb(self) -> str:
        return self.args[0]

    def argv(self) -> tuple[str, ...]:
        return tuple(self.key if a == "KEY" else a for a in self.args)


def _zset(size: Callable[[int], int]) -> Callable[[str, int], list[tuple[Any, ...]]]:
    return lambda k, n: _members(k, "ZADD", size(n), lambda i: (i, member(i)))


def _list(size: Callable[[int], int]) -> Callable[[str, int], list[tuple[Any, ...]]]:
    return lambda k, n: _members(k, "RPUSH", size(n), lambda _i: (ELEMENT,))


def _hash(k: str, _n: int) -> list[tuple[Any, ...]]:
    return [("DEL", k), ("HSET", k, *(a for i in range(HASH_FIELDS)
                                      for a in (f"field{i}", f"value{i}")))]


COMMANDS: tuple[TypeCommand, ...] = (
    TypeCommand("zadd", "ZADD of a random member and score", ("ZADD", "KEY", "__rand_int__",
                                                              "element:__rand_int__"),
                "types:zadd"),
    TypeCommand("zrangebyscore", f"ZRANGEBYSCORE -inf +inf LIMIT 0 10 ({PREPARED:,} members)",
                ("ZRANGEBYSCORE", "KEY", "-inf", "+inf", "LIMIT", "0", "10"), "types:zset",
                _zset(lambda _n: PREPARED)),
    TypeCommand("zpopmin", "ZPOPMIN (a set bigger than the pops)", ("ZPOPMIN", "KEY"),
                "types:zpop", _zset(_pop_margin), check="ZCARD"),
    TypeCommand("hset", "HSET of a random field", ("HSET", "KEY", "element:__rand_int__", "xxx"),
                "types:hset"),
    TypeCommand("hgetall", f"HGETALL ({HASH_FIELDS} fields)", ("HGETALL", "KEY"), "types:hash",
                _hash),
    TypeCommand("sadd", "SADD of a random member", ("SADD", "KEY", "element:__rand_int__"),
                "types:sadd"),
    # The even half of the keyspace: SISMEMBER finds half of its members.
    TypeCommand("sismember", f"SISMEMBER (half of {KEYSPACE:,} random members in)",
                ("SISMEMBER", "KEY", "element:__rand_int__"), "types:set",
                lambda k, _n: _members(k, "SADD", KEYSPACE, lambda i: (member(i),), step=2)),
    TypeCommand("fcall", "FCALL of a one-redis.call function (HGET)",
                ("FCALL", FUNCTION, "1", "KEY", "field3"), "types:fcall",
                lambda k, n: [*_hash(k, n), ("FUNCTION", "LOAD", "REPLACE", LIBRARY_CODE)]),
)

LISTS: dict[str, TypeCommand] = {c.name: c for c in (
    TypeCommand("lpush", f"LPUSH of {ELEMENT}", ("LPUSH", "KEY", ELEMENT), "lists:lpush",
                check="LLEN"),
    TypeCommand("rpop", "RPOP (a list longer than the pops)", ("RPOP", "KEY"), "lists:rpop",
                _list(_pop_margin), check="LLEN"),
    # redis-benchmark's LRANGE tests read a list it LPUSHes -n elements of its payload into.
    TypeCommand("lrange_100", f"LRANGE 0 99 (a list of -n elements, at least {LRANGE_MIN})",
                ("LRANGE", "KEY", "0", "99"), "lists:lrange",
                _list(lambda n: max(LRANGE_MIN, n))),
)}
# The lists rows' (command, -P), in row order.
LIST_ROWS: tuple[tuple[TypeCommand, int], ...] = (
    (LISTS["lpush"], 16), (LISTS["rpop"], 16), (LISTS["lrange_100"], 16), (LISTS["lpush"], 1),
    (LISTS["rpop"], 1))


@contextmanager
def db_client(server: Any, db: int) -> Iterator[Any]:
    """A redis-py client of ``server``'s database ``db`` (the server's own client stays on 0)."""
    client = redis.Redis(host=HOST, port=server.port, db=db, socket_connect_timeout=5)
    try:
        yield client
    finally:
        client.close()


def command(env: BenchEnv, server: Any, cmd: TypeCommand, pipeline: int = PIPELINE
            ) -> Measurement:
    """``redis-benchmark -c 50 -P <pipeline> -r KEYSPACE --dbnum DB <cmd>`` against
    ``server``, its data prepared first and checked after, deleted at the end."""
    with db_client(server, DB) as client:
        try:
            pipelined(client, cmd.setup(cmd.key, server_requests(env.n, pipeline)))
        except redis.ResponseError as err:
            raise Skip(f"{cmd.verb} unsupported: preparing its data answered {err}") from None
        m = redis_benchmark(env, server, pipeline, ("--dbnum", str(DB), "-r", str(KEYSPACE),
                                                    *cmd.argv()))
        if cmd.check is not None and int(client.execute_command(cmd.check, cmd.key)) == 0:
            raise AssertionError(f"{cmd.key} is empty after the {cmd.verb}s: they ran out")
        client.delete(cmd.key)
    return m


class FrameworkVenv:
    """A framework's own venv, fetched and installed as the framework suites do (the same
    cache, :func:`.frameworks.cache_dir`); Skip ("<name> not available") when that fails.
    ``how`` ends its header line: how the section runs it."""

    def __init__(self, name: str, how: str, section: str) -> None:
        self.how, self.section = how, section
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


ARQ_HOW = (f"one worker in burst mode, poll_delay {ARQ_POLL_DELAY:g} s, arq's defaults "
           f"otherwise; database {ARQ_DB}, emptied before each run")
RQ_HOW = (f"one rq.worker.{RQ_WORKER} (a work horse forked per job, as `rq worker` runs) in "
          f"burst mode, RQ's defaults otherwise; database {RQ_DB}, emptied before each run")
# name -> (database, the child's last argument, the section, how it runs, its tasks)
FRAMEWORKS: dict[str, tuple[int, str, str, str, Size]] = {
    "arq": (ARQ_DB, str(ARQ_POLL_DELAY), "types", ARQ_HOW, ARQ_TASKS),
    "rq": (RQ_DB, RQ_WORKER, "lists", RQ_HOW, RQ_JOBS),
}


def framework(env: BenchEnv, server: Any, name: str) -> Measurement:
    """A framework's no-op tasks against ``server`` on an emptied database (emptied after
    too): enqueued one at a time by its child script, then drained by one worker, every task
    checked complete; the worker's tasks/s (figure ``enqueue_per_s``: the enqueueing's)."""
    db, last, section, how, tasks_for = FRAMEWORKS[name]
    venv = env.shared(f"{name} venv", lambda: FrameworkVenv(name, how, section))
    tasks = tasks_for(env)
    with db_client(server, db) as client:
        client.flushdb()
        result = child_json([venv.python, "-I", CHILD, name, HOST, str(server.port), str(db),
                             str(tasks), last], timeout=FRAMEWORK_TIMEOUT)
        client.flushdb()
    if result["complete"] != tasks or result["failed"]:
        raise AssertionError(f"{name} against {server.name}: {result['complete']} of {tasks} "
                             f"tasks complete, {result['failed']} failed")
    return Measurement(tasks / result["seconds"], count=tasks,
                       figures={"enqueue_per_s": tasks / result["enqueue_seconds"]})
