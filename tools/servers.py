"""A server as a child process: ``streamkeep serve`` (a primary or a replica), redis-server and
etcd (the cluster controller's store), for the bench, the crash bench and the tests.

Owns one server process's life: its command line (and config lines, written to a file beside
its data directory), where its output goes (a log file beside the data directory, or collected
in memory), when it is ready (it answers PING with PONG: not refused, not -LOADING, not left
unanswered while ``streamkeep serve`` replays; or a line of its output says so; etcd: it
lists itself as a member and serves a read), its pid, CPU
time and resident set, and its end: `kill` SIGKILLs it with everything it forked (it leads a
process group of its own: a compaction or rewrite child dies with it, as in a power loss),
`stop` asks first (SIGTERM) and waits a bounded time, `wait` waits for an exit it was asked
for some other way; `restart` starts it again on the same directory and port (a replica and
the clients find it there); the context manager kills it. No child is left behind: each is
SIGKILLed by the kernel when the process that started it from its main thread dies, and a
command's servers are tracked by tools.temporaries (its cleanup SIGKILLs what a caller's own
way out missed) and by `kill_all` (a run's way out).
Also :class:`ThreadServer` (an engine's network server in this process, on a thread: for the
bench and the tests), :func:`free_port`, :func:`cpu_seconds`, :func:`proc_status` (a resident
set, its peak),
:class:`PeakRss` (a process's resident set sampled from a thread) and :func:`log_tail`, for any
child process.
Must not touch: the data directory's files (the server's own, but for `remove_files` when
asked), what is run against the server.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Self

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools import temporaries
from streamkeep.tools.controller.etcd import Etcd, EtcdError
from streamkeep.tools.crashbench.client import RespTarget
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0  # after SIGTERM, before SIGKILL (a streamkeep server's final fsync)
EXIT_TIMEOUT = 10.0
POLL = 0.01
# A PING left unanswered this long is "not ready": a streamkeep serve still replaying at
# start-up holds the connection (it listens first) without reading it, and a probe that
# waited for the replay's end would find it ready when the moment to kill it has passed. A
# busy server that answers later is simply probed again.
PROBE_TIMEOUT = 0.1
# etcd's read waits for a leader: a probe waits longer than PING's, and is made again if not
ETCD_PROBE_TIMEOUT = 0.5
ATTEMPTS = 5  # starts on a fresh port when the one chosen was taken before the server bound it
LISTENING = " listening on "  # streamkeep serve's line once it listens

Limits = dict[int, tuple[int, int]]  # resource.RLIMIT_* -> (soft, hard)

# Every server started and not ended yet: `kill_all` ends them (held strongly: a server whose
# object an exception dropped is still killed).
_RUNNING: set[ServerProcess] = set()


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now (it may be taken before it is bound:
    `ServerProcess.start` tries again on another)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds a process's threads have run so far (Linux: the nanosecond schedstat of
    each thread, else the tick-granular user + system time), None if unknown."""
    if pid is None:
        return None
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def proc_status(name: str, pid: int | str = "self") -> int:
    """A memory field of /proc/PID/status (VmRSS, VmHWM) in bytes; LookupError if absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(f"no {name} in /proc/{pid}/status")


class PeakRss:
    """Samples a process's RSS from a thread until stopped; `peak` is the highest seen."""

    def __init__(self, pid: int, every: float = 0.002) -> None:
        self.pid, self.peak, self.every = pid, proc_status("VmRSS", pid), every
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, proc_status("VmRSS", self.pid))
            time.sleep(self.every)

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, proc_status("VmRSS", self.pid))
        return self.peak


