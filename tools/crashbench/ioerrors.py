"""The crash bench's I/O-error mode: EIO and ENOSPC on an AOF write or fsync, then a crash.

Owns the error points. The workload runs in process on `faultfs.FaultyFS`; at a chosen point
(after N more successful calls of that kind) writes or fdatasyncs of the AOF start failing.
The first command answered with an error after it is the one whose outcome is unknown (the
engine keeps a failed record to retry it: it may come back); the run stops there, the fault
is cleared, the process "dies" (its threads stopped, no close) and the directory is opened
again with the real file system. The state must be the acknowledged prefix, or that plus the
failed command; and a command acknowledged while the disk refused would be a lost write.
Each fault is a row of the report ("EIO on fsync", ...).
Must not touch: the engine's error handling (only what it answers and what it recovers).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import time
from collections.abc import Callable
from typing import Any

from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.model import EngineTarget, read_state
from streamkeep.tools.crashbench.report import Found, Row
from streamkeep.tools.crashbench.target import CommandFailed
from streamkeep.tools.crashbench.workload import Workload

# (row label, the call that fails, errno)
FAULTS = (("ENOSPC on write", "write", errno.ENOSPC), ("EIO on write", "write", errno.EIO),
          ("EIO on fsync", "fsync", errno.EIO), ("ENOSPC on fsync", "fsync", errno.ENOSPC))
BASE_TIME = 1_700_000_000_000
SEGMENT_MAX_BYTES = 16 << 10
PACE_S = 0.004  # per command, when the fault is on everysec's fdatasync

Progress = Callable[[str, int, int], None]


def rows(policy: str, seed: int, ops: int, points: int, progress: Progress | None = None
         ) -> list[Row]:
    """`points` error points per fault, each in a run of up to `ops` operations."""
    from streamkeep.tools import leftovers
    from streamkeep.tools.crashbench.runs import scratch_root

    root = scratch_root(None)
    out = []
    try:
        for label, call, err in FAULTS:
            row = Row(policy, "ioerror", label)
            began = time.monotonic()
            rng = random.Random(f"crashbench-ioerror:{seed}:{policy}:{label}")
            for i in range(points):
                # Writes: one per command; fdatasyncs: one per command under always, else
                # a few (once a second, and at each rotation of the small segments).
                after = rng.randint(0, 2 * ops // 3 if call == "write" or policy == "always"
                                    else 3)
                _point(row, os.path.join(root, f"{call}-{err}-{i}"), policy, seed + i, ops,
                       call, err, after)
                if progress is not None:
                    progress(f"{policy} ioerror {label}", i + 1, points)
            row.reached += points
            row.seconds = time.monotonic() - began
            out.append(row)
    finally:
        leftovers.remove(root)
    return out


def _point(row: Row, directory: str, policy: str, seed: int, ops: int, call: str, err: int,
           after: int) -> None:
    from streamkeep import Engine
    from streamkeep.engine.wire.errors import StreamkeepError
    from streamkeep.tools.crashbench.faultfs import FaultyFS, stop_threads

    fs = FaultyFS()
    clock = _Clock()
    pace = PACE_S if call == "fsync" and policy == "everysec" else 0.0
    checker = Checker(policy)
    workload = Workload(seed)
    # Small segments: rotations (each with its fdatasyncs) happen under every policy.
    engine = Engine.open(directory, appendfsync=policy, clock=clock, fs=fs,
                         auto_aof_rewrite_percentage=0, aof_segment_max_bytes=SEGMENT_MAX_BYTES)
    target = EngineTarget(engine)
    if call == "write":
        fs.fail_writes(err, after=after, partial=bool(after % 2))
    else:
        fs.fail_fsyncs(err, after=after)
    failed: list[bytes] | None = None
    for i in range(ops):
        clock.now = BASE_TIME + i
        if pace:  # under everysec, a run long enough for the once-a-second sync to come
            time.sleep(pace)
        argv = workload.next_argv()
        reply: Any
        try:
            reply = target.execute(argv)
        except CommandFailed as error:
            if str(error).startswith("MISCONF"):
                failed = argv  # the disk refused it: its outcome is unknown
                workload.observe(argv, None)
                break
            reply = error
        except (OSError, StreamkeepError) as error:  # not a reply: what a server would not send
            row.violations["recovery"] += 1
            row.found.append(Found("recovery", f"{argv[0].decode()} raised {error!r} instead "
                                   f"of an error reply (MISCONF)",
                                   _token(policy, seed, ops, call, err, after)))
            failed = argv
            workload.observe(argv, None)
            break
        checker.acked(i, argv, reply, float(i))
        workload.observe(argv, None if isinstance(reply, CommandFailed) else reply)
    row.acked += len(checker.lineage)
    fired = fs.failed_writes + fs.failed_fdatasyncs
    fs.clear()
    stop_threads(engine)  # the process dies here: no close(), nothing more written
    _close_fds_under(directory)  # ... and its descriptors (the lock's too) with it
    began = time.perf_counter()
    try:
        with Engine.open(directory, auto_aof_rewrite_percentage=0) as reopened:
            seconds = time.perf_counter() - began
            state = read_state(EngineTarget(reopened))
    except (StreamkeepError, OSError) as error:
        v = checker.violation("recovery", f"the directory does not open after {err} on "
                                          f"{call}: {error}")
        row.add("refused", len(checker.lineage), 0, 0.0, [v], 0.0, 0)
        row.found.append(Found(v.invariant, v.detail, _token(policy, seed, ops, call, err,
                                                             after)))
        return
    if not fired:  # the run ended before the fault's point: reached, not covered
        shutil.rmtree(directory, ignore_errors=True)
        return
    verdict = checker.judge(state, float(len(checker.lineage)), in_flight=failed)
    log_bytes = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)
                    if n.endswith(".aof"))
    row.add("clean", len(checker.lineage), verdict.lost_acked, 0.0, verdict.violations,
            seconds, log_bytes)
    for v in verdict.violations:
        row.found.append(Found(v.invariant, f"{os.strerror(err)} on {call} after {after} "
                               f"calls: {v.detail}", _token(policy, seed, ops, call, err, after)))
    shutil.rmtree(directory, ignore_errors=True)


def _close_fds_under(directory: str) -> None:
    """Close this process's descriptors on files in `directory`, as its death would."""
    prefix = os.path.realpath(directory) + os.sep
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith(prefix):
                os.close(int(name))
        except OSError:
            continue  # the listing's own descriptor, or one closed meanwhile


def _token(policy: str, seed: int, ops: int, call: str, err: int, after: int) -> str:
    return f"ioerror:{policy}:{seed}:{ops}:{call}:{errno.errorcode[err]}:{after}"


def replay(token: str) -> Row:
    _kind, policy, seed, ops, call, name, after = token.split(":")
    from streamkeep.tools import leftovers
    from streamkeep.tools.crashbench.runs import scratch_root

    root = scratch_root(None)
    row = Row(policy, "replay", f"{name} on {call}", reached=1)
    try:
        _point(row, os.path.join(root, "d"), policy, int(seed), int(ops), call,
               getattr(errno, name), int(after))
    finally:
        leftovers.remove(root)
    return row


class _Clock:
    def __init__(self) -> None:
        self.now = BASE_TIME

    def __call__(self) -> int:
        return self.now
