"""`streamkeep cluster`'s changes to a cluster: add-node, remove-node, failover, and create
under a controller; and `streamkeep cluster controller` itself.

Owns where a change goes: with `--etcd`, into the cluster's record (a compare-and-swap at the
next epoch; the leading controller pushes it, and the command waits until every node holds it),
or a manual failover as a request to the leading controller; without, straight to the nodes
(the topology at the next epoch set on each with CLUSTER SETTOPOLOGY, as `create` does). Must
not touch: the topology's shape (tools.controller.plans), the record's bytes
(tools.controller.record).
"""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from streamkeep.tools.controller import plans, record

if TYPE_CHECKING:
    import argparse

    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.tools.controller.etcd import Etcd

PUSH_TIMEOUT: Final = 30.0  # seconds for the controller to bring every node to a new epoch
FAILOVER_TIMEOUT: Final = 60.0  # seconds for a manual failover's answer
MOVE_BATCH: Final = 256  # slots set on the move at once
MOVE_TIMEOUT: Final = 3600.0  # seconds for a batch of slots to be moved


def etcd_of(args: argparse.Namespace) -> Etcd:
    from streamkeep.tools.controller.etcd import Etcd

    return Etcd(args.etcd)


def create_managed(url: str, cluster: str, topology: Topology) -> Topology:
    """A new cluster's topology committed in etcd; back when every node holds it."""
    from streamkeep.tools.controller.etcd import Etcd

    etcd = Etcd(url)
    try:
        made = record.create(etcd, cluster, topology)
    finally:
        etcd.close()
    wait_for_epoch(made.topology, made.epoch)
    return made.topology


def create(addresses: list[str], replicas: int, url: str, cluster: str) -> dict[str, Any]:
    """`cluster create --etcd`: the cluster tools.cluster's create makes, committed in etcd
    for its controller to push."""
    from streamkeep.tools.cluster import create as make

    return make(addresses, replicas, lambda topology: create_managed(url, cluster, topology))


def change(args: argparse.Namespace, plan: Callable[[Topology], Topology]) -> Topology:
    """`plan` applied to the cluster's topology at the next epoch: committed in etcd (the
    controller pushes it) or, without --etcd, set on every node; back when every node of the
    new topology holds it."""
    from streamkeep.tools.cluster import NodeError, topology_of

    if args.etcd:
        etcd = etcd_of(args)
        try:
            for _attempt in range(10):
                current = record.load(etcd, args.cluster)
                if current is None:
                    raise NodeError(f"cluster {args.cluster} has no topology in {args.etcd} "
                                    "(make it with `cluster create --etcd`)")
                committed = record.commit(etcd, args.cluster, current, plan(current.topology))
                if committed is not None:
                    break
            else:
                raise NodeError("the topology kept changing under the command; try again")
        finally:
            etcd.close()
        wait_for_epoch(committed.topology, committed.epoch)
        return committed.topology
    if not args.node:
        raise ValueError("give --node HOST:PORT (any node of the cluster) or --etcd URL")
    topology = topology_of(args.node)
    if topology.managed_by:
        raise NodeError(f"{args.node}: its cluster is managed by the controller of cluster "
                        f"{topology.managed_by}: give --etcd")
    new = plan(topology)
    new.epoch = topology.epoch + 1
    _push(new, [*topology.nodes.values(), *new.nodes.values()])
    return new


def _push(topology: Topology, members: list[Any]) -> None:
    from streamkeep.tools.cluster import Node, NodeError
    from streamkeep.tools.controller.control import record_lines

    lines = record_lines(topology)
    done = set()
    for member in members:
        where = f"{member.ip or '127.0.0.1'}:{member.port}"
        if member.id in done:
            continue
        done.add(member.id)
        node = Node(where)
        try:
            if member.id in topology.nodes:
                node.call("CLUSTER", "SETTOPOLOGY", topology.epoch, *lines)
        except NodeError:
            if member.id in topology.nodes:
                raise
        finally:
            node.close()


def wait_for_epoch(topology: Topology, epoch: int) -> None:
    """Until every node of `topology` holds `epoch` or a newer one (the controller pushes)."""
    from streamkeep.tools.cluster import Node, NodeError, epoch_of

    deadline = time.monotonic() + PUSH_TIMEOUT
    for member in topology.nodes.values():
        where = f"{member.ip or '127.0.0.1'}:{member.port}"
        while True:
            try:
                node = Node(where)
                try:
                    if epoch_of(node) >= epoch:
                        break
                finally:
                    node.close()
            except NodeError:
                pass
            if time.monotonic() > deadline:
                raise NodeError(f"{where} does not hold epoch {epoch} after {PUSH_TIMEOUT:g} s: "
                                "is a `streamkeep cluster controller` running for this cluster?")
            time.sleep(0.1)


