"""The LIST value: elements in Redis's two encodings, a listpack and a quicklist.

Owns one list's elements and the rules Redis (t_list.c and quicklist.c, 7.2+) applies to
them: which encoding holds it (`OBJECT ENCODING`: "listpack", "quicklist"), when it converts,
how a quicklist's nodes fill, and every read and change the list commands make (push and pop
at either end, index, range, set, insert, remove, trim, position search), with a compact
serialisation. Must not touch: argument parsing, replies, effects, the keyspace, events.

Encodings, as Redis keeps them:
- "listpack": the list is ONE node, a `bytearray` holding exactly Redis's listpack
  (engine.model.list_node), and the keyspace keeps that bytearray itself: a small list costs
  its bytes and nothing around them.
- "quicklist": a `QuickList`, a Python list of such nodes (head first) and the element count.
  A node fills as Redis's does (`list-max-listpack-size`: a negative fill caps a node's bytes
  at 4/8/16/32/64 KiB, a positive one its elements, under an 8 KiB safety limit), and an
  element bigger than a node may hold gets a node of its own (Redis's "plain" node). Push and
  pop at either end touch one node: O(1) however long the list is.
No element is ever a Python object while stored: a list of a million elements is a few
hundred bytearrays.

Cold nodes (a `backlog-memory` budget, engine.model.residency): a quicklist's node that the
current snapshot holds with exactly its bytes may be replaced in `QuickList.nodes` by its
placeholder, a `ColdValueNode` (where the snapshot holds it, its hash, bytes and elements);
residency decides which and when, between commands (a quicklist is a value kept as nodes:
`NODES`, the list's `residency.ValueNodes`). Every function here reads a node through
`_warm` (a change, a point read: the node is read back and stays) or `_peek` (a scan, a range:
read for the call only, the list keeps the placeholder), and counts or sizes a cold node from
its placeholder without reading it; the list's two ends are never cold but are read back if
they became ends while cold (a pop emptied their neighbour). `nodes_of` and `iter_nodes` hand
out every node resident (peeked): what reads a list's nodes outside this module (the snapshot
writer, RDB, DUMP) never sees a placeholder.

Conversions, as Redis makes them: a listpack becomes a quicklist when its bytes plus the
raw lengths of what is about to be added pass the node limit (growing); a quicklist of one
packed node becomes a listpack again when it is within half the limits (shrinking, after a
removal). A function that may convert returns the value the key holds afterwards: the caller
stores it when it is not the value it passed.

Indexes follow Redis: 0 is the head, -1 the tail; the commands normalise them before calling
here, and every function takes indexes already in range.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final

from streamkeep.engine.model.limits import Limits, Setting
from streamkeep.engine.model.list_node import (
    node_count,
    node_get,
    node_matches,
    node_new,
    node_pop,
    node_push,
    node_range,
    node_splice,
)
from streamkeep.engine.model.redis_alloc import jemalloc_size
from streamkeep.engine.model.residency import ColdValueNode, ValueNodes, ValueNodesHome

LISTPACK: Final = "listpack"
QUICKLIST: Final = "quicklist"

FORMAT_VERSION: Final = 1  # to_bytes's first byte
_KIND_LISTPACK: Final = 0
_KIND_QUICKLIST: Final = 1

_OPTIMIZATION_LEVEL: Final = (4096, 8192, 16384, 32768, 65536)
_SIZE_SAFETY_LIMIT: Final = 8192
_SIZE_ESTIMATE_OVERHEAD: Final = 8
_FILL_MAX: Final = (1 << 15) - 1
_NO_LIMIT: Final = 1 << 62
INT_MAX: Final = (1 << 31) - 1  # list-max-listpack-size's bounds (a C int)

# Redis's allocations, for MEMORY USAGE (objectComputeSize).
_OBJECT: Final = 16
_QUICKLIST: Final = 40
_QUICKLIST_NODE: Final = 32

# Kernels the per-command paths call, bound once (mypyc reads a Final from a static).
_NODE_PUSH: Final = node_push
_NODE_POP: Final = node_pop
_NODE_COUNT: Final = node_count


class ListLimits(Limits):
    """list-max-listpack-size (`fill`) and list-compress-depth; shared by the lists of one
    engine and changed in place on CONFIG SET (engine.model.limits), as Redis reads its
    globals. (The compress depth is kept and reported; nodes are never compressed in memory.)
    The node limits the fill gives are worked out once, when it is set (`set_fill`): every push
    reads them."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting("list-max-listpack-size", "fill", "int", -2,
                "a list node's bytes (-1..-5: 4, 8, 16, 32, 64 KiB) or elements (> 0) at most",
                lo=-INT_MAX - 1, hi=INT_MAX, alias="list-max-ziplist-size"),
        Setting("list-compress-depth", "compress_depth", "int", 0,
                "list nodes kept uncompressed at each end (accepted; nodes are never "
                "compressed in memory)", hi=INT_MAX),
    )

    def __init__(self, fill: int = -2, compress_depth: int = 0) -> None:
        self.compress_depth = compress_depth
        self.fill = fill
        self.size_limit = _NO_LIMIT
        self.count_limit = _NO_LIMIT
        self.large_limit = _SIZE_SAFETY_LIMIT
        self.set_fill(fill)

    def set_fill(self, fill: int) -> None:
        """quicklistNodeLimit's bytes or elements for `fill`, and isLargeElement's bound."""
        self.fill = fill
        if fill >= 0:
            self.size_limit = _NO_LIMIT
            self.count_limit = 1 if fill == 0 else min(fill, _FILL_MAX)
            self.large_limit = _SIZE_SAFETY_LIMIT
        else:
            level = min(-fill - 1, len(_OPTIMIZATION_LEVEL) - 1)
            self.size_limit = self.large_limit = _OPTIMIZATION_LEVEL[level]
            self.count_limit = _NO_LIMIT

    def apply(self, config: Mapping[str, Any]) -> None:
        self.set_fill(int(config["list-max-listpack-size"]))
        self.compress_depth = int(config["list-compress-depth"])

    def node_limits(self) -> tuple[int, int]:
        """quicklistNodeLimit: (bytes, elements) a node may hold; one of them unbounded."""
        return self.size_limit, self.count_limit

    def exceeds(self, size: int, count: int) -> bool:
        """quicklistNodeExceedsLimit: would a node of `size` bytes and `count` elements be
        past the limit?"""
        if self.size_limit != _NO_LIMIT:
            return size > self.size_limit
        return size > _SIZE_SAFETY_LIMIT or count > self.count_limit

    def is_large(self, size: int) -> bool:
        """isLargeElement: an element of `size` bytes gets a node of its own."""
        return size > self.large_limit

    def allows_insert(self, node: bytearray, size: int) -> bool:
        """_quicklistNodeAllowInsert: may an element of `size` bytes join `node`? (A plain
        node is longer than any limit: the size test refuses it.)"""
        if size > self.large_limit:
            return False
        new_size = len(node) + size + _SIZE_ESTIMATE_OVERHEAD
        if self.size_limit != _NO_LIMIT:
            return new_size <= self.size_limit
        return new_size <= _SIZE_SAFETY_LIMIT and _NODE_COUNT(node) < self.count_limit

    def is_plain(self, node: bytearray) -> bool:
        """A node holding one element too large for a packed node (Redis's plain node)."""
        return (len(node) > self.large_limit and _NODE_COUNT(node) == 1
                and self.is_large(len(node_get(node, 0))))


