"""Simulated power loss under appendfsync=always (tests/support/faultfs.py's TrackingFS).

The seeded workload of tests/support/aof_workload.py runs in process on a TrackingFS that cuts the
power at its N-th mutating file operation (the command in flight gets `PowerCut`; every command
that returned before was acknowledged). The engine is then abandoned without close() and the
post-crash disk is materialised into a fresh directory: each file cut back to what its last
fdatasync covered, optionally followed by a torn tail (all / part of the unsynced bytes, zeros,
garbage), files whose directory entry was never fsynced dropped, renames not followed by a
directory fsync undone. Reopened with the real file system, the directory must hold every
acknowledged write and nothing invented: its digest is the acknowledged prefix's, or that plus
the command in flight, and its consumer groups are consistent (XPENDING, XINFO GROUPS and
XINFO CONSUMERS agree; every pending ID was delivered to that group by some command of the
prefix; entries-read <= entries-added).

Also: a power cut during recovery itself (then recovery again), appendfsync=no (the recovered
state is still exactly some prefix, at least what the last fdatasync covered), and a power cut
during the very first open of a new directory (nothing acknowledged yet: it must still open).
Many seeds x cut points x tail kinds; the big loop is @pytest.mark.slow.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from tests.support.aof_workload import KEYS, FakeClock, commands
from tests.support.aof_workload import run as run_workload
from tests.support.faultfs import TAILS, PowerCut, TrackingFS, stop_threads

EMPTY_DIGEST = Engine().digest()


# --- the reference: digests and deliveries of an in-memory run --------------------------------

@dataclass
class Reference:
    digests: list[str]  # digests[k]: after the first k commands
    delivered_at: dict[tuple[bytes, bytes, bytes], int] = field(default_factory=dict)
    # (key, group, id) -> the number of commands after which it had first been delivered

    def prefix_of(self, digest: str) -> list[int]:
        return [k for k, d in enumerate(self.digests) if d == digest]


_references: dict[tuple[int, int], Reference] = {}


def _delivered_ids(argv: list[str], reply: object) -> tuple[bytes, bytes, list[bytes]] | None:
    name = argv[0]
    if name == "XREADGROUP" and reply:
        key, entries = reply[0]  # type: ignore[index]
        return key, argv[2].encode(), [e[0] for e in entries]
    if name == "XCLAIM" and reply:
        return argv[1].encode(), argv[2].encode(), [
            e if isinstance(e, bytes) else e[0] for e in reply]  # type: ignore[union-attr]
    if name == "XAUTOCLAIM" and reply and reply[1]:  # type: ignore[index]
        return argv[1].encode(), argv[2].encode(), [
            e if isinstance(e, bytes) else e[0] for e in reply[1]]  # type: ignore[index]
    return None


def reference(seed: int, n: int) -> Reference:
    """The in-memory run of commands [0, n]: digests after each prefix, first deliveries."""
    cached = _references.get((seed, n))
    if cached is not None:
        return cached
    clock = FakeClock()
    engine = Engine(clock=clock)
    ref = Reference([engine.digest()])
    for k, (now, argv) in enumerate(commands(seed), start=1):
        if k > n + 1:
            break
        clock.now = now
        try:
            reply = engine.execute(*argv)
        except ReplyError:
            reply = None
        got = _delivered_ids(argv, reply)
        if got is not None:
            key, group, ids = got
            for sid in ids:
                ref.delivered_at.setdefault((key, group, sid), k)
        ref.digests.append(engine.digest())
    _references[(seed, n)] = ref
    return ref


_runs = 0


# --- one crash ----------------------------------------------------------------------------------

@dataclass
class Crash:
    directory: Path
    fs: TrackingFS
    acked: int  # commands that returned before the cut
    cut: bool  # False: the workload finished, then the power went
    synced_acked: int  # commands acknowledged when the last segment fdatasync happened


def crash_run(root: Path, seed: int, n: int, cut_at: int | None, policy: str = "always",
              segment_max: int = 1000) -> Crash:
    global _runs
    _runs += 1
    directory = root / f"run-{_runs}-seed{seed}-cut{cut_at}-{policy}"
    acked = 0
    synced = [0]

    class Hooked(TrackingFS):
        def fdatasync(self, fd: int) -> None:
            super().fdatasync(fd)
            synced[0] = acked

    fs = Hooked(cut_at=cut_at)
    clock = FakeClock()

    def ack(i: int) -> None:
        nonlocal acked
        acked = i + 1

    cut = False
    engine: Engine | None = None
    try:
        engine = Engine.open(str(directory), appendfsync=policy,
                             aof_segment_max_bytes=segment_max, clock=clock, fs=fs)
        run_workload(engine, clock, seed, 0, n, ack)
    except PowerCut:
        cut = True
    fs.abandon()  # the process is gone: no close(), no more I/O
    stop_threads(engine)
    return Crash(directory, fs, acked, cut, synced[0])


def discard(crash: Crash) -> None:
    """A crash run done with: its directory removed and the descriptors its file layer kept
    on nameless inodes closed (the engine abandoned with it holds the layer in a cycle: left to
    the collector, a long run held thousands of descriptors of deleted files)."""
    crash.fs.release()
    shutil.rmtree(crash.directory)


@contextmanager
def materialised(crash: Crash, name: str, rng: random.Random, tail: str) -> Iterator[Path]:
    dst = crash.directory.with_name(crash.directory.name + "-" + name)
    crash.fs.materialise(str(crash.directory), str(dst), rng, tail)
    try:
        yield dst
    finally:
        shutil.rmtree(dst, ignore_errors=True)


# --- checks ---------------------------------------------------------------------------------------

def _pairs(flat: list) -> dict:
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def check_groups(engine: Engine, ref: Reference, upto: int) -> None:
    """Consumer groups are internally consistent and only hold delivered IDs."""
    for key in KEYS:
        if engine.execute("TYPE", key) != "stream":
            continue
        info = _pairs(engine.execute("XINFO", "STREAM", key))
        for group_flat in engine.execute("XINFO", "GROUPS", key):
            group = _pairs(group_flat)
            name = group[b"name"]
            pending = group[b"pending"]
            summary = engine.execute("XPENDING", key, name)
            full = engine.execute("XPENDING", key, name, "-", "+", "1000000")
            consumers = [_pairs(c) for c in engine.execute("XINFO", "CONSUMERS", key, name)]
            where = f"{key}/{name.decode()}"
            assert summary[0] == pending == len(full), where
            assert group[b"consumers"] == len(consumers), where
            assert sum(c[b"pending"] for c in consumers) == pending, where
            per_consumer: dict[bytes, int] = {}
            for sid, consumer, _idle, deliveries in full:
                per_consumer[consumer] = per_consumer.get(consumer, 0) + 1
                assert deliveries >= 1, where
                first = ref.delivered_at.get((key.encode(), name, sid))
                assert first is not None and first <= upto, (
                    f"{where}: pending {sid!r} was never delivered to the group")
            assert per_consumer == {c[b"name"]: c[b"pending"] for c in consumers
                                    if c[b"pending"]}, where
            if pending:
                assert {c: int(n) for c, n in summary[3]} == per_consumer, where
                assert summary[1] == full[0][0] and summary[2] == full[-1][0], where
            if group[b"entries-read"] is not None:
                assert group[b"entries-read"] <= info[b"entries-added"], where


def check_recovery(directory: Path, crash: Crash, ref: Reference) -> int:
    """Reopen with the real file system; returns the number of commands recovered."""
    with Engine.open(str(directory), appendfsync="always") as engine:
        digest = engine.digest()
        allowed = [crash.acked, crash.acked + 1] if crash.cut else [crash.acked]
        got = [k for k in allowed if ref.digests[k] == digest]
        assert got, (
            f"recovered state is not the {crash.acked} acknowledged commands"
            + (" (nor those plus the one in flight)" if crash.cut else "")
            + f"; it matches prefixes {ref.prefix_of(digest)}")
        check_groups(engine, ref, max(got))
        # The directory takes writes after the crash, and keeps them.
        engine.execute("XADD", "after-crash", "*", "ok", "1")
        after = engine.digest()
    with Engine.open(str(directory)) as engine:
        assert engine.digest() == after
    return max(got)


def op_counts(tmp: Path, seed: int, n: int, segment_max: int,
              policy: str = "always") -> tuple[int, int]:
    """(operations of the first open, operations of the whole run) without a cut."""
    counts = []
    for commands_run in (0, n):
        crash = crash_run(tmp, seed, commands_run, None, policy, segment_max)
        assert not crash.cut and crash.acked == commands_run
        counts.append(crash.fs.stats.ops)
        discard(crash)
    return counts[0], counts[1]


def sweep(tmp: Path, seed: int, n: int, cuts: int, tails: tuple[str, ...], segment_max: int,
          rng: random.Random) -> int:
    """Cut the power at `cuts` random operations after the directory was created (and once
    after the workload finished), materialise each tail kind, check. Returns checks done."""
    ref = reference(seed, n)
    opened, total = op_counts(tmp, seed, n, segment_max)
    points = sorted(rng.sample(range(opened + 1, total + 1), min(cuts, total - opened)))
    checks = 0
    for cut_at in [*points, None]:
        crash = crash_run(tmp, seed, n, cut_at, segment_max=segment_max)
        assert crash.cut == (cut_at is not None)
        for tail in tails:
            with materialised(crash, tail, rng, tail) as directory:
                check_recovery(directory, crash, ref)
                checks += 1
        discard(crash)
    return checks


# --- tests ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_power_loss_keeps_acknowledged_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(f"powerloss:{seed}")
    segment_max = rng.choice([300, 800, 4000])
    descriptors = len(os.listdir("/proc/self/fd"))
    assert sweep(tmp_path, seed, 120, 12, TAILS, segment_max, rng) == 13 * len(TAILS)
    # The abandoned runs keep nothing open (the soak's hundreds of runs would run out).
    assert len(os.listdir("/proc/self/fd")) <= descriptors


def test_power_loss_at_every_operation(tmp_path: Path) -> None:
    """Every cut point of a short run with tiny segments (rotations every few records)."""
    rng = random.Random("every-op")
    seed, n = 11, 40
    ref = reference(seed, n)
    opened, total = op_counts(tmp_path, seed, n, 250)
    for cut_at in range(opened + 1, total + 2):
        crash = crash_run(tmp_path, seed, n, cut_at, segment_max=250)
        tail = TAILS[cut_at % len(TAILS)]
        with materialised(crash, tail, rng, tail) as directory:
            check_recovery(directory, crash, ref)
        discard(crash)


def test_power_loss_during_recovery(tmp_path: Path) -> None:
    """Crash, then cut the power again at each operation of the recovery (which truncates a
    torn tail and removes orphans), then recover for real: same outcome."""
    rng = random.Random("compound")
    seed, n = 5, 80
    ref = reference(seed, n)
    opened, total = op_counts(tmp_path, seed, n, 600)
    for cut_at in rng.sample(range(opened + 1, total), 6):
        crash = crash_run(tmp_path, seed, n, cut_at, segment_max=600)
        for tail in ("partial", "zeros", "garbage"):
            with materialised(crash, tail, rng, tail) as first:
                step = 1
                while True:
                    fs = TrackingFS(cut_at=step)
                    try:
                        Engine.open(str(first), fs=fs).close()
                        fs.abandon()
                        break  # recovery finished before the cut
                    except PowerCut:
                        fs.abandon()
                    second = first.with_name(first.name + f"-r{step}")
                    fs.materialise(str(first), str(second), rng, rng.choice(TAILS))
                    check_recovery(second, crash, ref)
                    shutil.rmtree(second)
                    step += 1
                check_recovery(first, crash, ref)
        discard(crash)


def test_power_loss_under_no_leaves_a_prefix(tmp_path: Path) -> None:
    """appendfsync=no promises no durability, but what comes back is exactly some prefix of
    the commands (no holes, nothing invented), at least what the last fdatasync covered."""
    rng = random.Random("policy-no")
    seed, n = 3, 150
    ref = reference(seed, n)
    opened, total = op_counts(tmp_path, seed, n, 700, "no")
    for cut_at in [*rng.sample(range(opened + 1, total + 1), 10), None]:
        crash = crash_run(tmp_path, seed, n, cut_at, policy="no", segment_max=700)
        for tail in TAILS:
            with materialised(crash, tail, rng, tail) as directory, \
                    Engine.open(str(directory)) as engine:
                prefixes = [k for k in ref.prefix_of(engine.digest()) if k <= crash.acked + 1]
                assert prefixes, "the recovered state is not a prefix of the commands"
                assert max(prefixes) >= crash.synced_acked, "lost fdatasync'ed records"
                check_groups(engine, ref, max(prefixes))
        discard(crash)


def test_power_loss_during_the_first_open(tmp_path: Path) -> None:
    """Nothing is acknowledged before Engine.open returns, so a power cut at any operation of
    the first open of a new directory must leave a directory that opens (empty). Creating
    segment 1 (made durable with a directory fsync) before the manifest leaves, if the power
    goes in between, a directory holding only a header-only segment-000001.aof; refusing it
    with "manifest is missing" makes the data directory unusable without manual repair."""
    rng = random.Random("first-open")
    ops, _total = op_counts(tmp_path, 0, 0, 1000)
    failures = []
    for cut_at in range(1, ops + 2):
        crash = crash_run(tmp_path, 0, 0, cut_at)
        for tail in ("none", "all"):
            with materialised(crash, tail, rng, tail) as directory:
                try:
                    with Engine.open(str(directory)) as engine:
                        assert engine.digest() == EMPTY_DIGEST
                except Exception as err:  # noqa: BLE001  (collect, then report them all)
                    failures.append(f"cut at op {cut_at} ({tail}): {type(err).__name__}: "
                                    f"{err}; files {sorted(os.listdir(directory))}")
        discard(crash)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 124))
def test_power_loss_soak(tmp_path: Path, seed: int) -> None:
    rng = random.Random(f"powerloss-soak:{seed}")
    segment_max = rng.choice([250, 600, 2000, 8000])
    sweep(tmp_path, seed, 400, 40, TAILS, segment_max, rng)


# --- group commit -------------------------------------------------------------------------------

class GatedFS(TrackingFS):
    """TrackingFS whose next fdatasync, and whose write of a record containing `hold_marker`,
    wait for an event: lets a test order the steps of concurrent commands exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.sync_gate: threading.Event | None = None
        self.sync_entered = threading.Event()
        self.hold_marker: bytes | None = None
        self.write_gate = threading.Event()
        self.write_entered = threading.Event()

    def fdatasync(self, fd: int) -> None:
        gate, self.sync_gate = self.sync_gate, None
        if gate is not None:
            self.sync_entered.set()
            gate.wait(10)
        super().fdatasync(fd)

    def write(self, fd: int, data: bytes) -> None:
        if self.hold_marker is not None and self.hold_marker in data:
            self.write_entered.set()
            self.write_gate.wait(10)
        super().write(fd, data)


