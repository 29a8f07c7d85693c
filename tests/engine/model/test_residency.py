"""engine.model.residency: the `backlog-memory` budget's bookkeeping over real streams
(engine.model.stream) and an in-memory node store standing in for a snapshot file.

What is counted (sealed nodes, once; never the tail being appended to, unless a snapshot
holds it unchanged), which nodes go cold and in what order (oldest first, only those the
current snapshot holds as they are), what waits for the next snapshot and asks for it, reading
a cold node back, and the budget turned on, off, handed over and closed."""

from __future__ import annotations

import threading
import zlib

from streamkeep.engine.model import lists
from streamkeep.engine.model.list_node import node_count
from streamkeep.engine.model.lists import ListLimits, QuickList
from streamkeep.engine.model.residency import (
    NODE_OVERHEAD,
    PURGE_MIN,
    ColdValueNode,
    Epoch,
    NodeIndex,
    Residency,
    node_bytes,
    value_node_hash,
)
from streamkeep.engine.model.stream import Node, Stream, new_stream

PER_NODE = 4


class MemoryStore:
    """A node store that holds the nodes as they were when `keep` saw them (a snapshot)."""

    def __init__(self, clean_before: int) -> None:
        self.clean_before = clean_before
        self.saved: dict[tuple[int, int], bytes] = {}
        self.closed = False
        self.loads = 0

    def keep(self, number: int, stream: Stream) -> None:
        for node in stream.nodes:
            home = node.home
            if node.is_cold() and home is not None and isinstance(home.store, MemoryStore):
                self.saved[number, node.master] = home.store.saved[home.number, node.master]
            else:
                self.saved[number, node.master] = bytes(node.buffer())

    def load(self, number: int, master: int, crc: int = -1) -> tuple[bytearray, int]:
        self.loads += 1
        saved = self.saved[number, master]
        return bytearray(saved), zlib.crc32(saved)

    def stored_for(self, number: int, master: int, key: bytes) -> tuple[bytes, bytes]:
        raise AssertionError("a residency never copies nodes")

    def close(self) -> None:
        self.closed = True


def fill(stream: Stream, count: int, start: int = 1) -> None:
    for i in range(start, start + count):
        stream.append(i << 64, (b"f", b"value-%d" % i), PER_NODE, 1 << 20)


def sealed_bytes(nodes: list[Node]) -> int:
    return sum(node_bytes(node.count, node.lp_bytes()) for node in nodes)


def snapshot(residency: Residency, *streams: Stream) -> MemoryStore:
    """What a compaction does: tick the clock, write the streams, bind them, switch."""
    store = MemoryStore(residency.rotated())
    for number, stream in enumerate(streams, 1):
        store.keep(number, stream)
        residency.bind(stream, store, number)
    residency.switched(store)
    return store


def cold(stream: Stream) -> list[bool]:
    return [node.is_cold() for node in stream.nodes]


def snapshotted(nodes: int) -> tuple[Residency, Stream, MemoryStore]:
    """A residency with a budget nothing reaches, a stream of `nodes` full nodes, and a
    snapshot that holds the stream as it is."""
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, nodes * PER_NODE)
    return residency, stream, snapshot(residency, stream)


def test_node_bytes() -> None:
    assert node_bytes(0, 0) == NODE_OVERHEAD
    assert node_bytes(3, 100) == 100 + NODE_OVERHEAD


def test_the_clock_only_moves_forward_one_value_per_tick() -> None:
    epoch = Epoch()
    assert epoch.value == 0
    assert epoch.tick() == 1 and epoch.value == 1
    seen: list[int] = []

    def ticks() -> None:
        got = [epoch.tick() for _ in range(500)]
        seen.extend(got)  # (list.extend is atomic)

    threads = [threading.Thread(target=ticks) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(2, 2002))  # no value handed out twice


