"""Shared mode: one data directory, many processes, through a server the directory runs itself.

Owns what `Engine.open(path, shared=True, **settings)` does before it has a connection:

- the directory: made if missing, this user's only (mode 0700; another user's is refused);
- the start lock, `shared.lock` (flock): held shared by a process while it connects and is
  answered, exclusively by one that found no server and starts it, and exclusively by a
  server before it shuts down for idleness (engine.server.shared_mode). So exactly one
  server is ever started, however many processes open the directory at once, and a server
  never leaves under a process that is connecting;
- connecting to `shared.sock`: only a socket owned by this user, and only to a peer that is
  a process of this user (SO_PEERCRED); a socket nothing listens on (its server was killed)
  is stale: the server started next replaces it;
- starting the server: `streamkeep serve --shared --daemonize` (a detached process that
  outlives its starter, in a session of its own; its output goes to `shared.log`), handed
  the start lock so that it binds its socket under it; the starter waits until it serves or
  says why it cannot (the directory open in another process without shared mode: LockedError
  naming that process). A previous server that still holds the directory's lock, shutting
  down or killed and still exiting, is waited for, then replaced. A directory another process
  holds without shared mode (a `streamkeep serve`, an in-process Engine) is refused and left
  as it was found (the shared-mode files made for the attempt removed, its mode put back):
  the refusal names that process, and for a server where it listens (`held_by`), to connect
  to it instead;
- the directory's settings: a new directory's are the first opener's, recorded in
  `shared.conf` (redis.conf syntax; the server reads it, CONFIG REWRITE writes it); an opener
  asking for a setting the running server has otherwise is refused (SharedError naming both
  values), never silently given the server's.

Linux only (flock, SO_PEERCRED, /proc/locks). The connection and the Engine's API over it are
engine.services.shared_client's; the server's side is engine.server.shared_mode's. Must not
touch: command semantics, the data directory's data files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from streamkeep.aof.fs import LockedError, lock_holder, refuse_not_a_directory
from streamkeep.aof.manifest import LOCK_FILE, SHARED_CONF, SHARED_LOCK, SHARED_LOG, SHARED_SOCKET
from streamkeep.engine.exec.settings import (
    PARAMS,
    USER_LINES,
    normalize_settings,
    parse_setting,
)
from streamkeep.engine.services.shared_client import (
    Connection,
    ServerLost,
    SharedEngine,
    SharedError,
)
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply_parser import encode_command

# A Unix socket's address is at most this many bytes (sun_path less its terminating NUL): a
# longer path is reached through /proc/self/fd/N/ of a descriptor of its directory.
MAX_SOCKET_PATH = 107
CONNECT_ATTEMPTS = 5  # servers that went away while a process connected, before giving up
SHUTDOWN_WAIT = 60.0  # seconds a starter waits for the previous server to finish closing
EXIT_IN_USE = 4  # `streamkeep serve`'s exit status when the data directory's lock is held
# Engine.open's keyword arguments that are not the directory's settings: the server opens
# the directory with its own file layer and clock.
NOT_SHARED = ("fs", "clock", "aof_segment_max_bytes", "config_file", "dir")
CONF_HEADER = ("# This data directory's settings in shared mode: its server (streamkeep serve\n"
               "# --shared) reads them at start; CONFIG REWRITE writes them back.\n")
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@contextlib.contextmanager
def socket_address(file: str) -> Iterator[str]:
    """An address for bind() or connect() that names the socket `file`: the path itself, or
    for a long one /proc/self/fd/N/<name> through a descriptor of its directory (kept open
    for the block)."""
    if len(os.fsencode(file)) <= MAX_SOCKET_PATH:
        yield file
        return
    fd = os.open(os.path.dirname(file) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{os.path.basename(file)}"
    finally:
        os.close(fd)


@contextlib.contextmanager
def start_lock(path: str, exclusive: bool) -> Iterator[int]:
    """The directory's start lock held (shared or exclusive) for the block; its descriptor."""
    fd = os.open(os.path.join(path, SHARED_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)  # (the lock goes with the last descriptor of its open file)


def prepare_directory(path: str) -> str:
    """`path` made if missing and reachable by its owner only (mode 0700): its absolute
    path. SharedError if another user owns it."""
    path = os.path.abspath(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        refuse_not_a_directory(path)
        raise
    st = os.stat(path)
    if st.st_uid != os.getuid():
        raise SharedError(f"{path}: owned by uid {st.st_uid}, not by this user (uid "
                          f"{os.getuid()}): a shared directory is its owner's only")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    return path


def shared_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """An opener's settings as the directory's server would take them: Redis's names,
    canonical values (ConfigError for an unknown one); SharedError for an argument that only
    an in-process engine takes."""
    for name in config:
        if name.replace("-", "_") in NOT_SHARED:
            raise SharedError(f"{name}: not a setting of a shared directory (its server opens "
                              "the directory); open it in process to use it")
        if name.lower() == USER_LINES:
            raise SharedError("user: a shared directory's users are its server's: add them "
                              "with ACL SETUSER (then CONFIG REWRITE keeps them in its "
                              "shared.conf)")
    return normalize_settings(config)


def peer_of(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    pid, uid, _gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid


def probe(file: str) -> socket.socket | None:
    """A connection to the server listening on the socket `file`, or None if nothing does
    (no such file, or a stale socket: ECONNREFUSED). SharedError, without connecting, if the
    file is not a socket of this user's, and after connecting if the peer is another user's
    process."""
    try:
        st = os.lstat(file)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        raise SharedError(f"{file}: not a socket; refusing to connect (shared mode's socket "
                          "is made by the directory's server)")
    if st.st_uid != os.getuid():
        raise SharedError(f"{file}: owned by uid {st.st_uid}, not by this user: refusing to "
                          "connect")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        with socket_address(file) as address:
            sock.connect(address)
        pid, uid = peer_of(sock)
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    except BaseException:
        sock.close()
        raise
    if uid != os.getuid():
        sock.close()
        raise SharedError(f"{file}: the process listening on it ({pid}) is uid {uid}'s, not "
                          "this user's: refusing to use it")
    return sock


def _argv(pid: int) -> list[str]:
    """Process `pid`'s command line (empty if it is gone or cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [os.fsdecode(word) for word in f.read().split(b"\0") if word]
    except OSError:
        return []


def listening_on(pid: int) -> list[tuple[str, int]]:
    """The TCP addresses (host, port) process `pid` listens on, read from /proc (its socket
    descriptors, its network namespace's tcp tables); empty if none or they cannot be read."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for fd in fds:
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            words = bytes.fromhex(address)  # 32-bit words, each in the host's byte order
            raw = b"".join(int.from_bytes(words[i:i + 4], sys.byteorder).to_bytes(4, "big")
                           for i in range(0, len(words), 4))
            found.append((socket.inet_ntop(family, raw), int(port, 16)))
    return found


def _is_serve(argv: list[str]) -> bool:
    """Whether a command line is `streamkeep serve` (the script, or `python -m streamkeep`)."""
    if "serve" not in argv:
        return False
    return any(os.path.basename(word) == "streamkeep" for word in argv[:argv.index("serve")])


@dataclass(frozen=True, slots=True)
class Holder:
    """The process holding a data directory's lock (`held_by`): its pid, whether it is a
    `streamkeep serve`, and then where it listens (its first TCP address, None if it has
    none that can be read) and whether it is the directory's shared server."""

    pid: int
    serve: bool = False
    address: tuple[str, int] | None = None
    shared: bool = False  # `streamkeep serve --shared`: a directory's own shared server

    @property
    def url(self) -> str | None:
        """A redis:// URL of the server (its wildcard address as loopback), or None."""
        if self.address is None:
            return None
        host, port = self.address
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        return f"redis://{f'[{host}]' if ':' in host else host}:{port}"

    def describe(self) -> str:
        """"`streamkeep serve` (process 42) listening on 127.0.0.1 port 6390", or "process
        42"."""
        if not self.serve:
            return f"process {self.pid}"
        where = "" if self.address is None else \
            f" listening on {self.address[0]} port {self.address[1]}"
        return f"`streamkeep serve` (process {self.pid}){where}"


def held_by(path: str) -> Holder | None:
    """The process holding the data directory's lock, None if no process does."""
    pid = lock_holder(os.path.join(os.path.abspath(path), LOCK_FILE))
    if pid is None:
        return None
    argv = _argv(pid)
    if not _is_serve(argv):
        return Holder(pid)
    addresses = listening_on(pid)
    return Holder(pid, True, addresses[0] if addresses else None, "--shared" in argv)


def _in_use(path: str, pid: int) -> LockedError:
    """The refusal of a shared opener of `path`, which process `pid` has open without shared
    mode: a server is named with where it listens (connect to it instead)."""
    holder = held_by(path) or Holder(pid)
    if holder.serve:
        url = "" if holder.url is None else f" ({holder.url})"
        return LockedError(f"data directory is in use: {path} is held by {holder.describe()}, "
                           f"which opened it without shared mode: connect to that server"
                           f"{url} instead")
    return LockedError(f"data directory is in use: {path} is open in {holder.describe()} "
                       "without shared mode, so its shared server cannot start (open it with "
                       "shared=True there too, or close it there)")


def _found(path: str) -> tuple[int, frozenset[str]] | None:
    """A directory's mode and which of its shared-mode files it has, before an opener makes or
    changes anything; None if it is not there yet."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        names = frozenset(os.listdir(path))
    except OSError:
        return None
    return mode, names & {SHARED_CONF, SHARED_LOG, SHARED_LOCK}


class SharedDirectory:
    """A data directory opened in shared mode by this process: how it connects (see the module
    docstring) and the settings it asked for."""

    def __init__(self, path: str, settings: Mapping[str, Any]) -> None:
        self.settings = shared_settings(settings)  # before anything is made
        self.found = _found(os.path.abspath(path))  # (what a refusal puts back)
        self.path = prepare_directory(path)
        self.socket = os.path.join(self.path, SHARED_SOCKET)
        self.conf = os.path.join(self.path, SHARED_CONF)
        self.log = os.path.join(self.path, SHARED_LOG)

    def connect(self) -> Connection:
        """A connection to the directory's server, started if none runs, whose settings
        are those asked for (it answered: it counts the connection as a client). Refused
        because another process has the directory open without shared mode (LockedError), it
        leaves the directory as it found it (`_put_back`), unless an earlier connect of this
        opener succeeded."""
        try:
            conn = self._connect()
        except LockedError:
            self._put_back()
            raise
        self.found = None  # (opened once: what it made is the directory's now)
        return conn

    def _put_back(self) -> None:
        """The directory as this opener found it: the shared-mode files it made (its settings,
        start lock and log: no shared server could run there, and the refusal says why)
        removed, its mode as it was."""
        if self.found is None:
            return
        mode, names = self.found
        for name in (SHARED_CONF, SHARED_LOG, SHARED_LOCK):
            if name not in names:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.path, name))
        with contextlib.suppress(OSError):
            os.chmod(self.path, mode)

    def _connect(self) -> Connection:
        for _attempt in range(CONNECT_ATTEMPTS):
            with start_lock(self.path, exclusive=False):
                conn = self._connection()
                if conn is not None:
                    with contextlib.suppress(ServerLost):
                        return self._checked(conn)
            with start_lock(self.path, exclusive=True) as lock_fd:
                conn = self._connection()
                if conn is None:
                    self.start_server(lock_fd)
                    conn = self._connection()
                    if conn is None:
                        raise SharedError(f"{self.path}: its shared server started but does "
                                          f"not answer on {self.socket} (see {self.log})")
                with contextlib.suppress(ServerLost):
                    return self._checked(conn)
        raise SharedError(f"{self.path}: its shared server went away {CONNECT_ATTEMPTS} times "
                          f"while this process connected (see {self.log})")

    def _connection(self) -> Connection | None:
        sock = probe(self.socket)
        return None if sock is None else Connection(sock, peer_of(sock)[0])

    def _checked(self, conn: Connection) -> Connection:
        """`conn` once the server answered it, and with the settings asked for. ServerLost if
        the server went away first, even before it read the check (a broken pipe)."""
        try:
            if not self.settings:
                conn.send(encode_command((b"PING",)))
                reply = conn.read()
                if type(reply) is ReplyError:
                    raise SharedError(f"{self.socket}: {reply}")
                return conn
            names = list(self.settings)
            conn.send(encode_command((b"CONFIG", b"GET", *(n.encode() for n in names))))
            reply = conn.read()
            if type(reply) is ReplyError:
                raise SharedError(f"{self.socket}: CONFIG GET: {reply}")
            self._compare(dict(zip(reply[0::2], reply[1::2], strict=True)), conn.server_pid)
            return conn
        except ServerLost:
            conn.close()
            raise
        except OSError as err:  # it went away before it read the check: as if it had not replied
            conn.close()
            raise ServerLost(f"the shared server (process {conn.server_pid}) went away: "
                             f"{err.strerror or err}") from None
        except BaseException:
            conn.close()
            raise

    def _compare(self, running: dict[bytes, bytes], pid: int) -> None:
        differ = []
        for name, wanted in self.settings.items():
            text = running.get(name.encode())
            value = None if text is None else parse_setting(name, text.decode())
            if value != wanted:
                param = PARAMS[name]
                shown = "nothing" if value is None else param.format(value)
                differ.append(f"{name} {shown}, not {param.format(wanted)}")
        if differ:
            raise SharedError(
                f"{self.path}: its shared server (process {pid}) runs with "
                f"{'; '.join(differ)}: the directory's settings are its server's (recorded in "
                f"{self.conf}); open it without them, or change them there (CONFIG SET, then "
                "CONFIG REWRITE) and restart the server")

    def record_settings(self) -> None:
        """A directory without shared.conf gets one: the settings this opener asked for, and
        its fsync policy even if not asked (the default), so that it is the directory's."""
        if os.path.exists(self.conf):
            return
        settings = {"appendfsync": PARAMS["appendfsync"].default, **self.settings}
        lines = [text for name, value in settings.items()
                 for text, _force in PARAMS[name].rewrite_lines(value)]
        tmp = f"{self.conf}.tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", closefd=False) as out:
                out.write(CONF_HEADER + "".join(f"{line}\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, self.conf)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def start_server(self, lock_fd: int) -> None:
        """Start the directory's server (start lock held exclusively on `lock_fd`, which it is
        handed) and wait until it serves. LockedError naming the process that has the
        directory open without shared mode; SharedError with the server's reason otherwise."""
        self.record_settings()
        argv = [sys.executable or "python3", "-m", "streamkeep", "serve", "--shared",
                "--daemonize", "--dir", self.path, "--start-lock-fd", str(lock_fd)]
        for _attempt in range(CONNECT_ATTEMPTS):
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, pass_fds=(lock_fd,), cwd="/",
                                  start_new_session=True, check=False)
            if done.returncode == 0:
                return
            holder = lock_holder(os.path.join(self.path, LOCK_FILE))
            if holder is None:
                if done.returncode == EXIT_IN_USE:
                    continue  # its holder let go between the server's try and this look
                break
            if not _letting_go(holder):
                break
            # The directory's previous server is still closing it (SHUTDOWN, SIGTERM: it let
            # go of its socket first), or was killed and the kernel is still tearing it down
            # (its socket refuses already, its lock not yet released): its successor starts
            # once it has gone.
            wait_exited(holder)
        if holder is not None:
            raise _in_use(self.path, holder)
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise SharedError(f"{self.path}: its shared server could not start: {lines[-1]} "
                          f"(its log: {self.log})")


PF_EXITING = 0x4  # /proc/PID/stat's flags: the process is exiting (include/linux/sched.h)


def _stat(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None if the
    process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _gone(fields: list[bytes] | None) -> bool:
    """Whether a process of these /proc/PID/stat fields has released everything it held: gone,
    or a zombie whose other threads have exited too (a killed process's leader turns zombie
    first; its descriptors, and so its locks, go with the last of its threads)."""
    return fields is None or fields[0] in (b"Z", b"X") and int(fields[17]) <= 1


def _letting_go(pid: int) -> bool:
    """Whether process `pid` will release the directory's lock by itself: it is gone or
    exiting (a killed process the kernel is still tearing down: its command line already
    reads empty), or it runs `streamkeep serve --shared` (a server shutting down)."""
    fields = _stat(pid)
    if fields is None or fields[0] in (b"Z", b"X") or int(fields[6]) & PF_EXITING:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return True  # gone since
    return b"serve" in argv and b"--shared" in argv


def wait_exited(pid: int, timeout: float = SHUTDOWN_WAIT) -> None:
    """Until process `pid` has released everything it held (at most `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _gone(_stat(pid)):
        time.sleep(0.01)


def open_shared(path: str, settings: Mapping[str, Any] | None = None) -> SharedEngine:
    """The directory `path` opened in shared mode (see the module docstring)."""
    given = dict(settings or {})
    directory = SharedDirectory(path, given)
    return SharedEngine(directory.path, directory.connect, directory.connect(),
                        (open_shared, (directory.path, given)))


def serving(path: str) -> int | None:
    """The pid of the shared server answering on the directory's socket, or None (never
    starts one)."""
    sock = None
    with contextlib.suppress(SharedError, OSError):
        sock = probe(os.path.join(os.path.abspath(path), SHARED_SOCKET))
    if sock is None:
        return None
    pid = peer_of(sock)[0]
    sock.close()
    return pid


def holder_hint(path: str) -> str:
    """For an opener refused by the directory's lock: " (the directory's shared server...)"
    when the holder is the process answering on its shared socket, else ""."""
    holder = lock_holder(os.path.join(os.path.abspath(path), LOCK_FILE))
    if holder is None or holder == os.getpid() or serving(path) != holder:
        return ""
    return " (the directory's shared server: open it with shared=True)"


__all__ = ["CONNECT_ATTEMPTS", "MAX_SOCKET_PATH", "Holder", "SharedDirectory", "held_by",
           "holder_hint", "listening_on", "open_shared", "peer_of", "prepare_directory", "probe",
           "serving", "shared_settings", "socket_address", "start_lock"]