DEFAULT_LIMITS: Final = ListLimits()


ListNode = bytearray | ColdValueNode


class QuickList:
    """A list in the quicklist encoding: its nodes, head first (a cold one is its placeholder),
    its element count, and its place in the current snapshot (`home`, residency.ValueNodesHome:
    None until a snapshot with its nodes' index holds it)."""

    __slots__ = ("nodes", "count", "home")

    def __init__(self, nodes: list[ListNode], count: int) -> None:
        self.nodes = nodes
        self.count = count
        self.home: ValueNodesHome | None = None

    def __len__(self) -> int:
        return self.count


ListValue = bytearray | QuickList


# --- reading -------------------------------------------------------------------------------------


def length(value: ListValue) -> int:
    """LLEN."""
    if isinstance(value, QuickList):
        return value.count
    return _NODE_COUNT(value)


def encoding(value: ListValue) -> str:
    """OBJECT ENCODING."""
    return QUICKLIST if isinstance(value, QuickList) else LISTPACK


def nodes_of(value: ListValue) -> list[bytearray]:
    """The value's nodes, head first (a listpack is its one node), every one resident: a cold
    one read for the caller (the list keeps its placeholder)."""
    if not isinstance(value, QuickList):
        return [value]
    return [_peek(value, node) for node in value.nodes]


