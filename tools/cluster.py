"""`streamkeep cluster`: a cluster of streamkeep nodes made from a fixed topology, and reports on it.

Owns the command's arguments and output: `create` (the slots spread evenly over the
primaries, as redis-cli --cluster create spreads them; replicas given to the primaries in
turn; the topology, at an epoch past every node's, set on each node with CLUSTER SETTOPOLOGY),
`check` (every node the topology names reachable and holding the same topology, every slot
served) and `info` (each primary's keys, slots and replicas), as text or JSON; and, for other
tools (`streamkeep export --cluster`), `primaries`: each primary of a cluster with the data
directory it says it keeps (CONFIG GET dir). It talks to the nodes through the crash bench's
RespTarget. Must not touch: a node's data (it reads CLUSTER NODES, CLUSTER INFO, CLUSTER MYID,
CLUSTER MYSHARDID, CONFIG GET, DBSIZE and INFO replication, and sets the topology).

Exit status: 0 ok; 1 `check` found a problem; 2 a node cannot be reached or refused the
topology; 3 usage error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError

EXIT_PROBLEM = 1  # check: the nodes disagree, a slot is unserved, a node is unreachable
EXIT_NODE = 2  # a node cannot be reached, or refused the topology
TIMEOUT = 10.0  # seconds for a node to answer
SYNC_TIMEOUT = 60.0  # create: seconds for every replica to finish its first sync
SLOTS = 16384
DEFAULT_CLUSTER = "streamkeep"  # a cluster's name in etcd when none is given


class NodeError(StreamkeepError):
    """A node cannot be reached, or answered an error: the one line to print."""


class PrimaryError(NodeError):
    """A primary the topology names cannot be reached or asked (`primaries`)."""


class Node:
    """A connection to one node (the crash bench's RespTarget): `call(*args)` sends a command
    and returns its reply; no connection, no reply in time, or an error reply, NodeError."""

    def __init__(self, address: str, timeout: float = TIMEOUT) -> None:
        from streamkeep.tools.crashbench.client import RespTarget
        from streamkeep.tools.crashbench.target import ConnectionLost

        self.address = address
        self.host, self.port = split_address(address)
        try:
            self.target = RespTarget(self.host, self.port, timeout, timeout)
        except ConnectionLost as err:
            raise NodeError(f"{address}: cannot connect ({err.__cause__ or err})") from None

    def call(self, *args: str | bytes | int) -> Any:
        from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost

        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        try:
            return self.target.execute(argv)
        except ConnectionLost as err:
            raise NodeError(str(err)) from None
        except CommandFailed as err:
            what = b" ".join(argv[:2]).decode("utf-8", "replace")
            raise NodeError(f"{self.address}: {what}: {err}") from None

    def text(self, *args: str) -> str:
        reply = self.call(*args)
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    def close(self) -> None:
        self.target.close()


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT (the host may be an IPv6 literal: the port is after the last colon)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address}: not HOST:PORT")
    return host.strip("[]"), int(port)


# --- create --------------------------------------------------------------------------------------


def spread(primaries: int) -> list[tuple[int, int]]:
    """The slot range of each of `primaries` primaries, as redis-cli --cluster create spreads
    them: SLOTS / primaries each, rounded, the last one to the end."""
    per, cursor, first, ranges = SLOTS / primaries, 0.0, 0, []
    for i in range(primaries):
        last = int(cursor + per - 1 + 0.5)  # (C's lround of a positive value)
        if last > SLOTS - 1 or i == primaries - 1:
            last = SLOTS - 1
        ranges.append((first, last))
        first = last + 1
        cursor += per
    return ranges


def create(addresses: Sequence[str], replicas: int,
           commit: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """The cluster made (see the module's docstring): its topology as a dict. With `commit`,
    the topology is handed to it (a controller's record: tools.controller.operations) instead
    of being set on the nodes, and `commit` returns it as committed."""
    from streamkeep.engine.exec.cluster import ClusterNode, Topology, render

    if replicas < 0:
        raise ValueError("--replicas must be 0 or more")
    if len(set(addresses)) != len(addresses):
        raise ValueError("a node is given twice")
    primaries = len(addresses) // (replicas + 1)
    if primaries < 1 or primaries * (replicas + 1) != len(addresses):
        raise ValueError(f"{len(addresses)} nodes cannot make primaries with {replicas} "
                         f"replicas each (give a multiple of {replicas + 1})")
    nodes = [Node(address) for address in addresses]
    try:
        members, epoch = [], 0
        for node in nodes:
            if int(node.call("DBSIZE")):
                raise NodeError(f"{node.address}: holds keys (a new cluster's nodes are empty)")
            epoch = max(epoch, epoch_of(node))
            cport = own_bus_port(node)
            members.append(ClusterNode(node.text("CLUSTER", "MYID"), node.host, node.port, cport,
                                       node.text("CLUSTER", "MYSHARDID")))
        heads = members[:primaries]
        for i, member in enumerate(members[primaries:]):
            head = heads[i % primaries]
            member.primary, member.shard_id = head.id, head.shard_id
        owners: list[str | None] = [None] * SLOTS
        for head, (first, last) in zip(heads, spread(primaries), strict=True):
            owners[first:last + 1] = [head.id] * (last - first + 1)
        topology = Topology(members[0], {m.id: m for m in members}, owners, epoch + 1)
        if commit is not None:
            topology = commit(topology)
        else:
            lines = [line for line in render(topology).splitlines()
                     if not line.startswith("vars ")]
            for node in nodes:
                node.call("CLUSTER", "SETTOPOLOGY", topology.epoch, *lines)
        _wait_for_replicas(nodes[primaries:])
        return report_of(topology, {m.id: n.address for m, n in zip(members, nodes, strict=True)})
    finally:
        for node in nodes:
            node.close()


def own_bus_port(node: Node) -> int:
    """The bus port a node shows for itself in CLUSTER NODES (NodeError: not a node's line)."""
    for line in node.text("CLUSTER", "NODES").splitlines():
        words = line.split()
        if len(words) > 2 and "myself" in words[2].split(","):
            bus = words[1].partition("@")[2].split(",")[0]
            if bus.isdigit():
                return int(bus)
    raise NodeError(f"{node.address}: CLUSTER NODES shows no line of its own")


def _wait_for_replicas(replicas: Sequence[Node]) -> None:
    """Until every replica's link to its primary is up (its first sync done)."""
    deadline = time.monotonic() + SYNC_TIMEOUT
    for node in replicas:
        while _fields(node.text("INFO", "replication")).get("master_link_status") != "up":
            if time.monotonic() > deadline:
                raise NodeError(f"{node.address}: not in sync with its primary after "
                                f"{SYNC_TIMEOUT:g} s")
            time.sleep(0.1)


def epoch_of(node: Node) -> int:
    """The topology epoch a node holds (CLUSTER INFO's cluster_current_epoch)."""
    epoch = _fields(node.text("CLUSTER", "INFO")).get("cluster_current_epoch", "")
    if not epoch.isdigit():
        raise NodeError(f"{node.address}: CLUSTER INFO gives no cluster_current_epoch")
    return int(epoch)


def _fields(text: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line
                and not line.startswith("#"))


def report_of(topology: Any, addresses: dict[str, str]) -> dict[str, Any]:
    return {"epoch": topology.epoch, "primaries": [
        {"id": node.id, "address": addresses.get(node.id, f"{node.ip}:{node.port}"),
         "slots": [list(r) for r in topology.slot_ranges(node.id)],
         "replicas": [addresses.get(r.id, f"{r.ip}:{r.port}")
                      for r in topology.replicas_of(node.id)]}
        for node in topology.nodes.values() if node.is_primary]}


# --- check and info ------------------------------------------------------------------------------


def topology_of(address: str) -> Any:
    """The topology the node at `address` holds (engine.exec.cluster's Topology), its epoch
    set; NodeError when it cannot be reached, is no cluster node, or answers no topology."""
    from streamkeep.engine.exec.cluster import NodesFileError, parse

    first = Node(address)
    try:
        myself = first.text("CLUSTER", "MYID")
        topology = parse(first.text("CLUSTER", "NODES"), address, myself_id=myself)
        topology.epoch = epoch_of(first)
    except NodesFileError as err:
        raise NodeError(f"CLUSTER NODES: {err}") from None
    finally:
        first.close()
    return topology


def member_address(member: Any, asked: str) -> str:
    """Where a node the topology names is reached: its announced ip (or, when it announces
    none, the host `asked` was reached at) and port."""
    return f"{member.ip or split_address(asked)[0]}:{member.port}"


def survey(address: str, topology: Any = None) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The topology `address` holds (or `topology`, given: etcd's), and per node it names:
    its reachability, the epoch and the topology text it holds, its keys."""
    if topology is None:
        topology = topology_of(address)
    seen: dict[str, dict[str, Any]] = {}
    for node_id, member in topology.nodes.items():
        where = member_address(member, address)
        try:
            node = Node(where)
        except NodeError as err:
            seen[node_id] = {"address": where, "error": str(err)}
            continue
        try:
            replication = _fields(node.text("INFO", "replication"))
            offset = replication.get("master_repl_offset", "0")
            seen[node_id] = {
                "address": where, "epoch": epoch_of(node),
                "view": _view(node.text("CLUSTER", "NODES")), "keys": int(node.call("DBSIZE")),
                "offset": int(offset) if offset.isdigit() else 0,
                "state": _fields(node.text("CLUSTER", "INFO")).get("cluster_state", "?")}
        except NodeError as err:
            seen[node_id] = {"address": where, "error": str(err)}
        finally:
            node.close()
    return topology, seen


@dataclass(frozen=True, slots=True)
class Primary:
    """A primary of a cluster as its node describes itself: its id, address and slot ranges,
    its data directory and cluster-config-file (CONFIG GET: paths on the node's machine), and
    its replicas' addresses."""

    id: str
    address: str
    slots: tuple[tuple[int, int], ...]
    directory: str
    config_file: str
    replicas: tuple[str, ...]


def primaries(address: str) -> list[Primary]:
    """Every primary of the topology `address` holds, in slot order (a primary serving no
    slot last), each asked for its data directory. NodeError naming the primary (its id,
    address, slots and replicas) when one cannot be reached, answers as another node, or
    names no data directory (a server without one): PrimaryError."""
    topology = topology_of(address)
    heads = sorted((n for n in topology.nodes.values() if n.is_primary),
                   key=lambda n: (topology.slot_ranges(n.id) or [(SLOTS, SLOTS)])[0])
    found = []
    for head in heads:
        where = member_address(head, address)
        slots = tuple(topology.slot_ranges(head.id))
        replicas = tuple(member_address(r, address) for r in topology.replicas_of(head.id))
        try:
            directory, config_file = _directory(head.id, where)
        except NodeError as err:
            served = ", ".join(f"{a}-{b}" for a, b in slots) or "none"
            raise PrimaryError(f"primary {head.id} at {where} (slots {served}; replicas: "
                               f"{', '.join(replicas) or 'none'}): {err}") from None
        found.append(Primary(head.id, where, slots, directory, config_file, replicas))
    return found


def _directory(node_id: str, where: str) -> tuple[str, str]:
    """(dir, cluster-config-file) of the node at `where`, which must be `node_id`."""
    node = Node(where)
    try:
        answered = node.text("CLUSTER", "MYID")
        if answered != node_id:
            raise NodeError(f"{where} answers as node {answered}")
        settings = {}
        for name in ("dir", "cluster-config-file"):
            reply = node.call("CONFIG", "GET", name)
            pairs = list(reply.items()) if isinstance(reply, dict) else \
                list(zip(reply[::2], reply[1::2], strict=False)) if isinstance(reply, list) \
                else []
            if len(pairs) != 1:
                raise NodeError(f"{where}: CONFIG GET {name} gives no value")
            value = pairs[0][1]
            settings[name] = value.decode("utf-8", "surrogateescape") \
                if isinstance(value, bytes) else str(value)
    finally:
        node.close()
    return settings["dir"], settings["cluster-config-file"]


def _view(nodes_text: str) -> list[tuple[str, str, str]]:
    """A CLUSTER NODES reply as what nodes must agree on: each node's id, primary and slots."""
    return sorted((w[0], w[3], " ".join(w[8:])) for w in
                  (line.split() for line in nodes_text.splitlines()) if w)


def check(address: str) -> dict[str, Any]:
    """`check`'s findings: problems (a list of lines) and what was checked."""
    topology, seen = survey(address)
    problems = [entry["error"] for entry in seen.values() if "error" in entry]
    views = {entry["address"]: (entry["epoch"], entry["view"]) for entry in seen.values()
             if "error" not in entry}
    if len(set(map(repr, views.values()))) > 1:
        problems.append("the nodes hold different topologies: " + ", ".join(
            f"{where} epoch {epoch}" for where, (epoch, _view) in sorted(views.items())))
    served = topology.assigned_slots()
    if served != SLOTS:
        problems.append(f"{SLOTS - served} slots are served by no node")
    return {"nodes": len(topology.nodes), "epoch": topology.epoch, "slots_served": served,
            "problems": problems, "members": _members(topology, seen)}


def _members(topology: Any, seen: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each node as check shows it: its role, slots, epoch, cluster state, log position and,
    for a replica, how far behind its primary it is (records)."""
    members = []
    for node_id, node in topology.nodes.items():
        entry = seen.get(node_id, {})
        primary = seen.get(node.primary or "", {})
        lag = (max(primary["offset"] - entry["offset"], 0)
               if node.primary and "offset" in entry and "offset" in primary else None)
        members.append({
            "id": node_id, "address": entry.get("address"),
            "role": "primary" if node.is_primary else "replica",
            "slots": [list(r) for r in topology.slot_ranges(node_id)],
            "epoch": entry.get("epoch"), "state": entry.get("state"),
            "offset": entry.get("offset"), "lag": lag, "error": entry.get("error")})
    return members


def info(address: str, topology: Any = None) -> dict[str, Any]:
    """`info`'s report: each primary's address, id, slots, replicas and keys (of the topology
    `address` holds, or of `topology`, given)."""
    topology, seen = survey(address, topology)
    report = report_of(topology, {node_id: entry["address"] for node_id, entry in seen.items()})
    for primary in report["primaries"]:
        primary["keys"] = seen.get(primary["id"], {}).get("keys")
    return report


