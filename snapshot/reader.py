"""The read-only snapshot API: everything in a snapshot, with no engine.

Owns opening a snapshot file read-only and answering: meta, the list of streams, entries of one
stream by ID range (reading only the nodes that hold them), ID ranges that split a stream for
parallel readers, groups, PEL, consumers, idempotent producers' maps (`StreamInfo.idmp`). The
AOF CLI, the Spark export and the engine's loader use it. Every value is checked as it is read
(snapshot.layout's checksums, version 2): damage, an LMDB error or an undecodable value raises
SnapshotError naming the file, the table and the key, never another exception and never a
different value. `check()` walks the whole file (verify --deep); `check_file` compares a file's
bytes with the manifest's checksum before LMDB maps it (snapshot.integrity uses it).

A segmented snapshot (version 5, a compaction's) keeps its nodes in part files beside it, named
by its `parts` meta value and opened with it (so a compaction that deletes one later does not
take it from an open reader); its runs table says which part holds which run of a stream's
nodes. Every node read routes through `runs`: callers see one snapshot either way. A big
value's chunks (value_chunks, value_chunk_rows, value_elements) follow its keys row the same
way: one run of its own chunks, or runs of chunks from several values and part files (a list
a compaction partly referred to), checked run by run; a list's indexes are counted from the
chunks' order. A list's node index (`list_node_index`, the listnodes rows: each chunk's nodes'
hashes, bytes and elements) follows the same runs, and `chunk_stored` reads one chunk as stored
(a cold list node's read-back, snapshot.cold). Must not touch: the engine, the manifest; it
never writes.

    with Snapshot("data/snapshot-000000001234.mdb") as snap:
        for info in snap.streams():
            for ranges in snap.split(info.db, info.key, parts=4): ...
            for entry in snap.entries(info.db, info.key, start=ID(0, 0)): ...
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial, wraps
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import lmdb
import msgpack

from streamkeep.engine.model import packed_node
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.layout import ID, MAX_ID, RawNode

if TYPE_CHECKING:
    from streamkeep.aof.fs import FileSystem

T = TypeVar("T")
# What decoding a damaged value of an unchecked (version 1) snapshot can raise.
_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, struct.error,
                  msgpack.UnpackException)


class SnapshotError(StorageError):
    """Not a streamkeep snapshot, one of an unsupported version, or a damaged one: the message
    names the file (and the table and key of a damaged value)."""


def check_file(path: str, expected: int, read_chunks: Callable[[], Iterator[bytes]]
               | None = None) -> None:
    """The file's bytes are the ones the manifest's checksum (`crc32`) recorded, or
    SnapshotError. Run before LMDB maps a file whose damage could be anywhere, its page
    structure included (what per-value checks cannot see)."""
    got = layout.file_checksum((read_chunks or (lambda: file_chunks(path)))())
    if got != expected:
        raise SnapshotError(f"{path}: damaged: its checksum is {got:08x}, the manifest "
                            f"recorded {expected:08x} when the snapshot was written")


def file_chunks(path: str) -> Iterator[bytes]:
    """A file's bytes, FILE_CHUNK at a time (for its checksum)."""
    from streamkeep.aof.fs import RealFS

    fs = RealFS()
    try:
        fd = fs.open_read(path)
    except OSError as err:
        raise SnapshotError(f"{path}: cannot read ({err.strerror})") from None
    try:
        offset = 0
        while chunk := fs.pread(fd, layout.FILE_CHUNK, offset):
            offset += len(chunk)
            yield chunk
    finally:
        fs.close(fd)


@dataclass(frozen=True, slots=True)
class Meta:
    format: str
    version: int
    lsn: int
    created_ms: int
    repl_id: str
    repl_offset: int
    streams: int
    entries: int


@dataclass(frozen=True, slots=True)
class StreamInfo:
    db: int
    key: bytes
    number: int  # the stream's number inside this snapshot (keys of its nodes, groups, ...)
    length: int
    first_id: ID
    last_id: ID
    max_deleted_id: ID
    entries_added: int
    nodes: int
    groups: int
    idmp: IdmpInfo | None = None  # idempotent producers (XADD IDMP); None: never used


class KeyInfo(NamedTuple):
    """A row of the keys table: the value's bytes (None: the key is a stream, or the value is
    chunked), the key's
    expiry time in ms (None: no TTL) and the value's type ("string", "zset", ...: the word TYPE
    says; None for a stream's row), whose `from_bytes` reads `value`
    (engine.model.value_types)."""

    db: int
    key: bytes
    value: bytes | None
    expires_ms: int | None
    type: str | None = None
    # A big value stored in chunks (snapshot.values): where they are; `value` is None then.
    # Read them with Snapshot.value_chunks or value_elements.
    chunked: layout.ChunkRef | None = None


class IdempotentID(NamedTuple):
    iid: bytes
    id: ID  # the entry it produced
    recorded_ms: int  # when (command time); it expires duration seconds later


@dataclass(frozen=True, slots=True)
class IdmpInfo:
    """A stream's idempotent-producer state (Redis 8.6): settings, lifetime counters, and each
    producer's recent iids, oldest first."""

    duration: int  # seconds an iid is kept
    maxsize: int  # iids kept per producer
    added: int
    duplicates: int
    producers: tuple[tuple[bytes, tuple[IdempotentID, ...]], ...]


class Entry(NamedTuple):
    id: ID
    fields: tuple[bytes, ...]  # field, value, field, value, ... in the order they were added


@dataclass(frozen=True, slots=True)
class GroupInfo:
    name: bytes
    last_id: ID
    entries_read: int  # -1: unknown (Redis reports nil lag then)
    pending: int
    consumers: int


class PendingEntry(NamedTuple):
    id: ID
    consumer: bytes | None  # None: released by XNACK (Redis 8.8), owned by no consumer
    delivery_time: int
    delivery_count: int


class ConsumerInfo(NamedTuple):
    name: bytes
    seen_time: int
    active_time: int  # -1: never delivered anything


IDLike = ID | int | str


def _as_int(value: IDLike, missing_seq: int = 0) -> int:
    """An ID bound as an int. A string without a sequence ("7") means 7-0 as a start and
    7-<max> as an end, as XRANGE reads incomplete IDs."""
    if isinstance(value, ID):
        return value.as_int()
    if isinstance(value, str):
        ms, dash, seq = value.partition("-")
        return int(ms) << 64 | (int(seq) if dash else missing_seq)
    return value


