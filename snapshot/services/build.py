"""Building a snapshot in a separate process: previous snapshot + closed segments -> new file.

Owns the compactor's child process. It loads the previous snapshot into an in-memory engine
lazily (every node cold: the writer refers to the nodes nothing touched where they are, so the
cost follows what changed, not the backlog), replays the closed segments through the engine's
apply path (the same one restart and replicas use), and writes the result to temp files.

The child serves one job after another (`--serve`: a JSON job a line on stdin, a JSON result
a line on stdout) and keeps its engine between them: when the next job's base is the snapshot
it wrote last (the same file, published by the parent), it binds its streams to that file and
goes on from there instead of loading it again, so a compaction does not pay for reading the
whole backlog's node list each time. Its resident nodes are held to BUILD_BUDGET: those the
snapshot it wrote holds go cold. A big sorted set, hash, set or list (snapshot.values) is
resident in the child; where the snapshot holds its chunks is kept in a `ValueHomes` with the
keys the replayed effects name (`noting_changes`), so one nothing changed is referred to where
it is, not written again (and a changed list's chunks whose nodes did not change too). Any
failure forgets the engine (the next job loads afresh). It never renames, deletes or syncs
anything, and never touches the manifest: the parent does every step the directory's
consistency depends on, through its file-layer seam. It dies with its parent: the kernel kills
it when the parent goes (PR_SET_PDEATHSIG), and if the parent was already gone by the time it
could ask for that (Python's start-up takes a while), it exits before doing anything. It runs
in a session of its own and ignores SIGINT and SIGHUP: Ctrl-C and a hang-up are its parent's
to act on, never a traceback of this child's.

    python -m snapshot.services.build '{"dir": ..., "base": "snapshot-....mdb" | null,
                               "segments": [["segment-000003.aof", 3, 1201], ...],
                               "lsn": 1500, "out": "snapshot-....mdb.tmp",
                               "part_out": "part-....mdb.tmp" | absent,
                               "repl_id": ..., "created_ms": ..., "parent": <pid>,
                               "config": {"stream-node-max-entries": 100, ...},
                               "table_seed": <hex> | absent}'

With `part_out` the snapshot is segmented (snapshot.writer.write_segmented): the nodes it must
write go into that part file, the others stay in the part files it refers to. Exit status 0
when the files are complete, and on stdout a JSON object: `parts`, the part files the snapshot
refers to (their final names, in its order), and `new_part`, whether `part_out` was written;
otherwise a message on stderr. With `--serve`, each job's result line is that object with
`ok` true, or `{"ok": false, "error": ...}`, and the child waits for the next job. A job
with `"progress": true` is also told about while it runs, by lines before its result, at most
one every PROGRESS_EVERY_S and one when the files are written: `{"progress": {"phase": "replay" | "write", "records": n,
"nodes": n}}` (records replayed, nodes written so far; INFO persistence shows them). (The whole-file checksums are the parent's to compute, while it
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
import time
from collections.abc import Iterable, Iterator
from typing import Any

from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentError, SegmentReader
from streamkeep.engine.exec.functions import functions_payload
from streamkeep.engine.exec.table import lookup
from streamkeep.engine.model.bucket_table import use_process_seed
from streamkeep.engine.runtime.core import EngineCore
from streamkeep.engine.wire.errors import ReplyError, StorageError
from streamkeep.snapshot.cold import SnapshotNodes
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.values import ValueHomes
from streamkeep.snapshot.writer import (
    put_functions,
    stream_numbers,
    write_segmented,
    write_snapshot,
)

_PR_SET_PDEATHSIG = 1
PROGRESS_EVERY_S = 0.5
BUILD_BUDGET = 16 << 20  # bytes of resident nodes a serving child keeps between jobs


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


def _leave_signals_to_parent() -> None:
    """Ctrl-C and a hang-up are the parent's to act on (it stops this child when it closes
    the engine): were one sent to this child too (`kill -INT` of a process group it shares),
    it would not end it in a traceback. (SIGTERM ends it quietly, as by default.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


class Builder:
    """A serving child's engine between jobs: the state of the snapshot it wrote last, and
    how to recognise that file once the parent has published it."""

    def __init__(self) -> None:
        self.engine: EngineCore | None = None
        self.config: dict | None = None
        self.written: tuple[str, int, int] | None = None  # (name, st_dev, st_ino) once renamed
        self.lsn = 0
        self.tick = 0  # nodes changed before it are in that snapshot
        self.homes = ValueHomes()  # where that snapshot's chunked values are

    def run(self, job: dict) -> dict:
        try:
            return self._run(job)
        except BaseException:
            self.engine = self.written = None  # a state half replayed: load afresh next time
            raise

    def _run(self, job: dict) -> dict:
        engine, expected = self._base(job)
        result = build(job, engine, expected, self.homes)
        self.tick = engine.residency.rotated()  # what the files hold, from here back
        out = os.path.join(job["dir"], job["out"])
        st = os.stat(out)
        self.written = (job["out"].removesuffix(".tmp"), st.st_dev, st.st_ino)
        self.engine, self.config, self.lsn = engine, job.get("config", {}), job["lsn"]
        return result

    def _base(self, job: dict) -> tuple[EngineCore, int]:
        """The engine to replay into and the LSN it expects next: the one kept, bound to the
        snapshot it wrote, when that is the job's base; else a fresh one, the base loaded."""
        directory, base = job["dir"], job["base"]
        engine, written = self.engine, self.written
        if engine is not None and written is not None and base == written[0] \
                and job.get("config", {}) == self.config:
            with contextlib.suppress(OSError):
                st = os.stat(os.path.join(directory, base))
                if (st.st_dev, st.st_ino) == written[1:]:
                    self._bind(engine, os.path.join(directory, base))
                    return engine, self.lsn + 1
        self.engine = self.written = None
        self.homes = ValueHomes()
        engine, expected = load_base(job, self.homes)
        engine.residency.set_budget(BUILD_BUDGET, engine.dbs)
        return engine, expected

    def _bind(self, engine: EngineCore, path: str) -> None:
        """The streams are those of the snapshot at `path` (which this child wrote): read
        their cold nodes from it, and let the nodes it holds as they are go cold."""
        store = SnapshotNodes(path, self.tick)
        residency = engine.residency
        for number, _db, _key, stream in stream_numbers(engine.dbs):
            residency.bind(stream, store, number)
        residency.switched(store)
        residency.evict()


def load_base(job: dict, homes: ValueHomes | None = None) -> tuple[EngineCore, int]:
    """A fresh engine holding the job's base snapshot (loaded lazily), and the LSN the
    segments must start at; where its chunked values are goes into `homes`."""
    # The node limits shape how replayed XADDs fill nodes: use the parent's.
    engine = EngineCore(clock=lambda: 0, **job.get("config", {}))
    if job["base"] is None:
        return engine, 1
    meta = load_snapshot(engine, os.path.join(job["dir"], job["base"]), lazy=True,
                         homes=homes)
    return engine, meta.lsn + 1


_EVERY_KEY = frozenset((b"flushdb", b"flushall", b"swapdb"))


def noting_changes(records: Iterable[Any], homes: ValueHomes) -> Iterator[Any]:
    """`records` as they are, the keys their effects change noted in `homes` (a chunked value
    whose key none names is left where the snapshot holds it). Conservative: a key is noted
    whatever its database, and an effect whose changes cannot be told by its key positions
    (FLUSHDB, FLUSHALL, one the table does not know) counts as changing every key."""
    for record in records:
        if homes.homes and not homes.everything:
            _note_effects(homes, record[3])
        yield record


def _note_effects(homes: ValueHomes, effects: Iterable[Any]) -> None:
    for effect in effects:
        name = bytes(effect[0]).lower()
        if name == b"select":
            continue
        if name in _EVERY_KEY:
            homes.touch_all()
            return
        try:
            spec = lookup(tuple(effect), allow_internal=True)
        except ReplyError:
            homes.touch_all()
            return
        first, last, step = spec.first_key, spec.last_key, spec.key_step
        if first <= 0:
            if name != b"function":  # (libraries, not keys)
                homes.touch_all()
                return
            continue
        end = len(effect) - 1 if last < 0 else min(last, len(effect) - 1)
        for i in range(first, end + 1, step or 1):
            homes.touch(bytes(effect[i]))


class Progress:
    """A job's progress lines on stdout (see the module docstring), when it asked for them."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.phase = "replay"
        self.records = 0
        self.nodes = 0
        self.last = time.monotonic()

    def counted(self, records: Iterable[Any]) -> Iterator[Any]:
        """`records` as they are, counted."""
        for record in records:
            yield record
            self.records += 1
            if not self.records & 1023:
                self.report()

    def node(self) -> None:
        self.phase = "write"
        self.nodes += 1
        if not self.nodes & 63:
            self.report()

    def report(self, last: bool = False) -> None:
        now = time.monotonic()
        if self.enabled and (last or now - self.last >= PROGRESS_EVERY_S):
            self.last = now
            print(json.dumps({"progress": {"phase": self.phase, "records": self.records,
                                           "nodes": self.nodes}}), flush=True)


def build(job: dict, engine: EngineCore | None = None, expected: int = 1,
          homes: ValueHomes | None = None) -> dict:
    """Replay the job's inputs and write its snapshot; returns the part files it refers to
    (`parts`, names in its order) and whether it wrote a new one (`new_part`). `engine`: one
    holding the state up to LSN `expected` - 1 already (default: the base, loaded here);
    `homes`: where that state's chunked values are in the base (updated to the new
    snapshot's)."""
    fs = RealFS()
    directory = job["dir"]
    if job.get("table_seed"):  # the parent's: tables made by replay are placed as its are
        use_process_seed(bytes.fromhex(job["table_seed"]))
    progress = Progress(bool(job.get("progress")))
    if homes is None:
        homes = ValueHomes()
    if engine is None:
        engine, expected = load_base(job, homes)
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
        engine.replay.apply_many(progress.counted(noting_changes(reader.records(), homes)))
        if reader.damage is not None:
            raise BuildError(f"{reader.damage} in a closed segment")
        expected += reader.count
    if expected - 1 != job["lsn"]:
        raise BuildError(f"the segments end at LSN {expected - 1}, not {job['lsn']}")
    part_out = job.get("part_out")
    if part_out is None:  # a self-contained snapshot
        write_snapshot(engine.dbs, os.path.join(directory, job["out"]), job["lsn"],
                       job["created_ms"], job["repl_id"], checksum=False,
                       values=engine.keyspaces, expires=engine.expires)
        _put_functions(engine, os.path.join(directory, job["out"]))
        homes.replace({})  # (its chunks are in that file, which no later snapshot keeps)
        progress.report(last=True)
        return {"parts": [], "new_part": False}
    written = write_segmented(engine.dbs, os.path.join(directory, job["out"]),
                              os.path.join(directory, part_out), job["lsn"], job["created_ms"],
                              job["repl_id"], values=engine.keyspaces, expires=engine.expires,
                              part_name=part_out.removesuffix(".tmp"), on_node=progress.node,
                              homes=homes)
    homes.replace(written.homes)
    _put_functions(engine, os.path.join(directory, job["out"]))
    progress.report(last=True)  # the counts whole, before the result
    return {"parts": written.parts, "new_part": written.new_part}


def _put_functions(engine: EngineCore, path: str) -> None:
    """The engine's function libraries, if it has any, into the snapshot just written."""
    payload = functions_payload(engine)
    if payload is not None:
        put_functions(path, payload)


def serve(parent: int | None) -> int:
    """Jobs from stdin, a line each, until it closes; a result line for each on stdout."""
    if not _die_with_parent(parent):
        return 1
    _leave_signals_to_parent()
    builder = Builder()
    for line in sys.stdin:
        try:
            job = json.loads(line)
            result = {"ok": True, **builder.run(job)}
        except ValueError as err:
            result = {"ok": False, "error": f"bad job: {err}"}
        except (StorageError, OSError) as err:  # a damaged base snapshot included
            result = {"ok": False, "error": str(err)}
        except Exception as err:  # a bug: the parent reports it; this child goes on
            result = {"ok": False, "error": f"internal error: {err!r}"}
        print(json.dumps(result), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--serve"]:
        return serve(int(argv[2]) if len(argv) > 2 else None)
    try:
        job = json.loads(argv[1])
    except ValueError as err:
        print(f"snapshot build failed: bad job: {err}", file=sys.stderr)
        return 1
    if not _die_with_parent(job.get("parent")):
        print("snapshot build failed: the parent process is gone", file=sys.stderr)
        return 1
    _leave_signals_to_parent()
    try:
        result = build(job)
    except (StorageError, OSError, ValueError) as err:  # a damaged base snapshot included
        print(f"snapshot build failed: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result))  # what the parent names in the manifest
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
