"""CLUSTER's subcommands a node answers from the topology it holds (INFO, MYID, MYSHARDID,
NODES, SLOTS, SHARDS, LINKS, KEYSLOT, COUNT-FAILURE-REPORTS, HELP), and the connection flags
a cluster client sets (READONLY, READWRITE, ASKING), with Redis's replies and errors
(src/cluster.c, src/cluster_legacy.c). Outside cluster mode each says so, as Redis does.

Nodes do not gossip: the bus's figures (messages, links, failure reports) are those of a node
without a bus, zeros and empty lists. Must not touch: the routing of commands (engine.exec.
cluster), the topology's file (engine.services.cluster_node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.exec.cluster import NodesFileError, parse
from streamkeep.engine.exec.table import Argv, command, container, help_subcommand, subcommand
from streamkeep.engine.model.keyslot import SLOTS, key_slot
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import RespMap, Verbatim

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import ClusterNode, Topology
    from streamkeep.engine.exec.context import Ctx

DISABLED: Final = "ERR This instance has cluster support disabled"
SLOT_MIGRATION_FIELDS: Final = (
    "cluster_slot_migration_active_trim_running",
    "cluster_slot_migration_active_trim_current_job_keys",
    "cluster_slot_migration_active_trim_current_job_trimmed",
    "cluster_slot_migration_stats_active_trim_started",
    "cluster_slot_migration_stats_active_trim_completed",
    "cluster_slot_migration_stats_active_trim_cancelled")
STALE: Final = "stale"
MAX_CLUSTER_ID: Final = 64

CLUSTER = container("cluster", "A container for Redis Cluster commands.", group="cluster",
                    since="3.0.0")


def topology_of(ctx: Ctx) -> Topology:
    """The node's topology; outside cluster mode, Redis's refusal."""
    topology = ctx.engine.cluster
    if topology is None:
        raise ReplyError(DISABLED)
    return topology


@subcommand(CLUSTER, "info", 2, STALE, keys="", since="3.0.0",
            summary="Returns information about the state of a node.")
def cluster_info(ctx: Ctx, argv: Argv) -> Verbatim:
    topology = topology_of(ctx)
    primaries = {owner for owner in topology.owners if owner is not None}
    assigned = topology.assigned_slots()
    fields = (("cluster_state", "ok" if topology.ok else "fail"),
              ("cluster_slots_assigned", assigned), ("cluster_slots_ok", assigned),
              ("cluster_slots_pfail", 0), ("cluster_slots_fail", 0),
              ("cluster_known_nodes", len(topology.nodes)), ("cluster_size", len(primaries)),
              ("cluster_current_epoch", topology.epoch), ("cluster_my_epoch", topology.epoch),
              ("cluster_stats_messages_sent", 0), ("cluster_stats_messages_received", 0),
              ("total_cluster_links_buffer_limit_exceeded", 0),
              # Redis 8.4's atomic slot migration: a controller's moves (engine.commands.
              # slot_moves) this node takes part in now; its trims are the controller's
              # CLUSTER TRIM calls, not counted.
              ("cluster_slot_migration_active_tasks",
               (topology.export is not None) + len(set(topology.imports.values()))),
              *((name, 0) for name in SLOT_MIGRATION_FIELDS))
    return Verbatim("".join(f"{name}:{value}\r\n" for name, value in fields))


@subcommand(CLUSTER, "myid", 2, STALE, keys="", since="3.0.0",
            summary="Returns the ID of a node.")
def cluster_myid(ctx: Ctx, argv: Argv) -> bytes:
    return topology_of(ctx).myself.id.encode()


@subcommand(CLUSTER, "myshardid", 2, STALE, keys="", since="7.2.0",
            summary="Returns the shard ID of a node.")
def cluster_myshardid(ctx: Ctx, argv: Argv) -> bytes:
    return topology_of(ctx).myself.shard_id.encode()


@subcommand(CLUSTER, "nodes", 2, STALE, keys="", since="3.0.0",
            summary="Returns the cluster configuration for a node.")
def cluster_nodes(ctx: Ctx, argv: Argv) -> Verbatim:
    from streamkeep.engine.exec.cluster import node_line

    topology = topology_of(ctx)
    return Verbatim("".join(node_line(topology, node) + "\n"
                            for node in topology.nodes.values()))


def _endpoint_reply(topology: Topology, node: ClusterNode, tls: bool) -> list[Any]:
    """A node in CLUSTER SLOTS: its preferred endpoint, port, id, and the other names it has
    (a map: "hostname" or "ip")."""
    metadata: list[tuple[bytes, Any]] = []
    if topology.preferred_endpoint != "ip" and node.ip:
        metadata.append((b"ip", node.ip.encode()))
    if topology.preferred_endpoint != "hostname" and node.hostname:
        metadata.append((b"hostname", node.hostname.encode()))
    port = node.tls_port if tls and node.tls_port else node.port
    return [topology.endpoint(node).encode(), port, node.id.encode(), RespMap(metadata)]


def _is_tls(ctx: Ctx) -> bool:
    client = ctx.session.client
    return bool(getattr(client, "tls", False))


@subcommand(CLUSTER, "slots", 2, "loading stale", keys="", since="3.0.0",
            summary="Returns the mapping of cluster slots to nodes.")
def cluster_slots(ctx: Ctx, argv: Argv) -> list[Any]:
    topology = topology_of(ctx)
    tls = _is_tls(ctx)
    out = []
    for first, last, owner in topology.runs():
        if owner is None:
            continue
        primary = topology.nodes[owner]
        nodes = [primary, *topology.replicas_of(owner)]
        out.append([first, last, *(_endpoint_reply(topology, n, tls) for n in nodes)])
    return out


def _shard_node(topology: Topology, node: ClusterNode, tls: bool) -> RespMap:
    fields: list[tuple[bytes, Any]] = [(b"id", node.id.encode())]
    fields.append((b"tls-port", node.tls_port) if tls and node.tls_port else (b"port", node.port))
    fields += [(b"ip", node.ip.encode()), (b"endpoint", topology.endpoint(node).encode())]
    if node.hostname:
        fields.append((b"hostname", node.hostname.encode()))
    fields += [(b"role", b"master" if node.is_primary else b"replica"),
               (b"replication-offset", 0), (b"health", b"online")]
    return RespMap(fields)


@subcommand(CLUSTER, "shards", 2, "loading stale", keys="", since="7.0.0",
            summary="Returns the mapping of cluster slots to shards.")
def cluster_shards(ctx: Ctx, argv: Argv) -> list[RespMap]:
    topology = topology_of(ctx)
    tls = _is_tls(ctx)
    out = []
    for node in topology.nodes.values():
        if not node.is_primary:
            continue
        slots = [bound for first, last in topology.slot_ranges(node.id) for bound in (first, last)]
        members = [node, *topology.replicas_of(node.id)]
        out.append(RespMap([(b"slots", slots),
                            (b"nodes", [_shard_node(topology, n, tls) for n in members])]))
    return out


@subcommand(CLUSTER, "settopology", -4, "admin stale noscript", keys="", since="8.10.0",
            summary="Replaces the topology a node holds with a newer one (a controller's).",
            syntax="epoch:integer [CONTROLLER cluster-id] node-line [node-line ...]")
def cluster_settopology(ctx: Ctx, argv: Argv) -> str:
    """The whole topology at once, as nodes.conf lines (`CLUSTER NODES`' own, aux fields
    included), each one argument: taken when its epoch is newer than the node's (the same
    epoch with the same topology: OK, a retry), kept in the data directory before the reply,
    the node's replication set to what it says. Nodes never change their topology otherwise.
    CONTROLLER names the cluster whose controller sends it: from then on the node takes
    topologies sent under that name only."""
    topology = topology_of(ctx)
    epoch = parse_int(argv[2], "Invalid epoch")
    if epoch < 0:
        raise ReplyError("ERR Invalid epoch")
    lines = argv[3:]
    managed_by = ""
    if lines[0].upper() == b"CONTROLLER":
        if len(lines) < 3:
            raise ReplyError("ERR syntax error")
        managed_by = _cluster_id(lines[1])
        lines = lines[2:]
    text = "\n".join(arg.decode("utf-8", "surrogateescape") for arg in lines)
    try:
        new = parse(text, "the topology", myself_id=topology.myself.id, known=topology)
    except NodesFileError as err:
        raise ReplyError("ERR Invalid topology: " + str(err).removeprefix("the topology: ")) from None
    new.epoch = epoch
    new.managed_by = managed_by
    new.recount()
    refusal = topology.successor_refusal(new)
    if refusal is not None:
        raise ReplyError(refusal)
    if new.epoch > topology.epoch:
        assert topology.keep is not None
        topology.keep(new)
    return "OK"


@subcommand(CLUSTER, "setslot", -4, "admin stale no_async_loading", keys="", since="3.0.0",
            summary="Binds a hash slot to a node.",
            syntax="slot:integer <subcommand: IMPORTING node-id | MIGRATING node-id | "
                   "NODE node-id | STABLE>")
def cluster_setslot(ctx: Ctx, argv: Argv) -> str:
    """Redis's slot states on a node no controller manages (a managed node's come with its
    topology): MIGRATING (a slot of this node given to another: keys gone from here are sent
    there with ASK), IMPORTING (a slot this node takes: served after ASKING), STABLE (neither),
    NODE (the slot is that node's from now on; the topology's epoch moves on). Kept in the data
    directory before the reply."""
    topology = topology_of(ctx)
    if topology.managed_by:
        raise ReplyError(f"ERR this node's topology is managed by the controller of cluster "
                         f"{topology.managed_by}")
    if not topology.myself.is_primary:
        raise ReplyError("ERR Please use SETSLOT only with masters.")
    slot = parse_int(argv[2], "Invalid or out of range slot")
    if not 0 <= slot < SLOTS:
        raise ReplyError("ERR Invalid or out of range slot")
    action = argv[3].upper()
    if action == b"STABLE" and len(argv) == 4:
        new = _copy(topology)
        new.myself.migrating.pop(slot, None)
        new.myself.importing.pop(slot, None)
    elif action in (b"IMPORTING", b"MIGRATING", b"NODE") and len(argv) == 5:
        new = _setslot(ctx, topology, slot, action, argv[4].decode("utf-8", "surrogateescape"))
    else:
        raise ReplyError("ERR Invalid CLUSTER SETSLOT action or number of arguments. Try "
                         "CLUSTER HELP")
    new.recount()
    assert topology.keep is not None
    topology.keep(new)
    return "OK"


def _copy(topology: Topology) -> Topology:
    """The topology as a new one (its slot states kept), to change and keep."""
    from streamkeep.engine.exec.cluster import render

    new = parse(render(topology), "the topology", myself_id=topology.myself.id, known=topology)
    new.epoch, new.managed_by = topology.epoch, topology.managed_by
    return new


def _setslot(ctx: Ctx, topology: Topology, slot: int, action: bytes, node_id: str) -> Topology:
    node = topology.nodes.get(node_id)
    me = topology.myself
    if action == b"MIGRATING":
        if topology.owners[slot] != me.id:
            raise ReplyError(f"ERR I'm not the owner of hash slot {slot}")
        if node is None:
            raise ReplyError(f"ERR I don't know about node {node_id}")
    elif action == b"IMPORTING":
        if topology.owners[slot] == me.id:
            raise ReplyError(f"ERR I'm already the owner of hash slot {slot}")
        if node is None:
            raise ReplyError(f"ERR I don't know about node {node_id}")
    elif node is None:
        raise ReplyError(f"ERR Unknown node {node_id}")
    if not node.is_primary:
        raise ReplyError("ERR Target node is not a master")
    new = _copy(topology)
    mine = new.myself
    if action == b"MIGRATING":
        mine.migrating[slot] = node_id
    elif action == b"IMPORTING":
        mine.importing[slot] = node_id
    else:
        if (topology.owners[slot] == me.id and node_id != me.id
                and topology.slot_keys.count(ctx.engine.keyspaces, slot)):
            raise ReplyError(f"ERR Can't assign hashslot {slot} to a different node while I "
                             "still hold keys for this hash slot.")
        mine.migrating.pop(slot, None)
        mine.importing.pop(slot, None)
        new.assign(slot, slot, node_id)
        new.epoch = topology.epoch + 1
    return new


def _cluster_id(arg: bytes) -> str:
    """A controller's cluster id: a word of letters, digits, '-' and '_' (it is kept on
    nodes.conf's vars line)."""
    text = arg.decode("utf-8", "surrogateescape")
    if not text or len(text) > MAX_CLUSTER_ID or not all(c.isascii() and (c.isalnum() or c in "-_")
                                                         for c in text):
        raise ReplyError("ERR Invalid cluster id")
    return text


