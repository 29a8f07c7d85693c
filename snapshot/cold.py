"""Cold stream nodes and value nodes, read back from the snapshot that holds them.

Owns `SnapshotNodes`, the node store (engine.model.residency.NodeStore and ValueNodeStore) of
one snapshot file: a resident engine reads a cold node's entries from it, and a compaction
copies an unchanged node's stored value from it into the next snapshot without decoding it.
For a big value kept as nodes (engine.model.residency.ValueNodes: a long list's) it also reads
the snapshot's index of the value's nodes (`node_index`: the listnodes rows, snapshot.layout)
and reads a cold value node back from its chunk (`value_node`: the chunk's checksum, then the
node's hash and length against its placeholder's; the last chunk read is kept unpacked, so a
scan reads each chunk once). For a big hash or set it reads the index of its bucket table's
runs (`table_runs`: the tableruns rows, each with where its run's chunk is in its file) and a cold run's packs back from its chunk (`table_run`: read with pread at
that place, so random lookups map no page of the file; checked: the stored value's checksum,
then the run's place, hash and length; the last few runs read are kept, so a scan or a burst
of lookups near each other reads each chunk once). The file stays open (and readable after a
newer compaction unlinks it: the map, and a descriptor for the preads) until no stream or
cold value node refers to the store any more (it is closed when the next store opens). Must not touch: the engine's structures (it returns plain lists, and
the residency's immutable value node placeholders), the manifest, any one type.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import weakref

import msgpack

from streamkeep.aof.fs import mapped_ranges_of, open_identified, resident_file_bytes
from streamkeep.engine.model.ids import format_id
from streamkeep.engine.model.residency import (
    ColdRun,
    ColdValueNode,
    NodeIndex,
    TableIndex,
    run_hash,
    value_node_hash,
)
from streamkeep.engine.model.value_types import BY_NAME
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.layout import TableRunRow
from streamkeep.snapshot.reader import KeyInfo, Snapshot, SnapshotError
from streamkeep.snapshot.value_formats import TableChunk, node_chunk_blobs, table_chunk

# Snapshots whose last store went away. A store is often freed by the cyclic garbage collector
# (streams and their homes refer to each other), which may run anywhere, even inside the
# reader's own locked section: so the finalizer only queues the file, and the next store to be
# opened closes the queued ones.
_unused: list[Snapshot] = []


def _close_unused() -> None:
    while _unused:
        _unused.pop().close()


# LMDB reads through a shared read-only map of the file: every page a read touches stays in the
# process's RSS (file-backed, reclaimable, but counted) until unmapped. A catch-up over a cold
# backlog would so grow the RSS by the backlog's size, so after every RELEASE_BYTES of nodes
# read the pages are dropped from the map (madvise MADV_DONTNEED: they stay in the page cache).
RELEASE_BYTES = 16 << 20
RUNS_KEPT = 4  # table runs kept unpacked after their read (a few times 16 KiB)
# Random small reads through the map (a cold table run whose place in the file is not known)
# map far more than they read: the B-tree's pages on the way and, around each fault, the cached
# pages the kernel maps with it (a whole folio). So every RANDOM_CHECK of them the process's
# file-backed RSS is measured, and the pages are released once it grew by RELEASE_BYTES since
# the last release.
RANDOM_CHECK = 16
_MADV_DONTNEED = 4


def _release(ranges: list[tuple[int, int]]) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the pages just stay
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        for low, high in ranges:
            madvise(ctypes.c_void_p(low), ctypes.c_size_t(high - low), _MADV_DONTNEED)


def _open_files(snaps: tuple[Snapshot, ...]) -> dict[int, int]:
    """A read-only descriptor of each file, by id of its Snapshot, that is still the file the
    snapshot mapped; a file that cannot be opened is left out (its chunks are read through
    the map)."""
    fds: dict[int, int] = {}
    for snap in snaps:
        files = snap.files()
        fd = open_identified(snap.path, files[0][0]) if files else None
        if fd is not None:
            fds[id(snap)] = fd
    return fds


def _close_files(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    fds.clear()


class SnapshotNodes:
    """The nodes of one snapshot file. `clean_before`: nodes changed at or after this value of
    the change clock (residency.EPOCH) differ from what the file holds."""

    def __init__(self, path: str, clean_before: int, part_suffix: str = "") -> None:
        self.path = path
        self.clean_before = clean_before
        _close_unused()
        self.snapshot = Snapshot(path, part_suffix=part_suffix)
        weakref.finalize(self, _unused.append, self.snapshot)
        self.read_bytes = 0  # since the map's pages were last released
        self.random_reads = 0  # random small reads since the file-backed RSS was measured
        self.file_rss = resident_file_bytes()  # that RSS after the last release
        # The maps' address ranges, found when pages are first released (reading the process's
        # map list costs more than opening a small snapshot: a load that reads little never
        # pays it), by the identities of the file and its part files, taken when they were
        # opened (a compaction may unlink them later). The parts hold the nodes: their maps
        # are where reads bring pages in.
        self.ranges: list[tuple[int, int]] | None = None
        files = self.snapshot.files()
        self.identities = [identity for identity, _size in files]
        self.size = sum(size for _identity, size in files)  # what a load reads at most
        # The last chunk of value nodes read: (part, number, chunk) and its nodes' bytes.
        self._chunk: tuple[tuple[int, int, int], list[bytes]] | None = None
        # The last table runs read, by (part, number, chunk): their packs (oldest first).
        # The last RUNS_KEPT runs read, by chunk: the hash they were checked against and the
        # place they were read from, their packs.
        self._runs: dict[tuple[int, int, int], tuple[tuple[bytes, int], list[bytes]]] = {}
        # The files (this one and its parts, by id) opened for `_chunk_bytes`'s preads (as the
        # snapshot opened them: a compaction may unlink them).
        self._fds = _open_files((self.snapshot, *self.snapshot.parts))
        self._open = list(self._fds.values())  # (closed once: by close or the finalizer)
        weakref.finalize(self, _close_files, self._open)

    def close(self) -> None:
        """The engine is closing: let go of the file now (its streams read nothing more)."""
        _close_unused()
        self._chunk = None
        self._runs.clear()
        _close_files(self._open)
        self._fds = {}
        self.snapshot.close()
        self.ranges, self.identities = [], []

    def release_pages(self) -> None:
        """Drop the pages reads brought into the map from this process's RSS."""
        self.read_bytes = 0
        if self.ranges is None:
            self.ranges = mapped_ranges_of(self.identities)
        _release(self.ranges)
        self.file_rss = resident_file_bytes()

    def _missing(self, number: int, master: int) -> StorageError:
        return StorageError(f"{self.path}: stream {number} has no node "
                            f"{format_id(master).decode()} (the snapshot does not match the "
                            f"engine's nodes)")

    def stored_for(self, number: int, master: int, key: bytes) -> tuple[bytes, bytes]:
        """The node's `nodes` and `nodeinfo` values as the next snapshot stores them under
        `key`: moved as stored, their checksums checked and carried over (never decoded)."""
        run = self.snapshot.locate(number, master)
        if run is None:
            raise self._missing(number, master)
        snap, number = run.part, run.number  # the file holding it, under its number there
        value, info = snap.node_pair_stored(number, master)
        if value is None:
            raise self._missing(number, master)
        if info is None:  # the oldest snapshots: no nodeinfo table, made from the node
            try:
                info = snap.node_info_stored(number, master)
            except KeyError:
                raise self._missing(number, master) from None
        if not snap.packed:  # an older snapshot's node: packed now, sealed under `key`
            lp = snap.node_buffer(number, master)
            assert lp is not None  # (the value was there just now)
            header = layout.decode_node_info(snap.node_info_raw(number, master))
            live, _size, master_fields, entries = header
            return (layout.seal("nodes", key, bytes(lp)),
                    layout.seal("nodeinfo", key, layout.encode_node_info(
                        live, len(lp), entries, master_fields)))
            return layout.seal("nodes", key, value), layout.seal("nodeinfo", key, info)
        old = layout.node_key(number, master)
        moved = layout.reseal("nodes", old, key, value)
        if moved is None:
            raise snap.damaged("nodes", old, "checksum mismatch: the stored value is damaged")
        moved_info = layout.reseal("nodeinfo", old, key, info)
        if moved_info is None:
            raise snap.damaged("nodeinfo", old, "checksum mismatch: the stored value is "
                                                "damaged")
        return moved, moved_info

    def load(self, number: int, master: int, crc: int = -1) -> tuple[bytearray, int]:
        """A cold node's listpack and its CRC (residency.NodeStore.load): read through the
        file's long-lived read transaction, its checksum checked, its structure too unless its
        CRC is `crc`."""
        found = self.snapshot.node_readback(number, master, crc)
        if found is None:
            raise self._missing(number, master)
        self.count_read(len(found[0]))
        return found

    def node_index(self, db: int, key: bytes) -> NodeIndex:
        """The snapshot's index of the nodes of the value under `key` of database `db`: by
        hash, a placeholder for a node with those bytes (engine.model.residency.ColdValueNode).
        Empty when the snapshot holds no chunked value kept as nodes there or its chunks have
        no index (an older snapshot's). SnapshotError for a damaged index row."""
        rows = self.snapshot.key_rows(db, key, key)
        if not rows or rows[0].key != key or rows[0].chunked is None:
            return {}
        vt = BY_NAME.get(rows[0].type or "")
        if vt is None or vt.nodes is None:
            return {}
        index: NodeIndex = {}
        for part, number, chunk, nodes in self.snapshot.list_node_index(rows[0]):
            for pos, (digest, size, count) in enumerate(nodes):
                if digest not in index:
                    index[digest] = ColdValueNode(self, part, number, chunk, pos, digest, size,
                                                  count)
        return index

    def _chunk_file(self, part: int) -> Snapshot:
        snap = self.snapshot
        if part < 0:
            return snap
        if part >= len(snap.parts):
            raise SnapshotError(f"{self.path}: a cold value node's part {part} is not one of "
                                f"its {len(snap.parts)} part files")
        return snap.parts[part]

    def value_node(self, node: ColdValueNode) -> bytearray:
        """A cold value node's bytes (residency.ValueNodeStore.value_node): its chunk read (the
        stored value's checksum checked), the node taken from it, its hash and length checked
        against the placeholder's. SnapshotError, naming the file, the table and the chunk,
        for anything else."""
        where = (node.part, node.number, node.chunk)
        cached = self._chunk
        if cached is not None and cached[0] == where:
            blobs = cached[1]
        else:
            snap = self._chunk_file(node.part)
            key = layout.chunk_key(node.number, node.chunk)
            stored = snap.chunk_stored(node.number, node.chunk)
            if stored is None:
                raise snap.damaged("chunks", key, "missing: a cold value node's chunk is not "
                                   "in the snapshot (the file does not match the value)")
            body = layout.unseal("chunks", key, stored)
            if body is None:
                raise snap.damaged("chunks", key, "checksum mismatch: the stored value is "
                                   "damaged")
            try:
                blobs = node_chunk_blobs(body)
            except (ValueError, TypeError, IndexError, msgpack.UnpackException) as err:
                raise snap.damaged("chunks", key, f"undecodable value ({err})") from None
            self._chunk = (where, blobs)
            self.count_read(len(body))
        blob = blobs[node.pos] if node.pos < len(blobs) else None
        if not isinstance(blob, bytes) or len(blob) != node.size or \
                value_node_hash(blob) != node.hash:
            snap = self._chunk_file(node.part)
            raise snap.damaged("chunks", layout.chunk_key(node.number, node.chunk),
                               f"node {node.pos} is not the value node recorded (hash or "
                               f"length differs): the file is damaged")
        return bytearray(blob)

    def _chunk_bytes(self, snap: Snapshot, run: ColdRun) -> bytes | None:
        """A table run's chunk as stored: read from the file at the place its index row
        records, so a random read maps no page of the file (through the map, each fault
        maps the whole cached folio around it: up to megabytes of RSS a read); through the
        map where the place is not known. (The caller checks the bytes' checksum, which
        covers the chunk's key: bytes read from the wrong place fail it.)"""
        fd = self._fds.get(id(snap))
        if fd is not None and run.offset >= 0 and 0 < run.stored <= snap.size - run.offset:
            try:  # (not contextlib.suppress: this is every cold lookup's path)
                data = os.pread(fd, run.stored, run.offset)
            except OSError:
                data = b""
            if len(data) == run.stored:
                return data
        view = snap.chunk_view(run.number, run.chunk)
        return None if view is None else bytes(view)

    def table_runs(self, db: int, key: bytes) -> TableIndex | None:
        """The snapshot's index of the bucket table runs of the value under `key` of database
        `db` (engine.model.residency.TableIndex). None when the snapshot holds no such value
        there, or not every chunk of it has an index row (an older snapshot's). SnapshotError
        for a damaged or inconsistent index."""
        rows = self.snapshot.key_rows(db, key, key)
        if not rows or rows[0].key != key:
            return None
        return self.table_index(rows[0])

    def table_index(self, row: KeyInfo) -> TableIndex | None:
        """`table_runs` of the value of a keys row."""
        if row.chunked is None:
            return None
        key, db = row.key, row.db
        runs: list[ColdRun] = []
        first: TableRunRow | None = None
        for part, number, chunk, found in self.snapshot.table_run_index(row):
            if first is None:
                first = found
            at = runs[-1].first + runs[-1].buckets if runs else 0
            if (found.seed, found.size, found.split) != (first.seed, first.size, first.split) \
                    or found.first != at:
                raise SnapshotError(f"{self.path}: table tableruns, key {key!r} (db {db}), "
                                    f"chunk {chunk}: a run out of place (bucket {found.first}, "
                                    f"{at} expected) or of another table's placement")
            runs.append(ColdRun(self, part, number, chunk, found.first, found.buckets,
                                found.elements, found.nbytes, found.hash, found.extras,
                                found.offset, found.stored))
        ref = row.chunked
        if first is None or len(runs) != ref.chunks:
            return None
        end = runs[-1].first + runs[-1].buckets
        packed = sum(run.size for run in runs)
        if sum(run.elements for run in runs) != ref.elements or end != first.size + first.split:
            raise SnapshotError(f"{self.path}: table tableruns, key {key!r} (db {db}): its "
                                f"runs hold other than the {ref.elements} elements and "
                                f"{first.size + first.split} buckets recorded")
        if not 2 * end <= packed <= self.size:  # (a pack is 2 bytes at least, all in the files)
            raise SnapshotError(f"{self.path}: table tableruns, key {key!r} (db {db}): "
                                f"{end} buckets in {packed} bytes of packs, in {self.size} bytes "
                                f"of files: the file is damaged")
        return TableIndex(first.seed, first.size, first.split, runs)

    def table_run(self, run: ColdRun) -> list[bytes]:
        """A cold table run's packs (residency.TableRunStore.table_run): its chunk read, its
        place, length and hash checked against the run's (the hash, of the packs the run
        holds, proves them: the stored value's checksum is not computed as well, a tenth of
        a random read's time). SnapshotError, naming the file, the table and the chunk, for
        anything else."""
        cached = self._runs.get((run.part, run.number, run.chunk))
        if cached is not None and cached[0] == (run.hash, run.offset):  # (the run read)
            return cached[1]
        return self._table_run_chunk(run, False).packs

    def table_run_chunk(self, run: ColdRun) -> TableChunk:
        """A table run's whole chunk (its packs and what the type keeps beside them), read and
        checked as `table_run` does, and the stored value's checksum checked (it covers what
        the hash does not: the type's entries beside the packs)."""
        return self._table_run_chunk(run, True)

    def _table_run_chunk(self, run: ColdRun, checksum: bool) -> TableChunk:
        where = (run.part, run.number, run.chunk)
        cache = self._runs
        snap = self._chunk_file(run.part)
        key = layout.chunk_key(run.number, run.chunk)
        stored = self._chunk_bytes(snap, run)
        if stored is None:
            raise snap.damaged("chunks", key, "missing: a cold table run's chunk is not in the "
                               "snapshot (the file does not match the value)")
        body = layout.unseal("chunks", key, stored) if checksum else layout.body_of(stored)
        if body is None:
            raise snap.damaged("chunks", key, "checksum mismatch: the stored value is damaged")
        try:
            chunk = table_chunk(body)
        except (ValueError, TypeError, IndexError, msgpack.UnpackException) as err:
            raise snap.damaged("chunks", key, f"undecodable value ({err})") from None
        joined = b"".join(chunk.packs) if chunk is not None else b""
        if chunk is None or chunk.first != run.first or len(chunk.packs) != run.buckets or \
                len(joined) != run.size or run_hash([joined]) != run.hash:
            raise snap.damaged("chunks", key, "not the table run recorded (place, length or "
                               "hash differs): the file is damaged")
        if run.offset < 0:  # (read through the map: its pages count)
            self.count_random_read(len(body))
        if len(cache) >= RUNS_KEPT:
            del cache[next(iter(cache))]
        cache[where] = ((run.hash, run.offset), chunk.packs)
        return chunk

    def count_read(self, size: int) -> None:
        """`size` more bytes of the file were read through the map: its pages are released
        once RELEASE_BYTES have been (finding the map reads the process's map list: a small
        read never pays for that, and holds little)."""
        self.read_bytes += size
        if self.read_bytes > RELEASE_BYTES:
            self.release_pages()

    def count_random_read(self, size: int) -> None:
        """A random small read of `size` bytes (a cold table run's): counted as `count_read`
        does, and every RANDOM_CHECK of them the pages are released if the file-backed RSS
        grew by RELEASE_BYTES since the last release (what such reads map, measured)."""
        self.random_reads += 1
        if self.random_reads >= RANDOM_CHECK:
            self.random_reads = 0
            if resident_file_bytes() - self.file_rss > RELEASE_BYTES:
                self.release_pages()
                return
        self.count_read(size)


__all__ = ["SnapshotNodes"]
