"""Loading a snapshot into an engine: the state as of the snapshot's LSN, exactly.

Owns turning the read API's records back into engine structures through the engine's own
restore hooks (Stream.restore_packed, ConsumerGroup.add_pending, create_consumer, Idmp.restore).
Like Redis's RDB load this is deserialisation, not command execution; what happened after the
snapshot is replayed from the AOF through the apply path. Every value is checked as the reader
hands it over; an eager load first checks the whole file against the manifest's checksum (when
it recorded one), and every load checks the counts the streams and groups tables keep against
what their nodes, PEL and consumers hold: damage is a SnapshotError naming the file, the table
and the key, never a different state. A chunked value's row may list runs of chunks from
several part files (snapshot.layout's second form): they are followed in order, and a noded
value's indexes counted from it. For a compaction child the load notes where each chunked
value is (snapshot.values.ValueHomes), a value kept as nodes (engine.model.residency.
ValueNodes: a list's quicklist) chunk by chunk with the nodes each one gave.
Also owns binding the engine's values kept as nodes to a snapshot's index of their nodes
(`noded_values`, `node_indexes`, `bind_node_indexes`: after a load and after a compaction's
switch, with a `backlog-memory` budget), so that the nodes it holds may go cold
(engine.model.residency); a lazy load gives such a value cold nodes from the start, reading
only its two ends. The same for a big value's bucket table (a hash's or set's, its
`ValueType.table_of`): bound to the snapshot's index of its runs (`tabled_values`,
`table_indexes`, `bind_table_indexes`), and under a budget loaded with every run cold, only the
runs that keep something beside their buckets (a hash's field TTLs) read. Names no type: what
a type keeps as nodes is its `ValueType.nodes`, its table its `ValueType.table_of`.
Must not touch: files other than through the reader, command semantics.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from streamkeep.engine.exec.functions import restore_functions
from streamkeep.engine.model.consumer_groups import ConsumerGroup
from streamkeep.engine.model.idmp_maps import Idmp
from streamkeep.engine.model.residency import (
    EPOCH,
    ColdValueNode,
    NodeIndex,
    Residency,
    TableIndex,
    ValueNodes,
)
from streamkeep.engine.model.stream import Stream, cold_node
from streamkeep.engine.model.value_types import BY_NAME, TYPES, ValueType
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.integrity import check_parts, check_whole
from streamkeep.snapshot.reader import (
    IdmpInfo,
    KeyInfo,
    Meta,
    Snapshot,
    SnapshotError,
    StreamInfo,
)
from streamkeep.snapshot.values import (
    HomeRun,
    StoredChunk,
    ValueHome,
    ValueHomes,
    build_value,
    codec_of,
    node_sums,
)

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.snapshot")


def _restore_idmp(info: IdmpInfo) -> Idmp:
    state = Idmp(info.duration, info.maxsize)
    state.added, state.duplicates = info.added, info.duplicates
    for pid, recorded in info.producers:
        state.restore(pid, [(r.iid, r.id.as_int(), r.recorded_ms) for r in recorded])
    return state


def load_snapshot(engine: EngineCore, path: str, lazy: bool | None = None,
                  crc32: int | None = None, entry: Any = None, part_suffix: str = "",
                  homes: ValueHomes | None = None) -> Meta:
    """Fill an empty engine with the snapshot at `path`; returns its meta (the LSN covered).

    `lazy` (default: when the engine has a `backlog-memory` budget) leaves every node's entries
    in the file: the streams get cold nodes, read back when touched, so the time and memory a
    load takes follow the metadata, groups and PELs, not the backlog. Either way the streams are
    bound to the file (engine.model.residency), which stays open as their node store. `crc32`:
    the file's checksum as the manifest recorded it, checked first by an eager load (which
    reads the whole file anyway); a lazy one relies on the per-value checks. `entry`: the
    manifest's (aof.manifest.SnapshotEntry), whose part files an eager load checks the same
    way, and a lazy one by their sizes. `part_suffix`: the part files' names end in it (a
    replica's full sync, before it installs them). `homes`: where the chunked values loaded
    are recorded (a compaction child's, snapshot.values.ValueHomes)."""
    residency = engine.residency
    if lazy is None:
        lazy = residency.budget > 0
    if not lazy:
        check_whole(path, crc32)
    if entry is not None:
        check_parts(os.path.dirname(path), entry, whole=not lazy)
    store = SnapshotNodes(path, clean_before=0, part_suffix=part_suffix)
    with Snapshot(path, part_suffix=part_suffix) as snap, engine.lock:
        if any(any(space) for space in engine.keyspaces):
            raise ValueError("a snapshot loads into an empty engine only")
        for info in snap.streams():
            s = Stream()
            cold = _restore_nodes(snap, info, s, lazy)
            home = residency.bind(s, store, info.number)
            home.cold_nodes, home.cold_entries, home.cold_bytes = cold
            _restore_metadata(snap, info, s)
            engine.dbs[info.db][info.key] = s
        lazy_nodes = lazy and homes is None and residency.budget > 0
        for row in snap.key_rows():
            if lazy_nodes and row.chunked is not None and \
                    ((held := _lazy_value(snap, store, row, residency)) is not None
                     or (held := _lazy_table(store, row, residency)) is not None):
                engine.keyspaces[held[0].slot][row.db][row.key] = held[1]
            elif row.chunked is not None:
                vt, _decode = _value_type(path, row)
                noted = homes is not None and snap.segmented
                value, chunks = _chunked_value(snap, row, noted and vt.nodes is not None,
                                               store.count_read)
                engine.keyspaces[vt.slot][row.db][row.key] = value
                if noted:
                    assert homes is not None
                    _note_home(snap, row, value, homes, chunks, vt.nodes)
            elif row.value is not None:
                vt, decode = _value_type(path, row)
                engine.keyspaces[vt.slot][row.db][row.key] = decode(row.value)
            if row.expires_ms is not None:
                engine.expires[row.db][row.key] = row.expires_ms
        restore_functions(engine, snap.functions)  # the function libraries, if any
        # Every node is as the file holds it; changes from now on are not.
        store.clean_before = residency.last_tick = EPOCH.tick()
        if homes is None and residency.budget > 0:  # (a compaction child's values stay)
            bind_node_indexes(residency, node_indexes(store, [
                big for big in noded_values(engine.keyspaces) if big[3].home is None]),
                store.clean_before)
            bind_table_indexes(residency, table_indexes(store, [
                big for big in tabled_values(engine.keyspaces) if big[3].home is None]))
        residency.switched(store)
        # What the load read of the file and its parts (at most all of them) stops being
        # resident: the pages stay mapped while the store keeps the files open.
        store.count_read(store.size)
        return snap.meta


def _chunked_value(snap: Snapshot, row: KeyInfo, note_chunks: bool = False,
                   read: Callable[[int], None] | None = None
                   ) -> tuple[Any, list[tuple[str, int, int, int, int, list[bytearray]]]]:
    """A chunked value, built a chunk at a time as they are read (snapshot.values); with
    `note_chunks` (a value kept as nodes a compaction child loads), each chunk's (part path,
    part rows, number, index, body bytes, nodes) too, in order. `read`: told each chunk's
    bytes as it is read (the store releases the map's pages as reads add up, so a big value's
    load does not hold its file's pages in the RSS beside the value it builds)."""
    ref = row.chunked
    assert ref is not None and row.type is not None
    where: list[tuple[str, int, int, int, int]] = []
    nodes: list[list[bytearray]] = []

    at = [snap.chunk_home(row)[0].name, ""]  # the file and chunk being read

    def bodies() -> Iterator[bytes]:
        for part, run, index, body in snap.value_chunk_rows(row):
            at[:] = [part.name, f", chunk {index}"]
            if read is not None:
                read(len(body))
            if note_chunks:
                rows = snap.part_infos[run.part].nodes if run.part is not None else -1
                where.append((part.path, rows, run.number, index, len(body)))
            yield body

    try:
        value = build_value(row.type, ref.elements, bodies(), ref.indexed,
                            (lambda chunk, _n: nodes.append(chunk)) if note_chunks else None)
    except ValueError as err:
        raise SnapshotError(f"{at[0]}: table chunks, key {row.key!r} (db {row.db}){at[1]}: "
                            f"undecodable value ({err})") from None
    return value, [(*w, n) for w, n in zip(where, nodes, strict=True)]


def _lazy_value(snap: Snapshot, store: SnapshotNodes, row: KeyInfo, residency: Residency
                ) -> tuple[ValueType, Any] | None:
    """A chunked value kept as nodes loaded cold (a lazy load's), and its type: its nodes'
    placeholders from the snapshot's index of them, only its two ends read; None when its type
    keeps no such nodes, the index does not cover every chunk (an older snapshot's chunks) or
    the value has too few nodes to have cold ones (loaded whole). The index's counts must add
    up to the elements the keys row records."""
    ref = row.chunked
    assert ref is not None
    vt = BY_NAME.get(row.type or "")
    if vt is None or vt.nodes is None:
        return None
    nodes: list[ColdValueNode] = []
    index: NodeIndex = {}
    chunks = elements = 0
    for part, number, chunk, found in snap.list_node_index(row):
        chunks += 1
        for pos, (digest, size, count) in enumerate(found):
            node = ColdValueNode(store, part, number, chunk, pos, digest, size, count)
            nodes.append(node)
            index.setdefault(digest, node)
            elements += count
    if chunks != ref.chunks or len(nodes) <= 2:
        return None
    if elements != ref.elements or any(node.count <= 0 for node in nodes):
        raise SnapshotError(f"{snap.path}: table listnodes, key {row.key!r} (db {row.db}): "
                            f"{elements} elements found, {ref.elements} recorded: the file "
                            f"is damaged")
    held: list[bytearray | ColdValueNode] = list(nodes)
    value = vt.nodes.of_nodes(held, elements)
    home = residency.bind_nodes(value, vt.nodes, index)
    home.cold_nodes = len(nodes)
    home.cold_elements = elements
    home.cold_bytes = sum(node.size for node in nodes)
    for end in (0, len(nodes) - 1):  # (its ends are resident: pushes and pops touch them)
        cold = nodes[end]
        held[end] = cold.read()
        home.dropped(cold)
    return vt, value


def _lazy_table(store: SnapshotNodes, row: KeyInfo, residency: Residency
                ) -> tuple[ValueType, Any] | None:
    """A chunked value with a bucket table loaded with every run of it cold (a lazy load's),
    and its type: only the runs that keep something beside their buckets read (a hash's field
    TTLs); None when its type keeps no such table or the snapshot has no index of its runs
    (an older snapshot's)."""
    vt = BY_NAME.get(row.type or "")
    if vt is None or vt.table_of is None:
        return None
    cold = codec_of(vt.name).cold
    if cold is None:
        return None
    index = store.table_index(row)
    if index is None:
        return None
    # (a generator: one chunk held at a time, however many runs keep TTLs)
    kept = (store.table_run_chunk(run) for run in index.runs if run.extras)
    try:
        value, table = cold(index.seed, index.size, index.split,
                            sum(run.elements for run in index.runs), kept)
    except ValueError as err:
        raise SnapshotError(f"{store.path}: table tableruns, key {row.key!r} (db {row.db}): "
                            f"{err}") from None
    residency.bind_table(table, index)
    return vt, value


# A value with a bucket table whose runs may go cold: its type, database, key and the table.
TabledValue = tuple[ValueType, int, bytes, Any]
BigValue = tuple[ValueType, int, bytes, Any]  # either (or a value kept as nodes: NodedValue)
T = TypeVar("T")


def tabled_values(keyspaces: list[list[dict[bytes, Any]]]) -> list[TabledValue]:
    """(type, db, key, table) of every value of `keyspaces` (the engine's, engine lock held)
    with a bucket table whose runs may go cold (its type's `table_of`)."""
    return [(vt, db, key, table) for vt in TYPES if (table_of := vt.table_of) is not None
            for db, space in enumerate(keyspaces[vt.slot])
            for key, value in space.items() if (table := table_of(value)) is not None]


def table_indexes(store: SnapshotNodes, found: list[TabledValue]
                  ) -> list[tuple[TabledValue, TableIndex]]:
    """The snapshot's index of each table's runs, for those it holds with one (no engine
    lock needed, as `node_indexes`). A damaged index leaves its table resident, with a
    warning."""
    return _indexed(found, store.table_runs, "buckets")


def _indexed(found: list[BigValue], read: Callable[[int, bytes], T | None], what: str
             ) -> list[tuple[BigValue, T]]:
    """(value, its index `read` finds) of each of `found` that the snapshot holds with one;
    one whose index is damaged is left out, with a warning (its `what` stay in memory)."""
    out = []
    for big in found:
        vt, db, key, _value = big
        try:
            index = read(db, key)
        except SnapshotError as err:
            log.warning("the %s %r (db %d) keeps its %s in memory: %s", vt.name, key, db, what,
                        err)
            continue
        if index:
            out.append((big, index))
    return out


def bind_table_indexes(residency: Residency, indexed: list[tuple[TabledValue, TableIndex]],
                       keyspaces: list[list[dict[bytes, Any]]] | None = None) -> None:
    """Bind each table to its index (engine lock held); with `keyspaces`, only those still
    the table of the value under their key."""
    for (vt, db, key, table), index in indexed:
        if keyspaces is not None:
            table_of = vt.table_of
            value = keyspaces[vt.slot][db].get(key)
            if table_of is None or value is None or table_of(value) is not table:
                continue
        residency.bind_table(table, index)


def _note_home(snap: Snapshot, row: KeyInfo, value: Any, homes: ValueHomes,
               chunks: list[tuple[str, int, int, int, int, list[bytearray]]],
               kind: ValueNodes | None) -> None:
    """Where the value's chunks are, for a compaction that may leave them there (a value kept
    as nodes of `kind`, chunk by chunk: `chunks`, as _chunked_value noted them)."""
    ref = row.chunked
    assert ref is not None
    if any(run.part is None for run in ref.runs):
        return  # (not a compaction's: written again)
    runs = tuple(HomeRun(snap.parts[run.part].path, snap.part_infos[run.part].nodes,
                         run.number, run.first, run.chunks)
                 for run in ref.runs if run.part is not None)
    stored = None
    if kind is not None:
        count = kind.count
        stored = tuple(StoredChunk(path, rows, number, index, sum(map(count, nodes)), size,
                                   *node_sums(nodes))
                       for path, rows, number, index, size, nodes in chunks)
    homes.add(row.db, row.key, ValueHome(id(value), runs, ref.elements, ref.size, ref.indexed,
                                         stored))


# A value kept as nodes: its type, database, key and the value.
NodedValue = tuple[ValueType, int, bytes, Any]


def noded_values(keyspaces: list[list[dict[bytes, Any]]]) -> list[NodedValue]:
    """(type, db, key, value) of every value of `keyspaces` (the engine's, engine lock held)
    kept as nodes that may go cold (ValueNodes.noded: more than its two ends)."""
    return [(vt, db, key, value) for vt in TYPES if (kind := vt.nodes) is not None
            for db, space in enumerate(keyspaces[vt.slot])
            for key, value in space.items() if kind.noded(value)]


def node_indexes(store: SnapshotNodes, found: list[NodedValue]
                 ) -> list[tuple[NodedValue, NodeIndex]]:
    """The snapshot's index of each value's nodes, for those it holds with one (no engine lock
    needed: the store is the caller's until it is switched to). A damaged index row leaves
    its value resident, with a warning: the snapshot itself was checked when it was made."""
    return _indexed(found, store.node_index, "nodes")


def bind_node_indexes(residency: Residency, indexed: list[tuple[NodedValue, NodeIndex]],
                      clean_before: int,
                      keyspaces: list[list[dict[bytes, Any]]] | None = None) -> None:
    """Bind each value to its index in the snapshot rotated at clock value `clean_before`
    (engine lock held); with `keyspaces` (the engine's, per type slot then database), only
    those still under their key (what changed meanwhile is bound at the next switch)."""
    for (vt, db, key, value), index in indexed:
        assert vt.nodes is not None
        if keyspaces is None or keyspaces[vt.slot][db].get(key) is value:
            residency.bind_nodes(value, vt.nodes, index, clean_before)


def _value_type(path: str, row: KeyInfo) -> tuple[ValueType, Callable[[bytes], Any]]:
    """The registered type a keys row names, with its decoder (a snapshot from a build that
    knows more types than this one is refused, naming the type and the key)."""
    vt = BY_NAME.get(row.type or "")
    if vt is None or vt.from_bytes is None:
        raise SnapshotError(f"{path}: key {row.key!r} of database {row.db} holds a value of "
                            f"type {row.type!r}, which this build does not know")
    return vt, vt.from_bytes


def _restore_nodes(snap: Snapshot, info: StreamInfo, s: Stream,
                   lazy: bool) -> tuple[int, int, int]:
    """The stream's nodes, cold (lazy) or decoded; returns the cold nodes, their live entries
    and their listpack bytes."""
    nodes = entries = size_total = 0
    if not lazy:
        for master, lp, count, live in snap.node_buffers(info.number):
            s.restore_packed(master, lp, count, live)
            nodes += 1
            entries += live
        _check_count(snap, "nodes", info, "nodes", nodes, info.nodes)
        _check_count(snap, "nodes", info, "live entries", entries, info.length)
        return 0, 0, 0
    for master, live, size, master_fields, count in snap.node_headers(info.number):
        s.restore_cold_node(cold_node(master, master_fields, size, live, count))
        nodes += 1
        entries += live
        size_total += size
    table = "nodeinfo" if "nodeinfo" in snap.tables else "nodes"
    _check_count(snap, table, info, "nodes", nodes, info.nodes)
    _check_count(snap, table, info, "live entries", entries, info.length)
    return nodes, entries, size_total


def _check_count(snap: Snapshot, table: str, info: StreamInfo, what: str, found: int,
                 recorded: int, group: bytes | None = None) -> None:
    """A count the streams (or groups) table keeps against what the table holds: keys lost to
    damage in the file's structure show here."""
    if found != recorded:
        where = f"stream {info.key!r} (db {info.db})" + (f", group {group!r}" if group
                                                         else "")
        raise SnapshotError(f"{snap.path}: table {table}, {where}: {found} {what} found, "
                            f"{recorded} recorded: the file is damaged")


def _restore_metadata(snap: Snapshot, info: StreamInfo, s: Stream) -> None:
    s.length = info.length
    s.first_id = info.first_id.as_int()
    s.last_id = info.last_id.as_int()
    s.max_deleted_id = info.max_deleted_id.as_int()
    s.entries_added = info.entries_added
    if info.idmp is not None:
        s.idmp = _restore_idmp(info.idmp)
    groups = snap.groups(info.db, info.key)
    _check_count(snap, "groups", info, "groups", len(groups), info.groups)
    for g in groups:
        group = s.groups[g.name] = ConsumerGroup(g.name, g.last_id.as_int(), g.entries_read)
        found = snap.consumers(info.db, info.key, g.name)
        _check_count(snap, "consumers", info, "consumers", len(found), g.consumers, g.name)
        for c in found:
            consumer = group.create_consumer(c.name, c.seen_time)
            consumer.active_time = c.active_time
        consumers = group.consumers
        pending = 0
        for p in snap.pending(info.db, info.key, g.name):
            pending += 1
            if p.consumer is None:  # XNACK released it: unowned, delivery time 0
                group.release(p.id.as_int(), p.delivery_count)
                continue
            owner = consumers.get(p.consumer)
            if owner is None:
                raise SnapshotError(f"{snap.path}: table pel, stream {info.key!r} (db "
                                    f"{info.db}), group {g.name!r}, entry {p.id}: owned by "
                                    f"{p.consumer!r}, not a consumer of the group: the file "
                                    f"is damaged")
            group.add_pending(p.id.as_int(), owner, p.delivery_time, p.delivery_count)
        _check_count(snap, "pel", info, "pending entries", pending, g.pending, g.name)