@subcommand(CLUSTER, "lease", 5, "admin stale loading fast", keys="", since="8.10.0",
            summary="Renews the lease a controller gives a node it manages; returns the "
                    "node's epoch and replication offset.",
            syntax="cluster-id epoch:integer milliseconds:integer")
def cluster_lease(ctx: Ctx, argv: Argv) -> list[int]:
    """The controller's probe of a node it manages: a node holding the controller's epoch
    serves `milliseconds` more (a primary that hears from nobody stops: Topology.fenced);
    a node holding an older one takes no lease (the controller sends it the topology). The
    slots a restart froze (engine.services.cluster_node) serve again. The
    reply: the node's epoch and the log position it holds (what a failover compares)."""
    topology = topology_of(ctx)
    cluster_id = _cluster_id(argv[2])
    epoch = parse_int(argv[3], "Invalid epoch")
    milliseconds = parse_int(argv[4], "Invalid lease")
    if epoch < 0 or milliseconds < 0:
        raise ReplyError("ERR Invalid lease")
    if topology.managed_by != cluster_id:
        raise ReplyError(f"ERR this node is not managed by the controller of cluster {cluster_id}")
    if epoch == topology.epoch:  # (what it holds is current: a restart's frozen slots serve)
        topology.renew(milliseconds)
        topology.restart_frozen.clear()
    journal = ctx.engine.journal
    return [topology.epoch, journal.lsn if journal is not None else 0]


