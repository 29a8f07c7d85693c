"""A process seen from outside by its pid: whether it still runs, waiting for it to go (a
child that must die with its parent, reaped by init once orphaned), and stopping it (SIGSTOP)
for good before a test goes on."""

from __future__ import annotations

import os
import signal
import time

import pytest


def alive(pid: int) -> bool:
    """The process exists and has not finished exiting: not a zombie, or a zombie whose other
    threads are still on their way out (a killed process's leader turns zombie before them,
    and its files, sockets among them, close only with the last of them)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = fields.get("State", "").split()[:1]
    return state not in (["Z"], ["X"]) or int(fields.get("Threads", "1")) > 1


def wait_gone(pid: int, timeout: float) -> float:
    """Seconds until `pid` is gone; fails after `timeout`."""
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > timeout:
            pytest.fail(f"process {pid} is still running {timeout} s later")
        time.sleep(0.01)
    return time.monotonic() - start


def stopped(pid: int) -> bool:
    """Every thread of process `pid` is stopped (state T, or t under a tracer)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                stat = f.read()
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        if stat[stat.rindex(")") + 2] not in "Tt":
            return False
    return True


def stop(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP `pid` and return once every thread of it has stopped. kill() returns as soon
    as the signal is queued: the kernel hands it to one thread, which stops the others only
    once it runs itself (on a busy machine it may wait for a CPU; in an uninterruptible wait
    it acts when the wait ends), and until then the other threads run on: a replica's link
    thread receives, applies and acknowledges what the test stopped the replica to miss."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not stopped(pid):
        if time.monotonic() > deadline:
            pytest.fail(f"process {pid} has threads running {timeout} s after SIGSTOP")
        time.sleep(0.001)
