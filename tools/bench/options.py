"""The ``streamkeep bench`` command line: its options, help, exit codes and the run
:class:`Settings` they come to. Cheap to import (``streamkeep --help`` builds it; the registry
loads only to check a section). Must not touch: the CLI's other commands, running.
"""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple

FULL_N = 200_000
QUICK_N = 5_000

EXIT_OK = 0  # the run finished; missed targets print FAIL but do not fail it
EXIT_TARGET_MISSED = 1  # with --strict, a row or a derived figure missed its target
EXIT_USAGE = 3  # an unknown option or section (tools.exits.Parser: every command's 3)

HELP = "run the benchmark suite"
DESCRIPTION = """\
Measure the engine, its AOF, snapshots and the network server, with a
redis-server the bench starts itself as the reference in the same run, and
print each row against its target."""

EPILOG = f"""\
examples:
  streamkeep bench --quick              smoke run of every section (seconds)
  streamkeep bench --repeat 3           full run, best of 3 per row (minutes)
  streamkeep bench server --quick       one section (as --sections server)
  streamkeep bench --sections embedded,aof --no-redis
  streamkeep bench --quick --json > bench.json      figures for machines
  streamkeep bench server aof --repeat 3 --html bench.html
                                        the same figures as charts: one page,
                                        opened offline in any browser
  streamkeep bench --strict             exit 1 when a target is missed (CI)
  streamkeep bench embedded aof --compare-pure --repeat 3
                                        compiled core vs pure Python, 3 rounds
  streamkeep bench nodes --base ../main --before ../old --repeat 3
                                        the nodes rows against two other
                                        checkouts (each with its .venv), in
                                        turn, 3 times
  streamkeep bench consume --before ../old
                                        the consume path against an older
                                        checkout
  streamkeep bench crashbench --before ../old
                                        the crash bench's points judged per
                                        second against an older checkout

output:
  stdout: the header, the resources used, then the results tables (plain
  text unless stdout is a terminal); with --json, one JSON document only.
  --html FILE: the same results as one self-contained HTML page of charts
  (per section: each row's rate, the spread of its runs, its target and its
  reference; the derived figures against their targets; with --compare-pure,
  the compiled/pure ratios); needs matplotlib (streamkeep[report]).
  stderr: progress (section: benchmark, i/N, repeat r/R, time elapsed), a
  live display on a terminal, else one line per benchmark; --quiet: none.

exit codes:
  {EXIT_OK}  the run finished; a missed target prints FAIL, but fails the run
     only with --strict
  {EXIT_TARGET_MISSED}  --strict, and a row or a derived figure missed its target; also
     an error inside the bench (a traceback on stderr)
  {EXIT_USAGE}  usage error: an unknown option or section; --html FILE exists without
     --force, is inside a data directory, or matplotlib is missing (refused
     before the run)
  130  interrupted (Ctrl-C)"""


