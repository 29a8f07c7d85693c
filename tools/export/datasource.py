"""The PySpark data source `streamkeep`: a snapshot's tables as DataFrames (Spark >= 4.0).

    from streamkeep.tools.export.datasource import StreamkeepDataSource
    spark.dataSource.register(StreamkeepDataSource)
    df = (spark.read.format("streamkeep").option("table", "entries")
          .option("numPartitions", 8).load("./data"))      # or a snapshot file's path

Options (case-insensitive, values strings): table (entries | streams | groups | pending |
consumers | keys | strings | zset_members | hash_fields | set_members | list_elements, the last
ones while their type is registered; default entries), numPartitions (default: this machine's
CPU count), arrow (default true: Arrow record batches; false: tuples), batchSize (rows per
batch, 32768), pushdown (true: filter push-down, which needs
spark.sql.python.filterPushdown.enabled=true too), pinHours (24), and for an incremental read of
the entries (tools.export.since) sinceLsn, sinceManifest (a previous export's manifest: its LSN
and stream positions), untilLsn, pinned (a caller's LogPin).
A cluster's shards in one read: `shards`, a JSON list whose items are a data directory's (or a
snapshot file's) path or {"path": ..., "node": ...} (the node column's value; a bare path's is
the path itself), read with no load path: each shard is planned as it would be alone
(numPartitions partitions each, its own pin and LSN) and every row gets two more columns, `node`
and `slot` (the hash slot of the row's stream or key: engine.model.keyslot).
Column pruning: a user-given schema naming a subset of the table's columns (`.schema("db int,
id string")`); the Python data source API pushes no column list down.

Owns the tables' schemas and rows (see SCHEMAS): the stream tables (`entries`, `streams`,
`groups`, `pending`, `consumers`), `keys` (every key of every type, with its TYPE word and
expiry) and one table per value type (`strings`, `zset_members`, ...: tools.value_tables
describes each, this module types it for Spark); cutting a read into partitions (by stream, and
by ID range inside a large stream, from the snapshot's keys alone: `Snapshot.split`; the key
tables by runs of keys of about the same stored size), and choosing the one snapshot a read
sees.
Everything is read through `streamkeep.snapshot.reader` and (incremental reads) `aof.segment_reader`: no
second parser of either format. Must not touch: the snapshot and AOF formats, the engine, the
data directory (apart from the pin files).

Consistency: planning pins the snapshot (tools.export.pin: a hard link beside it) and every task
opens the pin and checks its LSN, so one read sees one snapshot even if compaction replaces it
meanwhile. Spark's batch reads have no end-of-read hook, so a pin made here is removed by a later
read's planning once older than the `pinHours` option (default 24); a caller that wants exact
lifetime pins itself (`with pin(DIR) as p: ...load(p.path)`) and a pin path is never pinned again.

Workers import this module (Spark pickles the classes by reference): the package must be
installed where executors run, and PYSPARK_PYTHON must name that interpreter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, Filter, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.snapshot.reader import GroupInfo, KeyInfo, Snapshot, SnapshotError, StreamInfo
from streamkeep.tools.export import since as since_mod
from streamkeep.tools.export.pin import (
    ExportError,
    LogPin,
    Pin,
    PinnedSegment,
    is_pinned,
    pin,
    pin_log,
    resolve,
    sweep,
)
from streamkeep.tools.export.pushdown import Selection, text
from streamkeep.tools.export.since import Positions, Window
from streamkeep.tools.value_tables import (
    BY_TABLE,
    KEYS_TABLE,
    STREAM_TABLES,
    VALUE_TABLES,
    ValueTable,
    elements,
    export_tables,
)

TABLES = STREAM_TABLES  # the stream tables; every table readable now: export_tables()
DEFAULT_PIN_HOURS = 24.0
DEFAULT_BATCH = 32768  # rows per Arrow batch: the JVM side pays per batch, so fewer, larger

_STREAM = [StructField("db", IntegerType(), False), StructField("stream", BinaryType(), False),
           StructField("stream_str", StringType(), False)]
_GROUP = [StructField("group", BinaryType(), False),
          StructField("group_str", StringType(), False)]
_LSN = [StructField("snapshot_lsn", LongType(), False)]

SCHEMAS: dict[str, StructType] = {
    "entries": StructType([
        *_STREAM, StructField("id", StringType(), False), StructField("ms", LongType(), False),
        StructField("seq", LongType(), False),
        # last value wins for a repeated field; `pairs` keeps every one, in order, as bytes
        StructField("fields", MapType(StringType(), BinaryType(), False), False),
        StructField("pairs", ArrayType(StructType([
            StructField("field", BinaryType(), False),
            StructField("value", BinaryType(), False)]), False), False),
        *_LSN]),
    "streams": StructType([
        *_STREAM, StructField("length", LongType(), False),
        StructField("first_id", StringType(), False),  # XINFO's recorded-first-entry-id
        StructField("last_id", StringType(), False),  # last-generated-id
        StructField("max_deleted_id", StringType(), False),
        StructField("entries_added", LongType(), False),
        StructField("groups", LongType(), False), StructField("nodes", LongType(), False),
        *_LSN]),
    "groups": StructType([
        *_STREAM, *_GROUP, StructField("last_delivered_id", StringType(), False),
        StructField("entries_read", LongType(), True),  # null: unknown (XINFO's nil)
        StructField("lag", LongType(), True),  # null: cannot be known (XINFO's nil)
        StructField("pending", LongType(), False), StructField("consumers", LongType(), False),
        *_LSN]),
    "pending": StructType([
        *_STREAM, *_GROUP, StructField("id", StringType(), False),
        StructField("ms", LongType(), False), StructField("seq", LongType(), False),
        StructField("consumer", BinaryType(), True),  # null: released by XNACK
        StructField("delivery_time", LongType(), False),
        StructField("delivery_count", LongType(), False), *_LSN]),
    "consumers": StructType([
        *_STREAM, *_GROUP, StructField("consumer", BinaryType(), False),
        StructField("consumer_str", StringType(), False),
        StructField("seen_time", LongType(), False),
        StructField("active_time", LongType(), False),  # -1: never delivered anything
        StructField("pending", LongType(), False), *_LSN]),
}

_KEY = [StructField("db", IntegerType(), False), StructField("key", BinaryType(), False),
        StructField("key_str", StringType(), False)]
_EXPIRE = StructField("expire_ms", LongType(), True)  # null: no TTL
# a value table's column kinds (tools.value_tables) as Spark types, and whether null is allowed
_KINDS: dict[str, tuple[DataType, bool]] = {
    "binary": (BinaryType(), False), "double": (DoubleType(), False), "expiry": (LongType(), True),
    "index": (LongType(), False)}


def value_schema(table: ValueTable) -> StructType:
    """A value type's table: db, key, key_str, the element's columns, the key's expire_ms if
    the table carries it, snapshot_lsn."""
    columns = [StructField(c.name, *_KINDS[c.kind]) for c in table.columns]
    return StructType([*_KEY, *columns, *([_EXPIRE] if table.key_expiry else []), *_LSN])


SCHEMAS[KEYS_TABLE] = StructType([*_KEY, StructField("type", StringType(), False), _EXPIRE,
                                  *_LSN])
SCHEMAS.update({t.table: value_schema(t) for t in VALUE_TABLES})
# a cluster read's (the shards option) columns after every table's own: the node whose data
# directory holds the row, and the hash slot of its stream or key
PLACE = [StructField("node", StringType(), False), StructField("slot", IntegerType(), False)]


def table_schema(table: str, sharded: bool = False) -> StructType:
    """A table's columns; with `sharded` (a read of a cluster's shards) node and slot after
    them."""
    return StructType([*SCHEMAS[table].fields, *PLACE]) if sharded else SCHEMAS[table]


@dataclass(frozen=True, slots=True)
class ShardSource:
    """One shard of a cluster read: the path read and the node column's value."""

    path: str
    node: str


