"""snapshot.services.load: a snapshot file loaded into an empty engine is the state it was written from
(same digest, same XINFO STREAM FULL, node layout included), eagerly or lazily (every node
cold, read back when touched), and the engine goes on from it as the original does. A file
whose values check but disagree with each other (counts, a pending entry's owner), whose
value is damaged, or whose whole-file checksum differs from the one recorded, is refused
with a SnapshotError naming the file, the table and the stream."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.snapshot import layout
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.writer import SnapshotInfo, write_snapshot
from tests.support import v3_snapshot as v3
from tests.support.snapshot_util import (
    body,
    put_values,
    stored_values,
    value_offset,
    varied_engine,
)

LSN = 321


def full_info(engine: Engine, db: int, key: bytes) -> object:
    engine.execute("SELECT", str(db))
    try:
        return engine.execute("XINFO", "STREAM", key, "FULL")
    finally:
        engine.execute("SELECT", "0")


def everything(engine: Engine) -> dict:
    return {(db, key): full_info(engine, db, key)
            for db, streams in enumerate(engine.dbs) for key in sorted(streams)}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, Path, SnapshotInfo]:
    engine = varied_engine()
    path = tmp_path_factory.mktemp("load") / "snapshot.mdb"
    info = write_snapshot(engine.dbs, str(path), LSN, 1700000000000, "cd" * 20)
    return engine, path, info


@pytest.fixture
def copy(source: tuple[Engine, Path, SnapshotInfo], tmp_path: Path) -> Path:
    """A copy of the source's snapshot this test may change."""
    return Path(shutil.copy(source[1], tmp_path / "snapshot.mdb"))


def loaded(path: Path, lazy: bool | None = None, crc32: int | None = None,
           **config: Any) -> Engine:
    engine = Engine(clock=lambda: 1000, **config)
    load_snapshot(engine, str(path), lazy=lazy, crc32=crc32)
    return engine


@pytest.mark.parametrize("lazy", [False, True])
def test_the_state_as_written(source: tuple[Engine, Path, SnapshotInfo], lazy: bool) -> None:
    original, path, info = source
    engine = Engine(clock=lambda: 1000)
    meta = load_snapshot(engine, str(path), lazy=lazy, crc32=info.crc32)
    assert (meta.lsn, meta.repl_id, meta.streams) == (LSN, "cd" * 20, 4)
    assert engine.digest() == original.digest()
    assert everything(engine) == everything(original)
    engine.close()


def test_the_engine_goes_on_as_the_original(source: tuple[Engine, Path, SnapshotInfo]) -> None:
    original, path, _info = source
    twin = varied_engine()  # the source's own engine stays untouched for the other tests
    engine = loaded(path, stream_node_max_entries=4)
    for target in (twin, engine):
        target.execute("XADD", "orders", "2000-1", "item", "later")
        target.execute("XREADGROUP", "GROUP", "billing", "carol", "STREAMS", "orders", ">")
        target.execute("XACK", "orders", "billing", "1-1")
        target.execute("XADD", "orders", "IDMP", "producer", "iid-1", "*", "item", "once")
    assert engine.digest() == twin.digest()
    assert everything(engine) == everything(twin)
    assert original.digest() != twin.digest()


def test_a_lazy_load_leaves_every_node_in_the_file(source: tuple[Engine, Path, SnapshotInfo]
                                                   ) -> None:
    _original, path, _info = source
    engine = loaded(path, lazy=True)
    stream = engine.dbs[0][b"orders"]
    assert len(stream.nodes) > 1 and all(node.is_cold() for node in stream.nodes)
    nodes, entries, size = stream.cold_counts()
    assert (nodes, entries) == (len(stream.nodes), stream.length)
    assert size == sum(node.lp_bytes() for node in stream.nodes)
    assert engine.execute("XRANGE", "orders", "1-1", "1-1") == \
        [[b"1-1", [b"item", b"v1", b"qty", b"1"]]]
    assert stream.nodes[0].is_cold()  # a range read reads a cold node, and leaves it cold
    assert engine.residency.loads == 1
    assert engine.execute("XDEL", "orders", "1-1") == 1  # a change brings it back
    assert not stream.nodes[0].is_cold() and stream.nodes[-1].is_cold()
    engine.close()


def test_laziness_follows_the_backlog_budget(source: tuple[Engine, Path, SnapshotInfo]) -> None:
    _original, path, _info = source
    budgeted = loaded(path, backlog_memory=1 << 30)
    unbudgeted = loaded(path)
    assert all(node.is_cold() for node in budgeted.dbs[0][b"orders"].nodes)
    assert not any(node.is_cold() for node in unbudgeted.dbs[0][b"orders"].nodes)
    budgeted.close()
    unbudgeted.close()


