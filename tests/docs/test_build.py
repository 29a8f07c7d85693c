"""`make docs` in a test: the manual builds with `mkdocs build --strict` (a broken link or
anchor, a page missing from the nav, a generator that fails: the build fails), and the built
reference pages hold every command, setting and subcommand."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.engine.exec.settings import PARAMS
from streamkeep.tools import docs
from streamkeep.tools.main import build_parser
from tests.support.doc_examples import DOCS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason="mkdocs is not installed (the dev extra has it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "--config-file", str(DOCS / "mkdocs.yml"), "--site-dir", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_manual_builds_strictly(site: Path) -> None:
    assert (site / "index.html").exists()
    assert (site / "architecture" / "index.html").exists()
    assert 'class="mermaid"' in (site / "architecture" / "index.html").read_text()


def test_the_built_reference_holds_every_command_setting_and_subcommand(site: Path) -> None:
    commands = (site / "reference" / "commands" / "index.html").read_text()
    for name in docs.command_names() + docs.internal_command_names():
        assert f"<code>{name}</code>" in commands, name
    config = (site / "reference" / "config" / "index.html").read_text()
    for name in PARAMS:
        assert f"<code>{name}</code>" in config, name
    cli = (site / "reference" / "cli" / "index.html").read_text()
    for words, _help, _parser in docs.cli_commands(build_parser()):
        assert f"usage: streamkeep {' '.join(words)}" in cli, words
    assert "<!-- generate:" not in commands + config + cli