@dataclass(frozen=True, slots=True)
class Range:
    """One stream's entries with start <= ID <= end (IDs as 128-bit ints)."""

    db: int
    key: bytes
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class KeySpan:
    """One database's keys from `first` to `last` inclusive (a key table's share)."""

    db: int
    first: bytes
    last: bytes


@dataclass
class Part(InputPartition):
    """What one task reads: ranges of streams (whole streams for the stream tables other than
    entries) or spans of keys (the key tables) of the pinned snapshot at `lsn`, or (an
    incremental read) the XADDs of one pinned AOF segment's records in a window. `as_of` is
    the snapshot_lsn column: the LSN the read is as of. It carries the files, not the reader:
    Spark pickles the reader for the tasks before planning, the partitions after."""

    ranges: list[Range]
    spans: list[KeySpan]
    snapshot: str
    source: str  # the file `snapshot` pins, as messages name it (the user's, not the pin)
    lsn: int
    segment: PinnedSegment | None
    window: Window | None
    until: int | None  # an incremental read's end (its rows' LSN column)
    node: str  # a cluster read's: the node column of its rows

    def __init__(self, ranges: list[Range], snapshot: str = "", lsn: int = -1) -> None:
        super().__init__(None)
        self.ranges, self.snapshot, self.lsn = ranges, snapshot, lsn
        self.spans = []
        self.source = snapshot
        self.segment, self.window, self.until = None, None, None
        self.node = ""

    @property
    def as_of(self) -> int:
        """The snapshot_lsn column: the LSN the read is as of."""
        return self.lsn if self.until is None else self.until


