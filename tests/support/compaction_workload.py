"""Child process for the compaction crash tests (tests/crash/test_compaction.py): the seeded
workload of tests/support/aof_workload.py on a data directory, with a compaction that SIGKILLs
its own process at a chosen step.

    python -m tests.support.compaction_workload DIR SEED [--policy always] [--segment-max 2048]
        [--bulk N] [--first N] [--second N] [--step NAME|none] [--mode wait|writes|build]
        [--after K] [--wait-lmdb]

1. opens DIR (automatic compaction off, fake clock) and prints "ready";
2. --bulk N: N small XADDs to the key "bulk" with explicit IDs (see `bulk_commands`), to make
   the build child's work long; no acks, prints "bulk" after them;
3. commands [0, first) of the workload, printing "ack <i>" after each; then, if first > 0, a
   compaction that must succeed (the base snapshot of the next one): prints "base <lsn>";
4. commands [first, second), acked;
5. arms `compactor.on_step`: at step NAME it prints "step NAME <lsn>" and SIGKILLs this
   process (os.kill(os.getpid(), SIGKILL)); at "spawned" it always prints "build <pid>" (the
   build child) first;
6. --mode wait: compact(wait=True), no other writes: nothing is in flight at the kill.
   --mode writes: compact(wait=False), then the workload goes on from command `second` (acked)
   until the kill; a thread waiting for the compaction prints "compact ok <lsn>" or
   "compact error <message>" (with --step none nothing kills us: the test kills the build
   child and then us).
   --mode build: the step is ignored; once the build child runs (after --wait-lmdb: once it
   has imported lmdb, i.e. finished starting), K = --after more commands are acked while it
   runs, then we SIGKILL ourselves, printing "kill <lsn>" first.
Every "ack" line is one os.write: the test reads whole lines only.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

from streamkeep import Engine
from tests.support.aof_workload import FakeClock, digests_after, run

STEPS = ("rotated", "spawned", "built", "published", "switched", "removed")


def bulk_commands(n: int) -> Iterator[list[str]]:
    """N XADDs independent of the clock (explicit IDs), trimmed so the state stays small."""
    for i in range(n):
        yield ["XADD", "bulk", "MAXLEN", "~", "1000", f"{i + 1}-1", "f", f"v{i}"]


def reference(seed: int, counts: list[int], bulk: int = 0) -> dict[int, str]:
    """Digest after `bulk` bulk commands and then k workload commands, for each k."""
    clock = FakeClock()
    engine = Engine(clock=clock)
    for argv in bulk_commands(bulk):
        engine.execute(*argv)
    return digests_after(engine, clock, seed, counts)


def _say(line: str) -> None:
    os.write(1, line.encode() + b"\n")  # one small write: never split across a kill


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(10)  # not reached


def _lmdb_loaded(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return "lmdb" in f.read()
    except OSError:
        return True  # gone already: nothing to wait for


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="tests.support.compaction_workload")
    parser.add_argument("dir")
    parser.add_argument("seed", type=int)
    parser.add_argument("--policy", default="always")
    parser.add_argument("--segment-max", type=int, default=2048)
    parser.add_argument("--bulk", type=int, default=0)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--second", type=int, default=0)
    parser.add_argument("--step", default="none", choices=[*STEPS, "none"])
    parser.add_argument("--mode", default="wait", choices=["wait", "writes", "build"])
    parser.add_argument("--after", type=int, default=0)
    parser.add_argument("--wait-lmdb", action="store_true")
    parser.add_argument("--backlog-memory", default="0")  # "1": every clean node cold
    args = parser.parse_args(argv)

    clock = FakeClock()
    engine = Engine.open(args.dir, appendfsync=args.policy,
                         aof_segment_max_bytes=args.segment_max,
                         auto_aof_rewrite_percentage=0, clock=clock,
                         backlog_memory=args.backlog_memory)
    compactor = engine.datadir.compactor
    _say("ready")
    if args.bulk:
        for cmd in bulk_commands(args.bulk):
            engine.execute(*cmd)
        _say("bulk")

    def ack(i: int) -> None:
        _say(f"ack {i}")

    run(engine, clock, args.seed, 0, args.first, ack)
    if args.first:
        base = engine.compact(wait=True)
        assert base is not None
        _say(f"base {base.lsn}")
    run(engine, clock, args.seed, args.first, args.second, ack)

    spawned = threading.Event()
    build_pid = [0]

    def on_step(name: str) -> None:
        job = compactor.job
        if name == "spawned":
            build_pid[0] = job.proc.pid
            _say(f"build {job.proc.pid}")
            spawned.set()
        if args.mode != "build" and name == args.step:
            _say(f"step {name} {job.lsn}")
            _die()

    compactor.on_step = on_step
    if args.mode == "wait":
        entry = engine.compact(wait=True)
        _say(f"done {entry}")  # the step never came: the test fails on this
        engine.close()
        return

    def waiter() -> None:
        try:
            entry = engine.compact(wait=True)
        except Exception as err:  # CompactionError: reported to the test
            _say(f"compact error {err}")
        else:
            _say(f"compact ok {entry.lsn if entry else None}")

    if args.mode == "writes":
        threading.Thread(target=waiter, daemon=True).start()
        run(engine, clock, args.seed, args.second, None, ack)  # until killed
        return

    # --mode build: kill ourselves while the build child runs, with writes going on.
    compactor.compact(wait=False)
    spawned.wait()
    deadline = time.monotonic() + 30
    while args.wait_lmdb and not _lmdb_loaded(build_pid[0]) and time.monotonic() < deadline:
        time.sleep(0.005)
    if args.wait_lmdb:
        time.sleep(0.1)  # from importing lmdb to its prctl takes a few milliseconds
    run(engine, clock, args.seed, args.second, args.second + args.after, ack)
    _say(f"kill {engine.journal.lsn}")
    _die()


if __name__ == "__main__":
    main(sys.argv[1:])
