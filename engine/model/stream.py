"""The stream data structure: entries in nodes, stream metadata, trimming.

Owns how entries are stored: nodes of at most `stream-node-max-entries` entries (and about
`stream-node-max-bytes` bytes, as Redis counts them, so that node boundaries and therefore `~`
trimming match Redis), indexed by their first ("master") ID for O(log n) seek and O(1) append.
Each node's entries are one packed buffer: the listpack Redis keeps for the node, byte for byte
(`engine.model.packed_node`, a compiled kernel with a pure-Python reference); reads decode only
the entries they return. Deleted entries stay as flagged entries inside their node until the
node empties, as in Redis. A sealed node may be *cold* (`Node.lp` None): its buffer dropped
from memory and read back from the snapshot when touched; `engine.model.residency` decides which and
when. Also owns the stream metadata (last ID, first ID, max deleted ID, entries added). Consumer
groups hang off `Stream.groups` but are owned by `engine.groups`, idempotent producers' maps off
`Stream.idmp` (owned by `engine.model.idmp_maps`). Must not touch: argument parsing,
replies, effects.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final
from zlib import crc32

from streamkeep.engine.model import packed_node as pk
from streamkeep.engine.model.ids import MAX_ID, format_id
from streamkeep.engine.model.residency import EPOCH, Home, Residency, node_bytes
from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.engine.wire.reply import EntryArray, PackedEntries, PlainEntries

if TYPE_CHECKING:
    from streamkeep.engine.model.consumer_groups import ConsumerGroup
    from streamkeep.engine.model.idmp_maps import Idmp

# Flat (field1, value1, field2, value2, ...): how entries come in and go out (the node keeps
# them packed).
Fields = tuple[bytes, ...]
LISTPACK_MAX_SIZE: Final = 1 << 30
# XADD's kernels, bound once: the compiled build calls a name bound Final without looking it up
# in the module's globals (a Cython function is not one of its native calls).
_append_entry: Final = pk.append
_read_plain: Final = pk.read_plain
_PLAIN_ENTRIES: Final = PlainEntries
_last_id: Final = pk.last_id
_format_id: Final = format_id
_U64: Final = (1 << 64) - 1
_NO_EPOCH: Final = -2  # below every epoch (a snapshot's nodes have -1): no CRC taken


class Node:
    """One stream node: its master ID and field names, and `lp`, its entries packed as Redis's
    listpack (deleted entries flagged in place). `count` is its entries, deleted ones included,
    `live` the others.

    A sealed node may be *cold*: `lp` is None, its entries are in its snapshot only (its
    master, counters and listpack size are kept). `buffer()` reads them back (one LMDB read and
    a copy) and makes it resident again; `peek()` reads them for one read and leaves it cold.
    A reader of `lp` tests it for None itself where it is hot (an append, a range read): one
    test of a local, no call.

    `epoch` is the change clock's value (residency.EPOCH) when its entries last changed (an
    append or a deletion), -1 for a node as a snapshot holds it.
    `home` is its stream's place in the current snapshot (None until a snapshot holds it), and
    `queued` says whether its residency may make it cold. `size` is a cold node's listpack
    size (a resident node's is `len(lp)`).
    `crc` is the CRC-32 of the listpack as it was when its `epoch` was `crc_epoch` (-1: not
    known): a read-back whose bytes have that CRC gets back bytes this process held as a node,
    so their structure need not be checked again (see `thaw`)."""

    __slots__ = ("master", "master_ms", "master_seq", "single_field", "master_fields", "lp",
                 "count", "live", "size", "epoch", "home", "queued", "crc", "crc_epoch")

    def __init__(self, master: int, names: Fields, lp: bytearray | None) -> None:
        self.master = master
        self.master_ms = master >> 64
        self.master_seq = master & _U64
        self.master_fields = names
        # The one field name when the master entry has exactly one (append's fast check).
        self.single_field = names[0] if len(names) == 1 else None
        self.lp = lp  # None: cold
        self.count = 0
        self.live = 0
        self.size = 0
        self.epoch = EPOCH.value
        self.home: Home | None = None
        # In its residency's queue (it may go cold). A node its stream drops is unqueued
        # then: its entry in the queue is left for `Residency.evict` to drop when it meets it.
        self.queued = False
        self.crc = -1
        self.crc_epoch = _NO_EPOCH

    def is_cold(self) -> bool:
        return self.lp is None

    def buffer(self) -> bytearray:
        """The listpack, read back first if the node is cold (it is resident from then on)."""
        lp = self.lp
        return self.thaw() if lp is None else lp

    def freeze(self) -> None:
        """Drop the entries from memory (residency.evict decides: only a sealed node its
        snapshot holds as it is).
        Its CRC is taken first unless the entries are unchanged since it was (a node read back
        and not changed since has it from the read-back): the read-back recognises these bytes
        by it and skips their structural check."""
        lp = self.lp
        assert lp is not None  # (the residency queues resident nodes only)
        if self.crc_epoch != self.epoch:
            self.crc = crc32(lp)
            self.crc_epoch = self.epoch
        self.size = len(lp)
        self.lp = None

    def thaw(self) -> bytearray:
        """Read a cold node's listpack back from its snapshot and keep it; returns it."""
        home = self.home
        assert home is not None and home.store is not None  # only a stored node goes cold
        # The store checks the stored value's checksum, and the listpack's structure unless
        # its CRC is the one this node had when it went cold (the bytes it held then).
        lp, self.crc = home.store.load(home.number, self.master, self.crc)
        self.lp = lp
        self.crc_epoch = self.epoch
        home.residency.loaded(self, home)
        return lp

    def peek(self) -> bytearray:
        """A cold node's listpack, read from its snapshot and checked as `thaw` reads it, for
        one read: the node stays cold. Range reads of a cold backlog (a consumer catching up, a
        scan) read each node once; bringing every one back only to evict another cost more
        than the read."""
        home = self.home
        assert home is not None and home.store is not None  # only a stored node goes cold
        lp, self.crc = home.store.load(home.number, self.master, self.crc)
        home.residency.loads += 1
        return lp

    def lp_bytes(self) -> int:
        """The listpack's size: what Redis compares with stream-node-max-bytes."""
        lp = self.lp
        return self.size if lp is None else len(lp)

    def last_id(self) -> int:
        """The last entry's ID, deleted or not."""
        return _last_id(self.buffer(), self.master)

    def entry_ids(self) -> list[int]:
        """Every entry's ID, deleted ones included (decoded: for inspection and tests)."""
        return pk.ids(self.buffer(), self.master)

    def entry_fields(self) -> list[Fields | None]:
        """Every entry's fields, None for a deleted one (decoded: for inspection and tests)."""
        return [None if deleted else f for _sid, f, deleted in pk.entries(self.buffer(),
                                                                            self.master)]

    def live_ids(self) -> list[int]:
        lp = self.buffer()
        if self.live == self.count:
            return pk.ids(lp, self.master)
        return [sid for sid, _f, deleted in pk.entries(lp, self.master) if not deleted]


def cold_node(master: int, master_fields: Fields, size: int, live: int, count: int) -> Node:
    """A node as its snapshot holds it, entries not loaded (a lazy load's; residency.bind
    gives it its home)."""
    node = Node(master, tuple(master_fields), None)
    node.size = size
    node.live = live
    node.count = count
    node.epoch = -1
    return node


class _OverBudget(StreamkeepError):  # noqa: N818 (control flow inside range_resp only)
    """range_resp's stop at the output budget (caught there, never seen outside)."""


class Stream:
    """A stream value: nodes plus metadata. `groups` maps group name to ConsumerGroup."""

    __slots__ = (
        "nodes", "masters", "length", "last_id", "first_id", "max_deleted_id",
        "entries_added", "groups", "idmp", "home",
    )

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.masters: list[int] = []  # nodes[i].master, kept apart for bisect
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_id = 0
        self.entries_added = 0
        self.groups: dict[bytes, ConsumerGroup] = {}
        self.idmp: Idmp | None = None  # idempotent producers' state, from the first use on
        self.home: Home | None = None  # its place in the current snapshot (residency.bind)

    # --- appending -------------------------------------------------------------------------

    def append(
        self, sid: int, fields: Fields, max_entries: int, max_bytes: int, idb: bytes = b"",
    ) -> bytes:
        """Add an entry whose ID the caller validated (> last_id). Returns the formatted ID.

        XADD's hot path: a new node when the tail is full as Redis decides it (entries,
        deleted ones included, against max_entries; listpack bytes plus the new fields' and
        values' lengths against max_bytes), then one append into the tail's buffer."""
        if type(fields) is not tuple:
            fields = tuple(fields)
        if not idb:  # callers holding the canonical `ms-seq` bytes pass them in
            idb = _format_id(sid)
        nodes = self.nodes
        if not nodes:
            node, lp = self._new_node(sid, fields)
        else:
            node = nodes[-1]
            if 0 < max_entries <= node.count:
                node, lp = self._new_node(sid, fields)
            else:
                tail = node.lp
                lp = node.thaw() if tail is None else tail  # (None: an idle tail gone cold)
                if not 0 < max_bytes <= LISTPACK_MAX_SIZE:
                    max_bytes = LISTPACK_MAX_SIZE
                elen = (len(fields[0]) + len(fields[1]) if len(fields) == 2
                        else sum(map(len, fields)))
                if len(lp) + elen >= max_bytes:
                    node, lp = self._new_node(sid, fields)
        _append_entry(lp, node.master, node.master_fields, sid, fields)
        node.count += 1
        node.live += 1
        node.epoch = EPOCH.value
        if not self.length:
            self.first_id = sid
        self.length += 1
        self.last_id = sid
        self.entries_added += 1
        return idb

    def restore_packed(self, master: int, lp: bytearray, count: int, live: int,
                       names: Fields | None = None) -> Node:
        """Append a node as a snapshot or an RDB file holds it: its listpack, checked by the
        caller (`packed_node.validate` for bytes from outside) and counted (`count` entries,
        `live` of them live). Stream metadata is restored separately by the loader."""
        if names is None:
            names = pk.names(lp)
        nodes = self.nodes
        if nodes and nodes[-1].master_fields == names:
            names = nodes[-1].master_fields  # one tuple for a run of nodes
        node = Node(master, names, lp)
        node.count = count
        node.live = live
        node.epoch = -1
        node.home = self.home  # (a RESTOREd stream has one already; a loaded one gets it)
        self.nodes.append(node)
        self.masters.append(master)
        return node

    def restore_cold_node(self, node: Node) -> None:
        """Append a node a lazy load left in its snapshot (see `cold_node`)."""
        self.nodes.append(node)
        self.masters.append(node.master)

    def _new_node(self, sid: int, fields: Fields) -> tuple[Node, bytearray]:
        """A new tail for an entry of these fields (the old one sealed); it and its buffer."""
        names = fields[0::2]
        nodes = self.nodes
        if nodes:
            tail = nodes[-1]
            if tail.master_fields == names:  # shared: one names tuple for a run of nodes
                names = tail.master_fields
            if tail.lp is not None:
                # sealed: its buffer at its exact size (appends over-allocate)
                tail.lp = bytearray(tail.lp)
        lp = pk.new_node(names)
        node = Node(sid, names, lp)
        home = self.home
        if home is not None:
            node.home = home
            if nodes:  # the tail is sealed: its memory counts until it goes cold
                home.residency.sealed(nodes[-1], home)
        nodes.append(node)
        self.masters.append(sid)
        return node, lp

    # --- lookup and iteration --------------------------------------------------------------

    def _node_index(self, sid: int) -> int:
        """Index of the node that would hold `sid` (the last node whose master <= sid)."""
        i = bisect_right(self.masters, sid) - 1
        return i if i > 0 else 0

    def get(self, sid: int) -> Fields | None:
        if not self.nodes:
            return None
        node = self.nodes[self._node_index(sid)]
        lp = node.lp
        return pk.find(node.thaw() if lp is None else lp, node.master, sid)

    def __contains__(self, sid: int) -> bool:
        return self.get(sid) is not None

    def iter_forward(self, start: int, end: int) -> Iterator[tuple[int, bytes, Fields]]:
        """Live entries with start <= id <= end, ascending (decoded a node at a time)."""
        end = min(end, MAX_ID)  # (the kernel reads IDs as two uint64s)
        nodes = self.nodes
        if not nodes or start > end:
            return
        i = self._node_index(start)
        while i < len(nodes):
            node = nodes[i]
            if node.master > end:
                return
            sids: list[int] = []
            idbs, fields = pk.read_range(node.buffer(), node.master, start, end, 0, False, sids)
            yield from zip(sids, idbs, fields, strict=True)
            i += 1

    def iter_backward(self, start: int, end: int) -> Iterator[tuple[int, bytes, Fields]]:
        """Live entries with start <= id <= end, descending (decoded a node at a time)."""
        end = min(end, MAX_ID)  # (the kernel reads IDs as two uint64s)
        nodes = self.nodes
        if not nodes or start > end:
            return
        i = self._node_index(end)
        while i >= 0:
            node = nodes[i]
            sids: list[int] = []
            idbs, fields = pk.read_range(node.buffer(), node.master, start, end, 0, True, sids)
            yield from zip(sids, idbs, fields, strict=True)
            if node.master <= start:
                return
            i -= 1

    def range(self, start: int, end: int, count: int = 0, rev: bool = False,
              sids: list[int] | None = None) -> EntryArray:
        """The entries from start to end as XRANGE replies them (reversed for XREVRANGE); count 0
        means no limit. Each node decodes only the entries it returns. `sids`, when given,
        gets their IDs as ints."""
        out = EntryArray()
        ids, fields = out.ids, out.fields

        def read(lp: bytearray, master: int, left: int) -> int:
            got_ids, got_fields = pk.read_range(lp, master, start, end, left, rev, sids)
            ids.extend(got_ids)
            fields.extend(got_fields)
            return len(got_ids)

        self._walk_range(start, end, count, rev, read)
        return out

    def range_plain(self, start: int, end: int, count: int = 0, rev: bool = False,
                    sids: list[int] | None = None) -> PlainEntries:
        """range() as an embedded caller gets it: `[[id, [field, value, ...]], ...]`, built
        straight from the nodes' bytes."""
        out = _PLAIN_ENTRIES()
        nodes = self.nodes
        if not rev and nodes:
            last = nodes[-1]
            if start >= last.master and last.lp is not None:
                # A read at the stream's tail (a consumer that keeps up, a queue's): the last
                # node alone, as _walk_range would pick it, without its walk.
                _read_plain(last.lp, last.master, start, min(end, MAX_ID), count, False, out,
                            sids)
                return out

        def read(lp: bytearray, master: int, left: int) -> int:
            return _read_plain(lp, master, start, end, left, rev, out, sids)

        self._walk_range(start, end, count, rev, read)
        return out

    def range_resp(self, start: int, end: int, count: int = 0, rev: bool = False,
                   sids: list[int] | None = None, budget: int = 0) -> PackedEntries:
        """range(), written straight from the nodes' bytes as the RESP of the reply's entries
        (what a connection sends): no Python object per entry. With a `budget` (bytes, 0:
        none), writing stops at the first node past it and the reply is marked cut."""
        out = bytearray()

        def read(lp: bytearray, master: int, left: int) -> int:
            if budget and len(out) > budget:
                raise _OverBudget
            return pk.range_reply(lp, master, start, end, left, rev, out, sids)

        try:
            return PackedEntries(out, self._walk_range(start, end, count, rev, read))
        except _OverBudget:
            return PackedEntries(out, 0, cut=True)

    def _walk_range(self, start: int, end: int, count: int, rev: bool,
                    read: Callable[[bytearray, int, int], int]) -> int:
        """Call `read(listpack, master, left)` on each node that may hold entries of
        [start, end], in the reply's order, until `count` (0: all) are read; the number read.
        A cold node is read from its snapshot and stays cold (`Node.peek`)."""
        end = min(end, MAX_ID)  # (the kernel reads IDs as two uint64s)
        nodes = self.nodes
        if not nodes or start > end:
            return 0
        got = 0
        if not rev:
            i = self._node_index(start)
            while i < len(nodes):
                node = nodes[i]
                if node.master > end:
                    break
                lp = node.lp
                if lp is None:
                    lp = node.peek()
                got += read(lp, node.master, count - got if count else 0)
                if count and got >= count:
                    break
                i += 1
            return got
        i = self._node_index(end)
        while i >= 0:
            node = nodes[i]
            lp = node.lp
            if lp is None:
                lp = node.peek()
            got += read(lp, node.master, count - got if count else 0)
            if count and got >= count or node.master <= start:
                break
            i -= 1
        return got

    def first_entry_id(self, skip_tombstones: bool = True) -> int:
        """Redis's streamGetEdgeID(first): MAX_ID when there is no such entry."""
        if not self.nodes:
            return MAX_ID
        if not skip_tombstones:
            node = self.nodes[0]
            return pk.ids(node.buffer(), node.master)[0] if node.count else MAX_ID
        return self._edge_live_id(False, MAX_ID)

    def last_entry_id(self) -> int:
        nodes = self.nodes
        if nodes:
            node = nodes[-1]
            if node.live == node.count and node.count:
                return node.last_id()  # no deleted entry: the last one is live (the common case)
        return self._edge_live_id(True, 0)

    def _edge_live_id(self, last: bool, missing: int) -> int:
        """The first (or last) live entry's ID: one entry read from the first node (from the
        end) that has one."""
        for node in reversed(self.nodes) if last else self.nodes:
            if node.live:
                sids: list[int] = []
                pk.read_range(node.buffer(), node.master, 0, MAX_ID, 1, last, sids)
                return sids[0]
        return missing

    # --- deletion and trimming --------------------------------------------------------------

    def delete(self, sid: int) -> bool:
        """XDEL one entry. Does not touch first_id / max_deleted_id (callers batch that)."""
        if not self.nodes:
            return False
        i = self._node_index(sid)
        node = self.nodes[i]
        if not pk.mark_deleted(node.buffer(), node.master, sid):
            return False
        node.epoch = EPOCH.value
        node.live -= 1
        self.length -= 1
        if node.live == 0:
            self._dropped(node)  # out of its stream: out of its residency's queue too
            del self.nodes[i]
            del self.masters[i]
        return True

    def _dropped(self, node: Node) -> None:
        """A node left the stream: unqueued, and its residency told (which lets go of the
        dropped nodes its queue still holds once they add up)."""
        if node.queued:
            node.queued = False
            home = self.home
            if home is not None:
                home.residency.dropped(node_bytes(node.count, node.lp_bytes()))

    def refresh_first_id(self) -> None:
        self.first_id = 0 if self.length == 0 else self.first_entry_id()

    def trim(
        self,
        maxlen: int | None,
        minid: int | None,
        approx: bool,
        limit: int,
        referenced: Callable[[int], bool] | None = None,
        walk_refs: list[int] | None = None,
    ) -> list[int]:
        """Trim from the head as Redis's streamTrim does; returns the live IDs removed.

        Exactly one of maxlen/minid is set. `approx` stops at the first node that cannot go
        whole; `limit` (0: none) caps the entries removed. With a reference policy (Redis 8.2
        DELREF/ACKED: `walk_refs` is given) nodes are walked entry by entry, `referenced` (ACKED)
        vetoes single entries, and every ID walked, deleted ones too, is added to `walk_refs` so
        DELREF can drop their PEL references.
        """
        removed: list[int] = []
        nodes, masters = self.nodes, self.masters
        keepref = walk_refs is None
        i = 0
        while i < len(nodes):
            if maxlen is not None and self.length <= maxlen:
                break
            node = nodes[i]
            if limit and len(removed) + node.live > limit:
                break
            if maxlen is not None:
                eligible = self.length - node.live >= maxlen
            else:
                eligible = node.last_id() < minid  # type: ignore[operator]
            if keepref and eligible:
                removed += node.live_ids()
                self.length -= node.live
                self._dropped(node)  # (see delete)
                del nodes[i]
                del masters[i]
                continue
            if approx and not eligible:
                break
            stopped = self._trim_inside(node, maxlen, minid, referenced, walk_refs, removed)
            # Redis frees the node only if it was eligible as a whole (a MINID node whose last
            # entry is a deleted one >= minid stays, empty, as with KEEPREF).
            if node.live == 0 and not keepref and eligible:
                self._dropped(node)
                del nodes[i]
                del masters[i]
            else:
                i += 1
            if keepref or stopped or not eligible:
                break
        self.refresh_first_id()
        return removed

    def _trim_inside(
        self,
        node: Node,
        maxlen: int | None,
        minid: int | None,
        referenced: Callable[[int], bool] | None,
        walk_refs: list[int] | None,
        removed: list[int],
    ) -> bool:
        """Delete entries of one node from its head; True when the threshold was reached."""
        if walk_refs is None:
            return self._trim_inside_live(node, maxlen, minid, referenced, removed)
        doomed: list[int] = []
        stopped = False
        length = self.length
        lp = node.buffer()
        for sid, _f, deleted in pk.entries(lp, node.master):
            if maxlen is not None:
                if length <= maxlen:
                    stopped = True
                    break
            elif sid >= minid:  # type: ignore[operator]
                stopped = True
                break
            if deleted:
                if walk_refs is not None:
                    walk_refs.append(sid)
                continue
            if referenced is not None and referenced(sid):
                continue
            doomed.append(sid)
            length -= 1
            if walk_refs is not None:
                walk_refs.append(sid)
        if doomed:
            pk.delete_many(lp, node.master, doomed)
            node.epoch = EPOCH.value
            node.live -= len(doomed)
            self.length = length
            removed += doomed
        return stopped

    def _trim_inside_live(self, node: Node, maxlen: int | None, minid: int | None,
                          referenced: Callable[[int], bool] | None, removed: list[int]) -> bool:
        """_trim_inside without a reference walk (KEEPREF): only the live entries it may
        delete are read (an exact MAXLEN trim usually reads one), not the whole node."""
        sids: list[int] = []
        want = 0 if maxlen is None else self.length - maxlen
        if maxlen is not None and want <= 0:
            return True
        lp = node.lp
        if lp is None:
            lp = node.thaw()
        if maxlen is not None:
            pk.read_range(lp, node.master, 0, MAX_ID, want, False, sids)
        elif minid:  # (MINID 0: nothing is below it)
            pk.read_range(lp, node.master, 0, minid - 1, 0, False, sids)
        doomed = sids if referenced is None else [sid for sid in sids if not referenced(sid)]
        if doomed:
            pk.delete_many(lp, node.master, doomed)
            node.epoch = EPOCH.value
            node.live -= len(doomed)
            self.length -= len(doomed)
            removed += doomed
        # The threshold is reached inside this node unless every live entry went (or, for
        # MINID, every entry is below it: then the caller's eligibility test said so).
        if maxlen is not None:
            return self.length <= maxlen
        return node.last_id() >= minid  # type: ignore[operator]

    def remove_as_trim(self, sids: list[int]) -> None:
        """Remove these entries as trimming does (no max-deleted-ID change); for effects."""
        for sid in sids:
            self.delete(sid)
        self.refresh_first_id()

    def cold_counts(self) -> tuple[int, int, int]:
        """Nodes whose entries are in the snapshot only, their live entries and their
        listpack bytes."""
        home = self.home
        return (0, 0, 0) if home is None else (home.cold_nodes, home.cold_entries,
                                               home.cold_bytes)

    def resident_bytes(self) -> int:
        """Estimated memory of the resident nodes (residency.node_bytes each)."""
        return sum(node_bytes(node.count, len(node.lp)) for node in self.nodes
                   if node.lp is not None)

    def node_masters(self) -> list[int]:
        return list(self.masters)


def new_stream(residency: Residency) -> Stream:
    """An empty stream whose sealed nodes count against the engine's backlog budget (they go
    cold once a snapshot holds them)."""
    s = Stream()
    s.home = Home(s, None, 0, residency)
    return s


def rax_node_count(keys: list[int]) -> int:
    """Nodes of the radix tree Redis would build over these node keys (XINFO radix-tree-nodes).

    Keys are 16-byte big-endian IDs; the tree is the canonical compressed trie Redis's rax keeps:
    a compressed node per unbranched run, a branch node per divergence, a leaf per key.
    """
    raw = [k.to_bytes(16, "big") for k in sorted(keys)]
    if not raw:
        return 1

    def count(lo: int, hi: int, depth: int) -> int:
        if depth == 16:
            return 1
        first, last = raw[lo], raw[hi - 1]
        lcp = depth
        while lcp < 16 and first[lcp] == last[lcp]:
            lcp += 1
        if lcp > depth:
            return 1 + count(lo, hi, lcp)
        total = 1
        i = lo
        while i < hi:
            j = i
            byte = raw[i][depth]
            while j < hi and raw[j][depth] == byte:
                j += 1
            total += count(i, j, depth + 1)
            i = j
        return total

    return count(0, len(raw), 0)


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

VALUE_CLASS: Final = Stream
STORED_AS: Final[tuple[type, ...]] = ()
LIMITS: Final = None  # (stream-node-max-*: the engine's own fields, read by every XADD)
# A stream is stored in the snapshot's own tables (nodes, groups, PELs), digested and copied
# by the code that knows them (engine.model.digest, COPY through its DUMP payload).
to_bytes: Final = None
from_bytes: Final = None
copy_value: Final = None
digest: Final = None
min_subexpiry: Final = None
NODES: Final = None  # (a stream's nodes go cold through their own Home: engine.model.residency)
table_of: Final = None  # (no bucket table whose runs go cold)


def encoding(value: Stream) -> str:
    return "stream"


def memory_usage(stream: Stream) -> int:
    """A stream's nodes (resident and cold: MEMORY USAGE counts the value, wherever it lives),
    with their index, plus its groups' entries at a consumer group's per-entry cost."""
    total = sum(node_bytes(node.count, len(node.lp)) for node in stream.nodes
                if node.lp is not None)
    _cold_nodes, cold_entries, cold_bytes = stream.cold_counts()
    total += node_bytes(cold_entries, cold_bytes) if cold_bytes else 0
    for group in stream.groups.values():
        total += 64 + 48 * len(group.pel) + 64 * len(group.consumers)
    return total + 64


def opened(value: Stream) -> Stream:
    return value


__all__ = ["table_of", "LIMITS", "NODES", "STORED_AS", "VALUE_CLASS", "cold_node", "copy_value", "digest", "encoding",
           "Fields", "format_id", "from_bytes", "memory_usage", "min_subexpiry", "new_stream",
           "Node", "opened", "rax_node_count", "Stream", "to_bytes"]