def test_without_a_budget_nothing_is_counted() -> None:
    residency = Residency(0)
    stream = new_stream(residency)
    fill(stream, 20)
    assert residency.limit == float("inf")
    assert residency.resident == 0 and not residency.queue
    snapshot(residency, stream)
    residency.evict()
    assert not any(cold(stream))


def test_sealed_nodes_are_counted_once_and_the_tail_is_not() -> None:
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, 5 * PER_NODE)
    assert len(stream.nodes) == 5
    assert [node.queued for node in stream.nodes] == [True] * 4 + [False]
    assert residency.resident == sealed_bytes(stream.nodes[:-1])
    residency.sealed(stream.nodes[0], stream.home)  # type: ignore[arg-type]
    assert residency.resident == sealed_bytes(stream.nodes[:-1])


def test_nodes_no_snapshot_holds_wait_and_ask_for_one() -> None:
    asked: list[int] = []
    budget = 1500
    residency = Residency(budget)
    residency.on_pressure = lambda: asked.append(1)
    stream = new_stream(residency)
    fill(stream, 5 * PER_NODE)
    before = residency.resident
    residency.evict()
    assert not any(cold(stream))
    assert residency.evictions == 0 and residency.resident == before
    assert len(residency.waiting) == 4 and not residency.queue
    assert residency.waiting_bytes == before > budget // 2
    assert asked


def test_eviction_makes_the_oldest_clean_nodes_cold_until_within_budget() -> None:
    residency, stream, _store = snapshotted(5)
    # the tail is unchanged since the snapshot: it may go cold too (an idle stream)
    assert residency.resident == sealed_bytes(stream.nodes)
    residency.set_budget(sealed_bytes(stream.nodes[3:]))
    residency.evict()
    assert cold(stream) == [True, True, True, False, False]
    assert residency.evictions == 3
    assert residency.resident == sealed_bytes(stream.nodes[3:]) <= residency.budget
    assert stream.cold_counts() == (3, 3 * PER_NODE,
                                    sum(node.lp_bytes() for node in stream.nodes[:3]))


def test_a_cold_node_reads_back_as_it_was_and_counts_again() -> None:
    residency, stream, store = snapshotted(3)
    before = [(node.entry_ids(), node.entry_fields()) for node in stream.nodes]
    residency.set_budget(1)
    residency.evict()
    assert all(cold(stream))
    assert residency.resident == 0
    first = stream.nodes[0]
    assert first.entry_ids() == before[0][0]  # touching the entries reads them back
    assert first.entry_fields() == before[0][1]
    assert store.loads == 1 and residency.loads == 1
    assert cold(stream) == [False, True, True]
    assert stream.cold_counts()[0] == 2
    assert residency.resident == sealed_bytes([first])
    assert [sid for sid, _idb, _f in stream.iter_forward(0, 1 << 128)] == \
        [sid for ids, _ in before for sid in ids]


def test_nodes_changed_after_the_snapshot_stay_until_the_next_one() -> None:
    residency, stream, _store = snapshotted(4)
    stream.delete(stream.nodes[1].entry_ids()[0])  # changed since the snapshot
    residency.set_budget(1)
    residency.evict()
    assert cold(stream) == [True, False, True, True]
    assert [node is stream.nodes[1] for node, _home, _n in residency.waiting] == [True]
    snapshot(residency, stream)  # the next snapshot holds it as it is now: it may go
    residency.evict()
    assert all(cold(stream))
    assert not residency.waiting and residency.waiting_bytes == 0


def test_a_node_no_longer_in_its_stream_leaves_the_queue() -> None:
    residency, stream, _store = snapshotted(3)
    gone = stream.nodes[0]
    stream.trim(maxlen=2 * PER_NODE, minid=None, approx=False, limit=0)
    assert stream.nodes[0] is not gone
    residency.set_budget(1)
    residency.evict()
    assert not gone.is_cold()
    assert residency.evictions == 2
    assert all(node is not gone for node, _home, _n in (*residency.queue, *residency.waiting))


