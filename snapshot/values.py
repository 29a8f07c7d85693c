"""Big values in a snapshot: a value of a type with a chunk codec (a sorted set, hash, set or
list) stored as chunk rows, not one row.

Owns when a value of such a type is chunked (`is_chunked`: more than CHUNKED_ELEMENTS
elements, or a MEMORY USAGE estimate past CHUNKED_BYTES), how big a chunk gets (CHUNK_ELEMENTS
elements or about CHUNK_BYTES), and the generic side of the chunks: a value's chunks cut by its
type's codec (`value_chunks`, `chunk_bodies`), a chunk's elements (`chunk_elements`), a value
built back from its chunks and checked against its recorded count (`build_value`), and
`ValueHomes`, a compaction child's record of where each chunked value it loaded or wrote is,
so that a value nothing changed since is referred to where it is instead of written again (as
an unchanged stream node is). Each type's codec (what a chunk's body holds and how its elements
are read and built back) is in its formats module, found through snapshot.rdb_types: this
module names no type. A writer or a reader holds one chunk at a time, never the value's whole
serialisation.

A value kept as nodes (engine.model.residency.ValueNodes, the type's `ValueType.nodes`: a
list's quicklist) is chunked by its nodes (snapshot.value_formats.node_chunks), and its home
keeps each of its chunks' nodes (their identities and hashes, `StoredChunk`): a value that
changed (a queue's pushes and pops) refers to the chunks whose nodes are all still its own,
unchanged and in order (`plan_nodes`), and only its other nodes are cut into new chunks
(`planned_chunks`); a keys row of such a value lists runs of chunks (snapshot.layout's second
form), and its chunks' stored first indexes are not relied on (indexes are counted from the
order).

A chunk's body is msgpack, elements in the value's order (the layouts every snapshot written
so far holds; each type's module writes and reads its own):
    zset  [members (array of bin), scores (bin: little-endian doubles, one per member)]
          ascending by (score, member), across the chunks too (snapshot.rdb_zset)
    hash  [fields (array of bin), values (array of bin), TTLs (array of [index, ms])]
          the pairs in the hash's iteration order; a field with a TTL named by its index in
          the chunk, its absolute expiry time in ms (snapshot.rdb_hash)
    set   [members (array of bin)]  in the set's iteration order (snapshot.rdb_set)
    list  [index of its first element (int), nodes (array of bin)]
          the list's nodes, head first, each the listpack the list holds (a chunk ends at a
          node's end: CHUNK_ELEMENTS or CHUNK_BYTES reached, a node past them alone); a node
          read back is checked as an RDB's is (snapshot.rdb_list.node_from_listpack) before
          the list adopts it. The layout of every value kept as nodes (value_formats).

Must not touch: files (the writer and the reader open LMDB), the keys row's own layout
(snapshot.layout), the models' internals (their public methods only), any one type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import xxhash

from streamkeep.engine.model.value_types import ValueType
from streamkeep.snapshot.rdb_types import FORMATS, formats_of
from streamkeep.snapshot.value_formats import Body, Chunk, ChunkCodec, Cut, OnNodes, node_chunks

CHUNK_ELEMENTS = 4096  # elements a chunk holds at most
CHUNK_BYTES = 64 << 10  # a chunk is cut once its elements' bytes reach this
CHUNKED_ELEMENTS = 8192  # a value of more elements is chunked
CHUNKED_BYTES = 1 << 20  # so is one whose MEMORY USAGE estimate is past this
# The types whose big values are chunked: those with a chunk codec.
CHUNKED_TYPES = tuple(f.type_name for f in FORMATS if f.chunks is not None)

_node_hash = xxhash.xxh3_64_intdigest


def _cut() -> Cut:
    return Cut(CHUNK_ELEMENTS, CHUNK_BYTES)


def codec_of(type_name: str) -> ChunkCodec:
    """The chunk codec of the type TYPE calls `type_name` (ValueError: none)."""
    formats = formats_of(type_name)
    if formats is None or formats.chunks is None:
        raise ValueError(f"type {type_name!r} is not stored in chunks")
    return formats.chunks


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

def value_chunks(type_name: str, value: Any) -> Iterator[Chunk]:
    """(body, elements, its nodes or None) of each chunk of `value`, in order: CHUNK_ELEMENTS
    elements or about CHUNK_BYTES each (one chunk built at a time); a value kept as nodes
    gives each chunk's nodes (the writer records their index)."""
    return codec_of(type_name).chunks(value, _cut())


def chunk_bodies(type_name: str, value: Any) -> Iterator[tuple[bytes, int]]:
    """(body, elements) of each chunk of `value`, in order (`value_chunks`)."""
    for body, count, _nodes in value_chunks(type_name, value):
        yield body, count


def node_bodies(nodes: Iterable[bytearray], count_of: Callable[[bytearray], int],
                first: int = 0) -> Iterator[tuple[bytes, int, list[bytearray]]]:
    """Chunks of a value's `nodes` as they are (`count_of`: a node's elements), the first at
    element index `first`: (body, elements, its nodes) each, a chunk ending at the node that
    reaches CHUNK_ELEMENTS or CHUNK_BYTES (a node past them alone)."""
    return node_chunks(nodes, count_of, _cut(), first)


