"""A command's temporaries (files, directories, child processes): none left behind, however
it ends.

Owns the temporary files and directories the tools make, the child processes they start, and
sweeping what a command that was killed (SIGKILL: no cleanup of its own could run) left:

- a temporary's name says whose it is: `<head>-<pid>-<token>`, the pid of the process that made
  it and 8 random hex digits (beside an output, tools.safe_output: `.<name>.<what>-<pid>-<token>`;
  in the system's temp directory or a scratch file system: `streamkeep-<what>-<pid>-<token>`),
  and that process holds an exclusive flock on it (on the directory or the file itself) for as
  long as it lives: the kernel lets go of it when the process ends, however it ends;
- `sweep(directory)` removes the temporaries there that a process that is gone left behind:
  only a name of that form, a directory or a regular file (never a symlink) of this user,
  whose pid is no running process and whose lock is free. Anything else is left alone: a name
  of another form, another user's file, a live process's (a pid reused since by another
  process counts as live: the temporary goes once that one ends too). Every maker sweeps the
  directory it makes its temporary in, so what a killed run left goes at the next run there;
- `remove(path)`: a temporary removed and its lock let go (the normal way out, in `finally`);
- child processes: `child_options()` are Popen's arguments for a child in a session of its
  own (the terminal's Ctrl-C and hang-up reach the command only, which decides, and a child
  never prints a traceback of its own for them) that the kernel SIGKILLs when the command
  dies (PR_SET_PDEATHSIG, set before it runs anything: a command SIGKILLed takes its children
  with it); `track(proc)` / `untrack(proc)` the children whose process groups `cleanup()`
  SIGKILLs, if still running, whatever way the command takes out (tools.main calls it last,
  and it runs at exit); `init_worker` does the same for a multiprocessing worker, and
  `shielded_starts` / `start_shielded` keep the terminal's signals from a child that cannot
  have a session of its own while it starts.

Stdlib only. (tools.main calls `cleanup` last when the command imported this module.)
Must not touch: what the temporaries hold, how a command reacts to a signal (tools.exits).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

# What a temporary beside an output is for (tools.safe_output): the output's own being built, a
# command's state copy, export-rdb's work directory. A new kind is added here, or its maker's
# name is refused (`owned_name`): a sweep removes no name it does not know.
BESIDE_KINDS = ("tmp", "state", "export-rdb")
# <head>-<pid>-<token>: the head says what it is (.<name>.<kind> beside an output, or
# streamkeep-<what> elsewhere), the pid who made it.
_KINDS = "|".join(map(re.escape, BESIDE_KINDS))
_OWNED = re.compile(rf"(?:\..+\.(?:{_KINDS})|streamkeep-[a-z][a-z0-9-]*)-(\d+)-[0-9a-f]{{8}}")
_PR_SET_PDEATHSIG = 1

# a temporary this process made -> the descriptor its lock is on (None: not yet open)
_held: dict[str, int | None] = {}
_children: dict[int, subprocess.Popen] = {}  # tracked children, by pid
_lock = threading.Lock()


# --- temporaries ----------------------------------------------------------------------------


def owned_name(head: str) -> str:
    """A fresh temporary's name: `head` (`.<name>.<kind>`, a kind of BESIDE_KINDS, or
    `streamkeep-<what>`), this process's pid, a random token."""
    name = f"{head}-{os.getpid()}-{os.urandom(4).hex()}"
    if not is_owned_name(name):
        raise ValueError(f"{head!r}: not a head a sweep recognises")
    return name


def is_owned_name(name: str) -> bool:
    """Whether `name` has the form of a temporary's name (whoever made it)."""
    return _OWNED.fullmatch(name) is not None


def make_directory(path: str, mode: int = 0o777) -> str:
    """Create the temporary directory `path` (named by `owned_name`; it must not exist;
    `mode` as os.mkdir's: one renamed into place becomes the user's output) and hold its
    lock. Returns `path`."""
    _reserve(path)
    try:
        os.mkdir(path, mode)
    except OSError:  # not made (an interrupt, made or not, leaves it reserved)
        _unreserve(path)
        raise
    _hold(path, os.O_RDONLY | os.O_DIRECTORY)
    return path


