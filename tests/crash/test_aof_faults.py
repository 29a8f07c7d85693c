"""The data directory's lock, and injected I/O errors (tests/support/faultfs.py's FaultyFS).

* The lock: a second Engine.open of a directory, from the same process or from another one,
  raises aof.fs.LockedError naming the holder's pid; the lock goes away with its holder (close,
  or the holder being killed).
* An error reply means no effect, now or after a reopen. A full disk (FaultyFS.fill: the space
  the journal allocates ahead runs out) closes the gate before any command runs: write commands
  of every kind get "MISCONF Errors writing to the AOF file: No space left on device" and change
  nothing, reads work, and once space is back the once-a-second retry reopens the gate. A write
  that fails anyway (EIO, or ENOSPC where nothing was allocated ahead), whole or half-written,
  is cut back off the segment and its command rolled back: the state is the acknowledged
  commands', in memory and after a reopen. Under every policy.
* EIO on fdatasync (always and everysec): MISCONF "...: Input/output error", the fsync is never
  retried (the page cache may have dropped the data), writes stay refused until the directory
  is reopened, reads work. Under always the commands the failed fsync covered were never
  acknowledged: they are rolled back and cut off the file; under everysec they were, and stay.
* Rotation under errors: a failed manifest write, or a failed directory fsync after the
  manifest rename, must neither lose acknowledged writes nor leave a directory that cannot be
  opened (refusing writes until reopened is fine).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.aof.fs import LockedError
from tests.support.faultfs import FaultyFS

ROOT = Path(__file__).resolve().parents[2]
ENOSPC_LINE = "MISCONF Errors writing to the AOF file: No space left on device"
EIO_LINE = "MISCONF Errors writing to the AOF file: Input/output error"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 3
        return self.now


class Session:
    """An engine plus the list of commands that changed its state, in order, so that an
    in-memory engine can replay them (with the same clock values) as the reference."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self.engine, self.clock = engine, clock
        self.applied: list[tuple[int, tuple[str, ...]]] = []

    def ok(self, *argv: str) -> object:
        """A command expected to be acknowledged."""
        reply = self.engine.execute(*argv)
        self.applied.append((self.clock.now, argv))
        return reply

    def misconf(self, line: str, *argv: str, applied: bool) -> None:
        """A command expected to fail with MISCONF; `applied` if it ran before the log failed
        (the failing command itself) rather than being refused up front."""
        before = self.engine.digest()
        with pytest.raises(ReplyError) as err:
            self.engine.execute(*argv)
        assert str(err.value) == line
        if applied:
            self.applied.append((self.clock.now, argv))
        else:
            assert self.engine.digest() == before, f"refused {argv} changed the state"

    def reference(self, upto: int | None = None) -> str:
        engine = Engine(clock=lambda: now)
        for now, argv in self.applied[:upto]:  # noqa: B007  (the lambda reads `now`)
            engine.execute(*argv)
        return engine.digest()