# --- reading ---------------------------------------------------------------------------------

def chunk_elements(type_name: str, body: Body, at: int | None = None,
                   check: bool = True) -> list[tuple]:
    """A chunk's elements as the type's export table's columns (tools.value_tables) have them:
    a sorted set's (member, score), a hash's (field, value, expiry or None), a set's (member,),
    a list's (index, element). A chunk that records its first index (a value kept as nodes)
    has its indexes start at `at` when given (its place in the value, counted from the order),
    which with `check` its stored first index must equal (a row of the first form; a referred
    chunk's stored one is where it was when written). ValueError: not a chunk of that type."""
    return codec_of(type_name).elements(body, at, check)


def build_value(type_name: str, count: int, bodies: Iterable[Body], indexed: bool = True,
                on_nodes: OnNodes | None = None) -> Any:
    """The value `count` elements long whose chunks' bodies are `bodies` (read one at a time),
    in the encoding its size calls for, as the type's `from_bytes` picks it. A value kept as
    nodes has its chunks follow each other by their order; with `indexed` (a keys row of the
    first form) each one's stored first index must be where it is. `on_nodes`: told each such
    chunk's nodes (the objects the value adopts) and elements. ValueError: malformed chunks,
    or not `count` elements."""
    codec = codec_of(type_name)
    value, seen = codec.build(count, bodies, indexed, on_nodes)
    size = codec.length(value)
    if seen != count or size != count:
        raise ValueError(f"{seen} elements found in the chunks ({size} distinct), "
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
    """One chunk of a value kept as nodes as a snapshot holds it (part file, its rows, number,
    chunk index, elements, body bytes) and the nodes it was read from or written as: each
    node's identity (id() of the value's own bytearray) and its bytes' hash (xxh3-64), so that
    a compaction tells a chunk whose nodes are all still there, in order and unchanged, from
    one that is not."""

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
    and their bytes, whether its keys row is of the first form (`indexed`); for a value kept
    as nodes, each of its chunks (`node_chunks`, in order), so that a changed value refers to
    the chunks that did not change."""

    ident: int
    runs: tuple[HomeRun, ...]
    elements: int
    size: int
    indexed: bool = True
    node_chunks: tuple[StoredChunk, ...] | None = None


# A plan of a value kept as nodes: its nodes in order, a piece at a time, each the nodes of a
# stored chunk (referred to where it is) or, with None, nodes to write into new chunks.
NodePiece = tuple[StoredChunk | None, list[bytearray]]


def plan_nodes(nodes: list[bytearray], home: ValueHome) -> list[NodePiece]:
    """A value's `nodes` (all resident, in order) as pieces (NodePiece): a run of nodes that is
    exactly one of the home's stored chunks (the same node objects, in the same order, each
    with the same bytes) is that chunk; the other nodes are to be written. The work is a pass
    over the nodes and a hash of the bytes of those that are candidates."""
    starts = {c.nodes[0]: c for c in home.node_chunks or () if c.nodes}
    pieces: list[NodePiece] = []
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


def planned_chunks(pieces: Iterable[NodePiece], count_of: Callable[[bytearray], int]
                   ) -> Iterator[tuple[StoredChunk | None, bytes, int, list[bytearray]]]:
    """A planned value's chunks in order: (stored chunk, b"", elements, nodes) for one
    referred to, (None, body, elements, nodes) for a new one (node_bodies' cut of the nodes
    between referred chunks, each first index where it is now; `count_of`: a node's
    elements)."""
    at = 0
    pending: list[bytearray] = []
    for chunk, nodes in pieces:
        if chunk is None:
            pending.extend(nodes)
            continue
        for body, count, batch in node_bodies(pending, count_of, at):
            yield None, body, count, batch
            at += count
        pending = []
        yield chunk, b"", chunk.elements, nodes
        at += chunk.elements
    for body, count, batch in node_bodies(pending, count_of, at):
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

    def node_home(self, db: int, key: bytes) -> ValueHome | None:
        """The home of the value kept as nodes the snapshot held under `key` of `db`, whatever
        changed since (plan_nodes tells which of its chunks are still the value's)."""
        if self.everything:
            return None
        home = self.homes.get((db, key))
        return None if home is None or home.node_chunks is None else home

    def replace(self, homes: dict[tuple[int, bytes], ValueHome]) -> None:
        """The homes of the snapshot just written; nothing changed since."""
        self.homes = homes
        self.touched = set()
        self.everything = False


__all__ = ["CHUNKED_BYTES", "CHUNKED_ELEMENTS", "CHUNKED_TYPES", "CHUNK_BYTES",
           "CHUNK_ELEMENTS", "HomeRun", "NodePiece", "StoredChunk", "ValueHome", "ValueHomes",
           "build_value", "chunk_bodies", "chunk_elements", "codec_of", "is_chunked",
           "node_bodies", "node_sums", "plan_nodes", "planned_chunks", "value_chunks"]
