"""A controller's atomic slot move as two nodes serve it, the test acting as the controller:
CLUSTER IMPORT START and EXPORT START, batches of EXPORT NEXT applied with IMPORT APPLY while
clients write to the slot at the source (keys already sent, keys not sent yet, commands on
both), EXPORT FREEZE (the slot's commands answer TRYAGAIN), the switch, CLUSTER TRIM; every
key then the same at the target as it was at the source, after a restart of the target too.
And the refusals: a slot not on the move, another session, records naming another slot."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import redis

from streamkeep.engine.exec.cluster import parse
from streamkeep.engine.model.keyslot import key_slot
from streamkeep.tools.controller import plans
from streamkeep.tools.controller.control import record_lines
from tests.support.controlled_cluster import cli

pytestmark = pytest.mark.redis

CONTROLLER = "t"
SESSION = "s1"


def managed_pair(spawn: Any, tmp_path: Any, slot: int) -> tuple[Any, Any, str, str]:
    """Two nodes of a cluster the test manages, `slot` on the move from the first (every
    slot's owner) to the second: (source, target, source id, target id)."""
    servers = [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes", "--appendfsync", "always")
               for i in range(2)]
    made = cli("create", f"127.0.0.1:{servers[0].port}")
    assert made.returncode == 0, made.stderr
    alone = parse(servers[0].client().execute_command("CLUSTER", "NODES").decode(), "nodes")
    target_id = servers[1].client().execute_command("CLUSTER", "MYID").decode()
    line = f"{target_id} 127.0.0.1:{servers[1].port}@0 master - 0 0 0 connected"
    topology = parse("\n".join([*record_lines(alone), line]), "nodes")
    topology.managed_by = CONTROLLER
    push([*servers], plans.moving(topology, {slot: target_id}), 5)
    return servers[0], servers[1], alone.myself.id, target_id


def push(servers: list[Any], topology: Any, epoch: int) -> None:
    for server in servers:
        assert server.client().execute_command(
            "CLUSTER", "SETTOPOLOGY", epoch, "CONTROLLER", CONTROLLER,
            *record_lines(topology)) == b"OK"


def relay(src: redis.Redis, dst: redis.Redis, count: int = 1) -> bool:
    """One batch from the source applied at the target: whether the source owes nothing."""
    blob, done, _queued = src.execute_command("CLUSTER", "EXPORT", "NEXT", SESSION, count,
                                              1 << 20)
    if blob:
        dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION, blob)
    return bool(done)


def tasks(client: redis.Redis) -> str:
    return client.execute_command("CLUSTER", "INFO").decode()


def state(server: Any, keys: list[str]) -> dict[str, Any]:
    client = server.client()
    return {key: (client.dump(key), client.pttl(key) > 0) for key in keys}


def test_a_slot_moves_whole_while_clients_write_to_it(spawn, tmp_path):
    slot = key_slot(b"{m}")
    source, target, source_id, target_id = managed_pair(spawn, tmp_path, slot)
    src, dst = source.client(), target.client()
    for n in range(3):
        src.xadd("{m}s", {"n": n}, id=f"1-{n + 1}")
    src.xgroup_create("{m}s", "g", id="0")
    src.xreadgroup("g", "c", {"{m}s": ">"}, count=2)
    src.hset("{m}h", mapping={"a": "1", "b": "2"})
    src.hexpire("{m}h", 1000, "a")
    src.set("{m}k", "v", ex=1000)
    src.rpush("{m}l", *range(10))
    src.zadd("{m}z", {"x": 1, "y": 2})
    src.sadd("{m}a", "1", "2")
    src.set("other", "stays")  # (another slot: never sent)
    dst.execute_command("CLUSTER", "IMPORT", "START", source_id, "s0", slot)  # (an earlier try)
    dst.execute_command("CLUSTER", "IMPORT", "APPLY", "s0", msgpack.packb(
        [[1, [[b"SET", b"{m}stale", b"v"]]]], use_bin_type=True))
    assert dst.dbsize() == 1
    assert dst.execute_command("CLUSTER", "IMPORT", "START", source_id, SESSION, slot) == b"OK"
    assert dst.dbsize() == 0  # (what an earlier attempt left: dropped)
    assert src.execute_command("CLUSTER", "EXPORT", "START", target_id, SESSION, slot) == b"OK"
    for client in (src, dst):
        assert "cluster_slot_migration_active_tasks:1\r\n" in tasks(client)
    # The slot is served at the source throughout; the target sends its clients there.
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} 127.0.0.1:{source.port}$"):
        dst.get("{m}k")
    writes = [
        lambda: src.xadd("{m}s", {"n": 9}, id="2-1"),
        lambda: src.xack("{m}s", "g", "1-1"),
        lambda: src.hset("{m}h", "c", "3"),
        lambda: src.lmove("{m}l", "{m}l2", "LEFT", "RIGHT"),  # (keys sent and not, maybe)
        lambda: src.zincrby("{m}z", 5, "x"),
        lambda: src.sunionstore("{m}u", ["{m}a", "{m}a"]),
        lambda: src.delete("{m}a"),
        lambda: src.expire("{m}z", 500),
        lambda: src.rename("{m}u", "{m}u2"),
        lambda: src.set("{m}new", "made during the move"),
    ]
    done = False
    for write in writes:
        write()
        done = relay(src, dst)
    while not done:
        done = relay(src, dst)
    keys = [key.decode() for key in src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)]
    assert len(keys) == 8  # ({m}a deleted, {m}u renamed)
    before = state(source, keys)
    # The switch: the slot's commands wait (TRYAGAIN); what is left is applied.
    blob = src.execute_command("CLUSTER", "EXPORT", "FREEZE", SESSION)
    with pytest.raises(redis.exceptions.TryAgainError):
        src.set("{m}k", "refused")
    with pytest.raises(redis.exceptions.TryAgainError):
        src.get("{m}k")
    assert src.get("other") == b"stays"
    if blob:
        dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION, blob)
    assert dst.dbsize() == len(keys)
    alone_topology = parse(src.execute_command("CLUSTER", "NODES").decode(), "nodes")
    alone_topology.managed_by = CONTROLLER
    push([target, source], plans.moved(alone_topology, [slot]), 6)
    with pytest.raises(redis.exceptions.MovedError, match=f"^{slot} 127.0.0.1:{target.port}$"):
        src.get("{m}k")
    assert state(target, keys) == before
    assert dst.get("{m}k") == b"v" and dst.xpending("{m}s", "g")["pending"] == 1
    for client in (src, dst):
        assert "cluster_slot_migration_active_tasks:0\r\n" in tasks(client)
    # The source's copies trimmed; the other slot's key stays.
    while src.execute_command("CLUSTER", "TRIM", 3):
        pass
    assert src.dbsize() == 1 and src.get("other") == b"stays"
    assert dst.execute_command("CLUSTER", "TRIM", 100) == 0
    # What the target applied is its own log's: a restart holds it all.
    target.restart()
    assert state(target, keys) == before