def open_session(directory: Path, policy: str, fs: FaultyFS, **config: object) -> Session:
    clock = Clock()
    engine = Engine.open(str(directory), appendfsync=policy, fs=fs, clock=clock, **config)
    session = Session(engine, clock)
    session.ok("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    for i in range(5):
        session.ok("XADD", "s", "*", "n", str(i))
    session.ok("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
    return session


def segment_sizes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(directory.glob("segment-*.aof"))}


def reopen_digest(directory: Path) -> str:
    with Engine.open(str(directory)) as engine:
        return engine.digest()


def refused_writes(session: Session, line: str) -> None:
    """Write commands of every kind get the MISCONF line and change nothing; reads work."""
    for argv in (
        ("XADD", "s", "*", "n", "refused"),
        ("XACK", "s", "g", "0-1"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
        ("XTRIM", "s", "MAXLEN", "0"),
        ("DEL", "s"),
    ):
        session.misconf(line, *argv, applied=False)
    engine = session.engine
    assert engine.execute("XLEN", "s") >= 5
    assert engine.execute("XRANGE", "s", "-", "+", "COUNT", "1")
    assert engine.execute("XPENDING", "s", "g")[0] == 2
    assert engine.execute("PING") == "PONG"


def wait_until_writable(session: Session, timeout: float) -> float:
    """Poll with a write until it is accepted (a refused write changes nothing)."""
    started = time.monotonic()
    while True:
        try:
            session.ok("XADD", "s", "*", "n", "after-the-fault")
            return time.monotonic() - started
        except ReplyError as err:
            assert str(err).startswith("MISCONF"), str(err)
            if time.monotonic() - started > timeout:
                pytest.fail(f"writes still refused {timeout} s after the fault cleared: {err}")
            time.sleep(0.05)


# --- the lock --------------------------------------------------------------------------------------

def test_second_open_in_the_same_process_is_refused(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "db")) as first:
        first.execute("XADD", "s", "1-1", "f", "v")
        with pytest.raises(LockedError, match=rf"\b{os.getpid()}\b"):
            Engine.open(str(tmp_path / "db"))
        assert first.execute("XLEN", "s") == 1  # the failed open did not disturb the holder
    with Engine.open(str(tmp_path / "db")) as again:  # released by close()
        assert again.execute("XLEN", "s") == 1


CHILD_OPEN = """
import sys
from streamkeep.aof.fs import LockedError
from streamkeep import Engine
try:
    Engine.open(sys.argv[1])
except LockedError as err:
    print("LockedError:", err)
else:
    print("opened")
"""

CHILD_HOLD = """
import sys
from streamkeep import Engine
engine = Engine.open(sys.argv[1])
engine.execute("XADD", "s", "1-1", "f", "v")
print("holding", flush=True)
sys.stdin.read()
"""


def test_open_from_another_process_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    with Engine.open(str(directory)):
        out = subprocess.run([sys.executable, "-c", CHILD_OPEN, str(directory)], cwd=ROOT,
                             capture_output=True, timeout=60, check=True).stdout.decode()
        assert out.startswith("LockedError:"), out
        assert f"process {os.getpid()}" in out, out
    out = subprocess.run([sys.executable, "-c", CHILD_OPEN, str(directory)], cwd=ROOT,
                         capture_output=True, timeout=60, check=True).stdout.decode()
    assert out.strip() == "opened"


def test_lock_held_by_a_child_names_it_and_dies_with_it(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    child = subprocess.Popen([sys.executable, "-c", CHILD_HOLD, str(directory)], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"holding\n"
        with pytest.raises(LockedError) as err:
            Engine.open(str(directory))
        assert f"process {child.pid}" in str(err.value)
        assert str(directory / "LOCK") in str(err.value)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        for pipe in (child.stdin, child.stdout):
            if pipe is not None:
                pipe.close()
    with Engine.open(str(directory)) as engine:  # a killed holder's lock is gone
        assert engine.execute("XLEN", "s") == 1


# --- a full disk ----------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", ["everysec", "no", "always"])
def test_full_disk_refuses_writes_before_they_run(tmp_path: Path, policy: str) -> None:
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, policy, fs, aof_preallocate=4096)
    fs.fill(free=2048)  # less than one allocation ahead: the next top-up fails
    accepted = 0
    while True:  # the space allocated ahead still takes records, then the gate closes
        before = session.engine.digest()
        try:
            session.engine.execute("XADD", "s", "*", "n", "x" * 100)
        except ReplyError as err:
            assert str(err) == ENOSPC_LINE
            assert session.engine.digest() == before, "a refused write changed the state"
            break
        session.applied.append((session.clock.now, ("XADD", "s", "*", "n", "x" * 100)))
        accepted += 1
        assert accepted < 100, "a full disk never refused a write"
    assert fs.failed_writes == 0, "a record met the full disk: it was not refused up front"
    assert fs.failed_reserves >= 1
    sizes = segment_sizes(directory)
    refused_writes(session, ENOSPC_LINE)
    time.sleep(1.3)  # the retry finds no space either: still refused, nothing written
    session.misconf(ENOSPC_LINE, "XADD", "s", "*", "n", "refused", applied=False)
    assert segment_sizes(directory) == sizes
    assert session.engine.digest() == session.reference()
    fs.clear()  # space is back: writes resume by themselves
    wait_until_writable(session, timeout=10.0)
    session.ok("XACK", "s", "g", session.engine.execute("XPENDING", "s", "g")[1].decode())
    live = session.engine.digest()
    assert live == session.reference()
    session.engine.close()
    assert reopen_digest(directory) == live


@pytest.mark.parametrize("partial", [False, True], ids=["nothing-written", "half-written"])
@pytest.mark.parametrize("policy", ["everysec", "no", "always"])
def test_a_failed_write_is_rolled_back(tmp_path: Path, policy: str, partial: bool) -> None:
    """ENOSPC in the middle of a record (nothing allocated ahead, as on a file system that
    cannot) or EIO: the command is answered MISCONF and leaves no trace."""
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, policy, fs, aof_preallocate=0)
    sizes = segment_sizes(directory)
    fs.fail_writes(errno.ENOSPC, partial=partial)
    session.misconf(ENOSPC_LINE, "XADD", "s", "*", "n", "refused-and-undone", applied=False)
    session.misconf(ENOSPC_LINE, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">",
                    applied=False)
    assert fs.failed_writes >= 1
    assert segment_sizes(directory) == sizes, "the partial write was not cut back"
    refused_writes(session, ENOSPC_LINE)
    assert session.engine.digest() == session.reference()
    fs.clear()
    wait_until_writable(session, timeout=10.0)
    live = session.engine.digest()
    assert live == session.reference()
    session.engine.close()
    assert reopen_digest(directory) == live


def test_a_failed_write_of_a_big_value_is_rolled_back(tmp_path: Path) -> None:
    """A record carrying a big value is written in parts, past the buffer: a part that fails
    is cut back and the command rolled back like any other."""
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, "everysec", fs)
    fs.fail_writes(errno.EIO, after=1, partial=True)  # the frame goes out, the value fails
    session.misconf(EIO_LINE, "XADD", "s", "*", "big", "v" * (2 << 20), applied=False)
    assert session.engine.digest() == session.reference()
    fs.clear()
    session.engine.close()
    assert reopen_digest(directory) == session.reference()


