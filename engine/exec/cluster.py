"""A cluster node's topology, and the routing of a command by its keys' hash slots.

Owns `ClusterNode` (a node as a topology names it), `Topology` (the nodes, each slot's owner,
the epoch it was set at), the topology of a node alone (`alone`: every slot its own), and
Redis's getNodeByQuery as `Topology.refusal`: whether this node serves a command's keys here,
or the error line that sends the client elsewhere (MOVED, CROSSSLOT, CLUSTERDOWN). A node holds
the topology it is given and never gossips: whoever sets it (the node itself when alone, a
controller otherwise) decides it whole.

Must not touch: sockets and files (the server gives a node its address, engine.services keeps
the topology's file), command semantics (the key specs say which arguments are keys).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Final, Protocol

from streamkeep.engine.exec.key_specs import slot_positions
from streamkeep.engine.exec.keys import ALL_DATABASES, effect_keys, single_key
from streamkeep.engine.model.keyslot import SLOTS, key_slot
from streamkeep.engine.wire.errors import StreamkeepError

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.slot_export import SlotExport
    from streamkeep.engine.exec.table import Argv, CommandSpec

# (a static of this compiled module: a call to it skips the module attribute's lookup)
_slot_of: Final = key_slot
CROSSSLOT: Final = "CROSSSLOT Keys in request don't hash to the same slot"
NOT_ON_THE_MOVE: Final = ""  # (no error line is empty)
TRYAGAIN: Final = "TRYAGAIN Multiple keys request during rehashing of slot"
# A controller's move switching the slot to its target (engine.exec.slot_export): the slot's
# commands wait for the switch, a few milliseconds (a cluster client retries TRYAGAIN).
HANDING_OVER: Final = "TRYAGAIN Slot is being handed over to another node"
UNBOUND: Final = "CLUSTERDOWN Hash slot not served"
DOWN: Final = "CLUSTERDOWN The cluster is down"
DOWN_READ_ONLY: Final = "CLUSTERDOWN The cluster is down and only accepts read commands"
MAX_NODES: Final = 1000  # a topology's nodes at most (Redis's own advice for a cluster)
NODE_ID_BYTES: Final = 20  # a node's and a shard's id: 40 hex digits
BUS_PORT_OFFSET: Final = 10000  # Redis's cluster bus port: the node's port + 10000 by default
# The sharded Pub/Sub commands that publish or subscribe: a replica serves them for its
# primary's slots, and cluster-allow-pubsubshard-when-down rules them while the cluster is down.
SHARD_CHANNEL_COMMANDS: Final = frozenset({"spublish", "ssubscribe"})


def new_id() -> str:
    """A fresh node or shard id: 40 random hex digits, as Redis makes them."""
    return secrets.token_hex(NODE_ID_BYTES)


@dataclass
class ClusterNode:
    """A node as the topology holds it: its id, where clients reach it (`ip`, `port`, and
    `hostname` when announced), its bus port (`cport`: shown, never used: nodes do not
    gossip), the primary it replicates (`primary`: its id; None for a primary) and its shard."""

    id: str
    ip: str
    port: int
    cport: int
    shard_id: str
    hostname: str = ""
    primary: str | None = None
    tls_port: int = 0
    # Slots on the move (Redis's CLUSTER SETSLOT states): those this node owns and gives to
    # another (slot -> the target's id), and those it takes from another (slot -> the
    # source's id). CLUSTER NODES shows them as [slot->-id] and [slot-<-id].
    migrating: dict[int, str] = field(default_factory=dict)
    importing: dict[int, str] = field(default_factory=dict)

    @property
    def is_primary(self) -> bool:
        return self.primary is None


class Relaying(Protocol):
    """What carries a node's published messages to the others (Redis's bus does)."""

    def publish(self, channel: bytes, message: bytes) -> None: ...

    def close(self) -> None: ...


# Until when a majority of a primary's replicas vouch for it (engine.services.cluster_node
# asks the node's replication): (replicas needed, seconds an ACK counts) -> a monotonic time.
Vouching = Callable[[int, float], float]


@dataclass
class Topology:
    """What a node knows of its cluster: the nodes (`myself` among them), each slot's owner
    (a primary's id, or None: a slot nobody serves) and the epoch it was set at (a newer
    topology has a higher one)."""

    myself: ClusterNode
    nodes: dict[str, ClusterNode]
    owners: list[str | None]
    epoch: int = 0
    require_full_coverage: bool = True
    allow_reads_when_down: bool = False
    allow_pubsubshard_when_down: bool = True
    preferred_endpoint: str = "ip"  # cluster-preferred-endpoint-type
    # Where this node listens (the server's ports): what it announces unless told otherwise.
    port: int = 0
    tls_port: int = 0
    # The node's own keys by slot (set up when the node attaches to its engine).
    slot_keys: SlotKeys = field(default_factory=lambda: SlotKeys())
    # How the node takes a newer topology (its file written, its replication role set): the
    # service that attached it sets it (engine.services.cluster_node).
    keep: Callable[[Topology], None] | None = field(default=None, compare=False, repr=False)
    # Where a client's PUBLISH goes to the other nodes (engine.services.cluster_relay).
    relay: Relaying | None = field(default=None, compare=False, repr=False)
    # The cluster whose controller set this topology ("": none; the node decides alone or is
    # told by anyone with @admin). A managed node takes topologies from that controller only.
    managed_by: str = ""
    # A managed primary serves while the controller's lease runs (a monotonic time) or while
    # a majority of its replicas ACK within cluster-node-timeout (`vouch` asks them): a
    # primary cut off from both may have been failed over, so it stops as Redis's minority
    # does (CLUSTERDOWN), and a newer primary never serves beside it for long.
    lease_until: float = field(default=0.0, compare=False, repr=False)
    # The controller withdrew the lease (a manual failover: the primary takes no write until
    # its replica holds its whole log): fenced whoever else vouches, until a lease again.
    revoked: bool = field(default=False, compare=False, repr=False)
    node_timeout: float = field(default=15.0, compare=False, repr=False)
    vouch: Vouching | None = field(default=None, compare=False, repr=False)
    # A controller's move of slots of this node (engine.exec.slot_export.SlotExport): they
    # are served here throughout, their records queued for the target. None: no move.
    export: SlotExport | None = field(default=None, compare=False, repr=False)
    # The slots this node imports from a controller's move, and the move's session each.
    imports: dict[int, bytes] = field(default_factory=dict, compare=False, repr=False)
    # A managed node that restarted with slots on the move serves none of them until its
    # controller says the topology it holds is current: the switch may have been committed
    # meanwhile, and the target serve them already.
    restart_frozen: set[int] = field(default_factory=set, compare=False, repr=False)

    def fenced(self) -> bool:
        """Whether this node stops serving: a managed primary with replicas that neither the
        controller's lease nor a majority of its replicas vouch for now."""
        if not self.managed_by or self.myself.primary is not None:
            return False
        if self.revoked:
            return True
        now = time.monotonic()
        if now < self.lease_until:
            return False
        replicas = len(self.replicas_of(self.myself.id))
        if not replicas:
            return False  # nobody to fail over to: nobody serves beside it
        if self.vouch is not None:
            self.lease_until = max(self.lease_until,
                                   self.vouch(replicas // 2 + 1, self.node_timeout))
        return now >= self.lease_until

    def renew(self, milliseconds: int) -> None:
        """The controller's lease: this node serves for `milliseconds` more from now; 0
        withdraws it (fenced whoever else vouches, until the next lease)."""
        if milliseconds == 0:
            self.revoked, self.lease_until = True, 0.0
            return
        self.revoked = False
        self.lease_until = max(self.lease_until, time.monotonic() + milliseconds / 1000)

    def successor_refusal(self, new: Topology) -> str | None:
        """Why `new` cannot replace this topology (its error line), or None: an older epoch
        never does; the same epoch only with the same topology (a controller's retry)."""
        if self.managed_by and new.managed_by != self.managed_by:
            return (f"ERR this node's topology is managed by the controller of cluster "
                    f"{self.managed_by}")
        if new.epoch < self.epoch:
            return (f"ERR topology epoch {new.epoch} is older than this node's "
                    f"({self.epoch})")
        if new.epoch == self.epoch and _layout(new) != _layout(self):
            return f"ERR topology epoch {new.epoch} is this node's already, with another topology"
        return None

    def listening(self, port: int, tls_port: int = 0) -> None:
        """The server's ports, known once it listens."""
        self.port, self.tls_port = port, tls_port

    def configure(self, config: Mapping[str, Any]) -> None:
        """The node's cluster settings (at start and on CONFIG SET): the cluster's rules, and
        this node's address as it announces it (cluster-announce-*, else where it listens)."""
        self.require_full_coverage = bool(config["cluster-require-full-coverage"])
        self.allow_reads_when_down = bool(config["cluster-allow-reads-when-down"])
        self.allow_pubsubshard_when_down = bool(config["cluster-allow-pubsubshard-when-down"])
        self.preferred_endpoint = str(config["cluster-preferred-endpoint-type"])
        self.node_timeout = int(config["cluster-node-timeout"]) / 1000
        me = self.myself
        me.ip = str(config["cluster-announce-ip"]) or me.ip
        me.hostname = str(config["cluster-announce-hostname"])
        me.port = int(config["cluster-announce-port"]) or self.port or me.port
        me.tls_port = int(config["cluster-announce-tls-port"]) or self.tls_port
        # (no bus listens: past port 55535, where Redis refuses to start, none is shown)
        bus = me.port + BUS_PORT_OFFSET
        me.cport = (int(config["cluster-announce-bus-port"]) or int(config["cluster-port"])
                    or (bus if bus <= 65535 else 0))

    # --- what it says -------------------------------------------------------------------

    def __post_init__(self) -> None:
        self.unowned = 0
        self.whole = False
        self.moving = False
        self._count_owners()

    def _count_owners(self) -> None:
        self.recount()

    def recount(self) -> None:
        """What judging reads first, counted again after a change: slots with no owner,
        whether slots of this node are on the move, and whether this node serves every slot
        alone, unmanaged, nothing moving (then a command with one key needs no judging)."""
        me = self.myself
        self.unowned = self.owners.count(None)
        self.moving = bool(me.migrating or me.importing)
        self.whole = (self.owners.count(me.id) == SLOTS and not self.managed_by
                      and not self.moving)

    @property
    def ok(self) -> bool:
        """Redis's cluster_state: ok, unless full coverage is required and a slot has no
        owner, or the node is fenced (a managed primary nobody vouches for)."""
        if self.require_full_coverage and self.unowned:
            return False
        return not self.managed_by or not self.fenced()

    def assign(self, first: int, last: int, owner: str | None) -> None:
        """Slots first..last (inclusive) to `owner` (a node's id; None: nobody)."""
        self.owners[first:last + 1] = [owner] * (last - first + 1)
        self._count_owners()

    def slot_ranges(self, node_id: str) -> list[tuple[int, int]]:
        """The slots `node_id` owns, as (first, last) ranges in order."""
        return [(first, last) for first, last, owner in self.runs() if owner == node_id]

    def runs(self) -> Iterator[tuple[int, int, str | None]]:
        """Every run of consecutive slots with the same owner: (first, last, owner)."""
        owners, start = self.owners, 0
        for slot in range(1, SLOTS + 1):
            if slot == SLOTS or owners[slot] != owners[start]:
                yield start, slot - 1, owners[start]
                start = slot

    def assigned_slots(self) -> int:
        return sum(owner is not None for owner in self.owners)

    def replicas_of(self, node_id: str) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node.primary == node_id]

    # --- routing ------------------------------------------------------------------------

    def refusal(self, session: Session, spec: CommandSpec, argv: Argv,
                queued: Sequence[tuple[CommandSpec, Argv]] | None = None) -> str | None:
        """Redis's getNodeByQuery for a client's command on this node: None when it runs here
        (no keys, or every key in one slot this node serves), else the error line: CROSSSLOT
        for keys in several slots, CLUSTERDOWN for a slot nobody serves or a cluster that is
        down, MOVED to the slot's owner. `queued`: EXEC's transaction, whose commands are
        judged together."""
        return self.judge(session, spec, argv, queued)[0]

    def judge(self, session: Session, spec: CommandSpec, argv: Argv,
              queued: Sequence[tuple[CommandSpec, Argv]] | None = None) -> tuple[str | None, int]:
        """`refusal`'s line, and the slot of the command's keys (-1: none, or not found)."""
        if queued is None:
            plan = _PLANS.get(spec.name)
            if plan is None:
                plan = _PLANS[spec.name] = slot_plan(spec)
            if plan == NO_KEYS:
                return None, -1
            if plan == FIRST_KEY and len(argv) > 1:  # the common case, in a few steps
                slot = _slot_of(argv[1])
                owner = self.owners[slot]
                if owner == self.myself.id and not self.moving and self.ok:
                    return None, slot
                if self.moving and self.ok:
                    moved = self._one_key_on_the_move(session, spec, argv[1], slot, owner)
                    if moved != NOT_ON_THE_MOVE:
                        return moved, slot
        commands = queued if queued is not None else ((spec, argv),)
        slot = -1
        shard_channels = False
        for cmd_spec, cmd_argv in commands:
            shard_channels = shard_channels or cmd_spec.name in SHARD_CHANNEL_COMMANDS
            for index, _flags in slot_positions(cmd_spec, cmd_argv):
                this = _slot_of(cmd_argv[index])
                if slot < 0:
                    slot = this
                    if self.owners[slot] is None:
                        return UNBOUND, -1
                elif this != slot:
                    return CROSSSLOT, -1
        if slot < 0:  # no key: served anywhere
            return None, -1
        writes = any(cmd_spec.is_write for cmd_spec, _argv in commands)
        if not self.ok:
            if shard_channels:
                if not self.allow_pubsubshard_when_down:
                    return DOWN, slot
            elif not self.allow_reads_when_down:
                return DOWN, slot
            elif writes:
                return DOWN_READ_ONLY, slot
        owner = self.owners[slot]
        myself = self.myself
        if self.moving:
            moved = self._on_the_move(session, commands, slot)
            if moved != NOT_ON_THE_MOVE:
                return moved, slot
        if owner == myself.id:
            return None, slot
        if ((session.readonly or shard_channels) and not writes
                and myself.primary is not None and myself.primary == owner):
            return None, slot
        node = self.nodes[owner] if owner is not None else myself
        return f"MOVED {slot} {self.endpoint(node)}:{node.port}", slot

    def _one_key_on_the_move(self, session: Session, spec: CommandSpec, key: bytes, slot: int,
                             owner: str | None) -> str | None:
        """`_on_the_move` for a command whose one key is argv[1], in a few steps (a producer
        writing to a slot on the move pays little more than before)."""
        me = self.myself
        if self.managed_by:
            return self._managed_move(slot, owner)
        if owner == me.id:
            target = me.migrating.get(slot)
            if target is None or spec.name == "migrate" or self.slot_keys.has(key):
                return None
            node = self.nodes.get(target)
            return f"ASK {slot} {self.endpoint(node)}:{node.port}" if node is not None else None
        if slot in me.importing and (session.asking or spec.is_asking):
            return None
        return NOT_ON_THE_MOVE

    def _on_the_move(self, session: Session,
                     commands: Sequence[tuple[CommandSpec, Argv]], slot: int) -> str | None:
        """Redis's rules for a slot on the move (getNodeByQuery): on its source, a command
        whose keys are all here runs, one whose keys are all gone is sent to the target with
        ASK, one with some of each is TRYAGAIN; on its target, a command after ASKING (or
        RESTORE-ASKING) runs, unless it has several keys not all here yet (TRYAGAIN); MIGRATE
        always runs. NOT_ON_THE_MOVE: the slot is not on the move here (judged as usual)."""
        if self.managed_by:
            return self._managed_move(slot, self.owners[slot])
        me = self.myself
        target = me.migrating.get(slot)
        source = me.importing.get(slot)
        if target is None and source is None:
            return NOT_ON_THE_MOVE
        if any(spec.name == "migrate" for spec, _argv in commands):
            return None
        present = missing = 0
        has = self.slot_keys.has
        for cmd_spec, cmd_argv in commands:
            for index, _flags in slot_positions(cmd_spec, cmd_argv):
                if has(cmd_argv[index]):
                    present += 1
                else:
                    missing += 1
        if target is not None:
            if not missing:
                return None
            if present:
                return TRYAGAIN
            node = self.nodes.get(target)
            if node is None:
                return None
            return f"ASK {slot} {self.endpoint(node)}:{node.port}"
        asking = session.asking or any(spec.is_asking for spec, _argv in commands)
        if asking:
            return TRYAGAIN if missing and present + missing > 1 else None
        return NOT_ON_THE_MOVE

    def _managed_move(self, slot: int, owner: str | None) -> str | None:
        """A controller's moves are atomic (engine.exec.slot_export): the source serves the
        slot throughout, but while the switch happens (HANDING_OVER); the target serves it
        once it owns it (until then it is judged as any slot another node owns)."""
        if owner != self.myself.id:
            return NOT_ON_THE_MOVE
        export = self.export
        if ((export is not None and export.frozen and slot in export.slots)
                or slot in self.restart_frozen):
            return HANDING_OVER
        return None

    def endpoint(self, node: ClusterNode) -> str:
        """What clients are told to reach `node` by (cluster-preferred-endpoint-type): its ip,
        its hostname, or "?" (unknown-endpoint: the address the client used)."""
        if self.preferred_endpoint == "hostname":
            return node.hostname or "?"
        if self.preferred_endpoint == "unknown-endpoint":
            return "?"
        return node.ip


class SlotKeys:
    """A cluster node's keys by slot (its database 0, the one a cluster has), so that a slot's
    keys are counted and listed without a scan of the keyspace (CLUSTER COUNTKEYSINSLOT,
    GETKEYSINSLOT). Kept up by the records the node applies: the keys their effects name are
    gathered (`note`, a set insertion each: a stream written a thousand times is one key), and
    each gathered key is indexed as it is then, there or gone, when the index is read or the
    gathered keys reach FOLD_AT (`fold`). Built whole when the node starts and when its data
    is replaced (a replica's full sync, a rollback)."""

    FOLD_AT = 4096  # gathered keys folded into the index at once: the memory it holds back

    def __init__(self) -> None:
        self.by_slot: dict[int, set[bytes]] = {}
        self.pending: set[bytes] = set()
        self.total = 0  # database 0's keys as of the last record noted
        # Database 0's dict of each type, and the keyspaces they were taken from: a flush
        # clears them in place, and a replaced keyspace is rebuilt, so they stay the ones.
        self.spaces: list[list[dict[bytes, Any]]] | None = None
        self.db0: list[dict[bytes, Any]] = []

    def rebuild(self, keyspaces: list[list[dict[bytes, Any]]]) -> None:
        """Index every key of database 0 of each type's keyspace."""
        self.by_slot = {}
        self.pending = set()
        self._bind(keyspaces)
        self.total = sum(len(space) for space in self.db0)
        for space in self.db0:
            for key in space:
                self._add(key, _slot_of(key))

    def has(self, key: bytes) -> bool:
        """Whether database 0 holds `key` now (a slot on the move asks: Redis's lookup)."""
        return any(key in space for space in self.db0)

    def _bind(self, keyspaces: list[list[dict[bytes, Any]]]) -> None:
        self.spaces = keyspaces
        self.db0 = [spaces[0] for spaces in keyspaces]

    def _add(self, key: bytes, slot: int) -> None:
        keys = self.by_slot.get(slot)
        if keys is None:
            keys = self.by_slot[slot] = set()
        keys.add(key)

    def note(self, keyspaces: list[list[dict[bytes, Any]]], db: int,
             effects: list[Any]) -> None:
        """A record applied: the keys of database 0 its effects change gathered (a flush of
        it empties the index). A record of one effect on one key (most of them) is indexed at
        once from database 0's key count: the same, nothing to do (the key was there and is,
        or was not and is not); one more, the key is new; one fewer, it is gone."""
        if keyspaces is not self.spaces:
            self._bind(keyspaces)
        total = 0
        for space in self.db0:
            total += len(space)
        change = total - self.total
        self.total = total
        if db == 0 and len(effects) == 1 and -1 <= change <= 1:
            key = single_key(effects[0])
            if key is not None:
                if change == 1:
                    self._add(key, _slot_of(key))
                elif change == -1:
                    self._discard(key, _slot_of(key))
                return
        pending = self.pending
        for key_db, key in effect_keys(db, effects):
            if key is None:  # a flush: of database 0, or of all
                if key_db == 0 or key_db == ALL_DATABASES:
                    pending.clear()
                    self.by_slot = {}
            elif key_db == 0:
                pending.add(key)
        if len(pending) >= self.FOLD_AT:
            self.fold(keyspaces)

    def fold(self, keyspaces: list[list[dict[bytes, Any]]]) -> None:
        """Each gathered key indexed as it is now: in its slot's set if it is held, out of it
        if not."""
        for key in self.pending:
            slot = _slot_of(key)
            held = False
            for spaces in keyspaces:
                if key in spaces[0]:
                    held = True
                    break
            if held:
                self._add(key, slot)
            else:
                self._discard(key, slot)
        self.pending = set()

    def _discard(self, key: bytes, slot: int) -> None:
        keys = self.by_slot.get(slot)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_slot[slot]

    def count(self, keyspaces: list[list[dict[bytes, Any]]], slot: int) -> int:
        self.fold(keyspaces)
        keys = self.by_slot.get(slot)
        return len(keys) if keys is not None else 0

    def keys(self, keyspaces: list[list[dict[bytes, Any]]], slot: int,
             limit: int) -> list[bytes]:
        """Up to `limit` keys of `slot`."""
        self.fold(keyspaces)
        keys = self.by_slot.get(slot)
        if not keys or limit <= 0:
            return []
        return list(islice(keys, limit))


def _layout(topology: Topology) -> list[tuple[str, str, int, str, str, str]]:
    """What two topologies of one epoch must agree on: each node's id, address, role and
    slots."""
    return sorted((n.id, n.ip, n.port, n.primary or "-", n.shard_id,
                   " ".join(f"{a}-{b}" for a, b in topology.slot_ranges(n.id))
                   + "".join(_markers(n)))
                  for n in topology.nodes.values())


def _markers(node: ClusterNode) -> list[str]:
    """A node's slots on the move as CLUSTER NODES writes them: [slot->-target], [slot-<-source]."""
    return ([f"[{slot}->-{target}]" for slot, target in sorted(node.migrating.items())]
            + [f"[{slot}-<-{source}]" for slot, source in sorted(node.importing.items())])


def alone(myself: ClusterNode) -> Topology:
    """The topology of a node with no other: every slot its own, epoch 0 (Dragonfly's
    emulated cluster: a cluster client works against one process as it is)."""
    return Topology(myself, {myself.id: myself}, [myself.id] * SLOTS)


def node_line(topology: Topology, node: ClusterNode, aux: bool = False) -> str:
    """`node`'s line as CLUSTER NODES shows it (nodes.conf's, with `aux`: its shard id and
    TLS port kept too): id, address, flags, primary, ping sent, pong received, config epoch,
    link state, slot ranges."""
    address = f"{node.ip}:{node.port}@{node.cport}"
    if aux:
        address += f",{node.hostname},shard-id={node.shard_id}"
        if node.tls_port:
            address += f",tls-port={node.tls_port}"
    elif node.hostname:
        address += f",{node.hostname}"
    role = "master" if node.is_primary else "slave"
    flags = f"myself,{role}" if node is topology.myself else role
    words = [str(first) if first == last else f"{first}-{last}"
             for first, last in topology.slot_ranges(node.id)]
    if aux or node is topology.myself:
        words += _markers(node)
    slots = " ".join(words)
    line = (f"{node.id} {address} {flags} {node.primary or '-'} 0 0 {topology.epoch} "
            f"connected")
    return f"{line} {slots}" if slots else line


# How a node finds a command's slot (`slot_plan`): it has no key; its one key is argv[1] (most
# commands: the slot in one step); or its keys are found by its specs or its finder.
NO_KEYS: Final = 0
FIRST_KEY: Final = 1
BY_SPECS: Final = 2
_PLANS: Final[dict[str, int]] = {}


def slot_plan(spec: CommandSpec) -> int:
    """A command's plan: NO_KEYS when a node never judges it (no key spec, no finder: Redis's
    processCommand skips it; EXEC is judged by its transaction), FIRST_KEY when its one key is
    argv[1] (its legacy key range 1..1, no movable keys, a key and not a channel: SET, XADD,
    GET and most others), BY_SPECS otherwise."""
    specs = spec.key_specs
    if spec.name == "exec":
        return BY_SPECS
    if not specs and spec.key_finder is None:
        return NO_KEYS
    if (spec.first_key == 1 and spec.last_key == 1 and not spec.movable_keys
            and not any(ks.has("not_key") or ks.has("incomplete") for ks in specs)):
        return FIRST_KEY
    return BY_SPECS


class NodesFileError(StreamkeepError):
    """A topology's text cannot be read: where (a file's path and line) and why."""


def render(topology: Topology) -> str:
    """The nodes.conf text of `topology` (Redis's lines: one per node, its aux fields
    `shard-id` and `tls-port` kept, then `vars currentEpoch N lastVoteEpoch 0`): a line per
    node (this one's first), then the vars line."""
    nodes = [topology.myself, *(n for n in topology.nodes.values() if n is not topology.myself)]
    lines = [node_line(topology, node, aux=True) for node in nodes]
    managed = f" controller {topology.managed_by}" if topology.managed_by else ""
    lines.append(f"vars currentEpoch {topology.epoch} lastVoteEpoch 0{managed}")
    return "\n".join(lines) + "\n"


def parse(text: str, path: str, myself_id: str | None = None,
          known: Topology | None = None) -> Topology:
    """A topology from nodes.conf text (`path` names where it comes from in errors; this
    node the line flagged myself, or the one of `myself_id`): NodesFileError for anything that
    is not a line of it, or a topology no cluster can have (more than MAX_NODES nodes, a node
    twice, a slot owned twice or by a replica, a replica of no known primary). A node whose
    line gives no shard id keeps the one `known` gives it, else a replica takes its primary's
    and a primary a new one."""
    nodes: dict[str, ClusterNode] = {}
    owners: list[str | None] = [None] * SLOTS
    myself: ClusterNode | None = None
    epoch = 0
    managed_by = ""
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        where = f"{path}: line {number}"
        try:
            if words[0] == "vars":
                fields = dict(zip(words[1::2], words[2::2], strict=False))
                epoch = int(fields.get("currentEpoch", "0"))
                managed_by = fields.get("controller", "")
                continue
            node, is_myself, slots = _node_of(words)
        except (ValueError, IndexError) as err:
            raise NodesFileError(f"{where}: not a node line ({err})") from None
        if len(nodes) >= MAX_NODES:
            raise NodesFileError(f"{path}: more than {MAX_NODES} nodes")
        if node.id in nodes:
            raise NodesFileError(f"{where}: node {node.id} is named twice")
        nodes[node.id] = node
        if (myself_id is None and is_myself) or node.id == myself_id:
            myself = node
        if slots and node.primary is not None:
            raise NodesFileError(f"{where}: replica {node.id} owns slots")
        for first, last in slots:
            taken = next((owner for owner in owners[first:last + 1] if owner is not None), None)
            if taken is not None:
                raise NodesFileError(f"{where}: slots {first}-{last} are {taken}'s already")
            owners[first:last + 1] = [node.id] * (last - first + 1)
    for node in nodes.values():
        if node.primary is not None and (node.primary not in nodes
                                         or not nodes[node.primary].is_primary):
            raise NodesFileError(f"{path}: {node.id} replicates {node.primary}, no primary "
                                 "of this topology")
    if myself is None:
        raise NodesFileError(f"{path}: no line is this node's"
                             + (f" ({myself_id})" if myself_id else " (flag myself)"))
    for node in sorted(nodes.values(), key=lambda n: n.primary is not None):  # primaries first
        if not node.shard_id:
            before = known.nodes.get(node.id) if known is not None else None
            node.shard_id = (before.shard_id if before is not None
                             else nodes[node.primary].shard_id if node.primary is not None
                             else new_id())
    return Topology(myself, nodes, owners, epoch, managed_by=managed_by)


def _port(text: str) -> int:
    """A TCP port of a node line (ValueError otherwise)."""
    if not text.isdigit() or int(text) > 65535:
        raise ValueError(f"bad port {text!r}")
    return int(text)


def _node_of(words: list[str]) -> tuple[ClusterNode, bool, list[tuple[int, int]]]:
    """One node line's node, whether it is flagged myself, and its slot ranges."""
    node_id, address, flags, primary = words[0], words[1], words[2].split(","), words[3]
    if len(node_id) != 40 or any(c not in "0123456789abcdef" for c in node_id):
        raise ValueError(f"bad node id {node_id!r}")
    endpoint, *aux = address.split(",")
    host_port, _, cport = endpoint.partition("@")
    ip, _, port = host_port.rpartition(":")
    extra = dict(item.partition("=")[::2] for item in aux if "=" in item)
    hostnames = [item for item in aux if "=" not in item]
    ports = [_port(port), _port(cport or "0"), _port(extra.get("tls-port", "0"))]
    node = ClusterNode(node_id, ip, ports[0], ports[1], extra.get("shard-id", ""),
                       hostname=hostnames[0] if hostnames else extra.get("hostname", ""),
                       primary=None if primary == "-" else primary, tls_port=ports[2])
    slots = []
    for word in words[8:]:
        if word.startswith("["):
            _marker(node, word)
            continue
        first, _, last = word.partition("-")
        lo, hi = int(first), int(last or first)
        if not 0 <= lo <= hi < SLOTS:
            raise ValueError(f"bad slot range {word!r}")
        slots.append((lo, hi))
    return node, "myself" in flags, slots


def _marker(node: ClusterNode, word: str) -> None:
    """A [slot->-id] or [slot-<-id] word of a node line, kept on `node` (ValueError if not)."""
    inner = word[1:-1] if word.endswith("]") else ""
    for arrow, states in (("->-", node.migrating), ("-<-", node.importing)):
        slot, found, other = inner.partition(arrow)
        if found:
            if not slot.isdigit() or not 0 <= int(slot) < SLOTS or len(other) != 40:
                break
            states[int(slot)] = other
            return
    raise ValueError(f"bad slot state {word!r}")


def routed(spec: CommandSpec) -> bool:
    """Whether a node judges the command's keys at all: commands with key specs or a key
    finder, and EXEC (whose transaction is judged whole)."""
    return slot_plan(spec) != NO_KEYS


__all__ = ["BY_SPECS", "CROSSSLOT", "TRYAGAIN", "DOWN", "DOWN_READ_ONLY", "FIRST_KEY", "HANDING_OVER",
           "MAX_NODES", "NO_KEYS",
           "UNBOUND", "ClusterNode", "NodesFileError", "SlotKeys", "Topology", "Vouching", "alone",
           "new_id", "node_line", "parse", "render", "routed", "slot_plan"]
