"""The careless-user suite's helpers (tests/careless/): `streamkeep` as a real child process
(`run`: exit status, stdout, stderr; `interrupt`: SIGINT once it has started, as Ctrl-C does),
the checks every case makes (`assert_refused`: the exit status, one line on stderr naming what
it must name, no traceback), and `tree_state` (every file's bytes under a path, to assert that
a refused command changed nothing)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0


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
              cwd: Path | None = None, timeout: float = TIMEOUT) -> Result:
    """Start `streamkeep *args`, send SIGINT to its process group (what Ctrl-C in a terminal
    does) once `wait_for` exists or `after` seconds have passed, and collect what it printed."""
    proc = subprocess.Popen(_argv([str(a) for a in args]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd or ROOT, start_new_session=True)
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    while time.monotonic() < deadline and proc.poll() is None:
        if wait_for is not None and wait_for.exists():
            break
        if after is not None and time.monotonic() - started >= after:
            break
        time.sleep(0.01)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=timeout)
    return Result(proc.returncode, out, err)


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


def tree_state(path: Path) -> dict[str, str]:
    """Every file under `path` (relative name -> sha256 of its bytes): equal before and after
    means nothing was written, created or removed there."""
    state: dict[str, str] = {}
    if not path.exists():
        return state
    for root, _dirs, files in os.walk(path):
        for name in files:
            full = Path(root) / name
            state[str(full.relative_to(path))] = hashlib.sha256(full.read_bytes()).hexdigest()
    return state