def _recovered_payloads(directory: Path, fs: TrackingFS, engine: Engine, acked: int) -> set:
    """Cut the power now (files back to what fdatasync covered) and reopen: the payloads of
    stream "s" that survived."""
    fs.abandon()
    stop_threads(engine)
    with materialised(Crash(directory, fs, acked, False, 0), "after", random.Random(0),
                      "none") as after, Engine.open(str(after)) as recovered:
        return {f[1] for _id, f in recovered.execute("XRANGE", "s", "-", "+")}


def test_group_commit_never_acknowledges_an_unwritten_record(tmp_path: Path) -> None:
    """A sync round covers "everything written so far". If it counted a record whose LSN is
    assigned but whose write has not finished (the server's loop thread holds the engine lock
    inside fs.write), the round would mark it durable before it is written, and its command
    would return with no fdatasync covering it: an acknowledged write lost to a power cut.

    The server's way, forced into this order: C's round is inside fdatasync; A's record is
    written and A waits for the next round; B's record is inside its write; C's round ends and
    A's round fsyncs; then B's write finishes and B waits for its own round."""
    directory = tmp_path / "db"
    fs = GatedFS()
    engine = Engine.open(str(directory), appendfsync="always", fs=fs)
    journal = engine.journal
    assert journal is not None
    with engine.lock:
        journal.set_deferred(True)  # the server's mode: the loop thread writes the records
    session = engine.session

    def submit_and_write(name: str) -> int:
        _reply, lsn = engine.submit(session, (b"XADD", b"s", b"*", b"payload",
                                              f"payload-{name}".encode()))
        with engine.lock:
            journal.flush_pending()
        return lsn

    first_sync = threading.Event()
    fs.sync_gate = first_sync
    c = threading.Thread(target=journal.wait_durable, args=(submit_and_write("c"),))
    c.start()
    assert fs.sync_entered.wait(10)
    a = threading.Thread(target=journal.wait_durable, args=(submit_and_write("a"),))
    a.start()
    fs.hold_marker = b"payload-b"
    lsn_b: list[int] = []
    b = threading.Thread(target=lambda: lsn_b.append(submit_and_write("b")))
    b.start()
    assert fs.write_entered.wait(10)  # B's write holds the engine lock inside fs.write
    first_sync.set()
    a.join(10)
    c.join(10)
    assert not a.is_alive() and not c.is_alive()
    fs.write_gate.set()
    b.join(10)
    journal.wait_durable(lsn_b[0])  # B acknowledged too
    assert _recovered_payloads(directory, fs, engine, 3) == {
        b"payload-a", b"payload-b", b"payload-c"}


