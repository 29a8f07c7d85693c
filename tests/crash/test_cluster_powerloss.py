"""A cluster node's nodes.conf under simulated power loss: the file engine.services.cluster_node
keeps (written whole to a new file, fdatasynced, renamed over the old one, the directory
fsynced) is, after a power cut at any of those steps and under every power-loss model of the
crash bench's TrackingFS (tools/crashbench/faultfs.py, as tests/crash/test_aof_powerloss.py uses
it), the old topology or the new one whole: never torn, never a mix, never missing once a
topology was taken (acknowledged), and the node's id the one it had."""

from __future__ import annotations

import random
import shutil

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.cluster import ClusterNode, Topology
from streamkeep.engine.model.keyslot import SLOTS
from streamkeep.engine.services.cluster_node import attach, keep
from tests.support.faultfs import MODELS, PowerCut, TrackingFS, stop_threads

PORT = 7000
OTHER = ClusterNode("b" * 40, "127.0.0.1", 7001, 17001, "2" * 40)


def topology_at(epoch: int, me: ClusterNode) -> Topology:
    """The controller's topology of `epoch`: this node and OTHER, the slots split at a point
    that moves with the epoch (so each epoch's layout differs)."""
    mine = ClusterNode(me.id, "127.0.0.1", PORT, PORT + 10000, me.shard_id)
    other = ClusterNode(OTHER.id, OTHER.ip, OTHER.port, OTHER.cport, OTHER.shard_id)
    split = 8000 + epoch
    owners: list[str | None] = [mine.id] * split + [other.id] * (SLOTS - split)
    return Topology(mine, {mine.id: mine, other.id: other}, owners, epoch)


def layout(topology: Topology) -> tuple:
    return (topology.epoch, topology.myself.id,
            tuple((n.id, n.ip, n.port, n.primary, n.shard_id) for n in topology.nodes.values()),
            tuple(topology.owners))


def run(directory: str, cut_at: int | None) -> tuple[TrackingFS, int, list[tuple], int]:
    """A node's life on a TrackingFS cutting the power at its `cut_at`-th mutating call: its
    first start (nodes.conf made), then two newer topologies taken. Returns the file layer, the
    calls the engine's own opening made, each topology's layout the node took or was taking, and
    how many it acknowledged (the one after those, when planned, was being saved)."""
    fs = TrackingFS(cut_at=cut_at)
    engine = None
    planned: list[tuple] = []
    acked = 0
    opened = 0
    try:
        engine = Engine.open(directory, fs=fs)
        opened = fs.stats.count("any")
        first = attach(engine, PORT)
        planned.append(layout(first))
        acked += 1
        for epoch in (1, 2):
            new = topology_at(epoch, first.myself)
            planned.append(layout(new))
            keep(engine, new)
            acked += 1
    except PowerCut:
        pass
    fs.abandon()
    stop_threads(engine)
    return fs, opened, planned, acked


def test_nodes_conf_is_old_or_new_whole_after_a_power_cut_at_every_step(tmp_path):
    whole, opened, _layouts, _ = run(str(tmp_path / "whole"), None)
    total = whole.stats.count("any")
    whole.release()
    assert total >= opened + 3 * 5  # each save: a create, write, fsync, rename, dir fsync
    rng = random.Random(0)
    checked = 0
    for cut_at in range(opened + 1, total + 2):
        directory = tmp_path / f"cut{cut_at}"
        fs, _opened, layouts, acked = run(str(directory), cut_at)
        for model in MODELS:
            if model == "bitrot":  # not a power loss (a flipped bit: tests/crash's AOF ones)
                continue
            dst = tmp_path / f"cut{cut_at}-{model}"
            fs.materialise(str(directory), str(dst), rng, model)
            with Engine.open(str(dst)) as engine:
                held = layout(attach(engine, PORT))
            # What the node acknowledged (the last it took) or, the power cut in the
            # middle of the next save, that next one; before the first save is durable, a
            # node alone with a fresh id.
            allowed = layouts[max(0, acked - 1):acked + 1]
            assert held in allowed or (acked <= 1 and held[0] == 0
                                       and held[3] == (held[1],) * SLOTS), \
                (cut_at, model, held[0], acked)
            if acked >= 2:  # a topology was taken: the first save was durable, the id kept
                assert held[1] == layouts[0][1]
            shutil.rmtree(dst)
            checked += 1
        fs.release()
        shutil.rmtree(directory)
    assert checked >= (total - opened) * (len(MODELS) - 1)


@pytest.mark.parametrize("model", [m for m in MODELS if m != "bitrot"])
def test_a_cut_after_the_save_returned_keeps_the_new_topology(tmp_path, model):
    """Once `keep` returned (CLUSTER SETTOPOLOGY answered OK), the topology survives any power
    loss: the file was fsynced before its rename, the rename's directory after."""
    whole, _opened, layouts, _ = run(str(tmp_path / "d"), None)
    dst = tmp_path / "after"
    whole.materialise(str(tmp_path / "d"), str(dst), random.Random(1), model)
    whole.release()
    with Engine.open(str(dst)) as engine:
        assert layout(attach(engine, PORT)) == layouts[-1]