def test_nodes_no_longer_in_their_stream_are_let_go_at_once_for_maxmemory() -> None:
    residency, stream, _store = snapshotted(4)
    queued = len(residency.queue)
    before = residency.resident
    gone = stream.nodes[:2]
    stream.trim(maxlen=2 * PER_NODE, minid=None, approx=False, limit=0)
    freed = residency.purge_dead()
    assert freed == sealed_bytes(gone) and residency.resident == before - freed
    assert len(residency.queue) == queued - 2
    assert all(node is not g for node, _home, _n in residency.queue for g in gone)
    assert residency.purge_dead() == 0


def test_a_trimmed_stream_s_nodes_are_let_go_once_they_add_up() -> None:
    residency, stream, _store = snapshotted(8000)
    assert len(residency.queue) >= 7999
    resident = residency.resident
    stream.trim(maxlen=PER_NODE * 1000, minid=None, approx=False, limit=0)
    # Each time a quarter of what was resident (1 MiB at least) left its stream, the queue let
    # go of it: what it still holds of the dropped nodes is less than that.
    dead = sum(nbytes for node, _home, nbytes in residency.queue if not node.queued)
    assert dead == residency.dropped_bytes <= max(PURGE_MIN, residency.resident // 4)
    assert len(residency.queue) < 8000 - 5000 and residency.resident < resident // 2


def test_the_node_being_read_stays_and_so_does_what_follows_it() -> None:
    residency, stream, _store = snapshotted(4)
    residency.set_budget(1)
    residency.evict(keep=stream.nodes[2])
    assert cold(stream) == [True, True, False, False]
    assert residency.queue[0][0] is stream.nodes[2]


def test_a_long_read_evicts_past_twice_the_budget() -> None:
    residency, stream, _store = snapshotted(4)
    residency.set_budget(1)
    residency.evict()
    assert all(cold(stream))
    residency.set_budget(sealed_bytes(stream.nodes[:1]))
    for node in stream.nodes:  # a read walking the stream: each load may evict earlier ones
        assert node.buffer()
    assert residency.loads == 4
    assert residency.resident <= 2 * residency.limit
    assert cold(stream)[-1] is False and any(cold(stream))


def test_changed_node_limits_pin_nodes_changed_since_the_last_rotation() -> None:
    residency, stream, _store = snapshotted(2)
    fill(stream, 2 * PER_NODE, start=2 * PER_NODE + 1)  # after the rotation
    residency.node_limits_changed()
    snapshot(residency, stream)  # holds them all, but cut with the old limits
    residency.set_budget(1)
    residency.evict()
    assert cold(stream) == [True, True, False, False]
    assert not residency.waiting  # pinned: out of the queue for good
    assert residency.resident == 0


def test_turning_the_budget_off_and_on() -> None:
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, 3 * PER_NODE)
    residency.set_budget(0)
    assert residency.resident == 0 and not residency.queue and not residency.waiting
    assert not any(node.queued for node in stream.nodes)
    residency.set_budget(1000, [{b"s": stream}])
    assert [node.queued for node in stream.nodes] == [True, True, True]
    assert residency.resident == sealed_bytes(stream.nodes)
    residency.set_budget(2000, [{b"s": stream}])  # already on: nothing queued twice
    assert residency.resident == sealed_bytes(stream.nodes)


def test_bind_keeps_the_newer_snapshot() -> None:
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, 2 * PER_NODE)
    older = MemoryStore(residency.rotated())
    newer = snapshot(residency, stream)
    home = residency.bind(stream, older, 7)
    assert home.store is newer and home.number == 1
    newest = MemoryStore(residency.rotated())
    assert residency.bind(stream, newest, 3).store is newest


def test_close_lets_go_of_every_store() -> None:
    residency, _stream, store = snapshotted(2)
    residency.close()
    assert store.closed
    assert residency.store is None and not residency.queue and residency.resident == 0


