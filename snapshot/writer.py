"""Writing a snapshot: the engine's whole state as of one LSN, into a new LMDB file.

Owns turning the engine's in-memory structures (streams, nodes, groups, PEL, consumers, IDMP
maps) into the tables snapshot.layout defines, every value sealed with its checksum. A cold node
(engine.model.residency) is moved from the snapshot that holds it as stored, its checksum
checked and carried to its new key, without being decoded: a compaction's cost follows what
changed, and damage in the old file fails the compaction instead of being copied on. After
writing, the file is read back once for its whole-file checksum (the manifest's `crc32`): by
`write_snapshot`, or by the compactor while it fsyncs the file. LMDB writes the file itself with its syncs off; the caller makes
it durable through the file-layer seam (fdatasync, rename, directory fsync) before anything
relies on it, so a crash mid-write leaves only a temp file that recovery removes.

A compaction writes a segmented snapshot instead (`write_segmented`, version 5): the state
without its nodes in the new file, plus a runs table pointing at the part files that hold the
nodes; the nodes nothing changed stay where they are, the others go into one new part file
(snapshot.segments decides which, and which old parts are merged into the new one). A big
value of a type with a chunk codec (snapshot.values) is written as chunk rows, one chunk
built at a time: in the file itself in a self-contained snapshot, else in the new part file,
unless the compaction child's `ValueHomes` says the previous snapshot holds it as it is (then
its keys row points at the part file holding its chunks, as a run points at unchanged nodes).
A changed value kept as nodes (a list's quicklist: engine.model.residency.ValueNodes) keeps its
chunks whose nodes did not change where they are (snapshot.values.plan_nodes: a queue's, all
but its two ends) and only its other nodes are written, its keys row then listing runs of
chunks from several values and part files (the row's second form, snapshot.layout). Every
chunk of such a value written gets its node-index row (the `listnodes` table: its nodes'
hashes, bytes and elements, snapshot.layout): the index by which a `backlog-memory` budget
lets the engine's value nodes the snapshot holds go cold (engine.model.residency).
Must not touch: command semantics, the manifest, the AOF.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

import lmdb

from streamkeep.aof.fs import buffer_address, file_identity, map_start
from streamkeep.engine.model.residency import ValueNodes, value_node_hash
from streamkeep.engine.model.value_types import TYPES, ValueType
from streamkeep.snapshot import layout, segments
from streamkeep.snapshot import values as values_mod
from streamkeep.snapshot.reader import file_chunks

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node, Stream

Rows = Iterator[tuple[str, bytes, bytes | bytearray]]

_INITIAL_MAP_SIZE = 1 << 30


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    lsn: int
    streams: int
    entries: int
    crc32: int | None = None  # of the whole file as written (layout.file_checksum); None: not
    # computed here (the compactor computes it while the file is fsynced)


def stream_numbers(dbs: list[dict[bytes, Stream]]) -> Iterator[tuple[int, int, bytes, Stream]]:
    """(number, db, key, stream) as a snapshot of `dbs` numbers its streams: a compaction
    computes them when it rotates, to find the streams in the snapshot it is writing."""
    number = 0
    for db_index, db in enumerate(dbs):
        for key in sorted(db):
            number += 1
            yield number, db_index, key, db[key]


def _node_values(node: Node, key: bytes) -> tuple[bytes | bytearray, bytes]:
    """The node's sealed `nodes` and `nodeinfo` values under `key`: a cold one's moved from the
    snapshot that holds it as stored (checked on the way, not decoded)."""
    lp = node.lp
    if lp is None:  # cold
        home = node.home
        assert home is not None and home.store is not None  # cold: a snapshot holds it
        return home.store.stored_for(home.number, node.master, key)
    return layout.seal_node(key, lp, layout.encode_node_info(
        node.live, len(lp), node.count, node.master_fields))


def _sealed(table: str, key: bytes, body: bytes) -> tuple[str, bytes, bytes]:
    return table, key, layout.seal(table, key, body)


def _own_nodes(number: int, s: Stream) -> Rows:
    """A self-contained snapshot's rows for the stream's nodes: every node, in this file."""
    for node in s.nodes:
        key = layout.node_key(number, node.master)
        value, info = _node_values(node, key)
        yield "nodes", key, value
        yield "nodeinfo", key, info


def _tables(dbs: list[dict[bytes, Stream]],
            node_rows: Callable[[int, Stream], Rows] = _own_nodes) -> Rows:
    """(table, key, sealed value) for the whole state, each table's keys in increasing
    order; `node_rows` gives a stream's rows for its nodes."""
    for number, db_index, key, s in stream_numbers(dbs):
        idmp = s.idmp
        yield _sealed("streams", layout.stream_key(db_index, key), layout.encode_stream(
            number, s.length, s.first_id, s.last_id, s.max_deleted_id, s.entries_added,
            len(s.nodes), len(s.groups),
            None if idmp is None else layout.encode_idmp(
                idmp.duration, idmp.maxsize, idmp.added, idmp.duplicates, idmp.entries())))
        yield from node_rows(number, s)
        for name in sorted(s.groups):
            g = s.groups[name]
            yield _sealed("groups", layout.group_key(number, name), layout.encode_group(
                g.last_id, g.entries_read, len(g.pel), len(g.consumers)))
        # consumers and pel keys both start with the group prefix; sort groups the way
        # those keys sort (by length, then bytes) so every table is written in key order.
        for name in sorted(s.groups, key=lambda n: (len(n), n)):
            g = s.groups[name]
            prefix = layout.group_prefix(number, name)
            for cname in sorted(g.consumers):
                c = g.consumers[cname]
                yield _sealed("consumers", prefix + cname, layout.encode_consumer(
                    c.seen_time, c.active_time))
            for sid in g.pel_index:
                nack = g.pel[sid]
                yield _sealed("pel", prefix + layout.id_bytes(sid), layout.encode_pending(
                    None if nack.consumer is None else nack.consumer.name,
                    nack.delivery_time, nack.delivery_count))


