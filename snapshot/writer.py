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
Must not touch: command semantics, the manifest, the AOF.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import lmdb

from streamkeep.snapshot import layout
from streamkeep.snapshot.snapshot_reader import file_chunks

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node, Stream

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
    if node.is_cold():
        home = node.home
        assert home is not None and home.store is not None  # cold: a snapshot holds it
        return home.store.stored_for(home.number, node.master, key)
    lp = node.lp
    return layout.seal_node(key, lp, layout.encode_node_info(
        node.live, len(lp), node.count, node.master_fields))


def _sealed(table: str, key: bytes, body: bytes) -> tuple[str, bytes, bytes]:
    return table, key, layout.seal(table, key, body)


def _tables(dbs: list[dict[bytes, Stream]]) -> Iterator[tuple[str, bytes, bytes | bytearray]]:
    """(table, key, sealed value) for the whole state, each table's keys in increasing
    order."""
    for number, db_index, key, s in stream_numbers(dbs):
        idmp = s.idmp
        yield _sealed("streams", layout.stream_key(db_index, key), layout.encode_stream(
            number, s.length, s.first_id, s.last_id, s.max_deleted_id, s.entries_added,
            len(s.nodes), len(s.groups),
            None if idmp is None else layout.encode_idmp(
                idmp.duration, idmp.maxsize, idmp.added, idmp.duplicates, idmp.entries())))
        for node in s.nodes:
            key = layout.node_key(number, node.master)
            value, info = _node_values(node, key)
            yield "nodes", key, value
            yield "nodeinfo", key, info
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


def _keys_table(strings: list[dict[bytes, bytes]] | None,
                expires: list[dict[bytes, int]] | None) -> Iterator[tuple[str, bytes, bytes]]:
    """The keys table: every string key and every key with a TTL, by database then key."""
    for db_index in range(len(strings or expires or ())):
        values = strings[db_index] if strings is not None else {}
        ttls = expires[db_index] if expires is not None else {}
        for key in sorted(values.keys() | ttls.keys()):
            yield _sealed("keys", layout.stream_key(db_index, key),
                          layout.encode_key(values.get(key), ttls.get(key)))


def write_snapshot(dbs: list[dict[bytes, Stream]], path: str, lsn: int, created_ms: int,
                   repl_id: str, checksum: bool = True,
                   strings: list[dict[bytes, bytes]] | None = None,
                   expires: list[dict[bytes, int]] | None = None) -> SnapshotInfo:
    """Write the state in `dbs` to a new LMDB file at `path`, which must not exist. Not durable
    until the caller fsyncs it through the file-layer seam. With `checksum`, the file is read
    back (from the page cache) for its whole-file checksum."""
    env = lmdb.open(path, subdir=False, lock=False, map_size=_INITIAL_MAP_SIZE, max_dbs=8,
                    sync=False, metasync=False, meminit=False)
    try:
        while True:
            try:
                info = _fill(env, dbs, lsn, created_ms, repl_id, strings, expires)
                break
            except lmdb.MapFullError:  # the transaction was aborted: grow the map, go again
                env.set_mapsize(env.info()["map_size"] * 4)
    finally:
        env.close()
    if not checksum:
        return info
    # Read back while it is in the page cache: what the manifest will record of the file.
    return dataclasses.replace(info, crc32=layout.file_checksum(file_chunks(path)))


def _fill(env: lmdb.Environment, dbs: list[dict[bytes, Stream]], lsn: int, created_ms: int,
          repl_id: str, strings: list[dict[bytes, bytes]] | None,
          expires: list[dict[bytes, int]] | None) -> SnapshotInfo:
    tables = {name: env.open_db(name.encode())
              for name in (*layout.TABLES, *layout.OPTIONAL_TABLES)}
    streams = entries = 0
    with env.begin(write=True) as txn:
        cursors = {name: txn.cursor(db) for name, db in tables.items()}
        for table, key, value in chain(_tables(dbs), _keys_table(strings, expires)):
            if not cursors[table].put(key, value, append=True):
                # append=True refuses a key out of order instead of inserting it: that would be
                # a writer bug losing data silently, so fail the snapshot instead.
                raise AssertionError(f"snapshot {table} keys out of order at {key!r}")
        for db in dbs:
            streams += len(db)
            entries += sum(s.length for s in db.values())
        meta = {"format": layout.FORMAT, "version": layout.VERSION, "lsn": lsn,
                "created_ms": created_ms, "repl_id": repl_id, "repl_offset": lsn,
                "streams": streams, "entries": entries}
        for name, meta_value in sorted(meta.items()):
            key = name.encode()
            txn.put(key, layout.seal("meta", key, layout.encode_meta_value(meta_value)),
                    db=tables["meta"])
    return SnapshotInfo(lsn, streams, entries)
