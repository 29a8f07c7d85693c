"""A new user's walk through documentation pages (tests/docs/test_walkthrough.py): on a fresh
copy of the repository (what a clone has: not what a reader's own run of the examples left in
the checkout), each page's ```sh and ```python blocks in order, as written, in the
copy's directory, the servers they start left running for the pages after (as a user leaves
`make run` running in another shell). A block right after `<!-- no-test: REASON -->` is left
out, as everywhere (tests/support/doc_examples.py).

How a line runs:

- `make run`: the Makefile's own `run` recipe ($(VENV) read as .venv), in the background until
  the end, or until the next `make run`, which first stops it as Ctrl-C does;
- `make venv`: nothing: the copy's .venv is the suite's own environment, linked. (Running make
  would install the copy into it.) `make test` is this suite: nothing either;
- `streamkeep serve ...`, `streamkeep cluster controller ...` and `etcd ...`: in the
  background, like `make run`;
- `. .venv/bin/activate` (or `source`): the environment it sets holds for every later line;
- anything else: bash, a block's consecutive lines as one script (`set -e -o pipefail`;
  redis-cli with `-e`, so an error reply fails too). It must exit 0 and print no traceback;
- a ```python block: `.venv/bin/python` in a fresh interpreter; it must exit 0.

Port 6390 becomes a free port wherever it is written (a shared machine may have one there), and
PATH starts without any directory holding a `streamkeep` command, as on a fresh machine; pip
runs without an index (a page's `pip install redis` finds the suite's own redis-py, offline).
`close()` stops every server still running (SIGINT, then SIGKILL) and reports those that did
not exit cleanly, then the shared servers of directories the pages opened with shared=True.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from streamkeep.tools.servers import free_port
from tests.support.doc_examples import ROOT, blocks

PORT = "6390"
TIMEOUT = 300.0  # seconds for one script or block (the queue tutorial waits for a timeout)
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
# The line each kind of background server prints once it serves.
SERVE_READY = " listening on "
CONTROLLER_READY = ": started"
ETCD_READY = "ready to serve client requests"
# Every command sees redis-cli with -e: an error reply is a failure, as a user reads it.
PREAMBLE = 'redis-cli() { command redis-cli -e "$@"; }\nset -e -o pipefail\n'


@dataclass
class Step:
    source: str  # page:line
    what: str  # the script, block or command
    output: str


@dataclass
class Server:
    argv: list[str]
    proc: subprocess.Popen[str]
    ready: str = " listening on "  # the line that says it serves
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.listening = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if self.ready in line:
                self.listening.set()
        self.listening.set()

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        """Ctrl-C's SIGINT, then SIGKILL if it does not exit: its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.reader.join(10)
        return self.proc.returncode


