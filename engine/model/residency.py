"""Which stream nodes and value nodes are in memory: the `backlog-memory` budget, cold nodes,
the change clock.

Owns the bookkeeping that lets a stream or a big value be bigger than memory. A node whose
entries are unchanged since the current snapshot was taken may be *cold*:
its entry lists dropped, read back from that snapshot when touched (`stream.Node.thaw`, a value
type's own read-back: engine.model.lists for a list). This module decides which nodes go cold
and when:

- `EPOCH`, a process-wide change clock. A node records the clock's value when its entries last
  changed (`Node.epoch`); a compaction ticks the clock when it rotates the AOF, so the nodes
  its snapshot holds exactly as they are in memory are those with `epoch` below the tick.
- `Home`, one per stream that a snapshot holds: the node store (that snapshot) and the
  stream's number in it. Cold nodes of the stream are read from there.
- `Residency`, one per engine: the budget in bytes, the resident nodes in the order they were
  loaded or sealed (first in, first out; a tail is queued when a snapshot finds it unchanged,
  so an idle stream's last node can go cold too), and the counters INFO reports. Nodes that
  changed since the snapshot cannot go: they wait for the next compaction, which a residency
  over its budget asks for early (`on_pressure`).
- Value nodes: a value type may keep a big value as a sequence of nodes, each a bytearray
  (a list's quicklist does: its listpacks), and declare so with a `ValueNodes` (its
  `engine.model.value_types.ValueType.nodes`; the model module of the type implements it). Such
  a value's nodes may go cold too: `ValueNodesHome`, one per value kept as nodes that a
  snapshot holds, is the node store's index of the value's nodes in that snapshot, by content
  (`ColdValueNode`: where a node with those exact bytes is, its xxh3-128 hash, bytes and
  elements). Value nodes are content-addressed, not clocked: the value a compaction child
  writes is its own copy, so a node may go cold when the snapshot holds a node with exactly its
  bytes (hashed when it is evicted, so a node changed in place since it was queued never goes
  cold with stale bytes), and its placeholder in the value (its `nodes`) is that ColdValueNode.
  A value's two end nodes never go cold (a list's pushes and pops stay O(1) and touch memory
  only). Value nodes share the queue, the budget and the counters with stream nodes; a queued
  value node is found back in its value by identity, from the index it had when queued; one
  that leaves its value (emptied, trimmed, split) is unqueued by the type's model
  (`ValueNodesHome.left`) and let go of as a stream's dropped nodes are. A
  value's nodes are queued when a snapshot binds it (`bind_nodes`, which also points its cold
  nodes at that snapshot), when read back, and when the type's model reports one sealed (a
  list's push makes a new end: the end it replaced). One the snapshot does not hold waits for
  the next one and asks for it, like a changed stream node; one that a snapshot rotated after
  it had those bytes does not hold either (the child cut its nodes otherwise: a CONFIG SET of
  the setting that shapes them in between, `ValueNodes.shaped_by`) stays resident without
  asking again.

Table runs: a big hash's or set's bucket table (engine.model.bucket_table) goes cold a run of
buckets at a time, the runs a snapshot stores it in (one chunk each). `TableHome`, one per table
a snapshot holds with its runs' index, lists those runs in order (`ColdRun`: where the chunk is,
its first bucket, its buckets, elements, bytes and the xxh3-128 hash of its packs); a resident
run is queued as a value node is and goes cold when its buckets hash as the snapshot's do (its
slots become bucket_table.COLD); a lookup reads one bucket of a cold run back (`peek`), a change
makes the run resident again (`thaw`). A table bound to a newer snapshot gets a new home (the
old one's queued runs are let go of as they come up); a cold run the new snapshot does not
hold as it is is read back first (`bind_table`).

Eviction runs between commands (the engine calls `evict` when `resident > limit`) and, as a
safety valve during one long read, when loading a stream node takes the residency past twice
its budget. Never inside a change: a command keeps the values it is changing (a value's cold
nodes are read back inside a command, never made cold there).
Must not touch: files (the node store is an interface; snapshot.cold implements it), command
semantics, replies.
"""

from __future__ import annotations

import threading
import weakref
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, cast

from xxhash import xxh3_128_digest

from streamkeep.engine.model.bucket_table import COLD as _COLD

if TYPE_CHECKING:
    # A queued node: a stream's Node and its Home, or a value's node and its ValueNodesHome;
    # its estimated bytes.
    from streamkeep.engine.model.bucket_table import BucketTable
    from streamkeep.engine.model.stream import Node, Stream

    Queued = tuple["Node | bytearray | ColdRun", "Home | ValueNodesHome | TableHome", int]