def test_group_commit_one_write_and_one_fsync_for_a_round(tmp_path: Path) -> None:
    """Embedded `always`: records are buffered under the engine lock, and the group-commit
    thread writes everything buffered with one write() and covers it with one fdatasync. Here
    A and B append while C's round is inside its fdatasync: the next round writes both records
    in one write, fsyncs once, and both are durable when their XADDs return."""
    directory = tmp_path / "db"
    fs = GatedFS()
    engine = Engine.open(str(directory), appendfsync="always", fs=fs)
    writes: list[bytes] = []
    write = fs.write

    def recording_write(fd: int, data: bytes) -> None:
        writes.append(data)
        write(fd, data)

    fs.write = recording_write  # type: ignore[method-assign]
    replies: dict[str, object] = {}

    def xadd(name: str) -> None:
        replies[name] = engine.execute("XADD", "s", "*", "payload", f"payload-{name}")

    first_sync = threading.Event()
    fs.sync_gate = first_sync
    c = threading.Thread(target=xadd, args=("c",))
    c.start()
    assert fs.sync_entered.wait(10)
    a = threading.Thread(target=xadd, args=("a",))
    b = threading.Thread(target=xadd, args=("b",))
    a.start()
    b.start()
    deadline = time.monotonic() + 10
    while engine.journal.pending_records < 2:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "A and B never appended"
        time.sleep(0.005)
    assert "a" not in replies and "b" not in replies, "acknowledged before any fsync"
    fsyncs = engine.journal.fsyncs  # type: ignore[union-attr]
    first_sync.set()
    for t in (a, b, c):
        t.join(10)
    assert set(replies) == {"a", "b", "c"}
    assert engine.journal.fsyncs - fsyncs == 2  # type: ignore[union-attr]  # C's, then A+B's
    assert any(b"payload-a" in w and b"payload-b" in w for w in writes), "not one write"
    assert _recovered_payloads(directory, fs, engine, 3) == {
        b"payload-a", b"payload-b", b"payload-c"}