class StreamkeepDataSource(DataSource):
    """`spark.read.format("streamkeep")`; options: table (default entries), numPartitions."""

    @classmethod
    def name(cls) -> str:
        return "streamkeep"

    def schema(self) -> StructType:
        return table_schema(_table(self.options), bool(self.options.get("shards")))

    def reader(self, schema: StructType) -> DataSourceReader:
        # Spark refuses a reader that defines pushFilters unless its push-down switch is on,
        # and does not tell the data source the switch: the pushdown option says it is.
        if str(self.options.get("pushdown", "false")).lower() == "true":
            return PushdownReader(self.options, schema)
        return StreamkeepReader(self.options, schema)


def _table(options: Any) -> str:
    table = str(options.get("table", "entries")).lower()
    tables = export_tables()
    if table not in tables:
        raise ExportError(f"unknown table {table!r}: one of {', '.join(tables)}")
    return table


def _columns(table: str, schema: StructType, sharded: bool = False) -> list[str]:
    """The columns a read produces, in order: the table's, or the subset a user-given schema
    names (`spark.read.schema("db int, stream binary, id string")`: column pruning, since
    the Python data source API pushes none down); each with the table's type."""
    full = {f.name: f.dataType for f in table_schema(table, sharded).fields}
    if not schema.fields:
        raise ExportError(f"a schema for table {table} must name at least one column")
    for f in schema.fields:
        if f.name not in full:
            raise ExportError(f"table {table} has no column {f.name!r}: "
                              f"{', '.join(full)}")
        if f.dataType.simpleString() != full[f.name].simpleString():  # nullability aside
            raise ExportError(f"column {f.name!r} of table {table} is "
                              f"{full[f.name].simpleString()}, not {f.dataType.simpleString()}")
    return [f.name for f in schema.fields]


def _path(options: Any) -> str:
    path = options.get("path")
    if not path:
        raise ExportError("no path: spark.read.format('streamkeep').load(DATA_DIR_OR_SNAPSHOT)")
    return str(path)


def _shards(options: Mapping[str, Any]) -> list[ShardSource] | None:
    """The shards option (see the module's docstring): None when absent."""
    raw = options.get("shards")
    if not raw:
        return None
    import json

    if options.get("path"):
        raise ExportError("the shards option names what is read: load() takes no path with it")
    try:
        items = json.loads(str(raw))
    except ValueError as err:
        raise ExportError(f"option shards is not JSON ({err})") from None
    found: list[ShardSource] = []
    for item in items if isinstance(items, list) else [None]:
        path = item if isinstance(item, str) else item.get("path") if isinstance(item, dict) \
            else None
        node = item.get("node", path) if isinstance(item, dict) else path
        if isinstance(path, str) and path and isinstance(node, str):
            found.append(ShardSource(path, node))
        else:
            raise ExportError("option shards must be a JSON list of paths or of "
                              '{"path": ..., "node": ...} objects, not ' + str(raw)[:200])
    if not found:
        raise ExportError("option shards names no shard")
    return found


