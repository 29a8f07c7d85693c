"""Cold stream nodes and value nodes, read back from the snapshot that holds them.

Owns `SnapshotNodes`, the node store (engine.model.residency.NodeStore and ValueNodeStore) of
one snapshot file: a resident engine reads a cold node's entries from it, and a compaction
copies an unchanged node's stored value from it into the next snapshot without decoding it.
For a big value kept as nodes (engine.model.residency.ValueNodes: a long list's) it also reads
the snapshot's index of the value's nodes (`node_index`: the listnodes rows, snapshot.layout)
and reads a cold value node back from its chunk (`value_node`: the chunk's checksum, then the
node's hash and length against its placeholder's; the last chunk read is kept unpacked, so a
scan reads each chunk once). The file stays open (and readable after a newer compaction
unlinks it) until no stream or cold value node refers to the store any more (it is closed when
the next store opens). Must not touch: the engine's structures (it returns plain lists, and
the residency's immutable value node placeholders), the manifest, any one type.
"""

from __future__ import annotations

import contextlib
import ctypes
import weakref

import msgpack

from streamkeep.aof.fs import mapped_ranges_of
from streamkeep.engine.model.ids import format_id
from streamkeep.engine.model.residency import ColdValueNode, NodeIndex, value_node_hash
from streamkeep.engine.model.value_types import BY_NAME
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.value_formats import node_chunk_blobs

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
_MADV_DONTNEED = 4


def _release(ranges: list[tuple[int, int]]) -> None:
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the pages just stay
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        for low, high in ranges:
            madvise(ctypes.c_void_p(low), ctypes.c_size_t(high - low), _MADV_DONTNEED)


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

    def close(self) -> None:
        """The engine is closing: let go of the file now (its streams read nothing more)."""
        _close_unused()
        self._chunk = None
        self.snapshot.close()
        self.ranges, self.identities = [], []

    def release_pages(self) -> None:
        """Drop the pages reads brought into the map from this process's RSS."""
        self.read_bytes = 0
        if self.ranges is None:
            self.ranges = mapped_ranges_of(self.identities)
        _release(self.ranges)

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

    def count_read(self, size: int) -> None:
        """`size` more bytes of the file were read through the map: its pages are released
        once RELEASE_BYTES have been (finding the map reads the process's map list: a small
        read never pays for that, and holds little)."""
        self.read_bytes += size
        if self.read_bytes > RELEASE_BYTES:
            self.release_pages()


__all__ = ["SnapshotNodes"]