def iter_nodes(value: ListValue) -> Iterator[bytearray]:
    """`nodes_of` one node at a time (a cold one read when reached)."""
    if not isinstance(value, QuickList):
        yield value
        return
    for node in value.nodes:
        yield _peek(value, node)


def _count(node: ListNode) -> int:
    """A node's elements, a cold one's from its placeholder."""
    return _NODE_COUNT(node) if isinstance(node, bytearray) else node.count


def _size(node: ListNode) -> int:
    """A node's listpack bytes, a cold one's from its placeholder."""
    return len(node) if isinstance(node, bytearray) else node.size


def _warm(value: QuickList, n: int) -> bytearray:
    """Node `n`, read back first if it is cold (it stays resident: a change or a point read
    goes on with it)."""
    node = value.nodes[n]
    if isinstance(node, bytearray):
        return node
    return _install(value, n, node.read(), node)


def _install(value: QuickList, n: int, lp: bytearray, cold: ColdValueNode) -> bytearray:
    """Cold node `n`'s bytes, `lp` (read back), in its place: resident from now on."""
    value.nodes[n] = lp
    home = value.home
    if home is not None:
        home.loaded(lp, n, cold)
    return lp


def _peek(value: QuickList, node: ListNode, counted: bool = True) -> bytearray:
    """The node's bytes, a cold one's read for this call only (it stays cold: a scan reads
    each node once). Not `counted`: the caller counts it, or installs it (`_install`)."""
    if isinstance(node, bytearray):
        return node
    if counted:
        home = value.home
        if home is not None:
            home.residency.loads += 1
    return node.read()


def _scanned(value: QuickList, n: int, held: ListNode, lp: bytearray, keep: bool) -> bytearray:
    """A scan read node `n` (`held`) as `lp`, uncounted: kept in its place (`keep`: the
    scan changes it) or counted as a read."""
    if isinstance(held, bytearray):
        return held
    if keep:
        return _install(value, n, lp, held)
    home = value.home
    if home is not None:
        home.residency.loads += 1
    return lp


def _left(value: QuickList, held: ListNode) -> None:
    """Node `held` left the list (emptied, deleted, or replaced by the nodes it was split
    into): its home told, so that the backlog's queue lets go of a resident one and a cold
    one's counters drop."""
    home = value.home
    if home is None:
        return
    if isinstance(held, bytearray):
        home.left(held)
    else:
        home.dropped(held)


def _locate(nodes: list[ListNode], index: int, total: int) -> tuple[int, int]:
    """(node number, index inside it) of element `index` (0 <= index < total), walked from
    the nearer end."""
    if index < total // 2:
        for n, node in enumerate(nodes):
            count = _count(node)
            if index < count:
                return n, index
            index -= count
    else:
        back = total - index  # 1-based from the tail
        for n in range(len(nodes) - 1, -1, -1):
            count = _count(nodes[n])
            if back <= count:
                return n, count - back
            back -= count
    raise IndexError(index)


def get(value: ListValue, index: int) -> bytes | None:
    """LINDEX: the element at `index` (negative from the tail), None out of range."""
    total = length(value)
    if index < 0:
        index += total
    if not 0 <= index < total:
        return None
    if not isinstance(value, QuickList):
        return node_get(value, index)
    n, i = _locate(value.nodes, index, total)
    return node_get(_warm(value, n), i)


