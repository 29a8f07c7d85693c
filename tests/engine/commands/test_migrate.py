"""A slot moved between two streamkeep nodes as redis-cli moves one: CLUSTER SETSLOT IMPORTING
and MIGRATING, keys moved with MIGRATE (a stream with its group and pending entries, a hash
with a field's TTL, a key's TTL), ASK and TRYAGAIN while the slot moves, ASKING for one command
only, RESTORE-ASKING, then SETSLOT NODE and MOVED; MIGRATE's replies and refusals."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from streamkeep.engine.model.keyslot import key_slot

pytestmark = pytest.mark.redis


def two_nodes(spawn: Any, tmp_path: Any) -> list[Any]:
    servers = [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes") for i in range(2)]
    made = subprocess.run([sys.executable, "-m", "streamkeep", "cluster", "create",
                           *(f"127.0.0.1:{s.port}" for s in servers)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    return servers


def myid(server: Any) -> str:
    return server.client().execute_command("CLUSTER", "MYID").decode()


def test_a_slot_moves_with_ask_while_its_keys_migrate(spawn, tmp_path):
    source, target = two_nodes(spawn, tmp_path)
    src, dst = source.client(), target.client()
    slot = key_slot(b"{b}")
    assert slot < 8192  # the first node's
    src.xadd("{b}s", {"f": "v"}, id="1-1")
    src.xgroup_create("{b}s", "g", id="0")
    src.xreadgroup("g", "c", {"{b}s": ">"})
    src.hset("{b}h", mapping={"a": "1", "b": "2"})
    src.hexpire("{b}h", 1000, "a")
    src.set("{b}k", "v", ex=1000)
    assert dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", myid(source)) == b"OK"
    assert src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", myid(target)) == b"OK"
    assert f"[{slot}->-{myid(target)}]" in src.execute_command("CLUSTER", "NODES").decode()
    # Keys still here are served here; one that is not is asked for at the target.
    assert src.get("{b}k") == b"v"
    with pytest.raises(redis.exceptions.AskError, match=f"^{slot} 127.0.0.1:{target.port}$"):
        src.get("{b}gone")
    with pytest.raises(redis.exceptions.TryAgainError):
        src.mget("{b}k", "{b}gone")
    # The target serves the slot after ASKING, for that one command only.
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} "):
        dst.set("{b}new", "1")
    with dst.pipeline(transaction=False) as pipe:
        pipe.execute_command("ASKING").set("{b}new", "1").get("{b}new")
        assert pipe.execute(raise_on_error=False)[1:2] == [True]
    # MIGRATE: the keys moved whole, gone here.
    assert src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS",
                               "{b}s", "{b}h", "{b}k", "{b}nothing") == b"OK"
    assert src.execute_command("MIGRATE", "127.0.0.1", target.port, "{b}nothing", 0,
                               5000) == b"NOKEY"
    assert src.dbsize() == 0  # (EXISTS of keys gone from a migrating slot: ASK)
    for server in (target, source):
        assert server.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE",
                                               myid(target)) == b"OK"
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} 127.0.0.1:{target.port}$"):
        src.get("{b}k")
    assert dst.get("{b}k") == b"v" and 0 < dst.ttl("{b}k") <= 1000
    assert dst.xpending("{b}s", "g")["pending"] == 1
    assert dst.hgetall("{b}h") == {b"a": b"1", b"b": b"2"}
    assert 0 < dst.httl("{b}h", "a")[0] <= 1000 and dst.httl("{b}h", "b") == [-1]


def test_a_cluster_client_follows_ask_during_a_move(spawn, tmp_path):
    source, target = two_nodes(spawn, tmp_path)
    slot = key_slot(b"{c}")
    target.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", myid(source))
    source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", myid(target))
    rc = RedisCluster(host="127.0.0.1", port=source.port)
    try:
        rc.set("{c}old", "1")  # (absent at the source: made at the target, after ASK)
        assert rc.get("{c}old") == b"1"
        assert source.client().dbsize() == 0
    finally:
        rc.close()


def test_migrate_refusals(spawn, tmp_path):
    node = spawn(tmp_path / "a", "--cluster-enabled", "yes")
    client = node.client()
    client.set("k", "v")
    with pytest.raises(redis.ResponseError, match="^IOERR error or timeout connecting"):
        client.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 100)
    with pytest.raises(redis.ResponseError, match="must be set to the empty string"):
        client.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 100, "KEYS", "k")
    with pytest.raises(redis.ResponseError, match="^syntax error"):
        client.execute_command("MIGRATE", "127.0.0.1", 1, "k", 0, 100, "BOGUS")
    other = spawn(tmp_path / "b")  # not a cluster node: RESTORE, and REPLACE
    other.client().set("k", "old")
    with pytest.raises(redis.ResponseError, match="^Target instance replied with error: "
                                                  "BUSYKEY"):
        client.execute_command("MIGRATE", "127.0.0.1", other.port, "k", 0, 5000, "COPY")
    assert client.get("k") == b"v"
    assert client.execute_command("MIGRATE", "127.0.0.1", other.port, "k", 0, 5000, "COPY",
                                  "REPLACE") == b"OK"
    assert client.get("k") == b"v" and other.client().get("k") == b"v"
    with pytest.raises(redis.ResponseError, match="^Please use SETSLOT only with masters|"
                                                  "^Invalid or out of range slot"):
        client.execute_command("CLUSTER", "SETSLOT", 99999, "STABLE")
