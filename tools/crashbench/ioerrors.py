"""The crash bench's I/O-error mode: a full disk, EIO and ENOSPC on AOF writes and fsyncs, met by
a client that retries every error reply.

Owns the error points and the fault models (`FAULTS`, one report row each). The workload runs in
process on `faultfs.FaultyFS`; at a chosen point (after N more successful calls of that kind, or
with N bytes of disk left) the fault starts. The client retries each command answered with an
error reply, as a producer that retries MISCONF does; after a few refusals the fault clears
(the operator freed space, the device recovered). A failed fsync stops writes until the
directory is reopened, so there the process dies (its threads stopped, no close) and the
directory is opened again before the client goes on retrying. Checked:

- `refused-kept`: a command answered with an error left no trace, in the live state right
  after the reply and after every recovery (an error reply means nothing happened, so a
  retrying client writes each logical operation exactly once);
- every invariant of a recovery (`acked-lost`, `prefix`, `groups`, ...) at the reopen after a
  failed fsync and at the crash that ends the run, judged strictly: nothing is in flight;
- `recovery`: a fault surfaces as an error reply, never as an exception out of the engine, and
  the directory opens afterwards.
Every engine is opened by `planted.open_engine`, the way planted bugs come in.
Must not touch: the engine's error handling (only what it answers and what it recovers).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.model import EngineTarget, read_state
from streamkeep.tools.crashbench.report import Found, Row
from streamkeep.tools.crashbench.target import CommandFailed
from streamkeep.tools.crashbench.workload import Workload


@dataclass(frozen=True)
class Fault:
    label: str  # the report row's model
    call: str  # "space" (a full disk), "write" or "fsync"
    errno: int
    preallocate: int  # aof-preallocate: 0 models a file system that cannot allocate ahead


PREALLOCATE = 2048  # small, so that a run crosses many top-ups
FAULTS = (
    Fault("ENOSPC: disk full", "space", errno.ENOSPC, PREALLOCATE),
    Fault("ENOSPC on write", "write", errno.ENOSPC, 0),
    Fault("EIO on write", "write", errno.EIO, PREALLOCATE),
    Fault("EIO on fsync", "fsync", errno.EIO, PREALLOCATE),
    Fault("ENOSPC on fsync", "fsync", errno.ENOSPC, PREALLOCATE),
)
BASE_TIME = 1_700_000_000_000
SEGMENT_MAX_BYTES = 16 << 10
PACE_S = 0.004  # per command, when the fault is on everysec's fdatasync
REFUSALS_BEFORE_CLEARING = 3  # error replies the retrying client gets before the fault clears
RETRY_PAUSE_S = 0.05  # the client's pause between retries
RETRY_DEADLINE_S = 30.0  # a command still refused this long after the fault cleared: a finding

Progress = Callable[[str, int, int], None]


def rows(policy: str, seed: int, ops: int, points: int, progress: Progress | None = None
         ) -> list[Row]:
    """`points` error points per fault, each in a run of up to `ops` operations."""
    from streamkeep.tools import temporaries
    from streamkeep.tools.crashbench.runs import scratch_root

    root = scratch_root(None)
    out = []
    try:
        for fault in FAULTS:
            row = Row(policy, "ioerror", fault.label)
            began = time.monotonic()
            rng = random.Random(f"crashbench-ioerror:{seed}:{policy}:{fault.label}")
            for i in range(points):
                _point(row, os.path.join(root, f"{fault.call}-{fault.errno}-{i}"), policy,
                       seed + i, ops, fault, _after(rng, fault, policy, ops))
                if progress is not None:
                    progress(f"{policy} ioerror {fault.label}", i + 1, points)
            row.reached += points
            row.seconds = time.monotonic() - began
            out.append(row)
    finally:
        temporaries.remove(root)
    return out


def _after(rng: random.Random, fault: Fault, policy: str, ops: int) -> int:
    """Where the fault starts: bytes of disk left for "space"; else successful calls first.
    Writes: one per command; fdatasyncs: one per command under always, else a few (once a
    second, and at each rotation of the small segments)."""
    if fault.call == "space":
        return rng.randint(0, 60 * ops)  # a record is ~100-300 bytes
    return rng.randint(0, 2 * ops // 3 if fault.call == "write" or policy == "always" else 3)


class _Run:
    """One error point's run: the engine (reopened after a failed fsync), the fault layer, the
    retrying client's history."""

    def __init__(self, row: Row, directory: str, policy: str, fault: Fault, token: str) -> None:
        from streamkeep.tools.crashbench.faultfs import FaultyFS

        self.row, self.directory, self.policy, self.fault, self.token = (
            row, directory, policy, fault, token)
        self.fs = FaultyFS()
        self.clock = _Clock()
        self.checker = Checker(policy)
        self.engine: Any = None
        self.fired = False
        self.open()

    def open(self) -> None:
        from streamkeep.tools.crashbench.planted import open_engine

        # Small segments: rotations (each with its fdatasyncs) happen under every policy.
        self.engine = open_engine(self.directory, self.fs, appendfsync=self.policy,
                                  clock=self.clock, auto_aof_rewrite_percentage=0,
                                  aof_segment_max_bytes=SEGMENT_MAX_BYTES,
                                  aof_preallocate=self.fault.preallocate)

    def arm(self, after: int) -> None:
        fault = self.fault
        if fault.call == "space":
            self.fs.fill(after)
        elif fault.call == "write":
            self.fs.fail_writes(fault.errno, after=after, partial=bool(after % 2))
        else:
            self.fs.fail_fsyncs(fault.errno, after=after)

    def find(self, invariant: str, detail: str) -> None:
        self.row.violations[invariant] += 1
        self.row.found.append(Found(invariant, f"{self.fault.label}: {detail}", self.token))

    def execute(self, op: int, argv: list[bytes]) -> tuple[bool, Any]:
        """Run `argv` as the retrying client does: (done, reply); not done if the run must end
        (a finding that leaves nothing more to check)."""
        from streamkeep.engine.wire.errors import StreamkeepError

        refusals, cleared_at = 0, None
        while True:
            try:
                return True, EngineTarget(self.engine).execute(argv)
            except CommandFailed as error:
                if not str(error).startswith("MISCONF"):
                    return True, error  # an ordinary error reply: the workload's own
            except (OSError, StreamkeepError) as error:  # not a reply: no server would send it
                self.find("recovery", f"op {op}: {argv[0].decode()} raised {error!r} instead "
                                      f"of an error reply (MISCONF)")
                return False, None
            self.fired = True
            refusals += 1
            if v := self.checker.refused(read_state(EngineTarget(self.engine)), argv,
                                         f"op {op} right after its MISCONF"):
                self.find(v.invariant, v.detail)
                return False, None
            if refusals == REFUSALS_BEFORE_CLEARING:
                self.fs.clear()  # space freed, the device healthy again
                cleared_at = time.monotonic()
            if refusals >= REFUSALS_BEFORE_CLEARING and self.engine.journal.fsync_failed:
                if not self.crash_and_reopen(f"after op {op}'s MISCONF (a failed fsync)"):
                    return False, None
            elif cleared_at is not None and time.monotonic() - cleared_at > RETRY_DEADLINE_S:
                self.find("recovery", f"op {op} still refused {RETRY_DEADLINE_S:g} s after "
                                      f"the fault cleared")
                return False, None
            time.sleep(RETRY_PAUSE_S)

    def crash_and_reopen(self, when: str, final: bool = False) -> bool:
        """The process dies (no close) and the directory is opened again; its state must be
        the acknowledged history's. False if it does not open or that is not its state. The
        `final` one (the run's end) counts the point as covered."""
        from streamkeep.engine.wire.errors import StreamkeepError
        from streamkeep.tools.crashbench.faultfs import stop_threads

        self.fs.clear()
        stop_threads(self.engine)
        _close_fds_under(self.directory)  # ... its descriptors (the lock's too) die with it
        began = time.perf_counter()
        try:
            self.open()
        except (StreamkeepError, OSError) as error:
            self.find("recovery", f"{when}: the directory does not open: {error}")
            if final:
                self.row.add("refused", len(self.checker.lineage), 0, 0.0, [], 0.0, 0,
                             at_s=self.row.seconds_so_far(), where=self.token)
            self.engine = None
            return False
        seconds = time.perf_counter() - began
        state = read_state(EngineTarget(self.engine))
        verdict = self.checker.judge(state, float(len(self.checker.lineage)))
        for v in verdict.violations:
            self.find(v.invariant, f"{when}: {v.detail}")
        log_bytes = sum(os.path.getsize(os.path.join(self.directory, n))
                        for n in os.listdir(self.directory) if n.endswith(".aof"))
        if final:  # (its violations are counted by find())
            self.row.add("clean", len(self.checker.lineage), verdict.lost_acked, 0.0, [],
                         seconds, log_bytes, at_s=self.row.seconds_so_far(),
                         where=self.token)
        else:
            self.row.recovery_s.append(seconds)
            self.row.log_bytes.append(log_bytes)
        return not verdict.violations

    def close(self) -> None:
        if self.engine is not None:
            from streamkeep.tools.crashbench.faultfs import stop_threads

            stop_threads(self.engine)
            _close_fds_under(self.directory)