def range_of(value: ListValue, start: int, stop: int, budget: int = 0) -> list[bytes] | None:
    """The elements at [start, stop) head to tail (0 <= start <= stop <= length). With a
    `budget` (bytes; 0: none), None once the nodes read hold more than that: a reply that
    could not be sent is not built whole (each node read counts its listpack's bytes, about
    what its elements take as RESP)."""
    if not isinstance(value, QuickList):
        if budget and len(value) > budget:
            return None
        return node_range(value, start, stop)
    out: list[bytes] = []
    if start >= stop:
        return out
    nodes = value.nodes
    n, i = _locate(nodes, start, value.count)
    left = stop - start
    spent = 0
    while left > 0:
        held = nodes[n]
        spent += _size(held)
        if budget and spent > budget:
            return None
        node = _peek(value, held)
        take = min(_NODE_COUNT(node) - i, left)
        out.extend(node_range(node, i, i + take))
        left -= take
        n += 1
        i = 0
    return out


def read_range(value: ListValue, start: int, stop: int) -> list[bytes]:
    """`range_of` without a budget."""
    items = range_of(value, start, stop)
    assert items is not None
    return items


def elements(value: ListValue) -> Iterator[bytes]:
    """Every element, head to tail, a node at a time."""
    for node in iter_nodes(value):
        yield from node_range(node, 0, _NODE_COUNT(node))


def positions(value: ListValue, element: bytes, rank: int, count: int, maxlen: int) -> list[int]:
    """LPOS: the indexes of the matches of `element`, from the head (rank > 0) or the tail
    (rank < 0), skipping the first |rank| - 1 matches, at most `count` of them (0: all),
    among the first `maxlen` elements scanned (0: all). Linear in what it scans."""
    total = length(value)
    nodes: list[ListNode] = value.nodes if isinstance(value, QuickList) else [value]
    skip = abs(rank) - 1
    scan = total if maxlen == 0 else min(maxlen, total)
    out: list[int] = []
    order = range(len(nodes)) if rank > 0 else range(len(nodes) - 1, -1, -1)
    base = 0 if rank > 0 else total
    for n in order:
        held = nodes[n]
        node_len = _count(held)
        if rank < 0:
            base -= node_len
        matches = node_matches(_peek(value, held) if isinstance(value, QuickList)
                               else value, element)
        if rank < 0:
            matches.reverse()
        for i in matches:
            at = base + i
            scanned = at + 1 if rank > 0 else total - at
            if scanned > scan:
                return out
            if skip:
                skip -= 1
                continue
            out.append(at)
            if count and len(out) >= count:
                return out
        if rank > 0:
            base += node_len
            if base >= scan:
                return out
        elif total - base >= scan:
            return out
    return out


# --- making --------------------------------------------------------------------------------------


def new_list() -> bytearray:
    """An empty list in the listpack encoding (createListListpackObject)."""
    return node_new(())


def from_elements(items: Iterable[bytes], limits: ListLimits = DEFAULT_LIMITS) -> ListValue:
    """A list holding `items` in order, in the encoding Redis would give it (nodes filled as
    pushes at the tail fill them)."""
    value: ListValue = new_list()
    batch: list[bytes] = []
    for item in items:
        batch.append(item)
        if len(batch) >= 1024:
            value = push(value, batch, True, limits)
            batch = []
    if batch:
        value = push(value, batch, True, limits)
    return value


def from_nodes(nodes: list[bytearray], limits: ListLimits = DEFAULT_LIMITS) -> ListValue:
    """A list made of these nodes as they are (a loaded quicklist keeps its nodes, as Redis's
    RDB load does), then converted as Redis converts a loaded list (a lone small node is a
    listpack)."""
    held: list[ListNode] = [node for node in nodes if _NODE_COUNT(node)]
    if not held:
        return new_list()
    value = QuickList(held, sum(map(_count, held)))
    return shrink(value, limits, shrinking=False)


def copy_value(value: ListValue) -> ListValue:
    """COPY's copy, sharing no resident node (a cold node's placeholder is shared: it is
    immutable)."""
    if isinstance(value, QuickList):
        out = QuickList([bytearray(node) if isinstance(node, bytearray) else node
                         for node in value.nodes], value.count)
        home = value.home
        if home is not None:
            out.home = home.copy_for(out)
        return out
    return bytearray(value)


# --- conversions ---------------------------------------------------------------------------------