# What a resident node costs beyond its listpack: the Node object, its buffer's object and
# allocation, its master ID and its slots in the stream's two lists (measured with
# tracemalloc; the field names' tuple is shared between a stream's nodes).
NODE_OVERHEAD: Final = 300
PURGE_MIN: Final = 1 << 20  # dropped nodes' bytes the queue may hold before it lets go of them


def node_bytes(count: int, listpack_bytes: int) -> int:
    """Estimated memory of a resident node of `count` entries: its packed entries and the
    objects around them (count is kept for callers: entries cost only their listpack)."""
    return listpack_bytes + NODE_OVERHEAD


class Epoch:
    """The change clock (see the module docstring). One per process: nodes of several engines
    can compare against it because it only moves forward."""

    __slots__ = ("value", "_lock")

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def tick(self) -> int:
        """Advance; returns the new value (changes from now on carry it or a later one).
        Atomic: engines tick from their own threads, and a value returned twice, or read back
        after another engine's tick, would call clean a change made after the rotation."""
        with self._lock:
            self.value += 1
            return self.value


EPOCH: Final = Epoch()
_NEVER: Final = 1 << 62


class NodeStore(Protocol):
    """Where cold nodes' entries are: a snapshot file (snapshot.cold.SnapshotNodes)."""

    # Nodes changed at or after this clock value are not in the store as they are in memory.
    clean_before: int

    def load(self, number: int, master: int, crc: int = -1) -> tuple[bytearray, int]:
        """The node's listpack, checked, and its CRC-32 (-1: not known). The stored value's
        checksum is always checked; the listpack's structure too unless its CRC is `crc`, that
        of bytes the node held before (validated or built then)."""
        ...

    def stored_for(self, number: int, master: int, key: bytes) -> tuple[bytes, bytes]:
        """The node's stored value and counters (its `nodeinfo` value) as the next snapshot
        stores them under `key`: a compaction moves them without decoding them, checked."""
        ...

    def close(self) -> None:
        """Nothing will be read any more (the engine closes)."""
        ...


class Home:
    """A stream's place in a node store: the store and the stream's number in it (no store:
    no snapshot holds the stream yet, its nodes wait for one)."""

    __slots__ = ("stream", "store", "number", "residency", "cold_nodes", "cold_entries",
                 "cold_bytes")

    def __init__(self, stream: Stream, store: NodeStore | None, number: int,
                 residency: Residency) -> None:
        self.stream = stream
        self.store = store
        self.number = number
        self.residency = residency
        self.cold_nodes = 0
        self.cold_entries = 0  # live entries of the cold nodes
        self.cold_bytes = 0  # their listpack size: about what they take in the snapshot


class ValueNodeStore(Protocol):
    """Where cold value nodes are: a snapshot file (snapshot.cold.SnapshotNodes)."""

    def value_node(self, node: ColdValueNode) -> bytearray:
        """The node's bytes as the snapshot holds them, checked: its stored value's checksum,
        and its bytes' hash and length against the placeholder's (StorageError if not)."""
        ...

    def close(self) -> None:
        ...


class ColdValueNode:
    """A value's node that is not in memory: where the snapshot holds a node of exactly its
    bytes (the store; the part file's index in the snapshot's `parts`, -1 for its own file; the
    value's number there, the chunk and the node's position in it), their xxh3-128 hash, their
    length and the node's elements. Immutable: one placeholder may stand for the node in
    several values (a COPY's), and a snapshot's index hands out the same one to every node
    with those bytes."""

    __slots__ = ("store", "part", "number", "chunk", "pos", "hash", "size", "count")

    def __init__(self, store: ValueNodeStore, part: int, number: int, chunk: int, pos: int,
                 digest: bytes, size: int, count: int) -> None:
        self.store = store
        self.part = part
        self.number = number
        self.chunk = chunk
        self.pos = pos
        self.hash = digest
        self.size = size
        self.count = count

    def read(self) -> bytearray:
        """The node's bytes, read back from its snapshot and checked."""
        return self.store.value_node(self)


def value_node_hash(node: bytearray | bytes) -> bytes:
    """A value node's content hash, as a snapshot's index records it: xxh3-128 (16 bytes), so
    that no birthday search over elements a client writes can forge a node that another one's
    placeholder would stand for (a 64-bit hash falls to one in ~2**32 tries)."""
    return xxh3_128_digest(node)


# A snapshot's index of one value's nodes: by hash, the placeholder of a node with those bytes.
NodeIndex = dict[bytes, ColdValueNode]


