"""Run task frameworks' own test suites against redis-server and streamkeep, and tabulate them.

What it owns: each framework's source at a pinned version in a cache directory (never in the
checkout) and a virtual environment per framework in that cache (the project's venv is left
alone: the frameworks pin redis-py versions the project does not use), both through
streamkeep.tools.frameworks (the bench's framework rows use the same venvs), starting
the servers under test on free ports (Debian's redis-server, `streamkeep serve` on a fresh
directory with default settings, and `streamkeep serve --shared` on a fresh directory, reached
over its Unix socket; for a suite that needs a cluster, six cluster-enabled redis-servers made
one cluster by `redis-cli --cluster create --cluster-replicas 1`, and six `streamkeep serve
--cluster-enabled yes` made one by `streamkeep cluster create --replicas 1`), running each
suite against each with a per-test and a per-suite timeout, and printing a table:
passed/failed/errors per server, and the tests that fail on streamkeep but not on redis-server
(a cluster leg: not on the redis-server cluster) grouped by the first Redis error they hit.

The suites are run unchanged except for where they find their server: each one's conftest
(in the cache's copy) gets fixtures appended that return the URL under test instead of a
Docker container's or a hard-coded host's; a suite whose tests use redis-py's default
localhost:6379 (RQ's, Celery's tasks) gets a sitecustomize on its PYTHONPATH that sends those
connections to the server under test (REDIRECT_PLUGIN).

Must not touch: the checkout (sources, venvs and servers' directories live in the cache and
in temporary directories), the project's venv (only its Python starts `streamkeep serve`).

Usage:
    .venv/bin/python -m tests.support.framework_suites
        [--only streaq,arq,pydocket,taskiq-redis,rq,celery,
                redis-py-cluster,pydocket-cluster,taskiq-redis-cluster]
        [--servers redis,streamkeep,shared,redis-cluster,streamkeep-cluster]
        [--cache DIR] [--source NAME=PATH[@REF]]
        [--suite-timeout S] [--test-timeout S] [--json FILE]

Each suite runs against its own legs of --servers: the single servers, or (a cluster suite)
the clusters.

`--source streaq=PATH` takes the source from a git repository (its pinned tag, by
`git archive`; `PATH@REF` another ref, for a copy that lacks the tag) or a source tree instead
of the network.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# The pinned frameworks, their sources and venvs: shared with the bench's framework rows.
import redis

from streamkeep.tools.frameworks import (
    DEFAULT_CACHE,
    PROJECT_PYTHON,
    SUITES,
    Suite,
    ensure_venv,
    fetch_source,
)

SERVERS = ("redis", "streamkeep", "shared")
# The legs of a suite that needs a cluster (Suite.cluster): three primaries with a replica each,
# made by `redis-cli --cluster create` of six redis-server nodes, and by `streamkeep cluster
# create` of six `streamkeep serve --cluster-enabled yes` nodes.
CLUSTER_SERVERS = ("redis-cluster", "streamkeep-cluster")
CLUSTER_PRIMARIES = 3
CLUSTER_REPLICAS = 1
# Which leg a leg is compared with.
BASELINES = {"streamkeep": "redis", "shared": "redis", "redis-unix": "redis",
             "streamkeep-cluster": "redis-cluster"}
# Not run by default: redis-server on a Unix socket, the baseline for a unix:// failure.
OPTIONAL_SERVERS = ("redis-unix",)

# The pytest plugin that records every test's outcome as it finishes (one JSON line each), so
# that a suite killed by its timeout still reports what ran.
REPORT_PLUGIN = '''\
import json, os

_OUT = os.environ["STREAMKEEP_SUITE_REPORT"]


def pytest_runtest_logreport(report):
    if report.when != "call" and report.outcome == "passed":
        return
    if report.when == "call" or report.outcome != "passed":
        text = report.longreprtext if report.outcome != "passed" else ""
        with open(_OUT, "a", encoding="utf-8") as out:
            out.write(json.dumps({"nodeid": report.nodeid, "when": report.when,
                                  "outcome": report.outcome, "text": text[-20000:]}) + "\\n")
'''

# The sitecustomize of a suite whose tests use redis-py's default server (Suite.redirect_default):
# every process the suite starts with the harness's PYTHONPATH (pytest, the workers it forks or
# spawns, its CLIs) sends a plain connection to localhost:6379 to the server under test: to its
# host and port, or to its Unix socket. The connection's arguments, and so its pool's, are
# left as the test gave them.
REDIRECT_PLUGIN = '''\
import asyncio, os, socket

_URL = os.environ.get("STREAMKEEP_SUITE_URL", "")
_PATH = _URL[len("unix://"):].partition("?")[0] if _URL.startswith("unix://") else None


def _install():
    try:
        import redis.asyncio.connection as aio
        import redis.connection as sync
    except ImportError:
        return
    host = os.environ["STREAMKEEP_SUITE_HOST"]
    port = int(os.environ["STREAMKEEP_SUITE_PORT"])

    def wrap_init(cls):
        original = cls.__init__

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            self._sk_unix = False
            if str(self.host) in ("localhost", "127.0.0.1") and int(self.port) == 6379:
                if _PATH is None:
                    self.host, self.port = host, port
                else:
                    self._sk_unix = True
        cls.__init__ = __init__

    def sync_connect(original):
        def _connect(self):
            if not getattr(self, "_sk_unix", False):
                return original(self)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.socket_connect_timeout)
            try:
                sock.connect(_PATH)
            except OSError:
                sock.close()
                raise
            sock.settimeout(self.socket_timeout)
            return sock
        return _connect

    def async_connect(original):
        async def _connect(self):
            if not getattr(self, "_sk_unix", False):
                return await original(self)
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_unix_connection(path=_PATH), self.socket_connect_timeout)
        return _connect

    for cls, connect in ((sync.Connection, sync_connect), (aio.Connection, async_connect)):
        wrap_init(cls)
        cls._connect = connect(cls._connect)


if _URL:
    _install()
'''


# ---------------------------------------------------------------- servers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(address: tuple[str, int] | str, timeout: float = 1.0) -> bool:
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family) as s:
            s.settimeout(timeout)
            s.connect(address)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _send(address: tuple[str, int] | str, *args: str) -> bytes:
    """One command's whole reply (a simple line, or a bulk string's bytes)."""
    payload = f"*{len(args)}\r\n".encode() + b"".join(
        f"${len(a)}\r\n{a}\r\n".encode() for a in args)
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(5)
        s.connect(address)
        s.sendall(payload)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n")
        if not head.startswith(b"$"):
            return head
        size = int(head[1:])
        while len(rest) < size:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        return rest[:size]


def server_failures(address: tuple[str, int] | str) -> dict[str, str]:
    """What the server itself counted as refused: INFO errorstats' error codes and the
    commands with rejected or failed calls (INFO commandstats), which a test that swallows
    an error reply never shows."""
    found: dict[str, str] = {}
    try:
        text = _send(address, "INFO", "errorstats").decode() + \
            _send(address, "INFO", "commandstats").decode()
    except OSError as exc:
        return {"(INFO failed)": str(exc)}
    for line in text.splitlines():
        if line.startswith("errorstat_"):
            name, _, value = line[len("errorstat_"):].partition(":")
            found[f"error {name}"] = value
        elif line.startswith("cmdstat_"):
            name, _, value = line[len("cmdstat_"):].partition(":")
            stats = dict(kv.split("=", 1) for kv in value.split(","))
            bad = {k: stats.get(k, "0") for k in ("rejected_calls", "failed_calls")}
            if any(v != "0" for v in bad.values()):
                found[name] = " ".join(f"{k}={v}" for k, v in bad.items())
    return found


class ServerDidNotStart(RuntimeError):
    """The server under test exited or did not answer PING in time (its log is the message)."""


@dataclass
class Running:
    label: str
    url: str
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    address: tuple[str, int] | str
    # A cluster's every node (the first is `address`, the one its clients are given).
    nodes: tuple[tuple[str, int] | str, ...] = ()


@contextmanager
def _process(label: str, argv: list[str], workdir: Path,
             address: tuple[str, int] | str) -> Iterator[subprocess.Popen[bytes]]:
    """A server process answering PING at `address` (its output in workdir/<label>.log),
    stopped afterwards (SIGTERM, then SIGKILL), also when the caller fails or is interrupted."""
    log = workdir / f"{label}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _ping(address):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise ServerDidNotStart(
                    f"{label} did not start:\n{log.read_text(errors='replace')}")
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def start_server(kind: str, workdir: Path) -> Iterator[Running]:
    """A fresh server of `kind` (redis, redis-unix, streamkeep, shared; redis-cluster,
    streamkeep-cluster), stopped afterwards."""
    if kind in CLUSTER_SERVERS:
        with start_cluster(kind, workdir) as cluster:
            yield cluster
        return
    unix = kind in ("shared", "redis-unix")
    port = 0 if unix else free_port()
    data = workdir / f"{kind}-data"
    sock = str(data / ("shared.sock" if kind == "shared" else "redis.sock"))
    if kind in ("redis", "redis-unix"):
        data.mkdir()
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(data)]
        if unix:
            argv += ["--unixsocket", sock]
    elif kind == "streamkeep":
        argv = [str(PROJECT_PYTHON), "-m", "streamkeep", "serve", "--dir", str(data),
                "--port", str(port)]
    else:
        argv = [str(PROJECT_PYTHON), "-m", "streamkeep", "serve", "--shared", "--dir", str(data)]
    address: tuple[str, int] | str = sock if unix else ("127.0.0.1", port)
    with _process(kind, argv, workdir, address) as proc:
        if kind == "shared":
            # The suite's gaps between connections must not let the server leave when idle.
            _send(sock, "CONFIG", "SET", "idle-shutdown", "0")
        url = f"unix://{sock}" if unix else f"redis://127.0.0.1:{port}/0"
        yield Running(kind, url, "127.0.0.1", port, proc, workdir / f"{kind}.log", address)


def _cluster_node_argv(kind: str, data: Path, port: int) -> list[str]:
    if kind == "redis-cluster":
        data.mkdir()
        # The bus on a port of its own: Redis puts it at port + 10000 by default, and refuses
        # a client port past 55535. DEBUG as redis-py's cluster container enables it.
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(data), "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--cluster-port", str(free_port()),
                "--enable-debug-command", "yes"]
    return [str(PROJECT_PYTHON), "-m", "streamkeep", "serve", "--dir", str(data),
            "--port", str(port), "--cluster-enabled", "yes"]


def _create_cluster(kind: str, addresses: list[str], workdir: Path) -> None:
    if kind == "redis-cluster":
        argv = ["redis-cli", "--cluster", "create", *addresses,
                "--cluster-replicas", str(CLUSTER_REPLICAS), "--cluster-yes"]
    else:
        argv = [str(PROJECT_PYTHON), "-m", "streamkeep", "cluster", "create", *addresses,
                "--replicas", str(CLUSTER_REPLICAS)]
    log = workdir / f"{kind}-create.log"
    with open(log, "wb") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                              timeout=120, check=False, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise ServerDidNotStart(f"{kind} was not made:\n{log.read_text(errors='replace')}")


def _cluster_ready(nodes: list[tuple[str, int]]) -> bool:
    """Every node says the cluster is ok and shows every shard's primary and replicas in CLUSTER
    SLOTS (Redis shows a replica there once its primary has gossiped its replication offset),
    so a client that reads any node's CLUSTER SLOTS finds every node."""
    for host, port in nodes:
        client = redis.Redis(host=host, port=port, socket_timeout=5)
        try:
            if client.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                return False
            # [first, last, primary, *replicas] a range
            ranges = client.execute_command("CLUSTER SLOTS")
        except redis.RedisError:
            return False
        finally:
            client.close()
        if len(ranges) != CLUSTER_PRIMARIES or any(
                len(shard) != 3 + CLUSTER_REPLICAS for shard in ranges):
            return False
    return True