def grow(value: ListValue, added: Sequence[bytes], limits: ListLimits) -> ListValue:
    """listTypeTryConversionAppend: a listpack about to receive `added` becomes a quicklist
    when its bytes plus their lengths pass the node limit."""
    if isinstance(value, QuickList):
        return value
    add_bytes = 0
    for item in added:
        add_bytes += len(item)
    if limits.exceeds(len(value) + add_bytes, _NODE_COUNT(value) + len(added)):
        count = _NODE_COUNT(value)
        return QuickList([value] if count else [], count)
    return value


def shrink(value: ListValue, limits: ListLimits, shrinking: bool = True) -> ListValue:
    """listTypeTryConvertQuicklist: a quicklist of one packed node within the limits (half of
    them when `shrinking`) becomes that node, a listpack."""
    if not isinstance(value, QuickList) or len(value.nodes) != 1:
        return value
    node = _warm(value, 0)
    if limits.is_plain(node):
        return value
    size_limit, count_limit = limits.node_limits()
    if shrinking:
        size_limit //= 2
        count_limit //= 2
    if len(node) > size_limit or value.count > count_limit:
        return value
    return node


# --- changing ------------------------------------------------------------------------------------


def push(value: ListValue, items: Sequence[bytes], tail: bool, limits: ListLimits) -> ListValue:
    """LPUSH/RPUSH `items` one after the other; the value the key holds afterwards."""
    value = grow(value, items, limits)
    if not isinstance(value, QuickList):
        for item in items:
            _NODE_PUSH(value, item, tail)
        return value
    nodes = value.nodes
    for item in items:
        size = len(item)
        if nodes:
            end = nodes[-1] if tail else nodes[0]
            if not isinstance(end, bytearray):  # (an end gone cold: its neighbour emptied)
                end = _warm(value, len(nodes) - 1 if tail else 0)
            if limits.allows_insert(end, size):
                _NODE_PUSH(end, item, tail)
                continue
        node = node_new((item,))
        if tail:
            nodes.append(node)
        else:
            nodes.insert(0, node)
        home = value.home
        if home is not None and len(nodes) > 2:  # the end it replaced may go cold one day
            at = len(nodes) - 2 if tail else 1
            sealed = nodes[at]
            if isinstance(sealed, bytearray):
                home.sealed(sealed, at)
    value.count += len(items)
    return value


def pop(value: ListValue, tail: bool) -> bytes:
    """Remove and return one element from the tail (True) or the head; the list is not empty.
    (The caller deletes an emptied key, or calls `shrink`.)"""
    if not isinstance(value, QuickList):
        return _NODE_POP(value, tail)
    nodes = value.nodes
    at = len(nodes) - 1 if tail else 0
    node = nodes[at]
    if not isinstance(node, bytearray):  # (an end gone cold: its neighbour emptied)
        node = _warm(value, at)
    item = _NODE_POP(node, tail)
    if not _NODE_COUNT(node):
        del nodes[at]
        _left(value, node)
    value.count -= 1
    return item


def pop_many(value: ListValue, count: int, tail: bool) -> list[bytes]:
    """Remove up to `count` elements from one end: in the order they were popped (the tail's
    pops last element first)."""
    total = length(value)
    count = min(count, total)
    if tail:
        items = read_range(value, total - count, total)
        items.reverse()
        delete_range(value, total - count, total)
    else:
        items = read_range(value, 0, count)
        delete_range(value, 0, count)
    return items


def delete_range(value: ListValue, start: int, stop: int) -> None:
    """Remove the elements at [start, stop) (quicklistDelRange: emptied nodes go)."""
    if start >= stop:
        return
    if not isinstance(value, QuickList):
        node_splice(value, start, stop, ())
        return
    nodes = value.nodes
    first = 0
    n = 0
    while n < len(nodes) and start - first >= _count(nodes[n]):
        first += _count(nodes[n])
        n += 1
    left = stop - start
    value.count -= left
    i = start - first
    while left > 0:
        held = nodes[n]
        node_len = _count(held)
        take = min(node_len - i, left)
        left -= take
        if take == node_len:
            del nodes[n]
            _left(value, held)
        else:
            node_splice(_warm(value, n), i, i + take, ())
            n += 1
        i = 0


