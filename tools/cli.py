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
    from streamkeep.tools import bench

    return bench.main(args)


def _bench_sections(value: str) -> str:
    """``--sections``: checked against the bench registry now, selected by the bench."""
    from streamkeep.tools import bench

    try:
        bench.select_sections(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


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

    p_bench = sub.add_parser("bench", help="run the benchmark suite")
    p_bench.add_argument("--quick", action="store_true",
                         help="small N and short AOF loops, for tests and smoke runs")
    p_bench.add_argument("--n", type=int, metavar="N", help="messages per workload")
    p_bench.add_argument("--repeat", type=int, default=1, metavar="R",
                         help="run each workload R times, report the best (default 1)")
    p_bench.add_argument("--no-redis", action="store_true",
                         help="skip the redis-server reference rows")
    p_bench.add_argument("--sections", type=_bench_sections, metavar="LIST",
                         help="comma-separated sections to run, of embedded,aof,redis,snapshot,"
                              "server (default: all)")
    p_bench.add_argument("only", nargs="*", type=_bench_sections, metavar="SECTION",
                         help="sections to run, as --sections (e.g. `streamkeep bench server`)")
    p_bench.add_argument("--strict", action="store_true",
                         help="exit 1 if a target is missed")
    p_bench.set_defaults(func=_cmd_bench)

    from streamkeep.tools import serve

    p_serve = sub.add_parser("serve", help="run the Redis-compatible network server")
    serve.add_arguments(p_serve)
    p_serve.set_defaults(func=_cmd_serve)

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