def _keys_table(values: list[list[dict[bytes, Any]]] | None,
                expires: list[dict[bytes, int]] | None,
                refs: dict[tuple[int, bytes], layout.ChunkRef] | None = None
                ) -> Rows:
    """The keys table: every key of a type other than stream (`values`: the engine's
    keyspaces, per type slot then database) and every key with a TTL, by database then key.
    A big value (snapshot.values) is chunked: with `refs` (a segmented snapshot's) its row
    points at the chunks a part file holds; without, its chunk rows are written here, in this
    file's chunks table, numbered in key order."""
    spaces = list(zip(TYPES, values or (), strict=False))
    count = len(values[0]) if values else len(expires or ())
    number = 0
    for db_index in range(count):
        ttls = expires[db_index] if expires is not None else {}
        rows: dict[bytes, tuple[ValueType, Any]] = {}
        for vt, space in spaces:
            if vt.to_bytes is None:  # its own tables (streams)
                continue
            for key, value in space[db_index].items():
                rows[key] = (vt, value)
        for key in sorted(rows.keys() | ttls.keys()):
            raw = layout.stream_key(db_index, key)
            found = rows.get(key)
            if found is None:
                yield _sealed("keys", raw, layout.encode_key(None, ttls.get(key)))
                continue
            vt, value = found
            if refs is not None and (ref := refs.get((db_index, key))) is not None:
                yield _sealed("keys", raw, layout.encode_chunked_key(ref, ttls.get(key),
                                                                     vt.name))
                continue
            if refs is None and values_mod.is_chunked(vt, value):
                number += 1
                done: list[layout.ChunkRef] = []
                yield from _chunk_rows(number, vt, value, None, done)
                yield _sealed("keys", raw, layout.encode_chunked_key(done[0], ttls.get(key),
                                                                     vt.name))
                continue
            assert vt.to_bytes is not None
            yield _sealed("keys", raw, layout.encode_key(vt.to_bytes(value), ttls.get(key),
                                                         vt.name))


def _node_index_row(number: int, index: int, nodes: list[bytearray], kind: ValueNodes
                    ) -> tuple[str, bytes, bytes]:
    """The node-index row (the `listnodes` table) of a chunk of `nodes` (of a value kept as
    nodes of `kind`)."""
    count = kind.count
    return _sealed("listnodes", layout.chunk_key(number, index), layout.encode_list_nodes(
        (value_node_hash(node), len(node), count(node)) for node in nodes))


