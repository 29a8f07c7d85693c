"""The read-only snapshot API: everything in a snapshot, with no engine.

Owns opening a snapshot file read-only and answering: meta, the list of streams, entries of one
stream by ID range (reading only the nodes that hold them), ID ranges that split a stream for
parallel readers, groups, PEL, consumers, idempotent producers' maps (`StreamInfo.idmp`). The AOF CLI, the Spark export and the engine's loader
use it. Must not touch: the engine, the manifest; it never writes.

    with Snapshot("data/snapshot-000000001234.mdb") as snap:
        for info in snap.streams():
            for ranges in snap.split(info.db, info.key, parts=4): ...
            for entry in snap.entries(info.db, info.key, start=ID(0, 0)): ...
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import lmdb

from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.layout import ID, MAX_ID, RawNode


class SnapshotError(StorageError):
    """Not a streamkeep snapshot, or one of an unsupported version."""


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
            try:
                env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=8)
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


class Snapshot:
    """A snapshot file opened read-only. Safe to open from several processes at once, and
    several times in one process (the objects share one LMDB environment)."""

    def __init__(self, path: str) -> None:
        if path is None:  # current_snapshot() before a directory's first compaction
            raise SnapshotError("no snapshot to open: the data directory has none yet (nothing "
                                "compacted: Engine.compact(), SAVE or BGSAVE makes one)")
        self.path = path
        self._key: tuple[int, int] | None = None
        self._key, self.env, size = _open_env(path)
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
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._key is not None:
            key, self._key = self._key, None
            _release_env(key)

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_meta(self) -> Meta:
        with self.env.begin(db=self._tables["meta"]) as txn:
            doc = {k.decode(): layout.decode_value(v) for k, v in txn.cursor()}
        if doc.get("format") != layout.FORMAT:
            raise SnapshotError(f"{self.path}: not a streamkeep snapshot")
        if doc.get("version") != layout.VERSION:
            raise SnapshotError(f"{self.path}: unsupported snapshot version {doc.get('version')}")
        missing = [name for name in Meta.__dataclass_fields__ if name not in doc]
        if missing:
            raise SnapshotError(f"{self.path}: meta lacks {', '.join(missing)}")
        return Meta(**{name: doc[name] for name in Meta.__dataclass_fields__})

    # --- streams -------------------------------------------------------------------------------

    def streams(self, db: int | None = None) -> list[StreamInfo]:
        """Every stream (of one database if given), by database then key."""
        with self.env.begin(db=self._tables["streams"]) as txn:
            cursor = txn.cursor()
            if db is not None:
                prefix = bytes((db,))
                if not cursor.set_range(prefix):
                    return []
                items = []
                for raw, value in cursor:
                    if not raw.startswith(prefix):
                        break
                    items.append(_stream_info(raw, value))
                return items
            return [_stream_info(raw, value) for raw, value in cursor]

    def stream(self, db: int, key: bytes) -> StreamInfo | None:
        with self.env.begin(db=self._tables["streams"]) as txn:
            value = txn.get(layout.stream_key(db, key))
        return None if value is None else _stream_info(layout.stream_key(db, key), value)

    def _number(self, db: int, key: bytes) -> int:
        info = self.stream(db, key)
        if info is None:
            raise KeyError(f"no stream {key!r} in database {db}")
        return info.number

    # --- entries -------------------------------------------------------------------------------

    def nodes(self, number: int, start: int = 0, end: int = MAX_ID) -> Iterator[RawNode]:
        """Decoded nodes of stream `number` that may hold IDs in [start, end], in order."""
        prefix = layout.number_prefix(number)
        with self.env.begin(db=self._tables["nodes"], buffers=True) as txn:
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
                yield layout.decode_node(master, bytes(value))

    def node_raw(self, number: int, master: int) -> bytes | None:
        """One node's stored value as it is (None: no such node)."""
        with self.env.begin(db=self._tables["nodes"]) as txn:
            return txn.get(layout.node_key(number, master))

    def node_info_raw(self, number: int, master: int) -> bytes:
        """One node's `nodeinfo` value (made from its header in an older snapshot)."""
        key = layout.node_key(number, master)
        if "nodeinfo" in self._tables:
            with self.env.begin(db=self._tables["nodeinfo"]) as txn:
                value = txn.get(key)
            if value is not None:
                return value
        raw = self.node_raw(number, master)
        if raw is None:
            raise KeyError(f"no node {master} in stream {number}")
        live, size, master_fields, entries = layout.node_header(raw)
        return layout.encode_node_info(live, size, entries, master_fields)

    def node_headers(self, number: int) -> Iterator[tuple[int, int, int, tuple, int]]:
        """(master, live, size, master_fields, entries) of each node of stream `number`, in
        order, without decoding the entries: from the `nodeinfo` table, which holds only
        these (or, in an older snapshot, from the head of each node: layout.node_header)."""
        prefix = layout.number_prefix(number)
        has_info = "nodeinfo" in self._tables
        table = self._tables["nodeinfo" if has_info else "nodes"]
        decode = layout.decode_node_info if has_info else layout.node_header
        with self.env.begin(db=table, buffers=True) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(prefix):
                return
            for raw_key, value in cursor:
                raw = bytes(raw_key)
                if not raw.startswith(prefix):
                    return
                yield (layout.node_master(raw), *decode(value))

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

    def split(self, db: int, key: bytes, parts: int) -> list[tuple[ID, ID]]:
        """Up to `parts` inclusive ID ranges that cover the whole stream, cut at node
        boundaries so each holds about the same number of nodes (each at most
        stream-node-max-entries entries). Reads keys only, no entry."""
        if parts < 1:
            raise ValueError("parts must be at least 1")
        number = self._number(db, key)
        prefix = layout.number_prefix(number)
        masters: list[int] = []
        with self.env.begin(db=self._tables["nodes"], buffers=True) as txn:
            cursor = txn.cursor()
            if cursor.set_range(prefix):
                for raw_key in cursor.iternext(keys=True, values=False):
                    key = bytes(raw_key)
                    if not key.startswith(prefix):
                        break
                    masters.append(layout.node_master(key))
        parts = max(1, min(parts, len(masters)))
        cuts = [masters[len(masters) * i // parts] for i in range(1, parts)]
        bounds = [0, *cuts]
        ends = [c - 1 for c in cuts] + [MAX_ID]
        return [(ID.of(lo), ID.of(hi)) for lo, hi in zip(bounds, ends, strict=True)]

    # --- groups --------------------------------------------------------------------------------

    def groups(self, db: int, key: bytes) -> list[GroupInfo]:
        prefix = layout.number_prefix(self._number(db, key))
        out = []
        for raw, value in self._prefixed("groups", prefix):
            doc = layout.decode_value(value)
            out.append(GroupInfo(raw[len(prefix):], ID.of(layout.id_int(doc["last_id"])),
                                 doc["entries_read"], doc["pending"], doc["consumers"]))
        return out

    def consumers(self, db: int, key: bytes, group: bytes) -> list[ConsumerInfo]:
        prefix = layout.group_prefix(self._number(db, key), group)
        return [ConsumerInfo(raw[len(prefix):], *layout.decode_binary(value))
                for raw, value in self._prefixed("consumers", prefix)]

    def pending(self, db: int, key: bytes, group: bytes) -> Iterator[PendingEntry]:
        """The group's PEL in ID order."""
        prefix = layout.group_prefix(self._number(db, key), group)
        for raw, value in self._prefixed("pel", prefix):
            consumer, delivery_time, delivery_count = layout.decode_binary(value)
            yield PendingEntry(ID.of(layout.id_int(raw[len(prefix):])), consumer,
                               delivery_time, delivery_count)

    def _prefixed(self, table: str, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        with self.env.begin(db=self._tables[table]) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(prefix):
                return
            for raw, value in cursor:
                if not raw.startswith(prefix):
                    return
                yield raw, value


def _stream_info(raw: bytes, value: bytes) -> StreamInfo:
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


def current_snapshot(directory: str) -> str | None:
    """Path of the snapshot a data directory's manifest names (None: no snapshot yet). Safe
    while an engine runs there: a snapshot a compaction replaces stays readable while open."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import load

    snapshot = load(RealFS(), directory).snapshot
    return None if snapshot is None else os.path.join(directory, snapshot.file)