def _point(row: Row, directory: str, policy: str, seed: int, ops: int, fault: Fault,
           after: int) -> None:
    token = _token(policy, seed, ops, fault, after)
    row.linked = len(row.found)  # what an earlier point found is not this one's
    run = _Run(row, directory, policy, fault, token)
    pace = PACE_S if fault.call == "fsync" and policy == "everysec" else 0.0
    workload = Workload(seed)
    run.arm(after)
    try:
        for i in range(ops):
            run.clock.now = BASE_TIME + i
            if pace:  # under everysec, a run long enough for the once-a-second sync to come
                time.sleep(pace)
            argv = workload.next_argv()
            done, reply = run.execute(i, argv)
            if not done:
                return
            run.checker.acked(i, argv, reply, float(i))
            workload.observe(argv, None if isinstance(reply, CommandFailed) else reply)
        row.acked += len(run.checker.lineage)
        if run.fired:  # the run ended before the fault's point: reached, not covered
            run.crash_and_reopen("at the end of the run", final=True)
    finally:
        run.close()
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


def _token(policy: str, seed: int, ops: int, fault: Fault, after: int) -> str:
    return f"ioerror:{policy}:{seed}:{ops}:{fault.call}:{errno.errorcode[fault.errno]}:" \
           f"{after}:{fault.preallocate}"


def replay(token: str) -> Row:
    from streamkeep.tools import temporaries
    from streamkeep.tools.crashbench.runs import (
        POLICIES,
        scratch_root,
        token_choice,
        token_number,
    )

    _kind, policy, seed_text, ops_text, call, name, after_text, preallocate = token.split(":")
    policy = token_choice(token, "policy", policy, POLICIES)
    seed = token_number(token, "seed", seed_text)
    ops = token_number(token, "ops", ops_text, least=1)
    after = token_number(token, "after", after_text, least=0)
    fault = next((f for f in FAULTS if f.call == call and errno.errorcode[f.errno] == name
                  and str(f.preallocate) == preallocate), None)
    if fault is None:
        raise ValueError(f"--replay {token}: no such I/O fault")
    root = scratch_root(None)
    row = Row(policy, "replay", fault.label, reached=1)
    try:
        _point(row, os.path.join(root, "d"), policy, seed, ops, fault, after)
    finally:
        temporaries.remove(root)
    return row


class _Clock:
    def __init__(self) -> None:
        self.now = BASE_TIME

    def __call__(self) -> int:
        return self.now
