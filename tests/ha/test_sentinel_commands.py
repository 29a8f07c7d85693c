"""What Sentinel sends a node and reads from it, side by side on a redis-server replica and a
streamkeep replica (each of a primary of its own kind): the INFO fields Sentinel parses, the
promotion transaction (`MULTI`, `SLAVEOF NO ONE`, `CONFIG REWRITE`, `CLIENT KILL TYPE normal`,
`CLIENT KILL TYPE pubsub`, `EXEC`) with a normal client and a subscriber connected, then the
transaction that points a node at a primary. The replies must be Redis's, the other clients
disconnected and Sentinel's own connection kept, as on redis-server. (The whole failover with
real sentinels: test_sentinel.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.replication_util import info, wait_for
from tests.support.resp_client import RespClient
from tests.support.serve_process import ServeProcess

# The fields sentinel.c's sentinelRefreshInstanceInfo reads from a replica's INFO.
REPLICA_FIELDS = {"role", "master_host", "master_port", "master_link_status", "slave_priority",
                  "slave_repl_offset", "replica_announced"}
SLAVE_LINE_KEYS = ["ip", "port", "state", "offset", "lag"]


def sentinel_transaction(client: RespClient, host: str, port: str) -> Any:
    """sentinelSendSlaveOf's commands, replies read as Sentinel's pipeline would get them."""
    return client.pipeline(("MULTI",), ("SLAVEOF", host, port), ("CONFIG", "REWRITE"),
                           ("CLIENT", "KILL", "TYPE", "normal"),
                           ("CLIENT", "KILL", "TYPE", "pubsub"), ("EXEC",))


@pytest.fixture
def pairs(tmp_path: Path, start_redis: Callable[..., Any],
          spawn: Callable[..., ServeProcess]) -> Iterator[dict[str, tuple[Any, Any]]]:
    """kind -> (primary, replica), each with .host and .port; the replica synced."""
    redis_primary = start_redis()
    redis_replica = start_redis("--replicaof", redis_primary.host, str(redis_primary.port))
    sk_primary = spawn(tmp_path / "p")
    sk_replica = spawn(tmp_path / "r", "--replicaof", sk_primary.host, str(sk_primary.port))
    found = {"redis-server": (redis_primary, redis_replica),
             "streamkeep": (sk_primary, sk_replica)}
    for primary, replica in found.values():
        wait_for(lambda p=primary, r=replica: link_up(p, r), what="the replica's link")
    yield found


def client(node: Any) -> redis.Redis:
    return redis.Redis(host=node.host, port=node.port, socket_timeout=10)


def link_up(primary: Any, replica: Any) -> bool:
    return info(client(replica)).get("master_link_status") == "up" and \
        info(client(primary)).get("slave0", "").find("state=online") >= 0


def disconnected(c: RespClient) -> bool:
    try:
        c.execute("PING")
    except (ConnectionError, OSError):
        return True
    return False


def test_what_sentinel_reads_and_sends_is_answered_as_redis_answers(
        pairs: dict[str, tuple[Any, Any]]) -> None:
    seen: dict[str, Any] = {}
    for kind, (primary, replica) in pairs.items():
        fields = info(client(replica))
        primary_fields = info(client(primary))
        slave_line = [kv.split("=")[0] for kv in primary_fields["slave0"].split(",")]
        run_id = info(client(replica), "server")["run_id"]
        other = RespClient(replica.host, replica.port, timeout=5)
        assert other.execute("PING") == "PONG"
        subscriber = RespClient(replica.host, replica.port, timeout=5)
        assert subscriber.execute("SUBSCRIBE", "__sentinel__:hello")[0] == b"subscribe"
        with RespClient(replica.host, replica.port) as sentinel:
            assert sentinel.execute("CLIENT", "SETNAME", "sentinel-0123abcd-cmd") == "OK"
            promoted = sentinel_transaction(sentinel, "NO", "ONE")
            role = sentinel.execute("ROLE")
            kept = sentinel.execute("PING")
            back = sentinel_transaction(sentinel, primary.host, str(primary.port))
        killed = (disconnected(other), disconnected(subscriber))
        for gone in (other, subscriber):
            with contextlib.suppress(OSError):
                gone.close()
        wait_for(lambda p=primary, r=replica: link_up(p, r), what="the link again")
        seen[kind] = {
            "fields": set(fields) >= REPLICA_FIELDS and fields["role"] == "slave",
            "slave line": slave_line == SLAVE_LINE_KEYS,
            "run_id": len(run_id) == 40,
            "promoted": [str(r) for r in promoted],
            "role": role[0],
            "kept": kept,
            "back": [str(r) for r in back],
            "killed": killed,
        }
    assert seen["streamkeep"] == seen["redis-server"]
    ours = seen["streamkeep"]
    assert ours["fields"] and ours["slave line"] and ours["run_id"]
    assert ours["role"] == b"master" and ours["kept"] == "PONG" and ours["killed"] == (True, True)
