"""tools/exits.py: usage errors exit 3 with the usage of the (sub)command typed, wrapped to the
help's width, then one error line, the handlers of the signals that end a
command (SIGINT, SIGTERM, SIGHUP: the first raises Interrupted carrying its number, later ones
wait; one ignored from the start stays ignored; a block that finishes before an interrupt takes
effect; workers that leave the terminal's signals to the main process), the one line and the
exit status 128 + the signal's number."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from streamkeep.tools.exits import (
    EXIT_USAGE,
    Interrupted,
    Parser,
    ignore_terminal_signals,
    interrupted,
    signal_of,
    signals_handled,
    uninterrupted,
)

main_thread_only = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers are the main thread's")


def test_usage_errors_exit_3_with_the_usage_wrapped_then_one_error_line(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    parser = Parser(prog="streamkeep thing")
    parser.add_argument("--count", type=int)
    parser.add_argument("--a-rather-long-option-name", metavar="SOMETHING-LONG")
    parser.add_argument("--another-long-option", metavar="ANOTHER-LONG-VALUE")
    sub = parser.add_subparsers(dest="what", required=True)
    child = sub.add_parser("child")
    assert isinstance(child, Parser)  # subcommands inherit the class
    with pytest.raises(SystemExit) as done:
        parser.parse_args(["--count", "many", "child"])
    assert done.value.code == EXIT_USAGE
    *usage, error = capsys.readouterr().err.splitlines()
    assert usage[0].startswith("usage: streamkeep thing [-h] [--count COUNT]")
    assert len(usage) > 1 and all(len(line) <= 80 for line in usage), usage
    assert all(line.startswith(" ") for line in usage[1:]), usage
    assert "--another-long-option ANOTHER-LONG-VALUE" in " ".join(" ".join(usage).split())
    assert error == "streamkeep thing: error: argument --count: invalid int value: 'many'"
    with pytest.raises(SystemExit) as done:
        parser.parse_args(["child", "extra"])
    assert done.value.code == EXIT_USAGE
    *usage, error = capsys.readouterr().err.splitlines()
    # (the subcommand's own usage: the arguments left over are the subcommand's)
    assert usage == ["usage: streamkeep thing child [-h]"]
    assert error == "streamkeep thing child: error: unrecognized arguments: extra"


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


def _handled_now() -> None:
    for _ in range(1000):  # (a handler runs at the next bytecode)
        pass


@main_thread_only
@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_the_first_signal_raises_and_later_ones_wait(signum: int) -> None:
    before = {s: signal.getsignal(s) for s in SIGNALS}
    with signals_handled():
        with pytest.raises(KeyboardInterrupt) as caught:
            os.kill(os.getpid(), signum)
            _handled_now()
        assert isinstance(caught.value, Interrupted) and signal_of(caught.value) == signum
        for other in SIGNALS:  # ignored: the cleanup goes on
            assert signal.getsignal(other) is signal.SIG_IGN
            os.kill(os.getpid(), other)
            _handled_now()
    assert {s: signal.getsignal(s) for s in SIGNALS} == before


class _SignalsInDel:
    """An object whose __del__ gets `signum`: the Interrupted its handler raises there is one
    Python drops ("Exception ignored in ...")."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        _handled_now()


def _interrupted_within(steps: int) -> int:
    """How many 1 ms steps it took until Interrupted arrived (`steps` if it never did)."""
    import time

    for step in range(steps):
        try:
            time.sleep(0.001)
            _handled_now()
        except Interrupted:
            return step
    return steps


@main_thread_only
@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_an_interrupt_python_dropped_is_raised_again(
        signum: int, capsys: pytest.CaptureFixture[str]) -> None:
    before = {s: signal.getsignal(s) for s in SIGNALS}
    with signals_handled():
        _SignalsInDel(signum)  # dropped at once: the handler runs (and raises) in __del__
        assert _interrupted_within(10_000) < 10_000
        for other in SIGNALS:  # the redelivered one is the first: later ones are ignored
            assert signal.getsignal(other) is signal.SIG_IGN
    assert "Exception ignored" not in capsys.readouterr().err
    assert {s: signal.getsignal(s) for s in SIGNALS} == before