@subcommand(CLUSTER, "relay", 4, "admin pubsub loading stale fast", keys="", since="8.10.0",
            summary="Delivers a message published on another node of the cluster to this "
                    "node's subscribers.",
            syntax="channel message")
def cluster_relay(ctx: Ctx, argv: Argv) -> int:
    """What a cluster's bus carries for PUBLISH (engine.services.cluster_relay sends it): the
    message delivered here, to this node's subscribers only (it goes no further: not to the
    other nodes, not to replicas). Replies the receivers here, as PUBLISH does."""
    topology_of(ctx)
    return ctx.engine.pubsub.publish(argv[2], argv[3])


def _node_named(topology: Topology, arg: bytes) -> ClusterNode:
    node_id = arg.decode("utf-8", "surrogateescape")
    node = topology.nodes.get(node_id)
    if node is None:
        raise ReplyError(f"ERR Unknown node {node_id}")
    return node


@subcommand(CLUSTER, "replicas", 3, "admin stale", keys="", since="5.0.0",
            summary="Lists the replica nodes of a master node.", syntax="node-id")
def cluster_replicas(ctx: Ctx, argv: Argv) -> list[bytes]:
    from streamkeep.engine.exec.cluster import node_line

    topology = topology_of(ctx)
    node = _node_named(topology, argv[2])
    if not node.is_primary:
        raise ReplyError("ERR The specified node is not a master")
    return [node_line(topology, replica).encode() for replica in topology.replicas_of(node.id)]