def _chunk_rows(number: int, vt: ValueType, value: Any, part: int | None,
                done: list[layout.ChunkRef]) -> Rows:
    """A chunked value's rows under `number`, one chunk built at a time (a value kept as
    nodes, each chunk with its node-index row; a bucket table's, with its run's row); then its ChunkRef (in part `part`) appended
    to `done`."""
    chunks = elements = size = 0
    kind = vt.nodes
    # A table's run rows go after its chunks (`_put_all` writes them once the chunks are, with
    # their places in the file).
    run_rows: list[tuple[str, bytes, bytes]] = []
    for body, count, nodes in values_mod.value_chunks(vt.name, value):
        yield _sealed("chunks", layout.chunk_key(number, chunks), body)
        if isinstance(nodes, layout.TableRunRow):  # (unsealed: `_put_all` places it)
            run_rows.append((_UNPLACED, layout.chunk_key(number, chunks),
                             layout.encode_table_run(nodes)))
        elif nodes is not None and kind is not None:
            yield _node_index_row(number, chunks, nodes, kind)
        chunks += 1
        elements += count
        size += len(body)
    yield from run_rows
    done.append(layout.ChunkRef.whole(part, number, chunks, elements, size))


def write_snapshot(dbs: list[dict[bytes, Stream]], path: str, lsn: int, created_ms: int,
                   repl_id: str, checksum: bool = True,
                   values: list[list[dict[bytes, Any]]] | None = None,
                   expires: list[dict[bytes, int]] | None = None) -> SnapshotInfo:
    """Write the state in `dbs` (and the other types' `values`, the engine's keyspaces) to a
    new LMDB file at `path`, which must not exist. Not durable until the caller fsyncs it
    through the file-layer seam. With `checksum`, the file is read
    back (from the page cache) for its whole-file checksum."""
    filled: list[SnapshotInfo] = []
    _written(path, lambda env: filled.append(
        _fill(env, dbs, lsn, created_ms, repl_id, values, expires)))
    info = filled[-1]
    if not checksum:
        return info
    # Read back while it is in the page cache: what the manifest will record of the file.
    return dataclasses.replace(info, crc32=layout.file_checksum(file_chunks(path)))


def _fill(env: lmdb.Environment, dbs: list[dict[bytes, Stream]], lsn: int, created_ms: int,
          repl_id: str, values: list[list[dict[bytes, Any]]] | None,
          expires: list[dict[bytes, int]] | None) -> SnapshotInfo:
    streams = entries = 0
    for db in dbs:
        streams += len(db)
        entries += sum(s.length for s in db.values())
    _put_all(env, chain(_tables(dbs), _keys_table(values, expires)),
             {"format": layout.FORMAT, "version": layout.VERSION, "lsn": lsn,
              "created_ms": created_ms, "repl_id": repl_id, "repl_offset": lsn,
              "streams": streams, "entries": entries})
    return SnapshotInfo(lsn, streams, entries)


_SELF_CONTAINED = (*layout.TABLES, "nodeinfo", "keys")
_SEGMENTED = (*_SELF_CONTAINED, "runs")


def _put_all(env: lmdb.Environment, rows: Iterable[tuple[str, bytes, bytes | bytearray]],
             meta: dict[str, object], names: tuple[str, ...] = _SELF_CONTAINED) -> None:
    """Write `rows` (each table's keys in increasing order) and the meta table in one
    transaction; each of the tables `names` exists, empty or not, another only if it has
    rows."""
    tables = {name: env.open_db(name.encode()) for name in names}
    unplaced: list[tuple[bytes, bytes]] = []
    with env.begin(write=True) as txn:
        cursors = {name: txn.cursor(db) for name, db in tables.items()}
        for table, key, value in rows:
            if table == _UNPLACED:
                unplaced.append((key, bytes(value)))
                continue
            cursor = cursors.get(table)
            if cursor is None:  # a table only a file that has such rows gets (chunks)
                cursor = cursors[table] = txn.cursor(env.open_db(table.encode(), txn=txn))
            if not cursor.put(key, value, append=True):
                # append=True refuses a key out of order instead of inserting it: that would be
                # a writer bug losing data silently, so fail the snapshot instead.
                raise AssertionError(f"snapshot {table} keys out of order at {key!r}")
        for name, meta_value in sorted(meta.items()):
            key = name.encode()
            txn.put(key, layout.seal("meta", key, layout.encode_meta_value(meta_value)),
                    db=tables["meta"])
    if unplaced:
        _put_table_runs(env, unplaced)


# The table `_chunk_rows` names a table run's row by before it is placed (`_put_all`).
_UNPLACED = "tableruns (unplaced)"


