"""The `streamkeep` command tree (streamkeep.tools.main): only the command that runs is built
and imported, and what every `--help` prints does not depend on it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

from streamkeep.tools.main import build_parser, chosen_command


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _helps(parser: argparse.ArgumentParser,
           words: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every (sub)command's words and its --help text, depth first."""
    yield words, parser.format_help()
    for name, child in _subparsers(parser).items():
        yield from _helps(child, (*words, name))


def test_every_help_is_the_same_when_built_lazily() -> None:
    full = dict(_helps(build_parser()))
    names = list(_subparsers(build_parser()))
    assert names[:3] == ["demo", "bench", "serve"] and "import" in names
    for name in names:
        lazy = build_parser(name, lazy=True)
        assert lazy.format_help() == full[()]
        built = dict(_helps(_subparsers(lazy)[name], (name,)))
        assert built == {words: text for words, text in full.items() if words[:1] == (name,)}
    assert build_parser(None, lazy=True).format_help() == full[()]


def test_chosen_command() -> None:
    assert chosen_command(["import", "dump.rdb", "--out", "x"]) == "import"
    assert chosen_command(["--version"]) is None
    assert chosen_command(["-h", "aof", "verify"]) == "aof"
    assert chosen_command(["imprt"]) is None  # argparse says it is not a command
    assert chosen_command([]) is None


def _modules_after(argv: list[str]) -> list[str]:
    """The streamkeep modules a fresh interpreter holds after `streamkeep ARGV` parsed it."""
    code = ("import sys\nfrom streamkeep.tools.main import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    assert e.code == 0, e\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('streamkeep'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return out.strip().splitlines()[-1].split()


def test_a_command_imports_only_its_own_module() -> None:
    loaded = _modules_after(["import", "--help"])
    assert "streamkeep.tools.redisimport" in loaded
    for other in ("streamkeep.tools.export", "streamkeep.tools.serve",
                  "streamkeep.tools.crashbench", "streamkeep.tools.inspect",
                  "streamkeep.tools.bench", "streamkeep.tools.rdbexport",
                  "streamkeep.tools.workqueue", "streamkeep.snapshot", "streamkeep.aof",
                  "streamkeep.engine.runtime", "streamkeep.engine.commands"):
        assert not [m for m in loaded if m == other or m.startswith(other + ".")], other
    # the CLI's own modules, the import command's, and the error base it names
    assert len(loaded) <= 10, loaded
    top = _modules_after(["--help"])
    assert not [m for m in top if m.startswith("streamkeep.tools.")
                and m not in ("streamkeep.tools.main", "streamkeep.tools.exits")], top
