"""A process seen from outside by its pid: whether it still runs, and waiting for it to go
(a child that must die with its parent, reaped by init once orphaned)."""

from __future__ import annotations

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
