"""Background compaction (snapshot.services.compactor): real processes, real files, no mocks.

* On demand: `compact(wait=True)` after the mixed workload of tests/support/aof_workload.py
  leaves LOCK, manifest.json, exactly one snapshot and only the segments after it, all named by
  the manifest; the reopened state is the same; a compaction with nothing new is a no-op; the next
  compaction removes the previous snapshot.
* Writes during compaction (threads doing XADD/XREADGROUP/XACK while compactions run, waited
  for and not): every acknowledged write is there after reopen, LSNs continue, `*` IDs keep
  growing even with a clock that went back.
* The automatic trigger (auto-aof-rewrite-min-size / -percentage): a steady XADD+MAXLEN
  workload keeps the directory's size bounded over many compactions; percentage 0 turns it off;
  it fires exactly when the AOF written since the snapshot reaches
  max(min-size, percentage% of the snapshot), so 400 compacts later than 100.
* After close(), compact() is refused; close() while a build runs is not an error.
* A trigger whose compaction cannot start (no thread can be started) is a failed compaction,
  not the writing thread's error: under `always` it fires on the group-commit thread, which
  goes on, and the journal keeps taking writes; the next compaction runs.
* The build child is in a session of its own (a terminal's Ctrl-C reaches the engine's process
  alone, which stops the child), and dies with that process (SIGKILLed: no child left).

Failures, crashes, damage and power loss during a compaction: tests/crash/test_compaction.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
import types
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.manifest import segment_file, snapshot_file
from streamkeep.engine.model import packed_node
from streamkeep.snapshot import layout
from streamkeep.snapshot.reader import Snapshot
from streamkeep.snapshot.services import compactor as compactor_mod
from streamkeep.snapshot.services.compactor import CompactionError
from tests.support import v3_snapshot as v3
from tests.support.aof_workload import FakeClock, reference
from tests.support.aof_workload import run as run_workload
from tests.support.datadir import (
    assert_tidy,
    fingerprint,
    listing,
    manifest_doc,
    open_dir,
    reopen_digest,
)
from tests.support.pids import wait_gone

SEED = 5


# --- helpers -------------------------------------------------------------------------------------

def disk_bytes(d: Path, written_end: tuple[int, int] | None = None) -> int:
    """The bytes of the directory's snapshots and segments; with the journal's `written_end`
    (segment, size), the segment being written counts what was written to it, not the space
    its mapped tail allocated ahead."""
    total = 0
    for name in os.listdir(d):
        if name.startswith(("snapshot-", "segment-")):
            if written_end is not None and name == segment_file(written_end[0]):
                total += written_end[1]
                continue
            with contextlib.suppress(FileNotFoundError):  # removed by a compaction meanwhile
                total += (d / name).stat().st_size
    return total


# --- 1. on demand ---------------------------------------------------------------------------------

def test_compact_on_demand(tmp_path: Path) -> None:
    d = tmp_path / "d"
    clock = FakeClock()
    engine = open_dir(d, clock)
    run_workload(engine, clock, SEED, 0, 600)
    before = sorted(n for n in listing(d) if n.startswith("segment-"))
    assert len(before) > 5, "the workload was meant to rotate a few times"
    repl_id = manifest_doc(d)["repl_id"]
    lsn = engine.journal.lsn
    digest = engine.digest()
    assert digest == reference(SEED, [600])[600]

    entry = engine.compact(wait=True)
    assert entry is not None
    assert (entry.file, entry.lsn) == (snapshot_file(lsn), lsn)
    assert entry.size == (d / entry.file).stat().st_size
    assert engine.datadir.compactor.runs == 1
    assert engine.datadir.compactor.last_status == "ok"
    doc = assert_tidy(d)
    assert [n for n in listing(d) if n.startswith("snapshot-")] == [entry.file]
    (part,) = entry.parts  # the first compaction: every node in its new part file
    assert part.file == f"part-{lsn:012d}.mdb"
    assert doc["snapshot"] == {"file": entry.file, "lsn": lsn, "size": entry.size,
                               "created_ms": entry.created_ms, "crc32": entry.crc32,
                               "parts": [{"file": part.file, "size": part.size,
                                          "crc32": part.crc32}]}
    assert entry.crc32 == zlib.crc32((d / entry.file).read_bytes())  # the file as written
    assert (part.size, part.crc32) == ((d / part.file).stat().st_size,
                                       zlib.crc32((d / part.file).read_bytes()))
    assert doc["repl_id"] == repl_id
    segments = [s["file"] for s in doc["segments"]]
    assert segments == sorted(n for n in listing(d) if n.startswith("segment-"))
    # Only the current segment may stay (when it held no record: then it was not rotated).
    assert set(segments) & set(before) <= {before[-1]}, "a compacted segment is still named"
    assert doc["segments"][0]["first_lsn"] == lsn + 1
    with Snapshot(str(d / entry.file)) as snap:
        assert (snap.meta.lsn, snap.meta.repl_id) == (lsn, repl_id)
    assert engine.digest() == digest

    # Nothing written since: nothing to do, nothing touched.
    still = fingerprint(d)
    assert engine.compact(wait=True) is None
    assert fingerprint(d) == still
    assert engine.datadir.compactor.runs == 1
    engine.close()
    assert reopen_digest(d) == (digest, lsn)

    # Writes, then a second compaction: it replaces the first snapshot.
    engine = open_dir(d, clock)
    run_workload(engine, clock, SEED, 600, 900)
    second = engine.compact(wait=True)
    assert second is not None and second.lsn == engine.journal.lsn > lsn
    assert not (d / entry.file).exists()
    assert [n for n in listing(d) if n.startswith("snapshot-")] == [second.file]
    assert_tidy(d)
    digest = engine.digest()
    assert digest == reference(SEED, [900])[900]
    engine.close()
    assert reopen_digest(d) == (digest, second.lsn)


# --- 2. writes during compaction ---------------------------------------------------------------

def test_writes_during_compaction(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine = Engine.open(str(d), appendfsync="everysec", aof_segment_max_bytes=4096,
                         auto_aof_rewrite_percentage=0)  # the real clock
    compactor = engine.datadir.compactor
    keys = [f"s{i}" for i in range(3)]
    for key in keys:
        engine.execute("XGROUP", "CREATE", key, "g", "$", "MKSTREAM")
    stop = threading.Event()
    added: dict[str, list[bytes]] = {k: [] for k in keys}
    acked: dict[str, set[bytes]] = {k: set() for k in keys}
    during = [0]  # writes acknowledged while a compaction was running
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            while not stop.is_set():
                key = rng.choice(keys)
                sid = engine.execute("XADD", key, "*", "w", str(n), "v", "x" * rng.randint(0, 80))
                added[key].append(sid)
                reply = engine.execute("XREADGROUP", "GROUP", "g", f"c{n}", "COUNT", "3",
                                       "STREAMS", key, ">")
                if reply:
                    ids = [e[0] for e in reply[0][1]]
                    ids = ids[: rng.randint(0, len(ids))]
                    if ids:
                        assert engine.execute("XACK", key, "g", *ids) == len(ids)
                        acked[key].update(ids)
                if compactor.job is not None:
                    during[0] += 1
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    writers = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in writers:
        t.start()
    results: list[object] = []

    def compactions() -> None:
        try:
            for _ in range(3):
                time.sleep(0.15)
                results.append(engine.compact(wait=True))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    waiter = threading.Thread(target=compactions)
    waiter.start()
    waiter.join(60)
    # One more without waiting; the writers go on meanwhile.
    assert engine.compact(wait=False) is None
    job = compactor.job
    time.sleep(0.2)
    stop.set()
    for t in writers:
        t.join(30)
    if job is not None:
        assert job.done.wait(30)
    assert not errors, errors
    assert len(results) == 3 and all(r is not None for r in results), results
    lsns = [r.lsn for r in results]  # type: ignore[attr-defined]
    assert lsns == sorted(set(lsns))
    assert compactor.runs >= 3 and compactor.last_status == "ok"
    assert during[0] > 20, "the writers were meant to run while compactions did"
    assert sum(map(len, added.values())) > 200
    assert_tidy(d)
    digest, lsn = engine.digest(), engine.journal.lsn
    # Writer threads append the IDs they got in any order: compare as IDs.
    def as_id(sid: bytes) -> tuple[int, int]:
        ms, seq = sid.split(b"-")
        return int(ms), int(seq)

    last_ids = {k: max(map(as_id, added[k])) for k in keys}  # only XADDs: the max is the top
    engine.close()

    # A clock far behind the IDs written: `*` must still go on from each stream's last ID.
    with Engine.open(str(d), auto_aof_rewrite_percentage=0, clock=FakeClock(1000)) as engine:
        assert engine.digest() == digest
        assert engine.journal.lsn == lsn
        for key in keys:
            entries = engine.execute("XRANGE", key, "-", "+")
            assert [e[0] for e in entries] == sorted(added[key], key=as_id), (
                f"{key}: acknowledged XADDs lost")
            pending = {p[0] for p in engine.execute("XPENDING", key, "g", "-", "+", "100000")}
            assert not pending & acked[key], f"{key}: acknowledged XACKs lost"
            new = engine.execute("XADD", key, "*", "after", "reopen")
            last_ms, last_seq = last_ids[key]
            assert as_id(new) == (last_ms, last_seq + 1)
        assert engine.journal.lsn == lsn + len(keys)  # LSNs continue without a gap
        digest = engine.digest()
    assert reopen_digest(d) == (digest, lsn + len(keys))


# --- 3. the automatic trigger ---------------------------------------------------------------

VALUE = "v" * 1000  # records of about 1.05 KB


@dataclass
class AutoRun:
    written: int = 0  # AOF bytes the workload wrote
    samples: list[int] = field(default_factory=list)  # on-disk sizes (snapshots + segments)
    most_snapshots: int = 0
    triggers: list[tuple[int, float]] = field(default_factory=list)  # (AOF bytes, threshold)
    # per compaction: (bytes written from its rotation to its end, AOF bytes left after it)
    compactions: list[tuple[int, int]] = field(default_factory=list)
    snapshot_sizes: list[int] = field(default_factory=list)
    runs: int = 0


def auto_workload(d: Path, min_size: object, percentage: object, *, budget: int,
                  rate: int = 0, min_runs: int = 0) -> AutoRun:
    """XADD MAXLEN = 10 of ~1 KB records on two keys until `budget` AOF bytes: at about `rate`
    a second, writes going on during compactions; or (no rate) each compaction waited for
    before the next write, so that each trigger is seen exactly where it fired. With
    `min_runs`, writing goes on past the budget (up to 20 times it) until that many
    compactions ran: paced by the clock, a run on a busy machine, where a compaction takes
    longer, would otherwise see fewer of them. (A run ends by what it wrote and what ran,
    never by the clock: on a busy machine it only takes longer.)"""
    out = AutoRun()
    engine = Engine.open(str(d), appendfsync="no", aof_segment_max_bytes=32 << 10,
                         auto_aof_rewrite_min_size=min_size,
                         auto_aof_rewrite_percentage=percentage)
    journal, compactor = engine.journal, engine.datadir.compactor
    trigger = journal.on_rewrite
    written = [0]
    at_rotation = [0]

    def observed() -> None:  # the real trigger, recording when it fired
        out.triggers.append((journal.aof_bytes, compactor.threshold()))
        at_rotation[0] = written[0]  # it rotates now, in this append
        trigger()

    def on_step(name: str) -> None:
        if name == "removed":
            with engine.lock:
                out.compactions.append((written[0] - at_rotation[0], journal.aof_bytes))
                out.snapshot_sizes.append(compactor.snapshot_size)

    journal.on_rewrite = observed
    compactor.on_step = on_step
    start = time.monotonic()
    i = 0
    while written[0] < budget or (compactor.runs < min_runs and written[0] < 20 * budget):
        if rate and i > (time.monotonic() - start) * rate:
            time.sleep(0.002)
            continue
        with engine.lock:
            before = journal.aof_bytes
        engine.execute("XADD", f"k{i % 2}", "MAXLEN", "=", "10", "*", "f", VALUE)
        with engine.lock:  # (a compaction's removal may run in between: count what grew)
            written[0] += max(journal.aof_bytes - before, 0)
        i += 1
        if not rate and (job := compactor.job) is not None:
            job.done.wait()
        if i % 20 == 0:
            with engine.lock:  # (no rotation while the files are looked at)
                out.samples.append(disk_bytes(d, journal.written_end))
            out.most_snapshots = max(out.most_snapshots, sum(
                n.startswith("snapshot-") for n in os.listdir(d)))
    if (job := compactor.job) is not None:
        job.done.wait()
    out.written, out.runs = written[0], compactor.runs
    assert compactor.last_status == "ok", compactor.last_error
    engine.close()
    assert_tidy(d)
    return out


@pytest.mark.parametrize("min_size", ["64kb", 64 << 10])
def test_auto_compaction_keeps_the_directory_bounded(tmp_path: Path, min_size: object) -> None:
    run = auto_workload(tmp_path / "d", min_size, 100, budget=1_500_000, rate=1000, min_runs=3)
    assert run.runs >= 3 and len(run.compactions) == run.runs, run.compactions
    assert run.triggers[0][1] == 64 << 10  # no snapshot yet: the min size alone
    assert run.most_snapshots <= 2  # the named one, and the one being built or published
    # Each compaction leaves only what was written while it ran (plus segment headers).
    for during, left in run.compactions:
        assert left <= during + 8 * 1024, run.compactions
    # So the directory never holds more than two snapshots, one threshold's worth of AOF and
    # what two compactions in a row saw written meanwhile: not a function of the total.
    snapshot = max(run.snapshot_sizes)
    threshold = max(64 << 10, snapshot)
    most_during = max(d for d, _ in run.compactions)
    bound = 2 * snapshot + threshold + 2 * most_during + (96 << 10)
    assert max(run.samples) <= bound, (max(run.samples), bound, run.compactions)
    assert max(run.samples) < run.written, "compaction does not keep the directory bounded"


def test_auto_compaction_off_with_percentage_zero(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine = Engine.open(str(d), appendfsync="no", aof_segment_max_bytes=32 << 10,
                         auto_aof_rewrite_min_size="64kb", auto_aof_rewrite_percentage=0)
    for i in range(400):
        engine.execute("XADD", f"k{i % 2}", "MAXLEN", "=", "10", "*", "f", VALUE)
    assert engine.journal.aof_bytes > 6 * (64 << 10)
    assert engine.journal.rewrite_at == float("inf")
    assert engine.datadir.compactor.runs == 0 and engine.datadir.compactor.job is None
    engine.close()
    assert not [n for n in listing(d) if n.startswith("snapshot-")]
    for bad in ({"auto_aof_rewrite_percentage": -1}, {"auto_aof_rewrite_min_size": "lots"},
                {"auto_aof_rewrite_min_size": -5}):
        with pytest.raises(ValueError):
            Engine.open(str(tmp_path / "e"), **bad)
    assert not (tmp_path / "e").exists(), "bad options must be refused before touching it"


def test_auto_compaction_percentage_rule(tmp_path: Path) -> None:
    """The trigger fires at the write that takes the AOF written since the snapshot to
    max(min-size, percentage% of the snapshot's size): 400 compacts later than 100."""
    runs = {}
    for pct in (100, 400):
        run = auto_workload(tmp_path / f"p{pct}", "64kb", pct, budget=1200 << 10)
        assert run.runs == len(run.triggers) >= 2, (run.runs, run.triggers)
        for n, (aof_bytes, threshold) in enumerate(run.triggers):
            if n == 0:
                assert threshold == 64 << 10
            else:  # the snapshot before it (its file and parts): ~110 KB, so pct matters
                snapshot = run.snapshot_sizes[n - 1]
                assert threshold == max(64 << 10, snapshot * pct / 100)
            # Fired at the record that crossed it (one record of ~1.1 KB plus a header).
            assert threshold <= aof_bytes < threshold + 1100 + 64, (aof_bytes, threshold)
        runs[pct] = run.runs
    assert runs[400] < runs[100], runs


def test_threshold_follows_the_snapshot_size(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine = Engine.open(str(d), appendfsync="no", auto_aof_rewrite_min_size=1000,
                         auto_aof_rewrite_percentage=250)
    compactor = engine.datadir.compactor
    assert compactor.threshold() == 1000 == engine.journal.rewrite_at
    engine.execute("XADD", "k", "*", "f", "v")
    assert engine.compact(wait=True) is not None
    size = compactor.snapshot_size
    snap = manifest_doc(d)["snapshot"]  # its own file and its parts
    files = [snap["file"], *(part["file"] for part in snap["parts"])]
    assert size == sum((d / name).stat().st_size for name in files) > 1000
    assert compactor.threshold() == size * 2.5 == engine.journal.rewrite_at
    engine.close()
    with Engine.open(str(d), auto_aof_rewrite_min_size=1000,
                     auto_aof_rewrite_percentage=250) as engine:
        assert engine.datadir.compactor.threshold() == size * 2.5  # from the manifest
        assert engine.journal.rewrite_at == size * 2.5


def test_compact_after_close_is_refused_and_close_during_a_build_is_not_an_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="streamkeep.snapshot")
    engine = Engine.open(str(tmp_path / "db"))
    for i in range(2000):
        engine.execute("XADD", "s", "*", "f", str(i))
    engine.compact(wait=False)
    engine.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert engine.datadir is not None and engine.datadir.compactor.last_status == "ok"
    with pytest.raises(CompactionError, match="closed"):
        engine.compact(wait=True)
    with pytest.raises(ValueError, match="data directory"):
        Engine().compact()


class _NoThreads:
    """What `threading.Thread` is once the process can start no more threads."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def start(self) -> None:
        raise RuntimeError("can't start new thread")


def test_a_trigger_whose_compaction_cannot_start_fails_no_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The auto trigger fires on the thread that wrote the record: under `always` the
    group-commit thread. A compaction that cannot start there is a failed compaction (INFO's
    status, the trigger re-armed), not that thread's error: the writes go on, and once threads
    can be started again the next compaction runs."""
    before = set(threading.enumerate())
    with Engine.open(str(tmp_path / "d"), appendfsync="always",
                     auto_aof_rewrite_min_size=4096) as engine:
        journal, compactor = engine.journal, engine.datadir.compactor
        (commit,) = [t for t in threading.enumerate()
                     if t not in before and t.name == "aof-group-commit"]
        monkeypatch.setattr(compactor_mod, "threading", types.SimpleNamespace(Thread=_NoThreads))
        writes = 0
        while compactor.last_status == "ok":  # until the trigger fired
            engine.execute("XADD", "s", "*", "f", "v" * 100)
            writes += 1
            assert writes < 1000, "the trigger never fired"
        monkeypatch.undo()
        assert compactor.job is None and "can't start new thread" in str(compactor.last_error)
        assert journal.rewrite_at > journal.aof_bytes  # re-armed: not on every write now
        assert commit.is_alive() and journal.error is None and not journal.fsync_failed
        engine.execute("XADD", "s", "*", "f", "after")
        assert engine.execute("XLEN", "s") == writes + 1
        assert engine.compact(wait=True) is not None
        assert compactor.last_status == "ok"


def test_the_build_child_is_in_a_session_of_its_own(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "db")) as engine:
        engine.execute("XADD", "s", "*", "f", "v")
        engine.compact(wait=True)
        assert engine.datadir is not None
        child = engine.datadir.compactor._child
        assert child is not None and child.poll() is None
        assert os.getsid(child.pid) == child.pid != os.getsid(0)
        assert os.getpgid(child.pid) != os.getpgid(0)
    assert child.poll() is not None  # closing the engine stopped it


