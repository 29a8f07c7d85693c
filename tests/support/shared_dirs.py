"""Shared data directories in tests (Engine.open(path, shared=True)): the detached servers they
start, found from outside by their command line (`streamkeep serve --shared ... --dir PATH`),
and stopped at the end of a test so that none outlives it (a server is meant to outlive the
process that started it: the test is the exception). `shared_dir` (tests/conftest.py) yields
a fresh directory and does that at teardown."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.pids import alive, wait_gone

STOP_TIMEOUT = 30.0


def servers_of(path: Path | str) -> list[int]:
    """The pids of the running shared servers of the directory `path`."""
    return servers_under(path, exact=True)


def servers_under(root: Path | str, exact: bool = False) -> list[int]:
    """The pids of the running shared servers of directories in `root` (or of `root`)."""
    want = os.path.abspath(root).encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"serve" not in argv or b"--shared" not in argv or b"--dir" not in argv:
            continue
        where = argv[argv.index(b"--dir") + 1]
        if (where == want or not exact and where.startswith(want + b"/")) \
                and alive(int(name)):
            found.append(int(name))
    return sorted(found)


def stop_servers(path: Path | str) -> list[int]:
    """SIGTERM every shared server of `path` and wait for it to go (SIGKILL if it will not);
    the pids that were running."""
    pids = servers_of(path)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    for pid in pids:
        try:
            wait_gone(pid, STOP_TIMEOUT)
        except BaseException:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
            raise
    return pids


def assert_no_server(path: Path | str) -> None:
    """No shared server of `path` runs, once those on their way out (a server that could not
    start says so before it has exited) are gone."""
    for pid in servers_of(path):
        wait_gone(pid, STOP_TIMEOUT)
