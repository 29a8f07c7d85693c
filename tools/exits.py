"""What every `streamkeep` command shares about ending: usage errors and Ctrl-C.

Owns the exit statuses all commands agree on (3: usage or I/O error; 130: interrupted, as a
shell reports a process that SIGINT ended), `Parser` (argparse, but a usage error prints the
usage on one line and the error on the next, then exits 3: argparse's own 2 means "damaged"
for the inspection commands), and Ctrl-C: the main process's SIGINT handler (the first
Ctrl-C raises KeyboardInterrupt, later ones are ignored so that the cleanup it starts is not
cut short), `ignore_sigint` for worker processes (the terminal sends SIGINT to the whole
process group: workers must leave reporting it to the main process) and `uninterrupted`, a
block that Ctrl-C does not cut (an interrupt then takes effect when it ends). (How an output
is written whole or not at all is tools.outputs'.)
Stdlib only: `streamkeep --help` imports it.
Must not touch: what each command does or prints otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, NoReturn

EXIT_USAGE = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit EXIT_USAGE with two lines: the usage (joined
    into one line) and the error. Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        self.exit(EXIT_USAGE, f"{usage}\n{self.prog}: error: {message}\n")


def positive_int(text: str) -> int:
    """An argparse type: an integer of 1 or more (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: at least 1")
    return value


def _first_interrupt(signum: int, frame: Any) -> None:
    # Later Ctrl-Cs are ignored: the cleanup this one starts (removing a half-made output,
    # releasing a lock) must not be cut short and end in a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigint_handled() -> Iterator[None]:
    """While a command runs: the first Ctrl-C raises KeyboardInterrupt, later ones are
    ignored. The handler before is put back afterwards (a caller in process: the tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _first_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ignore_sigint() -> None:
    """A worker process's initializer: Ctrl-C is the main process's to report."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block to its end whatever Ctrl-C does meanwhile (a change that must be whole or
    not at all); an interrupt that came during it is raised once it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught and previous is not signal.SIG_IGN:  # (ignored: a cleanup is under way)
        if callable(previous):
            previous(signal.SIGINT, None)  # the handler it deferred to, as if it came now
        raise KeyboardInterrupt


def interrupted(command: str) -> int:
    """Say that `command` was interrupted (one line on stderr); its exit status."""
    with contextlib.suppress(OSError, ValueError):  # stderr gone: the status says it
        print(f"{command}: interrupted", file=sys.stderr, flush=True)
    return EXIT_INTERRUPTED
