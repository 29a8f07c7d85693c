"""Which stream nodes are in memory: the `backlog-memory` budget, cold nodes, the change clock.

Owns the bookkeeping that lets a stream be bigger than memory. A node whose entries are
unchanged since the current snapshot was taken may be *cold*:
its entry lists dropped, read back from that snapshot when touched (`stream.Node.thaw`). This
module decides which nodes go cold and when:

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

Eviction runs between commands (the engine calls `evict` when `resident > limit`) and, as a
safety valve during one long read, when loading a node takes the residency past twice its
budget. Never inside a change: a command keeps the lists it is changing.
Must not touch: files (the node store is an interface; snapshot.cold implements it), command
semantics, replies.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node, Stream

# What a resident node costs beyond its listpack: the Node object, its buffer's object and
# allocation, its master ID and its slots in the stream's two lists (measured with
# tracemalloc; the field names' tuple is shared between a stream's nodes).
NODE_OVERHEAD: Final = 300


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


class Residency:
    """One engine's resident sealed nodes and its budget (0: no budget, nothing goes cold)."""

    def __init__(self, budget: int = 0) -> None:
        self.budget = 0
        self.limit = float("inf")  # resident bytes past which `evict` runs
        self.queue: deque[tuple[Node, Home, int]] = deque()  # loaded or sealed, oldest first
        self.waiting: deque[tuple[Node, Home, int]] = deque()  # changed since the snapshot
        self.resident = 0  # estimated bytes of the queued and waiting nodes
        self.waiting_bytes = 0
        self.loads = 0  # cold nodes read back (made resident, or read once: Node.peek)
        self.evictions = 0  # nodes made cold
        self.store: NodeStore | None = None  # the current snapshot's nodes
        self.last_tick = 0  # the clock's value at this engine's latest load or rotation
        # Nodes changed at or after this value stay resident (see `node_limits_changed`).
        self.unsafe_from = _NEVER
        self.on_pressure: Callable[[], None] | None = None  # asks for a compaction
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
                self.waiting.append((node, home, nbytes))
                self.waiting_bytes += nbytes
                if self.waiting_bytes > self.budget // 2 and self.on_pressure is not None:
                    self.on_pressure()
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
            for node, _home, _nbytes in queue:
                node.queued = False
            queue.clear()
        self.resident = self.waiting_bytes = 0

    def close(self) -> None:
        """The engine closes: the stores it knows let go of their files now, not when the
        collector finds them (a file reopened meanwhile, replaced, must not meet its old map)."""
        stores = {id(home.store): home.store for _node, home, _nbytes in
                  (*self.queue, *self.waiting) if home.store is not None}
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

    def forget(self) -> None:
        """The engine's state was replaced (a replica's full sync): nothing is queued."""
        self.forget_queue()
        self.store = None
