"""Checking a snapshot file whole, and saying where it is damaged without reading it in process.

Owns what the loaders and tools do with the checksum a manifest recorded for a snapshot file
(`crc32`): `check_whole` compares the file's bytes with it before LMDB maps the file, and on a
mismatch finds the damage in a child process (`locate`: the reader's per-value `check`, in a
forked copy of this process), because a damaged LMDB page can crash the process that follows
it (a page number or a size that points past the file is a SIGBUS, not an exception). The error
then names the file and the first damaged table and key, or says that the damage is in LMDB's
own pages. A segmented snapshot's part files are checked the same way, each against its own
size and checksum in the manifest (`check_parts`). `open_checked` is the tools' way in: the
whole-file checks where the manifest beside the file recorded them, then the reader.
`child_env` is the environment of a child that starts another interpreter on streamkeep's
modules (the compaction child).
Must not touch: the snapshot format (snapshot.layout, snapshot.reader), the manifest's schema.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from streamkeep.snapshot.reader import (
    Snapshot,
    SnapshotError,
    check_file,
    recorded_entry,
)

LOCATE_TIMEOUT = 300.0  # seconds a child may take to walk a damaged file


def check_whole(path: str, crc32: int | None,
                read_chunks: Callable[[], Iterator[bytes]] | None = None) -> None:
    """SnapshotError naming the file and, when the child finds one, the damaged table and key,
    unless the file's bytes (read by `read_chunks` if given) match `crc32` (None: nothing
    recorded, nothing to check)."""
    if crc32 is None:
        return
    try:
        check_file(path, crc32, read_chunks)
    except SnapshotError as err:
        raise SnapshotError(f"{err}; {locate(path)}") from None


def check_parts(directory: str, entry: Any, whole: bool = True) -> None:
    """SnapshotError unless each part file of the manifest's snapshot `entry`
    (aof.manifest.SnapshotEntry) in `directory` has the size the manifest recorded and, with
    `whole`, bytes that match its checksum."""
    for part in entry.parts:
        file = os.path.join(directory, part.file)
        try:
            size = os.stat(file).st_size
        except OSError as err:
            raise SnapshotError(f"{file}: a part of {entry.file}: {err.strerror}") from None
        if size != part.size:
            raise SnapshotError(f"{file}: {size} bytes, the manifest says {part.size} "
                                f"(truncated or replaced)")
        if whole:
            check_whole(file, part.crc32)


def open_checked(path: str) -> Snapshot:
    """`Snapshot(path)` once the whole file, and its part files, matched the checksums the
    manifest beside it recorded (if one names it)."""
    entry = recorded_entry(path)
    if entry is not None:
        check_whole(path, entry.crc32)
        check_parts(os.path.dirname(os.path.abspath(path)), entry)
    return Snapshot(path)


def locate(path: str) -> str:
    """Where the damage is, as found by the reader's `check` in a child process: a fork of
    this one, which has the reader loaded already. (A new interpreter per damaged file cost
    its start and imports, a tenth of a second and more on a busy machine, at every refused
    open: the crash bench's bit-rot model refuses thousands.)"""
    try:
        found, status = _in_a_fork(lambda: first_problem(path), LOCATE_TIMEOUT)
    except OSError as err:
        return f"the damage could not be located ({err})"
    if status is None:
        return f"the damage could not be located (no answer in {LOCATE_TIMEOUT:g} s)"
    if os.WIFSIGNALED(status):
        return ("the damage is in LMDB's own pages (reading them crashed a child process with "
                f"signal {os.WTERMSIG(status)})")
    if os.waitstatus_to_exitcode(status) != 0:
        return "the damage could not be located (the check failed in the child process)"
    found = found.strip().removeprefix(f"{path}: ")
    if found:
        return f"first damaged value: {found}" if found.startswith("table ") else found
    return "no value is damaged: the damage is in LMDB's own pages or in unused space"


def first_problem(path: str) -> str:
    """The first problem the reader's per-value `check` finds in the snapshot file at `path`,
    or "" (run in a child: a damaged page may crash the process that reads it)."""
    try:
        with Snapshot(path) as snap:
            problems = snap.check(limit=1)
    except SnapshotError as err:
        problems = [str(err)]
    return problems[0] if problems else ""


# What a signal meant for the process that forked must not run in its copy: the copy dies of it.
_CHILD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _in_a_fork(work: Callable[[], str], timeout: float) -> tuple[str, int | None]:
    """`work()` in a forked child: what it returned and the child's wait status (None: it did
    not finish within `timeout` and was killed). The child never returns into this process's
    code: it leaves by os._exit, whatever happens; an interrupt here kills and reaps it."""
    mine, theirs = socket.socketpair()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _CHILD_SIGNALS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        mine.close()
        theirs.close()
        raise
    if pid == 0:  # the child
        code = 1
        try:
            mine.close()
            faulthandler.disable()  # a crash of the copy is an answer: nothing dumped
            for signum in _CHILD_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            theirs.sendall(work().encode(errors="replace"))
            code = 0
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    theirs.close()
    reaped = False
    try:
        out = _receive_all(mine, time.monotonic() + timeout)
        if out is None:
            return "", None
        _pid, status = os.waitpid(pid, 0)
        reaped = True
        return out.decode(errors="replace"), status
    finally:
        mine.close()
        if not reaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _receive_all(sock: socket.socket, deadline: float) -> bytes | None:
    """Everything `sock` receives until its peer closes it; None past `deadline`."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def child_env() -> dict[str, str]:
    """The environment of a child process that runs one of streamkeep's modules (`python -m
    streamkeep.snapshot...`): it imports the package from where this process found it, and
    never from the working directory (`python -m` puts the working directory first on the
    path: a process started beside another checkout would run that checkout's code, half of
    it against this one's compiled modules)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(
        sys.modules["streamkeep"].__file__ or "")))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["PYTHONSAFEPATH"] = "1"  # (-P: no working directory on the path)
    return env