@subcommand(CLUSTER, "links", 2, STALE, keys="", since="7.0.0",
            summary="Returns a list of all TCP links to and from peer nodes.")
def cluster_links(ctx: Ctx, argv: Argv) -> list[Any]:
    topology_of(ctx)
    return []  # no bus: no links


@subcommand(CLUSTER, "countkeysinslot", 3, STALE, keys="", since="3.0.0",
            summary="Returns the number of keys in a hash slot.", syntax="slot")
def cluster_countkeysinslot(ctx: Ctx, argv: Argv) -> int:
    topology = topology_of(ctx)
    slot = parse_int(argv[2])
    if not 0 <= slot < SLOTS:
        raise ReplyError("ERR Invalid slot")
    return topology.slot_keys.count(ctx.engine.keyspaces, slot)


@subcommand(CLUSTER, "getkeysinslot", 4, STALE, keys="", since="3.0.0",
            summary="Returns the key names in a hash slot.", syntax="slot count")
def cluster_getkeysinslot(ctx: Ctx, argv: Argv) -> list[bytes]:
    """Up to `count` keys of the slot (a count past the slot's keys costs nothing more)."""
    topology = topology_of(ctx)
    slot = parse_int(argv[2])
    count = parse_int(argv[3])
    if not 0 <= slot < SLOTS or count < 0:
        raise ReplyError("ERR Invalid slot or number of keys")
    return topology.slot_keys.keys(ctx.engine.keyspaces, slot, count)


