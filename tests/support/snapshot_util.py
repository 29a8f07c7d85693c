"""Snapshot helpers: `fingerprint(path)` hashes everything the read API
(streamkeep.snapshot.reader.Snapshot) returns for a snapshot file, so two readers (or a reader in
a child process, which imports it from here) can be compared; `body` and `sealed` read and write
a stored value's checksum as the manual documents it, computed here independently of
snapshot.layout (so the tests pin the format rather than repeat the code); `varied_engine` holds
one of everything a snapshot stores; `put_values` rewrites stored values with LMDB itself (a
file whose values check but disagree with each other)."""

from __future__ import annotations

import hashlib
import struct
import zlib
from typing import Any

from streamkeep import Engine
from streamkeep.snapshot import layout
from streamkeep.snapshot.reader import Snapshot


def fingerprint(path: str) -> str:
    """Everything the read API returns for a snapshot, hashed."""
    h = hashlib.sha256()
    with Snapshot(path) as snap:
        h.update(repr(snap.meta).encode())
        for info in snap.streams():
            h.update(repr(info).encode())
            ranges = snap.split(info.db, info.key, 3)
            h.update(repr(ranges).encode())
            for lo, hi in ranges:
                for entry in snap.entries(info.db, info.key, lo, hi):
                    h.update(repr(entry).encode())
            for g in snap.groups(info.db, info.key):
                h.update(repr(g).encode())
                h.update(repr(snap.consumers(info.db, info.key, g.name)).encode())
                h.update(repr(list(snap.pending(info.db, info.key, g.name))).encode())
    return h.hexdigest()


def _check(table: str, key: bytes, body: bytes) -> int:
    return zlib.crc32(table.encode() + b"\0" + key) ^ zlib.crc32(body)


def body(table: str, key: bytes, value: bytes) -> bytes:
    """A stored value's msgpack body, after asserting its checksum."""
    assert struct.unpack("<I", value[-4:])[0] == _check(table, key, value[:-4]), (table, key)
    return value[:-4]


def sealed(table: str, key: bytes, value_body: bytes) -> bytes:
    """A body as the snapshot stores it under `key` in `table`."""
    return value_body + struct.pack("<I", _check(table, key, value_body))


def stored_values(path: str, table: str) -> list[tuple[bytes, bytes]]:
    """Every (key, stored value) of one table of a snapshot file, read with LMDB itself."""
    import lmdb

    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=layout.MAX_TABLES)
    try:
        with env.begin(db=env.open_db(table.encode(), create=False)) as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        env.close()


def value_offset(path: str, table: str, index: int = 0) -> tuple[bytes, int, int]:
    """(key, offset in the file, length) of the index-th value of `table`: where to damage
    that value and nothing else (its bytes, checksum included, occur once in the file)."""
    key, value = stored_values(path, table)[index]
    with open(path, "rb") as f:
        data = f.read()
    at = data.find(value)
    assert at >= 0 and data.find(value, at + 1) < 0, f"{table}[{index}] is not unique"
    return key, at, len(value)


def _unpacked_node(key: bytes, value: bytes) -> bytes:
    """A node value as formats before 4 stored it (msgpack of its entries, not its listpack)."""
    from streamkeep.snapshot import layout

    node = layout.decode_packed_node(layout.node_master(key), value)
    return layout.encode_node(node.live, node.size, node.master_fields, node.ids,
                              list(node.fields))


def as_version_1(path: str) -> None:
    """Rewrite a snapshot file as the first format wrote it: the same tables and keys, every
    value bare (no checksum), meta `version` 1."""
    import os

    import lmdb
    import msgpack

    names = ("meta", "streams", "nodes", "nodeinfo", "groups", "consumers", "pel")
    tables = {name: [(k, body(name, k, v)) for k, v in stored_values(path, name)]
              for name in names}
    tables["meta"] = [(k, msgpack.packb(1) if k == b"version" else v) for k, v in tables["meta"]]
    tables["nodes"] = [(k, _unpacked_node(k, v)) for k, v in tables["nodes"]]
    tmp = path + ".v1"
    env = lmdb.open(tmp, subdir=False, lock=False, map_size=1 << 30, max_dbs=layout.MAX_TABLES)
    try:
        with env.begin(write=True) as txn:
            for name, rows in tables.items():
                db = env.open_db(name.encode(), txn=txn)
                for key, value in rows:
                    txn.put(key, value, db=db)
    finally:
        env.close()
    os.replace(tmp, path)


def varied_engine(**config: Any) -> Engine:
    """An engine (clock at 1000 ms) with one of each thing a snapshot stores: a stream of
    several nodes with deleted entries, a group with two consumers owning pending entries, an
    idle consumer and an entry XNACK released, an idempotent producer, a second group, and
    streams in another database (binary names included)."""
    engine = Engine(clock=lambda: 1000, stream_node_max_entries=4, **config)
    run = engine.execute
    for i in range(1, 15):
        run("XADD", "orders", f"{i}-1", "item", f"v{i}", "qty", str(i))
    run("XDEL", "orders", "3-1", "6-1")
    run("XGROUP", "CREATE", "orders", "billing", "0")
    run("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "3", "STREAMS", "orders", ">")
    run("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "2", "STREAMS", "orders", ">")
    run("XGROUP", "CREATECONSUMER", "orders", "billing", "idle")
    run("XNACK", "orders", "billing", "FAIL", "IDS", "1", "2-1")
    run("XGROUP", "CREATE", "orders", "audit", "$")
    run("XADD", "orders", "IDMP", "producer", "iid-1", "*", "item", "once")
    run("XADD", "audit", "1-0", "who", "me")
    run("SELECT", "2")
    run("XADD", b"bin\x00\xff", "5-5", b"\x00", b"\xff")
    run("XADD", "other", "1-0", "f", "v")
    run("SELECT", "0")
    return engine


def put_values(path: str, table: str, rows: dict[bytes, bytes | None]) -> None:
    """Store `rows` (key: stored value, None to delete the key) in one table of a snapshot
    file with LMDB itself."""
    import lmdb

    env = lmdb.open(path, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    try:
        with env.begin(write=True, db=env.open_db(table.encode(), create=False)) as txn:
            for key, value in rows.items():
                if value is None:
                    txn.delete(key)
                else:
                    txn.put(key, value)
    finally:
        env.close()
