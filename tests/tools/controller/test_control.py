"""A cluster run by `streamkeep cluster controller` over a real etcd: the topology committed
there and pushed to the nodes, a managed node refusing anyone else's topology, a primary
killed and failed over with every write acknowledged by WAIT kept (the old primary, back, a
replica that dropped what the new primary never had), a second controller taking over from a
killed leader, a manual failover that loses nothing under writes, nodes added and removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.tools.controller import record
from streamkeep.tools.controller.etcd import Etcd
from tests.support.controlled_cluster import Controllers, address, cli, role, wait_until
from tests.support.etcd import etcd  # noqa: F401  (the fixture)
from tests.support.exporter import Exporters

pytestmark = pytest.mark.redis

TIMEOUT_MS = "1000"  # cluster-node-timeout: failovers within a few seconds


@pytest.fixture
def controllers(etcd: Any, request: Any) -> Iterator[Controllers]:  # noqa: F811
    made = Controllers(etcd.url, request.node.name.replace("[", "-").replace("]", "")[-40:])
    try:
        yield made
    finally:
        made.close()


def start_nodes(spawn: Any, tmp_path: Any, count: int) -> list[Any]:
    return [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes", "--cluster-node-timeout",
                  TIMEOUT_MS, "--appendfsync", "always") for i in range(count)]


def create(controllers: Controllers, servers: list[Any], replicas: int) -> None:
    made = cli("create", "--etcd", controllers.url, "--cluster", controllers.cluster,
               "--replicas", str(replicas), *map(address, servers))
    assert made.returncode == 0, made.stderr


def key_of(server_slots: list[tuple[int, int]], n: int) -> str:
    """The n-th key whose slot is in `server_slots`."""
    found = 0
    for i in range(1_000_000):
        key = f"k{i}"
        slot = key_slot(key.encode())
        if any(a <= slot <= b for a, b in server_slots):
            if found == n:
                return key
            found += 1
    raise AssertionError("no key")


def test_a_killed_primary_is_failed_over_and_nothing_acknowledged_is_lost(
        spawn, tmp_path, controllers):
    servers = start_nodes(spawn, tmp_path, 4)  # two primaries, a replica each
    controllers.start("c1")
    create(controllers, servers, 1)
    first, _second, first_replica, _ = servers
    client = first.client()
    # A managed node takes no topology from anyone but its controller.
    lines = client.execute_command("CLUSTER", "NODES").decode().splitlines()
    with pytest.raises(redis.ResponseError, match="managed by the controller of cluster"):
        client.execute_command("CLUSTER", "SETTOPOLOGY", 99, *lines)
    slots = [(int(a), int(b)) for a, b in
             (word.split("-") for word in next(line for line in lines if "myself" in line)
              .split()[8:])]
    acknowledged = []
    for n in range(200):
        key = key_of(slots, n)
        client.set(key, n)
        assert client.execute_command("WAIT", 1, 5000) == 1
        acknowledged.append(key)
    first.kill()
    # The replica is promoted: it holds every write WAIT acknowledged.
    wait_until(lambda: role(first_replica) == b"master")
    promoted = first_replica.client()
    wait_until(lambda: _writable(promoted, acknowledged[0]))
    assert [promoted.get(key) for key in acknowledged] == [str(n).encode() for n in range(200)]
    # The old primary, back, is a replica of the new one.
    port = first.port
    again = spawn(tmp_path / "n0", "--cluster-enabled", "yes", "--cluster-node-timeout",
                  TIMEOUT_MS, "--port", str(port), port=port)
    wait_until(lambda: role(again) == b"slave")
    wait_until(lambda: again.client().execute_command("ROLE")[3] == b"connected")
    etcd_client = Etcd(controllers.url)
    try:
        current = record.load(etcd_client, controllers.cluster)
    finally:
        etcd_client.close()
    assert current is not None and current.epoch >= 2
    wait_until(lambda: cli("check", "--etcd", controllers.url, "--cluster", controllers.cluster,
                           address(first_replica)).returncode == 0)
    checked = cli("check", "--etcd", controllers.url, "--cluster", controllers.cluster,
                  address(first_replica))
    assert f"etcd: epoch {current.epoch}, leader c1, 0 slots on the move" in checked.stdout
    assert "records behind" in checked.stdout  # (each replica's lag, in records)
    shown = cli("info", "--etcd", controllers.url, "--cluster", controllers.cluster,
                address(first_replica), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["epoch"] == current.epoch


def _writable(client: Any, key: str) -> bool:
    try:
        client.set(key + "-probe", "1")
    except redis.RedisError:
        return False
    return True


def test_a_primary_nobody_vouches_for_refuses_writes(spawn, tmp_path, controllers):
    """Its controller gone and its replica gone, a managed primary stops after its timeout
    (the replica may have been promoted elsewhere), and serves again once either is back;
    Prometheus's redis exporter shows the node's cluster state and epoch, and the fence."""
    servers = start_nodes(spawn, tmp_path, 2)
    controller = controllers.start("c1")
    create(controllers, servers, 1)
    primary, replica = servers
    client = primary.client()
    client.set("a", "1")
    exporters = Exporters(tmp_path)
    try:
        exporters.start(primary.port)
        metrics = exporters.scrape(primary.port)  # (Prometheus sees the node's cluster)
        assert metrics["redis_cluster_state"][()] == 1
        assert metrics["redis_cluster_current_epoch"][()] >= 1
        controller.send_signal(signal.SIGSTOP)  # the controller unheard of
        try:
            replica.kill()
            wait_until(lambda: not _writable(client, "a"))
            with pytest.raises(redis.ResponseError, match="^The cluster is down"):
                client.set("a", "2")
            assert exporters.scrape(primary.port)["redis_cluster_state"][()] == 0
        finally:
            controller.send_signal(signal.SIGCONT)
        wait_until(lambda: _writable(client, "a"))
    finally:
        exporters.close()


def test_a_second_controller_takes_over_a_killed_leader(spawn, tmp_path, controllers):
    servers = start_nodes(spawn, tmp_path, 4)
    leader = controllers.start("c1")
    create(controllers, servers, 1)
    controllers.start("c2")
    leader.send_signal(signal.SIGKILL)
    leader.wait()
    etcd_client = Etcd(controllers.url)
    try:
        wait_until(lambda: (etcd_client.get(record.key(controllers.cluster, "leader"))
                            or (b"",))[0] == b"c2")
    finally:
        etcd_client.close()
    servers[1].kill()  # the second primary: c2 fails it over
    wait_until(lambda: role(servers[3]) == b"master")


def test_a_manual_failover_under_writes_loses_nothing(spawn, tmp_path, controllers):
    servers = start_nodes(spawn, tmp_path, 2)
    controllers.start("c1")
    create(controllers, servers, 1)
    primary, replica = servers
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        client = redis.Redis(port=primary.port)
        n = 0
        while not stop.is_set():
            try:
                client.rpush("log", n)
            except redis.RedisError:
                break  # fenced, then a replica: MOVED / CLUSTERDOWN
            written.append(n)
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    wait_until(lambda: len(written) > 100)
    switched = cli("failover", "--etcd", controllers.url, "--cluster", controllers.cluster,
                   address(replica))
    stop.set()
    writer.join()
    assert switched.returncode == 0, switched.stderr
    assert role(replica) == b"master"
    wait_until(lambda: role(primary) == b"slave")
    kept = [int(v) for v in replica.client().lrange("log", 0, -1)]
    assert kept[:len(written)] == written  # every acknowledged push, in order


def test_nodes_are_added_and_removed_through_etcd(spawn, tmp_path, controllers):
    servers = start_nodes(spawn, tmp_path, 3)
    controllers.start("c1")
    create(controllers, servers[:1], 0)
    added = cli("add-node", "--etcd", controllers.url, "--cluster", controllers.cluster,
                address(servers[1]), "--replica-of", address(servers[0]))
    assert added.returncode == 0, added.stderr
    wait_until(lambda: servers[1].client().execute_command("ROLE")[3] == b"connected")
    empty = cli("add-node", "--etcd", controllers.url, "--cluster", controllers.cluster,
                address(servers[2]))
    assert empty.returncode == 0, empty.stderr
    assert b"master" in servers[2].client().execute_command("CLUSTER", "NODES")
    refused = cli("remove-node", "--etcd", controllers.url, "--cluster", controllers.cluster,
                  address(servers[0]))
    assert refused.returncode == 2 and "serves slots" in refused.stderr
    for gone in servers[1:]:
        removed = cli("remove-node", "--etcd", controllers.url, "--cluster",
                      controllers.cluster, address(gone))
        assert removed.returncode == 0, removed.stderr
    nodes = servers[0].client().execute_command("CLUSTER", "NODES").decode().splitlines()
    assert len(nodes) == 1
    assert os.path.exists(tmp_path / "n0" / "nodes.conf")
    # The removed nodes were told: alone, serving nothing; the replica no longer follows (its
    # ACKs would count for WAIT where no failover can promote it).
    for gone in servers[1:]:
        client = gone.client()
        assert client.execute_command("ROLE")[0] == b"master"
        assert len(client.execute_command("CLUSTER", "NODES").decode().splitlines()) == 1
        with pytest.raises(redis.exceptions.ClusterDownError, match="not served"):
            client.get("k")
    wait_until(lambda: servers[0].client().info("replication")["connected_slaves"] == 0)


def test_slots_move_to_an_added_primary_while_clients_write(spawn, tmp_path, controllers):
    """rebalance after add-node: half the slots move, their keys with them, while a client
    pushes to a list in a moving slot; every push acknowledged is there once, every key is on
    its slot's owner only."""
    servers = start_nodes(spawn, tmp_path, 2)
    controllers.start("c1")
    create(controllers, servers[:1], 0)
    added = cli("add-node", "--etcd", controllers.url, "--cluster", controllers.cluster,
                address(servers[1]))
    assert added.returncode == 0, added.stderr
    rc = RedisCluster(host="127.0.0.1", port=servers[0].port)
    try:
        for n in range(300):
            rc.set(f"key:{n}", n)
        rc.xadd("{jobs}s", {"n": "1"})
        rc.xgroup_create("{jobs}s", "g", id="0")
        rc.xreadgroup("g", "c", {"{jobs}s": ">"})
        assert key_slot(b"{jobs}") >= 8192  # (a slot that moves)
        stop = threading.Event()
        pushed: list[int] = []

        def push() -> None:
            client = RedisCluster(host="127.0.0.1", port=servers[0].port)
            try:
                n = 0
                while not stop.is_set():
                    try:
                        client.rpush("{jobs}list", n)
                    except AttributeError:
                        # redis-py cannot follow ASK to a node no slot of its map names (a
                        # primary added empty): nothing was sent; its map read again
                        client.nodes_manager.initialize()
                        continue
                    pushed.append(n)
                    n += 1
            finally:
                client.close()

        pusher = threading.Thread(target=push)
        pusher.start()
        try:
            moved = cli("rebalance", "--etcd", controllers.url, "--cluster", controllers.cluster)
        finally:
            stop.set()
            pusher.join()
        assert moved.returncode == 0, moved.stderr
        assert len(pushed) > 100
        assert [int(v) for v in rc.lrange("{jobs}list", 0, -1)] == pushed
        assert [rc.get(f"key:{n}") for n in range(300)] == [str(n).encode() for n in range(300)]
        assert rc.xpending("{jobs}s", "g")["pending"] == 1
        first, second = (s.client() for s in servers)
        assert first.dbsize() + second.dbsize() == 302
        assert second.dbsize() > 0 and first.dbsize() > 0
        slots = second.execute_command("CLUSTER", "SLOTS")
        owned = sum(end - start + 1 for start, end, *_rest in slots
                    if _rest[0][1] == servers[1].port)
        assert owned == 8192
    finally:
        rc.close()


