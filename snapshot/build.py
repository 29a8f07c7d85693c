"""Building a snapshot in a separate process: previous snapshot + closed segments -> new file.

Owns the compactor's child process. It loads the previous snapshot into a fresh in-memory
engine lazily (every node cold: the writer copies the nodes nothing touched as they are stored,
so the cost follows what changed, not the backlog), replays the closed segments through the engine's apply path (the same one restart and
replicas use), and writes the result to a temp file. It never renames, deletes or syncs
anything, and never touches the manifest: the parent does every step the directory's
consistency depends on, through its file-layer seam. It dies with its parent: the kernel kills
it when the parent goes (PR_SET_PDEATHSIG), and if the parent was already gone by the time it
could ask for that (Python's start-up takes a while), it exits before doing anything.

    python -m snapshot.build '{"dir": ..., "base": "snapshot-....mdb" | null,
                               "segments": [["segment-000003.aof", 3, 1201], ...],
                               "lsn": 1500, "out": "snapshot-....mdb.tmp",
                               "part_out": "part-....mdb.tmp" | absent,
                               "repl_id": ..., "created_ms": ..., "parent": <pid>,
                               "config": {"stream-node-max-entries": 100, ...}}'

With `part_out` the snapshot is segmented (snapshot.writer.write_segmented): the nodes it must
write go into that part file, the others stay in the part files it refers to. Exit status 0
when the files are complete, and on stdout a JSON object: `parts`, the part files the snapshot
refers to (their final names, in its order), and `new_part`, whether `part_out` was written;
otherwise a message on stderr. (The whole-file checksums are the parent's to compute, while it
fsyncs the files.)
Must not touch: the manifest, any file but `out` and `part_out`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys

from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentError, SegmentReader
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot.load import load_snapshot
from streamkeep.snapshot.writer import write_segmented, write_snapshot

_PR_SET_PDEATHSIG = 1


class BuildError(StorageError):
    """The inputs are not what the parent said they are."""


def _die_with_parent(parent: int | None) -> bool:
    """Ask the kernel to SIGKILL us when the parent dies: a compaction outliving its engine
    would keep writing a file the next opener deletes (or that the next opener's own compaction
    of the same LSN is writing). False if the parent is already gone: the request came too late
    to cover that, and we have been re-parented."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the parent kills us
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    return parent is None or os.getppid() == parent


def build(job: dict) -> dict:
    """Replay the job's inputs and write its snapshot; returns the part files it refers to
    (`parts`, names in its order) and whether it wrote a new one (`new_part`)."""
    fs = RealFS()
    directory = job["dir"]
    # The node limits shape how replayed XADDs fill nodes: use the parent's.
    engine = EngineCore(clock=lambda: 0, **job.get("config", {}))
    expected = 1
    if job["base"] is not None:
        meta = load_snapshot(engine, os.path.join(directory, job["base"]), lazy=True)
        expected = meta.lsn + 1
    for name, number, first_lsn in job["segments"]:
        path = os.path.join(directory, name)
        try:
            reader = SegmentReader(fs, path, number, first_lsn)
        except SegmentError as err:
            raise BuildError(str(err)) from None
        if first_lsn != expected:
            raise BuildError(f"{path}: starts at LSN {first_lsn}, expected {expected}")
        # Applied while decoded, as at open; damage anywhere fails the build (the engine and
        # whatever it applied are thrown away with this process).
        engine.apply_many(reader.records())
        if reader.damage is not None:
            raise BuildError(f"{reader.damage} in a closed segment")
        expected += reader.count
    if expected - 1 != job["lsn"]:
        raise BuildError(f"the segments end at LSN {expected - 1}, not {job['lsn']}")
    part_out = job.get("part_out")
    if part_out is None:  # a self-contained snapshot
        write_snapshot(engine.dbs, os.path.join(directory, job["out"]), job["lsn"],
                       job["created_ms"], job["repl_id"], checksum=False,
                       strings=engine.strings, expires=engine.expires)
        return {"parts": [], "new_part": False}
    written = write_segmented(engine.dbs, os.path.join(directory, job["out"]),
                              os.path.join(directory, part_out), job["lsn"], job["created_ms"],
                              job["repl_id"], strings=engine.strings, expires=engine.expires,
                              part_name=part_out.removesuffix(".tmp"))
    return {"parts": written.parts, "new_part": written.new_part}


def main(argv: list[str]) -> int:
    try:
        job = json.loads(argv[1])
    except ValueError as err:
        print(f"snapshot build failed: bad job: {err}", file=sys.stderr)
        return 1
    if not _die_with_parent(job.get("parent")):
        print("snapshot build failed: the parent process is gone", file=sys.stderr)
        return 1
    try:
        result = build(job)
    except (StorageError, OSError, ValueError) as err:  # a damaged base snapshot included
        print(f"snapshot build failed: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result))  # what the parent names in the manifest
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