def _put_table_runs(env: lmdb.Environment, unplaced: list[tuple[bytes, bytes]]) -> None:
    """The tableruns rows of the chunks just written (each its unsealed value, under its
    chunk's key, in order), in a second transaction, each with where its chunk's stored value
    is in the file (found from the B-tree: a view's place in the map, no chunk read), so a
    cold run is one pread; and their pages together, after the chunks'."""
    start = map_start(file_identity(env.path()))
    places = []
    with env.begin(db=env.open_db(b"chunks"), buffers=True) as txn:
        for key, _value in unplaced:
            view = txn.get(key)
            at = -1 if view is None or start < 0 else buffer_address(view) - start
            places.append((at, len(view)) if view is not None and at >= 0 else (-1, 0))
    db = env.open_db(b"tableruns")
    while True:  # (the first transaction is committed: only this one is tried again)
        try:
            with env.begin(write=True, db=db) as txn:
                cursor = txn.cursor()
                for (key, value), (offset, length) in zip(unplaced, places, strict=True):
                    row = layout.decode_table_run(value)._replace(offset=offset, stored=length)
                    if not cursor.put(key, layout.seal("tableruns", key,
                                                       layout.encode_table_run(row)),
                                      append=True):
                        raise AssertionError(f"snapshot tableruns keys out of order at {key!r}")
            return
        except lmdb.MapFullError:
            env.set_mapsize(env.info()["map_size"] * 2)


def _written(path: str, fill: Callable[[lmdb.Environment], None]) -> None:
    """A new LMDB file at `path` filled by `fill` (run again with a bigger map when full)."""
    env = lmdb.open(path, subdir=False, lock=False, map_size=_INITIAL_MAP_SIZE,
                    max_dbs=layout.MAX_TABLES,
                    sync=False, metasync=False, meminit=False)
    try:
        while True:
            try:
                fill(env)
                return
            except lmdb.MapFullError:  # the transaction was aborted: grow the map, go again
                env.set_mapsize(env.info()["map_size"] * 4)
    finally:
        env.close()


def put_functions(path: str, payload: bytes) -> None:
    """Record the engine's function libraries (FUNCTION DUMP's payload, engine.exec.functions)
    as the meta value `functions` of the snapshot just written at `path`, before the caller
    checksums it and makes it durable. A snapshot without it holds no library."""
    def fill(env: lmdb.Environment) -> None:
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            txn.put(b"functions", layout.seal("meta", b"functions",
                                              layout.encode_meta_value(payload)), db=meta)
    _written(path, fill)


# --- segmented snapshots ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SegmentedInfo:
    """What `write_segmented` wrote: the snapshot's own file, and the part files it refers to
    (names, in the order of its `parts`; the new one last, if it has any node or chunk);
    `homes`, where each chunked value is (snapshot.values.ValueHomes: a compaction child goes
    on from there)."""

    info: SnapshotInfo
    parts: list[str]
    new_part: bool
    homes: dict[tuple[int, bytes], values_mod.ValueHome] = dataclasses.field(
        default_factory=dict)


@dataclass(slots=True)
class _BigValue:
    """A chunked value of the state being written: kept where `home` says, or written to the
    new part under `number`; a value kept as nodes has `pieces` (snapshot.values.plan_nodes)
    that say which of its chunks stay where they are and which nodes are written (then `home`
    is None)."""

    db: int
    key: bytes
    vt: ValueType
    value: Any
    home: values_mod.ValueHome | None
    number: int = 0
    pieces: list[values_mod.NodePiece] | None = None
    old: values_mod.ValueHome | None = None  # a noded value's home, whatever changed since

    def writes(self) -> bool:
        """Whether the new part gets chunks of it."""
        return self.home is None and (self.pieces is None or any(
            chunk is None for chunk, _nodes in self.pieces))


def _big_values(values: list[list[dict[bytes, Any]]] | None,
                homes: values_mod.ValueHomes | None) -> list[_BigValue]:
    """The state's chunked values, by database then key, each with its home in the previous
    snapshot when it is unchanged since; a changed value kept as nodes, with the chunks of it
    that are."""
    found: list[_BigValue] = []
    spaces = [(vt, space) for vt, space in zip(TYPES, values or (), strict=False)
              if vt.name in values_mod.CHUNKED_TYPES]
    for db_index in range(len(values[0]) if values else 0):
        for vt, space in spaces:
            for key, value in space[db_index].items():
                if values_mod.is_chunked(vt, value):
                    home = None if homes is None else homes.unchanged(db_index, key, value)
                    b = _BigValue(db_index, key, vt, value, home)
                    if vt.nodes is not None:
                        b.old = None if homes is None else homes.node_home(db_index, key)
                        if home is None:
                            b.pieces = _node_pieces(vt.nodes, value, b.old)
                    found.append(b)
    found.sort(key=lambda b: (b.db, b.key))
    return found