class ThreadServer:
    """An engine's network server (engine.server.network.Server) running in a daemon thread of
    this process: `server`, `engine`, `host`, `port`, `thread`. :meth:`start` starts one on a
    loopback port (any free one by default); `stop` shuts it down as SHUTDOWN does (the
    clients closed, then the engine) and waits for the thread."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self.server, self.engine, self.thread = server, server.engine, thread
        self.host, self.port = server.host, server.port

    @classmethod
    def start(cls, engine: Any, host: str = HOST, port: int = 0,
              timeout: float = 10.0) -> ThreadServer:
        """Serve `engine`; RuntimeError if the server does not start within `timeout`."""
        from streamkeep.engine.server.network import Server, run_server

        server = Server(engine, host, port)
        ready, failure = threading.Event(), []

        def run() -> None:
            try:
                run_server(server, lambda _srv: ready.set())
            except BaseException as err:  # noqa: BLE001 - reported to the starting thread
                failure.append(err)
                ready.set()

        thread = threading.Thread(target=run, name=f"streamkeep-server-{id(server):x}",
                                  daemon=True)
        thread.start()
        if not ready.wait(timeout) or failure:
            raise RuntimeError(f"the server did not start: {failure!r}")
        return cls(server, thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Shut it down (idempotent); RuntimeError if its thread is still running after
        `timeout`."""
        if self.thread.is_alive():
            self.server.loop.call_soon_threadsafe(self.server.request_shutdown)
            self.thread.join(timeout)
            if self.thread.is_alive():
                raise RuntimeError("the server thread did not stop")


def log_tail(path: str, lines: int = 5) -> str:
    """The last lines of a child's log file, "" if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def kill_all() -> None:
    """SIGKILL every server this process started and has not ended yet."""
    for server in list(_RUNNING):
        server.kill()


def _limits(limits: Limits) -> Callable[[], None]:
    def preexec() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, value)

    return preexec


class ServerFailed(StreamkeepError):
    """A server would not start (it exited, or did not answer in time): the log's tail."""


