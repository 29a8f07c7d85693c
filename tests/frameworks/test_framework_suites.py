"""The task frameworks' own test suites (streaq, arq, pydocket, taskiq-redis, RQ, Celery's
t/integration) against streamkeep: every test that passes against redis-server passes against
`streamkeep serve` and against a shared directory's Unix socket. The cluster suites (redis-py's
cluster tests, pydocket's and taskiq-redis's in their cluster mode): every test that passes
against a redis-server cluster (three primaries and three replicas, made by `redis-cli
--cluster create`) passes against a streamkeep cluster of the same shape, but those the suite
names out of scope, each with its reason. tests/support/framework_suites.py does the work
(sources and venvs in a cache outside the checkout, the servers, the table); this module is how
the slow run calls it.

Slow: each suite installs its framework once (network) and runs for minutes. Without network
access the source cannot be fetched and the test is skipped; STREAMKEEP_SUITES_SOURCES
("streaq=/path/to/git/repo,taskiq-redis=/path/to/repo@REF,...") gives sources from disk instead
(`@REF`: that git ref instead of the pinned tag): redis-py-cluster's from a clone of
redis-py (its tag v8.1.0), taskiq-redis-cluster's like taskiq-redis's."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from tests.support import framework_suites as run_suites

pytestmark = [pytest.mark.slow, pytest.mark.redis]


def _sources() -> tuple[dict[str, Path], dict[str, str]]:
    spec = os.environ.get("STREAMKEEP_SUITES_SOURCES", "")
    return run_suites.parse_sources([s for s in spec.split(",") if "=" in s])


# Celery's integration suite takes ~20 minutes a server on two busy cores, redis-py's cluster
# tests 8 to 16; the others minutes.
SUITE_TIMEOUTS = {"celery": 2400.0, "redis-py-cluster": 2400.0}


@pytest.mark.timeout(3 * 2400 + 600)
@pytest.mark.parametrize("name", sorted(run_suites.SUITES))
def test_suite_passes_where_redis_server_does(name: str) -> None:
    cache = Path(os.environ.get("STREAMKEEP_SUITES_CACHE", run_suites.DEFAULT_CACHE))
    sources, refs = _sources()
    try:
        results = run_suites.run([name], None, cache, sources,
                                 suite_timeout=SUITE_TIMEOUTS.get(name, 600.0),
                                 test_timeout=30.0, refs=refs)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"{name}'s source or dependencies could not be fetched: {exc}")
    table = run_suites.print_table(results, {name: run_suites.SUITES[name].note})
    by_server = {r.server: r for r in results}
    excluded = run_suites.out_of_scope(name)
    for server, leg in by_server.items():
        if server not in run_suites.BASELINES or leg.skipped_reason:
            continue
        baseline = by_server[run_suites.BASELINES[server]]
        assert baseline.count("passed") > 0, \
            f"{name} passed nothing against {baseline.server}:\n{table}"
        lost = sorted(n for n, o in baseline.outcomes.items()
                      if o == "passed" and leg.outcomes.get(n) != "passed"
                      and n not in excluded)
        assert not lost, (f"{name}: {len(lost)} tests pass against {baseline.server} but "
                          f"not against {server}:\n{table}")



def _listening(address: tuple[str, int] | str) -> bool:
    assert isinstance(address, tuple)
    with socket.socket() as s:
        return s.connect_ex(address) == 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", run_suites.CLUSTER_SERVERS)
def test_a_cluster_leg_is_three_shards_and_leaves_nothing_behind(kind: str,
                                                                 tmp_path: Path) -> None:
    with run_suites.start_cluster(kind, tmp_path) as cluster:
        client = RedisCluster(host=cluster.host, port=cluster.port)
        try:
            shards = client.cluster_slots(target_nodes=RedisCluster.RANDOM)
            assert len(shards) == run_suites.CLUSTER_PRIMARIES
            assert all(len(shard["replicas"]) == run_suites.CLUSTER_REPLICAS
                       for shard in shards.values())
            assert len(client.get_nodes()) == len(cluster.nodes) == 6
        finally:
            client.close()
    assert not [address for address in cluster.nodes if _listening(address)]
    assert cluster.proc.poll() is not None