def _node_pieces(kind: ValueNodes, value: Any, old: values_mod.ValueHome | None,
                 merged: set[str] | frozenset[str] = frozenset()
                 ) -> list[values_mod.NodePiece]:
    """A value's pieces (kept as nodes of `kind`): its chunks that `old` holds as they are
    (none in a part of `merged`) referred to, the rest of its nodes written."""
    nodes = list(kind.resident(value))
    if old is None:
        return [(None, nodes)]
    pieces = values_mod.plan_nodes(nodes, old)
    if merged:
        pieces = [(None if c is not None and c.part in merged else c, n) for c, n in pieces]
    return pieces


def _use(uses: dict[str, segments.PartUse], path: str, rows: int) -> segments.PartUse:
    use = uses.get(path)
    if use is None:
        use = uses[path] = segments.PartUse(path, os.path.getsize(path), rows)
    return use


def write_segmented(dbs: list[dict[bytes, Stream]], path: str, part_path: str, lsn: int,
                    created_ms: int, repl_id: str,
                    values: list[list[dict[bytes, Any]]] | None = None,
                    expires: list[dict[bytes, int]] | None = None,
                    policy: segments.MergePolicy = segments.DEFAULT_POLICY,
                    part_name: str | None = None,
                    on_node: Callable[[], None] | None = None,
                    homes: values_mod.ValueHomes | None = None) -> SegmentedInfo:
    """Write the state in `dbs` as a segmented snapshot: its own file at `path`, the nodes and
    big values' chunks that must be written into a new part file at `part_path` (in the same
    directory; not created if there are none), which the snapshot names `part_name` (default:
    its file name; a temp file is renamed to it). Neither file may exist; neither is durable
    until the caller fsyncs it. `homes`: where the previous snapshot's chunked values are and
    which keys changed since (a compaction child's): an unchanged value stays where it is, and
    so do the unchanged chunks of a changed value kept as nodes."""
    numbered = [(number, s) for number, _db, _key, s in stream_numbers(dbs)]
    plans, uses = segments.plan(numbered)
    big = _big_values(values, homes)
    new_bytes = sum(node.size for p in plans for node in p.written())
    for b in big:
        if b.home is not None:
            for run in b.home.runs:
                _use(uses, run.part, run.part_rows).nodes += run.chunks
        elif b.pieces is not None:
            for chunk, nodes in b.pieces:
                if chunk is None:
                    new_bytes += sum(map(len, nodes))
                else:
                    _use(uses, chunk.part, chunk.part_rows).nodes += 1
        else:
            new_bytes += b.vt.memory_usage(b.value)
    merged = segments.choose_merges(uses, new_bytes, policy)
    for p in plans:
        p.merged(merged)
    kept: dict[str, int] = {}
    for p in plans:
        for span in p.spans:
            if span.run is not None:
                kept.setdefault(span.run.part.path, len(kept))
    number = 0
    for b in big:
        if b.home is not None and any(run.part in merged for run in b.home.runs):
            # a part of it is merged away: written again, from memory (a noded value's other
            # chunks stay where they are)
            b.home = None
            if b.vt.nodes is not None:
                b.pieces = _node_pieces(b.vt.nodes, b.value, b.old, merged)
        elif b.pieces is not None and merged:
            b.pieces = [(None if c is not None and c.part in merged else c, n)
                        for c, n in b.pieces]
        if b.writes():
            number += 1
            b.number = number
        if b.home is not None:
            for run in b.home.runs:
                kept.setdefault(run.part, len(kept))
        for chunk, _nodes in b.pieces or ():
            if chunk is not None:
                kept.setdefault(chunk.part, len(kept))
    refs: dict[tuple[int, bytes], layout.ChunkRef] = {}
    nodes_done: dict[tuple[int, bytes], _NodesDone] = {}
    written = _write_part(plans, part_path, lsn, created_ms, repl_id, on_node,
                          [b for b in big if b.writes()], len(kept), refs, kept, nodes_done)
    for b in big:  # noded values whose chunks are all kept where they are: nothing written
        if b.pieces is not None and not b.writes():
            for _row in _node_rows(b, len(kept), kept, refs, nodes_done):
                raise AssertionError("a value with nothing to write wrote a chunk")
    names = [os.path.basename(name) for name in kept]
    part_docs: list[list[Any]] = [[name, os.path.getsize(part), uses[part].total]  # its rows
                 for name, part in zip(names, kept, strict=True)]
    if written:
        names.append(part_name or os.path.basename(part_path))
        part_docs.append([names[-1], os.path.getsize(part_path), written])
    for b in big:
        if b.home is not None:
            h = b.home
            refs[(b.db, b.key)] = layout.ChunkRef(
                tuple(layout.ChunkRun(kept[r.part], r.number, r.first, r.chunks)
                      for r in h.runs), h.elements, h.size, h.indexed)
    by_plan = {id(p.stream): p for p in plans}

    def runs_of(number: int, s: Stream) -> Rows:
        yield from _run_rows(number, by_plan[id(s)], kept, len(kept))

    streams = sum(len(db) for db in dbs)
    entries = sum(s.length for db in dbs for s in db.values())
    _written(path, lambda env: _put_all(
        env, chain(_tables(dbs, runs_of), _keys_table(values, expires, refs)),
        {"format": layout.FORMAT, "version": layout.SEGMENTED_VERSION, "lsn": lsn,
         "created_ms": created_ms, "repl_id": repl_id, "repl_offset": lsn, "streams": streams,
         "entries": entries, "parts": part_docs}, _SEGMENTED))
    directory = os.path.dirname(path)
    paths = [os.path.join(directory, name) for name in names]
    new_homes = {}
    for b in big:
        if b.home is not None:
            new_homes[(b.db, b.key)] = b.home
            continue
        ref = refs[(b.db, b.key)]
        runs = tuple(values_mod.HomeRun(paths[r.part], int(part_docs[r.part][2]), r.number,
                                        r.first, r.chunks)
                     for r in ref.runs if r.part is not None)
        stored = None
        done = nodes_done.get((b.db, b.key))
        if done is not None:
            stored = tuple(c if c is not None else values_mod.StoredChunk(
                paths[-1], written, b.number, index, count, size, ids, sums)
                for c, (index, count, size, ids, sums) in done.chunks)
        new_homes[(b.db, b.key)] = values_mod.ValueHome(
            id(b.value), runs, ref.elements, ref.size, ref.indexed, stored)
    return SegmentedInfo(SnapshotInfo(lsn, streams, entries), names, bool(written), new_homes)