def test_only_into_an_empty_engine(source: tuple[Engine, Path, SnapshotInfo]) -> None:
    engine = Engine()
    engine.execute("XADD", "x", "1-1", "f", "v")
    with pytest.raises(ValueError, match="a snapshot loads into an empty engine only"):
        load_snapshot(engine, str(source[1]))


def test_an_eager_load_checks_the_recorded_checksum_first(copy: Path,
                                                          source: tuple[Engine, Path,
                                                                        SnapshotInfo]) -> None:
    info = source[2]
    assert info.crc32 is not None
    wrong = info.crc32 ^ 1
    with pytest.raises(SnapshotError) as caught:
        loaded(copy, lazy=False, crc32=wrong)
    assert str(caught.value).startswith(
        f"{copy}: damaged: its checksum is {info.crc32:08x}, the manifest recorded {wrong:08x}")
    engine = loaded(copy, lazy=True, crc32=wrong)  # lazy: the per-value checks only
    assert engine.execute("XLEN", "orders") == 13
    engine.close()


def orders_number(path: Path) -> tuple[bytes, dict]:
    key = layout.stream_key(0, b"orders")
    raw = dict(stored_values(str(path), "streams"))[key]
    return key, layout.decode_value(body("streams", key, raw))


def restream(path: Path, **changes: int) -> None:
    """Rewrite the orders stream's `streams` value with some counts changed (checksum valid)."""
    key, doc = orders_number(path)
    doc.update(changes)
    value = layout.encode_stream(doc["number"], doc["length"], layout.id_int(doc["first_id"]),
                                 layout.id_int(doc["last_id"]),
                                 layout.id_int(doc["max_deleted_id"]), doc["entries_added"],
                                 doc["nodes"], doc["groups"], doc.get("idmp"))
    put_values(str(path), "streams", {key: layout.seal("streams", key, value)})


@pytest.mark.parametrize(("lazy", "table"), [(False, "nodes"), (True, "nodeinfo")])
def test_counts_that_disagree_are_damage(copy: Path, lazy: bool, table: str) -> None:
    restream(copy, length=14)
    with pytest.raises(SnapshotError) as caught:
        loaded(copy, lazy=lazy)
    assert str(caught.value) == (f"{copy}: table {table}, stream b'orders' (db 0): 13 live "
                                 f"entries found, 14 recorded: the file is damaged")


def test_a_missing_group_is_damage(copy: Path) -> None:
    restream(copy, groups=3)
    with pytest.raises(SnapshotError) as caught:
        loaded(copy)
    assert str(caught.value) == (f"{copy}: table groups, stream b'orders' (db 0): 2 groups "
                                 f"found, 3 recorded: the file is damaged")


def test_a_pending_entry_owned_by_a_stranger_is_damage(copy: Path) -> None:
    _key, doc = orders_number(copy)
    pel_key = layout.group_prefix(doc["number"], b"billing") + layout.id_bytes(1 << 64 | 1)
    value = layout.encode_pending(b"mallory", 1000, 1)
    put_values(str(copy), "pel", {pel_key: layout.seal("pel", pel_key, value)})
    with pytest.raises(SnapshotError) as caught:
        loaded(copy)
    assert str(caught.value) == (f"{copy}: table pel, stream b'orders' (db 0), group "
                                 f"b'billing', entry 1-1: owned by b'mallory', not a consumer "
                                 f"of the group: the file is damaged")


def test_a_lost_pending_entry_is_damage(copy: Path) -> None:
    _key, doc = orders_number(copy)
    pel_key = layout.group_prefix(doc["number"], b"billing") + layout.id_bytes(4 << 64 | 1)
    put_values(str(copy), "pel", {pel_key: None})
    with pytest.raises(SnapshotError, match=r"table pel, stream b'orders' \(db 0\), group "
                                            r"b'billing': 4 pending entries found, 5 recorded"):
        loaded(copy)


