"""The server's side of shared mode and of `unixsocket`: a Unix socket listener, and the life
of a data directory's shared server (its detached start, its exit once idle).

Owns:

- `listen_unix(file, perm)`: a listening Unix socket at `file`. A socket file already there
  is probed first (engine.services.shared.probe, which refuses a file that is not a socket of
  this user's): a server answering on it refuses the start, a stale one (a killed server's:
  nothing listens) is removed. Bound with `perm` from the start (the umask narrowed while it
  binds), listening at once: a process that connects while the directory is replayed waits
  for its first reply instead of finding nothing. `remove_unix` removes it at the end, if the
  file is still the one bound;
- `Daemon` (`streamkeep serve --daemonize`): the process forks; the parent waits for the
  child's word and exits 0 once it serves, or with the line that says why it cannot and the
  status the child would have exited with (1 when it dies before saying); the child leaves the session and writes its output to the log file. Forked before the socket
  is bound, so SO_PEERCRED names the process that serves;
- `IdleShutdown`: once no client has been connected for `idle-shutdown` seconds, it takes the
  directory's start lock (exclusive, without waiting: a process connecting holds it shared,
  and then a client is coming), closes the listener, removes the socket and shuts the server
  down; `release()`, once the engine has closed, lets the next opener start a server.

Must not touch: connections and commands (the server's), the directory's data files, the
client's side (engine.services.shared, engine.services.shared_client).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from streamkeep.aof.manifest import SHARED_LOCK
from streamkeep.engine.services.shared import peer_of, probe, socket_address
from streamkeep.engine.wire.errors import StreamkeepError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from streamkeep.engine.server.network import Server

BACKLOG = 511
IDLE_CHECK_SECONDS = 0.1  # how often an idle shared server looks at its clients


class UnixSocketError(StreamkeepError):
    """The Unix socket cannot be listened on: a server already answers on it, or the path
    is not a socket this user may replace."""


Identity = tuple[int, int, int]  # a file's device, inode and change time (ns)


def identity_of(file: str) -> Identity:
    st = os.stat(file)
    return st.st_dev, st.st_ino, st.st_ctime_ns


def listen_unix(file: str, perm: int = 0) -> tuple[socket.socket, Identity]:
    """A non-blocking socket listening at `file` (see the module docstring) and the bound
    file's identity, which `remove_unix` checks before removing it (an inode number alone
    may be the next socket's)."""
    try:
        answering = probe(file)
    except StreamkeepError as err:
        raise UnixSocketError(str(err)) from None
    if answering is not None:
        pid = peer_of(answering)[0]
        answering.close()
        raise UnixSocketError(f"{file}: a server (process {pid}) already listens on it")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(file)  # a stale socket: its server is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        # (the umask is the process's: this runs at start-up, before any thread)
        umask = os.umask(0o777 & ~perm) if perm else None
        try:
            with socket_address(file) as address:
                sock.bind(address)
        finally:
            if umask is not None:
                os.umask(umask)
        if perm:
            os.chmod(file, perm)
        identity = identity_of(file)
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except OSError as err:
        sock.close()
        raise UnixSocketError(f"{file}: cannot listen: {err.strerror or err}") from None
    return sock, identity


def remove_unix(file: str, identity: Identity) -> None:
    """Remove the socket file this server bound (not one a later server bound since)."""
    with contextlib.suppress(OSError):
        if identity_of(file) == identity:
            os.unlink(file)


class Daemon:
    """A process that detaches from its starter once it serves (see the module docstring)."""

    READY, FAILED = b"ready ", b"failed "

    def __init__(self, log_file: str) -> None:
        self.log_file = log_file
        self.word_fd = -1  # the child's end of the pipe to the waiting parent

    def detach(self) -> int | None:
        """Fork. In the parent: wait for the child's word and return the exit status (0: it
        serves). In the child: None, detached, its output going to the log file."""
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid:
            os.close(write_fd)
            return self._wait(read_fd)
        os.close(read_fd)
        os.setsid()
        self.word_fd = write_fd
        log_fd = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                         0o600)
        null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        os.close(null_fd)
        return None

    def _wait(self, read_fd: int) -> int:
        chunks = []
        while chunk := os.read(read_fd, 4096):
            chunks.append(chunk)
        os.close(read_fd)
        word = b"".join(chunks).decode(errors="replace")
        if word.startswith(self.READY.decode()):
            print(word[len(self.READY):].rstrip("\n"), flush=True)
            return 0
        if word.startswith(self.FAILED.decode()):
            status, _, line = word[len(self.FAILED):].partition(" ")
            print(line.rstrip("\n"), file=sys.stderr, flush=True)
            return int(status) if status.isdigit() else 1
        print(f"streamkeep serve: the server exited while starting (see {self.log_file})",
              file=sys.stderr, flush=True)
        return 1

    def ready(self, line: str) -> None:
        self._say(self.READY + line.encode())

    def failed(self, line: str, status: int) -> None:
        """Tell the parent the server cannot start: `line` why, `status` its exit status."""
        self._say(self.FAILED + b"%d " % status + line.encode())

    def _say(self, word: bytes) -> None:
        if self.word_fd < 0:
            return
        with contextlib.suppress(OSError):  # (the parent was killed: nobody waits)
            os.write(self.word_fd, word + b"\n")
        os.close(self.word_fd)
        self.word_fd = -1


class IdleShutdown:
    """A shared server's exit once idle (see the module docstring)."""

    def __init__(self, server: Server, directory: str, socket_file: str,
                 identity: Identity) -> None:
        self.server = server
        self.lock_file = os.path.join(directory, SHARED_LOCK)
        self.socket_file = socket_file
        self.identity = identity
        self.idle_since: float | None = None
        self.lock_fd = -1
        self.shut_down = False  # by idleness

    def start(self) -> None:
        """Start watching (on the server's loop, once it runs)."""
        self.server.loop.call_later(IDLE_CHECK_SECONDS, self._check)

    def _check(self) -> None:
        server = self.server
        if server.stopping is None or server.stopping.is_set():
            return
        seconds = int(server.engine.config["idle-shutdown"])
        now = time.monotonic()
        if server.clients or seconds <= 0:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now
        elif now - self.idle_since >= seconds and self._lock():
            if not server.clients:  # (none connected while the lock was taken)
                self._shut_down()
                return
            self.release()
            self.idle_since = None
        server.loop.call_later(IDLE_CHECK_SECONDS, self._check)

    def _lock(self) -> bool:
        """The start lock, exclusively, if no process holds it (connecting, or starting).
        True without it when the directory is gone (removed while the server waited): no
        process can reach this server again, so its idle exit needs no lock."""
        try:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            log.warning("the shared directory of %s is gone; the server exits", self.lock_file)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.lock_fd = fd
        return True

    def _shut_down(self) -> None:
        """No process can connect from now on (they wait for the start lock, then start a new
        server once this one has let go of the directory)."""
        self.shut_down = True
        for srv in self.server.servers:
            srv.close()
        remove_unix(self.socket_file, self.identity)
        self.server.request_shutdown()

    def release(self) -> None:
        """Let go of the start lock (after the engine closed: the directory is free)."""
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


__all__ = ["BACKLOG", "IDLE_CHECK_SECONDS", "Daemon", "Identity", "IdleShutdown",
           "UnixSocketError", "identity_of", "listen_unix", "remove_unix"]