def test_group_commit_survives_an_interrupted_waiter(tmp_path: Path) -> None:
    """A round wakes its callers one after another, each waking the next. A caller whose wait
    is interrupted (a signal handler raising in the main thread, e.g. Ctrl-C) must still pass
    the wake-up on: the caller queued behind it returns."""
    directory = tmp_path / "db"
    fs = GatedFS()
    engine = Engine.open(str(directory), appendfsync="always", fs=fs)

    class Interrupted(Exception):
        pass

    def interrupt(_signum: int, _frame: object) -> None:
        raise Interrupted

    first_sync = threading.Event()
    fs.sync_gate = first_sync
    c = threading.Thread(target=engine.execute, args=("XADD", "s", "*", "f", "c"))
    c.start()
    assert fs.sync_entered.wait(10)  # the group-commit thread is inside C's fdatasync
    # B asks after the main thread, so the round after C's wakes the main thread first and
    # B through it.
    b_done = threading.Event()
    b = threading.Timer(0.2, lambda: (engine.execute("XADD", "s", "*", "f", "b"),
                                      b_done.set()))
    b.start()
    releaser = threading.Timer(0.6, first_sync.set)
    releaser.start()
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.4)
    try:
        with pytest.raises(Interrupted):
            engine.execute("XADD", "s", "*", "f", "main")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert b_done.wait(10), "the caller behind the interrupted one was never woken"
    c.join(10)
    assert engine.execute("XLEN", "s") == 3
    engine.close()