@dataclass(frozen=True)
class ValueNodes:
    """What a value type that keeps a big value as nodes that may go cold tells the generic
    code (this module, the snapshot's writer, loader and node store, INFO): the type's
    `ValueType.nodes`, implemented by its model module (engine.model.lists for a list).

    A value kept as nodes is an object of class `held_as` with two attributes: `nodes`, its
    nodes in order (each a resident bytearray or a ColdValueNode placeholder; the type's model
    reads a placeholder back before it uses the node) and `home` (its ValueNodesHome, None until
    a snapshot with its nodes' index holds it). Another form of the type (a small list's bare
    listpack) has no nodes that can go cold."""

    held_as: type  # the class of a value kept as nodes
    count: Callable[[bytearray], int]  # a resident node's elements
    # The value's nodes (of any form of the type), in order, every one resident: a cold one
    # read for the caller (the value keeps its placeholder).
    resident: Callable[[Any], Iterator[bytearray]]
    # A value of class `held_as` holding these nodes (placeholders allowed) and that many
    # elements (a lazy load's, made of placeholders).
    of_nodes: Callable[[list, int], Any]
    # The settings that shape the nodes (how a value is cut into them): a compaction child
    # takes the parent's, so that its snapshot holds the nodes the parent holds.
    shaped_by: tuple[str, ...] = ()

    def noded(self, value: Any) -> bool:
        """Whether `value` (of this type) is kept as nodes that may go cold: more than its two
        ends."""
        return isinstance(value, self.held_as) and len(cast(Any, value).nodes) > 2

    def cold_counts(self, dbs: Iterable[dict[bytes, Any]]) -> tuple[int, int, int]:
        """(cold nodes, their elements, their bytes) of every value of `dbs` (the type's
        keyspace, per database): what INFO reports."""
        nodes = elements = nbytes = 0
        held_as = self.held_as
        for db in dbs:
            for value in db.values():
                if type(value) is held_as:
                    home = cast(Any, value).home  # (an object of `held_as`: its `home`)
                    if home is not None:
                        nodes += home.cold_nodes
                        elements += home.cold_elements
                        nbytes += home.cold_bytes
        return nodes, elements, nbytes


class ValueNodesHome:
    """A value's place in the current snapshot, for a value kept as nodes (`ValueNodes`): the
    index of the nodes the snapshot holds (by content; empty: no snapshot holds the value, or
    not with an index), the value's queued resident nodes (their identity: the index they had
    when queued), and its cold nodes' counters."""

    __slots__ = ("value", "kind", "residency", "index", "clean_before", "queued", "missed",
                 "cold_nodes", "cold_elements", "cold_bytes")

    def __init__(self, value: Any, kind: ValueNodes, residency: Residency) -> None:
        self.value = value
        self.kind = kind
        self.residency = residency
        self.index: NodeIndex = {}
        self.clean_before = 0  # the change clock's value when the index's snapshot rotated
        self.queued: dict[int, int] = {}  # id(node) -> its index in the value when queued
        # id(node) -> (its hash when the snapshot did not hold it, the clock's value then; -1:
        # a snapshot rotated after that did not hold it either, so none will: the node stays
        # resident, unqueued, and asks for no compaction; see Residency._evict_value_node)
        self.missed: dict[int, tuple[bytes, int]] = {}
        self.cold_nodes = 0
        self.cold_elements = 0
        self.cold_bytes = 0  # their bytes

    def loaded(self, node: bytearray, at: int, cold: ColdValueNode) -> None:
        """A cold node was read back into the value, at index `at` (it is resident from now
        on: queued to go cold again)."""
        self.cold_nodes -= 1
        self.cold_elements -= cold.count
        self.cold_bytes -= cold.size
        residency = self.residency
        residency.loads += 1
        if residency.budget > 0 and id(node) not in self.queued:
            self.queued[id(node)] = at
            nbytes = len(node) + NODE_OVERHEAD
            residency.queue.append((node, self, nbytes))
            residency.resident += nbytes

    def sealed(self, node: bytearray, at: int) -> None:
        """The value's model sealed a node, at index `at` (a list's push gave it a new end: the
        node it replaced): it is counted and queued (changed since the snapshot, it waits for
        the next one and asks for it: a value growing between compactions is counted against
        the budget, as a stream is)."""
        residency = self.residency
        if residency.budget > 0 and id(node) not in self.queued:
            self.queued[id(node)] = at
            nbytes = len(node) + NODE_OVERHEAD
            residency.queue.append((node, self, nbytes))
            residency.resident += nbytes

    def left(self, node: bytearray) -> None:
        """A resident node left the value (a pop emptied it, a trim, a range deleted, a split
        replaced it): unqueued, and the residency told (as a stream's dropped node: the queue
        lets go of such nodes as they add up, `Residency.dropped`)."""
        if self.queued.pop(id(node), None) is not None:
            self.missed.pop(id(node), None)
            self.residency.dropped(len(node) + NODE_OVERHEAD)

    def dropped(self, cold: ColdValueNode) -> None:
        """A cold node left the value (a trim, a range deleted)."""
        self.cold_nodes -= 1
        self.cold_elements -= cold.count
        self.cold_bytes -= cold.size

    def copy_for(self, value: Any) -> ValueNodesHome:
        """The home of a copy of the value (its cold nodes shared: they are immutable)."""
        home = ValueNodesHome(value, self.kind, self.residency)
        home.index = self.index
        home.cold_nodes, home.cold_elements, home.cold_bytes = (
            self.cold_nodes, self.cold_elements, self.cold_bytes)
        return home