def test_adopted_streams_count_here_with_their_snapshot() -> None:
    theirs = Residency(0)  # a replica's full sync loads the snapshot apart, without a budget
    stream = new_stream(theirs)
    fill(stream, 3 * PER_NODE)
    store = snapshot(theirs, stream)
    ours = Residency(1 << 30)
    ours.adopt([{b"s": stream}, {}])
    assert stream.home is not None and stream.home.residency is ours
    assert ours.store is store and ours.last_tick == store.clean_before
    assert ours.resident == sealed_bytes(stream.nodes)
    ours.set_budget(1)
    ours.evict()
    assert all(cold(stream))
    assert ours.evictions == 3 and theirs.evictions == 0


def test_a_node_its_deletions_empty_leaves_the_queue() -> None:
    residency, stream, _store = snapshotted(3)
    gone = stream.nodes[1]
    for sid in gone.entry_ids():
        assert stream.delete(sid)
    assert gone not in stream.nodes and not gone.queued
    residency.set_budget(1)
    residency.evict()
    assert not gone.is_cold()  # dropped from the queue, not made cold
    assert residency.evictions == 2 and all(cold(stream))
    assert all(node is not gone for node, _home, _n in (*residency.queue, *residency.waiting))


class CrcStore(MemoryStore):
    """A MemoryStore that records the CRC each read-back was given."""

    def __init__(self, clean_before: int) -> None:
        super().__init__(clean_before)
        self.given: list[int] = []

    def load(self, number: int, master: int, crc: int = -1) -> tuple[bytearray, int]:
        self.given.append(crc)
        return super().load(number, master, crc)


def test_a_cold_node_keeps_the_crc_of_its_entries_for_the_read_back() -> None:
    """A node going cold remembers its entries' CRC; the read-back is given it (the store
    skips the structural check of bytes with that CRC), and a change makes it taken again."""
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, 3 * PER_NODE)
    store = CrcStore(residency.rotated())
    store.keep(1, stream)
    residency.bind(stream, store, 1)
    residency.switched(store)
    node = stream.nodes[0]
    held = bytes(node.buffer())
    residency.set_budget(1)
    residency.evict()
    assert node.is_cold() and node.crc == zlib.crc32(held) and node.crc_epoch == node.epoch
    assert node.entry_ids()  # read back
    assert store.given == [zlib.crc32(held)]
    stream.delete(node.entry_ids()[0])  # changed: its CRC is stale
    changed = bytes(node.buffer())
    store2 = CrcStore(residency.rotated())
    store2.keep(1, stream)
    residency.bind(stream, store2, 1)
    residency.switched(store2)
    residency.evict()
    assert node.is_cold() and node.crc == zlib.crc32(changed) != zlib.crc32(held)
    node.entry_ids()
    assert store2.given == [zlib.crc32(changed)]


def test_a_node_is_one_class_cold_or_resident() -> None:
    """Going cold drops the buffer (`lp` None) and keeps the counters and the size; the
    object's class never changes (a compiled class cannot change it) and has no attribute
    fallback: a read back is explicit."""
    residency, stream, _store = snapshotted(2)
    node = stream.nodes[0]
    held, size = bytes(node.buffer()), node.lp_bytes()
    residency.set_budget(1)
    residency.evict()
    assert type(node) is Node and node.lp is None and node.is_cold()
    assert node.lp_bytes() == size and node.count == PER_NODE
    assert not hasattr(Node, "__getattr__") and not hasattr(node, "__dict__")
    assert node.peek() == held and node.lp is None  # read once: still cold
    assert node.buffer() == held and node.lp == held and not node.is_cold()


