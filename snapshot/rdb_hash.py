"""The hash's RDB codec: RDB types 4 (pairs), 9 (zipmap), 13 (ziplist), 16 (listpack) and Redis
7.4's hashes with field expiry, 24 (pairs with TTLs relative to the hash's soonest, the
"metadata" layout) and 25 (a listpack of field, value, expiry time), plus 23 (the same
listpack written by 7.4's release candidates, with no soonest time before it); read from RDB
files and DUMP payloads, written as the chosen version expects. Type 22 is left to
`snapshot.rdb`, which skips it: Redis's release candidates and Valkey 9 wrote two different
layouts under that number. Registered with `snapshot.rdb`'s codec registry on import once the
keyspace holds hashes (`engine.model.value_types` has a type for `Hash`).

Owns, byte-compatibly with Redis's rdb.c: what each type holds and what loading makes of it
(pairs become a listpack while the count and every field and value allow, else a hashtable; a
packed hash keeps its encoding unless it has more fields than `hash-max-listpack-entries`
(`engine.model.hashes.Hash` holds a packed hash whose field or value is over the length limit
as a hashtable: the one difference); a hash with field expiry is a "listpackex" while small),
and what saving writes: a listpack hash as type 16 (RDB 10 and later; a ziplist, type 13, for
RDB 9), a listpackex one as type 25 and a hashtable with some field's TTL as type 24 (RDB 12 and
later: Redis 7.4), any other hashtable as type 4. A hash with field TTLs written for an RDB
older than 12 is refused (RdbError): no older Redis has field expiry. Field expiry times are
loaded as they are, past ones included (the engine expires them).

Refused (RdbError, never another exception): a duplicate field, an empty hash, a listpack whose
tuples do not divide, an expiry time that is not an integer or is past Redis's maximum,
malformed blobs. `hash_needs` says which RDB version a hash needs (its field expiry: 12).

Also owns the hash's other formats (`FORMATS`, snapshot.value_formats' shape): its snapshot
chunks (snapshot.values: a hashtable's buckets as they are, value_formats' table chunks, the
TTLs of their fields as [field, ms]; a listpack's [fields, values, TTLs as [index, ms]], the
pairs in the hash's order, the layout every hash had before) and its export table (`hash_fields`: field, value, field_expire_ms).

Must not touch: the RDB container, files, sockets, the keyspace, the model
(engine.model.hashes is used through its public API).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

from streamkeep.engine.model.hashes import DEFAULT_LIMITS, Hash, HashLimits, PairTable, as_hash
from streamkeep.engine.model.packed_columns import pack_strings
from streamkeep.engine.model.packed_hash import PackedHash
from streamkeep.engine.model.value_types import BY_CLASS
from streamkeep.snapshot.rdb import (
    MIN_VERSION,
    RdbError,
    Reader,
    encode_length,
    encode_string,
    listpack,
    listpack_items,
    register_value_codec,
)
from streamkeep.snapshot.rdb_packed import as_bytes, groups, ziplist, ziplist_items, zipmap_pairs
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

TYPE_HASH = 4
TYPE_HASH_ZIPMAP = 9
TYPE_HASH_ZIPLIST = 13
TYPE_HASH_LISTPACK = 16
TYPE_HASH_LISTPACK_EX_PRE_GA = 23
TYPE_HASH_METADATA = 24
TYPE_HASH_LISTPACK_EX = 25
HASH_TYPES = (TYPE_HASH, TYPE_HASH_ZIPMAP, TYPE_HASH_ZIPLIST, TYPE_HASH_LISTPACK,
              TYPE_HASH_LISTPACK_EX_PRE_GA, TYPE_HASH_METADATA, TYPE_HASH_LISTPACK_EX)
FIELD_EXPIRY_VERSION = 12  # the first RDB version with hashes' field expiry (Redis 7.4)
EXPIRE_TIME_MAX = (1 << 48) - 1  # EB_EXPIRE_TIME_MAX: the latest expiry time Redis takes
_MS = struct.Struct("<q")
_NO_TTL = 0  # HASH_LP_NO_TTL: a listpackex field without an expiry time


# --- reading -------------------------------------------------------------------------------------


def read_hash(r: Reader, rdb_type: int, limits: HashLimits = DEFAULT_LIMITS) -> Hash:
    """The hash of `rdb_type` at the reader's position, in the encoding Redis's loading gives
    it under `limits`."""
    if rdb_type == TYPE_HASH:
        return _from_pairs([(f, v) for f, v, _t in _pairs(r, r.length(), with_ttl=False)],
                           limits)
    if rdb_type == TYPE_HASH_METADATA:
        soonest = _read_ms(r)
        triples = _pairs(r, r.length(), with_ttl=True)
        ttls = [(f, t + soonest - 1) for f, _v, t in triples if t]
        return _with_ttls(_from_pairs([(f, v) for f, v, _t in triples], limits),
                          ttls)
    if rdb_type == TYPE_HASH_LISTPACK_EX:
        _read_ms(r)  # the soonest expiry (its fields say it again)
    if rdb_type in (TYPE_HASH_LISTPACK_EX, TYPE_HASH_LISTPACK_EX_PRE_GA):
        items = listpack_items(r.string())
        pairs: list[tuple[bytes, bytes]] = []
        ttls = []
        for field, value, when in groups(items, 3, "a hash with field expiry"):
            if not isinstance(when, int):
                raise RdbError("a hash field's expiry time is not an integer")
            pairs.append((as_bytes(field), as_bytes(value)))
            if when != _NO_TTL:
                ttls.append((as_bytes(field), _checked_time(when)))
        return _with_ttls(_from_pairs(pairs, limits), ttls)
    if rdb_type == TYPE_HASH_ZIPMAP:
        pairs = zipmap_pairs(r.string())
        return _from_pairs(pairs, limits)
    if rdb_type == TYPE_HASH_ZIPLIST:
        items = ziplist_items(r.string())
    elif rdb_type == TYPE_HASH_LISTPACK:
        items = listpack_items(r.string())
    else:
        raise RdbError(f"not a hash type: {rdb_type}")
    pairs = [(as_bytes(f), as_bytes(v)) for f, v in groups(items, 2, "a hash")]
    return _from_pairs(pairs, limits)


def _read_ms(r: Reader) -> int:
    return _MS.unpack(r.take(8))[0]


def _pairs(r: Reader, count: int, with_ttl: bool) -> list[tuple[bytes, bytes, int]]:
    """`count` (field, value, TTL) read one by one (the TTL, 0 for none, first when
    `with_ttl`)."""
    out = []
    for _ in range(count):
        ttl = r.length() if with_ttl else 0
        out.append((r.string(), r.string(), ttl))
    return out


def _checked_time(when: int) -> int:
    if not 0 < when <= EXPIRE_TIME_MAX:
        raise RdbError(f"a hash field's expiry time is out of range ({when})")
    return when


def _from_pairs(pairs: Sequence[tuple[bytes, bytes]], limits: HashLimits) -> Hash:
    """The hash of `pairs` (each field once), as HSET on a new key holds them: a listpack
    while the count and every length allow (Redis keeps a packed hash packed whatever its
    lengths; the model's public API holds one over the length limit as a hashtable)."""
    if not pairs:
        raise RdbError("an empty hash")
    if len({field for field, _value in pairs}) != len(pairs):
        raise RdbError("a hash field twice")
    return Hash.from_pairs(pairs, limits)


def _with_ttls(h: Hash, ttls: list[tuple[bytes, int]]) -> Hash:
    """`h` with the field expiry times `ttls` (soonest first in a listpackex's order: applied
    from the last so that equal times keep their order), a small hash a listpackex."""
    h.prepare_field_expiry()
    for field, when in reversed(ttls):
        h.set_field_expiry(field, _checked_time(when))
    return h


def skip_hash(r: Reader, rdb_type: int) -> None:
    """Past a hash value, its structure followed, nothing decoded or checked."""
    if rdb_type in (TYPE_HASH_ZIPMAP, TYPE_HASH_ZIPLIST, TYPE_HASH_LISTPACK,
                    TYPE_HASH_LISTPACK_EX_PRE_GA):
        r.skip_string()
    elif rdb_type == TYPE_HASH_LISTPACK_EX:
        r.take(8)
        r.skip_string()
    elif rdb_type in (TYPE_HASH, TYPE_HASH_METADATA):
        if rdb_type == TYPE_HASH_METADATA:
            r.take(8)
        for _ in range(r.length()):
            if rdb_type == TYPE_HASH_METADATA:
                r.length()
            r.skip_string()
            r.skip_string()
    else:
        raise RdbError(f"not a hash type: {rdb_type}")


# --- writing -------------------------------------------------------------------------------------


def hash_type(value: Hash | PackedHash, version: int) -> int:
    """The RDB type Redis writes the hash as in an RDB of `version` (RdbError: field expiry in
    an RDB older than 12)."""
    h = as_hash(value)
    encoding = h.encoding
    if encoding == "listpackex" or h.has_field_expiry():
        if version < FIELD_EXPIRY_VERSION:
            if h.has_field_expiry():
                raise RdbError(f"a hash with field expiry needs RDB {FIELD_EXPIRY_VERSION} "
                               f"(Redis 7.4) or later, not {version}")
            encoding = "listpack"  # (a listpackex whose TTLs are gone: a plain listpack)
        elif encoding == "listpackex":
            return TYPE_HASH_LISTPACK_EX
        else:
            return TYPE_HASH_METADATA
    if encoding == "listpack":
        return TYPE_HASH_LISTPACK if version >= 10 else TYPE_HASH_ZIPLIST
    return TYPE_HASH


def write_hash(value: Hash | PackedHash, version: int) -> tuple[int, bytes]:
    """(the RDB type, the value's bytes) for the hash in an RDB of `version` (9 to 15)."""
    h = as_hash(value)
    rdb_type = hash_type(h, version)
    pairs = h.items()
    if rdb_type == TYPE_HASH:
        out = [encode_length(len(pairs))]
        for field, text in pairs:
            out += [encode_string(field), encode_string(text)]
        return rdb_type, b"".join(out)
    if rdb_type in (TYPE_HASH_LISTPACK, TYPE_HASH_ZIPLIST):
        flat = [x for pair in pairs for x in pair]
        blob = listpack(list(flat)) if rdb_type == TYPE_HASH_LISTPACK else ziplist(flat)
        return rdb_type, encode_length(len(blob)) + blob
    ttls = dict(h.fields_with_expiry())
    soonest = min(ttls.values(), default=0)
    if rdb_type == TYPE_HASH_LISTPACK_EX:
        items: list[bytes | int] = []
        for field, text in pairs:
            items += [field, text, ttls.get(field, _NO_TTL)]
        blob = listpack(items)
        return rdb_type, _MS.pack(soonest) + encode_length(len(blob)) + blob
    out = [_MS.pack(soonest), encode_length(len(pairs))]
    for field, text in pairs:
        when = ttls.get(field)
        out += [encode_length(0 if when is None else when - soonest + 1), encode_string(field),
                encode_string(text)]
    return rdb_type, b"".join(out)


def hash_needs(value: Hash | PackedHash) -> tuple[int, str]:
    """The oldest RDB version that holds the hash, and what of it needs that version ("" for
    the oldest): field expiry needs RDB 12 (`write_hash` refuses it for an older one)."""
    if as_hash(value).has_field_expiry():
        return FIELD_EXPIRY_VERSION, "field expiry"
    return MIN_VERSION, ""


if Hash in BY_CLASS:  # (the keyspace holds hashes: their keys are kept, not skipped)
    register_value_codec(HASH_TYPES, read_hash, write_hash, name="hash", kind=Hash,
                         skip=skip_hash, also=(PackedHash,), needs=hash_needs)


# --- the snapshot's chunks -----------------------------------------------------------------------

def _chunks(value: Hash | PackedHash, cut: Cut) -> Iterator[Chunk]:
    """The hash's chunks: a hashtable's runs of buckets (value_formats.table_chunks), the
    type's own part the TTLs of their fields as [field, ms]; a listpack's pairs in its order,
    a scan step at a time, as columns of `cut.elements` pairs (fields, values, expiry times or
    None), each batch cut at `cut.size` bytes (a field's and its value's)."""
    h = as_hash(value)  # (a small hash kept bare, as its pack: its Hash)
    expiry = h.field_expiry if h.has_field_expiry() else None
    table = h.table()
    if table is not None:  # the hashtable's buckets as they are, the TTLs of their fields
        by_bucket = _ttls_by_bucket(table)
        yield from table_chunks(table, cut, lambda start, end: [
            ttl for i in range(start, end) for ttl in by_bucket.get(i, ())] if by_bucket else [])
        return
    pairs = chain.from_iterable(scan_pages(h, cut.elements))
    while batch := list(islice(pairs, cut.elements)):
        fields, data = zip(*batch, strict=True)
        columns = (list(fields), list(data),
                   [None] * len(fields) if expiry is None else [expiry(f) for f in fields])
        sizes = [a + b for a, b in zip(map(len, columns[0]), map(len, columns[1]), strict=True)]
        for part in cut_columns(columns, sizes, cut.size):
            ttls = [[i, when] for i, when in enumerate(part[2]) if when is not None]
            yield packb([part[0], part[1], ttls]), len(part[0]), None


def _columns(body: Body) -> tuple[list[bytes], list[bytes], list[tuple[int, int]]]:
    fields, values, ttls = unpack(body)
    if len(fields) != len(values) or not all(
            0 <= i < len(fields) and isinstance(w, int) for i, w in ttls):
        raise ValueError("a hash chunk's fields, values and TTLs do not match")
    return fields, values, [(i, w) for i, w in ttls]


def _ttls_by_bucket(table: PairTable) -> dict[int, list[list]]:
    """[field, ms] of each field with a TTL, by the bucket that holds it (one pass over the
    TTLs: a table whose few fields have one is not read field by field)."""
    out: dict[int, list[list]] = {}
    for field, when in (table.ttl or {}).items():
        out.setdefault(table.slot(field), []).append([field, when])
    return out


def _run_pairs(run: TableChunk) -> Iterator[tuple[bytes, bytes]]:
    for pack in run.packs:
        strings = pack_strings(pack, 2)
        n = len(strings) >> 1
        yield from zip(strings[:n], strings[n:], strict=True)


def _run_ttls(run: TableChunk) -> dict[bytes, int]:
    if not all(isinstance(t, list) and len(t) == 2 and isinstance(t[0], bytes)
               and isinstance(t[1], int) for t in run.extra):
        raise ValueError("a hash table chunk's TTLs are not [field, ms] pairs")
    return {field: when for field, when in run.extra}


def _elements(body: Body, _at: int | None, _check: bool) -> list[tuple]:
    run = table_chunk(body)
    if run is not None:
        expiry_of = _run_ttls(run)
        return [(f, v, expiry_of.get(f)) for f, v in _run_pairs(run)]
    fields, values, ttls = _columns(body)
    expiry: list[int | None] = [None] * len(fields)
    for i, when in ttls:
        expiry[i] = when
    return list(zip(fields, values, expiry, strict=True))


def _build(count: int, bodies: Iterable[Body], _indexed: bool, _on_nodes: OnNodes | None
           ) -> tuple[Hash, int]:
    runs, older = table_runs(bodies, "pairs")
    if runs is None:
        return _build_pairs(count, older)
    ttls: dict[bytes, int] = {}

    def noted(chunks: Iterator[TableChunk]) -> Iterator[TableChunk]:
        for chunk in chunks:
            ttls.update(_run_ttls(chunk))
            yield chunk

    table = PairTable(0)
    adopt_table(table, noted(runs))
    value = Hash.from_table(table)
    if table.count <= value.limits.max_listpack_entries:  # (as HSET would hold so few)
        value = Hash.from_chunks(table.count, list(table.items()))
    for field, when in ttls.items():
        value.set_field_expiry(field, when)
    return value, table.count


def _cold(seed: bytes, size: int, split: int, count: int, kept: Iterable[TableChunk]
          ) -> tuple[Hash, PairTable]:
    """A hashtable hash whose buckets are all cold (ChunkCodec.cold): its fields' TTLs from
    the runs that keep some (`kept`)."""
    table = PairTable(0)
    table.cold(seed, size, split, count)
    for chunk in kept:
        for field, when in _run_ttls(chunk).items():
            table.set_ttl(field, when)
    return Hash.from_table(table), table


def _build_pairs(count: int, bodies: Iterable[Body]) -> tuple[Hash, int]:
    """A hash from chunks of pairs (the layout of a listpack, and of every hash written before
    hashtables were stored as buckets)."""
    seen = [0]
    ttls: list[tuple[bytes, int]] = []

    def pairs(body: Body) -> list[tuple[bytes, bytes]]:
        fields, values, chunk_ttls = _columns(body)
        ttls.extend((fields[i], w) for i, w in chunk_ttls)
        found = list(zip(fields, values, strict=True))
        seen[0] += len(found)
        return found

    value = Hash.from_chunks(count, chain.from_iterable(map(pairs, bodies)))
    for field, when in ttls:
        value.set_field_expiry(field, when)
    return value, seen[0]


def _rows(h: Hash) -> Iterator[tuple]:
    expiry = h.field_expiry
    return ((field, data, expiry(field)) for field, data in h.items())


def _length(value: Any) -> int:
    return len(as_hash(value))


FORMATS: TypeFormats = TypeFormats(
    "hash", "hashes", ChunkCodec(_chunks, _elements, _build, _length, _cold),
    ValueTable("hash", "hash_fields", (Column("field", "binary"), Column("value", "binary"),
                                       Column("field_expire_ms", "expiry")), _rows))

__all__ = ["FIELD_EXPIRY_VERSION", "FORMATS", "HASH_TYPES", "TYPE_HASH", "TYPE_HASH_LISTPACK",
           "TYPE_HASH_LISTPACK_EX", "TYPE_HASH_METADATA", "TYPE_HASH_ZIPLIST",
           "TYPE_HASH_ZIPMAP", "hash_needs", "hash_type", "read_hash", "skip_hash",
           "write_hash"]