class ServerProcess:
    """One server's process on `data_dir` ("": its config file says where) and `port` (a
    free one when not given; kept across restarts). Its output goes to `log_path` (default:
    beside the data directory, never in it, which the server owns; a file, never a pipe nobody
    drains, which would block the server once full), or with `capture` into `lines`, read by a
    thread. Ready when it answers PING, or with `ready_line` once its output since the start
    holds that text. `limits` are resource limits of the child only; `cwd` its working
    directory; `host` where it listens. `track` (a command's server): tools.temporaries'
    cleanup and `kill_all` end it too; a caller that is no command (a test: tools.main's
    cleanup, run in process, would kill it) ends it itself. Subclasses give `command()`."""

    name = "server"

    def __init__(self, data_dir: str, port: int | None = None,
                 log_path: str | None = None, start_timeout: float = START_TIMEOUT, *,
                 stop_timeout: float = STOP_TIMEOUT, capture: bool = False,
                 ready_line: str | None = None, cwd: str | None = None, host: str = HOST,
                 limits: Limits | None = None, track: bool = True) -> None:
        # A relative directory means the same to the child only in the same working directory.
        self.data_dir = os.path.abspath(data_dir) if data_dir and cwd is None else data_dir
        self.port = free_port() if port is None else port
        self.fixed_port = port is not None
        self.capture = capture
        if log_path is None and not capture:
            if not data_dir:
                raise ValueError("a server without a data directory needs a log_path or capture")
            log_path = os.path.abspath(data_dir) + ".log"
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.ready_line = ready_line
        self.cwd = cwd
        self.host = host
        self.limits = limits
        self.track = track
        self.proc: subprocess.Popen[Any] | None = None
        self.lines: list[str] = []  # the output, with `capture`
        self.reader: threading.Thread | None = None
        self.starts = 0
        self._log_start = 0  # the log's size when the process started

    def command(self) -> list[str]:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(self) -> None:
        """Start the process and return at once (it may still be replaying: `wait_ready`)."""
        if self.alive:
            raise ServerFailed(f"{self.name} on port {self.port} is already running")
        argv = self.command()
        limited: dict[str, Any] = {}  # (resource limits: their hook runs after the parent's)
        if self.limits:
            limited["preexec_fn"] = temporaries.die_with_parent_hook(_limits(self.limits)) \
                or _limits(self.limits)
        if self.capture:
            self.lines = []
            self.proc = subprocess.Popen(argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True, errors="replace",
                                         **{**temporaries.child_options(), **limited})
            self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,),
                                           name=f"{self.name}-output", daemon=True)
            self.reader.start()
        else:
            assert self.log_path is not None
            with open(self.log_path, "ab") as log:
                self._log_start = log.tell()
                self.proc = subprocess.Popen(argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=log,
                                             **{**temporaries.child_options(), **limited})
        if self.track:
            temporaries.track(self.proc)
            _RUNNING.add(self)
        self.starts += 1

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def start(self) -> Self:
        """Start the server; return once it is ready. A first start whose port was taken
        before the server bound it tries again on another free port. ServerFailed, with the
        output's tail, when it does not come up (nothing is left running then)."""
        for _attempt in range(ATTEMPTS):
            self.spawn()
            if self.wait_ready():
                return self
            if self.alive or self.fixed_port or self.starts > 1 or not self.port_taken():
                break
            self.kill()
            self.starts = 0
            self.choose_ports()
        self.kill()
        raise ServerFailed(f"{self.name} did not start on port {self.port}: "
                           f"{self.log_tail(10) or 'no output'}")

    def port_taken(self) -> bool:
        """Its output since the start says a port it was to listen on was taken."""
        return "address already in use" in self.output(since_start=True).lower()

    def choose_ports(self) -> None:
        """Free ports again, after a start that found one taken."""
        self.port = free_port()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Poll until it is ready; False if the process exits or `timeout` passes first."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            if self.ready():
                return True
            if not self.alive:
                if self.reader is not None:
                    self.reader.join(EXIT_TIMEOUT)  # its last lines
                return self.ready_line is not None and self.ready()
            time.sleep(POLL)
        return False

    def ready(self) -> bool:
        """One probe: its ready line was printed, or it answers PING with PONG now (not
        refused, not -LOADING, not left unanswered: `streamkeep serve` listens before it
        replays, and answers once it has; a server asking for a password is up)."""
        if self.ready_line is not None:
            return self.ready_line in self.output(since_start=True)
        try:
            with RespTarget(self.host, self.port, connect_timeout=0.5,
                            timeout=PROBE_TIMEOUT) as t:
                return t.execute([b"PING"]) == "PONG" and self._answers_as_ours(t)
        except CommandFailed as err:  # -LOADING, or up and asking for a password
            return str(err).startswith("NOAUTH") and self.alive
        except ConnectionLost:  # not listening yet, or replaying
            return False

    def _answers_as_ours(self, target: RespTarget) -> bool:
        """The server that answered on the port is this one's process (INFO server's
        process_id): another process that took the port before this one bound it (which then
        exits with "Address already in use") must not pass for it."""
        proc = self.proc
        if proc is None:
            return False
        info = target.execute([b"INFO", b"server"])
        text = info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info)
        found = re.search(r"^process_id:(\d+)", text, re.M)
        return found is not None and int(found.group(1)) in (proc.pid, *self._children())

    def _children(self) -> list[int]:
        """The pids of the processes this one started (a wrapper's server)."""
        try:
            text = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text() \
                if self.proc is not None else ""
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def kill(self) -> None:
        """SIGKILL the server and everything it forked, and reap it."""
        proc = self.proc
        if proc is None:
            return
        temporaries.kill_group(proc)
        self._ended(proc)

    def stop(self, timeout: float | None = None) -> None:
        """A clean shutdown: SIGTERM, then SIGKILL to what is left of its process group after
        `timeout` seconds (the server's stop_timeout)."""
        proc = self.proc
        if proc is None:
            return
        temporaries.end_child(proc, self.stop_timeout if timeout is None else timeout,
                              signal.SIGTERM)
        self._ended(proc)

    def wait(self, timeout: float = EXIT_TIMEOUT) -> int:
        """Wait for the process to exit (asked some other way: SHUTDOWN, a signal); its exit
        status. subprocess.TimeoutExpired if it is still running after `timeout` seconds."""
        assert self.proc is not None, "never started"
        status = self.proc.wait(timeout)
        self._ended(self.proc)
        return status

    def _ended(self, proc: subprocess.Popen[Any]) -> None:
        temporaries.untrack(proc)
        _RUNNING.discard(self)
        if self.reader is not None:
            self.reader.join(EXIT_TIMEOUT)
        if proc.stdout is not None and (self.reader is None or not self.reader.is_alive()):
            proc.stdout.close()

    def restart(self) -> Self:
        """SIGKILL it if it runs, and start it again on the same directory and port."""
        if self.alive:
            self.kill()
        return self.start()

    def output(self, since_start: bool = False) -> str:
        """What it printed (all of its log, or since its last start)."""
        if self.capture:
            return "".join(self.lines)
        assert self.log_path is not None
        try:
            with open(self.log_path, "rb") as f:
                if since_start:
                    f.seek(self._log_start)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 10) -> str:
        return "".join(self.output().splitlines(keepends=True)[-lines:]).strip()

    def target(self, timeout: float = 10.0) -> RespTarget:
        """A fresh connection (ConnectionLost if the server is not there)."""
        return RespTarget(self.host, self.port, timeout=timeout)

    def info(self, section: str) -> dict[str, str]:
        """INFO `section`'s fields as written ("name" -> "value")."""
        with self.target() as t:
            text = t.execute([b"INFO", section.encode()])
        return dict(line.split(":", 1) for line in bytes(text).decode().split("\r\n")
                    if ":" in line and not line.startswith("#"))

    def cpu_seconds(self) -> float | None:
        """The CPU time its threads have used so far (None if unknown)."""
        return cpu_seconds(self.pid)

    def rss_bytes(self) -> int:
        """Its resident set size now (VmRSS); OSError once it is gone."""
        try:
            return proc_status("VmRSS", str(self.pid))
        except LookupError as err:
            raise ServerFailed(str(err)) from None

    def remove_files(self) -> None:
        """Delete the data directory, the log and the config file (the process must be gone)."""
        if self.alive:
            raise ServerFailed("remove_files on a running server")
        if not self.data_dir:
            return
        shutil.rmtree(self.data_dir, ignore_errors=True)
        for path in (self.log_path, self.data_dir + ".conf"):
            if path is not None and os.path.exists(path):
                os.remove(path)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


