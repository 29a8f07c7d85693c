"""What every `streamkeep` command shares about ending: usage errors and signals.

Owns the exit statuses all commands agree on (3: usage or I/O error; 128 + the signal's
number when a signal ended it, as a shell reports a process that signal killed: 130 for
SIGINT, 143 for SIGTERM, 129 for SIGHUP), `Parser` (argparse, but a usage error prints the
usage of the (sub)command the user typed, wrapped to the help's width, then the error line,
and exits 3: argparse's own 2 means "damaged" for the inspection commands), and the signals
that end a command: SIGINT (Ctrl-C), SIGTERM
(`kill`, a service manager) and SIGHUP (the terminal closed) all take the same way out. The
main process's handler (`signals_handled`) raises `Interrupted` (a KeyboardInterrupt: every
`finally` and `with` on the way up runs, removing what the command made; tools.temporaries
has the rest) at the first of them and ignores the later ones so that the cleanup it starts
is not cut short; `ignore_terminal_signals` for worker processes (the terminal sends SIGINT
and SIGHUP to the whole process group: workers leave the decision to the main process) and
`uninterrupted`, a block that none of them cuts (the signal then takes effect when it ends).
(How an output is written whole or not at all is tools.safe_output'.)
Stdlib only: `streamkeep --help` imports it.
Must not touch: what each command does or prints otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn, TypeVar, overload

EXIT_USAGE = 3
_N = TypeVar("_N")  # (a namespace argparse fills: Parser.parse_known_args)
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130; SIGTERM: 143, SIGHUP: 129 (exit_status)
# The signals that end a command the same way: Ctrl-C, `kill` (or a service manager), and the
# terminal going away.
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A signal that ends the command (`signum`: SIGINT, SIGTERM or SIGHUP). A
    KeyboardInterrupt, so that whatever handles Ctrl-C handles the others the same way."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum


def interrupt_behind(err: BaseException) -> Interrupted | None:
    """The signal's Interrupted an exception was raised from, if any: one that landed inside
    code that wraps what it meets (a class being made while a module imports wraps it in a
    RuntimeError) still ends the command as an interruption."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, Interrupted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def exit_status(signum: int) -> int:
    """The exit status of a command a signal ended: 128 + its number (the shell's)."""
    return 128 + signum