# py-lmdb refuses to open one file twice in a process, even read-only and without locks: the
# Snapshot objects of a process share one environment per file, closed with its last user.
_envs_lock = threading.Lock()
_envs: dict[tuple[int, int], list] = {}  # (st_dev, st_ino) -> [environment, users]


def _open_env(path: str) -> tuple[tuple[int, int], lmdb.Environment, int]:
    with _envs_lock:
        try:
            st = os.stat(path)
        except OSError as err:
            raise SnapshotError(f"{path}: not a readable LMDB snapshot ({err.strerror})") from None
        key = (st.st_dev, st.st_ino)
        shared = _envs.get(key)
        if shared is None:
            if st.st_size == 0 and stat.S_ISREG(st.st_mode):  # (LMDB: "Bad file descriptor")
                raise SnapshotError(f"{path}: not a readable LMDB snapshot (an empty file)")
            try:
                env = lmdb.open(path, subdir=False, readonly=True, lock=False,
                                max_dbs=layout.MAX_TABLES)
            except lmdb.Error as err:
                raise SnapshotError(f"{path}: not a readable LMDB snapshot ({err})") from None
            shared = _envs[key] = [env, 0]
        shared[1] += 1
        return key, shared[0], st.st_size


def _release_env(key: tuple[int, int]) -> None:
    with _envs_lock:
        shared = _envs[key]
        shared[1] -= 1
        if not shared[1]:
            del _envs[key]
            shared[0].close()


def _no_node(number: int, master: int) -> None:
    return None


def _no_pair(number: int, master: int) -> tuple[None, None]:
    return None, None


def _key_error(number: int, master: int) -> Any:
    raise KeyError(f"no node {master} in stream {number}")


