"""Background compaction (snapshot.services.compactor) when things go wrong: real processes, real files,
SIGKILL, no mocks. (Compaction when nothing goes wrong: tests/snapshot/services/test_compactor.py.)

* Failures: the build child SIGKILLed (at spawn, at random times), EIO on the temp snapshot's
  fsync, EIO on the manifest replace (before and after its rename), close() while a build runs:
  CompactionError, the engine goes on serving, no temp file stays, nothing is lost on reopen, a
  later compaction succeeds. A compaction asked for while the AOF refuses writes is an error,
  not "nothing to compact". Files that cannot be removed after the switch are a warning (the
  compaction succeeded; the next open removes them), and do not stay counted as AOF.
* Crashes (the key test): a child process (tests/support/compaction_workload.py) SIGKILLs
  itself at each compaction step, with and without writes going on, or while the build child
  runs; the build child is also killed at random times. Reopened: the acknowledged prefix
  exactly (or plus the command in flight), never a half-written snapshot in use, every leftover
  removed at open with a WARNING on "streamkeep.aof", a later compaction works, and the build
  child never outlives its parent (nor starts its work after the parent died).
* Damage: a named snapshot missing (ManifestError), garbage, truncated or of another LSN
  (AOFCorruptError naming the file), a manifest whose snapshot LSN does not meet the first
  segment (ManifestError). Nothing in the directory is changed by a refusal.
* Power loss (TrackingFS) at every file operation of a compaction: the recovered state is the
  state before it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import MANIFEST, MANIFEST_TMP, ManifestError, encode_doc, snapshot_file
from streamkeep.aof.recovery import AOFCorruptError
from streamkeep.snapshot.reader import Snapshot
from streamkeep.snapshot.services.compactor import CompactionError
from tests.support import compaction_workload
from tests.support.aof_workload import FakeClock, reference
from tests.support.aof_workload import run as run_workload
from tests.support.datadir import (
    assert_tidy,
    data_files,
    fingerprint,
    listing,
    manifest_doc,
    named_files,
    open_dir,
    reopen_digest,
)
from tests.support.faultfs import FaultyFS, PowerCut, TrackingFS, stop_threads
from tests.support.pids import wait_gone

ROOT = Path(__file__).resolve().parents[2]
LOGGER = "streamkeep.aof"
SEED = 5


# --- helpers -------------------------------------------------------------------------------------

# --- 1. failures -------------------------------------------------------------------------------------

def filled(d: Path, n: int = 400, **options) -> tuple[Engine, FakeClock]:
    clock = FakeClock()
    engine = open_dir(d, clock, **options)
    run_workload(engine, clock, SEED, 0, n)
    return engine, clock


def test_a_failing_compaction_is_not_retried_on_every_command(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A backlog budget that cannot be kept asks for compactions; when they fail (EIO on the
    temp snapshot's fsync, every time), the requests wait PRESSURE_RETRY_S instead of starting
    a doomed build on every command. Nothing is lost, and a compaction works once the disk
    does."""
    d = tmp_path / "d"
    fs = FaultyFS(match=".mdb.tmp")
    engine, clock = filled(d, 200, fs=fs, backlog_memory=1)
    compactor = engine.datadir.compactor
    fs.fail_fsyncs(errno.EIO)
    caplog.set_level(logging.ERROR, logger="streamkeep.snapshot")
    started = compactor.runs
    for i in range(3000):  # 30 sealed nodes, none in a snapshot: over budget, pressure
        engine.execute("XADD", "bulk", f"{i + 1}-0", "f", "v")
    until = time.monotonic() + 2.5  # commands go on, several builds' time
    while time.monotonic() < until:
        engine.execute("XLEN", "bulk")
        time.sleep(0.01)
    deadline = time.monotonic() + 10
    while compactor.job is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    failures = [r for r in caplog.records if "compaction failed" in r.getMessage()]
    assert 1 <= len(failures) <= 2, [r.getMessage() for r in failures]
    assert compactor.runs == started and compactor.last_status == "err"
    fs.clear()
    compactor.pressure_after = 0.0  # (the retry delay passed)
    assert engine.compact(wait=True) is not None
    assert engine.execute("XLEN", "bulk") == 3000
    digest = engine.digest()
    engine.close()
    assert reopen_digest(d)[0] == digest


