"""The cold-node test mode: engines that keep (nearly) no stream entry, list node or run of a
hash's or set's buckets in memory.

`pytest --cold-nodes` (conftest) runs the differential and property suites this way, so that
nearly every command reads its elements back from a snapshot (engine.model.residency). After
every command an engine is *settled*: its budget is one byte, so every node or run a snapshot
holds as it is goes cold; if some changed since, `checkpoint_locked` first writes the state to
a fresh snapshot file, an in-process compaction without the AOF: the writer copies the cold
nodes and runs as stored, the streams, lists and tables are bound to the new file, which is
unlinked at once (it stays readable while a value refers to it, as a compacted-away snapshot
does). So that the suites' values of a few hundred elements are chunked (in small chunks and
runs) as a big one is, `install` lowers the snapshot's chunking thresholds for the run.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from types import ModuleType

from streamkeep.engine.runtime import core
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.snapshot import value_formats, values
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.services.load import (
    bind_node_indexes,
    bind_table_indexes,
    node_indexes,
    noded_values,
    table_indexes,
    tabled_values,
)
from streamkeep.snapshot.writer import stream_numbers, write_snapshot

_names = itertools.count()


@functools.cache
def _directory() -> str:
    """Where the checkpoints are written (each unlinked at once): made on first use, removed
    when the test process ends (importing this module leaves nothing behind)."""
    path = tempfile.mkdtemp(prefix="streamkeep-cold-")
    atexit.register(shutil.rmtree, path, True)
    return path


def checkpoint_locked(engine: EngineCore) -> None:
    """Write the engine's state to a new snapshot and bind its streams, lists and tables to
    it (lock held)."""
    residency = engine.residency
    tick = residency.rotated()
    numbering = [(s, n) for n, _db, _key, s in stream_numbers(engine.dbs)]
    path = os.path.join(_directory(), f"cold-{os.getpid()}-{next(_names)}.mdb")
    write_snapshot(engine.dbs, path, 0, 0, "cold-nodes-test", checksum=False,
                   values=engine.keyspaces, expires=engine.expires)
    store = SnapshotNodes(path, tick)
    os.unlink(path)
    for s, number in numbering:
        residency.bind(s, store, number)
    bind_node_indexes(residency, node_indexes(store, noded_values(engine.keyspaces)),
                      store.clean_before)
    bind_table_indexes(residency, table_indexes(store, tabled_values(engine.keyspaces)))
    residency.switched(store)


def settle(engine: EngineCore) -> None:
    """Make every node cold (lock not held): evict, checkpoint what changed, evict again."""
    if engine.closed:
        return
    with engine.lock:
        residency = engine.residency
        if residency.budget != 1:
            residency.set_budget(1, engine.dbs)
            residency.on_pressure = None  # this mode checkpoints; no background compactions
        residency.evict()
        if residency.waiting or _unbound(engine):
            checkpoint_locked(engine)
            residency.evict()


def _unbound(engine: EngineCore) -> bool:
    """Whether a list or a table the snapshot would chunk is bound to no snapshot yet (a new
    one, or one a command replaced)."""
    keyspaces = engine.keyspaces
    return any(big[3].home is None and values.is_chunked(big[0], keyspaces[big[0].slot][big[1]][big[2]])
               for big in (*noded_values(keyspaces), *tabled_values(keyspaces)))


def _cut_small(chunked: int) -> dict[tuple[ModuleType, str], int]:
    """A value of more than `chunked` elements chunked, in chunks of 64 elements or 1 KiB, a
    table in runs of about 256 bytes; the thresholds before."""
    small = {(values, "CHUNKED_ELEMENTS"): chunked, (values, "CHUNK_ELEMENTS"): 64,
             (values, "CHUNK_BYTES"): 1 << 10, (value_formats, "TABLE_RUN_BYTES"): 256}
    before = {place: getattr(*place) for place in small}
    for (module, name), value in small.items():
        setattr(module, name, value)
    return before


@contextlib.contextmanager
def small_chunks(chunked: int) -> Iterator[None]:
    """Snapshots written in the block cut values of more than `chunked` elements small (see
    `_cut_small`), so that a few elements make a list's nodes or a table's runs go cold."""
    before = _cut_small(chunked)
    try:
        yield
    finally:
        for (module, name), value in before.items():
            setattr(module, name, value)


def install() -> None:
    """Settle every engine made from now on after every command it runs or batch of records it
    applies (the core's `after_commands` hook, which the compiled core calls too), with the
    snapshot's values of more than 128 elements (a list, hash or set past its small encoding)
    cut small."""
    _cut_small(128)
    core.after_commands = settle
