"""Wiring of the inspection commands into the `streamkeep` parser.

Owns the subcommand tree (`aof verify|stats|dump|fix`, `restore`, `snapshot info|dump`) and
nothing else: each command's module adds its own arguments (`add_arguments(parser)`) and runs
it (`main(args) -> exit status`). Modules are imported when their command runs, so that
`streamkeep --help` stays cheap. Must not touch: file formats, output formatting.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

# (group, name, module, one-line help); group None: a top-level command.
COMMANDS: list[tuple[str | None, str, str, str]] = [
    ("aof", "verify", "verify", "check a data directory's or a segment's integrity"),
    ("aof", "stats", "stats", "count records and effects by type, key, db and time"),
    ("aof", "dump", "dump", "print records as text, JSON lines or RESP"),
    ("aof", "fix", "fix", "truncate a torn tail (after saving what it cuts)"),
    (None, "restore", "restore", "point-in-time recovery into a new data directory"),
    ("snapshot", "info", "snapshot",
     "a snapshot's meta, its keys of every type counted, its streams, groups and PELs"),
    ("snapshot", "dump", "snapshot",
     "a snapshot's entries by stream and ID range, then its keys of every type"),
]


def _runner(module: str, name: str) -> Any:
    def run(args: argparse.Namespace) -> int | None:
        mod = importlib.import_module(f"streamkeep.tools.inspect.{module}")
        main = getattr(mod, f"main_{name}", None) or mod.main
        return int(main(args))

    return run


def add_commands(sub: Any) -> None:
    """Add the inspection commands to the `streamkeep` subparsers `sub`."""
    groups: dict[str, Any] = {}
    for group, name, module, help_text in COMMANDS:
        if group is None:
            parent = sub
        else:
            if group not in groups:
                p_group = sub.add_parser(group, help=f"offline {group} inspection commands")
                groups[group] = p_group.add_subparsers(dest=f"{group}_command", metavar="COMMAND")
                groups[group].required = True
            parent = groups[group]
        mod = importlib.import_module(f"streamkeep.tools.inspect.{module}")
        parser = parent.add_parser(name, help=help_text,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
        adder = getattr(mod, f"add_arguments_{name}", None) or mod.add_arguments
        adder(parser)
        parser.set_defaults(func=_runner(module, name))
