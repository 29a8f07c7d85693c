"""The cluster section's failover row: how long a shard cannot take writes when its primary is
killed, under a controller.

A real etcd, a primary and its replica (`streamkeep serve --cluster-enabled yes
--cluster-node-timeout 2000 --appendfsync always`), `streamkeep cluster controller` (a child
process), the cluster made by `streamkeep cluster create --etcd`. Each round: the current
primary SIGKILLed, then a SET to one of its slots tried every few milliseconds at the other
node until it succeeds (the time from the kill is the round's figure), then the killed node
started again on its directory (it comes back a replica of the new primary and syncs) before
the next round kills the new primary. Must not touch: the section's declarations.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Final

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST, EtcdServer, ServerFailed

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

NODE_TIMEOUT_MS: Final = 2000
ROUNDS: Final = 10
QUICK_ROUNDS: Final = 3
ATTEMPT_EVERY: Final = 0.005  # seconds between a round's write attempts
ROUND_TIMEOUT: Final = 60.0  # seconds: a failover that never comes fails the row
CLUSTER: Final = "bench"


def failover(env: BenchEnv) -> Measurement:
    """The row: ROUNDS failovers' seconds; median and worst as figures."""
    rounds = QUICK_ROUNDS if env.quick else ROUNDS
    root = temporaries.temp_directory_path("bench-failover")
    try:
        etcd = EtcdServer(os.path.join(root, "etcd"))
        nodes = [StreamkeepServer(appendfsync="always", extra=(
            "--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS)))
            for _ in range(2)]
        controller: subprocess.Popen[bytes] | None = None
        try:
            etcd.start()
            for node in nodes:
                node.start()
            controller = subprocess.Popen(
                [sys.executable, "-m", "streamkeep", "cluster", "controller", "--etcd",
                 etcd.url, "--cluster", CLUSTER], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, **temporaries.child_options())
            _create(etcd.url, nodes)
            seconds = [_round(nodes) for _ in range(rounds)]
        except ServerFailed as err:
            raise Skip(str(err)) from None
        finally:
            if controller is not None:
                temporaries.kill_group(controller)
            for node in nodes:
                node.stop()
            etcd.stop()
    finally:
        temporaries.remove(root)
    median = statistics.median(seconds)
    return Measurement(1 / median, count=rounds, figures={
        "median_s": median, "worst_s": max(seconds)},
        notes=[f"failover seconds, {rounds} rounds: " + ", ".join(f"{s:.2f}" for s in seconds)])


def _create(url: str, nodes: list[StreamkeepServer]) -> None:
    from streamkeep.tools.cluster import NodeError
    from streamkeep.tools.controller.operations import create

    try:
        create([f"{HOST}:{node.port}" for node in nodes], 1, url, CLUSTER)
    except NodeError as err:
        raise Skip(f"cluster create --etcd: {err}") from None


def _round(nodes: list[StreamkeepServer]) -> float:
    """One failover: the primary killed; seconds until the other node takes a write."""
    primary, replica = (nodes if _role(nodes[0]) == b"master" else nodes[::-1])
    killed = time.monotonic()
    primary.kill()
    deadline = killed + ROUND_TIMEOUT
    target = replica.target(timeout=2.0)
    try:
        while True:
            try:
                target.execute([b"SET", b"failover-probe", b"1"])
                break
            except Exception:  # noqa: BLE001  (MOVED, CLUSTERDOWN, READONLY: not yet)
                if time.monotonic() > deadline:
                    raise Skip(f"no failover within {ROUND_TIMEOUT:g} s") from None
                if target.dead:
                    target = replica.target(timeout=2.0)
                time.sleep(ATTEMPT_EVERY)
        took = time.monotonic() - killed
    finally:
        target.close()
    primary.start()
    while _role(primary) != b"slave" or not _linked(primary):
        if time.monotonic() > deadline:
            raise Skip("the killed primary did not come back as a replica")
        time.sleep(0.05)
    return took


def _role(node: StreamkeepServer) -> bytes:
    with node.target(timeout=2.0) as target:
        return bytes(target.execute([b"ROLE"])[0])


def _linked(node: StreamkeepServer) -> bool:
    return node.info("replication").get("master_link_status") == "up"


__all__ = ["failover"]