def test_the_build_child_dies_with_a_killed_process(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from streamkeep.snapshot.integrity import child_env

    script = ("import sys, os; from streamkeep import Engine\n"
              "e = Engine.open(sys.argv[1]); e.execute('XADD', 's', '*', 'f', 'v')\n"
              "e.compact(wait=True); print(e.datadir.compactor._child.pid, flush=True)\n"
              "sys.stdin.read()\n")
    app = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "db")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                           env=child_env())
    assert app.stdout is not None
    child = int(app.stdout.readline())
    os.kill(app.pid, signal.SIGKILL)
    app.wait()
    wait_gone(child, 20.0)


def test_a_lazily_loaded_format_3_state_compacts_to_packed_nodes(tmp_path: Path) -> None:
    """Its cold nodes are packed as the compaction copies them: the new file is format 4,
    every node a valid listpack, it reads as the old one did, restarts (eagerly and lazily) to
    the same state, and goes on from there."""
    want = v3.want()
    d = tmp_path / "data"
    new = v3.compacted(d, want)
    with Snapshot(new) as snap:
        assert snap.meta.version == layout.SEGMENTED_VERSION and snap.packed
        for info in snap.streams():
            for master, lp, count, live in snap.node_buffers(info.number):
                assert packed_node.validate(lp, master)[:2] == (count, live)
    assert v3.read_api(new) == v3.read_api(str(v3.V3))
    with v3.opened(d, want) as engine:
        v3.same(engine, want)
    with v3.opened(d, want, backlog_memory="2kb") as engine:
        v3.same(engine, want)
        engine.execute("XADD", "orders", "*", "after", "v4")
        engine.execute("XDEL", "logs", engine.execute("XRANGE", "logs", "-", "+")[3][0])
        engine.compact()
        digest = engine.digest()
    with v3.opened(d, want, backlog_memory="2kb") as engine:
        assert engine.digest() == digest