# What a resident bucket costs beyond its pack: its bytes object's header (pymalloc-rounded)
# and its slot in the table's list.
BUCKET_OVERHEAD: Final = 48


class TableRunStore(Protocol):
    """Where cold table runs are: a snapshot file (snapshot.cold.SnapshotNodes)."""

    def table_run(self, run: ColdRun) -> list[bytes]:
        """The run's packs as the snapshot holds them, checked: the stored value's checksum,
        the run's place and the packs' hash and length against the run's (StorageError if
        not)."""
        ...

    def close(self) -> None:
        ...


class ColdRun:
    """A run of a bucket table's buckets as a snapshot stores them (one chunk): the store, the
    part file's index in the snapshot's `parts` (-1: its own file), the value's number there
    and the chunk; the run's first bucket, its buckets, their records (elements), bytes, the
    xxh3-128 hash of their packs joined, how many entries the type keeps beside them, and
    where the store found the chunk in its file. Immutable: the placeholder of the run while it is
    cold, and its description while it is resident."""

    __slots__ = ("store", "part", "number", "chunk", "first", "buckets", "elements", "size",
                 "hash", "extras", "offset", "stored")

    def __init__(self, store: TableRunStore, part: int, number: int, chunk: int, first: int,
                 buckets: int, elements: int, size: int, digest: bytes, extras: int = 0,
                 offset: int = -1, stored: int = 0) -> None:
        self.store = store
        self.part = part
        self.number = number
        self.chunk = chunk
        self.first = first
        self.buckets = buckets
        self.elements = elements
        self.size = size
        self.hash = digest
        self.extras = extras  # entries the type keeps beside the run (a hash's field TTLs)
        # Where the chunk's stored value is in its file and its length (-1: not known): the
        # store's to read it by, its checksum the proof it read the right bytes.
        self.offset = offset
        self.stored = stored

    def read(self) -> list[bytes]:
        """The run's packs, read back from its snapshot and checked."""
        return self.store.table_run(self)

    def same(self, other: ColdRun) -> bool:
        """Whether `other` describes a run of the same buckets with the same packs."""
        return (self.first, self.buckets, self.size, self.hash) == (
            other.first, other.buckets, other.size, other.hash)


class TableIndex(NamedTuple):
    """A snapshot's index of one bucket table's runs: the table's placement (its seed, size
    and split when the snapshot was written) and its runs in order, from bucket 0 to the
    last."""

    seed: bytes
    size: int
    split: int
    runs: list[ColdRun]


def run_hash(packs: list[bytes]) -> bytes:
    """A table run's hash as a snapshot's index records it: xxh3-128 of its packs joined (the
    packs are self-delimiting; the index records how many there are)."""
    return xxh3_128_digest(b"".join(packs))


class TableHome:
    """A bucket table's place in the current snapshot: the runs it stores the table in, in
    order (each starting where the one before ended), the table's cold runs' counters, and the
    bytes of its runs queued now (let go of when a newer snapshot's home replaces this one)."""

    __slots__ = ("table", "residency", "runs", "starts", "cold_runs", "cold_elements",
                 "cold_bytes", "queued_bytes", "missed")

    def __init__(self, table: BucketTable, residency: Residency, runs: list[ColdRun]) -> None:
        self.table = table
        self.residency = residency
        self.runs = runs
        self.starts = [run.first for run in runs]
        self.cold_runs = 0
        self.cold_elements = 0
        self.cold_bytes = 0
        self.queued_bytes = 0
        # first bucket -> the engine's rotation clock when the run was found changed (see
        # Residency._evict_table_run)
        self.missed: dict[int, int] = {}

    def run_of(self, i: int) -> ColdRun:
        """The run holding bucket i (one of a cold bucket's: every cold bucket is in one)."""
        return self.runs[bisect_right(self.starts, i) - 1]

    def peek(self, table: BucketTable, i: int) -> bytes:
        """Cold bucket i's pack, read from the snapshot (its run stays cold)."""
        run = self.run_of(i)
        packs = run.read()
        self.residency.loads += 1
        return packs[i - run.first]

    def thaw(self, table: BucketTable, i: int) -> bytes:
        """Make cold bucket i's run resident (queued to go cold again); its pack."""
        run = self.run_of(i)
        packs = run.read()
        first = run.first
        table.buckets[first:first + run.buckets] = packs
        table.nbytes += run.size - run.buckets
        self.went_warm(run)
        residency = self.residency
        residency.loads += 1
        residency.queue_run(run, self)
        return packs[i - first]

    def went_cold(self, run: ColdRun) -> None:
        self.cold_runs += 1
        self.cold_elements += run.elements
        self.cold_bytes += run.size

    def went_warm(self, run: ColdRun) -> None:
        self.cold_runs -= 1
        self.cold_elements -= run.elements
        self.cold_bytes -= run.size


