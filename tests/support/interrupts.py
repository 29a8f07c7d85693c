"""Interrupting a command and counting what it left (tests/careless/test_interrupts.py).

`Started` runs `python -m streamkeep ...` (or a Python script) as a real child process in a
session of its own, with a marker variable in its environment, which every process it starts
inherits (the Spark JVM and its Python workers, build children, servers, pool workers), and a
private TMPDIR. `processes()` counts the processes that carry the marker or descend from
one seen (tests.support.careless.Tree: found even after re-parenting to init); `wait_for` waits for a moment of the command's
work (a file appears, a child runs: never a fixed sleep), asserting the command still runs;
`send` sends a signal as it comes in real life (SIGINT and SIGHUP, from a terminal, reach the
whole process group; SIGTERM, from `kill`, the command alone); `finish` collects the exit
status and output, then waits (bounded) until no marked process is left. `entries` lists a
directory, `owned_by` names the temporaries a process made (their names carry its pid).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.careless import MARK, ROOT, Process, Result, Tree

TIMEOUT = 300.0  # a JVM start on a busy machine takes a while


class Started:
    """A command running as a child process, marked (see the module's docstring)."""

    def __init__(self, argv: Sequence[str | Path], tmp: Path, *, cwd: Path | None = None,
                 script: bool = False, tmpdir: Path | None = None) -> None:
        """`tmp`: where its private TMPDIR is made, unless `tmpdir` gives one (shared with an
        earlier run's)."""
        self.mark = uuid.uuid4().hex
        self.tmpdir = tmpdir or tmp / f"tmpdir-{self.mark[:8]}"
        self.tmpdir.mkdir(exist_ok=True)
        command = [sys.executable, *map(str, argv)] if script else \
            [sys.executable, "-m", "streamkeep", *map(str, argv)]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, cwd=cwd or ROOT, start_new_session=True,
            env={**os.environ, MARK: self.mark, "TMPDIR": str(self.tmpdir)})
        self.tree = Tree(self.mark, self.proc.pid)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def pids(self) -> set[int]:
        """Every process of the command seen so far."""
        return set(self.tree.seen)

    def processes(self) -> list[Process]:
        return self.tree.scan()

    def running(self, word: str) -> bool:
        """Whether a process of the command has `word` in its command line."""
        return any(word in p.cmdline for p in self.processes())

    def wait_for(self, what: Callable[[], object], timeout: float = TIMEOUT) -> None:
        """Until `what()` is true; the command must still be running then."""
        deadline = time.monotonic() + timeout
        while not what():
            assert self.proc.poll() is None, \
                f"the command ended first ({self.proc.returncode}): {self.proc.stderr.read()}"  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the moment never came"
            time.sleep(0.02)
        self.processes()  # (the pids of this moment)
        assert self.proc.poll() is None, "the command ended before the signal"

    def send(self, signum: int) -> None:
        """`signum` as it comes in real life: SIGINT (Ctrl-C) and SIGHUP (the terminal gone)
        to the process group, anything else (`kill`) to the command's process alone."""
        if signum in (signal.SIGINT, signal.SIGHUP):
            os.killpg(self.pid, signum)
        else:
            os.kill(self.pid, signum)

    def finish(self, timeout: float = TIMEOUT) -> Result:
        """The exit status and output; then no process of the command may be left."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.communicate()
        self.assert_no_process_left()
        return Result(self.proc.returncode, out, err)

    def assert_no_process_left(self) -> None:
        self.tree.assert_none_left()

    def kill(self) -> None:
        """SIGKILL the command's process alone (its children are on their own)."""
        os.kill(self.pid, signal.SIGKILL)


def entries(path: Path) -> set[str]:
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return set()


def owned_by(path: Path, pids: set[int]) -> set[str]:
    """The entries of `path` whose names carry one of `pids` as a temporary's does
    (`...-<pid>-<token>`)."""
    return {name for name in entries(path)
            if any(f"-{pid}-" in name for pid in pids)}


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def late_init(started: Any, go_on: Any) -> None:
    """A pool worker's initializer that says it runs (its pid on `started`), then waits for
    `go_on` before `temporaries.init_worker`: the window in which a Ctrl-C used to interrupt a
    starting worker, held open while a test signals the worker in it."""
    from streamkeep.tools import temporaries

    started.put(os.getpid())
    go_on.wait(60)
    temporaries.init_worker()