def test_appending_to_a_cold_tail_reads_it_back_unless_it_is_full() -> None:
    """An idle stream's tail goes cold with the rest; the next append reads it back and
    appends to it, or, when the tail is full by its entries, starts a node without reading it."""
    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, PER_NODE + 2)  # a tail of 2 entries
    store = snapshot(residency, stream)
    residency.set_budget(1)
    residency.evict()
    assert cold(stream) == [True, True]
    stream.append((PER_NODE + 3) << 64, (b"f", b"new"), PER_NODE, 1 << 20)
    assert store.loads == 1 and cold(stream) == [True, False]
    assert stream.nodes[-1].count == 3 and stream.get((PER_NODE + 3) << 64) == (b"f", b"new")

    residency = Residency(1 << 30)
    stream = new_stream(residency)
    fill(stream, 2 * PER_NODE)  # a full tail
    store = snapshot(residency, stream)
    residency.set_budget(1)
    residency.evict()
    stream.append((2 * PER_NODE + 1) << 64, (b"f", b"new"), PER_NODE, 1 << 20)
    assert store.loads == 0 and cold(stream) == [True, True, False]


# --- list nodes ----------------------------------------------------------------------------------


class MemoryListStore:
    """A list node store that holds the nodes it indexed (a snapshot's chunks, by content)."""

    def __init__(self) -> None:
        self.saved: dict[tuple[int, int], bytes] = {}
        self.reads = 0

    def index(self, value: QuickList) -> NodeIndex:
        """What a snapshot of `value` holds: each node, under chunk 0, by its hash."""
        index: NodeIndex = {}
        for pos, node in enumerate(value.nodes):
            data = bytes(node.read() if isinstance(node, ColdValueNode) else node)
            self.saved[0, pos] = data
            index.setdefault(value_node_hash(bytearray(data)), ColdValueNode(
                self, -1, 1, 0, pos, value_node_hash(bytearray(data)), len(data),
                node_count(bytearray(data))))
        return index

    def value_node(self, node: ColdValueNode) -> bytearray:
        self.reads += 1
        data = self.saved[node.chunk, node.pos]
        assert value_node_hash(bytearray(data)) == node.hash
        return bytearray(data)

    def close(self) -> None:
        pass


LIMITS = ListLimits(fill=16)  # 16 elements a node
LISTS_BY_SIZE = ListLimits(fill=-2)  # nodes of 8 KiB at most: a big element is split out


def queued_list(budget: int = 1 << 30, elements: int = 160) -> tuple[Residency, QuickList,
                                                                     MemoryListStore]:
    """A residency, a list of `elements` / 16 full nodes, bound to a snapshot that holds it."""
    residency = Residency(budget)
    value = lists.from_elements([b"e%d" % i for i in range(elements)], LIMITS)
    assert isinstance(value, QuickList)
    store = MemoryListStore()
    residency.bind_nodes(value, lists.NODES, store.index(value))
    return residency, value, store


def list_cold(value: QuickList) -> list[bool]:
    return [isinstance(node, ColdValueNode) for node in value.nodes]


def test_list_nodes_go_cold_oldest_first_and_never_the_ends() -> None:
    residency, value, _store = queued_list()
    assert len(value.nodes) == 10 and len(residency.queue) == 8  # not the two ends
    residency.set_budget(sum(len(node) + NODE_OVERHEAD for node in value.nodes[6:9]))
    residency.evict()
    assert list_cold(value) == [False] + [True] * 5 + [False] * 4
    residency.set_budget(1)
    residency, value, _store = queued_list(budget=1)
    residency.evict()
    assert list_cold(value) == [False] + [True] * 8 + [False]
    assert residency.evictions == 8 and value.home is not None and value.home.cold_nodes == 8
    assert list(lists.elements(value)) == [b"e%d" % i for i in range(160)]