def set_at(value: ListValue, index: int, item: bytes, limits: ListLimits) -> bool:
    """LSET's replacement at `index` (0 <= index < length): True. (The caller grows before,
    shrinks after.) A quicklist's node that would pass its limit gives the element a node of
    its own, as quicklistReplaceEntry does."""
    if not isinstance(value, QuickList):
        node_splice(value, index, index + 1, (item,))
        return True
    nodes = value.nodes
    n, i = _locate(nodes, index, value.count)
    node = _warm(value, n)
    node_splice(node, i, i + 1, (item,))
    if _NODE_COUNT(node) > 1 and limits.exceeds(len(node), _NODE_COUNT(node)):
        _split_out(nodes, n, i)
        _left(value, node)
    return True


def _split_out(nodes: list[ListNode], n: int, i: int) -> None:
    """Node `n`'s element `i` (node `n` resident) moved to a node of its own between the
    elements before and after it."""
    node = nodes[n]
    assert isinstance(node, bytearray)
    count = _NODE_COUNT(node)
    parts = [node_range(node, 0, i), node_range(node, i, i + 1),
             node_range(node, i + 1, count)]
    nodes[n:n + 1] = [node_new(part) for part in parts if part]


def insert(value: ListValue, pivot: bytes, item: bytes, after: bool,
           limits: ListLimits) -> int:
    """LINSERT: `item` before or after the first element equal to `pivot`, head first; the
    index it was inserted at, -1 when no element is the pivot. (The caller grows first.)"""
    if not isinstance(value, QuickList):
        found = node_matches(value, pivot)
        if not found:
            return -1
        i = found[0] + (1 if after else 0)
        node_splice(value, i, i, (item,))
        return i
    base = 0
    for n, held in enumerate(value.nodes):
        lp = _peek(value, held, counted=False)
        found = node_matches(lp, pivot)
        _scanned(value, n, held, lp, bool(found))
        if found:
            i = found[0] + (1 if after else 0)
            _insert_in(value, n, i, item, limits)
            return base + i
        base += _count(held)
    return -1


def _insert_in(value: QuickList, n: int, i: int, item: bytes, limits: ListLimits) -> None:
    """`item` at index `i` of node `n` (_quicklistInsert, without its merges: a full node's
    neighbour takes it at its near end, else the node is split there)."""
    nodes = value.nodes
    node = _warm(value, n)
    value.count += 1
    size = len(item)
    count = _NODE_COUNT(node)
    if limits.allows_insert(node, size):
        node_splice(node, i, i, (item,))
        return
    if i == count and n + 1 < len(nodes) and limits.allows_insert(_warm(value, n + 1), size):
        node_push(_warm(value, n + 1), item, False)
        return
    if i == 0 and n > 0 and limits.allows_insert(_warm(value, n - 1), size):
        node_push(_warm(value, n - 1), item, True)
        return
    before, after = node_range(node, 0, i), node_range(node, i, count)
    parts = [before, [item], after]
    nodes[n:n + 1] = [node_new(part) for part in parts if part]
    _left(value, node)


def remove(value: ListValue, item: bytes, count: int) -> int:
    """LREM: remove up to |count| elements equal to `item`, from the head (count > 0), the
    tail (count < 0) or all of them (0); how many went. Each node is scanned once (a cold one
    read for the scan, and kept only if it had a match)."""
    nodes: list[ListNode] = value.nodes if isinstance(value, QuickList) else [value]
    want = abs(count)
    removed = 0
    order = list(range(len(nodes))) if count >= 0 else list(range(len(nodes) - 1, -1, -1))
    emptied: list[int] = []
    for n in order:
        held = nodes[n]
        if isinstance(held, bytearray):
            node = held
            matches = node_matches(node, item)
        else:  # (a cold node is read for the scan, and stays read if it is changed)
            assert isinstance(value, QuickList)
            node = _peek(value, held, counted=False)
            matches = node_matches(node, item)
            node = _scanned(value, n, held, node, bool(matches))
        if not matches:
            continue
        if want:
            left = want - removed
            matches = matches[:left] if count >= 0 else matches[-left:]
        if len(matches) == 1:
            node_splice(node, matches[0], matches[0] + 1, ())
        else:  # (one rebuild, not a splice per match: linear in the node)
            drop = set(matches)
            kept = [e for j, e in enumerate(node_range(node, 0, _NODE_COUNT(node)))
                    if j not in drop]
            node[:] = node_new(kept)
        removed += len(matches)
        if not _NODE_COUNT(node):
            emptied.append(n)
        if want and removed >= want:
            break
    if isinstance(value, QuickList):
        for n in sorted(emptied, reverse=True):
            _left(value, value.nodes.pop(n))
        value.count -= removed
    return removed


