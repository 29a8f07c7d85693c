"""Big values in a snapshot: a sorted set, hash, set or list stored as chunk rows, not one row.

Owns when a value of a type other than stream and string is chunked (`is_chunked`: more than
CHUNKED_ELEMENTS elements, or a MEMORY USAGE estimate past CHUNKED_BYTES), how its elements
are cut into chunks (`chunk_bodies`: CHUNK_ELEMENTS elements or about CHUNK_BYTES a chunk, in
the type's own order) and what a chunk's body holds, how a value is built back from its
chunks (`build_value`), and `ValueHomes`, a compaction child's record of where each chunked
value it loaded or wrote is, so that a value nothing changed since is referred to where it is
instead of written again (as an unchanged stream node is). A writer or a reader holds one
chunk at a time, never the value's whole serialisation. A list's home keeps each of its
chunks' nodes (their identities and hashes, `StoredChunk`): a list that changed (a queue's
pushes and pops) refers to the chunks whose nodes are all still its own, unchanged and in
order (`plan_list`), and only its other nodes are cut into new chunks (`planned_chunks`); a
keys row of such a list lists runs of chunks (snapshot.layout's second form), and its chunks'
stored first indexes are not relied on (indexes are counted from the order).

A chunk's body is msgpack, elements in the value's order:
    zset  [members (array of bin), scores (bin: little-endian doubles, one per member)]
          ascending by (score, member), across the chunks too
    hash  [fields (array of bin), values (array of bin), TTLs (array of [index, ms])]
          the pairs in the hash's iteration order; a field with a TTL named by its index in
          the chunk, its absolute expiry time in ms
    set   [members (array of bin)]  in the set's iteration order
    list  [index of its first element (int), nodes (array of bin)]
          the list's nodes, head first, each the listpack the list holds (a chunk ends at a
          node's end: CHUNK_ELEMENTS or CHUNK_BYTES reached, a node past them alone); a node
          read back is checked as an RDB's is (snapshot.rdb_list.node_from_listpack) before
          the list adopts it

Must not touch: files (the writer and the reader open LMDB), the keys row's own layout
(snapshot.layout), the models' internals (their public methods only).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, chain, islice
from typing import Any

import msgpack
import xxhash

from streamkeep.engine.model import lists
from streamkeep.engine.model.hashes import Hash
from streamkeep.engine.model.list_node import node_count, node_range
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.value_types import HASH, LIST, SET, ZSET, ValueType
from streamkeep.engine.model.zset import ZSet

CHUNK_ELEMENTS = 4096  # elements a chunk holds at most
CHUNK_BYTES = 64 << 10  # a chunk is cut once its elements' bytes reach this
CHUNKED_ELEMENTS = 8192  # a value of more elements is chunked
CHUNKED_BYTES = 1 << 20  # so is one whose MEMORY USAGE estimate is past this
CHUNKED_TYPES = (ZSET.name, HASH.name, SET.name, LIST.name)

_BIG_ENDIAN = sys.byteorder == "big"
_packb = msgpack.Packer(use_bin_type=True).pack
_node_hash = xxhash.xxh3_64_intdigest


def is_chunked(vt: ValueType, value: Any) -> bool:
    """Whether the snapshot stores `value` (of type `vt`) as chunk rows."""
    if vt.name not in CHUNKED_TYPES:
        return False
    value = vt.open(value)  # (a small hash or list kept bare: its Hash, its QuickList)
    count = len(value)
    if count > CHUNKED_ELEMENTS:
        return True
    # (The estimate samples a big encoding's first elements: O(1) there; a small encoding
    # walks its few hundred elements at most.)
    return count > 1 and vt.memory_usage(value) > CHUNKED_BYTES


# --- writing ---------------------------------------------------------------------------------

Columns = tuple[list, ...]  # a batch of elements, a list per column (see the module docstring)


def _batches(type_name: str, value: Any) -> Iterator[Columns]:
    """The value's elements in its own order, CHUNK_ELEMENTS at a time, as columns: a sorted
    set's members and scores, a hash's fields, values and expiry times (None: no TTL), a set's
    members. (Batches and columns keep the per-element work in C: a 1M-member value is cut in
    about the time its iteration takes.)"""
    if type_name == ZSET.name:
        for first in range(0, len(value), CHUNK_ELEMENTS):
            members, scores = value.columns(first, first + CHUNK_ELEMENTS)
            yield members, scores
    elif type_name == SET.name:
        members = chain.from_iterable(_pages(value))
        while batch := list(islice(members, CHUNK_ELEMENTS)):
            yield (batch,)
    else:
        value = HASH.open(value)  # (a small hash kept bare, as its pack: its Hash)
        expiry = value.field_expiry if value.has_field_expiry() else None
        pairs = chain.from_iterable(_pages(value))
        while batch := list(islice(pairs, CHUNK_ELEMENTS)):
            fields, data = zip(*batch, strict=True)
            yield (list(fields), list(data),
                   [None] * len(fields) if expiry is None else [expiry(f) for f in fields])


def _pages(value: Hash | RSet) -> Iterator[list]:
    """A hash's pairs or a set's members in its iteration order, a scan step at a time (a
    hashtable's buckets, a pack each; a small value's whole pack at once)."""
    cursor = 0
    while True:
        cursor, pairs = value.scan(cursor, CHUNK_ELEMENTS)
        yield pairs
        if not cursor:
            return


def _sizes(type_name: str, columns: Columns) -> list[int]:
    """Each element's bytes, as a chunk's CHUNK_BYTES counts them."""
    if type_name == ZSET.name:
        return [n + 8 for n in map(len, columns[0])]
    if type_name == SET.name:
        return list(map(len, columns[0]))
    return [a + b for a, b in zip(map(len, columns[0]), map(len, columns[1]), strict=True)]


def _cut(type_name: str, columns: Columns) -> Iterator[Columns]:
    """A batch in chunks of about CHUNK_BYTES at most (an element past it alone)."""
    reached = list(accumulate(_sizes(type_name, columns)))
    count, start = len(reached), 0
    while start < count:
        before = reached[start - 1] if start else 0
        end = min(max(bisect_left(reached, before + CHUNK_BYTES, start) + 1, start + 1), count)
        yield tuple(column[start:end] for column in columns) if (start, end) != (0, count) \
            else columns
        start = end


def _body(type_name: str, columns: Columns) -> bytes:
    if type_name == ZSET.name:
        scores = array("d", columns[1])
        if _BIG_ENDIAN:
            scores.byteswap()
        return _packb([columns[0], scores.tobytes()])
    if type_name == SET.name:
        return _packb([columns[0]])
    ttls = [[i, when] for i, when in enumerate(columns[2]) if when is not None]
    return _packb([columns[0], columns[1], ttls])


def node_bodies(nodes: Iterable[bytearray], first: int = 0
                ) -> Iterator[tuple[bytes, int, list[bytearray]]]:
    """List chunks of `nodes` as they are, the first at list index `first`: (body, elements,
    its nodes) each, a chunk ending at the node that reaches CHUNK_ELEMENTS or CHUNK_BYTES (a
    node past them alone)."""
    count = size = 0
    batch: list[bytearray] = []
    for node in nodes:
        n = node_count(node)
        if batch and (count + n > CHUNK_ELEMENTS or size + len(node) > CHUNK_BYTES):
            yield _packb([first, [bytes(x) for x in batch]]), count, batch
            first += count
            batch, count, size = [], 0, 0
        batch.append(node)
        count += n
        size += len(node)
    if batch:
        yield _packb([first, [bytes(x) for x in batch]]), count, batch


def chunk_bodies(type_name: str, value: Any) -> Iterator[tuple[bytes, int]]:
    """(body, elements) of each chunk of `value`, in order: CHUNK_ELEMENTS elements or about
    CHUNK_BYTES each (one chunk built at a time)."""
    if type_name == LIST.name:
        for body, count, _nodes in node_bodies(lists.iter_nodes(value)):
            yield body, count
        return
    for batch in _batches(type_name, value):
        for columns in _cut(type_name, batch):
            yield _body(type_name, columns), len(columns[0])


# --- reading ---------------------------------------------------------------------------------

def _unpack(body: bytes | memoryview) -> list:
    doc = msgpack.unpackb(body, raw=True, use_list=True)
    if not isinstance(doc, list):
        raise ValueError("a chunk is an array")
    return doc


def _zset_columns(body: bytes | memoryview) -> tuple[list[bytes], list[float]]:
    members, packed = _unpack(body)
    scores = array("d")
    scores.frombytes(packed)
    if _BIG_ENDIAN:
        scores.byteswap()
    if len(scores) != len(members) or not all(isinstance(m, bytes) for m in members):
        raise ValueError("a sorted set chunk's members and scores differ in number")
    return members, scores.tolist()


def _hash_columns(body: bytes | memoryview
                  ) -> tuple[list[bytes], list[bytes], list[tuple[int, int]]]:
    fields, values, ttls = _unpack(body)
    if len(fields) != len(values) or not all(
            0 <= i < len(fields) and isinstance(w, int) for i, w in ttls):
        raise ValueError("a hash chunk's fields, values and TTLs do not match")
    return fields, values, [(i, w) for i, w in ttls]


def _set_members(body: bytes | memoryview) -> list[bytes]:
    (members,) = _unpack(body)
    if not all(isinstance(m, bytes) for m in members):
        raise ValueError("a set chunk's members are not strings")
    return list(members)


def _list_nodes(body: bytes | memoryview) -> tuple[int, list[bytearray]]:
    """A list chunk's first index and its nodes, each checked as an RDB's list node is (a
    snapshot read back is not trusted: a node the list kernels walk must be sound)."""
    from streamkeep.snapshot.rdb import RdbError
    from streamkeep.snapshot.rdb_list import node_from_listpack

    first, blobs = _unpack(body)
    if not isinstance(first, int) or first < 0 or not isinstance(blobs, list) or \
            not all(isinstance(b, bytes) for b in blobs):
        raise ValueError("a list chunk is not its first index and its nodes")
    try:
        return first, [node_from_listpack(b) for b in blobs]
    except RdbError as err:
        raise ValueError(f"a list chunk's node is not a listpack: {err}") from None


def chunk_elements(type_name: str, body: bytes | memoryview, at: int | None = None,
                   check: bool = True) -> list[tuple]:
    """A chunk's elements as tools.value_tables' columns have them: a sorted set's (member,
    score), a hash's (field, value, expiry or None), a set's (member,), a list's (index,
    element). A list chunk's indexes start at `at` when given (its place in the value, counted
    from the order), which with `check` its stored first index must equal (a row of the first
    form; a referred chunk's stored one is where it was when written). ValueError: not a chunk
    of that type."""
    if type_name == LIST.name:
        first, nodes = _list_nodes(body)
        if at is not None:
            if check and first != at:
                raise ValueError(f"a list chunk starts at index {first}, not {at}")
            first = at
        out: list[tuple] = []
        for node in nodes:
            out.extend(enumerate(node_range(node, 0, node_count(node)), first + len(out)))
        return out
    if type_name == ZSET.name:
        members, scores = _zset_columns(body)
        return list(zip(members, scores, strict=True))
    if type_name == SET.name:
        return [(m,) for m in _set_members(body)]
    if type_name != HASH.name:
        raise ValueError(f"type {type_name!r} is not stored in chunks")
    fields, values, ttls = _hash_columns(body)
    expiry: list[int | None] = [None] * len(fields)
    for i, when in ttls:
        expiry[i] = when
    return list(zip(fields, values, expiry, strict=True))


def build_value(type_name: str, count: int, bodies: Iterable[bytes | memoryview],
                indexed: bool = True,
                on_list_chunk: Callable[[list[bytearray], int], None] | None = None) -> Any:
    """The value `count` elements long whose chunks' bodies are `bodies` (read one at a time),
    in the encoding its size calls for, as the type's `from_bytes` picks it. A list's chunks
    follow each other by their order; with `indexed` (a keys row of the first form) each one's
    stored first index must be where it is. `on_list_chunk`: told each list chunk's nodes (the
    objects the list adopts) and elements. ValueError: malformed chunks, or not `count`
    elements."""
    seen = [0]

    def counted(items: list) -> list:
        seen[0] += len(items)
        return items

    if type_name == ZSET.name:
        value: Any = ZSet.from_chunks(count, (
            (counted(m), s) for m, s in map(_zset_columns, bodies)))
    elif type_name == SET.name:
        value = RSet.from_chunks(count, chain.from_iterable(
            counted(_set_members(b)) for b in bodies))
    elif type_name == LIST.name:
        nodes: list[bytearray] = []
        for body in bodies:
            first, chunk = _list_nodes(body)
            if indexed and first != seen[0]:
                raise ValueError(f"a list chunk starts at index {first}, not {seen[0]}")
            elements = sum(map(node_count, chunk))
            if seen[0] + elements > count:
                raise ValueError(f"a list chunk of {elements} elements after {seen[0]}, of "
                                 f"{count}")
            nodes.extend(chunk)
            seen[0] += elements
            if on_list_chunk is not None:
                on_list_chunk(chunk, elements)
        value = lists.from_nodes(nodes)
    elif type_name == HASH.name:
        ttls: list[tuple[bytes, int]] = []

        def pairs(body: bytes | memoryview) -> list[tuple[bytes, bytes]]:
            fields, values, chunk_ttls = _hash_columns(body)
            ttls.extend((fields[i], w) for i, w in chunk_ttls)
            return counted(list(zip(fields, values, strict=True)))

        value = Hash.from_chunks(count, chain.from_iterable(map(pairs, bodies)))
        for field, when in ttls:
            value.set_field_expiry(field, when)
    else:
        raise ValueError(f"type {type_name!r} is not stored in chunks")
    size = lists.length(value) if type_name == LIST.name else len(value)
    if seen[0] != count or size != count:
        raise ValueError(f"{seen[0]} elements found in the chunks ({size} distinct), "
                         f"{count} recorded")
    return value


# --- where a compaction child's chunked values are -------------------------------------------

@dataclass(frozen=True, slots=True)
class HomeRun:
    """Consecutive chunks of a value in the snapshot a compaction child goes on from: the part
    file (its path, and the rows, nodes and chunks, it holds: the merge policy's measure), the
    number of the value that wrote them there, the first chunk and how many."""

    part: str
    part_rows: int
    number: int
    first: int
    chunks: int


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """One chunk of a list as a snapshot holds it (part file, its rows, number, chunk index,
    elements, body bytes) and the nodes it was read from or written as: each node's identity
    (id() of the list's own bytearray) and its bytes' hash (xxh3-64), so that a compaction
    tells a chunk whose nodes are all still there, in order and unchanged, from one that is
    not."""

    part: str
    part_rows: int
    number: int
    index: int
    elements: int
    size: int
    nodes: tuple[int, ...]
    sums: tuple[int, ...]


def node_sums(nodes: Iterable[bytearray]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(identities, hashes) of `nodes`, as StoredChunk keeps them."""
    nodes = list(nodes)
    return tuple(map(id, nodes)), tuple(map(_node_hash, nodes))


@dataclass(frozen=True, slots=True)
class ValueHome:
    """Where a chunked value's rows are in the snapshot a compaction child goes on from: the
    value object (by its id: the child's own, resident), its chunk runs in order, its elements
    and their bytes, whether its keys row is of the first form (`indexed`); for a list, each
    of its chunks (`list_chunks`, in order), so that a changed list refers to the chunks that
    did not change."""

    ident: int
    runs: tuple[HomeRun, ...]
    elements: int
    size: int
    indexed: bool = True
    list_chunks: tuple[StoredChunk, ...] | None = None


# A list's plan: its nodes in order, a piece at a time, each the nodes of a stored chunk
# (referred to where it is) or, with None, nodes to write into new chunks.
ListPiece = tuple[StoredChunk | None, list[bytearray]]


def plan_list(value: lists.ListValue, home: ValueHome) -> list[ListPiece]:
    """`value`'s nodes as pieces (ListPiece): a run of nodes that is exactly one of the
    home's stored chunks (the same node objects, in the same order, each with the same bytes)
    is that chunk; the other nodes are to be written. The work is a pass over the nodes and
    a hash of the bytes of those that are candidates."""
    nodes = lists.nodes_of(value)
    starts = {c.nodes[0]: c for c in home.list_chunks or () if c.nodes}
    pieces: list[ListPiece] = []
    pending: list[bytearray] = []
    i, count = 0, len(nodes)
    while i < count:
        chunk = starts.get(id(nodes[i]))
        if chunk is not None and _holds(chunk, nodes, i):
            if pending:
                pieces.append((None, pending))
                pending = []
            end = i + len(chunk.nodes)
            pieces.append((chunk, nodes[i:end]))
            i = end
            continue
        pending.append(nodes[i])
        i += 1
    if pending:
        pieces.append((None, pending))
    return pieces


def _holds(chunk: StoredChunk, nodes: list[bytearray], i: int) -> bool:
    """Whether nodes[i:] starts with exactly the chunk's nodes, unchanged."""
    span = nodes[i:i + len(chunk.nodes)]
    return len(span) == len(chunk.nodes) and tuple(map(id, span)) == chunk.nodes and \
        tuple(map(_node_hash, span)) == chunk.sums


def planned_chunks(pieces: Iterable[ListPiece]
                   ) -> Iterator[tuple[StoredChunk | None, bytes, int, list[bytearray]]]:
    """A planned list's chunks in order: (stored chunk, b"", elements, nodes) for one
    referred to, (None, body, elements, nodes) for a new one (node_bodies' cut of the nodes
    between referred chunks, each first index where it is now)."""
    at = 0
    pending: list[bytearray] = []
    for chunk, nodes in pieces:
        if chunk is None:
            pending.extend(nodes)
            continue
        for body, count, batch in node_bodies(pending, at):
            yield None, body, count, batch
            at += count
        pending = []
        yield chunk, b"", chunk.elements, nodes
        at += chunk.elements
    for body, count, batch in node_bodies(pending, at):
        yield None, body, count, batch


class ValueHomes:
    """A compaction child's chunked values and the keys its replay changed since the snapshot
    they were loaded from or written to: a value whose key no replayed effect named, still the
    same object under the same key with as many elements, is the one the snapshot holds."""

    def __init__(self) -> None:
        self.homes: dict[tuple[int, bytes], ValueHome] = {}
        self.touched: set[bytes] = set()  # key names, whatever their database (conservative)
        self.everything = False  # a FLUSHDB, FLUSHALL or an effect naming no key it changes

    def add(self, db: int, key: bytes, home: ValueHome) -> None:
        self.homes[(db, key)] = home

    def touch(self, key: bytes) -> None:
        self.touched.add(key)

    def touch_all(self) -> None:
        self.everything = True
        self.homes.clear()

    def unchanged(self, db: int, key: bytes, value: Any) -> ValueHome | None:
        """The home of `value` under `key` of `db` if the snapshot holds it as it is."""
        if self.everything or key in self.touched:
            return None
        home = self.homes.get((db, key))
        if home is None or home.ident != id(value) or home.elements != len(value):
            return None
        return home

    def list_home(self, db: int, key: bytes) -> ValueHome | None:
        """The home of the list the snapshot held under `key` of `db`, whatever changed since
        (plan_list tells which of its chunks are still the list's)."""
        if self.everything:
            return None
        home = self.homes.get((db, key))
        return None if home is None or home.list_chunks is None else home

    def replace(self, homes: dict[tuple[int, bytes], ValueHome]) -> None:
        """The homes of the snapshot just written; nothing changed since."""
        self.homes = homes
        self.touched = set()
        self.everything = False


__all__ = ["CHUNKED_BYTES", "CHUNKED_ELEMENTS", "CHUNKED_TYPES", "CHUNK_BYTES",
           "CHUNK_ELEMENTS", "HomeRun", "ListPiece", "StoredChunk", "ValueHome", "ValueHomes",
           "build_value", "chunk_bodies", "chunk_elements", "is_chunked", "node_bodies",
           "node_sums", "plan_list", "planned_chunks"]