def test_value_nodes_tell_a_noded_value_and_count_the_cold_nodes_of_a_keyspace() -> None:
    """ValueNodes (the list's: lists.NODES): which values keep nodes that may go cold, and
    INFO's counts over a keyspace (every database, small values and unbound lists at 0)."""
    residency, value, _store = queued_list(budget=1)
    residency.evict()
    small = lists.from_elements([b"a", b"b"])  # a listpack, kept bare
    two = lists.from_elements([b"e%d" % i for i in range(20)], LIMITS)  # its two ends only
    unbound = lists.from_elements([b"e%d" % i for i in range(160)], LIMITS)
    kind = lists.NODES
    assert isinstance(two, QuickList) and len(two.nodes) == 2
    assert kind.noded(value) and kind.noded(unbound) and kind.noded(two) is False
    assert kind.noded(small) is False and kind.noded(b"a string") is False
    dbs = [{b"q": value, b"s": small}, {}, {b"u": unbound, b"t": two}]
    assert value.home is not None
    assert kind.cold_counts(dbs) == (value.home.cold_nodes, value.home.cold_elements,
                                     value.home.cold_bytes) == (8, 128, sum(
        node.size for node in value.nodes if isinstance(node, ColdValueNode)))
    assert kind.cold_counts([{b"u": unbound}]) == (0, 0, 0)


def test_a_cold_list_node_reads_back_and_is_queued_again() -> None:
    residency, value, store = queued_list(budget=1)
    residency.evict()
    assert lists.get(value, 40) == b"e40"  # a point read: node 2 is resident again
    assert list_cold(value)[2] is False and residency.loads == 1 and store.reads == 1
    assert lists.read_range(value, 64, 80) == [b"e%d" % i for i in range(64, 80)]  # a peek
    assert list_cold(value)[4] is True and residency.loads == 2
    residency.evict()
    assert list_cold(value)[2] is True


def test_a_list_node_changed_since_the_snapshot_waits_and_asks_for_one() -> None:
    residency, value, _store = queued_list(budget=1)
    asked = []
    residency.on_pressure = lambda: asked.append(1)
    lists.set_at(value, 40, b"changed", LIMITS)  # node 2, queued, changed in place
    residency.evict()
    assert list_cold(value)[2] is False and asked
    assert residency.waiting and residency.waiting_bytes > 0
    assert lists.get(value, 40) == b"changed"
    store = MemoryListStore()  # the next snapshot holds it as it is now
    residency.bind_nodes(value, lists.NODES, store.index(value))
    residency.switched(MemoryStore(residency.rotated()))
    residency.evict()
    assert list_cold(value)[2] is True and lists.get(value, 40) == b"changed"


def test_a_list_node_no_newer_snapshot_holds_leaves_the_queue() -> None:
    """A changed node that a snapshot rotated after the change does not hold either (its
    nodes cut otherwise) stays resident and asks for no more compactions; one rotated before
    the change leaves it waiting, asking."""
    residency, value, store = queued_list(budget=1)
    index = value.home.index if value.home is not None else {}
    before = residency.rotated()  # a compaction rotated before the change...
    lists.set_at(value, 40, b"changed", LIMITS)
    asked: list[int] = []
    residency.on_pressure = lambda: asked.append(1)
    residency.evict()
    assert asked and len(residency.waiting) == 1
    first = len(asked)
    residency.bind_nodes(value, lists.NODES, index, before)  # ...switches: it cannot hold the change
    residency.switched(MemoryStore(before))
    residency.evict()
    assert len(asked) > first and len(residency.waiting) == 1  # it waits, and asks again
    second = len(asked)
    after = residency.rotated()  # one rotated after the change, without it (cut otherwise)
    residency.bind_nodes(value, lists.NODES, index, after)
    residency.switched(MemoryStore(after))
    residency.evict()
    assert len(asked) == second and not residency.waiting and not residency.queue
    assert list_cold(value)[2] is False
    residency.bind_nodes(value, lists.NODES, index, residency.rotated())  # not queued again
    assert not residency.queue
    residency.bind_nodes(value, lists.NODES, store.index(value), residency.rotated())  # held now: queued
    assert len(residency.queue) == 1
    residency.evict()
    assert list_cold(value)[2] is True and lists.get(value, 40) == b"changed"


