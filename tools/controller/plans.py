"""The changes a controller makes to a topology, as pure functions: topology in, topology out.

Owns what each operation does to the nodes and slots: a failover (a replica takes its
primary's slots and the shard's other members, the old primary among them, follow it), a node
added (a replica of a primary, or a primary serving nothing yet), a node removed (a replica, or
a primary that serves no slot and has no replica). Each returns a new topology (the epoch is
the record's business: tools.controller.record) or raises PlanError with the line to show.
Must not touch: etcd, sockets, the nodes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from streamkeep.engine.wire.errors import StreamkeepError

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import ClusterNode, Topology


class PlanError(StreamkeepError):
    """An operation that this topology cannot take: the line to show."""


def _copy(topology: Topology, owners: list[str | None] | None = None) -> Topology:
    """A topology like `topology` (its nodes copied), with `owners` if given."""
    from streamkeep.engine.exec.cluster import Topology

    nodes = {node_id: _node_copy(node) for node_id, node in topology.nodes.items()}
    return Topology(nodes[topology.myself.id], nodes,
                    list(topology.owners if owners is None else owners), topology.epoch,
                    managed_by=topology.managed_by)


def _node_copy(node: ClusterNode) -> ClusterNode:
    """A node's copy with its own slot states (a plan changes them)."""
    return dataclasses.replace(node, migrating=dict(node.migrating),
                               importing=dict(node.importing))


def failed_over(topology: Topology, replica_id: str) -> Topology:
    """`replica_id` its shard's primary: its primary's slots its own, the old primary and the
    shard's other replicas its replicas (the old primary, back, follows it and drops what it
    had that the new primary has not)."""
    old_id = topology.nodes[replica_id].primary if replica_id in topology.nodes else None
    new = _copy(topology, [replica_id if old_id is not None and owner == old_id else owner
                           for owner in topology.owners])
    replica = new.nodes.get(replica_id)
    if replica is None:
        raise PlanError(f"no node {replica_id} in the topology")
    if old_id is None:
        raise PlanError(f"node {replica_id} is a primary already")
    for node in new.nodes.values():
        if node.primary == old_id or node.id == old_id:
            node.primary = replica_id
    replica.primary = None
    old = new.nodes[old_id]
    # The shard's slots on the move go on from its new primary.
    replica.migrating, old.migrating = old.migrating, {}
    replica.importing, old.importing = old.importing, {}
    for node in new.nodes.values():
        for states in (node.migrating, node.importing):
            for slot, other in states.items():
                if other == old_id:
                    states[slot] = replica_id
    return new


def with_node(topology: Topology, member: ClusterNode, primary_id: str | None) -> Topology:
    """`member` added: a replica of `primary_id`, or (None) a primary serving no slot."""
    new = _copy(topology)
    if member.id in new.nodes:
        raise PlanError(f"node {member.id} is in the topology already")
    if any((n.ip, n.port) == (member.ip, member.port) for n in new.nodes.values()):
        raise PlanError(f"a node at {member.ip}:{member.port} is in the topology already")
    member = _node_copy(member)
    if primary_id is not None:
        primary = new.nodes.get(primary_id)
        if primary is None or not primary.is_primary:
            raise PlanError(f"no primary {primary_id} in the topology")
        member.primary, member.shard_id = primary_id, primary.shard_id
    else:
        member.primary = None
    new.nodes[member.id] = member
    return new


def without_node(topology: Topology, node_id: str) -> Topology:
    """`node_id` removed: a replica, or a primary with no slot and no replica."""
    new = _copy(topology)
    node = new.nodes.get(node_id)
    if node is None:
        raise PlanError(f"no node {node_id} in the topology")
    if node.is_primary:
        if new.slot_ranges(node_id):
            raise PlanError(f"primary {node_id} serves slots: move them first")
        if new.replicas_of(node_id):
            raise PlanError(f"primary {node_id} has replicas: remove or fail over first")
    if len(new.nodes) == 1:
        raise PlanError("the last node of a cluster cannot be removed")
    del new.nodes[node_id]
    if new.myself.id == node_id:
        new.myself = next(iter(new.nodes.values()))
    return new


