"""engine.exec.cluster: a node's routing of a command by its keys' slots, as Redis's
getNodeByQuery decides (the replies checked against a redis-server cluster node in
tests/differential/test_diff_cluster.py), and a topology's lines and slot runs."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

import streamkeep.engine.commands  # noqa: F401  (the command table, complete)
from streamkeep.engine.exec.cluster import (
    CROSSSLOT,
    DOWN,
    DOWN_READ_ONLY,
    UNBOUND,
    ClusterNode,
    Topology,
    alone,
    node_line,
    parse,
    render,
    routed,
)
from streamkeep.engine.exec.context import Session
from streamkeep.engine.exec.table import lookup
from streamkeep.engine.model.keyslot import SLOTS, key_slot
from streamkeep.engine.wire.errors import ReplyError

ME = ClusterNode("a" * 40, "10.0.0.1", 7000, 17000, "1" * 40)
OTHER = ClusterNode("b" * 40, "10.0.0.2", 7001, 17001, "2" * 40)
HALF = SLOTS // 2


def fresh(node: ClusterNode) -> ClusterNode:
    return dataclasses.replace(node)


def argv(*words: str) -> tuple[bytes, ...]:
    return tuple(w.encode() for w in words)


def judge(topology: Topology, *words: str, session: Session | None = None) -> str | None:
    args = argv(*words)
    return topology.refusal(session or Session(), lookup(args), args)


def two_nodes() -> Topology:
    """ME owns the lower half of the slots, OTHER the upper."""
    me, other = fresh(ME), fresh(OTHER)
    return Topology(me, {me.id: me, other.id: other}, [me.id] * HALF + [other.id] * HALF)


def key_in(lower: bool, tag: str = "") -> str:
    """A key whose slot is in the lower (or upper) half."""
    for i in range(10_000):
        key = f"{tag}k{i}" if not tag else f"{{{tag}}}k{i}"
        if (key_slot(key.encode()) < HALF) == lower:
            return key
    raise AssertionError("no such key")


def test_a_node_alone_serves_every_key_and_refuses_keys_of_two_slots():
    topology = alone(fresh(ME))
    assert judge(topology, "SET", "foo", "1") is None
    assert judge(topology, "PING") is None  # no key: anywhere
    assert judge(topology, "MSET", "a", "1", "b", "2") == CROSSSLOT
    assert judge(topology, "MSET", "{u}a", "1", "{u}b", "2") is None  # one hash tag, one slot
    assert judge(topology, "DEL", "x", "x") is None  # the same key twice
    assert judge(topology, "XREAD", "STREAMS", "s1", "s2", "0", "0") == CROSSSLOT


def test_sharded_channels_are_routed_like_keys():
    topology = alone(fresh(ME))
    assert judge(topology, "SSUBSCRIBE", "a", "b") == CROSSSLOT
    assert judge(topology, "SPUBLISH", "a", "m") is None
    assert judge(topology, "PUBLISH", "a", "m") is None


def test_a_key_of_another_node_is_moved_there():
    topology = two_nodes()
    mine, theirs = key_in(True), key_in(False)
    assert judge(topology, "GET", mine) is None
    assert judge(topology, "GET", theirs) == f"MOVED {key_slot(theirs.encode())} 10.0.0.2:7001"


def test_a_slot_nobody_serves_is_clusterdown_and_the_cluster_then_down():
    topology = two_nodes()
    theirs = key_in(False)
    slot = key_slot(theirs.encode())
    topology.assign(slot, slot, None)
    assert judge(topology, "GET", theirs) == UNBOUND
    assert not topology.ok
    assert judge(topology, "GET", key_in(True)) == DOWN
    assert judge(topology, "PING") is None
    topology.allow_reads_when_down = True
    assert judge(topology, "GET", key_in(True)) is None
    assert judge(topology, "SET", key_in(True), "v") == DOWN_READ_ONLY
    topology.require_full_coverage = False
    assert topology.ok
    assert judge(topology, "SET", key_in(True), "v") is None


def test_a_replica_serves_reads_of_its_primary_slots_after_readonly():
    primary, replica = fresh(OTHER), fresh(ME)
    replica.primary = primary.id
    topology = Topology(replica, {primary.id: primary, replica.id: replica},
                        [primary.id] * SLOTS)
    session = Session()
    key = key_in(True)
    assert judge(topology, "GET", key, session=session).startswith("MOVED ")
    session.readonly = True
    assert judge(topology, "GET", key, session=session) is None
    assert judge(topology, "SET", key, "v", session=session).startswith("MOVED ")


def test_exec_judges_its_transaction_whole():
    topology = alone(fresh(ME))
    session = Session()
    queued = [(lookup(argv("SET", "a", "1")), argv("SET", "a", "1")),
              (lookup(argv("SET", "b", "1")), argv("SET", "b", "1"))]
    exec_argv = argv("EXEC")
    assert topology.refusal(session, lookup(exec_argv), exec_argv, queued) == CROSSSLOT
    assert topology.refusal(session, lookup(exec_argv), exec_argv, queued[:1]) is None
    assert routed(lookup(exec_argv)) and not routed(lookup(argv("PING")))


def test_node_lines_and_slot_runs():
    topology = two_nodes()
    topology.assign(5, 5, None)
    assert list(topology.runs())[:3] == [(0, 4, ME.id), (5, 5, None), (6, HALF - 1, ME.id)]
    assert topology.slot_ranges(OTHER.id) == [(HALF, SLOTS - 1)]
    assert node_line(topology, topology.myself) == (
        f"{ME.id} 10.0.0.1:7000@17000 myself,master - 0 0 0 connected 0-4 6-{HALF - 1}")
    topology.nodes[OTHER.id].hostname = "two.example"
    assert node_line(topology, topology.nodes[OTHER.id]) == (
        f"{OTHER.id} 10.0.0.2:7001@17001,two.example master - 0 0 0 connected "
        f"{HALF}-{SLOTS - 1}")


@pytest.mark.parametrize("preferred,expected", [("ip", "10.0.0.2"), ("hostname", "two.example"),
                                                ("unknown-endpoint", "?")])
def test_moved_names_the_preferred_endpoint(preferred, expected):
    topology = two_nodes()
    topology.nodes[OTHER.id].hostname = "two.example"
    topology.preferred_endpoint = preferred
    theirs = key_in(False)
    assert judge(topology, "GET", theirs) == f"MOVED {key_slot(theirs.encode())} {expected}:7001"


def test_keys_are_indexed_by_slot_as_records_are_made_and_applied():
    from streamkeep import Engine

    primary, follower = Engine(), Engine()
    for engine in (primary, follower):
        topology = alone(fresh(ME))
        engine.execute("SET", "before", "1")
        topology.slot_keys.rebuild(engine.keyspaces)
        engine.cluster = topology
    records: list = []
    primary.add_sink(records.append)

    def count(engine: Engine, key: str) -> int:
        return engine.cluster.slot_keys.count(engine.keyspaces, key_slot(key.encode()))

    primary.execute("SET", "{a}s", "1")
    primary.execute("XADD", "{a}x", "*", "f", "v")
    primary.execute("RPUSH", "{a}l", "only")
    primary.execute("HSET", "{a}h", "f", "v")
    assert count(primary, "{a}") == 4 and count(primary, "before") == 1
    primary.execute("LPOP", "{a}l")  # the list's last element: the key goes
    primary.execute("DEL", "{a}s")
    index, spaces = primary.cluster.slot_keys, primary.keyspaces
    assert sorted(index.keys(spaces, key_slot(b"a"), 10)) == [b"{a}h", b"{a}x"]
    assert index.keys(spaces, key_slot(b"a"), 1) in ([b"{a}h"], [b"{a}x"])
    for record in records:  # a replica applies the same records
        follower.replay.apply(record)
    assert count(follower, "{a}") == 2
    primary.execute("FLUSHALL")
    assert count(primary, "{a}") == 0 and count(primary, "before") == 0


def test_the_slot_index_matches_the_keyspace_after_random_writes():
    """Whatever the writes (keys made and removed by each type, several at once, in
    transactions, renamed, expired, flushed), the index counts what a full scan counts."""
    import random

    from streamkeep import Engine
    from streamkeep.engine.exec.cluster import SlotKeys

    engine = Engine()
    engine.cluster = topology = alone(fresh(ME))
    topology.slot_keys.rebuild(engine.keyspaces)
    rng = random.Random(73)
    keys = [f"{{t{i % 5}}}k{i}" for i in range(40)]
    writes = [
        lambda k, o: ("SET", k, "v"), lambda k, o: ("DEL", k), lambda k, o: ("DEL", k, o),
        lambda k, o: ("XADD", k, "*", "f", "v"), lambda k, o: ("RPUSH", k, "a"),
        lambda k, o: ("LPOP", k), lambda k, o: ("SADD", k, "m"), lambda k, o: ("SREM", k, "m"),
        lambda k, o: ("HSET", k, "f", "v"), lambda k, o: ("HDEL", k, "f"),
        lambda k, o: ("RENAME", k, o), lambda k, o: ("MSET", k, "1", o, "2"),
        lambda k, o: ("PEXPIRE", k, "0"), lambda k, o: ("GETDEL", k),
        lambda k, o: ("ZADD", k, "1", "m"), lambda k, o: ("ZPOPMIN", k),
    ]
    for step in range(3000):
        tag = rng.randrange(5)
        key, other = (rng.choice([k for k in keys if k.startswith(f"{{t{tag}}}")])
                      for _ in range(2))
        if step % 500 == 499:
            engine.execute("FLUSHALL")
        elif rng.random() < 0.1:
            engine.execute("MULTI")
            for _ in range(3):
                engine.execute(*rng.choice(writes)(key, other))
            engine.execute("EXEC")
        else:
            with contextlib.suppress(ReplyError):  # (a WRONGTYPE or no such key: as it is)
                engine.execute(*rng.choice(writes)(key, other))
        if step % 100 == 0:
            scanned = SlotKeys()
            scanned.rebuild(engine.keyspaces)
            index = topology.slot_keys
            for slot in {key_slot(k.encode()) for k in keys}:
                assert index.count(engine.keyspaces, slot) == scanned.count(engine.keyspaces,
                                                                             slot), step


def test_a_topology_text_from_a_careless_or_hostile_client_is_refused_cleanly():
    """SETTOPOLOGY's lines are a client's: whatever they hold (random words, huge ranges and
    numbers, separators in odd places), parsing ends in a topology or NodesFileError."""
    import random

    from streamkeep.engine.exec.cluster import NodesFileError, parse

    rng = random.Random(74)
    pieces = ["a" * 40, "b" * 40, "-", "0", "16383", "16384", "0-16383", "5-2", "9" * 30,
              "127.0.0.1:7000@17000", "h:99999999@1", ":@", "@", ",", "=", "shard-id=",
              "tls-port=70000", "myself,master",
              "slave", "master", "connected", "vars", "currentEpoch", "x" * 1000, "", "\t"]
    for _ in range(3000):
        lines = [" ".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
                 for _ in range(rng.randrange(4))]
        if rng.random() < 0.3:
            lines.insert(0, f"{'a' * 40} 127.0.0.1:7000@17000 myself,master - 0 0 0 connected")
        with contextlib.suppress(NodesFileError):
            topology = parse("\n".join(lines), "the topology", myself_id="a" * 40)
            assert all(0 <= n.port <= 65535 and 0 <= n.cport <= 65535
                       and 0 <= n.tls_port <= 65535 for n in topology.nodes.values())
    for address in ("h:99999999@1", "h:1@70000", "h:1@1,tls-port=70000", "h:-1@1"):
        with pytest.raises(NodesFileError, match="line 1"):
            parse(f"{'a' * 40} {address} myself,master - 0 0 0 connected", "the topology")


def managed_pair() -> Topology:
    """ME a managed primary of every slot, OTHER its replica."""
    me, other = fresh(ME), fresh(OTHER)
    other.primary = me.id
    return Topology(me, {me.id: me, other.id: other}, [me.id] * SLOTS, 3, managed_by="c1")


def test_a_managed_primary_nobody_vouches_for_stops_serving():
    """A primary cut off from its controller (no lease) and from its replicas (none ACKs) may
    have been failed over: it answers CLUSTERDOWN until one of them vouches for it again."""
    topology = managed_pair()
    asked: list[tuple[int, float]] = []
    vouched = [0.0]

    def vouch(needed: int, seconds: float) -> float:
        asked.append((needed, seconds))
        return vouched[0]

    topology.vouch = vouch
    topology.node_timeout = 2.0
    assert topology.fenced() and not topology.ok
    assert judge(topology, "SET", "k", "v") == DOWN
    assert asked[-1] == (1, 2.0)  # the one replica, for the node's timeout
    topology.renew(60_000)  # the controller's lease
    assert not topology.fenced() and judge(topology, "SET", "k", "v") is None
    topology.lease_until = 0.0
    vouched[0] = float("inf")  # the replica ACKs
    assert not topology.fenced()
    topology.renew(0)  # withdrawn (a manual failover): fenced whoever vouches
    assert topology.fenced() and judge(topology, "GET", "k") == DOWN
    topology.renew(1_000)
    assert not topology.fenced()


def test_only_a_managed_primary_with_replicas_is_ever_fenced():
    alone_primary = managed_pair()
    del alone_primary.nodes[OTHER.id]
    replica = managed_pair()
    replica.myself = replica.nodes[OTHER.id]
    unmanaged = managed_pair()
    unmanaged.managed_by = ""
    for topology in (alone_primary, replica, unmanaged):
        assert not topology.fenced()


def test_a_managed_topology_keeps_its_controller_and_takes_no_other():
    topology = managed_pair()
    text = render(topology)
    assert text.splitlines()[-1] == "vars currentEpoch 3 lastVoteEpoch 0 controller c1"
    again = parse(text, "nodes.conf")
    assert again.managed_by == "c1" and again.epoch == 3
    newer = parse(text, "t", myself_id=ME.id)
    newer.epoch, newer.managed_by = 4, ""  # (what CLUSTER SETTOPOLOGY without CONTROLLER sets)
    assert topology.successor_refusal(newer) == (
        "ERR this node's topology is managed by the controller of cluster c1")
    newer.managed_by = "c1"
    assert topology.successor_refusal(newer) is None
