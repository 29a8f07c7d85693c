"""`streamkeep cluster`'s command line: its subcommands' arguments, their dispatch and output.

Owns the arguments (create, check, info on the nodes: tools.cluster; add-node, remove-node,
failover and controller: tools.controller.operations), which of them a command runs, and its
text or JSON output. Exit status: 0 ok; 1 `check` found a problem; 2 a node cannot be reached
or refused the topology, etcd or the controller failed the change; 3 usage error.
Must not touch: the nodes and etcd (the modules it calls do).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.cluster import (
    DEFAULT_CLUSTER,
    EXIT_NODE,
    EXIT_PROBLEM,
    SLOTS,
    check,
    create,
    info,
    split_address,
)
from streamkeep.tools.exits import EXIT_USAGE

HELP = ("make a cluster of streamkeep nodes, change it, check it, report it; run its "
        "controller over etcd")
EPILOG = f"""examples:
  streamkeep cluster create 127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002
                                     three primaries, the slots spread evenly
  streamkeep cluster create 127.0.0.1:7000 ... 127.0.0.1:7005 --replicas 1
                                     three primaries, each with a replica
  streamkeep cluster check 127.0.0.1:7000
                                     every node agrees, every slot served
  streamkeep cluster info 127.0.0.1:7000 --json
  streamkeep cluster controller --etcd http://127.0.0.1:2379
                                     a controller: the topology in etcd,
                                     primaries failed over
  streamkeep cluster create --etcd http://127.0.0.1:2379 --replicas 1 NODES...
                                     the topology committed in etcd
  streamkeep cluster failover --etcd http://127.0.0.1:2379 127.0.0.1:7002
                                     a replica made primary, nothing lost

Each node is a `streamkeep serve --cluster-enabled yes` that serves no other
node's slots yet (a node alone serves every slot: create takes them back). The
addresses given are the ones the nodes announce to clients (MOVED, CLUSTER
SLOTS): give the address clients use. The first nodes become primaries, the
rest replicas of them in turn; a replica follows its primary with streamkeep's
replication. create refuses a node holding keys.

exit status: 0 ok; {EXIT_PROBLEM} check found a problem; {EXIT_NODE} a node cannot be reached
or refused the topology; {EXIT_USAGE} usage error; 130 interrupted."""



def _address(value: str) -> str:
    try:
        split_address(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def _managed(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """--etcd and --cluster: the cluster's record and its controller."""
    parser.add_argument("--etcd", metavar="URL", required=required, default="",
                        help="the etcd holding the cluster's topology (http://HOST:PORT, or "
                             "several, comma-separated): the change goes through its controller")
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME",
                        help=f"the cluster's name in etcd (default {DEFAULT_CLUSTER})")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND", required=True)
    create = sub.add_parser("create", help="make a cluster of the nodes given",
                            description="Make a cluster of the nodes given: the first ones "
                                        "primaries, the slots spread evenly over them, the "
                                        "rest their replicas.")
    create.add_argument("nodes", nargs="+", type=_address, metavar="HOST:PORT")
    create.add_argument("--replicas", type=int, default=0, metavar="N",
                        help="replicas per primary (default 0)")
    create.add_argument("--json", action="store_true", help="the topology made, as JSON")
    _managed(create)
    for name, text in (("check", "check that every node agrees and every slot is served"),
                       ("info", "each primary's keys, slots and replicas")):
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        p.add_argument("node", type=_address, metavar="HOST:PORT",
                       help="any node of the cluster")
        p.add_argument("--json", action="store_true", help="the report as JSON")
        _managed(p)
    add = sub.add_parser("add-node", help="add an empty node: a replica, or a primary with "
                                          "no slot yet",
                         description="Add an empty node to the cluster: a replica of the "
                                     "primary --replica-of names, or a primary that serves "
                                     "no slot yet.")
    add.add_argument("new_node", type=_address, metavar="NEW_HOST:PORT")
    add.add_argument("--replica-of", metavar="NODE", default="",
                     help="the primary it replicates (its id, 8 digits of it, or HOST:PORT)")
    remove = sub.add_parser("remove-node", help="remove a replica, or a primary with no slot",
                            description="Remove a node from the cluster: a replica, or a "
                                        "primary that serves no slot and has no replica.")
    remove.add_argument("gone", metavar="NODE", help="its id, 8 digits of it, or HOST:PORT")
    fail = sub.add_parser("failover", help="make a replica its shard's primary",
                          description="Make a replica its shard's primary. Through a "
                                      "controller (--etcd) nothing acknowledged is lost: the "
                                      "primary stops taking writes until the replica holds "
                                      "its whole log.")
    fail.add_argument("replica", metavar="REPLICA", help="its id, 8 digits of it, or HOST:PORT")
    fail.add_argument("--force", action="store_true",
                      help="do not wait for the primary (it is gone); without --etcd: a "
                           "takeover, which may lose what the primary acknowledged last")
    move = sub.add_parser("migrate-slots", help="move slots to a primary while they serve",
                          description="Move slots to a primary while clients read and write "
                                      "them: the controller sends their keys over with "
                                      "MIGRATE (clients follow ASK meanwhile), then gives the "
                                      "slots to the primary.")
    move.add_argument("--to", required=True, metavar="NODE",
                      help="the primary that takes them (its id, 8 digits of it, or HOST:PORT)")
    move.add_argument("--slots", required=True, metavar="RANGES",
                      help="the slots, e.g. 0-99,200")
    balance = sub.add_parser("rebalance", help="spread the slots evenly over the primaries",
                             description="Spread the slots evenly over the primaries (a "
                                         "primary added with add-node takes its share), "
                                         "moving them while they serve.")
    for p in (add, remove, fail, move, balance):
        p.add_argument("--node", type=_address, metavar="HOST:PORT", default=None,
                       help="any node of the cluster (without --etcd)")
        p.add_argument("--json", action="store_true", help="the result as JSON")
        _managed(p)
    control = sub.add_parser("controller", help="run a controller of a cluster kept in etcd",
                             description="Run a controller: it leads the cluster through an "
                                         "etcd lease (others wait), pushes the topology etcd "
                                         "holds to the nodes, renews their leases and fails "
                                         "over a primary silent for its "
                                         "cluster-node-timeout. Runs until SIGINT or SIGTERM.")
    _managed(control, required=True)
    control.add_argument("--name", default=None,
                         help="this controller's name in etcd (default HOST-PID)")