@pytest.mark.parametrize("victim", ["source", "target", "controller"])
def test_a_kill_during_a_slot_move_loses_nothing(spawn, tmp_path, controllers, victim):
    """SIGKILL of the source, the target or the controller while a slot's keys are half copied:
    once it is back, the move starts again and ends; every key written is on the target with
    its value, and the source's copies are trimmed."""
    servers = start_nodes(spawn, tmp_path, 2)
    controller = controllers.start("c1")
    create(controllers, servers[:1], 0)
    added = cli("add-node", "--etcd", controllers.url, "--cluster", controllers.cluster,
                address(servers[1]))
    assert added.returncode == 0, added.stderr
    source, target = servers
    slot = key_slot(b"{z}")
    keys = [f"{{z}}k{n}" for n in range(20_000)]
    with source.client().pipeline(transaction=False) as pipe:
        for n, key in enumerate(keys):
            pipe.set(key, n)
        pipe.execute()
    mover = subprocess.Popen(
        [sys.executable, "-m", "streamkeep", "cluster", "migrate-slots", "--etcd",
         controllers.url, "--cluster", controllers.cluster, "--to", address(target),
         "--slots", str(slot)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: _count(target, slot) > 0, attempts=3000)
        assert _count(source, slot) > 0  # (half moved: the kill lands inside the move)
        killed = {"source": source, "target": target}.get(victim)
        if killed is None:
            controller.kill()
            controller.wait()
            controllers.start("c2")
        else:
            killed.restart()  # (SIGKILL, then started again on its directory and port)
        _, errors = mover.communicate(timeout=120)
        assert mover.returncode == 0, errors
    finally:
        if mover.poll() is None:
            mover.kill()
            mover.wait()
    back_source = redis.Redis(port=source.port)
    back_target = redis.Redis(port=target.port)
    wait_until(lambda: back_source.dbsize() == 0, attempts=3000)
    assert back_target.dbsize() == len(keys)
    assert [int(v) for v in back_target.mget(keys)] == list(range(len(keys)))


def _count(server: Any, slot: int) -> int:
    try:
        return int(redis.Redis(port=server.port).execute_command("CLUSTER", "COUNTKEYSINSLOT",
                                                                 slot))
    except redis.RedisError:
        return 0
