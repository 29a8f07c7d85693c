"""The `streamkeep` PySpark data source against the engine, through a real local SparkSession.

One data directory and one SparkSession for the module (Spark's start-up costs seconds): every
table read through Spark equals what XRANGE / XINFO STREAM / XINFO GROUPS / XPENDING / XINFO
CONSUMERS say; partitions cover every entry exactly once; a read stays on its snapshot while
compaction replaces it; a path that is no snapshot is a clear error.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, lit, spark_partition_id
from pyspark.sql.types import StructType

from streamkeep import Engine
from streamkeep.snapshot.reader import Snapshot, current_snapshot
from streamkeep.tools.export.datasource import (
    SCHEMAS,
    Part,
    StreamkeepDataSource,
    StreamkeepReader,
)
from streamkeep.tools.export.pin import Pin, is_pin_file, pin
from tests.support import v3_snapshot as v3
from tests.support.typed_keys import FAR, engine_keys, typed_engine, write_typed_snapshot

# Spark's JVM starts once per module and its first jobs warm it up: on a machine shared with
# other jobs that alone can take most of the suite's default two minutes. (A safety net
# against a hang, not a bound on how long a job may take.)
pytestmark = pytest.mark.timeout(600)

KEYS = [(0, b"orders"), (0, b"bin\x00\xff"), (0, b"empty"), (1, b"orders"), (2, b"big")]


def kv(reply: Any) -> dict:
    return dict(zip(reply[0::2], reply[1::2], strict=True))


def on_db(engine: Engine, db: int, *argv: object) -> Any:
    saved = engine.session.db
    engine.execute("SELECT", str(db))
    try:
        return engine.execute(*argv)
    finally:
        engine.execute("SELECT", str(saved))


def populate(engine: Engine) -> None:
    """Several streams over three databases, binary and repeated fields, XDEL'd entries (a
    node's first among them), an emptied stream, groups with pending entries, idle consumers."""
    for i in range(40):
        on_db(engine, 0, "XADD", "orders", f"{1000 + i}-{i % 3}", "item", str(i), "qty",
              str(i * 2), "item", b"\xff\x00repeat")
    on_db(engine, 0, "XADD", b"bin\x00\xff", "5-5", b"\x80f\xfe", b"\x00\x01", "", "")
    on_db(engine, 0, "XADD", "empty", "1-1", "a", "b")
    on_db(engine, 0, "XDEL", "empty", "1-1")
    on_db(engine, 0, "XDEL", "orders", "1000-0", "1004-1", "1005-2", "1020-2")
    for i in range(300):
        on_db(engine, 2, "XADD", "big", f"{i + 1}-0", "n", str(i), b"\xc3(", b"\xe2\x82")
    on_db(engine, 2, "XDEL", "big", *[f"{i}-0" for i in range(10, 300, 7)])
    on_db(engine, 1, "XADD", "orders", "7-1", "a", "1")
    on_db(engine, 0, "XGROUP", "CREATE", "orders", "g1", "0")
    on_db(engine, 0, "XGROUP", "CREATE", "orders", b"g\x00\xff", "1010-0")
    on_db(engine, 0, "XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "orders", ">")
    on_db(engine, 0, "XREADGROUP", "GROUP", "g1", b"b\xffb", "COUNT", "3", "STREAMS", "orders",
          ">")
    on_db(engine, 0, "XREADGROUP", "GROUP", b"g\x00\xff", "carol", "COUNT", "2", "STREAMS",
          "orders", ">")
    on_db(engine, 0, "XACK", "orders", "g1", "1001-1")
    on_db(engine, 0, "XGROUP", "CREATECONSUMER", "orders", "g1", "idle")
    on_db(engine, 2, "XGROUP", "CREATE", "big", "all", "$")
    on_db(engine, 2, "XGROUP", "CREATE", "big", "some", "0")
    on_db(engine, 2, "XREADGROUP", "GROUP", "some", "x", "COUNT", "50", "STREAMS", "big", ">")
    on_db(engine, 0, "XDEL", "orders", "1002-2")  # pending and deleted: XPENDING still lists it


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, str]]:
    path = str(tmp_path_factory.mktemp("export") / "data")
    engine = Engine.open(path, stream_node_max_entries=4)  # many nodes: ID-range partitions
    try:
        populate(engine)
        assert engine.compact(wait=True) is not None
        yield engine, path
    finally:
        engine.close()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Tasks run in Python workers: this interpreter, with this import path.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    session = (SparkSession.builder.master("local[2]").appName("streamkeep-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.driver.extraJavaOptions",
                       "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    session.dataSource.register(StreamkeepDataSource)
    yield session
    session.stop()


def read(spark: SparkSession, path: str, table: str, **options: object) -> list[Any]:
    reader = spark.read.format("streamkeep").option("table", table)
    for name, value in options.items():
        reader = reader.option(name, str(value))
    return reader.load(path).collect()


def id_key(raw: bytes | str) -> tuple[int, int]:
    ms, seq = (raw.decode() if isinstance(raw, bytes) else raw).split("-")
    return int(ms), int(seq)


def nil_id(raw: bytes) -> str:
    return raw.decode()


# --- every table equals the engine --------------------------------------------------------------

def test_entries_equal_xrange(spark: SparkSession, data: tuple[Engine, str]) -> None:
    engine, path = data
    rows = read(spark, path, "entries", numPartitions=3)
    got: dict[tuple[int, bytes], list] = {}
    for row in sorted(rows, key=lambda r: (r.db, r.stream, r.ms, r.seq)):
        pairs = [(p.field, p.value) for p in row.pairs]
        assert row.fields == {f.decode("utf-8", "replace"): v for f, v in pairs}  # last wins
        assert row.stream_str == row.stream.decode("utf-8", "replace")
        assert row.id == f"{row.ms}-{row.seq}"
        got.setdefault((row.db, row.stream), []).append(
            [row.id.encode(), [x for pair in pairs for x in pair]])
    expected = {(db, key): on_db(engine, db, "XRANGE", key, "-", "+") for db, key in KEYS}
    assert got == {k: v for k, v in expected.items() if v}
    with Snapshot(current_snapshot(path) or "") as snap:
        assert {row.snapshot_lsn for row in rows} == {snap.meta.lsn}


def test_streams_equal_xinfo_stream(spark: SparkSession, data: tuple[Engine, str]) -> None:
    engine, path = data
    rows = {(r.db, r.stream): r for r in read(spark, path, "streams")}
    assert set(rows) == set(KEYS)
    for db, key in KEYS:
        info, row = kv(on_db(engine, db, "XINFO", "STREAM", key)), rows[db, key]
        assert (row.length, row.first_id, row.last_id, row.max_deleted_id, row.entries_added,
                row.groups, row.nodes) == (
            info[b"length"], nil_id(info[b"recorded-first-entry-id"]),
            nil_id(info[b"last-generated-id"]), nil_id(info[b"max-deleted-entry-id"]),
            info[b"entries-added"], info[b"groups"], info[b"radix-tree-keys"])


def test_groups_equal_xinfo_groups(spark: SparkSession, data: tuple[Engine, str]) -> None:
    engine, path = data
    got = sorted((r.db, r.stream, r.group, r.last_delivered_id, r.entries_read, r.lag,
                  r.pending, r.consumers) for r in read(spark, path, "groups"))
    expected = []
    for db, key in KEYS:
        for group in map(kv, on_db(engine, db, "XINFO", "GROUPS", key)):
            expected.append((db, key, group[b"name"], nil_id(group[b"last-delivered-id"]),
                             group[b"entries-read"], group[b"lag"], group[b"pending"],
                             group[b"consumers"]))
    assert got == sorted(expected)
    assert any(row[5] is None for row in got) or any(row[4] is not None for row in got)


def test_pending_equals_xpending(spark: SparkSession, data: tuple[Engine, str]) -> None:
    engine, path = data
    rows = read(spark, path, "pending", numPartitions=2)
    got = sorted((r.db, r.stream, r.group, id_key(r.id), r.consumer, r.delivery_count,
                  r.delivery_time) for r in rows)
    expected = []
    for db, key in KEYS:
        full = kv(on_db(engine, db, "XINFO", "STREAM", key, "FULL", "COUNT", "0"))
        for group in map(kv, full[b"groups"]):
            times = {sid: at for sid, _, at, _ in group[b"pending"]}
            for sid, consumer, _, count in on_db(engine, db, "XPENDING", key, group[b"name"],
                                                 "-", "+", "1000"):
                expected.append((db, key, group[b"name"], id_key(sid), consumer, count,
                                 times[sid]))
    assert got == sorted(expected)
    assert len(got) == 5 + 3 - 1 + 2 + 50


def test_consumers_equal_xinfo_consumers(spark: SparkSession,
                                         data: tuple[Engine, str]) -> None:
    engine, path = data
    got = sorted((r.db, r.stream, r.group, r.consumer, r.pending, r.seen_time, r.active_time)
                 for r in read(spark, path, "consumers"))
    expected = []
    for db, key in KEYS:
        full = kv(on_db(engine, db, "XINFO", "STREAM", key, "FULL", "COUNT", "0"))
        for group in map(kv, full[b"groups"]):
            times = {c[b"name"]: (c[b"seen-time"], c[b"active-time"])
                     for c in map(kv, group[b"consumers"])}
            for c in map(kv, on_db(engine, db, "XINFO", "CONSUMERS", key, group[b"name"])):
                expected.append((db, key, group[b"name"], c[b"name"], c[b"pending"],
                                 *times[c[b"name"]]))
    assert got == sorted(expected)
    assert any(row[3] == b"idle" and row[4] == 0 for row in got)


# --- Arrow batches, tuples, column pruning ------------------------------------------------------

@pytest.mark.parametrize("table", ["entries", "groups", "consumers"])
def test_tuples_equal_arrow_batches(spark: SparkSession, data: tuple[Engine, str],
                                    table: str) -> None:
    _, path = data
    arrow = read(spark, path, table, numPartitions=3, batchSize=7)
    assert sorted(arrow) == sorted(read(spark, path, table, arrow="false"))


@pytest.mark.parametrize("columns", [
    None, ["fields", "db"], ["id"], ["pairs", "snapshot_lsn", "stream_str", "ms"]])
@pytest.mark.parametrize("batch", [1, 7, 8192])
def test_columnar_batches_equal_the_rows_in_process(data: tuple[Engine, str],
                                                    columns: list[str] | None,
                                                    batch: int) -> None:
    """The entries' column-built Arrow batches (no Spark) equal the tuple rows: every column,
    pruned subsets, batches smaller than a node, a repeated field's last value in the map."""
    _, path = data
    full = {f.name: f for f in SCHEMAS["entries"].fields}
    schema = None if columns is None else StructType([full[c] for c in columns])
    options = {"path": path, "numPartitions": 3, "batchSize": batch}
    arrow = StreamkeepReader(options, schema)
    tuples = StreamkeepReader({**options, "arrow": "false"}, schema)
    planned = arrow.partitions()
    try:
        for part in planned:
            got = []
            for b in arrow.read(part):
                assert b.num_rows <= batch
                got.extend(tuple(map(_plain, row.values())) for row in b.to_pylist())
            assert got == list(tuples.rows(part))
    finally:
        release(planned)


def _plain(value: Any) -> Any:
    """An Arrow value as the tuple rows hold it: a map (pairs of key, value) as a dict, the
    pairs column (dicts field, value) as tuples."""
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return dict(value)
    if isinstance(value, list):
        return [(p["field"], p["value"]) for p in value]
    return value


def test_a_schema_prunes_columns(spark: SparkSession, data: tuple[Engine, str]) -> None:
    engine, path = data
    df = (spark.read.format("streamkeep").schema("id string, db int, pairs "
                                                 "array<struct<field:binary,value:binary>>")
          .option("numPartitions", "3").load(path))
    assert df.columns == ["id", "db", "pairs"]
    got = sorted((r.db, r.id, [(p.field, p.value) for p in r.pairs]) for r in df.collect())
    full = sorted((r.db, r.id, [(p.field, p.value) for p in r.pairs])
                  for r in read(spark, path, "entries"))
    assert got == full
    narrow = spark.read.format("streamkeep").schema("stream binary").load(path).collect()
    assert len(narrow) == len(full)


@pytest.mark.parametrize("schema, message", [
    ("nope string", "table entries has no column 'nope'"),
    ("ms int", "column 'ms' of table entries is bigint, not int"),
])
def test_a_wrong_schema_is_a_clear_error(spark: SparkSession, data: tuple[Engine, str],
                                         schema: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        spark.read.format("streamkeep").schema(schema).load(data[1]).collect()


# --- push-down ---------------------------------------------------------------------------------

PREDICATES = {
    "stream_str": lambda: col("stream_str") == "orders",
    "stream binary": lambda: col("stream") == lit(b"bin\x00\xff"),
    "db and ms range": lambda: (col("db") == 2) & (col("ms") >= 100) & (col("ms") < 120),
    "db in": lambda: col("db").isin(0, 1),
    "prefix": lambda: col("stream_str").startswith("ord"),
    "ms past the end": lambda: col("ms") > 1 << 62,
    "ms negative": lambda: col("ms") < -5,
    "ms equal": lambda: col("ms") == 1010,
    "db range, ms <=": lambda: (col("db") > 0) & (col("db") <= 2) & (col("ms") <= 7),
    "not pushed": lambda: col("id") > "1010",
}


# pending takes db and stream filters and leaves ms to Spark: a few cases are enough there
CASES = [("entries", name) for name in PREDICATES] + [
    ("pending", "stream_str"), ("pending", "db in"), ("pending", "db and ms range")]


@pytest.mark.parametrize("table, name", CASES)
def test_pushdown_reads_the_rows_a_filter_keeps(spark: SparkSession, data: tuple[Engine, str],
                                                table: str, name: str) -> None:
    _, path = data

    def frame(pushdown: bool) -> Any:
        return (spark.read.format("streamkeep").option("table", table)
                .option("numPartitions", "17").option("pushdown", str(pushdown).lower())
                .load(path).where(PREDICATES[name]()))

    pushed, plain = frame(True), frame(False)
    assert sorted(pushed.collect()) == sorted(plain.collect())
    if name == "db and ms range" and table == "entries":
        assert pushed.count() == 20 - len([i for i in range(10, 300, 7) if 100 <= i + 1 < 120])
        assert pushed.rdd.getNumPartitions() < plain.rdd.getNumPartitions()


def test_pushdown_plans_only_the_selected_streams(spark: SparkSession,
                                                  data: tuple[Engine, str]) -> None:
    _, path = data
    df = (spark.read.format("streamkeep").option("numPartitions", "17")
          .option("pushdown", "true").load(path)
          .where((col("stream_str") == "orders") & (col("db") == 1)))
    assert df.rdd.getNumPartitions() == 1
    assert [r.id for r in df.collect()] == ["7-1"]


# --- partitions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("parts", [1, 3, 17])
def test_partitions_cover_every_entry_once(spark: SparkSession, data: tuple[Engine, str],
                                           parts: int) -> None:
    engine, path = data
    df = (spark.read.format("streamkeep").option("numPartitions", str(parts)).load(path)
          .select(spark_partition_id().alias("p"), "db", "stream", "id"))
    rows = df.collect()
    seen = [(r.db, r.stream, r.id) for r in rows]
    assert len(seen) == len(set(seen))
    expected = {(db, key, sid.decode()) for db, key in KEYS
                for sid, _ in on_db(engine, db, "XRANGE", key, "-", "+")}
    assert set(seen) == expected
    used = {r.p for r in rows}
    assert len(used) == df.rdd.getNumPartitions()
    if parts == 1:
        assert used == {0}
    else:  # the big stream is cut into ID ranges, small ones share partitions
        assert parts // 2 <= len(used) <= parts + len(KEYS)
        assert len({r.p for r in rows if r.stream == b"big"}) > 1


def test_planned_ranges_are_disjoint(data: tuple[Engine, str]) -> None:
    _, path = data
    for parts in (1, 3, 17, 1000):
        planned = StreamkeepReader({"path": path, "numPartitions": parts}).partitions()
        ranges = [r for part in planned for r in part.ranges]  # type: ignore[attr-defined]
        for db, key in KEYS:
            mine = sorted((r.start, r.end) for r in ranges if (r.db, r.key) == (db, key))
            assert mine[0][0] == 0 and mine[-1][1] == (1 << 128) - 1
            assert all(a[1] + 1 == b[0] for a, b in zip(mine, mine[1:], strict=False))
        release(planned)


def release(planned: Any) -> None:
    for p in {part.snapshot for part in planned}:
        Pin(p).release()


# --- one snapshot per read ----------------------------------------------------------------------

def test_read_keeps_its_snapshot_while_compaction_replaces_it(tmp_path: Path) -> None:
    path = str(tmp_path / "data")
    engine = Engine.open(path)
    try:
        engine.execute("XADD", "s", "1-1", "a", "1")
        old = engine.compact(wait=True)
        reader = StreamkeepReader({"path": path, "numPartitions": 2})
        planned = reader.partitions()
        engine.execute("XADD", "s", "2-1", "a", "2")
        new = engine.compact(wait=True)
        assert not os.path.exists(os.path.join(path, old.file))  # compaction removed it
        rows = [row for part in planned for row in reader.rows(part)]
        assert [(r[3], r[-1]) for r in rows] == [("1-1", old.lsn)]
        fresh = StreamkeepReader({"path": path}).partitions()
        assert {p.lsn for p in fresh} == {new.lsn}  # type: ignore[attr-defined]
        release([*planned, *fresh])
        assert not [n for n in os.listdir(path) if is_pin_file(n)]
    finally:
        engine.close()


def test_a_pin_path_is_read_as_is(spark: SparkSession, data: tuple[Engine, str]) -> None:
    _, path = data
    before = set(os.listdir(path))
    with pin(path) as pinned:
        rows = read(spark, pinned.path, "streams")
    assert len(rows) == len(KEYS)
    assert set(os.listdir(path)) == before  # no pin left behind, none added by the read


# --- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, message", [
    ("missing", "no such file or directory"),
    ("garbage", "not a readable LMDB snapshot"),
    ("emptydir", "not a streamkeep data directory"),
    ("truncated", "truncated"),
])
def test_a_non_snapshot_path_is_a_clear_error(spark: SparkSession, data: tuple[Engine, str],
                                              tmp_path: Path, kind: str, message: str) -> None:
    target = tmp_path / kind
    if kind == "garbage":
        target.write_bytes(b"this is not LMDB" * 512)
    elif kind == "emptydir":
        target.mkdir()
    elif kind == "truncated":  # a damaged snapshot: half of a real one
        whole = Path(current_snapshot(data[1]) or "").read_bytes()
        target.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(Exception, match=message):
        read(spark, str(target), "entries")
    assert not [n for n in os.listdir(tmp_path) if is_pin_file(n)]  # the pin made is dropped


def test_an_unknown_table_is_a_clear_error(spark: SparkSession, data: tuple[Engine, str]) -> None:
    with pytest.raises(Exception, match="unknown table 'nope'"):
        read(spark, data[1], "nope")


def test_part_pickles() -> None:
    import pickle

    part = Part([], "x", 3)
    assert pickle.loads(pickle.dumps(part)).lsn == 3


def test_a_damaged_value_stops_the_read_naming_file_table_and_key(tmp_path: Path) -> None:
    """What a Spark task meets in a damaged snapshot (read in process, no Spark): an error that
    names the file, the table and the key, never different rows."""
    import shutil

    from streamkeep.snapshot.reader import SnapshotError
    from tests.support.snapshot_util import value_offset

    path = str(tmp_path / "data")
    with Engine.open(path, stream_node_max_entries=4) as engine:
        populate(engine)
        assert engine.compact(wait=True) is not None
    snapshot = current_snapshot(path)
    assert snapshot is not None
    copy = str(tmp_path / "damaged.mdb")  # a snapshot file on its own: no manifest beside it
    shutil.copy(snapshot, copy)
    (part,) = Path(path).glob("part-*.mdb")  # and its part file beside it, damaged
    nodes = str(shutil.copy(part, tmp_path / part.name))
    _key, at, length = value_offset(nodes, "nodes", index=3)
    with open(nodes, "r+b") as f:
        f.seek(at + length // 2)
        byte = f.read(1)[0]
        f.seek(at + length // 2)
        f.write(bytes([byte ^ 0x01]))
    reader = StreamkeepReader({"path": copy, "numPartitions": 2, "arrow": "false"}, None)
    planned = reader.partitions()
    try:
        with pytest.raises(SnapshotError) as err:
            for part in planned:
                list(reader.rows(part))
    finally:
        release(planned)
    assert "damaged.mdb" in str(err.value) and "table nodes" in str(err.value)
    assert "node " in str(err.value) and "checksum mismatch" in str(err.value)


def test_format_3_and_its_format_4_compaction_read_the_same(tmp_path: Path) -> None:
    """The reader (tuples and column-built Arrow batches, no Spark) over a format 3 file the
    previous code wrote, and over the format 4 file its compaction wrote."""
    want = v3.want()
    d = tmp_path / "data"
    v3.v3_datadir(d)
    assert v3.export_entries(str(d)) == v3.xranges(want)
    shutil.rmtree(d)
    new = v3.compacted(d, want)
    with Snapshot(new) as snap:
        assert snap.packed
    assert v3.export_entries(str(d)) == v3.xranges(want)


# --- the key tables: every key, and each value type's elements ---------------------------------

@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, str]:
    engine = typed_engine()
    path = str(tmp_path_factory.mktemp("typed") / "snapshot-000000000009.mdb")
    return engine, write_typed_snapshot(engine, path)


def test_key_tables_equal_the_engine(spark: SparkSession, typed: tuple[Engine, str]) -> None:
    """keys: every key of every type once, streams included; strings and zset_members: each
    string's value and each member's score, as GET and ZRANGE WITHSCORES give them."""
    from streamkeep.engine.model.value_types import ZSET

    engine, path = typed
    keys = read(spark, path, "keys", numPartitions=3)
    assert sorted((r.db, r.key, r.type, r.expire_ms) for r in keys) == engine_keys(engine)
    assert {r.key_str for r in keys} >= {"bin\ufffd", "board", "z\x00"}
    assert {r.snapshot_lsn for r in keys} == {9}
    strings = read(spark, path, "strings", numPartitions=2)
    assert sorted((r.db, r.key, r.value, r.expire_ms) for r in strings) == sorted(
        (db, key, on_db(engine, db, "GET", key), engine.expires[db].get(key))
        for db, space in enumerate(engine.strings) for key in space)
    members = read(spark, path, "zset_members", numPartitions=3)
    assert sorted((r.db, r.key, r.member, r.score) for r in members) == sorted(
        (db, key, member, score) for db, space in enumerate(engine.keyspaces[ZSET.slot])
        for key, z in space.items() for member, score in z.items())
    assert len(members) == 304 and -math.inf in {r.score for r in members}
    assert read(spark, path, "zset_members", arrow="false", numPartitions=3) == members


def test_key_tables_push_down_key_and_db_filters(spark: SparkSession,
                                                 typed: tuple[Engine, str]) -> None:
    _, path = typed

    def frame(table: str, pushdown: bool, where: Any) -> Any:
        return (spark.read.format("streamkeep").option("table", table)
                .option("numPartitions", "5").option("pushdown", str(pushdown).lower())
                .load(path).where(where))

    for table, where in [("keys", col("key_str").startswith("b")),
                         ("zset_members", (col("db") == 1) & (col("member") > lit(b"m290"))),
                         ("strings", col("key") == lit(b"bin\xff"))]:
        pushed = frame(table, True, where)
        assert sorted(pushed.collect()) == sorted(frame(table, False, where).collect())
        assert pushed.count() > 0
    one = frame("zset_members", True, col("key_str") == "board")
    assert one.rdd.getNumPartitions() == 1 and one.count() == 3


@pytest.mark.parametrize("parts", [1, 2, 5, 50])
def test_key_partitions_cover_every_key_once(typed: tuple[Engine, str], parts: int) -> None:
    engine, path = typed
    for table in ("keys", "zset_members"):
        reader = StreamkeepReader({"path": path, "table": table, "numPartitions": parts,
                                   "arrow": "false"})
        planned = reader.partitions()
        try:
            got = [row for part in planned for row in reader.rows(part)]
            assert len(planned) <= parts
        finally:
            release(planned)
        if table == "keys":
            assert sorted(r[:2] for r in got) == [k[:2] for k in engine_keys(engine)]
        else:
            assert len(got) == len(set(got)) == 304


def test_hash_and_set_tables(tmp_path: Path) -> None:
    """hash_fields (with each field's expiry) and set_members, read in process."""
    from streamkeep.engine.model import value_types
    from streamkeep.engine.model.hashes import Hash
    from streamkeep.engine.model.sets import RSet
    from streamkeep.snapshot.writer import write_snapshot
    from streamkeep.tools.export.datasource import value_schema
    from streamkeep.tools.value_tables import BY_TABLE

    hash_type, set_type = value_types.HASH, value_types.SET
    engine = typed_engine()
    h = Hash.from_pairs([(b"f1", b"v1"), (b"f\xff", b"v2")])
    h.set_field_expiry(b"f1", FAR)
    values = [*engine.keyspaces, *([{} for _ in engine.dbs] for _ in range(2))]
    values = values[:len(value_types.TYPES)]
    values[hash_type.slot][0][b"h"] = h
    values[set_type.slot][3][b"s"] = RSet.from_members([b"x", b"7"])
    path = str(tmp_path / "snapshot-000000000004.mdb")
    write_snapshot(engine.dbs, path, 4, 1, "r" * 40, values=values, expires=engine.expires)

    def table(name: str) -> list[tuple]:
        reader = StreamkeepReader({"path": path, "table": name, "arrow": "false"})
        planned = reader.partitions()
        try:
            return sorted(row for part in planned for row in reader.rows(part))
        finally:
            release(planned)

    assert table("hash_fields") == [(0, b"h", "h", b"f1", b"v1", FAR, 4),
                                    (0, b"h", "h", b"f\xff", b"v2", None, 4)]
    assert table("set_members") == [(3, b"s", "s", b"7", 4), (3, b"s", "s", b"x", 4)]
    assert {(r[1], r[3]) for r in table("keys")} >= {(b"h", "hash"), (b"s", "set")}
    assert value_schema(BY_TABLE["hash_fields"]).simpleString() == (
        "struct<db:int,key:binary,key_str:string,field:binary,value:binary,"
        "field_expire_ms:bigint,snapshot_lsn:bigint>")


def test_list_elements_equal_lrange(spark: SparkSession, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """list_elements: every element of every list with its index (0: the head), as LRANGE
    gives them; a small list (a listpack), a big one (a quicklist, an element past a node's
    limit among them) stored in chunks, binary keys and elements, two databases; through
    Spark (Arrow and tuples) and in process."""
    from streamkeep.snapshot import values
    from streamkeep.snapshot.writer import write_snapshot
    from streamkeep.tools.export.datasource import value_schema
    from streamkeep.tools.value_tables import BY_TABLE

    engine = typed_engine()
    engine.execute("RPUSH", "small", "a", b"\x00\xff", "12", "", "a")
    engine.execute("RPUSH", b"big\xff", *[b"e%d" % i for i in range(2000)], b"\xfe" * 9000,
                   "last")
    engine.execute("PEXPIREAT", "small", str(FAR))
    on_db(engine, 1, "LPUSH", "other", "x", "y")
    monkeypatch.setattr(values, "CHUNKED_ELEMENTS", 1000)  # the big list in chunks
    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 300)
    path = str(tmp_path / "snapshot-000000000005.mdb")
    write_snapshot(engine.dbs, path, 5, 1, "r" * 40, values=engine.keyspaces,
                   expires=engine.expires)
    with Snapshot(path) as snap:
        assert {row.key: row.chunked is not None for row in snap.key_rows()
                if row.type == "list"} == {b"small": False, b"big\xff": True, b"other": False}
    expected = sorted((db, key, i, element) for db, key in [(0, b"small"), (0, b"big\xff"),
                                                            (1, b"other")]
                      for i, element in enumerate(on_db(engine, db, "LRANGE", key, "0", "-1")))
    rows = read(spark, path, "list_elements", numPartitions=2)
    # (r["index"]: a Row is a tuple, whose attribute `index` is tuple.index)
    assert sorted((r.db, r.key, r["index"], r.element) for r in rows) == expected
    assert {r.snapshot_lsn for r in rows} == {5} and len(rows) == 2002 + 5 + 2
    assert {r.key_str for r in rows} == {"small", "big\ufffd", "other"}
    tuples = read(spark, path, "list_elements", numPartitions=3, arrow="false")
    assert sorted(tuples) == sorted(rows)
    reader = StreamkeepReader({"path": path, "table": "list_elements", "arrow": "false"})
    planned = reader.partitions()
    try:
        got = sorted(row for part in planned for row in reader.rows(part))
    finally:
        release(planned)
    assert [(r[0], r[1], r[3], r[4]) for r in got] == expected
    assert value_schema(BY_TABLE["list_elements"]).simpleString() == (
        "struct<db:int,key:binary,key_str:string,index:bigint,element:binary,"
        "snapshot_lsn:bigint>")
    keys = read(spark, path, "keys")
    assert {(r.key, r.type, r.expire_ms) for r in keys if r.type == "list"} == {
        (b"small", "list", FAR), (b"big\xff", "list", None), (b"other", "list", None)}


def test_list_elements_of_a_list_whose_chunks_were_referred_to(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A big list changed at both ends after a compaction: the next one refers to its
    unchanged chunks in the first part file (the keys row's second form); list_elements
    (Spark and in process) and `snapshot dump` give its elements with their indexes as
    LRANGE does (indexes counted from the chunks' order, not as the referred chunks were
    written)."""
    import json

    from streamkeep.tools.main import main

    with Engine.open(str(tmp_path), auto_aof_rewrite_percentage=0) as engine:
        engine.execute("RPUSH", "q", *[b"e%d" % i for i in range(80_000)])
        engine.compact(wait=True)
        engine.execute("LPOP", "q", "5000")  # (more than a chunk: the head moved)
        engine.execute("LPUSH", "q", "h1", "h2")
        engine.execute("RPUSH", "q", "t1", b"\xff")
        engine.compact(wait=True)
        expected = engine.execute("LRANGE", "q", "0", "-1")
    path = current_snapshot(str(tmp_path))
    assert path is not None
    with Snapshot(path) as snap:
        (row,) = [r for r in snap.key_rows() if r.key == b"q"]
        assert row.chunked is not None and not row.chunked.indexed
        assert len({run.part for run in row.chunked.runs}) == 2
    rows = read(spark, path, "list_elements", numPartitions=2)
    assert sorted((r["index"], r.element) for r in rows) == list(enumerate(expected))
    reader = StreamkeepReader({"path": path, "table": "list_elements", "arrow": "false"})
    planned = reader.partitions()
    try:
        got = sorted(row for part in planned for row in reader.rows(part))
    finally:
        release(planned)
    assert [(r[3], r[4]) for r in got] == list(enumerate(expected))
    assert main(["snapshot", "dump", str(tmp_path), "--key", "q", "--format", "json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["value"] == [
        e.decode() if e != b"\xff" else {"b64": "/w=="} for e in expected]
