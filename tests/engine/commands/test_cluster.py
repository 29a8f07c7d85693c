"""`streamkeep serve --cluster-enabled yes` alone: a whole cluster for redis-py's cluster
client (every slot this node's), its id kept in the data directory across a restart, its
announced address changed by CONFIG SET."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster
from redis.exceptions import ResponseError

pytestmark = pytest.mark.redis


def test_redis_py_cluster_client_works_against_one_node(spawn, tmp_path):
    node = spawn(tmp_path / "d", "--cluster-enabled", "yes")
    rc = RedisCluster(host="127.0.0.1", port=node.port)
    try:
        assert rc.set("plain", "1") and rc.get("plain") == b"1"
        entry = rc.xadd("jobs", {"n": "1"})
        rc.xgroup_create("jobs", "workers", id="0")
        got = rc.xreadgroup("workers", "w1", {"jobs": ">"}, count=10)
        assert got == [[b"jobs", [(entry, {b"n": b"1"})]]]
        assert rc.mset_nonatomic({"a": "1", "b": "2"})  # (the client splits it by slot)
        assert rc.mget_nonatomic(["a", "b"]) == [b"1", b"2"]
        with rc.pipeline() as pipe:
            pipe.incr("{c}n").incr("{c}n").get("{c}n")
            assert pipe.execute() == [1, 2, b"2"]
        assert rc.cluster_keyslot("foo") == 12182
        with pytest.raises(ResponseError, match="^Keys in request don't hash to the same slot"):
            node.client().mset({"a": "1", "b": "2"})  # (a plain client: the node refuses)
    finally:
        rc.close()


def test_the_node_id_survives_a_restart(spawn, tmp_path):
    node = spawn(tmp_path / "d", "--cluster-enabled", "yes")
    first = node.client().execute_command("CLUSTER", "MYID")
    node.client().set("{k}x", "1")
    node.stop()
    assert (tmp_path / "d" / "nodes.conf").read_text().startswith(first.decode() + " ")
    again = spawn(tmp_path / "d", "--cluster-enabled", "yes")
    client = again.client()
    assert client.execute_command("CLUSTER", "MYID") == first
    assert client.get("{k}x") == b"1"


def test_config_set_announces_another_address(spawn, tmp_path):
    node = spawn(tmp_path / "d", "--cluster-enabled", "yes")
    client = node.client()
    assert client.config_get("cluster-enabled") == {"cluster-enabled": "yes"}
    with pytest.raises(ResponseError, match="can't set immutable config"):
        client.config_set("cluster-enabled", "no")
    client.config_set("cluster-announce-ip", "192.0.2.9")
    client.config_set("cluster-announce-hostname", "node.example")
    line = client.execute_command("CLUSTER", "NODES").decode()
    bus = node.port + 10000 if node.port + 10000 <= 65535 else 0  # (no bus port past 65535)
    assert f" 192.0.2.9:{node.port}@{bus},node.example myself,master " in line
    slots = client.execute_command("CLUSTER", "SLOTS")
    assert slots[0][2][:2] == [b"192.0.2.9", node.port]


def test_cluster_relay_delivers_here_only(spawn, tmp_path):
    node = spawn(tmp_path / "d", "--cluster-enabled", "yes")
    pubsub = node.client().pubsub()
    pubsub.subscribe("c")
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    try:
        assert node.client().execute_command("CLUSTER", "RELAY", "c", "hello") == 1
        assert pubsub.get_message(timeout=5)["data"] == b"hello"
        with pytest.raises(ResponseError, match="wrong number of arguments"):
            node.client().execute_command("CLUSTER", "RELAY", "c")
        admin = node.client()
        admin.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "+@all", "-@admin",
                              "allchannels", "allkeys")
        reader = node.client(username="reader", password="pw")
        with pytest.raises(ResponseError, match="no permissions to run the 'cluster.relay'"):
            reader.execute_command("CLUSTER", "RELAY", "c", "x")
    finally:
        pubsub.close()


def test_cluster_relay_outside_cluster_mode(spawn, tmp_path):
    node = spawn(tmp_path / "d")
    with pytest.raises(ResponseError, match="^This instance has cluster support disabled$"):
        node.client().execute_command("CLUSTER", "RELAY", "c", "x")