def section_list(value: str) -> str:
    """``--sections`` / SECTION: checked against the bench registry now, selected later."""
    from streamkeep.tools.bench.registry import select_sections

    try:
        select_sections(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def checkout(value: str) -> str:
    """``--base`` / ``--before``: a checkout's directory, made absolute (its interpreter,
    DIR/.venv/bin/python, is checked by `missing_checkout` when the run starts)."""
    import os

    return os.path.abspath(value)


def missing_checkout(others: dict[str, str]) -> str | None:
    """The usage error for a --base / --before checkout without its interpreter, or None."""
    import os

    for label, path in others.items():
        python = os.path.join(path, ".venv", "bin", "python")
        if not os.access(python, os.X_OK):
            return (f"argument --{label}: {path}: no {python} (a checkout with its .venv built "
                    "and the project installed in it)")
    return None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from streamkeep.tools.exits import positive_int

    parser.add_argument("--quick", action="store_true",
                        help=f"small N ({QUICK_N:,}) and short AOF loops, for tests and smoke "
                             "runs")
    parser.add_argument("--n", type=positive_int, metavar="N",
                        help=f"messages per workload (default {FULL_N:,})")
    parser.add_argument("--repeat", type=positive_int, default=1, metavar="R",
                        help="run each row R times, report the best; the rows a ratio "
                             "compares run in turns (default 1)")
    parser.add_argument("--no-redis", action="store_true",
                        help="skip the redis-server reference rows")
    parser.add_argument("--sections", type=section_list, metavar="LIST",
                        help="comma-separated sections to run, of: embedded, aof, redis, "
                             "snapshot, server, strings, types, lists, cluster, hardening, "
                             "security, "
                             "replication, "
                             "inspect, export, queue, asyncio, shared, memory, eviction, backlog, "
                             "interop, "
                             "nodes, consume, crashbench (default: all)")
    parser.add_argument("only", nargs="*", type=section_list, metavar="SECTION",
                        help="sections to run, as --sections (e.g. `streamkeep bench server`)")
    parser.add_argument("--strict", action="store_true",
                        help=f"exit {EXIT_TARGET_MISSED} if a target is missed")
    parser.add_argument("--json", action="store_true",
                        help="print the results as one JSON document on stdout (no tables)")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress on stderr")
    parser.add_argument("--html", metavar="FILE",
                        help="also write the results as one self-contained HTML page of "
                             "charts (a new file, outside any data directory)")
    parser.add_argument("--force", action="store_true",
                        help="replace the --html FILE if it exists")
    parser.add_argument("--base", type=checkout, metavar="DIR",
                        help="the nodes section: compare with the checkout DIR (run under "
                             "DIR/.venv/bin/python), in turn at every repeat, a ratio each")
    parser.add_argument("--before", type=checkout, metavar="DIR",
                        help="the nodes, consume and crashbench sections: the older checkout "
                             "their snapshot load, cold reads, import, consume path and crash "
                             "bench are compared with, as --base")
    parser.add_argument("--compare-pure", action="store_true",
                        help="run the sections with the compiled core and again as pure Python "
                             "(STREAMKEEP_NO_EXTENSIONS=1), alternately, R rounds, and print "
                             "both rates and their ratio per row")


def _parser_kwargs() -> dict[str, Any]:
    return {"description": DESCRIPTION, "epilog": EPILOG,
            "formatter_class": argparse.RawDescriptionHelpFormatter}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``bench`` subcommand on the CLI's subparsers (``parser.add_subparsers()``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser("bench", help=HELP,
                                                            **_parser_kwargs())
    add_arguments(parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The bench's options alone, as ``streamkeep bench``."""
    from streamkeep.tools.exits import Parser

    parser = Parser(prog="streamkeep bench", **_parser_kwargs())
    add_arguments(parser)
    return parser


def section_names(opts: argparse.Namespace) -> list[str] | None:
    """``--sections LIST`` and the positional ``bench SECTION ...`` together; None: all."""
    names: list[str] = []
    for value in [getattr(opts, "sections", None), *(getattr(opts, "only", None) or [])]:
        if value:
            names.extend(w.strip() for w in value.split(",") if w.strip())
    return names or None


class Settings(NamedTuple):
    """What a run does, from its options (a NamedTuple: no dataclasses import for --help)."""

    n: int
    repeat: int
    short: bool  # --quick or a small N: short duration-bound and fsync loops too
    use_redis: bool
    sections: list[str] | None  # names; None: all
    strict: bool
    json: bool
    quiet: bool
    compare_pure: bool
    others: dict[str, str]  # --base / --before: label -> checkout
    html: str | None = None  # --html FILE
    force: bool = False


def settings(opts: argparse.Namespace) -> Settings:
    """The run's settings from parsed options (any namespace: missing ones take defaults)."""
    quick = getattr(opts, "quick", False)
    n = getattr(opts, "n", None) or (QUICK_N if quick else FULL_N)
    return Settings(
        n=n,
        repeat=max(1, getattr(opts, "repeat", 1) or 1),
        short=quick or n <= QUICK_N,
        use_redis=not getattr(opts, "no_redis", False),
        sections=section_names(opts),
        strict=getattr(opts, "strict", False),
        json=getattr(opts, "json", False),
        quiet=getattr(opts, "quiet", False),
        compare_pure=getattr(opts, "compare_pure", False),
        others={label: path for label in ("base", "before")
                if (path := getattr(opts, label, None))},
        html=getattr(opts, "html", None),
        force=getattr(opts, "force", False),
    )