@dataclass(slots=True)
class _NodesDone:
    """A noded value's chunks as written (in order): a stored one kept where it is, or (None,
    its index under the value's new number, elements, body bytes, node identities, hashes)."""

    chunks: list[tuple[values_mod.StoredChunk | None,
                       tuple[int, int, int, tuple[int, ...], tuple[int, ...]]]]


def _node_rows(b: _BigValue, index: int, kept: dict[str, int],
               refs: dict[tuple[int, bytes], layout.ChunkRef],
               done: dict[tuple[int, bytes], _NodesDone]) -> Rows:
    """A noded value's new chunks under its number in the new part (index `index` among the
    parts), its ChunkRef (runs of its chunks, kept or new, in order) into `refs` and its
    chunks into `done`."""
    assert b.pieces is not None and b.vt.nodes is not None
    kind = b.vt.nodes
    runs: list[layout.ChunkRun] = []
    chunks: list[Any] = []
    count = elements = size = 0
    for stored, body, n, nodes in values_mod.planned_chunks(b.pieces, kind.count):
        if stored is None:
            yield _sealed("chunks", layout.chunk_key(b.number, count), body)
            ids, sums = values_mod.node_sums(nodes)
            yield _node_index_row(b.number, count, nodes, kind)
            run = layout.ChunkRun(index, b.number, count, 1)
            chunks.append((None, (count, n, len(body), ids, sums)))
            count += 1
            size += len(body)
        else:
            run = layout.ChunkRun(kept[stored.part], stored.number, stored.index, 1)
            chunks.append((stored, (0, 0, 0, (), ())))
            size += stored.size
        elements += n
        last = runs[-1] if runs else None
        if last is not None and (last.part, last.number) == (run.part, run.number) and \
                last.first + last.chunks == run.first:
            runs[-1] = last._replace(chunks=last.chunks + 1)
        else:
            runs.append(run)
    old = b.old
    indexed = len(runs) == 1 and runs[0].first == 0 and (
        count == len(chunks) or (old is not None and old.indexed and len(old.runs) == 1
                                 and count == 0 and old.node_chunks is not None
                                 and len(old.node_chunks) == len(chunks)
                                 and runs[0].number == old.runs[0].number
                                 and runs[0].part == kept.get(old.runs[0].part)))
    refs[(b.db, b.key)] = layout.ChunkRef(tuple(runs), elements, size, indexed)
    done[(b.db, b.key)] = _NodesDone(chunks)


