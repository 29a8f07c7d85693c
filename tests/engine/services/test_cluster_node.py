"""engine.services.cluster_node: a node's topology kept in its data directory (Redis's
nodes.conf lines), its id kept across restarts, a damaged file refused naming where."""

from __future__ import annotations

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.cluster import (
    ClusterNode,
    NodesFileError,
    Topology,
    alone,
    parse,
    render,
)
from streamkeep.engine.model.keyslot import SLOTS
from streamkeep.engine.services.cluster_node import attach


def test_a_topology_survives_its_text():
    me = ClusterNode("a" * 40, "10.0.0.1", 7000, 17000, "1" * 40, hostname="one")
    other = ClusterNode("b" * 40, "10.0.0.2", 7001, 17001, "2" * 40, tls_port=7101)
    replica = ClusterNode("c" * 40, "10.0.0.3", 7002, 17002, "2" * 40, primary=other.id)
    owners: list[str | None] = [me.id] * 100 + [None] * 10 + [other.id] * (SLOTS - 110)
    topology = Topology(me, {n.id: n for n in (me, other, replica)}, owners, epoch=7)
    back = parse(render(topology), "nodes.conf")
    assert back.myself == me
    assert back.nodes == topology.nodes
    assert back.owners == owners
    assert back.epoch == 7


def test_the_first_start_makes_an_id_and_a_restart_keeps_it(tmp_path):
    with Engine.open(str(tmp_path / "d")) as engine:
        first = attach(engine, 7000)
        assert first.myself.id == alone(first.myself).myself.id
        assert (tmp_path / "d" / "nodes.conf").read_text().startswith(
            f"{first.myself.id} :7000@17000,,shard-id={first.myself.shard_id} myself,master")
    with Engine.open(str(tmp_path / "d")) as engine:
        again = attach(engine, 7000)
    assert (again.myself.id, again.myself.shard_id) == (first.myself.id, first.myself.shard_id)
    assert again.owners == [first.myself.id] * SLOTS


def test_the_announced_address_is_the_one_shown(tmp_path):
    with Engine.open(str(tmp_path / "d"), cluster_announce_ip="192.0.2.7",
                     cluster_announce_port=7100, cluster_port=17777) as engine:
        topology = attach(engine, 7000)
    me = topology.myself
    assert (me.ip, me.port, me.cport) == ("192.0.2.7", 7100, 17777)


@pytest.mark.parametrize("text,where", [
    ("zz :7000@17000 myself,master - 0 0 0 connected 0-16383\n", "line 1"),
    (f"{'a' * 40} :7000@17000 myself,master - 0 0 0 connected 0-16384\n", "line 1"),
    (f"{'a' * 40} :7000@17000 master - 0 0 0 connected 0-16383\n", "no line"),
])
def test_a_damaged_file_is_refused_naming_it(tmp_path, text, where):
    with pytest.raises(NodesFileError) as err:
        parse(text, str(tmp_path / "nodes.conf"))
    assert str(tmp_path / "nodes.conf") in str(err.value) and where in str(err.value)
