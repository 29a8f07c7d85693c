"""``streamkeep`` command-line entry point.

Owns the subcommand tree, ``--version``, and how every command ends: a usage error exits 3
(tools.exits.Parser), Ctrl-C, SIGTERM or SIGHUP ends any command with one line (``streamkeep
<command>: interrupted``, the signal named unless it was Ctrl-C) and exit status 128 + the
signal's number, leaving no child process and no temporary (tools.temporaries), an I/O error
nobody caught with one line and 3, a reader that closes the pipe (``| head``) quietly with 0,
whichever command was writing (and however the writing noticed: a BrokenPipeError, or rich's
exit for it). Only the subcommand that runs has its parser built and its module imported (the
others are a name and a help line, ``_COMMANDS``), so that every command, and ``streamkeep
--help``, starts without the modules of the others or the engine.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from streamkeep.tools.exits import (
    EXIT_USAGE,
    Parser,
    ignore_ending_signals,
    interrupt_behind,
    interrupted,
    signal_of,
    signals_handled,
)


def _cmd_demo(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import demo

    return demo.main()


def _cmd_bench(args: argparse.Namespace) -> int | None:
    from streamkeep.tools.bench import cli as command

    return command.main(args)


def _cmd_serve(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import serve

    return serve.main(args)


def _cmd_commands(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import docs

    return docs.main()


def version() -> str:
    """The installed package's version (its metadata), else pyproject.toml's (a checkout)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("streamkeep")
    except PackageNotFoundError:
        pass
    import tomllib

    pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "pyproject.toml")
    try:
        with open(pyproject, "rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked (``--help`` stays cheap)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from streamkeep.engine.exec import build_report

        print(f"streamkeep {version()}, {build_report.summary()}")
        parser.exit(0)


def _add_demo(sub: Any) -> None:
    p_demo = sub.add_parser("demo", help="run a short end-to-end demonstration")
    p_demo.set_defaults(func=_cmd_demo)


def _add_bench(sub: Any) -> None:
    from streamkeep.tools.bench import options as bench_options

    p_bench = bench_options.add_parser(sub)  # its options, examples and exit codes
    p_bench.set_defaults(func=_cmd_bench)


def _add_serve(sub: Any) -> None:
    from streamkeep.tools import serve

    p_serve = sub.add_parser(
        "serve", help="run the Redis-compatible network server",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=serve.EPILOG)
    serve.add_arguments(p_serve)
    p_serve.set_defaults(func=_cmd_serve)


def _add_inspect(sub: Any) -> None:
    from streamkeep.tools.inspect.cli import add_commands

    add_commands(sub)  # aof verify|stats|dump|fix, restore, snapshot info|dump


def _add_crashbench(sub: Any) -> None:
    from streamkeep.tools.crashbench import cli as crashbench

    p_crash = sub.add_parser("crashbench", help=crashbench.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    crashbench.add_arguments(p_crash)
    p_crash.set_defaults(func=crashbench.main)


def _add_export(sub: Any) -> None:
    from streamkeep.tools.export import cli as export

    p_export = sub.add_parser("export", help=export.HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_arguments(p_export)
    p_export.set_defaults(func=export.main)


def _add_import(sub: Any) -> None:
    from streamkeep.tools import redisimport

    p_import = sub.add_parser("import", help=redisimport.HELP, description=redisimport.HELP,
                              epilog=redisimport.EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    redisimport.add_arguments(p_import)
    p_import.set_defaults(func=redisimport.main)


def _add_export_rdb(sub: Any) -> None:
    from streamkeep.tools import rdbexport

    p_export_rdb = sub.add_parser("export-rdb", help=rdbexport.HELP, description=rdbexport.HELP,
                                  epilog=rdbexport.EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    rdbexport.add_arguments(p_export_rdb)
    p_export_rdb.set_defaults(func=rdbexport.main)


def _add_queue(sub: Any) -> None:
    from streamkeep.tools import workqueue

    workqueue.add_commands(sub)  # queue stats


def _add_url(sub: Any) -> None:
    from streamkeep.tools import url

    p_url = sub.add_parser("url", help=url.HELP, description=url.HELP, epilog=url.EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    url.add_arguments(p_url)
    p_url.set_defaults(func=url.main)


def _add_cluster(sub: Any) -> None:
    from streamkeep.tools import cluster_cli as cluster

    p_cluster = sub.add_parser("cluster", help=cluster.HELP, description=cluster.HELP,
                               epilog=cluster.EPILOG,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    cluster.add_arguments(p_cluster)
    p_cluster.set_defaults(func=cluster.main)


def _add_commands(sub: Any) -> None:
    p_commands = sub.add_parser("commands", help="print the command table as markdown")
    p_commands.set_defaults(func=_cmd_commands)


# The top-level commands in `streamkeep --help` order: the names one entry adds, their one-line
# helps (what `streamkeep --help` lists; each module's own HELP says the same, and
# tests/tools/test_main.py checks the two agree), and the function adding the whole subparser
# (or subparsers). Only the command that runs gets its subparser built, and so its module
# imported: every other one is a name and a help line (`streamkeep import` does not pay for
# the export, serve or crashbench modules).
_COMMANDS: list[tuple[tuple[str, ...], tuple[str, ...], Callable[[Any], None]]] = [
    (("demo",), ("run a short end-to-end demonstration",), _add_demo),
    (("bench",), ("run the benchmark suite",), _add_bench),
    (("serve",), ("run the Redis-compatible network server",), _add_serve),
    (("cluster",), ("make a cluster of streamkeep nodes, change it, check it, report it; run "
                    "its controller over etcd",), _add_cluster),
    (("aof", "restore", "snapshot"),
     ("offline aof inspection commands", "point-in-time recovery into a new data directory",
      "offline snapshot inspection commands"), _add_inspect),
    (("crashbench",), ("crash-recovery test bench: crash, recover, check invariants, report",),
     _add_crashbench),
    (("export",), ("export a data directory's tables (its current state), or a cluster's, to "
                   "Parquet, JSON or CSV with Spark, whole or incremental",), _add_export),
    (("import",), ("import the keys (of every type streamkeep stores) and functions of a "
                   "Redis dump.rdb, appendonly.aof or appendonlydir",), _add_import),
    (("export-rdb",), ("write a data directory's keys (every type) and functions as a "
                       "dump.rdb that redis-server loads",), _add_export_rdb),
    (("queue",), ("a durable work queue's figures: length, pending, lag, consumers, dead "
                  "letters",), _add_queue),
    (("url",), ("print the unix:// URL (redis-py, arq, pydocket, streaq, taskiq) of a shared "
                "data directory",), _add_url),
    (("commands",), ("print the command table as markdown",), _add_commands),
]


def chosen_command(argv: Sequence[str]) -> str | None:
    """The top-level command `argv` runs: its first word that is not an option (the
    top-level parser's options take no value), if it names one; else None."""
    names = {name for names, _helps, _adder in _COMMANDS for name in names}
    for word in argv:
        if not word.startswith("-"):
            return word if word in names else None
        if word == "--":
            return None
    return None


def build_parser(only: str | None = None, *, lazy: bool = False) -> argparse.ArgumentParser:
    """The whole command tree; with `lazy`, only the subparser of command `only` (None: of
    no command) is built, the others are their names and help lines (`streamkeep --help`
    lists the same), so only the module of the command that runs is imported."""
    parser = Parser(
        prog="streamkeep",
        description="Redis Streams-compatible storage engine.",
        epilog="exit status (every command; `streamkeep COMMAND --help` has its own): 0 ok, "
               "3 usage or I/O error, 130 interrupted (Ctrl-C; 143 SIGTERM, 129 SIGHUP).",
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    # (not dest="command": `aof dump --command` has that one)
    sub = parser.add_subparsers(dest="cli_command", metavar="COMMAND")
    sub.required = True
    for names, helps, adder in _COMMANDS:
        if not lazy or only in names:
            adder(sub)
        else:
            for name, help_text in zip(names, helps, strict=True):
                sub.add_parser(name, help=help_text)
    return parser


def command_name(args: argparse.Namespace | None) -> str:
    """``streamkeep aof verify``: the command as the user typed it, for one-line messages."""
    words = ["streamkeep"]
    name = getattr(args, "cli_command", None)
    if name:
        words.append(name)
        sub = getattr(args, f"{name}_command", None)
        if sub:
            words.append(sub)
    return " ".join(words)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    chosen = chosen_command(words)
    name = [f"streamkeep {chosen}" if chosen else "streamkeep"]  # (`aof verify` once parsed)
    # (the cleanup after a first signal is not cut short by a second)
    with signals_handled():
        try:
            return _run(words, chosen, name)
        except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP (tools.exits.Interrupted)
            return interrupted(name[0], signal_of(err))
        except Exception as err:
            signalled = interrupt_behind(err)  # (a signal wrapped by the code it landed in)
            if signalled is None:
                raise
            return interrupted(name[0], signalled.signum)
        finally:
            ignore_ending_signals()  # the command is over: its cleanup is all that is left
            _clean_up()


def _clean_up() -> None:
    """What the command's own way out missed (tools.temporaries: its tracked children and
    temporaries), if it made any: a command that made none never imported that module
    (`streamkeep --help` stays cheap)."""
    temporaries = sys.modules.get("streamkeep.tools.temporaries")
    if temporaries is not None:
        temporaries.cleanup()


def _run(words: list[str], chosen: str | None, name: list[str]) -> int:
    args: argparse.Namespace | None = None
    try:
        args = build_parser(chosen, lazy=True).parse_args(words)
        name[0] = command_name(args)
        code = int(args.func(args) or 0)
        _flush_stdout()  # (here, not in Python's flush at exit, where a closed pipe is noisy)
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours, whichever command wrote.
        _stdout_gone()
        return 0
    except SystemExit as done:
        if _closed_pipe_exit(done):
            return 0
        _flush_stdout()  # --help, --version: what they printed, before the exit
        raise
    except OSError as err:
        # An I/O error no command reported itself: one line, not a traceback.
        where = f"{err.filename}: " if err.filename else ""
        print(f"{command_name(args)}: {where}{err.strerror or err}", file=sys.stderr)
        return EXIT_USAGE


def _stdout_gone() -> None:
    """The reader of stdout went away: later writes, and Python's own flush at exit, go nowhere
    instead of failing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _flush_stdout() -> None:
    """What is still buffered for stdout written now; a reader gone meanwhile is not an error
    (`_stdout_gone`)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()
    except (OSError, ValueError):  # (stdout closed or broken otherwise: the status says it)
        pass


def _closed_pipe_exit(done: SystemExit) -> bool:
    """Whether `done` is rich's answer to a closed stdout pipe: its Console turns the
    BrokenPipeError of a print into SystemExit(1) (Console.on_broken_pipe, stdout already
    pointed at /dev/null), which would make `streamkeep aof stats | head` fail where every
    other command's closed pipe exits 0."""
    tb = done.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_name == "on_broken_pipe" \
        and tb.tb_frame.f_globals.get("__name__", "").startswith("rich.")


if __name__ == "__main__":
    raise SystemExit(main())
