"""What a value type's formats module holds beside its RDB codec, in one shape, and the helpers
those modules share.

A value type's formats module (snapshot/rdb_<type>.py) holds its RDB codec and, in the shapes
defined here: its snapshot chunk codec (`ChunkCodec`: how a big value is cut into chunk
bodies, read back element by element and built back; snapshot.values decides which values are
chunked, and writes, reads and keeps their chunks) and its export table (`ValueTable`: the
columns of one element and a decoded value's rows, what the Spark export and `snapshot dump`
show of a key: tools.value_tables). `TypeFormats` bundles them with the type's plural word,
one per type; snapshot.rdb_types lists them (the formats-level registry), and generic code
loops over that list.

Also owns what the codecs share: the cut of a batch of elements into chunks of about
`Cut.size` bytes (`cut_columns`), a scanned value's elements a page at a time (`scan_pages`),
msgpack packing and the array check of a chunk read back (`unpack`), and the chunks of a value
kept as nodes (engine.model.residency.ValueNodes: a list's), whose body is the same for every
such type:
    [index of its first element (int), nodes (array of bin)]
    the value's nodes in order, each as the value holds it (a chunk ends at a node's end: `Cut`'s
    elements or bytes reached, a node past them alone)
(`node_chunks`, `node_chunk_blobs`), and the chunks of a bucket table (a big hash's or set's:
engine.model.bucket_table), the same for every type that keeps one:
    [seed (bin), size (int), split (int), index of its first bucket (int), buckets (array of
     bin), the type's own (array)]
    a run of the table's buckets, each the pack the table holds, with the table's placement,
    so that a load adopts them with no record placed again (`table_chunks`, `table_chunk`,
    `adopt_table`). A type's own layout is documented in its module and in
snapshot.values' docstring.

Must not touch: files, a type's model internals (its public functions only), any one type.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any, Literal, NamedTuple

import msgpack

from streamkeep.engine.model import value_types
from streamkeep.engine.model.bucket_table import COLD, LOAD, BucketTable
from streamkeep.engine.model.packed_columns import pack_count
from streamkeep.engine.model.residency import run_hash
from streamkeep.snapshot.layout import TableRunRow

packb = msgpack.Packer(use_bin_type=True).pack


class Cut(NamedTuple):
    """How big a chunk gets: at most `elements` elements, cut once its elements' bytes reach
    `size` (snapshot.values' CHUNK_ELEMENTS and CHUNK_BYTES)."""

    elements: int
    size: int


# One chunk as a codec cuts it: its body, its elements and, for a value kept as nodes, the
# nodes it holds (the objects the value holds: their identities and hashes are kept); for a
# run of a bucket table's, its index row (the tableruns table); else None.
Chunk = tuple[bytes, int, list[bytearray] | TableRunRow | None]
TABLE_RUN_BYTES = 16 << 10  # about what a table's run holds: what a cold bucket's read reads
# Told each chunk's nodes (the objects the value being built adopts) and elements.
OnNodes = Callable[[list[bytearray], int], None]
Body = bytes | memoryview
Columns = tuple[list, ...]  # a batch of elements, a list per column


@dataclass(frozen=True)
class ChunkCodec:
    """A type's big values as chunks (see the module docstring). ValueError from `elements`
    and `build`: a body that is not a chunk of the type."""

    # The value's chunks in its own order, one built at a time, cut as `Cut` says.
    chunks: Callable[[Any, Cut], Iterator[Chunk]]
    # A chunk's elements as the type's export table's columns have them; `at`: the chunk's
    # first element's index in the value when known (counted from the order), which with
    # `check` a chunk that records its own first index (a value kept as nodes) must equal.
    elements: Callable[[Body, int | None, bool], list[tuple]]
    # (The value `count` elements long whose chunks' bodies are given, read one at a time, in
    # the encoding its size calls for; the elements the chunks held.) `indexed`: each chunk
    # that records its first index must be where it is; OnNodes: told a noded value's chunks.
    build: Callable[[int, Iterable[Body], bool, OnNodes | None], tuple[Any, int]]
    length: Callable[[Any], int]  # a built value's elements
    # A value whose bucket table is all cold (a lazy load's, `backlog-memory`), built from the
    # table's placement (seed, size, split), its records and the chunks of its runs that keep
    # something beside their buckets (their `extra`: a hash's TTLs), read one at a time as it
    # goes; the value and its table. None: the type keeps no bucket table whose runs go cold.
    cold: Callable[[bytes, int, int, int, Iterable[TableChunk]],
                   tuple[Any, BucketTable]] | None = None


# binary: bytes; double: a float; expiry: an absolute Unix time in ms, or None for none; index:
# an element's position (0: a list's head; not shown by `snapshot dump`, whose elements come in
# order).
Kind = Literal["binary", "double", "expiry", "index"]


@dataclass(frozen=True)
class Column:
    """One column of an element row."""

    name: str
    kind: Kind
    # A cell as `snapshot dump` shows it (a score: ZSCORE's reply text); None: by its kind.
    text: Callable[[Any], str] | None = None


@dataclass(frozen=True)
class ValueTable:
    """One type's element table: what the tools show and export of a value of the type."""

    type_name: str  # the registry's name (value_types.BY_NAME), TYPE's word
    table: str  # the export table's name
    columns: tuple[Column, ...]  # one element's columns (after db, key and key_str)
    rows: Callable[[Any], Iterable[tuple]]  # a decoded value's element rows, in its order
    key_expiry: bool = False  # a row also carries the key's expiry (expire_ms)

    def available(self) -> bool:
        """Whether the type is registered (its keys can be in a snapshot)."""
        return self.type_name in value_types.BY_NAME

    def decode(self, stored: bytes) -> Any:
        """A keys-table value (the bytes the type's `to_bytes` wrote) as the type's object."""
        vt = value_types.BY_NAME[self.type_name]
        assert vt.from_bytes is not None, f"{self.type_name} has no keys-table form"
        return vt.open(vt.from_bytes(stored))  # (a small hash is kept bare: its Hash)


@dataclass(frozen=True)
class TypeFormats:
    """A value type's parts beside its RDB codec (one entry of snapshot.rdb_types' registry)."""

    type_name: str  # the registry's name (engine.model.value_types), TYPE's word
    plural: str  # several of them, in a message: "sorted sets"
    chunks: ChunkCodec | None = None  # None: never stored as chunks (a keys row, or own tables)
    table: ValueTable | None = None  # None: no element table (a stream's are its own)


# --- what the codecs share -------------------------------------------------------------------

def unpack(body: Body) -> list:
    """A chunk's msgpack array (ValueError: not an array)."""
    doc = msgpack.unpackb(body, raw=True, use_list=True)
    if not isinstance(doc, list):
        raise ValueError("a chunk is an array")
    return doc


def cut_columns(columns: Columns, sizes: list[int], limit: int) -> Iterator[Columns]:
    """A batch (`columns`, its elements' bytes `sizes`) in chunks of about `limit` bytes at most
    (an element past it alone)."""
    reached = list(accumulate(sizes))
    count, start = len(reached), 0
    while start < count:
        before = reached[start - 1] if start else 0
        end = min(max(bisect_left(reached, before + limit, start) + 1, start + 1), count)
        yield tuple(column[start:end] for column in columns) if (start, end) != (0, count) \
            else columns
        start = end


def scan_pages(value: Any, count: int) -> Iterator[list]:
    """A scannable value's elements (`scan(cursor, count)`: a hash's pairs, a set's members) in
    its iteration order, a scan step at a time (a hashtable's buckets, a pack each; a small
    value's whole pack at once)."""
    cursor = 0
    while True:
        cursor, items = value.scan(cursor, count)
        yield items
        if not cursor:
            return


def node_chunks(nodes: Iterable[bytearray], count_of: Callable[[bytearray], int], cut: Cut,
                first: int = 0) -> Iterator[tuple[bytes, int, list[bytearray]]]:
    """The chunks of `nodes` as they are (the layout of a value kept as nodes), the first at
    element index `first`: (body, elements, its nodes) each, a chunk ending at the node that
    reaches the cut's elements or bytes (a node past them alone)."""
    count = size = 0
    batch: list[bytearray] = []
    for node in nodes:
        n = count_of(node)
        if batch and (count + n > cut.elements or size + len(node) > cut.size):
            yield packb([first, [bytes(x) for x in batch]]), count, batch
            first += count
            batch, count, size = [], 0, 0
        batch.append(node)
        count += n
        size += len(node)
    if batch:
        yield packb([first, [bytes(x) for x in batch]]), count, batch


def node_chunk_blobs(body: Body) -> list:
    """The nodes of a chunk of a value kept as nodes, unchecked (a cold node's read-back checks
    the one it takes against its placeholder). ValueError, TypeError, IndexError or msgpack's
    errors: not such a chunk."""
    blobs = msgpack.unpackb(body, raw=True, use_list=True)[1]
    if not isinstance(blobs, list):
        raise ValueError("not a chunk of value nodes")
    return blobs


class TableChunk(NamedTuple):
    """A chunk of a bucket table's buckets as they are (see `table_chunks`)."""

    seed: bytes
    size: int
    split: int
    first: int  # the index of its first bucket in the table
    packs: list[bytes]
    extra: list  # the type's own (a hash's field TTLs)


_TABLE_FIELDS = len(TableChunk._fields)
_IS_BYTES = bytes.__instancecheck__  # (mapped in C: a cold lookup checks a run's every pack)


def table_chunks(table: BucketTable, cut: Cut, extra: Callable[[int, int], list]
                 ) -> Iterator[Chunk]:
    """The chunks of a bucket table (a big hash's or set's, engine.model.bucket_table) as its
    buckets are: runs of whole buckets, each with the table's placement (its seed, size and
    split) and where its run starts, so that a load adopts the buckets with no record placed
    again (`adopt_table`), and with its index row (the tableruns table: how a `backlog-memory`
    budget finds the run without reading it). The runs are `run_buckets` buckets each, cut
    where they were last time as long as the records' size is about the same, so that a run
    no write touched is the same run in the next snapshot (the one its cold placeholder
    names). `extra(start, end)`: what the type keeps beside the run of buckets `start` to
    before `end` (a hash's TTLs). Cold buckets are read (they stay cold)."""
    step = run_buckets(table, cut)
    nb = len(table.buckets)
    for start in range(0, nb, step):
        end = min(start + step, nb)
        packs = [table.peek(i) for i in range(start, end)] if table.home is not None else \
            table.buckets[start:end]
        count = sum(pack_count(b, table.ncols) for b in packs)
        more = extra(start, end)
        body = packb([table.seed, table.size, table.split, start, packs, more])
        yield body, count, run_row(TableChunk(table.seed, table.size, table.split, start, packs,
                                              more), count)


def run_row(chunk: TableChunk, elements: int) -> TableRunRow:
    """The tableruns row describing `chunk`, a run of `elements` records (its place in the
    file not known)."""
    return TableRunRow(chunk.seed, chunk.size, chunk.split, chunk.first, len(chunk.packs),
                       elements, sum(map(len, chunk.packs)), run_hash(chunk.packs),
                       len(chunk.extra))


def run_buckets(table: BucketTable, cut: Cut) -> int:
    """Buckets a run of the table holds: the power of two whose records take about
    TABLE_RUN_BYTES (or the cut's bytes, if fewer) at the table's full load (by its records'
    average size: it moves little as the table grows, so the cuts stay where they were), no
    more than the cut's elements at that load."""
    if table.count == 0:
        return 1 << 12
    stored = table.nbytes
    home = table.home
    if home is not None:
        stored += home.cold_bytes - sum(1 for b in table.buckets if b is COLD)
    per_bucket = LOAD * max(1, stored // table.count)
    limit = min(min(TABLE_RUN_BYTES, cut.size) // per_bucket, cut.elements // LOAD)
    step = 1
    while step * 2 <= limit:
        step *= 2
    return step


def table_chunk(body: Body) -> TableChunk | None:
    """The chunk as a run of a table's buckets, None when it has another layout (a value's
    elements: the layout written before tables were stored as buckets). ValueError: a run
    that is malformed."""
    doc = unpack(body)
    if len(doc) != _TABLE_FIELDS:
        return None
    seed, size, split, first, packs, extra = doc
    if not (isinstance(seed, bytes) and type(size) is int and type(split) is int
            and type(first) is int
            and isinstance(packs, list) and all(map(_IS_BYTES, packs))
            and isinstance(extra, list)):
        raise ValueError("a table chunk's fields are not a seed, a geometry and packs")
    return TableChunk(seed, size, split, first, packs, extra)


def table_runs(bodies: Iterable[Body], what: str
               ) -> tuple[Iterator[TableChunk] | None, Iterator[Body]]:
    """A value's chunks read as the runs of a table's buckets (checked one at a time as they
    are read), or, when its first chunk has the older layout, None and the bodies as they
    are. ValueError when read: a run after a chunk of the other layout (`what`: the type's
    elements, named in the error)."""
    it = iter(bodies)
    first = next(it, None)
    run = None if first is None else table_chunk(first)
    if run is None:
        return None, (it if first is None else chain((first,), it))

    def runs() -> Iterator[TableChunk]:
        for chunk in chain((run,), map(table_chunk, it)):
            if chunk is None:
                raise ValueError(f"a value's chunks mix a table's buckets and {what}")
            yield chunk

    return runs(), iter(())


def adopt_table(table: BucketTable, chunks: Iterable[TableChunk]) -> None:
    """Make the empty `table` hold the buckets of `chunks` (a value's, in order): one
    placement in all, each run where the one before it ended, every bucket checked where it is
    (ValueError if not: BucketTable.adopt)."""
    buckets: list[bytes] = []
    placement: tuple[bytes, int, int] | None = None
    for chunk in chunks:
        if placement is None:
            placement = (chunk.seed, chunk.size, chunk.split)
        elif (chunk.seed, chunk.size, chunk.split) != placement:
            raise ValueError("a table's chunks disagree on its placement")
        if chunk.first != len(buckets):
            raise ValueError(f"a table chunk starts at bucket {chunk.first}, "
                             f"not {len(buckets)}")
        buckets.extend(chunk.packs)
    if placement is None:
        raise ValueError("a table without chunks")
    table.adopt(placement[0], placement[1], placement[2], buckets)


__all__ = ["Body", "Chunk", "ChunkCodec", "Column", "Columns", "Cut", "Kind", "OnNodes",
           "TABLE_RUN_BYTES", "TableChunk", "TypeFormats", "ValueTable", "adopt_table", "cut_columns",
           "node_chunk_blobs", "node_chunks", "packb", "run_buckets", "run_row", "scan_pages", "table_chunk",
           "table_chunks", "table_runs", "unpack"]
