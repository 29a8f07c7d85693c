"""The stream data structure: entries in nodes, stream metadata, trimming.

Owns how entries are stored: nodes of at most `stream-node-max-entries` entries (and about
`stream-node-max-bytes` bytes, estimated with Redis's listpack encoding so that node boundaries and
therefore `~` trimming match Redis), indexed by their first ("master") ID for O(log n) seek and
O(1) append. Deleted entries stay as tombstones inside their node until the node empties, as in
Redis. A sealed node may be *cold* (`ColdNode`): its entries dropped from memory and read back
from the snapshot when touched; `engine.model.residency` decides which and when. Also owns the
stream metadata (last ID, first ID, max deleted ID, entries added). Consumer
groups hang off `Stream.groups` but are owned by `engine.groups`, idempotent producers' maps off
`Stream.idmp` (owned by `engine.model.idmp_maps`). Must not touch: argument parsing,
replies, effects.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import compress
from typing import TYPE_CHECKING

from streamkeep.engine.model.ids import MAX_ID, format_id, format_ids
from streamkeep.engine.model.listpack import entry_size, int_size, str_size
from streamkeep.engine.model.residency import EPOCH, Home, Residency, node_bytes
from streamkeep.engine.wire.reply import EntryArray

if TYPE_CHECKING:
    from streamkeep.engine.model.consumer_groups import ConsumerGroup
    from streamkeep.engine.model.idmp_maps import Idmp

# Flat (field1, value1, field2, value2, ...). A tuple on purpose: immutable, so replies can
# hand it out safely, and untracked by Python's cyclic GC, so millions of stored entries do
# not make every full collection slower.
Fields = tuple[bytes, ...]
LISTPACK_MAX_SIZE = 1 << 30
_U64 = (1 << 64) - 1


# Redis starts a new node when `listpack bytes + new element bytes >= stream-node-max-bytes`; to
# split nodes where Redis does, every entry's size in Redis's listpack encoding is counted
# (engine.model.listpack, a compiled kernel with a pure-Python reference).


class Node:
    """One listpack-equivalent: entries in ID order, tombstones as `None` fields.

    `epoch` is the change clock's value (residency.EPOCH) when its entries last changed (an
    append or a deletion), -1 for a node as a snapshot holds it.
    `home` is its stream's place in the current snapshot (None until a snapshot holds it), and
    `queued` says whether its residency may make it cold."""

    __slots__ = ("master", "master_ms", "master_seq", "single_field", "ids", "idbs", "fields",
                 "live", "master_fields", "fixed_bytes", "epoch", "home", "queued")

    def __init__(self, master: int, fields: Fields) -> None:
        self.master = master
        self.master_ms = master >> 64
        self.master_seq = master & _U64
        # The one field name when the master entry has exactly one (append's inline sizing).
        self.single_field = fields[0] if len(fields) == 2 else None
        self.ids: list[int] = []
        self.idbs: list[bytes] = []
        self.fields: list[Fields | None] = []
        self.live = 0
        self.master_fields = fields[0::2]
        # Listpack bytes except the live/deleted counters (whose encoded size varies).
        self.fixed_bytes = 7 + int_size(len(self.master_fields)) + 2
        self.fixed_bytes += sum(map(str_size, self.master_fields))
        self.epoch = EPOCH.value
        self.home: Home | None = None
        self.queued = False  # in its residency's queue (it may go cold)

    def is_cold(self) -> bool:
        return False

    def freeze(self) -> None:
        """Drop the entries from memory (residency.evict decides: only a sealed node its
        snapshot holds as it is). The class changes so that resident nodes pay nothing for
        the read-back: only a ColdNode has a `__getattr__`."""
        del self.ids, self.idbs, self.fields
        self.__class__ = ColdNode

    def lp_bytes(self) -> int:
        return self.fixed_bytes + int_size(self.live) + int_size(len(self.ids) - self.live)


class ColdNode(Node):
    """A node whose entries are in its snapshot only. Its master, counters and listpack size
    are kept; touching `ids`, `idbs` or `fields` reads the entries back (one LMDB read and a
    decode) and makes it an ordinary Node again."""

    __slots__ = ()

    def is_cold(self) -> bool:
        return True

    def __getattr__(self, name: str) -> object:
        # Called only for attributes not set: on a ColdNode, the three entry lists.
        if name not in _ENTRY_LISTS:
            raise AttributeError(name)
        self.thaw()
        return object.__getattribute__(self, name)

    def thaw(self) -> None:
        home = self.home
        assert home is not None and home.store is not None  # only a stored node goes cold
        self.ids, self.idbs, self.fields = home.store.load(home.number, self.master)
        self.__class__ = Node  # type: ignore[assignment]
        home.residency.loaded(self, home)


_ENTRY_LISTS = frozenset(("ids", "idbs", "fields"))


def cold_node(master: int, master_fields: tuple, size: int, live: int) -> ColdNode:
    """A node as its snapshot holds it, entries not loaded (a lazy load's; residency.bind
    gives it its home)."""
    node = ColdNode(master, tuple(x for name in master_fields for x in (name, b"")))
    del node.ids, node.idbs, node.fields  # (Node.__init__ made them empty)
    node.fixed_bytes = size
    node.live = live
    node.epoch = -1
    return node


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
        ms: int = -1, seq: int = 0,
    ) -> bytes:
        """Add an entry whose ID the caller validated (> last_id). Returns the formatted ID.
        A caller that has the ID's parts at hand passes them: `ms` (>= 0) and `seq`.

        XADD's hot path. The commonest entry (the master's one field, a short non-numeric
        value, small ID deltas) is sized inline: a call costs more than its arithmetic,
        compiled or not (measured). Any other takes engine.model.listpack's entry_size."""
        if type(fields) is not tuple:
            fields = tuple(fields)
        if not idb:  # callers holding the canonical `ms-seq` bytes pass them in
            idb = format_id(sid)
        if ms < 0:
            ms, seq = sid >> 64, sid & _U64
        nodes = self.nodes
        node = nodes[-1] if nodes else None
        if len(fields) == 2:
            f, v = fields
            vn = len(v)
            elen = len(f) + vn
        else:
            elen = sum(map(len, fields))
        # (20: an upper bound of the entry's other bytes, so lp_bytes is rarely needed)
        if (node is None or 0 < max_entries <= len(node.ids)
                or (node.fixed_bytes + 20 + elen >= max_bytes
                    and self._node_full(node, elen, max_bytes))):
            node = self._new_node(sid, fields)
        dms = ms - node.master_ms
        dseq = seq - node.master_seq
        if (len(fields) == 2 and 0 <= dms <= 127 and 0 <= dseq <= 127
                and f == node.single_field and vn < 63
                and (vn > 20 or (vn and not (47 < v[0] < 58 or v[0] == 45)))):
            # flags, both deltas and the element count: 2 bytes each; the value: length + 2
            node.fixed_bytes += 10 + vn
        else:
            node.fixed_bytes += entry_size(node.master_ms, node.master_seq, node.master_fields,
                                           ms, seq, fields)
        node.ids.append(sid)
        node.idbs.append(idb)
        node.fields.append(fields)
        node.live += 1
        node.epoch = EPOCH.value
        if not self.length:
            self.first_id = sid
        self.length += 1
        self.last_id = sid
        self.entries_added += 1
        return idb

    def restore_node(self, master: int, master_fields: tuple, size: int, ids: list[int],
                     fields: list | tuple, live: int, idbs: list[bytes] | None = None) -> None:
        """Append a node exactly as a snapshot recorded it (tombstones and listpack size
        included, so later appends and `~` trims split and cut where they did before). Stream
        metadata is restored separately by the loader. `idbs`, the IDs as `format_id` writes
        them, when the caller has them already (the RDB decoder makes them as it reads)."""
        node = Node(master, tuple(x for name in master_fields for x in (name, b"")))
        node.fixed_bytes = size
        node.ids = ids
        node.idbs = format_ids(ids) if idbs is None else idbs
        node.fields = list(fields)
        node.live = live
        node.epoch = -1
        node.home = self.home  # (a RESTOREd stream has one already; a loaded one gets it)
        self.nodes.append(node)
        self.masters.append(master)

    def restore_cold_node(self, node: ColdNode) -> None:
        """Append a node a lazy load left in its snapshot (see `cold_node`)."""
        self.nodes.append(node)
        self.masters.append(node.master)

    def _new_node(self, sid: int, fields: Fields) -> Node:
        node = Node(sid, fields)
        home = self.home
        if home is not None:
            node.home = home
            if self.nodes:  # the tail is sealed: its memory counts until it goes cold
                home.residency.sealed(self.nodes[-1], home)
        self.nodes.append(node)
        self.masters.append(sid)
        return node

    @staticmethod
    def _node_full(node: Node, element_bytes: int, max_bytes: int) -> bool:
        if max_bytes <= 0 or max_bytes > LISTPACK_MAX_SIZE:
            max_bytes = LISTPACK_MAX_SIZE
        return node.lp_bytes() + element_bytes >= max_bytes

    # --- lookup and iteration --------------------------------------------------------------

    def _node_index(self, sid: int) -> int:
        """Index of the node that would hold `sid` (the last node whose master <= sid)."""
        i = bisect_right(self.masters, sid) - 1
        return i if i > 0 else 0

    def get(self, sid: int) -> Fields | None:
        if not self.nodes:
            return None
        node = self.nodes[self._node_index(sid)]
        j = bisect_left(node.ids, sid)
        if j < len(node.ids) and node.ids[j] == sid:
            return node.fields[j]
        return None

    def __contains__(self, sid: int) -> bool:
        return self.get(sid) is not None

    def iter_forward(self, start: int, end: int) -> Iterator[tuple[int, bytes, Fields]]:
        """Live entries with start <= id <= end, ascending."""
        nodes = self.nodes
        if not nodes or start > end:
            return
        i = self._node_index(start)
        j = bisect_left(nodes[i].ids, start)
        while i < len(nodes):
            node = nodes[i]
            ids, fields = node.ids, node.fields
            for k in range(j, len(ids)):
                sid = ids[k]
                if sid > end:
                    return
                f = fields[k]
                if f is not None:
                    yield sid, node.idbs[k], f
            i += 1
            j = 0

    def iter_backward(self, start: int, end: int) -> Iterator[tuple[int, bytes, Fields]]:
        """Live entries with start <= id <= end, descending."""
        nodes = self.nodes
        if not nodes or start > end:
            return
        i = self._node_index(end)
        j = bisect_right(nodes[i].ids, end) - 1
        while i >= 0:
            node = nodes[i]
            ids, fields = node.ids, node.fields
            for k in range(j, -1, -1):
                sid = ids[k]
                if sid < start:
                    return
                f = fields[k]
                if f is not None:
                    yield sid, node.idbs[k], f
            i -= 1
            if i >= 0:
                j = len(nodes[i].ids) - 1

    def range(self, start: int, end: int, count: int = 0, rev: bool = False) -> EntryArray:
        """The entries from start to end as XRANGE replies them (reversed for XREVRANGE); count 0
        means no limit."""
        if not rev:
            return self._range_forward(start, end, count)
        out = EntryArray()
        ids, fields = out.ids, out.fields
        for _sid, idb, f in self.iter_backward(start, end):
            ids.append(idb)
            fields.append(f)
            if len(ids) == count:
                break
        return out

    def _range_forward(self, start: int, end: int, count: int) -> EntryArray:
        """range() ascending, by node slices: a node without tombstones is copied column by
        column, with no per-entry object built."""
        out = EntryArray()
        nodes = self.nodes
        if not nodes or start > end:
            return out
        ids, fields = out.ids, out.fields
        i = self._node_index(start)
        j = bisect_left(nodes[i].ids, start)
        while i < len(nodes):
            node = nodes[i]
            node_ids = node.ids
            stop = bisect_right(node_ids, end, j)
            if node.live == len(node_ids):
                ids += node.idbs[j:stop]
                fields += node.fields[j:stop]  # type: ignore[arg-type]  # no None: all live
            else:
                node_fields = node.fields[j:stop]
                live = [f is not None for f in node_fields]
                ids += compress(node.idbs[j:stop], live)
                fields += compress(node_fields, live)  # type: ignore[arg-type]
            if count and len(ids) >= count:
                del ids[count:]
                del fields[count:]
                break
            if stop < len(node_ids):
                break
            i += 1
            j = 0
        return out

    def first_entry_id(self, skip_tombstones: bool = True) -> int:
        """Redis's streamGetEdgeID(first): MAX_ID when there is no such entry."""
        if not self.nodes:
            return MAX_ID
        if not skip_tombstones:
            return self.nodes[0].ids[0]
        for _sid, _idb, _f in self.iter_forward(0, MAX_ID):
            return _sid
        return MAX_ID

    def last_entry_id(self) -> int:
        nodes = self.nodes
        if nodes and nodes[-1].fields and nodes[-1].fields[-1] is not None:
            return nodes[-1].ids[-1]  # the last entry is live: the common case, no scan
        for sid, _idb, _f in self.iter_backward(0, MAX_ID):
            return sid
        return 0

    # --- deletion and trimming --------------------------------------------------------------

    def delete(self, sid: int) -> bool:
        """XDEL one entry. Does not touch first_id / max_deleted_id (callers batch that)."""
        if not self.nodes:
            return False
        i = self._node_index(sid)
        node = self.nodes[i]
        j = bisect_left(node.ids, sid)
        if j == len(node.ids) or node.ids[j] != sid or node.fields[j] is None:
            return False
        node.fields[j] = None
        node.epoch = EPOCH.value
        node.live -= 1
        self.length -= 1
        if node.live == 0:
            del self.nodes[i]
            del self.masters[i]
        return True

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
        vetoes single entries, and every ID walked, tombstones too, is added to `walk_refs` so
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
                eligible = node.ids[-1] < minid  # type: ignore[operator]
            if keepref and eligible:
                removed.extend(s for s, f in zip(node.ids, node.fields, strict=True) if f is not None)
                self.length -= node.live
                del nodes[i]
                del masters[i]
                continue
            if approx and not eligible:
                break
            stopped = self._trim_inside(node, maxlen, minid, referenced, walk_refs, removed)
            # Redis frees the node only if it was eligible as a whole (a MINID node whose last
            # entry is a tombstone >= minid stays, empty, as with KEEPREF).
            if node.live == 0 and not keepref and eligible:
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
        """Tombstone entries of one node from its head; True when the threshold was reached."""
        for k, sid in enumerate(node.ids):
            if maxlen is not None:
                if self.length <= maxlen:
                    return True
            elif sid >= minid:  # type: ignore[operator]
                return True
            if node.fields[k] is None:
                if walk_refs is not None:
                    walk_refs.append(sid)
                continue
            if referenced is not None and referenced(sid):
                continue
            node.fields[k] = None
            node.epoch = EPOCH.value
            node.live -= 1
            self.length -= 1
            removed.append(sid)
            if walk_refs is not None:
                walk_refs.append(sid)
        return False

    def remove_as_trim(self, sids: list[int]) -> None:
        """Remove these entries as trimming does (no max-deleted-ID change); for effects."""
        for sid in sids:
            self.delete(sid)
        self.refresh_first_id()

    def iter_all_with_tombstones(self) -> Iterator[tuple[int, Fields | None]]:
        for node in self.nodes:
            yield from zip(node.ids, node.fields, strict=True)

    def cold_counts(self) -> tuple[int, int, int]:
        """Nodes whose entries are in the snapshot only, their live entries and their
        listpack bytes."""
        home = self.home
        return (0, 0, 0) if home is None else (home.cold_nodes, home.cold_entries,
                                               home.cold_bytes)

    def resident_bytes(self) -> int:
        """Estimated memory of the resident nodes' entries (residency.node_bytes each)."""
        return sum(node_bytes(len(node.ids), node.fixed_bytes) for node in self.nodes
                   if not node.is_cold())

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


__all__ = ["Stream", "new_stream", "Node", "ColdNode", "cold_node", "Fields", "rax_node_count", "format_id"]
