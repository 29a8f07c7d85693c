"""The bench's example data: :class:`DataSet` (entries over streams, their IDs and fields, a
consumer group and what it read and acknowledged), written on an open engine (:func:`write`),
into a data directory (:func:`build`, through the public API), or as a snapshot written
directly (:func:`build_generated`: a data set too big to build through commands).
Must not touch: what the sections measure on the data, the engine's storage.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node
    from streamkeep.engine.services.datadir import DataDir

Field = str | bytes
NODE_ENTRIES = 100  # stream-node-max-entries (the default), in a generated snapshot
NODE_BYTES = 4096  # stream-node-max-bytes (the default)


def plain_fields(_i: int) -> Sequence[Field]:
    """``f v``: what most sections' entries hold."""
    return ("f", "v")


@dataclass(frozen=True)
class DataSet:
    """`entries` entries over `streams` streams (one: named `key`; more: ``key:0``,
    ``key:1``, ... in turn), the i-th holding `fields(i)`, with IDs ``<first_ms + i>-<seq>``
    (`first_ms` None: ``*``). `group`: a consumer group of the (one) stream, created at its
    end before the entries, which reads `read` entries `chunk` at a time (0: all at once), in
    turns over `consumers`, and acknowledges every `ack_every`-th of each read (0: none; 1:
    all)."""

    entries: int
    key: str = "bench"
    streams: int = 1
    fields: Callable[[int], Sequence[Field]] = plain_fields
    first_ms: int | None = None
    seq: int = 0
    group: str | None = None
    consumers: Sequence[str] = ("c",)
    read: int = 0
    chunk: int = 0
    ack_every: int = 0

    def __post_init__(self) -> None:
        if self.group is not None and self.streams != 1:
            raise ValueError("a data set's group is of its one stream")

    @property
    def keys(self) -> list[str]:
        return [self.key] if self.streams == 1 else [f"{self.key}:{s}"
                                                     for s in range(self.streams)]

    def entry_id(self, i: int) -> str:
        return "*" if self.first_ms is None else f"{self.first_ms + i}-{self.seq}"


def write(execute: Callable[..., Any], data: DataSet) -> int:
    """Run `data`'s commands through an open engine's `execute`; the entries left pending in
    its group."""
    keys, streams, fields = data.keys, data.streams, data.fields
    if data.group is not None:
        execute("XGROUP", "CREATE", data.key, data.group, "$", "MKSTREAM")
    for i in range(data.entries):
        execute("XADD", keys[i % streams], data.entry_id(i), *fields(i))
    done = pending = turn = 0
    count = str(data.chunk or data.read)
    while data.group is not None and done < data.read:
        reply = execute("XREADGROUP", "GROUP", data.group,
                        data.consumers[turn % len(data.consumers)], "COUNT", count, "STREAMS",
                        data.key, ">")
        ids = [entry[0] for entry in reply[0][1]]
        acked = ids[::data.ack_every] if data.ack_every else []
        if acked:
            execute("XACK", data.key, data.group, *acked)
        done += len(ids)
        pending += len(ids) - len(acked)
        turn += 1
    return pending


def build(path: str, data: DataSet, compact: bool = True, **config: Any) -> int:
    """A data directory at `path` holding `data`: opened with appendfsync no and automatic
    compaction off (and `config`), written, compacted into a snapshot (`compact`;
    AssertionError if none was written), closed. The entries left pending."""
    from streamkeep import Engine

    settings = {"appendfsync": "no", "auto_aof_rewrite_percentage": 0, **config}
    engine = Engine.open(path, **settings)
    try:
        pending = write(engine.execute, data)
        if compact and engine.compact(wait=True) is None:
            raise AssertionError(f"the compaction of the {data.entries:,}-entry data set "
                                 f"wrote no snapshot")
    finally:
        engine.close()
    return pending


class _GeneratedNodes(list):  # type: ignore[type-arg]
    """A stream's nodes made while the snapshot writer iterates them: never all in memory.
    A list by type only (the compiled stream's `nodes` field holds a list; the writer, plain
    Python, iterates it and takes its length through these methods)."""

    def __init__(self, data: DataSet) -> None:
        self.data = data

    def __len__(self) -> int:
        return -(-self.data.entries // NODE_ENTRIES)

    def __iter__(self) -> Iterator[Node]:
        from streamkeep.engine.model.stream import Stream

        data, first = self.data, cast("int", self.data.first_ms)
        fields = cast("Callable[[int], tuple[bytes, ...]]", data.fields)  # (bytes: checked)
        for start in range(0, data.entries, NODE_ENTRIES):
            scratch = Stream()
            for i in range(start, min(start + NODE_ENTRIES, data.entries)):
                scratch.append(((first + i) << 64) | data.seq, fields(i), NODE_ENTRIES,
                               NODE_BYTES)
            yield from scratch.nodes


def build_generated(path: str, data: DataSet) -> None:
    """A data directory at `path` whose snapshot holds `data`, written directly: one stream
    with explicit IDs and fields of bytes; its group (if any) has delivered the first `read` entries to its first
    consumer, all acknowledged (nothing pending). The directory then holds that snapshot and
    nothing else, its history starting after it."""
    from streamkeep import Engine
    from streamkeep.engine.model.consumer_groups import ConsumerGroup
    from streamkeep.engine.model.stream import Stream
    from streamkeep.snapshot.writer import write_snapshot

    if data.first_ms is None or data.streams != 1 or (data.read and data.ack_every != 1) \
            or not isinstance(data.fields(0), tuple) \
            or not all(isinstance(f, bytes) for f in data.fields(0)):
        raise ValueError("a generated data set is one stream of explicit IDs, its fields a "
                         "tuple of bytes, its group's reads acknowledged")
    n = data.entries
    s = Stream()
    s.nodes = _GeneratedNodes(data)  # iterated once, by the writer
    s.length = s.entries_added = n
    s.first_id = (data.first_ms << 64) | data.seq
    s.last_id = ((data.first_ms + n - 1) << 64) | data.seq
    if data.group is not None:
        name = data.group.encode()
        last = ((data.first_ms + data.read - 1) << 64) | data.seq if data.read else 0
        group = s.groups[name] = ConsumerGroup(name, last, data.read)
        group.create_consumer(data.consumers[0].encode(), 0)
    engine = Engine.open(path)
    try:
        dbs: list[dict[bytes, Stream]] = [{} for _ in engine.dbs]
        dbs[0][data.key.encode()] = s
        tmp = os.path.join(path, "generated.mdb")
        datadir = cast("DataDir", engine.datadir)
        info = write_snapshot(dbs, tmp, 1, int(time.time() * 1000), datadir.repl_id)
        datadir.wait_no_compaction()
        with engine.lock:
            datadir.install_snapshot(tmp, 1, datadir.repl_id, [[{} for _ in engine.dbs]],
                                     info.crc32)
    finally:
        engine.close()
