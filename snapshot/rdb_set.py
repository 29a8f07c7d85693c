"""The set's RDB codec: RDB types 2 (members), 11 (intset) and 20 (listpack), read from RDB files
and DUMP payloads, written as the chosen version expects. Registered with `snapshot.rdb`'s
codec registry on import once the keyspace holds sets (`engine.model.value_types` has a type for
`RSet`).

Owns, byte-compatibly with Redis's rdb.c: what each type holds and what loading makes of it (a
type-2 set is built member by member from an intset, as SADD would build it: intset, then
listpack, then hashtable as the limits say; an intset stays one unless it has more members
than `set-max-intset-entries`; a listpack set stays one unless it has more members than
`set-max-listpack-entries` (`engine.model.sets.RSet` holds a listpack member over the length
limit in a hashtable: the one difference)), and what saving writes: an intset as type 11, a
listpack set as type 20 (RDB 11 and later: Redis 7.2 brought listpack sets; type 2 for older
versions), a hashtable as type 2.

Refused (RdbError, never another exception): a duplicate member, an empty set, malformed
blobs.

Also owns the set's other formats (`FORMATS`, snapshot.value_formats' shape): its snapshot
chunks (snapshot.values: a hashtable's buckets as they are, value_formats' table chunks; a
small encoding's [members], in its order, the layout every set had before) and its export table
(`set_members`: member).

Must not touch: the RDB container, files, sockets, the keyspace, the model
(engine.model.sets is used through its public API).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice

from streamkeep.engine.model.bucket_table import BucketTable
from streamkeep.engine.model.listpack import as_int
from streamkeep.engine.model.packed_columns import pack_strings
from streamkeep.engine.model.sets import DEFAULT_LIMITS, RSet, SetLimits
from streamkeep.engine.model.value_types import BY_CLASS
from streamkeep.snapshot.rdb import (
    RdbError,
    Reader,
    encode_length,
    encode_string,
    listpack,
    listpack_items,
    register_value_codec,
)
from streamkeep.snapshot.rdb_packed import as_bytes, intset, intset_values
from streamkeep.snapshot.value_formats import (
    Body,
    Chunk,
    ChunkCodec,
    Column,
    Cut,
    OnNodes,
    TableChunk,
    TypeFormats,
    ValueTable,
    adopt_table,
    cut_columns,
    packb,
    scan_pages,
    table_chunk,
    table_chunks,
    table_runs,
    unpack,
)

TYPE_SET = 2
TYPE_SET_INTSET = 11
TYPE_SET_LISTPACK = 20
SET_TYPES = (TYPE_SET, TYPE_SET_INTSET, TYPE_SET_LISTPACK)
LISTPACK_SET_VERSION = 11  # the first RDB version with listpack sets (Redis 7.2)


# --- reading -------------------------------------------------------------------------------------


def read_set(r: Reader, rdb_type: int, limits: SetLimits = DEFAULT_LIMITS) -> RSet:
    """The set of `rdb_type` at the reader's position, in the encoding Redis's loading gives
    it under `limits`."""
    if rdb_type == TYPE_SET:
        members = [r.string() for _ in range(r.length())]
        _check(members)
        return RSet.from_members(members, limits)
    if rdb_type == TYPE_SET_INTSET:
        members = [b"%d" % v for v in intset_values(r.string())]
        _check(members)
        return RSet.from_members(members, limits)  # (an intset; a hashtable past its limit)
    if rdb_type != TYPE_SET_LISTPACK:
        raise RdbError(f"not a set type: {rdb_type}")
    members = [as_bytes(m) for m in listpack_items(r.string())]
    _check(members)
    # A listpack set stays one (integers and all) unless it has too many members: started as
    # a listpack for that many, never as an intset.
    s = RSet.for_new_key(b"", len(members), limits)
    s.add_many(members)
    return s


def _check(members: list[bytes]) -> None:
    if not members:
        raise RdbError("an empty set")
    if len(set(members)) != len(members):
        raise RdbError("a set member twice")


def skip_set(r: Reader, rdb_type: int) -> None:
    """Past a set value, its structure followed, nothing decoded or checked."""
    if rdb_type in (TYPE_SET_INTSET, TYPE_SET_LISTPACK):
        r.skip_string()
    elif rdb_type == TYPE_SET:
        for _ in range(r.length()):
            r.skip_string()
    else:
        raise RdbError(f"not a set type: {rdb_type}")


# --- writing -------------------------------------------------------------------------------------


def set_type(s: RSet, version: int) -> int:
    """The RDB type Redis writes `s` as in an RDB of `version`."""
    encoding = s.encoding
    if encoding == "intset":
        return TYPE_SET_INTSET
    if encoding == "listpack" and version >= LISTPACK_SET_VERSION:
        return TYPE_SET_LISTPACK
    return TYPE_SET


def write_set(s: RSet, version: int) -> tuple[int, bytes]:
    """(the RDB type, the value's bytes) for `s` in an RDB of `version` (9 to 15)."""
    rdb_type = set_type(s, version)
    members = s.members()
    if rdb_type == TYPE_SET_INTSET:
        values = sorted(v for v in map(as_int, members) if v is not None)
        if len(values) != len(members):
            raise RdbError("an intset member is not an integer")
        blob = intset(values)
    elif rdb_type == TYPE_SET_LISTPACK:
        blob = listpack(list(members))
    else:
        return rdb_type, encode_length(len(members)) + b"".join(map(encode_string, members))
    return rdb_type, encode_length(len(blob)) + blob


if RSet in BY_CLASS:  # (the keyspace holds sets: their keys are kept, not skipped)
    register_value_codec(SET_TYPES, read_set, write_set, name="set", kind=RSet, skip=skip_set)


# --- the snapshot's chunks -----------------------------------------------------------------------

def _chunks(s: RSet, cut: Cut) -> Iterator[Chunk]:
    """The set's chunks: a hashtable's runs of buckets (value_formats.table_chunks); a small
    encoding's members in its order, a scan step at a time, as batches of `cut.elements`
    members, each cut at `cut.size` bytes."""
    table = s.table()
    if table is not None:
        yield from table_chunks(table, cut, _nothing)
        return
    members = chain.from_iterable(scan_pages(s, cut.elements))
    while batch := list(islice(members, cut.elements)):
        for (part,) in cut_columns((batch,), list(map(len, batch)), cut.size):
            yield packb([part]), len(part), None


def _members(body: Body) -> list[bytes]:
    (members,) = unpack(body)
    if not all(isinstance(m, bytes) for m in members):
        raise ValueError("a set chunk's members are not strings")
    return list(members)


def _nothing(_start: int, _end: int) -> list:
    return []


def _run_members(run: TableChunk) -> Iterator[bytes]:
    for pack in run.packs:
        yield from pack_strings(pack, 1)


def _elements(body: Body, _at: int | None, _check: bool) -> list[tuple]:
    run = table_chunk(body)
    if run is not None:
        return [(m,) for m in _run_members(run)]
    return [(m,) for m in _members(body)]


def _build(count: int, bodies: Iterable[Body], _indexed: bool, _on_nodes: OnNodes | None
           ) -> tuple[RSet, int]:
    runs, older = table_runs(bodies, "members")
    if runs is None:
        return _build_members(count, older)
    table = BucketTable(1, 0)
    adopt_table(table, runs)
    value = RSet.from_table(table)
    limits = value.limits
    if table.count <= max(limits.intset_max(), limits.max_listpack_entries):
        value = RSet.from_chunks(table.count, list(table.keys()))  # (as SADD would hold so few)
    return value, table.count


def _cold(seed: bytes, size: int, split: int, count: int, _kept: Iterable[TableChunk]
          ) -> tuple[RSet, BucketTable]:
    """A hashtable set whose buckets are all cold (ChunkCodec.cold)."""
    table = BucketTable(1, 0)
    table.cold(seed, size, split, count)
    return RSet.from_table(table), table


def _build_members(count: int, bodies: Iterable[Body]) -> tuple[RSet, int]:
    """A set from chunks of members (the layout of a small encoding, and of every set written
    before hashtables were stored as buckets)."""
    seen = [0]

    def counted(members: list[bytes]) -> list[bytes]:
        seen[0] += len(members)
        return members

    value = RSet.from_chunks(count, chain.from_iterable(counted(_members(b)) for b in bodies))
    return value, seen[0]


def _rows(s: RSet) -> Iterator[tuple]:
    return ((m,) for m in s)


FORMATS: TypeFormats = TypeFormats(
    "set", "sets", ChunkCodec(_chunks, _elements, _build, len, _cold),
    ValueTable("set", "set_members", (Column("member", "binary"),), _rows))

__all__ = ["FORMATS", "LISTPACK_SET_VERSION", "SET_TYPES", "TYPE_SET", "TYPE_SET_INTSET",
           "TYPE_SET_LISTPACK", "read_set", "skip_set", "write_set", "set_type"]
