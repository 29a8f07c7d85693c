"""The ``strings`` section: string commands and a script over the network, streamkeep against
redis-server with the same ``redis-benchmark`` load in one run.

Owns the section's workloads: ``redis-benchmark -t set`` and ``-t get`` over random keys
(``-r``, :data:`KEYSPACE`) at ``-P 1`` and ``-P 16`` (:func:`set_get`), and EVALSHA of
redis-py's lock-release script (:data:`RELEASE_SCRIPT`, SCRIPT LOADed on the server first;
:func:`evalsha`), whose row is skipped with "EVALSHA unsupported" on a server that refuses
SCRIPT LOAD. The servers (an everysec AOF each) and the redis-benchmark runs are the server
section's (:mod:`.server`), shared by the run.
Must not touch: the section declarations (rows, figures and targets: .sections), the processes'
start and stop (:mod:`.processes`), engine internals (the server is driven over RESP only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
from redis.lock import Lock

from streamkeep.tools.bench.server import (
    benchmark_measurement,
    benchmark_tool,
    run_redis_benchmark,
    server_requests,
)
from streamkeep.tools.bench.workload import Measurement, Skip

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

KEYSPACE = 100_000  # redis-benchmark -r: keys key:000000000000 .. key:000000099999
# Its own database (redis-benchmark --dbnum): the other sections' rows on the same servers
# (KEYS over database 0, for one) never see these keys.
DB = 9
RELEASE_SCRIPT: str = Lock.LUA_RELEASE_SCRIPT  # redis-py's Lock.release()
# The release of a lock on one of SET's keys, holding SET's value ("xxx", -d 3): the script
# deletes the keys SET wrote and finds the others free (GET, compare, DEL or 0), as releases go.
EVALSHA_ARGS = ("1", "key:__rand_int__", "xxx")


def row(server_of: Callable[[BenchEnv], Any], workload: Callable[..., Measurement],
        *args: Any) -> Callable[[BenchEnv], Measurement]:
    """A row's run: ``workload(env, server_of(env), *args)`` (the registry pairs each workload
    with both servers)."""

    def run(env: BenchEnv) -> Measurement:
        return workload(env, server_of(env), *args)

    return run


def set_get(env: BenchEnv, server: Any, test: str, pipeline: int) -> Measurement:
    """``redis-benchmark -t <test> -r KEYSPACE`` against ``server`` at ``-P pipeline``."""
    requests = server_requests(env.n, pipeline)
    row, cpu = run_redis_benchmark(server, benchmark_tool(env), requests, pipeline,
                                   ("--dbnum", str(DB), "-t", test, "-r", str(KEYSPACE)))
    return benchmark_measurement(server, test.upper(), row, cpu, requests, pipeline)


def load_release_script(server: Any) -> str:
    """SCRIPT LOAD the release script on ``server``: its SHA1; Skip when the server refuses."""
    try:
        sha: str = server.client.script_load(RELEASE_SCRIPT)
    except redis.ResponseError as err:
        # Redis's unknown-command line quotes the arguments: the script's text, not the reason.
        reason = str(err).split(", with args")[0]
        raise Skip(f"EVALSHA unsupported: SCRIPT LOAD answered {reason}") from None
    return sha


def evalsha(env: BenchEnv, server: Any, pipeline: int) -> Measurement:
    """``redis-benchmark -r KEYSPACE EVALSHA <sha> 1 key:__rand_int__ xxx`` against
    ``server`` at ``-P pipeline``, after SET's rows (whose keys the releases find)."""
    sha = load_release_script(server)
    requests = server_requests(env.n, pipeline)
    row, cpu = run_redis_benchmark(server, benchmark_tool(env), requests, pipeline,
                                   ("--dbnum", str(DB), "-r", str(KEYSPACE), "EVALSHA", sha,
                                    *EVALSHA_ARGS))
    return benchmark_measurement(server, "EVALSHA", row, cpu, requests, pipeline)


def describe(env: BenchEnv) -> list[str]:
    """How the section runs redis-benchmark (the servers are described by the server section's
    processes)."""
    return [f"strings: redis-benchmark -c 50 -t set|get -r {KEYSPACE:,} (-P 1 / -P 16), then "
            f"EVALSHA <sha of redis-py's Lock release script> {' '.join(EVALSHA_ARGS)} -r "
            f"{KEYSPACE:,} (-P 1 / -P 16), database {DB}, the same against streamkeep serve and "
            f"redis-server (AOF everysec both); requests/s as redis-benchmark reports them"]
