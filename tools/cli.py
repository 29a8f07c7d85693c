"""``streamkeep`` command-line entry point.

Subcommand implementations are imported lazily so that ``streamkeep --help``
stays fast and does not pull in the engine.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _cmd_demo(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import demo

    return demo.main()


def _cmd_bench(args: argparse.Namespace) -> int | None:
    from streamkeep.tools.bench import command

    return command.main(args)


def _cmd_serve(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import serve

    return serve.main(args)


def _cmd_commands(args: argparse.Namespace) -> int | None:
    from streamkeep.tools import docs

    return docs.main()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamkeep",
        description="Redis Streams-compatible storage engine.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p_demo = sub.add_parser("demo", help="run a short end-to-end demonstration")
    p_demo.set_defaults(func=_cmd_demo)

    from streamkeep.tools.bench import options as bench_options

    p_bench = bench_options.add_parser(sub)  # its options, examples and exit codes
    p_bench.set_defaults(func=_cmd_bench)

    from streamkeep.tools import serve

    p_serve = sub.add_parser(
        "serve", help="run the Redis-compatible network server",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=serve.EPILOG)
    serve.add_arguments(p_serve)
    p_serve.set_defaults(func=_cmd_serve)

    from streamkeep.tools.inspect.cli import add_commands

    add_commands(sub)  # aof verify|stats|dump|fix, restore, snapshot info|dump

    from streamkeep.tools.crashbench import cli as crashbench

    p_crash = sub.add_parser("crashbench", help=crashbench.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    crashbench.add_arguments(p_crash)
    p_crash.set_defaults(func=crashbench.main)

    from streamkeep.tools.export import cli as export

    p_export = sub.add_parser("export", help=export.HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_arguments(p_export)
    p_export.set_defaults(func=export.main)

    from streamkeep.tools import redisimport

    p_import = sub.add_parser("import", help=redisimport.HELP, description=redisimport.HELP,
                              epilog=redisimport.EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    redisimport.add_arguments(p_import)
    p_import.set_defaults(func=redisimport.main)

    from streamkeep.tools import rdbexport

    p_export_rdb = sub.add_parser("export-rdb", help=rdbexport.HELP, description=rdbexport.HELP,
                                  epilog=rdbexport.EPILOG,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    rdbexport.add_arguments(p_export_rdb)
    p_export_rdb.set_defaults(func=rdbexport.main)

    from streamkeep.tools import workqueue

    workqueue.add_commands(sub)  # queue stats

    p_commands = sub.add_parser("commands", help="print the command table as markdown")
    p_commands.set_defaults(func=_cmd_commands)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    rc = args.func(args)
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())