@contextmanager
def start_cluster(kind: str, workdir: Path) -> Iterator[Running]:
    """A fresh cluster of `kind` (redis-cluster, streamkeep-cluster): CLUSTER_PRIMARIES
    primaries with CLUSTER_REPLICAS replicas each, every node in a directory of its own under
    `workdir`; every node stopped afterwards, also when the cluster is not made."""
    count = CLUSTER_PRIMARIES * (1 + CLUSTER_REPLICAS)
    nodes: list[tuple[str, int]] = []
    with ExitStack() as stack:
        procs = []
        for i in range(count):
            port = free_port()
            argv = _cluster_node_argv(kind, workdir / f"{kind}-{i}-data", port)
            procs.append(stack.enter_context(
                _process(f"{kind}-{i}", argv, workdir, ("127.0.0.1", port))))
            nodes.append(("127.0.0.1", port))
        _create_cluster(kind, [f"{h}:{p}" for h, p in nodes], workdir)
        deadline = time.monotonic() + 60
        while not _cluster_ready(nodes):
            if time.monotonic() > deadline:
                raise ServerDidNotStart(f"{kind} did not become ready")
            time.sleep(0.2)
        host, port = nodes[0]
        yield Running(kind, f"redis://{host}:{port}/0", host, port, procs[0],
                      workdir / f"{kind}-0.log", nodes[0], tuple(nodes))