class StreamkeepReader(DataSourceReader):
    """Plans on the driver (partitions) and reads in the tasks (read). Holds plain
    attributes only: it is pickled to every task; environments are opened where used."""

    def __init__(self, options: Mapping[str, Any], schema: StructType | None = None) -> None:
        # Spark's options are case-insensitive (it hands them lower-cased): so are ours
        options = {str(k).lower(): v for k, v in options.items()}
        self.table = _table(options)
        self.shards = _shards(options)  # a cluster's shards in one read; None: one path
        self.source = "" if self.shards else _path(options)
        self.num_partitions = _positive(options, "numpartitions", os.cpu_count() or 2)
        self.pin_hours = float(options.get("pinhours", DEFAULT_PIN_HOURS))
        self.selection = Selection()  # everything, unless push-down narrows it
        # the schema Spark reads with: the table's, or a user-given subset (see _columns)
        sharded = self.shards is not None
        self.schema = schema or table_schema(self.table, sharded)
        self.columns = _columns(self.table, self.schema, sharded)
        self.names = table_schema(self.table, sharded).fieldNames()
        self.arrow = str(options.get("arrow", "true")).lower() == "true"
        self.batch_size = _positive(options, "batchsize", DEFAULT_BATCH)
        self.since, self.until, self.positions = _since_options(options)
        if self.since is not None and self.table != "entries":
            raise ExportError(f"sinceLsn reads the entries table only, not {self.table}")
        if self.since is not None and self.shards:
            raise ExportError("an incremental read (sinceLsn, sinceManifest) reads one data "
                              "directory, not shards")
        self.pinned = options.get("pinned")  # a caller's LogPin (JSON): it releases it

    def partitions(self) -> Sequence[InputPartition]:
        if self.since is not None:
            return self._plan_since(self.since)
        if self.shards:  # one partition set per shard, each as it would be planned alone
            parts: list[Part] = []
            for shard in self.shards:
                for part in self._plan_snapshot(shard.path):
                    part.node = shard.node
                    parts.append(part)
            return parts
        return self._plan_snapshot(self.source)

    def _plan_snapshot(self, source: str) -> list[Part]:
        """The partitions of one snapshot's read (`source`: a data directory or a snapshot
        file), pinned."""
        path, lsn = self._pin(source)
        with _open(path) as snap:
            if self.table not in STREAM_TABLES:
                parts = plan_keys(snap, self.table, self.num_partitions, self.selection)
            else:
                streams = [i for i in snap.streams() if self.selection.keeps(i.db, i.key)]
                if self.table == "entries":
                    parts = plan_entries(snap, streams, self.num_partitions, self.selection)
                else:
                    parts = plan_streams(streams, self.num_partitions)
        named = path if path == source else resolve(source)
        for part in parts:
            part.snapshot, part.source, part.lsn = path, named, lsn
        return parts

    def _plan_since(self, since: int) -> list[Part]:
        """An incremental read (tools.export.since): the snapshot's entries above the
        positions if a compaction folded records of the window, then one part per segment."""
        if self.pinned:
            import json

            log = LogPin.from_json(json.loads(self.pinned))
        else:
            log = pin_log(self.source)  # (refuses a path that is no data directory)
            sweep(os.path.abspath(self.source), self.pin_hours * 3600)  # ours are fresh
        try:
            win = since_mod.window(log, since, self.until)
            parts: list[Part] = self._plan_gap(log, win) if win.gap else []
        except ExportError:
            if not self.pinned:  # ours: nothing will read it
                log.release()
            raise
        for seg in since_mod.segments_in(log, win):
            part = Part([])
            part.segment, part.window = seg, win
            parts.append(part)
        for part in parts:
            part.until = win.until
        return parts or [Part([])]

    def _plan_gap(self, log: LogPin, win: Window) -> list[Part]:
        if self.positions is None or log.snapshot is None:
            raise ExportError(
                f"the records after LSN {win.since} were compacted into the snapshot at LSN "
                f"{win.snapshot_lsn}: give the previous export's manifest (sinceManifest, "
                "--since) to take the entries added meanwhile from the snapshot, or export "
                "everything")
        with _open(log.snapshot) as snap:
            streams = [i for i in snap.streams() if self.selection.keeps(i.db, i.key)]
            floors = since_mod.floors(self.positions, streams)
            parts = plan_entries(snap, streams, self.num_partitions, self.selection, floors)
        for part in parts:
            part.snapshot, part.lsn = log.snapshot, log.snapshot_lsn
        return parts

    def _pin(self, source: str) -> tuple[str, int]:
        if is_pinned(source):
            path = source  # the caller pinned it and removes it when done
        else:
            sweep(os.path.dirname(os.path.abspath(resolve(source))), self.pin_hours * 3600)
            path = pin(source).path
        try:
            with _open(path) as snap:
                return path, snap.meta.lsn
        except ExportError:
            if path != source:  # not a snapshot: drop the pin just made
                Pin(path).release()
            raise

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Arrow record batches (`arrow`, the default: Spark takes them as they are) or
        tuples, of the columns asked for, in that order."""
        assert isinstance(partition, Part)
        if not partition.ranges and not partition.spans and partition.segment is None:
            return iter(())
        if partition.segment is not None:  # an incremental read's AOF part: rows
            rows = self.rows(partition)
            if self.arrow:
                return arrow_batches(rows, self.schema, self.batch_size)
            return iter(rows)
        if self.arrow and self.table == "entries":
            return self.entry_batches(partition)
        rows = self.rows(partition)
        if self.arrow:
            return arrow_batches(rows, self.schema, self.batch_size)
        return iter(rows)

    def entry_batches(self, partition: InputPartition) -> Iterator[Any]:
        """The entries table's Arrow batches, built column by column (tools.export.columnar:
        several times faster than rows turned into columns)."""
        from pyspark.sql.pandas.types import to_arrow_schema

        from streamkeep.tools.export.columnar import entry_batches  # the tasks only (pyarrow)

        assert isinstance(partition, Part)
        schema = to_arrow_schema(self.schema)
        with _checked(partition) as snap:
            ranges = ((r.db, r.key, r.start, r.end) for r in partition.ranges)
            yield from entry_batches(snap, ranges, partition.as_of, self.columns, schema,
                                     self.batch_size, partition.node)

    def rows(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, Part)
        names = self.names
        pick = [names.index(c) for c in self.columns]
        wanted = set(self.columns)
        lsn = partition.as_of
        whole = pick == list(range(len(names)))
        take = itemgetter(*pick) if len(pick) > 1 else (lambda row: (row[pick[0]],))
        for made in self._made(partition, wanted):
            rows = ((*row, lsn) for row in made) if self.shards is None \
                else placed(made, lsn, partition.node)
            if whole:  # the common case: no tuple rebuilt per row
                yield from rows
            else:
                yield from (take(row) for row in rows)

    def _made(self, partition: Part, wanted: set[str]) -> Iterator[Iterator[tuple]]:
        """The partition's rows (without the LSN column), range by range."""
        if partition.segment is not None:
            assert partition.window is not None
            yield logged_entry_rows(partition.segment, partition.window, self.selection,
                                    wanted)
            return
        with _checked(partition) as snap:
            if partition.spans:
                for span in partition.spans:
                    yield key_table_rows(snap, self.table, span, self.selection)
                return
            make = ROWS[self.table]
            for part in partition.ranges:
                yield make(snap, part, wanted)


