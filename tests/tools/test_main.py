"""The `streamkeep` command tree (streamkeep.tools.main): only the command that runs is built
and imported, what every `--help` prints does not depend on it, and every `--help` fits 80
columns however wide the terminal (its examples and tables written to fit, not cut)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from streamkeep.tools.exits import HELP_WIDTH, RawWrappedHelpFormatter
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


def test_no_help_says_only_streams_and_strings_are_carried() -> None:
    """Every type is carried by import, export-rdb and the snapshot readers: no --help says
    "streams and strings" of what they carry, and theirs say every type."""
    stale = re.compile(r"streams? and strings?", re.I)
    helps = dict(_helps(build_parser()))
    assert not [words for words, text in helps.items() if stale.search(text)]
    for words, carried in ((("import",), "keys (of every type streamkeep stores)"),
                           (("export-rdb",), "keys (every type)")):
        assert carried in " ".join(helps[words].split()), words
    listed = " ".join(helps[()].split()) + " ".join(helps[("snapshot",)].split())
    for line in ("import the keys (of every type streamkeep stores) and functions",
                 "write a data directory's keys (every type) and functions",
                 "its keys of every type counted", "then its keys of every type"):
        assert line in listed, line


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


def _too_wide(width: int) -> list[str]:
    return [f"streamkeep {' '.join(words)} --help: {len(line)} columns: {line}"
            for words, text in _helps(build_parser()) for line in text.splitlines()
            if len(line) > width]


@pytest.mark.parametrize("columns", ["300", "120", "81", "80"])
def test_every_help_fits_80_columns(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert HELP_WIDTH == 80
    assert not _too_wide(80), "\n".join(_too_wide(80))


def test_no_example_or_table_row_is_cut_to_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prose paragraph may be filled again to fit; an indented line (an example, an exit
    status, a fault model) is written to fit 80 columns as it is."""
    def cut(self: RawWrappedHelpFormatter, line: str, width: int, indent: str) -> list[str]:
        raise AssertionError(f"{self._prog}: {line.strip()!r} is wider than the help")

    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(RawWrappedHelpFormatter, "_indented", cut)
    assert len(list(_helps(build_parser()))) >= 20


def test_a_narrow_terminal_gets_a_narrower_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    for words in (["aof", "fix"], ["restore"], ["export-rdb"], ["snapshot", "info"]):
        parser = build_parser()
        for word in words:
            parser = _subparsers(parser)[word]
        wide = [line for line in parser.format_help().splitlines() if len(line) > 60]
        assert not wide, (words, wide)


def test_the_help_a_child_process_prints_on_a_wide_terminal() -> None:
    for words in (["export", "--help"], ["aof", "dump", "--help"], ["queue", "stats", "-h"]):
        done = subprocess.run([sys.executable, "-m", "streamkeep", *words], capture_output=True,
                              text=True, env={**__import__("os").environ, "COLUMNS": "250"},
                              timeout=60, check=True)
        assert max(map(len, done.stdout.splitlines())) <= 80, words
        assert "examples:" in done.stdout or "usage:" in done.stdout


def test_a_signal_wrapped_by_the_code_it_landed_in_still_ends_the_command(monkeypatch, capsys):
    """SIGTERM while a module imports lands in a class being made, which wraps it in a
    RuntimeError: the command still ends as interrupted, one line and 143, no traceback."""
    import signal

    from streamkeep.tools import main as cli
    from streamkeep.tools.exits import Interrupted

    def run(words, chosen, name):
        try:
            raise Interrupted(signal.SIGTERM)
        except Interrupted as signalled:
            raise RuntimeError("Error calling __set_name__") from signalled

    monkeypatch.setattr(cli, "_run", run)
    assert cli.main(["demo"]) == 143
    assert capsys.readouterr().err == "streamkeep demo: interrupted (SIGTERM)\n"
    monkeypatch.setattr(cli, "_run", lambda *a: (_ for _ in ()).throw(RuntimeError("x")))
    with pytest.raises(RuntimeError):
        cli.main(["demo"])