def trim(value: ListValue, ltrim: int, rtrim: int) -> None:
    """LTRIM: drop `ltrim` elements from the head and `rtrim` from the tail."""
    total = length(value)
    delete_range(value, 0, min(ltrim, total))
    total = length(value)
    delete_range(value, total - min(rtrim, total), total)


# --- size and serialisation ----------------------------------------------------------------------


def memory_usage(value: ListValue, samples: int = 5) -> int:
    """MEMORY USAGE's part for the value, as objectComputeSize estimates it: the object and
    the listpack's allocation; for a quicklist its header and the average of the first
    `samples` nodes (a node and its listpack's allocation) times the node count."""
    if not isinstance(value, QuickList):
        return _OBJECT + jemalloc_size(len(value))
    nodes = value.nodes
    sampled = nodes[:max(samples, 1)]
    if not sampled:
        return _OBJECT + _QUICKLIST
    size = sum(_QUICKLIST_NODE + jemalloc_size(_size(node)) for node in sampled)
    return _OBJECT + _QUICKLIST + int(size / len(sampled) * len(nodes))


def to_bytes(value: ListValue) -> bytes:
    """The snapshot's serialisation: version, encoding, then each node's length (u32 LE) and
    bytes."""
    kind = _KIND_QUICKLIST if isinstance(value, QuickList) else _KIND_LISTPACK
    parts = [bytes((FORMAT_VERSION, kind))]
    for node in iter_nodes(value):
        parts.append(struct.pack("<I", len(node)))
        parts.append(bytes(node))
    return b"".join(parts)


def from_bytes(data: bytes, limits: ListLimits = DEFAULT_LIMITS) -> ListValue:
    """`to_bytes`'s value back, in the encoding it was written in (ValueError for another
    format version)."""
    if not data or data[0] != FORMAT_VERSION:
        raise ValueError("unknown list serialisation")
    kind = data[1]
    nodes: list[bytearray] = []
    pos = 2
    while pos < len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        nodes.append(bytearray(data[pos + 4:pos + 4 + size]))
        pos += 4 + size
    if kind == _KIND_LISTPACK:
        return nodes[0] if nodes else new_list()
    held: list[ListNode] = list(nodes)
    return QuickList(held, sum(map(_count, held)))


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

VALUE_CLASS: Final = QuickList
STORED_AS: Final[tuple[type, ...]] = (bytearray,)  # a small list, kept bare as its listpack
LIMITS: Final = ListLimits
min_subexpiry: Final = None  # (a list's elements have no TTLs)
# A quicklist's nodes may go cold (engine.model.residency): what the residency, the snapshot
# and INFO need of them. A node's shape follows list-max-listpack-size.
NODES: Final = ValueNodes(QuickList, node_count, iter_nodes, QuickList,
                          shaped_by=("list-max-listpack-size",))
table_of: Final = None  # (no bucket table whose runs go cold)


def opened(value: ListValue) -> QuickList:
    """A list as a QuickList (a listpack, kept bare in the keyspace as its bytearray, wrapped
    as one node: `len` counts elements)."""
    return value if isinstance(value, QuickList) else QuickList([value], node_count(value))


def digest(value: ListValue) -> list[bytes]:
    """The elements, in order."""
    return list(elements(value))


__all__ = ["table_of", "DEFAULT_LIMITS", "LIMITS", "LISTPACK", "NODES", "QUICKLIST", "STORED_AS", "VALUE_CLASS",
           "copy_value", "delete_range", "digest", "elements", "encoding",
           "from_bytes", "from_elements", "from_nodes", "get", "grow", "insert", "iter_nodes",
           "length", "ListLimits", "ListNode", "ListValue", "memory_usage", "min_subexpiry",
           "new_list", "nodes_of", "opened", "pop", "pop_many", "positions", "push", "QuickList",
           "range_of", "read_range", "remove", "set_at", "shrink", "to_bytes", "trim"]