class StreamkeepServer(ServerProcess):
    """``python -m streamkeep serve`` on `data_dir` (under `python`: another checkout's
    interpreter runs that checkout's server). `bind`, `appendfsync` and `loglevel` are given
    on its command line unless None (the serve defaults, or its config file's); `config`
    lines go to a config file beside the data directory; `segment_max_bytes` small makes the
    AOF rotate every few commands; `replicaof` a primary's port on 127.0.0.1; `extra` more
    arguments, last."""

    name = "streamkeep serve"

    def __init__(self, data_dir: str, appendfsync: str | None = "always",
                 port: int | None = None, *, bind: str | None = HOST,
                 loglevel: str | None = "notice", segment_max_bytes: int | None = None,
                 replicaof: int | None = None, config: Sequence[str] = (),
                 extra: Sequence[str] = (), python: str = sys.executable,
                 **options: Any) -> None:
        super().__init__(data_dir, port, **options)
        self.appendfsync = appendfsync
        self.bind = bind
        self.loglevel = loglevel
        self.segment_max_bytes = segment_max_bytes
        self.replicaof = replicaof
        self.config = tuple(config)
        self.extra = tuple(extra)
        self.python = python

    def command(self) -> list[str]:
        argv = [self.python, "-m", "streamkeep", "serve"]
        if self.data_dir:
            argv += ["--dir", self.data_dir]
        argv += ["--port", str(self.port)]
        for flag, value in (("--bind", self.bind), ("--appendfsync", self.appendfsync),
                            ("--loglevel", self.loglevel),
                            ("--aof-segment-max-bytes", self.segment_max_bytes)):
            if value is not None:
                argv += [flag, str(value)]
        if self.config:
            assert self.data_dir, "a config file is written beside the data directory"
            path = self.data_dir + ".conf"
            with open(path, "w") as f:
                f.write("".join(line + "\n" for line in self.config))
            argv += ["--config", path]
        if self.replicaof is not None:
            argv += ["--replicaof", HOST, str(self.replicaof)]
        return argv + list(self.extra)

    def banner(self) -> str:
        """Its "streamkeep <version> ... listening on ..." line ("" before it prints one)."""
        return next((ln.strip() for ln in self.output().splitlines() if LISTENING in ln), "")

    def segment_files(self) -> list[str]:
        """The AOF segment files in the data directory now, in name order."""
        try:
            names = os.listdir(self.data_dir)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.startswith("segment-") and n.endswith(".aof"))