def test_info_persistence_shows_a_compactions_phase_and_nodes_written(tmp_path: Path) -> None:
    """While a compaction runs, INFO persistence says where it is: its phase, the records its
    build replayed and the nodes it wrote (the build child's progress lines); none after."""
    def persistence(engine: Engine) -> dict[str, str]:
        text = engine.execute("INFO", "persistence").decode()
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)

    seen: dict[str, dict[str, str]] = {}
    with Engine.open(str(tmp_path / "d"), appendfsync="no",
                     auto_aof_rewrite_percentage=0) as engine:
        for i in range(3000):
            engine.execute("XADD", f"s{i % 3}", "*", "f", str(i))
        assert persistence(engine)["compaction_phase"] == "none"

        def on_step(name: str) -> None:
            seen[name] = persistence(engine)

        engine.datadir.compactor.on_step = on_step
        engine.compact(wait=True)
        after = persistence(engine)
    assert seen["rotated"]["compaction_phase"] == "replay"
    built = seen["built"]  # the files written: the child's last counts came before its result
    assert built["compaction_phase"] == "publish"
    assert int(built["compaction_records_replayed"]) == 3000
    # 3 streams of 1,000 entries in nodes of at most 100 (stream-node-max-entries)
    assert int(built["compaction_nodes_written"]) >= 30
    assert seen["published"]["compaction_phase"] == "switch"
    assert after["compaction_phase"] == "none" and after["compaction_nodes_written"] == "0"