def add_node(args: argparse.Namespace) -> dict[str, Any]:
    from streamkeep.engine.exec.cluster import ClusterNode
    from streamkeep.tools.cluster import Node, NodeError, own_bus_port, report_of

    node = Node(args.new_node)
    try:
        if int(node.call("DBSIZE")):
            raise NodeError(f"{node.address}: holds keys (a new node is empty)")
        member = ClusterNode(node.text("CLUSTER", "MYID"), node.host, node.port,
                             own_bus_port(node), node.text("CLUSTER", "MYSHARDID"))
    finally:
        node.close()

    def plan(topology: Topology) -> Topology:
        primary = plans.find(topology, args.replica_of).id if args.replica_of else None
        return plans.with_node(topology, member, primary)

    return report_of(change(args, plan), {})


def remove_node(args: argparse.Namespace) -> dict[str, Any]:
    from streamkeep.tools.cluster import report_of

    removed: list[Any] = []

    def plan(topology: Topology) -> Topology:
        gone = plans.find(topology, args.gone)
        removed[:] = [gone]
        return plans.without_node(topology, gone.id)

    new = change(args, plan)
    _release(removed[0], new)
    return report_of(new, {})


def _release(gone: Any, topology: Topology) -> None:
    """The removed node told, if it can be reached: a topology of its own at the new epoch,
    serving no slot and following nobody. A removed replica stops replicating (its ACKs
    would count for WAIT where no failover can promote it); a client sent there is told no
    slot is served. Managed by the same controller, as before: nobody else reuses it by
    mistake."""
    from streamkeep.tools.cluster import Node, NodeError
    from streamkeep.tools.controller.control import record_lines

    own = plans.released(topology, gone)
    try:
        node = Node(f"{gone.ip or '127.0.0.1'}:{gone.port}")
    except NodeError:
        return  # (down: it is told nothing; a node nobody leases serves nothing new)
    try:
        controller = ("CONTROLLER", own.managed_by) if own.managed_by else ()
        node.call("CLUSTER", "SETTOPOLOGY", own.epoch, *controller, *record_lines(own))
    except NodeError:
        pass
    finally:
        node.close()


def failover(args: argparse.Namespace) -> dict[str, Any]:
    """A replica made its shard's primary: with --etcd, by the leading controller (nothing
    lost: the primary stops taking writes until the replica holds its whole log); without,
    only with --force (no controller fences the old primary)."""
    if args.etcd:
        from streamkeep.tools.controller.control import ask

        etcd = etcd_of(args)
        try:
            return ask(etcd, args.cluster, {"op": "failover", "node": args.replica,
                                            "force": args.force}, FAILOVER_TIMEOUT)
        finally:
            etcd.close()
    if not args.force:
        raise ValueError("without --etcd a failover is a takeover: nothing fences the old "
                         "primary, so writes it acknowledged since the replica's last "
                         "position may be lost; give --force to do it anyway")
    from streamkeep.tools.cluster import report_of

    def plan(topology: Topology) -> Topology:
        return plans.failed_over(topology, plans.find(topology, args.replica).id)

    args.node = args.node or args.replica
    return report_of(change(args, plan), {})


def parse_slots(text: str) -> list[int]:
    """"0-99,200": the slots named (ValueError for anything else)."""
    from streamkeep.engine.model.keyslot import SLOTS

    slots: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise ValueError(f"{part!r}: not a slot or a range of slots (0-16383)")
        lo, hi = int(first), int(last or first)
        if not 0 <= lo <= hi < SLOTS:
            raise ValueError(f"{part!r}: slots are 0-16383")
        slots.extend(range(lo, hi + 1))
    return sorted(set(slots))


def migrate_slots(args: argparse.Namespace) -> dict[str, Any]:
    """`cluster migrate-slots --to NODE --slots RANGES`: the slots moved to a primary by the
    controller, a batch at a time."""
    def moves(topology: Topology) -> dict[int, str]:
        target = plans.find(topology, args.to).id
        return {slot: target for slot in parse_slots(args.slots)}

    return _move(args, moves)


def rebalance(args: argparse.Namespace) -> dict[str, Any]:
    """`cluster rebalance`: the slots spread evenly over the primaries by the controller."""
    return _move(args, plans.rebalanced)