def test_group_commit_never_hangs_a_caller_after_close(tmp_path: Path) -> None:
    """A caller that asks for durability after the group-commit thread stopped (the engine
    closed under it) gets an error instead of waiting forever."""
    engine = Engine.open(str(tmp_path / "db"), appendfsync="always")
    journal = engine.journal
    assert journal is not None
    engine.execute("XADD", "s", "*", "f", "v")
    journal.stop_threads()
    with pytest.raises(ReplyError):  # (a wait that hung would meet the test's timeout)
        journal.wait_durable(journal.lsn + 1)  # a record no round will ever cover
    engine.close()


# --- everysec: bounded loss -------------------------------------------------------------------

def test_everysec_syncs_after_writes_stop(tmp_path: Path) -> None:
    """everysec fsyncs once a second while unsynced bytes remain, also once writes stop (Redis
    had a bug where the tail stayed unsynced until the next write): a power cut two seconds
    after the last write loses nothing; one right after a burst loses at most the unsynced
    tail, and what comes back is a prefix."""
    directory = tmp_path / "db"
    fs = TrackingFS()
    rng = random.Random("everysec")
    clock = FakeClock()
    seed = 21
    ref = reference(seed, 200)
    engine = Engine.open(str(directory), appendfsync="everysec", clock=clock, fs=fs)
    try:
        run_workload(engine, clock, seed, 0, 100)
        time.sleep(2.2)
        with materialised(Crash(directory, fs, 100, False, 100), "quiet", rng, "none") as cut, \
                Engine.open(str(cut)) as recovered:
            assert recovered.digest() == ref.digests[100], "acknowledged >2 s ago, lost"
        run_workload(engine, clock, seed, 100, 200)
        with materialised(Crash(directory, fs, 200, False, 100), "burst", rng,
                          "partial") as cut, Engine.open(str(cut)) as recovered:
            prefixes = ref.prefix_of(recovered.digest())
            assert prefixes and 100 <= max(prefixes) <= 200, prefixes
    finally:
        engine.close()
