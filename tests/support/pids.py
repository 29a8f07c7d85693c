"""A process seen from outside by its pid: whether it still runs, and waiting for it to go
(a child that must die with its parent, reaped by init once orphaned)."""

from __future__ import annotations

import time

import pytest


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, timeout: float) -> float:
    """Seconds until `pid` is gone; fails after `timeout`."""
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > timeout:
            pytest.fail(f"process {pid} is still running {timeout} s later")
        time.sleep(0.01)
    return time.monotonic() - start