# ---------------------------------------------------------------- running and reading

@dataclass
class LegResult:
    suite: str
    server: str
    outcomes: dict[str, str] = field(default_factory=dict)  # nodeid -> passed/failed/error/...
    texts: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    timed_out: bool = False
    returncode: int | None = None
    skipped_reason: str = ""
    server_failures: dict[str, str] = field(default_factory=dict)

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


def run_leg(suite: Suite, src: Path, venv: Path, server: Running, workdir: Path,
            suite_timeout: float, test_timeout: float,
            paths: list[str] | None = None) -> LegResult:
    report = workdir / f"{suite.name}-{server.label}.jsonl"
    plugin_dir = workdir / "plugin"
    plugin_dir.mkdir(exist_ok=True)
    (plugin_dir / "sk_suite_report.py").write_text(REPORT_PLUGIN, encoding="utf-8")
    if suite.redirect_default:
        (plugin_dir / "sitecustomize.py").write_text(REDIRECT_PLUGIN, encoding="utf-8")
    env = dict(os.environ)
    env.update(STREAMKEEP_SUITE_URL=server.url, STREAMKEEP_SUITE_HOST=server.host,
               STREAMKEEP_SUITE_PORT=str(server.port), STREAMKEEP_SUITE_REPORT=str(report),
               PYTHONPATH=str(plugin_dir), PYTHONDONTWRITEBYTECODE="1",
               # the framework's CLIs (RQ's tests run `rqworker`), as in its activated venv
               PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               **dict(suite.env))
    env.pop("VIRTUAL_ENV", None)
    argv = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "sk_suite_report",
            "-p", "no:cacheprovider", f"--timeout={test_timeout:g}",
            *(paths or (*suite.pytest_args[:1], *suite.more_paths)),
            *(arg.replace("{url}", server.url) for arg in suite.pytest_args[1:])]
    result = LegResult(suite.name, server.label)
    started = time.monotonic()
    with open(workdir / f"{suite.name}-{server.label}.out", "wb") as out:
        proc = subprocess.Popen(argv, cwd=src, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            result.returncode = proc.wait(suite_timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except BaseException:  # interrupted: the suite and whatever it started go too
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    result.seconds = time.monotonic() - started
    result.server_failures = {}
    for node in server.nodes or (server.address,):
        where = f" ({node[1]})" if server.nodes and isinstance(node, tuple) else ""
        result.server_failures.update(
            {f"{name}{where}": value for name, value in server_failures(node).items()})
    _read_report(report, result)
    return result


def _read_report(report: Path, result: LegResult) -> None:
    if not report.exists():
        return
    for line in report.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        nodeid, outcome = row["nodeid"], row["outcome"]
        if row["when"] != "call" and outcome == "failed":
            outcome = "error"
        if outcome == "skipped" and result.outcomes.get(nodeid) in ("failed", "error"):
            continue
        # A teardown error after a passed call counts as an error (pytest's own rule).
        if nodeid not in result.outcomes or outcome in ("failed", "error"):
            result.outcomes[nodeid] = outcome
        if row["text"] and nodeid not in result.texts:
            result.texts[nodeid] = row["text"]


# Redis error lines as the clients show them: redis-py's ResponseError and its subclasses,
# coredis's, and the message inside a Lua error.
_ERROR_LINE = re.compile(
    r"(?:ResponseError|Error|Exception)\)?:?\s*[:(]?\s*['\"]?("
    r"(?:ERR|WRONGTYPE|NOSCRIPT|NOGROUP|BUSYGROUP|EXECABORT|NOPERM|BUSY|MISCONF|READONLY)"
    r"\b[^\n'\"]*|unknown command[^\n]*|unknown subcommand[^\n]*"
    r"|(?:Unknown|unknown) Redis command[^\n]*|wrong number of arguments[^\n]*)")
_ANY_REDIS_LINE = re.compile(
    r"((?:ERR |WRONGTYPE |NOSCRIPT |NOGROUP )[^\n'\"]*|unknown command '[^']*'"
    r"|unknown subcommand '[^']*'[^\n'\"]*)")


def first_redis_error(text: str) -> str:
    """The first Redis error line in a failure's text, reduced to what identifies it."""
    found = _ANY_REDIS_LINE.search(text) or _ERROR_LINE.search(text)
    if found:
        line = found.group(1).strip()
        line = re.sub(r", with args beginning with:.*", "", line)
        line = re.sub(r"script: \w+", "script: <sha>", line)
        line = re.sub(r"\bf_[0-9a-f]{40}\b", "f_<sha>", line)
        return line[:120]
    if "Timeout" in text and ("pytest-timeout" in text or "Timeout (" in text
                              or "Failed: Timeout" in text):
        return "(no Redis error) the test timed out"
    last = next((ln.strip() for ln in reversed(text.splitlines())
                 if re.match(r"^E\s+\S", ln.strip())), "")
    last = re.sub(r"^E\s+", "", last)
    return f"(no Redis error) {last[:100]}" if last else "(no Redis error)"


# ---------------------------------------------------------------- the table

def out_of_scope(suite: str) -> dict[str, str]:
    """The suite's tests left out of the comparison (Suite.out_of_scope): node id -> why."""
    return dict(SUITES[suite].out_of_scope) if suite in SUITES else {}


def print_table(results: list[LegResult], notes: dict[str, str]) -> str:
    lines = ["| framework | server | passed | failed | errors | skipped | time (s) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        if r.skipped_reason:
            lines.append(f"| {r.suite} | {r.server} | – | – | – | – | {r.skipped_reason} |")
            continue
        stop = " (suite timeout)" if r.timed_out else ""
        lines.append(f"| {r.suite} | {r.server} | {r.count('passed')} | {r.count('failed')} | "
                     f"{r.count('error')} | {r.count('skipped')} | {r.seconds:.0f}{stop} |")
    out = ["\n".join(lines), ""]
    for suite, note in notes.items():
        out.append(f"- {suite}: {note}")
    out.append("")
    out.append("### What each server refused (INFO errorstats, commands with rejected/failed "
               "calls)")
    for r in results:
        if r.server_failures:
            shown = "; ".join(f"{k}: {v}" for k, v in sorted(r.server_failures.items()))
            out.append(f"- {r.suite} on {r.server}: {shown}")
    out.append("")
    causes: Counter[str] = Counter()
    for r in results:
        if r.server not in BASELINES or r.skipped_reason:
            continue
        base = next((b for b in results if b.suite == r.suite
                     and b.server == BASELINES[r.server]), None)
        groups: dict[str, list[str]] = defaultdict(list)
        for nodeid, outcome in sorted(r.outcomes.items()):
            if outcome not in ("failed", "error"):
                continue
            if base is not None and base.outcomes.get(nodeid) in ("failed", "error"):
                continue  # fails against redis-server too: not streamkeep's
            if nodeid in out_of_scope(r.suite):
                continue  # listed, with its reason, below
            groups[first_redis_error(r.texts.get(nodeid, ""))].append(nodeid)
        if not groups:
            continue
        out.append(f"### {r.suite} on {r.server}: failing here, not on {BASELINES[r.server]}")
        for cause, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            causes[cause] += len(ids)
            out.append(f"- {len(ids)} x `{cause}`")
            for nodeid in ids[:8]:
                out.append(f"    - {nodeid}")
            if len(ids) > 8:
                out.append(f"    - ... {len(ids) - 8} more")
        out.append("")
    for suite in dict.fromkeys(r.suite for r in results):
        excluded = out_of_scope(suite)
        if excluded:
            out.append(f"### {suite}: out of scope ({len(excluded)} tests, not compared)")
            out.extend(f"- {nodeid}: {why}" for nodeid, why in excluded.items())
            out.append("")
    if causes:
        out.append("### Top causes (all streamkeep legs)")
        for cause, n in causes.most_common(15):
            out.append(f"- {n} x `{cause}`")
    text = "\n".join(out)
    print(text, flush=True)
    return text


# ---------------------------------------------------------------- main

def parse_sources(specs: list[str]) -> tuple[dict[str, Path], dict[str, str]]:
    """`NAME=PATH` or `NAME=PATH@REF` (a git repository's ref instead of the pinned tag) each:
    the paths and the refs by framework."""
    sources: dict[str, Path] = {}
    refs: dict[str, str] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        path, at, ref = value.rpartition("@")
        if not at:
            path, ref = value, ""
        sources[name] = Path(path)
        if ref:
            refs[name] = ref
    return sources, refs


def legs(suite: Suite, servers: list[str] | None) -> list[str]:
    """The servers `suite` runs against: of `servers` (None: all its own), the cluster legs
    for a suite that needs a cluster, the single servers for the others."""
    own = CLUSTER_SERVERS if suite.cluster else SERVERS + OPTIONAL_SERVERS
    if servers is None:
        return list(CLUSTER_SERVERS if suite.cluster else SERVERS)
    return [kind for kind in servers if kind in own]


def run(only: list[str], servers: list[str] | None, cache: Path, sources: dict[str, Path],
        suite_timeout: float, test_timeout: float, paths: list[str] | None = None,
        log: Callable[[str], None] = print,
        refs: dict[str, str] | None = None) -> list[LegResult]:
    cache.mkdir(parents=True, exist_ok=True)
    results: list[LegResult] = []
    for name in only:
        suite = SUITES[name]
        src = fetch_source(suite, cache, sources.get(name), (refs or {}).get(name))
        venv = ensure_venv(suite, cache, src)
        for kind in legs(suite, servers):
            if kind in ("shared", "redis-unix") and not suite.unix:
                results.append(LegResult(name, kind, skipped_reason="no unix:// URL"))
                continue
            with tempfile.TemporaryDirectory(prefix=f"sk-{name}-") as tmp:
                workdir = Path(tmp)
                try:
                    with start_server(kind, workdir) as server:
                        log(f"{name} on {kind} ({server.url}) ...")
                        leg = run_leg(suite, src, venv, server, workdir, suite_timeout,
                                      test_timeout, paths)
                except ServerDidNotStart as exc:
                    log(str(exc))
                    results.append(LegResult(name, kind, skipped_reason="server did not start"))
                    continue
                keep = cache / "logs" / f"{name}-{kind}"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(workdir, keep, ignore=shutil.ignore_patterns("*-data"))
            log(f"  {leg.count('passed')} passed, {leg.count('failed')} failed, "
                f"{leg.count('error')} errors in {leg.seconds:.0f} s"
                + (" (suite timeout)" if leg.timed_out else ""))
            results.append(leg)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SUITES))
    parser.add_argument("--servers", help=f"of {', '.join(SERVERS + OPTIONAL_SERVERS)}"
                        f" (single servers; {', '.join(SERVERS)} by default) and"
                        f" {', '.join(CLUSTER_SERVERS)} (the cluster suites' legs)")
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("STREAMKEEP_SUITES_CACHE", DEFAULT_CACHE)))
    parser.add_argument("--source", action="append", default=[], metavar="NAME=PATH[@REF]")
    parser.add_argument("--suite-timeout", type=float, default=300.0)
    parser.add_argument("--test-timeout", type=float, default=15.0)
    parser.add_argument("--paths", help="comma-separated test paths instead of the suite's own"
                        " (one framework at a time)")
    parser.add_argument("--json", type=Path, help="write the outcomes here")
    args = parser.parse_args(argv)
    sources, refs = parse_sources(args.source)
    results = run(args.only.split(","), args.servers.split(",") if args.servers else None,
                  args.cache, sources,
                  args.suite_timeout, args.test_timeout,
                  args.paths.split(",") if args.paths else None, refs=refs)
    print()
    print_table(results, {n: f"tests: {args.paths}" if args.paths else SUITES[n].note
                          for n in args.only.split(",")})
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