# --- the command ---------------------------------------------------------------------------------


def main(args: argparse.Namespace) -> int:
    command = args.cluster_command
    try:
        if command == "controller":
            from streamkeep.tools.controller.operations import run_controller

            return run_controller(args)
        result = _run(command, args)
    except ValueError as err:
        print(f"streamkeep cluster {command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except StreamkeepError as err:  # a node's, etcd's, the controller's, a plan's
        print(f"streamkeep cluster {command}: {err}", file=sys.stderr)
        return EXIT_NODE
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(_text(command, result))
    return EXIT_PROBLEM if command == "check" and result["problems"] else 0


def _run(command: str, args: argparse.Namespace) -> dict[str, Any]:
    from streamkeep.tools.controller import operations

    if command == "create" and args.etcd:
        print(f"committing the topology to {args.etcd}, cluster {args.cluster}",
              file=sys.stderr)
        return operations.create(args.nodes, args.replicas, args.etcd, args.cluster)
    if command == "create":
        return create(args.nodes, args.replicas)
    if command == "check" and args.etcd:
        from streamkeep.tools.controller import operations

        return operations.check_managed(args, check(args.node))
    if command == "check":
        return check(args.node)
    if command == "info" and args.etcd:
        from streamkeep.tools.controller import operations

        return info(args.node, operations.record_topology(args))
    if command == "info":
        return info(args.node)
    if command == "add-node":
        return operations.add_node(args)
    if command == "remove-node":
        return operations.remove_node(args)
    if command == "migrate-slots":
        return operations.migrate_slots(args)
    if command == "rebalance":
        return operations.rebalance(args)
    return operations.failover(args)


def _text(command: str, result: dict[str, Any]) -> str:
    if command == "failover" and "primaries" not in result:
        return f"{result['address']} ({result['primary'][:8]}...) is primary at epoch {result['epoch']}"
    if command == "check":
        lines = [f"{result['nodes']} nodes, topology epoch {result['epoch']}, "
                 f"{result['slots_served']:,} of {SLOTS:,} slots served"]
        for member in result["members"]:
            slots = sum(last - first + 1 for first, last in member["slots"])
            where = f"{member['address']} ({member['id'][:8]}...) {member['role']}"
            if member["error"]:
                lines.append(f"  {where}: unreachable")
                continue
            lag = "" if member["lag"] is None else f", {member['lag']} records behind"
            lines.append(f"  {where}: {slots} slots, epoch {member['epoch']}, "
                         f"{member['state']}, log position {member['offset']}{lag}")
        if "record_epoch" in result:
            lines.append(f"  etcd: epoch {result['record_epoch']}, leader "
                         f"{result['leader'] or 'none'}, {len(result['moving'])} slots on the move")
        lines += [f"[ERR] {problem}" for problem in result["problems"]]
        if not result["problems"]:
            lines.append("[OK] every node holds the same topology; every slot is served")
        return "\n".join(lines)
    lines = []
    for primary in result["primaries"]:
        slots = sum(last - first + 1 for first, last in primary["slots"])
        keys = primary.get("keys")
        lines.append(f"{primary['address']} ({primary['id'][:8]}...) -> "
                     + ("" if keys is None else f"{keys} keys | ")
                     + f"{slots} slots | {len(primary['replicas'])} replicas"
                     + "".join(f"\n    replica {r}" for r in primary["replicas"]))
    lines.append(f"topology epoch {result['epoch']}")
    return "\n".join(lines)