class Walkthrough:
    def __init__(self, workdir: Path) -> None:
        assert sys.prefix != sys.base_prefix, "the suite runs from a virtual environment"
        self.repo = workdir / "repo"
        copy_checkout(self.repo)
        (self.repo / ".venv").symlink_to(Path(sys.prefix))
        self.port = str(free_port())
        self.env = fresh_environment()
        self.servers: list[Server] = []
        self.make_run: Server | None = None
        self.steps: list[Step] = []
        self.stopped_badly: list[str] = []

    # --- the pages -------------------------------------------------------------------------

    def follow(self, page: Path) -> None:
        label = page.relative_to(ROOT).as_posix()
        for block in blocks(page.read_text()):
            if block.skip is not None:
                continue
            where = f"{label}:{block.line}"
            if block.lang == "python":
                self._python(where, block.body)
            elif block.lang in ("sh", "bash", "shell"):
                self._shell(where, block.body)

    def _python(self, where: str, code: str) -> None:
        self._check(where, code, self._run([".venv/bin/python", "-c", self._ported(code)]))

    def _shell(self, where: str, body: str) -> None:
        script: list[str] = []
        for line in logical_lines(body):
            words = shlex.split(line, comments=True)
            if not words:
                continue
            special = self._special(words)
            if special is None:
                script.append(line)
                continue
            self._run_script(where, script)
            script = []
            special(where, words)
        self._run_script(where, script)

    def _special(self, words: list[str]) -> Callable[[str, list[str]], None] | None:
        """How a line that is not run as written runs, if it is one."""
        if words[0] == "make":
            return self._make
        if words[0] in (".", "source"):
            return self._activate
        if Path(words[0]).name == "streamkeep" and words[1:2] == ["serve"]:
            return self._serve
        if Path(words[0]).name == "streamkeep" and words[1:3] == ["cluster", "controller"]:
            return self._controller
        if words[0] == "etcd":
            return self._etcd
        return None

    def _run_script(self, where: str, lines: list[str]) -> None:
        if not lines:
            return
        script = PREAMBLE + self._ported("\n".join(lines)) + "\n"
        self._check(where, "\n".join(lines), self._run(["bash", "-c", script]))

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """Run to its end in a session of its own: at the timeout the whole session is
        killed, the commands a script started included."""
        proc = subprocess.Popen(argv, cwd=self.repo, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\n(killed after {TIMEOUT:.0f} s)"
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _check(self, where: str, what: str, done: subprocess.CompletedProcess[str]) -> None:
        output = done.stdout + done.stderr
        self.steps.append(Step(where, what, output))
        assert done.returncode == 0 and "Traceback" not in done.stderr, \
            f"{where}: exit {done.returncode}:\n{what}\n--- output:\n{output}"

    # --- the lines that are not run as they are -------------------------------------------

    def _make(self, where: str, words: list[str]) -> None:
        targets = words[1:]
        assert len(targets) == 1, f"{where}: make {' '.join(targets)}: one target a line"
        target = targets[0]
        if target in ("venv", "test"):
            assert re.search(rf"^{target}:", makefile(), re.M), f"{where}: no make {target}"
            self.steps.append(Step(where, f"make {target}", "(not run: the suite's .venv)"))
            return
        assert target == "run", f"{where}: the walkthrough does not know `make {target}`"
        if self.make_run is not None:  # run again: the first one stopped as Ctrl-C does
            self._stop(self.make_run)
        recipe = run_recipe().replace("$(VENV)", ".venv")
        self.make_run = self._start(where, shlex.split(self._ported(recipe)))

    def _serve(self, where: str, words: list[str]) -> None:
        self._start(where, shlex.split(self._ported(shlex.join(words))))

    def _controller(self, where: str, words: list[str]) -> None:
        self._start(where, words, ready=CONTROLLER_READY)

    def _etcd(self, where: str, words: list[str]) -> None:
        self._start(where, words, ready=ETCD_READY)

    def _activate(self, where: str, words: list[str]) -> None:
        script = f"{shlex.join(words)} && env -0"
        done = subprocess.run(["bash", "-c", script], cwd=self.repo, env=self.env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{where}: {shlex.join(words)}: {done.stderr}"
        self.env = dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)
        self.steps.append(Step(where, shlex.join(words), ""))

    def _start(self, where: str, argv: list[str], ready: str = SERVE_READY) -> Server:
        program = shutil.which(argv[0], path=self.env.get("PATH")) \
            if "/" not in argv[0] else str(self.repo / argv[0])
        assert program is not None and os.path.exists(program), \
            f"{where}: {argv[0]}: command not found (PATH={self.env.get('PATH')})"
        proc = subprocess.Popen([program, *argv[1:]], cwd=self.repo, env=self.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        server = Server(argv, proc, ready)
        self.servers.append(server)
        deadline = time.monotonic() + START_TIMEOUT
        while not server.listening.wait(0.1) and time.monotonic() < deadline:
            pass
        assert server.proc.poll() is None and server.listening.is_set(), \
            f"{where}: {shlex.join(argv)} did not start:\n{server.output()}"
        self.steps.append(Step(where, shlex.join(argv), server.output()))
        return server

    def _stop(self, server: Server) -> None:
        status = server.stop()
        if status != 0 and not (server.ready == ETCD_READY and status == -signal.SIGINT):
            # (etcd's own clean stop on Ctrl-C is its death by SIGINT)
            self.stopped_badly.append(f"{shlex.join(server.argv)}: exit {status}\n"
                                      f"{server.output()}")
        self.servers.remove(server)

    def _ported(self, text: str) -> str:
        return re.sub(rf"\b{PORT}\b", self.port, text)

    def close(self) -> None:
        from tests.support.shared_dirs import servers_under, stop_servers

        for server in reversed(list(self.servers)):  # (the last started first: a controller
            self._stop(server)  # before the etcd under it)
        # The servers of directories a page opened with shared=True (they outlive the
        # page's process by design, and exit once idle): stopped now, as Ctrl-C would.
        for pid in servers_under(self.repo):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue  # gone meanwhile (its idle exit)
            stop_servers(argv[argv.index(b"--dir") + 1].decode())


def copy_checkout(dest: Path, root: Path = ROOT) -> None:
    """The files a fresh clone has: those git tracks, and new ones it does not ignore inside a
    directory it tracks (a module not added yet). Nothing untracked at the top: what a
    reader's run of the examples leaves there (./embedded-data, a report, a script) is no
    part of a clone, and would meet the pages' examples again (a group that exists)."""
    def listed(*options: str) -> list[str]:
        done = subprocess.run(["git", "ls-files", "-z", *options], cwd=root,
                              capture_output=True, check=True)
        return [name for name in done.stdout.decode().split("\0") if name]

    tracked = listed("--cached")
    tracked_dirs = {name.split("/")[0] for name in tracked if "/" in name}
    new = [name for name in listed("--others", "--exclude-standard")
           if name.split("/")[0] in tracked_dirs and "/" in name]
    for name in tracked + new:
        source = root / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def fresh_environment() -> dict[str, str]:
    """This process's environment as a new shell has it: no virtual environment active, no
    `streamkeep` command on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    # A page's `pip install` finds what the suite's environment has, without the network.
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env["PATH"] = os.pathsep.join(
        d for d in env.get("PATH", "").split(os.pathsep)
        if d and not os.path.exists(os.path.join(d, "streamkeep")))
    return env


def logical_lines(body: str) -> list[str]:
    """A block's lines, those continued with a trailing backslash joined."""
    lines: list[str] = []
    pending = ""
    for raw in body.splitlines():
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    if pending:
        lines.append(pending)
    return [line for line in lines if line.strip()]


def makefile() -> str:
    return (ROOT / "Makefile").read_text()


def run_recipe() -> str:
    """The `run` target's one command line, as the Makefile has it."""
    match = re.search(r"^run:[^\n]*\n\t(.+)$", makefile(), re.M)
    assert match is not None, "the Makefile has no run target with a recipe"
    return match.group(1).strip()