def _write_part(plans: list[segments.StreamPlan], path: str, lsn: int, created_ms: int,
                repl_id: str, on_node: Callable[[], None] | None = None,
                big: list[_BigValue] | None = None, index: int = 0,
                refs: dict[tuple[int, bytes], layout.ChunkRef] | None = None,
                kept: dict[str, int] | None = None,
                nodes_done: dict[tuple[int, bytes], _NodesDone] | None = None) -> int:
    """The nodes placed in the new part, written to `path` under their streams' numbers in
    the new snapshot, and the chunks of the big values `big` under their numbers (their
    ChunkRefs, part `index`, into `refs`; a noded value's chunks into `nodes_done`, those kept
    where they are in the parts `kept` indexes); returns how many rows, nodes and chunks
    (none: no file). `on_node` is called after each node (a compaction's progress)."""
    count = sum(span.end - span.start for p in plans for span in p.spans if span.run is None)
    big = big or []
    if not count and not big:
        return 0
    entries = sum(node.live for p in plans for node in p.written())
    chunks = [0]
    refs = {} if refs is None else refs

    def rows() -> Rows:
        chunks[0] = 0
        for p in plans:
            for node in p.written():
                key = layout.node_key(p.number, node.master)
                value, info = _node_values(node, key)
                yield "nodes", key, value
                yield "nodeinfo", key, info
                if on_node is not None:
                    on_node()
        for b in big:
            if b.pieces is not None:
                for row in _node_rows(b, index, kept or {}, refs,
                                      {} if nodes_done is None else nodes_done):
                    if row[0] == "chunks":  # (not its node-index row: rows are chunks)
                        chunks[0] += 1
                    yield row
                continue
            done: list[layout.ChunkRef] = []
            yield from _chunk_rows(b.number, b.vt, b.value, index, done)
            chunks[0] += done[0].chunks
            refs[(b.db, b.key)] = done[0]

    _written(path, lambda env: _put_all(env, rows(), {
        "format": layout.FORMAT, "version": layout.SEGMENTED_VERSION, "role": layout.NODES_ROLE,
        "lsn": lsn, "created_ms": created_ms, "repl_id": repl_id, "repl_offset": lsn,
        "streams": 0, "entries": entries}))
    return count + chunks[0]


def _run_rows(number: int, p: segments.StreamPlan, kept: dict[str, int], new_index: int
              ) -> Rows:
    """The stream's runs: a span's nodes kept where they are, or the new part's (consecutive
    written spans are one run there: it holds all of them, under the stream's number)."""
    nodes = p.stream.nodes
    pending: list[int] | None = None  # a run in the new part being extended: [start, end]
    for span in p.spans:
        if span.run is None:
            if pending is not None and pending[1] == span.start:
                pending[1] = span.end
                continue
            if pending is not None:
                yield _run_row(number, nodes, pending[0], pending[1], new_index, number)
            pending = [span.start, span.end]
            continue
        if pending is not None:
            yield _run_row(number, nodes, pending[0], pending[1], new_index, number)
            pending = None
        yield _run_row(number, nodes, span.start, span.end, kept[span.run.part.path],
                       span.run.number)
    if pending is not None:
        yield _run_row(number, nodes, pending[0], pending[1], new_index, number)


def _run_row(number: int, nodes: list[Node], start: int, end: int, index: int,
             part_number: int) -> tuple[str, bytes, bytes]:
    """The runs row for nodes[start:end], held by part `index` under `part_number`."""
    return _sealed("runs", layout.run_key(number, nodes[start].master), layout.encode_run(
        index, part_number, nodes[end - 1].master, end - start))
