"""The careless-user suite's helpers (tests/careless/): `streamkeep` as a real child process
(`run`: exit status, stdout, stderr; `interrupt`: SIGINT to its process group once it has
started, as Ctrl-C does, then checks that no process it started is left running: `Tree`),
the checks every case makes (`assert_refused`: the exit status, one
line on stderr naming what it must name, no traceback; `assert_usage`: exit 3, the usage,
wrapped, and one error line), `tree_state` (every file's bytes under a path, to assert that a refused
command changed nothing), and big inputs made fast (`big_datadir`: a data directory of many
records written straight as segments; `resp_aof`: a Redis AOF of many XADDs) with the moments
an interrupt lands in the middle of a command's work, counted, not timed (`opened`: a process
of the command has a file open; `lock_taken_by`: it holds a data directory's lock)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0
# A variable set in a command's environment: every process it starts inherits it (the Spark
# JVM and its Python workers, build children, servers, workers), found in /proc even after it
# was re-parented to init.
MARK = "STREAMKEEP_TEST_MARK"
GONE_WITHIN = 20.0  # children killed with their parent: the kernel, init's reaping


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def _argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "streamkeep", *map(str, args)]


def run(*args: str | Path, stdin: str = "", cwd: Path | None = None,
        env: dict[str, str] | None = None, timeout: float = TIMEOUT) -> Result:
    """`streamkeep *args` as a child process, stdin given, stdout and stderr piped (not a
    terminal: no progress display)."""
    proc = subprocess.run(_argv([str(a) for a in args]), input=stdin, capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return Result(proc.returncode, proc.stdout, proc.stderr)


def interrupt(*args: str | Path, after: float | None = None, wait_for: Path | None = None,
              when: Callable[[int], bool] | None = None, cwd: Path | None = None,
              timeout: float = TIMEOUT, must_run: bool = True) -> Result:
    """Start `streamkeep *args`, send SIGINT to its process group (what Ctrl-C in a terminal
    does) once `wait_for` exists, `when(pid)` holds or `after` seconds have passed, and
    collect what it printed. The command must still be running then (else the interrupt
    tested nothing), unless `must_run` is False (a test of "whole or nothing" whenever the
    interrupt lands: then a command already done is not interrupted)."""
    mark = uuid.uuid4().hex
    proc = subprocess.Popen(_argv([str(a) for a in args]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd or ROOT, start_new_session=True,
                            env={**os.environ, MARK: mark})
    tree = Tree(mark, proc.pid)
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while time.monotonic() < deadline and proc.poll() is None:
        if wait_for is not None and wait_for.exists():
            break
        if when is not None and when(proc.pid):
            break
        if after is not None and time.monotonic() - started >= after:
            break
        tree.scan()
        time.sleep(0.01)
    assert proc.poll() is None or not must_run, \
        f"the command ended before the interrupt: {proc.returncode}"
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    tree.scan()
    out, err = proc.communicate(timeout=timeout)
    tree.assert_none_left()
    return Result(proc.returncode, out, err)


@dataclass
class Process:
    pid: int
    cmdline: str


def _stat(pid: int | str) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after "(comm)": state, ppid, ...
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _cmdline(pid: int | str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Tree:
    """The processes of a command marked `mark`, as they come and go: those whose
    environment has MARK=`mark`, and every descendant of one seen (redis-server overwrites its
    environment with its process title: it is found as its parent's child). Each is
    remembered with its start time (a pid reused since is not it)."""

    def __init__(self, mark: str, root: int | None = None) -> None:
        self.needle = f"{MARK}={mark}".encode()
        self.seen: dict[int, int] = {}  # pid -> start time
        if root is not None and (st := _stat(root)) is not None:
            self.seen[root] = st[2]

    def scan(self) -> list[Process]:
        """The command's processes running now (zombies are not running)."""
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (st := _stat(entry)) is not None:
                stats[int(entry)] = st
        for pid, (_state, _ppid, started) in stats.items():
            if pid not in self.seen and self._marked(pid):
                self.seen[pid] = started
        grew = True
        while grew:  # descendants of those seen
            grew = False
            for pid, (_state, ppid, started) in stats.items():
                if pid not in self.seen and self.seen.get(ppid) == stats.get(ppid, ("", 0,
                                                                                    -1))[2]:
                    self.seen[pid] = started
                    grew = True
        return [Process(pid, _cmdline(pid)) for pid, started in self.seen.items()
                if pid in stats and stats[pid][2] == started and stats[pid][0] != "Z"]

    def _marked(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return self.needle in f.read().split(b"\0")
        except OSError:
            return False

    def assert_none_left(self) -> None:
        """No process of the command runs (given a little time to go)."""
        deadline = time.monotonic() + GONE_WITHIN
        left = self.scan()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self.scan()
        for p in left:  # (not to leak them into the next test)
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
        assert not left, f"processes left running: {left}"


def has_read(nbytes: int) -> Callable[[int], bool]:
    """`interrupt(when=has_read(n))`: once a process of the command's group has read `n` bytes
    (its /proc/PID/io rchar; an interpreter's start reads about 2.5 MB). A file read whole can
    be open too briefly to be seen open between two looks; what was read stays counted."""

    def check(pgid: int) -> bool:
        for pid in _group(pgid):
            with contextlib.suppress(OSError, ValueError):
                for line in Path("/proc", str(pid), "io").read_text().splitlines():
                    if line.startswith("rchar:") and int(line.split()[1]) >= nbytes:
                        return True
        return False

    return check


def _group(pgid: int) -> list[int]:
    """The processes of a process group (the command and its workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "(comm)": state, ppid, pgrp, ...
        if int(fields[2]) == pgid:
            pids.append(int(entry))
    return pids


def opened(path: Path | str) -> Callable[[int], bool]:
    """`interrupt(when=opened(path))`: once a process of the command's group has `path` (or a
    file whose name contains it) open."""
    name = str(path)

    def check(pgid: int) -> bool:
        for pid in _group(pgid):
            fds = Path("/proc", str(pid), "fd")
            try:
                for fd in os.listdir(fds):
                    with contextlib.suppress(OSError):
                        if name in os.readlink(fds / fd):
                            return True
            except OSError:
                continue
        return False

    return check


def big_datadir(path: Path, records: int = 200_000, segments: int = 2,
                key: bytes = b"big") -> Path:
    """A data directory of `records` XADD records (one stream, explicit IDs) in `segments`
    segments, written straight with the codec: seconds of work for a command that reads it
    (replay, --deep verify, restore, dump), a second or two to make."""
    from streamkeep.aof import codec
    from streamkeep.aof import manifest as manifest_mod
    from streamkeep.aof.fs import RealFS

    path.mkdir(parents=True)
    per = -(-records // segments)
    lsn = 1
    entries = []
    for number in range(1, segments + 1):
        first = lsn
        parts = [codec.encode_header(number, first)]
        for _ in range(min(per, records - lsn + 1)):
            parts.append(codec.encode(lsn, 1_795_000_000_000 + lsn, 0, [
                [b"XADD", key, b"%d-0" % lsn, b"field", b"value %d" % lsn]]))
            lsn += 1
        name = manifest_mod.segment_file(number)
        (path / name).write_bytes(b"".join(parts))
        entries.append(manifest_mod.SegmentEntry(name, number, first))
    manifest_mod.store(RealFS(), str(path), manifest_mod.Manifest(entries, None))
    return path


def assert_refused(result: Result, code: int, *names: str | Path) -> str:
    """The command failed as a careless user deserves: exit status `code`, exactly one line on
    stderr, naming every one of `names` (a file, an offset, a port...), and no traceback.
    Returns that line."""
    assert "Traceback" not in result.err and "Exception" not in result.err, result.err
    assert result.code == code, (result.code, result.err)
    lines = result.err_lines
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.err}"
    for name in names:
        assert str(name) in lines[0], f"{name!r} not named in: {lines[0]}"
    return lines[0]


def assert_usage(result: Result, *names: str | Path) -> str:
    """A usage error: exit status 3, the usage (its first line, then its continuation lines,
    indented, as it wraps), then one error line naming every one of `names`, no traceback.
    Returns the error line."""
    assert "Traceback" not in result.err, result.err
    assert result.code == 3, (result.code, result.err)
    *usage, error = result.err_lines
    assert usage, f"expected the usage and one error line, got:\n{result.err}"
    assert usage[0].startswith("usage: streamkeep"), usage[0]
    assert all(line.startswith(" ") for line in usage[1:]), \
        f"expected the usage and one error line, got:\n{result.err}"
    assert "error:" in error, error
    for name in names:
        assert str(name) in error, f"{name!r} not named in: {error}"
    return error


def tree_state(path: Path, ignore: Sequence[str] = ()) -> dict[str, str]:
    """Every file under `path` (relative name -> sha256 of its bytes): equal before and after
    means nothing was written, created or removed there. `ignore`: names left out (LOCK, which
    a command that opens the directory rewrites with its pid, as documented)."""
    state: dict[str, str] = {}
    if not path.exists():
        return state
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name in ignore:
                continue
            full = Path(root) / name
            # (a pipe or a device is what it is, never read: reading a pipe would block)
            state[str(full.relative_to(path))] = (
                hashlib.sha256(full.read_bytes()).hexdigest() if full.is_file()
                else f"special {full.lstat().st_mode:o}")
    return state


def lock_taken_by(directory: Path) -> Callable[[int], bool]:
    """`interrupt(when=lock_taken_by(dir))`: once the command holds the data directory's lock
    (its LOCK file names its pid): the replay that follows is under way."""

    def check(pid: int) -> bool:
        try:
            return (directory / "LOCK").read_text().strip() == str(pid)
        except OSError:
            return False

    return check


def resp_aof(path: Path, commands: int = 300_000, key: bytes = b"big") -> Path:
    """A Redis appendonly.aof of `commands` XADDs (explicit IDs): seconds of `streamkeep
    import` work, a fraction of a second to write."""
    parts = []
    for i in range(1, commands + 1):
        value, entry = b"value %d" % i, b"%d-0" % i
        parts.append(b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$5\r\nfield\r\n"
                     b"$%d\r\n%s\r\n" % (len(key), key, len(entry), entry, len(value), value))
    path.write_bytes(b"".join(parts))
    return path
