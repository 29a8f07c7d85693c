"""tools.value_tables: each type's element rows, the tables an export offers (a type's table on
once its type is registered), the per-type key counts, and values decoded by the registry."""

from __future__ import annotations

import math

import pytest

from streamkeep.engine.model import lists, value_types
from streamkeep.engine.model.hashes import Hash
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.zset import ZSet
from streamkeep.tools import value_tables as vt


def rows(type_name: str, value: object) -> list[tuple]:
    return list(vt.BY_TYPE[type_name].rows(value))


def test_every_table_has_distinct_names_and_known_kinds() -> None:
    tables = [t.table for t in vt.VALUE_TABLES]
    assert len(set(tables)) == len(tables)
    assert not set(tables) & {vt.KEYS_TABLE, *vt.STREAM_TABLES}
    for table in vt.VALUE_TABLES:
        names = [c.name for c in table.columns]
        assert len(set(names)) == len(names)
        assert not set(names) & {"db", "key", "key_str", "expire_ms", "snapshot_lsn"}
        assert {c.kind for c in table.columns} <= {"binary", "double", "expiry", "index"}


def test_string_and_zset_rows() -> None:
    assert rows("string", b"\x00v") == [(b"\x00v",)]
    z = ZSet.from_items([(b"b", 2.0), (b"a", 2.0), (b"lo", -math.inf), (b"x", 0.5)])
    assert rows("zset", z) == [(b"lo", -math.inf), (b"x", 0.5), (b"a", 2.0), (b"b", 2.0)]
    big = ZSet.from_items([(b"m%d" % i, float(i)) for i in range(300)])  # skiplist encoded
    assert big.encoding == "skiplist" and len(rows("zset", big)) == 300


def test_hash_rows_carry_each_fields_expiry() -> None:
    h = Hash.from_pairs([(b"f1", b"v1"), (b"f2", b"\xff")])
    h.set_field_expiry(b"f2", 1_800_000_000_000)
    assert sorted(rows("hash", h)) == [(b"f1", b"v1", None), (b"f2", b"\xff", 1_800_000_000_000)]
    wide = Hash.from_pairs([(b"k%d" % i, b"v") for i in range(200)])  # hashtable encoded
    assert len(rows("hash", wide)) == 200


def test_set_rows() -> None:
    assert sorted(rows("set", RSet.from_members([b"3", b"1", b"2"]))) == [(b"1",), (b"2",),
                                                                          (b"3",)]
    assert sorted(rows("set", RSet.from_members([b"a", b"b"]))) == [(b"a",), (b"b",)]


def test_list_rows_are_index_and_element_head_first() -> None:
    small = lists.from_elements([b"a", b"12", b""])  # a listpack: kept bare, a bytearray
    assert rows("list", value_types.LIST.open(small)) == [(0, b"a"), (1, b"12"), (2, b"")]
    big = lists.from_elements(b"e%d" % i for i in range(3000))
    assert lists.encoding(big) == "quicklist"
    assert rows("list", big) == [(i, b"e%d" % i) for i in range(3000)]
    stored = value_types.LIST.to_bytes(big)  # type: ignore[misc]
    assert list(lists.elements(vt.BY_TYPE["list"].decode(stored))) == [
        b"e%d" % i for i in range(3000)]
    assert vt.BY_TYPE["list"].columns == (vt.Column("index", "index"),
                                          vt.Column("element", "binary"))


def test_a_types_table_is_offered_once_its_type_is_registered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def offered() -> set[str]:
        return set(vt.export_tables())

    base = {*vt.STREAM_TABLES, "keys", "strings", "zset_members"}
    assert base <= offered()
    assert ("hash_fields" in offered()) == ("hash" in value_types.BY_NAME)
    assert ("set_members" in offered()) == ("set" in value_types.BY_NAME)
    assert ("list_elements" in offered()) == ("list" in value_types.BY_NAME)
    assert offered() == base | {"hash_fields", "set_members", "list_elements"}
    monkeypatch.delitem(value_types.BY_NAME, "list")
    assert "list_elements" not in offered()
    monkeypatch.undo()
    monkeypatch.delitem(value_types.BY_NAME, "zset")
    assert "zset_members" not in offered() and "strings" in offered()


def test_decode_reads_what_the_types_to_bytes_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    z = ZSet.from_items([(b"a", 1.5)])
    assert vt.BY_TYPE["zset"].decode(value_types.ZSET.to_bytes(z)) == z  # type: ignore[misc]
    hash_type, set_type = value_types.HASH, value_types.SET
    h = Hash.from_pairs([(b"f", b"v")])
    stored = hash_type.to_bytes(h)  # type: ignore[misc]
    assert vt.BY_TYPE["hash"].decode(stored).items() == [(b"f", b"v")]
    s = RSet.from_members([b"m"])
    assert list(vt.BY_TYPE["set"].decode(set_type.to_bytes(s))) == [b"m"]  # type: ignore[misc]


def test_type_counts_name_every_registered_type() -> None:
    counts = vt.type_counts(2, ["string", None, "zset", "string"])
    assert counts == {**{t.name: 0 for t in value_types.TYPES}, "stream": 2, "string": 2,
                      "zset": 1}
    assert list(counts)[:3] == ["stream", "string", "zset"]


def test_elements_read_a_chunked_value_chunk_by_chunk(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """What the Spark export and `snapshot dump` read of a key: a value in its row decoded, a
    big one stored in chunks (snapshot.values) read from the snapshot, in the same columns."""
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.snapshot import values
    from streamkeep.snapshot.reader import Snapshot
    from streamkeep.snapshot.writer import write_snapshot
    from streamkeep.tools.export.datasource import KeySpan, key_table_rows
    from streamkeep.tools.export.pushdown import Selection

    monkeypatch.setattr(values, "CHUNKED_ELEMENTS", 500)
    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 100)
    e = EngineCore()
    e.execute("ZADD", "big", *[x for j in range(1000) for x in (str(-j), b"m%d" % j)])
    e.execute("ZADD", "small", "1", "a")
    e.execute("SADD", "members", *[b"x%d" % j for j in range(1000)])
    e.execute("RPUSH", "list", *[b"y%d" % j for j in range(1000)])
    path = str(tmp_path / "snapshot.mdb")
    write_snapshot(e.dbs, path, 1, 0, "r", values=e.keyspaces, expires=e.expires)
    with Snapshot(path) as snap:
        rows = {row.key: row for row in snap.key_rows()}
        assert rows[b"big"].chunked is not None and rows[b"small"].chunked is None
        assert list(vt.elements(snap, rows[b"big"])) == list(e.keyspaces[2][0][b"big"].items())
        assert list(vt.elements(snap, rows[b"small"])) == [(b"a", 1.0)]
        exported = list(key_table_rows(snap, "zset_members", KeySpan(0, b"", b"\xff"),
                                       Selection()))
        assert len(exported) == 1001 and exported[0] == (0, b"big", "big", b"m999", -999.0)
        members = list(key_table_rows(snap, "set_members", KeySpan(0, b"", b"\xff"),
                                      Selection()))
        assert sorted(m[3] for m in members) == sorted(b"x%d" % j for j in range(1000))
        assert rows[b"list"].chunked is not None
        assert list(vt.elements(snap, rows[b"list"])) == [(j, b"y%d" % j) for j in range(1000)]
        elements = list(key_table_rows(snap, "list_elements", KeySpan(0, b"", b"\xff"),
                                       Selection()))
        assert elements == [(0, b"list", "list", j, b"y%d" % j) for j in range(1000)]