def _move(args: argparse.Namespace, planned: Callable[[Topology], dict[int, str]]) -> dict[str, Any]:
    """The moves `planned` makes of the cluster's topology, committed in etcd a batch of
    slots at a time; each batch waited for until the controller has moved its keys and given
    its slots to their targets."""
    from streamkeep.tools.cluster import NodeError, report_of

    if not args.etcd:
        raise ValueError("slots are moved by a controller: give --etcd URL")
    etcd = etcd_of(args)
    try:
        current = record.load(etcd, args.cluster)
        if current is None:
            raise NodeError(f"cluster {args.cluster} has no topology in {args.etcd}")
        moves = planned(current.topology)
        slots = sorted(moves)
        done = 0
        for start in range(0, len(slots), MOVE_BATCH):
            batch = {slot: moves[slot] for slot in slots[start:start + MOVE_BATCH]}
            committed = _commit_with_retries(etcd, args.cluster,
                                             functools.partial(_moving, batch))
            _wait_moved(etcd, args.cluster, batch)
            done += len(batch)
            print(f"moved {done} of {len(slots)} slots (epoch {committed.epoch})",
                  file=sys.stderr)
        final = record.load(etcd, args.cluster)
    finally:
        etcd.close()
    assert final is not None
    wait_for_epoch(final.topology, final.epoch)
    return report_of(final.topology, {})


def _moving(batch: dict[int, str], topology: Topology) -> Topology:
    return plans.moving(topology, batch)


def _commit_with_retries(etcd: Etcd, cluster: str,
                         plan: Callable[[Topology], Topology]) -> record.Record:
    from streamkeep.tools.cluster import NodeError

    for _attempt in range(20):
        current = record.load(etcd, cluster)
        if current is None:
            raise NodeError(f"cluster {cluster} has no topology")
        committed = record.commit(etcd, cluster, current, plan(current.topology))
        if committed is not None:
            return committed
    raise NodeError("the topology kept changing under the command; try again")


def _wait_moved(etcd: Etcd, cluster: str, batch: dict[int, str]) -> None:
    """Until every slot of `batch` is its target's, off the move."""
    from streamkeep.tools.cluster import NodeError

    deadline = time.monotonic() + MOVE_TIMEOUT
    while time.monotonic() < deadline:
        current = record.load(etcd, cluster)
        if current is not None:
            moving = {slot for slot, _source, _target in plans.on_the_move(current.topology)}
            if all(current.topology.owners[slot] == target and slot not in moving
                   for slot, target in batch.items()):
                return
        time.sleep(0.1)
    raise NodeError(f"the slots were not moved within {MOVE_TIMEOUT:g} s: is a "
                    "`streamkeep cluster controller` running for this cluster?")


def record_topology(args: argparse.Namespace) -> Topology:
    """The cluster's topology as etcd holds it (`cluster info --etcd`)."""
    from streamkeep.tools.cluster import NodeError

    etcd = etcd_of(args)
    try:
        current = record.load(etcd, args.cluster)
    finally:
        etcd.close()
    if current is None:
        raise NodeError(f"cluster {args.cluster} has no topology in {args.etcd}")
    return current.topology


def check_managed(args: argparse.Namespace, found: dict[str, Any]) -> dict[str, Any]:
    """`cluster check --etcd`: what the nodes hold (`found`, tools.cluster's check) against
    the cluster's record: its epoch (a node behind it is a problem), its leading controller
    (none is a problem), the slots on the move."""
    etcd = etcd_of(args)
    try:
        current = record.load(etcd, args.cluster)
        leader = etcd.get(record.key(args.cluster, "leader"))
    finally:
        etcd.close()
    if current is None:
        found["problems"].append(f"cluster {args.cluster} has no topology in {args.etcd}")
        return found
    found["record_epoch"] = current.epoch
    found["leader"] = leader[0].decode("utf-8", "replace") if leader else None
    found["moving"] = [{"slot": slot, "from": source, "to": target}
                       for slot, source, target in plans.on_the_move(current.topology)]
    if leader is None:
        found["problems"].append("no controller leads the cluster")
    for member in found["members"]:
        if member["epoch"] is not None and member["epoch"] < current.epoch:
            found["problems"].append(f"{member['address']} holds epoch {member['epoch']}, "
                                     f"etcd {current.epoch}")
    return found


def run_controller(args: argparse.Namespace) -> int:
    """`streamkeep cluster controller`: lead (or wait to lead) until SIGINT or SIGTERM."""
    from streamkeep.tools.controller.control import Controller

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s controller: %(message)s")
    etcd = etcd_of(args)
    controller = Controller(etcd, args.cluster, args.name)
    logging.getLogger("streamkeep.controller").info(
        "controller %s of cluster %s, etcd %s: started", controller.name, args.cluster,
        args.etcd)
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: controller.stop())
    try:
        controller.run()
    finally:
        etcd.close()
    return 0


__all__ = ["add_node", "change", "check_managed", "record_topology", "create", "create_managed", "failover", "migrate_slots",
           "parse_slots", "rebalance", "remove_node", "run_controller",
           "wait_for_epoch"]