def open_file(path: str) -> Any:
    """Create the temporary file `path` (named by `owned_name`; it must not exist), holding
    its lock: a binary file object open for writing."""
    _reserve(path)
    try:
        f = open(path, "xb")  # noqa: SIM115 (the caller closes it)
    except OSError:
        _unreserve(path)
        raise
    try:
        _hold(path, os.O_RDONLY)
    except BaseException:
        f.close()
        raise
    return f


def _reserve(path: str) -> None:
    """Known before it exists: an interrupt between its making and its lock leaves it
    `cleanup`'s to remove (its maker's `finally` may not be set up yet)."""
    with _lock:
        if path in _held:
            raise FileExistsError(errno.EEXIST, "a temporary of this process's", path)
        _held[path] = None


def _unreserve(path: str) -> None:
    with _lock:
        _held.pop(path, None)


def _hold(path: str, flags: int) -> None:
    fd = os.open(path, flags | os.O_CLOEXEC)
    with _lock:
        _held[path] = fd
    # A file system without flock (some network ones): then a sweep can never prove the
    # temporary is a dead process's, and leaves it; it is still removed on the way out.
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def remove(path: str) -> None:
    """Remove a temporary (a directory with what it holds, or a file), if it is still there,
    and let go of its lock."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    release(path)


def release(path: str) -> None:
    """Let go of a temporary's lock without removing it (it was renamed into place: it is
    the output now)."""
    with _lock:
        fd = _held.pop(path, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def temp_directory_path(what: str, parent: str | None = None) -> str:
    """A new temporary directory `streamkeep-<what>-<pid>-<token>` in `parent` (default: the
    system's temp directory, $TMPDIR), once what killed runs left there is swept; its path.
    The caller removes it (`remove`)."""
    parent = parent or tempfile.gettempdir()
    sweep(parent)
    return make_directory(os.path.join(parent, owned_name(f"streamkeep-{what}")), 0o700)


@contextlib.contextmanager
def temp_directory(what: str, parent: str | None = None) -> Iterator[str]:
    """`temp_directory_path`, removed with everything in it when the block ends."""
    path = temp_directory_path(what, parent)
    try:
        yield path
    finally:
        remove(path)


# --- sweeping what a killed run left --------------------------------------------------------


def sweep(directory: str) -> list[str]:
    """Remove the temporaries in `directory` that a process that is gone left behind (see the
    module's docstring for what counts); returns their names. Never raises: a directory that
    cannot be listed, or an entry that cannot be removed, is left as it is."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _OWNED.fullmatch(name)
        if match is not None and _sweep_one(os.path.join(directory, name), int(match[1])):
            removed.append(name)
    return removed


def _sweep_one(path: str, pid: int) -> bool:
    if _alive(pid):
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if st.st_uid != os.geteuid() or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
        return False
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (
        os.O_DIRECTORY if stat.S_ISDIR(st.st_mode) else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        opened = os.fstat(fd)
        if (opened.st_ino, opened.st_dev) != (st.st_ino, st.st_dev):
            return False  # replaced since it was looked at
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its maker (or a child it forked) is alive; or no flock here
            return False
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
        return not os.path.lexists(path)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's too)."""
    if pid <= 0:
        return True  # not a process's: never provably gone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError as err:
        return err.errno != errno.ESRCH  # EPERM: it exists
    return True


# --- child processes ------------------------------------------------------------------------


def child_options() -> dict[str, Any]:
    """Popen's keyword arguments for a child process that leaves with the command: a session
    of its own, and SIGKILLed by the kernel when the thread that starts it ends (the main
    thread: when the command's process does). From another thread the child is not tied to
    it (a thread ending early would kill it): it is stopped by its owner, or by `cleanup`."""
    options: dict[str, Any] = {"start_new_session": True}
    hook = die_with_parent_hook()
    if hook is not None:
        options["preexec_fn"] = hook
    return options


def die_with_parent_hook(then: Callable[[], None] | None = None) -> Callable[[], None] | None:
    """A preexec_fn (run in the child between fork and exec) asking the kernel to SIGKILL the
    child when its parent dies, and exiting at once if the parent died before the request
    could cover it; then `then` (a preexec_fn of someone else's, kept). None when it cannot
    work: not on the main thread (PR_SET_PDEATHSIG follows the thread that forks), not Linux."""
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here, not in the child
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent is gone already: nothing would kill this child
        if then is not None:
            then()

    return hook


TERMINAL_SIGNALS = {signal.SIGINT, signal.SIGHUP}  # the ones the whole process group gets


@contextlib.contextmanager
def shielded_starts(forkserver: bool = False) -> Iterator[None]:
    """Processes started in the block (forked, spawned, or by a pool's threads made in it)
    begin with SIGINT and SIGHUP blocked, from their first instruction (a blocked signal stays
    blocked through fork and exec; Python's start-up leaves the mask alone): Ctrl-C and the
    terminal's hang-up cannot interrupt them while they start (a traceback otherwise, from a
    worker's interpreter or its initializer). `init_worker` ignores both, then unblocks them;
    a child that does not call it keeps them blocked, and its parent stops it. `forkserver`:
    the forkserver is started here too, if it is not running yet, so that the workers it
    forks begin so as well. In this process, a signal that comes meanwhile takes effect at
    the end of the block."""
    from multiprocessing import resource_tracker

    # Started first: starting it unblocks SIGINT here (it blocks SIGINT and SIGTERM around
    # its own start, then unblocks them whatever they were), which the children would inherit.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINAL_SIGNALS)
    try:
        if forkserver:
            from multiprocessing import forkserver as server

            server.ensure_running()
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def start_shielded(process: Any) -> None:
    """Start a multiprocessing process (spawn: it cannot have a session of its own) under
    `shielded_starts`: Ctrl-C and the terminal's hang-up never reach it; its parent stops it."""
    with shielded_starts():
        process.start()


def init_worker() -> None:
    """A multiprocessing worker's initializer: it dies with the process that started it
    (PR_SET_PDEATHSIG: orphaned pool workers would wait on their queue for ever), and leaves
    Ctrl-C and the terminal's hang-up to the main process (tools.exits). Started under
    `shielded_starts`, it had them blocked until they are ignored here."""
    import multiprocessing

    from streamkeep.tools.exits import ignore_terminal_signals

    ignore_terminal_signals()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINAL_SIGNALS)  # (one pending is dropped)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: its parent stops it
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    # The parent is gone already (adopted by init). Not "not the process that asked for it":
    # a forkserver's workers are the forkserver's children, and it dies with that process.
    if os.getppid() == 1 and multiprocessing.parent_process() is not None:
        os._exit(1)


def track(proc: subprocess.Popen) -> None:
    """`cleanup` SIGKILLs `proc`'s process group (it leads one: `child_options`) if it is
    still running then."""
    with _lock:
        _children[proc.pid] = proc


def untrack(proc: subprocess.Popen) -> None:
    with _lock:
        _children.pop(proc.pid, None)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL `proc` and its process group (it leads one), and reap it. The group is
    signalled only while `proc` is not reaped: until then its pid, the group's id, cannot be
    another process's."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()  # (not a group leader after all: itself)
    proc.wait()


def end_child(proc: subprocess.Popen, timeout: float, signum: int | None = None) -> None:
    """Stop a child that leads its process group: `signum` to it (None: it was told to stop
    some other way), up to `timeout` seconds for it to exit, then SIGKILL to what is left of
    its group, and reap it; it is no longer tracked."""
    if proc.returncode is None:
        if signum is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
        _exited(proc, timeout)
    kill_group(proc)
    untrack(proc)


def _exited(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to `timeout` s for `proc` to exit, without reaping it (see kill_group)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped by someone else already
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def cleanup() -> None:
    """Kill the tracked children still running, and remove the temporaries still held: what
    a command's own way out missed. Safe to call more than once."""
    with _lock:
        children = list(_children.values())
        _children.clear()
        temporaries = list(_held)
    for proc in children:
        if proc.poll() is None:
            kill_group(proc)
    for path in temporaries:
        remove(path)


atexit.register(cleanup)