def test_a_client_that_retries_every_error_writes_each_entry_once(tmp_path: Path) -> None:
    """What a producer that retries MISCONF sees: faults of every kind come and go; each of
    its logical writes is in the stream exactly once, live and after a reopen."""
    directory = tmp_path / "db"
    fs = FaultyFS()
    engine = Engine.open(str(directory), appendfsync="everysec", fs=fs, aof_preallocate=2048)
    faults = [lambda: fs.fill(free=1000), lambda: fs.fail_writes(errno.EIO),
              lambda: fs.fail_writes(errno.ENOSPC, partial=True), lambda: fs.fill(free=0)]
    try:
        for n in range(120):
            if n % 30 == 10:
                faults[n // 30]()
            attempts = 0
            while True:
                try:
                    engine.execute("XADD", "s", "*", "n", str(n), "pad", "p" * 200)
                    break
                except ReplyError as err:
                    assert str(err).startswith("MISCONF"), err
                    attempts += 1
                    if attempts == 3:
                        fs.clear()  # the operator frees space, the device recovers
                    time.sleep(0.2)
        numbers = [int(fields[1]) for _id, fields in engine.execute("XRANGE", "s", "-", "+")]
        assert numbers == list(range(120))
    finally:
        engine.close()
    with Engine.open(str(directory)) as reopened:
        again = [int(f[1]) for _id, f in reopened.execute("XRANGE", "s", "-", "+")]
    assert again == list(range(120))


# --- EIO on fsync -------------------------------------------------------------------------------

def test_eio_on_fsync_under_always_is_never_retried(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, "always", fs)
    sizes = segment_sizes(directory)
    fs.fail_fsyncs(errno.EIO)
    before = fs.fdatasyncs
    session.misconf(EIO_LINE, "XADD", "s", "*", "n", "fsync-failed", applied=False)
    # The failed round's fdatasync, then the cut's own (the size made durable), no other.
    assert fs.fdatasyncs == before + 2
    # Not acknowledged, so not kept: cut back off the segment to what the last fsync covered.
    assert segment_sizes(directory) == sizes
    refused_writes(session, EIO_LINE)
    fs.clear()  # even once the device works again: refused until reopened
    time.sleep(1.2)
    refused_writes(session, EIO_LINE)
    fsyncs = fs.fdatasyncs
    assert fsyncs == before + 2, "a failed fsync was retried"
    session.engine.close()
    assert fs.fdatasyncs == fsyncs, "close() retried the failed fsync"
    assert reopen_digest(directory) == session.reference()
    with Engine.open(str(directory), appendfsync="always") as engine:
        engine.execute("XADD", "s", "*", "n", "after-reopen")


def test_eio_on_background_fsync_under_everysec(tmp_path: Path) -> None:
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, "everysec", fs)
    time.sleep(1.2)  # let the background fsync cover the setup
    fs.fail_fsyncs(errno.EIO)
    before = fs.fdatasyncs
    session.ok("XADD", "s", "*", "n", "written-not-synced")  # acknowledged: everysec
    deadline = time.monotonic() + 3
    while fs.fdatasyncs == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fs.fdatasyncs == before + 1
    refused_writes(session, EIO_LINE)
    time.sleep(1.2)
    assert fs.fdatasyncs == before + 1, "the failed fsync was retried"
    fs.clear()
    session.engine.close()
    assert reopen_digest(directory) == session.reference()


# --- rotation under errors -----------------------------------------------------------------------