def test_build_child_killed_at_spawn(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine, clock = filled(d)
    compactor = engine.datadir.compactor
    killed = []

    def on_step(name: str) -> None:
        if name == "spawned":
            killed.append(compactor.job.proc)
            os.kill(compactor.job.proc.pid, signal.SIGKILL)

    compactor.on_step = on_step
    with pytest.raises(CompactionError, match="status -9"):
        engine.compact(wait=True)
    assert killed and killed[0].returncode == -signal.SIGKILL
    assert compactor.last_status == "err" and compactor.runs == 0
    assert_tidy(d)  # no temp file, no snapshot
    assert not [n for n in listing(d) if n.startswith("snapshot-")]
    # The engine goes on serving.
    run_workload(engine, clock, SEED, 400, 450)
    assert engine.execute("XLEN", "s1") >= 0
    digest = engine.digest()
    assert digest == reference(SEED, [450])[450]
    engine.close()
    assert reopen_digest(d)[0] == digest
    # A later compaction succeeds.
    engine = open_dir(d, clock)
    compactor = engine.datadir.compactor
    assert engine.compact(wait=True) is not None
    assert compactor.last_status == "ok"
    assert_tidy(d)
    engine.close()
    assert reopen_digest(d)[0] == digest


def test_build_child_killed_at_random_times(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine, clock = filled(d, 300, appendfsync="always")
    compactor = engine.datadir.compactor
    rng = random.Random("random-kills")
    outcomes = []
    next_cmd = 300
    for attempt in range(6):
        # The first kill lands as the child starts: on a quiet machine a build can end
        # before every random delay, and then no kill would be tested at all.
        delay = 0.0 if attempt == 0 else rng.uniform(0, 0.35)

        def on_step(name: str, delay: float = delay) -> None:
            if name == "spawned":
                proc = compactor.job.proc
                threading.Timer(delay, proc.kill).start()  # SIGKILL, unless already reaped

        compactor.on_step = on_step
        writes = threading.Thread(target=run_workload,
                                  args=(engine, clock, SEED, next_cmd, next_cmd + 60))
        writes.start()
        try:
            entry = engine.compact(wait=True)
            outcomes.append(("ok", entry))
        except CompactionError as err:
            assert "status -9" in str(err)
            outcomes.append(("err", str(err)))
        writes.join(30)
        next_cmd += 60
        assert_tidy(d)
    assert any(o[0] == "err" for o in outcomes), outcomes
    digest = engine.digest()
    assert digest == reference(SEED, [next_cmd])[next_cmd]
    engine.close()
    assert reopen_digest(d)[0] == digest


@pytest.mark.parametrize("target", ["temp snapshot fsync", "manifest fsync",
                                    "manifest dir fsync, then rotate",
                                    "manifest dir fsync, then close"])
def test_io_error_during_compaction(tmp_path: Path, target: str,
                                    caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "d"
    fs = FaultyFS(match=".mdb.tmp" if target == "temp snapshot fsync" else "manifest.json.tmp")
    engine, clock = filled(d, 300, fs=fs)
    compactor = engine.datadir.compactor
    base = engine.compact(wait=True)  # a base snapshot: the failed switch must keep it
    assert base is not None
    run_workload(engine, clock, SEED, 300, 500)

    def on_step(name: str) -> None:
        if target == "temp snapshot fsync" and name == "built":
            fs.fail_fsyncs(errno.EIO)
        elif target == "manifest fsync" and name == "published":
            fs.fail_fsyncs(errno.EIO)  # the temp manifest's fdatasync, before the rename
        elif target.startswith("manifest dir fsync") and name == "published":
            fs.fail_fsync_dirs(errno.EIO)  # after the rename

    compactor.on_step = on_step
    with pytest.raises(CompactionError, match="Input/output error"):
        engine.compact(wait=True)
    fs.clear()
    compactor.on_step = None
    assert compactor.last_status == "err"
    assert engine.journal.error is None, "a failed compaction must not stop writes"
    assert not [n for n in listing(d) if n.endswith(".mdb.tmp")]
    assert (d / base.file).exists(), "the failed compaction removed the base snapshot"
    # Which manifest is on disk: the old one, unless only the directory fsync after its rename
    # failed; the engine goes on with the old one (both name files that exist).
    on_disk = manifest_doc(d)["snapshot"]["lsn"]
    assert on_disk > base.lsn if target.startswith("manifest dir") else on_disk == base.lsn
    assert engine.journal.manifest.snapshot.lsn == base.lsn
    # The engine goes on: writes (with rotations) after the failure.
    run_workload(engine, clock, SEED, 500, 520 if target.endswith("close") else 700)
    n = 520 if target.endswith("close") else 700
    digest = engine.digest()
    assert digest == reference(SEED, [n])[n]
    engine.close()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert reopen_digest(d)[0] == digest
    assert_tidy(d)
    # And a compaction works afterwards.
    engine = open_dir(d)
    assert engine.compact(wait=True) is not None
    engine.close()
    assert reopen_digest(d)[0] == digest
    assert_tidy(d)
    assert len([n for n in listing(d) if n.startswith("snapshot-")]) == 1


class NoUnlinkFS(RealFS):
    """Unlinking a segment fails (EACCES) while `failing` is set."""

    failing = False

    def unlink(self, path: str) -> None:
        if self.failing and os.path.basename(path).startswith("segment-"):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        super().unlink(path)


def test_removal_failure_after_the_switch(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """Step 5 failing is not a failed compaction: the new snapshot is in use. The files stay
    until the next open, and the AOF accounting must not count them (or the auto trigger
    would fire on every write from then on)."""
    d = tmp_path / "d"
    fs = NoUnlinkFS()
    engine = Engine.open(str(d), appendfsync="no", aof_segment_max_bytes=8192, fs=fs,
                         auto_aof_rewrite_min_size=20_000, auto_aof_rewrite_percentage=100)
    journal, compactor = engine.journal, engine.datadir.compactor

    def segment_bytes() -> int:
        return sum((d / s.file).stat().st_size for s in journal.manifest.segments)

    def write(n: int) -> None:
        for _ in range(n):
            engine.execute("XADD", "k", "MAXLEN", "=", "5", "*", "f", "v" * 500)
            if (job := compactor.job) is not None:
                job.done.wait()

    fs.failing = True
    caplog.set_level(logging.WARNING)
    write(60)  # ~32 KB: one automatic compaction, whose removals fail
    assert compactor.runs == 1 and compactor.last_status == "ok", compactor.last_error
    stuck = [n for n in listing(d) if n.startswith("segment-")
             and n not in {s.file for s in journal.manifest.segments}]
    assert stuck, "the removals were meant to fail"
    assert any("cannot remove" in r.getMessage() for r in caplog.records)
    assert journal.aof_bytes == segment_bytes()
    snap = manifest_doc(d)["snapshot"]  # its own file and its parts
    assert compactor.snapshot_size == snap["size"] + sum(p["size"] for p in snap["parts"])
    assert engine.compact(wait=True) is not None  # on demand: also an entry, not an error
    fs.failing = False
    runs = compactor.runs
    write(300)  # ~160 KB with a threshold of ~45 KB: a few compactions, not 300
    assert compactor.runs - runs <= 160_000 // compactor.threshold() + 1, compactor.runs
    digest = engine.digest()
    engine.close()
    assert set(stuck) <= set(listing(d))  # removed by nobody while running ...
    caplog.clear()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert reopen_digest(d)[0] == digest
    assert_tidy(d)  # ... and by the next open
    for name in stuck:
        assert name in caplog.text


def test_compact_while_the_aof_refuses_writes(tmp_path: Path) -> None:
    """Not started because writes are refused is an error, not "nothing to compact"."""
    d = tmp_path / "d"
    fs = FaultyFS()
    engine, clock = filled(d, 200, fs=fs)
    fs.fail_writes(errno.ENOSPC)  # a failed write: rolled back, the gate closed
    with pytest.raises(ReplyError, match="MISCONF"):
        engine.execute("XADD", "k", "*", "f", "v")
    assert engine.journal.refusing_writes
    with pytest.raises(CompactionError, match="refuses writes"):
        engine.compact(wait=True)
    fs.clear()
    engine.journal.retry_at = 0.0  # (not a second later: what the once-a-second retry does)
    engine.locked(engine.journal.retry_writes)
    assert engine.journal.error is None
    assert engine.compact(wait=True) is not None
    fs.fail_fsyncs(errno.EIO)  # a failed fsync: refused until reopened
    engine.execute("XADD", "k", "*", "f", "v")
    engine.journal.sync()
    assert engine.journal.fsync_failed
    with pytest.raises(CompactionError, match="refuses writes"):
        engine.compact(wait=True)
    fs.clear()
    engine.close()


def test_close_during_compaction_kills_the_child(tmp_path: Path) -> None:
    d = tmp_path / "d"
    engine = open_dir(d, aof_segment_max_bytes=1 << 20)
    for argv in compaction_workload.bulk_commands(60_000):  # a build of a second or so
        engine.execute(*argv)
    digest, lsn = engine.digest(), engine.journal.lsn
    compactor = engine.datadir.compactor
    spawned = threading.Event()
    compactor.on_step = lambda name: spawned.set() if name == "spawned" else None
    assert engine.compact(wait=False) is None
    job = compactor.job
    assert job is not None and spawned.wait(10)
    time.sleep(0.1)
    assert job.proc.poll() is None, "the build finished too soon for this test"
    engine.close()
    assert job.proc.returncode == -signal.SIGKILL  # killed, not waited for
    assert job.done.is_set() and job.error is not None
    assert_tidy(d)
    assert not [n for n in listing(d) if n.startswith("snapshot-")]
    assert reopen_digest(d) == (digest, lsn)


# --- 2. crashes at each step (a child process kills itself) ----------------------------------------

STEPS = compaction_workload.STEPS


@dataclass
class ChildRun:
    proc: subprocess.Popen
    last_ack: int = -1
    base_lsn: int | None = None
    step: tuple[str, int] | None = None  # (step, LSN of the compaction) at the kill
    build_pid: int | None = None
    compact: str | None = None  # "ok <lsn>" / "error <message>" (--mode writes)
    acks_at_compact: int = -1
    killed_lsn: int | None = None
    other: list[str] = field(default_factory=list)
    returncode: int | None = None

    def parse(self, line: bytes) -> None:
        words = line.decode().split()
        kind = words[0] if words else ""
        if kind == "ack":
            self.last_ack = int(words[1])
        elif kind == "base":
            self.base_lsn = int(words[1])
        elif kind == "step":
            self.step = (words[1], int(words[2]))
        elif kind == "build":
            self.build_pid = int(words[1])
        elif kind == "compact":
            self.compact = " ".join(words[1:])
            self.acks_at_compact = self.last_ack
        elif kind == "kill":
            self.killed_lsn = int(words[1])
        else:
            self.other.append(line.decode())

    def read(self, until=None, timeout: float = 60) -> bool:
        """Parse whole lines until `until(self)` holds (True) or the child exits (False)."""
        stdout = self.proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            line = stdout.readline()
            if not line.endswith(b"\n"):
                return False  # EOF (a partial last line cannot happen: one write per line)
            self.parse(line)
            if until is not None and until(self):
                return True
            assert time.monotonic() < deadline, f"the workload child is too slow: {self}"

    def finish(self) -> None:
        """SIGKILL the child if it still runs, parse what it wrote before, reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        assert self.proc.stdout is not None
        for line in self.proc.stdout.read().split(b"\n")[:-1]:  # complete lines only
            self.parse(line + b"\n")
        self.proc.stdout.close()
        self.returncode = self.proc.wait(timeout=30)
        assert self.returncode == -signal.SIGKILL, (self, self.stderr())
        if self.build_pid is not None:
            # The build child does not outlive its parent (nor start work after it died: if
            # the parent died while it was starting, it exits once Python has started).
            wait_gone(self.build_pid, 5.0)

    def stderr(self) -> str:
        return self.proc.errlog.read_text()  # type: ignore[attr-defined]


def start_workload(d: Path, seed: int, *args: str) -> ChildRun:
    errlog = d.with_name(d.name + ".stderr")
    with open(errlog, "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.compaction_workload", str(d), str(seed), *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    proc.errlog = errlog  # type: ignore[attr-defined]
    run = ChildRun(proc)
    if not run.read(lambda r: "ready\n" in r.other):
        run.finish()
        pytest.fail(f"workload child did not start:\n{run.stderr()}")
    return run


def check_after_crash(d: Path, run: ChildRun, seed: int, in_flight: bool,
                      caplog: pytest.LogCaptureFixture, bulk: int = 0) -> set[str]:
    """Reopen after the crash: the acknowledged prefix (or plus the command in flight), never
    a half-written snapshot in use, every leftover removed with a WARNING, and a later
    compaction that works. Returns the leftovers that were removed."""
    doc = manifest_doc(d)
    leftovers = data_files(d) - named_files(doc)
    snap = doc["snapshot"]
    if snap is not None:  # the snapshot in use is a complete one
        path = d / snap["file"]
        assert path.stat().st_size == snap["size"]
        with Snapshot(str(path)) as s:
            assert s.meta.lsn == snap["lsn"]
    acked = run.last_ack + 1
    want = compaction_workload.reference(seed, [acked, acked + 1, acked + 40, acked + 41], bulk)
    caplog.clear()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    clock = FakeClock()
    engine = Engine.open(str(d), appendfsync="always", auto_aof_rewrite_percentage=0,
                         aof_segment_max_bytes=2048, clock=clock)
    try:
        got = engine.digest()
        allowed = [want[acked], want[acked + 1]] if in_flight else [want[acked]]
        assert got in allowed, f"recovered state is not the {acked} acknowledged commands"
        recovered = acked if got == want[acked] else acked + 1
        warned = " ".join(r.getMessage() for r in caplog.records
                          if r.name == LOGGER and r.levelno == logging.WARNING)
        assert_tidy(d)
        for name in leftovers:
            assert name in warned, f"{name} removed without a WARNING: {warned!r}"
        # The directory goes on: more writes, and a compaction that works.
        run_workload(engine, clock, seed, recovered, recovered + 40)
        entry = engine.compact(wait=True)
        assert entry is not None and entry.lsn == engine.journal.lsn
        digest = engine.digest()
    finally:
        engine.close()
    assert digest == want[recovered + 40]
    assert reopen_digest(d)[0] == digest
    assert assert_tidy(d)["snapshot"]["file"] == entry.file
    return leftovers


@pytest.mark.parametrize("mode", ["wait", "writes"])
@pytest.mark.parametrize("step", STEPS)
def test_crash_at_each_step(tmp_path: Path, step: str, mode: str,
                            caplog: pytest.LogCaptureFixture) -> None:
    """--mode wait: nothing else runs, the acknowledged prefix is exact. --mode writes: the
    workload goes on while the compaction runs; the kill may catch a command in flight."""
    d = tmp_path / "d"
    seed = 11 + STEPS.index(step)
    run = start_workload(d, seed, "--first", "150", "--second", "300", "--step", step,
                         "--mode", mode)
    run.read()
    run.finish()
    assert run.step is not None and run.step[0] == step, (run, run.stderr())
    new_lsn = run.step[1]
    assert run.base_lsn is not None and new_lsn > run.base_lsn
    assert run.last_ack == 299 if mode == "wait" else run.last_ack >= 299
    doc = manifest_doc(d)
    leftovers = data_files(d) - named_files(doc)
    # The old snapshot is the state until the switch, the new one from then on.
    switched = STEPS.index(step) >= STEPS.index("switched")
    assert doc["snapshot"]["lsn"] == (new_lsn if switched else run.base_lsn)
    new_file, base_file = snapshot_file(new_lsn), snapshot_file(run.base_lsn)
    new_part = f"part-{new_lsn:012d}.mdb"  # the new nodes (written unless there are none)
    expect = {
        "rotated": set(),
        "spawned": set(),  # the build child died with us, before writing anything
        "built": {new_file + ".tmp"},
        "published": {new_file},
        "switched": {base_file},  # and the compacted segments
        "removed": set(),
    }[step]
    assert expect <= leftovers, (leftovers, listing(d))
    first, newest = doc["segments"][0]["segment"], doc["segments"][-1]["segment"]
    compacted = {n for n in leftovers if n.startswith("segment-") and int(n[8:-4]) < first}
    if step == "switched":
        assert compacted, leftovers
    # Anything else can only be what a rotation the kill interrupted leaves (--mode writes):
    # its new segment, or the temp file of its manifest replace.
    rotation = {n for n in leftovers if n.startswith("segment-") and int(n[8:-4]) > newest
                or n == MANIFEST_TMP}
    # The new part beside the new snapshot's file; after the switch, the old parts the new
    # snapshot no longer refers to.
    parts = {n for n in leftovers if (step == "built" and n == new_part + ".tmp")
             or (step == "published" and n == new_part)
             or (step == "switched" and n.startswith("part-") and int(n[5:-4]) <= run.base_lsn)}
    assert leftovers - expect - compacted - rotation - parts == set(), leftovers
    assert not rotation or mode == "writes"
    removed = check_after_crash(d, run, seed, in_flight=mode == "writes", caplog=caplog)
    assert removed == leftovers
    for name in leftovers:
        assert not (d / name).exists()


@pytest.mark.parametrize("step", STEPS)
def test_crash_at_each_step_with_cold_nodes(tmp_path: Path, step: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """The same with a one-byte backlog-memory: after the base compaction nearly every node
    is cold, read back and made cold again around every command (evictions in flight at the
    kill), and the streams are re-pointed to the new snapshot at the switch. Reopened with
    and without a budget: the same state, nothing read from a removed snapshot."""
    d = tmp_path / "d"
    seed = 51 + STEPS.index(step)
    run = start_workload(d, seed, "--first", "150", "--second", "300", "--step", step,
                         "--mode", "writes", "--backlog-memory", "1")
    run.read()
    run.finish()
    assert run.step is not None and run.step[0] == step, (run, run.stderr())
    check_after_crash(d, run, seed, in_flight=True, caplog=caplog)
    resident = reopen_digest(d)[0]
    with Engine.open(str(d), backlog_memory=1, auto_aof_rewrite_percentage=0) as engine:
        assert engine.digest() == resident
        assert engine.residency.loads > 0


def test_crash_while_the_build_child_runs(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """The parent dies while its build child replays, with writes going on. (The child kept
    from the base's compaction goes on from that state: its build may also be done, its files
    published, and the manifest switched, by the time the parent dies. Each opens to the
    acknowledged state.)"""
    d = tmp_path / "d"
    run = start_workload(d, 21, "--first", "150", "--second", "300", "--mode", "build",
                         "--after", "40")
    run.read()
    run.finish()
    assert run.killed_lsn is not None and run.build_pid is not None, (run, run.stderr())
    assert run.last_ack == 339
    check_build_crash(d, run, 21, run.killed_lsn, caplog)


def test_crash_between_publishing_and_the_switch(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """The moment the test above catches only sometimes, every time: the build's snapshot
    and part published under their final names, the manifest not switched. They are orphans,
    not a state: the manifest still names the base, and the next open removes both with a
    WARNING naming each."""
    d = tmp_path / "d"
    run = start_workload(d, 21, "--first", "150", "--second", "300", "--step", "published",
                         "--mode", "wait")
    run.read()
    run.finish()
    assert run.step is not None and run.step[0] == "published", (run, run.stderr())
    lsn = run.step[1]
    assert run.last_ack == 299
    published = {snapshot_file(lsn), f"part-{lsn:012d}.mdb"}
    assert published <= data_files(d), listing(d)
    assert check_build_crash(d, run, 21, lsn, caplog) >= published
    warned = [r.getMessage() for r in caplog.records
              if r.name == LOGGER and r.levelno == logging.WARNING]
    for name in published:
        assert any(name in m and "does not name" in m for m in warned), (name, warned)


def check_build_crash(d: Path, run: ChildRun, seed: int, killed_lsn: int,
                      caplog: pytest.LogCaptureFixture) -> set[str]:
    """After the parent was killed with a build under way (or at any step after it): the
    manifest names the base snapshot or a later one up to the kill's LSN. Of the files it
    does not name, each is what a build the manifest was never switched to left
    (`unswitched`), or what a switch made obsolete (`superseded`: a kill between the switch
    and the removals); the next open removes every one with a WARNING (check_after_crash).
    Returns them."""
    doc = manifest_doc(d)
    assert run.base_lsn is not None
    assert run.base_lsn <= doc["snapshot"]["lsn"] <= killed_lsn
    leftovers = data_files(d) - named_files(doc)
    assert leftovers - unswitched(doc, leftovers) <= superseded(d, doc), leftovers
    assert check_after_crash(d, run, seed, in_flight=False, caplog=caplog) == leftovers
    return leftovers


def unswitched(doc: dict, leftovers: set[str]) -> set[str]:
    """The files of a build the manifest was not switched to: its temp files, and its snapshot
    and part under their final names (a kill between publishing them and the switch), of a
    higher LSN than the manifest's snapshot, and the switch's own manifest.json.tmp (a kill
    while it was being written: the rename never came). Orphans: nothing names them, the next
    open removes them."""
    lsn = doc["snapshot"]["lsn"] if doc["snapshot"] is not None else 0
    return {n for n in leftovers if n.endswith(".mdb.tmp") or n == MANIFEST_TMP or (
        n.startswith(("snapshot-", "part-")) and n.endswith(".mdb")
        and int(n.split("-")[1].split(".")[0]) > lsn)}


def superseded(d: Path, doc: dict) -> set[str]:
    """The files older than what the manifest names: segments numbered below its first one,
    snapshot and part files of lower LSNs than its snapshot's."""
    first = min(int(s["file"].split("-")[1].split(".")[0]) for s in doc["segments"])
    lsn = doc["snapshot"]["lsn"] if doc["snapshot"] is not None else 0
    old = set()
    for name in data_files(d):
        kind, _, rest = name.partition("-")
        number = rest.split(".")[0]
        if not number.isdigit():
            continue
        if (kind == "segment" and int(number) < first) or \
                (kind in ("snapshot", "part") and int(number) < lsn):
            old.add(name)
    return old


def test_build_child_dies_with_its_parent(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    """A build long enough to be caught in the middle (240k records: the compiled replay
    goes through 60k before a loaded machine's parent reaches its kill): the parent is
    SIGKILLed once the child is past its start-up; the child goes at once and never writes
    its snapshot (had it outlived the parent, it would finish and write it)."""
    d = tmp_path / "d"
    bulk = 240_000
    run = start_workload(d, 41, "--policy", "no", "--segment-max", str(1 << 20), "--bulk",
                         str(bulk), "--mode", "build", "--wait-lmdb")
    run.read()
    assert run.proc.wait(timeout=30) == -signal.SIGKILL
    assert run.build_pid is not None and run.killed_lsn is not None, (run, run.stderr())
    wait_gone(run.build_pid, 30.0)  # a child that outlived the parent would write the file
    assert not (d / (snapshot_file(run.killed_lsn) + ".tmp")).exists()
    run.finish()
    check_after_crash(d, run, 41, in_flight=False, caplog=caplog, bulk=bulk)


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_build_child_killed_at_random_times_then_crash(
        tmp_path: Path, seed: int, caplog: pytest.LogCaptureFixture) -> None:
    """While writes go on, the test SIGKILLs the build child at a random moment, waits for the
    compaction's outcome and some more acknowledged writes, then SIGKILLs the workload too."""
    rng = random.Random(f"random-build-kill:{seed}")
    d = tmp_path / "d"
    run = start_workload(d, seed, "--first", "100", "--second", "200", "--mode", "writes")
    assert run.read(lambda r: r.build_pid is not None), (run, run.stderr())
    time.sleep(rng.uniform(0, 0.3))
    with contextlib.suppress(ProcessLookupError):  # already done
        os.kill(run.build_pid, signal.SIGKILL)  # type: ignore[arg-type]
    assert run.read(lambda r: r.compact is not None and r.last_ack > r.acks_at_compact + 30)
    run.finish()
    assert run.compact.startswith("ok") or "status -9" in run.compact, run.compact
    doc = manifest_doc(d)
    if run.compact.startswith("error"):
        assert doc["snapshot"]["lsn"] == run.base_lsn  # the base is still the state
    assert not [n for n in listing(d) if n.endswith(".mdb.tmp")], "the temp file was left"
    check_after_crash(d, run, seed, in_flight=True, caplog=caplog)


# --- 3. damage ------------------------------------------------------------------------------------

@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, dict, str]:
    d = tmp_path / "d"
    engine, clock = filled(d, 300)
    assert engine.compact(wait=True) is not None
    run_workload(engine, clock, SEED, 300, 350)
    digest = engine.digest()
    engine.close()
    return d, manifest_doc(d), digest


def refused(d: Path, error: type[Exception], *fragments: str) -> None:
    before = fingerprint(d)
    with pytest.raises(error) as info:
        Engine.open(str(d))
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    after = fingerprint(d)
    after.pop("LOCK"), before.pop("LOCK")
    assert after == before, "a refused open changed the directory"


def test_damage_snapshot_missing(compacted: tuple[Path, dict, str]) -> None:
    d, doc, digest = compacted
    name = doc["snapshot"]["file"]
    kept = (d / name).read_bytes()
    (d / name).unlink()
    refused(d, ManifestError, name, "does not exist")
    (d / name).write_bytes(kept)  # repaired: opens again (the refusal released the lock)
    assert reopen_digest(d)[0] == digest


@pytest.mark.parametrize("kind", ["garbage", "zeros", "empty"])
def test_damage_snapshot_garbage(compacted: tuple[Path, dict, str], kind: str) -> None:
    d, doc, _ = compacted
    path = d / doc["snapshot"]["file"]
    size = path.stat().st_size
    path.write_bytes({"garbage": random.Random(1).randbytes(size), "zeros": bytes(size),
                      "empty": b""}[kind])
    if kind == "empty":  # a size the manifest does not record
        refused(d, AOFCorruptError, str(path), "the manifest says")
    else:
        refused(d, AOFCorruptError, str(path))


def test_damage_snapshot_size_not_the_manifests(compacted: tuple[Path, dict, str]) -> None:
    """An intact snapshot, but not the file the manifest recorded (its size differs)."""
    d, doc, _ = compacted
    doc["snapshot"]["size"] += 4096
    (d / MANIFEST).write_bytes(encode_doc(doc))
    refused(d, AOFCorruptError, str(d / doc["snapshot"]["file"]), "the manifest says")


def _open_in_child(d: Path) -> subprocess.CompletedProcess:
    code = ("import sys\nfrom engine import Engine\n"
            "try:\n    Engine.open(sys.argv[1])\n"
            "except Exception as err:\n    print(type(err).__name__, err); sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", code, str(d)], cwd=ROOT, capture_output=True,
                          timeout=60)


@pytest.mark.parametrize("cut", [0.5, "8k"])
def test_damage_snapshot_truncated(compacted: tuple[Path, dict, str], cut: object) -> None:
    """LMDB maps the file: a page past its end would be a SIGBUS. Opened in a child so a crash
    is a failure message, not a dead test worker."""
    d, doc, _ = compacted
    path = d / doc["snapshot"]["file"]
    size = path.stat().st_size
    os.truncate(path, int(size * cut) if isinstance(cut, float) else 8192)
    before = fingerprint(d)
    result = _open_in_child(d)
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert result.stdout.startswith(b"AOFCorruptError")
    assert str(path).encode() in result.stdout
    after = fingerprint(d)
    after.pop("LOCK"), before.pop("LOCK")
    assert after == before


def test_damage_snapshot_of_another_lsn(compacted: tuple[Path, dict, str]) -> None:
    """A consistent manifest naming a snapshot file whose contents cover another LSN."""
    d, doc, _ = compacted
    lsn = doc["snapshot"]["lsn"]
    old = d / doc["snapshot"]["file"]
    new = d / snapshot_file(lsn - 1)
    old.rename(new)
    doc["snapshot"]["lsn"], doc["snapshot"]["file"] = lsn - 1, new.name
    doc["segments"][0]["first_lsn"] = lsn  # so the manifest itself is consistent
    (d / MANIFEST).write_bytes(encode_doc(doc))
    refused(d, AOFCorruptError, str(new), f"covers LSN {lsn}", f"says {lsn - 1}")


@pytest.mark.parametrize("edit", ["first segment later", "first segment earlier",
                                  "snapshot lsn", "file name"])
def test_damage_manifest_snapshot_entry(compacted: tuple[Path, dict, str], edit: str) -> None:
    d, doc, _ = compacted
    snap = doc["snapshot"]
    if edit == "first segment later":
        doc["segments"][0]["first_lsn"] += 1
        fragments = ("first segment starts at LSN", f"covers up to LSN {snap['lsn']}")
    elif edit == "first segment earlier":
        doc["segments"][0]["first_lsn"] -= 1
        fragments = ("first segment starts at LSN", f"covers up to LSN {snap['lsn']}")
    elif edit == "snapshot lsn":
        snap["lsn"] += 3
        fragments = ("inconsistent snapshot entry",)
    else:
        snap["file"] = "snapshot-1.mdb"
        fragments = ("inconsistent snapshot entry",)
    (d / MANIFEST).write_bytes(encode_doc(doc))
    refused(d, ManifestError, str(d / MANIFEST), *fragments)


# --- 4. power loss during a compaction -------------------------------------------------------

def _power_setup(root: Path) -> tuple[Path, str]:
    src = root / "setup"
    clock = FakeClock()
    engine = open_dir(src, clock, appendfsync="always", aof_segment_max_bytes=1024)
    run_workload(engine, clock, SEED, 0, 120)
    assert engine.compact(wait=True) is not None  # a base snapshot, removed by the next one
    run_workload(engine, clock, SEED, 120, 240)
    digest = engine.digest()
    engine.close()
    return src, digest


def _power_cut(src: Path, root: Path, cut_after: int | None,
               budget: int = 0) -> tuple[Path, TrackingFS, int]:
    """Copy the set-up directory, open it on a TrackingFS and compact, cutting the power at
    the compaction's `cut_after`-th file operation. Returns the operations the compaction ran
    (without a cut: all of them)."""
    d = root / f"cut-{cut_after}"
    shutil.copytree(src, d)
    fs = TrackingFS()
    engine = Engine.open(str(d), appendfsync="always", aof_segment_max_bytes=1024,
                         auto_aof_rewrite_percentage=0, clock=FakeClock(), fs=fs,
                         backlog_memory=budget)
    start = fs.stats.ops
    fs.cut_at = None if cut_after is None else start + cut_after
    try:
        entry = engine.compact(wait=True)  # a cut in the compactor's thread ends it there
    except PowerCut:
        entry = None
    ops = fs.stats.ops - start
    assert not (cut_after is None and fs.dead)
    if cut_after is None:
        assert entry is not None
        engine.close()
    fs.abandon()
    stop_threads(engine)
    return d, fs, ops


def power_sweep(tmp_path: Path, points: int | None, budget: int = 0) -> None:
    src, digest = _power_setup(tmp_path)
    _, _, ops = _power_cut(src, tmp_path, None, budget)
    assert ops > 15
    cuts = list(range(1, ops + 1))
    if points is not None:  # spread over the whole compaction, always including the last
        cuts = sorted({cuts[i * (len(cuts) - 1) // (points - 1)] for i in range(points)})
    rng = random.Random("power")
    missed = []
    for cut in cuts:
        d, fs, _ = _power_cut(src, tmp_path, cut, budget)
        if not fs.dead:
            missed.append(cut)
        for tail in ("none", "all"):
            dst = tmp_path / f"after-{cut}-{tail}"
            fs.materialise(str(d), str(dst), rng, tail)
            with Engine.open(str(dst), auto_aof_rewrite_percentage=0,
                             backlog_memory=budget) as engine:
                assert engine.digest() == digest, f"power cut at operation {cut} ({tail})"
                assert_tidy(dst)
                if tail == "none":  # and a compaction there works
                    engine.execute("XADD", "after", "*", "f", "v")
                    # (with a budget that XADD asked for a compaction itself: "nothing to
                    # compact" then means one already holds it)
                    assert engine.compact(wait=True) is not None or (
                        budget and engine.datadir.journal.manifest.snapshot.lsn
                        == engine.journal.lsn)
            shutil.rmtree(dst)
        shutil.rmtree(d)
    # Every cut falls inside the compaction, but for the last: the journal's once-a-second
    # watermark sync (an fdatasync on another thread) may have counted in the uncut run, which
    # a busy machine makes long enough to meet one.
    assert all(cut == ops for cut in missed), f"cuts past the compaction: {missed}"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_power_loss_during_compaction(tmp_path: Path) -> None:
    power_sweep(tmp_path, points=8)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_power_loss_during_compaction_with_cold_nodes(tmp_path: Path) -> None:
    """Cold nodes (a one-byte budget: the engine loads the snapshot lazily and reads every
    node back from it) while the power goes: reopened lazily too, the state before."""
    power_sweep(tmp_path, points=8, budget=1)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_power_loss_at_every_compaction_operation(tmp_path: Path) -> None:
    power_sweep(tmp_path, points=None)