class RedisServer(ServerProcess):
    """redis-server on `data_dir` (made if missing), logging to a file, no RDB snapshots:
    with ``--appendonly yes --appendfsync <policy>`` (its AOF, appendonlydir/, survives
    restarts), or ``--appendonly no`` when `appendfsync` is None; `extra` more arguments."""

    name = "redis-server"

    def __init__(self, data_dir: str, appendfsync: str | None = "always",
                 port: int | None = None, *, binary: str = "redis-server",
                 extra: Sequence[str] = (), **options: Any) -> None:
        super().__init__(data_dir, port, **options)
        path = shutil.which(binary)
        if path is None:
            raise ServerFailed(f"{binary} not found on PATH")
        self.binary = path
        self.appendfsync = appendfsync
        self.extra = tuple(extra)

    def spawn(self) -> None:
        os.makedirs(self.data_dir, exist_ok=True)
        super().spawn()

    def command(self) -> list[str]:
        persistence = ["--appendonly", "no"] if self.appendfsync is None \
            else ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        logfile = [] if self.log_path is None else ["--logfile", self.log_path]
        return [self.binary, "--port", str(self.port), "--bind", HOST, "--dir", self.data_dir,
                *persistence, "--save", "", *logfile, "--daemonize", "no", *self.extra]

    def version(self) -> str:
        """Its redis_version, "?" if it does not answer."""
        try:
            return self.info("server").get("redis_version", "?")
        except (ConnectionLost, CommandFailed):
            return "?"


class EtcdServer(ServerProcess):
    """etcd (3.4: Debian's etcd-server) on `data_dir`, a member `name` of a cluster: its
    clients on `port` (`url`), its peers on `peer_port` (`peer_url`), both free ports unless
    given. `initial_cluster` ("name=peer-url,...") is the cluster's members at its first start
    (default: this member alone), `cluster_state` "new" or "existing", `cluster_token` the
    cluster's token (default: the member's name); a start on a data directory that has
    data ignores the three. `kill` keeps the data: `start` again restarts the member on the
    same ports and data. `extra` more arguments. Ready when it lists itself among the members
    (not another process on its port) and serves a linearizable read (it has a leader)."""

    name = "etcd"

    def __init__(self, data_dir: str, port: int | None = None, *,
                 peer_port: int | None = None, name: str | None = None,
                 initial_cluster: str | None = None, cluster_state: str = "new",
                 cluster_token: str | None = None, binary: str = "etcd",
                 extra: Sequence[str] = (), **options: Any) -> None:
        super().__init__(data_dir, port, **options)
        path = shutil.which(binary)
        if path is None:
            raise ServerFailed(f"{binary} not found on PATH (make dev installs Debian's "
                               f"etcd-server)")
        self.binary = path
        self.peer_port = free_port() if peer_port is None else peer_port
        self.fixed_port = self.fixed_port or peer_port is not None
        # A name of its own: the member list tells this member from another on the port.
        self.member_name = name or f"{os.path.basename(self.data_dir) or 'etcd'}-{os.getpid()}"
        self.initial_cluster = initial_cluster
        self.cluster_state = cluster_state
        self.cluster_token = cluster_token
        self.extra = tuple(extra)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    def choose_ports(self) -> None:
        self.port, self.peer_port = free_port(), free_port()

    def spawn(self) -> None:
        os.makedirs(os.path.dirname(self.data_dir), exist_ok=True)
        super().spawn()

    def command(self) -> list[str]:
        cluster = self.initial_cluster or f"{self.member_name}={self.peer_url}"
        return [self.binary, "--name", self.member_name, "--data-dir", self.data_dir,
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", self.peer_url,
                "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", cluster, "--initial-cluster-state", self.cluster_state,
                "--initial-cluster-token", self.cluster_token or self.member_name,
                "--logger", "zap", "--log-level", "warn", *self.extra]

    def client(self, timeout: float = 2.0) -> Etcd:
        """A client of this member alone."""
        return Etcd(self.url, timeout)

    def ready(self) -> bool:
        if not self.alive:
            return False
        try:
            with self.client(timeout=ETCD_PROBE_TIMEOUT) as etcd:
                if self.member_name not in {m.name for m in etcd.members()}:
                    return False
                etcd.get("ready")  # a linearizable read: it has a leader
                return True
        except EtcdError:
            return False