def released(topology: Topology, node: ClusterNode) -> Topology:
    """What a node removed from `topology` (the cluster after its removal) is told: itself
    alone, a primary of no slot, nothing on the move, at the cluster's epoch and under its
    controller."""
    from streamkeep.engine.exec.cluster import Topology

    alone = _node_copy(node)
    alone.primary = None
    alone.migrating, alone.importing = {}, {}
    return Topology(alone, {alone.id: alone}, [None] * len(topology.owners), topology.epoch,
                    managed_by=topology.managed_by)


def moving(topology: Topology, moves: dict[int, str]) -> Topology:
    """Slots set on the move: each slot of `moves` migrating from its owner to the primary
    named (importing there). A slot that is its target's already, or on the move already, is
    left as it is."""
    new = _copy(topology)
    for slot, target_id in moves.items():
        target = new.nodes.get(target_id)
        if target is None or not target.is_primary:
            raise PlanError(f"no primary {target_id} in the topology")
        owner_id = new.owners[slot]
        if owner_id is None:
            raise PlanError(f"slot {slot} is served by no node: nothing to move")
        owner = new.nodes[owner_id]
        if owner_id == target_id or slot in owner.migrating:
            continue
        owner.migrating[slot] = target_id
        target.importing[slot] = owner_id
    new.recount()
    return new


def moved(topology: Topology, slots: list[int]) -> Topology:
    """Slots whose keys have all moved given to their targets, their states cleared."""
    new = _copy(topology)
    for slot in slots:
        owner_id = new.owners[slot]
        if owner_id is None:
            continue
        target_id = new.nodes[owner_id].migrating.pop(slot, None)
        if target_id is None:
            continue
        new.nodes[target_id].importing.pop(slot, None)
        new.owners[slot] = target_id
    new.recount()
    return new


def on_the_move(topology: Topology) -> list[tuple[int, str, str]]:
    """Every slot on the move: (slot, source id, target id), in slot order."""
    return sorted((slot, node.id, target) for node in topology.nodes.values()
                  for slot, target in node.migrating.items())


def rebalanced(topology: Topology) -> dict[int, str]:
    """The moves that spread the slots evenly over the primaries (each within one slot of
    the others): from the primaries holding more than their share, their highest slots, to
    those holding fewer, in order."""
    primaries = sorted(n.id for n in topology.nodes.values() if n.is_primary)
    if not primaries:
        return {}
    served = [slot for slot, owner in enumerate(topology.owners) if owner is not None]
    share, extra = divmod(len(served), len(primaries))
    held = {p: [s for s, o in enumerate(topology.owners) if o == p] for p in primaries}
    order = sorted(primaries, key=lambda p: -len(held[p]))
    wanted = {p: share + (1 if i < extra else 0) for i, p in enumerate(order)}
    spare = [slot for p in order for slot in held[p][wanted[p]:]]
    moves = {}
    for p in reversed(order):
        while len(held[p]) < wanted[p] and spare:
            slot = spare.pop(0)
            held[p].append(slot)
            moves[slot] = p
    return moves


def most_advanced(offsets: dict[str, int]) -> str | None:
    """Of the replicas whose log position is known, the one holding the most of the log (the
    lowest id among equals, so every controller picks the same one); None if none is known."""
    if not offsets:
        return None
    return min(offsets, key=lambda node_id: (-offsets[node_id], node_id))


def find(topology: Topology, name: str) -> ClusterNode:
    """A node of the topology by id, id prefix (8 digits or more) or HOST:PORT."""
    if name in topology.nodes:
        return topology.nodes[name]
    matches = [n for n in topology.nodes.values()
               if f"{n.ip}:{n.port}" == name or (len(name) >= 8 and n.id.startswith(name))]
    if len(matches) != 1:
        raise PlanError(f"{name}: {'no' if not matches else 'more than one'} node of the "
                        "topology")
    return matches[0]


__all__ = ["PlanError", "failed_over", "find", "most_advanced", "moved", "moving", "on_the_move",
           "rebalanced", "with_node", "without_node"]