def placed(rows: Iterator[tuple], lsn: int, node: str) -> Iterator[tuple]:
    """A cluster read's rows: each with the LSN, its node and the hash slot of its stream or
    key (every table's second column), the slot found once per run of one key."""
    key, slot = None, 0
    for row in rows:
        if row[1] is not key:
            key = row[1]
            slot = key_slot(key)
        yield (*row, lsn, node, slot)


def arrow_batches(rows: Iterator[tuple], spark_schema: StructType,
                  size: int) -> Iterator[Any]:
    """`rows` as record batches of `size`, typed as Spark expects `spark_schema` (its own
    conversion: any other Arrow type, or nullability, is refused by Spark)."""
    import pyarrow as pa  # the tasks only
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(spark_schema)
    while True:
        chunk = list(islice(rows, size))
        if not chunk:
            return
        arrays = [arrow_column(pa, list(values), schema.field(i).type)
                  for i, values in enumerate(zip(*chunk, strict=True))]
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_column(pa: Any, values: list, kind: Any) -> Any:
    """One column. The map and the list of pairs are built from flat child arrays and
    offsets: pyarrow's conversion of nested Python values is several times slower."""
    if pa.types.is_map(kind):
        offsets, keys, items = _flatten(values, lambda doc: doc.items())
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()),
                                       pa.array(keys, kind.key_type),
                                       pa.array(items, kind.item_type), type=kind)
    if pa.types.is_list(kind) and pa.types.is_struct(kind.value_type):
        offsets, firsts, seconds = _flatten(values, lambda pairs: pairs)
        struct = kind.value_type
        children = pa.StructArray.from_arrays(
            [pa.array(firsts, struct.field(0).type), pa.array(seconds, struct.field(1).type)],
            fields=[struct.field(0), struct.field(1)])
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), children, type=kind)
    return pa.array(values, type=kind)