def test_a_big_value_nothing_changed_stays_in_its_part_file(tmp_path: Path) -> None:
    """A set and a sorted set past snapshot.values' threshold are stored as chunks in the
    compaction's part file; the next compaction, after a change to the sorted set only, writes
    the sorted set's chunks again and refers to the set's where they are."""
    members = 9000  # past CHUNKED_ELEMENTS (8192)
    with open_dir(tmp_path, aof_segment_max_bytes=1 << 20) as engine:
        for i in range(0, members, 1000):
            engine.execute("SADD", "set", *[b"m%d" % j for j in range(i, i + 1000)])
            engine.execute("ZADD", "zset", *[x for j in range(i, i + 1000)
                                             for x in (str(j), b"m%d" % j)])
        engine.compact(wait=True)
        first = manifest_doc(tmp_path)["snapshot"]
        engine.execute("ZADD", "zset", "-1", "new")
        engine.execute("SET", "other", "x")
        engine.compact(wait=True)
        second = manifest_doc(tmp_path)["snapshot"]
        digest = engine.digest()
    with Snapshot(str(tmp_path / second["file"])) as snap:
        refs = {row.key: row.chunked for row in snap.key_rows()}
        files = [info.file for info in snap.part_infos]
        assert snap.check() == []
    assert refs[b"set"] is not None and refs[b"zset"] is not None
    assert files[refs[b"set"].part] == first["parts"][0]["file"]
    assert files[refs[b"zset"].part] != first["parts"][0]["file"]
    assert refs[b"zset"].elements == members + 1
    assert reopen_digest(tmp_path)[0] == digest


