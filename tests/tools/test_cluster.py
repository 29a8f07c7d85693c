"""`streamkeep cluster create|check|info` against real `streamkeep serve --cluster-enabled yes`
children: the slots spread as redis-cli spreads them, a cluster client routed across the nodes,
redis-cli --cluster check satisfied, replicas following their primaries, the topology kept
across a restart, and the topology command's refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.tools.cluster import EXIT_NODE, EXIT_PROBLEM, spread
from streamkeep.tools.exits import EXIT_USAGE
from streamkeep.tools.servers import free_port

pytestmark = pytest.mark.redis


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamkeep", "cluster", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def nodes(spawn: Any, tmp_path: Any, count: int) -> list[Any]:
    return [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes") for i in range(count)]


def addresses(servers: list[Any]) -> list[str]:
    return [f"127.0.0.1:{server.port}" for server in servers]


def test_the_slots_are_spread_as_redis_cli_spreads_them():
    assert spread(3) == [(0, 5460), (5461, 10922), (10923, 16383)]
    assert spread(1) == [(0, 16383)]
    assert spread(2) == [(0, 8191), (8192, 16383)]
    ranges = spread(7)
    assert ranges[0][0] == 0 and ranges[-1][1] == 16383
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_a_three_primary_cluster(spawn, tmp_path):
    servers = nodes(spawn, tmp_path, 3)
    made = cli("create", *addresses(servers), "--json")
    assert made.returncode == 0, made.stderr
    topology = json.loads(made.stdout)
    assert [p["slots"] for p in topology["primaries"]] == [[[0, 5460]], [[5461, 10922]],
                                                           [[10923, 16383]]]
    rc = RedisCluster(host="127.0.0.1", port=servers[0].port)
    try:
        for i in range(200):
            rc.set(f"key:{i}", i)
        rc.xadd("{orders}stream", {"n": "1"})
        assert rc.get("key:7") == b"7"
    finally:
        rc.close()
    sizes = [server.client().dbsize() for server in servers]
    assert sum(sizes) == 201 and all(sizes)  # (every node got its share)
    # A key of another node's slot: MOVED there.
    owner = next(i for i, (first, last) in enumerate(spread(3))
                 if first <= key_slot(b"key:7") <= last)
    stranger = servers[(owner + 1) % 3].client()
    with pytest.raises(redis.ResponseError, match=f"^{key_slot(b'key:7')} 127.0.0.1:"
                                                   f"{servers[owner].port}$"):
        stranger.get("key:7")
    checked = cli("check", addresses(servers)[1])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "[OK] every node holds the same topology" in checked.stdout
    info = json.loads(cli("info", addresses(servers)[2], "--json").stdout)
    assert sorted(p["keys"] for p in info["primaries"]) == sorted(sizes)
    if shutil.which("redis-cli"):
        report = subprocess.run(["redis-cli", "--cluster", "check", addresses(servers)[0]],
                                capture_output=True, text=True, timeout=60, check=False)
        assert "[OK] All nodes agree about slots configuration." in report.stdout
        assert "[OK] All 16384 slots covered." in report.stdout
        # redis-cli -c follows MOVED from any node to the key's.
        for server in servers:
            got = subprocess.run(["redis-cli", "-c", "-p", str(server.port), "GET", "key:7"],
                                 capture_output=True, text=True, timeout=60, check=False)
            assert got.stdout.strip() == "7", got
    # A restarted node holds the same topology, and serves its keys.
    before = sorted(servers[1].client().execute_command("CLUSTER", "NODES").splitlines())
    servers[1].stop()
    port = servers[1].port
    again = spawn(tmp_path / "n1", "--cluster-enabled", "yes", "--port", str(port), port=port)
    assert sorted(again.client().execute_command("CLUSTER", "NODES").splitlines()) == before
    assert again.client().dbsize() == sizes[1]
    assert cli("check", addresses(servers)[0]).returncode == 0


def test_replicas_follow_their_primaries(spawn, tmp_path):
    servers = nodes(spawn, tmp_path, 4)
    made = cli("create", *addresses(servers), "--replicas", "1")
    assert made.returncode == 0, made.stderr
    primary, replica = servers[0].client(), servers[2].client()
    key = next(f"r{i}" for i in range(1000) if key_slot(f"r{i}".encode()) <= 8191)
    primary.set(key, "v")
    primary.execute_command("WAIT", 1, 5000)
    with pytest.raises(redis.ResponseError, match="^" + str(key_slot(key.encode()))):
        replica.get(key)  # (without READONLY, a replica sends reads to its primary)
    replica.execute_command("READONLY")
    assert replica.get(key) == b"v"
    with pytest.raises(redis.ResponseError, match="^" + str(key_slot(key.encode()))):
        replica.set(key, "w")  # a write always goes to the primary
    assert cli("check", addresses(servers)[3]).returncode == 0


def test_the_topology_command_refuses_what_no_cluster_can_take(spawn, tmp_path):
    servers = nodes(spawn, tmp_path, 2)
    assert cli("create", *addresses(servers)).returncode == 0
    client = servers[0].client()
    lines = client.execute_command("CLUSTER", "NODES").decode().splitlines()
    for epoch, args, error in (
            (0, lines, "older than this node's"),
            (1, [line for line in lines if " myself," in line],
             "this node's already, with another topology"),
            (5, ["garbage"], "Invalid topology"),
            (5, [lines[0], lines[0]], "named twice"),
            (-1, lines, "Invalid epoch")):
        with pytest.raises(redis.ResponseError, match=error):
            client.execute_command("CLUSTER", "SETTOPOLOGY", epoch, *args)
    many = [f"{i:040x} 127.0.0.1:{i}@1 master - 0 0 0 connected" for i in range(1, 1100)]
    with pytest.raises(redis.ResponseError, match="more than 1000 nodes"):
        client.execute_command("CLUSTER", "SETTOPOLOGY", 9, *many)
    assert client.execute_command("CLUSTER", "SETTOPOLOGY", 1, *lines) == b"OK"  # a retry
    client.execute_command("ACL", "SETUSER", "app", "on", "nopass", "+@all", "-@admin", "~*")
    app = redis.Redis(port=servers[0].port, username="app", password="x")
    with pytest.raises(redis.exceptions.NoPermissionError):
        app.execute_command("CLUSTER", "SETTOPOLOGY", 2, *lines)
    # One node moved on alone: check says the nodes disagree.
    assert client.execute_command("CLUSTER", "SETTOPOLOGY", 2, *lines) == b"OK"
    checked = cli("check", addresses(servers)[1])
    assert checked.returncode == EXIT_PROBLEM and "different topologies" in checked.stdout


def test_usage_and_unreachable_nodes(spawn, tmp_path):
    assert cli("create", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3",
               "--replicas", "1").returncode == EXIT_USAGE
    assert cli("create", "nohost").returncode == EXIT_USAGE
    gone = cli("check", f"127.0.0.1:{free_port()}")
    assert gone.returncode == EXIT_NODE and "cannot connect" in gone.stderr
    server = nodes(spawn, tmp_path, 1)[0]
    server.client().set("k", "v")
    full = cli("create", f"127.0.0.1:{server.port}")
    assert full.returncode == EXIT_NODE and "holds keys" in full.stderr


def _messages(pubsub: Any, wanted: int) -> list[bytes]:
    """What `pubsub` receives until it holds `wanted` messages, and a little after (so that a
    duplicate would be seen); a wait bounded by attempts, not by a clock."""
    got: list[bytes] = []
    quiet = 0
    for _ in range(200):
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message is None:
            quiet += 1
            if len(got) >= wanted and quiet >= 5:
                break
            continue
        quiet = 0
        got.append(message["data"])
    return got


def test_publish_reaches_every_node_once(spawn, tmp_path):
    servers = nodes(spawn, tmp_path, 4)
    assert cli("create", *addresses(servers), "--replicas", "1").returncode == 0
    subscribers = []
    for server in servers:
        pubsub = server.client().pubsub()
        pubsub.subscribe("news")
        assert pubsub.get_message(timeout=5)["type"] == "subscribe"
        subscribers.append(pubsub)
    try:
        # Published on a primary and on a replica: each node's subscriber gets both, once
        # (a primary's own replica through the relay only, not its replication too).
        publisher = servers[0].client()
        assert publisher.publish("news", "from a primary") == 1  # (this node's receivers)
        assert servers[3].client().publish("news", "from a replica") == 1
        for pubsub in subscribers:
            assert sorted(_messages(pubsub, 2)) == [b"from a primary", b"from a replica"]
        # In order, per publisher.
        for i in range(50):
            publisher.publish("news", str(i))
        for pubsub in subscribers[1:]:
            assert _messages(pubsub, 50) == [str(i).encode() for i in range(50)]
    finally:
        for pubsub in subscribers:
            pubsub.close()


def test_a_topology_acknowledged_survives_a_kill(spawn, tmp_path):
    """A newer topology that gave slots away, acknowledged, then the node SIGKILLed: back, it
    answers MOVED for them by that topology, and takes no write there."""
    servers = nodes(spawn, tmp_path, 2)
    assert cli("create", *addresses(servers)).returncode == 0
    first, second = (s.client() for s in servers)
    lines = [line for line in first.execute_command("CLUSTER", "NODES").decode().splitlines()]
    ids = {int(line.split()[1].split(":")[1].split("@")[0]): line.split()[0] for line in lines}
    me, other = ids[servers[0].port], ids[servers[1].port]
    text = "\n".join(line for line in first.execute_command("CLUSTER", "NODES").decode()
                     .splitlines())
    # Epoch 2: the first node's slots 0-99 go to the second.
    moved = []
    for line in text.splitlines():
        fields = line.split()
        fields[2] = fields[2].replace("myself,", "")
        if fields[0] == me:
            fields[8:] = ["100-8191"]
        else:
            fields[8:] = ["0-99", "8192-16383"]
        moved.append(" ".join(fields))
    for client in (second, first):
        assert client.execute_command("CLUSTER", "SETTOPOLOGY", 2, *moved) == b"OK"
    servers[0].kill()
    port = servers[0].port
    again = spawn(tmp_path / "n0", "--cluster-enabled", "yes", "--port", str(port), port=port)
    key = next(f"k{i}" for i in range(10_000) if key_slot(f"k{i}".encode()) < 100)
    with pytest.raises(redis.ResponseError,
                       match=f"^{key_slot(key.encode())} 127.0.0.1:{servers[1].port}$"):
        again.client().set(key, "v")
    assert other in again.client().execute_command("CLUSTER", "NODES").decode()
    assert b"cluster_current_epoch:2" in again.client().execute_command("CLUSTER", "INFO")