def test_a_damaged_value_is_named(copy: Path) -> None:
    key, at, length = value_offset(str(copy), "groups")
    data = bytearray(copy.read_bytes())
    data[at + length // 2] ^= 0x08
    copy.write_bytes(bytes(data))
    with pytest.raises(SnapshotError) as caught:
        loaded(copy)
    assert str(caught.value).startswith(f"{copy}: table groups, ")
    assert "checksum mismatch: the stored value is damaged" in str(caught.value)
    assert layout.describe_key("groups", key).split(", ")[-1] in str(caught.value)


@pytest.mark.parametrize("lazy", [False, True])
def test_strings_and_ttls_load_back(tmp_path: Path, lazy: bool) -> None:
    clock = [1_000_000]
    engine = Engine(clock=lambda: clock[0])
    engine.execute("XADD", "s", "1-1", "f", "v")
    engine.execute("PEXPIRE", "s", "500")
    engine.execute("SET", "k", "v", "PX", "100")
    engine.execute("SET", "plain", b"\x00\xff")
    engine.execute("SELECT", "2")
    engine.execute("INCRBYFLOAT", "n", "0.1")
    path = tmp_path / "with-keys.mdb"
    write_snapshot(engine.dbs, str(path), LSN, 1700000000000, "cd" * 20,
                   values=engine.keyspaces, expires=engine.expires)
    loaded = Engine(clock=lambda: clock[0])
    load_snapshot(loaded, str(path), lazy=lazy)
    assert loaded.digest() == engine.digest()
    assert (loaded.execute("PTTL", "k"), loaded.execute("PTTL", "s")) == (100, 500)
    assert loaded.execute("GET", "plain") == b"\x00\xff"
    clock[0] += 101
    assert loaded.execute("GET", "k") is None  # the TTL came back with the key


def _sample_values() -> dict[str, list[Any]]:
    """A few values of every registered type stored in the keys table (a new type adds its
    own: the test below refuses a type without samples)."""
    from streamkeep.engine.model.zset import ZSet

    small = ZSet()
    small.add(b"a", 1.5)
    small.add(b"b", float("-inf"))
    big = ZSet.from_items((b"m%d" % i, i / 3) for i in range(300))  # past the packed form
    from streamkeep.engine.model.hashes import Hash
    from streamkeep.engine.model.sets import RSet

    fields = Hash.from_pairs([(b"f", b"v"), (b"n", b"12")])
    many = Hash.from_pairs([(b"f%d" % i, b"v" * (i % 70)) for i in range(600)])
    timed = Hash.from_pairs([(b"f", b"v"), (b"g", b"w")])
    timed.set_field_expiry(b"g", 9_000_000)
    from streamkeep.engine.model import lists

    return {"string": [b"v", b"\x00\xff"], "zset": [small, big],
            "list": [lists.from_elements([b"a", b"12", b""]),
                     lists.from_elements(b"e%d" % i for i in range(3000)),
                     lists.from_elements([b"x" * 20_000])],
            "hash": [fields, many, timed],
            "set": [RSet.from_members([b"1", b"2", b"3"]), RSet.from_members([b"a", b"b"]),
                    RSet.from_members(b"m%d" % i for i in range(700))]}


@pytest.mark.parametrize("lazy", [False, True])
def test_every_type_loads_back_through_the_keys_table(tmp_path: Path, lazy: bool) -> None:
    from streamkeep.engine.model.value_types import TYPES

    samples = _sample_values()
    engine = Engine(clock=lambda: 1_000_000)
    for vt in TYPES:
        if vt.to_bytes is None:  # a type with tables of its own (streams)
            continue
        assert vt.name in samples, f"no sample values for the type {vt.name}"
        for i, value in enumerate(samples[vt.name]):
            engine.keyspaces[vt.slot][i][b"k-" + vt.name.encode()] = value
            engine.expires[i][b"k-" + vt.name.encode()] = 5_000_000 + i
    path = tmp_path / "typed.mdb"
    write_snapshot(engine.dbs, str(path), LSN, 1700000000000, "cd" * 20,
                   values=engine.keyspaces, expires=engine.expires)
    loaded = Engine(clock=lambda: 1_000_000)
    load_snapshot(loaded, str(path), lazy=lazy)
    assert loaded.digest() == engine.digest()
    for vt in TYPES:
        for db, values in enumerate(engine.keyspaces[vt.slot]):
            assert set(loaded.keyspaces[vt.slot][db]) == set(values)
    assert loaded.execute("TYPE", "k-zset") == "zset"
    assert loaded.execute("PEXPIRETIME", "k-zset") == 5_000_000


# --- a format 3 file the previous code wrote ------------------------------------------------------


@pytest.mark.parametrize("lazy", [False, True])
def test_a_format_3_file_loads_as_the_state_it_was_written_from(lazy: bool) -> None:
    """Its nodes (msgpack arrays of entries) are packed as they load, or left cold and packed
    when read back: the digest and every key's replies are the ones recorded with it."""
    want = v3.want()
    engine = Engine(clock=lambda: want["clock_ms"])
    meta = load_snapshot(engine, str(v3.V3), lazy=lazy)
    assert meta.streams == len(v3.streams(want))
    v3.same(engine, want)
    engine.close()


def test_a_format_3_directory_with_a_budget_reads_its_cold_nodes_back(tmp_path: Path) -> None:
    want = v3.want()
    d = v3.v3_datadir(tmp_path / "data")
    with Snapshot(str(v3.V3)) as snap:
        nodes = sum(info.nodes for info in snap.streams())
    with v3.opened(d, want, backlog_memory="2kb") as engine:
        text = engine.execute("INFO", "memory").decode()
        assert f"stream_nodes_cold:{nodes}\r" in text  # nothing decoded at the load
        v3.same(engine, want)
        assert engine.residency.loads >= nodes
        assert engine.residency.resident <= 4 * 2048