def _flatten(values: list, items: Any) -> tuple[list[int], list, list]:
    offsets, firsts, seconds = [0], [], []
    for value in values:
        for first, second in items(value):
            firsts.append(first)
            seconds.append(second)
        offsets.append(len(firsts))
    return offsets, firsts, seconds


class PushdownReader(StreamkeepReader):
    """The reader with filter push-down (`.option("pushdown", "true")` together with
    spark.sql.python.filterPushdown.enabled=true): filters on db, stream, stream_str (key,
    key_str: the key tables) and (entries) ms choose the streams, keys and ID ranges planned;
    Spark applies the rest."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            if not self.selection.accept(f, self.table):
                yield f


def _since_options(options: Mapping[str, Any]) -> tuple[int | None, int | None,
                                                        Positions | None]:
    """(sinceLsn, untilLsn, positions): an incremental read's options. sinceManifest, a
    previous export's manifest, gives the LSN (unless sinceLsn is given) and the positions."""
    positions = None
    since = _lsn_option(options, "sincelsn")
    until = _lsn_option(options, "untillsn")
    where = options.get("sincemanifest")
    if where:
        import json

        try:
            with open(str(where)) as f:
                doc = json.load(f)
            if since is None:
                since = int(doc["lsn"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ExportError(f"{where}: not a readable export manifest ({err})") from None
        if doc.get("positions") is not None:
            positions = since_mod.positions_from_json(doc["positions"], str(where))
    return since, until, positions


def _lsn_option(options: Mapping[str, Any], name: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ExportError(f"option {name} must be an LSN (an integer >= 0), not {raw!r}")
    return value


def _positive(options: Any, name: str, default: int) -> int:
    raw = options.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ExportError(f"option {name} must be a positive integer, not {raw!r}")
    return value


def _checked(partition: Part) -> Snapshot:
    """The partition's snapshot, opened, at the LSN it was planned on."""
    snap = _open(partition.snapshot, partition.source)
    if snap.meta.lsn != partition.lsn:  # the pin guarantees it; say so if it breaks
        snap.close()
        raise ExportError(f"{partition.snapshot}: LSN {snap.meta.lsn}, planned on "
                          f"{partition.lsn}")
    return snap


def _open(path: str, name: str | None = None) -> Snapshot:
    try:
        return Snapshot(path, name)
    except SnapshotError as err:
        raise ExportError(str(err)) from None


# --- planning ----------------------------------------------------------------------------------

def plan_entries(snap: Snapshot, streams: list[StreamInfo], parts: int,
                 selection: Selection, floors: Positions | None = None) -> list[Part]:
    """About `parts` partitions of about the same number of nodes: a stream larger than one
    share is cut into ID ranges at node boundaries, small streams share a partition. Every
    live entry lies in exactly one range (Snapshot.split covers a stream without overlap),
    each range clipped to the selection's IDs and, with `floors`, to IDs at or above the
    stream's floor (an incremental read's gap)."""
    total = sum(info.nodes for info in streams)
    share = max(1, -(-total // parts))
    out: list[Part] = []
    current: list[Range] = []
    weight = 0.0
    for info in streams:
        ranges = snap.split(info.db, info.key, max(1, -(-info.nodes // share)))
        each = info.nodes / len(ranges)
        floor = selection.lo if floors is None else max(
            selection.lo, floors.get((info.db, info.key), 0))
        for start, end in ranges:
            lo, hi = max(start.as_int(), floor), min(end.as_int(), selection.hi)
            if lo > hi:
                continue
            if current and weight + each > share:
                out.append(Part(current))
                current, weight = [], 0.0
            current.append(Range(info.db, info.key, lo, hi))
            weight += each
    if current:
        out.append(Part(current))
    return out or [Part([])]


def plan_streams(streams: list[StreamInfo], parts: int) -> list[Part]:
    """Whole streams in `parts` contiguous runs (the tables other than entries are small)."""
    parts = max(1, min(parts, len(streams)))
    cuts = [len(streams) * i // parts for i in range(parts + 1)]
    return [Part([Range(info.db, info.key, 0, 0) for info in streams[lo:hi]])
            for lo, hi in zip(cuts, cuts[1:], strict=False)]


def plan_keys(snap: Snapshot, table: str, parts: int, selection: Selection) -> list[Part]:
    """A key table's partitions: the selected keys (of the table's type; every key for
    `keys`) in about `parts` runs of about the same stored size (a key's value bytes, plus a
    key's own share), in (db, key) order, each a span per database it covers."""
    weights = _key_weights(snap, table)
    keys = sorted(k for k in weights if selection.keeps(*k))
    total = max(1, sum(weights[k] for k in keys))
    out: list[Part] = []
    run: list[tuple[int, bytes]] = []
    share, before = 0, 0
    for k in keys:
        # the share a key starts in: by the weight before it, so never more than `parts`
        at = before * parts // total
        if run and at != share:
            out.append(_spans_part(run))
            run = []
        share = at
        run.append(k)
        before += weights[k]
    if run:
        out.append(_spans_part(run))
    return out or [Part([])]


_KEY_WEIGHT = 64  # what a key costs beside its value's bytes (its row and lookups)


def _key_weights(snap: Snapshot, table: str) -> dict[tuple[int, bytes], int]:
    if table == KEYS_TABLE:
        found = {(i.db, i.key): 1 for i in snap.streams()}
        found.update(((r.db, r.key), 1) for r in snap.key_rows())
        return found
    type_name = BY_TABLE[table].type_name
    return {(r.db, r.key): _KEY_WEIGHT + (len(r.value or b"") if r.chunked is None
                                          else r.chunked.size)
            for r in snap.key_rows() if r.type == type_name}


def _spans_part(run: list[tuple[int, bytes]]) -> Part:
    """A run of (db, key) in order as one part: a span per database."""
    spans: list[KeySpan] = []
    for db, key in run:
        if spans and spans[-1].db == db:
            spans[-1] = KeySpan(db, spans[-1].first, key)
        else:
            spans.append(KeySpan(db, key, key))
    part = Part([])
    part.spans = spans
    return part


# --- rows --------------------------------------------------------------------------------------

def entry_rows(snap: Snapshot, part: Range, wanted: set[str]) -> Iterator[tuple]:
    """Entries of one range; the field columns are built only if asked for (the costly part
    after decoding the node)."""
    row = _EntryRow(wanted)
    name = text(part.key)
    db, key = part.db, part.key
    for entry in snap.entries(db, key, part.start, part.end):
        ms, seq = entry.id
        yield row(db, key, name, ms, seq, entry.fields)


def logged_entry_rows(seg: PinnedSegment, win: Window, selection: Selection,
                      wanted: set[str]) -> Iterator[tuple]:
    """The entries XADDs added in one segment's records of the window, in the selection."""
    row = _EntryRow(wanted)
    names: dict[bytes, str] = {}
    lo, hi = selection.lo, selection.hi
    for db, key, sid, flat in since_mod.added(seg, win):
        if not lo <= sid <= hi or not selection.keeps(db, key):
            continue
        name = names.get(key)
        if name is None:
            name = names[key] = text(key)
        yield row(db, key, name, sid >> 64, sid & _U64, [bytes(x) for x in flat])


_U64 = (1 << 64) - 1


class _EntryRow:
    """An entries row from its parts: the field columns built only if asked for (the costly
    part after decoding), field names decoded once each (they repeat entry after entry)."""

    def __init__(self, wanted: set[str]) -> None:
        self.as_map, self.as_pairs = "fields" in wanted, "pairs" in wanted
        self.names: dict[bytes, str] = {}

    def __call__(self, db: int, key: bytes, name: str, ms: int, seq: int,
                 flat: Sequence[bytes]) -> tuple:
        as_map, as_pairs = self.as_map, self.as_pairs
        pairs = list(zip(flat[::2], flat[1::2], strict=True)) if as_map or as_pairs else []
        fields = None
        if as_map:
            names = self.names
            fields = {}
            for f, v in pairs:
                label = names.get(f)
                if label is None:
                    label = names[f] = text(f)
                fields[label] = v
        return (db, key, name, f"{ms}-{seq}", ms, seq, fields, pairs if as_pairs else None)


def stream_rows(snap: Snapshot, part: Range, wanted: set[str]) -> Iterator[tuple]:
    info = snap.stream(part.db, part.key)
    if info is None:  # cannot happen in one snapshot; the planner listed it
        return
    yield (info.db, info.key, text(info.key), info.length, str(info.first_id),
           str(info.last_id), str(info.max_deleted_id), info.entries_added, info.groups,
           info.nodes)


def group_rows(snap: Snapshot, part: Range, wanted: set[str]) -> Iterator[tuple]:
    info = snap.stream(part.db, part.key)
    if info is None:
        return
    for group in snap.groups(part.db, part.key):
        entries_read = None if group.entries_read < 0 else group.entries_read
        yield (info.db, info.key, text(info.key), group.name, text(group.name),
               str(group.last_id), entries_read, lag(info, group), group.pending,
               group.consumers)


def lag(info: StreamInfo, group: GroupInfo) -> int | None:
    """XINFO GROUPS lag, by the engine's own rule (one definition, not a copy): its model
    reads only these counters, so a stream and a group holding the snapshot's values stand in
    for the live ones."""
    # (only the groups table pays for these imports)
    from streamkeep.engine.model.consumer_groups import ConsumerGroup, group_lag
    from streamkeep.engine.model.stream import Stream

    stream = Stream()
    stream.entries_added, stream.length = info.entries_added, info.length
    stream.first_id, stream.last_id = info.first_id.as_int(), info.last_id.as_int()
    stream.max_deleted_id = info.max_deleted_id.as_int()
    return group_lag(stream, ConsumerGroup(b"", group.last_id.as_int(), group.entries_read))


def pending_rows(snap: Snapshot, part: Range, wanted: set[str]) -> Iterator[tuple]:
    name = text(part.key)
    for group in snap.groups(part.db, part.key):
        for p in snap.pending(part.db, part.key, group.name):
            yield (part.db, part.key, name, group.name, text(group.name), str(p.id), p.id.ms,
                   p.id.seq, p.consumer, p.delivery_time, p.delivery_count)


def consumer_rows(snap: Snapshot, part: Range, wanted: set[str]) -> Iterator[tuple]:
    name = text(part.key)
    for group in snap.groups(part.db, part.key):
        owned: dict[bytes | None, int] = {}
        for p in snap.pending(part.db, part.key, group.name):
            owned[p.consumer] = owned.get(p.consumer, 0) + 1
        for c in snap.consumers(part.db, part.key, group.name):
            yield (part.db, part.key, name, group.name, text(group.name), c.name, text(c.name),
                   c.seen_time, c.active_time, owned.get(c.name, 0))


def key_table_rows(snap: Snapshot, table: str, span: KeySpan,
                   selection: Selection) -> Iterator[tuple]:
    """A key table's rows of one span: `keys` (every key) or a value type's elements."""
    found = snap.key_rows(span.db, span.first, span.last)
    if table == KEYS_TABLE:
        return _keys_rows(snap, span, found, selection)
    return _value_rows(snap, BY_TABLE[table], found, selection)


def _keys_rows(snap: Snapshot, span: KeySpan, found: list[KeyInfo],
               selection: Selection) -> Iterator[tuple]:
    """db, key, key_str, type, expire_ms of every key in the span, streams included (a
    stream's row in the keys table, type None, holds only its TTL)."""
    kinds: dict[bytes, tuple[str, int | None]] = {
        i.key: ("stream", None) for i in snap.streams(span.db)
        if span.first <= i.key <= span.last}
    for row in found:
        kinds[row.key] = (row.type or "stream", row.expires_ms)
    for key in sorted(kinds):
        if selection.keeps(span.db, key):
            kind, expire_ms = kinds[key]
            yield (span.db, key, text(key), kind, expire_ms)


def _value_rows(snap: Snapshot, table: ValueTable, found: list[KeyInfo],
                selection: Selection) -> Iterator[tuple]:
    """db, key, key_str, the element's columns (and the key's expire_ms if the table has it) of
    every element of every key of the table's type (a big value's read chunk by chunk)."""
    for row in found:
        if row.type != table.type_name or (row.value is None and row.chunked is None) or \
                not selection.keeps(row.db, row.key):
            continue
        head = (row.db, row.key, text(row.key))
        tail = (row.expires_ms,) if table.key_expiry else ()
        for element in elements(snap, row):
            yield (*head, *element, *tail)


ROWS = {"entries": entry_rows, "streams": stream_rows, "groups": group_rows,
        "pending": pending_rows, "consumers": consumer_rows}
