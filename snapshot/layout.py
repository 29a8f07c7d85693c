"""The snapshot layout: LMDB sub-databases, key encodings and msgpack values.

Owns the on-disk format of a snapshot (documented in docs/src/reference/formats.md; the Spark
export and other tools read it) and nothing else: encoding and decoding keys and values, in both directions.
Must not touch: files (the writer and the reader open LMDB), the engine.

A snapshot is one LMDB environment in one file (`subdir=False`, no lock file). Sub-databases:

    meta       key: ascii name             value: msgpack scalar
               format ("streamkeep-snapshot"), version (4; 3 before packed nodes, 2
               before the keys table, 1 before checksums), lsn,
               created_ms, repl_id, repl_offset, streams, entries
    streams    key: db u8 | stream key     value: msgpack map
               number (u64, names the stream in the tables below), length, first_id,
               last_id, max_deleted_id (16-byte IDs), entries_added, nodes, groups, and
               idmp if the stream has idempotent-producer state (Redis 8.6's XADD IDMP):
               [duration s, maxsize, iids added, duplicates refused, [[pid, [[iid,
               entry ID, recorded at ms], ...]], ...]], producers in the order they are
               next checked for expiry, each producer's iids oldest first
               (absent in older snapshots and for streams that never used IDMP)
    nodes      key: number u64 | master ID  value: the node's listpack, as Redis keeps it
               one node of at most stream-node-max-entries entries, in ID order, exactly as
               the engine holds it in memory and as Redis writes it in an RDB file (see
               engine/model/_packed_node_py.py for the layout: master entry with the shared
               field names, entries as ID deltas and flags, deleted entries flagged);
               versions before 4: msgpack [live, size, master_fields, ids, fields], ids 16
               bytes per entry (deleted ones included), fields one flat array of field/value
               bins per entry, nil for a deleted entry, size the listpack size Redis would
               have
    nodeinfo   key: as in nodes            value: msgpack [live, size, entries, master_fields]
               the node's counters without its entries: a lazy load (backlog-memory)
               reads these instead of the nodes (absent in older snapshots)
    groups     key: number u64 | group name value: msgpack map last_id, entries_read, pending,
               consumers
    consumers  key: number u64 | u16 len(group) | group | consumer name
               value: msgpack [seen_time, active_time]
    pel        key: number u64 | u16 len(group) | group | entry ID
               value: msgpack [consumer name, delivery_time, delivery_count]; the consumer
               name is nil for an entry XNACK released (owned by no consumer; older
               snapshots have none, so they load unchanged)
    runs       key: number u64 | first master ID   value: msgpack [part, part number, last
               master ID (16 bytes), nodes]: in a segmented snapshot (version 5) the stream's
               nodes are not in this file but in part files, a run of consecutive nodes each:
               meta `parts` lists the files ([[name, bytes, rows], ...], rows its nodes and
               chunks; `part` indexes it), and the part holds the run's nodes under (part number, master), every one
               of its nodes of that number from the first master to the last and no other
    keys       key: db u8 | key             value: msgpack [value or nil, expiry ms or nil,
               type name (absent for a string)]: every key that is not a stream (its value as
               its type stores it: a string's bytes, another type's `to_bytes`, named by the
               type's word, engine.model.value_types) and every stream key with a TTL (nil
               value: the stream is in the tables above); absent before version 3. A big
               value of a type snapshot.values chunks is [nil, expiry ms or nil, type name,
               [part, number, chunks, elements, bytes]] instead: its elements are in the
               chunks table, under `number`, in part file `part` (an index into meta `parts`;
               nil: this file); or [nil, expiry, type name, [elements, bytes, [[part, number,
               first chunk, chunks], ...]]]: its chunks are those runs, in order, possibly of
               several values and files (a list whose unchanged chunks a compaction referred
               to where they were; a list chunk's index is then counted from the order, its
               stored first index not relied on)
    chunks     key: number u64 | chunk u32   value: msgpack, one chunk of a big value's
               elements in the value's own order (snapshot.values documents each type's
               body); chunks 0 to chunks - 1 of a value, each a few thousand elements or
               about 64 KiB; in a segmented snapshot they are in the part files, like nodes,
               under the number the snapshot that wrote the part gave the value
    listnodes  key: as in chunks          value: msgpack [[hash, bytes, elements], ...]: a
               list chunk's nodes, in order, each its listpack's xxh3-128 hash (16 bytes), length
               and element count; in the same file and under the same key as the chunk it
               describes. The index a `backlog-memory` budget finds a list's nodes in the
               snapshot by (engine.model.residency: a node the snapshot holds with exactly its
               bytes may go cold) without reading the chunks; absent in older snapshots (and
               for chunks they wrote: their lists' nodes stay resident)
    tableruns  key: as in chunks          value: msgpack [seed, size, split, first bucket,
               buckets, elements, bytes, hash, extras, offset, stored]: a chunk of a hash's
               or set's buckets (a run of its bucket table's, snapshot.value_formats): the
               table's placement, where the run starts and how many buckets, records and bytes
               of packs it holds, the xxh3-128 hash of its packs joined, how many entries the
               type keeps beside it (a hash's field TTLs), and where the chunk's stored value
               is in the file and its length (-1, 0: not known), so that a cold run is read
               with one pread, mapping no page (its checksum proves the place); in the same
               file and under the same key as the chunk, written in a second transaction once
               the chunks are (so their places are known, and the index's pages are
               together). The index a `backlog-memory` budget finds a table's runs by (the runs
               the snapshot holds as they are may go cold, and a restart under a budget reads
               none); absent in older snapshots (their tables stay resident)

Every integer in a key is big-endian, so LMDB's byte order is numeric order: one stream's nodes
are contiguous and in ID order, and so are one group's PEL entries. An entry ID in a key or value
is 16 bytes: milliseconds u64 | sequence u64.

Checksums (version 2): every value in every table is its msgpack body followed by a u32
(little-endian) check: CRC-32(table name | 0x00 | key) XOR CRC-32(body), CRC-32 being zlib's
(the stdlib's, at gigabytes a second). A flipped bit in a value, in its key, or a value found
under another key or table, fails it. `seal` writes it, `unseal` checks it, `reseal` moves a
value to a new key (a compaction copying a node whose stream is numbered differently) with one
pass over the body. Version 1 snapshots have bare values and still read. The file as a whole is
checked by the manifest's `crc32` (`file_checksum`), before LMDB maps it where that matters.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgpack

from streamkeep.engine.model import packed_node

FORMAT = "streamkeep-snapshot"
VERSION = 4  # one self-contained file, nodes as listpacks (an import, a replica's full sync)
SEGMENTED_VERSION = 5  # a compaction's: nodes in part files the runs table points into
UNPACKED_VERSION = 3  # nodes as msgpack arrays of entries: still read, never written
KEYLESS_VERSION = 2  # checksummed, no keys table: still read, never written
UNCHECKED_VERSION = 1  # bare values: still read, never written
TABLES = ("meta", "streams", "nodes", "groups", "consumers", "pel")
# A segmented snapshot's main file (version 5) has a runs table and a `parts` meta value; a
# part file (meta `role` "nodes") fills only nodes and nodeinfo (the other tables are empty).
# Absent in older snapshots; a reader copes without them (nodeinfo: version 2's first files;
# keys: before version 3).
OPTIONAL_TABLES = ("nodeinfo", "keys", "runs", "chunks", "listnodes", "tableruns")
MAX_TABLES = 16  # the max_dbs to open a snapshot's LMDB environment with (room to grow)
NODES_ROLE = "nodes"
MAX_ID = (1 << 128) - 1

_U64 = struct.Struct(">Q")
_U16 = struct.Struct(">H")
_NODE_KEY = struct.Struct(">QQQ")
_packb = msgpack.Packer(use_bin_type=True).pack


class ID(NamedTuple):
    """A stream entry ID as the read API hands it out; orders like Redis IDs."""

    ms: int
    seq: int

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"

    @classmethod
    def of(cls, value: int) -> ID:
        return cls(value >> 64, value & 0xFFFFFFFFFFFFFFFF)

    def as_int(self) -> int:
        return self.ms << 64 | self.seq


def id_bytes(value: int) -> bytes:
    return value.to_bytes(16, "big")


def id_int(data: bytes) -> int:
    return int.from_bytes(data, "big")


# --- checksums -------------------------------------------------------------------------------

_CHECK = struct.Struct("<I")
CHECK_SIZE = _CHECK.size
_TABLE_SEED = {name: zlib.crc32(name.encode() + b"\0") for name in (*TABLES, *OPTIONAL_TABLES)}
_NODES_SEED, _NODEINFO_SEED = _TABLE_SEED["nodes"], _TABLE_SEED["nodeinfo"]


def _key_check(table: str, key: bytes) -> int:
    return zlib.crc32(key, _TABLE_SEED[table])


def seal(table: str, key: bytes, body: bytes) -> bytes:
    """A value as version 2 stores it: the body and its check (see the module docstring)."""
    return body + _CHECK.pack(_key_check(table, key) ^ zlib.crc32(body))


def seal_node(key: bytes, lp: bytes | bytearray, info: bytes) -> tuple[bytes | bytearray, bytes]:
    """`seal("nodes", key, lp)` and `seal("nodeinfo", key, info)`, the same bytes, the listpack
    copied once (a bytearray's sealed value is a bytearray, which LMDB stores alike): a
    snapshot writes one pair per node."""
    return (lp + _CHECK.pack(zlib.crc32(key, _NODES_SEED) ^ zlib.crc32(lp)),
            info + _CHECK.pack(zlib.crc32(key, _NODEINFO_SEED) ^ zlib.crc32(info)))


def unseal(table: str, key: bytes, value: bytes | memoryview) -> bytes | memoryview | None:
    """The body of a stored value whose check holds, or None: the value, its key or its place
    is damaged. (A slice: of a buffer, a view.)"""
    size = len(value) - CHECK_SIZE
    if size < 0:
        return None
    body = value[:size]
    if _CHECK.unpack_from(value, size)[0] != \
            zlib.crc32(key, _TABLE_SEED[table]) ^ zlib.crc32(body):
        return None
    return body


def body_of(value: bytes) -> memoryview | None:
    """The body of a stored value, its check NOT verified (None: too short to hold one): for a
    reader that proves the bytes otherwise (a cold table run's hash covers its packs)."""
    size = len(value) - CHECK_SIZE
    return None if size < 0 else memoryview(value)[:size]


def unseal_crc(table: str, key: bytes, value: bytes | memoryview
               ) -> tuple[bytes | memoryview, int] | None:
    """`unseal`, also returning the body's CRC-32 (what the check was made of): a caller that
    remembers the CRC of bytes it trusts can tell those bytes again without re-reading them."""
    size = len(value) - CHECK_SIZE
    if size < 0:
        return None
    body = value[:size]
    body_check = zlib.crc32(body)
    if _CHECK.unpack_from(value, size)[0] != zlib.crc32(key, _TABLE_SEED[table]) ^ body_check:
        return None
    return body, body_check


def unseal_node(key: bytes, value: bytes | memoryview) -> tuple[bytearray, int] | None:
    """`unseal_crc("nodes", key, value)` as a cold node's read-back needs it: the listpack
    copied once into the buffer a node holds, and its CRC-32; None if the check fails. (Every
    read of a cold backlog passes here twice or so: no slice, no table lookup.)"""
    size = len(value) - CHECK_SIZE
    if size < 0:
        return None
    lp = bytearray(value)
    del lp[size:]
    body_check = zlib.crc32(lp)
    if _CHECK.unpack_from(value, size)[0] != zlib.crc32(key, _NODES_SEED) ^ body_check:
        return None
    return lp, body_check


def reseal(table: str, key: bytes, new_key: bytes, value: bytes) -> bytes | None:
    """A stored value moved from `key` to `new_key`, checked on the way (None: damaged)."""
    size = len(value) - CHECK_SIZE
    if size < 0:
        return None
    body = value[:size]
    body_check = zlib.crc32(body)
    seed = _TABLE_SEED[table]
    if _CHECK.unpack_from(value, size)[0] != zlib.crc32(key, seed) ^ body_check:
        return None
    return body + _CHECK.pack(zlib.crc32(new_key, seed) ^ body_check)


def meta_version(raw: bytes) -> int | None:
    """The `version` meta value, stored bare (version 1) or sealed (2 and later); None if it is
    neither (damaged)."""
    try:
        bare = msgpack.unpackb(raw)
    except (ValueError, msgpack.UnpackException):  # ExtraData: the check follows the body
        bare = None
    if bare == UNCHECKED_VERSION:
        return bare
    body = unseal("meta", b"version", raw)
    if body is None:
        return None
    try:
        version = msgpack.unpackb(body)
    except (ValueError, msgpack.UnpackException):
        return None
    return version if isinstance(version, int) else None


# A file is checksummed a chunk at a time: 1 MiB (a chunk of 8 MiB took 2.5 times as long, each
# one a fresh mapping whose pages are faulted in before the copy; a 1 MiB buffer is reused).
FILE_CHUNK = 1 << 20


def file_checksum(chunks: Iterable[bytes]) -> int:
    """CRC-32 of a whole file given as its chunks in order: the manifest's `crc32`."""
    crc = 0
    for chunk in chunks:
        crc = zlib.crc32(chunk, crc)
    return crc


def describe_key(table: str, key: bytes, names: dict[int, str] | None = None) -> str:
    """A key as an error message names it: the stream (by name when `names` maps its number),
    group, consumer, node or entry it belongs to."""
    def stream(number: int) -> str:
        name = (names or {}).get(number)
        return f"stream {name} (#{number})" if name else f"stream #{number}"

    try:
        if table == "meta":
            return f"meta {key.decode(errors='backslashreplace')!r}"
        if table in ("streams", "keys"):
            db, name = split_stream_key(key)
            what = "stream" if table == "streams" else "key"
            return f"{what} {name.decode(errors='backslashreplace')!r} (db {db})"
        if table in ("chunks", "listnodes", "tableruns"):
            number, index = split_chunk_key(key)
            return f"value #{number}, chunk {index}"
        number = number_of(key)
        if table in ("nodes", "nodeinfo"):
            return f"{stream(number)}, node {ID.of(node_master(key))}"
        if table == "groups":
            return f"{stream(number)}, group {key[8:].decode(errors='backslashreplace')!r}"
        (length,) = _U16.unpack_from(key, 8)
        group = key[10:10 + length].decode(errors="backslashreplace")
        rest = key[10 + length:]
        if table == "pel" and len(rest) == 16:
            return f"{stream(number)}, group {group!r}, entry {ID.of(id_int(rest))}"
        return f"{stream(number)}, group {group!r}, consumer " \
               f"{rest.decode(errors='backslashreplace')!r}"
    except (struct.error, IndexError, ValueError):
        return f"key {key.hex()}"


# --- keys ------------------------------------------------------------------------------------

def stream_key(db: int, key: bytes) -> bytes:
    return bytes((db,)) + key


def split_stream_key(raw: bytes) -> tuple[int, bytes]:
    return raw[0], raw[1:]


def number_of(raw: bytes) -> int:
    """The stream number a nodes, nodeinfo, groups, consumers or pel key starts with."""
    return int(_U64.unpack_from(raw)[0])


def number_prefix(number: int) -> bytes:
    return _U64.pack(number)


def node_key(number: int, master: int) -> bytes:
    return _NODE_KEY.pack(number, master >> 64, master & 0xFFFFFFFFFFFFFFFF)


def node_master(raw: bytes) -> int:
    return int.from_bytes(raw[8:24], "big")


def group_key(number: int, group: bytes) -> bytes:
    return _U64.pack(number) + group


def group_prefix(number: int, group: bytes) -> bytes:
    """Prefix of one group's consumers and PEL keys."""
    return _U64.pack(number) + _U16.pack(len(group)) + group


def group_member(raw: bytes, prefix_len: int) -> bytes:
    return raw[prefix_len:]


# --- values ----------------------------------------------------------------------------------

def encode_meta_value(value: object) -> bytes:
    return _packb(value)


def decode_value(raw: bytes | memoryview) -> Any:
    return msgpack.unpackb(raw, raw=False, use_list=True)


STRING_TYPE = "string"  # a `keys` row without a type name holds a string


def encode_key(value: bytes | None, expires_ms: int | None,
               type_name: str = STRING_TYPE) -> bytes:
    """A `keys` value: the value's bytes (nil for a stream), the key's expiry time (nil for
    none) and, for a type other than string, its name."""
    if type_name == STRING_TYPE or value is None:
        return _packb([value, expires_ms])
    return _packb([value, expires_ms, type_name])


def decode_key(raw: bytes | memoryview) -> tuple[bytes | None, int | None, str | None]:
    """(value, expiry, type name): the name is None for a stream's row, "string" for a row
    without one. (A chunked value's row: its value is None; see decode_key_row.)"""
    value, expires_ms, type_name, _ref = decode_key_row(raw)
    return value, expires_ms, type_name


class ChunkRun(NamedTuple):
    """Consecutive chunk rows of one value: chunks `first` to `first + chunks - 1` under
    `number` in part file `part` (an index into meta `parts`; None: the file holding the keys
    row)."""

    part: int | None
    number: int
    first: int
    chunks: int


@dataclass(frozen=True, slots=True)
class ChunkRef:
    """Where a chunked value's elements are (see the module docstring): its chunk rows, run
    after run in the value's order, holding `elements` elements in `size` bytes (their
    bodies). `indexed`: the row's first form, one run of every chunk of its number, from chunk
    0 (a list chunk's stored first index is then its index in the list); the second form
    (a list whose unchanged chunks a compaction referred to where they are) has runs from
    several values and files, and a list chunk's index is counted from the order alone."""

    runs: tuple[ChunkRun, ...]
    elements: int
    size: int
    indexed: bool = True

    @classmethod
    def whole(cls, part: int | None, number: int, chunks: int, elements: int,
              size: int) -> ChunkRef:
        """The first form: chunks 0 to `chunks` - 1 of `number` in `part`."""
        return cls((ChunkRun(part, number, 0, chunks),), elements, size)

    @property
    def chunks(self) -> int:
        return sum(run.chunks for run in self.runs)

    @property
    def part(self) -> int | None:
        """The first run's part (the value's, in the first form)."""
        return self.runs[0].part if self.runs else None

    @property
    def number(self) -> int:
        """The first run's number (the value's, in the first form)."""
        return self.runs[0].number if self.runs else 0


def encode_chunked_key(ref: ChunkRef, expires_ms: int | None, type_name: str) -> bytes:
    """The `keys` value of a chunked value: no value, its expiry, its type and its chunks
    (`[part, number, chunks, elements, bytes]`, or `[elements, bytes, [[part, number, first
    chunk, chunks], ...]]` for one that is not `indexed`)."""
    if ref.indexed:
        (run,) = ref.runs
        assert run.first == 0
        item: list[Any] = [run.part, run.number, run.chunks, ref.elements, ref.size]
    else:
        item = [ref.elements, ref.size, [list(run) for run in ref.runs]]
    return _packb([None, expires_ms, type_name, item])


_CHUNK_INDEXES = 1 << 32  # a chunk's index is a u32 in its key


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _chunk_ref(item: Any) -> ChunkRef:
    """A keys row's chunks item, either form, checked: counts that are counts, runs that name
    chunk keys that can exist, no chunk twice."""
    if isinstance(item, list) and len(item) == 5 and (item[0] is None or _is_count(item[0])) \
            and all(map(_is_count, item[1:])) and item[2] <= _CHUNK_INDEXES:
        return ChunkRef.whole(*item)
    if not (isinstance(item, list) and len(item) == 3 and _is_count(item[0])
            and _is_count(item[1]) and isinstance(item[2], list) and item[2]):
        raise ValueError("a chunked keys value is [nil, int or nil, type name, [part or nil, "
                         "number, chunks, elements, bytes] or [elements, bytes, runs]]")
    runs = []
    for run in item[2]:
        if not (isinstance(run, list) and len(run) == 4
                and (run[0] is None or _is_count(run[0])) and all(map(_is_count, run[1:]))
                and run[3] > 0 and run[2] + run[3] <= _CHUNK_INDEXES):
            raise ValueError("a chunk run is [part or nil, number, first chunk, chunks > 0]")
        runs.append(ChunkRun(*run))
    ordered = sorted(runs, key=lambda r: (-1 if r.part is None else r.part, r.number, r.first))
    for a, b in zip(ordered, ordered[1:], strict=False):
        if (a.part, a.number) == (b.part, b.number) and a.first + a.chunks > b.first:
            raise ValueError(f"chunk runs overlap (part {a.part}, number {a.number})")
    return ChunkRef(tuple(runs), item[0], item[1], indexed=False)


def decode_key_row(raw: bytes | memoryview
                   ) -> tuple[bytes | None, int | None, str | None, ChunkRef | None]:
    """(value, expiry, type name, chunks): decode_key's, and where a chunked value's elements
    are (None for a value in the row itself)."""
    row = msgpack.unpackb(raw, raw=False, use_list=True)
    if not isinstance(row, list) or len(row) not in (2, 3, 4):
        raise ValueError("a keys value is [bytes or nil, int or nil, (type name), (chunks)]")
    value, expires_ms = row[0], row[1]
    type_name = row[2] if len(row) >= 3 else (None if value is None else STRING_TYPE)
    if not (value is None or isinstance(value, bytes)) or \
            not (expires_ms is None or isinstance(expires_ms, int)) or \
            not (type_name is None or isinstance(type_name, str)):
        raise ValueError("a keys value is [bytes or nil, int or nil, (type name)]")
    ref = None
    if len(row) == 4:
        if value is not None or type_name is None:
            raise ValueError("a chunked keys value is [nil, int or nil, type name, chunks]")
        ref = _chunk_ref(row[3])
    return value, expires_ms, type_name, ref


_CHUNK_KEY = struct.Struct(">QI")


def chunk_key(number: int, index: int) -> bytes:
    return _CHUNK_KEY.pack(number, index)


def split_chunk_key(raw: bytes) -> tuple[int, int]:
    number, index = _CHUNK_KEY.unpack(raw)
    return int(number), int(index)


LIST_NODE_HASH_BYTES = 16  # xxh3-128


class TableRunRow(NamedTuple):
    """A tableruns value (see the module docstring)."""

    seed: bytes
    size: int
    split: int
    first: int
    buckets: int
    elements: int
    nbytes: int
    hash: bytes
    extras: int
    offset: int = -1  # where the chunk's stored value is in the file (-1: not known)
    stored: int = 0  # its length


_TABLE_RUN_FIELDS = len(TableRunRow._fields)
_NOT_A_TABLE_RUN = ("a tableruns value is [seed, size, split, first, buckets, elements, bytes, "
                    "hash, extras, offset, stored]")


def encode_table_run(run: TableRunRow) -> bytes:
    return _packb(list(run))


def decode_table_run(raw: bytes | memoryview) -> TableRunRow:
    """A tableruns value (ValueError: not one). (A restart under a budget reads one a run:
    checked field by field, no generator.)"""
    doc = msgpack.unpackb(raw, raw=True, use_list=True)
    if type(doc) is not list or len(doc) != _TABLE_RUN_FIELDS:
        raise ValueError(_NOT_A_TABLE_RUN)
    seed, size, split, first, buckets, elements, nbytes, digest, extras, offset, stored = doc
    if type(seed) is not bytes or type(digest) is not bytes or \
            len(digest) != LIST_NODE_HASH_BYTES or type(size) is not int or \
            type(split) is not int or type(first) is not int or type(buckets) is not int or \
            type(elements) is not int or type(nbytes) is not int or type(extras) is not int or \
            type(offset) is not int or type(stored) is not int or \
            min(size, split, first, elements, nbytes, extras, stored) < 0 or buckets < 1 or \
            offset < -1:
        raise ValueError(_NOT_A_TABLE_RUN)
    return TableRunRow(seed, size, split, first, buckets, elements, nbytes, digest, extras,
                       offset, stored)


def encode_list_nodes(nodes: Iterable[tuple[bytes, int, int]]) -> bytes:
    """A listnodes value: each node's (hash, bytes, elements)."""
    return _packb([list(node) for node in nodes])


def decode_list_nodes(raw: bytes | memoryview) -> list[tuple[bytes, int, int]]:
    """A listnodes value's (hash, bytes, elements) per node (ValueError: not one)."""
    doc = msgpack.unpackb(raw, raw=True, use_list=True)
    if not isinstance(doc, list) or not all(
            isinstance(n, list) and len(n) == 3 and isinstance(n[0], bytes)
            and len(n[0]) == LIST_NODE_HASH_BYTES
            and all(isinstance(x, int) and x >= 0 for x in n[1:]) for n in doc):
        raise ValueError("a listnodes value is an array of [hash, bytes, elements]")
    return [(bytes(h), int(size), int(count)) for h, size, count in doc]


def encode_stream(number: int, length: int, first_id: int, last_id: int, max_deleted_id: int,
                  entries_added: int, nodes: int, groups: int, idmp: list | None = None) -> bytes:
    doc = {
        "number": number, "length": length, "first_id": id_bytes(first_id),
        "last_id": id_bytes(last_id), "max_deleted_id": id_bytes(max_deleted_id),
        "entries_added": entries_added, "nodes": nodes, "groups": groups,
    }
    if idmp is not None:
        doc["idmp"] = idmp
    return _packb(doc)


def run_key(number: int, first: int) -> bytes:
    return node_key(number, first)


def encode_run(part: int, part_number: int, last: int, nodes: int) -> bytes:
    return _packb([part, part_number, id_bytes(last), nodes])


def decode_run(raw: bytes | memoryview) -> tuple[int, int, int, int]:
    part, part_number, last, nodes = msgpack.unpackb(raw)
    if not (isinstance(part, int) and isinstance(part_number, int) and isinstance(nodes, int)
            and isinstance(last, bytes) and len(last) == 16 and part >= 0 and nodes > 0):
        raise ValueError("not a run")
    return part, part_number, id_int(last), nodes


def encode_idmp(duration: int, maxsize: int, added: int, duplicates: int,
                producers: Iterable[tuple[bytes, list[tuple[bytes, int, int]]]]) -> list:
    """A stream's IDMP state as the `idmp` item of its `streams` value (see the docstring)."""
    return [duration, maxsize, added, duplicates,
            [[pid, [[iid, id_bytes(sid), at] for iid, sid, at in recorded]]
             for pid, recorded in producers]]


def encode_node(live: int, size: int, master_fields: tuple | list, ids: list[int],
                fields: list) -> bytes:
    packed = b"".join(_NODE_KEY.pack(0, i >> 64, i & 0xFFFFFFFFFFFFFFFF)[8:] for i in ids)
    return _packb([live, size, list(master_fields), packed, fields])


class RawNode(NamedTuple):
    master: int  # the node's key: the ID of its first entry when it was created
    live: int
    size: int
    master_fields: tuple
    ids: list[int]
    fields: tuple  # per entry: a tuple of bins (field, value, ...) or None for a tombstone
    lp: bytearray | None = None  # the listpack (a packed snapshot's node), checked


def decode_packed_node(master: int, raw: bytes | memoryview) -> RawNode:
    """A version 4 node: its listpack checked (packed_node.Invalid when it is not one) and its
    entries decoded."""
    lp = bytearray(raw)
    _count, live, _last = packed_node.validate(lp, master)
    ids: list[int] = []
    fields: list[tuple | None] = []
    for sid, f, deleted in packed_node.entries(lp, master):
        ids.append(sid)
        fields.append(None if deleted else f)
    return RawNode(master, live, len(lp), packed_node.names(lp), ids, tuple(fields), lp)


def packed_from(master: int, raw: bytes | memoryview) -> tuple[bytearray, int, int]:
    """A version 4 node's listpack, checked, with its entries and live entries: what a load
    keeps, nothing decoded."""
    lp = bytearray(raw)
    count, live, _last = packed_node.validate(lp, master)
    return lp, count, live


def pack_raw_node(node: RawNode) -> bytearray:
    """An older snapshot's node as a listpack (a deleted entry's values are gone there: it is
    packed with empty ones)."""
    return packed_node.build(node.ids, list(node.fields), tuple(node.master_fields))


def decode_node(master: int, raw: bytes | memoryview) -> RawNode:
    live, size, master_fields, packed, fields = msgpack.unpackb(raw, raw=True, use_list=False)
    halves = struct.unpack(f">{len(packed) // 8}Q", packed)
    it = iter(halves)
    ids = [ms << 64 | seq for ms, seq in zip(it, it, strict=True)]
    return RawNode(master, live, size, master_fields, ids, fields)


def encode_node_info(live: int, size: int, entries: int, master_fields: tuple | list) -> bytes:
    return _packb([live, size, entries, list(master_fields)])


def decode_node_info(raw: bytes | memoryview) -> tuple[int, int, tuple, int]:
    """(live, size, master_fields, entries), as node_header returns them."""
    live, size, entries, master_fields = msgpack.unpackb(raw, raw=True, use_list=False)
    return live, size, master_fields, entries


_HEADER_PEEK = 512  # bytes of a node's value that hold its header, unless master fields are long


def node_header(raw: bytes | memoryview) -> tuple[int, int, tuple, int]:
    """(live, size, master_fields, entries) of a stored node without decoding its entries: what
    a lazy load keeps of a node it leaves in the snapshot."""
    up = msgpack.Unpacker(raw=True, use_list=False)
    up.feed(raw[:_HEADER_PEEK])
    try:
        if up.read_array_header() == 5:
            live, size, master_fields = up.unpack(), up.unpack(), up.unpack()
            tag = up.read_bytes(1)
            width = {b"\xc4": 1, b"\xc5": 2, b"\xc6": 4}.get(bytes(tag), 0)
            length = up.read_bytes(width)
            if width and len(length) == width:
                return live, size, master_fields, int.from_bytes(length, "big") // 16
    except msgpack.OutOfData:
        pass
    node = decode_node(0, bytes(raw))  # long master fields: the whole value it is
    return node.live, node.size, node.master_fields, len(node.ids)


def packed_node_header(raw: bytes | memoryview, master: int) -> tuple[int, int, tuple, int]:
    """node_header of a version 4 node (its listpack checked against its master ID: an entry's
    sequence is a delta from the master's and may be below zero)."""
    lp = bytearray(raw)
    count, live, _last = packed_node.validate(lp, master)
    return live, len(lp), packed_node.names(lp), count


def encode_group(last_id: int, entries_read: int, pending: int, consumers: int) -> bytes:
    return _packb({"last_id": id_bytes(last_id), "entries_read": entries_read,
                   "pending": pending, "consumers": consumers})


def encode_consumer(seen_time: int, active_time: int) -> bytes:
    return _packb([seen_time, active_time])


def encode_pending(consumer: bytes | None, delivery_time: int, delivery_count: int) -> bytes:
    return _packb([consumer, delivery_time, delivery_count])


def decode_binary(raw: bytes | memoryview) -> list:
    """A value whose strings are names (consumers, fields): kept as bytes."""
    return msgpack.unpackb(raw, raw=True, use_list=True)