_signal_after_fork: list[int] = []  # armed by the test below: the signal its at-fork hook sends


def _after_fork_in_parent() -> None:
    if _signal_after_fork:
        os.kill(os.getpid(), _signal_after_fork.pop())
        _handled_now()


@main_thread_only
def test_a_signal_in_an_at_fork_hook_still_ends_the_command(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A child started with a preexec_fn (as tools.temporaries starts them) makes Python run the
    at-fork hooks (logging has some), where an exception is dropped: a signal that lands there
    still ends the command, without a traceback."""
    import subprocess
    import sys

    if not hasattr(_after_fork_in_parent, "registered"):
        os.register_at_fork(after_in_parent=_after_fork_in_parent)  # (cannot be taken back)
        _after_fork_in_parent.registered = True  # type: ignore[attr-defined]
    with signals_handled():
        _signal_after_fork.append(signal.SIGTERM)
        with pytest.raises(Interrupted) as caught:
            subprocess.run([sys.executable, "-c", "import time; time.sleep(30)"],
                           preexec_fn=os.getpid, check=False, timeout=60)
            _interrupted_within(10_000)
        assert caught.value.signum == signal.SIGTERM
    assert not _signal_after_fork
    assert "Exception ignored" not in capsys.readouterr().err


@main_thread_only
@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_inside_logging_is_raised_once_out_of_it(
        signum: int, capsys: pytest.CaptureFixture[str]) -> None:
    """logging's at-fork hooks take its module lock before a fork and release it after: an
    interrupt raised inside them fails the release (a traceback) or leaves the lock taken. One
    that lands in logging's code is raised a moment later, outside it."""
    import logging
    import time

    from streamkeep.tools import exits

    namespace = {"__name__": logging.__name__, "os": os}
    exec("def in_logging(signum):\n"  # noqa: S102 (a function with logging's module name)
         "    os.kill(os.getpid(), signum)\n"
         "    for _ in range(1000):\n"
         "        pass\n", namespace)
    with signals_handled(), pytest.raises(Interrupted) as caught:
        namespace["in_logging"](signum)  # the handler runs in there
        for _ in range(10_000):
            time.sleep(0.001)
    assert caught.value.signum == signum
    # Where it was raised: the frame the handler (this module's) ran on top of.
    modules = []
    tb = caught.value.__traceback__
    while tb is not None:
        modules.append(tb.tb_frame.f_globals.get("__name__"))
        tb = tb.tb_next
    assert modules[modules.index(exits.__name__) - 1] != logging.__name__, modules
    assert "Exception ignored" not in capsys.readouterr().err


@main_thread_only
def test_a_signal_ignored_from_the_start_stays_ignored() -> None:
    """`nohup` ignores SIGHUP before the command starts: the command does not undo that."""
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals_handled():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            _handled_now()
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


@main_thread_only
@pytest.mark.parametrize("signum", SIGNALS, ids=[s.name for s in SIGNALS])
def test_an_uninterrupted_block_finishes_then_the_interrupt_takes_effect(signum: int) -> None:
    done = []
    with signals_handled():
        with pytest.raises(KeyboardInterrupt) as caught, uninterrupted():
            os.kill(os.getpid(), signum)
            _handled_now()
            done.append("the whole block")
        assert signal_of(caught.value) == signum
    assert done == ["the whole block"]
    with uninterrupted():  # no interrupt: nothing raised
        done.append("again")
    assert done[-1] == "again"


@main_thread_only
def test_workers_leave_the_terminals_signals_and_die_by_sigterm() -> None:
    before = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        with signals_handled():  # (what a forked worker inherits)
            ignore_terminal_signals()
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_interrupted_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert interrupted("streamkeep aof dump") == 130
    assert capsys.readouterr().err == "streamkeep aof dump: interrupted\n"
    assert interrupted("streamkeep export", signal.SIGTERM) == 143
    assert capsys.readouterr().err == "streamkeep export: interrupted (SIGTERM)\n"
    assert interrupted("streamkeep import", signal.SIGHUP) == 129
    assert capsys.readouterr().err == "streamkeep import: interrupted (SIGHUP)\n"
    assert signal_of(KeyboardInterrupt()) == signal.SIGINT