def _routed(missing: Callable[[int, int], Any]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A node read by (stream number, master) that a segmented snapshot hands to the part file
    holding the node, under the stream's number there; `missing` answers for a node no run
    covers (as the method does for a node the file lacks)."""
    def wrap(method: Callable[..., T]) -> Callable[..., T]:
        @wraps(method)
        def routed(self: Snapshot, number: int, master: int, *args: Any) -> T:
            if not self.segmented:
                return method(self, number, master, *args)
            found = self._route(number, master)
            if found is None:
                return missing(number, master)  # type: ignore[no-any-return]
            return method(found[0], found[1], master, *args)
        return routed
    return wrap


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive nodes of a stream held by one file: every node of stream `number` in `part`
    from master `first` to master `last` (`nodes` of them; -1: not recorded, a self-contained
    snapshot's single run)."""

    first: int
    last: int
    nodes: int
    part: Snapshot
    number: int
    index: int = -1  # the part's place in the snapshot's `parts` (-1: the file itself)
    owner: Snapshot | None = None  # the segmented snapshot whose runs table has it


@dataclass(frozen=True, slots=True)
class PartInfo:
    """A part file as the snapshot's `parts` meta value lists it."""

    file: str
    size: int  # the file's bytes
    nodes: int


class Snapshot:
    """A snapshot file opened read-only. Safe to open from several processes at once, and
    several times in one process (the objects share one LMDB environment)."""

    def __init__(self, path: str, name: str | None = None, parts: bool = True,
                 part_suffix: str = "") -> None:
        if path is None:  # current_snapshot() before a directory's first compaction
            raise SnapshotError("no snapshot to open: the data directory has none yet (nothing "
                                "compacted: Engine.compact(), SAVE or BGSAVE makes one)")
        self.path = path
        self.name = name or path  # what messages call the file (a pin's: the user's file)
        self._key: tuple[int, int] | None = None
        self._reads: Any = None  # the long-lived read transaction of `node_view`
        self.parts: list[Snapshot] = []  # a segmented snapshot's part files, opened with it
        self.part_infos: list[PartInfo] = []
        self._runs: dict[int, tuple[list[int], list[Run]]] = {}
        self._part_suffix = part_suffix  # a replica's full sync reads parts under temp names
        self._key, self.env, self.size = _open_env(path)
        size = self.size
        try:
            # LMDB maps the file: a page past the end of a truncated file is SIGBUS, not an
            # error, so check that every page the newest meta page counts is there.
            needed = (self.env.info()["last_pgno"] + 1) * self.env.stat()["psize"]
            if size < needed:
                raise SnapshotError(f"{path}: truncated ({size} bytes, LMDB needs {needed})")
            try:
                self._tables = {name: self.env.open_db(name.encode(), create=False)
                                for name in layout.TABLES}
            except lmdb.Error:
                raise SnapshotError(f"{path}: not a streamkeep snapshot (tables missing)") \
                    from None
            for name in layout.OPTIONAL_TABLES:
                with contextlib.suppress(lmdb.Error):  # an older snapshot: readers fall back
                    self._tables[name] = self.env.open_db(name.encode(), create=False)
            self.meta = self._read_meta()
            self._read_parts(parts)
        except lmdb.Error as err:
            self.close()
            raise SnapshotError(f"{path}: {err} (the file is damaged)") from None
        except BaseException:
            self.close()
            raise

    @property
    def tables(self) -> frozenset[str]:
        """The tables this file has (the oldest snapshots lack `nodeinfo`)."""
        return frozenset(self._tables)

    def files(self) -> list[tuple[tuple[int, int], int]]:
        """(identity, size) of this file and its part files as they were opened: the identity
        (device, inode) names their maps even once a compaction unlinks them
        (aof.fs.mapped_ranges_of)."""
        return [(part._key, part.size) for part in (self, *self.parts) if part._key is not None]

    def close(self) -> None:
        self.end_reads()
        parts, self.parts = self.parts, []
        for part in parts:
            part.close()
        if self._key is not None:
            key, self._key = self._key, None
            _release_env(key)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_meta(self) -> Meta:
        with self._txn("meta") as txn:
            raw_meta = {bytes(k): bytes(v) for k, v in txn.cursor()}
        raw_version = raw_meta.get(b"version")
        version = None if raw_version is None else layout.meta_version(raw_version)
        if version is None:
            if raw_meta.get(b"format") is None:
                raise SnapshotError(f"{self.name}: not a streamkeep snapshot")
            raise SnapshotError(f"{self.name}: table meta, {layout.describe_key('meta', b'version')}"
                                f": damaged (the check of its value fails)")
        if version not in (layout.UNCHECKED_VERSION, layout.KEYLESS_VERSION,
                           layout.UNPACKED_VERSION, layout.VERSION, layout.SEGMENTED_VERSION):
            raise SnapshotError(f"{self.name}: unsupported snapshot version {version}")
        self.version = version
        self.checked = version != layout.UNCHECKED_VERSION
        self.packed = version >= layout.VERSION  # nodes stored as listpacks
        doc = {key.decode(errors="replace"): self._decode("meta", key, raw, layout.decode_value)
               for key, raw in raw_meta.items()}
        self.role = doc.get("role")  # "nodes": a segmented snapshot's part file
        self.segmented = version >= layout.SEGMENTED_VERSION and self.role != layout.NODES_ROLE
        self._parts_doc = doc.get("parts", [])
        self.functions: bytes | None = doc.get("functions")  # FUNCTION DUMP's payload
        if doc.get("format") != layout.FORMAT:
            raise SnapshotError(f"{self.name}: not a streamkeep snapshot")
        missing = [name for name in Meta.__dataclass_fields__ if name not in doc]
        if missing:
            raise SnapshotError(f"{self.name}: meta lacks {', '.join(missing)}")
        return Meta(**{name: doc[name] for name in Meta.__dataclass_fields__})

    def _read_parts(self, open_them: bool) -> None:
        """A segmented snapshot's part files, from its directory (all opened now unless
        `open_them` is false: see the module docstring)."""
        if not self.segmented:
            return
        if "runs" not in self._tables:
            raise SnapshotError(f"{self.name}: a segmented snapshot without its runs table")
        directory = os.path.dirname(self.path)
        try:
            self.part_infos = [PartInfo(str(name), int(size), int(nodes))
                               for name, size, nodes in self._parts_doc]
        except (TypeError, ValueError) as err:
            raise SnapshotError(f"{self.name}: table meta, meta 'parts': undecodable value "
                                f"({err})") from None
        for info in self.part_infos:
            if os.path.basename(info.file) != info.file:
                raise SnapshotError(f"{self.name}: part {info.file!r} is not a file name")
        if not open_them:
            return
        for info in self.part_infos:
            try:
                file = os.path.join(directory, info.file)
                part = Snapshot(file + self._part_suffix, name=f"{file} (a part of {self.name})")
            except SnapshotError as err:
                raise SnapshotError(f"{self.name}: its part {info.file}: {err}") from None
            self.parts.append(part)
            if part.role != layout.NODES_ROLE and not (part.packed and not part.segmented):
                raise SnapshotError(f"{self.name}: {info.file} is not a part file")

    def runs(self, number: int) -> list[Run]:
        """Stream `number`'s nodes, file by file, in ID order: one run, this file, unless the
        snapshot is segmented."""
        return self._run_index(number)[1]

    def _run_index(self, number: int) -> tuple[list[int], list[Run]]:
        found = self._runs.get(number)
        if found is not None:
            return found
        if not self.segmented:
            runs = [Run(0, MAX_ID, -1, self, number)]
        else:
            runs = []
            for raw, value in self._prefixed("runs", layout.number_prefix(number)):
                index, part_number, last, nodes = self._decode("runs", raw, value,
                                                               layout.decode_run)
                if index >= len(self.parts):
                    raise self.damaged("runs", raw, f"names part {index}, of "
                                                    f"{len(self.parts)}")
                runs.append(Run(layout.node_master(raw), last, nodes, self.parts[index],
                                part_number, index, self))
        found = self._runs[number] = ([run.first for run in runs], runs)
        return found

    def locate(self, number: int, master: int) -> Run | None:
        """The run that holds node `master` of stream `number`, if any holds it: its file and
        the stream's number there."""
        firsts, runs = self._run_index(number)
        i = bisect_right(firsts, master) - 1
        if i < 0 or master > runs[i].last:
            return None
        return runs[i]

    def _route(self, number: int, master: int) -> tuple[Snapshot, int] | None:
        run = self.locate(number, master)
        return None if run is None else (run.part, run.number)

    def _runs_from(self, number: int, start: int, end: int) -> Iterator[tuple[Run, int]]:
        """The runs that may hold IDs in [start, end], each with the ID its reading starts
        at (the node holding `start` is the last one whose master is <= start)."""
        firsts, runs = self._run_index(number)
        i = max(bisect_right(firsts, start) - 1, 0)
        for run in runs[i:]:
            if run.first > end:
                return
            yield run, max(start, run.first)

    # --- checked reads -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _txn(self, table: str, buffers: bool = False) -> Iterator[Any]:
        """A read transaction on one table; an LMDB error (a damaged page) is a SnapshotError
        naming the file and the table."""
        try:
            db = self._tables[table]
            with self.env.begin(db=db, buffers=buffers) as txn:  # type: ignore[call-overload]
                yield txn
        except lmdb.Error as err:
            raise SnapshotError(f"{self.name}: table {table}: {err} (the file is damaged)") \
                from None

    def damaged(self, table: str, key: bytes, why: str) -> SnapshotError:
        """The error for one damaged value, naming the file, table and key (its stream by name
        when the streams table can tell)."""
        names: dict[int, str] = {}
        if table not in ("meta", "streams"):
            with contextlib.suppress(SnapshotError, *_DECODE_ERRORS):
                names = {info.number: f"{info.key.decode(errors='backslashreplace')!r} (db "
                                      f"{info.db})" for info in self.streams()}
        return SnapshotError(f"{self.name}: table {table}, "
                             f"{layout.describe_key(table, key, names)}: {why}")

    def _body(self, table: str, key: bytes, value: bytes | memoryview) -> bytes | memoryview:
        """A stored value's body, its check verified (version 2; version 1 has none)."""
        if not self.checked:
            return value
        body = layout.unseal(table, key, value)
        if body is None:
            raise self.damaged(table, key, "checksum mismatch: the stored value is damaged")
        return body

    def _decode(self, table: str, key: bytes, value: bytes | memoryview,
                decode: Callable[[Any], T]) -> T:
        """A stored value checked and decoded; SnapshotError if either fails."""
        body = self._body(table, key, value)
        try:
            return decode(body)
        except _DECODE_ERRORS as err:
            raise self.damaged(table, key, f"undecodable value ({err})") from None

    # --- streams -------------------------------------------------------------------------------

    def streams(self, db: int | None = None) -> list[StreamInfo]:
        """Every stream (of one database if given), by database then key."""
        prefix = b"" if db is None else bytes((db,))
        return [self._stream_info(raw, value) for raw, value in self._prefixed("streams", prefix)]

    def key_rows(self, db: int | None = None, first: bytes = b"",
                 last: bytes | None = None) -> list[KeyInfo]:
        """Every key that is not a stream and every key with a TTL (of one database if given,
        and then only its keys from `first` to `last` inclusive, if given), by database then
        key; none in a snapshot older than the keys table."""
        if "keys" not in self._tables:
            return []
        prefix = b"" if db is None else bytes((db,))
        found = []
        for raw, stored in self._prefixed("keys", prefix, start=prefix + first):
            if last is not None and raw[1:] > last:
                break
            value, expires_ms, type_name, ref = self._decode("keys", raw, stored,
                                                             layout.decode_key_row)
            db_index, key = layout.split_stream_key(raw)
            found.append(KeyInfo(db_index, key, value, expires_ms, type_name, ref))
        return found

    # --- chunked values ------------------------------------------------------------------------

    def chunk_home(self, row: KeyInfo) -> tuple[Snapshot, int]:
        """The file holding a chunked value's chunks (this one, or one of its parts), and the
        value's number there (of its first run, for a row of several)."""
        ref = row.chunked
        if ref is None:
            raise ValueError(f"key {row.key!r} of database {row.db} is not chunked")
        return self._run_file(row, ref.runs[0]), ref.runs[0].number

    def _run_file(self, row: KeyInfo, run: layout.ChunkRun) -> Snapshot:
        if run.part is None:
            return self
        if run.part >= len(self.parts):
            raise self.damaged("keys", layout.stream_key(row.db, row.key),
                               f"names part {run.part}, of {len(self.parts)}")
        return self.parts[run.part]

    def value_chunks(self, row: KeyInfo) -> Iterator[bytes]:
        """A chunked value's chunk bodies, in order, each checked as it is read (one at a
        time): a missing, extra or damaged chunk is a SnapshotError naming the file, the key
        and the chunk."""
        for _part, _run, _index, body in self.value_chunk_rows(row):
            yield body

    def value_chunk_rows(self, row: KeyInfo
                         ) -> Iterator[tuple[Snapshot, layout.ChunkRun, int, bytes]]:
        """value_chunks' bodies with where each is: (file, run, chunk index, body), following
        the row's runs (a second-form row's from several values and files)."""
        ref = row.chunked
        if ref is None:
            raise ValueError(f"key {row.key!r} of database {row.db} is not chunked")
        where = f"key {row.key.decode(errors='backslashreplace')!r} (db {row.db})"
        for run in ref.runs:
            part = self._run_file(row, run)
            end = run.first + run.chunks
            of = f"of {ref.chunks} recorded" if ref.indexed else \
                f"of value #{run.number}'s chunks {run.first} to {end - 1}, referred to"
            expected = run.first
            for raw, stored in part._prefixed("chunks", layout.number_prefix(run.number),
                                              start=layout.chunk_key(run.number, run.first)):
                index = layout.split_chunk_key(raw)[1]
                if index >= end and not ref.indexed:
                    break
                if index != expected:
                    what = "missing" if index > expected else "out of place"
                    raise SnapshotError(f"{part.name}: table chunks, {where}, chunk {expected}:"
                                        f" {what} ({of})")
                if index >= end:
                    raise SnapshotError(f"{part.name}: table chunks, {where}: more than the "
                                        f"{ref.chunks} chunks recorded")
                body = layout.unseal("chunks", raw, stored) if part.checked else stored
                if body is None:
                    raise SnapshotError(f"{part.name}: table chunks, {where}, chunk {index}: "
                                        f"checksum mismatch: the stored value is damaged")
                yield part, run, index, bytes(body)
                expected += 1
            if expected != end:
                raise SnapshotError(f"{part.name}: table chunks, {where}, chunk {expected}: "
                                    f"missing ({of})")

    def value_elements(self, row: KeyInfo) -> Iterator[tuple]:
        """A chunked value's elements, chunk by chunk, as tools.value_tables' columns have
        them (snapshot.values.chunk_elements; a list's indexes counted from the chunks'
        order); damage is a SnapshotError naming the key and the chunk."""
        from streamkeep.snapshot.values import chunk_elements

        ref = row.chunked
        assert row.type is not None and ref is not None
        where = f"key {row.key.decode(errors='backslashreplace')!r} (db {row.db})"
        count = 0
        name = self.chunk_home(row)[0].name
        for part, _run, index, body in self.value_chunk_rows(row):
            name = part.name
            try:
                elements = chunk_elements(row.type, body, at=count, check=ref.indexed)
            except _DECODE_ERRORS as err:
                raise SnapshotError(f"{part.name}: table chunks, {where}, chunk {index}: "
                                    f"undecodable value ({err})") from None
            count += len(elements)
            if count > ref.elements:
                raise SnapshotError(f"{part.name}: table chunks, {where}, chunk {index}: "
                                    f"more than the {ref.elements} elements recorded")
            yield from elements
        if count != ref.elements:
            raise SnapshotError(f"{name}: table chunks, {where}: "
                                f"{count} elements found, {ref.elements} recorded")

    def list_node_index(self, row: KeyInfo
                        ) -> Iterator[tuple[int, int, int, list[tuple[bytes, int, int]]]]:
        """A chunked list's node index, chunk by chunk, following the row's runs: (part index
        in `parts`, -1 for this file; the value's number there; chunk index; each node's hash,
        bytes and elements), for the chunks that have a listnodes row (an older snapshot's
        chunks have none: skipped). Each row is checked as it is read."""
        return self._chunk_index(row, "listnodes", layout.decode_list_nodes)

    def table_run_index(self, row: KeyInfo
                        ) -> Iterator[tuple[int, int, int, layout.TableRunRow]]:
        """A chunked hash's or set's runs of buckets, chunk by chunk, following the row's
        runs: (part index in `parts`, -1 for this file; the value's number there; chunk index;
        its tableruns row), for the chunks that have one (an older snapshot's have none:
        skipped). Each row is checked as it is read."""
        return self._chunk_index(row, "tableruns", layout.decode_table_run)

    def _chunk_index(self, row: KeyInfo, table: str, decode: Callable[[Any], T]
                     ) -> Iterator[tuple[int, int, int, T]]:
        ref = row.chunked
        if ref is None:
            raise ValueError(f"key {row.key!r} of database {row.db} is not chunked")
        for run in ref.runs:
            part = self._run_file(row, run)
            if table not in part._tables:
                continue
            end = run.first + run.chunks
            for raw, stored in part._prefixed(table, layout.number_prefix(run.number),
                                              start=layout.chunk_key(run.number, run.first)):
                index = layout.split_chunk_key(raw)[1]
                if index >= end:
                    break
                yield (-1 if run.part is None else run.part, run.number, index,
                       part._decode(table, raw, stored, decode))

    def chunk_stored(self, number: int, index: int) -> bytes | None:
        """One chunk's value as stored, unchecked (None: no such chunk)."""
        if "chunks" not in self._tables:
            return None
        return self._get("chunks", layout.chunk_key(number, index))

    def _check_chunks(self, problems: list[str], limit: int) -> None:
        """Every chunked value's chunks: there, sound, decodable, as many elements as
        recorded; and each tableruns row the run its chunk holds, at the place it records."""
        from streamkeep.aof.fs import RealFS

        fs, fds = RealFS(), {}  # (each file opened once for the rows' reads)
        try:
            for row in self.key_rows():
                if row.chunked is None or row.type is None:
                    continue
                try:
                    for _element in self.value_elements(row):
                        pass
                    for part, number, index, run in self.table_run_index(row):
                        snap = self if part < 0 else self.parts[part]
                        if snap.path not in fds:
                            fds[snap.path] = snap._opened(fs)
                        why = snap._run_row_problem(row.type, number, index, run,
                                                    partial(fs.pread, fds[snap.path]))
                        if why is not None:
                            raise SnapshotError(
                                f"{snap.name}: table tableruns, key "
                                f"{row.key.decode(errors='backslashreplace')!r} (db {row.db}), "
                                f"chunk {index}: {why}")
                except SnapshotError as err:
                    problems.append(str(err))
                    if len(problems) >= limit:
                        return
        finally:
            for fd in fds.values():
                fs.close(fd)

    def _opened(self, fs: FileSystem) -> int:
        """This file opened for reading (SnapshotError naming it when it cannot be)."""
        try:
            return fs.open_read(self.path)
        except OSError as err:
            raise SnapshotError(f"{self.name}: cannot read ({err.strerror})") from None

    def _run_row_problem(self, type_name: str, number: int, index: int,
                         run: layout.TableRunRow, pread: Callable[[int, int], bytes]
                         ) -> str | None:
        """How the tableruns row of this file's chunk `index` of value `number` (of type
        `type_name`; the chunk itself checked already) fails to describe it, None if it does:
        the run the chunk holds (its placement, first bucket, buckets, records, bytes, hash,
        extras), and the chunk's stored value at the place the row records in the file
        (`pread(size, offset)` reads the file)."""
        from streamkeep.snapshot.value_formats import run_row, table_chunk
        from streamkeep.snapshot.values import chunk_elements

        stored = self._get("chunks", layout.chunk_key(number, index))
        if stored is None:
            return "describes a chunk the file does not hold"
        body = layout.unseal("chunks", layout.chunk_key(number, index), stored)
        try:
            chunk = None if body is None else table_chunk(body)
        except ValueError:
            chunk = None
        if body is None or chunk is None:
            return "describes a chunk that is not a run of a table's buckets"
        described = run_row(chunk, len(chunk_elements(type_name, body)))
        if run._replace(offset=-1, stored=0) != described:
            return "describes another run than its chunk holds"
        if run.offset >= 0 and pread(run.stored, run.offset) != stored:
            return (f"places its chunk at offset {run.offset} ({run.stored} bytes) of the "
                    f"file, where the chunk is not")
        return None

    def stream(self, db: int, key: bytes) -> StreamInfo | None:
        raw = layout.stream_key(db, key)
        with self._txn("streams") as txn:
            value = txn.get(raw)
        return None if value is None else self._stream_info(raw, value)

    def _stream_info(self, raw: bytes, value: bytes) -> StreamInfo:
        return self._decode("streams", raw, value, lambda body: _stream_info(raw, body))

    def _number(self, db: int, key: bytes) -> int:
        info = self.stream(db, key)
        if info is None:
            raise KeyError(f"no stream {key!r} in database {db}")
        return info.number

    # --- entries -------------------------------------------------------------------------------

    def nodes(self, number: int, start: int = 0, end: int = MAX_ID) -> Iterator[RawNode]:
        """Decoded nodes of stream `number` that may hold IDs in [start, end], in order."""
        for run, low in self._runs_from(number, start, end):
            yield from run.part._run_nodes(run.number, low, min(end, run.last), run.first)

    def _run_nodes(self, number: int, start: int, end: int, floor: int) -> Iterator[RawNode]:
        """This file's nodes of stream `number` that may hold IDs in [start, end], none with a
        master below `floor` (where the run begins)."""
        prefix = layout.number_prefix(number)
        with self._txn("nodes", buffers=True) as txn:
            cursor = txn.cursor()
            # The node holding `start` is the last one whose master ID is <= start: seek to the
            # first master >= start, and step back one node unless that master is start itself.
            target = layout.node_key(number, start)
            found = cursor.set_range(target)
            if not (found and bytes(cursor.key()) == target):
                moved = cursor.prev() if found else cursor.last()
                if not (moved and bytes(cursor.key()).startswith(prefix)) \
                        and not cursor.set_range(target):
                    return
            for raw_key, value in cursor:
                raw = bytes(raw_key)
                master = layout.node_master(raw)
                if not raw.startswith(prefix) or master > end:
                    return
                if master < floor:  # stepped back past the run's first node
                    continue
                # Checked and decoded in place: the buffer is valid until the next step.
                yield self._decode("nodes", raw, value, self._node_decoder(master))

    def _node_decoder(self, master: int) -> Callable[[Any], RawNode]:
        return partial(layout.decode_packed_node if self.packed else layout.decode_node, master)

    def node_buffers(self, number: int) -> Iterator[tuple[int, bytearray, int, int]]:
        """(master, listpack, entries, live entries) of each node of stream `number`, in
        order, each checked: what a load keeps (a packed snapshot's nodes are copied, not
        decoded; an older one's are packed on the way)."""
        for run in self.runs(number):
            yield from run.part._run_node_buffers(run)

    def _run_node_buffers(self, run: Run) -> Iterator[tuple[int, bytearray, int, int]]:
        for raw, value in self._in_run("nodes", run):
            master = layout.node_master(raw)
            if self.packed:
                yield (master, *self._decode("nodes", raw, value,
                                             partial(layout.packed_from, master)))
            else:
                node = self._decode("nodes", raw, value, partial(layout.decode_node, master))
                yield master, layout.pack_raw_node(node), len(node.ids), node.live

    @_routed(_no_node)
    def node_buffer(self, number: int, master: int) -> bytearray | None:
        """One node's listpack, checked (None: no such node): a cold node's read-back."""
        value = self.node_stored(number, master)
        if value is None:
            return None
        key = layout.node_key(number, master)
        if self.packed:
            return self._decode("nodes", key, value, partial(layout.packed_from, master))[0]
        return layout.pack_raw_node(self._decode("nodes", key, value,
                                                 partial(layout.decode_node, master)))

    @_routed(_no_node)
    def node_readback(self, number: int, master: int, trusted_crc: int = -1
                      ) -> tuple[bytearray, int] | None:
        """One node's listpack and its CRC-32, checked (None: no such node): a cold node's
        read-back, the fast way. The stored value's checksum is always verified; the listpack's
        structure (`packed_node.validate`) too, unless its CRC is `trusted_crc`: bytes the
        caller held as a node before (validated then, or built by this process), so known to be
        well formed. (An older snapshot's node is decoded and packed: its CRC is -1.)"""
        if not self.packed:
            lp = self.node_buffer(number, master)
            return None if lp is None else (lp, -1)
        key = layout.node_key(number, master)
        txn = self._reads
        if txn is None:  # (node_view's read, inline: this is every cold read's path)
            value = self.node_view(key)
        else:
            try:
                value = txn.get(key)
            except lmdb.Error as err:
                self.end_reads()
                raise SnapshotError(f"{self.name}: table nodes: {err} (the file is damaged)") \
                    from None
        if value is None:
            return None
        found = layout.unseal_node(key, value)
        if found is None:
            raise self.damaged("nodes", key, "checksum mismatch: the stored value is damaged")
        lp = found[0]
        if found[1] != trusted_crc:
            try:
                packed_node.validate(lp, master)
            except _DECODE_ERRORS as err:
                raise self.damaged("nodes", key, f"undecodable value ({err})") from None
        return found

    @_routed(_no_node)
    def node(self, number: int, master: int) -> RawNode | None:
        """One node, checked and decoded (None: no such node)."""
        value = self.node_stored(number, master)
        if value is None:
            return None
        return self._decode("nodes", layout.node_key(number, master), value,
                            self._node_decoder(master))

    @_routed(_no_node)
    def node_stored(self, number: int, master: int) -> bytes | None:
        """One node's value exactly as stored, unchecked (None: no such node)."""
        return self._get("nodes", layout.node_key(number, master))

    def node_view(self, key: bytes) -> memoryview | None:
        """One node's value as stored under `key`, unchecked, as a view into the file's map
        (None: no such node): the cold nodes' read-back, the caller's to check and copy before
        its next call. The reads share one read transaction, kept open until `end_reads` or
        `close`: a snapshot file is never written once made, so the view it gives stays that of
        the file (a newer snapshot is another file, another Snapshot). One thread at a time
        (the engine's lock)."""
        txn = self._reads
        try:
            if txn is None:
                txn = self._reads = self.env.begin(db=self._tables["nodes"], buffers=True)
            return txn.get(key)  # type: ignore[no-any-return]
        except lmdb.Error as err:
            self.end_reads()
            raise SnapshotError(f"{self.name}: table nodes: {err} (the file is damaged)") \
                from None

    def chunk_view(self, number: int, index: int) -> memoryview | None:
        """One chunk's value as stored, unchecked, as a view into the file's map (None: no
        such chunk), read in `node_view`'s transaction and under its terms. The view's pages
        are not touched until it is read: a caller may read the bytes from the file instead,
        at the view's offset in the map (snapshot.cold)."""
        if "chunks" not in self._tables:
            return None
        txn = self._reads
        try:
            if txn is None:
                txn = self._reads = self.env.begin(db=self._tables["nodes"], buffers=True)
            return txn.get(layout.chunk_key(number, index),  # type: ignore[no-any-return]
                           db=self._tables["chunks"])
        except lmdb.Error as err:
            self.end_reads()
            raise SnapshotError(f"{self.name}: table chunks: {err} (the file is damaged)") \
                from None

    def chunk_views(self, number: int, first: int, end: int
                    ) -> Iterator[tuple[int, memoryview]]:
        """(chunk index, its stored value as a view into the file's map, unchecked) of the
        value `number`'s chunks from `first` to before `end`, in order, those there. The
        views' pages are not touched (only the B-tree's): a caller may note where each value
        is in the file and read it from there later (snapshot.cold)."""
        if "chunks" not in self._tables:
            return
        for key, view in self._prefixed("chunks", layout.number_prefix(number), buffers=True,
                                        start=layout.chunk_key(number, first)):
            index = layout.split_chunk_key(key)[1]
            if index >= end:
                return
            yield index, view

    def end_reads(self) -> None:
        """End `node_view`'s transaction (a later read begins another), the parts' too."""
        for part in self.parts:
            part.end_reads()
        txn, self._reads = self._reads, None
        if txn is not None:
            with contextlib.suppress(lmdb.Error):
                txn.abort()

    @_routed(_no_pair)
    def node_pair_stored(self, number: int, master: int) -> tuple[bytes | None, bytes | None]:
        """One node's `nodes` and `nodeinfo` values exactly as stored, unchecked, in one read
        (None: not there): what a compaction moves to its next snapshot (`layout.reseal`
        checks them on the way)."""
        key = layout.node_key(number, master)
        tables = self._tables
        info = tables.get("nodeinfo")
        try:
            with self.env.begin() as txn:
                return (txn.get(key, db=tables["nodes"]),
                        None if info is None else txn.get(key, db=info))
        except lmdb.Error as err:
            raise SnapshotError(f"{self.name}: table nodes: {err} (the file is damaged)") \
                from None

    def _get(self, table: str, key: bytes) -> bytes | None:
        """One stored value (unchecked), read in a transaction of its own: the cold nodes'
        and the compaction's path, without `_txn`'s generator."""
        try:
            with self.env.begin(db=self._tables[table]) as txn:
                return txn.get(key)  # type: ignore[no-any-return]
        except lmdb.Error as err:
            raise SnapshotError(f"{self.name}: table {table}: {err} (the file is damaged)") \
                from None

    @_routed(_no_node)
    def node_raw(self, number: int, master: int) -> bytes | memoryview | None:
        """One node's body, checked (None: no such node)."""
        value = self.node_stored(number, master)
        if value is None:
            return None
        return self._body("nodes", layout.node_key(number, master), value)

    @_routed(_key_error)
    def node_info_stored(self, number: int, master: int) -> bytes:
        """One node's `nodeinfo` value as stored, unchecked (in the oldest snapshots, which
        have no such table, made bare from the node's head). KeyError: no such node."""
        key = layout.node_key(number, master)
        if "nodeinfo" in self._tables:
            value = self._get("nodeinfo", key)
            if value is not None:
                return value
        raw = self.node_stored(number, master)
        if raw is None:
            raise KeyError(f"no node {master} in stream {number}")
        live, size, master_fields, entries = self._decode("nodes", key, raw,
                                                          self._header_decoder(master))
        return layout.encode_node_info(live, size, entries, master_fields)

    @_routed(_key_error)
    def node_info_raw(self, number: int, master: int) -> bytes | memoryview:
        """One node's `nodeinfo` body, checked (made from its header in the oldest snapshots).
        KeyError: no such node."""
        value = self.node_info_stored(number, master)
        if "nodeinfo" not in self._tables:
            return value
        return self._body("nodeinfo", layout.node_key(number, master), value)

    def node_headers(self, number: int) -> Iterator[tuple[int, int, int, tuple, int]]:
        """(master, live, size, master_fields, entries) of each node of stream `number`, in
        order, without decoding the entries: from the `nodeinfo` table, which holds only
        these (or, in an older snapshot, from the head of each node: layout.node_header)."""
        for run in self.runs(number):
            yield from run.part._run_node_headers(run)

    def _run_node_headers(self, run: Run) -> Iterator[tuple[int, int, int, tuple, int]]:
        table = "nodeinfo" if "nodeinfo" in self._tables else "nodes"
        for raw, value in self._in_run(table, run):
            master = layout.node_master(raw)
            decode = layout.decode_node_info if table == "nodeinfo" else \
                self._header_decoder(master)
            yield (master, *self._decode(table, raw, value, decode))

    def _header_decoder(self, master: int) -> Callable[[Any], tuple[int, int, tuple, int]]:
        if self.packed:
            return partial(layout.packed_node_header, master=master)
        return layout.node_header

    def entries(self, db: int, key: bytes, start: IDLike = 0, end: IDLike = MAX_ID,
                count: int | None = None) -> Iterator[Entry]:
        """Live entries with start <= ID <= end, ascending (at most `count`)."""
        lo, hi = _as_int(start), _as_int(end, missing_seq=(1 << 64) - 1)
        left = count if count is not None else -1
        for node in self.nodes(self._number(db, key), lo, hi):
            for sid, fields in zip(node.ids, node.fields, strict=True):
                if fields is None or sid < lo:
                    continue
                if sid > hi or left == 0:
                    return
                yield Entry(ID.of(sid), fields)
                left -= 1

    # --- the whole file ------------------------------------------------------------------------

    def check(self, limit: int = 20) -> list[str]:
        """Every value of every table checked (its checksum; decoded where the structure is
        read), and the counts the streams and groups tables keep against what the other tables
        hold, nodes against their `nodeinfo`, keys that belong to no stream: at most `limit`
        problems, each naming the file, table and key. [] for a sound file."""
        problems: list[str] = []
        for snap in (self, *self.parts):
            snap._check_values(problems, limit)
            if len(problems) >= limit:
                return problems[:limit]
        try:
            self._check_chunks(problems, limit)  # (named by key and chunk, not by number)
        except SnapshotError as err:  # the keys table itself: reported above already
            if str(err) not in problems:
                problems.append(str(err))
        if problems:  # the structure of damaged values cannot be judged
            return problems
        try:
            self._check_structure(problems, limit)
        except SnapshotError as err:
            problems.append(str(err))
        return problems[:limit]

    def _check_values(self, problems: list[str], limit: int) -> None:
        """Every value's checksum in this file."""
        for table in sorted(self._tables):
            if table == "chunks":  # checked value by value, naming their keys (_check_chunks)
                continue
            try:
                for key, value in self._prefixed(table, b"", buffers=True):
                    try:
                        self._body(table, key, value)
                    except SnapshotError as err:
                        problems.append(str(err))
                        if len(problems) >= limit:
                            return
            except SnapshotError as err:
                problems.append(str(err))

    def _check_structure(self, problems: list[str], limit: int) -> None:
        meta, numbers = self.meta, set()
        entries = 0
        for info in self.streams():
            numbers.add(info.number)
            entries += info.length
            where = f"{self.name}: stream {info.key!r} (db {info.db})"
            headers = list(self.node_headers(info.number))
            live = sum(header[1] for header in headers)
            if (len(headers), live) != (info.nodes, info.length):
                problems.append(f"{where}: {len(headers)} nodes of {live} live entries found, "
                                f"{info.nodes} of {info.length} recorded")
            if "nodeinfo" in self._tables:
                self._check_runs(info, problems)
                for master, *header in headers:
                    run = self.locate(info.number, master)
                    assert run is not None  # (node_headers found it through its run)
                    run.part._check_node(run.number, master, header, problems)
            groups = self.groups(info.db, info.key)
            if len(groups) != info.groups:
                problems.append(f"{where}: {len(groups)} groups found, {info.groups} recorded")
            for g in groups:
                pending = sum(1 for _ in self.pending(info.db, info.key, g.name))
                consumers = len(self.consumers(info.db, info.key, g.name))
                if (pending, consumers) != (g.pending, g.consumers):
                    problems.append(f"{where}, group {g.name!r}: {pending} pending entries and "
                                    f"{consumers} consumers found, {g.pending} and "
                                    f"{g.consumers} recorded")
            if len(problems) >= limit:
                return
        if (len(numbers), entries) != (meta.streams, meta.entries):
            problems.append(f"{self.name}: {len(numbers)} streams of {entries} entries found, "
                            f"the meta table records {meta.streams} of {meta.entries}")
        for table in ("nodes", "nodeinfo", "groups", "consumers", "pel", "runs"):
            if table not in self._tables:
                continue
            with self._txn(table, buffers=True) as txn:
                for raw in txn.cursor().iternext(keys=True, values=False):
                    key = bytes(raw)
                    if len(key) < 8 or layout.number_of(key) not in numbers:
                        problems.append(f"{self.name}: table {table}, "
                                        f"{layout.describe_key(table, key)}: belongs to no "
                                        f"stream")
                        break

    def _check_node(self, number: int, master: int, header: list, problems: list[str]) -> None:
        """This file's node against its nodeinfo `header`."""
        raw = self.node_stored(number, master)
        key = layout.node_key(number, master)
        if raw is None:
            problems.append(f"{self.name}: table nodes, {layout.describe_key('nodes', key)}: "
                            f"missing, nodeinfo has it")
        elif list(self._decode("nodes", key, raw, self._header_decoder(master))) != header:
            problems.append(f"{self.name}: table nodes, {layout.describe_key('nodes', key)}: "
                            f"its counts differ from its nodeinfo")

    def _check_runs(self, info: StreamInfo, problems: list[str]) -> None:
        """A segmented snapshot's runs: each as many nodes as it records, in ID order."""
        if not self.segmented:
            return
        previous = -1
        for run in self.runs(info.number):
            found = len(run.part.run_masters(run))
            if found != run.nodes or run.first <= previous or run.last < run.first:
                problems.append(f"{self.name}: table runs, stream {info.key!r} (db {info.db}), "
                                f"run from {ID.of(run.first)}: {found} nodes in "
                                f"{run.part.name}, {run.nodes} recorded")
            previous = run.last

    def split(self, db: int, key: bytes, parts: int) -> list[tuple[ID, ID]]:
        """Up to `parts` inclusive ID ranges that cover the whole stream, cut at node
        boundaries so each holds about the same number of nodes (each at most
        stream-node-max-entries entries). Reads keys only, no entry."""
        if parts < 1:
            raise ValueError("parts must be at least 1")
        masters: list[int] = []
        for run in self.runs(self._number(db, key)):
            masters += run.part.run_masters(run)
        parts = max(1, min(parts, len(masters)))
        cuts = [masters[len(masters) * i // parts] for i in range(1, parts)]
        bounds = [0, *cuts]
        ends = [c - 1 for c in cuts] + [MAX_ID]
        return [(ID.of(lo), ID.of(hi)) for lo, hi in zip(bounds, ends, strict=True)]

    # --- groups --------------------------------------------------------------------------------

    def groups(self, db: int, key: bytes) -> list[GroupInfo]:
        prefix = layout.number_prefix(self._number(db, key))

        def group(raw: bytes) -> Callable[[Any], GroupInfo]:
            def decode(body: Any) -> GroupInfo:
                doc = layout.decode_value(body)
                return GroupInfo(raw[len(prefix):], ID.of(layout.id_int(doc["last_id"])),
                                 doc["entries_read"], doc["pending"], doc["consumers"])
            return decode

        return [self._decode("groups", raw, value, group(raw))
                for raw, value in self._prefixed("groups", prefix)]

    def consumers(self, db: int, key: bytes, group: bytes) -> list[ConsumerInfo]:
        prefix = layout.group_prefix(self._number(db, key), group)
        return [ConsumerInfo(raw[len(prefix):], *self._decode("consumers", raw, value,
                                                              _pair))
                for raw, value in self._prefixed("consumers", prefix)]

    def pending(self, db: int, key: bytes, group: bytes) -> Iterator[PendingEntry]:
        """The group's PEL in ID order."""
        prefix = layout.group_prefix(self._number(db, key), group)
        for raw, value in self._prefixed("pel", prefix):
            consumer, delivery_time, delivery_count = self._decode("pel", raw, value, _triple)
            yield PendingEntry(ID.of(layout.id_int(raw[len(prefix):])), consumer,
                               delivery_time, delivery_count)

    def _prefixed(self, table: str, prefix: bytes, buffers: bool = False,
                  start: bytes | None = None) -> Iterator[tuple[bytes, Any]]:
        """(key, stored value) of every key of `table` that starts with `prefix` (from `start`
        on, if given), in order."""
        with self._txn(table, buffers) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(prefix if start is None else start):
                return
            for raw, value in cursor:
                key = bytes(raw)
                if not key.startswith(prefix):
                    return
                yield key, value

    def run_masters(self, run: Run) -> list[int]:
        """The masters of the run's nodes in this file, from the keys alone."""
        prefix = layout.number_prefix(run.number)
        masters: list[int] = []
        with self._txn("nodes", buffers=True) as txn:
            cursor = txn.cursor()
            if cursor.set_range(layout.node_key(run.number, run.first)):
                for raw_key in cursor.iternext(keys=True, values=False):
                    key = bytes(raw_key)
                    master = layout.node_master(key)
                    if not key.startswith(prefix) or master > run.last:
                        break
                    masters.append(master)
        return masters

    def _in_run(self, table: str, run: Run) -> Iterator[tuple[bytes, Any]]:
        """(key, stored value buffer) of the run's nodes in `table` of this file, in order."""
        prefix = layout.number_prefix(run.number)
        with self._txn(table, buffers=True) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(layout.node_key(run.number, run.first)):
                return
            for raw, value in cursor:
                key = bytes(raw)
                if not key.startswith(prefix) or layout.node_master(key) > run.last:
                    return
                yield key, value


def _pair(body: Any) -> tuple[Any, Any]:
    first, second = layout.decode_binary(body)
    return first, second


def _triple(body: Any) -> tuple[Any, Any, Any]:
    first, second, third = layout.decode_binary(body)
    return first, second, third


def _stream_info(raw: bytes, value: bytes | memoryview) -> StreamInfo:
    db, key = layout.split_stream_key(raw)
    doc = layout.decode_value(value)
    return StreamInfo(
        db, key, doc["number"], doc["length"], ID.of(layout.id_int(doc["first_id"])),
        ID.of(layout.id_int(doc["last_id"])), ID.of(layout.id_int(doc["max_deleted_id"])),
        doc["entries_added"], doc["nodes"], doc["groups"], _idmp_info(doc.get("idmp")))


def _idmp_info(item: list | None) -> IdmpInfo | None:
    if item is None:
        return None
    duration, maxsize, added, duplicates, producers = item
    return IdmpInfo(duration, maxsize, added, duplicates, tuple(
        (pid, tuple(IdempotentID(iid, ID.of(layout.id_int(sid)), at) for iid, sid, at in iids))
        for pid, iids in producers))


def recorded_checksum(path: str) -> int | None:
    """The whole-file checksum the manifest beside snapshot file `path` recorded for it (None:
    no manifest there names it, or it recorded none). Never raises: a tool then relies on the
    per-value checks."""
    entry = recorded_entry(path)
    return None if entry is None else entry.crc32


def recorded_entry(path: str) -> Any:
    """The manifest's entry (aof.manifest.SnapshotEntry) for snapshot file `path`, from the
    manifest beside it (None: no manifest there names it). Never raises."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load

    directory, name = os.path.split(os.path.abspath(path))
    try:
        snapshot = load(RealFS(), directory).snapshot
    except (StorageError, OSError):
        return None
    return snapshot if snapshot is not None and snapshot.file == name else None


def current_snapshot(directory: str) -> str | None:
    """Path of the snapshot a data directory's manifest names (None: no snapshot yet). Safe
    while an engine runs there: a snapshot a compaction replaces stays readable while open."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load

    snapshot = load(RealFS(), directory).snapshot
    return None if snapshot is None else os.path.join(directory, snapshot.file)
