"""Process crashes (SIGKILL) under every appendfsync policy, with real processes and real files.

A child process (`python -m tests.support.aof_workload`) opens a data directory with a small segment
size (so rotations happen), a deterministic fake clock and a seeded mixed workload, and prints
"ack <i>" after each command returns. The parent kills it with SIGKILL at a random point, reopens
the directory in process and checks that the recovered state is exactly the state of an
in-memory engine after the acknowledged prefix (k = last ack + 1 commands) or after that prefix
plus the command in flight (k + 1). The AOF writes each record to the OS before the command
returns and the page cache survives SIGKILL, so this must hold under `always`, `everysec` and
`no` alike. Chained crashes (kill, recover, continue the same workload in a new child, kill
again) check that recovery leaves a directory that can be appended to and recovered again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import MAPPABLE_FILE_SYSTEMS, RealFS, file_system_type
from streamkeep.aof.segment_reader import SegmentReader
from tests.support.aof_workload import FakeClock, reference
from tests.support.aof_workload import run as run_workload

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ["always", "everysec", "no"]


def start_child(directory: Path, policy: str, seed: int, segment_max: int,
                start: int = 0) -> subprocess.Popen:
    errlog = directory.with_name(directory.name + ".stderr")
    with open(errlog, "ab") as err:  # a file, not a pipe nobody reads: it cannot fill up
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.aof_workload", str(directory), policy,
             str(seed), str(segment_max), str(start)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, start_new_session=True,
        )
    proc.errlog = errlog  # type: ignore[attr-defined]
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line != b"ready\n":
        proc.kill()
        proc.wait(timeout=10)
        pytest.fail(f"workload child did not start: {line!r}\n{errlog.read_text()}")
    return proc


def kill_after(proc: subprocess.Popen, acks: int) -> int:
    """Let the child acknowledge at least `acks` commands, SIGKILL it, and return the index of
    the last command it acknowledged (acks already in the pipe are read after the kill)."""
    assert proc.stdout is not None
    last = -1
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < acks:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"workload child exited early (rc={proc.wait()}):\n"
                            f"{proc.errlog.read_text()}")  # type: ignore[attr-defined]
            last = int(line.split()[1])
            seen += 1
            assert time.monotonic() < deadline, "workload child is too slow"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    # Read what is left through the same buffered reader (communicate() would bypass lines
    # readline() already buffered); the pipe's contents survive the kill.
    rest = proc.stdout.read()
    proc.stdout.close()
    proc.wait(timeout=30)
    for line in rest.split(b"\n")[:-1]:  # complete lines only
        if line.startswith(b"ack "):
            last = int(line.split()[1])
    assert proc.returncode == -signal.SIGKILL
    return last


def recovered_digest(directory: Path) -> str:
    with Engine.open(str(directory), appendfsync="always") as engine:
        return engine.digest()


def check_recovery(directory: Path, seed: int, last_acked: int) -> int:
    """The recovered state is the acknowledged prefix, or that plus the command in flight.
    Returns the number of commands recovered."""
    acked = last_acked + 1  # commands 0..last_acked returned
    want = reference(seed, [acked, acked + 1])
    got = recovered_digest(directory)
    assert got in (want[acked], want[acked + 1]), (
        f"seed {seed}: recovered state is neither the {acked} acknowledged commands nor "
        f"{acked + 1} (with the one in flight)"
    )
    return acked if got == want[acked] else acked + 1


def zero_tail(directory: Path) -> int:
    """Zeros after the newest segment's last record: the mapped tail a killed child left."""
    newest = sorted(directory.glob("segment-*.aof"))[-1]
    reader = SegmentReader(RealFS(), str(newest))
    for _batch in reader.batches():
        pass
    return reader.zero_tail


def crash_and_check(tmp: Path, policy: str, seed: int, rounds: int, segment_max: int,
                    rng: random.Random) -> None:
    directory = tmp / f"{policy}-{seed}"
    recovered = 0
    for _ in range(rounds):
        proc = start_child(directory, policy, seed, segment_max, start=recovered)
        last = kill_after(proc, rng.randint(150, 600))
        assert last >= recovered, "the child acknowledged nothing new"
        recovered = check_recovery(directory, seed, last)
    # A clean continuation after the last crash: the directory takes new writes and keeps them.
    clock = FakeClock()
    with Engine.open(str(directory), appendfsync=policy, aof_segment_max_bytes=segment_max,
                     clock=clock) as engine:
        run_workload(engine, clock, seed, recovered, recovered + 50)
    assert recovered_digest(directory) == reference(seed, [recovered + 50])[recovered + 50]
    segments = [n for n in os.listdir(directory) if n.startswith("segment-")]
    assert len(segments) > 1, "the test meant rotations to happen"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_keeps_every_acknowledged_command(tmp_path: Path, policy: str,
                                                  seed: int) -> None:
    rng = random.Random(f"crash:{policy}:{seed}")
    crash_and_check(tmp_path, policy, seed, rounds=2, segment_max=2048, rng=rng)


@pytest.mark.parametrize("policy", ["everysec", "no"])
def test_sigkill_while_appending_through_the_mapped_tail(tmp_path: Path, policy: str) -> None:
    """One segment (no rotation), so each kill lands while records are copied into the mapped
    tail: it leaves the zeros after the last record, and every acknowledged command is there."""
    if file_system_type(str(tmp_path)) not in MAPPABLE_FILE_SYSTEMS:
        pytest.skip("this file system does not take mapped appends")
    rng = random.Random(f"mapped:{policy}")
    directory = tmp_path / policy
    recovered = 0
    for _ in range(3):
        proc = start_child(directory, policy, 11, 1 << 26, start=recovered)
        last = kill_after(proc, rng.randint(150, 600))
        assert zero_tail(directory) > 0, "the killed child left no mapped tail"
        recovered = check_recovery(directory, seed=11, last_acked=last)
        assert zero_tail(directory) == 0, "the open cut the zeros"


def test_sigkill_with_tiny_segments(tmp_path: Path) -> None:
    """Segments of a few records: most kills land near a rotation."""
    rng = random.Random("tiny")
    crash_and_check(tmp_path, "always", 7, rounds=2, segment_max=300, rng=rng)


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
def test_sigkill_soak(tmp_path: Path, policy: str) -> None:
    for seed in range(100, 112):
        rng = random.Random(f"soak:{policy}:{seed}")
        segment_max = rng.choice([300, 1024, 4096, 1 << 16])
        crash_and_check(tmp_path, policy, seed, rounds=4, segment_max=segment_max, rng=rng)