def signal_of(err: BaseException) -> int:
    """The signal an interrupt came from (a bare KeyboardInterrupt: SIGINT)."""
    return getattr(err, "signum", signal.SIGINT)


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
    """An ArgumentParser whose usage errors exit EXIT_USAGE with the usage (wrapped to
    `help_width()`, as --help is) and then one error line, and whose --help is at most
    `help_width()` wide (a raw description or epilog's long lines wrapped:
    RawWrappedHelpFormatter). Subcommand parsers inherit the class, and each reports the
    arguments it does not know itself, with its own usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.format_usage().rstrip()}\n{self.prog}: error: {message}\n")

    @overload
    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: None = None) -> tuple[argparse.Namespace, list[str]]: ...

    @overload
    def parse_known_args(self, args: Iterable[str] | None,
                         namespace: _N) -> tuple[_N, list[str]]: ...

    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: Any = None) -> tuple[Any, list[str]]:
        # argparse hands what a subcommand's parser did not know up to the top-level parser,
        # whose usage (`streamkeep [-h] [--version] COMMAND ...`) is not the command the user
        # typed: the innermost parser that was left with them says so (a subcommand's parser
        # returns first).
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

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
    if _in_logging(frame):
        # Inside logging's own code: its at-fork hooks (run when a child is started with a
        # preexec_fn) take its module lock before the fork and release it after. Raised
        # between the two, the release fails with a traceback, or the lock stays taken and
        # the next log line hangs. Delivered a moment later, outside it.
        _redeliver(signum)
        return
    # Later signals are ignored: the cleanup this one starts (removing a half-made output,
    # stopping a child, releasing a lock) must not be cut short and end in a traceback.
    for other in ENDING_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signum)


def _in_logging(frame: Any) -> bool:
    """Whether `frame` or one of its callers runs logging's code (a redelivered interrupt may
    land in the handler that deferred the first one, on top of the logging frame)."""
    while frame is not None:
        if frame.f_globals.get("__name__") == "logging":
            return True
        frame = frame.f_back
    return False


def _interrupt_again(signum: int, frame: Any) -> None:
    # A redelivered interrupt: raised now unless the main thread is still inside the hook that
    # reported the dropped one (raised there, it would be dropped again, with a traceback).
    outer = frame
    while outer is not None:
        if outer.f_code is _dropped.__code__:
            _redeliver(signum)
            return
        outer = outer.f_back
    _first_interrupt(signum, frame)


def _redeliver(signum: int) -> None:
    """Send `signum` to the main thread again, from another thread a moment later: by then the
    main thread has left the context that dropped the Interrupted."""
    signal.signal(signum, _interrupt_again)
    main = threading.main_thread().ident
    assert main is not None

    def send() -> None:
        import time

        time.sleep(0.001)
        signal.pthread_kill(main, signum)

    threading.Thread(target=send, name="streamkeep-interrupt-again", daemon=True).start()


def _dropped(unraisable: Any) -> None:
    """sys.unraisablehook while a command runs. Python drops an exception raised where it
    cannot propagate (an at-fork hook: a child started with a preexec_fn runs them; a
    __del__); a signal's Interrupted raised there would be lost and the command would run on
    to its end. It is raised again, at the main thread's next step outside such a place.
    Anything else goes to the hook before."""
    err = unraisable.exc_value
    if isinstance(err, Interrupted) and threading.current_thread() is threading.main_thread():
        _redeliver(err.signum)
        return
    _previous_unraisablehook(unraisable)


_previous_unraisablehook: Any = sys.unraisablehook


def _install(handler: Any) -> dict[int, Any]:
    """`handler` for every ending signal not ignored (`nohup` ignores SIGHUP, a shell's
    background job SIGINT: they stay so); the handlers before, by signal."""
    return {signum: signal.signal(signum, handler) for signum in ENDING_SIGNALS
            if signal.getsignal(signum) is not signal.SIG_IGN}


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@contextlib.contextmanager
def signals_handled() -> Iterator[None]:
    """While a command runs: the first SIGINT, SIGTERM or SIGHUP raises Interrupted, later
    ones are ignored; one Python dropped (raised in an at-fork hook or a __del__) is raised
    again (`_dropped`). The handlers before are put back afterwards (a caller in process: the
    tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _previous_unraisablehook
    previous = _install(_first_interrupt)
    _previous_unraisablehook, sys.unraisablehook = sys.unraisablehook, _dropped
    try:
        yield
    finally:
        sys.unraisablehook = _previous_unraisablehook
        _restore(previous)


def ignore_ending_signals() -> None:
    """From now on none of them has an effect (the command is over: what is left is its
    cleanup; the handlers before come back when `signals_handled` ends)."""
    if threading.current_thread() is threading.main_thread():
        for signum in ENDING_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def ignore_terminal_signals() -> None:
    """A forked worker process's initializer: Ctrl-C and the terminal's hang-up reach the
    whole process group; they are the main process's to act on (it stops the workers).
    SIGTERM is how a pool stops its workers: it ends them at once, as by default (not by the
    handler a worker forked from the main process would otherwise have)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block to its end whatever signal comes meanwhile (a change that must be whole
    or not at all); an interrupt that came during it is raised once it ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = _install(lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        _restore(previous)
    if not caught:
        return
    signum = caught[0]
    handler = previous[signum]
    if handler is signal.SIG_IGN:  # ignored: a cleanup is under way
        return
    if callable(handler):
        handler(signum, None)  # the handler it deferred to, as if it came now
    raise Interrupted(signum)


def interrupted(command: str, signum: int = signal.SIGINT) -> int:
    """Say that `command` was interrupted (one line on stderr: "interrupted", and which
    signal unless Ctrl-C's); its exit status, 128 + the signal's number."""
    how = "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"
    with contextlib.suppress(OSError, ValueError):  # stderr gone: the status says it
        print(f"{command}: interrupted{how}", file=sys.stderr, flush=True)
    return exit_status(signum)
