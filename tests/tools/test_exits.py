"""tools/exits.py: usage errors exit 3 in two lines, Ctrl-C's handlers (the first interrupt
raises, later ones wait; a block that finishes before an interrupt takes effect; workers that
ignore it), and an unfinished output directory undone."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from streamkeep.tools.exits import (
    EXIT_USAGE,
    Parser,
    ignore_sigint,
    interrupted,
    sigint_handled,
    uninterrupted,
)

main_thread_only = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers are the main thread's")


def test_usage_errors_exit_3_with_the_usage_on_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
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
    usage, error = capsys.readouterr().err.splitlines()
    assert usage.startswith("usage: streamkeep thing [-h] [--count COUNT]")
    assert error == "streamkeep thing: error: argument --count: invalid int value: 'many'"
    with pytest.raises(SystemExit) as done:
        parser.parse_args(["child", "extra"])
    assert done.value.code == EXIT_USAGE


@main_thread_only
def test_the_first_ctrl_c_raises_and_later_ones_wait() -> None:
    before = signal.getsignal(signal.SIGINT)
    with sigint_handled():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # (handled at the next bytecode)
            for _ in range(1000):
                pass
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)  # ignored: the cleanup goes on
    assert signal.getsignal(signal.SIGINT) is before


@main_thread_only
def test_an_uninterrupted_block_finishes_then_the_interrupt_takes_effect() -> None:
    done = []
    with pytest.raises(KeyboardInterrupt), uninterrupted():
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        done.append("the whole block")
    assert done == ["the whole block"]
    with uninterrupted():  # no interrupt: nothing raised
        done.append("again")
    assert done[-1] == "again"


@main_thread_only
def test_workers_ignore_sigint() -> None:
    before = signal.getsignal(signal.SIGINT)
    try:
        ignore_sigint()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_interrupted_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert interrupted("streamkeep aof dump") == 130
    assert capsys.readouterr().err == "streamkeep aof dump: interrupted\n"