def _list_stored(d: Path, key: bytes) -> tuple[layout.ChunkRef, dict[str, int], list]:
    """The current snapshot's list `key`: its ChunkRef, its chunks' body bytes per part file,
    its elements (index, element) as the read API gives them; the snapshot checked."""
    with Snapshot(str(d / manifest_doc(d)["snapshot"]["file"])) as snap:
        row = next(r for r in snap.key_rows() if r.key == key)
        assert row.chunked is not None and snap.check() == []
        per_part: dict[str, int] = {}
        for part, _run, _index, body in snap.value_chunk_rows(row):
            name = os.path.basename(part.path)
            per_part[name] = per_part.get(name, 0) + len(body)
        return row.chunked, per_part, list(snap.value_elements(row))


def _queue_changes(engine: Engine, count: int, tag: str) -> None:
    """`count` pushes and pops at both ends of the queue `q`."""
    for k in range(count // 4):
        engine.execute("RPUSH", "q", f"{tag}-{k}")
        engine.execute("LPOP", "q")
        engine.execute("LPUSH", "q", f"{tag}-head-{k}")
        engine.execute("RPOP" if k % 2 else "LPOP", "q")


def test_a_compaction_beside_a_big_queue_writes_what_changed(tmp_path: Path) -> None:
    """A 200k-element list (several hundred nodes, dozens of chunks) compacted, then 1,000
    pushes and pops at both ends: the next compaction writes its two end chunks, a small
    fraction of the list's bytes, and refers to the others in the first part file; the
    snapshot reads back as the list (elements and indexes, digest), after a restart too (a
    fresh child going on from a snapshot of runs), and after enough compactions that parts are
    merged."""
    with open_dir(tmp_path) as engine:
        for i in range(0, 200_000, 10_000):
            engine.execute("RPUSH", "q", *[b"job-%07d-payload" % j for j in range(i, i + 10_000)])
        engine.compact(wait=True)
        first, per_part, _elements = _list_stored(tmp_path, b"q")
        assert first.indexed and first.chunks > 20
        _queue_changes(engine, 1000, "a")
        engine.compact(wait=True)
        doc = manifest_doc(tmp_path)["snapshot"]
        ref, per_part, elements = _list_stored(tmp_path, b"q")
        new_part = doc["parts"][-1]["file"]
        assert not ref.indexed and set(per_part) == {p["file"] for p in doc["parts"]}
        assert per_part[new_part] < ref.size // 20  # (its two end chunks, of dozens)
        assert elements == list(enumerate(engine.execute("LRANGE", "q", "0", "-1")))
        digest = engine.digest()
    assert reopen_digest(tmp_path)[0] == digest
    with open_dir(tmp_path) as engine:  # a fresh build child: loads the snapshot of runs
        _queue_changes(engine, 1000, "b")
        engine.compact(wait=True)
        ref, per_part, elements = _list_stored(tmp_path, b"q")
        assert per_part[manifest_doc(tmp_path)["snapshot"]["parts"][-1]["file"]] < \
            ref.size // 20
        assert elements == list(enumerate(engine.execute("LRANGE", "q", "0", "-1")))
        for n in range(10):  # more parts than the merge policy keeps (8)
            _queue_changes(engine, 40, f"c{n}")
            engine.execute("SET", "other", n)
            engine.compact(wait=True)
            assert len(manifest_doc(tmp_path)["snapshot"]["parts"]) <= 8
        ref, per_part, elements = _list_stored(tmp_path, b"q")
        assert sum(per_part.values()) == ref.size
        assert elements == list(enumerate(engine.execute("LRANGE", "q", "0", "-1")))
        digest = engine.digest()
    assert reopen_digest(tmp_path)[0] == digest
    assert_tidy(tmp_path)
