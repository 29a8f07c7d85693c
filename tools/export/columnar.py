"""The entries table as Arrow record batches built column by column from decoded snapshot nodes.

Owns the data source's fast path for `entries` (datasource calls it for Arrow reads): a node
decodes (snapshot.reader) into a list of IDs and a tuple of per-entry field/value tuples, and
every column is built from those lists at once, never through a per-row tuple: ms and seq from
the IDs, the id string by Arrow's string kernels, db/stream/stream_str/snapshot_lsn by taking
one value per stream range (a cluster read's node and slot too), `pairs` and `fields` from one
flat field/value list and offsets (ListArray/MapArray.from_arrays). Only the columns asked for are built. The rows are exactly
the tuple path's (datasource.entry_rows): same entries, same values, a repeated field's last
value in the map. Must not touch: the snapshot format (read through Snapshot.stream/nodes
only), Spark's schema conversion (the caller hands the Arrow schema Spark expects).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.snapshot.reader import Snapshot
from streamkeep.tools.export.pushdown import text

U64 = (1 << 64) - 1
_IDS = {"id", "ms", "seq"}


class _Chunk:
    """Entries gathered for one record batch: per stream range a run, per entry its ID and
    its field/value tuple (the node's own objects, not copies)."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, bytes]] = []
        self.counts: list[int] = []
        self.ids: list[int] = []
        self.fields: list[tuple] = []

    def start_run(self, db: int, key: bytes) -> None:
        self.runs.append((db, key))
        self.counts.append(0)


def entry_batches(snap: Snapshot, ranges: Iterable[tuple[int, bytes, int, int]], lsn: int,
                  columns: list[str], schema: pa.Schema, size: int,
                  owner: str = "") -> Iterator[pa.RecordBatch]:
    """Record batches (at most `size` rows) of `columns` (typed as `schema`) for the live
    entries of each (db, key, start, end) range, in order; `owner` is the node column's value
    (a cluster read's)."""
    chunk = _Chunk()
    for db, key, lo, hi in ranges:
        info = snap.stream(db, key)
        if info is None:  # cannot happen in one snapshot; the planner listed it
            continue
        chunk.start_run(db, key)
        for node in snap.nodes(info.number, lo, hi):
            ids, fields = node.ids, node.fields
            if not ids:
                continue
            if not (ids[0] >= lo and ids[-1] <= hi and None not in fields):
                # a node at a range's edge or with tombstones: the per-entry filter
                keep = [k for k, sid in enumerate(ids)
                        if lo <= sid <= hi and fields[k] is not None]
                ids, fields = [ids[k] for k in keep], tuple(fields[k] for k in keep)
            chunk.ids.extend(ids)
            chunk.fields.extend(fields)
            chunk.counts[-1] += len(ids)
            if len(chunk.ids) >= size:
                yield from _emit(chunk, lsn, columns, schema, size, owner)
                chunk = _Chunk()
                chunk.start_run(db, key)
    if chunk.ids:
        yield from _emit(chunk, lsn, columns, schema, size, owner)


def _emit(chunk: _Chunk, lsn: int, columns: list[str], schema: pa.Schema,
          size: int, owner: str) -> Iterator[pa.RecordBatch]:
    n = len(chunk.ids)
    built: dict[str, Any] = {}
    if _IDS & set(columns):
        ids = chunk.ids
        ms = pa.array([i >> 64 for i in ids], pa.uint64())
        seq = pa.array([i & U64 for i in ids], pa.uint64())
        # from the unsigned halves, so a pruned read of `id` alone never overflows
        built["id"] = pc.binary_join_element_wise(pc.cast(ms, pa.string()),
                                                  pc.cast(seq, pa.string()), "-")
        built["ms"], built["seq"] = ms.cast(pa.int64()), seq.cast(pa.int64())
    if {"db", "stream", "stream_str", "slot"} & set(columns):
        which = pa.array(np.repeat(np.arange(len(chunk.runs), dtype=np.int32),
                                   chunk.counts))
        built["db"] = pa.array([db for db, _ in chunk.runs], pa.int32()).take(which)
        built["stream"] = pa.array([key for _, key in chunk.runs], pa.binary()).take(which)
        built["stream_str"] = pa.array([text(key) for _, key in chunk.runs],
                                       pa.string()).take(which)
        built["slot"] = pa.array([key_slot(key) for _, key in chunk.runs],
                                 pa.int32()).take(which)
    if "node" in columns:
        built["node"] = pa.repeat(pa.scalar(owner, pa.string()), n)
    if "snapshot_lsn" in columns:
        built["snapshot_lsn"] = pa.array(np.full(n, lsn, dtype=np.int64))
    if "pairs" in columns or "fields" in columns:
        _field_columns(chunk.fields, columns, schema, built)
    arrays = [built[c].cast(schema.field(c).type) if built[c].type != schema.field(c).type
              else built[c] for c in columns]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    for offset in range(0, n, size):
        yield batch.slice(offset, size)


def _field_columns(fields: list[tuple], columns: list[str], schema: pa.Schema,
                   built: dict[str, Any]) -> None:
    flat = list(chain.from_iterable(fields))
    per_entry = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields)) // 2
    offsets = np.zeros(len(fields) + 1, dtype=np.int32)
    np.cumsum(per_entry, out=offsets[1:])
    names = pa.array(flat[::2], pa.binary())
    values = pa.array(flat[1::2], pa.binary())
    if "pairs" in columns:
        kind = schema.field("pairs").type
        struct = kind.value_type
        children = pa.StructArray.from_arrays([names, values],
                                              fields=[struct.field(0), struct.field(1)])
        built["pairs"] = pa.ListArray.from_arrays(pa.array(offsets), children, type=kind)
    if "fields" in columns:
        built["fields"] = _field_map(names, values, per_entry, schema.field("fields").type)


def _field_map(names: pa.Array, values: pa.Array, per_entry: np.ndarray, kind: Any) -> Any:
    """The `fields` map: names decoded once per distinct name, and for a repeated field one
    key (where it first appears, as a dict keeps it) with its last value."""
    encoded = names.dictionary_encode()
    labels = pa.array([text(raw) for raw in encoded.dictionary.to_pylist()], pa.string())
    index = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    owner = np.repeat(np.arange(len(per_entry), dtype=np.int64), per_entry)
    combo = owner * max(1, len(labels)) + index  # (entry, name): unique unless repeated
    unique, first = np.unique(combo, return_index=True)
    if len(unique) == len(combo):
        keys, items, counts = labels.take(pa.array(index)), values, per_entry
    else:
        _, last_reversed = np.unique(combo[::-1], return_index=True)
        last = len(combo) - 1 - last_reversed  # aligned with `first`: same sorted uniques
        order = np.argsort(first, kind="stable")
        key_at, value_at = first[order], last[order]
        keys = labels.take(pa.array(index[key_at]))
        items = values.take(pa.array(value_at))
        counts = np.bincount(owner[key_at], minlength=len(per_entry))
    offsets = np.zeros(len(per_entry) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=kind)