@subcommand(CLUSTER, "keyslot", 3, STALE, keys="", since="3.0.0",
            summary="Returns the hash slot for a key.", syntax="key")
def cluster_keyslot(ctx: Ctx, argv: Argv) -> int:
    topology_of(ctx)
    return key_slot(argv[2])


@subcommand(CLUSTER, "count-failure-reports", 3, "admin stale", keys="", since="3.0.0",
            summary="Returns the number of active failure reports active for a node.",
            syntax="node-id")
def cluster_count_failure_reports(ctx: Ctx, argv: Argv) -> int:
    _node_named(topology_of(ctx), argv[2])
    return 0  # no bus: nobody reports failures


# Redis's help: its own subcommands' lines, then its bus's; here those this node serves.
help_subcommand(CLUSTER, [
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "MYSHARDID",
    "    Return the node's shard id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port[,hostname]> <flags> <master> <pings> <pongs> <epoch> <link> "
    "<slot> ...",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of "
    "a link",
], since="5.0.0")


@command("readonly", 1, "fast loading stale", keys="", acl="connection", group="cluster",
         since="3.0.0",
         summary="Enables read-only queries for a connection to a Redis Cluster replica node.")
def readonly(ctx: Ctx, argv: Argv) -> str:
    topology_of(ctx)
    ctx.session.readonly = True
    return "OK"


@command("readwrite", 1, "fast loading stale", keys="", acl="connection", group="cluster",
         since="3.0.0",
         summary="Enables read-write queries for a connection to a Reids Cluster replica node.")
def readwrite(ctx: Ctx, argv: Argv) -> str:
    topology_of(ctx)
    ctx.session.readonly = False
    return "OK"


@command("asking", 1, "fast", keys="", acl="connection", group="cluster", since="3.0.0",
         summary="Signals that a cluster client is following an -ASK redirect.")
def asking(ctx: Ctx, argv: Argv) -> str:
    topology_of(ctx)
    ctx.session.asking = True
    return "OK"
