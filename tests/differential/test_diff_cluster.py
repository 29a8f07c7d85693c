"""A streamkeep node alone in cluster mode (`serve --cluster-enabled yes`) against a
redis-server cluster node that owns every slot: the same replies and error lines for the
cluster's routing (CROSSSLOT in commands, transactions, WATCH and scripts; keys in one slot
served) and for CLUSTER's subcommands (node ids, ports and the bus's counters set aside); and
outside cluster mode, the same refusals."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.cluster_redis import serve_every_slot, start_cluster_node
from tests.support.resp_client import RespClient

pytestmark = pytest.mark.redis

ID = re.compile(rb"[0-9a-f]{40}")


@pytest.fixture
def pair(spawn, tmp_path) -> Iterator[tuple[RespClient, RespClient, int, int]]:
    """(streamkeep's client, redis-server's client, streamkeep's port, redis-server's): a
    streamkeep node alone and a redis-server node given every slot."""
    oracle = start_cluster_node(tmp_path / "redis")
    try:
        serve_every_slot(oracle)
        node = spawn(tmp_path / "sk", "--cluster-enabled", "yes")
        with RespClient("127.0.0.1", node.port) as ours, \
                RespClient(oracle.host, oracle.port) as theirs:
            yield ours, theirs, node.port, oracle.port
    finally:
        oracle.stop()


def _reply(client: RespClient, *args: Any) -> Any:
    try:
        return client.execute(*args)
    except Exception as err:  # noqa: BLE001  (the error line is the reply compared)
        return ("error", str(err))


def _same(pair: tuple[RespClient, RespClient, int, int], *args: Any) -> Any:
    ours, theirs, _, _ = pair
    got, want = _reply(ours, *args), _reply(theirs, *args)
    assert got == want, (args, got, want)
    return got


ROUTED = [
    ("SET", "foo", "1"), ("GET", "foo"), ("MSET", "a", "1", "b", "2"),
    ("MSET", "{t}a", "1", "{t}b", "2"), ("MGET", "{t}a", "{t}b"), ("DEL", "a", "b"),
    ("DEL", "x", "x"), ("XADD", "s", "1-1", "f", "v"),
    ("XREAD", "STREAMS", "s", "t", "0", "0"), ("XREAD", "STREAMS", "{s}1", "{s}2", "0", "0"),
    ("SUNIONSTORE", "d", "s1", "s2"), ("ZUNIONSTORE", "{z}d", "2", "{z}1", "{z}2"),
    ("RENAME", "foo", "bar"), ("RENAME", "{f}oo", "{f}bar"), ("SMOVE", "a", "b", "m"),
    ("LMOVE", "l1", "l2", "LEFT", "RIGHT"), ("EVAL", "return 1", "2", "a", "b"),
    ("EVAL", "return 1", "2", "{e}a", "{e}b"), ("EVAL", "return 1", "0"),
    ("SSUBSCRIBE", "a", "b"), ("SPUBLISH", "ch", "m"), ("PUBLISH", "ch", "m"),
    ("WATCH", "a", "b"), ("CLUSTER", "KEYSLOT", "foo"), ("CLUSTER", "KEYSLOT", "{user1}.x"),
    ("CLUSTER", "KEYSLOT", ""), ("CLUSTER", "KEYSLOT"), ("CLUSTER", "INFO", "x"),
    ("CLUSTER", "NOSUCH"), ("CLUSTER",), ("CLUSTER", "COUNT-FAILURE-REPORTS", "nosuch"),
    ("CLUSTER", "REPLICAS", "nosuch"), ("CLUSTER", "LINKS"),
    ("READONLY",), ("READWRITE",), ("ASKING",), ("READONLY", "x"),
]


def test_routing_and_cluster_replies_match_redis(pair):
    for args in ROUTED:
        _same(pair, *args)


def test_a_transaction_across_slots(pair):
    # Queued commands are judged one by one; EXEC judges them together and discards.
    for script in ([("MULTI",), ("SET", "a", "1"), ("SET", "b", "1"), ("EXEC",)],
                   [("MULTI",), ("MSET", "a", "1", "b", "2"), ("SET", "c", "1"), ("EXEC",)],
                   [("MULTI",), ("SET", "{m}a", "1"), ("GET", "{m}b"), ("EXEC",)],
                   [("MULTI",), ("SET", "a", "1"), ("SET", "b", "1"), ("DISCARD",)]):
        for args in script:
            _same(pair, *args)
    _same(pair, "EXEC")  # (no transaction left open)


SCRIPTS = [
    # Without a shebang a script may use any key this node serves; with one, the keys of its
    # commands must share one slot (its declared keys' if it has some) unless it says
    # allow-cross-slot-keys; no-cluster scripts do not run on a cluster.
    ("EVAL", "redis.call('set','a','1') return redis.call('set','b','1')", "0"),
    ("EVAL", "#!lua\nredis.call('set','a','1') return redis.call('set','b','1')", "0"),
    ("EVAL", "#!lua flags=allow-cross-slot-keys\nredis.call('set','a','1') "
             "return redis.call('set','b','1')", "0"),
    ("EVAL", "#!lua\nreturn redis.call('get', 'b')", "1", "a"),
    ("EVAL", "#!lua\nreturn redis.call('get', '{a}x')", "1", "a"),
    ("EVAL", "#!lua flags=no-cluster\nreturn 1", "0"),
]
# A script's command whose own keys span slots: Redis 7.2 and later name the command (Redis
# 8's scriptVerifyClusterState); the 7.0 oracle says "non local key".
CROSSSLOT_IN_SCRIPTS = [
    ("EVAL", "#!lua\nreturn redis.call('mset', 'a', '1', 'b', '2')", "0"),
    ("EVAL", "#!lua\nreturn redis.pcall('mset', 'a', '1', 'b', '2')", "0"),
    ("EVAL", "return redis.call('mset', 'a', '1', 'b', '2')", "0"),
]


def test_scripts_on_a_cluster_node(pair):
    for args in SCRIPTS:
        _same(pair, *args)
    ours, theirs, _, _ = pair
    for args in CROSSSLOT_IN_SCRIPTS:
        kind, error = _reply(theirs, *args)
        assert "Script attempted to access a non local key in a cluster node" in error
        assert _reply(ours, *args) == (kind, error.replace(
            "Script attempted to access a non local key in a cluster node",
            "Command 'mset' in script attempted to access keys that don't hash to the same "
            "slot")), args
    _same(pair, "FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function("
          "'two', function(keys) redis.call('set', keys[1], '1') "
          "return redis.call('set', 'zzz', '1') end)")
    _same(pair, "FCALL", "two", "1", "a")
    _same(pair, "FCALL", "two", "2", "a", "b")


# Redis 8.4's atomic slot migration appends these to CLUSTER INFO (the 7.0 oracle has none).
SLOT_MIGRATION_LINES = [
    b"cluster_slot_migration_active_tasks:0", b"cluster_slot_migration_active_trim_running:0",
    b"cluster_slot_migration_active_trim_current_job_keys:0",
    b"cluster_slot_migration_active_trim_current_job_trimmed:0",
    b"cluster_slot_migration_stats_active_trim_started:0",
    b"cluster_slot_migration_stats_active_trim_completed:0",
    b"cluster_slot_migration_stats_active_trim_cancelled:0"]


def test_keys_by_slot(pair):
    ours, theirs, _, _ = pair
    for client in (ours, theirs):
        client.execute("MSET", "{s}a", "1", "{s}b", "2", "{s}c", "3")
        client.execute("XADD", "{s}stream", "1-1", "f", "v")
        client.execute("HSET", "{s}hash", "f", "v")
        client.execute("DEL", "{s}b")
        client.execute("SET", "other", "1")
    slot = ours.execute("CLUSTER", "KEYSLOT", "{s}")
    assert _same(pair, "CLUSTER", "COUNTKEYSINSLOT", slot) == 4
    for count in ("0", "2", "100", str(2**63 - 1)):
        got = _reply(ours, "CLUSTER", "GETKEYSINSLOT", slot, count)
        want = _reply(theirs, "CLUSTER", "GETKEYSINSLOT", slot, count)
        assert len(got) == len(want) and set(got) <= {b"{s}a", b"{s}c", b"{s}stream", b"{s}hash"}
    for args in (("COUNTKEYSINSLOT", "-1"), ("COUNTKEYSINSLOT", "16384"),
                 ("COUNTKEYSINSLOT", "x"), ("GETKEYSINSLOT", "1", "-1"),
                 ("GETKEYSINSLOT", "16384", "1"), ("GETKEYSINSLOT", "x", "-1"),
                 ("GETKEYSINSLOT", "1", "x"), ("GETKEYSINSLOT", "1", str(2**63)),
                 ("COUNTKEYSINSLOT", "1", "2")):
        _same(pair, "CLUSTER", *args)
    _same(pair, "FLUSHALL")
    assert _same(pair, "CLUSTER", "COUNTKEYSINSLOT", slot) == 0


def test_info_cluster(pair):
    ours, theirs, _, _ = pair
    assert ours.execute("INFO", "cluster") == theirs.execute("INFO", "cluster")


def test_one_database_and_no_replicaof(pair):
    for args in (("SELECT", "1"), ("SELECT", "0"), ("SELECT", "x"), ("SELECT", "99"),
                 ("SET", "{c}a", "1"), ("COPY", "{c}a", "{c}b", "DB", "1"),
                 ("COPY", "{c}a", "{c}b", "DB", "0"), ("COPY", "{c}a", "{c}b", "DB", "99"),
                 ("REPLICAOF", "127.0.0.1", "1"), ("SLAVEOF", "NO", "ONE")):
        _same(pair, *args)


def test_cluster_info_myid_and_the_topology_views(pair):
    ours, theirs, our_port, their_port = pair
    our_info = ours.execute("CLUSTER", "INFO")
    their_info = theirs.execute("CLUSTER", "INFO")
    names = [line.split(b":")[0] for line in their_info.split(b"\r\n") if line]
    our_lines = [line for line in our_info.split(b"\r\n") if line]
    assert our_lines[len(names):] == SLOT_MIGRATION_LINES
    assert [line.split(b":")[0] for line in our_lines[:len(names)]] == names
    for line in our_info.split(b"\r\n")[:8]:  # state, slots, nodes, size
        assert line in their_info.split(b"\r\n"), line
    our_id, their_id = ours.execute("CLUSTER", "MYID"), theirs.execute("CLUSTER", "MYID")
    assert ID.fullmatch(our_id) and ID.fullmatch(their_id)

    def neutral(reply: Any, node_id: bytes, port: int) -> Any:
        text = re.sub(r"@\d+", "@<cport>", repr(reply).replace(node_id.decode(), "<id>"))
        return text.replace(str(port), "<port>")

    for args in (("CLUSTER", "NODES"), ("CLUSTER", "SLOTS"), ("CLUSTER", "SHARDS"),
                 ("CLUSTER", "REPLICAS", None), ("CLUSTER", "COUNT-FAILURE-REPORTS", None)):
        ours_args = [our_id if a is None else a for a in args]
        theirs_args = [their_id if a is None else a for a in args]
        assert neutral(_reply(ours, *ours_args), our_id, our_port) == \
            neutral(_reply(theirs, *theirs_args), their_id, their_port), args


def test_outside_cluster_mode_each_says_so(redis_raw, sk):
    for args in (("CLUSTER", "INFO"), ("CLUSTER", "KEYSLOT", "x"), ("READONLY",),
                 ("READWRITE",), ("ASKING",), ("CLUSTER", "NOSUCH"), ("CLUSTER", "INFO", "x")):
        assert _reply(sk, *args) == _reply(redis_raw, *args), args
