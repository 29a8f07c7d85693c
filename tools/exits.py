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


HELP_WIDTH = 80  # columns: no line of --help is wider, nor wider than a narrower terminal


def help_width() -> int:
    """The width argparse formats --help to: HELP_WIDTH, or a narrower terminal's (COLUMNS)."""
    import shutil

    return max(40, min(HELP_WIDTH, shutil.get_terminal_size().columns))


class RawWrappedHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as they are written (examples, tables of exit statuses), but
    where a line is wider than the help: a paragraph of prose (lines that start at the margin)
    is filled again, an indented line is wrapped at its words, its continuation indented."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if any(len(indent) + len(line) > width for line in prose):
                out.extend(textwrap.wrap(" ".join(prose), width, initial_indent=indent,
                                         subsequent_indent=indent, break_long_words=False,
                                         break_on_hyphens=False))
            else:
                out.extend(indent + line for line in prose)
            prose.clear()

        for line in text.splitlines():
            if line and not line[0].isspace():
                prose.append(line)
                continue
            flush()
            if len(indent) + len(line) <= width:
                out.append(indent + line)
                continue
            out.extend(self._indented(line, width, indent))
        flush()
        return "\n".join(out)

    def _indented(self, line: str, width: int, indent: str) -> list[str]:
        """An indented line (an example, a table's row) too wide for the help, wrapped: the
        commands' texts are written to fit 80 columns, so only a narrower terminal gets here."""
        import textwrap

        lead = indent + line[:len(line) - len(line.lstrip())]
        return textwrap.wrap(line.strip(), width, initial_indent=lead,
                             subsequent_indent=lead + "    ", break_long_words=False,
                             break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit EXIT_USAGE with two lines: the usage (joined
    into one line) and the error, and whose --help is at most `help_width()` wide (a raw
    description or epilog's long lines wrapped: RawWrappedHelpFormatter). Subcommand parsers
    inherit the class."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        self.exit(EXIT_USAGE, f"{usage}\n{self.prog}: error: {message}\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        cls = self.formatter_class
        if cls is argparse.RawDescriptionHelpFormatter:
            cls = RawWrappedHelpFormatter
        return cls(prog=self.prog, width=help_width())  # type: ignore[call-arg]


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