def test_a_list_node_gone_from_its_list_leaves_the_queue() -> None:
    residency, value, _store = queued_list()
    lists.delete_range(value, 0, 48)  # the first three nodes, whole
    assert len(value.nodes) == 7
    residency.set_budget(1 << 30)
    residency.resident = 1 << 31  # (as if over budget)
    residency.budget = 1
    residency.evict()
    assert list_cold(value) == [False] + [True] * 5 + [False]
    assert lists.read_range(value, 0, 112) == [b"e%d" % i for i in range(48, 160)]


def test_list_nodes_that_leave_their_list_are_purged_from_the_queue() -> None:
    """Pops, a deleted range, LREM and a split let go of the nodes they drop: the purge (and
    the queue's own, once they add up) takes them out, the bytes they were counted for back."""
    residency, value, _store = queued_list(elements=16 * 40)
    queued, resident = len(residency.queue), residency.resident
    gone = value.nodes[1:4]
    lists.delete_range(value, 16, 64)  # nodes 1 to 3, whole
    for _ in range(32):  # the head node and node 4, emptied by pops
        lists.pop(value, False)
    removed = value.nodes[5]
    assert lists.remove(value, b"e%d" % (16 * 11), 0) == 1  # (no node emptied)
    for i in range(16 * 12, 16 * 13):  # node 12 emptied by LREM
        assert lists.remove(value, b"e%d" % i, 0) == 1
    split = value.nodes[8]  # (full nodes up to it: its elements start at 16 * 8)
    assert lists.set_at(value, 16 * 8 + 3, b"x" * 10_000, LISTS_BY_SIZE) is True  # split out
    assert all(node is not split for node in value.nodes)
    dead = [g for g in [*gone, removed] if all(node is not g for node in value.nodes)]
    assert len(dead) >= 3
    freed = residency.purge_dead()
    assert freed > 0 and residency.resident == resident - freed
    assert len(residency.queue) < queued
    live = {id(node) for node in value.nodes}
    assert all(id(node) in live for node, _home, _n in residency.queue)
    assert residency.purge_dead() == 0
    assert lists.length(value) == 16 * 40 - 48 - 32 - 1 - 16


def test_a_push_queues_the_end_it_replaced() -> None:
    residency, value, _store = queued_list()
    queued = len(residency.queue)
    lists.push(value, [b"x"] * 17, True, LIMITS)  # a new tail, then another
    assert len(residency.queue) == queued + 2  # the old tail and the first new one
    residency.set_budget(1)
    residency.evict()
    # the old tail, unchanged, goes cold; the first new node waits for a snapshot; the tail stays
    assert list_cold(value)[-4:] == [True, True, False, False]
    assert [node for node, _home, _nbytes in residency.waiting] == [value.nodes[-2]]
    assert lists.length(value) == 177


def test_an_end_that_became_cold_is_read_back_by_a_push_or_a_pop() -> None:
    residency, value, store = queued_list(budget=1)
    residency.evict()
    assert list_cold(value) == [False] + [True] * 8 + [False]
    for i in range(16):  # the head node emptied: the cold node after it is the head now
        assert lists.pop(value, False) == b"e%d" % i
    assert list_cold(value)[0] is True
    assert lists.pop(value, False) == b"e16" and list_cold(value)[0] is False
    del value.nodes[-1]  # (the tail gone whole, as LTRIM drops it: a cold node is the tail)
    value.count -= 16
    assert list_cold(value)[-1] is True
    lists.push(value, [b"tail"], True, LIMITS)
    assert lists.pop(value, True) == b"tail" and lists.pop(value, True) == b"e143"
    assert list(lists.elements(value)) == [b"e%d" % i for i in range(17, 143)]
    assert store.reads >= 2