def table_cold_counts(tables: Iterable[BucketTable | None]) -> tuple[int, int, int]:
    """(cold runs, their elements, their bytes) of `tables`: what INFO reports."""
    runs = elements = nbytes = 0
    for table in tables:
        home = None if table is None else table.home
        if home is not None:
            runs += home.cold_runs
            elements += home.cold_elements
            nbytes += home.cold_bytes
    return runs, elements, nbytes


def _find(nodes: list, node: bytearray, hint: int) -> int:
    """The index of `node` (by identity) in `nodes`, -1 if it is not there: looked for at
    `hint` and below first (a queue's pops at its head move its nodes down), then above."""
    count = len(nodes)
    at = min(hint, count - 1)
    while at >= 0:
        if nodes[at] is node:
            return at
        at -= 1
    at = min(hint, count - 1) + 1
    while at < count:
        if nodes[at] is node:
            return at
        at += 1
    return -1


class Residency:
    """One engine's resident sealed nodes and its budget (0: no budget, nothing goes cold)."""

    def __init__(self, budget: int = 0) -> None:
        self.budget = 0
        self.limit = float("inf")  # resident bytes past which `evict` runs
        self.queue: deque[Queued] = deque()  # loaded or sealed, oldest first
        self.waiting: deque[Queued] = deque()  # changed since the snapshot
        self.resident = 0  # estimated bytes of the queued and waiting nodes
        self.waiting_bytes = 0
        self.dropped_bytes = 0  # queued nodes their streams dropped since the last purge
        self.loads = 0  # cold nodes read back (made resident, or read once: Node.peek)
        self.evictions = 0  # nodes made cold
        self.store: NodeStore | None = None  # the current snapshot's nodes
        self.last_tick = 0  # the clock's value at this engine's latest load or rotation
        # Nodes changed at or after this value stay resident (see `node_limits_changed`).
        self.unsafe_from = _NEVER
        self.on_pressure: Callable[[], None] | None = None  # asks for a compaction
        # The stores values' cold nodes were bound to (closed with the engine, as the streams'
        # are; weakly: a store no cold node refers to any more goes).
        self.node_stores: weakref.WeakSet[ValueNodeStore | TableRunStore] = weakref.WeakSet()
        self.set_budget(budget)

    def set_budget(self, budget: int, dbs: list[dict[bytes, Stream]] | None = None) -> None:
        """A new budget. Turning it on queues every resident node of `dbs` (nothing is queued
        without a budget: the queue would only keep trimmed nodes alive); off empties it."""
        was = self.budget
        self.budget = budget
        self.limit = budget if budget > 0 else float("inf")
        if budget <= 0:
            self.forget_queue()
        elif was <= 0 and dbs is not None:
            for db in dbs:
                for stream in db.values():
                    home = stream.home
                    if home is not None:
                        for node in stream.nodes:
                            if not node.is_cold():
                                self.sealed(node, home)

    # --- registering resident nodes (the stream model calls these) ----------------------------

    def sealed(self, node: Node, home: Home) -> None:
        """A node stopped being its stream's tail, was loaded, or is an unchanged tail: it may go
        cold from now on. (Queued once: a node queued as a tail is not queued again when
        sealed, its size is then an underestimate by the entries appended since.)"""
        if self.budget <= 0 or node.queued:
            return
        node.queued = True
        nbytes = node_bytes(node.count, node.lp_bytes())
        self.queue.append((node, home, nbytes))
        self.resident += nbytes

    def loaded(self, node: Node, home: Home) -> None:
        """A cold node was read back (by `Node.thaw`). (Every cold read passes here once
        per node: `sealed` and `node_bytes` are inlined.)"""
        self.loads += 1
        size = node.lp_bytes()
        home.cold_nodes -= 1
        home.cold_entries -= node.live
        home.cold_bytes -= size
        if self.budget > 0 and not node.queued:
            node.queued = True
            nbytes = size + NODE_OVERHEAD
            self.queue.append((node, home, nbytes))
            self.resident += nbytes
        if self.resident > 2 * self.limit:  # one long read: do not wait for its end
            self.evict(keep=node)

    # --- making nodes cold ------------------------------------------------------------------------

    def evict(self, keep: Node | None = None) -> None:
        """Make the oldest resident clean nodes cold until within budget. Nodes changed since
        the snapshot move to `waiting` (and a compaction is asked for); nodes no longer in their
        stream, or already cold (queued twice: as a tail, then sealed), leave the queue."""
        queue = self.queue
        budget = self.budget
        while self.resident > budget and queue:
            node, home, nbytes = queue.popleft()
            if isinstance(home, TableHome):
                assert isinstance(node, ColdRun)
                self._evict_table_run(node, home, nbytes)
                continue
            if isinstance(home, ValueNodesHome):
                assert isinstance(node, bytearray)
                self._evict_value_node(node, home, nbytes)
                continue
            assert not isinstance(node, (bytearray, ColdRun))
            if node is keep:  # the node being read: it stays, and so does everything after it
                queue.appendleft((node, home, nbytes))
                break
            # Deleted or trimmed from its stream (which unqueued it: an O(1) test), or already
            # cold: it leaves the queue.
            if not node.queued or node.is_cold():
                node.queued = False
                self.resident -= nbytes
                continue
            node.queued = False
            if node.epoch >= self.unsafe_from:  # pinned resident: it leaves the queue
                self.resident -= nbytes
                continue
            store = home.store
            if store is None or node.epoch >= store.clean_before:
                node.queued = True
                self._wait((node, home, nbytes))
                continue
            node.home = home  # where it is read back from
            node.freeze()
            self.resident -= nbytes
            self.evictions += 1
            home.cold_nodes += 1
            home.cold_entries += node.live
            home.cold_bytes += node.size  # (freeze kept the listpack's size)
        if self.resident > budget and self.waiting and self.on_pressure is not None:
            self.on_pressure()

    def dropped(self, nbytes: int) -> None:
        """A queued node left its stream (deleted or trimmed). The queue keeps it until its
        turn: once such nodes add up to a quarter of what is resident (1 MiB at least), the
        queue lets go of them all (O(queue) per quarter: O(1) per node), so a trimmed stream's
        memory comes back without waiting for the budget to be reached."""
        self.dropped_bytes += nbytes
        if self.dropped_bytes > max(PURGE_MIN, self.resident // 4):
            self.purge_dead()

    def purge_dead(self) -> int:
        """Drop the queued nodes no longer in their streams or values (deleted or trimmed: the
        queue held them alive until eviction reached them), for maxmemory, which needs their
        memory back now: the bytes they were counted for. O(queued nodes)."""
        kept: deque[Queued] = deque()
        dropped = 0
        for item in self.queue:
            node, home, nbytes = item
            if isinstance(home, TableHome):
                live = home.table.home is home
                if not live:
                    home.queued_bytes -= nbytes
            elif isinstance(home, ValueNodesHome):
                live = id(node) in home.queued
            else:
                assert not isinstance(node, (bytearray, ColdRun))
                live = node.queued
            if live:
                kept.append(item)
            else:
                dropped += nbytes
        if dropped:
            self.queue = kept
            self.resident -= dropped
        self.dropped_bytes = 0
        return dropped

    def _wait(self, queued: Queued) -> None:
        """A queued node or run changed since the snapshot: it waits for the next one, which
        is asked for early once half the budget waits."""
        self.waiting.append(queued)
        self.waiting_bytes += queued[2]
        if self.waiting_bytes > self.budget // 2 and self.on_pressure is not None:
            self.on_pressure()

    def _evict_value_node(self, node: bytearray, home: ValueNodesHome, nbytes: int) -> None:
        """A queued value node: cold if the snapshot holds a node of exactly its bytes (its
        placeholder takes its place in the value); waiting for the next snapshot if it does
        not (changed since); gone from the queue if it left its value, is one of its ends, or
        the newest snapshot did not hold it unchanged either."""
        self.resident -= nbytes
        key = id(node)
        hint = home.queued.pop(key, -1)
        value = home.value
        nodes: list[bytearray | ColdValueNode] = value.nodes
        count = home.kind.count
        at = _find(nodes, node, hint) if hint >= 0 and count(node) and \
            value.home is home else -1
        if at <= 0 or at == len(nodes) - 1:  # gone, or an end: it stays, unqueued
            home.missed.pop(key, None)
            return
        digest = value_node_hash(node)
        cold = home.index.get(digest)
        if cold is None or cold.size != len(node) or cold.count != count(node):
            missed = home.missed.get(key)
            if missed is not None and missed[0] == digest and (
                    missed[1] < 0 or home.clean_before > missed[1]):
                # A snapshot rotated after the node held these bytes does not hold them (its
                # nodes are cut otherwise, a CONFIG SET since): none will, it stays resident.
                home.missed[key] = (digest, -1)
                return
            home.missed[key] = (digest, EPOCH.value)
            home.queued[key] = at
            self.resident += nbytes
            self._wait((node, home, nbytes))
            return
        home.missed.pop(key, None)
        nodes[at] = cold
        self.evictions += 1
        home.cold_nodes += 1
        home.cold_elements += cold.count
        home.cold_bytes += cold.size

    def queue_run(self, run: ColdRun, home: TableHome) -> None:
        """A table's run is resident (bound, or read back): it may go cold from now on."""
        if self.budget > 0:
            nbytes = run.size + BUCKET_OVERHEAD * run.buckets
            self.queue.append((run, home, nbytes))
            self.resident += nbytes
            home.queued_bytes += nbytes

    def _evict_table_run(self, run: ColdRun, home: TableHome, nbytes: int) -> None:
        """A queued table run: cold if its buckets hash as the snapshot's (their slots become
        COLD); waiting for the next snapshot if they changed since (and asking for it); gone
        from the queue if its table was bound to a newer snapshot since, if the run is cold
        already, or if it changed and a snapshot rotated since did not bind the table again
        (it stays resident)."""
        self.resident -= nbytes
        home.queued_bytes -= nbytes
        table = home.table
        first, count = run.first, run.buckets
        buckets = table.buckets
        if table.home is not home or first + count > len(buckets) or buckets[first] is _COLD:
            return
        packs = buckets[first:first + count]
        if sum(map(len, packs)) != run.size or run_hash(packs) != run.hash:
            missed = home.missed.get(first)
            if missed is not None and self.last_tick > missed:
                # A snapshot rotated since it changed and did not bind the table again (it
                # stopped being chunked, or its index was damaged): none will hold this run,
                # it stays resident and asks for no compaction.
                del home.missed[first]
                return
            home.missed[first] = self.last_tick
            self.resident += nbytes
            home.queued_bytes += nbytes
            self._wait((run, home, nbytes))
            return
        buckets[first:first + count] = [_COLD] * count
        table.nbytes -= run.size - count
        home.went_cold(run)
        self.evictions += 1

    def bind_table(self, table: BucketTable, index: TableIndex) -> TableHome | None:
        """The buckets of `table` are stored in the runs of `index` (a snapshot's): its runs whose buckets the snapshot holds as they are may go cold. A cold run
        of the table's previous home is pointed at the same run of the new snapshot, or read
        back when that does not hold it as it is. None (the table stays as it is): the
        snapshot's table is placed otherwise (it was built apart, by another process; its runs
        would never match). Under the engine lock."""
        runs = index.runs
        if index.seed != table.seed or not runs:
            return None
        home = TableHome(table, self, runs)
        for run in runs:  # (the runs are of one store)
            self.node_stores.add(run.store)
            break
        old = table.home
        buckets = table.buckets
        if old is not None:
            self.dropped(old.queued_bytes)
            if old.cold_runs:
                by_first = {run.first: run for run in runs}
                for run in old.runs:
                    if buckets[run.first] is not _COLD:
                        continue
                    same = by_first.get(run.first)
                    if same is None or not same.same(run):
                        # (its cut moved: read back, queued below if a run holds it as it is)
                        buckets[run.first:run.first + run.buckets] = run.read()
                        table.nbytes += run.size - run.buckets
        table.home = home
        for run in runs:
            if run.first + run.buckets > len(buckets):
                continue
            if buckets[run.first] is _COLD:  # (the old home's, the same run: or a lazy load's)
                home.went_cold(run)
            else:
                self.queue_run(run, home)
        return home

    def node_limits_changed(self) -> None:
        """CONFIG SET changed stream-node-max-entries or -bytes. A snapshot replays the writes
        since the previous one with the limits of its own start, so the nodes changed since
        this engine's latest rotation may be cut differently there than here: they never go
        cold (until a restart loads them as the snapshot cuts them)."""
        self.unsafe_from = min(self.unsafe_from, self.last_tick)

    def rotated(self) -> int:
        """A compaction rotates the AOF (engine lock held): the clock ticks, and the nodes its
        snapshot will hold as they are now are those changed before the returned value."""
        self.last_tick = EPOCH.tick()
        return self.last_tick

    # --- snapshots -------------------------------------------------------------------------------

    def bind(self, stream: Stream, store: NodeStore, number: int) -> Home:
        """The stream is number `number` of `store` (a new snapshot's, or the loaded one's):
        its cold nodes are read from there from now on. A stream seen for the first time has
        its resident sealed nodes queued."""
        home = stream.home
        if home is None:
            home = stream.home = Home(stream, store, number, self)
            for node in stream.nodes[:-1]:
                node.home = home
                if not node.is_cold():
                    self.sealed(node, home)
        elif home.store is None or home.store.clean_before <= store.clean_before:
            home.store, home.number = store, number
        else:  # an older snapshot than the one the stream's cold nodes are in: keep that
            return home
        if stream.nodes:  # the tail: queued if the snapshot holds it as it is (idle stream)
            tail = stream.nodes[-1]
            tail.home = home
            if not tail.is_cold() and tail.epoch < store.clean_before:
                self.sealed(tail, home)
        return home

    def bind_nodes(self, value: Any, kind: ValueNodes, index: NodeIndex,
                   clean_before: int = 0) -> ValueNodesHome:
        """The nodes of `value` (kept as nodes of `kind`) are those of `index` in the current
        snapshot (a new one's, or the loaded one's, rotated at clock value `clean_before`): its
        cold nodes are pointed at that snapshot (so older files can go), and its resident nodes
        but its two ends are queued, each once (`_evict_value_node` tells which the snapshot
        holds), but for those no snapshot will hold as they are. Under the engine lock."""
        home = value.home
        if home is None or home.residency is not self:
            home = value.home = ValueNodesHome(value, kind, self)
        home.index = index
        home.clean_before = clean_before
        for cold in index.values():  # (an index is of one store)
            self.node_stores.add(cold.store)
            break
        queued = home.queued
        missed = home.missed
        still: dict[int, tuple[bytes, int]] = {}  # (what `missed` keeps: its nodes still here)
        nodes: list[bytearray | ColdValueNode] = value.nodes
        budget = self.budget > 0
        queue = self.queue
        for at in range(1, len(nodes) - 1):
            node = nodes[at]
            if isinstance(node, bytearray):
                key = id(node)
                if missed and key in missed:
                    never = missed[key]
                    if never[1] < 0 and key not in queued:
                        if never[0] not in index and value_node_hash(node) == never[0]:
                            still[key] = never
                            continue
                    else:
                        still[key] = never
                if budget and key not in queued:
                    queued[key] = at
                    nbytes = len(node) + NODE_OVERHEAD
                    queue.append((node, home, nbytes))
                    self.resident += nbytes
            else:
                moved = index.get(node.hash)
                if moved is not None and moved.size == node.size and \
                        moved.count == node.count:
                    nodes[at] = moved
        home.missed = still
        return home

    def switched(self, store: NodeStore) -> None:
        """A new snapshot is current (every stream it holds has been bound to it): nodes that
        waited for it may go cold now, oldest first."""
        self.store = store
        waiting = self.waiting
        if waiting:
            waiting.extend(self.queue)
            self.queue, self.waiting = waiting, deque()
            self.waiting_bytes = 0

    def forget_queue(self) -> None:
        for queue in (self.queue, self.waiting):
            for node, home, _nbytes in queue:
                if isinstance(home, TableHome):
                    home.queued_bytes = 0
                elif isinstance(home, ValueNodesHome):
                    home.queued.pop(id(node), None)
                    home.missed.pop(id(node), None)
                else:
                    assert not isinstance(node, (bytearray, ColdRun))
                    node.queued = False
            queue.clear()
        self.resident = self.waiting_bytes = 0

    def close(self) -> None:
        """The engine closes: the stores it knows let go of their files now, not when the
        collector finds them (a file reopened meanwhile, replaced, must not meet its old map)."""
        stores: dict[int, NodeStore | ValueNodeStore | TableRunStore] = {}
        for _node, home, _nbytes in (*self.queue, *self.waiting):
            if isinstance(home, Home) and home.store is not None:
                stores[id(home.store)] = home.store
        for node_store in list(self.node_stores):
            stores[id(node_store)] = node_store
        if self.store is not None:
            stores[id(self.store)] = self.store
        self.forget()
        for store in stores.values():
            store.close()

    def adopt(self, dbs: list[dict[bytes, Stream]]) -> None:
        """The engine's state is replaced by streams another engine loaded (a replica's full
        sync loads the primary's snapshot apart, then installs it): they count against this
        budget from now on, and their snapshot is the current one."""
        self.forget()
        for db in dbs:
            for stream in db.values():
                home = stream.home
                if home is None:
                    continue
                home.residency = self
                store = home.store
                if store is not None and (self.store is None
                                          or store.clean_before > self.store.clean_before):
                    self.store = store
                    self.last_tick = max(self.last_tick, store.clean_before)
                for node in stream.nodes:
                    if not node.is_cold():
                        self.sealed(node, home)

    def adopt_tables(self, tables: Iterable[BucketTable | None]) -> None:
        """The engine's state is replaced by values another engine loaded (a replica's full
        sync): their tables' cold runs are read through this engine from now on, and their
        resident runs count against this budget."""
        for table in tables:
            home = None if table is None else table.home
            if table is None or home is None or home.residency is self:
                continue
            home.residency = self
            home.queued_bytes = 0
            for run in home.runs:
                self.node_stores.add(run.store)
                break
            buckets = table.buckets
            for run in home.runs:
                if run.first + run.buckets <= len(buckets) and buckets[run.first] is not _COLD:
                    self.queue_run(run, home)

    def forget(self) -> None:
        """The engine's state was replaced (a replica's full sync): nothing is queued."""
        self.forget_queue()
        self.store = None
