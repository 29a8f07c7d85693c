"""The cluster section's scaling rows: ``redis-benchmark --cluster -P 16`` against a cluster
of two streamkeep primaries (made by ``streamkeep cluster create``), the same commands without
--cluster against one node alone (redis-benchmark's cluster mode wants two), and
``--cluster`` against two redis-server primaries (their slots assigned and the nodes met by hand:
redis-cli --cluster create wants three), each node in a temp dir of its own.
Must not touch: the section's declarations, the shared servers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamkeep.tools.bench.processes import RedisServer, StreamkeepServer, running
from streamkeep.tools.bench.server import redis_benchmark
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST, free_port

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

PIPELINE = 16
CLUSTER_ARGS = ("--cluster-enabled", "yes")
# redis-benchmark --cluster sends a command to the node of its key's slot when the key holds
# {tag}, which it replaces by a tag of each node's slots.
COMMANDS = {"xadd": ("XADD", "s:{tag}", "*", "f", "v"),
            "set": ("-r", "100000", "SET", "key:{tag}:__rand_int__", "v")}
READY_TIMEOUT = 30.0
# redis-benchmark with --threads reads its elapsed time in quarter seconds: the section's rows
# run ten times the requests (seconds, not half of one), so a rate is not rounded off.
SCALING_SCALE = 10


def _streamkeep_nodes(count: int) -> list[StreamkeepServer]:
    return [StreamkeepServer(extra=CLUSTER_ARGS) for _ in range(count)]


def _made(nodes: list[Any]) -> None:
    """The streamkeep nodes made one cluster (`streamkeep cluster create`)."""
    from streamkeep.tools.cluster import NodeError, create

    if len(nodes) > 1:
        try:
            create([f"{HOST}:{node.port}" for node in nodes], 0)
        except NodeError as err:
            raise Skip(str(err)) from None


def _redis_made(nodes: list[Any]) -> None:
    """Two redis-server primaries: half the slots each, met (at the bus port each was given),
    until both say ok."""
    half = 16384 // len(nodes)
    for i, node in enumerate(nodes):
        last = 16383 if i == len(nodes) - 1 else (i + 1) * half - 1
        node.client.execute_command("CLUSTER", "ADDSLOTSRANGE", i * half, last)
    for node in nodes[1:]:
        node.client.execute_command("CLUSTER", "MEET", HOST, nodes[0].port, nodes[0].bus_port)
    deadline = time.monotonic() + READY_TIMEOUT
    for node in nodes:
        while b"cluster_state:ok" not in node.client.execute_command("CLUSTER", "INFO"):
            if time.monotonic() > deadline:
                raise Skip("redis-server's cluster did not come up")
            time.sleep(0.05)


def _redis_nodes(count: int) -> list[RedisServer]:
    # (an explicit bus port: a client port above 55535 has none at port + 10000)
    nodes = []
    for _ in range(count):
        bus_port = free_port()
        node = RedisServer(persistence=(*CLUSTER_ARGS, "--cluster-port", str(bus_port),
                                        "--appendonly", "yes", "--appendfsync", "everysec"))
        node.bus_port = bus_port  # type: ignore[attr-defined]
        nodes.append(node)
    return nodes


def scaling(nodes: int, command: str, redis: bool = False) -> Callable[[BenchEnv], Measurement]:
    """A row: ``command`` through redis-benchmark --cluster against ``nodes`` fresh primaries
    (streamkeep's, or redis-server's with ``redis``)."""
    def run(env: BenchEnv) -> Measurement:
        if redis and not env.use_redis:
            raise Skip("disabled (--no-redis)")
        made = _redis_nodes(nodes) if redis else _streamkeep_nodes(nodes)
        with running(*made) as started:
            servers = list(started) if isinstance(started, tuple) else [started]
            (_redis_made if redis else _made)(servers)
            # (redis-benchmark --cluster wants two nodes at least: a node alone is sent the
            # same commands without it, its {tag} kept as it is)
            where = ["-h", HOST, "-p", str(servers[0].port), "--threads", "2"]
            return redis_benchmark(env, servers[0], PIPELINE, COMMANDS[command],
                                   ["--cluster", *where] if nodes > 1 else where,
                                   scale=SCALING_SCALE)
    return run
