"""The cold-node test mode: engines that keep (nearly) no stream entry in memory.

`pytest --cold-nodes` (conftest) runs the differential and property suites this way, so that
nearly every command reads its entries back from a snapshot (engine.model.residency). After
every command an engine is *settled*: its budget is one byte, so every node a snapshot holds as
it is goes cold; if some changed since, `checkpoint_locked` first writes the state to a fresh
snapshot file, an in-process compaction without the AOF: the writer copies the cold nodes as
stored, the streams are bound to the new file, which is unlinked at once (it stays readable
while a stream refers to it, as a compacted-away snapshot does).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import shutil
import tempfile

from streamkeep.engine.runtime import core
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.snapshot.cold import SnapshotNodes
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
    """Write the engine's state to a new snapshot and bind its streams to it (lock held)."""
    residency = engine.residency
    tick = residency.rotated()
    numbering = [(s, n) for n, _db, _key, s in stream_numbers(engine.dbs)]
    path = os.path.join(_directory(), f"cold-{os.getpid()}-{next(_names)}.mdb")
    write_snapshot(engine.dbs, path, 0, 0, "cold-nodes-test")
    store = SnapshotNodes(path, tick)
    os.unlink(path)
    for s, number in numbering:
        residency.bind(s, store, number)
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
        if residency.waiting:
            checkpoint_locked(engine)
            residency.evict()


def install() -> None:
    """Settle every engine made from now on after every command it runs or batch of records it
    applies (the core's `after_commands` hook, which the compiled core calls too)."""
    core.after_commands = settle