def test_enospc_on_the_manifest_during_rotation_loses_nothing(tmp_path: Path) -> None:
    """The manifest cannot be written: the rotation fails. Staying on the old segment or
    refusing writes (MISCONF) until reopened are both acceptable; losing acknowledged writes,
    or a directory that no longer opens, is not."""
    directory = tmp_path / "db"
    fs = FaultyFS(match="manifest")
    session = open_session(directory, "always", fs, aof_segment_max_bytes=600)
    fs.fail_writes(errno.ENOSPC)
    refused = 0
    for i in range(20):
        try:
            session.ok("XADD", "s", "*", "n", f"during-{i}")
        except ReplyError as err:
            assert str(err) == ENOSPC_LINE
            refused += 1
            session.misconf(ENOSPC_LINE, "XADD", "s", "*", "n", "refused", applied=False)
    assert fs.failed_writes > 0, "no rotation was attempted"
    fs.clear()
    session.engine.close()
    assert reopen_digest(directory) == session.reference()
    with Engine.open(str(directory), aof_segment_max_bytes=600) as engine:  # writable again
        for i in range(20):
            engine.execute("XADD", "s", "*", "n", f"after-{i}")
    with Engine.open(str(directory)) as engine:
        assert engine.execute("XLEN", "s") == 5 + 20 + 20 - refused


def test_failed_directory_fsync_after_manifest_rename(tmp_path: Path) -> None:
    """rotation = create segment (fsync dir) + store manifest (rename, fsync dir). If the second
    directory fsync fails, the new manifest is already in place naming the new segment; the
    journal must not keep appending to the old segment as if the rotation had not happened, or
    the directory no longer opens (or loses records) although every write was acknowledged.
    (A fault that clears at once is repaired by the next append's rotation retry; one that
    persists, as a failing device's does, is not.)"""
    directory = tmp_path / "db"
    fs = FaultyFS()
    session = open_session(directory, "always", fs, aof_segment_max_bytes=600)
    base = fs.fsync_dirs
    fs.fail_fsync_dirs(errno.EIO, after=1)  # let create_segment's pass, fail the manifest's
    for i in range(40):
        try:
            session.ok("XADD", "s", "*", "n", f"x{i}")
        except ReplyError as err:  # refusing writes after the failure is acceptable
            assert str(err) == EIO_LINE
            session.applied.append((session.clock.now, ("XADD", "s", "*", "n", f"x{i}")))
            break
    assert fs.fsync_dirs >= base + 2, "the rotation did not happen"
    acknowledged = session.reference(len(session.applied) - 1)
    fs.clear()
    # A crash now (no further rotation to repair the manifest): the data must be readable.
    session.engine.close()
    assert reopen_digest(directory) in (acknowledged, session.reference())


# --- lifecycle --------------------------------------------------------------------------------------

def test_writes_after_close_never_reach_a_file(tmp_path: Path) -> None:
    """close() closes the segment's descriptor; the OS hands the same number to the next file
    opened. A write command on the closed engine must be refused, not appended through the
    stale descriptor into whatever file now has it (here: another data directory's segment)."""
    first = Engine.open(str(tmp_path / "a"), appendfsync="no")
    first.execute("XADD", "a-key", "*", "f", "v")
    first.close()
    with Engine.open(str(tmp_path / "b"), appendfsync="no") as second:
        second.execute("XADD", "b-key", "*", "f", "v")
        before = {p.name: p.read_bytes() for p in (tmp_path / "b").glob("segment-*.aof")}
        try:
            first.execute("XADD", "a-key", "*", "f", "after-close")
            accepted = True
        except Exception:  # noqa: BLE001  (any refusal will do)
            accepted = False
        after = {p.name: p.read_bytes() for p in (tmp_path / "b").glob("segment-*.aof")}
        assert after == before, "a closed engine wrote into another directory's segment"
    with Engine.open(str(tmp_path / "b")) as reopened:
        assert reopened.execute("KEYS", "*") == [b"b-key"]
    assert not accepted, "a closed engine accepted a write it cannot log"


def test_invalid_config_is_refused_before_touching_the_directory(tmp_path: Path) -> None:
    """A bad appendfsync value must be refused up front: not after replaying the whole AOF,
    truncating a torn tail (modifying the directory) and leaking the segment's descriptor."""
    directory = tmp_path / "db"
    with Engine.open(str(directory)) as engine:
        engine.execute("XADD", "s", "*", "f", "v")
    (segment,) = directory.glob("segment-*.aof")
    torn = segment.read_bytes() + b"\x07\x00"
    segment.write_bytes(torn)
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(ValueError, match="appendfsync"):
            Engine.open(str(directory), appendfsync="sometimes")
    problems = []
    if segment.read_bytes() != torn:
        problems.append("a refused open modified the directory (truncated the torn tail)")
    if (leaked := len(os.listdir("/proc/self/fd")) - fds) != 0:
        problems.append(f"{leaked} descriptors leaked by 3 refused opens")
    assert not problems, "; ".join(problems)