def test_a_move_refuses_what_is_not_its_own(spawn, tmp_path):
    slot = key_slot(b"{r}")
    source, target, source_id, target_id = managed_pair(spawn, tmp_path, slot)
    src, dst = source.client(), target.client()
    other = key_slot(b"{q}")
    with pytest.raises(redis.ResponseError, match=f"slot {other} is not on the move"):
        src.execute_command("CLUSTER", "EXPORT", "START", target_id, SESSION, other)
    with pytest.raises(redis.ResponseError, match=f"slot {slot} is not on the move"):
        dst.execute_command("CLUSTER", "IMPORT", "START", target_id, SESSION, slot)
    with pytest.raises(redis.ResponseError, match="no move of a slot of this node"):
        src.execute_command("CLUSTER", "EXPORT", "NEXT", SESSION, 1, 1)
    with pytest.raises(redis.ResponseError, match="imports no slot in that session"):
        dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION, b"")
    dst.execute_command("CLUSTER", "IMPORT", "START", source_id, SESSION, slot)
    for records in ([[1, [[b"SET", b"{q}k", b"v"]]]],  # another slot's key
                    [[1, [[b"SELECT", b"1"]]]],  # no key
                    [[1, [[b"NOSUCH", b"{r}k"]]]],
                    [[b"x", []]]):
        with pytest.raises(redis.ResponseError):
            dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION,
                                msgpack.packb(records, use_bin_type=True))
    with pytest.raises(redis.ResponseError, match="Invalid records"):
        dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION, b"\xc1garbage")
    assert dst.dbsize() == 0
    assert dst.execute_command("CLUSTER", "IMPORT", "APPLY", SESSION, msgpack.packb(
        [[1, [[b"SET", b"{r}k", b"v"]]]], use_bin_type=True)) == 1
    with pytest.raises(redis.exceptions.MovedError):
        dst.get("{r}k")  # (not the target's until the switch)
    # A node no controller manages moves no slot this way.
    lone = spawn(tmp_path / "lone", "--cluster-enabled", "yes").client()
    with pytest.raises(redis.ResponseError, match="only a node a controller manages"):
        lone.execute_command("CLUSTER", "EXPORT", "CANCEL", SESSION)


def test_a_restarted_source_serves_its_moving_slot_once_its_controller_says_so(spawn,
                                                                               tmp_path):
    slot = key_slot(b"{f}")
    source, _target, _source_id, _target_id = managed_pair(spawn, tmp_path, slot)
    source.client().set("{f}k", "v")
    source.restart()
    src = source.client()
    with pytest.raises(redis.exceptions.TryAgainError):
        src.get("{f}k")  # (the switch may have been committed while it was down)
    assert src.get("elsewhere:{g}") is None  # (its other slots serve)
    assert src.execute_command("CLUSTER", "LEASE", CONTROLLER, 5, 1000)[0] == 5
    assert src.get("{f}k") == b"v"
